/* One training step of examples/cnn.c's network (--model cnn) against
 * PyTorch in float64 (tests/fixtures/cnn_step, from
 * make_cnn_step_fixture.py), on every device: parameters and a batch of 4
 * images that both sides compute from one formula, kiln's own dropout mask
 * (the script replays Philox4x32-10), batch statistics; the loss, the
 * logits and every parameter's gradient.
 *
 * Tolerances, normwise per tensor (max |kiln - ref| / max |ref|): f32
 * rounding of independent terms adds like a random walk, sqrt(k) u for a
 * sum of k terms (u = 2^-24; Higham 2.8); the longest sums are fc1's 9216
 * terms (6e-6) and the batch statistics over 4 x 26 x 26 = 2704 terms, and
 * batch normalisation divides by the batch's deviation, which amplifies
 * the input's absolute error where a channel varies little. Five layers
 * deep: 1e-4 for the forward pass and 3e-4 for the gradients (the backward
 * pass is twice as deep and reduces over the batch once more). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

#include "../examples/cnn.h"

#ifndef CNN_FIXTURES
#error "CNN_FIXTURES must name tests/fixtures/cnn_step"
#endif

enum { B = 4, D = 4, SEED = 7, INPUT_OFFSET = 1 << 24 };
static const double TOL_FORWARD = 1e-4, TOL_GRAD = 3e-4;

/* The stream both sides draw from: exact in f32. */
static float u(uint64_t i) {
  uint32_t w = (uint32_t)(i * 2654435761u);
  return (float)(w >> 8) * 0x1p-24f;
}

static const struct {
  const char *name;
  float scale, centre;
} TENSORS[] = {{"w1", 0x1p-1f, 0}, {"g1", 0x1p-2f, 1},  {"be1", 0x1p-3f, 0},
               {"w2", 0x1p-4f, 0}, {"g2", 0x1p-2f, 1},  {"be2", 0x1p-3f, 0},
               {"fc1w", 0x1p-6f, 0}, {"fc1b", 0x1p-6f, 0},
               {"fc2w", 1.0f, 0},  {"fc2b", 0x1p-2f, 0}};
enum { NT = sizeof TENSORS / sizeof TENSORS[0] };

static double normwise(const float *got, const double *ref, size_t n) {
  double diff = 0.0, top = 0.0;
  for (size_t i = 0; i < n; i++) {
    diff = fmax(diff, fabs((double)got[i] - ref[i]));
    top = fmax(top, fabs(ref[i]));
  }
  return top > 0 ? diff / top : diff;
}

static void test_cnn_step(void **state) {
  (void)state;
  FILE *f = fopen(CNN_FIXTURES "/cnn_step_expected.bin", "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  const size_t count = (size_t)ftell(f) / sizeof(double);
  fseek(f, 0, SEEK_SET);
  double *ref = malloc(count * sizeof *ref);
  assert_non_null(ref);
  assert_int_equal(fread(ref, sizeof *ref, count, f), count);
  fclose(f);
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_queue *q;
    model *mm;
    kiln_test_open(d, &ctx, &q);
    assert_kiln_ok(cnn_kind.create(ctx, q, B, D, KILN_F32, &mm));
    assert_kiln_ok(cnn_kind.init(mm, SEED));
    cnn *m = (cnn *)mm;
    assert_int_equal(count, 1 + B * 10 + mm->nparams);
    /* The tensors' offsets, in cnn.h's order. */
    const size_t at[NT + 1] = {m->w1,     m->g1,     m->be1,    m->w2,
                               m->g2,     m->be2,    m->fc1.w,  m->fc1.b,
                               m->fc2.w,  m->fc2.b,  mm->nparams};
    float *host = malloc(mm->nparams * sizeof *host);
    float x[B * 784];
    uint32_t labels[B];
    assert_non_null(host);
    for (int t = 0; t < NT; t++)
      for (size_t i = at[t]; i < at[t + 1]; i++)
        host[i] = (u(i) - 0.5f) * TENSORS[t].scale + TENSORS[t].centre;
    for (size_t i = 0; i < B * 784; i++)
      x[i] = u(INPUT_OFFSET + i);
    for (uint32_t i = 0; i < B; i++)
      labels[i] = (7 * i + 3) % 10;
    kiln_buffer *xb, *lb, *loss;
    assert_kiln_ok(kiln_buffer_create(ctx, sizeof x, KILN_MEM_READ_WRITE, &xb));
    assert_kiln_ok(
        kiln_buffer_create(ctx, sizeof labels, KILN_MEM_READ_WRITE, &lb));
    assert_kiln_ok(kiln_buffer_create(ctx, 4, KILN_MEM_READ_WRITE, &loss));
    assert_kiln_ok(kiln_buffer_write_sync(
        q, host, range_of(mm->params, 0, mm->nparams, KILN_F32)));
    assert_kiln_ok(
        kiln_buffer_write_sync(q, x, range_of(xb, 0, B * 784, KILN_F32)));
    assert_kiln_ok(
        kiln_buffer_write_sync(q, labels, range_of(lb, 0, B, KILN_U32)));
    const float zero = 0.0f;
    assert_kiln_ok(kiln_fill(q, range_of(loss, 0, 1, KILN_F32), &zero, 0, NULL,
                             NULL));
    assert_kiln_ok(
        cnn_kind.gradients(mm, B, xb, 0, lb, 0, loss, 0, 0, NULL));
    float l, logits[B * 10];
    assert_kiln_ok(kiln_buffer_read_sync(q, range_of(loss, 0, 1, KILN_F32), &l));
    assert_kiln_ok(kiln_buffer_read_sync(
        q, range_of(mm->logits, 0, B * 10, KILN_F32), logits));
    const double e_loss = fabs(l - ref[0]) / fabs(ref[0]);
    const double e_logits = normwise(logits, ref + 1, B * 10);
    print_message("# device %zu: loss %.7f (PyTorch %.7f, rel. %.1e), logits "
                  "normwise %.1e\n", d, (double)l, ref[0], e_loss, e_logits);
    assert_true(e_loss <= TOL_FORWARD);
    assert_true(e_logits <= TOL_FORWARD);
    assert_kiln_ok(kiln_buffer_read_sync(
        q, range_of(mm->grads, 0, mm->nparams, KILN_F32), host));
    const double *gref = ref + 1 + B * 10;
    double worst = 0.0;
    for (int t = 0; t < NT; t++) {
      const double e =
          normwise(host + at[t], gref + at[t], at[t + 1] - at[t]);
      if (e > TOL_GRAD)
        fail_msg("device %zu: gradient of %s: normwise %.2e > %.0e", d,
                 TENSORS[t].name, e, TOL_GRAD);
      worst = fmax(worst, e);
    }
    print_message("# device %zu: gradients, worst tensor normwise %.1e\n", d,
                  worst);
    free(host);
    assert_kiln_ok(kiln_buffer_destroy(xb));
    assert_kiln_ok(kiln_buffer_destroy(lb));
    assert_kiln_ok(kiln_buffer_destroy(loss));
    cnn_kind.destroy(mm);
    kiln_test_close(ctx, q);
  }
  free(ref);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_cnn_step)};
  return KILN_TEST_RUN("cnn_step", tests, true);
}
