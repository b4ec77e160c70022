/* kiln tune's gates for the small spaces (tools/tune/tune_op_small.c,
 * tune_op_conv.c:
 * transpose, reduce, elementwise, conv2d), driven through the search's test hooks
 * as test_tune_gate.c does for GEMM: a candidate whose output is made wrong
 * (one word changed after each of its gate's ops) and whose timing is made
 * the fastest by far must be rejected by the gate, counted, and never
 * become the best (so never be saved); the same candidate with correct
 * output does become the best, which shows that only the gate stood in its
 * way. Each search is exhaustive over one knob of the op's space, with the
 * space's kernel family forced through the profile (GPU spaces on CPUs,
 * the CPU family's gemm_cpu and transpose_cpu on GPUs). */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "tune.h"

struct hook_state {
  char wrong[KILN_TUNING_TEXT_CAPACITY]; /* the injected candidate */
  bool corrupt;                          /* make its output wrong */
  int corrupted;                         /* times it was made wrong */
  int timed; /* times it was timed: only after passing the gate */
};

static void after_op(void *user, const char *params, kiln_queue *q,
                     kiln_buffer *out, size_t count) {
  struct hook_state *h = user;
  if (!h->corrupt || strcmp(params, h->wrong) != 0)
    return;
  uint32_t v;
  assert_kiln_ok(kiln_buffer_read_sync(q, &(kiln_range){out, (count / 2), 1, KILN_U32}, &v));
  v ^= 0x00400000u; /* a bit of every format's significand or an index */
  assert_kiln_ok(kiln_buffer_write_sync(q, &v, &(kiln_range){out, (count / 2), 1, KILN_U32}));
  h->corrupted++;
}

static double time_scale(void *user, const char *params) {
  struct hook_state *h = user;
  if (strcmp(params, h->wrong) != 0)
    return 1.0;
  h->timed++;
  return 1e-6;
}

/* Search op's knob exhaustively, the wrong candidate being the default with
 * knob set to value (text "KNOB=V" replaced by "KNOB=W"). */
static void search(const char *op_name, const char *knob, const char *from,
                   const char *to, size_t size, bool corrupt, kiln_tuning_result *r,
                   struct hook_state *h) {
  const tune_op *op = tune_op_find(op_name);
  assert_non_null(op);
  kiln_context *ctx = NULL;
  kiln_queue *q = NULL;
  kiln_context_options opts = {
      .profile = strcmp(op->family, "CPU") == 0 ? "pocl" : "nvidia"};
  assert_kiln_ok(kiln_context_create(kiln_test_device(0), &opts, &ctx));
  assert_kiln_ok(kiln_queue_create(ctx, 0, &q));
  kiln_tuning_info info;
  assert_kiln_ok(kiln_tuning_set(ctx, op->name, NULL));
  assert_kiln_ok(kiln_tuning_get_info(ctx, op->name, &info));
  char *at = strstr(info.params, from);
  assert_non_null(at);
  snprintf(h->wrong, sizeof h->wrong, "%.*s%s%s", (int)(at - info.params),
           info.params, to, at + strlen(from));
  assert_kiln_ok(kiln_tuning_check(ctx, op->name, h->wrong, NULL, 0));
  h->corrupt = corrupt;
  h->corrupted = 0;
  h->timed = 0;
  tune_hooks hooks = {after_op, time_scale, h, NULL};
  tune_binding binding = {.op = op, .hooks = &hooks};
  kiln_tuning_search_options o;
  memset(&o, 0, sizeof o);
  o.sizes[0][0] = o.sizes[0][1] = o.sizes[0][2] = size;
  o.size_count = 1;
  o.budget_s = 600;
  /* A launch includes the driver's code generation on its first run
   * (llvmpipe under rusticl: past 20 s for one GEMM candidate in CI's loaded
   * rusticl stage): these tests are about verdicts, not timeouts. */
  o.run_timeout_s = 600;
  o.seed = 1;
  o.exhaustive_max = 16;
  o.knobs = &knob;
  o.knob_count = 1;
  tune_bind(&binding, &o);
  if (kiln_tuning_search(q, op->name, &o, r, 0, NULL, NULL) != KILN_OK)
    fail_msg("kiln_tuning_search %s: %s", op->name, kiln_last_error());
  assert_true(r->exhaustive);
  assert_kiln_ok(kiln_tuning_get_info(ctx, op->name, &info));
  assert_string_equal(info.source, "set");
  assert_string_equal(info.params, r->best_params);
  assert_kiln_ok(kiln_tuning_set(ctx, op->name, NULL));
  assert_kiln_ok(kiln_queue_destroy(q));
  assert_kiln_ok(kiln_context_destroy(ctx));
}

static void gate_and_control(const char *op, const char *knob,
                             const char *from, const char *to, size_t size) {
  struct hook_state h;
  kiln_tuning_result r;
  search(op, knob, from, to, size, true, &r, &h);
  assert_true(h.corrupted >= 1);
  assert_true(r.rejected_gate >= 1);
  assert_string_not_equal(r.best_params, h.wrong);
  assert_int_equal(h.timed, 0); /* stopped by the gate, never timed */
  search(op, knob, from, to, size, false, &r, &h);
  assert_int_equal(h.corrupted, 0);
  assert_true(h.timed >= 1);
  assert_string_equal(r.best_params, h.wrong);
}

static void test_transpose(void **state) {
  (void)state;
  gate_and_control("transpose", "PAD", "PAD=1", "PAD=0", 64);
}

static void test_reduce(void **state) {
  (void)state;
  /* PARTS is the host's: every candidate is the one program. */
  gate_and_control("sum", "PARTS", "PARTS=4", "PARTS=8", 4096);
}

static void test_elementwise(void **state) {
  (void)state;
  gate_and_control("axpy", "VW", "VW=1", "VW=4", 4096);
}

/* The implicit GEMM convolution's (8 images of 8 channels, 28 x 28, to 8). */
static void test_conv2d(void **state) {
  (void)state;
  gate_and_control("conv2d", "VWN", "VWN=1", "VWN=2", 8);
}

/* The CPU family's spaces: the same gates (MB and TILE: candidates whose
 * programs are built once or are few). */
static void test_gemm_cpu(void **state) {
  (void)state;
  gate_and_control("gemm_cpu", "MB", "MB=16", "MB=8", 64);
}

static void test_transpose_cpu(void **state) {
  (void)state;
  gate_and_control("transpose_cpu", "TILE", "TILE=128", "TILE=32", 64);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_transpose),
      cmocka_unit_test(test_reduce),
      cmocka_unit_test(test_elementwise),
      cmocka_unit_test(test_conv2d),
      cmocka_unit_test(test_gemm_cpu),
      cmocka_unit_test(test_transpose_cpu),
  };
  return KILN_TEST_RUN("tune_spaces", tests, true);
}
