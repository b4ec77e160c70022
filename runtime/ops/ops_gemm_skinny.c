/* GEMM with few rows or few columns on the CPU family, through
 * cl_kernels/gemm_skinny.cl: no packing, operands read in place.
 *
 * ops_gemm.c sends a problem here when its canonical m or n is at most the
 * switch point (kiln__gemm_skinny_max). A small n becomes a small m by
 * computing C^T = op(B)^T op(A)^T: the operands swap and exchange their
 * strides, C is written with strides (1, ldc) instead of (ldc, 1), and the
 * bias's two strides swap likewise. Then the kernel follows op(B)'s unit
 * stride: along k, dot products (gemm_skinny_k); along n, broadcasts of A
 * against rows of B (gemm_skinny_n).
 *
 * Work split: each work-item owns a block of columns of C (whole blocks of
 * the kernel's column tile) for every row and batch entry; blocks are made
 * small enough for about 8 work-items per compute unit, so that both
 * threads of a 2-core PoCL stay busy on one vector. */
#include <stdio.h>

#include "ops_gemm.h"

/* Columns of C per tile of each kernel (gemm_skinny.cl's KJ and 16 NV). */
static size_t tile_columns(bool along_k, bool wide) {
  if (along_k)
    return wide ? 4 : 2;
  return wide ? 32 : 16;
}

void kiln__gemm_skinny_options(kiln_dtype dtype, bool wide, char *buf,
                               size_t size) {
  snprintf(buf, size, "-DDT=%d -DWIDE=%d", (int)dtype, wide ? 1 : 0);
}

kiln_status kiln__gemm_run_skinny(struct kiln__op *op,
                                  const struct gemm_problem *g, bool wide) {
  /* Rows of C are the smaller of the two dimensions. */
  const bool swap = g->n < g->m;
  const struct gemm_operand *a = swap ? &g->b : &g->a;
  const struct gemm_operand *b = swap ? &g->a : &g->b;
  const size_t m = swap ? g->n : g->m, n = swap ? g->m : g->n;
  /* op(A')(i, p) = op(B)(p, i) and op(B')(p, j) = op(A)(j, p). */
  const cl_ulong ars = swap ? a->cs : a->rs, acs = swap ? a->rs : a->cs;
  const cl_ulong brs = swap ? b->cs : b->rs, bcs = swap ? b->rs : b->cs;
  const cl_ulong crs = swap ? 1 : g->ldc, ccs = swap ? g->ldc : 1;
  struct gemm_epilogue_args e = kiln__gemm_epilogue_args(g);
  if (swap) {
    cl_ulong t = e.rs;
    e.rs = e.cs;
    e.cs = t;
  }
  const bool along_k = brs == 1; /* else bcs == 1 (ops_gemm.c's forms) */
  const cl_ulong bstride = along_k ? bcs : brs;

  char options[48];
  kiln__gemm_skinny_options(g->dtype, wide, options, sizeof options);
  cl_kernel kernel;
  kiln_status s =
      kiln__queue_kernel(op->queue, "gemm_skinny", options,
                         along_k ? "gemm_skinny_k" : "gemm_skinny_n", &kernel);
  if (s != KILN_OK)
    return s;

  const kiln_device_info *info = &op->queue->ctx->device->info;
  const size_t want = 8 * (size_t)(info->compute_units ? info->compute_units : 1);
  const size_t tile = tile_columns(along_k, wide);
  const size_t tiles = kiln__div_up(n, tile);
  const size_t per_batch = kiln__div_up(want, g->batch);
  const size_t nb =
      kiln__div_up(tiles, per_batch < tiles ? per_batch : tiles) * tile;
  const cl_uint m32 = (cl_uint)m, n32 = (cl_uint)n, k32 = (cl_uint)g->k,
                nb32 = (cl_uint)nb, read_c = g->beta != 0.0f;
  const cl_ulong a_off = a->offset, a_bs = a->batch_stride, b_off = b->offset,
                 b_bs = b->batch_stride, c_off = g->c_offset,
                 c_bs = g->c_stride;
  cl_mem a_mem = a->mem, b_mem = b->mem, c_mem = g->c;
  s = kiln__op_args(op, kernel, 27, KILN__ARG(m32), KILN__ARG(n32),
                    KILN__ARG(k32), KILN__ARG(nb32), KILN__ARG(g->alpha),
                    KILN__ARG(g->beta), KILN__ARG(read_c), KILN__ARG(a_mem),
                    KILN__ARG(a_off), KILN__ARG(a_bs), KILN__ARG(ars),
                    KILN__ARG(acs), KILN__ARG(b_mem), KILN__ARG(b_off),
                    KILN__ARG(b_bs), KILN__ARG(bstride), KILN__ARG(c_mem),
                    KILN__ARG(c_off), KILN__ARG(c_bs), KILN__ARG(crs),
                    KILN__ARG(ccs), KILN__ARG(e.act), KILN__ARG(e.use_bias),
                    KILN__ARG(e.bias), KILN__ARG(e.off), KILN__ARG(e.rs),
                    KILN__ARG(e.cs));
  if (s != KILN_OK)
    return s;
  const size_t global[3] = {kiln__div_up(n, nb), 1, g->batch};
  const size_t local[3] = {1, 1, 1};
  return kiln__op_launch(op, kernel, 3, global, local);
}
