/* kiln_mpi's collectives against a float64 host computation of the same
 * data, run by tests/mpi_run.sh under `mpirun -np N` (N = 1, 2, 3).
 *
 * Every rank can compute every rank's input (a hash of rank and index), so
 * each checks its own result against a host reference without extra MPI.
 * Tolerances follow from the arithmetic: a sum of P f32 values reduced in any
 * order is within (P - 1) * 2^-24 * sum|x| of the exact sum; MEAN adds one
 * division (2^-24 relative); storing to f16 / bf16 adds half an ulp (2^-11 /
 * 2^-8 relative, and half the smallest f16 subnormal, 2^-25, absolute); MAX
 * and MIN are exact. Not cmocka: one process per rank, each counting its
 * failures, summed over the ranks at the end. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln/kiln_mpi.h"

static int failures, rank_, size_;

#define check(cond, ...)                                                     \
  do {                                                                       \
    if (!(cond)) {                                                           \
      failures++;                                                            \
      fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", rank_, __FILE__, \
              __LINE__, #cond);                                              \
      fprintf(stderr, __VA_ARGS__);                                          \
      fprintf(stderr, "\n");                                                 \
    }                                                                        \
  } while (0)

#define assert_kiln_status(expr, expected)                                   \
  do {                                                                       \
    kiln_status s_ = (expr);                                                 \
    check(s_ == (expected), "returned %s, expected %s (last error: %s)",     \
          kiln_status_name(s_), kiln_status_name(expected),                  \
          kiln_last_error());                                                \
  } while (0)
#define assert_kiln_ok(expr) assert_kiln_status(expr, KILN_OK)
#define assert_int_equal(a, b) check((a) == (b), "%d != %d", (int)(a), (int)(b))
#define assert_last_error_contains(text)                                     \
  check(strstr(kiln_last_error(), text) != NULL, "last error '%s'",          \
        kiln_last_error())

static kiln_queue *queue;
static kiln_context *ctx;

/* Input element i of rank r: a value in [-4, 4) with 12 significant bits,
 * exact in every dtype's range but not in f16/bf16 after summing. */
static double input(int r, size_t i, unsigned salt) {
  uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)(r * 40503u + salt);
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return ((double)(h & 0xfff) - 2048.0) / 512.0;
}

static void store(kiln_dtype dtype, void *host, size_t i, double v) {
  float f = (float)v;
  if (dtype == KILN_F32)
    ((float *)host)[i] = f;
  else if (dtype == KILN_F16)
    kiln_f32_to_f16(&f, (uint16_t *)host + i, 1);
  else
    kiln_f32_to_bf16(&f, (uint16_t *)host + i, 1);
}

static double load(kiln_dtype dtype, const void *host, size_t i) {
  float f;
  if (dtype == KILN_F32)
    return ((const float *)host)[i];
  if (dtype == KILN_F16)
    kiln_f16_to_f32((const uint16_t *)host + i, &f, 1);
  else
    kiln_bf16_to_f32((const uint16_t *)host + i, &f, 1);
  return f;
}

/* Rank r's element i after storing in dtype (what the device holds). */
static double stored(kiln_dtype dtype, int r, size_t i, unsigned salt) {
  unsigned char tmp[4];
  store(dtype, tmp, 0, input(r, i, salt));
  return load(dtype, tmp, 0);
}

/* Whether got matches op over every rank's element i, within the bound. */
static bool close_to_reference(kiln_dtype dtype, kiln_reduce_op op, size_t i,
                               unsigned salt, double got, double *want) {
  double sum = 0, mag = 0, best = stored(dtype, 0, i, salt);
  for (int r = 0; r < size_; r++) {
    double x = stored(dtype, r, i, salt);
    sum += x;
    mag += fabs(x);
    best = op == KILN_REDUCE_MAX ? fmax(best, x) : fmin(best, x);
  }
  if (op == KILN_REDUCE_MAX || op == KILN_REDUCE_MIN) {
    *want = best;
    return got == best;
  }
  double exact = op == KILN_REDUCE_MEAN ? sum / size_ : sum;
  double scale = op == KILN_REDUCE_MEAN ? 1.0 / size_ : 1.0;
  double tol = (size_ - 1) * 0x1p-24 * mag * scale + 0x1p-24 * fabs(exact);
  if (dtype == KILN_F16)
    tol += 0x1p-11 * fabs(exact) + 0x1p-25;
  if (dtype == KILN_BF16)
    tol += 0x1p-8 * fabs(exact);
  *want = exact;
  return fabs(got - exact) <= tol;
}

/* Whether every rank holds the same bytes as rank 0. */
static bool same_on_every_rank(const void *data, size_t bytes) {
  unsigned char *mine = malloc(bytes ? bytes : 1);
  memcpy(mine, data, bytes);
  for (size_t at = 0; at < bytes; at += (size_t)1 << 30) {
    size_t n = bytes - at < ((size_t)1 << 30) ? bytes - at : (size_t)1 << 30;
    MPI_Bcast(mine + at, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
  }
  int same = memcmp(mine, data, bytes) == 0, all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  free(mine);
  return all != 0;
}

/* Allreduce count elements at a 64-byte offset of a buffer whose bytes
 * around the range are a sentinel, and check range and sentinel. */
static void allreduce_case(kiln_mpi *mpi, size_t count, kiln_dtype dtype,
                           kiln_reduce_op op, bool blocking) {
  size_t es = kiln_dtype_size(dtype), pad = 64, bytes = count * es;
  unsigned salt = (unsigned)(count * 7 + dtype * 3 + op);
  unsigned char *host = malloc(bytes + 2 * pad);
  memset(host, 0xa5, bytes + 2 * pad);
  for (size_t i = 0; i < count; i++)
    store(dtype, host + pad, i, input(rank_, i, salt));
  kiln_buffer *buf = NULL;
  assert_kiln_ok(kiln_buffer_create(ctx, bytes + 2 * pad, 0, &buf));
  assert_kiln_ok(kiln_buffer_write_sync(
      queue, host, &(kiln_range){buf, 0, count + 2 * pad / es, dtype}));
  if (blocking) {
    /* Blocking: its out event is complete when it returns. */
    kiln_event *done = NULL;
    kiln_event_state state = KILN_EVENT_QUEUED;
    assert_kiln_ok(kiln_mpi_allreduce(
        mpi, queue, &(kiln_range){buf, pad / es, count, dtype}, op, 0, NULL,
        &done));
    assert_kiln_ok(kiln_event_get_state(done, &state));
    check(state == KILN_EVENT_COMPLETE, "out_event state %d after return",
          (int)state);
    kiln_event_release(done);
  } else {
    kiln_mpi_request *req = NULL;
    assert_kiln_ok(kiln_mpi_iallreduce(
        mpi, queue, &(kiln_range){buf, pad / es, count, dtype}, op, 0, NULL,
        &req));
    bool done = false;
    while (req != NULL && kiln_mpi_test(req, &done) == KILN_OK && !done)
      ;
    assert_kiln_ok(kiln_mpi_wait(req));
  }
  memset(host, 0, bytes + 2 * pad);
  assert_kiln_ok(kiln_buffer_read_sync(
      queue, &(kiln_range){buf, 0, count + 2 * pad / es, dtype}, host));
  size_t bad = 0;
  for (size_t i = 0; i < pad; i++)
    bad += (host[i] != 0xa5) + (host[pad + bytes + i] != 0xa5);
  check(bad == 0, "%zu sentinel bytes around the range changed", bad);
  bad = 0;
  for (size_t i = 0; i < count; i++) {
    double want, got = load(dtype, host + pad, i);
    if (!close_to_reference(dtype, op, i, salt, got, &want) && bad++ < 3)
      check(false, "allreduce %s op %d count %zu: [%zu] = %.9g, want %.9g",
            kiln_dtype_name(dtype), op, count, i, got, want);
  }
  check(same_on_every_rank(host + pad, bytes),
        "ranks hold different results (count %zu)", count);
  kiln_buffer_destroy(buf);
  free(host);
}

static void test_allreduce(void) {
  kiln_mpi *mpi = NULL;
  /* A small chunk (1000 bytes: 250 f32, 500 f16) and 3 slots, so that the
   * sizes below cover one partial chunk, many chunks, and counts that are
   * not multiples of the chunk, through the whole ring. */
  kiln_mpi_options opt = {.chunk_bytes = 1000, .slots = 3, .timeout_s = 60};
  assert_kiln_ok(kiln_mpi_create(MPI_COMM_WORLD, &opt, &mpi));
  static const size_t counts[] = {0, 1, 2, 251, 500, 4099, 7919};
  static const kiln_dtype dtypes[] = {KILN_F32, KILN_F16, KILN_BF16};
  for (size_t d = 0; d < 3; d++)
    for (int op = 0; op < 4; op++)
      for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
        allreduce_case(mpi, counts[c], dtypes[d], (kiln_reduce_op)op,
                       (c + op) % 2 == 0);
  assert_kiln_ok(kiln_mpi_destroy(mpi));
  /* 64 MiB of f32 with the default 4 MiB chunks: 16 chunks through 4 slots. */
  assert_kiln_ok(kiln_mpi_create(MPI_COMM_WORLD, NULL, &mpi));
  allreduce_case(mpi, (size_t)16 << 20, KILN_F32, KILN_REDUCE_SUM, true);
  allreduce_case(mpi, ((size_t)1 << 20) + 3, KILN_F32, KILN_REDUCE_MEAN, false);
  assert_kiln_ok(kiln_mpi_destroy(mpi));
}

/* Two requests in flight at once, tested in opposite orders on different
 * ranks: the ticket order keeps every rank's MPI sequence the same. */
static void test_two_requests(void) {
  kiln_mpi *mpi = NULL;
  kiln_mpi_options opt = {.chunk_bytes = 256, .slots = 2, .timeout_s = 60};
  assert_kiln_ok(kiln_mpi_create(MPI_COMM_WORLD, &opt, &mpi));
  enum { N = 3001 };
  static float a[N], b[N];
  for (size_t i = 0; i < N; i++) {
    a[i] = (float)input(rank_, i, 1);
    b[i] = (float)input(rank_, i, 2);
  }
  kiln_buffer *ba = NULL, *bb = NULL;
  assert_kiln_ok(kiln_buffer_create(ctx, sizeof a, 0, &ba));
  assert_kiln_ok(kiln_buffer_create(ctx, sizeof b, 0, &bb));
  assert_kiln_ok(
      kiln_buffer_write_sync(queue, a, &(kiln_range){ba, 0, N, KILN_F32}));
  assert_kiln_ok(
      kiln_buffer_write_sync(queue, b, &(kiln_range){bb, 0, N, KILN_F32}));
  kiln_mpi_request *ra = NULL, *rb = NULL;
  assert_kiln_ok(kiln_mpi_iallreduce(mpi, queue,
                                     &(kiln_range){ba, 0, N, KILN_F32},
                                     KILN_REDUCE_SUM, 0, NULL, &ra));
  assert_kiln_ok(kiln_mpi_iallreduce(mpi, queue,
                                     &(kiln_range){bb, 0, N, KILN_F32},
                                     KILN_REDUCE_MAX, 0, NULL, &rb));
  assert_kiln_status(kiln_mpi_destroy(mpi), KILN_ERR_BUSY);
  if (rank_ % 2) {
    assert_kiln_ok(kiln_mpi_wait(rb));
    assert_kiln_ok(kiln_mpi_wait(ra));
  } else {
    assert_kiln_ok(kiln_mpi_wait(ra));
    assert_kiln_ok(kiln_mpi_wait(rb));
  }
  assert_kiln_ok(
      kiln_buffer_read_sync(queue, &(kiln_range){ba, 0, N, KILN_F32}, a));
  assert_kiln_ok(
      kiln_buffer_read_sync(queue, &(kiln_range){bb, 0, N, KILN_F32}, b));
  size_t bad = 0;
  for (size_t i = 0; i < N; i++) {
    double want;
    bad += !close_to_reference(KILN_F32, KILN_REDUCE_SUM, i, 1, a[i], &want);
    bad += !close_to_reference(KILN_F32, KILN_REDUCE_MAX, i, 2, b[i], &want);
  }
  check(bad == 0, "%zu wrong elements with two requests in flight", bad);
  kiln_buffer_destroy(ba);
  kiln_buffer_destroy(bb);
  assert_kiln_ok(kiln_mpi_destroy(mpi));
}

static void test_broadcast_gather_scatter(void) {
  kiln_mpi *mpi = NULL;
  kiln_mpi_options opt = {.chunk_bytes = 512, .timeout_s = 60};
  assert_kiln_ok(kiln_mpi_create(MPI_COMM_WORLD, &opt, &mpi));
  size_t n = 1009, p = (size_t)size_; /* prime: not a multiple of a chunk */
  uint32_t *u = malloc(n * p * 4), *v = malloc(n * p * 4);
  kiln_buffer *src = NULL, *dst = NULL;
  assert_kiln_ok(kiln_buffer_create(ctx, n * p * 4, 0, &src));
  assert_kiln_ok(kiln_buffer_create(ctx, n * p * 4, 0, &dst));

  /* Broadcast u32 from the last rank. */
  for (size_t i = 0; i < n; i++)
    u[i] = (uint32_t)(rank_ * 100000 + i);
  assert_kiln_ok(
      kiln_buffer_write_sync(queue, u, &(kiln_range){src, 0, n, KILN_U32}));
  assert_kiln_ok(kiln_mpi_broadcast(mpi, queue,
                                    &(kiln_range){src, 0, n, KILN_U32},
                                    size_ - 1, 0, NULL, NULL));
  assert_kiln_ok(
      kiln_buffer_read_sync(queue, &(kiln_range){src, 0, n, KILN_U32}, v));
  size_t bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += v[i] != (uint32_t)((size_ - 1) * 100000 + i);
  check(bad == 0, "broadcast: %zu wrong elements", bad);

  /* Allgather i32 (non-blocking). */
  for (size_t i = 0; i < n; i++)
    u[i] = (uint32_t)(rank_ * 7 + i * 3);
  assert_kiln_ok(
      kiln_buffer_write_sync(queue, u, &(kiln_range){src, 0, n, KILN_U32}));
  kiln_mpi_request *req = NULL;
  assert_kiln_ok(kiln_mpi_iallgather(
      mpi, queue, &(kiln_range){src, 0, n, KILN_I32},
      &(kiln_range){dst, 0, n * p, KILN_I32}, 0, NULL, &req));
  assert_kiln_ok(kiln_mpi_wait(req));
  assert_kiln_ok(
      kiln_buffer_read_sync(queue, &(kiln_range){dst, 0, n * p, KILN_U32}, v));
  bad = 0;
  for (size_t r = 0; r < p; r++)
    for (size_t i = 0; i < n; i++)
      bad += v[r * n + i] != (uint32_t)(r * 7 + i * 3);
  check(bad == 0, "allgather: %zu wrong elements", bad);

  /* Reduce-scatter: every dtype and op. */
  static const kiln_dtype dts[] = {KILN_F32, KILN_F16, KILN_BF16};
  for (int t = 0; t < 12; t++) {
    kiln_dtype dt = dts[t / 4];
    kiln_reduce_op op = (kiln_reduce_op)(t % 4);
    size_t es = kiln_dtype_size(dt);
    unsigned salt = 9 + (unsigned)t;
    unsigned char *h = malloc(n * p * es);
    /* Block q of rank r holds input(r, q * n + i). */
    for (size_t i = 0; i < n * p; i++)
      store(dt, h, i, input(rank_, i, salt));
    assert_kiln_ok(
        kiln_buffer_write_sync(queue, h, &(kiln_range){src, 0, n * p, dt}));
    assert_kiln_ok(kiln_mpi_reduce_scatter(
        mpi, queue, &(kiln_range){src, 0, n * p, dt},
        &(kiln_range){dst, 0, n, dt}, op, 0, NULL, NULL));
    assert_kiln_ok(
        kiln_buffer_read_sync(queue, &(kiln_range){dst, 0, n, dt}, h));
    bad = 0;
    for (size_t i = 0; i < n; i++) {
      double want;
      bad += !close_to_reference(dt, op, (size_t)rank_ * n + i, salt,
                                 load(dt, h, i), &want);
    }
    check(bad == 0, "reduce-scatter %s op %d: %zu wrong elements",
          kiln_dtype_name(dt), op, bad);
    free(h);
  }
  /* Zero elements: still collective, nothing moves. */
  assert_kiln_ok(kiln_mpi_broadcast(
      mpi, queue, &(kiln_range){src, 0, 0, KILN_U32}, 0, 0, NULL, NULL));
  assert_kiln_ok(
      kiln_mpi_allgather(mpi, queue, &(kiln_range){src, 0, 0, KILN_F16},
                         &(kiln_range){dst, 0, 0, KILN_F16}, 0, NULL, NULL));
  kiln_buffer_destroy(src);
  kiln_buffer_destroy(dst);
  free(u);
  free(v);
  assert_kiln_ok(kiln_mpi_destroy(mpi));
}

/* Bad input on every rank at once, and ranks that disagree. */
static void test_errors(void) {
  kiln_mpi *mpi = NULL;
  kiln_mpi_options bad_opt = {.slots = 1};
  assert_kiln_status(kiln_mpi_create(MPI_COMM_WORLD, NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_mpi_create(MPI_COMM_NULL, NULL, &mpi),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_kiln_status(kiln_mpi_create(MPI_COMM_WORLD, &bad_opt, &mpi),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_last_error_contains("slots 1 is outside 2..64");
  bad_opt = (kiln_mpi_options){.timeout_s = -1};
  assert_kiln_status(kiln_mpi_create(MPI_COMM_WORLD, &bad_opt, &mpi),
                     KILN_ERR_INVALID_ARGUMENT);
  bad_opt = (kiln_mpi_options){.chunk_bytes = SIZE_MAX};
  assert_kiln_status(kiln_mpi_create(MPI_COMM_WORLD, &bad_opt, &mpi),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_int_equal(kiln_mpi_get_rank(NULL), -1);
  assert_int_equal(kiln_mpi_get_size(NULL), -1);
  assert_int_equal(kiln_mpi_get_local_rank(NULL), -1);
  assert_int_equal(kiln_mpi_get_local_size(NULL), -1);
  assert_kiln_ok(kiln_mpi_destroy(NULL));
  const kiln_device *dev = NULL;
  assert_kiln_status(kiln_mpi_select_device(NULL, NULL, NULL, &dev),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_mpi_test(NULL, NULL), KILN_ERR_NULL_POINTER);
  bool done;
  assert_kiln_status(kiln_mpi_test(NULL, &done), KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_mpi_wait(NULL), KILN_ERR_NULL_POINTER);

  kiln_mpi_options opt = {.timeout_s = 60};
  assert_kiln_ok(kiln_mpi_create(MPI_COMM_WORLD, &opt, &mpi));
  check(kiln_mpi_get_rank(mpi) == rank_ && kiln_mpi_get_size(mpi) == size_,
        "rank %d size %d", kiln_mpi_get_rank(mpi), kiln_mpi_get_size(mpi));
  check(kiln_mpi_get_local_size(mpi) == size_, "one node: local size %d",
        kiln_mpi_get_local_size(mpi));
  kiln_buffer *buf = NULL;
  assert_kiln_ok(kiln_buffer_create(ctx, 4096, 0, &buf));
  kiln_mpi_request *req = NULL;
  /* Each of these fails on every rank, which all call it. */
  assert_kiln_status(kiln_mpi_allreduce(NULL, queue,
                                        &(kiln_range){buf, 0, 4, KILN_F32},
                                        KILN_REDUCE_SUM, 0, NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_mpi_allreduce(mpi, NULL,
                                        &(kiln_range){buf, 0, 4, KILN_F32},
                                        KILN_REDUCE_SUM, 0, NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_mpi_allreduce(mpi, queue,
                                        &(kiln_range){buf, 0, 4, KILN_I32},
                                        KILN_REDUCE_SUM, 0, NULL, NULL),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_kiln_status(kiln_mpi_allreduce(mpi, queue,
                                        &(kiln_range){buf, 0, 4, KILN_F32},
                                        (kiln_reduce_op)99, 0, NULL, NULL),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_kiln_status(
      kiln_mpi_allreduce(mpi, queue, &(kiln_range){buf, 1000, 1000, KILN_F32},
                         KILN_REDUCE_SUM, 0, NULL, NULL),
      KILN_ERR_OUT_OF_RANGE);
  assert_last_error_contains("data range [offset 1000, +1000 elements of f32) "
                             "exceeds its buffer's 4096 bytes");
  /* Only the reductions MPI offers. */
  assert_kiln_status(kiln_mpi_allreduce(mpi, queue,
                                        &(kiln_range){buf, 0, 4, KILN_F32},
                                        KILN_REDUCE_NRM2, 0, NULL, NULL),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_last_error_contains("op 4 is not KILN_REDUCE_SUM, MIN, MAX or MEAN");
  /* Ranges of one call that disagree. */
  assert_kiln_status(
      kiln_mpi_allgather(
          mpi, queue, &(kiln_range){buf, 0, 4, KILN_F32},
          &(kiln_range){buf, 512, 4 * (size_t)size_ + 1, KILN_F32}, 0, NULL,
          NULL),
      KILN_ERR_SHAPE_MISMATCH);
  assert_last_error_contains("dst count");
  assert_kiln_status(
      kiln_mpi_allgather(mpi, queue, &(kiln_range){buf, 0, 4, KILN_F32},
                         &(kiln_range){buf, 512, 4 * (size_t)size_, KILN_U32},
                         0, NULL, NULL),
      KILN_ERR_SHAPE_MISMATCH);
  assert_last_error_contains("src dtype f32 differs from dst dtype u32");
  assert_kiln_status(
      kiln_mpi_allreduce(mpi, queue, &(kiln_range){buf, 0, SIZE_MAX, KILN_F32},
                         KILN_REDUCE_SUM, 0, NULL, NULL),
      KILN_ERR_OUT_OF_RANGE);
  assert_kiln_status(kiln_mpi_iallreduce(mpi, queue,
                                         &(kiln_range){buf, 0, 4, KILN_F32},
                                         KILN_REDUCE_SUM, 0, NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_mpi_broadcast(mpi, queue,
                                        &(kiln_range){buf, 0, 4, KILN_F32}, -1,
                                        0, NULL, NULL),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_kiln_status(kiln_mpi_ibroadcast(mpi, queue, NULL, 0, 0, NULL, &req),
                     KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_mpi_allgather(mpi, queue,
                                        &(kiln_range){buf, 0, 4, KILN_F32},
                                        NULL, 0, NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  /* count * ranks overflows (with one rank the range is just too big). */
  assert_kiln_status(
      kiln_mpi_iallgather(mpi, queue, &(kiln_range){buf, 0, SIZE_MAX, KILN_F32},
                          &(kiln_range){buf, 0, SIZE_MAX, KILN_F32}, 0, NULL,
                          &req),
      size_ > 1 ? KILN_ERR_INVALID_SIZE : KILN_ERR_OUT_OF_RANGE);
  assert_kiln_status(kiln_mpi_reduce_scatter(
                         mpi, queue, &(kiln_range){buf, 0, 4, (kiln_dtype)99},
                         &(kiln_range){buf, 0, 4, (kiln_dtype)99},
                         KILN_REDUCE_SUM, 0, NULL, NULL),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_kiln_status(
      kiln_mpi_ireduce_scatter(mpi, queue, &(kiln_range){buf, 0, 4, KILN_F32},
                               &(kiln_range){buf, 0, 4, KILN_F32},
                               KILN_REDUCE_SUM, 1, NULL, &req),
      KILN_ERR_NULL_POINTER);
  assert_kiln_status(kiln_mpi_select_device(mpi, NULL, NULL, &dev),
                     KILN_ERR_NULL_POINTER);
  /* Overlapping src and dst in one buffer (the header forbids it; before
   * the fix both returned KILN_OK): one range passed as both, and dst
   * starting inside src. */
  const size_t p = (size_t)size_;
  kiln_range whole = {buf, 0, 4, KILN_F32};
  assert_kiln_status(kiln_mpi_allgather(mpi, queue, &whole, &whole, 0, NULL,
                                        NULL),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_last_error_contains("kiln_mpi_allgather: src [offset 0, +4) and dst "
                             "[offset 0, +4) overlap in one buffer");
  assert_kiln_status(
      kiln_mpi_allgather(mpi, queue, &(kiln_range){buf, 0, 4, KILN_F32},
                         &(kiln_range){buf, 3, 4 * p, KILN_F32}, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT);
  assert_last_error_contains("overlap in one buffer");
  assert_kiln_status(
      kiln_mpi_reduce_scatter(mpi, queue,
                              &(kiln_range){buf, 8, 4 * p, KILN_F32},
                              &(kiln_range){buf, 8 + 4 * p - 1, 4, KILN_F32},
                              KILN_REDUCE_SUM, 0, NULL, NULL),
      KILN_ERR_INVALID_ARGUMENT);
  assert_last_error_contains("kiln_mpi_reduce_scatter: src [offset 8");
  /* Adjacent ranges of one buffer are fine. */
  assert_kiln_ok(kiln_mpi_allgather(mpi, queue,
                                    &(kiln_range){buf, 0, 4, KILN_F32},
                                    &(kiln_range){buf, 4, 4 * p, KILN_F32}, 0,
                                    NULL, NULL));
  assert_kiln_ok(kiln_queue_finish(queue));

  if (size_ > 1) {
    /* A rank passing another count, dtype or op: every rank fails, none
     * hangs, and the message gives both values. */
    assert_kiln_status(
        kiln_mpi_allreduce(
            mpi, queue, &(kiln_range){buf, 0, rank_ == 1 ? 10 : 12, KILN_F32},
            KILN_REDUCE_SUM, 0, NULL, NULL),
        KILN_ERR_SHAPE_MISMATCH);
    assert_last_error_contains("ranks passed different counts");
    assert_last_error_contains("range from 10 to 12");
    assert_kiln_status(
        kiln_mpi_allreduce(
            mpi, queue,
            &(kiln_range){buf, 0, 8, rank_ == 1 ? KILN_F16 : KILN_F32},
            KILN_REDUCE_SUM, 0, NULL, NULL),
        KILN_ERR_SHAPE_MISMATCH);
    assert_last_error_contains("different dtypes");
    assert_kiln_status(
        kiln_mpi_allreduce(mpi, queue, &(kiln_range){buf, 0, 8, KILN_F32},
                           rank_ == 1 ? KILN_REDUCE_MAX : KILN_REDUCE_SUM, 0,
                           NULL, NULL),
        KILN_ERR_SHAPE_MISMATCH);
    assert_last_error_contains("different ops");
    /* One rank's own argument is bad: it fails on that, the others learn
     * of it instead of waiting. */
    assert_kiln_status(
        kiln_mpi_allreduce(
            mpi, queue, &(kiln_range){buf, rank_ == 1 ? 1024 : 0, 8, KILN_F32},
            KILN_REDUCE_SUM, 0, NULL, NULL),
        rank_ == 1 ? KILN_ERR_OUT_OF_RANGE : KILN_ERR_SHAPE_MISMATCH);
    if (rank_ != 1)
      assert_last_error_contains("bad arguments");
    /* After all that the communicator still works. */
    allreduce_case(mpi, 100, KILN_F32, KILN_REDUCE_SUM, true);
  }
  assert_kiln_ok(kiln_buffer_destroy(buf));
  assert_kiln_ok(kiln_mpi_destroy(mpi));
}

/* A rank that never joins: the others fail after timeout_s with
 * KILN_ERR_COMM, and the object refuses further work. Last, because the
 * abandoned MPI operation stays pending. */
static void test_timeout(void) {
  if (size_ < 2)
    return;
  kiln_mpi *mpi = NULL;
  kiln_mpi_options opt = {.timeout_s = 0.5};
  assert_kiln_ok(kiln_mpi_create(MPI_COMM_WORLD, &opt, &mpi));
  kiln_buffer *buf = NULL;
  assert_kiln_ok(kiln_buffer_create(ctx, 64, 0, &buf));
  if (rank_ != 1) {
    double t0 = MPI_Wtime();
    assert_kiln_status(kiln_mpi_allreduce(mpi, queue,
                                          &(kiln_range){buf, 0, 16, KILN_F32},
                                          KILN_REDUCE_SUM, 0, NULL, NULL),
                       KILN_ERR_COMM);
    double took = MPI_Wtime() - t0;
    check(took >= 0.5 && took < 20, "timed out after %.2f s", took);
    assert_last_error_contains("gave up");
    assert_kiln_status(kiln_mpi_allreduce(mpi, queue,
                                          &(kiln_range){buf, 0, 16, KILN_F32},
                                          KILN_REDUCE_SUM, 0, NULL, NULL),
                       KILN_ERR_COMM);
    assert_last_error_contains("can no longer be used");
  }
  assert_kiln_ok(kiln_buffer_destroy(buf));
  assert_kiln_ok(kiln_mpi_destroy(mpi));
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  kiln_device_list *list = NULL;
  const kiln_device *dev = NULL;
  kiln_mpi *mpi = NULL;
  /* The device for this rank, as a user picks it: node-local rank and the
   * selector (KILN_TEST_DEVICE, else KILN_DEVICE or the default). */
  if (kiln_device_list_create(&list) != KILN_OK ||
      kiln_mpi_create(MPI_COMM_WORLD, NULL, &mpi) != KILN_OK ||
      kiln_mpi_select_device(mpi, list, getenv("KILN_TEST_DEVICE"), &dev) !=
          KILN_OK ||
      kiln_context_create(dev, NULL, &ctx) != KILN_OK ||
      kiln_queue_create(ctx, 0, &queue) != KILN_OK) {
    fprintf(stderr, "rank %d: no device: %s\n", rank_, kiln_last_error());
    MPI_Abort(MPI_COMM_WORLD, 77);
  }
  /* One machine: the node-local rank is the rank, and the device is the
   * selection's entry local_rank modulo its count. */
  kiln_selection *sel = NULL;
  if (kiln_selection_create(list, getenv("KILN_TEST_DEVICE"), &sel) ==
      KILN_OK) {
    size_t taken = kiln_selection_get_count(sel);
    check(kiln_mpi_get_local_rank(mpi) == rank_, "local rank %d",
          kiln_mpi_get_local_rank(mpi));
    check(taken > 0 &&
              dev == kiln_selection_get(sel, (size_t)rank_ % taken),
          "rank %d took another device than entry %zu of %zu", rank_,
          taken ? (size_t)rank_ % taken : 0, taken);
    kiln_selection_destroy(sel);
  }
  kiln_mpi_destroy(mpi);
  test_errors();
  test_allreduce();
  test_two_requests();
  test_broadcast_gather_scatter();
  test_timeout();
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank_ == 0)
    printf("test_mpi: %d ranks, %d failed checks\n", size_, total);
  kiln_queue_destroy(queue);
  kiln_context_destroy(ctx);
  kiln_device_list_destroy(list);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
