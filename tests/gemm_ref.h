/* The float64 host reference of a GEMM's product, shared by
 * gemm_test_util.h (test_op_gemm.c and the space tests) and
 * test_op_gemm_packed.c: op(A) op(B) a row at a time, each element summed
 * over p in increasing order, with the sum of the terms' magnitudes that
 * the tolerances are derived from. Static functions in a header, like
 * op_test_util.h. */
#ifndef KILN_GEMM_REF_H
#define KILN_GEMM_REF_H

#include <math.h>

#include "op_test_util.h"

/* An operand as the reference reads it: data of dtype from element
 * offset off, stored in layout with leading dimension ld, op() by trans. */
struct gemm_ref_operand {
  kiln_dtype dtype;
  const void *data;
  size_t off;
  kiln_layout layout;
  size_t ld;
  kiln_trans trans;
};

/* Element (r, c) of a matrix stored in layout with leading dimension ld. */
static size_t gemm_ref_index(kiln_layout layout, size_t r, size_t c,
                             size_t ld) {
  return layout == KILN_ROW_MAJOR ? r * ld + c : c * ld + r;
}

/* op(X)(r, c). */
static double gemm_ref_get(const struct gemm_ref_operand *x, size_t r,
                           size_t c) {
  return util_get(x->dtype, x->data,
                  x->off + (x->trans == KILN_TRANS
                                ? gemm_ref_index(x->layout, c, r, x->ld)
                                : gemm_ref_index(x->layout, r, c, x->ld)));
}

/* Row i of op(A) op(B) for columns j < n over p < k: ref[j] the sum of
 * op(A)(i, p) op(B)(p, j), mag[j] the sum of their magnitudes (k 0: zeros,
 * reading nothing). */
static void gemm_ref_row(const struct gemm_ref_operand *a,
                         const struct gemm_ref_operand *b, size_t i, size_t n,
                         size_t k, double *ref, double *mag) {
  for (size_t j = 0; j < n; j++)
    ref[j] = mag[j] = 0.0;
  for (size_t p = 0; p < k; p++) {
    const double av = gemm_ref_get(a, i, p);
    for (size_t j = 0; j < n; j++) {
      const double bv = gemm_ref_get(b, p, j);
      ref[j] += av * bv;
      mag[j] += fabs(av * bv);
    }
  }
}

#endif
