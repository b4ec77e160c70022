/* examples/gpt.c on every device against every other: the tiny GPT-2 of
 * tests/fixtures/gpt takes the fixture's 10 AdamW steps on each device in
 * the suite's environment, and the loss sequences of every two devices must
 * agree (PoCL and rusticl where RUSTICL_ENABLE=llvmpipe shows rusticl, as
 * in CI's rusticl stage; meson runs this test with KILN_TEST_DEVICE=all so
 * that stage's KILN_TEST_DEVICE=rusticl does not hide PoCL). With one device
 * there is no pair: its sequence is compared with PyTorch's float64 one
 * from the fixture instead, so the check never turns into a skip.
 *
 * Tolerances, relative per step. A step's loss carries the f32 rounding of
 * that step's forward pass: gpt_reference's estimate for this model is
 * 1e-5 (dot products of up to 128 terms, sqrt(128) u = 7e-7 each as a
 * random walk, u = 2^-24, about 13 of them deep). The earlier updates add
 * almost nothing: AdamW moves each weight by lr m/(sqrt(v) + eps), at most
 * about lr = 1e-4 whatever the gradient's size, so a gradient's rounding
 * (2e-5 relative) shifts a move by 2e-9; only an element whose gradient is
 * itself at rounding level can move the other way, and its effect on the
 * loss is that gradient times 2 lr. Two devices (different compilers,
 * vector widths and summation orders) round independently: their losses
 * differ by the difference of two independent random walks of that size,
 * sqrt(2) x 1e-5. Against float64, one walk: 1e-5. In bf16 the GEMMs'
 * and the attention's operands are rounded to bf16 (u = 2^-9; 1e-3 for the
 * loss, as gpt_reference derives); both devices round the same f32 value
 * the same way, so their bf16 errors are independent only where their f32
 * inputs already differ, and sqrt(2) x 1e-3 bounds the pair from above. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

#include "../examples/gpt.h"
#include "gpt_test_util.h"

static const double TOL_LOSS = 1e-5, TOL_BF16_LOSS = 1e-3;

static double worst_relative(const double *a, const double *ref) {
  double worst = 0.0;
  for (int s = 0; s < GPT_STEPS; s++)
    worst = fmax(worst, fabs(a[s] - ref[s]) / fabs(ref[s]));
  return worst;
}

static void devices_agree(kiln_dtype dt, double tol) {
  const size_t n = kiln_test_device_count();
  double *losses = malloc(n * GPT_STEPS * sizeof *losses);
  assert_non_null(losses);
  size_t ref_at = 0;
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_queue *q;
    gpt *m;
    gpt_open_model(d, dt, &ctx, &q, &m);
    /* The fixture: loss, logits, gradients, then the step losses. */
    ref_at = 1 + GPT_B * GPT_T * m->cfg.vocab + m->nparams;
    gpt_adamw_losses(m, losses + d * GPT_STEPS);
    gpt_destroy(m);
    kiln_test_close(ctx, q);
    print_message("# %s on %s: losses %.7f .. %.7f\n", kiln_dtype_name(dt),
                  kiln_device_get_info(kiln_test_device(d))->name,
                  losses[d * GPT_STEPS], losses[d * GPT_STEPS + GPT_STEPS - 1]);
  }
  if (n >= 2) {
    const double pair_tol = sqrt(2.0) * tol;
    for (size_t a = 0; a < n; a++)
      for (size_t b = a + 1; b < n; b++) {
        const double e = worst_relative(losses + a * GPT_STEPS,
                                        losses + b * GPT_STEPS);
        const char *na = kiln_device_get_info(kiln_test_device(a))->name;
        const char *nb = kiln_device_get_info(kiln_test_device(b))->name;
        print_message("# %s: %s and %s agree to %.1e (tolerance %.1e)\n",
                      kiln_dtype_name(dt), na, nb, e, pair_tol);
        if (!(e <= pair_tol))
          fail_msg("%s: the losses of %s and %s differ by %.2e relative, "
                   "more than %.1e", kiln_dtype_name(dt), na, nb, e, pair_tol);
      }
  } else {
    size_t count;
    double *ref = gpt_read_doubles("gpt_tiny_expected.bin", &count);
    assert_int_equal(count, ref_at + GPT_STEPS);
    const double e = worst_relative(losses, ref + ref_at);
    const char *name = kiln_device_get_info(kiln_test_device(0))->name;
    print_message("# %s: one device (%s): against PyTorch float64, %.1e "
                  "(tolerance %.1e)\n", kiln_dtype_name(dt), name, e, tol);
    free(ref);
    if (!(e <= tol))
      fail_msg("%s: the only device, %s, differs from PyTorch float64 by "
               "%.2e relative, more than %.1e", kiln_dtype_name(dt), name, e,
               tol);
  }
  free(losses);
}

static void test_devices_agree_f32(void **state) {
  (void)state;
  devices_agree(KILN_F32, TOL_LOSS);
}

static void test_devices_agree_bf16(void **state) {
  (void)state;
  devices_agree(KILN_BF16, TOL_BF16_LOSS);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_devices_agree_f32),
      cmocka_unit_test(test_devices_agree_bf16),
  };
  return KILN_TEST_RUN("gpt_devices", tests, true);
}
