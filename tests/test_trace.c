/* KILN_TRACE: ops, user kernels, transfers and program builds write Chrome
 * trace-event JSON. The file is parsed with jansson after the work completes
 * (and between: it must be a complete JSON array at every point), and must
 * hold one "X" event per op with the device, op, shape, dtype, bytes, FLOPs
 * and rates, per kernel launch with its sizes, per read/write/copy/fill
 * with its bytes and GB/s, per build with its source, cache hit or miss and
 * time; zero-size ops are not traced; ops from several threads all arrive.
 * Other processes (this binary run with --child) show that "%p" becomes the
 * process id, that a second process on one path writes nothing and says so
 * through kiln_trace_diagnostic, and that a killed process leaves a file
 * that parses (the child: trace_child.h). Where the log's messages and
 * KILN_TRACE_SUMMARY's table go is test_log.c's. KILN_TRACE is read once
 * per process, so main() sets it before anything runs. */
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "trace_child.h"

static char trace_path[256];

/* Load the trace at path and count its complete ("X") events of category
 * cat, waiting up to 10 s for `want` of them: events are written from
 * completion callbacks, which may run just after kiln_queue_finish
 * returns. */
static json_t *load_file_events(const char *path, const char *cat,
                                size_t want, size_t *count) {
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
    all = json_load_file(path, 0, &err);
    if (all == NULL)
      continue;
    assert_true(json_is_array(all));
    size_t n = 0, i;
    json_t *ev;
    json_array_foreach(all, i, ev) {
      const char *ph = json_string_value(json_object_get(ev, "ph"));
      const char *c = json_string_value(json_object_get(ev, "cat"));
      if (ph != NULL && strcmp(ph, "X") == 0 && c != NULL &&
          strcmp(c, cat) == 0)
        n++;
    }
    *count = n;
    if (n >= want)
      break;
  }
  if (all == NULL)
    fail_msg("trace %s is not valid JSON: %s (line %d)", path, err.text,
             err.line);
  return all;
}

/* The op events of this process's trace. */
static json_t *load_events(size_t want, size_t *count) {
  return load_file_events(trace_path, "kiln.op", want, count);
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
    assert_kiln_ok(kiln_fill(q, range_of(x, 0, n, KILN_F32), &(float){1.5f}, 0,
                             NULL, NULL));
    assert_kiln_ok(kiln_queue_finish(q));
    size_t count;
    /* After one op the file is already a complete array. */
    json_t *all = load_events(expected_events + 1, &count);
    assert_int_equal(count, expected_events + 1);
    json_decref(all);

    assert_kiln_ok(kiln_fill(q, range_of(y, 0, n, KILN_F32), &(float){2.0f}, 0,
                             NULL, NULL));
    assert_kiln_ok(kiln_axpy(q, range_of(x, 0, n, KILN_F32),
                             range_of(y, 0, n, KILN_F32), 3.0f, 0, NULL, NULL));
    kiln_event *ev = NULL;
    assert_kiln_ok(kiln_reduce(q, KILN_REDUCE_SUM, range_of(y, 0, n, KILN_F32),
                               range_of(r, 0, 1, KILN_F32), 0, NULL, &ev));
    assert_kiln_ok(kiln_dot(q, range_of(x, 0, n, KILN_F32),
                            range_of(y, 0, n, KILN_F32),
                            range_of(r, 1, 1, KILN_F32), 1, &ev, NULL));
    kiln_event_release(ev);
    assert_kiln_ok(kiln_scan(q, KILN_SCAN_INCLUSIVE,
                             range_of(x, 0, n, KILN_F32),
                             range_of(y, 0, n, KILN_F32), 0, NULL, NULL));
    assert_kiln_ok(kiln_softmax_rows(q, matrix_of(x, 0, 64, 64, KILN_F32),
                                     matrix_of(y, 0, 64, 64, KILN_F32), 0, NULL,
                                     NULL));
    /* Zero-size: no event in the trace. */
    assert_kiln_ok(kiln_unary(q, KILN_UNARY_EXP, range_of(x, 0, 0, KILN_F32),
                              range_of(y, 0, 0, KILN_F32), 0, NULL, NULL));
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
    w->status =
        kiln_scale(q, range_of(b, 0, 1024, KILN_F32), 0.5f, 0, NULL, NULL);
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

/* ---- user work: a build, transfers, a kernel ----------------------------- */

static const char user_source[] =
    "__kernel void twice(__global float *x) {\n"
    "  x[get_global_id(0)] *= 2.0f;\n"
    "}\n";

/* The first "X" event of category cat named name. */
static json_t *find_event(json_t *all, const char *cat, const char *name) {
  size_t i;
  json_t *ev;
  json_array_foreach(all, i, ev) {
    const char *c = json_string_value(json_object_get(ev, "cat"));
    const char *n = json_string_value(json_object_get(ev, "name"));
    if (c && n && strcmp(c, cat) == 0 && strcmp(n, name) == 0)
      return ev;
  }
  fail_msg("no %s event named %s in the trace", cat, name);
  return NULL;
}

static double arg_number(json_t *ev, const char *key) {
  json_t *v = json_object_get(json_object_get(ev, "args"), key);
  if (!json_is_number(v))
    fail_msg("event %s: args.%s is not a number",
             json_string_value(json_object_get(ev, "name")), key);
  return json_number_value(v);
}

static const char *arg_string(json_t *ev, const char *key) {
  const char *v =
      json_string_value(json_object_get(json_object_get(ev, "args"), key));
  if (v == NULL)
    fail_msg("event %s: args.%s is not a string",
             json_string_value(json_object_get(ev, "name")), key);
  return v;
}

static void test_trace_user_work(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(dev) {
    kiln_context *ctx;
    kiln_queue *q;
    kiln_test_open(dev, &ctx, &q);
    size_t transfers_before = 0, kernels_before = 0, builds_before = 0;
    json_decref(load_file_events(trace_path, "kiln.transfer", 0,
                                 &transfers_before));
    json_decref(load_file_events(trace_path, "kiln.kernel", 0, &kernels_before));
    json_decref(load_file_events(trace_path, "kiln.build", 0, &builds_before));

    kiln_program *p;
    assert_kiln_ok(kiln_program_create_built(ctx, user_source, NULL, &p));
    kiln_kernel *k;
    assert_kiln_ok(kiln_kernel_create(p, "twice", &k));
    const size_t n = 1024;
    float host[1024];
    for (size_t i = 0; i < n; i++)
      host[i] = (float)i;
    kiln_buffer *a, *b;
    assert_kiln_ok(kiln_buffer_create(ctx, n * 4, 0, &a));
    assert_kiln_ok(kiln_buffer_create(ctx, n * 4, 0, &b));
    assert_kiln_ok(
        kiln_buffer_write_sync(q, host, &(kiln_range){a, 0, n, KILN_F32}));
    assert_kiln_ok(kiln_kernel_set_arg_buffer(k, 0, a));
    /* A local size the kernel takes (rusticl allows some kernels 32). */
    kiln_kernel_info info;
    assert_kiln_ok(kiln_kernel_get_info(k, &info));
    size_t global = n, local = info.work_group_size >= 16 ? 16 : 1;
    assert_kiln_ok(kiln_kernel_launch(q, k, 1, &global, &local, 0, NULL, NULL));
    assert_kiln_ok(kiln_buffer_copy(q, &(kiln_range){a, 0, n, KILN_F32},
                                    &(kiln_range){b, 0, n, KILN_F32}, 0, NULL,
                                    NULL));
    uint32_t zero = 0;
    assert_kiln_ok(kiln_buffer_fill(
        q, &zero, 4, &(kiln_range){a, 0, n, KILN_U32}, 0, NULL, NULL));
    assert_kiln_ok(
        kiln_buffer_read_sync(q, &(kiln_range){b, 0, n, KILN_F32}, host));
    assert_true(host[3] == 6.0f);
    assert_kiln_ok(kiln_queue_finish(q));

    size_t count;
    json_t *all = load_file_events(trace_path, "kiln.transfer",
                                   transfers_before + 4, &count);
    assert_int_equal(count, transfers_before + 4);
    json_decref(all);
    all = load_file_events(trace_path, "kiln.kernel", kernels_before + 1,
                           &count);
    assert_int_equal(count, kernels_before + 1);
    json_decref(all);
    all = load_file_events(trace_path, "kiln.build", builds_before + 1, &count);
    assert_true(count >= builds_before + 1);

    json_t *launch = find_event(all, "kiln.kernel", "twice");
    assert_string_equal(arg_string(launch, "kernel"), "twice");
    json_t *args = json_object_get(launch, "args");
    assert_int_equal(json_integer_value(json_array_get(
                         json_object_get(args, "global"), 0)), (json_int_t)n);
    assert_int_equal(json_integer_value(json_array_get(
                         json_object_get(args, "local"), 0)),
                     (json_int_t)local);
    assert_string_equal(arg_string(launch, "status"), "ok");
    assert_true(json_number_value(json_object_get(launch, "dur")) >= 0);

    const char *ops[] = {"write", "read", "copy", "fill"};
    const double bytes[] = {n * 4.0, n * 4.0, 2 * n * 4.0, n * 4.0};
    for (size_t i = 0; i < 4; i++) {
      json_t *t = find_event(all, "kiln.transfer", ops[i]);
      assert_true(arg_number(t, "bytes") == bytes[i]);
      json_t *gbps = json_object_get(json_object_get(t, "args"), "gbps");
      assert_true(json_is_null(gbps) || json_number_value(gbps) >= 0);
      assert_string_equal(arg_string(t, "status"), "ok");
    }

    json_t *build = find_event(all, "kiln.build", "build user");
    assert_string_equal(arg_string(build, "source"), "user");
    const char *cache = arg_string(build, "cache");
    assert_true(strcmp(cache, "hit") == 0 || strcmp(cache, "miss") == 0 ||
                strcmp(cache, "off") == 0);
    assert_true(arg_number(build, "build_ms") >= 0);
    assert_string_equal(arg_string(build, "status"), "ok");
    assert_int_equal(json_integer_value(json_object_get(build, "tid")), 0);
    json_decref(all);

    assert_kiln_ok(kiln_buffer_destroy(a));
    assert_kiln_ok(kiln_buffer_destroy(b));
    assert_kiln_ok(kiln_kernel_destroy(k));
    assert_kiln_ok(kiln_program_destroy(p));
    kiln_test_close(ctx, q);
  }
}

/* ---- other processes ------------------------------------------------------ */

/* Start this binary with --child mode and KILN_TRACE=trace; its stdout is
 * readable from *out. Returns the child's pid. */
static pid_t spawn_child(const char *mode, const char *trace, FILE **out) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    setenv("KILN_TRACE", trace, 1);
    alarm(120); /* kept across exec: a child that hangs dies */
    execl("/proc/self/exe", "test_trace", "--child", mode, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  *out = fdopen(fds[0], "r");
  assert_non_null(*out);
  return pid;
}

static int wait_child(pid_t pid) {
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return status;
}

/* Every event of the file at path comes from process pid. */
static void assert_only_pid(const char *path, pid_t pid) {
  size_t count;
  json_t *all = load_file_events(path, "kiln.op", 1, &count);
  assert_true(count >= 1);
  size_t i;
  json_t *ev;
  json_array_foreach(all, i, ev)
    assert_int_equal(json_integer_value(json_object_get(ev, "pid")), pid);
  json_decref(all);
}

static void test_trace_pid_in_path(void **state) {
  (void)state;
  char pattern[256], path[256];
  snprintf(pattern, sizeof pattern, "/tmp/kiln-test-trace-%ld-%%p.json",
           (long)getpid());
  FILE *out;
  pid_t child = spawn_child("run", pattern, &out);
  fclose(out);
  assert_int_equal(wait_child(child), 0);
  snprintf(path, sizeof path, "/tmp/kiln-test-trace-%ld-%ld.json",
           (long)getpid(), (long)child);
  assert_only_pid(path, child);
  unlink(path);
}

static void test_trace_second_process_and_kill(void **state) {
  (void)state;
  char path[256];
  snprintf(path, sizeof path, "/tmp/kiln-test-trace-%ld-shared.json",
           (long)getpid());
  unlink(path);
  FILE *first_out, *second_out;
  pid_t first = spawn_child("hold", path, &first_out);
  char line[1024] = "";
  assert_non_null(fgets(line, sizeof line, first_out));
  assert_string_equal(line, "ready\n");

  /* A second process on the same path: no events of its own in the file,
   * and it says why. */
  pid_t second = spawn_child("report", path, &second_out);
  assert_non_null(fgets(line, sizeof line, second_out));
  fclose(second_out);
  assert_int_equal(wait_child(second), 0);
  if (strstr(line, "another process") == NULL)
    fail_msg("the second process did not report the shared trace file: %s",
             line);
  assert_only_pid(path, first);

  /* The first process killed: its file still parses, with its events. */
  assert_int_equal(kill(first, SIGKILL), 0);
  int status = wait_child(first);
  assert_true(WIFSIGNALED(status));
  fclose(first_out);
  assert_only_pid(path, first);
  unlink(path);
}

/* KILN_TRACE naming a FIFO that no process reads: the process neither
 * blocks in open(2) (before the fix it never returned) nor writes a
 * trace, and says why. */
static void test_trace_fifo_without_reader(void **state) {
  (void)state;
  char path[256];
  snprintf(path, sizeof path, "/tmp/kiln-test-trace-%ld.fifo",
           (long)getpid());
  unlink(path);
  assert_int_equal(mkfifo(path, 0600), 0);
  FILE *out;
  pid_t child = spawn_child("report", path, &out);
  char line[1024] = "";
  assert_non_null(fgets(line, sizeof line, out));
  fclose(out);
  int status = wait_child(child);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail_msg("the child did not exit cleanly (status 0x%x): hung on the "
             "FIFO?",
             (unsigned)status);
  if (strstr(line, "a FIFO that no process reads") == NULL)
    fail_msg("diagnostic: %s", line);
  unlink(path);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--child") == 0)
    return child_main(argv[2]);
  snprintf(trace_path, sizeof trace_path, "/tmp/kiln-test-trace-%ld.json",
           (long)getpid());
  setenv("KILN_TRACE", trace_path, 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_trace_ops),
      cmocka_unit_test(test_trace_threads),
      cmocka_unit_test(test_trace_user_work),
      cmocka_unit_test(test_trace_pid_in_path),
      cmocka_unit_test(test_trace_second_process_and_kill),
      cmocka_unit_test(test_trace_fifo_without_reader),
  };
  int rc = KILN_TEST_RUN("trace", tests, true);
  unlink(trace_path);
  return rc;
}
