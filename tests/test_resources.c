/* Resource limits and lifetimes: oversized buffers fail cleanly, device
 * memory exhaustion is an error and not a crash, up to 10,000 create/destroy
 * cycles of every object type (fewer where the driver is slow, see
 * counted_cycles) keep the process's memory bounded, and
 * destroying or releasing objects while work on them is pending behaves as
 * kiln_queue.h, kiln_buffer.h and kiln_event.h say.
 *
 * tests/meson.build runs this with POCL_MEMORY_LIMIT=1 (GiB), so that on
 * PoCL the exhaustion test allocates at most about 1 GiB of host memory.
 * KILN_RESOURCE_CYCLES overrides the cycle count (the ASan stage lowers it:
 * there the leak checker, not the heap bound, is what catches leaks). */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "kiln/kiln_cl.h"

/* ---- helpers ------------------------------------------------------------ */

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* Bytes of heap this process holds live (glibc's count over every arena,
 * small chunks and mmap'ed ones), or -1 where the C library cannot say.
 * Unlike the resident set size it does not move with fragmentation or with
 * pages glibc keeps after a free: it changes only when memory is allocated
 * and not freed, so a bound on it is exact, not statistical. */
static long long live_heap_bytes(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
  struct mallinfo2 m = mallinfo2();
  return (long long)(m.uordblks + m.hblkhd);
#else
  return -1;
#endif
}

/* Create/destroy cycles: up to the target count, but each phase (object
 * cycles, program cycles) stops counting once about this many seconds are
 * spent, never below MIN_COUNTED_CYCLES. NVIDIA's driver creates contexts
 * slowly enough that 10,000 cycles overran the test's timeout. */
#define CYCLE_BUDGET_S 20.0
#define MIN_COUNTED_CYCLES 1000

static size_t cycles_from_env(void) {
  const char *v = getenv("KILN_RESOURCE_CYCLES");
  if (v == NULL || *v == '\0')
    return 10000;
  long n = atol(v);
  return n < 10 ? 10 : (size_t)n;
}

/* How many cycles to count after a warm-up of warm cycles that took warm_s
 * seconds: what is left of target, cut to what fits in CYCLE_BUDGET_S at the
 * warm-up's pace, but at least MIN_COUNTED_CYCLES (when target leaves that
 * many). The count is fixed before counting starts, so the checks that
 * depend on it (launch counts, cache hits) stay exact. */
static size_t counted_cycles(size_t target, size_t warm, double warm_s) {
  size_t left = target - warm;
  double per_cycle = warm > 0 ? warm_s / (double)warm : 0;
  if (per_cycle > 0 && CYCLE_BUDGET_S / per_cycle < (double)left)
    left = (size_t)(CYCLE_BUDGET_S / per_cycle);
  size_t floor = target - warm < MIN_COUNTED_CYCLES ? target - warm
                                                    : MIN_COUNTED_CYCLES;
  return left < floor ? floor : left;
}

/* A kernel that takes a while (a dependent chain of integer hashes) so that
 * commands are still pending when objects are destroyed: one launch lasts
 * tens of milliseconds on PoCL. Its loop stays under 65535 iterations, the
 * most llvmpipe runs (KILN_QUIRK_LOOP_LIMIT_65535). */
static const char slow_source[] =
    "__kernel void slow(__global uint *out, uint iters) {\n"
    "  uint i = (uint)get_global_id(0), h = i + 1u;\n"
    "  for (uint k = 0; k < iters; k++)\n"
    "    h = (h ^ (h >> 15)) * 2246822519u + k;\n"
    "  out[i] = h;\n"
    "}\n"
    "__kernel void touch(__global uint *out) {\n"
    "  out[get_global_id(0)] += 1u;\n"
    "}\n";

static uint32_t slow_ref(uint32_t i, uint32_t iters) {
  uint32_t h = i + 1u;
  for (uint32_t k = 0; k < iters; k++)
    h = (h ^ (h >> 15)) * 2246822519u + k;
  return h;
}

enum { SLOW_N = 1024, SLOW_ITERS = 60000 };

/* ---- oversized and exhausting allocations ------------------------------- */

static void test_oversized_buffers(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_queue *q;
    kiln_test_open(d, &ctx, &q);
    const kiln_device_info *info = kiln_context_get_device_info(ctx);
    kiln_buffer *b = (kiln_buffer *)&b; /* must be reset to NULL */
    char text[32];

    /* One byte over the single-allocation limit. */
    assert_kiln_status(kiln_buffer_create(ctx, (size_t)info->max_alloc_bytes + 1,
                                          0, &b),
                       KILN_ERR_INVALID_SIZE);
    assert_null(b);
    assert_last_error_contains("max_alloc_bytes");
    snprintf(text, sizeof text, "%llu",
             (unsigned long long)info->max_alloc_bytes + 1);
    assert_last_error_contains(text);

    /* More than the device's whole memory, and the largest size_t. */
    if (info->global_mem_bytes < SIZE_MAX / 2) {
      b = (kiln_buffer *)&b;
      assert_kiln_status(kiln_buffer_create(ctx,
                                            (size_t)info->global_mem_bytes * 2,
                                            0, &b),
                         KILN_ERR_INVALID_SIZE);
      assert_null(b);
    }
    assert_kiln_status(kiln_buffer_create(ctx, SIZE_MAX, 0, &b),
                       KILN_ERR_INVALID_SIZE);
    assert_last_error_contains("size_bytes");
    /* Wrapping host memory is held to the same limit (the pointer is never
     * touched when the size is refused). */
    static char small[64];
    assert_kiln_status(kiln_buffer_wrap_host(ctx, small, SIZE_MAX, 0, &b),
                       KILN_ERR_INVALID_SIZE);
    /* A view past its parent's end, and one whose end overflows. */
    kiln_buffer *parent;
    assert_kiln_ok(kiln_buffer_create(ctx, 4096, 0, &parent));
    assert_kiln_status(kiln_buffer_create_sub(parent, 0, 4097, 0, &b),
                       KILN_ERR_OUT_OF_RANGE);
    assert_kiln_status(kiln_buffer_create_sub(parent, 4096, SIZE_MAX, 0, &b),
                       KILN_ERR_INVALID_SIZE);
    assert_kiln_ok(kiln_buffer_destroy(parent));

    /* The context is still healthy afterwards. */
    uint32_t v = 7, back = 0;
    assert_kiln_ok(kiln_buffer_create(ctx, sizeof v, 0, &b));
    assert_kiln_ok(
        kiln_buffer_write_sync(q, &v, &(kiln_range){b, 0, 1, KILN_U32}));
    assert_kiln_ok(
        kiln_buffer_read_sync(q, &(kiln_range){b, 0, 1, KILN_U32}, &back));
    assert_int_equal(back, 7);
    assert_kiln_ok(kiln_buffer_destroy(b));
    kiln_test_close(ctx, q);
  }
}

/* Allocate max-size buffers until their total passes the device's global
 * memory by two buffers. A device that runs out first must say so with a
 * clean status (at create, or at the first command that needs the memory),
 * and work again once they are freed. Only the last word of each buffer is
 * written, which makes lazily allocating drivers find the memory without
 * making it resident: PoCL 3.1 enforces neither its global memory size nor
 * POCL_MEMORY_LIMIT, and filling the buffers would really use that much host
 * memory. Skipped on devices with more than 1 GiB (drivers that zero new
 * buffers, as rusticl does, would touch all of it). */
static void test_exhaust_device_memory(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_queue *q;
    kiln_test_open(d, &ctx, &q);
    const kiln_device_info *info = kiln_context_get_device_info(ctx);
    if (info->global_mem_bytes > (1ull << 30) || UNDER_ASAN) {
      fprintf(stderr, "# %s: %llu bytes of global memory; exhaustion test "
                      "skipped (runs with at most 1 GiB, without ASan)\n",
              info->name, (unsigned long long)info->global_mem_bytes);
      kiln_test_close(ctx, q);
      continue;
    }
    enum { MAX_BUFFERS = 64 };
    kiln_buffer *bufs[MAX_BUFFERS] = {0};
    size_t size = (size_t)info->max_alloc_bytes;
    size_t limit = (size_t)(info->global_mem_bytes / size) + 2;
    if (limit > MAX_BUFFERS)
      limit = MAX_BUFFERS;
    kiln_status failure = KILN_OK;
    size_t made = 0;
    for (; made < limit; made++) {
      kiln_status s = kiln_buffer_create(ctx, size, 0, &bufs[made]);
      if (s == KILN_OK) {
        uint32_t word = (uint32_t)made;
        s = kiln_buffer_write_sync(
            q, &word, &(kiln_range){bufs[made], size / 4 - 1, 1, KILN_U32});
      }
      if (s != KILN_OK) {
        failure = s;
        assert_true(strlen(kiln_last_error()) > 0);
        made += bufs[made] != NULL;
        break;
      }
    }
    fprintf(stderr, "# %s: %zu buffers of %zu bytes (global memory %llu), "
                    "then %s%s%s\n",
            info->name, made, size,
            (unsigned long long)info->global_mem_bytes,
            kiln_status_name(failure), failure != KILN_OK ? ": " : "",
            failure != KILN_OK ? kiln_last_error() : "");
    if (failure != KILN_OK &&
        failure != KILN_ERR_OUT_OF_DEVICE_MEMORY &&
        failure != KILN_ERR_OUT_OF_HOST_MEMORY &&
        failure != KILN_ERR_EXEC_FAILED)
      fail_msg("exhaustion gave %s: %s", kiln_status_name(failure),
               kiln_last_error());
    /* Every buffer that was made still holds its word. */
    for (size_t i = 0; i < made && failure == KILN_OK; i++) {
      uint32_t word = 0;
      assert_kiln_ok(kiln_buffer_read_sync(
          q, &(kiln_range){bufs[i], size / 4 - 1, 1, KILN_U32}, &word));
      assert_int_equal(word, (uint32_t)i);
    }
    /* After a failed command the queue may be unusable; a new one works. */
    (void)kiln_queue_destroy(q);
    for (size_t i = 0; i < MAX_BUFFERS; i++)
      assert_kiln_ok(kiln_buffer_destroy(bufs[i]));
    assert_kiln_ok(kiln_queue_create(ctx, 0, &q));
    kiln_buffer *b;
    uint32_t v = 0xfeedu, back = 0;
    assert_kiln_ok(kiln_buffer_create(ctx, 1u << 20, 0, &b));
    assert_kiln_ok(kiln_buffer_write_sync(
        q, &v, &(kiln_range){b, (1u << 18) - 1, 1, KILN_U32}));
    assert_kiln_ok(kiln_buffer_read_sync(
        q, &(kiln_range){b, (1u << 18) - 1, 1, KILN_U32}, &back));
    assert_int_equal(back, 0xfeedu);
    assert_kiln_ok(kiln_buffer_destroy(b));
    kiln_test_close(ctx, q);
  }
}

/* ---- create/destroy cycles ---------------------------------------------- */

/* Objects other than programs, one of each type per cycle, every result
 * checked: a context with a queue, a buffer written through a sub-buffer
 * view and read back, a kernel (from a long-lived program) with its
 * arguments set and launched, and its event retained, waited on and
 * released twice. */
struct cycle_state {
  const kiln_device *device;
  kiln_context *ctx; /* long-lived context for the non-context objects */
  kiln_queue *q;
  kiln_program *program;
  kiln_buffer *out;
  size_t from_cache;
};

static void object_cycle(struct cycle_state *cs, size_t i) {
  kiln_context *ctx;
  kiln_queue *q;
  assert_kiln_ok(kiln_context_create(cs->device, NULL, &ctx));
  assert_kiln_ok(kiln_queue_create(ctx, 0, &q));
  assert_kiln_ok(kiln_queue_destroy(q));
  assert_kiln_ok(kiln_context_destroy(ctx));

  kiln_buffer *b, *sub;
  uint32_t v = (uint32_t)i, back = 0;
  size_t align =
      kiln_context_get_device_info(cs->ctx)->mem_base_addr_align_bits / 8;
  assert_kiln_ok(kiln_buffer_create(cs->ctx, 2 * align, 0, &b));
  assert_kiln_ok(kiln_buffer_create_sub(b, align, align, 0, &sub));
  assert_kiln_ok(
      kiln_buffer_write_sync(cs->q, &v, &(kiln_range){sub, 0, 1, KILN_U32}));
  assert_kiln_ok(kiln_buffer_read_sync(
      cs->q, &(kiln_range){b, align / 4, 1, KILN_U32}, &back));
  assert_int_equal(back, (uint32_t)i);
  assert_kiln_ok(kiln_buffer_destroy(sub));
  assert_kiln_ok(kiln_buffer_destroy(b));

  kiln_kernel *k;
  assert_kiln_ok(kiln_kernel_create(cs->program, "touch", &k));
  assert_kiln_ok(kiln_kernel_set_arg_buffer(k, 0, cs->out));
  size_t global = 4;
  kiln_event *ev;
  assert_kiln_ok(kiln_kernel_launch(cs->q, k, 1, &global, NULL, 0, NULL, &ev));
  kiln_event *again = kiln_event_retain(ev);
  assert_ptr_equal(again, ev);
  assert_kiln_ok(kiln_event_wait(ev));
  kiln_event_release(ev);
  kiln_event_release(again);
  assert_kiln_ok(kiln_kernel_destroy(k));
}

/* A program built from the same source each cycle: from kiln's cache after
 * the first, so every cycle reads and checks an entry file and loads a
 * binary. */
static void program_cycle(kiln_context *ctx, struct cycle_state *cs) {
  kiln_program *p;
  assert_kiln_ok(kiln_program_create_built(ctx, slow_source, NULL, &p));
  cs->from_cache += kiln_program_is_from_cache(p);
  assert_kiln_ok(kiln_program_destroy(p));
}

/* One round of program cycles on a context of its own, destroyed at the
 * end. Call it while no other context of the process is alive: PoCL 3.1
 * grows an LLVM diagnostic string ("debug metadata version") by about 60
 * bytes with every program loaded from a binary and frees it only when its
 * last cl_context goes (bare OpenCL, 3 rounds of 3,000 loads: +188, +375,
 * +0 KiB with another context alive, the string doubling; +24, +21, +8 KiB
 * without). Measured after the round's context is gone, the live heap
 * then shows kiln's growth and the driver's per-context noise alone.
 * Returns the growth over the round. */
static long long program_round(struct cycle_state *cs, size_t cycles) {
  long long before = live_heap_bytes();
  kiln_context *ctx;
  assert_kiln_ok(kiln_context_create(cs->device, NULL, &ctx));
  for (size_t i = 0; i < cycles; i++)
    program_cycle(ctx, cs);
  assert_kiln_ok(kiln_context_destroy(ctx));
  return live_heap_bytes() - before;
}

/* The driver's own share of a program round: the same program binary (the
 * one kiln built, same source and options: -cl-kernel-arg-info, which
 * kiln's user programs are built with) loaded and built `cycles` times with
 * bare OpenCL calls on a context of its own, measured like program_round.
 * Some drivers keep memory for every program loaded from a binary until the
 * process ends: Mesa 22.3's rusticl about 130 bytes for slow_source's two
 * kernels (80 for a one-kernel program), every round, with no kiln code in
 * the loop. Subtracting this leaves kiln's growth. */
static long long bare_program_round(const struct cycle_state *cs,
                                    const unsigned char *binary, size_t size,
                                    size_t cycles) {
  cl_device_id dev = kiln_device_get_cl_device(cs->device);
  long long before = live_heap_bytes();
  cl_int err;
  cl_context cl = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  assert_int_equal(err, CL_SUCCESS);
  for (size_t i = 0; i < cycles; i++) {
    const unsigned char *bin = binary;
    cl_int status;
    cl_program p =
        clCreateProgramWithBinary(cl, 1, &dev, &size, &bin, &status, &err);
    assert_int_equal(err, CL_SUCCESS);
    assert_int_equal(clBuildProgram(p, 1, &dev, "-cl-kernel-arg-info", NULL,
                                    NULL),
                     CL_SUCCESS);
    /* kiln reads every build's log, which some drivers allocate. */
    size_t log_size = 0;
    assert_int_equal(clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, 0,
                                           NULL, &log_size),
                     CL_SUCCESS);
    char *log = malloc(log_size + 1);
    assert_non_null(log);
    assert_int_equal(clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG,
                                           log_size, log, NULL),
                     CL_SUCCESS);
    free(log);
    clReleaseProgram(p);
  }
  clReleaseContext(cl);
  return live_heap_bytes() - before;
}

/* slow_source's binary as the driver serialises it, from a program kiln
 * built; malloc'd, *size set. */
static unsigned char *program_binary(const struct cycle_state *cs,
                                     size_t *size) {
  kiln_context *ctx;
  kiln_program *p;
  assert_kiln_ok(kiln_context_create(cs->device, NULL, &ctx));
  assert_kiln_ok(kiln_program_create_built(ctx, slow_source, NULL, &p));
  cl_program cl = kiln_program_get_cl_program(p);
  assert_int_equal(clGetProgramInfo(cl, CL_PROGRAM_BINARY_SIZES, sizeof *size,
                                    size, NULL),
                   CL_SUCCESS);
  unsigned char *binary = malloc(*size);
  assert_non_null(binary);
  assert_int_equal(clGetProgramInfo(cl, CL_PROGRAM_BINARIES, sizeof binary,
                                    &binary, NULL),
                   CL_SUCCESS);
  assert_kiln_ok(kiln_program_destroy(p));
  assert_kiln_ok(kiln_context_destroy(ctx));
  return binary;
}

/* How the cycles prove there is no leak, with any count from
 * MIN_COUNTED_CYCLES up:
 *
 * - A leaked kiln object is caught exactly, after any number of cycles: every
 *   object made in a cycle has a parent that outlives it (the long-lived
 *   context counts its buffers, events and programs, a program its kernels, a
 *   buffer its views, a per-cycle context its queue), and destroying a parent
 *   with a live child fails with KILN_ERR_BUSY. The per-cycle destroys and
 *   kiln_test_close at the end assert KILN_OK, so one leaked object fails.
 * - Memory that no counted object holds (a string, a driver object kiln
 *   forgot to release) shows up in the live heap (live_heap_bytes), measured
 *   after a warm-up. Creating and destroying a context leaves a few KiB
 *   behind in the driver's own lists however many programs it held (PoCL:
 *   +2 to +17 KiB a round of 250 or of 1,000 programs, shrinking round after
 *   round), so:
 *   - object cycles (a context each) may grow by HEAP_NOISE_BYTES in all:
 *     256 KiB / 1,000 cycles = 262 bytes a cycle at the minimum count, 29
 *     bytes at 9,000; every driver object (a cl_context, cl_command_queue,
 *     cl_mem, cl_kernel or cl_event is hundreds of bytes or more) and every
 *     buffer's storage leak more than that per cycle;
 *   - program cycles run in PROGRAM_ROUNDS rounds on a context each (see
 *     program_round), each followed by the driver's own round of bare
 *     binary loads (bare_program_round), and the smallest excess of a
 *     round over its driver round must stay under ROUND_NOISE_BYTES: a leak of L bytes a program adds L x cycles to
 *     every round, so at 1,000 cycles a round a leak of 64 bytes a program
 *     fails every round, and the driver's noise would have to pass 64 KiB in
 *     every round (16 times what was seen) to fail a clean run.
 *   A smaller stray malloc is left to LeakSanitizer (the ASan stage runs
 *   this test too). Under ASan freed memory sits in quarantine, so only
 *   LeakSanitizer checks there. */
#define HEAP_NOISE_BYTES (256 * 1024)
#define ROUND_NOISE_BYTES (64 * 1024)
#define PROGRAM_ROUNDS 3
static void test_create_destroy_cycles(void **state) {
  (void)state;
  const size_t target = cycles_from_env();
  /* Drivers fill their pools and caches (PoCL's kernel cache, glibc's
   * arenas) in the first cycles. The bounds apply after this warm-up. */
  const size_t warm = target / 10;
  FOR_EACH_TEST_DEVICE(d) {
    struct cycle_state cs = {.device = kiln_test_device(d)};
    kiln_test_open(d, &cs.ctx, &cs.q);
    assert_kiln_ok(kiln_program_create_built(cs.ctx, slow_source, NULL,
                                             &cs.program));
    assert_kiln_ok(kiln_buffer_create(cs.ctx, 4 * sizeof(uint32_t), 0, &cs.out));
    uint32_t zero = 0;
    assert_kiln_ok(kiln_buffer_fill(cs.q, &zero, sizeof zero,
                                    &(kiln_range){cs.out, 0, 4, KILN_U32}, 0,
                                    NULL, NULL));

    double t0 = kiln_test_now();
    for (size_t i = 0; i < warm; i++)
      object_cycle(&cs, i);
    const size_t obj_cycles = warm + counted_cycles(target, warm, kiln_test_now() - t0);
    assert_kiln_ok(kiln_queue_finish(cs.q));
    long long obj_before = live_heap_bytes();
    for (size_t i = warm; i < obj_cycles; i++)
      object_cycle(&cs, i);
    assert_kiln_ok(kiln_queue_finish(cs.q));
    long long obj_growth = live_heap_bytes() - obj_before;
    /* Every launch ran: each of the 4 words was incremented once a cycle. */
    uint32_t counts[4];
    assert_kiln_ok(kiln_buffer_read_sync(
        cs.q, &(kiln_range){cs.out, 0, 4, KILN_U32}, counts));
    for (int i = 0; i < 4; i++)
      assert_int_equal(counts[i], (uint32_t)obj_cycles);

    assert_kiln_ok(kiln_buffer_destroy(cs.out));
    assert_kiln_ok(kiln_program_destroy(cs.program));
    kiln_test_close(cs.ctx, cs.q);

    /* Program cycles, with no other context alive (see program_round): a
     * warm-up round, then PROGRAM_ROUNDS counted rounds sharing the
     * counted cycles, each followed by the driver's own round of as many
     * bare binary loads (bare_program_round), whose growth it may add. */
    size_t binary_size;
    unsigned char *binary = program_binary(&cs, &binary_size);
    t0 = kiln_test_now();
    program_round(&cs, warm);
    bare_program_round(&cs, binary, binary_size, warm);
    size_t per_round =
        counted_cycles(target, warm, kiln_test_now() - t0) / PROGRAM_ROUNDS;
    if (per_round == 0)
      per_round = 1;
    long long smallest = -1;
    char rounds[192] = "";
    for (int r = 0; r < PROGRAM_ROUNDS; r++) {
      long long growth = program_round(&cs, per_round);
      long long driver = bare_program_round(&cs, binary, binary_size, per_round);
      if (r == 0 || growth - driver < smallest)
        smallest = growth - driver;
      size_t used = strlen(rounds);
      snprintf(rounds + used, sizeof rounds - used, "%s%+lld (driver %+lld)",
               r ? ", " : "", growth, driver);
    }
    free(binary);
    const size_t prog_cycles = warm + PROGRAM_ROUNDS * per_round;
    /* Only the first build may have missed kiln's cache (when usable). */
    kiln_cache_info info;
    assert_kiln_ok(kiln_cache_get_info(&info));
    if (info.enabled && info.usable)
      assert_true(cs.from_cache + 1 >= prog_cycles);

    fprintf(stderr,
            "# %zu object cycles after %zu warm-up: live heap %+lld bytes "
            "(bound %d); %d rounds of %zu program builds, a context each: "
            "%s bytes (smallest excess over the driver's must be under %d); "
            "%zu programs from kiln's cache\n",
            obj_cycles - warm, warm, obj_growth, HEAP_NOISE_BYTES,
            PROGRAM_ROUNDS, per_round, rounds, ROUND_NOISE_BYTES,
            cs.from_cache);
    if (UNDER_ASAN || live_heap_bytes() < 0) {
      fprintf(stderr, "# heap bounds not checked: %s\n",
              UNDER_ASAN ? "ASan quarantines freed memory"
                         : "the C library does not report its live heap");
    } else if (obj_cycles - warm >= MIN_COUNTED_CYCLES &&
               per_round * PROGRAM_ROUNDS >= MIN_COUNTED_CYCLES) {
      if (obj_growth > HEAP_NOISE_BYTES)
        fail_msg("the live heap grew by %lld bytes over %zu object "
                 "create/destroy cycles (bound %d): something leaks",
                 obj_growth, obj_cycles - warm, HEAP_NOISE_BYTES);
      if (smallest > ROUND_NOISE_BYTES)
        fail_msg("the live heap grew by at least %lld bytes more than the "
                 "driver's own in each of %d rounds of %zu program builds "
                 "from the cache (bound %d a round): kiln leaks about %lld "
                 "bytes a program",
                 smallest, PROGRAM_ROUNDS, per_round, ROUND_NOISE_BYTES,
                 smallest / (long long)per_round);
    }
  }
}

/* ---- destroying with work pending ---------------------------------------- */

static void launch_slow(kiln_queue *q, kiln_kernel *k, kiln_buffer *out,
                        kiln_event **ev) {
  assert_kiln_ok(kiln_kernel_set_arg_buffer(k, 0, out));
  assert_kiln_ok(kiln_kernel_set_arg_u32(k, 1, SLOW_ITERS));
  size_t global = SLOW_N, local = 16;
  assert_kiln_ok(kiln_kernel_launch(q, k, 1, &global, &local, 0, NULL, ev));
}

static void check_slow(const uint32_t *got) {
  for (uint32_t i = 0; i < SLOW_N; i += 17)
    assert_int_equal(got[i], slow_ref(i, SLOW_ITERS));
  assert_int_equal(got[SLOW_N - 1], slow_ref(SLOW_N - 1, SLOW_ITERS));
}

/* kiln_queue.h: destroy waits for every enqueued command, then frees the
 * queue; events obtained from it stay valid until released. */
static void test_queue_destroy_waits(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_queue *q;
    kiln_test_open(d, &ctx, &q);
    kiln_program *p;
    kiln_kernel *k;
    kiln_buffer *out;
    assert_kiln_ok(kiln_program_create_built(ctx, slow_source, NULL, &p));
    assert_kiln_ok(kiln_kernel_create(p, "slow", &k));
    assert_kiln_ok(kiln_buffer_create(ctx, SLOW_N * 4, 0, &out));

    kiln_queue *busy;
    assert_kiln_ok(kiln_queue_create(ctx, 0, &busy));
    kiln_event *launched, *read_done;
    uint32_t *host = calloc(SLOW_N, 4);
    assert_non_null(host);
    launch_slow(busy, k, out, &launched);
    assert_kiln_ok(kiln_buffer_read(busy,
                                    &(kiln_range){out, 0, SLOW_N, KILN_U32},
                                    host, 0, NULL, &read_done));
    assert_kiln_ok(kiln_queue_flush(busy));
    /* Destroy with the launch and the read still pending. */
    assert_kiln_ok(kiln_queue_destroy(busy));
    kiln_event_state st = KILN_EVENT_QUEUED;
    assert_kiln_ok(kiln_event_get_state(read_done, &st));
    assert_int_equal(st, KILN_EVENT_COMPLETE);
    assert_kiln_ok(kiln_event_get_state(launched, &st));
    assert_int_equal(st, KILN_EVENT_COMPLETE);
    check_slow(host); /* the read had landed when destroy returned */
    assert_kiln_ok(kiln_event_wait(launched));
    /* The events keep their context alive: it is busy until released. */
    assert_kiln_ok(kiln_kernel_destroy(k));
    assert_kiln_ok(kiln_program_destroy(p));
    assert_kiln_ok(kiln_buffer_destroy(out));
    assert_kiln_ok(kiln_queue_destroy(q));
    assert_kiln_status(kiln_context_destroy(ctx), KILN_ERR_BUSY);
    kiln_event_release(launched);
    kiln_event_release(read_done);
    assert_kiln_ok(kiln_context_destroy(ctx));
    free(host);
  }
}

/* kiln_buffer.h: commands already enqueued that use a destroyed buffer still
 * complete correctly; device memory goes only after the last of them. The
 * same for kernels and programs, whose commands hold their own references,
 * and for events released before their command ran. */
static void test_destroy_objects_with_work_pending(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_queue *q;
    kiln_test_open(d, &ctx, &q);
    kiln_program *p;
    kiln_kernel *k;
    kiln_buffer *scratch, *kept;
    assert_kiln_ok(kiln_program_create_built(ctx, slow_source, NULL, &p));
    assert_kiln_ok(kiln_kernel_create(p, "slow", &k));
    assert_kiln_ok(kiln_buffer_create(ctx, SLOW_N * 4, 0, &scratch));
    assert_kiln_ok(kiln_buffer_create(ctx, SLOW_N * 4, 0, &kept));

    /* slow -> scratch, then scratch -> kept; destroy scratch, the kernel,
     * the program and the launch's event right away. */
    kiln_event *launched;
    launch_slow(q, k, scratch, &launched);
    assert_kiln_ok(kiln_buffer_copy(
        q, &(kiln_range){scratch, 0, SLOW_N, KILN_F32},
        &(kiln_range){kept, 0, SLOW_N, KILN_F32}, 0, NULL, NULL));
    assert_kiln_ok(kiln_buffer_destroy(scratch));
    assert_kiln_ok(kiln_kernel_destroy(k));
    assert_kiln_ok(kiln_program_destroy(p));
    kiln_event_release(launched);

    uint32_t *host = calloc(SLOW_N, 4);
    assert_non_null(host);
    assert_kiln_ok(kiln_buffer_read_sync(
        q, &(kiln_range){kept, 0, SLOW_N, KILN_U32}, host));
    check_slow(host);

    /* A view destroyed while a write to it is pending; its parent is then
     * free of children and may go too. */
    size_t align =
        kiln_context_get_device_info(ctx)->mem_base_addr_align_bits / 8;
    kiln_buffer *view;
    assert_kiln_ok(kiln_buffer_create_sub(kept, align, 64, 0, &view));
    assert_kiln_status(kiln_buffer_destroy(kept), KILN_ERR_BUSY);
    static const uint32_t pattern[16] = {1, 2, 3, 4, 5, 6, 7, 8,
                                         9, 10, 11, 12, 13, 14, 15, 16};
    assert_kiln_ok(kiln_buffer_write(
        q, pattern, &(kiln_range){view, 0, 16, KILN_U32}, 0, NULL, NULL));
    assert_kiln_ok(kiln_buffer_destroy(view));
    assert_kiln_ok(kiln_buffer_read_sync(
        q, &(kiln_range){kept, align / 4, 16, KILN_U32}, host));
    assert_memory_equal(host, pattern, sizeof pattern);
    assert_kiln_ok(kiln_buffer_destroy(kept));
    free(host);
    kiln_test_close(ctx, q);
  }
}

/* A context refuses to go while children live, and destroys nothing then:
 * every child still works afterwards. */
static void test_context_busy_keeps_children(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx;
    kiln_queue *q;
    kiln_test_open(d, &ctx, &q);
    kiln_buffer *b;
    assert_kiln_ok(kiln_buffer_create(ctx, 64, 0, &b));
    kiln_event *ev;
    assert_kiln_ok(kiln_queue_marker(q, 0, NULL, &ev));
    for (int i = 0; i < 3; i++) {
      assert_kiln_status(kiln_context_destroy(ctx), KILN_ERR_BUSY);
      assert_last_error_contains("kiln_context_destroy");
    }
    uint64_t v = 0x0123456789abcdefull, back = 0;
    assert_kiln_ok(
        kiln_buffer_write_sync(q, &v, &(kiln_range){b, 4, 2, KILN_U32}));
    assert_kiln_ok(
        kiln_buffer_read_sync(q, &(kiln_range){b, 4, 2, KILN_U32}, &back));
    assert_true(back == v);
    assert_kiln_ok(kiln_event_wait(ev));
    kiln_event_release(ev);
    assert_kiln_ok(kiln_buffer_destroy(b));
    kiln_test_close(ctx, q);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_oversized_buffers),
      cmocka_unit_test(test_exhaust_device_memory),
      cmocka_unit_test(test_create_destroy_cycles),
      cmocka_unit_test(test_queue_destroy_waits),
      cmocka_unit_test(test_destroy_objects_with_work_pending),
      cmocka_unit_test(test_context_busy_keeps_children),
  };
  return KILN_TEST_RUN("resources", tests, true);
}
