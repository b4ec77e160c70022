/* libFuzzer target: what the public cache API reads from the cache
 * directory. The input becomes both the last-run statistics file (parsed by
 * kiln_cache_get_info) and an entry file (whose header kiln_cache_list_create
 * reads), in a directory given by KILN_CACHE_DIR. Neither may crash, and the
 * results must be well formed: strings terminated, counters as the file
 * says only when its header is there. */
#include "fuzz_common.h"
#include "program/cache_internal.h"

static char stats_path[512], entry_path[512];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  setenv("KILN_CACHE_DIR", fuzz_dir(), 1);
  unsetenv("KILN_CACHE");
  unsetenv("KILN_CACHE_MAX_MB");
  snprintf(stats_path, sizeof stats_path, "%s/%s", fuzz_dir(),
           KILN__CACHE_STATS_FILE);
  snprintf(entry_path, sizeof entry_path,
           "%s/0123456789abcdef0123456789abcdef%s", fuzz_dir(),
           KILN__CACHE_SUFFIX);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 16))
    return 0;
  fuzz_write_file(stats_path, data, size);
  fuzz_write_file(entry_path, data, size);

  kiln_cache_info info;
  FUZZ_ASSERT(kiln_cache_get_info(&info) == KILN_OK);
  FUZZ_ASSERT(memchr(info.directory, '\0', sizeof info.directory) != NULL);
  FUZZ_ASSERT(memchr(info.diagnostic, '\0', sizeof info.diagnostic) != NULL);
  FUZZ_ASSERT(info.enabled);
  /* Counters come only from a file with its header line. */
  if (!info.last_run_recorded)
    FUZZ_ASSERT(info.last_run_pid == 0 && info.last_run_time == 0 &&
                info.last_run_hits == 0 && info.last_run_misses == 0 &&
                info.last_run_stores == 0 && info.last_run_rejected == 0);
  else
    FUZZ_ASSERT(fuzz_contains(data, size, "kiln-cache-stats 1"));
  FUZZ_ASSERT(info.entries <= 1);

  kiln_cache_list *list = NULL;
  FUZZ_ASSERT(kiln_cache_list_create(&list) == KILN_OK);
  size_t count = kiln_cache_list_get_count(list);
  FUZZ_ASSERT(count <= 1);
  for (size_t i = 0; i < count; i++) {
    const kiln_cache_entry *e = kiln_cache_list_get(list, i);
    FUZZ_ASSERT(e != NULL);
    FUZZ_ASSERT(memchr(e->file, '\0', sizeof e->file) != NULL);
    FUZZ_ASSERT(memchr(e->label, '\0', sizeof e->label) != NULL);
    FUZZ_ASSERT(memchr(e->device, '\0', sizeof e->device) != NULL);
    FUZZ_ASSERT(e->size_bytes == size);
    /* Valid only with a sound header that matches the file's length. */
    if (e->valid)
      FUZZ_ASSERT(size >= KILN__CACHE_HEADER_SIZE);
  }
  FUZZ_ASSERT(kiln_cache_list_get(list, count) == NULL);
  kiln_cache_list_destroy(list);
  return 0;
}
