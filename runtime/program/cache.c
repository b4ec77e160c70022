/* The persistent program cache as a store: where it lives, process
 * counters, the diagnostic, and least-recently-used eviction (build.c reads
 * and writes its entries around a build, through cache_entry.c).
 *
 * The cache is an optimisation and never a reason to fail: every problem
 * (an uncreatable directory, a corrupt entry, a full disk) is recorded as the
 * diagnostic and the program is built from source. Several processes may
 * share the directory: entries are written to a temporary file and renamed
 * into place, readers verify everything before use, and only eviction takes
 * a lock (flock on .lock) so that two evictors do not fight. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache_internal.h"

/* ---- configuration ------------------------------------------------------ */

static bool env_false(const char *value) {
  return value != NULL &&
         (strcmp(value, "0") == 0 || strcasecmp(value, "off") == 0 ||
          strcasecmp(value, "no") == 0 || strcasecmp(value, "false") == 0);
}

void kiln__cache_config(struct kiln__cache_config *out) {
  memset(out, 0, sizeof *out);
  out->enabled = !env_false(getenv("KILN_CACHE"));
  out->max_bytes = (uint64_t)KILN__CACHE_DEFAULT_MAX_MB << 20;
  const char *max = getenv("KILN_CACHE_MAX_MB");
  if (max != NULL && max[0] != '\0') {
    char *end = NULL;
    errno = 0;
    unsigned long long mb = strtoull(max, &end, 10);
    if (errno != 0 || end == max || *end != '\0' || max[0] == '-' ||
        mb > (UINT64_MAX >> 20))
      snprintf(out->problem, sizeof out->problem,
               "KILN_CACHE_MAX_MB='%s' is not a number of MiB; using %u",
               max, KILN__CACHE_DEFAULT_MAX_MB);
    else
      out->max_bytes = (uint64_t)mb << 20;
  }
  const char *dir = getenv("KILN_CACHE_DIR");
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  int n = -1;
  if (dir != NULL && dir[0] != '\0')
    n = snprintf(out->dir, sizeof out->dir, "%s", dir);
  else if (xdg != NULL && xdg[0] == '/') /* the XDG spec ignores relative */
    n = snprintf(out->dir, sizeof out->dir, "%s/kiln", xdg);
  else if (home != NULL && home[0] != '\0')
    n = snprintf(out->dir, sizeof out->dir, "%s/.cache/kiln", home);
  else
    snprintf(out->problem, sizeof out->problem,
             "no cache directory: KILN_CACHE_DIR, XDG_CACHE_HOME and HOME "
             "are all unset");
  if (n >= (int)sizeof out->dir) {
    snprintf(out->problem, sizeof out->problem,
             "the cache directory path is longer than %d bytes",
             KILN__CACHE_PATH_MAX - 1);
    out->dir[0] = '\0';
    n = -1;
  }
  out->have_dir = n > 0;
  /* Trailing slashes would double up in entry paths. */
  size_t len = strlen(out->dir);
  while (len > 1 && out->dir[len - 1] == '/')
    out->dir[--len] = '\0';
}

bool kiln__cache_make_dir(const char *dir, char *why, size_t cap) {
  char path[KILN__CACHE_PATH_MAX];
  snprintf(path, sizeof path, "%s", dir);
  struct stat st;
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return true;
    snprintf(why, cap, "cannot create the cache directory '%s': it exists "
             "and is not a directory", dir);
    return false;
  }
  /* mkdir -p: each missing component in turn. */
  for (char *p = path + 1;; p++) {
    if (*p != '/' && *p != '\0')
      continue;
    char saved = *p;
    *p = '\0';
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
      int err = errno;
      if (err == ENOTDIR)
        snprintf(why, cap, "cannot create the cache directory '%s': a "
                 "parent of '%s' is not a directory", dir, path);
      else
        snprintf(why, cap, "cannot create the cache directory '%s': "
                 "mkdir '%s': %s", dir, path, strerror(err));
      return false;
    }
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
      snprintf(why, cap, "cannot create the cache directory '%s': '%s' is "
               "not a directory", dir, path);
      return false;
    }
    *p = saved;
    if (saved == '\0')
      break;
  }
  return true;
}

/* ---- diagnostic and counters ------------------------------------------- */

/* Process-wide by nature: the cache directory is shared by every context of
 * the process, and its problems concern them all. */
static pthread_mutex_t note_lock = PTHREAD_MUTEX_INITIALIZER;
static char note_text[1024];
static _Atomic uint64_t count_hits, count_misses, count_stores, count_rejected,
    count_evicted;

void kiln__cache_note(const char *fmt, ...) {
  char text[sizeof note_text];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  pthread_mutex_lock(&note_lock);
  /* KILN_LOG=warn says it once, not at every build. */
  const bool again = strcmp(note_text, text) == 0;
  memcpy(note_text, text, sizeof text);
  pthread_mutex_unlock(&note_lock);
  if (!again)
    kiln__log(KILN__LOG_WARN, "program cache: %s", text);
}

void kiln__cache_diagnostic(char *buf, size_t cap) {
  pthread_mutex_lock(&note_lock);
  snprintf(buf, cap, "%s", note_text);
  pthread_mutex_unlock(&note_lock);
}

void kiln__cache_counters(struct kiln__cache_counters *out) {
  out->hits = atomic_load(&count_hits);
  out->misses = atomic_load(&count_misses);
  out->stores = atomic_load(&count_stores);
  out->rejected = atomic_load(&count_rejected);
  out->evicted = atomic_load(&count_evicted);
}

void kiln__cache_count(enum kiln__cache_event event) {
  switch (event) {
  case KILN__CACHE_HIT:
    atomic_fetch_add(&count_hits, 1);
    break;
  case KILN__CACHE_MISS:
    atomic_fetch_add(&count_misses, 1);
    break;
  case KILN__CACHE_STORE:
    atomic_fetch_add(&count_stores, 1);
    break;
  case KILN__CACHE_REJECTED:
    atomic_fetch_add(&count_rejected, 1);
    break;
  }
}

void kiln__cache_save_stats(const char *dir) {
  char tmp[KILN__CACHE_PATH_MAX], path[KILN__CACHE_PATH_MAX];
  int n = snprintf(tmp, sizeof tmp, "%s/%sstats.XXXXXX", dir,
                   KILN__CACHE_TMP_PREFIX);
  int m = snprintf(path, sizeof path, "%s/%s", dir, KILN__CACHE_STATS_FILE);
  if (n < 0 || (size_t)n >= sizeof tmp || m < 0 || (size_t)m >= sizeof path)
    return;
  int fd = mkstemp(tmp);
  if (fd < 0)
    return;
  struct kiln__cache_counters c;
  kiln__cache_counters(&c);
  char text[256];
  int len = snprintf(text, sizeof text,
                     "kiln-cache-stats 1\npid %ld\ntime %lld\nhits %llu\n"
                     "misses %llu\nstores %llu\nrejected %llu\nevicted %llu\n",
                     (long)getpid(), (long long)time(NULL),
                     (unsigned long long)c.hits, (unsigned long long)c.misses,
                     (unsigned long long)c.stores,
                     (unsigned long long)c.rejected,
                     (unsigned long long)c.evicted);
  bool ok = len > 0 && write(fd, text, (size_t)len) == (ssize_t)len;
  if (close(fd) != 0)
    ok = false;
  chmod(tmp, 0644);
  if (!ok || rename(tmp, path) != 0)
    unlink(tmp);
}

/* ---- eviction ----------------------------------------------------------- */

bool kiln__cache_join(char *buf, size_t cap, const char *dir,
                      const char *name) {
  int n = snprintf(buf, cap, "%s/%s", dir, name);
  if (n < 0 || (size_t)n >= cap) {
    if (cap > 0)
      buf[0] = '\0';
    return false;
  }
  return true;
}

void kiln__cache_copy(char *buf, size_t cap, const char *text) {
  if (cap == 0)
    return;
  size_t n = strlen(text);
  if (n >= cap)
    n = cap - 1;
  memcpy(buf, text, n);
  buf[n] = '\0';
}

bool kiln__cache_is_entry_name(const char *name) {
  size_t n = strlen(name);
  if (n != 32 + strlen(KILN__CACHE_SUFFIX) ||
      strcmp(name + 32, KILN__CACHE_SUFFIX) != 0)
    return false;
  for (size_t i = 0; i < 32; i++)
    if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
      return false;
  return true;
}

struct aged_file {
  struct timespec used;
  uint64_t size;
  char name[40];
};

static int by_age(const void *a, const void *b) {
  const struct aged_file *x = a, *y = b;
  if (x->used.tv_sec != y->used.tv_sec)
    return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
  if (x->used.tv_nsec != y->used.tv_nsec)
    return x->used.tv_nsec < y->used.tv_nsec ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Entries of dir with their last use (mtime, touched on every hit) and
 * size; removes temporary files older than an hour (a crashed writer's). */
static struct aged_file *scan(const char *dir, size_t *count, uint64_t *total) {
  *count = 0;
  *total = 0;
  DIR *d = opendir(dir);
  if (d == NULL)
    return NULL;
  struct aged_file *files = NULL;
  size_t cap = 0;
  time_t now = time(NULL);
  struct dirent *ent;
  while ((ent = readdir(d)) != NULL) {
    struct stat st;
    bool entry = kiln__cache_is_entry_name(ent->d_name);
    bool temp = strncmp(ent->d_name, KILN__CACHE_TMP_PREFIX,
                        strlen(KILN__CACHE_TMP_PREFIX)) == 0;
    if ((!entry && !temp) || fstatat(dirfd(d), ent->d_name, &st, 0) != 0 ||
        !S_ISREG(st.st_mode))
      continue;
    if (temp) {
      if (now - st.st_mtime > 3600)
        unlinkat(dirfd(d), ent->d_name, 0);
      continue;
    }
    if (*count == cap) {
      size_t ncap = cap == 0 ? 64 : cap * 2;
      struct aged_file *grown = realloc(files, ncap * sizeof *grown);
      if (grown == NULL)
        break;
      files = grown;
      cap = ncap;
    }
    struct aged_file *f = &files[(*count)++];
    f->used = st.st_mtim;
    f->size = (uint64_t)st.st_size;
    /* Entry names are exactly 37 bytes (checked above). */
    memcpy(f->name, ent->d_name, strlen(ent->d_name) + 1);
    *total += f->size;
  }
  closedir(d);
  return files;
}

size_t kiln__cache_evict(const char *dir, uint64_t max_bytes) {
  size_t count = 0;
  uint64_t total = 0;
  struct aged_file *files = scan(dir, &count, &total);
  if (total <= max_bytes) {
    free(files);
    return 0;
  }
  free(files);
  char lock_path[KILN__CACHE_PATH_MAX];
  if (!kiln__cache_join(lock_path, sizeof lock_path, dir, KILN__CACHE_LOCK_FILE))
    return 0;
  int lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0 || flock(lock, LOCK_EX) != 0) {
    kiln__cache_note("cannot lock '%s' for eviction: %s", lock_path,
                     strerror(errno));
    if (lock >= 0)
      close(lock);
    return 0;
  }
  /* Scan again under the lock: another process may have evicted already. */
  files = scan(dir, &count, &total);
  size_t removed = 0;
  if (files != NULL) {
    qsort(files, count, sizeof *files, by_age);
    for (size_t i = 0; i < count && total > max_bytes; i++) {
      char path[KILN__CACHE_PATH_MAX];
      if (kiln__cache_join(path, sizeof path, dir, files[i].name) &&
          (unlink(path) == 0 || errno == ENOENT)) {
        total -= files[i].size;
        removed++;
      }
    }
  }
  free(files);
  flock(lock, LOCK_UN);
  close(lock);
  atomic_fetch_add(&count_evicted, removed);
  return removed;
}
