/* GEMM, GPU family: the launch of cl_kernels/gemm_gpu.cl, or for f16 and
 * bf16 of cl_kernels/gemm_mma.cl where the matrix units passed their probe
 * and gate (tune/space_mma.c), with the parameters of the context's
 * variant (tune/tune.h: resolved once per context from a test's override, kiln_tuning_set, the tuning file, the
 * tuning database or the profile; the space is runtime/tune/space_gemm.c).
 */
#include "ops_gemm.h"
#include "ops_internal.h"

#include <stdio.h>
#include <string.h>

/* ---- launch -------------------------------------------------------------- */

/* Here rather than in ops_gemm.c, which runs the GPU family through this
 * module: modules call one way. */
struct gemm_epilogue_args kiln__gemm_epilogue_args(const struct gemm_problem *g) {
  struct gemm_epilogue_args e = {(cl_uint)g->act, g->bias != NULL,
                                 g->bias ? g->bias : g->c,
                                 g->bias_offset, g->bias_rs, g->bias_cs};
  return e;
}

/* Whether op's staged loads of VW elements may be aligned vectors: the
 * kernel's vectors start at multiples of VW along the unit stride, so the
 * offset, the other stride and the batch stride must be multiples of VW
 * too (buffers and views start aligned to far more than 8 floats). The
 * kernel's choice of direction is mirrored: rows when rs == 1 != cs. */
static cl_uint vec_ok(const struct gemm_operand *x, unsigned vw) {
  if (vw <= 1)
    return 0;
  const bool rows_fast = x->rs == 1 && x->cs != 1;
  const size_t other = rows_fast ? x->cs : x->rs;
  return x->offset % vw == 0 && other % vw == 0 && x->batch_stride % vw == 0;
}

kiln_status kiln__gemm_gpu_args(struct kiln__op *op, cl_kernel kernel,
                                const struct gemm_problem *g, cl_uint a_vec,
                                cl_uint b_vec) {
  const cl_uint m32 = (cl_uint)g->m, n32 = (cl_uint)g->n, k32 = (cl_uint)g->k,
                read_c = g->beta != 0.0f;
  const cl_ulong a_off = g->a.offset, a_bs = g->a.batch_stride, a_rs = g->a.rs,
                 a_cs = g->a.cs, b_off = g->b.offset, b_bs = g->b.batch_stride,
                 b_rs = g->b.rs, b_cs = g->b.cs, c_off = g->c_offset,
                 c_bs = g->c_stride, ldc = g->ldc;
  cl_mem a_mem = g->a.mem, b_mem = g->b.mem, c_mem = g->c;
  const struct gemm_epilogue_args e = kiln__gemm_epilogue_args(g);
  kiln_status s = kiln__op_args(
      op, kernel, 28, KILN__ARG(m32), KILN__ARG(n32), KILN__ARG(k32),
      KILN__ARG(g->alpha), KILN__ARG(g->beta), KILN__ARG(read_c),
      KILN__ARG(a_mem), KILN__ARG(a_off), KILN__ARG(a_bs), KILN__ARG(a_rs),
      KILN__ARG(a_cs), KILN__ARG(b_mem), KILN__ARG(b_off), KILN__ARG(b_bs),
      KILN__ARG(b_rs), KILN__ARG(b_cs), KILN__ARG(c_mem), KILN__ARG(c_off),
      KILN__ARG(c_bs), KILN__ARG(ldc), KILN__ARG(e.act), KILN__ARG(e.use_bias),
      KILN__ARG(e.bias), KILN__ARG(e.off), KILN__ARG(e.rs), KILN__ARG(e.cs),
      KILN__ARG(a_vec), KILN__ARG(b_vec));
  return s;
}

/* The arguments every kernel of the family takes, then the launch. */
static kiln_status launch(struct kiln__op *op, cl_kernel kernel,
                          const struct gemm_problem *g, cl_uint a_vec,
                          cl_uint b_vec, const size_t *global,
                          const size_t *local) {
  kiln_status s = kiln__gemm_gpu_args(op, kernel, g, a_vec, b_vec);
  if (s == KILN_OK)
    s = kiln__op_launch(op, kernel, 3, global, local);
  return s;
}

/* The width of the aligned vectors (8 or 4 16-bit elements, 0: element by
 * element) that gemm_mma's staging may load from an operand whose element
 * (row, step) is at offset + row * rs + step * ks (for B the rows are
 * C's columns): the kernel loads along the unit stride (the rows when
 * rs == 1 != ks, else k, which must then be 1), in vectors that start at
 * multiples of the width, so the offset, the other stride and the batch
 * stride (0 for a single entry) must be multiples of it too. */
static cl_uint mma_vec(size_t rs, size_t ks, size_t offset,
                       size_t batch_stride) {
  const bool rows_fast = rs == 1 && ks != 1;
  const size_t unit = rows_fast ? rs : ks, other = rows_fast ? ks : rs;
  if (unit != 1)
    return 0;
  for (cl_uint vw = 8; vw >= 4; vw /= 2)
    if (offset % vw == 0 && other % vw == 0 && batch_stride % vw == 0)
      return vw;
  return 0;
}

/* f16 and bf16 on the matrix units (cl_kernels/gemm_mma.cl: NVIDIA's
 * mma.sync, AMD's MFMA or WMMA or Intel's DPAS, by the context's profile),
 * where the context's variant says they run (tune/space_mma.c): *done
 * false leaves the problem to gemm_gpu. */
static kiln_status run_mma(struct kiln__op *op, const struct gemm_problem *g,
                           bool *done) {
  *done = false;
  if (g->dtype != KILN_F16 && g->dtype != KILN_BF16)
    return KILN_OK;
  const struct kiln__variant *v = NULL;
  kiln_status s =
      kiln__variant_get(op->queue->ctx, KILN__TUNED_GEMM_MMA, g->dtype, &v);
  if (s != KILN_OK || v == NULL || v->off[0] != '\0')
    return s;
  cl_kernel kernel;
  s = kiln__queue_kernel_keyed(op->queue, v, "gemm_mma", v->options,
                               "gemm_mma", &kernel);
  if (s != KILN_OK)
    return s;
  const unsigned bm = v->point.v[KILN__MMA_BM], bn = v->point.v[KILN__MMA_BN];
  const size_t warps =
      (size_t)(bm / v->point.v[KILN__MMA_WM]) * (bn / v->point.v[KILN__MMA_WN]);
  /* Warps of 32 lanes, MFMA's wavefronts of 64, or Intel's sub-groups of 8
   * or 16 (the variant's, read when it was resolved). */
  const size_t lanes = v->lanes;
  const size_t global[3] = {kiln__div_up(g->n, bn) * lanes,
                            kiln__div_up(g->m, bm) * warps, g->batch};
  const size_t local[3] = {lanes, warps, 1};
  *done = true;
  return launch(op, kernel, g,
                mma_vec(g->a.rs, g->a.cs, g->a.offset,
                        g->batch > 1 ? g->a.batch_stride : 0),
                mma_vec(g->b.cs, g->b.rs, g->b.offset,
                        g->batch > 1 ? g->b.batch_stride : 0),
                global, local);
}

kiln_status kiln__gemm_run_gpu(struct kiln__op *op,
                               const struct gemm_problem *g) {
  bool done;
  kiln_status s = run_mma(op, g, &done);
  if (s != KILN_OK || done)
    return s;
  kiln_queue *queue = op->queue;
  const struct kiln__variant *v;
  s = kiln__variant_get(queue->ctx, KILN__TUNED_GEMM, g->dtype, &v);
  if (s != KILN_OK)
    return s;
  const struct kiln__gemm_gpu_params p = v->gemm;
  const double sw = p.sw;
  const bool direct =
      (double)g->m * (double)g->n * (double)g->k < sw * sw * sw;
  cl_kernel kernel;
  s = kiln__queue_kernel_keyed(queue, v, "gemm_gpu", v->options,
                               direct ? "gemm_direct" : "gemm_gpu",
                               &kernel);
  if (s != KILN_OK)
    return s;
  size_t global[3], local[3];
  if (direct) {
    const size_t edge = (size_t)p.dwg * p.dwi;
    global[0] = kiln__div_up(g->n, edge) * p.dwg;
    global[1] = kiln__div_up(g->m, edge) * p.dwg;
    local[0] = local[1] = p.dwg;
  } else {
    global[0] = kiln__div_up(g->n, p.nwg) * p.ndimc;
    global[1] = kiln__div_up(g->m, p.mwg) * p.mdimc;
    local[0] = p.ndimc;
    local[1] = p.mdimc;
  }
  global[2] = g->batch;
  local[2] = 1;
  /* The column-major reduction swaps the operands, so B's loads run along
   * its columns: mirror that in the alignment test with B's strides as
   * (columns, k). */
  const struct gemm_operand bt = {g->b.mem, g->b.offset, g->b.batch_stride,
                                  g->b.cs, g->b.rs, false};
  return launch(op, kernel, g, vec_ok(&g->a, p.vwm), vec_ok(&bt, p.vwn),
                global, local);
}
