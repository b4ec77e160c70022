/* What the training-op modules (ops_train_*.c) share: launch shapes, the
 * row-kernel parameters and argument checks of their own. Not installed;
 * part of the ops room. */
#ifndef KILN_OPS_TRAIN_INTERNAL_H
#define KILN_OPS_TRAIN_INTERNAL_H

#include "kiln/ops_train.h"
#include "ops_internal.h"

#define KILN__DT_LABELS (KILN__DT(KILN_U32) | KILN__DT(KILN_I32))

static inline bool kiln__train_cpu(const kiln_context *ctx) {
  return kiln__ops_tuning(ctx)->family == KILN_FAMILY_CPU;
}

/* One work-item per element, in groups of the profile's elementwise_wg. */
kiln_status kiln__train_launch_elems(struct kiln__op *op, cl_kernel k,
                                     size_t n);

/* A 2-D range over a rows x cols matrix: dimension 0 the columns rounded up
 * to the elementwise group size, dimension 1 the rows. */
kiln_status kiln__train_launch_matrix(struct kiln__op *op, cl_kernel k,
                                      size_t rows, size_t cols);

/* Row kernels (train_rows.cl): a work-item per row on the CPU family, a
 * work-group of wg items per row on the GPU family. */
struct kiln__train_rows {
  bool cpu;
  size_t wg;
  char options[64];
};
void kiln__train_rows_params(const kiln_context *ctx, kiln_dtype dtype,
                             struct kiln__train_rows *p);
kiln_status kiln__train_launch_rows(struct kiln__op *op,
                                    const struct kiln__train_rows *p,
                                    cl_kernel k, size_t rows);

/* A finite float scalar (what: its name in the message). */
kiln_status kiln__train_check_finite(const char *fn, const char *what,
                                     float value);

/* The buffer_range array of the norm and check ops: ranges non-NULL when
 * num_ranges > 0, at most 65536 of them, each in range for dtype and
 * (write) writable. */
kiln_status kiln__train_check_ranges(const char *fn, kiln_queue *queue,
                                     kiln_dtype dtype, size_t num_ranges,
                                     const kiln_buffer_range *ranges,
                                     bool write);

#endif
