/* What the training-op modules (ops_train_*.c) share: launch shapes, the
 * row-kernel parameters and argument checks of their own. Not installed;
 * part of the ops room. */
#ifndef KILN_OPS_TRAIN_INTERNAL_H
#define KILN_OPS_TRAIN_INTERNAL_H

#include "kiln/kiln_ops_train.h"
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

/* Row kernels (train_rows.cl, and likewise rows.cl and scan.cl's chunks):
 * a work-item per row on the CPU family, a work-group of wg items per row
 * on the GPU family; options "-DDT=dtype -DFAMILY=cpu -DWG=wg". */
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

/* ---- operand descriptors (kiln/kiln_tensor.h) --------------------------- */
/* what names the operand in messages ("logits"). */

/* A required descriptor is not NULL. */
kiln_status kiln__train_need(const char *fn, const char *what,
                             const void *desc);

/* A matrix operand: not NULL, not packed (kiln__ops_check_unpacked),
 * row-major and not transposed. */
kiln_status kiln__train_check_row_major(const char *fn, const char *what,
                                        const kiln_matrix *m);

/* A matrix operand: kiln__train_check_row_major, and one the training
 * kernels read as they are: packed rows (ld 0 or cols), not batched; and
 * rows * cols does not overflow. */
kiln_status kiln__train_check_matrix(const char *fn, const char *what,
                                     const kiln_matrix *m);

/* Operands that must agree: a dtype, a count, a matrix's shape and dtype.
 * KILN_ERR_SHAPE_MISMATCH naming both otherwise. */
kiln_status kiln__train_same_dtype(const char *fn, const char *what,
                                   kiln_dtype dtype, const char *other,
                                   kiln_dtype other_dtype);
kiln_status kiln__train_same_count(const char *fn, const char *what,
                                   size_t count, const char *other,
                                   size_t other_count);
kiln_status kiln__train_same_matrix(const char *fn, const char *what,
                                    const kiln_matrix *m, const char *other,
                                    const kiln_matrix *o);

/* A range that must hold one element of dtype (a mean, a norm, a count, a
 * flag): dtype not dtype is KILN_ERR_INVALID_ARGUMENT, count not 1
 * KILN_ERR_SHAPE_MISMATCH. Not NULL (checked first). */
kiln_status kiln__train_check_scalar(const char *fn, const char *what,
                                     const kiln_range *r, kiln_dtype dtype);

/* The range array of the norm and check ops: ranges non-NULL when
 * num_ranges > 0, at most 65536 of them, all of ranges[0]'s dtype (a float
 * one), each in range and (write) writable, and (write) not overlapping. */
kiln_status kiln__train_check_ranges(const char *fn, kiln_queue *queue,
                                     size_t num_ranges,
                                     const kiln_range *ranges, bool write);

#endif
