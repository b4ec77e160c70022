/* GEMM on the GPU's matrix units, GPU family: C = act(alpha *
 * op(A) * op(B) + beta * C + bias) for f16 or bf16 A and B (-DDT=1 or 2),
 * f32 accumulation and an f32 C, storing through the family's epilogue
 * (gemm_store.clh). The kernel argument list is gemm_gpu.cl's (GEMM_ARGS).
 * This file holds the blocking, the fragment loads, the main loop and the
 * compile probe of every vendor's form; each vendor's instructions (and
 * their emulation) are in gemm_mma_nvidia.clh, gemm_mma_amd.clh and
 * gemm_mma_intel.clh, the staging all share in gemm_mma_stage.clh.
 *
 * NVIDIA's tensor cores: the matrix instructions are inline PTX, which NVIDIA's OpenCL compiler
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
/* KILN_INTEL_GPU, which the build options of backends/intel.c's profile
 * define, selects Intel's form: DPAS through the sub-group builtins of
 * cl_intel_subgroup_matrix_multiply_accumulate in sub-groups of
 * KILN_INTEL_SG lanes (8 on Xe-LP and Xe-HPG, 16 on Xe-HPC and Xe2: the
 * device's smallest sub-group size, which the host reads and passes), or
 * its emulation with KILN_MMA_EMULATE 3 (gemm_mma_intel.clh). */
#ifdef KILN_INTEL_GPU
#define MMA_INTEL 1
#if KILN_INTEL_SG != 8 && KILN_INTEL_SG != 16
#error "Intel's matrix units: KILN_INTEL_SG, the sub-group size, 8 or 16"
#endif
#if defined(KILN_MMA_EMULATE) && KILN_MMA_EMULATE != 3
#error "Intel's form is emulated with KILN_MMA_EMULATE 3"
#endif
#else
#define MMA_INTEL 0
#if KILN_MMA_EMULATE == 3
#error "KILN_MMA_EMULATE 3 emulates Intel's form (KILN_INTEL_GPU)"
#endif
#endif

/* Lanes per warp (an AMD wavefront: 64 for MFMA, 32 for WMMA's wave32;
 * an Intel sub-group), columns per fragment and f32 accumulators a lane
 * holds per fragment: mma.sync m16n8k16 gives 16 x 8 of C, 4 a lane; MFMA
 * 16x16x16 16 x 16, 4 a lane; WMMA 16x16x16 16 x 16, 8 a lane; two DPAS
 * of 8 rows 16 x KILN_INTEL_SG, 16 a lane (a column). */
#if MMA_AMD == 1
#define WAVE 64
#define FRAG_N 16
#define ACC_N 4
#elif MMA_AMD == 2
#define WAVE 32
#define FRAG_N 16
#define ACC_N 8
#elif MMA_INTEL
#define WAVE KILN_INTEL_SG
#define FRAG_N KILN_INTEL_SG
#define ACC_N 16
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

#if MMA_AMD != 0
#include "gemm_mma_amd.clh"
#elif MMA_INTEL
#include "gemm_mma_intel.clh"
#else
#include "gemm_mma_nvidia.clh"
#endif

#ifdef KILN_MMA_PROBE
/* The compile probe: a driver that builds this takes the instructions
 * with this dtype (the gate then checks what they compute). */
#if MMA_INTEL
__kernel __attribute__((reqd_work_group_size(WAVE, 1, 1))) DPAS_SG void
gemm_mma_probe(__global float *out, __global const uint *in) {
  MMA_SCRATCH
  const uint lane = get_local_id(0), warp = 0;
  const uint8 u = vload8(0, in + 8 * lane);
  const DPAS_A a = DPAS_A_FROM(u);
  const uint8 b = vload8(0, in + 8 * (WAVE + lane));
  float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  DPAS_8(acc, a, b);
  (void)warp;
  for (uint q = 0; q < 8; q++)
    out[lane * 8 + q] = acc[q];
}
#elif MMA_AMD == 2
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

/* ---- staging (gemm_mma_stage.clh) ---------------------------------------- */

#include "gemm_mma_stage.clh"

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
#elif MMA_INTEL
#define OUT_ROW(i, q) (wm0 + (i) * 16 + (q))
#define OUT_COL(j, q) (wn0 + (j) * WAVE + lane)
#else
#define OUT_ROW(i, q) (wm0 + (i) * 16 + lane / 4 + 8 * ((q) / 2))
#define OUT_COL(j, q) (wn0 + (j) * 8 + 2 * (lane % 4) + (q) % 2)
#endif

#if !MMA_INTEL
#define DPAS_SG
#endif
__kernel __attribute__((reqd_work_group_size(WAVE, WARPS, 1))) DPAS_SG void
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
#if MMA_INTEL
        /* A's fragment i as two DPAS operands of 8 rows (lane l: of each
         * row, k 2l and 2l + 1, or k l with 16 lanes); B's j, one at a
         * time: lane l's column, k 0-15 (two 16-byte __local loads). */
        DPAS_A af[MI][2];
#pragma unroll
        for (uint i = 0; i < MI; i++) {
          af[i][0] = DPAS_LOAD_A(at, wm0 + i * 16, kk);
          af[i][1] = DPAS_LOAD_A(at, wm0 + i * 16 + 8, kk);
        }
#pragma unroll
        for (uint j = 0; j < NI; j++) {
          const uint8 bf =
              vload8(0, (__local const uint *)(bt + (wn0 + j * WAVE + lane) *
                                                        LDS + kk));
#pragma unroll
          for (uint i = 0; i < MI; i++) {
            DPAS_8(acc[i][j], af[i][0], bf);
            DPAS_8(acc[i][j] + 8, af[i][1], bf);
          }
        }
#elif MMA_AMD == 2
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
