/* The GPU-family GEMM's parameter space (runtime/ops/ops_gemm_gpu.c):
 *   - validation refuses, with its reason, each kind of combination that a
 *     kernel or a device cannot run, and the text form round-trips;
 *   - a seeded sample of the space that holds every value of every knob
 *     passes the GEMM correctness checks of test_op_gemm.c (awkward sizes,
 *     both layouts, transposes, offsets, every dtype, the epilogue), run on
 *     each test device with the GPU family (forced through the profile on
 *     a CPU device, as test_op_gemm.c does), through both the tiled and the
 *     direct kernel.
 * The sample is small on purpose (CI runs the suite many times); the
 * tuner's correctness gate checks every candidate it times anyway. */
#include "gemm_test_util.h"

#define KNOBS KILN__GEMM_GPU_KNOBS

/* A valid, in-space point to edit in the validation tests. */
static struct kiln__gemm_gpu_params good_point(void) {
  return (struct kiln__gemm_gpu_params){
      .mwg = 64, .nwg = 64, .kwg = 16, .mdimc = 16, .ndimc = 16, .vwm = 4,
      .vwn = 4,  .sa = 1,   .sb = 1,   .pada = 1,   .padb = 1,   .db = 1,
      .kwi = 2,  .strm = 1, .strn = 1, .dwg = 8,    .dwi = 2,    .sw = 128};
}

static const kiln_device_info *gpu_like_info(void) {
  static kiln_device_info info;
  info.max_work_group_size = 1024;
  info.max_work_item_sizes[0] = 1024;
  info.max_work_item_sizes[1] = 1024;
  info.max_work_item_sizes[2] = 64;
  info.local_mem_bytes = 48 << 10;
  return &info;
}

#define REJECTS(p, info, in_space, text)                                       \
  do {                                                                         \
    char why_[256] = "";                                                       \
    assert_false(kiln__gemm_gpu_check(&(p), info, in_space, why_,              \
                                      sizeof why_));                           \
    if (strstr(why_, text) == NULL)                                            \
      fail_msg("reason \"%s\" lacks \"%s\"", why_, text);                      \
  } while (0)

static void test_validation(void **state) {
  (void)state;
  const kiln_device_info *info = gpu_like_info();
  char why[256];
  struct kiln__gemm_gpu_params p = good_point();
  assert_true(kiln__gemm_gpu_check(&p, info, true, why, sizeof why));

  p.mdimc = 32; /* 64 rows over 32 items: fine; 16 over 32 is not */
  p.mwg = 16;
  REJECTS(p, info, true, "must be multiples of MDIMC 32");
  p = good_point();
  p.mwg = p.nwg = 128; /* 8 x 8 = 64 outputs: fine; 16 x 8 is not */
  p.mdimc = 8;
  p.ndimc = 16;
  REJECTS(p, info, true, "128 outputs per work-item");
  p = good_point();
  p.kwi = 8;
  p.kwg = 8;
  p.vwm = p.vwn = 2;
  assert_true(kiln__gemm_gpu_check(&p, info, true, why, sizeof why));
  p.kwg = 8;
  p.kwi = 8;
  p.vwm = 8;
  p.mwg = 16;
  p.mdimc = 16; /* 16 x 8 / 8 = 16 loads for 256 work-items */
  REJECTS(p, info, true, "staged A");
  p.sa = 0; /* the same point without staging A loads nothing of A */
  assert_true(kiln__gemm_gpu_check(&p, info, true, why, sizeof why));
  p = good_point();
  p.nwg = 16;
  p.vwn = 8;
  p.kwg = 8;
  p.vwm = 1;
  REJECTS(p, info, true, "staged B");
  /* Outside the space: rejected as a tuned point, fine as a default. */
  p = good_point();
  p.kwg = 24;
  p.kwi = 1;
  p.vwm = p.vwn = 1;
  REJECTS(p, info, true, "KWG 24 is not one of the values");
  assert_true(kiln__gemm_gpu_check(&p, info, false, why, sizeof why));
  p = good_point();
  p.dwi = 0;
  REJECTS(p, info, false, "DWI is 0");

  /* Device limits. */
  kiln_device_info small = *info;
  small.max_work_group_size = 128;
  p = good_point();
  REJECTS(p, &small, true, "work-groups of 256 work-items");
  small = *info;
  small.max_work_item_sizes[1] = 8;
  REJECTS(p, &small, true, "MDIMC 16");
  small = *info;
  small.local_mem_bytes = 8 << 10; /* 2 stages x 2 x 16 x 65 floats */
  REJECTS(p, &small, true, "16640 bytes of __local stages exceed");
  assert_int_equal(kiln__gemm_gpu_local_bytes(&p), 16640);
  p.db = 0;
  p.sb = 0;
  assert_true(kiln__gemm_gpu_check(&p, &small, true, why, sizeof why));
  small = *info;
  small.max_work_group_size = 64;
  p = good_point();
  p.mdimc = p.ndimc = 8;
  p.dwg = 16;
  REJECTS(p, &small, true, "direct kernel");

  /* Text form: round trip, and each kind of bad text. */
  p = good_point();
  char text[400];
  assert_true(kiln__gemm_gpu_format(&p, text, sizeof text) > 0);
  struct kiln__gemm_gpu_params back;
  memset(&back, 0xff, sizeof back);
  assert_true(kiln__gemm_gpu_parse(text, &back, why, sizeof why));
  assert_memory_equal(&p, &back, sizeof p);
  assert_false(kiln__gemm_gpu_parse("MWG=64", &back, why, sizeof why));
  assert_non_null(strstr(why, "NWG is missing"));
  assert_false(kiln__gemm_gpu_parse("MWG=64 BOGUS=1", &back, why, sizeof why));
  assert_non_null(strstr(why, "\"BOGUS\" is not NAME=VALUE"));
  assert_false(kiln__gemm_gpu_parse("MWG=x", &back, why, sizeof why));
  assert_non_null(strstr(why, "value of MWG"));
  assert_false(kiln__gemm_gpu_parse("MWG=9999999", &back, why, sizeof why));

  /* An override that the device cannot run is refused before launch. */
  kiln_context *ctx = NULL;
  kiln_queue *q = NULL;
  kiln_context_options opts = {.profile = "nvidia"};
  assert_kiln_ok(kiln_context_create(kiln_test_device(0), &opts, &ctx));
  assert_kiln_ok(kiln_queue_create(ctx, 0, &q));
  p = good_point();
  p.mwg = 16; /* MDIMC 16 x 1 row each is fine; now break it */
  p.mdimc = 32;
  kiln__gemm_set_gpu_params(&p);
  kiln_buffer *a = util_buffer(ctx, 64 * 4, 0), *b = util_buffer(ctx, 64 * 4, 0),
              *c = util_buffer(ctx, 64 * 4, 0);
  assert_kiln_error(kiln_matmul(q, 1, matrix_of(a, 0, 8, 8, KILN_F32),
                                matrix_of(b, 0, 8, 8, KILN_F32),
                                matrix_of(c, 0, 8, 8, KILN_F32), NULL, 0, NULL,
                                NULL),
                    KILN_ERR_UNSUPPORTED, "GEMM parameters rejected");
  kiln__gemm_set_gpu_params(NULL);
  assert_kiln_ok(kiln_buffer_destroy(a));
  assert_kiln_ok(kiln_buffer_destroy(b));
  assert_kiln_ok(kiln_buffer_destroy(c));
  kiln_test_close(ctx, q);
}

/* xorshift64*: the sample is the same on every run. */
static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static unsigned rng(unsigned bound) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (unsigned)((rng_state * 2685821657736338717u) >> 33) % bound;
}

/* A sample of valid points on info that holds every value of every knob:
 * for each (knob, value) not yet held, random points with that knob fixed
 * until one is valid (every value has valid points: see the space). */
static size_t draw_sample(const kiln_device_info *info,
                          struct kiln__gemm_gpu_params *out, size_t max) {
  bool held[KNOBS][5] = {{false}};
  size_t count = 0;
  for (size_t i = 0; i < KNOBS; i++)
    for (unsigned v = 0; v < kiln__gemm_gpu_knobs[i].count; v++) {
      if (held[i][v])
        continue;
      struct kiln__gemm_gpu_params p;
      bool found = false;
      char why[256];
      for (int tries = 0; tries < 20000 && !found; tries++) {
        for (size_t j = 0; j < KNOBS; j++)
          kiln__gemm_gpu_put(
              &p, j,
              kiln__gemm_gpu_knobs[j].values[rng(kiln__gemm_gpu_knobs[j].count)]);
        kiln__gemm_gpu_put(&p, i, kiln__gemm_gpu_knobs[i].values[v]);
        found = kiln__gemm_gpu_check(&p, info, true, why, sizeof why);
      }
      if (!found)
        fail_msg("no valid point with %s = %u on this device",
                 kiln__gemm_gpu_knobs[i].name, kiln__gemm_gpu_knobs[i].values[v]);
      assert_true(count < max);
      out[count++] = p;
      for (size_t j = 0; j < KNOBS; j++)
        for (unsigned w = 0; w < kiln__gemm_gpu_knobs[j].count; w++)
          if (kiln__gemm_gpu_get(&p, j) == kiln__gemm_gpu_knobs[j].values[w])
            held[j][w] = true;
    }
  return count;
}

static void test_sample(void **state) {
  (void)state;
  /* Awkward shapes: non-multiples of every tile, primes, 1; every layout
   * and transpose among them; offsets and padded leading dimensions (the
   * guards around C are checked); every dtype; beta 0 over NaN and beta
   * != 0; the epilogue. */
  static const struct gcase cases[] = {
      GC(ROW, N, N, 37, 45, 29, 1.0f, 0.5f, KILN_F32, PADS(3, 5, 7, 1, 2, 3),
         EPI(GELU, true, 2)),
      GC(COL, T, T, 61, 19, 131, -1.0f, 0.0f, KILN_F16,
         PADS(1, 2, 0, 5, 0, 1)),
      /* Leading dimensions and offsets multiples of 8: the aligned vector
       * loads run (with k and m off the vector width at the edges). */
      GC(ROW, T, N, 20, 33, 70, 0.5f, 0.0f, KILN_BF16, PADS(4, 7, 2, 0, 8, 0),
         EPI(RELU, true, 0)),
      GC(ROW, N, N, 41, 48, 27, 1.0f, 1.0f, KILN_F32, PADS(5, 8, 0, 8, 16, 0)),
      GC(COL, N, T, 1, 67, 5, 1.0f, 1.0f, KILN_F32, PADS(4, 0, 0, 4, 8, 0)),
  };
  const size_t ncases = sizeof cases / sizeof cases[0];
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx = NULL;
    kiln_queue *q = NULL;
    kiln_test_open(d, &ctx, &q);
    if (ctx->backend->tuning->family == KILN_FAMILY_CPU) {
      kiln_test_close(ctx, q);
      kiln_context_options opts = {.profile = "nvidia"};
      assert_kiln_ok(kiln_context_create(kiln_test_device(d), &opts, &ctx));
      assert_kiln_ok(kiln_queue_create(ctx, KILN_QUEUE_PROFILING, &q));
    }
    struct kiln__gemm_gpu_params sample[64];
    const size_t count =
        draw_sample(kiln_context_get_device_info(ctx), sample, 64);
    fprintf(stderr, "# device %zu: %zu points hold every value of every knob\n",
            d, count);
    /* Each point is a program of its own, which PoCL takes seconds to
     * build: GEMM_SPACE_SHARD=i/n runs points i, i + n, ... only, so that
     * meson runs the sample as n tests side by side. */
    unsigned shard = 0, shards = 1;
    const char *env = getenv("GEMM_SPACE_SHARD");
    if (env != NULL && (sscanf(env, "%u/%u", &shard, &shards) != 2 ||
                        shards == 0 || shard >= shards))
      fail_msg("GEMM_SPACE_SHARD=%s is not i/n with i < n", env);
    for (size_t s = shard; s < count; s += shards) {
      char text[400], tag[96];
      kiln__gemm_gpu_format(&sample[s], text, sizeof text);
      fprintf(stderr, "# point %zu: %s\n", s, text);
      /* The tiled kernel on every case (SWITCH 0), the direct kernel on two
       * (SWITCH 512 takes these sizes), and the point as drawn, its SWITCH
       * choosing, on one. */
      for (int pass = 0; pass < 3; pass++) {
        struct kiln__gemm_gpu_params p = sample[s];
        if (pass < 2)
          p.sw = pass == 0 ? 0 : 512;
        kiln__gemm_set_gpu_params(&p);
        for (size_t i = 0; i < ncases; i++) {
          const size_t r = (i + ncases - s % ncases) % ncases;
          if ((pass == 1 && r >= 2) || (pass == 2 && r != 2))
            continue;
          snprintf(tag, sizeof tag, "device %zu point %zu pass %d case %zu", d,
                   s, pass, i);
          run_case(ctx, q, &cases[i], tag);
        }
      }
    }
    kiln__gemm_set_gpu_params(NULL);
    kiln_test_close(ctx, q);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_validation),
      cmocka_unit_test(test_sample),
  };
  (void)run_all;
  const char *filter = getenv("KILN_TEST_FILTER");
  if (filter != NULL && filter[0] != '\0')
    cmocka_set_test_filter(filter);
  return KILN_TEST_RUN("gemm_space", tests, true);
}
