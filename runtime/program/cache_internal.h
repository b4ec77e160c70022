/* The persistent program cache, private to the program room: cache.c (the
 * store: configuration, counters, eviction), cache_entry.c (file format and
 * key), cache_api.c (the public kiln_cache_* functions) and build.c, which
 * reads and writes entries around a build. Not installed.
 *
 * Cache problems are never failures of the build that met them: they are
 * recorded as the cache's diagnostic (kiln__cache_note) and the build goes on
 * from source. */
#ifndef KILN_CACHE_INTERNAL_H
#define KILN_CACHE_INTERNAL_H

#include "core/internal.h"

/* Bumped whenever the entry layout or the key's fields change; old entries
 * then fail the format check and are rebuilt. */
#define KILN__CACHE_FORMAT 1u
#define KILN__CACHE_HEADER_SIZE 256u
#define KILN__CACHE_PATH_MAX 4096
#define KILN__CACHE_SUFFIX ".kbin"
#define KILN__CACHE_TMP_PREFIX ".tmp-"
#define KILN__CACHE_LOCK_FILE ".lock"
#define KILN__CACHE_STATS_FILE "last-run-stats"
#define KILN__CACHE_DEFAULT_MAX_MB 512u

struct kiln__cache_key {
  unsigned char bytes[16];
  char hex[33];
};

struct kiln__cache_meta {
  char label[64];
  char device[128];
  int64_t created;
  uint64_t payload_length;
  bool complete; /* file size matches the header */
};

enum kiln__entry_result {
  KILN__ENTRY_OK,
  KILN__ENTRY_ABSENT,
  KILN__ENTRY_CORRUPT,    /* remove and rebuild */
  KILN__ENTRY_UNREADABLE, /* leave alone, build without it */
};

/* ---- cache_entry.c ------------------------------------------------------ */

/* The key of (source, final options) on device. False only when hashing
 * state cannot be allocated. */
bool kiln__cache_key(const struct kiln_device *device, const char *source,
                     size_t source_length, const char *options,
                     struct kiln__cache_key *out);

/* Read and fully verify the entry at path for key. On KILN__ENTRY_OK
 * *payload is malloc'd; otherwise why says what was wrong. */
enum kiln__entry_result
kiln__cache_entry_read(const char *path, const struct kiln__cache_key *key,
                       unsigned char **payload, size_t *length, char *why,
                       size_t cap);

/* Write an entry through a temporary file in dir renamed to path. */
bool kiln__cache_entry_write(const char *dir, const char *path,
                             const struct kiln__cache_key *key,
                             const char *label, const char *device,
                             const unsigned char *payload, size_t length,
                             char *why, size_t cap);

/* Read only the header (checked, but not the payload), for listings. */
bool kiln__cache_entry_peek(const char *path, struct kiln__cache_meta *meta);

/* ---- cache.c ------------------------------------------------------------ */

struct kiln__cache_config {
  bool enabled;                 /* KILN_CACHE is not "0" */
  bool have_dir;                /* dir could be named */
  char dir[KILN__CACHE_PATH_MAX];
  uint64_t max_bytes;
  char problem[512];            /* why the config is odd ("" when fine) */
};

/* Read the environment now (tests change it between builds). */
void kiln__cache_config(struct kiln__cache_config *out);

/* Create dir and its parents. False with why set on failure. */
bool kiln__cache_make_dir(const char *dir, char *why, size_t cap);

/* Record a cache problem as the diagnostic (printf-style). Thread-safe. */
void kiln__cache_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Copy the diagnostic into buf. */
void kiln__cache_diagnostic(char *buf, size_t cap);

/* Counters of this process. */
struct kiln__cache_counters {
  uint64_t hits, misses, stores, rejected, evicted;
};
void kiln__cache_counters(struct kiln__cache_counters *out);
/* Count one event of this process (eviction counts itself). Thread-safe. */
enum kiln__cache_event {
  KILN__CACHE_HIT, KILN__CACHE_MISS, KILN__CACHE_STORE, KILN__CACHE_REJECTED,
};
void kiln__cache_count(enum kiln__cache_event event);
/* Persist this process's counters as dir's "last run", for `kiln cache
 * stats`. Best effort: a failure only loses the statistic. */
void kiln__cache_save_stats(const char *dir);

/* Evict least-recently-used entries of dir until it holds at most max_bytes,
 * under an exclusive lock on dir/.lock; also removes temporary files left by
 * crashed writers. Returns how many entries were removed. */
size_t kiln__cache_evict(const char *dir, uint64_t max_bytes);

/* dir + "/" + name into buf; false (buf "") when it does not fit. */
bool kiln__cache_join(char *buf, size_t cap, const char *dir, const char *name);
/* Copy text into buf, truncating to fit. */
void kiln__cache_copy(char *buf, size_t cap, const char *text);

/* Whether name is an entry file name (32 hex digits + ".kbin"). */
bool kiln__cache_is_entry_name(const char *name);

#endif
