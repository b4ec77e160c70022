/* The public cache API (kiln_cache.h): information, listing and clearing.
 * Lookups and stores live in build.c and cache.c; warming, which builds the
 * op library's kernels, lives with the op library (ops/ops_warm.c). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache_internal.h"
#include "kiln/kiln_cache.h"

/* snprintf that may truncate (paths in messages): vsnprintf keeps GCC's
 * truncation warning for the calls where truncation would be a bug. */
static void message(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void message(char *buf, size_t cap, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(buf, cap, fmt, args);
  va_end(args);
}

/* Parse the last-run statistics file; false when absent, unreadable or
 * without its header line, and then info's last_run fields stay zero: a
 * stray or damaged file is not reported as counters. */
static bool read_stats(const char *dir, kiln_cache_info *info) {
  char path[KILN__CACHE_PATH_MAX];
  if (!kiln__cache_join(path, sizeof path, dir, KILN__CACHE_STATS_FILE))
    return false;
  char why[128];
  FILE *f = kiln__fopen_regular(path, why, sizeof why);
  if (f == NULL)
    return false;
  char line[128];
  bool header = false;
  kiln_cache_info got;
  memset(&got, 0, sizeof got);
  while (fgets(line, sizeof line, f) != NULL) {
    char name[32];
    long long value = 0;
    if (strncmp(line, "kiln-cache-stats 1", 18) == 0) {
      header = true;
      continue;
    }
    if (sscanf(line, "%31s %lld", name, &value) != 2 || value < 0)
      continue;
    if (strcmp(name, "pid") == 0)
      got.last_run_pid = value;
    else if (strcmp(name, "time") == 0)
      got.last_run_time = value;
    else if (strcmp(name, "hits") == 0)
      got.last_run_hits = (uint64_t)value;
    else if (strcmp(name, "misses") == 0)
      got.last_run_misses = (uint64_t)value;
    else if (strcmp(name, "stores") == 0)
      got.last_run_stores = (uint64_t)value;
    else if (strcmp(name, "rejected") == 0)
      got.last_run_rejected = (uint64_t)value;
  }
  fclose(f);
  if (!header)
    return false;
  info->last_run_pid = got.last_run_pid;
  info->last_run_time = got.last_run_time;
  info->last_run_hits = got.last_run_hits;
  info->last_run_misses = got.last_run_misses;
  info->last_run_stores = got.last_run_stores;
  info->last_run_rejected = got.last_run_rejected;
  return true;
}

/* The length of the longest prefix of dir, ending at a '/' or at its end,
 * that names something that exists. */
static size_t existing_prefix(const char *dir) {
  char path[KILN__CACHE_PATH_MAX];
  snprintf(path, sizeof path, "%s", dir);
  struct stat st;
  while (stat(path, &st) != 0) {
    char *slash = strrchr(path, '/');
    if (slash == NULL || slash == path)
      return slash == path ? 1 : 0;
    *slash = '\0';
  }
  return strlen(path);
}

/* Remove the directories of dir longer than its first keep bytes, deepest
 * first (those kiln__cache_make_dir created); stops at one that is not
 * empty, as another process may have stored an entry meanwhile. */
static void remove_below(const char *dir, size_t keep) {
  char path[KILN__CACHE_PATH_MAX];
  snprintf(path, sizeof path, "%s", dir);
  while (strlen(path) > keep && rmdir(path) == 0) {
    char *slash = strrchr(path, '/');
    if (slash == NULL || slash == path)
      return;
    *slash = '\0';
  }
}

kiln_status kiln_cache_get_info(kiln_cache_info *info) {
  if (info == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "kiln_cache_get_info: info is NULL");
  memset(info, 0, sizeof *info);
  struct kiln__cache_config config;
  kiln__cache_config(&config);
  info->enabled = config.enabled;
  info->max_bytes = config.max_bytes;
  kiln__cache_copy(info->directory, sizeof info->directory, config.dir);
  struct kiln__cache_counters c;
  kiln__cache_counters(&c);
  info->hits = c.hits;
  info->misses = c.misses;
  info->stores = c.stores;
  info->rejected = c.rejected;
  info->evicted = c.evicted;

  kiln__cache_diagnostic(info->last_problem, sizeof info->last_problem);
  char why[KILN_CACHE_TEXT_CAPACITY] = "";
  struct stat st;
  if (!config.enabled)
    message(info->diagnostic, sizeof info->diagnostic,
            "the cache is disabled (KILN_CACHE=%s)",
            getenv("KILN_CACHE") != NULL ? getenv("KILN_CACHE") : "");
  else if (!config.have_dir)
    kiln__cache_copy(info->diagnostic, sizeof info->diagnostic, config.problem);
  else {
    /* Whether the first build could create the directory: created here and
     * then removed again, so that looking (kiln cache ls, stats) leaves no
     * directory behind. */
    const size_t existing = existing_prefix(config.dir);
    if (!kiln__cache_make_dir(config.dir, why, sizeof why))
      kiln__cache_copy(info->diagnostic, sizeof info->diagnostic, why);
    else if (access(config.dir, W_OK | X_OK) != 0)
      message(info->diagnostic, sizeof info->diagnostic,
              "'%s' is not writable: %s", config.dir, strerror(errno));
    else
      info->usable = true;
    remove_below(config.dir, existing);
  }
  if (info->usable && config.problem[0] != '\0')
    kiln__cache_copy(info->diagnostic, sizeof info->diagnostic, config.problem);

  if (config.have_dir) {
    info->last_run_recorded = read_stats(config.dir, info);
    DIR *d = opendir(config.dir);
    if (d != NULL) {
      struct dirent *ent;
      while ((ent = readdir(d)) != NULL) {
        if (!kiln__cache_is_entry_name(ent->d_name) ||
            fstatat(dirfd(d), ent->d_name, &st, 0) != 0)
          continue;
        info->entries++;
        info->bytes += (uint64_t)st.st_size;
      }
      closedir(d);
    }
  }
  return KILN_OK;
}

/* ---- listing ------------------------------------------------------------- */

struct kiln_cache_list {
  kiln_cache_entry *items;
  size_t count;
};

static int by_recent_use(const void *a, const void *b) {
  const kiln_cache_entry *x = a, *y = b;
  if (x->last_used != y->last_used)
    return x->last_used > y->last_used ? -1 : 1;
  return strcmp(x->file, y->file);
}

kiln_status kiln_cache_list_create(kiln_cache_list **out) {
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln_cache_list_create: out is NULL");
  *out = NULL;
  kiln_cache_list *list = calloc(1, sizeof *list);
  if (list == NULL)
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "kiln_cache_list_create: cannot allocate the list");
  struct kiln__cache_config config;
  kiln__cache_config(&config);
  DIR *d = config.have_dir && config.enabled ? opendir(config.dir) : NULL;
  if (d == NULL) {
    if (config.have_dir && config.enabled && errno != ENOENT &&
        errno != ENOTDIR) {
      int saved = errno;
      free(list);
      return kiln__fail(KILN_ERR_IO, "kiln_cache_list_create: cannot read "
                        "'%s': %s", config.dir, strerror(saved));
    }
    *out = list;
    return KILN_OK;
  }
  size_t cap = 0;
  struct dirent *ent;
  kiln_status st = KILN_OK;
  while ((ent = readdir(d)) != NULL) {
    struct stat sb;
    if (!kiln__cache_is_entry_name(ent->d_name) ||
        fstatat(dirfd(d), ent->d_name, &sb, 0) != 0 || !S_ISREG(sb.st_mode))
      continue;
    if (list->count == cap) {
      size_t ncap = cap == 0 ? 32 : cap * 2;
      kiln_cache_entry *grown = realloc(list->items, ncap * sizeof *grown);
      if (grown == NULL) {
        st = kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                        "kiln_cache_list_create: cannot grow the list");
        break;
      }
      list->items = grown;
      cap = ncap;
    }
    kiln_cache_entry *e = &list->items[list->count++];
    memset(e, 0, sizeof *e);
    kiln__cache_copy(e->file, sizeof e->file, ent->d_name);
    e->size_bytes = (uint64_t)sb.st_size;
    e->last_used = (int64_t)sb.st_mtime;
    char path[KILN__CACHE_PATH_MAX];
    struct kiln__cache_meta meta;
    if (kiln__cache_join(path, sizeof path, config.dir, ent->d_name) &&
        kiln__cache_entry_peek(path, &meta)) {
      kiln__cache_copy(e->label, sizeof e->label, meta.label);
      kiln__cache_copy(e->device, sizeof e->device, meta.device);
      e->created = meta.created;
      e->valid = meta.complete;
    }
  }
  closedir(d);
  if (st != KILN_OK) {
    kiln_cache_list_destroy(list);
    return st;
  }
  if (list->count > 1)
    qsort(list->items, list->count, sizeof *list->items, by_recent_use);
  *out = list;
  return KILN_OK;
}

void kiln_cache_list_destroy(kiln_cache_list *list) {
  if (list == NULL)
    return;
  free(list->items);
  free(list);
}

size_t kiln_cache_list_get_count(const kiln_cache_list *list) {
  return list != NULL ? list->count : 0;
}

const kiln_cache_entry *kiln_cache_list_get(const kiln_cache_list *list,
                                            size_t index) {
  if (list == NULL || index >= list->count)
    return NULL;
  return &list->items[index];
}

/* ---- clearing ------------------------------------------------------------ */

kiln_status kiln_cache_clear(size_t *removed) {
  if (removed != NULL)
    *removed = 0;
  struct kiln__cache_config config;
  kiln__cache_config(&config);
  if (!config.have_dir)
    return KILN_OK;
  DIR *d = opendir(config.dir);
  if (d == NULL) {
    if (errno == ENOENT || errno == ENOTDIR)
      return KILN_OK;
    return kiln__fail(KILN_ERR_IO, "kiln_cache_clear: cannot read '%s': %s",
                      config.dir, strerror(errno));
  }
  kiln_status st = KILN_OK;
  size_t count = 0;
  struct dirent *ent;
  while ((ent = readdir(d)) != NULL) {
    bool entry = kiln__cache_is_entry_name(ent->d_name);
    bool ours =
        entry || strcmp(ent->d_name, KILN__CACHE_STATS_FILE) == 0 ||
        strncmp(ent->d_name, KILN__CACHE_TMP_PREFIX,
                strlen(KILN__CACHE_TMP_PREFIX)) == 0;
    if (!ours)
      continue;
    if (unlinkat(dirfd(d), ent->d_name, 0) != 0) {
      if (errno != ENOENT && st == KILN_OK)
        st = kiln__fail(KILN_ERR_IO,
                        "kiln_cache_clear: cannot remove '%s/%s': %s",
                        config.dir, ent->d_name, strerror(errno));
      continue;
    }
    if (entry)
      count++;
  }
  closedir(d);
  if (removed != NULL)
    *removed = count;
  return st;
}
