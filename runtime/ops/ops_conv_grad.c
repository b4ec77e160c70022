/* The gradients of 2-D convolution (kiln/kiln_ops_conv.h): to the input
 * (dcols = W^T dY per chunk and group, then col2im) and to the weights and
 * bias (the GPU family: per-image products summed in image order; the CPU
 * family: one GEMM per chunk along the images, weights_one_gemm). ops_conv.c
 * describes the workspace and the GEMMs; the checks, chunks and im2col are
 * its own (ops_conv.h). Kernels: cl_kernels/conv.cl. */
#include "ops_conv.h"

#define BIAS_WG 64 /* conv.cl's WG */

/* ---- backward to the input ----------------------------------------------- */

KILN_API kiln_status kiln_conv2d_backward_data(
    kiln_queue *queue, const kiln_image *dy, const kiln_image *w,
    const kiln_image *dx, const kiln_conv2d_params *params, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_conv2d_backward_data";
  /* The geometry's roles: dx is x's, dy y's; dy is the first input. */
  static const char *const names[3] = {"dx", "w", "dy"};
  struct kiln__conv_geom gm;
  kiln_status s =
      kiln__conv_check(fn, queue, names,
                       (const kiln_image *const[3]){dx, w, dy}, 0, params, &gm);
  if (s != KILN_OK)
    return s;
  const kiln_dtype dt = dy->dtype;
  const size_t es = kiln_dtype_size(dt);
  struct kiln__op op;
  s = kiln__conv_begin(&op, queue, fn, "conv2d_backward_data", dt, &gm,
                       (size_t[]){gm.n, gm.c, gm.h * gm.w},
                       (double)(gm.y_count + gm.w_count) * (double)es +
                           (double)gm.x_count * 4.0,
                       num_wait, wait_list, out_event);
  if (s != KILN_OK)
    return s;
  /* The GPU family's implicit GEMM where it applies (ops_conv_gpu.c). */
  bool implicit = false;
  if (gm.x_count > 0)
    s = kiln__conv_backward_data_gpu(
        &op, &(struct kiln__conv_shape)GPU_SHAPE(gm), dy, w, dx, &implicit);
  if (s == KILN_OK && gm.x_count > 0 && !implicit) {
    /* f32 columns of the chunk: [image][g][r][p]. */
    const size_t per_image = gm.groups * gm.kk * gm.ohw;
    const size_t nb = kiln__conv_chunk_images(&op, gm.n, per_image * 4);
    const size_t last = gm.n - (gm.n - 1) / nb * nb;
    struct gemm_problem g = {
        .m = gm.kk,
        .n = gm.ohw,
        .k = gm.ocg,
        .batch = nb,
        .alpha = 1.0f,
        .beta = 0.0f,
        .dtype = dt,
        .a = {w->buffer->cl, 0, 0, 1, gm.kk, false},
        .b = {dy->buffer->cl, 0, gm.oc * gm.ohw, gm.ohw, 1, false},
        .c_stride = per_image,
        .ldc = gm.ohw,
        .act = KILN_ACT_NONE,
        .ws_base = kiln__conv_round64(nb * per_image)};
    struct gemm_problem g_last = g;
    g_last.batch = last;
    size_t gemm = 0;
    cl_mem ws = NULL;
    cl_kernel fold = NULL;
    s = kiln__conv_gemm_floats(queue->ctx, &g, &g_last, &gemm);
    KILN__CHECK(s, kiln__conv_workspace(&op, g.ws_base, gemm, &ws));
    const bool planes = kiln__conv_cpu_family(&op);
    KILN__CHECK(s, kiln__queue_kernel(
                       queue, "conv", CONV_OPTIONS,
                       planes ? "conv_col2im_planes" : "conv_col2im", &fold));
    g.c = ws;
    const struct kiln__conv_args a = kiln__conv_args(&gm);
    for (size_t i0 = 0; i0 < gm.n && s == KILN_OK; i0 += nb) {
      const size_t cnt = gm.n - i0 < nb ? gm.n - i0 : nb;
      g.batch = cnt;
      for (size_t gi = 0; gi < gm.groups && s == KILN_OK; gi++) {
        g.a.offset = w->offset + gi * gm.ocg * gm.kk;
        g.b.offset = dy->offset + i0 * gm.oc * gm.ohw + gi * gm.ocg * gm.ohw;
        g.c_offset = gi * gm.kk * gm.ohw;
        s = kiln__gemm_enqueue(&op, &g);
      }
      const cl_ulong zero = 0, xo = dx->offset + i0 * gm.c * gm.h * gm.w;
      cl_mem dx_mem = dx->buffer->cl;
      KILN__CHECK(s, kiln__op_args(
                         &op, fold, 19, KILN__ARG(ws), KILN__ARG(zero),
                         KILN__ARG(a.c), KILN__ARG(a.h), KILN__ARG(a.w),
                         KILN__ARG(a.cg), KILN__ARG(a.kh), KILN__ARG(a.kw),
                         KILN__ARG(a.sh), KILN__ARG(a.sw), KILN__ARG(a.ph),
                         KILN__ARG(a.pw), KILN__ARG(a.dh), KILN__ARG(a.dw),
                         KILN__ARG(a.oh), KILN__ARG(a.ow), KILN__ARG(a.groups),
                         KILN__ARG(dx_mem), KILN__ARG(xo)));
      const size_t l0 = kiln__conv_row_local(gm.w);
      const size_t global[3] = {kiln__div_up(gm.w, l0) * l0, gm.h,
                                cnt * gm.c};
      const size_t local[3] = {l0, 1, 1};
      const size_t pglobal[2] = {gm.c, cnt}, plocal[2] = {1, 1};
      KILN__CHECK(s, planes ? kiln__op_launch(&op, fold, 2, pglobal, plocal)
                            : kiln__op_launch(&op, fold, 3, global, local));
    }
  }
  return kiln__op_end(&op, s, out_event);
}

/* ---- backward to the weights and bias ------------------------------------ */

/* The weight gradient on the CPU family: per chunk of nb images and group
 * g, one GEMM over the chunk's positions,
 *   dw_g [ocg x kk] (+)= dY_g [ocg x nb P] cols_g^T [nb P x kk],
 * the columns in [g][r][image][p] order and dy copied beside them in
 * [g][o][image][p] order (im2col of a 1x1 kernel), so that both operands
 * run along k = image P + p; the first chunk writes dw (beta 0), the
 * others add to it (beta 1), in chunk order. One GEMM of k = nb P packs
 * each operand once and writes ocg x kk outputs per chunk, where a GEMM
 * per image wrote as many per image and a pass added them up (on PoCL, 2
 * threads, the CNN's 32 -> 64 layer at batch 128 on a loaded machine: 0.7
 * times the time, chunks of 2 MiB as fast as or faster than 8 or 32). n >
 * 0. */
static kiln_status weights_one_gemm(struct kiln__op *op,
                                    const struct kiln__conv_geom *gm,
                                    const kiln_image *x, const kiln_image *dy,
                                    const kiln_image *dw) {
  const kiln_dtype dt = x->dtype;
  const size_t es = kiln_dtype_size(dt);
  const size_t cols_image = gm->groups * gm->kk * gm->ohw;
  const size_t dy_image = gm->oc * gm->ohw;
  const size_t nb =
      kiln__conv_chunk_images(op, gm->n, (cols_image + dy_image) * es);
  const size_t last = gm->n - (gm->n - 1) / nb * nb;
  const size_t run = nb * gm->ohw; /* a row of either operand */
  const size_t dy_at = nb * cols_image; /* elements of dt */
  /* dy as the image of a 1x1 convolution: oc channels of oh x ow. */
  struct kiln__conv_geom dg = *gm;
  dg.c = gm->oc;
  dg.h = gm->oh;
  dg.w = gm->ow;
  dg.cg = gm->ocg;
  dg.kh = dg.kw = dg.sh = dg.sw = dg.dh = dg.dw = 1;
  dg.ph = dg.pw = 0;
  dg.kk = gm->ocg;
  struct gemm_problem g = {.m = gm->ocg,
                           .n = gm->kk,
                           .k = nb * gm->ohw,
                           .batch = 1,
                           .alpha = 1.0f,
                           .dtype = dt,
                           .a = {NULL, 0, 0, run, 1, false},
                           .b = {NULL, 0, 0, 1, run, false},
                           .c = dw->buffer->cl,
                           .ldc = gm->kk,
                           .act = KILN_ACT_NONE,
                           .ws_base = kiln__conv_round64(
                               kiln__div_up((dy_at + nb * dy_image) * es, 4))};
  struct gemm_problem g_last = g;
  g_last.k = last * gm->ohw;
  size_t gemm = 0;
  cl_mem ws = NULL;
  kiln_status s = kiln__conv_gemm_floats(op->queue->ctx, &g, &g_last, &gemm);
  KILN__CHECK(s, kiln__conv_workspace(op, g.ws_base, gemm, &ws));
  g.a.mem = g.b.mem = ws;
  for (size_t i0 = 0; i0 < gm->n && s == KILN_OK; i0 += nb) {
    const size_t cnt = gm->n - i0 < nb ? gm->n - i0 : nb;
    s = kiln__conv_im2col(op, dt, gm, x->buffer->cl,
                          x->offset + i0 * gm->c * gm->h * gm->w, cnt, ws, 0,
                          gm->kk * run, gm->ohw, run);
    KILN__CHECK(s, kiln__conv_im2col(op, dt, &dg, dy->buffer->cl,
                                     dy->offset + i0 * dy_image, cnt, ws, dy_at,
                                     gm->ocg * run, gm->ohw, run));
    g.k = cnt * gm->ohw;
    g.beta = i0 > 0 ? 1.0f : 0.0f;
    for (size_t gi = 0; gi < gm->groups && s == KILN_OK; gi++) {
      g.a.offset = dy_at + gi * gm->ocg * run;
      g.b.offset = gi * gm->kk * run;
      g.c_offset = dw->offset + gi * gm->ocg * gm->kk;
      s = kiln__gemm_enqueue(op, &g);
    }
  }
  return s;
}

KILN_API kiln_status kiln_conv2d_backward_weights(
    kiln_queue *queue, const kiln_image *x, const kiln_image *dy,
    const kiln_image *dw, const kiln_range *db,
    const kiln_conv2d_params *params, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_conv2d_backward_weights";
  static const char *const names[3] = {"x", "dw", "dy"};
  struct kiln__conv_geom gm;
  kiln_status s =
      kiln__conv_check(fn, queue, names,
                       (const kiln_image *const[3]){x, dw, dy}, 1, params, &gm);
  if (s == KILN_OK && db != NULL && db->buffer == NULL)
    s = kiln__fail(KILN_ERR_NULL_POINTER,
                   "%s: db.buffer is NULL (a NULL db means no bias gradient)",
                   fn);
  KILN__CHECK(s, db == NULL ? KILN_OK
                            : kiln__ops_check_dtype(fn, "db.dtype", db->dtype,
                                                    KILN__DT(KILN_F32)));
  KILN__CHECK(s, db == NULL ? KILN_OK
                            : kiln__conv_same_size(fn, "the output channels",
                                                   db->count, "db.count", gm.oc,
                                                   "dw.n"));
  KILN__CHECK(s, db == NULL ? KILN_OK
                            : kiln__ops_check_out(fn, queue, "db", db->buffer,
                                                  db->offset, gm.oc, KILN_F32));
  if (s == KILN_OK && db != NULL) {
    const kiln_range *r = db;
    KILN__CHECK(s, kiln__ops_check_overlap(fn, "x", x->buffer, x->offset,
                                           gm.x_count, x->dtype, "db",
                                           r->buffer, r->offset, gm.oc,
                                           KILN_F32, false));
    KILN__CHECK(s, kiln__ops_check_overlap(fn, "dy", dy->buffer, dy->offset,
                                           gm.y_count, dy->dtype, "db",
                                           r->buffer, r->offset, gm.oc,
                                           KILN_F32, false));
    KILN__CHECK(s, kiln__ops_check_overlap(fn, "dw", dw->buffer, dw->offset,
                                           gm.w_count, KILN_F32, "db",
                                           r->buffer, r->offset, gm.oc,
                                           KILN_F32, false));
  }
  if (s != KILN_OK)
    return s;

  const kiln_dtype dt = x->dtype;
  const size_t es = kiln_dtype_size(dt);
  struct kiln__op op;
  s = kiln__conv_begin(&op, queue, fn, "conv2d_backward_weights", dt, &gm,
                       (size_t[]){gm.oc, gm.kk, gm.n * gm.ohw},
                       (double)(gm.x_count + gm.y_count) * (double)es +
                           (double)gm.w_count * 4.0,
                       num_wait, wait_list, out_event);
  if (s != KILN_OK)
    return s;
  if (gm.w_count > 0 && gm.n > 0 && kiln__conv_cpu_family(&op))
    s = weights_one_gemm(&op, &gm, x, dy, dw);
  else if (gm.w_count > 0) {
    /* The chunk's columns [image][g][r][p] (elements of dt), then the
     * per-image products [image][o][r] (f32) from element part_off. */
    const size_t cols_image = gm.groups * gm.kk * gm.ohw;
    const size_t part_image = gm.oc * gm.kk; /* = w_count */
    const size_t nb =
        kiln__conv_chunk_images(&op, gm.n, cols_image * es + part_image * 4);
    const size_t last = gm.n == 0 ? 0 : gm.n - (gm.n - 1) / nb * nb;
    const size_t part_off =
        kiln__conv_round64(kiln__div_up(nb * cols_image * es, 4));
    struct gemm_problem g = {
        .m = gm.ocg,
        .n = gm.kk,
        .k = gm.ohw,
        .batch = nb,
        .alpha = 1.0f,
        .beta = 0.0f,
        .dtype = dt,
        .a = {dy->buffer->cl, 0, gm.oc * gm.ohw, gm.ohw, 1, false},
        .b = {NULL, 0, cols_image, 1, gm.ohw, false},
        .ldc = gm.kk,
        .c_stride = part_image,
        .act = KILN_ACT_NONE,
        .ws_base = kiln__conv_round64(part_off + nb * part_image)};
    struct gemm_problem g_last = g;
    g_last.batch = last;
    size_t gemm = 0;
    cl_mem ws = NULL;
    cl_kernel fold = NULL;
    s = kiln__conv_gemm_floats(queue->ctx, &g, &g_last, &gemm);
    KILN__CHECK(s, kiln__conv_workspace(&op, g.ws_base, gemm, &ws));
    KILN__CHECK(s, kiln__queue_kernel(queue, "conv", CONV_OPTIONS,
                                      "conv_sum_batch", &fold));
    g.b.mem = ws;
    g.c = ws;
    const cl_mem dw_mem = dw->buffer->cl;
    const cl_ulong po = part_off, count = part_image, wo = dw->offset;
    /* An empty batch still writes dw: one fold of no images (zeros). */
    for (size_t i0 = 0; s == KILN_OK; i0 += nb) {
      const size_t cnt = gm.n - i0 < nb ? gm.n - i0 : nb;
      g.batch = cnt;
      if (cnt > 0)
        s = kiln__conv_im2col(&op, dt, &gm, x->buffer->cl,
                              x->offset + i0 * gm.c * gm.h * gm.w, cnt, ws, 0,
                              gm.kk * gm.ohw, cols_image, gm.ohw);
      for (size_t gi = 0; gi < gm.groups && cnt > 0 && s == KILN_OK; gi++) {
        g.a.offset = dy->offset + i0 * gm.oc * gm.ohw + gi * gm.ocg * gm.ohw;
        g.b.offset = gi * gm.kk * gm.ohw;
        g.c_offset = part_off + gi * gm.ocg * gm.kk;
        s = kiln__gemm_enqueue(&op, &g);
      }
      const cl_uint nb32 = (cl_uint)cnt, acc = i0 > 0;
      KILN__CHECK(s, kiln__op_args(&op, fold, 7, KILN__ARG(ws), KILN__ARG(po),
                                   KILN__ARG(count), KILN__ARG(nb32),
                                   KILN__ARG(acc), KILN__ARG(dw_mem),
                                   KILN__ARG(wo)));
      KILN__CHECK(s, kiln__op_launch_1d(&op, fold, part_image, 64));
      if (i0 + cnt >= gm.n)
        break;
    }
  }
  if (s == KILN_OK && db != NULL && gm.oc > 0) {
    const cl_ulong yo = dy->offset, bo = db->offset;
    const cl_uint oc32 = (cl_uint)gm.oc, ohw32 = (cl_uint)gm.ohw,
                  n32 = (cl_uint)gm.n, bf16 = dt == KILN_BF16;
    cl_mem dy_mem = dy->buffer->cl, db_mem = db->buffer->cl;
    char name[32];
    cl_kernel k;
    s = kiln__op_kernel(
        &op, "conv", CONV_OPTIONS,
        kiln__conv_width_name(name, sizeof name, "conv_bias_grad", dt), &k, 8,
        KILN__ARG(dy_mem), KILN__ARG(yo), KILN__ARG(oc32), KILN__ARG(ohw32),
        KILN__ARG(n32), KILN__ARG(bf16), KILN__ARG(db_mem), KILN__ARG(bo));
    const size_t global[1] = {gm.oc * BIAS_WG}, local[1] = {BIAS_WG};
    KILN__CHECK(s, kiln__op_launch(&op, k, 1, global, local));
  }
  return kiln__op_end(&op, s, out_event);
}
