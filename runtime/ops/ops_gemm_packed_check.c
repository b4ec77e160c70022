/* Operands that stay packed: the checks of their use, by kiln_matmul
 * (ops_gemm.c) and kiln_pack (ops_gemm_packed.c, which makes them). Apart
 * from both so that calls flow one way: the GEMM entry resolves a packed
 * operand here, and packing runs the GEMM module's kernels. */
#include "ops_gemm.h"
#include "ops_internal.h"

static const char *role_name(kiln_operand role) {
  return role == KILN_OPERAND_A ? "KILN_OPERAND_A" : "KILN_OPERAND_B";
}

static const char *layout_name(kiln_layout layout) {
  return layout == KILN_ROW_MAJOR ? "row-major" : "column-major";
}

/* x (named what) has p's shape, dtype, layout and trans:
 * KILN_ERR_SHAPE_MISMATCH naming both when not. */
kiln_status kiln__packed_check_shape(const char *fn, const char *what,
                                     const kiln_matrix *x,
                                     const kiln_packed *p) {
  const kiln_matrix *y = &p->shape;
  if (x->rows == y->rows && x->cols == y->cols && x->dtype == y->dtype &&
      x->layout == y->layout && x->trans == y->trans)
    return KILN_OK;
  return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                    "%s: %s (%zu x %zu %s, %s%s) and the packed matrix (%zu x "
                    "%zu %s, %s%s) disagree: a packed matrix is used with the "
                    "shape, dtype, layout and trans it was created with",
                    fn, what, x->rows, x->cols, kiln_dtype_name(x->dtype),
                    layout_name(x->layout),
                    x->trans == KILN_TRANS ? ", transposed" : "", y->rows,
                    y->cols, kiln_dtype_name(y->dtype), layout_name(y->layout),
                    y->trans == KILN_TRANS ? ", transposed" : "");
}

/* p's panels still fit the context's register tile. */
kiln_status kiln__packed_check_tile(const char *fn, const char *what,
                                    const kiln_packed *p) {
  if (p->panels == NULL)
    return KILN_OK;
  unsigned width = 0;
  kiln_status s = kiln__gemm_panel_width(p->ctx, p->role, &width);
  if (s != KILN_OK)
    return s;
  if (width != p->width)
    return kiln__fail(
        KILN_ERR_INVALID_STATE,
        "%s: %s was packed for panels of %s %u, but the context's gemm_cpu "
        "tuning now has %s %u: kiln_pack packs it again for the new tile",
        fn, what, p->role == KILN_OPERAND_A ? "MR" : "NR", p->width,
        p->role == KILN_OPERAND_A ? "MR" : "NR", width);
  return KILN_OK;
}

kiln_status kiln__packed_resolve(const char *fn, const char *what,
                                 const kiln_queue *queue, const kiln_matrix *x,
                                 kiln_operand role, kiln_matrix *out,
                                 const kiln_packed **packed) {
  *packed = NULL;
  kiln_status s = kiln__ops_check_desc(fn, what, x);
  if (s != KILN_OK)
    return s;
  *out = *x;
  const kiln_packed *p = x->packed;
  if (p == NULL)
    return KILN_OK;
  if (p->ctx != queue->ctx)
    return kiln__fail(KILN_ERR_WRONG_CONTEXT,
                      "%s: %s.packed belongs to another context than queue", fn,
                      what);
  if (p->role != role)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s.packed was created as %s, not as %s", fn, what,
                      role_name(p->role), role_name(role));
  const char *set = x->buffer != NULL   ? "buffer"
                    : x->offset != 0    ? "offset"
                    : x->ld != 0        ? "ld"
                    : x->batch_stride   ? "batch_stride"
                                        : NULL;
  if (set != NULL)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s.%s is set beside %s.packed: a packed operand has "
                      "buffer NULL and offset, ld and batch_stride 0 "
                      "(kiln_packed_get_matrix)",
                      fn, what, set, what);
  s = kiln__packed_check_shape(fn, what, x, p);
  if (s == KILN_OK)
    s = kiln__packed_check_tile(fn, what, p);
  if (s == KILN_OK && !atomic_load(&p->filled))
    s = kiln__fail(KILN_ERR_INVALID_STATE,
                   "%s: %s.packed holds no data yet: kiln_pack fills it", fn,
                   what);
  if (s != KILN_OK)
    return s;
  out->packed = NULL;
  out->buffer = p->copy;
  *packed = p;
  return KILN_OK;
}
