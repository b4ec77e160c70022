/* kiln tune's correctness gate (tools/tune/tune_op_gemm.c) and the
 * library's search (kiln_tuning_search, runtime/tune/search.c) that it
 * drives, through the gate's test hooks: a candidate whose
 * results are made wrong (one element of C changed after its GEMM) and
 * whose timing is made the fastest by far must be rejected by the gate,
 * counted, and never become the best (so never be saved); the control run,
 * the same candidate with correct results, does become the best, which
 * shows that only the gate stood in its way. The search is exhaustive over
 * one knob, SWITCH (5 values), so that it is short and deterministic: the
 * switch point is the host's, so every candidate is the one program. Contexts
 * force the GPU family, as the GEMM tests do on CPUs. Also the timing loop
 * (tools/tune/tune_shared.c): a timed run repeats a short op. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "tune.h"

struct hook_state {
  char wrong[KILN_TUNING_TEXT_CAPACITY]; /* the injected candidate */
  /* The candidate whose build is made slow, "" for none, and by how much. */
  char slow[KILN_TUNING_TEXT_CAPACITY];
  double slow_s;
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
  assert_kiln_ok(kiln_buffer_read_sync(q, &(kiln_range){c, (count / 2), 1, KILN_F32}, &v));
  v = v + 0.25f;
  assert_kiln_ok(kiln_buffer_write_sync(q, &v, &(kiln_range){c, (count / 2), 1, KILN_F32}));
  h->corrupted++;
}

static double time_scale(void *user, const char *params) {
  struct hook_state *h = user;
  if (strcmp(params, h->wrong) != 0)
    return 1.0;
  h->timed++;
  return 1e-6;
}

static void before_build(void *user, const char *params) {
  struct hook_state *h = user;
  if (h->slow[0] != '\0' && strcmp(params, h->slow) == 0) {
    struct timespec ts = {(time_t)h->slow_s,
                          (long)((h->slow_s - (double)(time_t)h->slow_s) * 1e9)};
    nanosleep(&ts, NULL);
  }
}

/* Destroy ctx once a build given up on has returned (KILN_ERR_BUSY until
 * then), waiting at most 30 s. */
static void destroy_when_idle(kiln_context *ctx) {
  kiln_status s = KILN_ERR_BUSY;
  for (int i = 0; i < 3000 && s == KILN_ERR_BUSY; i++) {
    s = kiln_context_destroy(ctx);
    if (s == KILN_ERR_BUSY) {
      struct timespec ts = {0, 10000000};
      nanosleep(&ts, NULL);
    }
  }
  assert_kiln_ok(s);
}

/* The default with SWITCH=value. */
static void with_switch(const char *params, unsigned value, char *out,
                        size_t size) {
  const char *sw = strstr(params, "SWITCH=0");
  assert_non_null(sw);
  assert_int_equal(sw[8], '\0');
  snprintf(out, size, "%.*sSWITCH=%u", (int)(sw - params), params, value);
}

static void search_jobs(bool corrupt, kiln_tuning_result *r, struct hook_state *h,
                        unsigned jobs, const char *const *knobs,
                        size_t nknobs) {
  kiln_context *ctx = NULL;
  kiln_queue *q = NULL;
  kiln_context_options opts = {.profile = "nvidia"};
  assert_kiln_ok(kiln_context_create(kiln_test_device(0), &opts, &ctx));
  assert_kiln_ok(kiln_queue_create(ctx, 0, &q));
  kiln_tuning_info info;
  assert_kiln_ok(kiln_tuning_set(ctx, "gemm", NULL));
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info));
  /* The wrong candidate: the default (SWITCH=0, last) with SWITCH=64. */
  with_switch(info.params, 64, h->wrong, sizeof h->wrong);
  assert_kiln_ok(kiln_tuning_check(ctx, "gemm", h->wrong, NULL, 0));
  h->corrupt = corrupt;
  h->corrupted = 0;
  h->timed = 0;
  tune_hooks hooks = {after_gemm, time_scale, h, before_build};
  tune_binding binding = {.op = tune_op_find("gemm"), .hooks = &hooks};
  kiln_tuning_search_options o;
  memset(&o, 0, sizeof o);
  o.sizes[0][0] = o.sizes[0][1] = o.sizes[0][2] = 64;
  o.size_count = 1;
  o.budget_s = 600;
  /* A launch includes the driver's code generation on its first run
   * (llvmpipe under rusticl: past 20 s for one GEMM candidate in CI's loaded
   * rusticl stage): these tests are about verdicts, not timeouts. */
  o.run_timeout_s = 600;
  o.seed = 1;
  o.exhaustive_max = 64;
  o.knobs = knobs;
  o.knob_count = nknobs;
  o.jobs = jobs;
  o.compile_timeout_s = h->slow[0] ? 0.5 : 0.0;
  tune_bind(&binding, &o);
  if (kiln_tuning_search(q, "gemm", &o, r, 0, NULL, NULL) != KILN_OK)
    fail_msg("kiln_tuning_search: %s", kiln_last_error());
  assert_true(r->exhaustive);
  if (nknobs == 1) /* the other SWITCH values */
    assert_int_equal(r->tried + r->skipped, 4);
  /* What the search leaves set is its best. */
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info));
  assert_string_equal(info.source, "set");
  assert_string_equal(info.params, r->best_params);
  assert_kiln_ok(kiln_tuning_set(ctx, "gemm", NULL));
  assert_kiln_ok(kiln_queue_destroy(q));
  destroy_when_idle(ctx);
}

static const char *const switch_only[] = {"SWITCH"};

static void search(bool corrupt, kiln_tuning_result *r, struct hook_state *h) {
  h->slow[0] = '\0';
  search_jobs(corrupt, r, h, 1, switch_only, 1);
}

static void test_gate_rejects_wrong(void **state) {
  (void)state;
  struct hook_state h;
  kiln_tuning_result r;
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
  kiln_tuning_result r;
  search(false, &r, &h);
  assert_int_equal(h.corrupted, 0);
  assert_true(h.timed >= 1);
  assert_string_equal(r.best_params, h.wrong);
}

/* Builds ahead on 3 threads, over a space whose candidates are distinct
 * programs (KWI is a build option), give the same verdicts as one
 * thread: the same candidates tried, skipped, rejected by the gate (the
 * injected wrong one), and the same winner (made fastest by the hook). */
static void test_parallel_builds_same_verdicts(void **state) {
  (void)state;
  static const char *const knobs[] = {"SWITCH", "KWI"};
  kiln_tuning_result one, three;
  struct hook_state h;
  memset(&h, 0, sizeof h);
  search_jobs(true, &one, &h, 1, knobs, 2);
  const int corrupted_one = h.corrupted;
  search_jobs(true, &three, &h, 3, knobs, 2);
  assert_int_equal(one.tried, three.tried);
  assert_int_equal(one.skipped, three.skipped);
  assert_int_equal(one.rejected_gate, three.rejected_gate);
  assert_int_equal(one.rejected_timeout, 0);
  assert_int_equal(three.rejected_timeout, 0);
  assert_true(one.rejected_gate >= 1);
  assert_int_equal(corrupted_one, h.corrupted);
  assert_string_not_equal(one.best_params, h.wrong);
  assert_string_not_equal(three.best_params, h.wrong);
}

/* A candidate whose build runs past the compile timeout (the hook holds it
 * for 3 s, the timeout is 0.5 s) is rejected as such and the search goes
 * on without it: every other candidate is still tried, and the context
 * cannot be destroyed (KILN_ERR_BUSY) until the held build has returned. */
static void test_compile_timeout(void **state) {
  (void)state;
  struct hook_state h;
  memset(&h, 0, sizeof h);
  kiln_context *ctx = NULL;
  kiln_context_options opts = {.profile = "nvidia"};
  assert_kiln_ok(kiln_context_create(kiln_test_device(0), &opts, &ctx));
  kiln_tuning_info info;
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info));
  /* The last candidate (odometer order), so that its rejection is the
   * last one recorded. */
  with_switch(info.params, 512, h.slow, sizeof h.slow);
  assert_kiln_ok(kiln_context_destroy(ctx));
  h.slow_s = 3.0;
  kiln_tuning_result r;
  search_jobs(false, &r, &h, 2, switch_only, 1);
  assert_int_equal(r.rejected_timeout, 1);
  assert_int_equal(r.rejected_gate, 0);
  assert_int_equal(r.tried, 4);
  assert_non_null(strstr(r.last_rejection, "compile timeout"));
  assert_non_null(strstr(r.last_rejection, "SWITCH=512"));
  assert_string_not_equal(r.best_params, h.slow);
}

/* The matrix units' gate (tune_gate_mma): where GEMM does not run the
 * matrix-unit kernel it fails and says why (PoCL is not NVIDIA's); with the
 * kernel's emulation (a test-only switch of the runtime, declared here as
 * runtime/tune/tune.h does: that header's name is this one's) it passes on
 * f16 and bf16, and a corrupted result fails it. */
void kiln__gemm_mma_emulate(bool on);

static void test_gate_mma(void **state) {
  (void)state;
  kiln_context *ctx = NULL;
  kiln_queue *q = NULL;
  kiln_context_options opts = {.profile = "nvidia"};
  assert_kiln_ok(kiln_context_create(kiln_test_device(0), &opts, &ctx));
  assert_kiln_ok(kiln_queue_create(ctx, 0, &q));
  const char *point = "BM=32 BN=32 BK=16 WM=16 WN=16 STAGES=1";
  assert_kiln_ok(kiln_tuning_set(ctx, "gemm_mma", point));
  double seconds;
  bool timed_out;
  char why[512];
  if (kiln_context_get_device_info(ctx)->vendor_id != 0x10de) {
    assert_false(tune_gate_mma(ctx, q, point, NULL, 600, 0, &seconds,
                               &timed_out, why, sizeof why));
    assert_non_null(strstr(why, "the matrix units do not run: no: not an "
                                "NVIDIA device"));
  }
  kiln__gemm_mma_emulate(true);
  if (!tune_gate_mma(ctx, q, point, NULL, 600, 0, &seconds, &timed_out, why,
                     sizeof why))
    fail_msg("tune_gate_mma (emulated): %s", why);
  struct hook_state h = {.corrupt = true};
  snprintf(h.wrong, sizeof h.wrong, "%s", point);
  tune_hooks hooks = {after_gemm, NULL, &h, NULL};
  assert_false(tune_gate_mma(ctx, q, point, &hooks, 600, 0, &seconds,
                             &timed_out, why, sizeof why));
  assert_true(h.corrupted >= 1);
  kiln__gemm_mma_emulate(false);
  assert_kiln_ok(kiln_tuning_set(ctx, "gemm_mma", NULL));
  assert_kiln_ok(kiln_queue_destroy(q));
  destroy_when_idle(ctx);
}

/* A timed run repeats its op until TUNE_MIN_RUN_SECONDS have passed and
 * gives the mean; an op longer than that runs once a run. The warm-up is
 * one op either way. */
struct counted_op {
  int calls;
  long sleep_ns;
};

static kiln_status counted_run(kiln_queue *q, void *arg) {
  (void)q;
  struct counted_op *op = arg;
  op->calls++;
  if (op->sleep_ns > 0) {
    struct timespec ts = {op->sleep_ns / 1000000000L,
                          op->sleep_ns % 1000000000L};
    nanosleep(&ts, NULL);
  }
  return KILN_OK;
}

static void test_timed_runs_repeat(void **state) {
  (void)state;
  kiln_context *ctx = NULL;
  kiln_queue *q = NULL;
  assert_kiln_ok(kiln_context_create(kiln_test_device(0), NULL, &ctx));
  assert_kiln_ok(kiln_queue_create(ctx, 0, &q));
  /* 1 ms ops (a little more: the sleep and the queue's finish): both runs
   * last the minimum, so several ops each, and the figure is one op's. */
  struct counted_op short_op = {0, 1000000L};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  double t = tune_time_loop(q, counted_run, &short_op, 2, 0.0, 0.0, 600,
                            NULL, "");
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double wall =
      (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  assert_true(wall >= 2 * TUNE_MIN_RUN_SECONDS);
  assert_true(short_op.calls >= 1 + 2 * 2);
  assert_true(t >= 1e-3 && t < TUNE_MIN_RUN_SECONDS / 2);
  /* Ops longer than the minimum: the warm-up and one op a run. */
  struct counted_op long_op = {0, (long)(TUNE_MIN_RUN_SECONDS * 1.5e9)};
  t = tune_time_loop(q, counted_run, &long_op, 2, 0.0, 0.0, 600, NULL, "");
  assert_int_equal(long_op.calls, 3);
  assert_true(t >= TUNE_MIN_RUN_SECONDS * 1.5);
  assert_kiln_ok(kiln_queue_destroy(q));
  assert_kiln_ok(kiln_context_destroy(ctx));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_timed_runs_repeat),
      cmocka_unit_test(test_gate_mma),
      cmocka_unit_test(test_gate_rejects_wrong),
      cmocka_unit_test(test_control_wins_when_correct),
      cmocka_unit_test(test_parallel_builds_same_verdicts),
      cmocka_unit_test(test_compile_timeout),
  };
  return KILN_TEST_RUN("tune_gate", tests, true);
}
