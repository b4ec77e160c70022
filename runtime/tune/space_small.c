/* The small spaces: the parameter spaces of the GPU-family transpose,
 * reduction and elementwise kernels (cl_kernels/transpose.cl, reduce.cl,
 * elementwise.cl), as data for the machinery in space.c. Each knob is a
 * build macro of its kernel; the op modules (runtime/ops) launch with the
 * point their variant holds (variant.c). */
#include "tune.h"

#include <stdio.h>

/* ---- transpose ------------------------------------------------------------ */

/* The kernel's rules and the device's limits: WPT divides TILE, and a
 * group (TILE x TILE / WPT items, TILE x (TILE + PAD) elements of
 * __local memory, sized for 4-byte elements since one program serves every
 * element size) fits the device. */
static bool transpose_check(const struct kiln__point *p, const kiln_device_info *info,
                  char *reason, size_t size) {
  const size_t tile = p->v[KILN__TRANSPOSE_TILE], pad = p->v[KILN__TRANSPOSE_PAD], wpt = p->v[KILN__TRANSPOSE_WPT];
  if (wpt > tile || tile % wpt) {
    snprintf(reason, size, "WPT %zu does not divide TILE %zu", wpt, tile);
    return false;
  }
  const size_t items = tile * (tile / wpt), local = tile * (tile + pad) * 4;
  if (items > info->max_work_group_size || tile > info->max_work_item_sizes[0] ||
      tile / wpt > info->max_work_item_sizes[1]) {
    snprintf(reason, size,
             "work-groups of %zu x %zu work-items (TILE x TILE / WPT) exceed "
             "the device's %zu (%zu x %zu)",
             tile, tile / wpt, info->max_work_group_size,
             info->max_work_item_sizes[0], info->max_work_item_sizes[1]);
    return false;
  }
  if (local > info->local_mem_bytes) {
    snprintf(reason, size,
             "%zu bytes of __local tile (TILE x (TILE + PAD) x 4) exceed the "
             "device's %llu",
             local, (unsigned long long)info->local_mem_bytes);
    return false;
  }
  return true;
}

/* The profile's tile, one column of padding and groups of TILE x min(TILE,
 * 8) items (the kernel before it had a space), halved until it fits. */
static void transpose_defaults(const kiln_context *ctx, struct kiln__point *p) {
  unsigned tile = kiln__ops_tune(kiln__ops_tuning(ctx)->transpose_tile, 16);
  char reason[256]; /* unread; sized for check's messages */
  for (;;) {
    p->v[KILN__TRANSPOSE_TILE] = tile;
    p->v[KILN__TRANSPOSE_PAD] = 1;
    p->v[KILN__TRANSPOSE_WPT] = tile < 8 ? 1 : tile / 8;
    if (tile == 1 || transpose_check(p, &ctx->device->info, reason, sizeof reason))
      return;
    tile /= 2;
  }
}

/* One program serves every element size: its options are the knobs. */
static void transpose_options(const struct kiln__point *p, kiln_dtype dtype,
                              char *buf, size_t size) {
  (void)dtype;
  buf[0] = '\0';
  kiln__space_options(&kiln__transpose_space, p, buf, size);
}

const struct kiln__space kiln__transpose_space = {
    .name = "transpose",
    .family = KILN_FAMILY_GPU,
    .count = 3,
    .knob = {{"TILE", "edge of the work-group's __local tile", 4,
              {8, 16, 32, 64}},
             {"PAD", "columns of padding per __local tile row (bank "
                     "conflicts)",
              2, {0, 1}},
             {"WPT", "elements per work-item (a group is TILE x TILE / WPT)",
              4, {1, 2, 4, 8}}},
    .check = transpose_check,
    .defaults = transpose_defaults,
    .program = "transpose",
    .options = transpose_options,
};

const struct kiln__tuning_space kiln__transpose_tuning_space =
    KILN__SMALL_TUNING_SPACE(
        "transpose", kiln__transpose_space, 3,
        "the GPU-family transpose kernels (cl_kernels/transpose.cl)");

/* ---- reductions ----------------------------------------------------------- */

/* A point runs where its work-group and its __local tree (WG states of 8
 * bytes) fit: the kernels handle every length, offset and split. */
static bool reduce_check(const struct kiln__point *p, const kiln_device_info *info,
                  char *reason, size_t size) {
  const size_t wg = p->v[KILN__REDUCE_WG];
  if (!kiln__space_check_wg(p->v[KILN__REDUCE_WG], info, reason, size))
    return false;
  if (wg * 8 > info->local_mem_bytes) {
    snprintf(reason, size,
             "a __local tree of %zu bytes (WG x 8) exceeds the device's %llu",
             wg * 8, (unsigned long long)info->local_mem_bytes);
    return false;
  }
  return true;
}

static size_t compute_units(const kiln_context *ctx) {
  return ctx->device != NULL && ctx->device->info.compute_units
             ? ctx->device->info.compute_units
             : 1;
}

/* The profile's work-group size, one element per work-item per step, and
 * reduce_workers (default four per compute unit) as partials per compute
 * unit: the kernels before they had a space. */
static void reduce_defaults(const kiln_context *ctx, struct kiln__point *p) {
  const struct kiln_tuning *t = kiln__ops_tuning(ctx);
  const size_t cus = compute_units(ctx);
  p->v[KILN__REDUCE_WG] = (unsigned)kiln__ops_local_size(ctx,
                                              kiln__ops_tune(t->reduce_wg, 256));
  p->v[KILN__REDUCE_WPT] = 1;
  p->v[KILN__REDUCE_VW] = 1;
  p->v[KILN__REDUCE_PARTS] = t->reduce_workers
                      ? (unsigned)((t->reduce_workers + cus - 1) / cus)
                      : 4;
}

/* The GPU family's program options for dtype at point p. */
static void reduce_options(const struct kiln__point *p, kiln_dtype dtype,
                           char *buf, size_t size) {
  snprintf(buf, size, "-DDT=%d -DFAMILY=0 -DWG=%u -DCB=1 -DWPT=%u -DVW=%u",
           (int)dtype, p->v[KILN__REDUCE_WG], p->v[KILN__REDUCE_WPT], p->v[KILN__REDUCE_VW]);
}

const struct kiln__space kiln__reduce_space = {
    .name = "reduce",
    .family = KILN_FAMILY_GPU,
    .count = 4,
    .knob = {{"WG", "work-group size (items sharing a __local tree)", 6,
              {32, 64, 128, 256, 512, 1024}},
             {"WPT", "vectors per work-item per pass (row kernels)", 4,
              {1, 2, 4, 8}},
             {"VW", "elements per vector (row kernels; aligned vector loads "
                    "when the data allows)",
              4, {1, 2, 4, 8}},
             {"PARTS", "partial results (work-groups) per compute unit", 6,
              {1, 2, 4, 8, 16, 32}}},
    .check = reduce_check,
    .defaults = reduce_defaults,
    .program = "reduce",
    .options = reduce_options,
};

const struct kiln__tuning_space kiln__reduce_tuning_space =
    KILN__SMALL_TUNING_SPACE(
        "reduce", kiln__reduce_space, 4,
        "the GPU-family reduction kernels (cl_kernels/reduce.cl)");

/* ---- elementwise ----------------------------------------------------------- */

/* Any point runs where its work-group does: the kernel has no __local
 * memory and handles every length and offset. */
static bool elementwise_check(const struct kiln__point *p, const kiln_device_info *info,
                  char *reason, size_t size) {
  return kiln__space_check_wg(p->v[KILN__ELEMENTWISE_WG], info, reason, size);
}

/* The profile's work-group size and one element per work-item: the
 * kernel before it had a space. */
static void elementwise_defaults(const kiln_context *ctx, struct kiln__point *p) {
  p->v[KILN__ELEMENTWISE_WG] = (unsigned)kiln__ops_local_size(
      ctx, kiln__ops_tune(kiln__ops_tuning(ctx)->elementwise_wg, 256));
  p->v[KILN__ELEMENTWISE_WPT] = 1;
  p->v[KILN__ELEMENTWISE_VW] = 1;
}

/* The GPU family's program options for dtype at point p. */
static void elementwise_options(const struct kiln__point *p, kiln_dtype dtype,
                                char *buf, size_t size) {
  snprintf(buf, size, "-DDT=%d", (int)dtype);
  kiln__space_options(&kiln__elementwise_space, p, buf, size);
}

const struct kiln__space kiln__elementwise_space = {
    .name = "elementwise",
    .family = KILN_FAMILY_GPU,
    .count = 3,
    .knob = {{"WG", "work-group size", 6, {32, 64, 128, 256, 512, 1024}},
             {"WPT", "vectors per work-item", 4, {1, 2, 4, 8}},
             {"VW", "elements per vector (aligned vector accesses when every "
                    "pointer allows)",
              4, {1, 2, 4, 8}}},
    .check = elementwise_check,
    .defaults = elementwise_defaults,
    .program = "elementwise",
    .options = elementwise_options,
};

const struct kiln__tuning_space kiln__elementwise_tuning_space =
    KILN__SMALL_TUNING_SPACE(
        "elementwise", kiln__elementwise_space, 3,
        "the GPU-family elementwise kernels (cl_kernels/elementwise.cl)");
