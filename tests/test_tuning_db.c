/* The tuning file read once, at its first use, and kiln's tuning
 * database (backends/tuning_db.c, runtime/tune/tuning_db.c), read
 * through a test-only database since the shipped one has no rows yet: the
 * first matching row is used (checked against the host reference), a
 * user's file comes before it and the profile after it, a row whose
 * parameters the space or the device refuses is dropped with its reason,
 * and malformed rows are skipped with theirs. The shipped database parses
 * cleanly. Contexts force the GPU family ("nvidia" profile). */
#include <unistd.h>
#include <xxhash.h>

#include "gemm_test_util.h"
#include "tune/tune.h"

static const char *const row_params =
    "MWG=32 NWG=32 KWG=8 MDIMC=8 NDIMC=16 VWM=2 VWN=2 SA=1 SB=0 PADA=1 "
    "PADB=0 DB=1 KWI=2 STRM=0 STRN=1 DWG=16 DWI=1 SWITCH=0";
static const char *const file_params =
    "MWG=32 NWG=64 KWG=16 MDIMC=8 NDIMC=16 VWM=2 VWN=4 SA=1 SB=1 PADA=1 "
    "PADB=0 DB=1 KWI=2 STRM=0 STRN=1 DWG=8 DWI=2 SWITCH=0";

static const struct gcase check_case =
    GC(ROW, N, T, 37, 45, 29, 1.0f, 0.5f, KILN_F32, PADS(3, 5, 7, 1, 2, 3),
       EPI(RELU, true, 1));

static char dir[256];

static void open_ctx(kiln_context **ctx, kiln_queue **q) {
  kiln_context_options opts = {.profile = "nvidia"};
  assert_kiln_ok(kiln_context_create(kiln_test_device(0), &opts, ctx));
  if (q != NULL)
    assert_kiln_ok(kiln_queue_create(*ctx, 0, q));
}

static void close_ctx(kiln_context *ctx, kiln_queue *q) {
  if (q != NULL)
    assert_kiln_ok(kiln_queue_destroy(q));
  assert_kiln_ok(kiln_context_destroy(ctx));
}

/* A database: the rows given, then a catch-all for another device. */
static char db[8192];
static void use_db(const char *rows) {
  snprintf(db, sizeof db,
           "# test database\n"
           "gemm | Some Other GPU* | 0.1.0 | %s | GFLOP/s 1 -> 2\n%s",
           file_params, rows);
  kiln__tuning_db_use(db);
  kiln__tuning_forget();
}

/* The file is read once, at the first use on the device: removing it
 * afterwards changes nothing for the process, and a bad file's reason is
 * there from that use on. */
static void test_file_read_once(void **state) {
  (void)state;
  char path[400];
  snprintf(path, sizeof path, "%s/at-create.txt", dir);
  assert_int_equal(setenv("KILN_TUNING", path, 1), 0);
  kiln_context *ctx;
  kiln_queue *q;
  open_ctx(&ctx, &q);
  assert_kiln_ok(kiln_tuning_save(ctx, "gemm", file_params, "9 GFLOP/s", NULL));
  close_ctx(ctx, q);
  kiln__tuning_forget();
  open_ctx(&ctx, NULL);
  kiln_tuning_info info;
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info)); /* the first use */
  assert_int_equal(unlink(path), 0);
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info));
  assert_string_equal(info.source, "file");
  assert_string_equal(info.params, file_params);
  close_ctx(ctx, NULL);
  /* A damaged file: its reason is known at creation. */
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fputs("kiln-tuning 1\ngarbage\n", f);
  assert_int_equal(fclose(f), 0);
  kiln__tuning_forget();
  open_ctx(&ctx, NULL);
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info)); /* the first use */
  assert_int_equal(unlink(path), 0);
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info));
  assert_string_equal(info.source, "profile");
  assert_non_null(strstr(info.ignored, "no checksum line"));
  close_ctx(ctx, NULL);
  unsetenv("KILN_TUNING");
  kiln__tuning_forget();
}

static void test_database_row_used(void **state) {
  (void)state;
  assert_int_equal(setenv("KILN_TUNING", "off", 1), 0);
  char rows[2048];
  snprintf(rows, sizeof rows,
           "gemm | * | 0.1.0 | %s | GFLOP/s 3 -> 4\n"
           "gemm | * | 0.1.0 | %s | a later match: never used\n",
           row_params, file_params);
  use_db(rows);
  kiln_context *ctx;
  kiln_queue *q;
  open_ctx(&ctx, &q);
  kiln_tuning_info info;
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info));
  assert_string_equal(info.source, "database");
  assert_string_equal(info.params, row_params);
  assert_string_equal(info.database, "* (kiln 0.1.0)");
  assert_string_equal(info.figures, "GFLOP/s 3 -> 4");
  assert_null(strstr(info.ignored, "database"));
  run_case(ctx, q, &check_case, "tuned from the database");
  close_ctx(ctx, q);
}

/* file > database > profile; a rejected file line gives way to the row. */
static void test_precedence(void **state) {
  (void)state;
  char path[400], rows[2048];
  snprintf(path, sizeof path, "%s/precedence.txt", dir);
  snprintf(rows, sizeof rows, "gemm | * | 0.1.0 | %s | GFLOP/s 3 -> 4\n",
           row_params);
  use_db(rows);
  assert_int_equal(setenv("KILN_TUNING", path, 1), 0);
  kiln_context *ctx;
  open_ctx(&ctx, NULL);
  assert_kiln_ok(kiln_tuning_save(ctx, "gemm", file_params, "9 GFLOP/s", NULL));
  kiln_tuning_info info;
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info));
  assert_string_equal(info.source, "file");
  assert_string_equal(info.params, file_params);
  assert_string_equal(info.database, "* (kiln 0.1.0)"); /* there, unused */
  assert_kiln_ok(kiln_tuning_reset(ctx, NULL));
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info));
  assert_string_equal(info.source, "database");
  close_ctx(ctx, NULL);
  /* A file line outside the space: the row takes over, the reason stays. */
  char bad[KILN_TUNING_TEXT_CAPACITY];
  snprintf(bad, sizeof bad, "%s", file_params);
  memcpy(strstr(bad, "MWG=32"), "MWG=48", 6);
  char body[4096];
  const kiln_device_info *di = kiln_device_get_info(kiln_test_device(0));
  snprintf(body, sizeof body,
           "kiln-tuning 1\ndevice %s\ndriver %s\nkiln %s\nop gemm %s\n"
           "figures gemm x\n",
           di->stable_id, di->driver_version, KILN_VERSION_STRING, bad);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fprintf(f, "%schecksum %016llx\n", body,
          (unsigned long long)XXH3_64bits(body, strlen(body)));
  assert_int_equal(fclose(f), 0);
  kiln__tuning_forget();
  open_ctx(&ctx, NULL);
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info));
  assert_string_equal(info.source, "database");
  assert_string_equal(info.params, row_params);
  assert_non_null(strstr(info.ignored, "MWG 48"));
  close_ctx(ctx, NULL);
  unlink(path);
  unsetenv("KILN_TUNING");
}

/* Rows the space or the device refuses, and malformed rows. */
static void test_bad_rows(void **state) {
  (void)state;
  assert_int_equal(setenv("KILN_TUNING", "off", 1), 0);
  static const struct {
    const char *row, *reason;
  } cases[] = {
      {"gemm | * | 0.1.0 | MWG=48 | GFLOP/s 1", "rejected"},
      {"gemm | * | 0.1.0 | P", "not five fields"},
      {"gemm | * | 0.1.0 | P | ", "no figures"},
      {"gemm | * | 1.x | P | GFLOP/s 1", "not a version"},
      {"gemm op | * | 0.1.0 | P | GFLOP/s 1", "not one word"},
      {" | * | 0.1.0 | P | GFLOP/s 1 | extra", "not five fields"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char rows[2048]; /* the row, its P the parameters */
    const char *p = strchr(cases[i].row, 'P');
    if (p == NULL)
      snprintf(rows, sizeof rows, "%s\n", cases[i].row);
    else
      snprintf(rows, sizeof rows, "%.*s%s%s\n", (int)(p - cases[i].row),
               cases[i].row, row_params, p + 1);
    use_db(rows);
    kiln_context *ctx;
    open_ctx(&ctx, NULL);
    kiln_tuning_info info;
    assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info));
    if (strcmp(info.source, "profile") != 0 ||
        strstr(info.ignored, "tuning database") == NULL ||
        strstr(info.ignored, cases[i].reason) == NULL)
      fail_msg("row %zu: source %s, ignored \"%s\", want \"%s\"", i,
               info.source, info.ignored, cases[i].reason);
    close_ctx(ctx, NULL);
  }
  kiln__tuning_db_use(NULL);
  kiln__tuning_forget();
  unsetenv("KILN_TUNING");
}

/* The shipped database is well formed (no reason on any device). */
static void test_shipped_database(void **state) {
  (void)state;
  kiln__tuning_db_use(NULL);
  kiln__tuning_forget();
  assert_int_equal(setenv("KILN_TUNING", "off", 1), 0);
  kiln_context *ctx;
  open_ctx(&ctx, NULL);
  kiln_tuning_info info;
  assert_kiln_ok(kiln_tuning_get_info(ctx, "gemm", &info));
  assert_null(strstr(info.ignored, "database"));
  close_ctx(ctx, NULL);
  unsetenv("KILN_TUNING");
  kiln__tuning_forget();
}

/* The small spaces read the database as GEMM's does (a row outside the
 * space gives way to the profile, with its reason), kiln_tuning_build
 * builds their programs, and the error lists every op with a space. */
static void test_small_spaces(void **state) {
  (void)state;
  assert_int_equal(setenv("KILN_TUNING", "off", 1), 0);
  use_db("transpose | * | 0.1.0 | TILE=16 PAD=0 WPT=2 | GB/s 1 -> 2\n"
         "reduce | * | 0.1.0 | WG=64 WPT=2 VW=4 PARTS=8 | GB/s 3 -> 4\n"
         "elementwise | * | 0.1.0 | WG=4096 WPT=1 VW=1 | GB/s 5 -> 6\n");
  kiln_context *ctx;
  open_ctx(&ctx, NULL);
  kiln_tuning_info info;
  assert_kiln_ok(kiln_tuning_get_info(ctx, "transpose", &info));
  assert_string_equal(info.source, "database");
  assert_string_equal(info.params, "TILE=16 PAD=0 WPT=2");
  assert_kiln_ok(kiln_tuning_get_info(ctx, "reduce", &info));
  assert_string_equal(info.source, "database");
  assert_string_equal(info.params, "WG=64 WPT=2 VW=4 PARTS=8");
  assert_string_equal(info.figures, "GB/s 3 -> 4");
  assert_kiln_ok(kiln_tuning_get_info(ctx, "elementwise", &info));
  assert_string_equal(info.source, "profile");
  assert_non_null(strstr(info.ignored, "WG 4096"));
  assert_kiln_ok(kiln_tuning_build(ctx, "transpose", "TILE=8 PAD=1 WPT=1"));
  assert_kiln_ok(kiln_tuning_build(ctx, "reduce", "WG=32 WPT=1 VW=2 PARTS=1"));
  assert_kiln_ok(kiln_tuning_build(ctx, "elementwise", "WG=64 WPT=2 VW=2"));
  assert_int_equal(kiln_tuning_build(ctx, "elementwise", "WG=64 WPT=2"),
                   KILN_ERR_INVALID_ARGUMENT);
  assert_int_equal(kiln_tuning_build(ctx, "sum", "WG=64"), KILN_ERR_NOT_FOUND);
  assert_non_null(strstr(kiln_last_error(),
                         "ops with one: gemm, transpose, reduce, elementwise"));
  close_ctx(ctx, NULL);
  kiln__tuning_db_use(NULL);
  kiln__tuning_forget();
  unsetenv("KILN_TUNING");
  /* The registry's knob counts are literals beside each space (a const
   * struct's member is no constant expression): they must agree. */
  const struct kiln__tuning_space *const entries[] = {
      &kiln__transpose_tuning_space, &kiln__reduce_tuning_space,
      &kiln__elementwise_tuning_space};
  for (size_t i = 0; i < 3; i++) {
    assert_non_null(entries[i]->small);
    assert_int_equal(entries[i]->knobs, entries[i]->small->count);
    assert_string_equal(entries[i]->op, entries[i]->small->name);
  }
}

/* kiln_tuning_build's bad input, and a build that holds ctx busy. */
static void test_build_bad_input(void **state) {
  (void)state;
  kiln_context *ctx;
  open_ctx(&ctx, NULL);
  assert_int_equal(kiln_tuning_build(NULL, "gemm", row_params),
                   KILN_ERR_NULL_POINTER);
  assert_int_equal(kiln_tuning_build(ctx, NULL, row_params),
                   KILN_ERR_NULL_POINTER);
  assert_int_equal(kiln_tuning_build(ctx, "gemm", NULL),
                   KILN_ERR_NULL_POINTER);
  assert_int_equal(kiln_tuning_build(ctx, "sum", row_params),
                   KILN_ERR_NOT_FOUND);
  assert_int_equal(kiln_tuning_build(ctx, "gemm", "MWG=48"),
                   KILN_ERR_INVALID_ARGUMENT);
  assert_kiln_ok(kiln_tuning_build(ctx, "gemm", row_params));
  close_ctx(ctx, NULL);
}

int main(void) {
  (void)run_all;
  snprintf(dir, sizeof dir, "%s", "/tmp/kiln-tuning-db-XXXXXX");
  if (mkdtemp(dir) == NULL)
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_file_read_once),
      cmocka_unit_test(test_database_row_used),
      cmocka_unit_test(test_small_spaces),
      cmocka_unit_test(test_precedence),
      cmocka_unit_test(test_bad_rows),
      cmocka_unit_test(test_shipped_database),
      cmocka_unit_test(test_build_bad_input),
  };
  int rc = KILN_TEST_RUN("tuning_db", tests, true);
  rmdir(dir);
  return rc;
}
