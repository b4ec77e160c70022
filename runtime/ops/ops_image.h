/* What ops_image.c (the operand checks, pooling) shares with
 * ops_batchnorm.c (batch normalisation): image operands checked and
 * unpacked, and the overlap check over a call's operands. */
#ifndef KILN_OPS_IMAGE_INTERNAL_H
#define KILN_OPS_IMAGE_INTERNAL_H

#include "kiln/kiln_ops_image.h"
#include "ops_train_internal.h"

/* An image operand, checked and unpacked. */
struct kiln__img {
  kiln_buffer *b;
  size_t off, n, c, h, w, count;
  kiln_dtype dt;
};

/* im (named what) is a non-NULL NCHW image of a float dtype whose element
 * count does not overflow, in range of its buffer, readable (in) and
 * writable (out) as asked; *r its unpacked form. */
kiln_status kiln__image_check(const char *fn, kiln_queue *queue,
                              const char *what, const kiln_image *im, bool in,
                              bool out, struct kiln__img *r);

/* a and b have one shape and one dtype. */
kiln_status kiln__image_same(const char *fn, const char *a_what,
                             const struct kiln__img *a, const char *b_what,
                             const struct kiln__img *b);

/* An operand for the overlap check: absent when b is NULL. */
struct kiln__img_operand {
  const char *what;
  const kiln_buffer *b;
  size_t off, n;
  kiln_dtype dt;
  bool out;
};
#define IMG_OPERAND(what, i, out) {(what), (i).b, (i).off, (i).count, (i).dt, (out)}
#define VEC_OPERAND(what, r, count, out)                                       \
  {(what), (r) != NULL ? (r)->buffer : NULL, (r) != NULL ? (r)->offset : 0,    \
   (count), KILN_F32, (out)}

/* No output overlaps another operand, except operands same_a and same_b
 * (indices; -1: none), which may be the very same range (in place). */
kiln_status kiln__image_disjoint(const char *fn,
                                 const struct kiln__img_operand *ops, size_t k,
                                 int same_a, int same_b);

#endif
