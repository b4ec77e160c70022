/* Out-of-place matrix transpose (cl_kernels/transpose.cl). Elements are moved
 * as 32-bit or 16-bit words, so one kernel per element size serves every
 * dtype. The profile's family picks the kernel: __local tiles for GPUs, one
 * register-blocked tile per work-item for CPUs. Each family's kernel has a
 * parameter space (GPU: tile, padding, elements per work-item; CPU:
 * streaming stores, the order of a tile's blocks, the tile;
 * tune/space_small.c and space_cpu.c), whose point comes from a tuning
 * file or the profile (tune/tune.h). */
#include "ops_internal.h"

#include <stdio.h>

#define ALL_DTYPES (KILN__DT_FLOATS | KILN__DT(KILN_I32) | KILN__DT(KILN_U32))

/* Elements spanned by rows x cols with leading dimension ld (0 if empty). */
static bool extent(size_t rows, size_t cols, size_t ld, size_t *out) {
  size_t span;
  *out = 0;
  if (rows == 0 || cols == 0)
    return true;
  return !kiln__mul_overflows(rows - 1, ld, &span) &&
         !kiln__add_overflows(span, cols, out);
}

enum { K_TILE = KILN__TRANSPOSE_TILE, K_WPT = KILN__TRANSPOSE_WPT };

/* The family's tile edge and rows per group (GPU), whether it is the CPU
 * family, and the program's options: the family's space's point
 * (transpose or transpose_cpu, tune/). */
static kiln_status config(const kiln_context *ctx, bool *cpu, size_t *tile,
                          size_t *rows, char *options, size_t size) {
  *cpu = kiln__ops_tuning(ctx)->family == KILN_FAMILY_CPU;
  /* One program serves every element size: the f32 variant's. */
  const struct kiln__variant *v;
  kiln_status s = kiln__variant_get(
      ctx, *cpu ? KILN__TUNED_TRANSPOSE_CPU : KILN__TUNED_TRANSPOSE, KILN_F32,
      &v);
  if (s != KILN_OK)
    return s; /* a test's override the device cannot run */
  *tile = v->point.v[*cpu ? KILN__TRANSPOSE_CPU_TILE : K_TILE];
  *rows = *cpu ? 1 : v->point.v[K_TILE] / v->point.v[K_WPT];
  /* At most three knobs of three digits: far shorter than size. */
  snprintf(options, size, "%.*s", (int)size - 1, v->options);
  return s;
}

/* A transpose operand: not transposed itself, one matrix. */
static kiln_status check_plain(const char *fn, const char *what,
                               const kiln_matrix *m) {
  if (m->trans != KILN_NO_TRANS)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s.trans is KILN_TRANS: kiln_transpose takes "
                      "matrices as stored (KILN_NO_TRANS)",
                      fn, what);
  if (m->batch_stride != 0)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s.batch_stride %zu is not 0: kiln_transpose "
                      "takes one matrix",
                      fn, what, m->batch_stride);
  return KILN_OK;
}

KILN_API kiln_status kiln_transpose(kiln_queue *queue, const kiln_matrix *xm,
                                    const kiln_matrix *ym, size_t num_wait,
                                    kiln_event *const *wait_list,
                                    kiln_event **out_event) {
  static const char fn[] = "kiln_transpose";
  size_t ldx = 0, ldy = 0;
  kiln_status s = kiln__ops_check_queue(fn, queue);
  if (s == KILN_OK)
    s = kiln__ops_check_matrix(fn, "x", xm, &ldx);
  if (s == KILN_OK)
    s = kiln__ops_check_matrix(fn, "y", ym, &ldy);
  if (s == KILN_OK)
    s = check_plain(fn, "x", xm);
  if (s == KILN_OK)
    s = check_plain(fn, "y", ym);
  if (s == KILN_OK && xm->layout != ym->layout)
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: x and y have different layouts (a row-major x^T "
                   "stored column-major is x itself: copy it instead)",
                   fn);
  if (s == KILN_OK &&
      (ym->rows != xm->cols || ym->cols != xm->rows || ym->dtype != xm->dtype))
    s = kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                   "%s: y (%zu x %zu %s) is not x (%zu x %zu %s) transposed",
                   fn, ym->rows, ym->cols, kiln_dtype_name(ym->dtype), xm->rows,
                   xm->cols, kiln_dtype_name(xm->dtype));
  if (s == KILN_OK)
    s = kiln__ops_check_dtype(fn, "x.dtype", xm->dtype, ALL_DTYPES);
  if (s != KILN_OK)
    return s;
  /* A column-major rows x cols matrix is, element for element, the
   * row-major cols x rows one: transpose that. */
  const bool row = xm->layout == KILN_ROW_MAJOR;
  const size_t rows = row ? xm->rows : xm->cols;
  const size_t cols = row ? xm->cols : xm->rows;
  const kiln_dtype dtype = xm->dtype;
  const kiln_buffer *x = xm->buffer;
  kiln_buffer *y = ym->buffer;
  const size_t x_offset = xm->offset, y_offset = ym->offset;
  if (rows > UINT32_MAX || cols > UINT32_MAX)
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: %s %zu exceeds UINT32_MAX",
                      fn, rows > UINT32_MAX ? "rows" : "cols",
                      rows > UINT32_MAX ? rows : cols);
  size_t x_ext, y_ext;
  if (!extent(rows, cols, ldx, &x_ext) || !extent(cols, rows, ldy, &y_ext))
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: the extent of x (%zu x %zu, x.ld %zu) or y (%zu x "
                      "%zu, y.ld %zu) overflows size_t",
                      fn, rows, cols, ldx, cols, rows, ldy);
  s = kiln__ops_check_range(fn, queue, "x", x, x_offset, x_ext, dtype);
  if (s == KILN_OK)
    s = kiln__ops_check_range(fn, queue, "y", y, y_offset, y_ext, dtype);
  if (s != KILN_OK)
    return s;
  const size_t esize = kiln_dtype_size(dtype);
  if (x->cl == y->cl && x_ext > 0 && x_offset < y_offset + y_ext &&
      y_offset < x_offset + x_ext)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: x and y overlap in the same buffer (a transpose "
                      "is out of place)",
                      fn);

  struct kiln__op op;
  s = kiln__op_begin(&op, queue, fn, num_wait, wait_list, out_event);
  if (s != KILN_OK)
    return s;
  kiln__op_describe(&op, "transpose", dtype, 2, (size_t[]){rows, cols},
                    2.0 * (double)rows * (double)cols * (double)esize, 0.0);
  if (rows > 0 && cols > 0) {
    bool cpu;
    char options[64];
    size_t tile = 1, group_rows = 1; /* stay 1 when config fails */
    s = config(queue->ctx, &cpu, &tile, &group_rows, options, sizeof options);
    size_t global[2], local[2];
    if (cpu) {
      global[0] = kiln__div_up(cols, tile);
      global[1] = kiln__div_up(rows, tile);
      local[0] = local[1] = 1;
    } else {
      local[0] = tile;
      local[1] = group_rows;
      global[0] = kiln__div_up(cols, tile) * local[0];
      global[1] = kiln__div_up(rows, tile) * local[1];
    }
    char name[32];
    snprintf(name, sizeof name, "transpose_%s_%u", cpu ? "cpu" : "gpu",
             esize == 2 ? 16u : 32u);
    const cl_uint rows32 = (cl_uint)rows, cols32 = (cl_uint)cols;
    const cl_ulong xo = x_offset, yo = y_offset, lx = ldx, ly = ldy;
    cl_mem x_mem = x->cl, y_mem = y->cl;
    cl_kernel kernel;
    if (s == KILN_OK)
      s = kiln__op_kernel(&op, "transpose", options, name, &kernel, 8,
                          KILN__ARG(rows32), KILN__ARG(cols32),
                          KILN__ARG(x_mem), KILN__ARG(xo), KILN__ARG(lx),
                          KILN__ARG(y_mem), KILN__ARG(yo), KILN__ARG(ly));
    if (s == KILN_OK)
      s = kiln__op_launch(&op, kernel, 2, global, local);
  }
  return kiln__op_end(&op, s, out_event);
}

void kiln__ops_warm_transpose(const kiln_context *ctx, kiln__warm_add_fn add,
                              void *user) {
  bool cpu;
  char options[64];
  size_t tile, rows;
  if (config(ctx, &cpu, &tile, &rows, options, sizeof options) == KILN_OK)
    add(user, "transpose", options);
}
