/* The persistent program cache: miss then hit, every kind of damage detected
 * and rebuilt with correct results, two processes building one key at once,
 * eviction, unusable directories, KILN_CACHE=0, and the public kiln_cache_*
 * API (kiln_cache_warm's run is in test_cache_warm.c). Each test points KILN_CACHE_DIR at a fresh directory. PoCL's own
 * cache is off (meson.build sets POCL_KERNEL_CACHE=0) so this tests kiln's.
 *
 * Program sources differ per test (a comment with a counter) so that no
 * test depends on what another left behind. */
#define _XOPEN_SOURCE 700 /* nftw */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "program/program.h"
#include "program/cache_internal.h"

static const char kernel_text[] =
    "__kernel void fill(__global uint *out, uint seed) {\n"
    "  size_t i = get_global_id(0);\n"
    "  out[i] = ((uint)i * 2654435761u) ^ seed;\n"
    "}\n";

enum { N = 128 };

/* ---- helpers ------------------------------------------------------------ */

static char dir[256];

static int remove_one(const char *path, const struct stat *sb, int flag,
                      struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void fresh_dir(void) {
  if (dir[0] != '\0')
    nftw(dir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
  snprintf(dir, sizeof dir, "/tmp/kiln-test-cache-XXXXXX");
  assert_non_null(mkdtemp(dir));
  setenv("KILN_CACHE_DIR", dir, 1);
  unsetenv("KILN_CACHE");
  unsetenv("KILN_CACHE_MAX_MB");
}

static int teardown(void **state) {
  (void)state;
  if (dir[0] != '\0')
    nftw(dir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
  dir[0] = '\0';
  unsetenv("KILN_CACHE");
  unsetenv("KILN_CACHE_MAX_MB");
  return 0;
}

/* A source unique to tag, so each test has its own keys. */
static void make_source(char *buf, size_t cap, const char *tag) {
  snprintf(buf, cap, "/* %s */\n%s", tag, kernel_text);
}

/* Build source on ctx, run it, check the pattern; return from_cache. */
static bool build_and_check(kiln_context *ctx, kiln_queue *queue,
                            const char *source) {
  kiln_program *program;
  assert_kiln_ok(kiln_program_create_built(ctx, source, NULL, &program));
  bool cached = kiln_program_is_from_cache(program);
  kiln_kernel *kernel;
  assert_kiln_ok(kiln_kernel_create(program, "fill", &kernel));
  kiln_buffer *buf;
  assert_kiln_ok(kiln_buffer_create(ctx, N * 4, 0, &buf));
  uint32_t seed = 0xabc123u;
  assert_kiln_ok(kiln_kernel_set_arg_buffer(kernel, 0, buf));
  assert_kiln_ok(kiln_kernel_set_arg_u32(kernel, 1, seed));
  size_t global = N, local = 32;
  assert_kiln_ok(kiln_kernel_launch(queue, kernel, 1, &global, &local, 0, NULL,
                                    NULL));
  uint32_t out[N];
  assert_kiln_ok(
      kiln_buffer_read_sync(queue, &(kiln_range){buf, 0, N, KILN_U32}, out));
  for (uint32_t i = 0; i < N; i++)
    assert_int_equal(out[i], (i * 2654435761u) ^ seed);
  assert_kiln_ok(kiln_buffer_destroy(buf));
  assert_kiln_ok(kiln_kernel_destroy(kernel));
  assert_kiln_ok(kiln_program_destroy(program));
  return cached;
}

/* The one entry file in dir (asserts there is exactly one). */
static void only_entry(char *path, size_t cap) {
  kiln_cache_list *list;
  assert_kiln_ok(kiln_cache_list_create(&list));
  assert_int_equal(kiln_cache_list_get_count(list), 1);
  snprintf(path, cap, "%s/%s", dir, kiln_cache_list_get(list, 0)->file);
  kiln_cache_list_destroy(list);
}

static void file_write(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, size, f), size);
  fclose(f);
}

static unsigned char *file_read(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  *size = (size_t)ftell(f);
  rewind(f);
  unsigned char *data = malloc(*size);
  assert_non_null(data);
  assert_int_equal(fread(data, 1, *size, f), *size);
  fclose(f);
  return data;
}

static uint64_t rejected_count(void) {
  kiln_cache_info info;
  assert_kiln_ok(kiln_cache_get_info(&info));
  return info.rejected;
}

/* ---- tests ---------------------------------------------------------------- */

static void test_miss_then_hit(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    fresh_dir();
    kiln_context *ctx;
    kiln_queue *queue;
    kiln_test_open(d, &ctx, &queue);
    char source[512];
    make_source(source, sizeof source, "miss-then-hit");
    kiln_cache_info before, after;
    assert_kiln_ok(kiln_cache_get_info(&before));
    assert_false(build_and_check(ctx, queue, source));
    assert_true(build_and_check(ctx, queue, source));
    assert_kiln_ok(kiln_cache_get_info(&after));
    assert_int_equal(after.misses, before.misses + 1);
    assert_int_equal(after.hits, before.hits + 1);
    assert_int_equal(after.stores, before.stores + 1);
    assert_true(after.enabled);
    assert_true(after.usable);
    assert_string_equal(after.directory, dir);
    assert_int_equal(after.entries, 1);
    assert_true(after.bytes > KILN__CACHE_HEADER_SIZE);
    assert_true(after.last_run_recorded);
    assert_int_equal(after.last_run_pid, (int64_t)getpid());
    assert_int_equal(after.last_run_hits, after.hits);

    /* The listing names the device and the label. */
    kiln_cache_list *list;
    assert_kiln_ok(kiln_cache_list_create(&list));
    assert_int_equal(kiln_cache_list_get_count(list), 1);
    const kiln_cache_entry *e = kiln_cache_list_get(list, 0);
    assert_true(e->valid);
    assert_string_equal(e->label, "user");
    assert_string_equal(e->device, kiln_context_get_device_info(ctx)->name);
    assert_true(e->size_bytes == after.bytes);
    assert_true(e->created > 0 && e->last_used >= e->created - 1);
    assert_null(kiln_cache_list_get(list, 1));
    kiln_cache_list_destroy(list);

    /* Other options or another profile are other keys. */
    kiln_program *program;
    assert_kiln_ok(kiln_program_create_built(ctx, source, "-DOTHER=1", &program));
    assert_false(kiln_program_is_from_cache(program));
    assert_kiln_ok(kiln_program_destroy(program));
    kiln_test_close(ctx, queue);
  }
}

enum damage {
  TRUNCATE_PAYLOAD,
  TRUNCATE_HEADER,
  EMPTY_FILE,
  FLIP_PAYLOAD_BYTE,
  FLIP_HEADER_BYTE,
  WRONG_MAGIC,
  OTHER_KEY,
  GARBAGE,
  DAMAGE_COUNT
};

static const char *const damage_names[] = {
    "truncated payload", "truncated header", "empty file",
    "flipped payload byte", "flipped header byte", "wrong magic",
    "another key's entry", "garbage"};

static void damage(const char *path, enum damage how, const char *other_path) {
  size_t size;
  unsigned char *data = file_read(path, &size);
  switch (how) {
  case TRUNCATE_PAYLOAD:
    assert_int_equal(truncate(path, (off_t)(size - size / 3)), 0);
    break;
  case TRUNCATE_HEADER:
    assert_int_equal(truncate(path, 100), 0);
    break;
  case EMPTY_FILE:
    assert_int_equal(truncate(path, 0), 0);
    break;
  case FLIP_PAYLOAD_BYTE:
    data[KILN__CACHE_HEADER_SIZE + (size - KILN__CACHE_HEADER_SIZE) / 2] ^= 0x40;
    file_write(path, data, size);
    break;
  case FLIP_HEADER_BYTE:
    data[60] ^= 0x01; /* inside the label, covered by the header checksum */
    file_write(path, data, size);
    break;
  case WRONG_MAGIC:
    data[0] = 'X';
    file_write(path, data, size);
    break;
  case OTHER_KEY: {
    size_t other_size;
    unsigned char *other = file_read(other_path, &other_size);
    file_write(path, other, other_size);
    free(other);
    break;
  }
  case GARBAGE:
    for (size_t i = 0; i < size; i++)
      data[i] = (unsigned char)(i * 131u + 7u);
    file_write(path, data, size);
    break;
  case DAMAGE_COUNT:
    break;
  }
  free(data);
}

static void test_damaged_entries_are_rebuilt(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    fresh_dir();
    kiln_context *ctx;
    kiln_queue *queue;
    kiln_test_open(d, &ctx, &queue);
    char source[512], other_source[512];
    make_source(source, sizeof source, "damage");
    make_source(other_source, sizeof other_source, "damage-other");
    /* An entry of another key, kept aside for OTHER_KEY. */
    assert_false(build_and_check(ctx, queue, other_source));
    char other_path[512], saved_other[600];
    only_entry(other_path, sizeof other_path);
    snprintf(saved_other, sizeof saved_other, "%s/other.saved", dir);
    assert_int_equal(rename(other_path, saved_other), 0);

    assert_false(build_and_check(ctx, queue, source));
    char path[512];
    only_entry(path, sizeof path);
    for (int how = 0; how < DAMAGE_COUNT; how++) {
      uint64_t rejected = rejected_count();
      damage(path, (enum damage)how, saved_other);
      if (build_and_check(ctx, queue, source))
        fail_msg("a %s was loaded from the cache", damage_names[how]);
      assert_int_equal(rejected_count(), rejected + 1);
      kiln_cache_info info;
      assert_kiln_ok(kiln_cache_get_info(&info));
      if (strstr(info.last_problem, "removed cache entry") == NULL)
        fail_msg("last problem after a %s: '%s'", damage_names[how],
                 info.last_problem);
      assert_string_equal(info.diagnostic, "");
      /* The rebuild rewrote a good entry, which the next build loads. */
      assert_true(build_and_check(ctx, queue, source));
    }
    kiln_test_close(ctx, queue);
  }
}

/* A FIFO at an entry's path (planted, or left by a tool): the build
 * neither blocks on it nor loads from it, and the rebuilt entry replaces
 * it. Before the fix open(2) waited for a writer forever; the alarm turns
 * a regression into a failure. */
static void test_fifo_entry(void **state) {
  (void)state;
  fresh_dir();
  kiln_context *ctx;
  kiln_queue *queue;
  kiln_test_open(0, &ctx, &queue);
  char source[512];
  make_source(source, sizeof source, "fifo");
  assert_false(build_and_check(ctx, queue, source));
  char path[512];
  only_entry(path, sizeof path);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(mkfifo(path, 0600), 0);
  alarm(60);
  assert_false(build_and_check(ctx, queue, source));
  kiln_cache_info info;
  assert_kiln_ok(kiln_cache_get_info(&info));
  alarm(0);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_true(build_and_check(ctx, queue, source));
  kiln_test_close(ctx, queue);
}

/* Child mode: build and check the shared source, exit 0 on success. */
static int child_main(const char *tag) {
  kiln_device_list *list;
  const kiln_device *device;
  kiln_context *ctx;
  kiln_queue *queue;
  if (kiln_device_list_create(&list) != KILN_OK ||
      kiln_device_select(list, getenv("KILN_TEST_CACHE_DEVICE"), &device) !=
          KILN_OK ||
      kiln_context_create(device, NULL, &ctx) != KILN_OK ||
      kiln_queue_create(ctx, 0, &queue) != KILN_OK) {
    fprintf(stderr, "child: %s\n", kiln_last_error());
    return 2;
  }
  char source[512];
  make_source(source, sizeof source, tag);
  kiln_program *program;
  if (kiln_program_create_built(ctx, source, NULL, &program) != KILN_OK) {
    fprintf(stderr, "child: %s\n", kiln_last_error());
    return 3;
  }
  kiln_kernel *kernel;
  kiln_buffer *buf;
  uint32_t out[N];
  size_t global = N;
  if (kiln_kernel_create(program, "fill", &kernel) != KILN_OK ||
      kiln_buffer_create(ctx, sizeof out, 0, &buf) != KILN_OK ||
      kiln_kernel_set_arg_buffer(kernel, 0, buf) != KILN_OK ||
      kiln_kernel_set_arg_u32(kernel, 1, 7) != KILN_OK ||
      kiln_kernel_launch(queue, kernel, 1, &global, NULL, 0, NULL, NULL) !=
          KILN_OK ||
      kiln_buffer_read_sync(queue, &(kiln_range){buf, 0, N, KILN_U32}, out) !=
          KILN_OK) {
    fprintf(stderr, "child: %s\n", kiln_last_error());
    return 4;
  }
  for (uint32_t i = 0; i < N; i++)
    if (out[i] != ((i * 2654435761u) ^ 7u))
      return 5;
  kiln_buffer_destroy(buf);
  kiln_kernel_destroy(kernel);
  kiln_program_destroy(program);
  kiln_queue_destroy(queue);
  kiln_context_destroy(ctx);
  kiln_device_list_destroy(list);
  return 0;
}

static void test_two_processes_one_key(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    fresh_dir();
    const kiln_device_info *info = kiln_device_get_info(kiln_test_device(d));
    char selector[64];
    snprintf(selector, sizeof selector, "%zu:%zu", info->platform_index,
             info->device_index);
    /* Children are fresh processes (fork then exec of this test): an
     * OpenCL runtime does not survive fork. */
    pid_t pids[2];
    for (int i = 0; i < 2; i++) {
      pids[i] = fork();
      assert_true(pids[i] >= 0);
      if (pids[i] == 0) {
        setenv("KILN_TEST_CACHE_CHILD", "two-processes", 1);
        setenv("KILN_TEST_CACHE_DEVICE", selector, 1);
        execl("/proc/self/exe", "test_cache", (char *)NULL);
        _exit(127);
      }
    }
    for (int i = 0; i < 2; i++) {
      int status = 0;
      assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
      assert_true(WIFEXITED(status));
      assert_int_equal(WEXITSTATUS(status), 0);
    }
    /* One valid entry, which this process loads. */
    char path[512];
    only_entry(path, sizeof path);
    kiln_context *ctx;
    kiln_queue *queue;
    kiln_test_open(d, &ctx, &queue);
    char source[512];
    make_source(source, sizeof source, "two-processes");
    assert_true(build_and_check(ctx, queue, source));
    kiln_test_close(ctx, queue);
  }
}

/* Drivers whose binary grows at launch (KILN_QUIRK_LAZY_PROGRAM_BINARY)
 * get their entry when the program is released, after its kernels ran. The
 * quirk is forced on the test context, so every driver takes this path. */
static void test_store_on_release(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    fresh_dir();
    kiln_context *ctx;
    kiln_queue *queue;
    kiln_test_open(d, &ctx, &queue);
    ctx->device->info.quirks |= KILN_QUIRK_LAZY_PROGRAM_BINARY;
    char source[512];
    make_source(source, sizeof source, "store-on-release");
    kiln_program *program;
    assert_kiln_ok(kiln_program_create_built(ctx, source, NULL, &program));
    assert_false(kiln_program_is_from_cache(program));
    kiln_cache_info info;
    assert_kiln_ok(kiln_cache_get_info(&info));
    assert_int_equal(info.entries, 0); /* not yet */
    assert_kiln_ok(kiln_program_destroy(program));
    assert_kiln_ok(kiln_cache_get_info(&info));
    assert_int_equal(info.entries, 1);
    assert_true(build_and_check(ctx, queue, source));

    /* Op programs: stored when their context goes. */
    cl_program op;
    assert_kiln_ok(kiln__op_program(ctx, "probe", "-DKILN_RELEASE_TEST=1", &op));
    assert_kiln_ok(kiln_cache_get_info(&info));
    assert_int_equal(info.entries, 1);
    kiln_test_close(ctx, queue);
    assert_kiln_ok(kiln_cache_get_info(&info));
    assert_int_equal(info.entries, 2);
    kiln_test_open(d, &ctx, NULL);
    bool from_cache = false;
    assert_kiln_ok(kiln__op_program_cached(ctx, "probe", "-DKILN_RELEASE_TEST=1",
                                           &op, &from_cache));
    assert_true(from_cache);
    assert_kiln_ok(kiln_context_destroy(ctx));
  }
}

/* Entry files with chosen sizes and ages, for eviction without builds. */
static void fake_entry(int index, size_t size, time_t age) {
  char path[512];
  snprintf(path, sizeof path, "%s/%032x%s", dir, index, KILN__CACHE_SUFFIX);
  unsigned char *data = calloc(1, size);
  assert_non_null(data);
  file_write(path, data, size);
  free(data);
  struct timespec times[2] = {{.tv_sec = time(NULL) - age},
                              {.tv_sec = time(NULL) - age}};
  assert_int_equal(utimensat(AT_FDCWD, path, times, 0), 0);
}

static bool exists(int index) {
  char path[512];
  snprintf(path, sizeof path, "%s/%032x%s", dir, index, KILN__CACHE_SUFFIX);
  return access(path, F_OK) == 0;
}

static void test_eviction(void **state) {
  (void)state;
  fresh_dir();
  /* Oldest first: entry 0 is the least recently used. */
  for (int i = 0; i < 5; i++)
    fake_entry(i, 1000, 500 - i * 100);
  char stray[512];
  snprintf(stray, sizeof stray, "%s/unrelated.txt", dir);
  file_write(stray, "x", 1);
  assert_int_equal(kiln__cache_evict(dir, 5000), 0); /* at the cap: nothing */
  assert_int_equal(kiln__cache_evict(dir, 3500), 2);
  assert_false(exists(0));
  assert_false(exists(1));
  assert_true(exists(2) && exists(3) && exists(4));
  assert_int_equal(access(stray, F_OK), 0); /* only kiln's files go */
  /* A hit makes an entry recent again. */
  fake_entry(2, 1000, 1000);
  assert_int_equal(kiln__cache_evict(dir, 2000), 1);
  assert_false(exists(2));

  /* End to end: a cap of 0 MiB keeps nothing, and builds still work. */
  FOR_EACH_TEST_DEVICE(d) {
    fresh_dir();
    setenv("KILN_CACHE_MAX_MB", "0", 1);
    kiln_context *ctx;
    kiln_queue *queue;
    kiln_test_open(d, &ctx, &queue);
    char source[512];
    make_source(source, sizeof source, "eviction");
    kiln_cache_info before, after;
    assert_kiln_ok(kiln_cache_get_info(&before));
    assert_false(build_and_check(ctx, queue, source));
    assert_false(build_and_check(ctx, queue, source));
    assert_kiln_ok(kiln_cache_get_info(&after));
    assert_int_equal(after.entries, 0);
    assert_int_equal(after.evicted, before.evicted + 2);
    assert_int_equal(after.max_bytes, 0);
    /* A bad cap falls back to the default and says so. */
    setenv("KILN_CACHE_MAX_MB", "lots", 1);
    assert_kiln_ok(kiln_cache_get_info(&after));
    assert_int_equal(after.max_bytes, (uint64_t)KILN__CACHE_DEFAULT_MAX_MB << 20);
    unsetenv("KILN_CACHE_MAX_MB");
    kiln_test_close(ctx, queue);
  }
}

static void test_unusable_directory(void **state) {
  (void)state;
  fresh_dir();
  char regular[512], under_file[600];
  snprintf(regular, sizeof regular, "%s/a-file", dir);
  file_write(regular, "x", 1);
  snprintf(under_file, sizeof under_file, "%s/cache", regular);
  /* Root ignores permissions, so use paths no one can create: one under a
   * regular file, one under /proc. */
  const char *const paths[] = {under_file, "/proc/kiln-cache/sub"};
  FOR_EACH_TEST_DEVICE(d) {
    for (size_t p = 0; p < 2; p++) {
      setenv("KILN_CACHE_DIR", paths[p], 1);
      kiln_context *ctx;
      kiln_queue *queue;
      kiln_test_open(d, &ctx, &queue);
      char source[512];
      make_source(source, sizeof source, "unusable");
      assert_false(build_and_check(ctx, queue, source));
      assert_false(build_and_check(ctx, queue, source));
      kiln_cache_info info;
      assert_kiln_ok(kiln_cache_get_info(&info));
      assert_true(info.enabled);
      assert_false(info.usable);
      if (strstr(info.diagnostic, "cannot create the cache directory") == NULL ||
          strstr(info.diagnostic, paths[p]) == NULL)
        fail_msg("diagnostic for %s: '%s'", paths[p], info.diagnostic);
      if (strstr(info.last_problem, "working without the program cache") == NULL)
        fail_msg("last problem for %s: '%s'", paths[p], info.last_problem);
      /* Listing and clearing an absent cache are not errors. */
      kiln_cache_list *list;
      assert_kiln_ok(kiln_cache_list_create(&list));
      assert_int_equal(kiln_cache_list_get_count(list), 0);
      kiln_cache_list_destroy(list);
      size_t removed = 1;
      assert_kiln_ok(kiln_cache_clear(&removed));
      assert_int_equal(removed, 0);
      kiln_test_close(ctx, queue);
    }
  }
  setenv("KILN_CACHE_DIR", dir, 1);
}

static void test_disabled(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    fresh_dir();
    char source[512];
    make_source(source, sizeof source, "disabled");
    kiln_context *ctx;
    kiln_queue *queue;
    setenv("KILN_CACHE", "0", 1);
    kiln_test_open(d, &ctx, &queue);
    assert_false(build_and_check(ctx, queue, source));
    assert_false(build_and_check(ctx, queue, source));
    kiln_cache_info info;
    assert_kiln_ok(kiln_cache_get_info(&info));
    assert_false(info.enabled);
    assert_non_null(strstr(info.diagnostic, "KILN_CACHE=0"));
    unsetenv("KILN_CACHE");
    assert_kiln_ok(kiln_cache_get_info(&info));
    assert_int_equal(info.entries, 0);
    kiln_test_close(ctx, queue);

    /* The context flag does the same for one context. */
    kiln_context_options options = {.flags = KILN_CONTEXT_NO_CACHE};
    assert_kiln_ok(kiln_context_create(kiln_test_device(d), &options, &ctx));
    assert_kiln_ok(kiln_queue_create(ctx, 0, &queue));
    assert_false(build_and_check(ctx, queue, source));
    assert_false(build_and_check(ctx, queue, source));
    assert_kiln_ok(kiln_cache_get_info(&info));
    assert_int_equal(info.entries, 0);
    assert_kiln_status(kiln_cache_warm(ctx, NULL, NULL, NULL),
                       KILN_ERR_INVALID_STATE);
    assert_last_error_contains("KILN_CONTEXT_NO_CACHE");
    kiln_test_close(ctx, queue);
  }
}

static void test_api_bad_input_and_clear(void **state) {
  (void)state;
  assert_kiln_status(kiln_cache_get_info(NULL), KILN_ERR_NULL_POINTER);
  assert_last_error_contains("info is NULL");
  assert_kiln_status(kiln_cache_list_create(NULL), KILN_ERR_NULL_POINTER);
  assert_last_error_contains("out is NULL");
  assert_int_equal(kiln_cache_list_get_count(NULL), 0);
  assert_null(kiln_cache_list_get(NULL, 0));
  kiln_cache_list_destroy(NULL);
  assert_kiln_status(kiln_cache_warm(NULL, NULL, NULL, NULL),
                     KILN_ERR_NULL_POINTER);
  assert_last_error_contains("ctx is NULL");
  fresh_dir();
  for (int i = 0; i < 3; i++)
    fake_entry(i, 300, 0);
  char temp[512], keep[512], stats[512];
  snprintf(temp, sizeof temp, "%s/%sleft", dir, KILN__CACHE_TMP_PREFIX);
  snprintf(keep, sizeof keep, "%s/keep.me", dir);
  snprintf(stats, sizeof stats, "%s/%s", dir, KILN__CACHE_STATS_FILE);
  file_write(temp, "t", 1);
  file_write(keep, "k", 1);
  file_write(stats, "kiln-cache-stats 1\nhits 4\nmisses 2\n", 35);
  kiln_cache_info info;
  assert_kiln_ok(kiln_cache_get_info(&info));
  assert_int_equal(info.entries, 3);
  assert_int_equal(info.bytes, 900);
  assert_true(info.last_run_recorded);
  assert_int_equal(info.last_run_hits, 4);
  assert_int_equal(info.last_run_misses, 2);
  /* Fake entries have no valid header: listed, but not valid. */
  kiln_cache_list *list;
  assert_kiln_ok(kiln_cache_list_create(&list));
  assert_int_equal(kiln_cache_list_get_count(list), 3);
  assert_false(kiln_cache_list_get(list, 0)->valid);
  kiln_cache_list_destroy(list);
  size_t removed = 0;
  assert_kiln_ok(kiln_cache_clear(&removed));
  assert_int_equal(removed, 3);
  assert_int_equal(access(temp, F_OK), -1);
  assert_int_equal(access(stats, F_OK), -1);
  assert_int_equal(access(keep, F_OK), 0); /* not kiln's */
  assert_kiln_ok(kiln_cache_get_info(&info));
  assert_int_equal(info.entries, 0);
  assert_false(info.last_run_recorded);

  /* A file that cannot be removed (here a directory under an entry's name:
   * root ignores permissions) is named; the other entries still go. */
  fake_entry(7, 100, 0);
  char stuck[512];
  snprintf(stuck, sizeof stuck, "%s/%032x%s", dir, 8, KILN__CACHE_SUFFIX);
  assert_int_equal(mkdir(stuck, 0755), 0);
  assert_kiln_status(kiln_cache_clear(&removed), KILN_ERR_IO);
  assert_last_error_contains("cannot remove");
  assert_last_error_contains(stuck);
  assert_int_equal(removed, 1);
  assert_false(exists(7));
  assert_int_equal(rmdir(stuck), 0);
  assert_kiln_ok(kiln_cache_clear(NULL));
}

int main(void) {
  const char *child = getenv("KILN_TEST_CACHE_CHILD");
  if (child != NULL)
    return child_main(child);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_miss_then_hit, teardown),
      cmocka_unit_test_teardown(test_damaged_entries_are_rebuilt, teardown),
      cmocka_unit_test_teardown(test_fifo_entry, teardown),
      cmocka_unit_test_teardown(test_two_processes_one_key, teardown),
      cmocka_unit_test_teardown(test_store_on_release, teardown),
      cmocka_unit_test_teardown(test_eviction, teardown),
      cmocka_unit_test_teardown(test_unusable_directory, teardown),
      cmocka_unit_test_teardown(test_disabled, teardown),
      cmocka_unit_test_teardown(test_api_bad_input_and_clear, teardown),
  };
  return KILN_TEST_RUN("cache", tests, true);
}
