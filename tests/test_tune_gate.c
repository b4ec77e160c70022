/* kiln tune's correctness gate (tools/tune/tune_gate.c) and search
 * (tune_search.c), driven through their test hooks: a candidate whose
 * results are made wrong (one element of C changed after its GEMM) and
 * whose timing is made the fastest by far must be rejected by the gate,
 * counted, and never become the best (so never be saved); the control run,
 * the same candidate with correct results, does become the best, which
 * shows that only the gate stood in its way. The search is exhaustive over
 * one knob, SWITCH (5 values), so that it is short and deterministic: the
 * switch point is the host's, so every candidate is the one program. Contexts
 * force the GPU family, as the GEMM tests do on CPUs. */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "tune.h"

struct hook_state {
  char wrong[KILN_TUNING_TEXT_CAPACITY]; /* the injected candidate */
  bool corrupt;                          /* make its results wrong */
  int corrupted;                         /* times it was made wrong */
  int timed; /* times it was timed: only after passing the gate */
};

static void after_gemm(void *user, const char *params, kiln_queue *q,
                       kiln_buffer *c, size_t count) {
  struct hook_state *h = user;
  if (!h->corrupt || strcmp(params, h->wrong) != 0)
    return;
  float v;
  assert_kiln_ok(kiln_buffer_read_sync(q, c, (count / 2) * 4, 4, &v));
  v = v + 0.25f;
  assert_kiln_ok(kiln_buffer_write_sync(q, c, (count / 2) * 4, 4, &v));
  h->corrupted++;
}

static double time_scale(void *user, const char *params) {
  struct hook_state *h = user;
  if (strcmp(params, h->wrong) != 0)
    return 1.0;
  h->timed++;
  return 1e-6;
}

static void search(bool corrupt, tune_result *r, struct hook_state *h) {
  kiln_context *ctx = NULL;
  kiln_queue *q = NULL;
  kiln_context_options opts = {.profile = "nvidia"};
  assert_kiln_ok(kiln_context_create(kiln_test_device(0), &opts, &ctx));
  assert_kiln_ok(kiln_queue_create(ctx, 0, &q));
  kiln_tuning_info info;
  assert_kiln_ok(kiln_tuning_set(ctx, "gemm", NULL));
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info));
  /* The wrong candidate: the default (SWITCH=0, last) with SWITCH=64. */
  char *sw = strstr(info.params, "SWITCH=0");
  assert_non_null(sw);
  assert_int_equal(sw[8], '\0');
  snprintf(h->wrong, sizeof h->wrong, "%.*sSWITCH=64",
           (int)(sw - info.params), info.params);
  assert_kiln_ok(kiln_tuning_check(ctx, "gemm", h->wrong, NULL, 0));
  h->corrupt = corrupt;
  h->corrupted = 0;
  h->timed = 0;
  tune_hooks hooks = {after_gemm, time_scale, h, NULL};
  tune_options o;
  memset(&o, 0, sizeof o);
  o.sizes[0][0] = o.sizes[0][1] = o.sizes[0][2] = 64;
  o.nsizes = 1;
  o.budget_s = 600;
  o.seed = 1;
  o.exhaustive_max = 16;
  o.knobs[0] = "SWITCH";
  o.nknobs = 1;
  o.hooks = &hooks;
  char why[512];
  if (!tune_gemm(ctx, q, &o, r, why, sizeof why))
    fail_msg("tune_gemm: %s", why);
  assert_true(r->exhaustive);
  assert_int_equal(r->tried + r->skipped, 4); /* the other SWITCH values */
  /* What the search leaves set is its best. */
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info));
  assert_string_equal(info.source, "set");
  assert_string_equal(info.params, r->best_params);
  assert_kiln_ok(kiln_tuning_set(ctx, "gemm", NULL));
  assert_kiln_ok(kiln_queue_destroy(q));
  assert_kiln_ok(kiln_context_destroy(ctx));
}

static void test_gate_rejects_wrong(void **state) {
  (void)state;
  struct hook_state h;
  tune_result r;
  search(true, &r, &h);
  assert_true(h.corrupted >= 1);
  assert_true(r.rejected >= 1);
  assert_true(r.rejected_gate >= 1);
  assert_string_not_equal(r.best_params, h.wrong);
  assert_int_equal(h.timed, 0); /* stopped by the gate, never timed */
}

static void test_control_wins_when_correct(void **state) {
  (void)state;
  struct hook_state h;
  tune_result r;
  search(false, &r, &h);
  assert_int_equal(h.corrupted, 0);
  assert_true(h.timed >= 1);
  assert_string_equal(r.best_params, h.wrong);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gate_rejects_wrong),
      cmocka_unit_test(test_control_wins_when_correct),
  };
  return KILN_TEST_RUN("tune_gate", tests, true);
}
