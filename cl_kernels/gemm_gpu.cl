/* GEMM, GPU family: C = act(alpha * op(A) * op(B) + beta * C + bias) for
 * GPUs, where many work-items share __local tiles. Two kernels, for
 * operands of the dtype DT, both storing through one epilogue (store_c):
 *
 *   gemm_gpu     the tiled kernel: a work-group of NDIMC x MDIMC work-items
 *                computes an MWG x NWG tile of C, walking k KWG steps per
 *                stage.
 *   gemm_direct  the direct kernel, for small and odd shapes (below the
 *                host's switch point): no __local memory and no barriers,
 *                DWG x DWG work-items of DWI x DWI outputs each, reading A
 *                and B straight from global memory.
 *
 * How the tiled kernel reaches the hardware (the scheme of the fastest
 * portable OpenCL GEMMs: CLBlast's xgemm and Nugteren's SGEMM tutorial,
 * written here from their description):
 *   - Register blocking: each work-item keeps MWI x NWI accumulators
 *     (MWI = MWG / MDIMC, NWI = NWG / NDIMC), so every value read from
 *     __local memory feeds MWI or NWI FMAs instead of one.
 *   - __local staging (SA, SB): the MWG x KWG stage of op(A) and the
 *     KWG x NWG stage of op(B) are loaded once per work-group, cooperatively
 *     and coalesced, then read by every work-item. SA = 0 or SB = 0 reads
 *     that operand straight from global memory in the inner loop instead,
 *     which wins on devices whose caches beat their __local memory.
 *   - Vector global loads (VWM for A, VWN for B: 1, 2, 4, 8): a staged load
 *     moves VW consecutive elements along the operand's unit-stride
 *     dimension at once, as one aligned vector when the host says that the
 *     operand's offset, leading dimension and batch stride are multiples of
 *     VW (a_vec, b_vec), element by element otherwise and at the edges.
 *   - Padding (PADA, PADB): extra floats per __local row, so that columns
 *     read by one warp fall in different banks.
 *   - Double buffering (DB): two __local stages; the next stage is loaded
 *     while the current one is multiplied, one barrier per stage instead of
 *     two, hiding global latency behind arithmetic.
 *   - k-unrolling (KWI): the inner loop over a stage's KWG steps is unrolled
 *     KWI times.
 *   - Output stride layout (STRM, STRN): 1, a work-item's rows (columns) are
 *     MDIMC (NDIMC) apart, so neighbouring work-items touch neighbouring
 *     addresses in __local reads and in C; 0, they are contiguous, which
 *     some devices prefer for register reuse.
 * Elements outside the matrices load as zero and outputs outside C are not
 * written, so every m, n, k, offset and leading dimension works with every
 * combination of knobs that the host's validation accepts.
 *
 * Strides: element (r, c) of op(A) is at a[a_off + r * a_rs + c * a_cs]
 * (likewise B), covering both layouts and transposes (ops_gemm.c reduces a
 * column-major C to a row-major one by swapping the operands). One of an
 * operand's two strides is always 1 (op_strides in ops_gemm.c): staged
 * loads run along that one, so consecutive work-items read consecutive
 * addresses.
 *
 * The knobs are build macros, set by runtime/ops/ops_gemm_gpu.c from the
 * profile or a tuning file; the space and its constraints are described
 * there. The defaults below are the profile's historic 8 x 8 x 2 x 2.
 * -DDT=n chooses the storage type of A and B (0 f32, 1 f16, 2 bf16; C and
 * the bias are f32): one program per dtype, as reduce.cl.
 */
#ifndef DT
#define DT 0
#endif
#if DT > 2
#error "GEMM operands are f32, f16 or bf16 (DT 0, 1, 2)"
#endif
#include "common.clh"
#include "gemm_store.clh"

#ifndef MWG
#define MWG 16
#endif
#ifndef NWG
#define NWG 16
#endif
#ifndef KWG
#define KWG 8
#endif
#ifndef MDIMC
#define MDIMC 8
#endif
#ifndef NDIMC
#define NDIMC 8
#endif
#ifndef VWM
#define VWM 1
#endif
#ifndef VWN
#define VWN 1
#endif
#ifndef SA
#define SA 1
#endif
#ifndef SB
#define SB 1
#endif
#ifndef PADA
#define PADA 1
#endif
#ifndef PADB
#define PADB 1
#endif
#ifndef DB
#define DB 0
#endif
#ifndef KWI
#define KWI 1
#endif
#ifndef STRM
#define STRM 1
#endif
#ifndef STRN
#define STRN 1
#endif
#ifndef DWG
#define DWG 8
#endif
#ifndef DWI
#define DWI 2
#endif

#define WGS (MDIMC * NDIMC)
#define MWI (MWG / MDIMC)
#define NWI (NWG / NDIMC)
#define STAGES (DB ? 2 : 1)

#if MWG % MDIMC != 0 || NWG % NDIMC != 0 || KWG % KWI != 0
#error "MWG, NWG and KWG must be multiples of MDIMC, NDIMC and KWI"
#endif
#if SA && ((MWG * KWG) % (VWM * WGS) != 0 || MWG % VWM != 0 || KWG % VWM != 0)
#error "a staged A needs MWG and KWG multiples of VWM and MWG*KWG/VWM of WGS"
#endif
#if SB && ((NWG * KWG) % (VWN * WGS) != 0 || NWG % VWN != 0 || KWG % VWN != 0)
#error "a staged B needs NWG and KWG multiples of VWN and NWG*KWG/VWN of WGS"
#endif

/* Row (column) of the tile that a work-item's output r (q) lands on. */
#if STRM
#define OUT_ROW(ty, r) ((ty) + (r)*MDIMC)
#else
#define OUT_ROW(ty, r) ((ty)*MWI + (r))
#endif
#if STRN
#define OUT_COL(tx, q) ((tx) + (q)*NDIMC)
#else
#define OUT_COL(tx, q) ((tx)*NWI + (q))
#endif

/* Element loads of A and B (type T, common.clh) as floats. LOADF(p, i):
 * element i of p. VECF(W, p, i, dst): the W consecutive elements from i into
 * float dst[], as one vector load (the caller checks alignment and bounds):
 * f32 and bf16 through an aligned vector pointer, f16 through vload_halfW
 * (which needs only 2-byte alignment). */
#define GEMM_CAT_(a, b) a##b
#define GEMM_CAT(a, b) GEMM_CAT_(a, b)
#if DT == 0
#define LOADF(p, i) ((p)[i])
#define VECF(W, p, i, dst)                                                     \
  {                                                                            \
    const GEMM_CAT(float, W) vv_ =                                              \
        *(__global const GEMM_CAT(float, W) *)((p) + (i));                     \
    GEMM_CAT(vstore, W)(vv_, 0, dst);                                           \
  }
#elif DT == 1
#define LOADF(p, i) vload_half(i, p)
#define VECF(W, p, i, dst)                                                     \
  GEMM_CAT(vstore, W)(GEMM_CAT(vload_half, W)(0, (p) + (i)), 0, dst);
#else
#define LOADF(p, i) kiln_bf16_to_f32((p)[i])
#define VECF(W, p, i, dst)                                                     \
  {                                                                            \
    const GEMM_CAT(ushort, W) h_ =                                             \
        *(__global const GEMM_CAT(ushort, W) *)((p) + (i));                    \
    GEMM_CAT(vstore, W)                                                        \
    (GEMM_CAT(as_float, W)(GEMM_CAT(convert_uint, W)(h_) << 16), 0, dst);      \
  }
#endif

/* The aligned vector load of each operand; empty for a width of 1, where
 * the element path is the only one (there is no float1). */
#if VWM > 1
#define VECA(p, i, dst) VECF(VWM, p, i, dst)
#else
#define VECA(p, i, dst)
#endif
#if VWN > 1
#define VECB(p, i, dst) VECF(VWN, p, i, dst)
#else
#define VECB(p, i, dst)
#endif

/* Element (r, p) of an operand read from global memory, 0 outside. */
float direct(__global const T *x, ulong rs, ulong ps, uint r, uint p, uint rn,
             uint pn) {
  return r < rn && p < pn ? LOADF(x, (ulong)r * rs + (ulong)p * ps) : 0.0f;
}

/* Stage one operand tile of TR rows (the M or N direction) x KWG steps
 * into tile[kk][row] (row length TR + PAD). e runs over the tile's TR*KWG/VW
 * vectors; rows_fast: the operand's unit stride runs along the rows (else
 * along k). x points at the operand's batch entry; (x_rs, x_cs) its strides
 * in (row, k) order; r0/p0 the tile's first row and step; rn/kn the
 * matrix's extents. A macro: the two operands' tiles differ in width. */
#define STAGE(TILE, TR, VW, VECX, x, x_rs, x_cs, rows_fast, vec, r0, p0, rn,  \
              kn, lid)                                                         \
  for (uint l_ = 0; l_ < (TR * KWG) / (VW * WGS); l_++) {                      \
    const uint e_ = (lid) + l_ * WGS;                                          \
    uint ar_, ak_;                                                             \
    if (rows_fast) {                                                           \
      ar_ = (e_ % (TR / VW)) * VW;                                             \
      ak_ = e_ / (TR / VW);                                                    \
    } else {                                                                   \
      ak_ = (e_ % (KWG / VW)) * VW;                                            \
      ar_ = e_ / (KWG / VW);                                                   \
    }                                                                          \
    const uint gr_ = (r0) + ar_, gp_ = (p0) + ak_;                             \
    const ulong at_ = (ulong)gr_ * (x_rs) + (ulong)gp_ * (x_cs);               \
    float v_[VW];                                                              \
    const uint run_ = rows_fast ? (gr_ < (rn) ? (rn)-gr_ : 0)                  \
                                : (gp_ < (kn) ? (kn)-gp_ : 0);                 \
    const bool other_ = rows_fast ? gp_ < (kn) : gr_ < (rn);                   \
    if (VW > 1 && (vec) && other_ && run_ >= VW) {                             \
      VECX(x, at_, v_)                                                         \
    } else {                                                                   \
      for (uint t_ = 0; t_ < VW; t_++)                                         \
        v_[t_] = other_ && t_ < run_ ? LOADF(x, at_ + t_) : 0.0f;              \
    }                                                                          \
    for (uint t_ = 0; t_ < VW; t_++) {                                         \
      if (rows_fast)                                                           \
        TILE[ak_][ar_ + t_] = v_[t_];                                          \
      else                                                                     \
        TILE[ak_ + t_][ar_] = v_[t_];                                          \
    }                                                                          \
  }

/* The __local stages ([stage][kk][row]), how a stage is loaded, and the
 * value of op(A) or op(B) at step kk of the current stage: from the tile,
 * or from global memory for an operand that is not staged. */
#if SA
#define STAGE_DECL_A __local float a_tiles[STAGES][KWG][MWG + PADA];
#ifdef GEMM_STAGE_A
/* An operand A read through an index map (conv_gemm_data.cl: the
 * weights of the convolution's input gradient), TILE[kk][row]. */
#define LOAD_A(st, p0) GEMM_STAGE_A(a_tiles[st], p0)
#else
#define LOAD_A(st, p0)                                                         \
  STAGE(a_tiles[st], MWG, VWM, VECA, a, a_rs, a_cs, a_rows_fast, a_vec, i0,   \
        p0, m, k, lid)
#endif
#define USE_A(st) __local float(*at)[MWG + PADA] = a_tiles[st];
#define A_VAL(kk, r) at[kk][OUT_ROW(ty, r)]
#else
#define STAGE_DECL_A
#define LOAD_A(st, p0)
#define USE_A(st)
#define A_VAL(kk, r) direct(a, a_rs, a_cs, i0 + OUT_ROW(ty, r), p0 + (kk), m, k)
#endif
#if SB
#define STAGE_DECL_B __local float b_tiles[STAGES][KWG][NWG + PADB];
#ifdef GEMM_STAGE_B
/* An operand B read through an index map instead of strides (the implicit
 * convolution, conv_gemm.cl, defines it: TILE[kk][col] for the stage's
 * KWG x NWG elements from step p0 and column j0). */
#define LOAD_B(st, p0) GEMM_STAGE_B(b_tiles[st], p0)
#else
#define LOAD_B(st, p0)                                                         \
  STAGE(b_tiles[st], NWG, VWN, VECB, b, b_cs, b_rs, b_cols_fast, b_vec, j0,   \
        p0, n, k, lid)
#endif
#define USE_B(st) __local float(*bt)[NWG + PADB] = b_tiles[st];
#define B_VAL(kk, q) bt[kk][OUT_COL(tx, q)]
#else
#define STAGE_DECL_B
#define LOAD_B(st, p0)
#define USE_B(st)
#define B_VAL(kk, q) direct(b, b_cs, b_rs, j0 + OUT_COL(tx, q), p0 + (kk), n, k)
#endif
#define LOAD_STAGE(st, p0) LOAD_A(st, p0) LOAD_B(st, p0)
#define USE_STAGE(st) USE_A(st) USE_B(st)

/* The tiled kernel's name, arguments, the move of a, b and c (and the
 * bias's offset) to entry bt_ of the batch, and what it does before its
 * first stage (at the kernel's outermost scope: it may declare __local
 * arrays): a program that includes this file may replace all four
 * (conv_gemm.cl: the convolution's images and groups, and its table of
 * the tile's output positions). */
#ifndef GEMM_TILED
#define GEMM_TILED gemm_gpu
#define GEMM_TILED_ARGS GEMM_ARGS
#define GEMM_BATCH(bt_)                                                        \
  a += a_off + (bt_)*a_batch;                                                  \
  b += b_off + (bt_)*b_batch;                                                  \
  c += c_off + (bt_)*c_batch;
#define GEMM_PROLOGUE
#endif

__kernel __attribute__((reqd_work_group_size(NDIMC, MDIMC, 1))) void
GEMM_TILED(GEMM_TILED_ARGS) {
  STAGE_DECL_A
  STAGE_DECL_B
  const uint tx = get_local_id(0), ty = get_local_id(1);
  const uint lid = ty * NDIMC + tx;
  const uint i0 = get_group_id(1) * MWG, j0 = get_group_id(0) * NWG;
  const ulong bt_ = get_global_id(2);
  GEMM_BATCH(bt_)
  GEMM_PROLOGUE
  /* A's rows run along consecutive addresses when its row stride is 1 and
   * its k stride is not; B's columns likewise. */
  const bool a_rows_fast = a_rs == 1 && a_cs != 1;
  const bool b_cols_fast = b_cs == 1 && b_rs != 1;
  float acc[MWI][NWI];
  for (uint r = 0; r < MWI; r++)
    for (uint q = 0; q < NWI; q++)
      acc[r][q] = 0.0f;
  const uint stages = (k + KWG - 1) / KWG;
  LOAD_STAGE(0, 0)
  if (SA || SB)
    barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = 0; s < stages; s++) {
    const uint p0 = s * KWG;
    if (DB && s + 1 < stages) {
      /* The other buffer was last read before the previous barrier. */
      LOAD_STAGE((s + 1) % 2, p0 + KWG)
    }
    {
      USE_STAGE(DB ? s % 2 : 0)
      /* For each of the stage's KWG steps, MWI values of op(A) and NWI of
       * op(B) into the MWI x NWI accumulators. */
      for (uint k0 = 0; k0 < KWG; k0 += KWI) {
#pragma unroll
        for (uint u = 0; u < KWI; u++) {
          float av[MWI], bv[NWI];
#pragma unroll
          for (uint r = 0; r < MWI; r++)
            av[r] = A_VAL(k0 + u, r);
#pragma unroll
          for (uint q = 0; q < NWI; q++)
            bv[q] = B_VAL(k0 + u, q);
#pragma unroll
          for (uint r = 0; r < MWI; r++)
#pragma unroll
            for (uint q = 0; q < NWI; q++)
              acc[r][q] = fma(av[r], bv[q], acc[r][q]);
        }
      }
    }
    if (!DB && s + 1 < stages) {
      if (SA || SB)
        barrier(CLK_LOCAL_MEM_FENCE);
      LOAD_STAGE(0, p0 + KWG)
    }
    if (SA || SB)
      barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (uint r = 0; r < MWI; r++)
    for (uint q = 0; q < NWI; q++)
      store_c(c, ldc, m, n, i0 + OUT_ROW(ty, r), j0 + OUT_COL(tx, q),
              acc[r][q], EPILOGUE_ARGS);
}

#ifndef GEMM_TILED_ONLY
/* The direct kernel: DWI x DWI outputs per work-item, rows and columns DWG
 * apart, A and B read straight from global memory. */
__kernel __attribute__((reqd_work_group_size(DWG, DWG, 1))) void
gemm_direct(GEMM_ARGS) {
  const uint tx = get_local_id(0), ty = get_local_id(1);
  const uint i0 = get_group_id(1) * (DWG * DWI);
  const uint j0 = get_group_id(0) * (DWG * DWI);
  const ulong bt_ = get_global_id(2);
  a += a_off + bt_ * a_batch;
  b += b_off + bt_ * b_batch;
  c += c_off + bt_ * c_batch;
  float acc[DWI][DWI];
  for (uint r = 0; r < DWI; r++)
    for (uint q = 0; q < DWI; q++)
      acc[r][q] = 0.0f;
  for (uint p = 0; p < k; p++) {
    float av[DWI], bv[DWI];
    for (uint r = 0; r < DWI; r++)
      av[r] = direct(a, a_rs, a_cs, i0 + ty + r * DWG, p, m, k);
    for (uint q = 0; q < DWI; q++)
      bv[q] = direct(b, b_cs, b_rs, j0 + tx + q * DWG, p, n, k);
    for (uint r = 0; r < DWI; r++)
      for (uint q = 0; q < DWI; q++)
        acc[r][q] = fma(av[r], bv[q], acc[r][q]);
  }
  for (uint r = 0; r < DWI; r++)
    for (uint q = 0; q < DWI; q++)
      store_c(c, ldc, m, n, i0 + ty + r * DWG, j0 + tx + q * DWG, acc[r][q],
              EPILOGUE_ARGS);
}

#include "gemm_scale.clh"
#endif
