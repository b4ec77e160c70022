/* Buffers: data correctness of every transfer on real devices, and every
 * bad input refused with the right status and a message naming it. Views
 * of memory (mapping, wrapped host memory, sub-buffers) are
 * test_buffer_views.c. */
#include <stdio.h>
#include <stdlib.h>

#include "buffer_test_util.h"

static void test_create_bad_inputs(void **state) {
  (void)state;
  struct fixture f = open_device(0);
  const kiln_device_info *info = kiln_context_get_device_info(f.ctx);
  kiln_buffer *b = (kiln_buffer *)(uintptr_t)1;
  char text[160];

  assert_kiln_status(kiln_buffer_create(NULL, 64, 0, &b), KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_buffer_create: ctx is NULL");
  assert_null(b);
  assert_kiln_status(kiln_buffer_create(f.ctx, 64, 0, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_buffer_create: out is NULL");
  assert_kiln_status(kiln_buffer_create(f.ctx, 0, 0, &b), KILN_ERR_INVALID_SIZE);
  assert_last_error_contains("kiln_buffer_create: size_bytes is 0");
  size_t too_big = (size_t)info->max_alloc_bytes + 1;
  assert_kiln_status(kiln_buffer_create(f.ctx, too_big, 0, &b),
                     KILN_ERR_INVALID_SIZE);
  snprintf(text, sizeof text, "size_bytes %zu exceeds the device's maximum "
                              "allocation of %llu bytes",
           too_big, (unsigned long long)info->max_alloc_bytes);
  assert_last_error_contains(text);
  assert_kiln_status(kiln_buffer_create(f.ctx, SIZE_MAX, 0, &b),
                     KILN_ERR_INVALID_SIZE);
  assert_kiln_status(kiln_buffer_create(f.ctx, 64, 0x40, &b),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_last_error_contains("kiln_buffer_create: flags has unknown bits 0x40");
  assert_kiln_status(
      kiln_buffer_create(f.ctx, 64, KILN_MEM_READ_ONLY | KILN_MEM_WRITE_ONLY,
                         &b),
      KILN_ERR_INVALID_ARGUMENT);
  assert_last_error_contains("both KILN_MEM_READ_ONLY and KILN_MEM_WRITE_ONLY");
  assert_null(b);

  unsigned char host[64];
  assert_kiln_status(kiln_buffer_wrap_host(f.ctx, NULL, 64, 0, &b),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_buffer_wrap_host: host is NULL");
  assert_kiln_status(kiln_buffer_wrap_host(NULL, host, 64, 0, &b),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_buffer_wrap_host(f.ctx, host, 0, 0, &b),
                     KILN_ERR_INVALID_SIZE);
  assert_last_error_contains("kiln_buffer_wrap_host: size_bytes is 0");
  assert_kiln_status(kiln_buffer_wrap_host(f.ctx, host, 64, 8, &b),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_kiln_status(kiln_buffer_wrap_host(f.ctx, host, 64, 0, NULL),
                     KILN_ERR_NULL_POINTER);

  assert_kiln_ok(kiln_buffer_destroy(NULL));
  assert_int_equal(kiln_buffer_get_size(NULL), 0);
  assert_null(kiln_buffer_get_context(NULL));

  for (unsigned flags = 0; flags <= KILN_MEM_WRITE_ONLY; flags++) {
    assert_kiln_ok(kiln_buffer_create(f.ctx, 100, flags, &b));
    assert_int_equal(kiln_buffer_get_size(b), 100);
    assert_ptr_equal(kiln_buffer_get_context(b), f.ctx);
    assert_int_equal(b->flags, flags);
    assert_kiln_ok(kiln_buffer_destroy(b));
  }
  close_device(f);
}

static void test_range_checks(void **state) {
  (void)state;
  struct fixture f = open_device(0);
  kiln_buffer *b = NULL;
  assert_kiln_ok(kiln_buffer_create(f.ctx, 128, 0, &b));
  unsigned char host[256] = {0};

  /* Ranges count elements of their dtype. */
  assert_kiln_status(kiln_buffer_write(f.queue, host,
                                       &(kiln_range){b, 24, 16, KILN_U32}, 0,
                                       NULL, NULL),
                     KILN_ERR_OUT_OF_RANGE);
  assert_last_error_contains("kiln_buffer_write: dst range [offset 24, +16 "
                             "elements of u32) exceeds the buffer's 128 "
                             "bytes");
  assert_kiln_status(kiln_buffer_read(f.queue,
                                      &(kiln_range){b, 0, 33, KILN_U32}, host,
                                      0, NULL, NULL),
                     KILN_ERR_OUT_OF_RANGE);
  assert_last_error_contains("kiln_buffer_read: src range [offset 0, +33 "
                             "elements of u32) exceeds the buffer's 128 "
                             "bytes");
  assert_kiln_status(kiln_buffer_read(f.queue,
                                      &(kiln_range){b, 32, 1, KILN_U32}, host,
                                      0, NULL, NULL),
                     KILN_ERR_OUT_OF_RANGE);
  assert_kiln_ok(kiln_buffer_read(f.queue, &(kiln_range){b, 63, 1, KILN_F16},
                                  host, 0, NULL, NULL));
  assert_kiln_ok(kiln_queue_finish(f.queue));
  assert_kiln_status(
      kiln_buffer_write(f.queue, host,
                        &(kiln_range){b, SIZE_MAX - 3, 2, KILN_U32}, 0, NULL,
                        NULL),
      KILN_ERR_INVALID_SIZE);
  assert_last_error_contains("overflows size_t");
  assert_kiln_status(kiln_buffer_write(f.queue, host,
                                       &(kiln_range){b, 0, 0, KILN_U32}, 0,
                                       NULL, NULL),
                     KILN_ERR_INVALID_SIZE);
  assert_last_error_contains("kiln_buffer_write: dst range [offset 0, +0 "
                             "elements) is empty");
  assert_kiln_status(kiln_buffer_write(f.queue, host,
                                       &(kiln_range){b, 0, 1, (kiln_dtype)42},
                                       0, NULL, NULL),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_last_error_contains("kiln_buffer_write: dst dtype 42 is not a "
                             "kiln_dtype");
  assert_kiln_status(
      kiln_buffer_write_sync(f.queue, host, &(kiln_range){b, 50, 15, KILN_F16}),
      KILN_ERR_OUT_OF_RANGE);
  assert_kiln_status(
      kiln_buffer_read_sync(f.queue, &(kiln_range){b, 50, 15, KILN_F16}, host),
      KILN_ERR_OUT_OF_RANGE);

  /* The shared checker, as other modules use it. */
  assert_kiln_ok(kiln__buffer_range(b, 0, 128, "x"));
  assert_kiln_ok(kiln__buffer_range(b, 127, 1, "x"));
  assert_kiln_status(kiln__buffer_range(b, 127, 2, "kiln_op: y"),
                     KILN_ERR_OUT_OF_RANGE);
  assert_last_error_contains("kiln_op: y range [offset 127, +2 bytes) exceeds "
                             "the buffer's 128 bytes");
  assert_kiln_status(kiln__buffer_range(NULL, 0, 1, "kiln_op: z"),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_op: z is NULL");
  assert_kiln_status(kiln__buffer_range(b, SIZE_MAX, SIZE_MAX, "w"),
                     KILN_ERR_INVALID_SIZE);

  /* NULL handles and pointers. */
  kiln_range word = {b, 0, 1, KILN_U32};
  assert_kiln_status(kiln_buffer_write(NULL, host, &word, 0, NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_buffer_write: queue is NULL");
  assert_kiln_status(kiln_buffer_write(f.queue, host, NULL, 0, NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_buffer_write: dst is NULL");
  assert_kiln_status(kiln_buffer_write(f.queue, host,
                                       &(kiln_range){NULL, 0, 1, KILN_U32}, 0,
                                       NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_buffer_write: dst->buffer is NULL");
  assert_kiln_status(kiln_buffer_write(f.queue, NULL, &word, 0, NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_buffer_write: src is NULL");
  assert_kiln_status(kiln_buffer_read(f.queue, &word, NULL, 0, NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_buffer_read: dst is NULL");
  assert_kiln_status(kiln_buffer_read(f.queue, NULL, host, 0, NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_buffer_read: src is NULL");
  kiln_event *ev = (kiln_event *)(uintptr_t)1;
  assert_kiln_status(kiln_buffer_write(f.queue, host, &word, 3, NULL, &ev),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_buffer_write: wait_list is NULL but "
                             "num_wait is 3");
  assert_null(ev);

  /* A queue of another context. */
  struct fixture g = open_device(0);
  assert_kiln_status(kiln_buffer_write(g.queue, host, &word, 0, NULL, NULL),
                     KILN_ERR_WRONG_CONTEXT);
  assert_last_error_contains("kiln_buffer_write: dst belongs to another "
                             "context than the queue");
  kiln_buffer *c = NULL;
  assert_kiln_ok(kiln_buffer_create(g.ctx, 128, 0, &c));
  assert_kiln_status(kiln_buffer_copy(f.queue, &word,
                                      &(kiln_range){c, 0, 1, KILN_U32}, 0, NULL,
                                      NULL),
                     KILN_ERR_WRONG_CONTEXT);
  assert_last_error_contains("kiln_buffer_copy: dst belongs to another");
  assert_kiln_ok(kiln_buffer_destroy(c));
  close_device(g);

  assert_kiln_ok(kiln_buffer_destroy(b));
  close_device(f);
}

static void test_write_read_offsets(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(i) {
    struct fixture f = open_device(i);
    enum { SIZE = 4096, HALVES = SIZE / 2 };
    unsigned char expect[SIZE], data[SIZE], back[SIZE];
    kiln_buffer *b = NULL;
    assert_kiln_ok(kiln_buffer_create(f.ctx, SIZE, 0, &b));
    kiln_range all = {b, 0, HALVES, KILN_F16};
    memset(expect, 0xAB, SIZE);
    assert_kiln_ok(kiln_buffer_write_sync(f.queue, expect, &all));
    /* Offsets and counts in 2-byte elements. */
    static const size_t cases[][2] = {{0, 1},      {37, 100},   {2047, 1},
                                      {500, 1500}, {0, HALVES}, {1024, 77}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      size_t off = cases[c][0], n = cases[c][1];
      kiln_range part = {b, off, n, KILN_F16};
      pattern_bytes(data, 2 * n, (unsigned)c);
      memcpy(expect + 2 * off, data, 2 * n);
      kiln_event *w = NULL, *r = NULL;
      memset(back, 0, SIZE);
      assert_kiln_ok(kiln_buffer_write(f.queue, data, &part, 0, NULL, &w));
      /* Reading through the wait list, then checking the whole buffer. */
      assert_kiln_ok(kiln_buffer_read(f.queue, &part, back, 1, &w, &r));
      assert_kiln_ok(kiln_event_wait(r));
      assert_memory_equal(back, data, 2 * n);
      kiln_event_release(w);
      kiln_event_release(r);
      assert_kiln_ok(kiln_buffer_read_sync(f.queue, &all, back));
      assert_memory_equal(back, expect, SIZE);
    }
    assert_kiln_ok(kiln_buffer_destroy(b));
    close_device(f);
  }
}

static void test_copy(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(i) {
    struct fixture f = open_device(i);
    enum { SIZE = 8192, HALVES = SIZE / 2 };
    unsigned char a_host[SIZE], b_host[SIZE], back[SIZE];
    pattern_bytes(a_host, SIZE, 1);
    memset(b_host, 0, SIZE);
    kiln_buffer *a = NULL, *b = NULL;
    assert_kiln_ok(kiln_buffer_create(f.ctx, SIZE, 0, &a));
    assert_kiln_ok(kiln_buffer_create(f.ctx, SIZE, 0, &b));
    kiln_range all_a = {a, 0, HALVES, KILN_F16},
               all_b = {b, 0, HALVES, KILN_F16};
    assert_kiln_ok(kiln_buffer_write_sync(f.queue, a_host, &all_a));
    assert_kiln_ok(kiln_buffer_write_sync(f.queue, b_host, &all_b));

    /* Between buffers, at offsets (2-byte elements). */
    kiln_event *ev = NULL;
    assert_kiln_ok(
        kiln_buffer_copy(f.queue, &(kiln_range){a, 50, 617, KILN_F16},
                         &(kiln_range){b, 1500, 617, KILN_F16}, 0, NULL, &ev));
    assert_kiln_ok(kiln_event_wait(ev));
    kiln_event_release(ev);
    memcpy(b_host + 3000, a_host + 100, 1234);
    assert_kiln_ok(kiln_buffer_read_sync(f.queue, &all_b, back));
    assert_memory_equal(back, b_host, SIZE);

    /* Within one buffer, non-overlapping (touching ranges are fine). */
    assert_kiln_ok(kiln_buffer_copy(
        f.queue, &(kiln_range){a, 0, HALVES / 2, KILN_F16},
        &(kiln_range){a, HALVES / 2, HALVES / 2, KILN_F16}, 0, NULL, NULL));
    memcpy(a_host + 4096, a_host, 4096);
    assert_kiln_ok(kiln_buffer_read_sync(f.queue, &all_a, back));
    assert_memory_equal(back, a_host, SIZE);

    /* Overlap within one buffer, and through two views of it. */
    assert_kiln_status(
        kiln_buffer_copy(f.queue, &(kiln_range){a, 0, 100, KILN_F16},
                         &(kiln_range){a, 50, 100, KILN_F16}, 0, NULL, NULL),
        KILN_ERR_INVALID_ARGUMENT);
    assert_last_error_contains("kiln_buffer_copy: src range [offset 0, +200 "
                               "bytes) and dst range [offset 100, +200 bytes) "
                               "overlap");
    size_t align =
        kiln_context_get_device_info(f.ctx)->mem_base_addr_align_bits / 8;
    if (align >= 2 && align * 3 <= SIZE) {
      kiln_buffer *v1 = NULL, *v2 = NULL;
      assert_kiln_ok(kiln_buffer_create_sub(a, 0, 2 * align, 0, &v1));
      assert_kiln_ok(kiln_buffer_create_sub(a, align, 2 * align, 0, &v2));
      size_t h = align / 2; /* elements in align bytes */
      assert_kiln_status(kiln_buffer_copy(f.queue,
                                          &(kiln_range){v1, 0, h + 1, KILN_F16},
                                          &(kiln_range){v2, 0, h + 1, KILN_F16},
                                          0, NULL, NULL),
                         KILN_ERR_INVALID_ARGUMENT);
      assert_last_error_contains("overlap in the same buffer");
      /* Adjacent parts of the two views do not overlap. */
      assert_kiln_ok(
          kiln_buffer_copy(f.queue, &(kiln_range){v1, 0, h, KILN_F16},
                           &(kiln_range){v2, h, h, KILN_F16}, 0, NULL, NULL));
      memcpy(a_host + 2 * align, a_host, align);
      assert_kiln_ok(kiln_buffer_read_sync(f.queue, &all_a, back));
      assert_memory_equal(back, a_host, SIZE);
      assert_kiln_ok(kiln_buffer_destroy(v2));
      assert_kiln_ok(kiln_buffer_destroy(v1));
    }

    /* Bad inputs. */
    kiln_range two = {b, 0, 2, KILN_F16};
    assert_kiln_status(kiln_buffer_copy(f.queue, NULL, &two, 0, NULL, NULL),
                       KILN_ERR_NULL_POINTER);
    assert_last_error_contains("kiln_buffer_copy: src is NULL");
    assert_kiln_status(kiln_buffer_copy(f.queue, &two, NULL, 0, NULL, NULL),
                       KILN_ERR_NULL_POINTER);
    assert_last_error_contains("kiln_buffer_copy: dst is NULL");
    assert_kiln_status(
        kiln_buffer_copy(f.queue, &(kiln_range){a, HALVES - 2, 4, KILN_F16},
                         &(kiln_range){b, 0, 4, KILN_F16}, 0, NULL, NULL),
        KILN_ERR_OUT_OF_RANGE);
    assert_last_error_contains("kiln_buffer_copy: src range [offset 4094, +4 "
                               "elements of f16)");
    assert_kiln_status(
        kiln_buffer_copy(f.queue, &(kiln_range){a, 0, 1, KILN_F16},
                         &(kiln_range){b, HALVES, 1, KILN_F16}, 0, NULL, NULL),
        KILN_ERR_OUT_OF_RANGE);
    assert_last_error_contains("kiln_buffer_copy: dst range");
    assert_kiln_status(
        kiln_buffer_copy(f.queue, &(kiln_range){a, 0, 0, KILN_F16},
                         &(kiln_range){b, 0, 0, KILN_F16}, 0, NULL, NULL),
        KILN_ERR_INVALID_SIZE);
    /* src and dst must agree: the same count and dtype. */
    assert_kiln_status(kiln_buffer_copy(f.queue, &two,
                                        &(kiln_range){a, 0, 3, KILN_F16}, 0,
                                        NULL, NULL),
                       KILN_ERR_SHAPE_MISMATCH);
    assert_last_error_contains("kiln_buffer_copy: src (2 elements of f16) and "
                               "dst (3 elements of f16) differ");
    assert_kiln_status(kiln_buffer_copy(f.queue, &two,
                                        &(kiln_range){a, 0, 2, KILN_BF16}, 0,
                                        NULL, NULL),
                       KILN_ERR_SHAPE_MISMATCH);

    assert_kiln_ok(kiln_buffer_destroy(a));
    assert_kiln_ok(kiln_buffer_destroy(b));
    close_device(f);
  }
}

static void test_fill(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(i) {
    struct fixture f = open_device(i);
    enum { SIZE = 2048 };
    unsigned char expect[SIZE], back[SIZE], pattern[128];
    kiln_buffer *b = NULL;
    assert_kiln_ok(kiln_buffer_create(f.ctx, SIZE, 0, &b));
    kiln_range all = {b, 0, SIZE / 2, KILN_F16};
    for (size_t p = 1; p <= 128; p *= 2) {
      memset(expect, 0, SIZE);
      assert_kiln_ok(kiln_buffer_write_sync(f.queue, expect, &all));
      pattern_bytes(pattern, p, (unsigned)p);
      /* Bytes [2p, 8p): 2-byte elements [p, 4p). */
      size_t off = 2 * p, n = 6 * p;
      kiln_event *ev = NULL;
      assert_kiln_ok(kiln_buffer_fill(f.queue, pattern, p,
                                      &(kiln_range){b, p, 3 * p, KILN_F16}, 0,
                                      NULL, &ev));
      /* The pattern is copied before fill returns. */
      memset(pattern, 0xEE, sizeof pattern);
      assert_kiln_ok(kiln_event_wait(ev));
      kiln_event_release(ev);
      pattern_bytes(pattern, p, (unsigned)p);
      for (size_t k = 0; k < n; k++)
        expect[off + k] = pattern[k % p];
      assert_kiln_ok(kiln_buffer_read_sync(f.queue, &all, back));
      if (memcmp(back, expect, SIZE) != 0)
        fail_msg("fill with a %zu-byte pattern gave wrong data", p);
    }
    /* Whole buffer. */
    float one = 1.5f;
    kiln_range floats_all = {b, 0, SIZE / 4, KILN_F32};
    assert_kiln_ok(
        kiln_buffer_fill(f.queue, &one, 4, &floats_all, 0, NULL, NULL));
    float floats[SIZE / 4];
    assert_kiln_ok(kiln_buffer_read_sync(f.queue, &floats_all, floats));
    for (size_t k = 0; k < SIZE / 4; k++)
      assert_true(floats[k] == 1.5f);

    /* Bad inputs. */
    kiln_range four = {b, 0, 4, KILN_U32};
    assert_kiln_status(kiln_buffer_fill(f.queue, NULL, 4, &four, 0, NULL, NULL),
                       KILN_ERR_NULL_POINTER);
    assert_last_error_contains("kiln_buffer_fill: pattern is NULL");
    assert_kiln_status(
        kiln_buffer_fill(f.queue, pattern, 4, NULL, 0, NULL, NULL),
        KILN_ERR_NULL_POINTER);
    assert_last_error_contains("kiln_buffer_fill: dst is NULL");
    static const size_t bad_sizes[] = {0, 3, 6, 12, 100, 256};
    for (size_t k = 0; k < sizeof bad_sizes / sizeof bad_sizes[0]; k++) {
      assert_kiln_status(kiln_buffer_fill(f.queue, pattern, bad_sizes[k],
                                          &(kiln_range){b, 0, 192, KILN_U32}, 0,
                                          NULL, NULL),
                         KILN_ERR_INVALID_SIZE);
      assert_last_error_contains("is not one of 1, 2, 4, 8, 16, 32, 64, 128");
    }
    assert_kiln_status(kiln_buffer_fill(f.queue, pattern, 8,
                                        &(kiln_range){b, 1, 4, KILN_U32}, 0,
                                        NULL, NULL),
                       KILN_ERR_INVALID_ARGUMENT);
    assert_last_error_contains("kiln_buffer_fill: dst's bytes [offset 4, +16) "
                               "must start and end at multiples of "
                               "pattern_bytes 8");
    assert_kiln_status(kiln_buffer_fill(f.queue, pattern, 8,
                                        &(kiln_range){b, 2, 3, KILN_U32}, 0,
                                        NULL, NULL),
                       KILN_ERR_INVALID_ARGUMENT);
    assert_kiln_status(kiln_buffer_fill(f.queue, pattern, 8,
                                        &(kiln_range){b, SIZE / 4, 2, KILN_U32},
                                        0, NULL, NULL),
                       KILN_ERR_OUT_OF_RANGE);
    assert_last_error_contains("kiln_buffer_fill: dst range");
    assert_kiln_status(kiln_buffer_fill(f.queue, pattern, 8,
                                        &(kiln_range){b, 0, 0, KILN_U32}, 0,
                                        NULL, NULL),
                       KILN_ERR_INVALID_SIZE);
    assert_kiln_ok(kiln_buffer_destroy(b));
    close_device(f);
  }
}

/* Destroying a buffer with work pending: the handle goes at once, the
 * commands still complete, and the queue finishes cleanly. */
static void test_destroy_with_pending_work(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(i) {
    struct fixture f = open_device(i);
    const size_t bytes = 32u << 20;
    unsigned char *host = malloc(bytes), *back = malloc(bytes);
    assert_non_null(host);
    assert_non_null(back);
    for (size_t k = 0; k < bytes; k += 4096)
      host[k] = (unsigned char)(k >> 12);

    kiln_buffer *a = NULL, *b = NULL;
    assert_kiln_ok(kiln_buffer_create(f.ctx, bytes, 0, &a));
    kiln_event *ev = NULL;
    assert_kiln_ok(kiln_buffer_write(
        f.queue, host, &(kiln_range){a, 0, bytes / 4, KILN_U32}, 0, NULL, &ev));
    assert_kiln_ok(kiln_buffer_destroy(a));
    assert_kiln_ok(kiln_queue_finish(f.queue));
    assert_kiln_ok(kiln_event_wait(ev));
    kiln_event_release(ev);

    /* A copy whose source is destroyed before it runs still copies. */
    assert_kiln_ok(kiln_buffer_create(f.ctx, bytes, 0, &a));
    assert_kiln_ok(kiln_buffer_create(f.ctx, bytes, 0, &b));
    kiln_range all_a = {a, 0, bytes / 4, KILN_U32};
    kiln_range all_b = {b, 0, bytes / 4, KILN_U32};
    assert_kiln_ok(kiln_buffer_write(f.queue, host, &all_a, 0, NULL, NULL));
    assert_kiln_ok(kiln_buffer_copy(f.queue, &all_a, &all_b, 0, NULL, NULL));
    assert_kiln_ok(kiln_buffer_destroy(a));
    assert_kiln_ok(kiln_buffer_read(f.queue, &all_b, back, 0, NULL, NULL));
    assert_kiln_ok(kiln_buffer_destroy(b));
    assert_kiln_ok(kiln_queue_finish(f.queue));
    assert_memory_equal(back, host, bytes);
    free(host);
    free(back);
    close_device(f);
  }
}

static void test_long_wait_list(void **state) {
  (void)state;
  struct fixture f = open_device(0);
  enum { EVENTS = 24 };
  uint32_t values[EVENTS], back[EVENTS] = {0};
  kiln_buffer *b = NULL;
  assert_kiln_ok(kiln_buffer_create(f.ctx, sizeof values, 0, &b));
  kiln_event *events[EVENTS];
  for (uint32_t k = 0; k < EVENTS; k++) {
    values[k] = 1000u + k;
    assert_kiln_ok(kiln_buffer_write(f.queue, &values[k],
                                     &(kiln_range){b, k, 1, KILN_U32}, 0, NULL,
                                     &events[k]));
  }
  kiln_event *read = NULL;
  assert_kiln_ok(kiln_buffer_read(f.queue,
                                  &(kiln_range){b, 0, EVENTS, KILN_U32}, back,
                                  EVENTS, events, &read));
  assert_kiln_ok(kiln_event_wait(read));
  assert_memory_equal(back, values, sizeof values);
  kiln_event_release(read);
  kiln_event *saved = events[20];
  events[20] = NULL;
  assert_kiln_status(kiln_buffer_read(f.queue, &(kiln_range){b, 0, 1, KILN_U32},
                                      back, EVENTS, events, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("kiln_buffer_read: wait_list[20] is NULL");
  events[20] = saved;
  for (size_t k = 0; k < EVENTS; k++)
    kiln_event_release(events[k]);
  assert_kiln_ok(kiln_buffer_destroy(b));
  close_device(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_bad_inputs),
      cmocka_unit_test(test_range_checks),
      cmocka_unit_test(test_write_read_offsets),
      cmocka_unit_test(test_copy),
      cmocka_unit_test(test_fill),
      cmocka_unit_test(test_destroy_with_pending_work),
      cmocka_unit_test(test_long_wait_list),
  };
  return KILN_TEST_RUN("buffer", tests, true);
}
