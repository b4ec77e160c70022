/* Training ops, optimizer side: kiln_sgd_step, kiln_adamw_step,
 * kiln_grad_norm, kiln_clip_grad_norm, kiln_has_nonfinite (contracts in
 * kiln/kiln_ops_train.h; kernels in cl_kernels/train_optim.cl, built per
 * gradient dtype; the momentum and weight-copy variants are kernels of
 * their own). */
#include "ops_train_internal.h"

#include <math.h>
#include <stdio.h>

/* Build options for gradient dtype gt (0..2). */
static const char *optim_options(kiln_dtype gt) {
  static const char *const table[3] = {"-DGT=0", "-DGT=1", "-DGT=2"};
  return table[gt];
}

/* The step kernel's copy suffix (train_optim.cl): nc without a copy. */
static const char *copy_suffix(const kiln_range *w_copy) {
  if (w_copy == NULL)
    return "nc";
  kiln_dtype dt = w_copy->dtype;
  return dt == KILN_F32 ? "f32" : dt == KILN_F16 ? "f16" : "bf16";
}

/* One optional or required operand of an optimizer step, for the checks:
 * the dtypes it may have; one: a single element (the skip flag), else w's
 * count. */
struct slot {
  const char *what;
  const kiln_range *r;
  unsigned dtypes;
  bool one;
  bool written;
};

/* Check each present slot's dtype, count, range and access, and that no
 * two present slots overlap. slots[0] is w, slots[1] grad (required). */
static kiln_status check_slots(const char *fn, kiln_queue *queue,
                               const struct slot *slots, size_t count) {
  kiln_status s = kiln__train_need(fn, slots[0].what, slots[0].r);
  KILN__CHECK(s, kiln__train_need(fn, slots[1].what, slots[1].r));
  if (s != KILN_OK)
    return s;
  size_t n = slots[0].r->count;
  for (size_t i = 0; i < count && s == KILN_OK; i++) {
    const struct slot *a = &slots[i];
    if (a->r == NULL)
      continue;
    char name[24];
    snprintf(name, sizeof name, "%s dtype", a->what);
    if (a->one)
      s = kiln__train_check_scalar(fn, a->what, a->r, KILN_U32);
    else {
      s = kiln__ops_check_dtype(fn, name, a->r->dtype, a->dtypes);
      KILN__CHECK(s, kiln__train_same_count(fn, a->what, a->r->count, "w's count", n));
    }
  }
  for (size_t i = 0; i < count && s == KILN_OK; i++) {
    const struct slot *a = &slots[i];
    if (a->r == NULL)
      continue;
    const kiln_range *r = a->r;
    s = kiln__ops_check_in(fn, queue, a->what, r->buffer, r->offset, r->count,
                           r->dtype);
    if (a->written)
      KILN__CHECK(s, kiln__ops_check_out(fn, queue, a->what, r->buffer, r->offset,
                                r->count, r->dtype));
    for (size_t j = 0; j < i; j++) {
      const kiln_range *o = slots[j].r;
      if (o != NULL)
        KILN__CHECK(s, kiln__ops_check_overlap(fn, slots[j].what, o->buffer, o->offset,
                                      o->count, o->dtype, a->what, r->buffer,
                                      r->offset, r->count, r->dtype, false));
    }
  }
  return s;
}

static kiln_status check_scalar(const char *fn, const char *what, float v,
                                float lo, bool lo_open, float hi,
                                bool hi_open) {
  bool ok = isfinite(v) && (lo_open ? v > lo : v >= lo) &&
            (hi_open ? v < hi : v <= hi);
  if (!ok)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: params->%s %g must be finite and in %c%g, %g%c", fn,
                      what, (double)v, lo_open ? '(' : '[', (double)lo,
                      (double)hi, hi_open ? ')' : ']');
  return KILN_OK;
}

#define F32_ONLY KILN__DT(KILN_F32)

KILN_API kiln_status kiln_sgd_step(
    kiln_queue *queue, const kiln_range *grad_r, const kiln_range *skip_r,
    const kiln_range *w_r, const kiln_range *velocity_r,
    const kiln_range *w_copy_r, const kiln_sgd_params *params, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_sgd_step";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  if (s == KILN_OK && params == NULL)
    s = kiln__fail(KILN_ERR_NULL_POINTER, "%s: params is NULL", fn);
  if (s == KILN_OK) {
    s = kiln__train_check_finite(fn, "params->lr", params->lr);
    KILN__CHECK(s, check_scalar(fn, "momentum", params->momentum, 0, false, 1, true));
    KILN__CHECK(s, check_scalar(fn, "weight_decay", params->weight_decay, 0, false,
                       INFINITY, true));
    KILN__CHECK(s, check_scalar(fn, "grad_scale", params->grad_scale, 0, true, INFINITY,
                       true));
    if (s == KILN_OK && params->nesterov && params->momentum == 0)
      s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                     "%s: params->nesterov needs params->momentum > 0", fn);
    if (s == KILN_OK && params->momentum != 0 && velocity_r == NULL)
      s = kiln__fail(KILN_ERR_NULL_POINTER,
                     "%s: velocity is NULL with params->momentum %g", fn,
                     (double)params->momentum);
  }
  if (s != KILN_OK)
    return s;
  bool mom = params->momentum != 0;
  const struct slot slots[] = {
      {"w", w_r, F32_ONLY, false, true},
      {"grad", grad_r, KILN__DT_FLOATS, false, false},
      {"velocity", mom ? velocity_r : NULL, F32_ONLY, false, true},
      {"w_copy", w_copy_r, KILN__DT_FLOATS, false, true},
      {"skip", skip_r, 0, true, false},
  };
  s = check_slots(fn, queue, slots, sizeof slots / sizeof slots[0]);
  if (s != KILN_OK)
    return s;
  size_t n = w_r->count;
  kiln_dtype grad_dtype = grad_r->dtype;
  const kiln_buffer *grad = grad_r->buffer;
  const kiln_buffer *skip = skip_r != NULL ? skip_r->buffer : NULL;
  kiln_buffer *w = w_r->buffer;
  kiln_buffer *velocity = velocity_r != NULL ? velocity_r->buffer : NULL;
  kiln_buffer *w_copy = w_copy_r != NULL ? w_copy_r->buffer : NULL;
  size_t w_offset = w_r->offset, grad_offset = grad_r->offset;
  size_t velocity_offset = velocity_r != NULL ? velocity_r->offset : 0;
  size_t w_copy_offset = w_copy_r != NULL ? w_copy_r->offset : 0;
  size_t skip_offset = skip_r != NULL ? skip_r->offset : 0;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  double per = 8.0 + (double)kiln_dtype_size(grad_dtype) + (mom ? 8.0 : 0) +
               (w_copy != NULL ? (double)kiln_dtype_size(w_copy_r->dtype) : 0);
  kiln__op_describe(&o, "sgd_step", grad_dtype, 1, &n, per * (double)n,
                    (mom ? 7.0 : 4.0) * (double)n);
  if (n > 0) {
    cl_kernel k = NULL;
    char kname[32];
    snprintf(kname, sizeof kname, "sgd_%s_%s", mom ? "mom" : "plain",
             copy_suffix(w_copy_r));
    cl_mem vm = mom ? velocity->cl : w->cl;
    cl_mem cm = w_copy != NULL ? w_copy->cl : w->cl;
    cl_mem sm = skip != NULL ? skip->cl : w->cl;
    cl_ulong wo = w_offset, go = grad_offset, vo = mom ? velocity_offset : 0;
    cl_ulong co = w_copy != NULL ? w_copy_offset : 0;
    cl_ulong so = skip != NULL ? skip_offset : 0, nn = n;
    cl_int has_skip = skip != NULL, nest = params->nesterov;
    float lr = params->lr, mu = params->momentum, wd = params->weight_decay;
    float gs = params->grad_scale;
    KILN__CHECK(s, kiln__op_kernel(&o, "train_optim", optim_options(grad_dtype), kname,
                          &k, 17, KILN__ARG(w->cl), KILN__ARG(wo),
                          KILN__ARG(grad->cl), KILN__ARG(go), KILN__ARG(vm),
                          KILN__ARG(vo), KILN__ARG(cm), KILN__ARG(co),
                          KILN__ARG(sm), KILN__ARG(so), KILN__ARG(has_skip),
                          KILN__ARG(nest), KILN__ARG(lr), KILN__ARG(mu),
                          KILN__ARG(wd), KILN__ARG(gs), KILN__ARG(nn)));
    KILN__CHECK(s, kiln__train_launch_elems(&o, k, n));
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_adamw_step(
    kiln_queue *queue, const kiln_range *grad_r, const kiln_range *skip_r,
    const kiln_range *w_r, const kiln_range *m_r, const kiln_range *v_r,
    const kiln_range *w_copy_r, const kiln_adamw_params *params,
    size_t num_wait, kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_adamw_step";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  if (s == KILN_OK && params == NULL)
    s = kiln__fail(KILN_ERR_NULL_POINTER, "%s: params is NULL", fn);
  if (s == KILN_OK) {
    s = kiln__train_check_finite(fn, "params->lr", params->lr);
    KILN__CHECK(s, check_scalar(fn, "beta1", params->beta1, 0, false, 1, true));
    KILN__CHECK(s, check_scalar(fn, "beta2", params->beta2, 0, false, 1, true));
    KILN__CHECK(s, check_scalar(fn, "eps", params->eps, 0, true, INFINITY, true));
    KILN__CHECK(s, check_scalar(fn, "weight_decay", params->weight_decay, 0, false,
                       INFINITY, true));
    KILN__CHECK(s, check_scalar(fn, "grad_scale", params->grad_scale, 0, true, INFINITY,
                       true));
    if (s == KILN_OK && params->step == 0)
      s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                     "%s: params->step is 0: the first step is 1", fn);
  }
  KILN__CHECK(s, kiln__train_need(fn, "m", m_r));
  KILN__CHECK(s, kiln__train_need(fn, "v", v_r));
  if (s != KILN_OK)
    return s;
  const struct slot slots[] = {
      {"w", w_r, F32_ONLY, false, true},
      {"grad", grad_r, KILN__DT_FLOATS, false, false},
      {"m", m_r, F32_ONLY, false, true},
      {"v", v_r, F32_ONLY, false, true},
      {"w_copy", w_copy_r, KILN__DT_FLOATS, false, true},
      {"skip", skip_r, 0, true, false},
  };
  s = check_slots(fn, queue, slots, sizeof slots / sizeof slots[0]);
  if (s != KILN_OK)
    return s;
  size_t n = w_r->count;
  kiln_dtype grad_dtype = grad_r->dtype;
  const kiln_buffer *grad = grad_r->buffer;
  const kiln_buffer *skip = skip_r != NULL ? skip_r->buffer : NULL;
  kiln_buffer *w = w_r->buffer, *m = m_r->buffer, *v = v_r->buffer;
  kiln_buffer *w_copy = w_copy_r != NULL ? w_copy_r->buffer : NULL;
  size_t w_offset = w_r->offset, grad_offset = grad_r->offset;
  size_t m_offset = m_r->offset, v_offset = v_r->offset;
  size_t w_copy_offset = w_copy_r != NULL ? w_copy_r->offset : 0;
  size_t skip_offset = skip_r != NULL ? skip_r->offset : 0;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  double per = 24.0 + (double)kiln_dtype_size(grad_dtype) +
               (w_copy != NULL ? (double)kiln_dtype_size(w_copy_r->dtype) : 0);
  kiln__op_describe(&o, "adamw_step", grad_dtype, 1, &n, per * (double)n,
                    16.0 * (double)n);
  if (n > 0) {
    /* Bias corrections in double, as PyTorch computes them in Python. */
    double t = (double)params->step;
    double bc1 = 1.0 - pow((double)params->beta1, t);
    double bc2 = 1.0 - pow((double)params->beta2, t);
    float decay = (float)(1.0 - (double)params->lr * params->weight_decay);
    float omb1 = (float)(1.0 - (double)params->beta1);
    float omb2 = (float)(1.0 - (double)params->beta2);
    float step_size = (float)((double)params->lr / bc1);
    float bc2s = (float)sqrt(bc2);
    float b2 = params->beta2, eps = params->eps, gs = params->grad_scale;
    cl_kernel k = NULL;
    char kname[32];
    snprintf(kname, sizeof kname, "adamw_%s", copy_suffix(w_copy_r));
    cl_mem cm = w_copy != NULL ? w_copy->cl : w->cl;
    cl_mem sm = skip != NULL ? skip->cl : w->cl;
    cl_ulong wo = w_offset, go = grad_offset, mo = m_offset, vo = v_offset;
    cl_ulong co = w_copy != NULL ? w_copy_offset : 0;
    cl_ulong so = skip != NULL ? skip_offset : 0, nn = n;
    cl_int has_skip = skip != NULL;
    KILN__CHECK(s, kiln__op_kernel(
        &o, "train_optim", optim_options(grad_dtype), kname, &k, 22,
        KILN__ARG(w->cl), KILN__ARG(wo), KILN__ARG(grad->cl), KILN__ARG(go),
        KILN__ARG(m->cl), KILN__ARG(mo), KILN__ARG(v->cl), KILN__ARG(vo),
        KILN__ARG(cm), KILN__ARG(co), KILN__ARG(sm), KILN__ARG(so),
        KILN__ARG(has_skip), KILN__ARG(decay), KILN__ARG(omb1), KILN__ARG(b2),
        KILN__ARG(omb2), KILN__ARG(eps), KILN__ARG(step_size), KILN__ARG(bc2s),
        KILN__ARG(gs), KILN__ARG(nn)));
    KILN__CHECK(s, kiln__train_launch_elems(&o, k, n));
  }
  return kiln__op_end(&o, s, out_event);
}

/* How kiln_grad_norm splits a range of n elements: *chunks chunks of
 * *chunk elements (a multiple of 64), at most 64 chunks and at least 16384
 * elements per chunk unless the range is smaller, each summed by 64 lanes
 * (sumsq_partial): 64 partials per chunk. Depends on n alone, so the
 * norm's bits do not depend on the device. */
static void norm_split(size_t n, size_t *chunks, size_t *chunk) {
  size_t c = n / 16384 + (n % 16384 != 0);
  if (c > 64)
    c = 64;
  *chunks = c;
  size_t per = c ? n / c + (n % c != 0) : 0;
  *chunk = (per + 63) / 64 * 64;
}

/* The dtype of a checked range list (f32 for an empty one: nothing is read,
 * and the f32 program is the likeliest to exist). */
static kiln_dtype ranges_dtype(size_t num_ranges, const kiln_range *ranges) {
  return num_ranges > 0 ? ranges[0].dtype : KILN_F32;
}

/* The checks of an op over a list of ranges (written or only read) and one
 * element r of dtype dt, named what, that the op reads (in) and/or writes
 * (out) and that no range may overlap. */
static kiln_status check_list(const char *fn, kiln_queue *queue,
                              size_t num_ranges, const kiln_range *ranges,
                              bool written, const char *what,
                              const kiln_range *r, kiln_dtype dt, bool in,
                              bool out) {
  kiln_status s =
      kiln__train_check_ranges(fn, queue, num_ranges, ranges, written);
  KILN__CHECK(s, kiln__train_check_scalar(fn, what, r, dt));
  if (s != KILN_OK)
    return s;
  kiln_dtype dtype = ranges_dtype(num_ranges, ranges);
  if (in)
    s = kiln__ops_check_in(fn, queue, what, r->buffer, r->offset, 1, dt);
  if (out)
    KILN__CHECK(s, kiln__ops_check_out(fn, queue, what, r->buffer, r->offset,
                                       1, dt));
  for (size_t i = 0; i < num_ranges && s == KILN_OK; i++)
    s = kiln__ops_check_overlap(fn, "a range", ranges[i].buffer,
                                ranges[i].offset, ranges[i].count, dtype, what,
                                r->buffer, r->offset, 1, dt, false);
  return s;
}

/* Begin an op over a list of ranges: the wait list, and the trace's record
 * (name, passes over the ranges' bytes, flops per element). */
static kiln_status list_begin(struct kiln__op *o, kiln_queue *queue,
                              const char *fn, const char *name,
                              size_t num_ranges, const kiln_range *ranges,
                              double passes, double flops, size_t num_wait,
                              kiln_event *const *wait_list,
                              kiln_event **out_event) {
  kiln_status s = kiln__op_begin(o, queue, fn, num_wait, wait_list, out_event);
  if (s != KILN_OK)
    return s;
  kiln_dtype dtype = ranges_dtype(num_ranges, ranges);
  double elems = 0;
  for (size_t i = 0; i < num_ranges; i++)
    elems += (double)ranges[i].count;
  size_t shape = (size_t)elems;
  kiln__op_describe(o, name, dtype, 1, &shape,
                    passes * elems * (double)kiln_dtype_size(dtype),
                    flops * elems);
  return KILN_OK;
}

KILN_API kiln_status kiln_grad_norm(kiln_queue *queue, const kiln_range *ranges,
                                    size_t num_ranges, const kiln_range *norm_r,
                                    size_t num_wait,
                                    kiln_event *const *wait_list,
                                    kiln_event **out_event) {
  static const char fn[] = "kiln_grad_norm";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, check_list(fn, queue, num_ranges, ranges, false, "norm",
                            norm_r, KILN_F32, false, true));
  if (s != KILN_OK)
    return s;
  kiln_dtype dtype = ranges_dtype(num_ranges, ranges);
  kiln_buffer *norm = norm_r->buffer;
  size_t norm_offset = norm_r->offset;
  struct kiln__op o;
  if ((s = list_begin(&o, queue, fn, "grad_norm", num_ranges, ranges, 1, 2,
                      num_wait, wait_list, out_event)))
    return s;
  size_t parts = 0;
  for (size_t i = 0; i < num_ranges; i++) {
    size_t it, ch;
    norm_split(ranges[i].count, &it, &ch);
    parts += it * 64;
  }
  const char *options = optim_options(dtype);
  cl_mem ws = NULL;
  KILN__CHECK(s, kiln__op_workspace(&o, (parts ? parts : 1) * 4, &ws));
  cl_ulong po = 0;
  for (size_t i = 0; i < num_ranges && s == KILN_OK; i++) {
    size_t it, ch;
    norm_split(ranges[i].count, &it, &ch);
    if (it == 0)
      continue;
    cl_kernel k = NULL;
    cl_ulong xo = ranges[i].offset, nn = ranges[i].count, cc = ch, nch = it;
    KILN__CHECK(s, kiln__op_kernel(&o, "train_optim", options, "sumsq_partial", &k, 7,
                          KILN__ARG(ranges[i].buffer->cl), KILN__ARG(xo),
                          KILN__ARG(nn), KILN__ARG(cc), KILN__ARG(nch),
                          KILN__ARG(ws), KILN__ARG(po)));
    KILN__CHECK(s, kiln__op_launch_1d(&o, k, it * 64,
                             kiln__ops_local_size(queue->ctx, 64)));
    po += it * 64;
  }
  cl_kernel kf = NULL;
  cl_ulong np = parts, no = norm_offset;
  size_t one = 1;
  KILN__CHECK(s, kiln__op_kernel(&o, "train_optim", options, "norm_final", &kf, 4,
                        KILN__ARG(ws), KILN__ARG(np), KILN__ARG(norm->cl),
                        KILN__ARG(no)));
  KILN__CHECK(s, kiln__op_launch(&o, kf, 1, &one, &one));
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_clip_grad_norm(
    kiln_queue *queue, const kiln_range *norm_r, const kiln_range *ranges,
    size_t num_ranges, float max_norm, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_clip_grad_norm";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  if (s == KILN_OK && !(isfinite(max_norm) && max_norm > 0))
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: max_norm %g must be finite and > 0", fn,
                   (double)max_norm);
  KILN__CHECK(s, check_list(fn, queue, num_ranges, ranges, true, "norm",
                            norm_r, KILN_F32, true, false));
  if (s != KILN_OK)
    return s;
  kiln_dtype dtype = ranges_dtype(num_ranges, ranges);
  const kiln_buffer *norm = norm_r->buffer;
  size_t norm_offset = norm_r->offset;
  struct kiln__op o;
  if ((s = list_begin(&o, queue, fn, "clip_grad_norm", num_ranges, ranges, 2,
                      1, num_wait, wait_list, out_event)))
    return s;
  const char *options = optim_options(dtype);
  for (size_t i = 0; i < num_ranges && s == KILN_OK; i++) {
    if (ranges[i].count == 0)
      continue;
    cl_kernel k = NULL;
    cl_ulong xo = ranges[i].offset, nn = ranges[i].count, no = norm_offset;
    KILN__CHECK(s, kiln__op_kernel(&o, "train_optim", options, "clip_scale", &k, 6,
                          KILN__ARG(ranges[i].buffer->cl), KILN__ARG(xo),
                          KILN__ARG(nn), KILN__ARG(norm->cl), KILN__ARG(no),
                          KILN__ARG(max_norm)));
    KILN__CHECK(s, kiln__train_launch_elems(&o, k, ranges[i].count));
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status
kiln_has_nonfinite(kiln_queue *queue, const kiln_range *ranges,
                   size_t num_ranges, const kiln_range *flag_r, size_t num_wait,
                   kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_has_nonfinite";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, check_list(fn, queue, num_ranges, ranges, false, "flag",
                            flag_r, KILN_U32, true, true));
  if (s != KILN_OK)
    return s;
  kiln_dtype dtype = ranges_dtype(num_ranges, ranges);
  kiln_buffer *flag = flag_r->buffer;
  size_t flag_offset = flag_r->offset;
  struct kiln__op o;
  if ((s = list_begin(&o, queue, fn, "has_nonfinite", num_ranges, ranges, 1, 1,
                      num_wait, wait_list, out_event)))
    return s;
  const char *options = optim_options(dtype);
  cl_kernel kz = NULL;
  cl_ulong fo = flag_offset;
  size_t one = 1;
  KILN__CHECK(s, kiln__op_kernel(&o, "train_optim", options, "flag_zero", &kz, 2,
                        KILN__ARG(flag->cl), KILN__ARG(fo)));
  KILN__CHECK(s, kiln__op_launch(&o, kz, 1, &one, &one));
  for (size_t i = 0; i < num_ranges && s == KILN_OK; i++) {
    if (ranges[i].count == 0)
      continue;
    cl_kernel k = NULL;
    cl_ulong xo = ranges[i].offset, nn = ranges[i].count;
    KILN__CHECK(s, kiln__op_kernel(&o, "train_optim", options, "nonfinite_check", &k, 5,
                          KILN__ARG(ranges[i].buffer->cl), KILN__ARG(xo),
                          KILN__ARG(nn), KILN__ARG(flag->cl), KILN__ARG(fo)));
    KILN__CHECK(s, kiln__train_launch_elems(&o, k, ranges[i].count));
  }
  return kiln__op_end(&o, s, out_event);
}

void kiln__ops_warm_train_optim(const kiln_context *ctx, kiln__warm_add_fn add,
                                void *user) {
  (void)ctx;
  for (int g = KILN_F32; g <= KILN_BF16; g++)
    add(user, "train_optim", optim_options((kiln_dtype)g));
}
