/* Views of buffer memory on real devices: mapping (kiln_buffer_map), host
 * memory wrapped as a buffer and sub-buffers, their data and lifetimes, and
 * every bad input refused with the right status and a message naming it.
 * The rest of the buffer API is test_buffer.c. */
#include <stdio.h>
#include <stdlib.h>

#include "buffer_test_util.h"

static void test_map(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(i) {
    struct fixture f = open_device(i);
    enum { N = 1024 };
    uint32_t host[N], back[N];
    for (uint32_t k = 0; k < N; k++)
      host[k] = k ^ 0x5A5A5A5Au;
    kiln_buffer *b = NULL, *other = NULL;
    assert_kiln_ok(kiln_buffer_create(f.ctx, sizeof host, 0, &b));
    assert_kiln_ok(kiln_buffer_create(f.ctx, sizeof host, 0, &other));
    kiln_range all = {b, 0, N, KILN_U32}, head = {b, 0, 16, KILN_U32};
    assert_kiln_ok(kiln_buffer_write_sync(f.queue, host, &all));

    /* Map for reading a middle range. */
    void *p = NULL;
    kiln_event *ev = NULL;
    assert_kiln_ok(kiln_buffer_map(f.queue,
                                   &(kiln_range){b, 100, 200, KILN_U32}, &p,
                                   KILN_MAP_READ, 0, NULL, &ev));
    assert_non_null(p);
    assert_kiln_ok(kiln_event_wait(ev));
    kiln_event_release(ev);
    assert_memory_equal(p, (unsigned char *)host + 400, 800);
    assert_kiln_ok(kiln_buffer_unmap(f.queue, b, p, 0, NULL, &ev));
    assert_kiln_ok(kiln_event_wait(ev));
    kiln_event_release(ev);

    /* Map for writing, then read the result back. */
    assert_kiln_ok(kiln_buffer_map(
        f.queue, &all, &p, KILN_MAP_WRITE | KILN_MAP_READ, 0, NULL, NULL));
    assert_kiln_ok(kiln_queue_finish(f.queue));
    uint32_t *words = p;
    for (uint32_t k = 0; k < N; k++)
      words[k] = host[k] = k * 7u + 3u;
    /* Destroy is refused while a mapping is live. */
    assert_kiln_status(kiln_buffer_destroy(b), KILN_ERR_BUSY);
    assert_last_error_contains("kiln_buffer_destroy: 1 mapping of this buffer "
                               "is still live");
    /* Unmap of pointers that are not this buffer's mappings. */
    assert_kiln_status(kiln_buffer_unmap(f.queue, other, p, 0, NULL, NULL),
                       KILN_ERR_INVALID_ARGUMENT);
    assert_last_error_contains("is not a live mapping of this buffer");
    assert_kiln_status(kiln_buffer_unmap(f.queue, b, host, 0, NULL, NULL),
                       KILN_ERR_INVALID_ARGUMENT);
    assert_kiln_status(kiln_buffer_unmap(f.queue, b, words + 1, 0, NULL, NULL),
                       KILN_ERR_INVALID_ARGUMENT);
    assert_kiln_ok(kiln_buffer_unmap(f.queue, b, p, 0, NULL, NULL));
    assert_kiln_status(kiln_buffer_unmap(f.queue, b, p, 0, NULL, NULL),
                       KILN_ERR_INVALID_ARGUMENT);
    assert_last_error_contains("already unmapped");
    assert_kiln_ok(kiln_buffer_read_sync(f.queue, &all, back));
    assert_memory_equal(back, host, sizeof host);

    /* The same range mapped twice needs two unmaps. */
    void *p1 = NULL, *p2 = NULL;
    assert_kiln_ok(
        kiln_buffer_map(f.queue, &head, &p1, KILN_MAP_READ, 0, NULL, NULL));
    assert_kiln_ok(
        kiln_buffer_map(f.queue, &head, &p2, KILN_MAP_READ, 0, NULL, NULL));
    assert_kiln_ok(kiln_queue_finish(f.queue));
    assert_kiln_ok(kiln_buffer_unmap(f.queue, b, p1, 0, NULL, NULL));
    assert_kiln_status(kiln_buffer_destroy(b), KILN_ERR_BUSY);
    assert_kiln_ok(kiln_buffer_unmap(f.queue, b, p2, 0, NULL, NULL));
    assert_kiln_ok(kiln_queue_finish(f.queue));

    /* Bad inputs. */
    p = (void *)(uintptr_t)1;
    assert_kiln_status(kiln_buffer_map(f.queue, &head, &p, 0, 0, NULL, NULL),
                       KILN_ERR_INVALID_ARGUMENT);
    assert_last_error_contains("kiln_buffer_map: map_flags 0x0 must be");
    assert_null(p);
    assert_kiln_status(kiln_buffer_map(f.queue, &head, &p, 0x4, 0, NULL, NULL),
                       KILN_ERR_INVALID_ARGUMENT);
    assert_last_error_contains("map_flags 0x4");
    assert_kiln_status(
        kiln_buffer_map(f.queue, &head, NULL, KILN_MAP_READ, 0, NULL, NULL),
        KILN_ERR_NULL_POINTER);
    assert_last_error_contains("kiln_buffer_map: out_ptr is NULL");
    assert_kiln_status(kiln_buffer_map(f.queue,
                                       &(kiln_range){b, 1000, 50, KILN_U32}, &p,
                                       KILN_MAP_READ, 0, NULL, NULL),
                       KILN_ERR_OUT_OF_RANGE);
    assert_last_error_contains("kiln_buffer_map: data range [offset 1000, +50 "
                               "elements of u32) exceeds the buffer's 4096 "
                               "bytes");
    assert_kiln_status(
        kiln_buffer_map(f.queue, NULL, &p, KILN_MAP_READ, 0, NULL, NULL),
        KILN_ERR_NULL_POINTER);
    assert_kiln_status(kiln_buffer_unmap(f.queue, b, NULL, 0, NULL, NULL),
                       KILN_ERR_NULL_POINTER);
    assert_last_error_contains("kiln_buffer_unmap: mapped is NULL");
    assert_kiln_status(kiln_buffer_unmap(NULL, b, host, 0, NULL, NULL),
                       KILN_ERR_NULL_POINTER);
    assert_int_equal(b->maps == NULL, 1);

    assert_kiln_ok(kiln_buffer_destroy(b));
    assert_kiln_ok(kiln_buffer_destroy(other));
    close_device(f);
  }
}

static void test_wrap_host(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(i) {
    struct fixture f = open_device(i);
    enum { N = 2048 };
    /* Page-aligned, the alignment every driver prefers for host memory. */
    float *host = aligned_alloc(4096, N * sizeof(float));
    assert_non_null(host);
    kiln_test_fill_random(host, N, -4.0f, 4.0f, 11);
    kiln_buffer *b = NULL;
    assert_kiln_ok(kiln_buffer_wrap_host(f.ctx, host, N * sizeof(float), 0, &b));
    assert_int_equal(kiln_buffer_get_size(b), N * sizeof(float));

    /* The device sees the host's data. */
    float back[N];
    assert_kiln_ok(
        kiln_buffer_read_sync(f.queue, &(kiln_range){b, 0, N, KILN_F32}, back));
    assert_memory_equal(back, host, sizeof back);

    /* Device writes reach the host memory through a map. */
    float vals[16];
    for (int k = 0; k < 16; k++)
      vals[k] = (float)k + 0.25f;
    assert_kiln_ok(kiln_buffer_write_sync(f.queue, vals,
                                          &(kiln_range){b, 64, 16, KILN_F32}));
    void *p = NULL;
    assert_kiln_ok(kiln_buffer_map(f.queue, &(kiln_range){b, 0, N, KILN_F32},
                                   &p, KILN_MAP_READ, 0, NULL, NULL));
    assert_kiln_ok(kiln_queue_finish(f.queue));
    assert_memory_equal((float *)p + 64, vals, sizeof vals);
    assert_memory_equal(host + 64, vals, sizeof vals);
    assert_kiln_ok(kiln_buffer_unmap(f.queue, b, p, 0, NULL, NULL));
    assert_kiln_ok(kiln_queue_finish(f.queue));
    assert_kiln_ok(kiln_buffer_destroy(b));
    free(host);
    close_device(f);
  }
}

static void test_sub_buffers(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(i) {
    struct fixture f = open_device(i);
    size_t align =
        kiln_context_get_device_info(f.ctx)->mem_base_addr_align_bits / 8;
    if (align < 2)
      align = 2; /* a multiple of any smaller alignment, in whole halves */
    const size_t size = 8 * align;
    unsigned char *host = malloc(size), *back = malloc(size);
    assert_non_null(host);
    assert_non_null(back);
    pattern_bytes(host, size, 5);
    kiln_buffer *parent = NULL, *view = NULL;
    assert_kiln_ok(kiln_buffer_create(f.ctx, size, 0, &parent));
    kiln_range all = {parent, 0, size / 2, KILN_F16};
    assert_kiln_ok(kiln_buffer_write_sync(f.queue, host, &all));
    assert_kiln_ok(kiln_buffer_create_sub(parent, 2 * align, 3 * align, 0,
                                          &view));
    assert_int_equal(kiln_buffer_get_size(view), 3 * align);
    assert_ptr_equal(kiln_buffer_get_context(view), f.ctx);

    /* The view sees the parent's bytes... */
    assert_kiln_ok(kiln_buffer_read_sync(
        f.queue, &(kiln_range){view, 0, 3 * align / 2, KILN_F16}, back));
    assert_memory_equal(back, host + 2 * align, 3 * align);
    /* ...and the parent sees writes through the view. */
    unsigned char word[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_kiln_ok(kiln_buffer_write_sync(f.queue, word,
                                          &(kiln_range){view, 3, 4, KILN_F16}));
    memcpy(host + 2 * align + 6, word, 8);
    assert_kiln_ok(kiln_buffer_read_sync(f.queue, &all, back));
    assert_memory_equal(back, host, size);
    /* Views are bounded by their own size. */
    assert_kiln_status(
        kiln_buffer_read_sync(
            f.queue, &(kiln_range){view, 3 * align / 2 - 2, 4, KILN_F16}, back),
        KILN_ERR_OUT_OF_RANGE);

    /* Destroying the parent waits for its views. */
    assert_kiln_status(kiln_buffer_destroy(parent), KILN_ERR_BUSY);
    assert_last_error_contains("kiln_buffer_destroy: 1 sub-buffer view of "
                               "this buffer is still alive");

    /* Bad inputs. */
    kiln_buffer *bad = (kiln_buffer *)(uintptr_t)1;
    assert_kiln_status(kiln_buffer_create_sub(view, 0, 4, 0, &bad),
                       KILN_ERR_INVALID_ARGUMENT);
    assert_last_error_contains("a view of a view is refused");
    assert_null(bad);
    assert_kiln_status(kiln_buffer_create_sub(NULL, 0, 4, 0, &bad),
                       KILN_ERR_NULL_POINTER);
    assert_last_error_contains("kiln_buffer_create_sub: parent is NULL");
    assert_kiln_status(kiln_buffer_create_sub(parent, 0, 4, 0, NULL),
                       KILN_ERR_NULL_POINTER);
    assert_kiln_status(kiln_buffer_create_sub(parent, 0, 0, 0, &bad),
                       KILN_ERR_INVALID_SIZE);
    assert_kiln_status(kiln_buffer_create_sub(parent, 7 * align, 2 * align, 0,
                                              &bad),
                       KILN_ERR_OUT_OF_RANGE);
    assert_last_error_contains("kiln_buffer_create_sub: view range");
    assert_kiln_status(kiln_buffer_create_sub(parent, SIZE_MAX - 1, 4, 0, &bad),
                       KILN_ERR_INVALID_SIZE);
    if (align > 1) {
      char text[128];
      assert_kiln_status(kiln_buffer_create_sub(parent, align / 2, 4, 0, &bad),
                         KILN_ERR_INVALID_ARGUMENT);
      snprintf(text, sizeof text,
               "offset_bytes %zu is not a multiple of the device's base "
               "address alignment of %zu bytes",
               align / 2, align);
      assert_last_error_contains(text);
    }
    assert_kiln_status(kiln_buffer_create_sub(parent, 0, 4, 0x20, &bad),
                       KILN_ERR_INVALID_ARGUMENT);
    assert_last_error_contains("unknown bits 0x20");

    /* Access may narrow, never widen. */
    kiln_buffer *ro = NULL, *narrow = NULL;
    assert_kiln_ok(kiln_buffer_create_sub(parent, 0, align, KILN_MEM_READ_ONLY,
                                          &narrow));
    assert_int_equal(narrow->flags, KILN_MEM_READ_ONLY);
    assert_kiln_ok(kiln_buffer_destroy(narrow));
    assert_kiln_ok(kiln_buffer_create(f.ctx, size, KILN_MEM_READ_ONLY, &ro));
    assert_kiln_status(kiln_buffer_create_sub(ro, 0, align, KILN_MEM_WRITE_ONLY,
                                              &bad),
                       KILN_ERR_INVALID_ARGUMENT);
    assert_last_error_contains("flags ask for write-only access but the parent "
                               "is read-only");
    assert_kiln_ok(kiln_buffer_create_sub(ro, 0, align, 0, &narrow));
    assert_int_equal(narrow->flags, KILN_MEM_READ_ONLY); /* inherited */
    assert_kiln_ok(kiln_buffer_destroy(narrow));
    assert_kiln_ok(kiln_buffer_create_sub(ro, align, align, KILN_MEM_READ_ONLY,
                                          &narrow));
    assert_kiln_ok(kiln_buffer_destroy(narrow));
    assert_kiln_ok(kiln_buffer_destroy(ro));

    assert_kiln_ok(kiln_buffer_destroy(view));
    assert_kiln_ok(kiln_buffer_destroy(parent));
    free(host);
    free(back);
    close_device(f);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_map),
      cmocka_unit_test(test_wrap_host),
      cmocka_unit_test(test_sub_buffers),
  };
  return KILN_TEST_RUN("buffer_views", tests, true);
}
