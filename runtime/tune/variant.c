/* Each op's variant resolved once per context, op and dtype (tune.h).
 *
 * Resolving a point means reading the tuning sources (under the tuning
 * files' lock), parsing text, checking it against the space and the device
 * and formatting the program's build options: tens of thousands of
 * instructions, which an 8x8x8 GEMM used to pay on every call. Here it is
 * paid at the first call; later calls load the context's slot for (op,
 * dtype) and compare the variant's generation with the process's, both
 * atomically, and take no lock: queues on other threads never wait for
 * each other here.
 *
 * kiln_tuning_set is per device and the files are per process, so a change
 * cannot be pushed into every context that holds a variant: it bumps the
 * process's generation instead (kiln__variants_stale), and each context
 * resolves again at its next use. Variants are never changed or freed
 * while their context lives (a reader may hold one while another thread
 * resolves again): a resolution that gives a point the context already has
 * takes that variant again, so a context keeps one variant per distinct
 * point it ran, as its program memo keeps one program per distinct
 * options. */
#include "tune.h"

#include <stdlib.h>
#include <string.h>

#define DTYPES ((size_t)KILN_U32 + 1)

/* The tune room's state on a context. */
struct variants {
  struct kiln__attached attached;
  pthread_mutex_t lock; /* resolutions: the list below */
  _Atomic(struct kiln__variant *) slot[KILN__TUNED_COUNT][DTYPES];
  struct kiln__variant *all; /* every variant made on the context */
};

static void variants_destroy(struct kiln__attached *attached) {
  struct variants *vs = (struct variants *)attached;
  for (struct kiln__variant *v = vs->all, *next; v != NULL; v = next) {
    next = v->next;
    free(v);
  }
  pthread_mutex_destroy(&vs->lock);
  free(vs);
}

/* ctx's state, made at its first variant (threads may race to it). The
 * state is a cache of what ctx's device runs: const contexts have one. */
static struct variants *variants_of(const kiln_context *ctx) {
  struct kiln__attached *current =
      kiln__context_attached(ctx, KILN__SLOT_TUNE);
  if (current != NULL)
    return (struct variants *)current;
  struct variants *fresh = calloc(1, sizeof *fresh);
  if (fresh == NULL)
    return NULL;
  fresh->attached.destroy = variants_destroy;
  pthread_mutex_init(&fresh->lock, NULL);
  current = kiln__context_attach((kiln_context *)ctx, KILN__SLOT_TUNE,
                                 &fresh->attached);
  if (current != &fresh->attached)
    variants_destroy(&fresh->attached);
  return (struct variants *)current;
}

static const struct kiln__space *const small_spaces[KILN__TUNED_COUNT] = {
    [KILN__TUNED_TRANSPOSE] = &kiln__transpose_space,
    [KILN__TUNED_REDUCE] = &kiln__reduce_space,
    [KILN__TUNED_ELEMENTWISE] = &kiln__elementwise_space,
    [KILN__TUNED_GEMM_CPU] = &kiln__gemm_cpu_space,
    [KILN__TUNED_TRANSPOSE_CPU] = &kiln__transpose_cpu_space,
    [KILN__TUNED_GEMM_MMA] = &kiln__gemm_mma_space,
    [KILN__TUNED_CONV2D] = &kiln__conv_space,
};

/* v's point, source and options, from the sources in effect now. */
static kiln_status resolve(const kiln_context *ctx, struct kiln__variant *v) {
  if (v->op == KILN__TUNED_GEMM) {
    kiln_status s = kiln__gemm_gpu_source(ctx, &v->gemm, &v->source);
    if (s == KILN_OK)
      kiln__gemm_gpu_options(&v->gemm, v->dtype, v->options,
                             sizeof v->options);
    return s;
  }
  const struct kiln__space *sp = small_spaces[v->op];
  kiln_status s = kiln__space_params(ctx, sp, &v->point, &v->source);
  if (s == KILN_OK)
    sp->options(&v->point, v->dtype, v->options, sizeof v->options);
  /* The matrix units: the options of the context's form, and whether they
   * run at all: the probe builds a program, which a context does under its
   * const (the memo is a cache). */
  if (s == KILN_OK && v->op == KILN__TUNED_GEMM_MMA) {
    kiln__gemm_mma_form_options(ctx, v->options, sizeof v->options);
    kiln__gemm_mma_usable((kiln_context *)ctx, v->dtype, v->source, v->off,
                          sizeof v->off);
    v->lanes = kiln__gemm_mma_lanes(ctx);
  }
  return s;
}

static bool same(const struct kiln__variant *a, const struct kiln__variant *b) {
  return a->op == b->op && a->dtype == b->dtype && a->source == b->source &&
         memcmp(&a->gemm, &b->gemm, sizeof a->gemm) == 0 &&
         memcmp(&a->point, &b->point, sizeof a->point) == 0 &&
         strcmp(a->options, b->options) == 0 && strcmp(a->off, b->off) == 0 &&
         a->lanes == b->lanes;
}

/* The slow path: resolve under the context's lock and publish. */
static kiln_status resolve_slot(const kiln_context *ctx, struct variants *vs,
                                enum kiln__tuned op, kiln_dtype dtype,
                                struct kiln__variant **out) {
  /* Read before resolving: a change during the resolution leaves this
   * variant stale, and the next call resolves again. */
  const unsigned long now = kiln__tuning_generation();
  struct kiln__variant fresh = {.op = op, .dtype = dtype};
  kiln_status s = resolve(ctx, &fresh);
  if (s != KILN_OK)
    return s;
  pthread_mutex_lock(&vs->lock);
  struct kiln__variant *v = vs->all;
  while (v != NULL && !same(v, &fresh))
    v = v->next;
  if (v == NULL) {
    v = malloc(sizeof *v);
    if (v == NULL) {
      pthread_mutex_unlock(&vs->lock);
      return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                        "cannot allocate the variant of a tuned op");
    }
    *v = fresh;
    atomic_init(&v->generation, now);
    v->next = vs->all;
    vs->all = v;
  } else if (atomic_load(&v->generation) < now) {
    atomic_store(&v->generation, now);
  }
  atomic_store_explicit(&vs->slot[op][dtype], v, memory_order_release);
  pthread_mutex_unlock(&vs->lock);
  *out = v;
  return KILN_OK;
}

kiln_status kiln__variant_get(const kiln_context *ctx, enum kiln__tuned op,
                              kiln_dtype dtype,
                              const struct kiln__variant **out) {
  if ((unsigned)op >= KILN__TUNED_COUNT || (size_t)dtype >= DTYPES)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "kiln__variant_get: op %d or dtype %d out of range",
                      (int)op, (int)dtype);
  struct variants *vs = variants_of(ctx);
  if (vs == NULL)
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                      "cannot allocate the variants of a context");
  struct kiln__variant *v =
      atomic_load_explicit(&vs->slot[op][dtype], memory_order_acquire);
  if (v == NULL || atomic_load_explicit(&v->generation, memory_order_relaxed) !=
                       kiln__tuning_generation()) {
    kiln_status s = resolve_slot(ctx, vs, op, dtype, &v);
    if (s != KILN_OK)
      return s;
  }
  *out = v;
  return KILN_OK;
}

kiln_status kiln__gemm_gpu_params_for(const kiln_context *ctx,
                                      struct kiln__gemm_gpu_params *p) {
  /* NULL and the test below only for gcc -O3, which cannot see that
   * success sets v. */
  const struct kiln__variant *v = NULL;
  kiln_status s = kiln__variant_get(ctx, KILN__TUNED_GEMM, KILN_F32, &v);
  if (s == KILN_OK && v != NULL)
    *p = v->gemm;
  return s;
}
