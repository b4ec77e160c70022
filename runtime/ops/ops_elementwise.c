/* Elementwise ops and casts: kiln_unary, kiln_binary, kiln_binary_scalar,
 * kiln_axpy, kiln_scale, kiln_fill, kiln_cast (contracts in
 * kiln/kiln_ops.h).
 *
 * On the CPU family every kernel here maps a work-item to 16 consecutive
 * elements, in groups of the profile's elementwise_wg (cl_kernels/
 * elementwise.cl, cast.cl). On the GPU family elementwise.cl's kernels have
 * a parameter space (work-group size, vectors per work-item, vector width:
 * below), whose point comes from a tuning file or the profile (one element
 * per work-item in groups of elementwise_wg); casts keep that default.
 * elementwise.cl is built once per storage dtype (-DDT=n), so a program
 * holding only f32 code is all an f32 user ever compiles. */
#include "ops_internal.h"

#include <stdio.h>
#include <string.h>

/* Per op: its kernel in elementwise.cl, its trace name and rough FLOPs per
 * element, for the trace's GFLOP/s (transcendental functions count as the
 * handful of operations their polynomials take). */
static const struct {
  const char *kernel, *trace;
  double flops;
} unary_ops[] = {
    [KILN_UNARY_NEG] = {"unary_neg", "unary.neg", 1},
    [KILN_UNARY_ABS] = {"unary_abs", "unary.abs", 1},
    [KILN_UNARY_EXP] = {"unary_exp", "unary.exp", 10},
    [KILN_UNARY_LOG] = {"unary_log", "unary.log", 10},
    [KILN_UNARY_SQRT] = {"unary_sqrt", "unary.sqrt", 1},
    [KILN_UNARY_RELU] = {"unary_relu", "unary.relu", 1},
    [KILN_UNARY_GELU] = {"unary_gelu", "unary.gelu", 20},
    [KILN_UNARY_SIGMOID] = {"unary_sigmoid", "unary.sigmoid", 13},
    [KILN_UNARY_TANH] = {"unary_tanh", "unary.tanh", 10},
};
/* Per op: kernel and trace name of kiln_binary, then of kiln_binary_scalar. */
static const struct {
  const char *kernel, *trace, *scalar_kernel, *scalar_trace;
} binary_ops[] = {
    [KILN_BINARY_ADD] = {"binary_add", "binary.add", "binary_scalar_add",
                         "binary_scalar.add"},
    [KILN_BINARY_SUB] = {"binary_sub", "binary.sub", "binary_scalar_sub",
                         "binary_scalar.sub"},
    [KILN_BINARY_MUL] = {"binary_mul", "binary.mul", "binary_scalar_mul",
                         "binary_scalar.mul"},
    [KILN_BINARY_DIV] = {"binary_div", "binary.div", "binary_scalar_div",
                         "binary_scalar.div"},
    [KILN_BINARY_MAX] = {"binary_max", "binary.max", "binary_scalar_max",
                         "binary_scalar.max"},
    [KILN_BINARY_MIN] = {"binary_min", "binary.min", "binary_scalar_min",
                         "binary_scalar.min"},
};

enum { K_WG = KILN__ELEMENTWISE_WG, K_WPT = KILN__ELEMENTWISE_WPT,
       K_VW = KILN__ELEMENTWISE_VW };

/* How a call of an elementwise.cl kernel runs: its program's options and
 * the shape of its launch. */
struct config {
  const char *options; /* a static string or the variant's */
  size_t local;    /* work-group size */
  size_t per_item; /* elements per work-item */
};

/* The CPU family's options per storage dtype: static strings, since
 * formatting them on every call showed up in PoCL's launch cost. Each
 * work-item takes 16 elements. */
static const char *const cpu_options[] = {
    [KILN_F32] = "-DDT=0 -DVEC=16", [KILN_F16] = "-DDT=1 -DVEC=16",
    [KILN_BF16] = "-DDT=2 -DVEC=16", [KILN_I32] = "-DDT=3 -DVEC=16",
    [KILN_U32] = "-DDT=4 -DVEC=16",
};

static bool cpu_family(const kiln_context *ctx) {
  return kiln__ops_tuning(ctx)->family == KILN_FAMILY_CPU;
}

/* elementwise.cl's configuration for dtype on ctx: the CPU family's fixed
 * one, or the GPU family's variant (tune/tune.h). */
static kiln_status get_config(const kiln_context *ctx, kiln_dtype dtype,
                              struct config *c) {
  if (cpu_family(ctx)) {
    c->options = cpu_options[dtype];
    c->local = kiln__ops_local_size(
        ctx, kiln__ops_tune(kiln__ops_tuning(ctx)->elementwise_wg, 256));
    c->per_item = 16;
    return KILN_OK;
  }
  const struct kiln__variant *v;
  kiln_status s = kiln__variant_get(ctx, KILN__TUNED_ELEMENTWISE, dtype, &v);
  if (s != KILN_OK)
    return s;
  c->options = v->options; /* lives as long as ctx */
  c->local = v->point.v[K_WG];
  c->per_item = (size_t)v->point.v[K_WPT] * v->point.v[K_VW];
  return s;
}

/* Work-items of c->per_item elements, in groups of c->local. */
static kiln_status launch(struct kiln__op *op, cl_kernel k, size_t n,
                          const struct config *c) {
  size_t items = n / c->per_item + (n % c->per_item != 0);
  size_t global;
  if (!kiln__ops_round_up(items, c->local, &global))
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: n %zu is too large", op->fn,
                      n);
  return kiln__op_launch(op, k, 1, &global, &c->local);
}

static double dsize(kiln_dtype dtype) { return (double)kiln_dtype_size(dtype); }

KILN_API kiln_status kiln_unary(kiln_queue *queue, kiln_unary_op op,
                                const kiln_range *xr, const kiln_range *yr,
                                size_t num_wait, kiln_event *const *wait_list,
                                kiln_event **out_event) {
  static const char fn[] = "kiln_unary";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  if (s == KILN_OK && (unsigned)op > KILN_UNARY_TANH)
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: op %d is not a kiln_unary_op", fn, (int)op);
  KILN__CHECK(s, kiln__ops_check_map_ranges(fn, queue, "x", xr, "y", yr,
                                            KILN__DT_FLOATS));
  if (s != KILN_OK)
    return s;
  const size_t n = xr->count;
  const kiln_dtype dtype = xr->dtype;
  const kiln_buffer *x = xr->buffer;
  kiln_buffer *y = yr->buffer;
  const size_t x_offset = xr->offset, y_offset = yr->offset;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  kiln__op_describe(&o, unary_ops[op].trace, dtype, 1, &n, 2 * dsize(dtype) * n,
                    unary_ops[op].flops * n);
  if (n > 0) {
    cl_kernel k = NULL;
    struct config c;
    s = get_config(queue->ctx, dtype, &c);
    cl_ulong xo = x_offset, yo = y_offset, nn = n;
    KILN__CHECK(s, kiln__op_kernel(
        &o, "elementwise", c.options,
        unary_ops[op].kernel, &k, 5, KILN__ARG(x->cl), KILN__ARG(xo),
        KILN__ARG(y->cl), KILN__ARG(yo), KILN__ARG(nn)));
    KILN__CHECK(s, launch(&o, k, n, &c));
  }
  return kiln__op_end(&o, s, out_event);
}

static kiln_status check_binary_op(const char *fn, kiln_binary_op op) {
  if ((unsigned)op > KILN_BINARY_MIN)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: op %d is not a kiln_binary_op", fn, (int)op);
  return KILN_OK;
}

/* The operands of y = f(a, b), where b may be y itself (axpy): one count,
 * a floating dtype ("<a_what>.dtype"), a and b read, y written and disjoint
 * from a and b, or the very same range where same_ok; in that order. */
static kiln_status check_ab_y(const char *fn, kiln_queue *queue,
                              const char *a_what, const kiln_range *a,
                              const char *b_what, const kiln_range *b,
                              const kiln_range *y, bool same_ok) {
  kiln_status s = kiln__ops_check_agree(fn, a_what, a, b_what, b);
  KILN__CHECK(s, kiln__ops_check_agree(fn, a_what, a, "y", y));
  if (s != KILN_OK)
    return s;
  const size_t n = a->count;
  const kiln_dtype dt = a->dtype;
  char what[64];
  snprintf(what, sizeof what, "%s.dtype", a_what);
  s = kiln__ops_check_dtype(fn, what, dt, KILN__DT_FLOATS);
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, a_what, a->buffer, a->offset, n, dt));
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, b_what, b->buffer, b->offset, n, dt));
  KILN__CHECK(s, kiln__ops_check_out(fn, queue, "y", y->buffer, y->offset, n, dt));
  KILN__CHECK(s, kiln__ops_check_overlap(fn, a_what, a->buffer, a->offset, n, dt,
                                         "y", y->buffer, y->offset, n, dt, same_ok));
  if (b != y)
    KILN__CHECK(s, kiln__ops_check_overlap(fn, b_what, b->buffer, b->offset, n, dt,
                                           "y", y->buffer, y->offset, n, dt, same_ok));
  return s;
}

KILN_API kiln_status kiln_binary(kiln_queue *queue, kiln_binary_op op,
                                 const kiln_range *ar, const kiln_range *br,
                                 const kiln_range *yr, size_t num_wait,
                                 kiln_event *const *wait_list,
                                 kiln_event **out_event) {
  static const char fn[] = "kiln_binary";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, check_binary_op(fn, op));
  KILN__CHECK(s, check_ab_y(fn, queue, "a", ar, "b", br, yr, true));
  if (s != KILN_OK)
    return s;
  const size_t n = ar->count;
  const kiln_dtype dtype = ar->dtype;
  const kiln_buffer *a = ar->buffer, *b = br->buffer;
  kiln_buffer *y = yr->buffer;
  const size_t a_offset = ar->offset, b_offset = br->offset,
               y_offset = yr->offset;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  kiln__op_describe(&o, binary_ops[op].trace, dtype, 1, &n,
                    3 * dsize(dtype) * n, (double)n);
  if (n > 0) {
    cl_kernel k = NULL;
    struct config c;
    s = get_config(queue->ctx, dtype, &c);
    cl_ulong ao = a_offset, bo = b_offset, yo = y_offset, nn = n;
    KILN__CHECK(s, kiln__op_kernel(&o, "elementwise",
                          c.options,
                          binary_ops[op].kernel, &k, 7, KILN__ARG(a->cl),
                          KILN__ARG(ao), KILN__ARG(b->cl), KILN__ARG(bo),
                          KILN__ARG(y->cl), KILN__ARG(yo), KILN__ARG(nn)));
    KILN__CHECK(s, launch(&o, k, n, &c));
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_binary_scalar(kiln_queue *queue, kiln_binary_op op,
                                        const kiln_range *ar,
                                        const kiln_range *yr, float scalar,
                                        size_t num_wait,
                                        kiln_event *const *wait_list,
                                        kiln_event **out_event) {
  static const char fn[] = "kiln_binary_scalar";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, check_binary_op(fn, op));
  KILN__CHECK(s, kiln__ops_check_map_ranges(fn, queue, "a", ar, "y", yr,
                                            KILN__DT_FLOATS));
  if (s != KILN_OK)
    return s;
  const size_t n = ar->count;
  const kiln_dtype dtype = ar->dtype;
  const kiln_buffer *a = ar->buffer;
  kiln_buffer *y = yr->buffer;
  const size_t a_offset = ar->offset, y_offset = yr->offset;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  kiln__op_describe(&o, binary_ops[op].scalar_trace, dtype, 1, &n,
                    2 * dsize(dtype) * n, (double)n);
  if (n > 0) {
    cl_kernel k = NULL;
    struct config c;
    s = get_config(queue->ctx, dtype, &c);
    cl_ulong ao = a_offset, yo = y_offset, nn = n;
    KILN__CHECK(s, kiln__op_kernel(
        &o, "elementwise", c.options,
        binary_ops[op].scalar_kernel, &k, 6, KILN__ARG(a->cl), KILN__ARG(ao),
        KILN__ARG(scalar), KILN__ARG(y->cl), KILN__ARG(yo), KILN__ARG(nn)));
    KILN__CHECK(s, launch(&o, k, n, &c));
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_axpy(kiln_queue *queue, const kiln_range *xr,
                               const kiln_range *yr, float alpha,
                               size_t num_wait, kiln_event *const *wait_list,
                               kiln_event **out_event) {
  static const char fn[] = "kiln_axpy";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, check_ab_y(fn, queue, "x", xr, "y", yr, yr, false));
  if (s != KILN_OK)
    return s;
  const size_t n = xr->count;
  const kiln_dtype dtype = xr->dtype;
  const kiln_buffer *x = xr->buffer;
  kiln_buffer *y = yr->buffer;
  const size_t x_offset = xr->offset, y_offset = yr->offset;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  kiln__op_describe(&o, "axpy", dtype, 1, &n, 3 * dsize(dtype) * n,
                    2.0 * (double)n);
  if (n > 0) {
    cl_kernel k = NULL;
    struct config c;
    s = get_config(queue->ctx, dtype, &c);
    cl_ulong xo = x_offset, yo = y_offset, nn = n;
    KILN__CHECK(s, kiln__op_kernel(&o, "elementwise",
                          c.options, "axpy", &k, 6,
                          KILN__ARG(alpha), KILN__ARG(x->cl), KILN__ARG(xo),
                          KILN__ARG(y->cl), KILN__ARG(yo), KILN__ARG(nn)));
    KILN__CHECK(s, launch(&o, k, n, &c));
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_scale(kiln_queue *queue, const kiln_range *xr,
                                float alpha, size_t num_wait,
                                kiln_event *const *wait_list,
                                kiln_event **out_event) {
  static const char fn[] = "kiln_scale";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, kiln__ops_check_desc(fn, "x", xr));
  if (s != KILN_OK)
    return s;
  const size_t n = xr->count;
  const kiln_dtype dtype = xr->dtype;
  kiln_buffer *x = xr->buffer;
  const size_t x_offset = xr->offset;
  KILN__CHECK(s, kiln__ops_check_dtype(fn, "x.dtype", dtype, KILN__DT_FLOATS));
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "x", x, x_offset, n, dtype));
  KILN__CHECK(s, kiln__ops_check_out(fn, queue, "x", x, x_offset, n, dtype));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  kiln__op_describe(&o, "scale", dtype, 1, &n, 2 * dsize(dtype) * n,
                    (double)n);
  if (n > 0) {
    cl_kernel k = NULL;
    struct config c;
    s = get_config(queue->ctx, dtype, &c);
    cl_ulong xo = x_offset, nn = n;
    KILN__CHECK(s, kiln__op_kernel(
        &o, "elementwise", c.options, "scale", &k,
        4, KILN__ARG(alpha), KILN__ARG(x->cl), KILN__ARG(xo), KILN__ARG(nn)));
    KILN__CHECK(s, launch(&o, k, n, &c));
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_fill(kiln_queue *queue, const kiln_range *yr,
                               const void *value, size_t num_wait,
                               kiln_event *const *wait_list,
                               kiln_event **out_event) {
  static const char fn[] = "kiln_fill";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, kiln__ops_check_desc(fn, "y", yr));
  KILN__CHECK(s, kiln__ops_check_desc(fn, "value", value));
  if (s != KILN_OK)
    return s;
  const size_t n = yr->count;
  const kiln_dtype dtype = yr->dtype;
  kiln_buffer *y = yr->buffer;
  const size_t y_offset = yr->offset;
  KILN__CHECK(s, kiln__ops_check_dtype(fn, "y.dtype", dtype,
                              KILN__DT_FLOATS | KILN__DT(KILN_I32) |
                                  KILN__DT(KILN_U32)));
  /* One element of y's dtype, bit for bit (every fill dtype is 2 or 4
   * bytes; the kernels take the bits as an integer). */
  uint32_t bits = 0;
  if (s == KILN_OK && kiln_dtype_size(dtype) == 2) {
    uint16_t half;
    memcpy(&half, value, sizeof half);
    bits = half;
  } else if (s == KILN_OK) {
    memcpy(&bits, value, sizeof bits);
  }
  KILN__CHECK(s, kiln__ops_check_out(fn, queue, "y", y, y_offset, n, dtype));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  kiln__op_describe(&o, "fill", dtype, 1, &n, dsize(dtype) * n, 0);
  if (n > 0) {
    cl_kernel k = NULL;
    struct config c;
    s = get_config(queue->ctx, KILN_F32, &c);
    cl_ulong yo = y_offset, nn = n;
    /* The fill kernels move raw bits: any build of elementwise.cl has them,
     * and the f32 one is the likeliest to exist already. */
    bool wide = kiln_dtype_size(dtype) == 4;
    cl_uint v32 = bits;
    cl_ushort v16 = (cl_ushort)bits;
    KILN__CHECK(s, kiln__op_kernel(&o, "elementwise",
                          c.options,
                          wide ? "fill32" : "fill16", &k, 4,
                          wide ? KILN__ARG(v32) : KILN__ARG(v16),
                          KILN__ARG(y->cl), KILN__ARG(yo), KILN__ARG(nn)));
    KILN__CHECK(s, launch(&o, k, n, &c));
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_cast(kiln_queue *queue, const kiln_range *xr,
                               const kiln_range *yr, size_t num_wait,
                               kiln_event *const *wait_list,
                               kiln_event **out_event) {
  static const char fn[] = "kiln_cast";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  KILN__CHECK(s, kiln__ops_check_desc(fn, "x", xr));
  KILN__CHECK(s, kiln__ops_check_desc(fn, "y", yr));
  if (s == KILN_OK && xr->count != yr->count)
    s = kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                   "%s: x (%zu elements) and y (%zu elements) disagree: a "
                   "cast needs one count",
                   fn, xr->count, yr->count);
  if (s != KILN_OK)
    return s;
  const size_t n = xr->count;
  const kiln_dtype x_dtype = xr->dtype, y_dtype = yr->dtype;
  const kiln_buffer *x = xr->buffer;
  kiln_buffer *y = yr->buffer;
  const size_t x_offset = xr->offset, y_offset = yr->offset;
  KILN__CHECK(s, kiln__ops_check_dtype(fn, "x.dtype", x_dtype, KILN__DT_FLOATS));
  KILN__CHECK(s, kiln__ops_check_dtype(fn, "y.dtype", y_dtype, KILN__DT_FLOATS));
  KILN__CHECK(s, kiln__ops_check_in(fn, queue, "x", x, x_offset, n, x_dtype));
  KILN__CHECK(s, kiln__ops_check_out(fn, queue, "y", y, y_offset, n, y_dtype));
  KILN__CHECK(s, kiln__ops_check_overlap(fn, "x", x, x_offset, n, x_dtype, "y", y,
                                y_offset, n, y_dtype, x_dtype == y_dtype));
  if (s != KILN_OK)
    return s;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  kiln__op_describe(&o, "cast", y_dtype, 1, &n,
                    (dsize(x_dtype) + dsize(y_dtype)) * n, 0);
  if (n > 0) {
    char kname[32];
    snprintf(kname, sizeof kname, "cast_%s_%s", kiln_dtype_name(x_dtype),
             kiln_dtype_name(y_dtype));
    cl_kernel k = NULL;
    cl_ulong xo = x_offset, yo = y_offset, nn = n;
    const bool cpu = cpu_family(queue->ctx);
    const struct config c = {
        .local = kiln__ops_local_size(
            queue->ctx,
            kiln__ops_tune(kiln__ops_tuning(queue->ctx)->elementwise_wg, 256)),
        .per_item = cpu ? 16 : 1};
    KILN__CHECK(s, kiln__op_kernel(&o, "cast", cpu ? "-DVEC=16" : NULL, kname, &k, 5,
                          KILN__ARG(x->cl), KILN__ARG(xo), KILN__ARG(y->cl),
                          KILN__ARG(yo), KILN__ARG(nn)));
    KILN__CHECK(s, launch(&o, k, n, &c));
  }
  return kiln__op_end(&o, s, out_event);
}

void kiln__ops_warm_elementwise(const kiln_context *ctx, kiln__warm_add_fn add,
                                void *user) {
  const kiln_dtype dts[] = {KILN_F32, KILN_F16, KILN_BF16};
  for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
    struct config c;
    if (get_config(ctx, dts[i], &c) == KILN_OK)
      add(user, "elementwise", c.options);
  }
  add(user, "cast", cpu_family(ctx) ? "-DVEC=16" : NULL);
}
