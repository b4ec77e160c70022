/* kiln_cache_warm (kiln_cache.h): build every op kernel variant the op
 * library would build on a context, so that later processes find them in the
 * persistent cache. It stands above the op modules: it asks each for its
 * variants (the op_modules table) and builds them through the program room's
 * program memo, so nothing below calls up into the op library. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program/program.h"
#include "kiln/kiln_cache.h"
#include "ops_conv_gpu.h"
#include "ops_internal.h"

/* Every op module's list of variants, in the order they are built. */
static void (*const op_modules[])(const kiln_context *ctx,
                                  kiln__warm_add_fn add, void *user) = {
    kiln__ops_warm_elementwise, kiln__ops_warm_reduce,
    kiln__ops_warm_scan,        kiln__ops_warm_rows,
    kiln__ops_warm_transpose,   kiln__ops_warm_gemm,
    kiln__ops_warm_train_elementwise, kiln__ops_warm_train_loss,
    kiln__ops_warm_train_optim,       kiln__ops_warm_train_random,
    kiln__ops_warm_train_index,       kiln__ops_warm_conv,
    kiln__ops_warm_image,             kiln__ops_warm_attention,
    kiln__ops_warm_conv_gpu,
};

/* The (embedded source, options) pairs the op library builds on ctx: call
 * add(user, source, options) once per pair. */
static void list_variants(const kiln_context *ctx, kiln__warm_add_fn add,
                          void *user) {
  for (size_t i = 0; i < sizeof op_modules / sizeof op_modules[0]; i++)
    op_modules[i](ctx, add, user);
}

/* The variants to warm, collected from the op library before building. */
struct variant {
  char *source;
  char *options;
};

struct variants {
  struct variant *items;
  size_t count, capacity;
  bool failed; /* out of memory while collecting */
};

static void add_variant(void *user, const char *source, const char *options) {
  struct variants *v = user;
  if (v->failed || source == NULL)
    return;
  if (options == NULL)
    options = "";
  for (size_t i = 0; i < v->count; i++) /* duplicates are built once */
    if (strcmp(v->items[i].source, source) == 0 &&
        strcmp(v->items[i].options, options) == 0)
      return;
  if (v->count == v->capacity) {
    size_t cap = v->capacity == 0 ? 32 : v->capacity * 2;
    struct variant *grown = realloc(v->items, cap * sizeof *grown);
    if (grown == NULL) {
      v->failed = true;
      return;
    }
    v->items = grown;
    v->capacity = cap;
  }
  struct variant *item = &v->items[v->count];
  item->source = strdup(source);
  item->options = strdup(options);
  if (item->source == NULL || item->options == NULL) {
    free(item->source);
    free(item->options);
    v->failed = true;
    return;
  }
  v->count++;
}

static void free_variants(struct variants *v) {
  for (size_t i = 0; i < v->count; i++) {
    free(v->items[i].source);
    free(v->items[i].options);
  }
  free(v->items);
}

kiln_status kiln_cache_warm(kiln_context *ctx, kiln_cache_warm_fn progress,
                            void *user_data, size_t *built) {
  if (built != NULL)
    *built = 0;
  if (ctx == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "kiln_cache_warm: ctx is NULL");
  if ((ctx->flags & KILN_CONTEXT_NO_CACHE) != 0)
    return kiln__fail(KILN_ERR_INVALID_STATE,
                      "kiln_cache_warm: the context was created with "
                      "KILN_CONTEXT_NO_CACHE, so nothing would be stored");
  struct variants v = {0};
  list_variants(ctx, add_variant, &v);
  if (v.failed) {
    free_variants(&v);
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "kiln_cache_warm: cannot list the op kernel variants");
  }
  size_t total = v.count;
  kiln_status first = KILN_OK;
  char first_message[2048] = "";
  size_t ok = 0;
  for (size_t i = 0; i < total; i++) {
    const char *name = v.items[i].source;
    const char *options = v.items[i].options;
    if (progress != NULL) {
      kiln_cache_warm_progress p = {
          .index = i, .total = total, .source = name, .options = options};
      progress(&p, user_data);
    }
    const uint64_t t0 = kiln__now_ns();
    cl_program program = NULL;
    bool from_cache = false;
    kiln_status st =
        kiln__op_program_cached(ctx, name, options, &program, &from_cache);
    if (st == KILN_OK) {
      ok++;
    } else if (first == KILN_OK) {
      first = st;
      snprintf(first_message, sizeof first_message, "%s", kiln_last_error());
    }
    if (progress != NULL) {
      kiln_cache_warm_progress p = {
          .index = i,
          .total = total,
          .source = name,
          .options = options,
          .finished = true,
          .status = st,
          .from_cache = from_cache,
          .seconds = (double)(kiln__now_ns() - t0) * 1e-9,
      };
      progress(&p, user_data);
    }
  }
  free_variants(&v);
  if (built != NULL)
    *built = ok;
  if (first != KILN_OK)
    return kiln__fail(first, "kiln_cache_warm: %zu of %zu op kernel variants "
                      "failed to build; the first: %s",
                      total - ok, total, first_message);
  return KILN_OK;
}
