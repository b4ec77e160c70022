/* Image ops: kiln_pool2d, kiln_pool2d_backward, kiln_batchnorm_train,
 * kiln_batchnorm_inference, kiln_batchnorm_backward (contracts in
 * kiln/kiln_ops_image.h; kernels in cl_kernels/image.cl, one program per
 * storage dtype, the same on both kernel families). This file holds the
 * operand checks (ops_image.h) and pooling; batch normalisation is
 * ops_batchnorm.c. */
#include "ops_image.h"

#include <stdio.h>

/* ---- operands -------------------------------------------------------------- */

/* im (named what) is a non-NULL NCHW image of a float dtype whose element
 * count does not overflow, in range of its buffer, readable (in) and
 * writable (out) as asked. */
kiln_status kiln__image_check(const char *fn, kiln_queue *queue,
                              const char *what, const kiln_image *im, bool in,
                              bool out, struct kiln__img *r) {
  kiln_status s = kiln__train_need(fn, what, im);
  if (s != KILN_OK)
    return s;
  *r = (struct kiln__img){.b = im->buffer,
                          .off = im->offset,
                          .n = im->n,
                          .c = im->c,
                          .h = im->h,
                          .w = im->w,
                          .dt = im->dtype};
  if (im->layout != KILN_NCHW)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s->layout %d: the image ops take NCHW (%d)", fn,
                      what, (int)im->layout, (int)KILN_NCHW);
  char name[32];
  snprintf(name, sizeof name, "%s dtype", what);
  KILN__CHECK(s, kiln__ops_check_dtype(fn, name, im->dtype, KILN__DT_FLOATS));
  size_t nc, hw;
  if (s == KILN_OK && (kiln__mul_overflows(im->n, im->c, &nc) ||
                       kiln__mul_overflows(im->h, im->w, &hw) ||
                       kiln__mul_overflows(nc, hw, &r->count)))
    s = kiln__fail(KILN_ERR_INVALID_SIZE,
                   "%s: %s's %zu x %zu x %zu x %zu elements overflow size_t", fn,
                   what, im->n, im->c, im->h, im->w);
  if (in)
    KILN__CHECK(s, kiln__ops_check_in(fn, queue, what, r->b, r->off, r->count,
                                      r->dt));
  if (out)
    KILN__CHECK(s, kiln__ops_check_out(fn, queue, what, r->b, r->off,
                                       r->count, r->dt));
  return s;
}

/* a and b have one shape and one dtype. */
kiln_status kiln__image_same(const char *fn, const char *a_what,
                             const struct kiln__img *a, const char *b_what,
                             const struct kiln__img *b) {
  if (a->n != b->n || a->c != b->c || a->h != b->h || a->w != b->w)
    return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                      "%s: %s is %zu x %zu x %zu x %zu but %s is %zu x %zu x "
                      "%zu x %zu",
                      fn, a_what, a->n, a->c, a->h, a->w, b_what, b->n, b->c,
                      b->h, b->w);
  return kiln__train_same_dtype(fn, a_what, a->dt, b_what, b->dt);
}

/* No output overlaps another operand, except operands same_a and same_b
 * (indices; -1: none), which may be the very same range (in place). */
kiln_status kiln__image_disjoint(const char *fn,
                                 const struct kiln__img_operand *ops, size_t k,
                                 int same_a, int same_b) {
  kiln_status s = KILN_OK;
  for (size_t i = 0; i < k; i++)
    for (size_t j = i + 1; j < k; j++) {
      if (ops[i].b == NULL || ops[j].b == NULL || !(ops[i].out || ops[j].out))
        continue;
      bool same_ok = ((int)i == same_a && (int)j == same_b) ||
                     ((int)i == same_b && (int)j == same_a);
      KILN__CHECK(s, kiln__ops_check_overlap(
                         fn, ops[i].what, ops[i].b, ops[i].off, ops[i].n,
                         ops[i].dt, ops[j].what, ops[j].b, ops[j].off, ops[j].n,
                         ops[j].dt, same_ok));
    }
  return s;
}

/* ---- pooling ---------------------------------------------------------------- */

/* The window of a pooling in force (stride defaults applied) and its
 * output size. */
struct pool_geo {
  cl_ulong kh, kw, sh, sw, ph, pw, oh, ow;
};

/* One dimension: kernel k, stride s (0: k), padding p over an extent of n
 * pixels; *out receives the output size. dim is "h" or "w". */
static kiln_status pool_dim(const char *fn, const char *dim, size_t n,
                            size_t k, size_t s, size_t p, size_t *stride,
                            size_t *out) {
  if (k == 0)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT, "%s: params->kernel_%s is 0",
                      fn, dim);
  if (p > k / 2)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: params->pad_%s %zu exceeds half of params->kernel_%s "
                      "%zu",
                      fn, dim, p, dim, k);
  if (n == 0)
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: x's %s is 0: an image needs "
                      "pixels", fn, dim);
  *stride = s != 0 ? s : k;
  size_t padded; /* p <= k / 2, so 2 p does not overflow */
  if (kiln__add_overflows(n, 2 * p, &padded))
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: x's %s %zu + 2 * params->pad_%s overflows", fn, dim,
                      n, dim);
  if (k > padded)
    return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                      "%s: params->kernel_%s %zu exceeds x's padded %s %zu (%zu "
                      "+ 2 * pad %zu): no output",
                      fn, dim, k, dim, padded, n, p);
  *out = (padded - k) / *stride + 1;
  return KILN_OK;
}

/* The pooling's checks, shared by forward and backward: op, params, and the
 * input (x, n x c x h x w) and output (y) images' shapes and dtypes. */
static kiln_status pool_check(const char *fn, kiln_pool_op op,
                              const kiln_pool2d_params *p, const char *x_what,
                              const struct kiln__img *x, const char *y_what,
                              const struct kiln__img *y, struct pool_geo *g) {
  if (op != KILN_POOL_MAX && op != KILN_POOL_MEAN)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: op %d is not KILN_POOL_MAX or KILN_POOL_MEAN", fn,
                      (int)op);
  kiln_status s = kiln__train_need(fn, "params", p);
  if (s != KILN_OK)
    return s;
  size_t sh = 0, sw = 0, oh = 0, ow = 0;
  KILN__CHECK(s, pool_dim(fn, "h", x->h, p->kernel_h, p->stride_h, p->pad_h,
                          &sh, &oh));
  KILN__CHECK(s, pool_dim(fn, "w", x->w, p->kernel_w, p->stride_w, p->pad_w,
                          &sw, &ow));
  KILN__CHECK(s, kiln__train_same_dtype(fn, y_what, y->dt, x_what, x->dt));
  if (s == KILN_OK &&
      (y->n != x->n || y->c != x->c || y->h != oh || y->w != ow))
    s = kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                   "%s: %s is %zu x %zu x %zu x %zu but pooling %s (%zu x %zu "
                   "x %zu x %zu) gives %zu x %zu x %zu x %zu",
                   fn, y_what, y->n, y->c, y->h, y->w, x_what, x->n, x->c,
                   x->h, x->w, x->n, x->c, oh, ow);
  *g = (struct pool_geo){p->kernel_h, p->kernel_w, sh, sw, p->pad_h, p->pad_w,
                         oh, ow};
  return s;
}

/* Launch pool_forward or pool_backward over items work-items with the
 * arguments (a, ao, b, bo[, c, co]) before the common tail. */
static kiln_status pool_launch(struct kiln__op *o, const char *name,
                               kiln_dtype dt, bool backward, cl_mem a,
                               cl_ulong ao, cl_mem b, cl_ulong bo, cl_mem c,
                               cl_ulong co, kiln_pool_op op, bool exclude,
                               const struct kiln__img *x,
                               const struct pool_geo *g, size_t items) {
  struct kiln__train_rows p;
  kiln__train_rows_params(o->queue->ctx, dt, &p);
  cl_int is_max = op == KILN_POOL_MAX, ex = exclude;
  cl_ulong total = items, H = x->h, W = x->w;
  cl_kernel k = NULL;
  kiln_status s;
  if (backward)
    s = kiln__op_kernel(o, "image", p.options, name, &k, 19, KILN__ARG(a),
                        KILN__ARG(ao), KILN__ARG(b), KILN__ARG(bo),
                        KILN__ARG(c), KILN__ARG(co), KILN__ARG(is_max),
                        KILN__ARG(ex), KILN__ARG(total), KILN__ARG(H),
                        KILN__ARG(W), KILN__ARG(g->oh), KILN__ARG(g->ow),
                        KILN__ARG(g->kh), KILN__ARG(g->kw), KILN__ARG(g->sh),
                        KILN__ARG(g->sw), KILN__ARG(g->ph), KILN__ARG(g->pw));
  else
    s = kiln__op_kernel(o, "image", p.options, name, &k, 17, KILN__ARG(a),
                        KILN__ARG(ao), KILN__ARG(b), KILN__ARG(bo),
                        KILN__ARG(is_max), KILN__ARG(ex), KILN__ARG(total),
                        KILN__ARG(H), KILN__ARG(W), KILN__ARG(g->oh),
                        KILN__ARG(g->ow), KILN__ARG(g->kh), KILN__ARG(g->kw),
                        KILN__ARG(g->sh), KILN__ARG(g->sw), KILN__ARG(g->ph),
                        KILN__ARG(g->pw));
  KILN__CHECK(s, kiln__train_launch_elems(o, k, items));
  return s;
}

KILN_API kiln_status kiln_pool2d(kiln_queue *queue, kiln_pool_op op,
                                 const kiln_image *x_i, const kiln_image *y_i,
                                 const kiln_pool2d_params *params,
                                 size_t num_wait, kiln_event *const *wait_list,
                                 kiln_event **out_event) {
  static const char fn[] = "kiln_pool2d";
  struct kiln__img x, y;
  struct pool_geo g;
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, kiln__image_check(fn, queue, "x", x_i, true, false, &x));
  KILN__CHECK(s, kiln__image_check(fn, queue, "y", y_i, false, true, &y));
  KILN__CHECK(s, pool_check(fn, op, params, "x", &x, "y", &y, &g));
  const struct kiln__img_operand ops[] = {IMG_OPERAND("x", x, false),
                                          IMG_OPERAND("y", y, true)};
  KILN__CHECK(s, kiln__image_disjoint(fn, ops, 2, -1, -1));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  size_t shape[3] = {x.n * x.c, y.h, y.w};
  kiln__op_describe(&o, op == KILN_POOL_MAX ? "pool2d.max" : "pool2d.mean",
                    x.dt, 3, shape,
                    (double)kiln_dtype_size(x.dt) * (double)(x.count + y.count),
                    (double)y.count * (double)(g.kh * g.kw));
  /* The CPU family: an output row per work-item (image.cl says why). */
  const bool rows = kiln__train_cpu(queue->ctx);
  if (y.count > 0)
    s = pool_launch(&o, rows ? "pool_forward_rows" : "pool_forward", x.dt,
                    false, x.b->cl, x.off, y.b->cl, y.off, NULL, 0, op,
                    params->exclude_padding, &x, &g,
                    rows ? y.n * y.c * y.h : y.count);
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_pool2d_backward(
    kiln_queue *queue, kiln_pool_op op, const kiln_image *x_i,
    const kiln_image *dy_i, const kiln_image *dx_i,
    const kiln_pool2d_params *params, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_pool2d_backward";
  struct kiln__img x = {0}, dy, dx;
  struct pool_geo g;
  kiln_status s = kiln__ops_check_queue(fn, queue);
  bool has_x = x_i != NULL || op == KILN_POOL_MAX;
  if (has_x)
    KILN__CHECK(s, kiln__image_check(fn, queue, "x", x_i, true, false, &x));
  KILN__CHECK(s, kiln__image_check(fn, queue, "dy", dy_i, true, false, &dy));
  KILN__CHECK(s, kiln__image_check(fn, queue, "dx", dx_i, false, true, &dx));
  if (has_x)
    KILN__CHECK(s, kiln__image_same(fn, "dx", &dx, "x", &x));
  KILN__CHECK(s, pool_check(fn, op, params, "dx", &dx, "dy", &dy, &g));
  if (s != KILN_OK)
    return s;
  const struct kiln__img_operand ops[] = {IMG_OPERAND("x", x, false),
                                          IMG_OPERAND("dy", dy, false),
                                          IMG_OPERAND("dx", dx, true)};
  KILN__CHECK(s, kiln__image_disjoint(fn, ops, 3, -1, -1));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  size_t shape[3] = {dx.n * dx.c, dx.h, dx.w};
  kiln__op_describe(
      &o, op == KILN_POOL_MAX ? "pool2d_backward.max" : "pool2d_backward.mean",
      dx.dt, 3, shape,
      (double)kiln_dtype_size(dx.dt) *
          (double)(dx.count * (has_x ? 2 : 1) + dy.count),
      (double)dy.count * (double)(g.kh * g.kw));
  /* Windows that do not overlap: one work-item per window scatters, after
   * zeroing dx unless the windows tile it. Else a gather per element. The
   * CPU family takes a plane per work-item (image.cl), zeroing it and
   * adding the windows' shares in order, when that rounds as the gather
   * does: each element receives one share (disjoint windows), or the sums
   * stay in f32 storage. */
  bool disjoint = g.sh >= g.kh && g.sw >= g.kw;
  bool tiles = disjoint && g.sh == g.kh && g.sw == g.kw && g.ph == 0 &&
               g.pw == 0 && g.oh * g.kh == dx.h && g.ow * g.kw == dx.w;
  bool planes = kiln__train_cpu(queue->ctx) &&
                (disjoint || dx.dt == KILN_F32);
  cl_mem xm = has_x ? x.b->cl : dy.b->cl;
  cl_ulong xo = has_x ? x.off : 0;
  if (planes) {
    /* 2x2 stride 2 unpadded windows: an output row per work-item. */
    const bool two = g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 &&
                     g.ph == 0 && g.pw == 0;
    if (dx.count > 0)
      s = pool_launch(&o, two ? "pool_backward_2x2" : "pool_backward_planes",
                      dx.dt, true, xm, xo, dy.b->cl, dy.off, dx.b->cl, dx.off,
                      op, params->exclude_padding, &dx, &g,
                      two ? dy.n * dy.c * dy.h : dx.n * dx.c);
    return kiln__op_end(&o, s, out_event);
  }
  if (dx.count > 0 && disjoint && !tiles) {
    struct kiln__train_rows p;
    kiln__train_rows_params(queue->ctx, dx.dt, &p);
    cl_ulong total = dx.count;
    cl_kernel k = NULL;
    s = kiln__op_kernel(&o, "image", p.options, "image_zero", &k, 3,
                        KILN__ARG(dx.b->cl), KILN__ARG(dx.off),
                        KILN__ARG(total));
    KILN__CHECK(s, kiln__train_launch_elems(&o, k, dx.count));
  }
  if (dx.count > 0)
    KILN__CHECK(s, pool_launch(&o, disjoint ? "pool_backward_tiled"
                                            : "pool_backward",
                               dx.dt, true, xm, xo, dy.b->cl, dy.off,
                               dx.b->cl, dx.off, op, params->exclude_padding,
                               &dx, &g, disjoint ? dy.count : dx.count));
  return kiln__op_end(&o, s, out_event);
}

void kiln__ops_warm_image(const kiln_context *ctx, kiln__warm_add_fn add,
                          void *user) {
  for (int d = KILN_F32; d <= KILN_BF16; d++) {
    struct kiln__train_rows p;
    kiln__train_rows_params(ctx, (kiln_dtype)d, &p);
    add(user, "image", p.options);
  }
}
