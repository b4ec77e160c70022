/* Pinned host memory and staged transfers: byte-exact at sizes 0, 1,
 * primes, non-multiples of the chunk and sizes larger than the ring, at
 * offsets; bad inputs refused before anything is enqueued; each chunk of a
 * staged copy traced under KILN_TRACE (set in main). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    p[i] = (unsigned char)((i * 2654435761u) >> 13 ^ seed);
}

static void test_bad_inputs(void **state) {
  (void)state;
  kiln_context *ctx;
  kiln_queue *queue;
  kiln_test_open(0, &ctx, &queue);
  kiln_pinned *p = (kiln_pinned *)(uintptr_t)1;
  assert_kiln_status(kiln_pinned_create(NULL, 64, &p), KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_pinned_create: queue is NULL");
  assert_null(p);
  assert_kiln_status(kiln_pinned_create(queue, 64, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_pinned_create(queue, 0, &p), KILN_ERR_INVALID_SIZE);
  assert_last_error_contains("kiln_pinned_create: size_bytes is 0");
  assert_kiln_status(kiln_pinned_create(queue, SIZE_MAX, &p),
                     KILN_ERR_INVALID_SIZE);
  assert_null(kiln_pinned_get_ptr(NULL));
  assert_int_equal(kiln_pinned_get_size(NULL), 0);
  assert_kiln_ok(kiln_pinned_destroy(NULL));

  kiln_staging *s = (kiln_staging *)(uintptr_t)1;
  assert_kiln_status(kiln_staging_create(NULL, 64, 2, &s),
                     KILN_ERR_NULL_POINTER);
  assert_null(s);
  assert_kiln_status(kiln_staging_create(queue, 64, 2, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_staging_create(queue, 0, 2, &s),
                     KILN_ERR_INVALID_SIZE);
  assert_kiln_status(kiln_staging_create(queue, 64, 0, &s),
                     KILN_ERR_INVALID_SIZE);
  assert_kiln_status(kiln_staging_create(queue, SIZE_MAX, 2, &s),
                     KILN_ERR_INVALID_SIZE);
  assert_last_error_contains("their product fit size_t");
  assert_kiln_ok(kiln_staging_destroy(NULL));

  assert_kiln_ok(kiln_staging_create(queue, 64, 2, &s));
  kiln_buffer *b;
  assert_kiln_ok(kiln_buffer_create(ctx, 100, 0, &b));
  unsigned char host[200];
  assert_kiln_status(kiln_staging_write(NULL, host,
                                        &(kiln_range){b, 0, 5, KILN_F16}, 0,
                                        NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_staging_write(s, host, NULL, 0, NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_staging_write(s, NULL,
                                        &(kiln_range){b, 0, 5, KILN_F16}, 0,
                                        NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_staging_write: src is NULL");
  assert_kiln_status(kiln_staging_write(s, host,
                                        &(kiln_range){b, 25, 26, KILN_F16}, 0,
                                        NULL, NULL),
                     KILN_ERR_OUT_OF_RANGE);
  assert_last_error_contains(
      "kiln_staging_write: dst range [offset 25, +26 elements of f16)");
  assert_kiln_status(kiln_staging_write(s, host,
                                        &(kiln_range){b, SIZE_MAX, 1, KILN_F16},
                                        0, NULL, NULL),
                     KILN_ERR_INVALID_SIZE);
  assert_kiln_status(kiln_staging_read(NULL, &(kiln_range){b, 0, 5, KILN_F16},
                                       host, 0, NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_staging_read(s, &(kiln_range){b, 0, 5, KILN_F16},
                                       NULL, 0, NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_staging_read: dst is NULL");
  assert_kiln_status(kiln_staging_read(s, &(kiln_range){b, 0, 51, KILN_F16},
                                       host, 0, NULL, NULL),
                     KILN_ERR_OUT_OF_RANGE);
  /* A buffer of another context. */
  kiln_context *other;
  assert_kiln_ok(kiln_context_create(kiln_test_device(0), NULL, &other));
  kiln_buffer *foreign;
  assert_kiln_ok(kiln_buffer_create(other, 100, 0, &foreign));
  assert_kiln_status(kiln_staging_read(s,
                                       &(kiln_range){foreign, 0, 5, KILN_F16},
                                       host, 0, NULL, NULL),
                     KILN_ERR_WRONG_CONTEXT);
  assert_kiln_ok(kiln_buffer_destroy(foreign));
  assert_kiln_ok(kiln_context_destroy(other));
  /* The context is busy while pinned memory lives. */
  assert_kiln_status(kiln_context_destroy(ctx), KILN_ERR_BUSY);
  assert_kiln_ok(kiln_buffer_destroy(b));
  assert_kiln_ok(kiln_staging_destroy(s));
  kiln_test_close(ctx, queue);
}

/* Pinned memory as the host side of ordinary transfers. */
static void test_pinned_roundtrip(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_queue *queue;
    kiln_test_open(d, &ctx, &queue);
    enum { N = 100003 }; /* a prime number of 2-byte elements */
    kiln_pinned *in, *out;
    assert_kiln_ok(kiln_pinned_create(queue, 2 * N, &in));
    assert_kiln_ok(kiln_pinned_create(queue, 2 * N, &out));
    assert_int_equal(kiln_pinned_get_size(in), 2 * N);
    fill(kiln_pinned_get_ptr(in), 2 * N, 7);
    memset(kiln_pinned_get_ptr(out), 0, 2 * N);
    kiln_buffer *b;
    assert_kiln_ok(kiln_buffer_create(ctx, 2 * N, 0, &b));
    kiln_range all = {b, 0, N, KILN_F16};
    assert_kiln_ok(
        kiln_buffer_write_sync(queue, kiln_pinned_get_ptr(in), &all));
    assert_kiln_ok(
        kiln_buffer_read_sync(queue, &all, kiln_pinned_get_ptr(out)));
    assert_memory_equal(kiln_pinned_get_ptr(in), kiln_pinned_get_ptr(out),
                        2 * N);
    assert_kiln_ok(kiln_buffer_destroy(b));
    assert_kiln_ok(kiln_pinned_destroy(in));
    assert_kiln_ok(kiln_pinned_destroy(out));
    kiln_test_close(ctx, queue);
  }
}

/* Staged writes and reads, each checked against a plain transfer, around a
 * guard band that must stay untouched. Sizes and offsets count 2-byte
 * elements, so odd counts split chunks at every place. */
static void test_staging_sizes(void **state) {
  (void)state;
  static const size_t sizes[] = {0, 1, 2, 3, 13, 251, 1024, 1025, 3071,
                                 3072, 3073, 7919, 65521, 100003};
  enum { CHUNK = 1024, CHUNKS = 3, GUARD = 64 }; /* ring: 3072 bytes */
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_queue *queue;
    kiln_test_open(d, &ctx, &queue);
    kiln_staging *s;
    assert_kiln_ok(kiln_staging_create(queue, CHUNK, CHUNKS, &s));
    size_t max = 100003 + 2 * GUARD; /* elements */
    unsigned char *src = malloc(2 * max), *dst = malloc(2 * max),
                  *back = malloc(2 * max);
    assert_non_null(src);
    assert_non_null(dst);
    assert_non_null(back);
    kiln_buffer *b;
    assert_kiln_ok(kiln_buffer_create(ctx, 2 * max, 0, &b));
    kiln_range all = {b, 0, max, KILN_F16};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      size_t n = sizes[k], off = GUARD + k % 5; /* odd offsets too */
      kiln_range part = {b, off, n, KILN_F16};
      unsigned char zero = 0;
      assert_kiln_ok(kiln_buffer_fill(queue, &zero, 1, &all, 0, NULL, NULL));
      fill(src, 2 * n, (unsigned)k);
      assert_kiln_ok(kiln_staging_write(s, src, &part, 0, NULL, NULL));
      assert_kiln_ok(kiln_buffer_read_sync(queue, &all, back));
      for (size_t i = 0; i < 2 * off; i++)
        assert_int_equal(back[i], 0);
      assert_memory_equal(back + 2 * off, src, 2 * n);
      for (size_t i = 2 * (off + n); i < 2 * max; i++)
        assert_int_equal(back[i], 0);
      /* Read back through the ring into a buffer with guards of its own. */
      memset(dst, 0xee, 2 * max);
      assert_kiln_ok(kiln_staging_read(s, &part, dst + 1, 0, NULL, NULL));
      assert_int_equal(dst[0], 0xee);
      assert_memory_equal(dst + 1, src, 2 * n);
      assert_int_equal(dst[2 * n + 1], 0xee);
    }
    assert_kiln_ok(kiln_buffer_destroy(b));
    free(src);
    free(dst);
    free(back);
    assert_kiln_ok(kiln_staging_destroy(s));
    kiln_test_close(ctx, queue);
  }
}

static char trace_path[512];

/* The chunks traced as name: their count, and their bytes and offsets
 * summed. */
struct traced {
  size_t count;
  double bytes, offsets;
};

static struct traced traced_chunks(const char *name) {
  struct traced t = {0, 0, 0};
  json_error_t err;
  json_t *all = json_load_file(trace_path, 0, &err);
  if (all == NULL)
    return t;
  size_t i;
  json_t *ev;
  json_array_foreach(all, i, ev) {
    const char *cat = json_string_value(json_object_get(ev, "cat"));
    const char *n = json_string_value(json_object_get(ev, "name"));
    if (cat == NULL || n == NULL || strcmp(cat, "kiln.transfer") != 0 ||
        strcmp(n, name) != 0)
      continue;
    json_t *args = json_object_get(ev, "args");
    t.count++;
    t.bytes += json_number_value(json_object_get(args, "bytes"));
    t.offsets += json_number_value(json_object_get(args, "offset"));
  }
  json_decref(all);
  return t;
}

/* 4500 bytes at offset 10 through 1000-byte chunks: five chunk events
 * (offsets 10, 1010, .. 4010) for the write, three for a 2500-byte read.
 * Events are written from completion callbacks, so the file is read until
 * they are all there (at most 5 s). */
static void test_staging_trace(void **state) {
  (void)state;
  kiln_context *ctx;
  kiln_queue *queue;
  kiln_test_open(0, &ctx, &queue);
  kiln_staging *s;
  assert_kiln_ok(kiln_staging_create(queue, 1000, 2, &s));
  kiln_buffer *b;
  assert_kiln_ok(kiln_buffer_create(ctx, 5000, 0, &b));
  static unsigned char data[4500], back[2500];
  fill(data, sizeof data, 7);
  /* 2-byte elements from byte 10: 5 chunks written, 3 read. */
  assert_kiln_ok(kiln_staging_write(
      s, data, &(kiln_range){b, 5, sizeof data / 2, KILN_F16}, 0, NULL, NULL));
  kiln_event *done = NULL, *gate = NULL;
  assert_kiln_ok(kiln_queue_marker(queue, 0, NULL, &gate));
  assert_kiln_ok(
      kiln_staging_read(s, &(kiln_range){b, 5, sizeof back / 2, KILN_F16}, back,
                        1, &gate, &done));
  kiln_event_state done_state = KILN_EVENT_QUEUED;
  assert_kiln_ok(kiln_event_get_state(done, &done_state));
  assert_int_equal(done_state, KILN_EVENT_COMPLETE);
  kiln_event_release(gate);
  kiln_event_release(done);
  assert_memory_equal(back, data, sizeof back);
  assert_kiln_ok(kiln_buffer_destroy(b));
  assert_kiln_ok(kiln_staging_destroy(s));
  kiln_test_close(ctx, queue);
  struct traced w = {0, 0, 0}, r = {0, 0, 0};
  for (int tries = 0; tries < 500 && (w.count < 5 || r.count < 3); tries++) {
    w = traced_chunks("kiln_staging_write");
    r = traced_chunks("kiln_staging_read");
    if (w.count < 5 || r.count < 3)
      nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  assert_int_equal(w.count, 5);
  assert_true(w.bytes == 4500.0);
  assert_true(w.offsets == 10.0 + 1010.0 + 2010.0 + 3010.0 + 4010.0);
  assert_int_equal(r.count, 3);
  assert_true(r.bytes == 2500.0);
  assert_true(r.offsets == 10.0 + 1010.0 + 2010.0);
}

int main(void) {
  if (!kiln_test_trace_to("pinned-trace.json", trace_path,
                          sizeof trace_path))
    return 1;
  /* The trace test first: it counts every staged chunk in the file. */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_staging_trace),
      cmocka_unit_test(test_bad_inputs),
      cmocka_unit_test(test_pinned_roundtrip),
      cmocka_unit_test(test_staging_sizes),
  };
  return KILN_TEST_RUN("pinned", tests, true);
}
