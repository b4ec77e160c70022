/* The persistent program cache: where it lives, lookups and stores around a
 * build, process counters, the diagnostic, and least-recently-used eviction.
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

#include "build.h"
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
  memcpy(note_text, text, sizeof text);
  pthread_mutex_unlock(&note_lock);
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

/* Persist this process's counters as the directory's "last run", for
 * `kiln cache stats`. Best effort: a failure only loses the statistic. */
static void save_stats(const char *dir) {
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

/* ---- build through the cache ------------------------------------------- */

/* Load payload as a program binary and build it with options. */
static bool load_binary(kiln_context *ctx, const unsigned char *payload,
                        size_t length, const char *options, cl_program *out,
                        char **log, char *why, size_t cap) {
  cl_int status = CL_SUCCESS, err = CL_SUCCESS;
  cl_program program = clCreateProgramWithBinary(
      ctx->cl, 1, &ctx->device->id, &length, &payload, &status, &err);
  if (err != CL_SUCCESS || status != CL_SUCCESS) {
    snprintf(why, cap, "clCreateProgramWithBinary refused it: %s",
             kiln_cl_error_name(err != CL_SUCCESS ? err : status));
    if (program != NULL)
      clReleaseProgram(program);
    return false;
  }
  err = clBuildProgram(program, 1, &ctx->device->id, options, NULL, NULL);
  if (err != CL_SUCCESS) {
    snprintf(why, cap, "clBuildProgram of the binary failed: %s",
             kiln_cl_error_name(err));
    clReleaseProgram(program);
    return false;
  }
  if (kiln__program_log(program, ctx->device, log) != KILN_OK) {
    clReleaseProgram(program);
    snprintf(why, cap, "out of memory");
    return false;
  }
  *out = program;
  return true;
}

/* Save program's binary as the entry at path; problems become the note. */
static void store(kiln_context *ctx, cl_program program,
                  const struct kiln__cache_config *config, const char *path,
                  const struct kiln__cache_key *key, const char *label) {
  size_t size = 0;
  cl_int err = clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size,
                                &size, NULL);
  if (err != CL_SUCCESS || size == 0) {
    kiln__cache_note("the driver gives no program binary for '%s' on '%s' "
                     "(%s): it cannot be cached",
                     label, ctx->device->info.name,
                     err != CL_SUCCESS ? kiln_cl_error_name(err) : "size 0");
    return;
  }
  unsigned char *binary = malloc(size);
  if (binary == NULL)
    return;
  err = clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof binary, &binary,
                         NULL);
  char why[600];
  if (err != CL_SUCCESS)
    kiln__cache_note("clGetProgramInfo(CL_PROGRAM_BINARIES) failed: %s",
                     kiln_cl_error_name(err));
  else if (!kiln__cache_entry_write(config->dir, path, key, label,
                                    ctx->device->info.name, binary, size, why,
                                    sizeof why))
    kiln__cache_note("cannot store a cache entry, working without the "
                     "cache: %s",
                     why);
  else
    atomic_fetch_add(&count_stores, 1);
  free(binary);
}

static char *join_options(const struct kiln__build_request *req) {
  const char *profile =
      req->ctx->backend != NULL && req->ctx->backend->build_options != NULL
          ? req->ctx->backend->build_options
          : "";
  const char *user = req->options != NULL ? req->options : "";
  const char *arg_info = req->arg_info ? "-cl-kernel-arg-info" : "";
  size_t n = strlen(profile) + strlen(user) + strlen(arg_info) + 3;
  char *options = malloc(n);
  if (options == NULL)
    return NULL;
  snprintf(options, n, "%s%s%s%s%s", profile,
           profile[0] != '\0' && user[0] != '\0' ? " " : "", user,
           (profile[0] != '\0' || user[0] != '\0') && arg_info[0] != '\0' ? " "
                                                                          : "",
           arg_info);
  return options;
}

/* Everything a deferred store needs, copied at build time: the environment
 * may change before the program is released. */
struct kiln__cache_pending {
  struct kiln__cache_config config;
  struct kiln__cache_key key;
  char path[KILN__CACHE_PATH_MAX];
  char label[64];
};

void kiln__cache_store_pending(kiln_context *ctx, cl_program program,
                               struct kiln__cache_pending *pending) {
  if (pending == NULL)
    return;
  if (program != NULL) {
    store(ctx, program, &pending->config, pending->path, &pending->key,
          pending->label);
    kiln__cache_evict(pending->config.dir, pending->config.max_bytes);
    save_stats(pending->config.dir);
  }
  free(pending);
}

kiln_status kiln__build_program(const struct kiln__build_request *req,
                                struct kiln__build_result *out) {
  memset(out, 0, sizeof *out);
  kiln_context *ctx = req->ctx;
  char *options = join_options(req);
  if (options == NULL)
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "cannot allocate the build options");
  struct kiln__cache_config config;
  struct kiln__cache_key key;
  char path[KILN__CACHE_PATH_MAX];
  char why[600];
  bool cached = false;
  if (req->use_cache) {
    kiln__cache_config(&config);
    if (config.problem[0] != '\0')
      kiln__cache_note("%s", config.problem);
    cached = config.enabled && config.have_dir;
  }
  if (cached && !kiln__cache_make_dir(config.dir, why, sizeof why)) {
    kiln__cache_note("working without the program cache: %s", why);
    cached = false;
  }
  if (cached && (!kiln__cache_key(ctx->device, req->source, req->source_length,
                                  options, &key) ||
                 snprintf(path, sizeof path, "%s/%s%s", config.dir, key.hex,
                          KILN__CACHE_SUFFIX) >= (int)sizeof path))
    cached = false;

  if (cached) {
    unsigned char *payload = NULL;
    size_t length = 0;
    enum kiln__entry_result r =
        kiln__cache_entry_read(path, &key, &payload, &length, why, sizeof why);
    if (r == KILN__ENTRY_OK) {
      char reason[sizeof why];
      if (load_binary(ctx, payload, length, options, &out->program, &out->log,
                      reason, sizeof reason)) {
        free(payload);
        free(options);
        /* The file's mtime is its last use, for least-recently-used
         * eviction; atime is unreliable (noatime, relatime). */
        utimensat(AT_FDCWD, path, NULL, 0);
        atomic_fetch_add(&count_hits, 1);
        save_stats(config.dir);
        out->from_cache = true;
        return KILN_OK;
      }
      memcpy(why, reason, sizeof why);
      r = KILN__ENTRY_CORRUPT;
    }
    free(payload);
    if (r == KILN__ENTRY_CORRUPT) {
      /* Removed before the rebuild rewrites it, so that a failing rebuild
       * does not leave the bad entry for the next process. */
      unlink(path);
      atomic_fetch_add(&count_rejected, 1);
      kiln__cache_note("removed cache entry %s (%s): %s; rebuilt from source",
                       key.hex, req->label, why);
    } else if (r == KILN__ENTRY_UNREADABLE) {
      kiln__cache_note("cache entry %s is unreadable (%s); built from source",
                       key.hex, why);
    }
    atomic_fetch_add(&count_misses, 1);
  }

  kiln_status st = kiln__compile_source(ctx, req->source, req->source_length,
                                        options, &out->program, &out->log);
  free(options);
  if (st == KILN_OK && cached &&
      (ctx->device->info.quirks & KILN_QUIRK_LAZY_PROGRAM_BINARY) != 0) {
    /* Querying the binary now would freeze it without the code the first
     * launches compile; the owner stores it on release instead. */
    out->pending = malloc(sizeof *out->pending);
    if (out->pending != NULL) {
      out->pending->config = config;
      out->pending->key = key;
      memcpy(out->pending->path, path, sizeof path);
      kiln__cache_copy(out->pending->label, sizeof out->pending->label,
                       req->label);
    }
  } else if (st == KILN_OK && cached) {
    store(ctx, out->program, &config, path, &key, req->label);
    kiln__cache_evict(config.dir, config.max_bytes);
  }
  if (cached)
    save_stats(config.dir);
  return st;
}
