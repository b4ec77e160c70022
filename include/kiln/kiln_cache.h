/* The persistent program cache: where it is, what it holds, and how to clear
 * or fill it.
 *
 * kiln stores every program it compiles (op kernels and user programs) as the
 * driver's binary in one file per (source, options, device, driver, kiln
 * version). The directory is KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else
 * ~/.cache/kiln. KILN_CACHE=0 disables the cache; KILN_CACHE_MAX_MB (default
 * 512) caps its size, least recently used entries going first. Entries are
 * checksummed; a damaged or mismatched one is removed and rebuilt, never
 * loaded. A directory that cannot be created or written means working
 * without the cache, never a failure: kiln_cache_get_info() says why.
 *
 * Several processes may use one directory at once. Every function here is
 * thread-safe. */
#ifndef KILN_CACHE_H
#define KILN_CACHE_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"

KILN_BEGIN_DECLS

#define KILN_CACHE_PATH_CAPACITY 4096
#define KILN_CACHE_TEXT_CAPACITY 1024

typedef struct kiln_cache_info {
  /* False when KILN_CACHE=0 (or off/no/false). */
  bool enabled;
  /* Whether the directory exists, or can be created as the first build
   * would (kiln_cache_get_info leaves none it created behind), and accepts
   * new files, as far as a check without writing a file can tell. */
  bool usable;
  /* The resolved directory ("" when none could be named). */
  char directory[KILN_CACHE_PATH_CAPACITY];
  /* Why the cache is not in use now (disabled, no directory, cannot be
   * created, not writable); "" when it is. */
  char diagnostic[KILN_CACHE_TEXT_CAPACITY];
  /* The most recent cache problem this process met (a directory it could
   * not create, a damaged entry removed and rebuilt, a failed write); ""
   * when none. Such problems never fail a build. */
  char last_problem[KILN_CACHE_TEXT_CAPACITY];
  uint64_t max_bytes;  /* the size cap */
  /* What the directory holds now. */
  uint64_t entries;
  uint64_t bytes;
  /* This process: builds served from the cache, builds that missed, entries
   * written, damaged entries removed, entries evicted. */
  uint64_t hits, misses, stores, rejected, evicted;
  /* The last process that used the directory (possibly this one), when it
   * recorded its counters. */
  bool last_run_recorded;
  int64_t last_run_pid;
  int64_t last_run_time; /* Unix seconds */
  uint64_t last_run_hits, last_run_misses, last_run_stores,
      last_run_rejected;
} kiln_cache_info;

/* Fill *info from the environment, the directory and this process's
 * counters. Succeeds even when the cache is disabled or unusable (see
 * enabled, usable and diagnostic). Errors: KILN_ERR_NULL_POINTER. */
KILN_API kiln_status kiln_cache_get_info(kiln_cache_info *info);

typedef struct kiln_cache_entry {
  char file[48];      /* file name within the directory */
  char label[64];     /* the op kernel source ("elementwise") or "user" */
  char device[128];   /* the device name it was built for */
  uint64_t size_bytes;
  int64_t created;    /* Unix seconds */
  int64_t last_used;  /* Unix seconds (the file's mtime) */
  /* False when the header is damaged or the file truncated; the next build
   * that needs it removes and rebuilds it. */
  bool valid;
} kiln_cache_entry;

typedef struct kiln_cache_list kiln_cache_list;

/* A snapshot of the directory's entries, most recently used first. An
 * absent or disabled cache gives an empty list. Errors:
 * KILN_ERR_NULL_POINTER, KILN_ERR_OUT_OF_HOST_MEMORY, KILN_ERR_IO when the
 * directory exists but cannot be read. */
KILN_API kiln_status kiln_cache_list_create(kiln_cache_list **out);
KILN_API void kiln_cache_list_destroy(kiln_cache_list *list);
KILN_API size_t kiln_cache_list_get_count(const kiln_cache_list *list);
/* Borrowed, valid until the list is destroyed; NULL when out of range. */
KILN_API const kiln_cache_entry *kiln_cache_list_get(const kiln_cache_list *list,
                                                     size_t index);

/* Remove every entry (and kiln's temporary and statistics files) from the
 * directory; *removed (may be NULL) receives the number of entries removed.
 * Programs already loaded are unaffected. Other processes may be writing
 * new entries meanwhile; those may survive. Errors: KILN_ERR_IO naming the
 * file that could not be removed (the others are still removed). A missing
 * directory is not an error. */
KILN_API kiln_status kiln_cache_clear(size_t *removed);

/* Progress of kiln_cache_warm, reported before (finished false) and after
 * (finished true) each op kernel variant: one source built with one set of
 * options (a dtype, a tile size). */
typedef struct kiln_cache_warm_progress {
  size_t index;        /* 0-based position of this variant */
  size_t total;        /* number of variants the op library builds here */
  const char *source;  /* the source's name ("elementwise") */
  const char *options; /* its extra build options ("" for none) */
  bool finished;       /* false: about to build; true: the fields below hold */
  kiln_status status;  /* of its build */
  bool from_cache;     /* it was already cached */
  double seconds;      /* time its build took */
} kiln_cache_warm_progress;

typedef void (*kiln_cache_warm_fn)(const kiln_cache_warm_progress *progress,
                                   void *user_data);

/* Compile every op kernel variant the op library uses on ctx's device (each
 * embedded source with each set of options its ops pass there), through the
 * cache, so that later processes load them from it. progress (may be NULL)
 * is called on the calling thread before and after each variant. On drivers
 * with KILN_QUIRK_LAZY_PROGRAM_BINARY the entries are written when ctx is
 * destroyed. Every variant is attempted; returns KILN_OK when all built, else
 * the first failure's status with its message in the last error. *built
 * (may be NULL) receives the number of variants built successfully. Errors:
 * KILN_ERR_NULL_POINTER, KILN_ERR_INVALID_STATE when ctx was created with
 * KILN_CONTEXT_NO_CACHE, KILN_ERR_BUILD_FAILED. */
KILN_API kiln_status kiln_cache_warm(kiln_context *ctx,
                                     kiln_cache_warm_fn progress,
                                     void *user_data, size_t *built);

KILN_END_DECLS

#endif
