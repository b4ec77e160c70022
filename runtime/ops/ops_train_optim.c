/* Training ops, optimizer side: kiln_sgd_step, kiln_adamw_step,
 * kiln_grad_norm, kiln_clip_grad_norm, kiln_has_nonfinite (contracts in
 * kiln/ops_train.h; kernels in cl_kernels/train_optim.cl, built per
 * gradient dtype; the momentum and weight-copy variants are kernels of
 * their own). */
#include "ops_train_internal.h"

#include <math.h>
#include <stdio.h>

#define CHECK(expr) KILN__CHECK(s, expr)

/* Build options for gradient dtype gt (0..2). */
static const char *optim_options(kiln_dtype gt) {
  static const char *const table[3] = {"-DGT=0", "-DGT=1", "-DGT=2"};
  return table[gt];
}

/* The step kernel's copy suffix (train_optim.cl): nc without a copy. */
static const char *copy_suffix(const kiln_buffer *w_copy, kiln_dtype dt) {
  if (w_copy == NULL)
    return "nc";
  return dt == KILN_F32 ? "f32" : dt == KILN_F16 ? "f16" : "bf16";
}

/* One optional or required buffer of an optimizer step, for the checks. */
struct slot {
  const char *what;
  const kiln_buffer *b;
  size_t off, n;
  kiln_dtype dt;
  bool written;
};

/* Check each present slot's range and access, and that no two present
 * slots overlap. */
static kiln_status check_slots(const char *fn, kiln_queue *queue,
                               const struct slot *slots, size_t count) {
  kiln_status s = KILN_OK;
  for (size_t i = 0; i < count && s == KILN_OK; i++) {
    const struct slot *a = &slots[i];
    if (a->b == NULL)
      continue;
    s = kiln__ops_check_in(fn, queue, a->what, a->b, a->off, a->n, a->dt);
    if (a->written)
      CHECK(kiln__ops_check_out(fn, queue, a->what, a->b, a->off, a->n, a->dt));
    for (size_t j = 0; j < i; j++)
      if (slots[j].b != NULL)
        CHECK(kiln__ops_check_overlap(
            fn, slots[j].what, slots[j].b, slots[j].off, slots[j].n,
            slots[j].dt, a->what, a->b, a->off, a->n, a->dt, false));
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

/* Checks shared by both steps: dtypes, n, and the buffer slots. */
static kiln_status check_step(const char *fn, kiln_queue *queue,
                              kiln_dtype grad_dtype, kiln_dtype copy_dtype,
                              const kiln_buffer *w_copy, struct slot *slots,
                              size_t count) {
  kiln_status s =
      kiln__ops_check_dtype(fn, "grad_dtype", grad_dtype, KILN__DT_FLOATS);
  if (w_copy != NULL)
    CHECK(kiln__ops_check_dtype(fn, "copy_dtype", copy_dtype, KILN__DT_FLOATS));
  if (slots[0].b == NULL && s == KILN_OK)
    s = kiln__fail(KILN_ERR_NULL_POINTER, "%s: w is NULL", fn);
  if (slots[1].b == NULL && s == KILN_OK)
    s = kiln__fail(KILN_ERR_NULL_POINTER, "%s: grad is NULL", fn);
  CHECK(check_slots(fn, queue, slots, count));
  return s;
}

KILN_API kiln_status kiln_sgd_step(
    kiln_queue *queue, const kiln_sgd_params *params, size_t n, kiln_buffer *w,
    size_t w_offset, kiln_dtype grad_dtype, const kiln_buffer *grad,
    size_t grad_offset, kiln_buffer *velocity, size_t velocity_offset,
    kiln_dtype copy_dtype, kiln_buffer *w_copy, size_t w_copy_offset,
    const kiln_buffer *skip, size_t skip_offset, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_sgd_step";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  if (s == KILN_OK && params == NULL)
    s = kiln__fail(KILN_ERR_NULL_POINTER, "%s: params is NULL", fn);
  if (s == KILN_OK) {
    s = kiln__train_check_finite(fn, "params->lr", params->lr);
    CHECK(check_scalar(fn, "momentum", params->momentum, 0, false, 1, true));
    CHECK(check_scalar(fn, "weight_decay", params->weight_decay, 0, false,
                       INFINITY, true));
    CHECK(check_scalar(fn, "grad_scale", params->grad_scale, 0, true, INFINITY,
                       true));
    if (s == KILN_OK && params->nesterov && params->momentum == 0)
      s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                     "%s: params->nesterov needs params->momentum > 0", fn);
    if (s == KILN_OK && params->momentum != 0 && velocity == NULL)
      s = kiln__fail(KILN_ERR_NULL_POINTER,
                     "%s: velocity is NULL with params->momentum %g", fn,
                     (double)params->momentum);
  }
  if (s != KILN_OK)
    return s;
  bool mom = params->momentum != 0;
  struct slot slots[] = {
      {"w", w, w_offset, n, KILN_F32, true},
      {"grad", grad, grad_offset, n, grad_dtype, false},
      {"velocity", mom ? velocity : NULL, velocity_offset, n, KILN_F32, true},
      {"w_copy", w_copy, w_copy_offset, n, copy_dtype, true},
      {"skip", skip, skip_offset, 1, KILN_U32, false},
  };
  s = check_step(fn, queue, grad_dtype, copy_dtype, w_copy, slots,
                 sizeof slots / sizeof slots[0]);
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  double per = 8.0 + (double)kiln_dtype_size(grad_dtype) + (mom ? 8.0 : 0) +
               (w_copy != NULL ? (double)kiln_dtype_size(copy_dtype) : 0);
  kiln__op_describe(&o, "sgd_step", grad_dtype, 1, &n, per * (double)n,
                    (mom ? 7.0 : 4.0) * (double)n);
  if (n > 0) {
    cl_kernel k = NULL;
    char kname[32];
    snprintf(kname, sizeof kname, "sgd_%s_%s", mom ? "mom" : "plain",
             copy_suffix(w_copy, copy_dtype));
    cl_mem vm = mom ? velocity->cl : w->cl;
    cl_mem cm = w_copy != NULL ? w_copy->cl : w->cl;
    cl_mem sm = skip != NULL ? skip->cl : w->cl;
    cl_ulong wo = w_offset, go = grad_offset, vo = mom ? velocity_offset : 0;
    cl_ulong co = w_copy != NULL ? w_copy_offset : 0;
    cl_ulong so = skip != NULL ? skip_offset : 0, nn = n;
    cl_int has_skip = skip != NULL, nest = params->nesterov;
    float lr = params->lr, mu = params->momentum, wd = params->weight_decay;
    float gs = params->grad_scale;
    CHECK(kiln__op_kernel(&o, "train_optim", optim_options(grad_dtype), kname,
                          &k, 17, KILN__ARG(w->cl), KILN__ARG(wo),
                          KILN__ARG(grad->cl), KILN__ARG(go), KILN__ARG(vm),
                          KILN__ARG(vo), KILN__ARG(cm), KILN__ARG(co),
                          KILN__ARG(sm), KILN__ARG(so), KILN__ARG(has_skip),
                          KILN__ARG(nest), KILN__ARG(lr), KILN__ARG(mu),
                          KILN__ARG(wd), KILN__ARG(gs), KILN__ARG(nn)));
    CHECK(kiln__train_launch_elems(&o, k, n));
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_adamw_step(
    kiln_queue *queue, const kiln_adamw_params *params, size_t n,
    kiln_buffer *w, size_t w_offset, kiln_dtype grad_dtype,
    const kiln_buffer *grad, size_t grad_offset, kiln_buffer *m,
    size_t m_offset, kiln_buffer *v, size_t v_offset, kiln_dtype copy_dtype,
    kiln_buffer *w_copy, size_t w_copy_offset, const kiln_buffer *skip,
    size_t skip_offset, size_t num_wait, kiln_event *const *wait_list,
    kiln_event **out_event) {
  static const char fn[] = "kiln_adamw_step";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  if (s == KILN_OK && params == NULL)
    s = kiln__fail(KILN_ERR_NULL_POINTER, "%s: params is NULL", fn);
  if (s == KILN_OK) {
    s = kiln__train_check_finite(fn, "params->lr", params->lr);
    CHECK(check_scalar(fn, "beta1", params->beta1, 0, false, 1, true));
    CHECK(check_scalar(fn, "beta2", params->beta2, 0, false, 1, true));
    CHECK(check_scalar(fn, "eps", params->eps, 0, true, INFINITY, true));
    CHECK(check_scalar(fn, "weight_decay", params->weight_decay, 0, false,
                       INFINITY, true));
    CHECK(check_scalar(fn, "grad_scale", params->grad_scale, 0, true, INFINITY,
                       true));
    if (s == KILN_OK && params->step == 0)
      s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                     "%s: params->step is 0: the first step is 1", fn);
  }
  if (s == KILN_OK && m == NULL)
    s = kiln__fail(KILN_ERR_NULL_POINTER, "%s: m is NULL", fn);
  if (s == KILN_OK && v == NULL)
    s = kiln__fail(KILN_ERR_NULL_POINTER, "%s: v is NULL", fn);
  if (s != KILN_OK)
    return s;
  struct slot slots[] = {
      {"w", w, w_offset, n, KILN_F32, true},
      {"grad", grad, grad_offset, n, grad_dtype, false},
      {"m", m, m_offset, n, KILN_F32, true},
      {"v", v, v_offset, n, KILN_F32, true},
      {"w_copy", w_copy, w_copy_offset, n, copy_dtype, true},
      {"skip", skip, skip_offset, 1, KILN_U32, false},
  };
  s = check_step(fn, queue, grad_dtype, copy_dtype, w_copy, slots,
                 sizeof slots / sizeof slots[0]);
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  double per = 24.0 + (double)kiln_dtype_size(grad_dtype) +
               (w_copy != NULL ? (double)kiln_dtype_size(copy_dtype) : 0);
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
    snprintf(kname, sizeof kname, "adamw_%s", copy_suffix(w_copy, copy_dtype));
    cl_mem cm = w_copy != NULL ? w_copy->cl : w->cl;
    cl_mem sm = skip != NULL ? skip->cl : w->cl;
    cl_ulong wo = w_offset, go = grad_offset, mo = m_offset, vo = v_offset;
    cl_ulong co = w_copy != NULL ? w_copy_offset : 0;
    cl_ulong so = skip != NULL ? skip_offset : 0, nn = n;
    cl_int has_skip = skip != NULL;
    CHECK(kiln__op_kernel(
        &o, "train_optim", optim_options(grad_dtype), kname, &k, 22,
        KILN__ARG(w->cl), KILN__ARG(wo), KILN__ARG(grad->cl), KILN__ARG(go),
        KILN__ARG(m->cl), KILN__ARG(mo), KILN__ARG(v->cl), KILN__ARG(vo),
        KILN__ARG(cm), KILN__ARG(co), KILN__ARG(sm), KILN__ARG(so),
        KILN__ARG(has_skip), KILN__ARG(decay), KILN__ARG(omb1), KILN__ARG(b2),
        KILN__ARG(omb2), KILN__ARG(eps), KILN__ARG(step_size), KILN__ARG(bc2s),
        KILN__ARG(gs), KILN__ARG(nn)));
    CHECK(kiln__train_launch_elems(&o, k, n));
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

static double range_elems(size_t num_ranges, const kiln_buffer_range *ranges) {
  double t = 0;
  for (size_t i = 0; i < num_ranges; i++)
    t += (double)ranges[i].count;
  return t;
}

KILN_API kiln_status kiln_grad_norm(
    kiln_queue *queue, kiln_dtype dtype, size_t num_ranges,
    const kiln_buffer_range *ranges, kiln_buffer *norm, size_t norm_offset,
    size_t num_wait, kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_grad_norm";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  CHECK(kiln__ops_check_dtype(fn, "dtype", dtype, KILN__DT_FLOATS));
  CHECK(kiln__train_check_ranges(fn, queue, dtype, num_ranges, ranges, false));
  CHECK(kiln__ops_check_out(fn, queue, "norm", norm, norm_offset, 1, KILN_F32));
  for (size_t i = 0; i < num_ranges && s == KILN_OK; i++)
    s = kiln__ops_check_overlap(fn, "a range", ranges[i].buffer,
                                ranges[i].offset, ranges[i].count, dtype,
                                "norm", norm, norm_offset, 1, KILN_F32, false);
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  double elems = range_elems(num_ranges, ranges);
  size_t shape = (size_t)elems;
  kiln__op_describe(&o, "grad_norm", dtype, 1, &shape,
                    elems * (double)kiln_dtype_size(dtype), 2.0 * elems);
  size_t parts = 0;
  for (size_t i = 0; i < num_ranges; i++) {
    size_t it, ch;
    norm_split(ranges[i].count, &it, &ch);
    parts += it * 64;
  }
  const char *options = optim_options(dtype);
  cl_mem ws = NULL;
  CHECK(kiln__op_workspace(&o, (parts ? parts : 1) * 4, &ws));
  cl_ulong po = 0;
  for (size_t i = 0; i < num_ranges && s == KILN_OK; i++) {
    size_t it, ch;
    norm_split(ranges[i].count, &it, &ch);
    if (it == 0)
      continue;
    cl_kernel k = NULL;
    cl_ulong xo = ranges[i].offset, nn = ranges[i].count, cc = ch, nch = it;
    CHECK(kiln__op_kernel(&o, "train_optim", options, "sumsq_partial", &k, 7,
                          KILN__ARG(ranges[i].buffer->cl), KILN__ARG(xo),
                          KILN__ARG(nn), KILN__ARG(cc), KILN__ARG(nch),
                          KILN__ARG(ws), KILN__ARG(po)));
    CHECK(kiln__op_launch_1d(&o, k, it * 64,
                             kiln__ops_local_size(queue->ctx, 64)));
    po += it * 64;
  }
  cl_kernel kf = NULL;
  cl_ulong np = parts, no = norm_offset;
  size_t one = 1;
  CHECK(kiln__op_kernel(&o, "train_optim", options, "norm_final", &kf, 4,
                        KILN__ARG(ws), KILN__ARG(np), KILN__ARG(norm->cl),
                        KILN__ARG(no)));
  CHECK(kiln__op_launch(&o, kf, 1, &one, &one));
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status
kiln_clip_grad_norm(kiln_queue *queue, kiln_dtype dtype, size_t num_ranges,
                    const kiln_buffer_range *ranges, const kiln_buffer *norm,
                    size_t norm_offset, float max_norm, size_t num_wait,
                    kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_clip_grad_norm";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  CHECK(kiln__ops_check_dtype(fn, "dtype", dtype, KILN__DT_FLOATS));
  if (s == KILN_OK && !(isfinite(max_norm) && max_norm > 0))
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: max_norm %g must be finite and > 0", fn,
                   (double)max_norm);
  CHECK(kiln__train_check_ranges(fn, queue, dtype, num_ranges, ranges, true));
  CHECK(kiln__ops_check_in(fn, queue, "norm", norm, norm_offset, 1, KILN_F32));
  for (size_t i = 0; i < num_ranges && s == KILN_OK; i++)
    s = kiln__ops_check_overlap(fn, "a range", ranges[i].buffer,
                                ranges[i].offset, ranges[i].count, dtype,
                                "norm", norm, norm_offset, 1, KILN_F32, false);
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  double elems = range_elems(num_ranges, ranges);
  size_t shape = (size_t)elems;
  kiln__op_describe(&o, "clip_grad_norm", dtype, 1, &shape,
                    2.0 * elems * (double)kiln_dtype_size(dtype), elems);
  const char *options = optim_options(dtype);
  for (size_t i = 0; i < num_ranges && s == KILN_OK; i++) {
    if (ranges[i].count == 0)
      continue;
    cl_kernel k = NULL;
    cl_ulong xo = ranges[i].offset, nn = ranges[i].count, no = norm_offset;
    CHECK(kiln__op_kernel(&o, "train_optim", options, "clip_scale", &k, 6,
                          KILN__ARG(ranges[i].buffer->cl), KILN__ARG(xo),
                          KILN__ARG(nn), KILN__ARG(norm->cl), KILN__ARG(no),
                          KILN__ARG(max_norm)));
    CHECK(kiln__train_launch_elems(&o, k, ranges[i].count));
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_has_nonfinite(
    kiln_queue *queue, kiln_dtype dtype, size_t num_ranges,
    const kiln_buffer_range *ranges, kiln_buffer *flag, size_t flag_offset,
    size_t num_wait, kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_has_nonfinite";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  CHECK(kiln__ops_check_dtype(fn, "dtype", dtype, KILN__DT_FLOATS));
  CHECK(kiln__train_check_ranges(fn, queue, dtype, num_ranges, ranges, false));
  CHECK(kiln__ops_check_in(fn, queue, "flag", flag, flag_offset, 1, KILN_U32));
  CHECK(kiln__ops_check_out(fn, queue, "flag", flag, flag_offset, 1, KILN_U32));
  for (size_t i = 0; i < num_ranges && s == KILN_OK; i++)
    s = kiln__ops_check_overlap(fn, "a range", ranges[i].buffer,
                                ranges[i].offset, ranges[i].count, dtype,
                                "flag", flag, flag_offset, 1, KILN_U32, false);
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  double elems = range_elems(num_ranges, ranges);
  size_t shape = (size_t)elems;
  kiln__op_describe(&o, "has_nonfinite", dtype, 1, &shape,
                    elems * (double)kiln_dtype_size(dtype), elems);
  const char *options = optim_options(dtype);
  cl_kernel kz = NULL;
  cl_ulong fo = flag_offset;
  size_t one = 1;
  CHECK(kiln__op_kernel(&o, "train_optim", options, "flag_zero", &kz, 2,
                        KILN__ARG(flag->cl), KILN__ARG(fo)));
  CHECK(kiln__op_launch(&o, kz, 1, &one, &one));
  for (size_t i = 0; i < num_ranges && s == KILN_OK; i++) {
    if (ranges[i].count == 0)
      continue;
    cl_kernel k = NULL;
    cl_ulong xo = ranges[i].offset, nn = ranges[i].count;
    CHECK(kiln__op_kernel(&o, "train_optim", options, "nonfinite_check", &k, 5,
                          KILN__ARG(ranges[i].buffer->cl), KILN__ARG(xo),
                          KILN__ARG(nn), KILN__ARG(flag->cl), KILN__ARG(fo)));
    CHECK(kiln__train_launch_elems(&o, k, ranges[i].count));
  }
  return kiln__op_end(&o, s, out_event);
}

void kiln__ops_warm_train_optim(const kiln_context *ctx, kiln__warm_add_fn add,
                                void *user) {
  (void)ctx;
  for (int g = KILN_F32; g <= KILN_BF16; g++)
    add(user, "train_optim", optim_options((kiln_dtype)g));
}
