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
  /* mem holds the CPU family's f32 panels of a kiln_packed (full k, from
   * element 0, shared by every batch entry): offset and strides unused. */
  bool panels;
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

/* ---- operands that stay packed (made by ops_gemm_packed.c, checked by
 * ops_gemm_packed_check.c; panels packed by ops_gemm_cpu.c, copies by
 * ops_gemm.c) ------------------------------------------------------------- */

/* What a kiln_packed holds (kiln/kiln_ops.h explains when). */
struct kiln_packed {
  kiln_context *ctx;
  kiln_operand role;
  kiln_matrix shape; /* rows, cols, dtype, layout, trans; the rest 0 */
  size_t span, k;    /* op(X)'s panel-direction extent (m or n) and k */
  kiln_buffer *copy; /* the matrix as stored, ld packed */
  kiln_buffer *panels; /* the CPU family's f32 panels of op(X), or NULL */
  unsigned width;    /* panels: the MR (A) or NR (B) they were packed for */
  atomic_bool filled; /* kiln_pack has been enqueued into it */
};

/* Rows and columns of op(X) for x as stored (trans swaps them). */
void kiln__gemm_op_dims(const kiln_matrix *x, size_t *rows, size_t *cols);

/* The panel width (MR for A, NR for B) of ctx's current gemm_cpu variant. */
kiln_status kiln__gemm_panel_width(const kiln_context *ctx, kiln_operand role,
                                   unsigned *width);

/* Whether the CPU family reads an m x n x k problem in place
 * (ops_gemm_skinny.c) rather than through panels. */
bool kiln__gemm_use_skinny(size_t m, size_t n, size_t k);

/* Enqueue, as part of op, the packing of src (op(X) with span panel-direction
 * indices and k steps, element (r, c) of op(X) at offset + r rs + c cs) into
 * width-wide f32 panels at the start of dst: gemm_cpu.cl's pack kernels. */
kiln_status kiln__gemm_pack_panels(struct kiln__op *op, kiln_operand role,
                                   kiln_dtype dtype,
                                   const struct gemm_operand *src, size_t span,
                                   size_t k, cl_mem dst);

/* Enqueue, as part of op, a copy of lines x len elements of dtype from src
 * (line i at src_off + i * ld) to dst packed (line i at i * len): the
 * family program's gemm_copy_lines (gemm_scale.clh). */
kiln_status kiln__gemm_copy_lines(struct kiln__op *op, kiln_dtype dtype,
                                  cl_mem src, size_t src_off, size_t ld,
                                  size_t lines, size_t len, cl_mem dst);

/* x (named what) has p's rows, cols, dtype, layout and trans:
 * KILN_ERR_SHAPE_MISMATCH naming both when not. */
kiln_status kiln__packed_check_shape(const char *fn, const char *what,
                                     const kiln_matrix *x,
                                     const kiln_packed *p);
/* p's panels (if panels) still fit its context's register tile:
 * KILN_ERR_INVALID_STATE naming both widths when tuning changed it. */
kiln_status kiln__packed_check_tile(const char *fn, const char *what,
                                    const kiln_packed *p);

/* If x names a packed matrix (x->packed), check it against the call (fn,
 * operand name what, role, queue) and make *out x with the copy's buffer
 * (offset, ld and batch_stride 0, packed NULL), *packed x->packed: the
 * caller takes the panels instead where the problem runs them. Otherwise
 * *out = *x and *packed NULL. */
kiln_status kiln__packed_resolve(const char *fn, const char *what,
                                 const kiln_queue *queue, const kiln_matrix *x,
                                 kiln_operand role, kiln_matrix *out,
                                 const kiln_packed **packed);

/* ---- the GPU family's launch (ops_gemm_gpu.c; its space: tune/tune.h) ---- */

kiln_status kiln__gemm_run_gpu(struct kiln__op *op,
                               const struct gemm_problem *g);
/* Set arguments 0 to 27 of kernel, gemm_store.clh's GEMM_ARGS, from g (the
 * kernels of the family and those built on their tiles: conv_gemm.cl). */
kiln_status kiln__gemm_gpu_args(struct kiln__op *op, cl_kernel kernel,
                                const struct gemm_problem *g, cl_uint a_vec,
                                cl_uint b_vec);

/* ---- the CPU family's packed path (ops_gemm_cpu.c) ----------------------- */

/* Run g (alpha != 0, k > 0) through f32 panels: the pack kernels into the
 * queue's workspace (or a kiln_packed's panels), then the register tile. */
kiln_status kiln__gemm_run_cpu(struct kiln__op *op,
                               const struct gemm_problem *g);
/* The gemm_cpu program's build options for ctx's variant (static storage
 * of the variant); fails when a test's override does not fit the device. */
kiln_status kiln__gemm_cpu_options(const kiln_context *ctx,
                                   const char **options);
/* The floats of workspace kiln__gemm_run_cpu needs for g after ws_base. */
kiln_status kiln__gemm_cpu_workspace_floats(const kiln_context *ctx,
                                            const struct gemm_problem *g,
                                            size_t *floats);
/* Whether the unpacked kernel takes its larger register blocks (16-float
 * vectors, the width the packed tile uses); fails as the options do, so
 * that a bad override is refused on either path. */
kiln_status kiln__gemm_cpu_skinny_wide(const kiln_context *ctx, bool *wide);

/* ---- the CPU family's unpacked kernel (ops_gemm_skinny.c) ---------------- */

/* Run g (m or n small; alpha != 0, k > 0) with gemm_skinny.cl; wide: the
 * device has 16-float vectors (larger register blocks). */
kiln_status kiln__gemm_run_skinny(struct kiln__op *op,
                                  const struct gemm_problem *g, bool wide);
/* The gemm_skinny program's build options for dtype. */
void kiln__gemm_skinny_options(kiln_dtype dtype, bool wide, char *buf,
                               size_t size);

#endif
