/* kiln_cache_warm: every op program is built once and announced in order,
 * a new context loads them all from the cache, the entries carry their
 * source's label, and a warmed context builds nothing when ops run. PoCL's
 * own cache is off (meson.build sets POCL_KERNEL_CACHE=0) so this tests
 * kiln's. */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

#include "program/program.h"

struct warm_log {
  size_t calls, ok, cached, total;
};

static void on_warm(const kiln_cache_warm_progress *p, void *user) {
  struct warm_log *log = user;
  if (!p->finished) {
    assert_int_equal(p->index, log->calls); /* announced before its result */
    return;
  }
  assert_int_equal(p->index, log->calls);
  assert_non_null(p->source);
  log->calls++;
  log->total = p->total;
  if (p->status == KILN_OK)
    log->ok++;
  if (p->from_cache)
    log->cached++;
}

/* Every op program is among what warm built: a transpose and a GEMM (the
 * last two modules added to the list) on a warmed context compile nothing. */
static void ops_after_warm_build_nothing(kiln_context *ctx) {
  const size_t builds = kiln__memo_build_count(ctx);
  kiln_queue *q;
  kiln_buffer *a, *b, *c;
  assert_kiln_ok(kiln_queue_create(ctx, 0, &q));
  assert_kiln_ok(kiln_buffer_create(ctx, 64 * sizeof(float), 0, &a));
  assert_kiln_ok(kiln_buffer_create(ctx, 64 * sizeof(float), 0, &b));
  assert_kiln_ok(kiln_buffer_create(ctx, 64 * sizeof(float), 0, &c));
  const float one = 1.0f;
  assert_kiln_ok(kiln_buffer_fill(
      q, &one, sizeof one, &(kiln_range){a, 0, 64, KILN_F32}, 0, NULL, NULL));
  assert_kiln_ok(kiln_buffer_fill(
      q, &one, sizeof one, &(kiln_range){b, 0, 64, KILN_F32}, 0, NULL, NULL));
  assert_kiln_ok(kiln_transpose(q, matrix_of(a, 0, 8, 8, KILN_F32),
                                matrix_of(c, 0, 8, 8, KILN_F32), 0, NULL,
                                NULL));
  assert_kiln_ok(kiln_matmul(
      q, 1, matrix_of(a, 0, 8, 8, KILN_F32), matrix_of(b, 0, 8, 8, KILN_F32),
      matrix_of(c, 0, 8, 8, KILN_F32), NULL, 0, NULL, NULL));
  float out[64];
  assert_kiln_ok(
      kiln_buffer_read_sync(q, &(kiln_range){c, 0, 64, KILN_F32}, out));
  for (int i = 0; i < 64; i++)
    assert_true(out[i] == 8.0f); /* sums of eight 1 x 1: exact */
  assert_int_equal(kiln__memo_build_count(ctx), builds);
  kiln_buffer_destroy(a);
  kiln_buffer_destroy(b);
  kiln_buffer_destroy(c);
  assert_kiln_ok(kiln_queue_destroy(q));
}

static void test_warm(void **state) {
  (void)state;
  /* The directory meson gives this test: compiling every op kernel (tens of
   * seconds on PoCL) is paid once per build tree, not on every run. */
  if (getenv("KILN_CACHE_DIR") == NULL)
    KILN_TEST_SKIP("KILN_CACHE_DIR is not set (meson test sets it)");
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_test_open(d, &ctx, NULL);
    struct warm_log first = {0}, second = {0};
    size_t built = 0;
    kiln_status st = kiln_cache_warm(ctx, on_warm, &first, &built);
    if (st != KILN_OK)
      print_message("# warm: %s\n", kiln_last_error());
    assert_true(first.total >= 1);
    assert_int_equal(first.calls, first.total);
    assert_int_equal(built, first.ok);
    assert_kiln_ok(kiln_context_destroy(ctx));
    /* A new context (a new process would do the same) loads them all. */
    kiln_test_open(d, &ctx, NULL);
    kiln_cache_warm(ctx, on_warm, &second, NULL);
    assert_int_equal(second.cached, first.ok);
    if (first.ok == first.total)
      ops_after_warm_build_nothing(ctx);
    kiln_cache_list *list;
    assert_kiln_ok(kiln_cache_list_create(&list));
    size_t labelled = 0;
    for (size_t i = 0; i < kiln_cache_list_get_count(list); i++)
      if (strcmp(kiln_cache_list_get(list, i)->label, "user") != 0)
        labelled++;
    kiln_cache_list_destroy(list);
    assert_true(labelled >= first.ok);
    assert_kiln_ok(kiln_context_destroy(ctx));
    assert_int_equal(st, first.ok == first.total ? KILN_OK : st);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_warm),
  };
  return KILN_TEST_RUN("cache_warm", tests, true);
}
