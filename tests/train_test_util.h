/* What the training-op tests (test_op_train_*.c) share beyond
 * op_test_util.h: running a body on every device under each kernel family
 * (the device's own profile, then the other family forced through a
 * profile override, as test_op_gemm does), and float64 finite
 * differences. Header-only. */
#ifndef KILN_TRAIN_TEST_UTIL_H
#define KILN_TRAIN_TEST_UTIL_H

#include <stdio.h>

#include "core/internal.h"
#include "op_test_util.h"

/* Operand descriptors for the calls (kiln/kiln_tensor.h), as pointers to
 * compound literals that live until the end of the enclosing block: n
 * elements of dt from element off of b, and a packed row-major rows x cols
 * matrix of dt from element off of b. */
#define RANGE(b, off, n, dt) (&(kiln_range){(b), (off), (n), (dt)})
#define MATRIX(b, off, r, c, dt)                                               \
  (&(kiln_matrix){.buffer = (b),                                               \
                  .offset = (off),                                             \
                  .rows = (r),                                                 \
                  .cols = (c),                                                 \
                  .dtype = (dt)})
/* RANGE, or NULL (an absent optional operand) when b is NULL. */
#define OPT_RANGE(b, off, n, dt) ((b) != NULL ? RANGE(b, off, n, dt) : NULL)
/* The vector length kiln_binary_broadcast takes for broadcast bc. */
#define BCAST_COUNT(bc, rows, cols)                                            \
  ((bc) == KILN_BROADCAST_ROW ? (cols) : (rows))

/* Run body(ctx, q, profile) on every device, first with its own profile,
 * then with the other kernel family forced ("nvidia" for a CPU-family
 * profile, "pocl" for a GPU-family one). */
static inline void train_each_profile(void (*body)(kiln_context *ctx,
                                                   kiln_queue *q,
                                                   const char *profile)) {
  FOR_EACH_TEST_DEVICE(d) {
    for (int pass = 0; pass < 2; pass++) {
      kiln_context *ctx = NULL;
      kiln_queue *q = NULL;
      kiln_test_open_family(d, pass == 1, &ctx, &q);
      body(ctx, q, kiln_context_get_profile(ctx));
      kiln_test_close(ctx, q);
    }
  }
}

/* Central difference of f at x in double, step scaled to x. */
static inline double train_fd(double (*f)(double), double x) {
  double h = 1e-5 * (1 + fabs(x));
  return (f(x + h) - f(x - h)) / (2 * h);
}

/* Finite differences of f at every element of x (n of them), in double. */
static inline void train_fd_grad(double (*f)(const double *), double *x,
                                 size_t n, double *g) {
  for (size_t i = 0; i < n; i++) {
    double keep = x[i], h = 1e-6 * (1 + fabs(keep));
    x[i] = keep + h;
    double fp = f(x);
    x[i] = keep - h;
    double fm = f(x);
    x[i] = keep;
    g[i] = (fp - fm) / (2 * h);
  }
}

/* A host array of count labels in [0, classes) as u32 or i32. */
static inline void *train_labels(kiln_dtype dt, size_t count, size_t classes,
                                 uint32_t seed) {
  uint32_t *p = malloc((count ? count : 1) * 4);
  assert_non_null(p);
  uint32_t st = seed ? seed : 1;
  for (size_t i = 0; i < count; i++) {
    st ^= st << 13;
    st ^= st >> 17;
    st ^= st << 5;
    p[i] = (uint32_t)(st % classes);
  }
  (void)dt; /* the same bits serve both label types */
  return p;
}

#endif
