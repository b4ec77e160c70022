/* Tuning files and the tuning API (kiln/kiln_tune.h, runtime/tune/
 * tuning_file.c, tune_api.c, variant.c): a saved file is used by GEMM (checked
 * against the host reference); every kind of bad file (garbage, no or a
 * wrong checksum, cut short as by a full disk, another version, another
 * device, another driver, parameters outside the space or beyond the
 * device) is ignored with its reason and GEMM falls back to the profile;
 * KILN_TUNING=off and =PATH; two processes saving at once leave one valid
 * file; every bad argument is refused. Contexts force the GPU family
 * ("nvidia" profile), as the GEMM tests do on CPUs. */
#include <pthread.h>
#include <stdatomic.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include "gemm_test_util.h"
#include "tune/tune.h"

/* A point of the space that differs from every profile's row. */
static const char *const tuned =
    "MWG=32 NWG=64 KWG=16 MDIMC=8 NDIMC=16 VWM=2 VWN=4 SA=1 SB=1 PADA=1 "
    "PADB=0 DB=1 KWI=2 STRM=0 STRN=1 DWG=8 DWI=2 SWITCH=0";

static char dir[256];

static void open_gpu_family(kiln_context **ctx, kiln_queue **q) {
  kiln_context_options opts = {.profile = "nvidia"};
  assert_kiln_ok(kiln_context_create(kiln_test_device(0), &opts, ctx));
  assert_kiln_ok(kiln_queue_create(*ctx, 0, q));
}

static void write_text(const char *path, const char *text, size_t len) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
}

/* A file's body (the lines before the checksum) with its checksum. */
static void write_signed(const char *path, const char *body) {
  char text[4096];
  snprintf(text, sizeof text, "%schecksum %016llx\n", body,
           (unsigned long long)XXH3_64bits(body, strlen(body)));
  write_text(path, text, strlen(text));
}

/* KILN_TUNING=path, files read afresh; then the info for gemm. */
static void reread(kiln_context *ctx, const char *path,
                   kiln_tuning_info *info) {
  if (path != NULL)
    assert_int_equal(setenv("KILN_TUNING", path, 1), 0);
  else
    unsetenv("KILN_TUNING");
  kiln__tuning_forget();
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", info));
}

static const struct gcase check_case =
    GC(ROW, N, T, 37, 45, 29, 1.0f, 0.5f, KILN_F32, PADS(3, 5, 7, 1, 2, 3),
       EPI(RELU, true, 1));

static void test_file_used(void **state) {
  (void)state;
  kiln_context *ctx;
  kiln_queue *q;
  open_gpu_family(&ctx, &q);
  kiln_tuning_info info;
  char path[400];
  snprintf(path, sizeof path, "%s/used.txt", dir);
  reread(ctx, path, &info);
  assert_string_equal(info.source, "profile");
  assert_string_equal(info.ignored, ""); /* no file: nothing to say */
  assert_kiln_ok(kiln_tuning_save(ctx, "gemm", tuned, "gemm 1024: 9.5 GFLOP/s",
                                  NULL));
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info));
  assert_string_equal(info.source, "file");
  assert_string_equal(info.params, tuned);
  assert_string_equal(info.figures, "gemm 1024: 9.5 GFLOP/s");
  assert_string_equal(info.path, path);
  run_case(ctx, q, &check_case, "tuned from file");
  /* A fresh read finds the same. */
  reread(ctx, path, &info);
  assert_string_equal(info.source, "file");
  assert_string_equal(info.params, tuned);
  /* off: ignored, saying so. */
  reread(ctx, "off", &info);
  assert_string_equal(info.source, "profile");
  assert_non_null(strstr(info.ignored, "KILN_TUNING=off"));
  /* set wins over the file; NULL goes back to it. */
  reread(ctx, path, &info);
  const char *other =
      "MWG=16 NWG=16 KWG=8 MDIMC=8 NDIMC=8 VWM=1 VWN=1 SA=0 SB=0 PADA=0 "
      "PADB=0 DB=0 KWI=1 STRM=1 STRN=1 DWG=16 DWI=1 SWITCH=64";
  assert_kiln_ok(kiln_tuning_set(ctx, "gemm", other));
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info));
  assert_string_equal(info.source, "set");
  assert_string_equal(info.params, other);
  run_case(ctx, q, &check_case, "tuned by set");
  assert_kiln_ok(kiln_tuning_set(ctx, "gemm", NULL));
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info));
  assert_string_equal(info.source, "file");
  /* reset removes it. */
  assert_kiln_ok(kiln_tuning_reset(ctx, NULL));
  assert_int_equal(access(path, F_OK), -1);
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info));
  assert_string_equal(info.source, "profile");
  assert_kiln_ok(kiln_tuning_reset(ctx, NULL)); /* none: fine */
  unsetenv("KILN_TUNING");
  kiln_test_close(ctx, q);
}

static void test_bad_files(void **state) {
  (void)state;
  kiln_context *ctx;
  kiln_queue *q;
  open_gpu_family(&ctx, &q);
  const kiln_device_info *di = kiln_context_get_device_info(ctx);
  char path[400], head[1024], body[3072], good[4096];
  snprintf(path, sizeof path, "%s/bad.txt", dir);
  snprintf(head, sizeof head, "kiln-tuning 1\ndevice %s\ndriver %s\nkiln %s\n",
           di->stable_id, di->driver_version, KILN_VERSION_STRING);
  struct {
    const char *what, *reason;
    char text[3072];
    bool sign;
  } cases[12];
  size_t n = 0;
#define CASE(WHAT, REASON, SIGN, ...)                                          \
  do {                                                                         \
    cases[n].what = WHAT;                                                      \
    cases[n].reason = REASON;                                                  \
    cases[n].sign = SIGN;                                                      \
    snprintf(cases[n].text, sizeof cases[n].text, __VA_ARGS__);                \
    n++;                                                                       \
  } while (0)
  CASE("garbage", "no checksum line", false, "\x01\x02 garbage\nmore\n");
  CASE("wrong checksum", "checksum mismatch", false,
       "%sop gemm %s\nchecksum 0123456789abcdef\n", head, tuned);
  CASE("other version", "stale, tuned with kiln 0.0.1", true,
       "kiln-tuning 1\ndevice %s\ndriver %s\nkiln 0.0.1\nop gemm %s\n",
       di->stable_id, di->driver_version, tuned);
  CASE("other device", "written for another device", true,
       "kiln-tuning 1\ndevice not-this-one\ndriver %s\nkiln %s\nop gemm %s\n",
       di->driver_version, KILN_VERSION_STRING, tuned);
  CASE("other driver", "stale, tuned with driver 0.0-old", true,
       "kiln-tuning 1\ndevice %s\ndriver 0.0-old\nkiln %s\nop gemm %s\n",
       di->stable_id, KILN_VERSION_STRING, tuned);
  CASE("file format 2", "not a version 1 tuning file", true,
       "kiln-tuning 2\ndevice %s\n", di->stable_id);
  CASE("outside the space", "KWG 24 is not one of the values", true,
       "%sop gemm MWG=32 NWG=64 KWG=24 MDIMC=8 NDIMC=16 VWM=2 VWN=4 SA=1 "
       "SB=1 PADA=1 PADB=0 DB=1 KWI=2 STRM=0 STRN=1 DWG=8 DWI=2 SWITCH=0\n",
       head);
  CASE("not a point", "\"FOO\" is not NAME=VALUE", true, "%sop gemm FOO=1\n",
       head);
  CASE("unknown line", "line 5 is not understood", true, "%sflavour sweet\n",
       head);
  /* Before the fix the last KWG won, and an empty op line was dropped
   * with no reason given. */
  CASE("a knob twice", "KWG is given twice, as 16 and as 32", true,
       "%sop gemm %s KWG=32\n", head, tuned);
  CASE("an op line without parameters", "line 5: op gemm has no parameters",
       true, "%sop gemm\nfigures gemm 9 GFLOP/s\n", head);
#undef CASE
  for (size_t i = 0; i < n; i++) {
    if (cases[i].sign)
      write_signed(path, cases[i].text);
    else
      write_text(path, cases[i].text, strlen(cases[i].text));
    kiln_tuning_info info;
    reread(ctx, path, &info);
    if (strstr(info.ignored, cases[i].reason) == NULL)
      fail_msg("%s: reason \"%s\" lacks \"%s\"", cases[i].what, info.ignored,
               cases[i].reason);
    assert_string_equal(info.source, "profile");
    run_case(ctx, q, &check_case, cases[i].what);
  }
  /* Cut short, as a disk that filled up mid-write would leave it. */
  snprintf(body, sizeof body, "%sop gemm %s\nfigures gemm x\n", head, tuned);
  snprintf(good, sizeof good, "%schecksum %016llx\n", body,
           (unsigned long long)XXH3_64bits(body, strlen(body)));
  for (size_t cut = 0; cut < strlen(good); cut += 7) {
    write_text(path, good, cut);
    kiln_tuning_info info;
    reread(ctx, path, &info);
    assert_string_equal(info.source, "profile");
    if (cut > 0)
      assert_string_not_equal(info.ignored, "");
  }
  write_text(path, good, strlen(good)); /* the whole file is fine */
  kiln_tuning_info info;
  reread(ctx, path, &info);
  assert_string_equal(info.source, "file");
  /* Parameters the device cannot run: a device's limits are the one thing
   * a file of the right device can still break (a copied file). */
  snprintf(body, sizeof body,
           "%sop gemm MWG=128 NWG=128 KWG=32 MDIMC=32 NDIMC=32 VWM=1 VWN=1 "
           "SA=1 SB=1 PADA=1 PADB=1 DB=1 KWI=1 STRM=1 STRN=1 DWG=8 DWI=2 "
           "SWITCH=0\n",
           head);
  write_signed(path, body);
  reread(ctx, path, &info);
  if (di->local_mem_bytes < 2 * 2 * 32 * 129 * 4) {
    assert_string_equal(info.source, "profile");
    assert_non_null(strstr(info.ignored, "__local stages exceed"));
  }
  unsetenv("KILN_TUNING");
  kiln__tuning_forget();
  kiln_test_close(ctx, q);
}

/* Two processes saving over and over into one file: every read sees a
 * whole file, and the last one standing is valid. */
static void test_two_writers(void **state) {
  (void)state;
  char path[400];
  snprintf(path, sizeof path, "%s/race.txt", dir);
  assert_int_equal(setenv("KILN_TUNING", path, 1), 0);
  kiln__tuning_forget();
  const char *mine[2] = {
      tuned, "MWG=16 NWG=16 KWG=8 MDIMC=8 NDIMC=8 VWM=1 VWN=1 SA=0 SB=0 "
             "PADA=0 PADB=0 DB=0 KWI=1 STRM=1 STRN=1 DWG=16 DWI=1 SWITCH=64"};
  pid_t pids[2];
  for (int w = 0; w < 2; w++) {
    pids[w] = fork();
    assert_true(pids[w] >= 0);
    if (pids[w] == 0) {
      kiln_context *ctx;
      kiln_queue *q;
      kiln_context_options opts = {.profile = "nvidia"};
      if (kiln_context_create(kiln_test_device(0), &opts, &ctx) != KILN_OK)
        _exit(2);
      (void)q;
      for (int i = 0; i < 40; i++) {
        if (kiln_tuning_save(ctx, "gemm", mine[w], "race", NULL) != KILN_OK)
          _exit(3);
        kiln_tuning_info info;
        kiln__tuning_forget();
        if (kiln_tuning_get_info(ctx, "gemm", &info) != KILN_OK ||
            strcmp(info.source, "file") != 0)
          _exit(4); /* a torn or half-written file was read */
      }
      kiln_context_destroy(ctx);
      _exit(0);
    }
  }
  for (int w = 0; w < 2; w++) {
    int status = 0;
    assert_int_equal(waitpid(pids[w], &status, 0), pids[w]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  kiln_context *ctx;
  kiln_queue *q;
  open_gpu_family(&ctx, &q);
  kiln_tuning_info info;
  reread(ctx, path, &info);
  assert_string_equal(info.source, "file");
  assert_true(strcmp(info.params, mine[0]) == 0 ||
              strcmp(info.params, mine[1]) == 0);
  /* No temporary file is left behind. */
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp >/dev/null", dir);
  assert_int_not_equal(system(cmd), 0);
  unsetenv("KILN_TUNING");
  kiln__tuning_forget();
  kiln_test_close(ctx, q);
}

static void test_bad_input(void **state) {
  (void)state;
  kiln_context *ctx;
  kiln_queue *q;
  open_gpu_family(&ctx, &q);
  kiln_tuning_knob knob;
  size_t count = 0;
  while (kiln_tuning_get_knob("gemm", count, &knob) == KILN_OK)
    count++;
  assert_int_equal(count, KILN__GEMM_GPU_KNOBS);
  assert_kiln_error(kiln_tuning_get_knob("gemm", SIZE_MAX, &knob),
                    KILN_ERR_OUT_OF_RANGE, "past the 18 knobs");
  assert_kiln_error(kiln_tuning_get_knob("sort", 0, &knob), KILN_ERR_NOT_FOUND,
                    "op \"sort\" has no parameter space");
  assert_kiln_error(kiln_tuning_get_knob(NULL, 0, &knob), KILN_ERR_NULL_POINTER,
                    "op is NULL");
  assert_kiln_error(kiln_tuning_get_knob("gemm", 0, NULL),
                    KILN_ERR_NULL_POINTER, "out is NULL");
  char why[300];
  assert_kiln_ok(kiln_tuning_check(ctx, "gemm", tuned, why, sizeof why));
  assert_string_equal(why, "");
  assert_kiln_error(kiln_tuning_check(NULL, "gemm", tuned, why, sizeof why),
                    KILN_ERR_NULL_POINTER, "ctx is NULL");
  assert_kiln_error(kiln_tuning_check(ctx, "gemm", NULL, why, sizeof why),
                    KILN_ERR_NULL_POINTER, "params is NULL");
  assert_kiln_error(kiln_tuning_check(ctx, "gemm", "MWG=32", NULL, 0),
                    KILN_ERR_INVALID_ARGUMENT, "NWG is missing");
  assert_kiln_error(
      kiln_tuning_check(ctx, "gemm",
                        "MWG=16 NWG=64 KWG=16 MDIMC=32 NDIMC=16 VWM=2 VWN=4 "
                        "SA=1 SB=1 PADA=1 PADB=0 DB=1 KWI=2 STRM=0 STRN=1 "
                        "DWG=8 DWI=2 SWITCH=0",
                        why, sizeof why),
      KILN_ERR_UNSUPPORTED, "multiples of MDIMC 32");
  assert_non_null(strstr(why, "multiples of MDIMC 32"));
  assert_kiln_error(kiln_tuning_set(NULL, "gemm", tuned), KILN_ERR_NULL_POINTER,
                    "kiln_tuning_set: ctx is NULL");
  assert_kiln_error(kiln_tuning_set(ctx, "gemm", "SWITCH=1000"),
                    KILN_ERR_INVALID_ARGUMENT, "kiln_tuning_set: params");
  assert_kiln_error(kiln_tuning_set(ctx, "axpy", NULL), KILN_ERR_NOT_FOUND,
                    "axpy");
  assert_kiln_error(kiln_tuning_save(NULL, "gemm", tuned, "", NULL),
                    KILN_ERR_NULL_POINTER, "kiln_tuning_save: ctx is NULL");
  assert_kiln_error(kiln_tuning_save(ctx, "gemm", tuned, "two\nlines", NULL),
                    KILN_ERR_INVALID_ARGUMENT, "one line each");
  assert_kiln_error(kiln_tuning_save(ctx, "gemm", tuned, "x",
                                     "/proc/no/such/dir/t.txt"),
                    KILN_ERR_IO, "cannot create");
  assert_kiln_error(kiln_tuning_reset(NULL, NULL), KILN_ERR_NULL_POINTER,
                    "kiln_tuning_reset: ctx is NULL");
  kiln_tuning_info info;
  assert_kiln_error(kiln_tuning_get_info(NULL, "gemm", &info),
                    KILN_ERR_NULL_POINTER, "ctx is NULL");
  assert_kiln_error(kiln_tuning_get_info(ctx, "gemm", NULL),
                    KILN_ERR_NULL_POINTER, "info is NULL");
  kiln_test_close(ctx, q);
}

/* An op's variant is resolved once per context, op and dtype, and again
 * after kiln_tuning_set, kiln_tuning_save and kiln_tuning_reset; a file
 * with more ops than kiln has spaces is read whole. */
static void test_variant_resolved_once(void **state) {
  (void)state;
  kiln_context *ctx;
  kiln_queue *q;
  open_gpu_family(&ctx, &q);
  char path[400];
  snprintf(path, sizeof path, "%s/variant.txt", dir);
  kiln_tuning_info info;
  reread(ctx, path, &info);
  const struct kiln__variant *first, *again;
  assert_kiln_ok(kiln__variant_get(ctx, KILN__TUNED_GEMM, KILN_F32, &first));
  assert_string_equal(first->source, "profile");
  assert_kiln_ok(kiln__variant_get(ctx, KILN__TUNED_GEMM, KILN_F32, &again));
  assert_ptr_equal(again, first);
  /* Another dtype is a variant of its own. */
  assert_kiln_ok(kiln__variant_get(ctx, KILN__TUNED_GEMM, KILN_F16, &again));
  assert_ptr_not_equal(again, first);
  /* save: the file's point, at the next use. */
  assert_kiln_ok(kiln_tuning_save(ctx, "gemm", tuned, "figures", NULL));
  assert_kiln_ok(kiln__variant_get(ctx, KILN__TUNED_GEMM, KILN_F32, &again));
  assert_string_equal(again->source, "file");
  assert_int_equal(again->gemm.mwg, 32);
  assert_non_null(strstr(again->options, "-DMWG=32 "));
  run_case(ctx, q, &check_case, "variant from file");
  /* set: ahead of the file; NULL: the file's again, the same variant. */
  const struct kiln__variant *from_file = again;
  const char *other =
      "MWG=16 NWG=16 KWG=8 MDIMC=8 NDIMC=8 VWM=1 VWN=1 SA=0 SB=0 PADA=0 "
      "PADB=0 DB=0 KWI=1 STRM=1 STRN=1 DWG=16 DWI=1 SWITCH=64";
  assert_kiln_ok(kiln_tuning_set(ctx, "gemm", other));
  assert_kiln_ok(kiln__variant_get(ctx, KILN__TUNED_GEMM, KILN_F32, &again));
  assert_string_equal(again->source, "set");
  assert_int_equal(again->gemm.mwg, 16);
  run_case(ctx, q, &check_case, "variant from set");
  assert_kiln_ok(kiln_tuning_set(ctx, "gemm", NULL));
  assert_kiln_ok(kiln__variant_get(ctx, KILN__TUNED_GEMM, KILN_F32, &again));
  assert_ptr_equal(again, from_file);
  /* reset: the profile's. */
  assert_kiln_ok(kiln_tuning_reset(ctx, NULL));
  assert_kiln_ok(kiln__variant_get(ctx, KILN__TUNED_GEMM, KILN_F32, &again));
  assert_ptr_equal(again, first);
  /* Twelve ops in one file (kiln knows four): every line is kept. */
  const kiln_device_info *di = kiln_context_get_device_info(ctx);
  char body[3072];
  int n = snprintf(body, sizeof body,
                   "kiln-tuning 1\ndevice %s\ndriver %s\nkiln %s\n",
                   di->stable_id, di->driver_version, KILN_VERSION_STRING);
  for (int i = 0; i < 11; i++)
    n += snprintf(body + n, sizeof body - (size_t)n, "op future%d A=1\n", i);
  snprintf(body + n, sizeof body - (size_t)n, "op gemm %s\n", tuned);
  write_signed(path, body);
  reread(ctx, path, &info);
  assert_string_equal(info.ignored, "");
  assert_string_equal(info.source, "file");
  assert_kiln_ok(kiln__variant_get(ctx, KILN__TUNED_GEMM, KILN_F32, &again));
  assert_ptr_equal(again, from_file);
  assert_int_equal(remove(path), 0);
  unsetenv("KILN_TUNING");
  kiln__tuning_forget();
  kiln_test_close(ctx, q);
}

/* Two threads run GEMMs on two queues of one context while a third keeps
 * changing what applies (kiln_tuning_set and back): every GEMM succeeds
 * with the right answer, whichever variant it took. */
struct racer {
  kiln_context *ctx;
  kiln_queue *q;
  kiln_buffer *a, *b, *c;
  kiln_status status;
  int wrong; /* elements of C that are not k */
};

enum { RACE_EDGE = 9, RACE_CALLS = 40 };
static _Atomic bool race_done;

static void *race_gemms(void *arg) {
  struct racer *r = arg;
  float out[RACE_EDGE * RACE_EDGE];
  for (int i = 0; i < RACE_CALLS && r->status == KILN_OK; i++) {
    r->status = kiln_matmul(
        r->q, 1, matrix_of(r->a, 0, RACE_EDGE, RACE_EDGE, KILN_F32),
        matrix_of(r->b, 0, RACE_EDGE, RACE_EDGE, KILN_F32),
        matrix_of(r->c, 0, RACE_EDGE, RACE_EDGE, KILN_F32), NULL, 0, NULL,
        NULL);
    if (r->status == KILN_OK)
      r->status = kiln_buffer_read(
          r->q, range_of(r->c, 0, RACE_EDGE * RACE_EDGE, KILN_F32), out, 0,
          NULL, NULL);
    if (r->status == KILN_OK)
      r->status = kiln_queue_finish(r->q);
    for (size_t j = 0; r->status == KILN_OK && j < RACE_EDGE * RACE_EDGE; j++)
      r->wrong += out[j] != (float)RACE_EDGE;
  }
  return NULL;
}

/* Until the GEMMs are done: about as many changes as GEMMs, or more. */
static void *race_sets(void *arg) {
  struct racer *r = arg;
  for (int i = 0; !atomic_load(&race_done) && r->status == KILN_OK; i++) {
    r->status = kiln_tuning_set(r->ctx, "gemm", i % 2 ? NULL : tuned);
    usleep(200);
  }
  return NULL;
}

static void test_variants_under_change(void **state) {
  (void)state;
  kiln_context *ctx;
  kiln_queue *q0;
  open_gpu_family(&ctx, &q0);
  assert_int_equal(setenv("KILN_TUNING", "off", 1), 0);
  kiln__tuning_forget();
  float ones[RACE_EDGE * RACE_EDGE];
  for (size_t i = 0; i < RACE_EDGE * RACE_EDGE; i++)
    ones[i] = 1.0f;
  struct racer r[3] = {{.ctx = ctx, .q = q0}, {.ctx = ctx}, {.ctx = ctx}};
  assert_kiln_ok(kiln_queue_create(ctx, 0, &r[1].q));
  for (int i = 0; i < 2; i++) {
    assert_kiln_ok(kiln_buffer_create(ctx, sizeof ones, 0, &r[i].a));
    assert_kiln_ok(kiln_buffer_create(ctx, sizeof ones, 0, &r[i].b));
    assert_kiln_ok(kiln_buffer_create(ctx, sizeof ones, 0, &r[i].c));
    assert_kiln_ok(kiln_buffer_write(
        r[i].q, ones, range_of(r[i].a, 0, RACE_EDGE * RACE_EDGE, KILN_F32), 0,
        NULL, NULL));
    assert_kiln_ok(kiln_buffer_write(
        r[i].q, ones, range_of(r[i].b, 0, RACE_EDGE * RACE_EDGE, KILN_F32), 0,
        NULL, NULL));
  }
  /* Both programs built first, so the race is over variants, not builds. */
  assert_kiln_ok(kiln_tuning_build(ctx, "gemm", tuned));
  pthread_t t[3];
  atomic_store(&race_done, false);
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&t[i], NULL, race_gemms, &r[i]), 0);
  assert_int_equal(pthread_create(&t[2], NULL, race_sets, &r[2]), 0);
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_join(t[i], NULL), 0);
  atomic_store(&race_done, true);
  assert_int_equal(pthread_join(t[2], NULL), 0);
  for (int i = 0; i < 3; i++) {
    assert_kiln_ok(r[i].status);
    assert_int_equal(r[i].wrong, 0);
  }
  assert_kiln_ok(kiln_tuning_set(ctx, "gemm", NULL));
  for (int i = 0; i < 2; i++) {
    kiln_buffer_destroy(r[i].a);
    kiln_buffer_destroy(r[i].b);
    kiln_buffer_destroy(r[i].c);
  }
  assert_kiln_ok(kiln_queue_destroy(r[1].q));
  unsetenv("KILN_TUNING");
  kiln__tuning_forget();
  kiln_test_close(ctx, q0);
}

/* A FIFO where a tuning file is read or written (KILN_TUNING, the device's
 * default path under KILN_CACHE_DIR, kiln_tuning_save's path): every call
 * returns, saying what is there. Before the fix the first context's
 * tuning read blocked in open(2) forever. The work runs in a fresh process
 * of this test (test_fifo_work, which does nothing unless
 * KILN_TEST_FIFO is set) under an alarm, so that a regression fails
 * instead of hanging the suite (a fork would inherit PoCL without its
 * threads). */
static void test_fifo_work(void **state) {
  (void)state;
  const char *fifo = getenv("KILN_TEST_FIFO");
  if (fifo == NULL)
    return;
  alarm(60);
  kiln_context *ctx;
  kiln_queue *q;
  open_gpu_family(&ctx, &q);
  kiln_tuning_info info;
  reread(ctx, fifo, &info); /* KILN_TUNING=FIFO */
  if (strstr(info.ignored, "a FIFO, not a regular file") == NULL ||
      strcmp(info.source, "profile") != 0)
    fail_msg("KILN_TUNING=FIFO: ignored \"%s\"", info.ignored);
  run_case(ctx, q, &check_case, "KILN_TUNING=FIFO");
  assert_kiln_error(kiln_tuning_save(ctx, "gemm", tuned, "x", NULL),
                    KILN_ERR_IO, "a FIFO, not a regular file");
  assert_kiln_error(kiln_tuning_save(ctx, "gemm", tuned, "x", fifo),
                    KILN_ERR_IO, "cannot replace");
  struct stat st;
  assert_int_equal(stat(fifo, &st), 0);
  assert_true(S_ISFIFO(st.st_mode)); /* left in place */
  /* The default path: a FIFO at the device's file in the cache. */
  unsetenv("KILN_TUNING");
  kiln__tuning_forget();
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info));
  assert_true(info.path[0] != '\0');
  char parent[sizeof info.path];
  snprintf(parent, sizeof parent, "%s", info.path);
  *strrchr(parent, '/') = '\0';
  assert_int_equal(mkdir(parent, 0755) == 0 || errno == EEXIST, 1);
  assert_int_equal(mkfifo(info.path, 0600), 0);
  kiln__tuning_forget();
  kiln_context *ctx2;
  assert_kiln_ok(kiln_context_create(kiln_test_device(0), NULL, &ctx2));
  assert_kiln_ok(kiln_tuning_get_info(ctx2, "gemm", &info));
  if (strstr(info.ignored, "a FIFO, not a regular file") == NULL)
    fail_msg("default path FIFO: ignored \"%s\"", info.ignored);
  assert_kiln_ok(kiln_context_destroy(ctx2));
  unlink(info.path);
  kiln_test_close(ctx, q);
}

static void test_fifo(void **state) {
  (void)state;
  if (getenv("KILN_TEST_FIFO") != NULL)
    return; /* the child */
  char fifo[400], cache[400], self[400];
  snprintf(fifo, sizeof fifo, "%s/fifo.txt", dir);
  snprintf(cache, sizeof cache, "%s/fifo-cache", dir);
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  assert_true(n > 0);
  self[n] = '\0';
  assert_int_equal(mkfifo(fifo, 0600), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    setenv("KILN_TEST_FIFO", fifo, 1);
    setenv("KILN_CACHE_DIR", cache, 1);
    setenv("KILN_TEST_FILTER", "test_fifo_work", 1);
    dup2(2, 1); /* its TAP lines are not this test's */
    execl(self, self, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (WIFSIGNALED(status))
    fail_msg("the child died of signal %d (%s)", WTERMSIG(status),
             WTERMSIG(status) == SIGALRM ? "hung on the FIFO" : "crashed");
  assert_int_equal(WEXITSTATUS(status), 0);
  unlink(fifo);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/kiln-test-tuning-%ld", (long)getpid());
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dir, dir);
  if (system(cmd) != 0)
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_file_used),
      cmocka_unit_test(test_bad_files),
      cmocka_unit_test(test_two_writers),
      cmocka_unit_test(test_variant_resolved_once),
      cmocka_unit_test(test_variants_under_change),
      cmocka_unit_test(test_fifo),
      cmocka_unit_test(test_fifo_work),
  };
  (void)run_all;
  const char *filter = getenv("KILN_TEST_FILTER");
  if (filter != NULL && filter[0] != '\0')
    cmocka_set_test_filter(filter);
  int rc = KILN_TEST_RUN("tuning", tests, true);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    rc = 1;
  return rc;
}
