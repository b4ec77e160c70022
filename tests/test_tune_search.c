/* The library's search (kiln_tuning_search, kiln/kiln_tune.h) driven by a
 * program of its own, without kiln tune: its gate and timing are made up
 * here, so that the verdicts are known. Over the reductions' PARTS knob
 * (the host's: every candidate is the one program), the gate rejects the
 * largest value and the timing makes larger values faster: the search must
 * reject the largest, count it, and end on the second largest, left set for
 * the device; progress and the build hook are called, the out event is
 * complete. And every bad argument fails with its status and a message
 * naming it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define assert_kiln_error(expr, status, text)                                 \
  do {                                                                        \
    assert_kiln_status(expr, status);                                         \
    assert_last_error_contains(text);                                         \
  } while (0)

struct calls {
  unsigned bad, best; /* the PARTS the gate rejects; the one that must win */
  int gates, times, progress, builds, gate_bad;
};

static unsigned parts_of(const char *params) {
  const char *at = strstr(params, "PARTS=");
  assert_non_null(at);
  return (unsigned)strtoul(at + 6, NULL, 10);
}

static kiln_tuning_verdict gate(void *user, kiln_queue *queue,
                                const char *params, double run_timeout_s,
                                double deadline_s, char *why,
                                size_t why_size) {
  struct calls *c = user;
  assert_non_null(queue);
  assert_true(run_timeout_s > 0.0);
  c->gates++;
  if (parts_of(params) != c->bad)
    return KILN_TUNING_PASS;
  c->gate_bad++;
  snprintf(why, why_size, "injected wrong result");
  return KILN_TUNING_FAIL;
}

static kiln_tuning_verdict time_it(void *user, kiln_queue *queue,
                                   const char *params, const size_t *size,
                                   int runs, double stop_above_s,
                                   double deadline_s, double run_timeout_s,
                                   double *seconds, char *why,
                                   size_t why_size) {
  struct calls *c = user;
  assert_int_equal(size[0], 4096);
  assert_true(runs >= 1);
  c->times++;
  *seconds = 1e-3 / (double)parts_of(params);
  return KILN_TUNING_PASS;
}

static void progress(void *user, size_t tried, size_t rejected,
                     size_t skipped, double best_score,
                     const char *best_params) {
  struct calls *c = user;
  assert_true(best_score > 0.0);
  assert_non_null(best_params);
  c->progress++;
}

static void before_build(void *user, const char *params) {
  struct calls *c = user;
  c->builds++;
}

static const char *const parts_knob[] = {"PARTS"};

static void options_for(kiln_tuning_search_options *o, struct calls *c) {
  memset(o, 0, sizeof *o);
  o->sizes[0][0] = o->sizes[0][1] = o->sizes[0][2] = 4096;
  o->work[0] = 16.0 * 4096;
  o->size_count = 1;
  o->budget_s = 600;
  o->knobs = parts_knob;
  o->knob_count = 1;
  o->gate = gate;
  o->time = time_it;
  o->progress = progress;
  o->before_build = before_build;
  o->user = c;
}

static void open_gpu_family(kiln_context **ctx, kiln_queue **q) {
  kiln_context_options opts = {.profile = "nvidia"};
  assert_kiln_ok(kiln_context_create(kiln_test_device(0), &opts, ctx));
  assert_kiln_ok(kiln_queue_create(*ctx, 0, q));
}

static void test_search(void **state) {
  (void)state;
  kiln_context *ctx;
  kiln_queue *q;
  open_gpu_family(&ctx, &q);
  kiln_tuning_knob knob;
  size_t i = 0;
  while (kiln_tuning_get_knob("reduce", i, &knob) == KILN_OK &&
         strcmp(knob.name, "PARTS") != 0)
    i++;
  assert_string_equal(knob.name, "PARTS");
  assert_true(knob.count >= 3);
  struct calls c = {.bad = knob.values[knob.count - 1],
                    .best = knob.values[knob.count - 2]};
  kiln_tuning_search_options o;
  options_for(&o, &c);
  kiln_tuning_result *r = malloc(sizeof *r);
  assert_non_null(r);
  kiln_event *before = NULL, *done = NULL;
  assert_kiln_ok(kiln_queue_marker(q, 0, NULL, &before));
  assert_kiln_ok(kiln_tuning_search(q, "reduce", &o, r, 1, &before, &done));
  kiln_event_state st;
  assert_kiln_ok(kiln_event_get_state(done, &st));
  assert_int_equal(st, KILN_EVENT_COMPLETE);
  assert_true(r->exhaustive);
  assert_false(r->stuck);
  /* Every PARTS value but the default's, each valid on the device. */
  assert_int_equal(r->tried + r->skipped, knob.count - 1);
  assert_int_equal(r->rejected, 1);
  assert_int_equal(r->rejected_gate, 1);
  assert_int_equal(c.gate_bad, 1);
  assert_non_null(strstr(r->last_rejection, "injected wrong result"));
  assert_int_equal(parts_of(r->best_params), c.best);
  assert_false(r->kept_default);
  assert_true(r->best_score > r->default_score);
  assert_true(r->best_figures[0] > r->default_figures[0]);
  assert_int_equal(c.progress, (int)r->tried);
  assert_int_equal(c.builds, (int)r->tried);
  kiln_tuning_info info;
  assert_kiln_ok(kiln_tuning_get_info(ctx, "reduce", &info));
  assert_string_equal(info.source, "set");
  assert_string_equal(info.params, r->best_params);
  assert_kiln_ok(kiln_tuning_set(ctx, "reduce", NULL));
  kiln_event_release(before);
  kiln_event_release(done);
  free(r);
  kiln_test_close(ctx, q);
}

static void test_bad_input(void **state) {
  (void)state;
  kiln_context *ctx;
  kiln_queue *q;
  open_gpu_family(&ctx, &q);
  struct calls c = {0};
  kiln_tuning_search_options o;
  kiln_tuning_result *r = malloc(sizeof *r);
  assert_non_null(r);
  options_for(&o, &c);
  assert_kiln_error(kiln_tuning_search(NULL, "reduce", &o, r, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "kiln_tuning_search: queue is NULL");
  assert_kiln_error(kiln_tuning_search(q, NULL, &o, r, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "op is NULL");
  assert_kiln_error(kiln_tuning_search(q, "reduce", NULL, r, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "options is NULL");
  assert_kiln_error(kiln_tuning_search(q, "reduce", &o, NULL, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "result is NULL");
  assert_kiln_error(kiln_tuning_search(q, "sort", &o, r, 0, NULL, NULL),
                    KILN_ERR_NOT_FOUND, "\"sort\" has no parameter space");
  o.gate = NULL;
  assert_kiln_error(kiln_tuning_search(q, "reduce", &o, r, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "options->gate is NULL");
  options_for(&o, &c);
  o.time = NULL;
  assert_kiln_error(kiln_tuning_search(q, "reduce", &o, r, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "options->time is NULL");
  options_for(&o, &c);
  o.size_count = 0;
  assert_kiln_error(kiln_tuning_search(q, "reduce", &o, r, 0, NULL, NULL),
                    KILN_ERR_INVALID_SIZE, "options->size_count is 0");
  o.size_count = 1000;
  assert_kiln_error(kiln_tuning_search(q, "reduce", &o, r, 0, NULL, NULL),
                    KILN_ERR_INVALID_SIZE, "options->size_count is 1000");
  options_for(&o, &c);
  o.sizes[0][1] = 0;
  assert_kiln_error(kiln_tuning_search(q, "reduce", &o, r, 0, NULL, NULL),
                    KILN_ERR_INVALID_SIZE, "options->sizes[0]");
  options_for(&o, &c);
  o.work[0] = 0.0;
  assert_kiln_error(kiln_tuning_search(q, "reduce", &o, r, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "options->work[0]");
  options_for(&o, &c);
  o.budget_s = 0.0;
  assert_kiln_error(kiln_tuning_search(q, "reduce", &o, r, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "options->budget_s is 0");
  o.budget_s = -1.0;
  assert_kiln_error(kiln_tuning_search(q, "reduce", &o, r, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "options->budget_s is -1");
  options_for(&o, &c);
  o.run_timeout_s = -1.0;
  assert_kiln_error(kiln_tuning_search(q, "reduce", &o, r, 0, NULL, NULL),
                    KILN_ERR_INVALID_ARGUMENT, "options->run_timeout_s");
  options_for(&o, &c);
  o.knobs = NULL;
  assert_kiln_error(kiln_tuning_search(q, "reduce", &o, r, 0, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "options->knobs is NULL");
  static const char *const nope[] = {"NOPE"};
  o.knobs = nope;
  assert_kiln_error(kiln_tuning_search(q, "reduce", &o, r, 0, NULL, NULL),
                    KILN_ERR_NOT_FOUND, "'NOPE' is not a knob of op 'reduce'");
  options_for(&o, &c);
  assert_kiln_error(kiln_tuning_search(q, "reduce", &o, r, 1, NULL, NULL),
                    KILN_ERR_NULL_POINTER, "kiln_tuning_search");
  /* Nothing ran: no callback was called. */
  assert_int_equal(c.gates + c.times + c.progress + c.builds, 0);
  kiln_test_close(ctx, q);
  /* The CPU family's GEMM is not of gemm's space. */
  kiln_context_options cpu = {.profile = "pocl"};
  assert_kiln_ok(kiln_context_create(kiln_test_device(0), &cpu, &ctx));
  assert_kiln_ok(kiln_queue_create(ctx, 0, &q));
  o.knob_count = 0;
  assert_kiln_error(kiln_tuning_search(q, "gemm", &o, r, 0, NULL, NULL),
                    KILN_ERR_UNSUPPORTED, "other kernel family");
  assert_int_equal(c.gates, 0);
  free(r);
  kiln_test_close(ctx, q);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_search),
  };
  return KILN_TEST_RUN("tune_search", tests, true);
}
