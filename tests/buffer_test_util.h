/* What the buffer tests (test_buffer.c, test_buffer_views.c) share: a
 * context and queue per test device, and a byte pattern. Header-only. */
#ifndef KILN_BUFFER_TEST_UTIL_H
#define KILN_BUFFER_TEST_UTIL_H

#include "harness.h"
#include "core/internal.h"

struct fixture {
  kiln_context *ctx;
  kiln_queue *queue;
};

static inline struct fixture open_device(size_t index) {
  struct fixture f = {0};
  kiln_test_open(index, &f.ctx, &f.queue);
  return f;
}

static inline void close_device(struct fixture f) {
  assert_int_equal(atomic_load(&f.ctx->children), 1); /* just the queue */
  kiln_test_close(f.ctx, f.queue);
}

static inline void pattern_bytes(unsigned char *p, size_t n, unsigned seed) {
  for (size_t k = 0; k < n; k++)
    p[k] = (unsigned char)(k * 131u + seed * 17u + 1u);
}

#endif
