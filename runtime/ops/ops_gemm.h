/* Internal knobs of the GEMM module (ops_gemm.c), for the test suite. */
#ifndef KILN_OPS_GEMM_H
#define KILN_OPS_GEMM_H

#include <stddef.h>

/* The most workspace one GEMM call asks of its queue, in bytes (default
 * 64 MiB, documented in kiln/kiln_ops.h); 0 restores the default. Tests lower
 * it to exercise the chunking of k and of the batch with small matrices. A
 * process-wide setting, so only for tests, set before any GEMM runs. */
void kiln__gemm_set_workspace_limit(size_t bytes);

/* Force the CPU family's register tile (rows mr 1..8, columns nr = vw or
 * 2 vw, vector width vw 4, 8 or 16) and k block kc, with 16 x 16 tiles per
 * block: a test override of the gemm_cpu space (tune/space_cpu.c); 0
 * derives a value from vw (0 too: from 4), all 0 restores the variant's
 * sources. Lets the tests run the tiles of devices they
 * do not have (AVX-512's 8 x 32, SSE's 6 x 8, 1-vector rows). Process-wide,
 * like the workspace limit: tests only. */
void kiln__gemm_set_cpu_tile(unsigned mr, unsigned nr, unsigned vw,
                             unsigned kc);

/* Fix the CPU family's switch point to the unpacked kernel for few rows or
 * columns (ops_gemm_skinny.c): problems whose m or n is at most rows use
 * it. 0 turns the kernel off, -1 restores the default rule (which depends
 * on k), so tests can run the packed path on small shapes and the unpacked
 * one on any shape. Process-wide, like the tile: tests only. */
void kiln__gemm_set_skinny_max(int rows);

/* The most bytes of columns (and regathered dy) one convolution keeps in
 * the queue's workspace per chunk of images (ops_conv.c; by default 2 MiB
 * on the CPU family and 64 MiB on the GPU family, documented in
 * kiln/kiln_ops_conv.h); 0 restores the defaults. Tests lower
 * it to run several chunks on small images. Process-wide: tests only. */
void kiln__conv_set_workspace_limit(size_t bytes);

/* ---- shared by ops_gemm.c, ops_gemm_gpu.c and ops_gemm_skinny.c ---------- */

#include "ops_internal.h"

/* One operand in canonical form (ops_gemm.c explains it). */
struct gemm_operand {
  cl_mem mem;
  size_t offset, batch_stride;
  size_t rs, cs; /* element (r, c) of op(X) at offset + r * rs + c * cs */
};

struct gemm_problem {
  size_t m, n, k, batch;
  float alpha, beta;
  kiln_dtype dtype;
  struct gemm_operand a, b;
  cl_mem c;
  size_t c_offset, c_stride, ldc;
  /* Epilogue: act, and the bias (NULL for none) of canonical output (i, j)
   * at bias_offset + i * bias_rs + j * bias_cs. */
  kiln_activation act;
  cl_mem bias;
  size_t bias_offset, bias_rs, bias_cs;
  /* Floats at the start of the queue's op workspace that the GEMM leaves
   * alone (a multiple of 64): an operand another op placed there (a
   * convolution's im2col columns). The CPU family packs after them. */
  size_t ws_base;
};

/* ---- the internal entry, for ops built on GEMM (ops_conv.c) -------------- */

/* The floats of op workspace g needs after g->ws_base (0 when its path
 * packs nothing): a caller that puts an operand in the workspace first
 * asks kiln__op_workspace for ws_base + this many floats, so that the GEMM
 * finds the buffer large enough and does not replace it. */
kiln_status kiln__gemm_workspace_floats(const kiln_context *ctx,
                                        const struct gemm_problem *g,
                                        size_t *floats);

/* Enqueue g (already checked: m, n, batch > 0, sizes within the kernels'
 * limits, operands in their buffers) as part of op, on the family's
 * path: kiln_matmul's own dispatch. */
kiln_status kiln__gemm_enqueue(struct kiln__op *op,
                               const struct gemm_problem *g);

/* The epilogue's kernel arguments: act, use_bias, bias, bias_off, bias_rs,
 * bias_cs. Without a bias C's buffer stands in for it (never read), since
 * not every driver takes a NULL buffer argument. */
struct gemm_epilogue_args {
  cl_uint act, use_bias;
  cl_mem bias;
  cl_ulong off, rs, cs;
};
struct gemm_epilogue_args kiln__gemm_epilogue_args(const struct gemm_problem *g);

/* ---- the GPU family's launch (ops_gemm_gpu.c; its space: tune/tune.h) ---- */

kiln_status kiln__gemm_run_gpu(struct kiln__op *op,
                               const struct gemm_problem *g);
/* Set arguments 0 to 27 of kernel, gemm_store.clh's GEMM_ARGS, from g (the
 * kernels of the family and those built on their tiles: conv_gemm.cl). */
kiln_status kiln__gemm_gpu_args(struct kiln__op *op, cl_kernel kernel,
                                const struct gemm_problem *g, cl_uint a_vec,
                                cl_uint b_vec);

/* ---- the CPU family's unpacked kernel (ops_gemm_skinny.c) ---------------- */

/* Run g (m or n small; alpha != 0, k > 0) with gemm_skinny.cl; wide: the
 * device has 16-float vectors (larger register blocks). */
kiln_status kiln__gemm_run_skinny(struct kiln__op *op,
                                  const struct gemm_problem *g, bool wide);
/* The gemm_skinny program's build options for dtype. */
void kiln__gemm_skinny_options(kiln_dtype dtype, bool wide, char *buf,
                               size_t size);

#endif
