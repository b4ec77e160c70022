/* GEMM on NVIDIA's matrix units (tensor cores), GPU family: C = act(alpha *
 * op(A) * op(B) + beta * C + bias) for f16 or bf16 A and B (-DDT=1 or 2),
 * f32 accumulation and an f32 C, storing through the family's epilogue
 * (gemm_store.clh). The kernel argument list is gemm_gpu.cl's (GEMM_ARGS).
 *
 * The matrix instructions are inline PTX, which NVIDIA's OpenCL compiler
 * takes through asm() (as Leela Zero's half-precision GEMM does):
 *   ldmatrix.sync.aligned.m8n8.x4.shared.b16   four 8x8 tiles of 16-bit
 *       elements from __local memory into the fragments of a warp's 32
 *       lanes (lanes 8j..8j+7 give the row addresses of tile j; lane l
 *       gets, of every tile j, row l/4, columns 2(l%4) and 2(l%4)+1 in one
 *       32-bit register);
 *   mma.sync.aligned.m16n8k16.row.col.f32.T.T.f32   D = A B + C for a
 *       16x16 A, a 16x8 B and 16x8 f32 C and D, in the fragment layout of
 *       the PTX ISA (g = lane / 4, t = lane % 4): A's four registers hold
 *       (g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..); B's two
 *       (k 2t..2t+1, n g), (k 2t+8.., n g); C's four (g, 2t), (g, 2t+1),
 *       (g+8, 2t), (g+8, 2t+1).
 * Both __local tiles are stored with k contiguous (A as [row][k], B as
 * [column][k]), so both operands' fragments come from plain (not .trans)
 * ldmatrix: the staging loop transposes where an operand's unit stride
 * runs along m or n, whatever its layout and transpose.
 *
 * Blocking: a work-group of WARPS = (BM / WM) x (BN / WN) warps computes a
 * BM x BN tile of C; local size (32, WARPS), so that dimension 0 is the
 * lane within a warp (NVIDIA forms warps from consecutive work-items).
 * Each warp computes a WM x WN tile: (WM / 16) x (WN / 8) mma fragments,
 * walking k BK at a time through STAGES __local stages (2: double
 * buffered, the next stage loaded while the current one is multiplied, one
 * barrier per stage). Every row of a __local tile has BK + 8 elements: rows
 * stay 16-byte aligned (ldmatrix's rule) and the 8 rows one ldmatrix tile
 * reads fall in different banks.
 *
 * Edges: elements of op(A) and op(B) outside the matrices are staged as 0
 * (whose products add nothing), and outputs outside C are not stored, so
 * every m, n, k, offset and stride runs.
 *
 * KILN_MMA_EMULATE (tests only: runtime/tune/space_mma.c says how it is
 * kept from users) replaces the two instructions with plain OpenCL C that
 * gives every lane the same registers, exchanging them through __local
 * memory: the kernel's own index arithmetic, staging and epilogue then run
 * on PoCL and Oclgrind. KILN_MMA_PROBE builds only gemm_mma_probe, the
 * compile probe: one of each instruction, as the kernel writes them. */
#ifndef DT
#define DT 2
#endif
#if DT != 1 && DT != 2
#error "the matrix-unit GEMM takes f16 or bf16 operands (DT 1 or 2)"
#endif
#include "common.clh"
#include "gemm_store.clh"

#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 32
#endif
#ifndef WM
#define WM 32
#endif
#ifndef WN
#define WN 32
#endif
#ifndef STAGES
#define STAGES 2
#endif

#if BM % WM != 0 || BN % WN != 0 || WM % 16 != 0 || WN % 16 != 0 ||            \
    BK % 16 != 0 || STAGES < 1 || STAGES > 2
#error "BM, BN multiples of WM, WN; WM, WN, BK multiples of 16; STAGES 1, 2"
#endif

/* The vendor: KILN_AMD_GPU, which the build options of backends/amd.c's
 * profile define, selects AMD's forms: WMMA on RDNA3 (MMA_AMD 2: gfx11, or
 * the emulation with KILN_MMA_EMULATE 2), else MFMA (MMA_AMD 1); without
 * it, NVIDIA's mma.sync. Where the profile is AMD's, a compiler for an AMD
 * GPU without these forms, or for anything else (a forced profile), stops
 * at an #error, never at a builtin its backend cannot select (clang aborts
 * on those): the compile probe then fails with this reason. */
#ifdef KILN_AMD_GPU
#if KILN_MMA_EMULATE == 2 || defined(__gfx1100__) || defined(__gfx1101__) || \
    defined(__gfx1102__) || defined(__gfx1103__) || defined(__gfx1150__) ||    \
    defined(__gfx1151__)
#define MMA_AMD 2
#else
#define MMA_AMD 1
#if !defined(KILN_MMA_EMULATE) && !defined(__gfx90a__) &&                     \
    !defined(__gfx940__) && !defined(__gfx941__) && !defined(__gfx942__) &&   \
    !defined(__gfx950__)
#error "AMD's matrix units: MFMA bf16_1k (CDNA2, CDNA3) or WMMA (RDNA3)"
#endif
#endif
#else
#define MMA_AMD 0
#endif

/* Lanes per warp (an AMD wavefront: 64 for MFMA, 32 for WMMA's wave32),
 * columns per fragment and f32 accumulators a lane holds per fragment:
 * mma.sync m16n8k16 gives 16 x 8 of C, 4 a lane; MFMA 16x16x16 16 x 16, 4
 * a lane; WMMA 16x16x16 16 x 16, 8 a lane. */
#if MMA_AMD == 1
#define WAVE 64
#define FRAG_N 16
#define ACC_N 4
#elif MMA_AMD == 2
#define WAVE 32
#define FRAG_N 16
#define ACC_N 8
#else
#define WAVE 32
#define FRAG_N 8
#define ACC_N 4
#endif
#define WARPS_M (BM / WM)
#define WARPS ((BM / WM) * (BN / WN))
#define WGS (WAVE * WARPS)
#define MI (WM / 16)     /* fragments along a warp's rows */
#define NI (WN / FRAG_N) /* and columns */
#define LDS (BK + 8) /* elements per __local row */

/* ldmatrix reads rows of 16 bytes at 16-byte aligned addresses: the tiles
 * start so aligned (a ushort array alone is aligned to 2), and their rows
 * (LDS elements) and the column offsets (multiples of 8) keep it. */
#define MMA_ALIGN __attribute__((aligned(16)))

#if DT == 1
#define MMA_TYPES "f16.f16"
#else
#define MMA_TYPES "bf16.bf16"
#endif

/* ---- the two instructions ------------------------------------------------ */

#ifdef KILN_MMA_EMULATE
/* The emulation's helpers: one 16-bit element as f32. */
#if DT == 1
#define MMA_ELEM(bits) kiln_f16_to_f32((ushort)(bits))
#else
#define MMA_ELEM(bits) kiln_bf16_to_f32((ushort)(bits))
#endif
/* Half h of register r of lane l of the warp's exchanged registers x. */
#define MMA_HALF(x, l, r, h) MMA_ELEM((x)[l][r] >> (16 * (h)))
/* The product, once every lane of the warp has published its registers in
 * mma_x_[warp][lane]: for each of the lane's NQ outputs q_, at (row_, col_)
 * = (ROW, COL) of the fragment, acc[q_] += the sum over kk_ < 16 of A (row_,
 * kk_) B (kk_, col_), which are half kk_ % 2 of register A_REG of lane
 * A_LANE and of B_REG of B_LANE (expressions of row_, col_ and kk_), in f32
 * with one rounding per product-sum (the hardware's order of summation is
 * its own: the tests' tolerance allows for any). Barriers bracket it: the
 * work-group's warps run it together, in uniform control flow. */
#define MMA_EMU_PRODUCT(acc, NQ, ROW, COL, A_LANE, A_REG, B_LANE, B_REG)       \
  barrier(CLK_LOCAL_MEM_FENCE);                                                \
  for (uint q_ = 0; q_ < (NQ); q_++) {                                         \
    const uint row_ = (ROW), col_ = (COL);                                     \
    float s_ = (acc)[q_];                                                      \
    for (uint kk_ = 0; kk_ < 16; kk_++)                                        \
      s_ = fma(MMA_HALF(mma_x_[warp], A_LANE, A_REG, kk_ % 2),                 \
               MMA_HALF(mma_x_[warp], B_LANE, B_REG, kk_ % 2), s_);            \
    (acc)[q_] = s_;                                                            \
  }                                                                            \
  barrier(CLK_LOCAL_MEM_FENCE);
#endif

#if MMA_AMD == 1
/* MFMA_16X16X16(acc, a, b): acc (4 floats) += A B for the wave's 16 x 16
 * fragments, in the register layout of AMD's matrix instruction calculator
 * (v_mfma_f32_16x16x16f16 and _bf16_1k, wave64): lane l holds A's row
 * l % 16, k 4 (l / 16) to 4 (l / 16) + 3, in a's two registers (k even in
 * the low halves), B's column l % 16 for the same k in b's, and C's column
 * l % 16, rows 4 (l / 16) to 4 (l / 16) + 3, in acc[0..3]. */
#ifdef KILN_MMA_EMULATE
/* Every lane publishes a and b; each computes its four outputs from the
 * whole wave's (MMA_EMU_PRODUCT). */
#define MMA_SCRATCH __local uint mma_x_[WARPS][64][4];
#define MFMA_16X16X16(acc, a, b)                                               \
  {                                                                            \
    mma_x_[warp][lane][0] = (a).s0;                                            \
    mma_x_[warp][lane][1] = (a).s1;                                            \
    mma_x_[warp][lane][2] = (b).s0;                                            \
    mma_x_[warp][lane][3] = (b).s1;                                            \
    MMA_EMU_PRODUCT(acc, 4, 4 * (lane / 16) + q_, lane % 16,                   \
                    row_ + 16 * (kk_ / 4), (kk_ % 4) / 2,                      \
                    col_ + 16 * (kk_ / 4), 2 + (kk_ % 4) / 2)                  \
  }
#else
#define MMA_SCRATCH
#if DT == 1
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#define MFMA_OP(a, b, c)                                                       \
  __builtin_amdgcn_mfma_f32_16x16x16f16(as_half4(a), as_half4(b), c, 0, 0, 0)
#else
#define MFMA_OP(a, b, c)                                                       \
  __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(as_short4(a), as_short4(b), c, 0, \
                                            0, 0)
#endif
#define MFMA_16X16X16(acc, a, b)                                               \
  {                                                                            \
    float4 c_ = (float4)((acc)[0], (acc)[1], (acc)[2], (acc)[3]);             \
    c_ = MFMA_OP(a, b, c_);                                                    \
    (acc)[0] = c_.s0;                                                          \
    (acc)[1] = c_.s1;                                                          \
    (acc)[2] = c_.s2;                                                          \
    (acc)[3] = c_.s3;                                                          \
  }
#endif

#elif MMA_AMD == 2
/* WMMA_16X16X16(acc, a, b): acc (8 floats) += A B for the wave's 16 x 16
 * fragments, in RDNA3's wave32 layout (AMD's RDNA3 ISA guide, "WMMA"; the
 * GPUOpen article on WMMA): lane l holds A's row l % 16, k 0 to 15, in a's
 * eight registers (k even in the low halves), lanes 16-31 a copy of lanes
 * 0-15; B's column l % 16 likewise in b's; and C's column l % 16, row
 * 2 v + l / 16 in acc[v]. */
/* Lane l's fragment from its row at p: eight registers, k 0-15 (vload8:
 * clang reads it as two 16-byte ds_load_b128; two uint4 loads joined into
 * a uint8 crash Oclgrind's uninitialised-value checks). */
#define WMMA_FRAG(p) vload8(0, (__local const uint *)(p))
#ifdef KILN_MMA_EMULATE
/* Every lane publishes a and b; each computes its eight outputs from the
 * whole wave's (MMA_EMU_PRODUCT), k 8-15 from the copies in lanes 16-31,
 * so that both halves of the wave must hold their rows. */
#define MMA_SCRATCH __local uint mma_x_[WARPS][32][16];
/* Registers r0 to r0 + 7 of the lane's exchange area: x's components. */
#define WMMA_PUBLISH(r0, x)                                                    \
  {                                                                            \
    __local uint *x_ = mma_x_[warp][lane] + (r0);                              \
    x_[0] = (x).s0;                                                            \
    x_[1] = (x).s1;                                                            \
    x_[2] = (x).s2;                                                            \
    x_[3] = (x).s3;                                                            \
    x_[4] = (x).s4;                                                            \
    x_[5] = (x).s5;                                                            \
    x_[6] = (x).s6;                                                            \
    x_[7] = (x).s7;                                                            \
  }
#define WMMA_16X16X16(acc, a, b)                                               \
  {                                                                            \
    WMMA_PUBLISH(0, a);                                                        \
    WMMA_PUBLISH(8, b);                                                        \
    MMA_EMU_PRODUCT(acc, 8, 2 * q_ + lane / 16, lane % 16,                     \
                    row_ + 16 * (kk_ / 8), kk_ / 2, col_ + 16 * (kk_ / 8),     \
                    8 + kk_ / 2)                                               \
  }
#else
#define MMA_SCRATCH
#if DT == 1
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#define WMMA_OP(a, b, c)                                                       \
  __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(as_half16(a), as_half16(b), c)
#else
#define WMMA_OP(a, b, c)                                                       \
  __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(as_short16(a), as_short16(b), c)
#endif
#define WMMA_16X16X16(acc, a, b)                                               \
  {                                                                            \
    float8 c_ = (float8)((acc)[0], (acc)[1], (acc)[2], (acc)[3], (acc)[4],     \
                         (acc)[5], (acc)[6], (acc)[7]);                        \
    c_ = WMMA_OP(a, b, c_);                                                    \
    (acc)[0] = c_.s0;                                                          \
    (acc)[1] = c_.s1;                                                          \
    (acc)[2] = c_.s2;                                                          \
    (acc)[3] = c_.s3;                                                          \
    (acc)[4] = c_.s4;                                                          \
    (acc)[5] = c_.s5;                                                          \
    (acc)[6] = c_.s6;                                                          \
    (acc)[7] = c_.s7;                                                          \
  }
#endif

#else /* NVIDIA */

#ifdef KILN_MMA_EMULATE
/* The warp's exchange area (declared once per kernel): 6 registers per
 * lane, A's four and B's two, or ldmatrix's row address in the first. */
#define MMA_SCRATCH __local uint mma_x_[WARPS][32][6];
/* ldmatrix .x4: every lane publishes its row's offset into tile, then
 * reads the two elements it owns of each of the four 8x8 tiles. Barriers
 * bracket the exchange: the work-group's warps run it together, in
 * uniform control flow. */
#define LDSM_X4(d, tile, off)                                                  \
  {                                                                            \
    mma_x_[warp][lane][0] = (off);                                             \
    barrier(CLK_LOCAL_MEM_FENCE);                                              \
    for (uint j_ = 0; j_ < 4; j_++) {                                          \
      const uint src_ = mma_x_[warp][8 * j_ + lane / 4][0] + 2 * (lane % 4);   \
      (d)[j_] = (uint)(tile)[src_] | (uint)(tile)[src_ + 1] << 16;             \
    }                                                                          \
    barrier(CLK_LOCAL_MEM_FENCE);                                              \
  }
/* mma m16n8k16: every lane publishes its A and B registers; each computes
 * its four outputs from the whole warp's, in f32 with one rounding per
 * product-sum (the hardware's order of summation is its own: the tests'
 * tolerance allows for any). Element (r, kk) of A is half kk % 2 of
 * register r / 8 + 2 (kk / 8) of lane 4 (r % 8) + (kk % 8) / 2; element
 * (kk, c) of B half kk % 2 of register kk / 8 of lane 4 c + (kk % 8) / 2. */
#define MMA_16816(acc, a, b)                                                   \
  {                                                                            \
    for (uint r_ = 0; r_ < 4; r_++)                                            \
      mma_x_[warp][lane][r_] = (a)[r_];                                        \
    mma_x_[warp][lane][4] = (b)[0];                                            \
    mma_x_[warp][lane][5] = (b)[1];                                            \
    MMA_EMU_PRODUCT(acc, 4, lane / 4 + 8 * (q_ / 2), 2 * (lane % 4) + q_ % 2,  \
                    4 * (row_ % 8) + (kk_ % 8) / 2, row_ / 8 + 2 * (kk_ / 8),  \
                    4 * col_ + (kk_ % 8) / 2, 4 + kk_ / 8)                     \
  }
#else
#define MMA_SCRATCH
/* A __local pointer as the 32-bit .shared address ldmatrix takes (the
 * conversion gives the offset in the shared window, as CUTLASS's
 * __cvta_generic_to_shared does). "memory": it reads what the staging
 * stored, which the compiler must not move across. */
#define LDSM_X4(d, tile, off)                                                  \
  {                                                                            \
    const uint addr_ = (uint)(size_t)((tile) + (off));                         \
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "                   \
                 "{%0, %1, %2, %3}, [%4];"                                     \
                 : "=r"((d)[0]), "=r"((d)[1]), "=r"((d)[2]), "=r"((d)[3])      \
                 : "r"(addr_)                                                  \
                 : "memory");                                                  \
  }
#define MMA_16816(acc, a, b)                                                   \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." MMA_TYPES ".f32 "      \
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "                \
               "{%0, %1, %2, %3};"                                             \
               : "+f"((acc)[0]), "+f"((acc)[1]), "+f"((acc)[2]),               \
                 "+f"((acc)[3])                                                \
               : "r"((a)[0]), "r"((a)[1]), "r"((a)[2]), "r"((a)[3]),           \
                 "r"((b)[0]), "r"((b)[1]))
#endif
#endif /* NVIDIA */

#ifdef KILN_MMA_PROBE
/* The compile probe: a driver that builds this takes the instructions
 * with this dtype (the gate then checks what they compute). */
#if MMA_AMD == 2
__kernel __attribute__((reqd_work_group_size(32, 1, 1))) void
gemm_mma_probe(__global float *out, __global const uint *in) {
  MMA_SCRATCH
  const uint lane = get_local_id(0), warp = 0;
  const uint8 a = vload8(0, in + 8 * (lane % 16));
  const uint8 b = vload8(0, in + 128 + 8 * (lane % 16));
  float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  WMMA_16X16X16(acc, a, b);
  (void)warp;
  for (uint q = 0; q < 8; q++)
    out[lane * 8 + q] = acc[q];
}
#elif MMA_AMD == 1
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void
gemm_mma_probe(__global float *out, __global const uint *in) {
  MMA_SCRATCH
  const uint lane = get_local_id(0), warp = 0;
  const uint2 a = (uint2)(in[2 * lane], in[2 * lane + 1]);
  const uint2 b = (uint2)(in[128 + 2 * lane], in[129 + 2 * lane]);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  MFMA_16X16X16(acc, a, b);
  (void)warp;
  for (uint q = 0; q < 4; q++)
    out[lane * 4 + q] = acc[q];
}
#else
__kernel __attribute__((reqd_work_group_size(32, 1, 1))) void
gemm_mma_probe(__global float *out, __global const uint *in) {
  __local ushort tile[16 * LDS] MMA_ALIGN;
  MMA_SCRATCH
  const uint lane = get_local_id(0), warp = 0;
  for (uint i = lane; i < 16 * LDS; i += 32)
    tile[i] = (ushort)in[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  uint a[4], b[2] = {in[lane], in[lane + 32]};
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  LDSM_X4(a, tile, (lane % 16) * LDS + (lane / 16) * 8);
  MMA_16816(acc, a, b);
  (void)warp;
  for (uint q = 0; q < 4; q++)
    out[lane * 4 + q] = acc[q];
}
#endif
#else

/* ---- staging ------------------------------------------------------------- */

/* Stage TR rows x BK steps of an operand into tile[row * LDS + kk] as raw
 * 16-bit elements, 0 outside the matrix. x: the batch entry; element
 * (row, step) at x[row * x_rs + step * x_ks]; r0, p0: the tile's first row
 * and step; rn, kn: the extents; rows_fast: the unit stride runs along the
 * rows (else along k); vec: the host's verdict on the operand's alignment
 * (mma_vec in runtime/ops/ops_gemm_gpu.c): 8 or 4 when the offset, the
 * other stride and the batch stride are multiples of it and the unit
 * stride is 1, else 0.
 *
 * With vec 8 or 4 each work-item loads vectors of that many elements along
 * the unit stride, aligned (they start at multiples of the width: the
 * tile's first row and step are multiples of 16), 16 or 8 bytes a load;
 * a vector that crosses the matrix's edge, or lies outside it, is read
 * element by element under the same guards. With vec 0 consecutive
 * work-items take consecutive elements along the unit stride, one 16-bit
 * load each. Every path stages the same elements, so the results are
 * bit-identical. */
#define STAGE_ELEM(tile, TR, x, x_rs, x_ks, rows_fast, r0, p0, rn, kn)         \
  for (uint e_ = lid; e_ < (TR) * BK; e_ += WGS) {                             \
    const uint ar_ = (rows_fast) ? e_ % (TR) : e_ / BK;                        \
    const uint ak_ = (rows_fast) ? e_ / (TR) : e_ % BK;                        \
    const uint gr_ = (r0) + ar_, gp_ = (p0) + ak_;                             \
    (tile)[ar_ * LDS + ak_] =                                                  \
        gr_ < (rn) && gp_ < (kn)                                               \
            ? (x)[(ulong)gr_ * (x_rs) + (ulong)gp_ * (x_ks)]                   \
            : (ushort)0;                                                       \
  }
/* The vector path's helpers, on 16-bit elements held two to a 32-bit word
 * (element 2w in the low half of word w: every GPU is little-endian), so
 * that a load or store of 8 or 4 elements is one of a uint4 or uint2 (a
 * vector of 16-bit elements would be split): elements t and t + 1 of p
 * where t < run (and ok), else 0; element t of v. */
uint mma_pair(__global const ushort *p, uint t, uint run, bool ok) {
  return (uint)(ok && t < run ? p[t] : 0) |
         (uint)(ok && t + 1 < run ? p[t + 1] : 0) << 16;
}
#define MMA_LOAD4(p, run, ok)                                                  \
  ((uint2)(mma_pair(p, 0, run, ok), mma_pair(p, 2, run, ok)))
#define MMA_LOAD8(p, run, ok)                                                  \
  ((uint4)(mma_pair(p, 0, run, ok), mma_pair(p, 2, run, ok),                   \
           mma_pair(p, 4, run, ok), mma_pair(p, 6, run, ok)))
#define MMA_ELEM4(v, t)                                                        \
  ((ushort)(((t) < 2 ? (v).s0 : (v).s1) >> 16 * ((t) % 2)))
#define MMA_ELEM8(v, t)                                                        \
  ((ushort)(((t) < 4 ? ((t) < 2 ? (v).s0 : (v).s1)                            \
                     : ((t) < 6 ? (v).s2 : (v).s3)) >>                         \
            16 * ((t) % 2)))
/* VW elements as UV (uint4 or uint2). */
#define MMA_CAT_(a, b) a##b
#define MMA_CAT(a, b) MMA_CAT_(a, b)
#define STAGE_VEC(VW, UV, tile, TR, x, x_rs, x_ks, rows_fast, r0, p0, rn, kn)  \
  for (uint e_ = lid; e_ < (TR) * BK / (VW); e_ += WGS) {                      \
    const uint ar_ =                                                           \
        (rows_fast) ? (e_ % ((TR) / (VW))) * (VW) : e_ / (BK / (VW));          \
    const uint ak_ =                                                           \
        (rows_fast) ? e_ / ((TR) / (VW)) : (e_ % (BK / (VW))) * (VW);          \
    const uint gr_ = (r0) + ar_, gp_ = (p0) + ak_;                             \
    /* The elements left along the unit stride, and the other index. */        \
    const uint run_ = (rows_fast) ? (gr_ < (rn) ? (rn) - gr_ : 0)              \
                                  : (gp_ < (kn) ? (kn) - gp_ : 0);             \
    const bool other_ = (rows_fast) ? gp_ < (kn) : gr_ < (rn);                 \
    __global const ushort *at_ =                                               \
        (x) + ((ulong)gr_ * (x_rs) + (ulong)gp_ * (x_ks));                     \
    const UV v_ = other_ && run_ >= (VW)                                       \
                      ? *(__global const UV *)at_                              \
                      : MMA_CAT(MMA_LOAD, VW)(at_, run_, other_);              \
    if (rows_fast) {                                                           \
      _Pragma("unroll") for (uint t_ = 0; t_ < (VW); t_++)                     \
        (tile)[(ar_ + t_) * LDS + ak_] = MMA_CAT(MMA_ELEM, VW)(v_, t_);        \
    } else {                                                                   \
      *(__local UV *)((tile) + ar_ * LDS + ak_) = v_;                          \
    }                                                                          \
  }
#define STAGE(tile, TR, x, x_rs, x_ks, rows_fast, vec, r0, p0, rn, kn)         \
  if ((vec) == 8) {                                                            \
    STAGE_VEC(8, uint4, tile, TR, x, x_rs, x_ks, rows_fast, r0, p0, rn, kn)    \
  } else if ((vec) == 4) {                                                     \
    STAGE_VEC(4, uint2, tile, TR, x, x_rs, x_ks, rows_fast, r0, p0, rn, kn)    \
  } else {                                                                     \
    STAGE_ELEM(tile, TR, x, x_rs, x_ks, rows_fast, r0, p0, rn, kn)             \
  }
#define LOAD_STAGE(st, p0)                                                     \
  STAGE(a_tiles[st], BM, ax, a_rs, a_cs, a_rows_fast, a_vec, i0, p0, m, k)     \
  STAGE(b_tiles[st], BN, bx, b_cs, b_rs, b_cols_fast, b_vec, j0, p0, n, k)

/* STMT for every accumulator (i, j, q): fragment (i, j), register q, in
 * unrolled loops, so that acc stays in registers; its row and column in
 * the warp's tile (the fragment layouts above). */
#define FOR_ACC(STMT)                                                          \
  _Pragma("unroll") for (uint i = 0; i < MI; i++)                              \
      _Pragma("unroll") for (uint j = 0; j < NI; j++)                          \
          _Pragma("unroll") for (uint q = 0; q < ACC_N; q++) STMT

/* AMD's fragments: where lane l's row (of A's tile; column, of B's) l % 16
 * of the fragment at r0 starts, at step k. */
#define FRAG_ROW(tile, r0, k) ((tile) + ((r0) + lane % 16) * LDS + (k))
#if MMA_AMD == 1
#define OUT_ROW(i, q) (wm0 + (i) * 16 + 4 * (lane / 16) + (q))
#define OUT_COL(j, q) (wn0 + (j) * 16 + lane % 16)
#elif MMA_AMD == 2
#define OUT_ROW(i, q) (wm0 + (i) * 16 + 2 * (q) + lane / 16)
#define OUT_COL(j, q) (wn0 + (j) * 16 + lane % 16)
#else
#define OUT_ROW(i, q) (wm0 + (i) * 16 + lane / 4 + 8 * ((q) / 2))
#define OUT_COL(j, q) (wn0 + (j) * 8 + 2 * (lane % 4) + (q) % 2)
#endif

__kernel __attribute__((reqd_work_group_size(WAVE, WARPS, 1))) void
gemm_mma(GEMM_ARGS) {
  __local ushort a_tiles[STAGES][BM * LDS] MMA_ALIGN;
  __local ushort b_tiles[STAGES][BN * LDS] MMA_ALIGN;
  MMA_SCRATCH
  const uint lane = get_local_id(0), warp = get_local_id(1);
  const uint lid = warp * WAVE + lane;
  const uint wm0 = (warp % WARPS_M) * WM, wn0 = (warp / WARPS_M) * WN;
  const uint i0 = get_group_id(1) * BM, j0 = get_group_id(0) * BN;
  const ulong bt_ = get_global_id(2);
  /* The operands as raw 16-bit elements (T is half for f16). */
  __global const ushort *ax =
      (__global const ushort *)a + a_off + bt_ * a_batch;
  __global const ushort *bx =
      (__global const ushort *)b + b_off + bt_ * b_batch;
  c += c_off + bt_ * c_batch;
  const bool a_rows_fast = a_rs == 1 && a_cs != 1;
  const bool b_cols_fast = b_cs == 1 && b_rs != 1;
  float acc[MI][NI][ACC_N];
  FOR_ACC(acc[i][j][q] = 0.0f);
  const uint stages = (k + BK - 1) / BK;
  LOAD_STAGE(0, 0)
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = 0; s < stages; s++) {
    const uint p0 = s * BK;
    if (STAGES == 2 && s + 1 < stages) {
      /* The other buffer was last read before the previous barrier. */
      LOAD_STAGE((s + 1) % STAGES, p0 + BK)
    }
    {
      __local const ushort *at = a_tiles[s % STAGES];
      __local const ushort *bt = b_tiles[s % STAGES];
      for (uint kk = 0; kk < BK; kk += 16) {
#if MMA_AMD == 2
        /* Lane l's sixteen elements of A's fragment i and B's j: row
         * (column) l % 16, k 0-15, two 16-byte __local loads each; B's
         * one fragment at a time (the registers hold A's, B's and the
         * accumulators). */
        uint8 af[MI];
#pragma unroll
        for (uint i = 0; i < MI; i++) {
          af[i] = WMMA_FRAG(FRAG_ROW(at, wm0 + i * 16, kk));
        }
#pragma unroll
        for (uint j = 0; j < NI; j++) {
          const uint8 bf = WMMA_FRAG(FRAG_ROW(bt, wn0 + j * 16, kk));
#pragma unroll
          for (uint i = 0; i < MI; i++)
            WMMA_16X16X16(acc[i][j], af[i], bf);
        }
#elif MMA_AMD == 1
        /* Lane l's four elements of A's fragment i and B's j: row (column)
         * l % 16, k 4 (l / 16) on, one 8-byte __local load each. */
        uint2 af[MI], bf[NI];
#pragma unroll
        for (uint i = 0; i < MI; i++)
          af[i] = *(__local const uint2 *)FRAG_ROW(at, wm0 + i * 16,
                                                   kk + 4 * (lane / 16));
#pragma unroll
        for (uint j = 0; j < NI; j++)
          bf[j] = *(__local const uint2 *)FRAG_ROW(bt, wn0 + j * 16,
                                                   kk + 4 * (lane / 16));
#pragma unroll
        for (uint i = 0; i < MI; i++)
#pragma unroll
          for (uint j = 0; j < NI; j++)
            MFMA_16X16X16(acc[i][j], af[i], bf[j]);
#else
        uint af[MI][4], bf[NI][2];
        /* A: tiles (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15,
         * 8-15) are registers 0-3: lane l gives row l % 16, k (l / 16) 8. */
#pragma unroll
        for (uint i = 0; i < MI; i++)
          LDSM_X4(af[i], at, (wm0 + i * 16 + lane % 16) * LDS + kk +
                                 (lane / 16) * 8);
        /* B, 16 columns at a time: tiles (columns 0-7, k 0-7), (0-7,
         * 8-15), (8-15, 0-7), (8-15, 8-15) are the two registers of
         * fragments j and j + 1: lane l gives column l % 8 + (l / 16) 8,
         * k ((l / 8) % 2) 8. */
#pragma unroll
        for (uint j = 0; j < NI; j += 2) {
          uint r[4];
          LDSM_X4(r, bt, (wn0 + j * 8 + lane % 8 + (lane / 16) * 8) * LDS +
                             kk + ((lane / 8) % 2) * 8);
          bf[j][0] = r[0];
          bf[j][1] = r[1];
          bf[j + 1][0] = r[2];
          bf[j + 1][1] = r[3];
        }
#pragma unroll
        for (uint i = 0; i < MI; i++)
#pragma unroll
          for (uint j = 0; j < NI; j++)
            MMA_16816(acc[i][j], af[i], bf[j]);
#endif
      }
    }
    if (STAGES == 1) {
      /* Unconditional, after the last stage too: PoCL 3.1 computed wrong
       * results (Oclgrind right ones) from the vector staging behind a
       * barrier under s + 1 < stages at BK 16, 32 x 32 blocks of four
       * warps. */
      barrier(CLK_LOCAL_MEM_FENCE);
      if (s + 1 < stages) {
        LOAD_STAGE(0, p0 + BK)
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  FOR_ACC(store_c(c, ldc, m, n, i0 + OUT_ROW(i, q), j0 + OUT_COL(j, q),
                  acc[i][j][q], EPILOGUE_ARGS));
}
#endif
