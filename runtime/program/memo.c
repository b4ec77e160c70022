/* Embedded op kernel sources, the per-context program memo and the per-queue
 * kernel cache.
 *
 * The memo guarantees that each (source name, options) pair is compiled at
 * most once per context however many threads ask at once: the first asker
 * marks the entry as building and compiles outside the lock (a PoCL build
 * takes a second; holding the lock would serialise unrelated builds), and the
 * others wait on a condition variable for its result. */
#include <stdlib.h>
#include <string.h>

#include "program.h"
#include "embedded_kernels.h"

const char *kiln__kernel_source(const char *name, size_t *length) {
  if (name == NULL)
    return NULL;
  for (size_t i = 0; i < kiln__embedded_kernel_count; i++) {
    if (strcmp(kiln__embedded_kernels[i].name, name) == 0) {
      if (length != NULL)
        *length = kiln__embedded_kernels[i].length;
      return (const char *)kiln__embedded_kernels[i].source;
    }
  }
  return NULL;
}

size_t kiln__kernel_source_count(void) { return kiln__embedded_kernel_count; }

const char *kiln__kernel_source_name(size_t index) {
  return index < kiln__embedded_kernel_count ? kiln__embedded_kernels[index].name
                                             : NULL;
}

/* ---- the per-context program memo ------------------------------------- */

enum entry_state { ENTRY_BUILDING, ENTRY_DONE, ENTRY_FAILED };

struct memo_entry {
  struct memo_entry *next;
  char *name;
  char *options; /* "" for none */
  enum entry_state state;
  cl_program program;
  bool from_cache;     /* the build was served by the persistent cache */
  struct kiln__cache_pending *pending; /* entry to store on release */
  kiln_status status;  /* of the failed build */
  char *message;       /* last error of the failed build */
};

struct program_memo {
  struct kiln__attached attached; /* first: the context frees it through this */
  pthread_mutex_t lock;
  pthread_cond_t built; /* broadcast whenever an entry leaves BUILDING */
  struct memo_entry *entries;
  size_t builds; /* compilations started, for tests */
  /* The owning context: deferred cache stores need its device when the
   * memo is destroyed (still alive then). */
  kiln_context *ctx;
};

/* Release every program of the memo (writing deferred cache entries first)
 * and the memo itself; kiln_context_destroy calls it. */
static void memo_destroy(struct kiln__attached *attached) {
  struct program_memo *memo = (struct program_memo *)attached;
  kiln_context *ctx = memo->ctx;
  struct memo_entry *e = memo->entries;
  while (e != NULL) {
    struct memo_entry *next = e->next;
    kiln__cache_store_pending(ctx, e->program, e->pending);
    if (e->program != NULL)
      clReleaseProgram(e->program);
    free(e->name);
    free(e->options);
    free(e->message);
    free(e);
    e = next;
  }
  pthread_cond_destroy(&memo->built);
  pthread_mutex_destroy(&memo->lock);
  free(memo);
}

/* A new, empty memo for ctx. */
static kiln_status memo_create(kiln_context *ctx,
                               struct program_memo **out) {
  *out = NULL;
  struct program_memo *memo = calloc(1, sizeof *memo);
  if (memo == NULL)
    goto fail;
  if (pthread_mutex_init(&memo->lock, NULL) != 0)
    goto fail;
  if (pthread_cond_init(&memo->built, NULL) != 0) {
    pthread_mutex_destroy(&memo->lock);
    goto fail;
  }
  memo->attached.destroy = memo_destroy;
  memo->ctx = ctx;
  *out = memo;
  return KILN_OK;
fail:
  free(memo);
  return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                    "kiln__memo_create: cannot allocate the program memo");
}

/* ctx's memo, created at the first call: two threads may race here, and the
 * loser of the compare-and-swap frees its copy and takes the winner's. */
static kiln_status memo_of(kiln_context *ctx, struct program_memo **out) {
  struct kiln__attached *current =
      kiln__context_attached(ctx, KILN__SLOT_PROGRAM);
  if (current == NULL) {
    struct program_memo *fresh = NULL;
    kiln_status st = memo_create(ctx, &fresh);
    if (st != KILN_OK)
      return st;
    current = kiln__context_attach(ctx, KILN__SLOT_PROGRAM, &fresh->attached);
    if (current != &fresh->attached)
      memo_destroy(&fresh->attached);
  }
  *out = (struct program_memo *)current;
  return KILN_OK;
}

size_t kiln__memo_build_count(const kiln_context *ctx) {
  if (ctx == NULL)
    return 0;
  struct program_memo *memo =
      (struct program_memo *)kiln__context_attached(ctx, KILN__SLOT_PROGRAM);
  if (memo == NULL)
    return 0;
  pthread_mutex_lock(&memo->lock);
  size_t n = memo->builds;
  pthread_mutex_unlock(&memo->lock);
  return n;
}

static struct memo_entry *find_entry(struct program_memo *memo,
                                     const char *name, const char *options) {
  for (struct memo_entry *e = memo->entries; e != NULL; e = e->next)
    if (strcmp(e->name, name) == 0 && strcmp(e->options, options) == 0)
      return e;
  return NULL;
}

static struct memo_entry *new_entry(const char *name, const char *options) {
  struct memo_entry *e = calloc(1, sizeof *e);
  if (e == NULL)
    return NULL;
  e->name = strdup(name);
  e->options = strdup(options);
  if (e->name == NULL || e->options == NULL) {
    free(e->name);
    free(e->options);
    free(e);
    return NULL;
  }
  e->state = ENTRY_BUILDING;
  return e;
}

/* Compile entry e (state BUILDING, owned by this thread) outside the lock and
 * publish the result. */
static kiln_status build_entry(kiln_context *ctx,
                               struct program_memo *memo,
                               struct memo_entry *e, const char *source,
                               size_t length, cl_program *program) {
  struct kiln__build_request req = {
      .ctx = ctx,
      .source = source,
      .source_length = length,
      .options = e->options,
      .label = e->name,
      .use_cache = (ctx->flags & KILN_CONTEXT_NO_CACHE) == 0,
      .arg_info = false,
  };
  struct kiln__build_result res;
  kiln_status st = kiln__build_program(&req, &res);
  char *message = st == KILN_OK ? NULL : strdup(kiln_last_error());
  free(res.log);

  pthread_mutex_lock(&memo->lock);
  if (st == KILN_OK) {
    e->program = res.program;
    e->from_cache = res.from_cache;
    e->pending = res.pending;
    *program = res.program;
    e->state = ENTRY_DONE;
  } else {
    free(e->message);
    e->message = message;
    e->status = st;
    e->state = ENTRY_FAILED;
  }
  pthread_cond_broadcast(&memo->built);
  pthread_mutex_unlock(&memo->lock);
  return st;
}

/* Look up or build (name, options); on success *program is its program. */
static kiln_status memo_get(kiln_context *ctx, const char *name,
                            const char *options, cl_program *program,
                            bool *from_cache) {
  *program = NULL;
  *from_cache = false;
  if (ctx == NULL || name == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln__op_program: %s is NULL",
                      ctx == NULL ? "ctx" : "name");
  if (options == NULL)
    options = "";
  size_t length = 0;
  const char *source = kiln__kernel_source(name, &length);
  if (source == NULL)
    return kiln__fail(KILN_ERR_NOT_FOUND,
                      "kiln__op_program: no embedded kernel source named "
                      "'%s' (the library was built without cl_kernels/%s.cl)",
                      name, name);

  struct program_memo *memo = NULL;
  kiln_status created = memo_of(ctx, &memo);
  if (created != KILN_OK)
    return created;
  pthread_mutex_lock(&memo->lock);
  struct memo_entry *e = find_entry(memo, name, options);
  if (e == NULL) {
    e = new_entry(name, options);
    if (e == NULL) {
      pthread_mutex_unlock(&memo->lock);
      return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                        "kiln__op_program: cannot allocate a memo entry");
    }
    e->next = memo->entries;
    memo->entries = e;
    memo->builds++;
    pthread_mutex_unlock(&memo->lock);
    kiln_status st = build_entry(ctx, memo, e, source, length, program);
    *from_cache = e->from_cache;
    return st;
  }
  /* A failed build is retried by the next caller that finds it failed: the
   * failure may have been transient (memory). Threads already waiting on
   * that build get its failure. */
  if (e->state == ENTRY_FAILED) {
    e->state = ENTRY_BUILDING;
    memo->builds++;
    pthread_mutex_unlock(&memo->lock);
    kiln_status st = build_entry(ctx, memo, e, source, length, program);
    *from_cache = e->from_cache;
    return st;
  }
  while (e->state == ENTRY_BUILDING)
    pthread_cond_wait(&memo->built, &memo->lock);
  kiln_status st = KILN_OK;
  if (e->state == ENTRY_FAILED)
    st = kiln__fail(e->status, "%s",
                    e->message != NULL ? e->message
                                       : "kiln__op_program: the build failed");
  else {
    *program = e->program;
    *from_cache = e->from_cache;
  }
  pthread_mutex_unlock(&memo->lock);
  return st;
}

kiln_status kiln__op_program(kiln_context *ctx, const char *name,
                             const char *options, cl_program *out) {
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "kiln__op_program: out is NULL");
  bool from_cache = false;
  return memo_get(ctx, name, options, out, &from_cache);
}

kiln_status kiln__op_program_cached(kiln_context *ctx, const char *name,
                                    const char *options, cl_program *out,
                                    bool *from_cache) {
  return memo_get(ctx, name, options, out, from_cache);
}

/* ---- kernels cached per queue ----------------------------------------- */

struct queue_kernel {
  const void *key; /* kiln__queue_kernel_keyed's, else NULL */
  uint64_t hash;
  char *name;
  char *options;
  char *kernel_name;
  cl_kernel kernel;
};

struct kernel_cache {
  struct kiln__attached attached; /* first: the queue frees it through this */
  struct queue_kernel *items;
  size_t count, capacity;
};

/* FNV-1a over the three strings with separators: cheap, and only a filter
 * before the string comparisons. */
static uint64_t key_hash(const char *a, const char *b, const char *c) {
  uint64_t h = 14695981039346656037ull;
  const char *parts[3] = {a, b, c};
  for (int i = 0; i < 3; i++) {
    for (const char *p = parts[i]; *p != '\0'; p++)
      h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h = (h ^ 0xffu) * 1099511628211ull;
  }
  return h;
}

/* Release the kernels cached on a queue; kiln_queue_destroy calls it. */
static void kernel_cache_destroy(struct kiln__attached *attached) {
  struct kernel_cache *cache = (struct kernel_cache *)attached;
  for (size_t i = 0; i < cache->count; i++) {
    clReleaseKernel(cache->items[i].kernel);
    free(cache->items[i].name);
    free(cache->items[i].options);
    free(cache->items[i].kernel_name);
  }
  free(cache->items);
  free(cache);
}

static kiln_status add_kernel(struct kernel_cache *cache,
                              const struct queue_kernel *item) {
  if (cache->count == cache->capacity) {
    size_t cap = cache->capacity == 0 ? 8 : cache->capacity * 2;
    struct queue_kernel *items = realloc(cache->items, cap * sizeof *items);
    if (items == NULL)
      return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                        "kiln__queue_kernel: cannot grow the kernel cache");
    cache->items = items;
    cache->capacity = cap;
  }
  cache->items[cache->count++] = *item;
  return KILN_OK;
}

kiln_status kiln__queue_kernel(kiln_queue *queue, const char *name,
                               const char *options, const char *kernel_name,
                               cl_kernel *out) {
  return kiln__queue_kernel_keyed(queue, NULL, name, options, kernel_name,
                                  out);
}

kiln_status kiln__queue_kernel_keyed(kiln_queue *queue, const void *key,
                                     const char *name, const char *options,
                                     const char *kernel_name, cl_kernel *out) {
  if (out != NULL)
    *out = NULL;
  if (queue == NULL || name == NULL || kernel_name == NULL || out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "kiln__queue_kernel: %s is NULL",
                      queue == NULL  ? "queue"
                      : name == NULL ? "name"
                      : out == NULL  ? "out"
                                     : "kernel_name");
  if (options == NULL)
    options = "";
  struct kernel_cache *cache =
      (struct kernel_cache *)queue->attached[KILN__SLOT_PROGRAM];
  /* A key stands for (name, options): no hashing, no long compares. */
  for (size_t i = 0; key != NULL && cache != NULL && i < cache->count; i++) {
    const struct queue_kernel *k = &cache->items[i];
    if (k->key == key && strcmp(k->kernel_name, kernel_name) == 0) {
      *out = k->kernel;
      return KILN_OK;
    }
  }
  uint64_t h = key_hash(name, options, kernel_name);
  if (cache != NULL) {
    for (size_t i = 0; i < cache->count; i++) {
      struct queue_kernel *k = &cache->items[i];
      if (k->hash == h && strcmp(k->kernel_name, kernel_name) == 0 &&
          strcmp(k->name, name) == 0 && strcmp(k->options, options) == 0) {
        *out = k->kernel;
        return KILN_OK;
      }
    }
  } else {
    cache = calloc(1, sizeof *cache);
    if (cache == NULL)
      return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                        "kiln__queue_kernel: cannot allocate the kernel cache");
    cache->attached.destroy = kernel_cache_destroy;
    queue->attached[KILN__SLOT_PROGRAM] = &cache->attached;
  }

  cl_program program = NULL;
  bool from_cache = false;
  kiln_status st = memo_get(queue->ctx, name, options, &program, &from_cache);
  if (st != KILN_OK)
    return st;
  cl_int err = CL_SUCCESS;
  struct queue_kernel item = {.key = key, .hash = h};
  item.kernel = clCreateKernel(program, kernel_name, &err);
  if (err != CL_SUCCESS)
    return kiln__fail_cl(err, "clCreateKernel", queue->ctx->device,
                         "kernel '%s' of embedded program '%s'", kernel_name,
                         name);
  item.name = strdup(name);
  item.options = strdup(options);
  item.kernel_name = strdup(kernel_name);
  if (item.name == NULL || item.options == NULL || item.kernel_name == NULL) {
    st = kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                    "kiln__queue_kernel: cannot copy the kernel's name");
    goto fail;
  }
  st = add_kernel(cache, &item);
  if (st != KILN_OK)
    goto fail;
  *out = item.kernel;
  return KILN_OK;
fail:
  clReleaseKernel(item.kernel);
  free(item.name);
  free(item.options);
  free(item.kernel_name);
  return st;
}
