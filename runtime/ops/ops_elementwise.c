/* Elementwise ops and casts: kiln_unary, kiln_binary, kiln_binary_scalar,
 * kiln_axpy, kiln_scale, kiln_fill, kiln_cast (contracts in kiln/ops.h).
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

#include <math.h>
#include <stdio.h>
#include <string.h>

#define CHECK(expr)                                                            \
  do {                                                                         \
    if (s == KILN_OK)                                                          \
      s = (expr);                                                              \
  } while (0)

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
                                kiln_dtype dtype, size_t n,
                                const kiln_buffer *x, size_t x_offset,
                                kiln_buffer *y, size_t y_offset,
                                size_t num_wait, kiln_event *const *wait_list,
                                kiln_event **out_event) {
  static const char fn[] = "kiln_unary";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  if (s == KILN_OK && (unsigned)op > KILN_UNARY_TANH)
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: op %d is not a kiln_unary_op", fn, (int)op);
  CHECK(kiln__ops_check_dtype(fn, "dtype", dtype, KILN__DT_FLOATS));
  CHECK(kiln__ops_check_map(fn, queue, "x", x, x_offset, y, y_offset, n,
                            dtype));
  if (s != KILN_OK)
    return s;
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
    CHECK(kiln__op_kernel(
        &o, "elementwise", c.options,
        unary_ops[op].kernel, &k, 5, KILN__ARG(x->cl), KILN__ARG(xo),
        KILN__ARG(y->cl), KILN__ARG(yo), KILN__ARG(nn)));
    CHECK(launch(&o, k, n, &c));
  }
  return kiln__op_end(&o, s, out_event);
}

static kiln_status check_binary_op(const char *fn, kiln_binary_op op) {
  if ((unsigned)op > KILN_BINARY_MIN)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: op %d is not a kiln_binary_op", fn, (int)op);
  return KILN_OK;
}

KILN_API kiln_status kiln_binary(kiln_queue *queue, kiln_binary_op op,
                                 kiln_dtype dtype, size_t n,
                                 const kiln_buffer *a, size_t a_offset,
                                 const kiln_buffer *b, size_t b_offset,
                                 kiln_buffer *y, size_t y_offset,
                                 size_t num_wait, kiln_event *const *wait_list,
                                 kiln_event **out_event) {
  static const char fn[] = "kiln_binary";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  CHECK(check_binary_op(fn, op));
  CHECK(kiln__ops_check_dtype(fn, "dtype", dtype, KILN__DT_FLOATS));
  CHECK(kiln__ops_check_in(fn, queue, "a", a, a_offset, n, dtype));
  CHECK(kiln__ops_check_in(fn, queue, "b", b, b_offset, n, dtype));
  CHECK(kiln__ops_check_out(fn, queue, "y", y, y_offset, n, dtype));
  CHECK(kiln__ops_check_overlap(fn, "a", a, a_offset, n, dtype, "y", y,
                                y_offset, n, dtype, true));
  CHECK(kiln__ops_check_overlap(fn, "b", b, b_offset, n, dtype, "y", y,
                                y_offset, n, dtype, true));
  if (s != KILN_OK)
    return s;
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
    CHECK(kiln__op_kernel(&o, "elementwise",
                          c.options,
                          binary_ops[op].kernel, &k, 7, KILN__ARG(a->cl),
                          KILN__ARG(ao), KILN__ARG(b->cl), KILN__ARG(bo),
                          KILN__ARG(y->cl), KILN__ARG(yo), KILN__ARG(nn)));
    CHECK(launch(&o, k, n, &c));
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_binary_scalar(kiln_queue *queue, kiln_binary_op op,
                                        kiln_dtype dtype, size_t n,
                                        const kiln_buffer *a, size_t a_offset,
                                        float scalar, kiln_buffer *y,
                                        size_t y_offset, size_t num_wait,
                                        kiln_event *const *wait_list,
                                        kiln_event **out_event) {
  static const char fn[] = "kiln_binary_scalar";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  CHECK(check_binary_op(fn, op));
  CHECK(kiln__ops_check_dtype(fn, "dtype", dtype, KILN__DT_FLOATS));
  CHECK(kiln__ops_check_map(fn, queue, "a", a, a_offset, y, y_offset, n,
                            dtype));
  if (s != KILN_OK)
    return s;
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
    CHECK(kiln__op_kernel(
        &o, "elementwise", c.options,
        binary_ops[op].scalar_kernel, &k, 6, KILN__ARG(a->cl), KILN__ARG(ao),
        KILN__ARG(scalar), KILN__ARG(y->cl), KILN__ARG(yo), KILN__ARG(nn)));
    CHECK(launch(&o, k, n, &c));
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_axpy(kiln_queue *queue, kiln_dtype dtype, size_t n,
                               float alpha, const kiln_buffer *x,
                               size_t x_offset, kiln_buffer *y,
                               size_t y_offset, size_t num_wait,
                               kiln_event *const *wait_list,
                               kiln_event **out_event) {
  static const char fn[] = "kiln_axpy";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  CHECK(kiln__ops_check_dtype(fn, "dtype", dtype, KILN__DT_FLOATS));
  CHECK(kiln__ops_check_in(fn, queue, "x", x, x_offset, n, dtype));
  CHECK(kiln__ops_check_in(fn, queue, "y", y, y_offset, n, dtype));
  CHECK(kiln__ops_check_out(fn, queue, "y", y, y_offset, n, dtype));
  CHECK(kiln__ops_check_overlap(fn, "x", x, x_offset, n, dtype, "y", y,
                                y_offset, n, dtype, false));
  if (s != KILN_OK)
    return s;
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
    CHECK(kiln__op_kernel(&o, "elementwise",
                          c.options, "axpy", &k, 6,
                          KILN__ARG(alpha), KILN__ARG(x->cl), KILN__ARG(xo),
                          KILN__ARG(y->cl), KILN__ARG(yo), KILN__ARG(nn)));
    CHECK(launch(&o, k, n, &c));
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_scale(kiln_queue *queue, kiln_dtype dtype, size_t n,
                                float alpha, kiln_buffer *x, size_t x_offset,
                                size_t num_wait, kiln_event *const *wait_list,
                                kiln_event **out_event) {
  static const char fn[] = "kiln_scale";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  CHECK(kiln__ops_check_dtype(fn, "dtype", dtype, KILN__DT_FLOATS));
  CHECK(kiln__ops_check_in(fn, queue, "x", x, x_offset, n, dtype));
  CHECK(kiln__ops_check_out(fn, queue, "x", x, x_offset, n, dtype));
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
    CHECK(kiln__op_kernel(
        &o, "elementwise", c.options, "scale", &k,
        4, KILN__ARG(alpha), KILN__ARG(x->cl), KILN__ARG(xo), KILN__ARG(nn)));
    CHECK(launch(&o, k, n, &c));
  }
  return kiln__op_end(&o, s, out_event);
}

/* Host conversions for fill values, rounding to nearest even like the
 * kernels. f16 after F. Giesen's float_to_half_fast3_rtne: subnormal results
 * come from one float addition that aligns the binary point, so the FPU
 * does the rounding. */
static uint16_t host_f32_to_f16(float x) {
  uint32_t f, sign;
  memcpy(&f, &x, sizeof f);
  sign = f & 0x80000000u;
  f ^= sign;
  uint16_t o;
  if (f >= (127u + 16u) << 23) { /* >= 65536: inf, or NaN kept quiet */
    o = f > 0x7f800000u ? 0x7e00 : 0x7c00;
  } else if (f < 113u << 23) { /* below 2^-14: subnormal or zero */
    float magic = 0.5f, t;
    memcpy(&t, &f, sizeof t);
    t += magic;
    uint32_t tb, mb;
    memcpy(&tb, &t, sizeof tb);
    memcpy(&mb, &magic, sizeof mb);
    o = (uint16_t)(tb - mb);
  } else {
    uint32_t odd = (f >> 13) & 1u;
    f += ((uint32_t)(15 - 127) << 23) + 0xfffu + odd;
    o = (uint16_t)(f >> 13);
  }
  return (uint16_t)(o | (sign >> 16));
}

static uint16_t host_f32_to_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* The bits to fill with, or an error naming value. */
static kiln_status fill_bits(const char *fn, kiln_dtype dtype, double value,
                             uint32_t *bits) {
  float f = (float)value;
  switch (dtype) {
  case KILN_F32:
    memcpy(bits, &f, sizeof f);
    return KILN_OK;
  case KILN_F16:
    *bits = host_f32_to_f16(f);
    return KILN_OK;
  case KILN_BF16:
    *bits = host_f32_to_bf16(f);
    return KILN_OK;
  case KILN_I32:
    if (!isfinite(value) || value != floor(value) || value < INT32_MIN ||
        value > INT32_MAX)
      break;
    *bits = (uint32_t)(int32_t)value;
    return KILN_OK;
  case KILN_U32:
    if (!isfinite(value) || value != floor(value) || value < 0 ||
        value > UINT32_MAX)
      break;
    *bits = (uint32_t)value;
    return KILN_OK;
  }
  return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                    "%s: value %g is not representable in %s (an integer in "
                    "the type's range is required)",
                    fn, value, kiln_dtype_name(dtype));
}

KILN_API kiln_status kiln_fill(kiln_queue *queue, kiln_dtype dtype, size_t n,
                               double value, kiln_buffer *y, size_t y_offset,
                               size_t num_wait, kiln_event *const *wait_list,
                               kiln_event **out_event) {
  static const char fn[] = "kiln_fill";
  uint32_t bits = 0;
  kiln_status s = kiln__ops_check_queue(fn, queue);
  CHECK(kiln__ops_check_dtype(fn, "dtype", dtype,
                              KILN__DT_FLOATS | KILN__DT(KILN_I32) |
                                  KILN__DT(KILN_U32)));
  CHECK(fill_bits(fn, dtype, value, &bits));
  CHECK(kiln__ops_check_out(fn, queue, "y", y, y_offset, n, dtype));
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
    CHECK(kiln__op_kernel(&o, "elementwise",
                          c.options,
                          wide ? "fill32" : "fill16", &k, 4,
                          wide ? KILN__ARG(v32) : KILN__ARG(v16),
                          KILN__ARG(y->cl), KILN__ARG(yo), KILN__ARG(nn)));
    CHECK(launch(&o, k, n, &c));
  }
  return kiln__op_end(&o, s, out_event);
}

KILN_API kiln_status kiln_cast(kiln_queue *queue, size_t n, kiln_dtype x_dtype,
                               const kiln_buffer *x, size_t x_offset,
                               kiln_dtype y_dtype, kiln_buffer *y,
                               size_t y_offset, size_t num_wait,
                               kiln_event *const *wait_list,
                               kiln_event **out_event) {
  static const char fn[] = "kiln_cast";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  CHECK(kiln__ops_check_dtype(fn, "x_dtype", x_dtype, KILN__DT_FLOATS));
  CHECK(kiln__ops_check_dtype(fn, "y_dtype", y_dtype, KILN__DT_FLOATS));
  CHECK(kiln__ops_check_in(fn, queue, "x", x, x_offset, n, x_dtype));
  CHECK(kiln__ops_check_out(fn, queue, "y", y, y_offset, n, y_dtype));
  CHECK(kiln__ops_check_overlap(fn, "x", x, x_offset, n, x_dtype, "y", y,
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
    CHECK(kiln__op_kernel(&o, "cast", cpu ? "-DVEC=16" : NULL, kname, &k, 5,
                          KILN__ARG(x->cl), KILN__ARG(xo), KILN__ARG(y->cl),
                          KILN__ARG(yo), KILN__ARG(nn)));
    CHECK(launch(&o, k, n, &c));
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
