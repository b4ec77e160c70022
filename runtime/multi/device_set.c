/* The device set: one context and queue per device a selector takes, the
 * weights that split work across them, and copies between devices through
 * pinned host staging. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "multi.h"

kiln_status kiln_device_set_create(const char *selector,
                                   const kiln_context_options *options,
                                   kiln_device_set **out) {
  static const char fn[] = "kiln_device_set_create";
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: out is NULL", fn);
  *out = NULL;
  kiln_device_list *list = NULL;
  kiln_selection *selection = NULL;
  kiln_device_set *set = NULL;
  kiln_status status = kiln_device_list_create(&list);
  if (status == KILN_OK)
    status = kiln_selection_create(list, selector, &selection);
  size_t count = status == KILN_OK ? kiln_selection_get_count(selection) : 0;
  if (status == KILN_OK && count == 0)
    status = kiln__fail(KILN_ERR_NO_DEVICE, "%s: selector '%s' takes no device",
                        fn, kiln_selection_get_selector(selection));
  if (status == KILN_OK && count > KILN__MULTI_MAX)
    status = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                        "%s: selector '%s' takes %zu devices; a set holds at "
                        "most %d",
                        fn, kiln_selection_get_selector(selection), count,
                        KILN__MULTI_MAX);
  if (status == KILN_OK) {
    set = calloc(1, sizeof *set + count * sizeof set->dev[0]);
    if (set == NULL)
      status = kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory", fn);
  }
  for (size_t i = 0; status == KILN_OK && i < count; i++) {
    status = kiln_context_create(kiln_selection_get(selection, i), options,
                                 &set->dev[i].ctx);
    if (status == KILN_OK)
      status = kiln_queue_create(set->dev[i].ctx, 0, &set->dev[i].queue);
    set->count = i + 1;
    set->dev[i].weight = 1.0;
  }
  kiln_selection_destroy(selection);
  kiln_device_list_destroy(list);
  if (status != KILN_OK) {
    char saved[1024];
    strncpy(saved, kiln_last_error(), sizeof saved - 1);
    saved[sizeof saved - 1] = '\0';
    kiln_device_set_destroy(set);
    return kiln__fail(status, "%s", saved);
  }
  *out = set;
  return KILN_OK;
}

kiln_status kiln_device_set_destroy(kiln_device_set *set) {
  if (set == NULL)
    return KILN_OK;
  /* Refuse before destroying anything: a context still owning the caller's
   * buffers would otherwise be lost half-way. A queue is one child, so more
   * than one child means the caller's objects. */
  for (size_t i = 0; i < set->count; i++)
    if (set->dev[i].ctx != NULL &&
        atomic_load(&set->dev[i].ctx->children) >
            (set->dev[i].queue != NULL ? 1u : 0u))
      return kiln__fail(KILN_ERR_BUSY,
                        "kiln_device_set_destroy: device %zu's context still "
                        "has objects the caller made on it",
                        i);
  kiln_status status = KILN_OK, s;
  for (size_t i = 0; i < set->count; i++) {
    if ((s = kiln_queue_destroy(set->dev[i].queue)) != KILN_OK)
      status = s;
    if ((s = kiln_context_destroy(set->dev[i].ctx)) != KILN_OK)
      status = s;
  }
  free(set);
  return status;
}

size_t kiln_device_set_get_count(const kiln_device_set *set) {
  return set ? set->count : 0;
}

kiln_context *kiln_device_set_get_context(const kiln_device_set *set,
                                          size_t index) {
  return set && index < set->count ? set->dev[index].ctx : NULL;
}

kiln_queue *kiln_device_set_get_queue(const kiln_device_set *set,
                                      size_t index) {
  return set && index < set->count ? set->dev[index].queue : NULL;
}

kiln_status kiln_device_set_weights(kiln_device_set *set, size_t count,
                                    const double *weights) {
  static const char fn[] = "kiln_device_set_weights";
  if (set == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: set is NULL", fn);
  if (weights == NULL) {
    if (count != 0)
      return kiln__fail(KILN_ERR_NULL_POINTER,
                        "%s: weights is NULL with count %zu", fn, count);
    for (size_t i = 0; i < set->count; i++)
      set->dev[i].weight = 1.0;
    return KILN_OK;
  }
  if (count != set->count)
    return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                      "%s: count %zu differs from the set's %zu devices", fn,
                      count, set->count);
  double sum = 0;
  for (size_t i = 0; i < count; i++) {
    if (!isfinite(weights[i]) || weights[i] < 0)
      return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                        "%s: weights[%zu] = %g is not finite and >= 0", fn, i,
                        weights[i]);
    sum += weights[i];
  }
  if (!(sum > 0) || !isfinite(sum))
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: the weights sum to %g; it must be positive", fn,
                      sum);
  for (size_t i = 0; i < count; i++)
    set->dev[i].weight = weights[i];
  return KILN_OK;
}

kiln_status kiln_device_set_split(const kiln_device_set *set, size_t total,
                                  size_t count, size_t *parts) {
  static const char fn[] = "kiln_device_set_split";
  if (set == NULL || parts == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: %s is NULL", fn,
                      set == NULL ? "set" : "parts");
  if (count != set->count)
    return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                      "%s: count %zu differs from the set's %zu devices", fn,
                      count, set->count);
  double sum = 0;
  for (size_t i = 0; i < count; i++)
    sum += set->dev[i].weight;
  double frac[KILN__MULTI_MAX];
  size_t given = 0;
  for (size_t i = 0; i < count; i++) {
    double share = (double)total * (set->dev[i].weight / sum);
    parts[i] = (size_t)floor(share);
    if (parts[i] > total - given) /* rounding of huge totals */
      parts[i] = total - given;
    /* A device of weight 0 never gets an item. */
    frac[i] = set->dev[i].weight > 0 ? share - floor(share) : -INFINITY;
    given += parts[i];
  }
  /* The remainder (fewer items than devices, but for rounding), one item
   * each to the largest fractional parts, ties to the lower index. */
  while (given < total) {
    size_t best = 0;
    for (size_t i = 1; i < count; i++)
      if (frac[i] > frac[best])
        best = i;
    parts[best]++;
    frac[best] -= 1.0;
    given++;
  }
  return KILN_OK;
}

kiln_status kiln_device_set_calibrate(kiln_device_set *set) {
  static const char fn[] = "kiln_device_set_calibrate";
  if (set == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: set is NULL", fn);
  enum { N = 256, REPS = 3 };
  double weights[KILN__MULTI_MAX];
  kiln_status status = KILN_OK;
  /* One device at a time, so that none is measured while sharing the host
   * with another. Contents do not matter for timing; zero them so no NaN
   * slows a CPU device down. */
  for (size_t i = 0; i < set->count && status == KILN_OK; i++) {
    kiln_queue *q = set->dev[i].queue;
    kiln_buffer *m = NULL;
    const float zero = 0;
    status = kiln_buffer_create(set->dev[i].ctx, 3 * N * N * 4, 0, &m);
    if (status == KILN_OK)
      status = kiln_buffer_fill(
          q, &zero, 4, &(kiln_range){m, 0, 3 * N * N, KILN_F32}, 0, NULL, NULL);
    /* C = A B, three N x N f32 matrices side by side in m. */
    const kiln_matrix a = {
        .buffer = m, .rows = N, .cols = N, .dtype = KILN_F32};
    kiln_matrix b = a, c = a;
    b.offset = N * N;
    c.offset = 2 * N * N;
    double t0 = 0;
    for (int r = 0; r <= REPS && status == KILN_OK; r++) {
      if (r == 1) { /* the first run builds the kernels */
        status = kiln_queue_finish(q);
        t0 = (double)kiln__now_ns() * 1e-9;
      }
      if (status == KILN_OK)
        status = kiln_matmul(q, 1, &a, &b, &c, NULL, 0, NULL, NULL);
    }
    if (status == KILN_OK)
      status = kiln_queue_finish(q);
    double took = (double)kiln__now_ns() * 1e-9 - t0;
    weights[i] = took > 0 ? 2.0 * N * N * N * REPS / took : 1.0;
    kiln_buffer_destroy(m);
  }
  if (status != KILN_OK)
    return status;
  return kiln_device_set_weights(set, set->count, weights);
}
