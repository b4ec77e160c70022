/* examples/gpt.c against PyTorch in float64 (tests/fixtures/gpt, written by
 * make_gpt_fixtures.py), on every device, as llm.c's test_gpt2.c checks its
 * trainer: from the same llm.c checkpoint and batch, the loss and logits of
 * the forward pass, every parameter's gradient, and the losses of 10 AdamW
 * steps. Also: a checkpoint saved by gpt_save loads back bit for bit, and
 * truncated, foreign and mismatched checkpoints are refused with a reason.
 *
 * Tolerances, normwise (max |kiln - ref| / max |ref| per tensor) since f32
 * rounding errors scale with a tensor's largest terms. Each f32 operation
 * adds a relative error of at most u = 2^-24; the longest sums are dot
 * products of 4C = 128 terms, about 13 GEMM-like steps deep (6 per layer
 * over L = 2 layers, and the output projection). Rounding errors of
 * independent terms add like a random walk (Higham, Accuracy and Stability
 * of Numerical Algorithms, 2.8): about sqrt(128) u = 7e-7 per sum, 13 deep:
 * 1e-5 for the forward pass; the backward pass runs the chain twice (2e-5);
 * a step's loss after 10 AdamW updates of lr 1e-4 carries the forward's
 * error (1e-5). The worst-case bound (128 x 13 u = 1e-4) is 10 times
 * looser; on PoCL the errors measure 2e-7 (logits) and 5e-7 (gradients).
 * In bf16 (--precision bf16) every GEMM and the attention read operands
 * rounded to bf16, u = 2^-9 each: two per product, 13 deep, a random walk
 * of about sqrt(2 x 13) 2^-9 = 1e-2 for the forward pass, twice that for
 * the gradients; the mean loss averages the logits' errors over 22 rows
 * (1e-3). Measured: logits 2e-3, gradients 8e-3, loss 1e-5.
 * llm.c uses 1e-2 on logits and loss and 2e-2 on gradients. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#include "../examples/gpt.h"

#include "gpt_test_util.h"

enum { B = GPT_B, T = GPT_T, STEPS = GPT_STEPS };
static const double TOL_FORWARD = 1e-5, TOL_GRAD = 2e-5, TOL_LOSS = 1e-5;
static const double TOL_BF16_FORWARD = 1e-2, TOL_BF16_GRAD = 2e-2,
                    TOL_BF16_LOSS = 1e-3;

static double normwise(const float *got, const double *ref, size_t n) {
  double diff = 0.0, top = 0.0;
  for (size_t i = 0; i < n; i++) {
    diff = fmax(diff, fabs((double)got[i] - ref[i]));
    top = fmax(top, fabs(ref[i]));
  }
  return top > 0 ? diff / top : diff;
}

/* The comparison in dtype dt with its tolerances. */
static void against_pytorch(kiln_dtype dt, double tol_forward,
                            double tol_grad, double tol_loss) {
  size_t count;
  double *ref = gpt_read_doubles("gpt_tiny_expected.bin", &count);
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_queue *q;
    gpt *m;
    gpt_open_model(d, dt, &ctx, &q, &m);
    const size_t V = m->cfg.vocab;
    assert_int_equal(count, 1 + B * T * V + m->nparams + STEPS);
    assert_kiln_ok(gpt_forward(m, B, T, true));
    assert_kiln_ok(gpt_backward(m, B, T));
    float *host = malloc((B * T * V + m->nparams) * sizeof *host);
    assert_non_null(host);
    size_t off;
    kiln_buffer *logits = gpt_logits(m, &off);
    assert_kiln_ok(kiln_buffer_read_sync(
        q, &(kiln_range){logits, off, B * T * V, KILN_F32}, host));
    const double loss = gpt_read_scalar(m, 0);
    const double e_loss = fabs(loss - ref[0]) / fabs(ref[0]);
    const double e_logits = normwise(host, ref + 1, B * T * V);
    print_message("# device %zu, %s: loss %.7f (PyTorch %.7f, rel. error "
                  "%.1e), logits normwise %.1e\n", d, kiln_dtype_name(dt),
                  loss, ref[0], e_loss, e_logits);
    assert_true(e_loss <= tol_forward);
    assert_true(e_logits <= tol_forward);
    assert_kiln_ok(kiln_buffer_read_sync(
        q, &(kiln_range){m->grads, 0, m->nparams, KILN_F32}, host));
    const double *gref = ref + 1 + B * T * V;
    double worst = 0.0;
    for (int t = 0; t < GPT_NUM_TENSORS; t++) {
      double e = normwise(host + m->offsets[t], gref + m->offsets[t],
                          m->sizes[t]);
      if (e > tol_grad)
        fail_msg("device %zu, %s: gradient of tensor %d differs: normwise "
                 "%.2e > %.1e", d, kiln_dtype_name(dt), t, e, tol_grad);
      worst = fmax(worst, e);
    }
    print_message("# device %zu, %s: gradients, worst tensor normwise %.1e\n",
                  d, kiln_dtype_name(dt), worst);
    /* Ten AdamW steps on the same batch: the loss before each. */
    const double *lref = gref + m->nparams;
    double l[STEPS];
    gpt_adamw_losses(m, l);
    for (int s = 0; s < STEPS; s++) {
      const double e = fabs(l[s] - lref[s]) / fabs(lref[s]);
      if (e > tol_loss)
        fail_msg("device %zu, %s: step %d loss %.8f, PyTorch %.8f (rel. "
                 "%.1e)", d, kiln_dtype_name(dt), s, l[s], lref[s], e);
    }
    print_message("# device %zu, %s: 10 AdamW steps' losses agree within "
                  "%.0e\n", d, kiln_dtype_name(dt), tol_loss);
    free(host);
    gpt_destroy(m);
    kiln_test_close(ctx, q);
  }
  free(ref);
}

static void test_against_pytorch(void **state) {
  (void)state;
  against_pytorch(KILN_F32, TOL_FORWARD, TOL_GRAD, TOL_LOSS);
}

static void test_against_pytorch_bf16(void **state) {
  (void)state;
  against_pytorch(KILN_BF16, TOL_BF16_FORWARD, TOL_BF16_GRAD, TOL_BF16_LOSS);
}

/* Save, reload, compare bits; then damaged files. */
static void test_checkpoints(void **state) {
  (void)state;
  char tmpdir[] = "/tmp/kiln-gpt-XXXXXX", path[4200], err[4400], src[4096];
  assert_non_null(mkdtemp(tmpdir));
  snprintf(path, sizeof path, "%s/saved.ckpt", tmpdir);
  gpt_fixture_path(src, sizeof src, "gpt_tiny.ckpt");
  kiln_context *ctx;
  kiln_queue *q;
  gpt *m;
  gpt_open_model(0, KILN_F32, &ctx, &q, &m);
  assert_int_equal(gpt_save(m, path, err, sizeof err), 0);
  FILE *a = fopen(src, "rb"), *b = fopen(path, "rb");
  assert_non_null(a);
  assert_non_null(b);
  int ca, cb;
  size_t n = 0;
  do {
    ca = fgetc(a);
    cb = fgetc(b);
    assert_int_equal(ca, cb);
    n++;
  } while (ca != EOF);
  fclose(a);
  fclose(b);
  assert_true(n > 1024);
  /* Truncated by one float. */
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fclose(f);
  assert_int_equal(truncate(path, size - 4), 0);
  assert_int_equal(gpt_load(m, path, err, sizeof err), -1);
  assert_non_null(strstr(err, "truncated"));
  /* A foreign file (the token file) and a header of another model. */
  gpt_fixture_path(src, sizeof src, "gpt_tiny_tokens.bin");
  assert_int_equal(gpt_load(m, src, err, sizeof err), -1);
  assert_non_null(strstr(err, "not an llm.c GPT-2 checkpoint"));
  gpt_config other = m->cfg;
  other.layers = 3;
  gpt *m3;
  assert_kiln_ok(gpt_create(ctx, q, &other, B, T, KILN_F32, &m3));
  gpt_fixture_path(src, sizeof src, "gpt_tiny.ckpt");
  assert_int_equal(gpt_load(m3, src, err, sizeof err), -1);
  assert_non_null(strstr(err, "is not the one asked for"));
  gpt_destroy(m3);
  gpt_destroy(m);
  kiln_test_close(ctx, q);
  remove(path);
  rmdir(tmpdir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_pytorch),
      cmocka_unit_test(test_against_pytorch_bf16),
      cmocka_unit_test(test_checkpoints),
  };
  return KILN_TEST_RUN("gpt_reference", tests, true);
}
