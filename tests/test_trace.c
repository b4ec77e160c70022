/* KILN_TRACE: ops write Chrome trace-event JSON. The file is parsed with
 * jansson after the ops complete (and between them: it must be a complete
 * JSON array at every point), and must hold one "X" event per op with the
 * device, op, shape, dtype, bytes, FLOPs and rates; zero-size ops are not
 * traced; ops from several threads all arrive. KILN_TRACE is read once per
 * process, so main() sets it before anything runs. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static char trace_path[256];

/* Load the trace and count its complete ("X") events, waiting up to 10 s
 * for `want` of them: events are written from completion callbacks, which
 * may run just after kiln_queue_finish returns. */
static json_t *load_events(size_t want, size_t *count) {
  json_t *all = NULL;
  json_error_t err;
  for (int tries = 0; tries < 1000; tries++) {
    if (tries > 0) {
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
    json_decref(all);
    /* The first event creates the file; a read racing a write may see a
     * half-written event, so only the last attempt must parse. */
    all = json_load_file(trace_path, 0, &err);
    if (all == NULL)
      continue;
    assert_true(json_is_array(all));
    size_t n = 0, i;
    json_t *ev;
    json_array_foreach(all, i, ev) {
      const char *ph = json_string_value(json_object_get(ev, "ph"));
      if (ph != NULL && strcmp(ph, "X") == 0)
        n++;
    }
    *count = n;
    if (n >= want)
      break;
  }
  if (all == NULL)
    fail_msg("trace %s is not valid JSON: %s (line %d)", trace_path, err.text,
             err.line);
  return all;
}

static void check_event(json_t *ev) {
  assert_string_equal(json_string_value(json_object_get(ev, "cat")),
                      "kiln.op");
  assert_true(json_is_number(json_object_get(ev, "ts")));
  assert_true(json_number_value(json_object_get(ev, "dur")) >= 0);
  assert_true(json_is_integer(json_object_get(ev, "pid")));
  assert_true(json_is_integer(json_object_get(ev, "tid")));
  json_t *args = json_object_get(ev, "args");
  assert_true(json_is_object(args));
  const char *dev = json_string_value(json_object_get(args, "device"));
  assert_non_null(dev);
  assert_true(strlen(dev) > 0);
  assert_string_equal(json_string_value(json_object_get(args, "op")),
                      json_string_value(json_object_get(ev, "name")));
  assert_non_null(json_string_value(json_object_get(args, "dtype")));
  json_t *shape = json_object_get(args, "shape");
  assert_true(json_is_array(shape) && json_array_size(shape) >= 1);
  assert_true(json_number_value(json_object_get(args, "bytes")) > 0);
  assert_true(json_is_number(json_object_get(args, "flops")));
  json_t *gbps = json_object_get(args, "gbps");
  /* null when the timer could not resolve the op (rusticl: resolution 0) */
  assert_true(json_is_null(gbps) || json_number_value(gbps) >= 0);
  assert_true(json_is_null(json_object_get(args, "gflops")) ||
              json_number_value(json_object_get(args, "gflops")) >= 0);
  assert_string_equal(json_string_value(json_object_get(args, "status")), "ok");
  const char *timing = json_string_value(json_object_get(args, "timing"));
  assert_true(strcmp(timing, "device") == 0 || strcmp(timing, "host") == 0);
}

static json_t *find_op(json_t *all, const char *name) {
  size_t i;
  json_t *ev;
  json_array_foreach(all, i, ev) {
    const char *ph = json_string_value(json_object_get(ev, "ph"));
    const char *n = json_string_value(json_object_get(ev, "name"));
    if (ph && n && strcmp(ph, "X") == 0 && strcmp(n, name) == 0)
      return ev;
  }
  return NULL;
}

static size_t expected_events; /* across tests, in this process */

static void test_trace_ops(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(dev) {
    kiln_context *ctx;
    kiln_queue *q;
    kiln_test_open(dev, &ctx, &q);
    const size_t n = 4096;
    kiln_buffer *x = NULL, *y = NULL, *r = NULL;
    assert_kiln_ok(kiln_buffer_create(ctx, n * 4, 0, &x));
    assert_kiln_ok(kiln_buffer_create(ctx, n * 4, 0, &y));
    assert_kiln_ok(kiln_buffer_create(ctx, 16, 0, &r));
    assert_kiln_ok(kiln_fill(q, KILN_F32, n, 1.5, x, 0, 0, NULL, NULL));
    assert_kiln_ok(kiln_queue_finish(q));
    size_t count;
    /* After one op the file is already a complete array. */
    json_t *all = load_events(expected_events + 1, &count);
    assert_int_equal(count, expected_events + 1);
    json_decref(all);

    assert_kiln_ok(kiln_fill(q, KILN_F32, n, 2, y, 0, 0, NULL, NULL));
    assert_kiln_ok(kiln_axpy(q, KILN_F32, n, 3.0f, x, 0, y, 0, 0, NULL, NULL));
    kiln_event *ev = NULL;
    assert_kiln_ok(kiln_reduce(q, KILN_REDUCE_SUM, KILN_F32, n, y, 0, r, 0, 0,
                               NULL, &ev));
    assert_kiln_ok(kiln_dot(q, KILN_F32, n, x, 0, y, 0, r, 1, 1, &ev, NULL));
    kiln_event_release(ev);
    assert_kiln_ok(kiln_scan(q, KILN_SCAN_INCLUSIVE, KILN_F32, n, x, 0, y, 0, 0,
                             NULL, NULL));
    assert_kiln_ok(kiln_softmax_rows(q, KILN_F32, 64, 64, x, 0, y, 0, 0, NULL,
                                     NULL));
    /* Zero-size: no event in the trace. */
    assert_kiln_ok(kiln_unary(q, KILN_UNARY_EXP, KILN_F32, 0, x, 0, y, 0, 0,
                              NULL, NULL));
    assert_kiln_ok(kiln_queue_finish(q));
    expected_events += 7;
    all = load_events(expected_events, &count);
    assert_int_equal(count, expected_events);
    const char *names[] = {"fill", "axpy", "reduce.sum", "dot",
                           "scan.inclusive", "softmax_rows"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
      json_t *e = find_op(all, names[i]);
      if (e == NULL)
        fail_msg("no trace event for %s", names[i]);
      check_event(e);
    }
    json_t *sm = find_op(all, "softmax_rows");
    json_t *shape = json_object_get(json_object_get(sm, "args"), "shape");
    assert_int_equal(json_integer_value(json_array_get(shape, 0)), 64);
    assert_int_equal(json_integer_value(json_array_get(shape, 1)), 64);
    json_t *ax = find_op(all, "axpy");
    assert_true(json_number_value(
                    json_object_get(json_object_get(ax, "args"), "bytes")) ==
                12.0 * n);
    assert_true(json_number_value(
                    json_object_get(json_object_get(ax, "args"), "flops")) ==
                2.0 * n);
    /* The queue got a named lane. */
    size_t i;
    json_t *e;
    bool named = false;
    json_array_foreach(all, i, e) {
      const char *nm = json_string_value(json_object_get(e, "name"));
      if (nm && strcmp(nm, "thread_name") == 0)
        named = true;
    }
    assert_true(named);
    json_decref(all);
    assert_kiln_ok(kiln_buffer_destroy(x));
    assert_kiln_ok(kiln_buffer_destroy(y));
    assert_kiln_ok(kiln_buffer_destroy(r));
    kiln_test_close(ctx, q);
  }
}

struct worker {
  kiln_context *ctx;
  int ops;
  kiln_status status;
};

static void *worker_main(void *arg) {
  struct worker *w = arg;
  kiln_queue *q = NULL;
  kiln_buffer *b = NULL;
  w->status = kiln_queue_create(w->ctx, 0, &q);
  if (w->status == KILN_OK)
    w->status = kiln_buffer_create(w->ctx, 1024 * 4, 0, &b);
  for (int i = 0; i < w->ops && w->status == KILN_OK; i++)
    w->status = kiln_scale(q, KILN_F32, 1024, 0.5f, b, 0, 0, NULL, NULL);
  if (w->status == KILN_OK)
    w->status = kiln_queue_finish(q);
  kiln_buffer_destroy(b);
  kiln_queue_destroy(q);
  return NULL;
}

/* Two threads, two queues: every event arrives and the file stays valid. */
static void test_trace_threads(void **state) {
  (void)state;
  kiln_context *ctx;
  kiln_test_open(0, &ctx, NULL);
  struct worker w[2] = {{ctx, 25, KILN_OK}, {ctx, 25, KILN_OK}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
  for (int i = 0; i < 2; i++) {
    pthread_join(t[i], NULL);
    assert_kiln_ok(w[i].status);
  }
  expected_events += 50;
  size_t count;
  json_t *all = load_events(expected_events, &count);
  assert_int_equal(count, expected_events);
  json_decref(all);
  assert_kiln_ok(kiln_context_destroy(ctx));
}

int main(void) {
  snprintf(trace_path, sizeof trace_path, "/tmp/kiln-test-trace-%ld.json",
           (long)getpid());
  setenv("KILN_TRACE", trace_path, 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_trace_ops),
      cmocka_unit_test(test_trace_threads),
  };
  int rc = KILN_TEST_RUN("trace", tests, true);
  unlink(trace_path);
  return rc;
}
