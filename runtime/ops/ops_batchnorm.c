/* Batch normalisation: kiln_batchnorm_train, kiln_batchnorm_inference,
 * kiln_batchnorm_backward (contracts in kiln/kiln_ops_image.h; kernels in
 * cl_kernels/image.cl, as pooling's in ops_image.c, which also checks the
 * image operands: ops_image.h). The per-channel partial sums live in the
 * queue's op workspace. */
#include "ops_image.h"

#include <math.h>
#include <stdio.h>

/* ---- per-channel vectors ------------------------------------------------- */

/* A per-channel f32 vector (named what) of count elements (why: what fixes
 * the count), readable (in) and writable (out) as asked. NULL passes when
 * optional. */
static kiln_status check_vec(const char *fn, kiln_queue *queue,
                             const char *what, const kiln_range *r,
                             size_t count, const char *why, bool optional,
                             bool in, bool out) {
  if (r == NULL && optional)
    return KILN_OK;
  kiln_status s = kiln__train_need(fn, what, r);
  char name[32];
  snprintf(name, sizeof name, "%s dtype", what);
  if (s == KILN_OK && r->dtype != KILN_F32)
    s = kiln__ops_check_dtype(fn, name, r->dtype, KILN__DT(KILN_F32));
  KILN__CHECK(s, kiln__train_same_count(fn, what, r->count, why, count));
  if (in)
    KILN__CHECK(s, kiln__ops_check_in(fn, queue, what, r->buffer, r->offset,
                                      count, KILN_F32));
  if (out)
    KILN__CHECK(s, kiln__ops_check_out(fn, queue, what, r->buffer, r->offset,
                                       count, KILN_F32));
  return s;
}

/* ---- batch normalisation ------------------------------------------------------ */

/* The CPU family's kernels (image.cl's *_planes) take pieces of at most
 * BN_SPAN elements of a plane per work-item (a multiple of 16). */
#define BN_SPAN 2048

/* Pieces per plane of x on the CPU family. */
static cl_ulong bn_pieces(const struct kiln__img *x) {
  return kiln__div_up((size_t)x->h * x->w, BN_SPAN);
}

/* How the batch statistics are split: parts per channel, each summed by a
 * work-group of p.wg items over at least 32 elements an item (GPU family),
 * or one per piece of each of the channel's planes (CPU family: n pieces
 * parts, each one work-item's). */
struct bn_plan {
  struct kiln__train_rows p;
  cl_ulong parts, m, pieces;
  size_t groups;      /* c * parts */
  size_t work_bytes;  /* parts (2 floats each), then 2c floats */
};

static kiln_status bn_plan(struct kiln__op *o, const struct kiln__img *x,
                           struct bn_plan *b) {
  kiln__train_rows_params(o->queue->ctx, x->dt, &b->p);
  b->m = (cl_ulong)x->n * x->h * x->w; /* <= the checked count */
  cl_ulong per = (cl_ulong)b->p.wg * 32, parts = b->m / per;
  b->parts = parts < 1 ? 1 : parts > 64 ? 64 : parts;
  b->pieces = bn_pieces(x);
  if (b->p.cpu)
    b->parts = (cl_ulong)x->n * b->pieces; /* <= the element count */
  size_t twice, floats;
  if (kiln__mul_overflows(x->c, (size_t)b->parts, &b->groups) ||
      kiln__mul_overflows(b->groups, 2, &twice) ||
      kiln__add_overflows(twice, 2 * x->c, &floats) ||
      kiln__mul_overflows(floats, 4, &b->work_bytes))
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: x's %zu channels are too many",
                      o->fn, x->c);
  return KILN_OK;
}

/* Begin a batch-normalisation op: the wait list, and the trace's record
 * (name, moving passes times x's bytes, flops per element). */
static kiln_status bn_begin(struct kiln__op *o, kiln_queue *queue,
                            const char *fn, const char *name,
                            const struct kiln__img *x, double passes,
                            double flops, size_t num_wait,
                            kiln_event *const *wait_list,
                            kiln_event **out_event) {
  kiln_status s = kiln__op_begin(o, queue, fn, num_wait, wait_list, out_event);
  if (s != KILN_OK)
    return s;
  size_t shape[3] = {x->n, x->c, x->h * x->w};
  kiln__op_describe(o, name, x->dt, 3, shape,
                    passes * (double)kiln_dtype_size(x->dt) * (double)x->count,
                    flops * (double)x->count);
  return KILN_OK;
}

/* The plan of the statistics and the workspace that holds their parts. */
static kiln_status bn_work(struct kiln__op *o, const struct kiln__img *x,
                           struct bn_plan *b, cl_mem *work) {
  kiln_status s = bn_plan(o, x, b);
  KILN__CHECK(s, kiln__op_workspace(o, b->work_bytes, work));
  return s;
}

/* bn_partial over every (channel, part) group; on the CPU family
 * bn_partial_planes over every piece. */
static kiln_status bn_partial(struct kiln__op *o, const struct bn_plan *b,
                              const struct kiln__img *x, cl_mem dy, cl_ulong go,
                              cl_mem stats, cl_ulong so, bool backward,
                              cl_mem work) {
  cl_ulong C = x->c, N = x->n, HW = (cl_ulong)x->h * x->w, span = BN_SPAN;
  cl_int bw = backward;
  cl_kernel k = NULL;
  size_t global;
  if (b->p.cpu) {
    kiln_status s = kiln__op_kernel(
        o, "image", b->p.options, "bn_partial_planes", &k, 13,
        KILN__ARG(x->b->cl), KILN__ARG(x->off), KILN__ARG(dy), KILN__ARG(go),
        KILN__ARG(stats), KILN__ARG(so), KILN__ARG(bw), KILN__ARG(work),
        KILN__ARG(C), KILN__ARG(N), KILN__ARG(HW), KILN__ARG(b->pieces),
        KILN__ARG(span));
    KILN__CHECK(s, kiln__train_launch_elems(o, k, b->groups));
    return s;
  }
  kiln_status s = kiln__op_kernel(
      o, "image", b->p.options, "bn_partial", &k, 12, KILN__ARG(x->b->cl),
      KILN__ARG(x->off), KILN__ARG(dy), KILN__ARG(go), KILN__ARG(stats),
      KILN__ARG(so), KILN__ARG(bw), KILN__ARG(work), KILN__ARG(C), KILN__ARG(N),
      KILN__ARG(HW), KILN__ARG(b->parts));
  if (s == KILN_OK && kiln__mul_overflows(b->groups, b->p.wg, &global))
    s = kiln__fail(KILN_ERR_INVALID_SIZE, "%s: too many work-items", o->fn);
  KILN__CHECK(s, kiln__op_launch(o, k, 1, &global, &b->p.wg));
  return s;
}

/* The CPU family's launch of a *_planes kernel over x's pieces, whose
 * last three arguments (total, pieces, span) are *pp's; elsewhere a 2-D
 * range of positions by planes. */
struct bn_pieces_args {
  cl_ulong total, pieces, span;
};

static struct bn_pieces_args bn_pieces_args(const struct kiln__img *x) {
  const cl_ulong pieces = bn_pieces(x);
  return (struct bn_pieces_args){(cl_ulong)x->n * x->c * pieces, pieces,
                                 BN_SPAN}; /* total <= the element count */
}

static kiln_status bn_launch(struct kiln__op *o, cl_kernel k, bool cpu,
                             const struct kiln__img *x,
                             const struct bn_pieces_args *pp) {
  return cpu ? kiln__train_launch_elems(o, k, pp->total)
             : kiln__train_launch_matrix(o, k, x->n * x->c, x->h * x->w);
}

/* y = (x - mean) * rstd * gamma + beta per channel; mean at (mb, mo), rstd
 * (or, from_var, the variance) at (sb, sdo). */
static kiln_status bn_apply(struct kiln__op *o, const char *options,
                            const struct kiln__img *x,
                            const struct kiln__img *y, cl_mem mb, cl_ulong mo,
                            cl_mem sb, cl_ulong sdo, bool from_var, float eps,
                            const kiln_range *gamma, const kiln_range *beta) {
  cl_mem gm = gamma != NULL ? gamma->buffer->cl : mb;
  cl_mem bm = beta != NULL ? beta->buffer->cl : mb;
  cl_ulong gmo = gamma != NULL ? gamma->offset : 0;
  cl_ulong bo = beta != NULL ? beta->offset : 0;
  cl_int fv = from_var, hg = gamma != NULL, hb = beta != NULL;
  cl_ulong C = x->c, HW = (cl_ulong)x->h * x->w;
  const bool cpu = kiln__train_cpu(o->queue->ctx);
  const struct bn_pieces_args pp = bn_pieces_args(x);
  cl_kernel k = NULL;
  /* The CPU family's kernel takes pp's three arguments after the rest. */
  kiln_status s = kiln__op_kernel(
      o, "image", options, cpu ? "bn_apply_planes" : "bn_apply", &k,
      cpu ? 21 : 18, KILN__ARG(x->b->cl), KILN__ARG(x->off),
      KILN__ARG(y->b->cl), KILN__ARG(y->off), KILN__ARG(mb), KILN__ARG(mo),
      KILN__ARG(sb), KILN__ARG(sdo), KILN__ARG(fv), KILN__ARG(eps),
      KILN__ARG(gm), KILN__ARG(gmo), KILN__ARG(hg), KILN__ARG(bm),
      KILN__ARG(bo), KILN__ARG(hb), KILN__ARG(C), KILN__ARG(HW),
      KILN__ARG(pp.total), KILN__ARG(pp.pieces), KILN__ARG(pp.span));
  KILN__CHECK(s, bn_launch(o, k, cpu, x, &pp));
  return s;
}

static kiln_status check_bn_params(const char *fn,
                                   const kiln_batchnorm_params *p) {
  kiln_status s = kiln__train_need(fn, "params", p);
  if (s == KILN_OK && !(isfinite(p->eps) && p->eps >= 0))
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: params->eps %g must be finite and >= 0", fn,
                   (double)p->eps);
  if (s == KILN_OK && !(p->momentum >= 0 && p->momentum <= 1))
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: params->momentum %g must be in [0, 1]", fn,
                   (double)p->momentum);
  return s;
}

KILN_API kiln_status kiln_batchnorm_train(
    kiln_queue *queue, const kiln_image *x_i, const kiln_range *gamma,
    const kiln_range *beta, const kiln_image *y_i,
    const kiln_range *running_mean, const kiln_range *running_var,
    const kiln_range *saved, const kiln_batchnorm_params *params,
    size_t num_wait, kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_batchnorm_train";
  struct kiln__img x, y;
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, kiln__image_check(fn, queue, "x", x_i, true, false, &x));
  KILN__CHECK(s, kiln__image_check(fn, queue, "y", y_i, false, true, &y));
  KILN__CHECK(s, kiln__image_same(fn, "y", &y, "x", &x));
  KILN__CHECK(s, check_bn_params(fn, params));
  if (s != KILN_OK)
    return s;
  const char *why = "x's channels";
  size_t c = x.c, c2 = 2 * x.c; /* 2c: the count fits in size_t */
  if (c > SIZE_MAX / 2)
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: x's channels %zu: too many",
                      fn, c);
  if ((running_mean == NULL) != (running_var == NULL))
    s = kiln__fail(KILN_ERR_NULL_POINTER,
                   "%s: %s is NULL but %s is not: update both or neither", fn,
                   running_mean == NULL ? "running_mean" : "running_var",
                   running_mean == NULL ? "running_var" : "running_mean");
  KILN__CHECK(s, check_vec(fn, queue, "gamma", gamma, c, why, true, true, false));
  KILN__CHECK(s, check_vec(fn, queue, "beta", beta, c, why, true, true, false));
  KILN__CHECK(s, check_vec(fn, queue, "running_mean", running_mean, c, why,
                           true, true, true));
  KILN__CHECK(s, check_vec(fn, queue, "running_var", running_var, c, why, true,
                           true, true));
  KILN__CHECK(s, check_vec(fn, queue, "saved", saved, c2,
                           "2 * x's channels", true, false, true));
  size_t m = x.c > 0 ? x.count / x.c : 0;
  if (s == KILN_OK && x.count > 0 && m < 2)
    s = kiln__fail(KILN_ERR_INVALID_SIZE,
                   "%s: x has %zu value per channel (n %zu x h %zu x w %zu): "
                   "batch statistics need at least 2",
                   fn, m, x.n, x.h, x.w);
  const struct kiln__img_operand ops[] = {
      IMG_OPERAND("x", x, false),
      VEC_OPERAND("gamma", gamma, c, false),
      VEC_OPERAND("beta", beta, c, false),
      IMG_OPERAND("y", y, true),
      VEC_OPERAND("running_mean", running_mean, c, true),
      VEC_OPERAND("running_var", running_var, c, true),
      VEC_OPERAND("saved", saved, c2, true)};
  KILN__CHECK(s, kiln__image_disjoint(fn, ops, 7, 0, 3));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = bn_begin(&o, queue, fn, "batchnorm_train", &x, 3, 5, num_wait,
                    wait_list, out_event)))
    return s;
  if (x.count > 0) {
    struct bn_plan b;
    cl_mem work = NULL;
    KILN__CHECK(s, bn_work(&o, &x, &b, &work));
    cl_mem stats = saved != NULL ? saved->buffer->cl : work;
    cl_ulong so = saved != NULL ? saved->offset : 2 * (cl_ulong)b.groups;
    KILN__CHECK(s, bn_partial(&o, &b, &x, x.b->cl, 0, work, 0, false, work));
    cl_kernel k = NULL;
    cl_ulong C = c, HW = (cl_ulong)x.h * x.w;
    float mf = (float)m, eps = params->eps, mom = params->momentum;
    cl_int hr = running_mean != NULL;
    cl_mem rm = hr ? running_mean->buffer->cl : work;
    cl_mem rv = hr ? running_var->buffer->cl : work;
    cl_ulong rmo = hr ? running_mean->offset : 0;
    cl_ulong rvo = hr ? running_var->offset : 0;
    KILN__CHECK(s, kiln__op_kernel(
                       &o, "image", b.p.options, "bn_finish_forward", &k, 16,
                       KILN__ARG(x.b->cl), KILN__ARG(x.off), KILN__ARG(work),
                       KILN__ARG(C), KILN__ARG(HW), KILN__ARG(b.parts),
                       KILN__ARG(mf), KILN__ARG(eps), KILN__ARG(mom),
                       KILN__ARG(hr), KILN__ARG(rm), KILN__ARG(rmo),
                       KILN__ARG(rv), KILN__ARG(rvo), KILN__ARG(stats),
                       KILN__ARG(so)));
    KILN__CHECK(s, kiln__train_launch_elems(&o, k, c));
    KILN__CHECK(s, bn_apply(&o, b.p.options, &x, &y, stats, so, stats, so + C,
                            false, eps, gamma, beta));
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_batchnorm_inference(
    kiln_queue *queue, const kiln_image *x_i, const kiln_range *gamma,
    const kiln_range *beta, const kiln_range *running_mean,
    const kiln_range *running_var, const kiln_image *y_i,
    const kiln_batchnorm_params *params, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_batchnorm_inference";
  struct kiln__img x, y;
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, kiln__image_check(fn, queue, "x", x_i, true, false, &x));
  KILN__CHECK(s, kiln__image_check(fn, queue, "y", y_i, false, true, &y));
  KILN__CHECK(s, kiln__image_same(fn, "y", &y, "x", &x));
  KILN__CHECK(s, check_bn_params(fn, params));
  if (s != KILN_OK)
    return s;
  const char *why = "x's channels";
  size_t c = x.c;
  KILN__CHECK(s, check_vec(fn, queue, "gamma", gamma, c, why, true, true, false));
  KILN__CHECK(s, check_vec(fn, queue, "beta", beta, c, why, true, true, false));
  KILN__CHECK(s, check_vec(fn, queue, "running_mean", running_mean, c, why,
                           false, true, false));
  KILN__CHECK(s, check_vec(fn, queue, "running_var", running_var, c, why,
                           false, true, false));
  const struct kiln__img_operand ops[] = {
      IMG_OPERAND("x", x, false),
      VEC_OPERAND("gamma", gamma, c, false),
      VEC_OPERAND("beta", beta, c, false),
      VEC_OPERAND("running_mean", running_mean, c, false),
      VEC_OPERAND("running_var", running_var, c, false),
      IMG_OPERAND("y", y, true)};
  KILN__CHECK(s, kiln__image_disjoint(fn, ops, 6, 0, 5));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = bn_begin(&o, queue, fn, "batchnorm_inference", &x, 2, 2, num_wait,
                    wait_list, out_event)))
    return s;
  if (x.count > 0) {
    struct kiln__train_rows p;
    kiln__train_rows_params(queue->ctx, x.dt, &p);
    s = bn_apply(&o, p.options, &x, &y, running_mean->buffer->cl,
                 running_mean->offset, running_var->buffer->cl,
                 running_var->offset, true, params->eps, gamma, beta);
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_batchnorm_backward(
    kiln_queue *queue, const kiln_image *x_i, const kiln_range *gamma,
    const kiln_range *saved, const kiln_image *dy_i, const kiln_image *dx_i,
    const kiln_range *dgamma, const kiln_range *dbeta, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_batchnorm_backward";
  struct kiln__img x, dy, dx = {0};
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, kiln__image_check(fn, queue, "x", x_i, true, false, &x));
  KILN__CHECK(s, kiln__image_check(fn, queue, "dy", dy_i, true, false, &dy));
  KILN__CHECK(s, kiln__image_same(fn, "dy", &dy, "x", &x));
  if (dx_i != NULL) {
    KILN__CHECK(s, kiln__image_check(fn, queue, "dx", dx_i, false, true, &dx));
    KILN__CHECK(s, kiln__image_same(fn, "dx", &dx, "x", &x));
  }
  if (s == KILN_OK && dx_i == NULL && dgamma == NULL && dbeta == NULL)
    s = kiln__fail(KILN_ERR_NULL_POINTER,
                   "%s: dx, dgamma and dbeta are all NULL: nothing to compute",
                   fn);
  if (s != KILN_OK)
    return s;
  const char *why = "x's channels";
  size_t c = x.c, c2 = 2 * x.c;
  if (c > SIZE_MAX / 2)
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: x's channels %zu: too many",
                      fn, c);
  KILN__CHECK(s, check_vec(fn, queue, "gamma", gamma, c, why, true, true, false));
  KILN__CHECK(s, check_vec(fn, queue, "saved", saved, c2, "2 * x's channels",
                           false, true, false));
  KILN__CHECK(s, check_vec(fn, queue, "dgamma", dgamma, c, why, true, false,
                           true));
  KILN__CHECK(s, check_vec(fn, queue, "dbeta", dbeta, c, why, true, false,
                           true));
  const struct kiln__img_operand ops[] = {
      IMG_OPERAND("x", x, false),
      VEC_OPERAND("gamma", gamma, c, false),
      VEC_OPERAND("saved", saved, c2, false),
      IMG_OPERAND("dy", dy, false),
      IMG_OPERAND("dx", dx, true),
      VEC_OPERAND("dgamma", dgamma, c, true),
      VEC_OPERAND("dbeta", dbeta, c, true)};
  KILN__CHECK(s, kiln__image_disjoint(fn, ops, 7, 3, 4));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = bn_begin(&o, queue, fn, "batchnorm_backward", &x, 5, 9, num_wait,
                    wait_list, out_event)))
    return s;
  if (x.count > 0) {
    struct bn_plan b;
    cl_mem work = NULL;
    KILN__CHECK(s, bn_work(&o, &x, &b, &work));
    cl_mem st = saved->buffer->cl;
    cl_ulong so = saved->offset, wo = 2 * (cl_ulong)b.groups, C = c;
    KILN__CHECK(s, bn_partial(&o, &b, &x, dy.b->cl, dy.off, st, so, true,
                              work));
    cl_int hg = dgamma != NULL, hb = dbeta != NULL;
    cl_mem dgm = hg ? dgamma->buffer->cl : work;
    cl_mem dbm = hb ? dbeta->buffer->cl : work;
    cl_ulong dgo = hg ? dgamma->offset : 0, dbo = hb ? dbeta->offset : 0;
    cl_kernel k = NULL;
    KILN__CHECK(s, kiln__op_kernel(&o, "image", b.p.options,
                                   "bn_finish_backward", &k, 11,
                                   KILN__ARG(work), KILN__ARG(C),
                                   KILN__ARG(b.parts), KILN__ARG(work),
                                   KILN__ARG(wo), KILN__ARG(dgm),
                                   KILN__ARG(dgo), KILN__ARG(hg),
                                   KILN__ARG(dbm), KILN__ARG(dbo),
                                   KILN__ARG(hb)));
    KILN__CHECK(s, kiln__train_launch_elems(&o, k, c));
    if (dx_i != NULL) {
      cl_mem gm = gamma != NULL ? gamma->buffer->cl : work;
      cl_ulong gmo = gamma != NULL ? gamma->offset : 0, HW = x.h * x.w;
      cl_int has_gamma = gamma != NULL;
      float inv_m = (float)(1.0 / (double)b.m);
      const struct bn_pieces_args pp = bn_pieces_args(&x);
      cl_kernel kd = NULL;
      KILN__CHECK(s, kiln__op_kernel(
                         &o, "image", b.p.options,
                         b.p.cpu ? "bn_dx_planes" : "bn_dx", &kd,
                         b.p.cpu ? 19 : 16, KILN__ARG(x.b->cl),
                         KILN__ARG(x.off), KILN__ARG(dy.b->cl),
                         KILN__ARG(dy.off), KILN__ARG(dx.b->cl),
                         KILN__ARG(dx.off), KILN__ARG(st), KILN__ARG(so),
                         KILN__ARG(work), KILN__ARG(wo), KILN__ARG(gm),
                         KILN__ARG(gmo), KILN__ARG(has_gamma),
                         KILN__ARG(inv_m), KILN__ARG(C), KILN__ARG(HW),
                         KILN__ARG(pp.total), KILN__ARG(pp.pieces),
                         KILN__ARG(pp.span)));
      KILN__CHECK(s, bn_launch(&o, kd, b.p.cpu, &x, &pp));
    }
  }
  return kiln__op_end(&o, s, out_event);
}
