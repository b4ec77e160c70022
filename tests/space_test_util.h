/* What the small spaces' tests share (test_space_transpose.c,
 * test_space_reduce.c, test_space_elementwise.c, test_space_cpu.c): each
 * includes its op's test program (test_op_*.c, without its main) and runs
 * that program's correctness checks once per point of a seeded sample of
 * the op's space (runtime/tune/tune.h) that holds every value of every
 * knob, with the space's kernel family forced through the profile on a
 * device of the other family, as test_gemm_space.c does for GEMM. This header: the sample, the forced
 * context, the sharding, and the checks of rejected points.
 *
 * Include it after the op test program. */
#ifndef KILN_SPACE_TEST_UTIL_H
#define KILN_SPACE_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "core/internal.h"
#include "op_test_util.h"
#include "tune/tune.h"

/* xorshift64*: the sample is the same on every run. */
static uint64_t space_rng_state = 0x9e3779b97f4a7c15u;
static unsigned space_rng(unsigned bound) {
  space_rng_state ^= space_rng_state >> 12;
  space_rng_state ^= space_rng_state << 25;
  space_rng_state ^= space_rng_state >> 27;
  return (unsigned)((space_rng_state * 2685821657736338717u) >> 33) % bound;
}

/* Valid points on info holding every value of every knob: for each (knob,
 * value) not yet held, random points with that knob fixed until one runs
 * on the device. A value no point can hold on the device (a work-group
 * larger than the device takes) is reported and skipped. */
static size_t space_sample(const struct kiln__space *sp,
                           const kiln_device_info *info,
                           struct kiln__point *out, size_t max) {
  bool held[KILN__SPACE_KNOBS][KILN__SPACE_VALUES] = {{false}};
  size_t count = 0;
  for (size_t i = 0; i < sp->count; i++)
    for (unsigned v = 0; v < sp->knob[i].count; v++) {
      if (held[i][v])
        continue;
      struct kiln__point p = {{0}};
      bool found = false;
      char why[256] = "";
      for (int tries = 0; tries < 2000 && !found; tries++) {
        for (size_t j = 0; j < sp->count; j++)
          p.v[j] = sp->knob[j].values[space_rng(sp->knob[j].count)];
        p.v[i] = sp->knob[i].values[v];
        found = kiln__space_check(sp, &p, info, true, why, sizeof why);
      }
      if (!found) {
        fprintf(stderr, "# %s: no point with %s = %u runs here: %s\n",
                sp->name, sp->knob[i].name, sp->knob[i].values[v], why);
        continue;
      }
      assert_true(count < max);
      out[count++] = p;
      for (size_t j = 0; j < sp->count; j++)
        for (unsigned w = 0; w < sp->knob[j].count; w++)
          if (p.v[j] == sp->knob[j].values[w])
            held[j][w] = true;
    }
  return count;
}

/* A context with sp's kernel family on device d: its own, or one forced
 * through the profile (nvidia's or pocl's) on a device of the other. */
static void space_open(const struct kiln__space *sp, size_t d,
                       kiln_context **ctx, kiln_queue **q) {
  kiln_test_open(d, ctx, q);
  if ((*ctx)->backend->tuning->family != sp->family) {
    kiln_test_close(*ctx, *q);
    kiln_context_options opts = {
        .profile = sp->family == KILN_FAMILY_CPU ? "pocl" : "nvidia"};
    assert_kiln_ok(kiln_context_create(kiln_test_device(d), &opts, ctx));
    assert_kiln_ok(kiln_queue_create(*ctx, KILN_QUEUE_PROFILING, q));
  }
}

/* SPACE_SHARD=i/n: this process runs points i, i + n, ... only, so that
 * meson runs a sample as n tests side by side (each point is a program
 * that PoCL takes seconds to build). */
static void space_shard(unsigned *shard, unsigned *shards) {
  *shard = 0;
  *shards = 1;
  const char *env = getenv("SPACE_SHARD");
  if (env != NULL && (sscanf(env, "%u/%u", shard, shards) != 2 ||
                      *shards == 0 || *shard >= *shards))
    fail_msg("SPACE_SHARD=%s is not i/n with i < n", env);
}

/* Run body on every test device once per point of sp's sample in this
 * shard, the point forced as the test override; between points, prepare
 * (may be NULL) gets the point's index in the sample. */
static void space_run_sample(const struct kiln__space *sp,
                             void (*prepare)(size_t index),
                             void (*body)(kiln_context *ctx, kiln_queue *q)) {
  unsigned shard, shards;
  space_shard(&shard, &shards);
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx = NULL;
    kiln_queue *q = NULL;
    space_open(sp, d, &ctx, &q);
    struct kiln__point sample[32];
    const size_t count =
        space_sample(sp, kiln_context_get_device_info(ctx), sample, 32);
    fprintf(stderr, "# device %zu: %zu points of %s hold every value of "
                    "every knob\n", d, count, sp->name);
    for (size_t s = shard; s < count; s += shards) {
      char text[200];
      kiln__space_format(sp, &sample[s], text, sizeof text);
      fprintf(stderr, "# point %zu: %s\n", s, text);
      if (prepare != NULL)
        prepare(s);
      kiln__space_set_override(sp, &sample[s]);
      body(ctx, q);
    }
    kiln__space_set_override(sp, NULL);
    kiln_test_close(ctx, q);
  }
}

/* A device with a GPU's limits, for the validation tests. */
static const kiln_device_info *space_gpu_like_info(void) {
  static kiln_device_info info;
  info.max_work_group_size = 1024;
  info.max_work_item_sizes[0] = 1024;
  info.max_work_item_sizes[1] = 1024;
  info.max_work_item_sizes[2] = 64;
  info.local_mem_bytes = 48 << 10;
  return &info;
}

/* p is refused on info with a reason containing text. */
#define SPACE_REJECTS(sp, p, info, in_space, text)                             \
  do {                                                                         \
    char why_[256] = "";                                                       \
    assert_false(kiln__space_check(sp, &(p), info, in_space, why_,             \
                                   sizeof why_));                              \
    if (strstr(why_, text) == NULL)                                            \
      fail_msg("reason \"%s\" lacks \"%s\"", why_, text);                      \
  } while (0)

/* The public API's view of sp: the knobs listed, text that is not a point
 * refused as invalid, a point beyond the device refused as unsupported
 * (both with reasons), a good point set and reported as in effect, and an
 * override the device cannot run (and one with a knob at 0) refused before
 * launch by call (an op on
 * buffers a and b of 64 floats, which must fail with KILN_ERR_UNSUPPORTED
 * naming the space, and succeed without the override). */
static void space_check_api(const struct kiln__space *sp, const char *good,
                            const char *beyond, const char *beyond_why,
                            const struct kiln__point *broken,
                            kiln_status (*call)(kiln_queue *q, kiln_buffer *a,
                                                kiln_buffer *b)) {
  kiln_tuning_knob k;
  for (size_t i = 0; i < sp->count; i++) {
    assert_kiln_ok(kiln_tuning_get_knob(sp->name, i, &k));
    assert_string_equal(k.name, sp->knob[i].name);
  }
  assert_kiln_status(kiln_tuning_get_knob(sp->name, sp->count, &k),
                     KILN_ERR_OUT_OF_RANGE);
  kiln_context *ctx = NULL;
  kiln_queue *q = NULL;
  space_open(sp, 0, &ctx, &q);
  char why[512];
  assert_kiln_ok(kiln_tuning_check(ctx, sp->name, good, why, sizeof why));
  assert_kiln_status(kiln_tuning_check(ctx, sp->name, "BOGUS=1", why,
                                       sizeof why),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(why, "is not NAME=VALUE"));
  char text[200];
  snprintf(text, sizeof text, "%s", good);
  char *eq = strchr(text, '='); /* the first knob's value made 3 */
  eq[1] = '3';
  eq[2] = eq[2] >= '0' && eq[2] <= '9' ? ' ' : eq[2];
  assert_kiln_status(kiln_tuning_check(ctx, sp->name, text, why, sizeof why),
                     KILN_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(why, "is not one of the values"));
  if (beyond != NULL) {
    assert_kiln_status(kiln_tuning_check(ctx, sp->name, beyond, why,
                                         sizeof why),
                       KILN_ERR_UNSUPPORTED);
    if (strstr(why, beyond_why) == NULL)
      fail_msg("reason \"%s\" lacks \"%s\"", why, beyond_why);
    assert_kiln_status(kiln_tuning_set(ctx, sp->name, beyond),
                       KILN_ERR_UNSUPPORTED);
  }
  assert_kiln_ok(kiln_tuning_set(ctx, sp->name, good));
  kiln_tuning_info info;
  assert_kiln_ok(kiln_tuning_get_info(ctx, sp->name, &info));
  assert_string_equal(info.source, "set");
  assert_string_equal(info.params, good);
  assert_kiln_ok(kiln_tuning_set(ctx, sp->name, NULL));
  assert_kiln_ok(kiln_tuning_get_info(ctx, sp->name, &info));
  assert_string_equal(info.source, "profile");
  kiln__space_set_override(sp, broken);
  char name[64];
  snprintf(name, sizeof name, "%s parameters rejected", sp->name);
  kiln_buffer *a = util_buffer(ctx, 64 * 4, 0), *b = util_buffer(ctx, 64 * 4, 0);
  assert_kiln_error(call(q, a, b), KILN_ERR_UNSUPPORTED, name);
  /* A knob at 0 is refused the same way (never divided by). */
  struct kiln__point zero;
  assert_true(kiln__space_parse(sp, good, &zero, why, sizeof why));
  zero.v[sp->count - 1] = 0;
  kiln__space_set_override(sp, &zero);
  char zero_why[64];
  snprintf(zero_why, sizeof zero_why, "%s is 0", sp->knob[sp->count - 1].name);
  assert_kiln_error(call(q, a, b), KILN_ERR_UNSUPPORTED, zero_why);
  kiln__space_set_override(sp, NULL);
  assert_kiln_ok(call(q, a, b));
  assert_kiln_ok(kiln_queue_finish(q));
  assert_kiln_ok(kiln_buffer_destroy(a));
  assert_kiln_ok(kiln_buffer_destroy(b));
  kiln_test_close(ctx, q);
}

/* A space test program: test_validation (the file's), then the sample
 * through the file's checks(ctx, q) with prepare(index) before each point
 * (NULL: none). */
#define SPACE_TEST_MAIN(name, prepare, checks)                                 \
  static void test_sample(void **state) {                                      \
    (void)state;                                                               \
    space_run_sample(sp, prepare, checks);                                     \
  }                                                                            \
  int main(void) {                                                             \
    const struct CMUnitTest tests[] = {                                        \
        cmocka_unit_test(test_validation),                                     \
        cmocka_unit_test(test_sample),                                         \
    };                                                                         \
    return KILN_TEST_RUN(name, tests, true);                                   \
  }

#endif
