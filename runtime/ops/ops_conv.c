/* 2-D convolution (kiln/kiln_ops_conv.h): argument checks, and im2col plus
 * the GEMM of the device's family (ops_gemm.c's internal entry) for the
 * forward pass and both gradients; this file holds the checks, the chunks,
 * im2col and the forward pass, ops_conv_grad.c the gradients (ops_conv.h
 * what they share). Kernels: cl_kernels/conv.cl.
 *
 * Workspace. The queue's op workspace holds, from its start, the operands
 * this module builds for a chunk of nb images (the columns, and for the
 * weight gradient the per-image products), then what the CPU family's GEMM
 * packs (gemm_problem.ws_base marks where that starts). The whole size is
 * asked for before the first kernel, so the GEMM finds the buffer large
 * enough and never replaces it under the columns. Chunks keep the
 * module's part within col_limit bytes (at least one image).
 *
 * Per chunk and group g (cg = c / groups input and ocg = oc / groups output
 * channels, kk = cg kh kw, P = oh ow positions, row-major matrices, the
 * columns in [image][g][r][p] order):
 *   forward   Y_g(i) [ocg x P] = W_g [ocg x kk] cols_g(i) [kk x P], a GEMM
 *             batched over the chunk's images, W shared, with the bias (one
 *             per row) and activation in its epilogue;
 *   data      dcols_g(i) [kk x P] = W_g^T dY_g(i), then col2im sums the
 *             columns back into dx;
 *   weights   GPU family: part_g(i) [ocg x kk] = dY_g(i) cols_g(i)^T,
 *             batched over the images (a GEMM of k = P per image keeps as
 *             many outputs in flight as the forward pass; one GEMM with the
 *             batch along k would leave only ocg x kk outputs to share
 *             out), then conv_sum_batch adds the images' parts into dw in
 *             image order, onto the previous chunks' sum. CPU family (two
 *             threads need few outputs): one GEMM per chunk with the
 *             chunk's images along k, accumulating onto dw in chunk order
 *             (weights_one_gemm).
 * The bias gradient is one kernel over the whole batch (conv_bias_grad).
 * The CPU family runs im2col and col2im a plane per work-item, the GPU
 * family an element per work-item (cl_kernels/conv.cl). */
#include "ops_conv.h"

#include <stdio.h>

/* The most bytes of columns one call keeps in the workspace per chunk of
 * images (documented in kiln_ops_conv.h). On the CPU family a chunk about
 * the size of a core's L2 keeps the columns in cache from im2col to the
 * GEMM's packing: on PoCL (2 threads, the CNN's 32 -> 64 layer, batch
 * 128, examples/bench_conv_vs_torch.py on a shared machine) 2 MiB chunks
 * ran the forward pass 1.3 to 2.4 times as fast as 64 MiB ones, 8 MiB
 * ones in between. The GPU family takes large
 * chunks: more images per batched GEMM, fewer launches. A test may fix the
 * limit (kiln__conv_set_workspace_limit); 0 there restores these; atomic
 * only so that doing so is not a data race. */
#define CONV_COL_MAX_CPU ((size_t)2 << 20)
#define CONV_COL_MAX_GPU ((size_t)64 << 20)
static atomic_size_t col_limit = 0;

void kiln__conv_set_workspace_limit(size_t bytes) {
  atomic_store(&col_limit, bytes);
}

/* The name of conv.cl's kernel base for elements of dt: base32 or base16. */
const char *kiln__conv_width_name(char *buf, size_t size, const char *base,
                                  kiln_dtype dt) {
  snprintf(buf, size, "%s%s", base, dt == KILN_F32 ? "32" : "16");
  return buf;
}

/* ---- geometry and checks ------------------------------------------------- */

static kiln_status check_image(const char *fn, const char *what,
                               const kiln_image *im) {
  kiln_status s = kiln__train_need(fn, what, im);
  if (s == KILN_OK && im->layout != KILN_NCHW)
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: %s.layout %d: the convolution takes NCHW images only",
                   fn, what, (int)im->layout);
  if (s == KILN_OK && im->buffer == NULL)
    s = kiln__fail(KILN_ERR_NULL_POINTER, "%s: %s.buffer is NULL", fn, what);
  return s;
}

/* The element count of im, checked against overflow and the kernels'
 * 32-bit dimensions. */
static kiln_status image_count(const char *fn, const char *what,
                               const kiln_image *im, size_t *count) {
  const size_t d[4] = {im->n, im->c, im->h, im->w};
  static const char *const names[4] = {"n", "c", "h", "w"};
  size_t total = 1;
  for (int i = 0; i < 4; i++) {
    if (d[i] > INT32_MAX)
      return kiln__fail(KILN_ERR_INVALID_SIZE,
                        "%s: %s.%s %zu exceeds INT32_MAX", fn, what, names[i],
                        d[i]);
    if (kiln__mul_overflows(total, d[i], &total))
      return kiln__fail(KILN_ERR_INVALID_SIZE,
                        "%s: %s's element count (%zu x %zu x %zu x %zu) "
                        "overflows size_t",
                        fn, what, im->n, im->c, im->h, im->w);
  }
  *count = total;
  return KILN_OK;
}

kiln_status kiln__conv_same_size(const char *fn, const char *what, size_t a,
                                 const char *a_name, size_t b,
                                 const char *b_name) {
  if (a == b)
    return KILN_OK;
  return kiln__fail(KILN_ERR_SHAPE_MISMATCH, "%s: %s disagree: %zu from %s, "
                    "%zu from %s",
                    fn, what, a, a_name, b, b_name);
}

/* One spatial dimension: out = (in + 2 pad - dil (k - 1) - 1) / stride + 1,
 * refused when the dilated kernel does not fit in the padded image. */
static kiln_status out_size(const char *fn, const char *dim, size_t in,
                            size_t k, size_t stride, size_t pad, size_t dil,
                            size_t *out) {
  size_t padded, span;
  if (in == 0 || k == 0)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: the image %s %zu and the kernel %s %zu must be at "
                      "least 1",
                      fn, dim, in, dim, k);
  if (pad > INT32_MAX || stride > INT32_MAX || dil > INT32_MAX ||
      kiln__mul_overflows(pad, 2, &padded) ||
      kiln__add_overflows(padded, in, &padded) ||
      kiln__mul_overflows(dil, k - 1, &span) || padded > INT32_MAX ||
      span >= INT32_MAX)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: the padded image %s or the dilated kernel %s "
                      "exceeds INT32_MAX",
                      fn, dim, dim);
  span += 1;
  if (span > padded)
    return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                      "%s: the kernel %s %zu (dilated: %zu) exceeds the "
                      "padded image %s %zu (%zu + 2 x pad %zu): no output "
                      "position",
                      fn, dim, k, span, dim, padded, in, pad);
  *out = (padded - span) / stride + 1;
  return KILN_OK;
}

/* The geometry of x (n x c x h x w) convolved with w (oc x c/groups x kh x
 * kw) into y (n x oc x oh x ow), each named as the call names it, and the
 * parameters; shapes that disagree are KILN_ERR_SHAPE_MISMATCH. */
static kiln_status check_geometry(const char *fn, const char *x_name,
                                  const kiln_image *x, const char *w_name,
                                  const kiln_image *w, const char *y_name,
                                  const kiln_image *y,
                                  const kiln_conv2d_params *params,
                                  struct kiln__conv_geom *gm) {
  static const kiln_conv2d_params init = KILN_CONV2D_PARAMS_INIT;
  const kiln_conv2d_params *p = params != NULL ? params : &init;
  const size_t ones[5] = {p->stride_h, p->stride_w, p->dilation_h,
                          p->dilation_w, p->groups};
  static const char *const one_names[5] = {"stride_h", "stride_w",
                                           "dilation_h", "dilation_w",
                                           "groups"};
  for (int i = 0; i < 5; i++)
    if (ones[i] == 0)
      return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                        "%s: params.%s is 0 (at least 1; start from "
                        "KILN_CONV2D_PARAMS_INIT)",
                        fn, one_names[i]);
  kiln_status s = KILN_OK;
  KILN__CHECK(s, image_count(fn, x_name, x, &gm->x_count));
  KILN__CHECK(s, image_count(fn, w_name, w, &gm->w_count));
  KILN__CHECK(s, image_count(fn, y_name, y, &gm->y_count));
  if (s != KILN_OK)
    return s;
  const size_t groups = p->groups;
  char a[48], b[48];
  if (x->c % groups != 0)
    return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                      "%s: params.groups %zu does not divide %s.c %zu (the "
                      "input channels)",
                      fn, groups, x_name, x->c);
  if (w->n % groups != 0)
    return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                      "%s: params.groups %zu does not divide %s.n %zu (the "
                      "output channels)",
                      fn, groups, w_name, w->n);
  snprintf(a, sizeof a, "%s.c (per group)", w_name);
  snprintf(b, sizeof b, "%s.c / params.groups", x_name);
  KILN__CHECK(s, kiln__conv_same_size(fn, "the input channels of a group", w->c,
                                      a, x->c / groups, b));
  snprintf(a, sizeof a, "%s.n", y_name);
  snprintf(b, sizeof b, "%s.n", x_name);
  KILN__CHECK(s, kiln__conv_same_size(fn, "the batch sizes", y->n, a, x->n, b));
  snprintf(a, sizeof a, "%s.c", y_name);
  snprintf(b, sizeof b, "%s.n", w_name);
  KILN__CHECK(
      s, kiln__conv_same_size(fn, "the output channels", y->c, a, w->n, b));
  size_t oh = 0, ow = 0;
  KILN__CHECK(s, out_size(fn, "height", x->h, w->h, p->stride_h, p->pad_h,
                          p->dilation_h, &oh));
  KILN__CHECK(s, out_size(fn, "width", x->w, w->w, p->stride_w, p->pad_w,
                          p->dilation_w, &ow));
  snprintf(a, sizeof a, "%s.h", y_name);
  KILN__CHECK(s, kiln__conv_same_size(fn, "the output heights", y->h, a, oh,
                                      "the geometry (image, kernel, params)"));
  snprintf(a, sizeof a, "%s.w", y_name);
  KILN__CHECK(s, kiln__conv_same_size(fn, "the output widths", y->w, a, ow,
                                      "the geometry (image, kernel, params)"));
  if (s != KILN_OK)
    return s;
  *gm = (struct kiln__conv_geom){.n = x->n,
                                 .c = x->c,
                                 .h = x->h,
                                 .w = x->w,
                                 .oc = w->n,
                                 .oh = oh,
                                 .ow = ow,
                                 .kh = w->h,
                                 .kw = w->w,
                                 .sh = p->stride_h,
                                 .sw = p->stride_w,
                                 .ph = p->pad_h,
                                 .pw = p->pad_w,
                                 .dh = p->dilation_h,
                                 .dw = p->dilation_w,
                                 .groups = groups,
                                 .cg = x->c / groups,
                                 .ocg = w->n / groups,
                                 .kk = w->c * w->h * w->w, /* <= w_count */
                                 .ohw = oh * ow, /* <= y_count unless n 0 */
                                 .x_count = gm->x_count,
                                 .w_count = gm->w_count,
                                 .y_count = gm->y_count};
  /* One image's columns (kk x P per group) are indexed in 64 bits but
   * launched over 32-bit ranges. */
  size_t cols;
  if (kiln__mul_overflows(gm->kk, gm->ohw, &cols) ||
      kiln__mul_overflows(cols, groups, &cols) || cols > INT32_MAX ||
      gm->ohw > INT32_MAX)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: one image's columns (%zu x %zu x %zu positions) "
                      "exceed INT32_MAX elements",
                      fn, gm->kk, groups, gm->ohw);
  return KILN_OK;
}

static kiln_status check_in_image(const char *fn, const kiln_queue *q,
                                  const char *what, const kiln_image *im,
                                  size_t count) {
  return kiln__ops_check_in(fn, q, what, im->buffer, im->offset, count,
                            im->dtype);
}

static kiln_status check_out_image(const char *fn, const kiln_queue *q,
                                   const char *what, const kiln_image *im,
                                   size_t count) {
  return kiln__ops_check_out(fn, q, what, im->buffer, im->offset, count,
                             im->dtype);
}

static kiln_status no_overlap(const char *fn, const char *a_what,
                              const kiln_image *a, size_t a_count,
                              const char *b_what, const kiln_image *b,
                              size_t b_count) {
  return kiln__ops_check_overlap(fn, a_what, a->buffer, a->offset, a_count,
                                 a->dtype, b_what, b->buffer, b->offset,
                                 b_count, b->dtype, false);
}

/* The checks every entry point makes: the queue; the three images im[0]
 * (x's role: n x c x h x w), im[1] (w's) and im[2] (y's), named by names;
 * the output im[out] f32, the two inputs one float dtype (the first input
 * fixes it); the geometry; the ranges; the output disjoint from both
 * inputs. */
kiln_status kiln__conv_check(const char *fn, const kiln_queue *queue,
                             const char *const names[3],
                             const kiln_image *const im[3], int out,
                             const kiln_conv2d_params *params,
                             struct kiln__conv_geom *gm) {
  const int in0 = out == 0 ? 1 : 0, in1 = out == 2 ? 1 : 2;
  kiln_status s = kiln__ops_check_queue(fn, queue);
  for (int i = 0; i < 3; i++)
    KILN__CHECK(s, check_image(fn, names[i], im[i]));
  if (s != KILN_OK)
    return s;
  char what[24];
  snprintf(what, sizeof what, "%s.dtype", names[in0]);
  KILN__CHECK(s, kiln__ops_check_dtype(fn, what, im[in0]->dtype,
                                       KILN__DT_FLOATS));
  KILN__CHECK(s, kiln__train_same_dtype(fn, names[in1], im[in1]->dtype,
                                        names[in0], im[in0]->dtype));
  snprintf(what, sizeof what, "%s.dtype", names[out]);
  KILN__CHECK(s, kiln__ops_check_dtype(fn, what, im[out]->dtype,
                                       KILN__DT(KILN_F32)));
  KILN__CHECK(s, check_geometry(fn, names[0], im[0], names[1], im[1],
                                names[2], im[2], params, gm));
  if (s != KILN_OK)
    return s;
  const size_t counts[3] = {gm->x_count, gm->w_count, gm->y_count};
  KILN__CHECK(s, check_in_image(fn, queue, names[in0], im[in0], counts[in0]));
  KILN__CHECK(s, check_in_image(fn, queue, names[in1], im[in1], counts[in1]));
  KILN__CHECK(s, check_out_image(fn, queue, names[out], im[out], counts[out]));
  KILN__CHECK(s, no_overlap(fn, names[in0], im[in0], counts[in0], names[out],
                            im[out], counts[out]));
  KILN__CHECK(s, no_overlap(fn, names[in1], im[in1], counts[in1], names[out],
                            im[out], counts[out]));
  return s;
}

/* Start the op (after its checks) and describe it for tracing: 2 y kk
 * flops, bytes as given. */
kiln_status kiln__conv_begin(struct kiln__op *op, kiln_queue *queue,
                             const char *fn, const char *name, kiln_dtype dt,
                             const struct kiln__conv_geom *gm,
                             const size_t shape[3], double bytes,
                             size_t num_wait, kiln_event *const *wait_list,
                             kiln_event **out_event) {
  kiln_status s = kiln__op_begin(op, queue, fn, num_wait, wait_list, out_event);
  if (s == KILN_OK)
    kiln__op_describe(op, name, dt, 3, shape, bytes,
                      2.0 * (double)gm->y_count * (double)gm->kk);
  return s;
}

/* ---- chunks and the workspace -------------------------------------------- */

/* Images per chunk: as many as keep per_image bytes of operands within
 * the family's limit, at least 1, at most n. */
size_t kiln__conv_chunk_images(const struct kiln__op *op, size_t n,
                               size_t per_image) {
  size_t limit = atomic_load(&col_limit);
  if (limit == 0)
    limit = kiln__ops_tuning(op->queue->ctx)->family == KILN_FAMILY_CPU
                ? CONV_COL_MAX_CPU
                : CONV_COL_MAX_GPU;
  size_t nb = per_image ? limit / per_image : n;
  if (nb < 1)
    nb = 1;
  return nb < n ? nb : n;
}

/* The floats the GEMM problems g_first and g_last (the first and the last
 * chunk's) need after ws_base, the larger. */
kiln_status kiln__conv_gemm_floats(const kiln_context *ctx,
                                   const struct gemm_problem *g_first,
                                   const struct gemm_problem *g_last,
                                   size_t *floats) {
  size_t a = 0, b = 0;
  kiln_status s = kiln__gemm_workspace_floats(ctx, g_first, &a);
  KILN__CHECK(s, kiln__gemm_workspace_floats(ctx, g_last, &b));
  *floats = a > b ? a : b;
  return s;
}

kiln_status kiln__conv_workspace(struct kiln__op *op, size_t base_floats,
                                 size_t gemm, cl_mem *ws) {
  size_t total;
  if (kiln__add_overflows(base_floats, gemm, &total) ||
      kiln__mul_overflows(total, sizeof(float), &total))
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: workspace size", op->fn);
  return kiln__op_workspace(op, total, ws);
}

/* ---- launches ------------------------------------------------------------ */

struct kiln__conv_args kiln__conv_args(const struct kiln__conv_geom *gm) {
  return (struct kiln__conv_args){
      (cl_uint)gm->c,  (cl_uint)gm->h,  (cl_uint)gm->w,     (cl_uint)gm->cg,
      (cl_uint)gm->kh, (cl_uint)gm->kw, (cl_uint)gm->sh,    (cl_uint)gm->sw,
      (cl_uint)gm->ph, (cl_uint)gm->pw, (cl_uint)gm->dh,    (cl_uint)gm->dw,
      (cl_uint)gm->oh, (cl_uint)gm->ow, (cl_uint)gm->groups};
}

/* The CPU family takes a plane per work-item (conv.cl says why). */
bool kiln__conv_cpu_family(const struct kiln__op *op) {
  return kiln__ops_tuning(op->queue->ctx)->family == KILN_FAMILY_CPU;
}

/* Columns of nb images from x's element offset xo into ws at element co,
 * element (g, image, r, p) at co + g g_st + image n_st + r r_st + p. */
kiln_status kiln__conv_im2col(struct kiln__op *op, kiln_dtype dt,
                              const struct kiln__conv_geom *gm, cl_mem x,
                              size_t xo, size_t nb, cl_mem ws, size_t co,
                              size_t g_st, size_t n_st, size_t r_st) {
  const struct kiln__conv_args a = kiln__conv_args(gm);
  const cl_ulong xo64 = xo, co64 = co, g64 = g_st, n64 = n_st, r64 = r_st;
  const bool planes = kiln__conv_cpu_family(op);
  char name[32];
  cl_kernel k;
  kiln_status s = kiln__op_kernel(
      op, "conv", CONV_OPTIONS,
      kiln__conv_width_name(name, sizeof name,
                            planes ? "conv_im2col_planes" : "conv_im2col", dt),
      &k, 22, KILN__ARG(x), KILN__ARG(xo64), KILN__ARG(a.c), KILN__ARG(a.h),
      KILN__ARG(a.w), KILN__ARG(a.cg), KILN__ARG(a.kh), KILN__ARG(a.kw),
      KILN__ARG(a.sh), KILN__ARG(a.sw), KILN__ARG(a.ph), KILN__ARG(a.pw),
      KILN__ARG(a.dh), KILN__ARG(a.dw), KILN__ARG(a.oh), KILN__ARG(a.ow),
      KILN__ARG(a.groups), KILN__ARG(ws), KILN__ARG(co64), KILN__ARG(g64),
      KILN__ARG(n64), KILN__ARG(r64));
  const size_t l0 = kiln__conv_row_local(gm->ow);
  const size_t global[3] = {kiln__div_up(gm->ow, l0) * l0, gm->oh,
                            gm->kk * nb * gm->groups};
  const size_t local[3] = {l0, 1, 1};
  const size_t pglobal[2] = {gm->cg, nb * gm->groups}, plocal[2] = {1, 1};
  KILN__CHECK(s, planes ? kiln__op_launch(op, k, 2, pglobal, plocal)
                        : kiln__op_launch(op, k, 3, global, local));
  return s;
}

/* ---- forward ------------------------------------------------------------- */

KILN_API kiln_status kiln_conv2d(kiln_queue *queue, const kiln_image *x,
                                 const kiln_image *w, const kiln_image *y,
                                 const kiln_conv2d_params *params,
                                 const kiln_epilogue *epilogue,
                                 size_t num_wait, kiln_event *const *wait_list,
                                 kiln_event **out_event) {
  static const char fn[] = "kiln_conv2d";
  static const kiln_epilogue plain = KILN_EPILOGUE_INIT;
  const kiln_epilogue *e = epilogue != NULL ? epilogue : &plain;
  static const char *const names[3] = {"x", "w", "y"};
  struct kiln__conv_geom gm;
  kiln_status s = kiln__conv_check(
      fn, queue, names, (const kiln_image *const[3]){x, w, y}, 2, params, &gm);
  if (s == KILN_OK && e->activation != KILN_ACT_NONE &&
      e->activation != KILN_ACT_RELU && e->activation != KILN_ACT_GELU)
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: epilogue.activation %d is not a valid kiln_activation",
                   fn, (int)e->activation);
  const kiln_range *bias = e->bias;
  if (s == KILN_OK && bias != NULL && bias->buffer == NULL)
    s = kiln__fail(KILN_ERR_NULL_POINTER,
                   "%s: epilogue.bias's buffer is NULL (a NULL bias range "
                   "means no bias)",
                   fn);
  KILN__CHECK(s, bias == NULL ? KILN_OK
                              : kiln__ops_check_dtype(fn, "epilogue.bias dtype",
                                                      bias->dtype,
                                                      KILN__DT(KILN_F32)));
  KILN__CHECK(s, bias == NULL ? KILN_OK
                              : kiln__conv_same_size(
                                    fn, "the output channels", bias->count,
                                    "epilogue.bias.count", gm.oc, "w.n"));
  KILN__CHECK(s, bias == NULL ? KILN_OK
                              : kiln__ops_check_in(fn, queue, "epilogue.bias",
                                                   bias->buffer, bias->offset,
                                                   gm.oc, KILN_F32));
  KILN__CHECK(s, bias == NULL
                     ? KILN_OK
                     : kiln__ops_check_overlap(
                           fn, "epilogue.bias", bias->buffer, bias->offset,
                           gm.oc, KILN_F32, "y", y->buffer, y->offset,
                           gm.y_count, KILN_F32, false));
  if (s != KILN_OK)
    return s;

  const kiln_dtype dt = x->dtype;
  const size_t es = kiln_dtype_size(dt);
  struct kiln__op op;
  s = kiln__conv_begin(&op, queue, fn, "conv2d", dt, &gm,
                       (size_t[]){gm.n, gm.oc, gm.ohw},
                       (double)(gm.x_count + gm.w_count) * (double)es +
                           (double)gm.y_count * 4.0 * (e->beta != 0.0f ? 2 : 1),
                       num_wait, wait_list, out_event);
  if (s != KILN_OK)
    return s;
  /* The GPU family's implicit GEMM where it applies (ops_conv_gpu.c). */
  bool implicit = false;
  if (gm.y_count > 0)
    s = kiln__conv_forward_gpu(&op, &(struct kiln__conv_shape)GPU_SHAPE(gm), x,
                               w, y, e, &implicit);
  if (s == KILN_OK && gm.y_count > 0 && !implicit) {
    /* Columns of one image: [g][r][p]; of the chunk: [image][g][r][p]. */
    const size_t per_image = gm.groups * gm.kk * gm.ohw;
    const size_t nb = kiln__conv_chunk_images(&op, gm.n, per_image * es);
    const size_t last = gm.n - (gm.n - 1) / nb * nb;
    struct gemm_problem g = {
        .m = gm.ocg,
        .n = gm.ohw,
        .k = gm.kk,
        .batch = nb,
        .alpha = e->alpha,
        .beta = e->beta,
        .dtype = dt,
        .a = {w->buffer->cl, w->offset, 0, gm.kk, 1, false},
        .b = {NULL, 0, per_image, gm.ohw, 1, false},
        .c = y->buffer->cl,
        .c_stride = gm.oc * gm.ohw,
        .ldc = gm.ohw,
        .act = e->activation,
        .bias = bias != NULL ? bias->buffer->cl : NULL,
        .bias_rs = 1,
        .bias_cs = 0,
        .ws_base = kiln__conv_round64(kiln__div_up(nb * per_image * es, 4))};
    struct gemm_problem g_last = g;
    g_last.batch = last;
    size_t gemm = 0;
    cl_mem ws = NULL;
    s = kiln__conv_gemm_floats(queue->ctx, &g, &g_last, &gemm);
    KILN__CHECK(s, kiln__conv_workspace(&op, g.ws_base, gemm, &ws));
    g.b.mem = ws;
    for (size_t i0 = 0; i0 < gm.n && s == KILN_OK; i0 += nb) {
      const size_t cnt = gm.n - i0 < nb ? gm.n - i0 : nb;
      if (gm.kk > 0)
        s = kiln__conv_im2col(&op, dt, &gm, x->buffer->cl,
                              x->offset + i0 * gm.c * gm.h * gm.w, cnt, ws, 0,
                              gm.kk * gm.ohw, per_image, gm.ohw);
      g.batch = cnt;
      for (size_t gi = 0; gi < gm.groups && s == KILN_OK; gi++) {
        g.a.offset = w->offset + gi * gm.ocg * gm.kk;
        g.b.offset = gi * gm.kk * gm.ohw;
        g.c_offset = y->offset + i0 * gm.oc * gm.ohw + gi * gm.ocg * gm.ohw;
        g.bias_offset = bias != NULL ? bias->offset + gi * gm.ocg : 0;
        s = kiln__gemm_enqueue(&op, &g);
      }
    }
  }
  return kiln__op_end(&op, s, out_event);
}

/* ---- cache warming ------------------------------------------------------- */

void kiln__ops_warm_conv(const kiln_context *ctx, kiln__warm_add_fn add,
                         void *user) {
  (void)ctx;
  add(user, "conv", CONV_OPTIONS);
}
