/* Tuning files: the parameters `kiln tune` found for one device, kept in
 * the cache directory so that every program on the machine uses them.
 *
 * A file is text, one "key value" line each, in this order:
 *     kiln-tuning 1
 *     device <the device's stable id>
 *     driver <its driver version>
 *     kiln <kiln's version>
 *     op <name> <parameters, "NAME=VALUE ..." as the op's space spells them>
 *     figures <name> <free text: what was measured, one line>
 *     checksum <XXH3-64 of every byte above this line, 16 hex digits>
 * with any number of op and figures lines. Its name is the XXH3-64 of the
 * stable id (tuning/<16 hex>.txt under the cache directory), so a file is
 * found without reading others; the lines inside say whose it is, and a
 * file whose device, driver or kiln version differ from the device's is
 * ignored (foreign or stale), as is one whose checksum does not match
 * (damaged, or cut short when a disk filled up) or that cannot be parsed.
 * Files are written to a temporary name and renamed over the old one, so a
 * reader never sees half a file and two writers leave one whole file.
 *
 * KILN_TUNING=off ignores every file; KILN_TUNING=PATH reads that file
 * instead (its device line must still match).
 *
 * Each device's file is read once per process, at the first use on the
 * device (an op's first variant, a tuning query such as kiln info's), and
 * kept: a later change to the file is seen by the next process, or after
 * kiln_tuning_save and kiln_tuning_reset, which reread it (or after
 * kiln_tuning_set, which records parameters ahead of it). Each of these
 * makes every context resolve its variants again (variant.c). The rows of
 * kiln's tuning database that match the device (tuning_db.c) are read
 * with it and come after the file. The spaces validate the parameters
 * themselves and report a rejection back (kiln__tuning_reject), so that
 * this module knows nothing of any op. The tables grow with the devices
 * and ops met: nothing is dropped.
 */
#include "tune.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define MAX_FILE (64 << 10)

/* One line per op, as many as there are ops (grown on demand). */
struct lines {
  size_t count, capacity;
  struct kiln__tuning_line *line;
};

struct device_entry {
  struct device_entry *next;
  char *stable_id;
  char path[KILN_TUNING_PATH_CAPACITY];
  char ignored[KILN_TUNING_TEXT_CAPACITY]; /* why the file is not used */
  struct lines file; /* the file's ops */
  /* The database's rows for the device, and why one was skipped. */
  struct lines rows;
  char row_ignored[KILN_TUNING_TEXT_CAPACITY];
  struct lines set; /* kiln_tuning_set's parameters */
};

/* Every device met in this process. The lock is the slow path's only: ops
 * read their variants (variant.c), resolved from here once. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct device_entry *devices;

/* Bumped at every change of what applies, after the change (tune.h,
 * variant.c). Sequentially consistent: a plain load on x86, and a
 * resolution that sees a bump sees the change before it. */
static _Atomic unsigned long generation = 1;

void kiln__variants_stale(void) { atomic_fetch_add(&generation, 1); }

unsigned long kiln__tuning_generation(void) {
  return atomic_load(&generation);
}

/* op's line in l, or NULL. */
static struct kiln__tuning_line *find(const struct lines *l, const char *op,
                                      size_t n) {
  for (size_t i = 0; i < l->count; i++)
    if (strlen(l->line[i].name) == n && strncmp(l->line[i].name, op, n) == 0)
      return &l->line[i];
  return NULL;
}

/* op's line in l (its first n characters), added empty when missing; NULL
 * when memory ran out (n is below the name's capacity). */
static struct kiln__tuning_line *find_or_add(struct lines *l, const char *op,
                                             size_t n) {
  struct kiln__tuning_line *line = find(l, op, n);
  if (line != NULL)
    return line;
  if (l->count == l->capacity) {
    const size_t cap = l->capacity ? 2 * l->capacity : 4;
    struct kiln__tuning_line *grown = realloc(l->line, cap * sizeof *grown);
    if (grown == NULL)
      return NULL;
    l->line = grown;
    l->capacity = cap;
  }
  line = &l->line[l->count++];
  memset(line, 0, sizeof *line);
  memcpy(line->name, op, n);
  return line;
}

static void drop(struct lines *l, struct kiln__tuning_line *line) {
  *line = l->line[--l->count];
}

static void lines_free(struct lines *l) {
  free(l->line);
  *l = (struct lines){0};
}

/* Record why e's file is ignored: its path, then the message. */
static void ignore(struct device_entry *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void ignore(struct device_entry *e, const char *fmt, ...) {
  int n = snprintf(e->ignored, sizeof e->ignored, "%.600s: ", e->path);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->ignored + n, sizeof e->ignored - (size_t)n, fmt, ap);
  va_end(ap);
}

/* ---- paths ---------------------------------------------------------------- */

static void default_path(const kiln_device_info *info, char *out,
                         size_t size) {
  kiln_cache_info *ci = malloc(sizeof *ci);
  out[0] = '\0';
  if (ci == NULL || kiln_cache_get_info(ci) != KILN_OK ||
      ci->directory[0] == '\0') {
    free(ci);
    return;
  }
  const char *id = info->stable_id ? info->stable_id : "";
  int n = snprintf(out, size, "%.4000s/tuning/%016llx.txt", ci->directory,
                   (unsigned long long)XXH3_64bits(id, strlen(id)));
  if (n < 0 || (size_t)n >= size)
    out[0] = '\0'; /* a path too long to use */
  free(ci);
}

/* The file kiln reads for the device, or "" with *why when none. */
static void file_for(const kiln_device_info *info, char *out, size_t size,
                     char *why, size_t why_size) {
  const char *env = getenv("KILN_TUNING");
  why[0] = '\0';
  if (env != NULL && strcmp(env, "off") == 0) {
    out[0] = '\0';
    snprintf(why, why_size, "KILN_TUNING=off: tuning files are ignored");
  } else if (env != NULL && env[0] != '\0') {
    snprintf(out, size, "%s", env);
  } else {
    default_path(info, out, size);
    if (out[0] == '\0')
      snprintf(why, why_size, "no cache directory to keep tuning files in");
  }
}

/* ---- reading ------------------------------------------------------------- */

static const char *str_or_empty(const char *s) { return s ? s : ""; }

/* Parse text (len bytes, NUL-terminated) into e, checking it against the
 * device. false with e->ignored set when the file is not to be trusted. */
static bool parse(struct device_entry *e, const kiln_device_info *info,
                  char *text, size_t len) {
  const char *sum_line = NULL;
  for (const char *p = text; p < text + len;) {
    if (strncmp(p, "checksum ", 9) == 0) {
      sum_line = p;
      break;
    }
    const char *nl = memchr(p, '\n', (size_t)(text + len - p));
    if (nl == NULL)
      break;
    p = nl + 1;
  }
  if (sum_line == NULL) {
    ignore(e, "no checksum line (not a tuning file, or cut short)");
    return false;
  }
  unsigned long long want = 0;
  if (sscanf(sum_line, "checksum %16llx", &want) != 1 ||
      XXH3_64bits(text, (size_t)(sum_line - text)) != want) {
    ignore(e, "checksum mismatch (damaged or cut short)");
    return false;
  }
  text[sum_line - text] = '\0';
  int line_no = 0;
  bool seen_device = false, seen_driver = false, seen_kiln = false;
  for (char *save = NULL, *line = strtok_r(text, "\n", &save); line != NULL;
       line = strtok_r(NULL, "\n", &save)) {
    line_no++;
    char *sp = strchr(line, ' ');
    const char *value = sp ? sp + 1 : "";
    size_t key_len = sp ? (size_t)(sp - line) : strlen(line);
#define KEY(k) (key_len == strlen(k) && strncmp(line, k, key_len) == 0)
    if (line_no == 1) {
      if (strcmp(line, "kiln-tuning 1") != 0) {
        ignore(e, "not a version 1 tuning file");
        return false;
      }
    } else if (KEY("device")) {
      seen_device = true;
      if (strcmp(value, str_or_empty(info->stable_id)) != 0) {
        ignore(e, "written for another device (%.200s)", value);
        return false;
      }
    } else if (KEY("driver")) {
      seen_driver = true;
      if (strcmp(value, str_or_empty(info->driver_version)) != 0) {
        ignore(e, "stale, tuned with driver %.100s, now %.100s",
                 value, str_or_empty(info->driver_version));
        return false;
      }
    } else if (KEY("kiln")) {
      seen_kiln = true;
      if (strcmp(value, KILN_VERSION_STRING) != 0) {
        ignore(e, "stale, tuned with kiln %.100s, now %s", value,
                 KILN_VERSION_STRING);
        return false;
      }
    } else if (KEY("op") || KEY("figures")) {
      const char *sp2 = strchr(value, ' ');
      size_t n = sp2 ? (size_t)(sp2 - value) : strlen(value);
      if (n == 0 || n >= sizeof e->file.line[0].name) {
        ignore(e, "line %d names no op", line_no);
        return false;
      }
      struct kiln__tuning_line *op = find_or_add(&e->file, value, n);
      if (op == NULL) {
        ignore(e, "out of host memory at line %d", line_no);
        return false;
      }
      const char *rest = sp2 ? sp2 + 1 : "";
      if (KEY("op") && rest[strspn(rest, " ")] == '\0') {
        ignore(e, "line %d: op %.*s has no parameters", line_no, (int)n,
               value);
        return false;
      }
      snprintf(KEY("op") ? op->params : op->figures, sizeof op->params, "%s",
               rest);
    } else {
      ignore(e, "line %d is not understood", line_no);
      return false;
    }
#undef KEY
  }
  if (!seen_device || !seen_driver || !seen_kiln) {
    ignore(e, "the device, driver or kiln line is missing");
    return false;
  }
  return true;
}

/* (Re)read the device's file and database rows into e. */
static void load(struct device_entry *e, const kiln_device_info *info) {
  lines_free(&e->file);
  lines_free(&e->rows);
  e->ignored[0] = '\0';
  e->rows.count = kiln__tuning_db_match(str_or_empty(info->name),
                                        &e->rows.line, e->row_ignored,
                                        sizeof e->row_ignored);
  e->rows.capacity = e->rows.count;
  file_for(info, e->path, sizeof e->path, e->ignored, sizeof e->ignored);
  if (e->path[0] == '\0')
    return;
  /* Never blocks (a FIFO at the path hung every context creation). */
  char why[128];
  FILE *f = kiln__fopen_regular(e->path, why, sizeof why);
  if (f == NULL) {
    if (errno != ENOENT)
      ignore(e, "cannot be read: %s", why);
    return; /* no file: not tuned, nothing to say */
  }
  char *text = malloc(MAX_FILE + 1);
  size_t len = text ? fread(text, 1, MAX_FILE + 1, f) : 0;
  fclose(f);
  if (text == NULL) {
    snprintf(e->ignored, sizeof e->ignored, "out of host memory");
    return;
  }
  if (len > MAX_FILE) {
    ignore(e, "larger than %d bytes", MAX_FILE);
  } else {
    text[len] = '\0';
    if (memchr(text, '\0', len) != NULL)
      ignore(e, "binary data");
    else if (!parse(e, info, text, len))
      lines_free(&e->file);
  }
  free(text);
}

/* KILN_LOG=info: why the device's file or a database row is not used. */
static void log_ignored(const struct device_entry *e) {
  if (e->ignored[0] != '\0')
    kiln__log(KILN__LOG_INFO, "tuning file ignored: %s", e->ignored);
  if (e->row_ignored[0] != '\0')
    kiln__log(KILN__LOG_INFO, "tuning database row ignored: %s",
              e->row_ignored);
}

/* The device's entry, created and loaded on first use; NULL when memory
 * is short (then no file is used). Under lock. */
static struct device_entry *entry_locked(const kiln_device_info *info) {
  const char *id = str_or_empty(info->stable_id);
  for (struct device_entry *e = devices; e != NULL; e = e->next)
    if (strcmp(e->stable_id, id) == 0)
      return e;
  struct device_entry *e = calloc(1, sizeof *e);
  if (e == NULL || (e->stable_id = strdup(id)) == NULL) {
    free(e);
    return NULL;
  }
  load(e, info);
  log_ignored(e);
  e->next = devices;
  devices = e;
  return e;
}

static void entry_free(struct device_entry *e) {
  lines_free(&e->file);
  lines_free(&e->rows);
  lines_free(&e->set);
  free(e->stable_id);
  free(e);
}

bool kiln__tuning_lookup(const kiln_context *ctx, const char *op,
                         char *params, size_t size, const char **source) {
  const char *from = NULL;
  const size_t n = strlen(op);
  pthread_mutex_lock(&lock);
  struct device_entry *e = entry_locked(&ctx->device->info);
  const struct kiln__tuning_line *line = NULL;
  if (e != NULL && (line = find(&e->set, op, n)) != NULL)
    from = "set";
  else if (e != NULL && (line = find(&e->file, op, n)) != NULL &&
           line->params[0] != '\0')
    from = "file";
  else if (e != NULL && (line = find(&e->rows, op, n)) != NULL)
    from = "database";
  if (from != NULL) {
    snprintf(params, size, "%s", line->params);
    *source = from;
  }
  pthread_mutex_unlock(&lock);
  return from != NULL;
}

void kiln__tuning_reject(const kiln_context *ctx, const char *op,
                         const char *reason) {
  const size_t n = strlen(op);
  pthread_mutex_lock(&lock);
  struct device_entry *e = entry_locked(&ctx->device->info);
  struct kiln__tuning_line *line = NULL;
  /* The file's line is used before the row: it is the one rejected. */
  if (e != NULL && (line = find(&e->file, op, n)) != NULL) {
    snprintf(e->ignored, sizeof e->ignored, "%.500s: %.30s parameters rejected: %.400s",
             e->path, op, reason);
    drop(&e->file, line);
  } else if (e != NULL && (line = find(&e->rows, op, n)) != NULL) {
    snprintf(e->row_ignored, sizeof e->row_ignored,
             "kiln's tuning database, row %.200s: %.30s parameters rejected: "
             "%.400s",
             line->origin, op, reason);
    drop(&e->rows, line);
  }
  if (e != NULL)
    log_ignored(e);
  pthread_mutex_unlock(&lock);
  kiln__variants_stale();
}

kiln_status kiln__tuning_set(const kiln_context *ctx, const char *op,
                             const char *params) {
  kiln_status s = KILN_OK;
  const size_t n = strlen(op);
  pthread_mutex_lock(&lock);
  struct device_entry *e = entry_locked(&ctx->device->info);
  struct kiln__tuning_line *line = NULL;
  if (e == NULL) {
    s = kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                   "kiln_tuning_set: no room to record the parameters");
  } else if (params == NULL) {
    if ((line = find(&e->set, op, n)) != NULL)
      drop(&e->set, line);
  } else if (n >= sizeof line->name ||
             (line = find_or_add(&e->set, op, n)) == NULL) {
    s = kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                   "kiln_tuning_set: no room to record the parameters of %s",
                   op);
  } else {
    snprintf(line->params, sizeof line->params, "%s", params);
  }
  pthread_mutex_unlock(&lock);
  kiln__variants_stale();
  return s;
}

void kiln__tuning_file_info(const kiln_context *ctx, const char *op,
                            kiln_tuning_info *info) {
  const size_t n = strlen(op);
  pthread_mutex_lock(&lock);
  struct device_entry *e = entry_locked(&ctx->device->info);
  if (e != NULL) {
    snprintf(info->path, sizeof info->path, "%s", e->path);
    /* Both reasons when both: the file's first, each cut to half. */
    snprintf(info->ignored, sizeof info->ignored, "%.500s%s%.500s",
             e->ignored, e->ignored[0] && e->row_ignored[0] ? "; " : "",
             e->row_ignored);
    const struct kiln__tuning_line *line = find(&e->file, op, n),
                                   *row = find(&e->rows, op, n);
    if (row != NULL)
      snprintf(info->database, sizeof info->database, "%s", row->origin);
    if (line != NULL)
      snprintf(info->figures, sizeof info->figures, "%s", line->figures);
    else if (row != NULL)
      snprintf(info->figures, sizeof info->figures, "%s", row->figures);
  }
  pthread_mutex_unlock(&lock);
}

void kiln__tuning_forget(void) {
  pthread_mutex_lock(&lock);
  while (devices != NULL) {
    struct device_entry *e = devices;
    devices = e->next;
    entry_free(e);
  }
  pthread_mutex_unlock(&lock);
  kiln__variants_stale();
}

/* ---- writing ------------------------------------------------------------- */

static void reload(const kiln_device_info *info) {
  pthread_mutex_lock(&lock);
  struct device_entry *e = entry_locked(info);
  if (e != NULL) {
    load(e, info);
    log_ignored(e);
  }
  pthread_mutex_unlock(&lock);
  kiln__variants_stale();
}

/* mkdir -p of path's directory. */
static void make_parent(const char *path) {
  char dir[KILN_TUNING_PATH_CAPACITY];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash == NULL || slash == dir)
    return;
  *slash = '\0';
  for (char *p = dir + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      mkdir(dir, 0755);
      *p = '/';
    }
  mkdir(dir, 0755);
}

/* The file fn works on: path, or the device's; the KILN_ERR_IO failure
 * when there is none (KILN_TUNING=off, no cache directory). */
static kiln_status target_of(const char *fn, const kiln_device_info *info,
                             const char *path,
                             char target[KILN_TUNING_PATH_CAPACITY]) {
  char why[KILN_TUNING_TEXT_CAPACITY];
  if (path != NULL)
    snprintf(target, KILN_TUNING_PATH_CAPACITY, "%s", path);
  else
    file_for(info, target, KILN_TUNING_PATH_CAPACITY, why, sizeof why);
  if (target[0] == '\0')
    return kiln__fail(KILN_ERR_IO, "%s: no tuning file: %s", fn, why);
  return KILN_OK;
}

kiln_status kiln__tuning_write(const char *fn, const kiln_context *ctx,
                               const char *op, const char *params,
                               const char *figures, const char *path) {
  const kiln_device_info *info = &ctx->device->info;
  char target[KILN_TUNING_PATH_CAPACITY];
  kiln_status st = target_of(fn, info, path, target);
  if (st != KILN_OK)
    return st;
  if (strchr(params, '\n') || (figures && strchr(figures, '\n')))
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: params and figures must be one line each", fn);
  /* Keep the file's other ops (a valid file only). */
  struct device_entry *old = calloc(1, sizeof *old);
  char *text = malloc(MAX_FILE);
  if (old == NULL || text == NULL || (old->stable_id = strdup("")) == NULL) {
    if (old != NULL)
      entry_free(old);
    free(text);
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory", fn);
  }
  snprintf(old->path, sizeof old->path, "%s", target);
  char why[128];
  FILE *f = kiln__fopen_regular(target, why, sizeof why);
  if (f == NULL && errno != ENOENT) {
    /* Not replaced by a rename: what is there is not kiln's to drop. */
    entry_free(old);
    free(text);
    return kiln__fail(KILN_ERR_IO, "%s: cannot replace %s: %s", fn, target,
                      why);
  }
  if (f != NULL) {
    size_t len = fread(text, 1, MAX_FILE - 1, f);
    fclose(f);
    text[len] = '\0';
    if (!parse(old, info, text, len))
      lines_free(&old->file);
  }
  int n = snprintf(text, MAX_FILE, "kiln-tuning 1\ndevice %s\ndriver %s\nkiln %s\n",
                   str_or_empty(info->stable_id),
                   str_or_empty(info->driver_version), KILN_VERSION_STRING);
  size_t len = (size_t)n;
  for (size_t i = 0; i < old->file.count; i++) {
    const struct kiln__tuning_line *l = &old->file.line[i];
    if (strcmp(l->name, op) != 0 && len < MAX_FILE)
      len += (size_t)snprintf(text + len, MAX_FILE - len,
                              "op %s %s\nfigures %s %s\n", l->name, l->params,
                              l->name, l->figures);
  }
  if (len < MAX_FILE) /* else too long: refused below */
    len += (size_t)snprintf(text + len, MAX_FILE - len,
                            "op %s %s\nfigures %s %s\n", op, params, op,
                            figures ? figures : "");
  entry_free(old);
  if (len + 40 >= MAX_FILE) {
    free(text);
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: the tuning file would exceed %d bytes",
                      fn, MAX_FILE);
  }
  len += (size_t)snprintf(text + len, MAX_FILE - len, "checksum %016llx\n",
                          (unsigned long long)XXH3_64bits(text, len));
  make_parent(target);
  static _Atomic unsigned counter;
  char tmp[KILN_TUNING_PATH_CAPACITY + 48];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", target, (long)getpid(),
           atomic_fetch_add(&counter, 1));
  kiln_status s = KILN_OK;
  const int fd = kiln__open_output(tmp, O_CREAT | O_EXCL, why, sizeof why);
  f = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (f == NULL) {
    if (fd >= 0) {
      snprintf(why, sizeof why, "%s", strerror(errno));
      close(fd);
    }
    s = kiln__fail(KILN_ERR_IO, "%s: cannot create %s: %s", fn, tmp, why);
  } else {
    bool ok = fwrite(text, 1, len, f) == len;
    ok = fflush(f) == 0 && ok;
    ok = fsync(fileno(f)) == 0 && ok;
    int err = errno;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, target) != 0) {
      if (ok)
        err = errno;
      remove(tmp);
      s = kiln__fail(KILN_ERR_IO, "%s: cannot write %s: %s", fn, target,
                     strerror(err));
    }
  }
  free(text);
  if (s == KILN_OK)
    reload(info);
  return s;
}

kiln_status kiln__tuning_remove(const char *fn, const kiln_context *ctx,
                                const char *path) {
  const kiln_device_info *info = &ctx->device->info;
  char target[KILN_TUNING_PATH_CAPACITY];
  kiln_status st = target_of(fn, info, path, target);
  if (st != KILN_OK)
    return st;
  if (remove(target) != 0 && errno != ENOENT)
    return kiln__fail(KILN_ERR_IO, "%s: cannot remove %s: %s", fn, target,
                      strerror(errno));
  reload(info);
  return KILN_OK;
}
