/* The GPU family's implicit GEMM convolution: kiln_conv2d's forward pass
 * as one launch of cl_kernels/conv_gemm.cl (gemm_gpu.cl's tiled kernel
 * whose B tile is gathered from the image through the convolution's index
 * map), with the point of the conv2d space in effect (tune/space_conv.c;
 * `kiln tune --op conv2d`). No column buffer: the call takes no workspace
 * and makes one launch for the whole batch, every image and group in the
 * range's third dimension.
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
 * The gradients keep im2col and col2im on every family. */
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

kiln_status kiln__conv_forward_gpu(struct kiln__op *op,
                                   const struct kiln__conv_shape *cs,
                                   const kiln_image *x, const kiln_image *w,
                                   const kiln_image *y,
                                   const kiln_epilogue *e, bool *done) {
  *done = false;
  kiln_queue *queue = op->queue;
  const kiln_context *ctx = queue->ctx;
  const kiln_dtype dt = x->dtype;
  bool mma = false;
  if (kiln__ops_tuning(ctx)->family == KILN_FAMILY_CPU ||
      atomic_load(&implicit_off))
    return KILN_OK;
  kiln_status s = on_matrix_units(ctx, dt, &mma);
  if (s != KILN_OK || mma)
    return s;
  const struct kiln__variant *v = NULL;
  s = kiln__variant_get(ctx, KILN__TUNED_CONV2D, dt, &v);
  cl_kernel kernel = NULL;
  KILN__CHECK(s, kiln__queue_kernel_keyed(queue, v, "conv_gemm", v->options,
                                          "conv_gemm", &kernel));
  if (s != KILN_OK)
    return s;
  *done = true;
  const unsigned mwg = v->point.v[KILN__CONV_MWG],
                 nwg = v->point.v[KILN__CONV_NWG],
                 mdimc = v->point.v[KILN__CONV_MDIMC],
                 ndimc = v->point.v[KILN__CONV_NDIMC];
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
      .dtype = dt,
      /* A: the group's weights, ocg x kk row-major, groups ocg kk apart;
       * B: the image (strides unused: the kernel's index map reads it),
       * images c h w apart. */
      .a = {w->buffer->cl, w->offset, ocg * kk, kk, 1},
      .b = {x->buffer->cl, x->offset, cs->c * cs->h * cs->w, 0, 0},
      .c = y->buffer->cl,
      .c_offset = y->offset,
      .c_stride = cs->oc * ohw,
      .ldc = ohw,
      .act = e->activation,
      .bias = bias != NULL ? bias->buffer->cl : NULL,
      .bias_offset = bias != NULL ? bias->offset : 0,
      .bias_rs = 1,
      .bias_cs = 0};
  cl_uint16 geo = {{0}};
  const size_t dims[12] = {cs->h,  cs->w,  cs->kh, cs->kw, cs->sh, cs->sw,
                           cs->ph, cs->pw, cs->dh, cs->dw, cs->ow, cs->groups};
  for (int i = 0; i < 12; i++)
    geo.s[i] = (cl_uint)dims[i]; /* each at most INT32_MAX: ops_conv.c */
  s = kiln__gemm_gpu_args(op, kernel, &g, 0, 0);
  if (s == KILN_OK) {
    const cl_int err = clSetKernelArg(kernel, 28, sizeof geo, &geo);
    if (err != CL_SUCCESS)
      s = kiln__fail_cl(err, "clSetKernelArg", ctx->device,
                        "%s: argument 28 (the geometry) of conv_gemm", op->fn);
  }
  const size_t global[3] = {kiln__div_up(ohw, nwg) * ndimc,
                            kiln__div_up(ocg, mwg) * mdimc, g.batch};
  const size_t local[3] = {ndimc, mdimc, 1};
  KILN__CHECK(s, kiln__op_launch(op, kernel, 3, global, local));
  return s;
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
      add(user, "conv_gemm", v->options);
  }
}
