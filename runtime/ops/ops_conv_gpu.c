/* The GPU family's implicit GEMM convolution: kiln_conv2d's forward pass
 * as one launch of cl_kernels/conv_gemm.cl (gemm_gpu.cl's tiled kernel
 * whose B tile is gathered from the image through the convolution's index
 * map) and kiln_conv2d_backward_data's as one of conv_gemm_data.cl (both
 * tiles gathered: the weights and dy), with the point of the conv2d space
 * in effect (tune/space_conv.c; `kiln tune --op conv2d`, which times the
 * forward pass). No column buffer: a call takes no workspace and makes one
 * launch for the whole batch, every image and group in the range's third
 * dimension.
 *
 * Where it does not apply, ops_conv.c's im2col and the family's GEMM run as
 * before (*done false):
 *   - on the CPU family (its packed GEMM; measured there against a direct
 *     kernel when the convolution landed);
 *   - for f16 and bf16 operands where the GEMM runs them on the matrix
 *     units (tune/space_mma.c: NVIDIA, probe passed, tuned point): the
 *     implicit kernel's tiles are gemm_gpu's FMA tiles, which the matrix
 *     units outrun;
 *   - when a test or benchmark turned it off (kiln__conv_set_implicit).
 * The weight gradient keeps im2col on every family. */
#include "ops_conv_gpu.h"
#include "ops_gemm.h"

static _Atomic bool implicit_off;

void kiln__conv_set_implicit(bool on) { atomic_store(&implicit_off, !on); }

/* Whether the GEMM of dt's operands runs on the matrix units on ctx. */
static kiln_status on_matrix_units(const kiln_context *ctx, kiln_dtype dt,
                                   bool *yes) {
  *yes = false;
  if (dt == KILN_F32)
    return KILN_OK;
  const struct kiln__variant *v = NULL;
  kiln_status s = kiln__variant_get(ctx, KILN__TUNED_GEMM_MMA, dt, &v);
  if (s == KILN_OK && v != NULL)
    *yes = v->off[0] == '\0';
  return s;
}

/* The conv2d variant for op's dtype dt where the implicit kernels apply,
 * else *v NULL (the opening comment says when). */
static kiln_status implicit_variant(struct kiln__op *op, kiln_dtype dt,
                                    const struct kiln__variant **v) {
  *v = NULL;
  const kiln_context *ctx = op->queue->ctx;
  bool mma = false;
  if (kiln__ops_tuning(ctx)->family == KILN_FAMILY_CPU ||
      atomic_load(&implicit_off))
    return KILN_OK;
  kiln_status s = on_matrix_units(ctx, dt, &mma);
  if (s != KILN_OK || mma)
    return s;
  return kiln__variant_get(ctx, KILN__TUNED_CONV2D, dt, v);
}

/* Launch kernel name of v's program over g (m x n per entry of g.batch =
 * images x groups), the geometry of cs as its last argument. */
static kiln_status launch(struct kiln__op *op, const struct kiln__variant *v,
                          const char *name, const struct gemm_problem *g,
                          const struct kiln__conv_shape *cs) {
  cl_kernel kernel = NULL;
  kiln_status s = kiln__queue_kernel_keyed(op->queue, v, name, v->options,
                                           name, &kernel);
  cl_uint16 geo = {{0}};
  const size_t dims[13] = {cs->h,  cs->w,  cs->kh, cs->kw,     cs->sh,
                           cs->sw, cs->ph, cs->pw, cs->dh,     cs->dw,
                           cs->ow, cs->groups,     cs->oh};
  for (int i = 0; i < 13; i++)
    geo.s[i] = (cl_uint)dims[i]; /* each at most INT32_MAX: ops_conv.c */
  KILN__CHECK(s, kiln__gemm_gpu_args(op, kernel, g, 0, 0));
  if (s == KILN_OK) {
    const cl_int err = clSetKernelArg(kernel, 28, sizeof geo, &geo);
    if (err != CL_SUCCESS)
      s = kiln__fail_cl(err, "clSetKernelArg", op->queue->ctx->device,
                        "%s: argument 28 (the geometry) of %s", op->fn, name);
  }
  const unsigned mwg = v->point.v[KILN__CONV_MWG],
                 nwg = v->point.v[KILN__CONV_NWG],
                 mdimc = v->point.v[KILN__CONV_MDIMC],
                 ndimc = v->point.v[KILN__CONV_NDIMC];
  const size_t global[3] = {kiln__div_up(g->n, nwg) * ndimc,
                            kiln__div_up(g->m, mwg) * mdimc, g->batch};
  const size_t local[3] = {ndimc, mdimc, 1};
  KILN__CHECK(s, kiln__op_launch(op, kernel, 3, global, local));
  return s;
}

kiln_status kiln__conv_forward_gpu(struct kiln__op *op,
                                   const struct kiln__conv_shape *cs,
                                   const kiln_image *x, const kiln_image *w,
                                   const kiln_image *y,
                                   const kiln_epilogue *e, bool *done) {
  const struct kiln__variant *v = NULL;
  kiln_status s = implicit_variant(op, x->dtype, &v);
  *done = s == KILN_OK && v != NULL;
  if (!*done)
    return s;
  const size_t ocg = cs->oc / cs->groups, cg = cs->c / cs->groups,
               kk = cg * cs->kh * cs->kw, ohw = cs->oh * cs->ow;
  const kiln_range *bias = e->bias;
  const struct gemm_problem g = {
      .m = ocg,
      .n = ohw,
      .k = kk,
      .batch = cs->n * cs->groups,
      .alpha = e->alpha,
      .beta = e->beta,
      .dtype = x->dtype,
      /* A: the group's weights, ocg x kk row-major, groups ocg kk apart;
       * B: the image (strides unused: the kernel's index map reads it),
       * images c h w apart. */
      .a = {w->buffer->cl, w->offset, ocg * kk, kk, 1, false},
      .b = {x->buffer->cl, x->offset, cs->c * cs->h * cs->w, 0, 0, false},
      .c = y->buffer->cl,
      .c_offset = y->offset,
      .c_stride = cs->oc * ohw,
      .ldc = ohw,
      .act = e->activation,
      .bias = bias != NULL ? bias->buffer->cl : NULL,
      .bias_offset = bias != NULL ? bias->offset : 0,
      .bias_rs = 1,
      .bias_cs = 0};
  return launch(op, v, "conv_gemm", &g, cs);
}

kiln_status kiln__conv_backward_data_gpu(struct kiln__op *op,
                                         const struct kiln__conv_shape *cs,
                                         const kiln_image *dy,
                                         const kiln_image *w,
                                         const kiln_image *dx, bool *done) {
  const struct kiln__variant *v = NULL;
  kiln_status s = implicit_variant(op, dy->dtype, &v);
  *done = s == KILN_OK && v != NULL;
  if (!*done)
    return s;
  const size_t ocg = cs->oc / cs->groups, cg = cs->c / cs->groups,
               khw = cs->kh * cs->kw, hw = cs->h * cs->w;
  /* Both operands through the kernel's index maps (strides unused): A the
   * group's weights, groups ocg cg kh kw apart; B dy, images oc P apart. */
  const struct gemm_problem g = {
      .m = cg,
      .n = hw,
      .k = ocg * khw,
      .batch = cs->n * cs->groups,
      .alpha = 1.0f,
      .beta = 0.0f,
      .dtype = dy->dtype,
      .a = {w->buffer->cl, w->offset, ocg * cg * khw, 0, 0, false},
      .b = {dy->buffer->cl, dy->offset, cs->oc * cs->oh * cs->ow, 0, 0, false},
      .c = dx->buffer->cl,
      .c_offset = dx->offset,
      .c_stride = cs->c * hw,
      .ldc = hw,
      .act = KILN_ACT_NONE};
  return launch(op, v, "conv_gemm_data", &g, cs);
}

void kiln__ops_warm_conv_gpu(const kiln_context *ctx, kiln__warm_add_fn add,
                             void *user) {
  static const kiln_dtype dtypes[] = {KILN_F32, KILN_F16, KILN_BF16};
  if (kiln__ops_tuning(ctx)->family == KILN_FAMILY_CPU)
    return;
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
    const struct kiln__variant *v = NULL;
    bool mma = false;
    if (on_matrix_units(ctx, dtypes[i], &mma) == KILN_OK && !mma &&
        kiln__variant_get(ctx, KILN__TUNED_CONV2D, dtypes[i], &v) == KILN_OK &&
        v != NULL)
    {
      add(user, "conv_gemm", v->options);
      add(user, "conv_gemm_data", v->options);
    }
  }
}
