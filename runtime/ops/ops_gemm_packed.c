/* Operands that stay packed (kiln/kiln_ops.h, kiln_packed): a matrix kept
 * in the layout kiln_matmul's kernels read, so that a layer's weights are
 * packed once, not at every GEMM.
 *
 * Every packed matrix holds a plain copy of its source (ld packed, same
 * dtype, layout and trans), which the ordinary path reads like any
 * matrix, with the same bits: the GPU family's kernels read operands in
 * place, and so does the CPU family's kernel for few rows or columns
 * (ops_gemm_skinny.c). On the CPU family it holds besides the f32 panels
 * that the unpacked call packs into the queue's workspace at every call
 * (gemm_cpu.cl's gemm_pack_a_* / gemm_pack_b_*, over the whole of k at
 * once), read by the register-tile kernel in place of the workspace
 * (ops_gemm.c's run_cpu) wherever the unpacked call would pack: kiln_matmul
 * picks per call (unless the packed dimension is so small that every call
 * reads in place: then there are no panels).
 *
 * The panels depend on the register tile (MR for A, NR for B), which the
 * context's gemm_cpu variant may change (kiln_tuning_set, a tuning file, a
 * test override): the width is recorded; kiln_matmul refuses panels of
 * another width (KILN_ERR_INVALID_STATE) rather than pack at every call
 * unannounced, and the next kiln_pack makes panels of the new width. */
#include "ops_gemm.h"
#include "ops_internal.h"

#include <stdlib.h>

KILN_API kiln_status kiln_packed_create(kiln_context *ctx, kiln_operand role,
                                        const kiln_matrix *src,
                                        kiln_packed **out) {
  static const char fn[] = "kiln_packed_create";
  if (ctx == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: ctx is NULL", fn);
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: out is NULL", fn);
  if (role != KILN_OPERAND_A && role != KILN_OPERAND_B)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: role %d is not a valid kiln_operand", fn, (int)role);
  kiln_status s = kiln__ops_check_desc(fn, "src", src);
  if (s != KILN_OK)
    return s;
  if (src->packed != NULL)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: src.packed is set: a packed matrix is made from a "
                      "matrix in a buffer",
                      fn);
  if ((unsigned)src->layout > KILN_COL_MAJOR ||
      (unsigned)src->trans > KILN_TRANS)
    return kiln__fail(
        KILN_ERR_INVALID_ARGUMENT, "%s: src.%s %d is not a valid %s", fn,
        (unsigned)src->layout > KILN_COL_MAJOR ? "layout" : "trans",
        (unsigned)src->layout > KILN_COL_MAJOR ? (int)src->layout
                                               : (int)src->trans,
        (unsigned)src->layout > KILN_COL_MAJOR ? "kiln_layout" : "kiln_trans");
  s = kiln__ops_check_dtype(fn, "src.dtype", src->dtype, KILN__DT_FLOATS);
  if (s != KILN_OK)
    return s;
  if (src->batch_stride != 0)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: src.batch_stride %zu is not 0: a packed matrix is "
                      "one matrix, shared by every entry of a batch",
                      fn, src->batch_stride);
  if (src->rows == 0 || src->cols == 0 || src->rows > INT32_MAX ||
      src->cols > INT32_MAX)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: src is %zu x %zu: a packed matrix has 1 to "
                      "INT32_MAX rows and columns",
                      fn, src->rows, src->cols);
  size_t opr, opc;
  kiln__gemm_op_dims(src, &opr, &opc);
  /* op(A) is span x k, op(B) k x span. */
  const size_t span = role == KILN_OPERAND_A ? opr : opc;
  const size_t k = role == KILN_OPERAND_A ? opc : opr;
  /* Panels unless every product with this operand reads it in place. */
  const bool panels = kiln__ops_tuning(ctx)->family == KILN_FAMILY_CPU &&
                      !kiln__gemm_use_skinny(span, span, k);
  unsigned width = 0;
  if (panels) {
    s = kiln__gemm_panel_width(ctx, role, &width);
    if (s != KILN_OK)
      return s;
  }
  size_t copy_bytes, panel_floats = 0, panel_bytes = 0;
  if (kiln__mul_overflows(span * k, kiln_dtype_size(src->dtype), &copy_bytes) ||
      (panels &&
       (kiln__mul_overflows(kiln__div_up(span, width) * width, k,
                            &panel_floats) ||
        kiln__mul_overflows(panel_floats, sizeof(float), &panel_bytes))))
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: the packed size of src (%zu x %zu) overflows size_t",
                      fn, src->rows, src->cols);
  kiln_packed *p = calloc(1, sizeof *p);
  if (p == NULL)
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "%s: no memory for %zu bytes", fn, sizeof *p);
  s = kiln_buffer_create(ctx, copy_bytes, KILN_MEM_READ_WRITE, &p->copy);
  if (s == KILN_OK && panels)
    s = kiln_buffer_create(ctx, panel_bytes, KILN_MEM_READ_WRITE, &p->panels);
  if (s != KILN_OK) {
    kiln_buffer_destroy(p->copy);
    free(p);
    return s;
  }
  p->ctx = ctx;
  p->role = role;
  p->shape = (kiln_matrix){.rows = src->rows,
                           .cols = src->cols,
                           .dtype = src->dtype,
                           .layout = src->layout,
                           .trans = src->trans};
  p->width = width;
  p->span = span;
  p->k = k;
  atomic_init(&p->filled, false);
  *out = p;
  return KILN_OK;
}

/* Recorded sequences that use p's buffers (kiln__ops_record_buffer). */
static size_t recordings(const kiln_packed *p) {
  return atomic_load(&p->copy->recordings) +
         (p->panels != NULL ? atomic_load(&p->panels->recordings) : 0);
}

KILN_API kiln_status kiln_packed_destroy(kiln_packed *packed) {
  if (packed == NULL)
    return KILN_OK;
  const size_t recorded = recordings(packed);
  if (recorded > 0)
    return kiln__fail(KILN_ERR_BUSY,
                      "kiln_packed_destroy: recorded sequences still use "
                      "this packed matrix (%zu uses); kiln_sequence_destroy "
                      "them first",
                      recorded);
  kiln_buffer_destroy(packed->copy);
  kiln_buffer_destroy(packed->panels);
  free(packed);
  return KILN_OK;
}

KILN_API kiln_status kiln_packed_get_matrix(const kiln_packed *packed,
                                            kiln_matrix *out) {
  static const char fn[] = "kiln_packed_get_matrix";
  if (packed == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: packed is NULL", fn);
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: out is NULL", fn);
  *out = packed->shape;
  out->packed = packed;
  return KILN_OK;
}

/* p's panels for the context's register tile now: when tuning changed
 * the width since they were made, panels of the new width replace them
 * (GEMMs already enqueued keep reading the old ones, which OpenCL frees
 * once they complete). */
static kiln_status fit_tile(kiln_packed *p) {
  unsigned width = 0;
  kiln_status s = kiln__gemm_panel_width(p->ctx, p->role, &width);
  if (s != KILN_OK || width == p->width)
    return s;
  if (atomic_load(&p->panels->recordings) > 0)
    return kiln__fail(KILN_ERR_BUSY,
                      "kiln_pack: dst's panels must change with the tuned "
                      "register tile, but recorded sequences still use them; "
                      "kiln_sequence_destroy them first");
  size_t floats, bytes;
  if (kiln__mul_overflows(kiln__div_up(p->span, width) * width, p->k,
                          &floats) ||
      kiln__mul_overflows(floats, sizeof(float), &bytes))
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "kiln_pack: the panels of dst (%zu x %zu) overflow "
                      "size_t",
                      p->span, p->k);
  kiln_buffer *panels = NULL;
  s = kiln_buffer_create(p->ctx, bytes, KILN_MEM_READ_WRITE, &panels);
  if (s != KILN_OK)
    return s;
  kiln_buffer_destroy(p->panels);
  p->panels = panels;
  p->width = width;
  atomic_store(&p->filled, false);
  return KILN_OK;
}

KILN_API kiln_status kiln_pack(kiln_queue *queue, const kiln_matrix *src,
                               kiln_packed *dst, size_t num_wait,
                               kiln_event *const *wait_list,
                               kiln_event **out_event) {
  static const char fn[] = "kiln_pack";
  size_t ld = 0;
  kiln_status s = kiln__ops_check_queue(fn, queue);
  if (s == KILN_OK)
    s = kiln__ops_check_matrix(fn, "src", src, &ld);
  if (s == KILN_OK && dst == NULL)
    s = kiln__fail(KILN_ERR_NULL_POINTER, "%s: dst is NULL", fn);
  if (s != KILN_OK)
    return s;
  if (dst->ctx != queue->ctx)
    return kiln__fail(KILN_ERR_WRONG_CONTEXT,
                      "%s: dst belongs to another context than queue", fn);
  s = kiln__packed_check_shape(fn, "src", src, dst);
  if (s == KILN_OK && src->batch_stride != 0)
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: src.batch_stride %zu is not 0: a packed matrix is one "
                   "matrix",
                   fn, src->batch_stride);
  /* Every element of src as stored lies in its buffer. */
  const bool row = src->layout == KILN_ROW_MAJOR;
  const size_t lines = row ? src->rows : src->cols;
  const size_t len = row ? src->cols : src->rows;
  const size_t extent = (lines - 1) * ld + len; /* ld <= ... checked below */
  if (s == KILN_OK && (lines - 1) > 0 && ld > (SIZE_MAX - len) / (lines - 1))
    s = kiln__fail(KILN_ERR_INVALID_SIZE,
                   "%s: the extent of src (%zu x %zu, ld %zu) overflows size_t",
                   fn, src->rows, src->cols, ld);
  if (s == KILN_OK)
    s = kiln__ops_check_in(fn, queue, "src", src->buffer, src->offset, extent,
                           src->dtype);
  if (s != KILN_OK)
    return s;
  if (dst->panels != NULL)
    s = fit_tile(dst);
  /* A recording keeps what it writes alive. */
  if (s == KILN_OK)
    s = kiln__ops_record_buffer(queue, dst->copy);
  if (s == KILN_OK && dst->panels != NULL)
    s = kiln__ops_record_buffer(queue, dst->panels);
  if (s != KILN_OK)
    return s;
  struct kiln__op op;
  s = kiln__op_begin(&op, queue, fn, num_wait, wait_list, out_event);
  if (s != KILN_OK)
    return s;
  const double esize = (double)kiln_dtype_size(src->dtype);
  kiln__op_describe(&op, "pack", src->dtype, 2,
                    (size_t[]){src->rows, src->cols},
                    (double)src->rows * (double)src->cols *
                        (2.0 * esize + (dst->panels != NULL ? 4.0 : 0.0)),
                    0.0);
  s = kiln__gemm_copy_lines(&op, src->dtype, src->buffer->cl, src->offset, ld,
                            lines, len, dst->copy->cl);
  if (s == KILN_OK && dst->panels != NULL) {
    /* op(X) in the canonical form of ops_gemm.c (C row-major): element
     * (r, c) at offset + r * rs + c * cs. */
    const bool unit_cols = row == (src->trans == KILN_NO_TRANS);
    const struct gemm_operand x = {
        src->buffer->cl,    src->offset,        0,
        unit_cols ? ld : 1, unit_cols ? 1 : ld, false};
    s = kiln__gemm_pack_panels(&op, dst->role, src->dtype, &x, dst->span,
                               dst->k, dst->panels->cl);
  }
  s = kiln__op_end(&op, s, out_event);
  if (s == KILN_OK)
    atomic_store(&dst->filled, true);
  return s;
}
