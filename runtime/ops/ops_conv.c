/* 2-D convolution (kiln/kiln_ops_conv.h): argument checks, and im2col plus
 * the GEMM of the device's family (ops_gemm.c's internal entry) for the
 * forward pass and both gradients. Kernels: cl_kernels/conv.cl.
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
#include "ops_conv_gpu.h"
#include "ops_gemm.h"
#include "ops_internal.h"
#include "ops_train_internal.h"

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

/* cl_kernels/conv.cl is one program for every dtype (its kernels come in
 * two widths, 32 and 16 bits), built without options. */
#define CONV_OPTIONS ""
#define BIAS_WG 64 /* conv.cl's WG */

/* The name of conv.cl's kernel base for elements of dt: base32 or base16. */
static const char *width_name(char *buf, size_t size, const char *base,
                              kiln_dtype dt) {
  snprintf(buf, size, "%s%s", base, dt == KILN_F32 ? "32" : "16");
  return buf;
}

/* ---- geometry and checks ------------------------------------------------- */

struct geom {
  size_t n, c, h, w, oc, oh, ow;
  size_t kh, kw, sh, sw, ph, pw, dh, dw, groups;
  size_t cg, ocg, kk, ohw;
  size_t x_count, w_count, y_count;
};

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

static kiln_status same_size(const char *fn, const char *what, size_t a,
                             const char *a_name, size_t b, const char *b_name) {
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
                                  struct geom *gm) {
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
  KILN__CHECK(s, same_size(fn, "the input channels of a group", w->c, a,
                           x->c / groups, b));
  snprintf(a, sizeof a, "%s.n", y_name);
  snprintf(b, sizeof b, "%s.n", x_name);
  KILN__CHECK(s, same_size(fn, "the batch sizes", y->n, a, x->n, b));
  snprintf(a, sizeof a, "%s.c", y_name);
  snprintf(b, sizeof b, "%s.n", w_name);
  KILN__CHECK(s, same_size(fn, "the output channels", y->c, a, w->n, b));
  size_t oh = 0, ow = 0;
  KILN__CHECK(s, out_size(fn, "height", x->h, w->h, p->stride_h, p->pad_h,
                          p->dilation_h, &oh));
  KILN__CHECK(s, out_size(fn, "width", x->w, w->w, p->stride_w, p->pad_w,
                          p->dilation_w, &ow));
  snprintf(a, sizeof a, "%s.h", y_name);
  KILN__CHECK(s, same_size(fn, "the output heights", y->h, a, oh,
                           "the geometry (image, kernel, params)"));
  snprintf(a, sizeof a, "%s.w", y_name);
  KILN__CHECK(s, same_size(fn, "the output widths", y->w, a, ow,
                           "the geometry (image, kernel, params)"));
  if (s != KILN_OK)
    return s;
  *gm = (struct geom){.n = x->n,
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
                      .ohw = oh * ow,           /* <= y_count unless n 0 */
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
static kiln_status check_conv(const char *fn, const kiln_queue *queue,
                              const char *const names[3],
                              const kiln_image *const im[3], int out,
                              const kiln_conv2d_params *params,
                              struct geom *gm) {
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
static kiln_status begin_conv(struct kiln__op *op, kiln_queue *queue,
                              const char *fn, const char *name, kiln_dtype dt,
                              const struct geom *gm, const size_t shape[3],
                              double bytes, size_t num_wait,
                              kiln_event *const *wait_list,
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
static size_t chunk_images(const struct kiln__op *op, size_t n,
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

static size_t round64(size_t x) { return kiln__div_up(x, 64) * 64; }

/* The floats the GEMM problems g_first and g_last (the first and the last
 * chunk's) need after ws_base, the larger. */
static kiln_status gemm_floats(const kiln_context *ctx,
                               const struct gemm_problem *g_first,
                               const struct gemm_problem *g_last,
                               size_t *floats) {
  size_t a = 0, b = 0;
  kiln_status s = kiln__gemm_workspace_floats(ctx, g_first, &a);
  KILN__CHECK(s, kiln__gemm_workspace_floats(ctx, g_last, &b));
  *floats = a > b ? a : b;
  return s;
}

static kiln_status workspace(struct kiln__op *op, size_t base_floats,
                             size_t gemm, cl_mem *ws) {
  size_t total;
  if (kiln__add_overflows(base_floats, gemm, &total) ||
      kiln__mul_overflows(total, sizeof(float), &total))
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: workspace size", op->fn);
  return kiln__op_workspace(op, total, ws);
}

/* ---- launches ------------------------------------------------------------ */

/* The geometry's kernel arguments shared by im2col and col2im (c through
 * groups), as uint. */
struct geom_args {
  cl_uint c, h, w, cg, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, groups;
};

static struct geom_args geom_args(const struct geom *gm) {
  return (struct geom_args){(cl_uint)gm->c,  (cl_uint)gm->h,  (cl_uint)gm->w,
                            (cl_uint)gm->cg, (cl_uint)gm->kh, (cl_uint)gm->kw,
                            (cl_uint)gm->sh, (cl_uint)gm->sw, (cl_uint)gm->ph,
                            (cl_uint)gm->pw, (cl_uint)gm->dh, (cl_uint)gm->dw,
                            (cl_uint)gm->oh, (cl_uint)gm->ow,
                            (cl_uint)gm->groups};
}

/* Work-group width along dimension 0 (image columns or positions). */
static size_t row_local(size_t width) { return width >= 32 ? 32 : 16; }

/* The CPU family takes a plane per work-item (conv.cl says why). */
static bool cpu_family(const struct kiln__op *op) {
  return kiln__ops_tuning(op->queue->ctx)->family == KILN_FAMILY_CPU;
}

/* Columns of nb images from x's element offset xo into ws at element co,
 * element (g, image, r, p) at co + g g_st + image n_st + r r_st + p. */
static kiln_status im2col(struct kiln__op *op, kiln_dtype dt,
                          const struct geom *gm, cl_mem x, size_t xo,
                          size_t nb, cl_mem ws, size_t co, size_t g_st,
                          size_t n_st, size_t r_st) {
  const struct geom_args a = geom_args(gm);
  const cl_ulong xo64 = xo, co64 = co, g64 = g_st, n64 = n_st, r64 = r_st;
  const bool planes = cpu_family(op);
  char name[32];
  cl_kernel k;
  kiln_status s = kiln__op_kernel(
      op, "conv", CONV_OPTIONS,
      width_name(name, sizeof name,
                 planes ? "conv_im2col_planes" : "conv_im2col", dt),
      &k, 22, KILN__ARG(x),
      KILN__ARG(xo64), KILN__ARG(a.c), KILN__ARG(a.h), KILN__ARG(a.w),
      KILN__ARG(a.cg), KILN__ARG(a.kh), KILN__ARG(a.kw), KILN__ARG(a.sh),
      KILN__ARG(a.sw), KILN__ARG(a.ph), KILN__ARG(a.pw), KILN__ARG(a.dh),
      KILN__ARG(a.dw), KILN__ARG(a.oh), KILN__ARG(a.ow), KILN__ARG(a.groups),
      KILN__ARG(ws), KILN__ARG(co64), KILN__ARG(g64), KILN__ARG(n64),
      KILN__ARG(r64));
  const size_t l0 = row_local(gm->ow);
  const size_t global[3] = {kiln__div_up(gm->ow, l0) * l0, gm->oh,
                            gm->kk * nb * gm->groups};
  const size_t local[3] = {l0, 1, 1};
  const size_t pglobal[2] = {gm->cg, nb * gm->groups}, plocal[2] = {1, 1};
  KILN__CHECK(s, planes ? kiln__op_launch(op, k, 2, pglobal, plocal)
                        : kiln__op_launch(op, k, 3, global, local));
  return s;
}

/* gm as ops_conv_gpu.h's shape (an initializer). */
#define GPU_SHAPE(gm)                                                          \
  {(gm).n,  (gm).c,  (gm).h,  (gm).w,  (gm).oc, (gm).oh, (gm).ow, (gm).kh,     \
   (gm).kw, (gm).sh, (gm).sw, (gm).ph, (gm).pw, (gm).dh, (gm).dw, (gm).groups}

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
  struct geom gm;
  kiln_status s = check_conv(fn, queue, names,
                             (const kiln_image *const[3]){x, w, y}, 2, params,
                             &gm);
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
                              : same_size(fn, "the output channels",
                                          bias->count, "epilogue.bias.count",
                                          gm.oc, "w.n"));
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
  s = begin_conv(&op, queue, fn, "conv2d", dt, &gm,
                 (size_t[]){gm.n, gm.oc, gm.ohw},
                 (double)(gm.x_count + gm.w_count) * (double)es +
                     (double)gm.y_count * 4.0 * (e->beta != 0.0f ? 2 : 1),
                 num_wait, wait_list, out_event);
  if (s != KILN_OK)
    return s;
  /* The GPU family's implicit GEMM where it applies (ops_conv_gpu.c). */
  bool implicit = false;
  if (gm.y_count > 0)
    s = kiln__conv_forward_gpu(&op, &(struct kiln__conv_shape)GPU_SHAPE(gm),
                               x, w, y, e, &implicit);
  if (s == KILN_OK && gm.y_count > 0 && !implicit) {
    /* Columns of one image: [g][r][p]; of the chunk: [image][g][r][p]. */
    const size_t per_image = gm.groups * gm.kk * gm.ohw;
    const size_t nb = chunk_images(&op, gm.n, per_image * es);
    const size_t last = gm.n - (gm.n - 1) / nb * nb;
    struct gemm_problem g = {.m = gm.ocg,
                             .n = gm.ohw,
                             .k = gm.kk,
                             .batch = nb,
                             .alpha = e->alpha,
                             .beta = e->beta,
                             .dtype = dt,
                             .a = {w->buffer->cl, w->offset, 0, gm.kk, 1,
                                   false},
                             .b = {NULL, 0, per_image, gm.ohw, 1, false},
                             .c = y->buffer->cl,
                             .c_stride = gm.oc * gm.ohw,
                             .ldc = gm.ohw,
                             .act = e->activation,
                             .bias = bias != NULL ? bias->buffer->cl : NULL,
                             .bias_rs = 1,
                             .bias_cs = 0,
                             .ws_base = round64(
                                 kiln__div_up(nb * per_image * es, 4))};
    struct gemm_problem g_last = g;
    g_last.batch = last;
    size_t gemm = 0;
    cl_mem ws = NULL;
    s = gemm_floats(queue->ctx, &g, &g_last, &gemm);
    KILN__CHECK(s, workspace(&op, g.ws_base, gemm, &ws));
    g.b.mem = ws;
    for (size_t i0 = 0; i0 < gm.n && s == KILN_OK; i0 += nb) {
      const size_t cnt = gm.n - i0 < nb ? gm.n - i0 : nb;
      if (gm.kk > 0)
        s = im2col(&op, dt, &gm, x->buffer->cl,
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

/* ---- backward to the input ----------------------------------------------- */

KILN_API kiln_status kiln_conv2d_backward_data(
    kiln_queue *queue, const kiln_image *dy, const kiln_image *w,
    const kiln_image *dx, const kiln_conv2d_params *params, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event) {
  static const char fn[] = "kiln_conv2d_backward_data";
  /* The geometry's roles: dx is x's, dy y's; dy is the first input. */
  static const char *const names[3] = {"dx", "w", "dy"};
  struct geom gm;
  kiln_status s = check_conv(fn, queue, names,
                             (const kiln_image *const[3]){dx, w, dy}, 0,
                             params, &gm);
  if (s != KILN_OK)
    return s;
  const kiln_dtype dt = dy->dtype;
  const size_t es = kiln_dtype_size(dt);
  struct kiln__op op;
  s = begin_conv(&op, queue, fn, "conv2d_backward_data", dt, &gm,
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
    const size_t nb = chunk_images(&op, gm.n, per_image * 4);
    const size_t last = gm.n - (gm.n - 1) / nb * nb;
    struct gemm_problem g = {.m = gm.kk,
                             .n = gm.ohw,
                             .k = gm.ocg,
                             .batch = nb,
                             .alpha = 1.0f,
                             .beta = 0.0f,
                             .dtype = dt,
                             .a = {w->buffer->cl, 0, 0, 1, gm.kk, false},
                             .b = {dy->buffer->cl, 0, gm.oc * gm.ohw, gm.ohw,
                                   1, false},
                             .c_stride = per_image,
                             .ldc = gm.ohw,
                             .act = KILN_ACT_NONE,
                             .ws_base = round64(nb * per_image)};
    struct gemm_problem g_last = g;
    g_last.batch = last;
    size_t gemm = 0;
    cl_mem ws = NULL;
    cl_kernel fold = NULL;
    s = gemm_floats(queue->ctx, &g, &g_last, &gemm);
    KILN__CHECK(s, workspace(&op, g.ws_base, gemm, &ws));
    const bool planes = cpu_family(&op);
    KILN__CHECK(s, kiln__queue_kernel(
                       queue, "conv", CONV_OPTIONS,
                       planes ? "conv_col2im_planes" : "conv_col2im", &fold));
    g.c = ws;
    const struct geom_args a = geom_args(&gm);
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
      const size_t l0 = row_local(gm.w);
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
static kiln_status weights_one_gemm(struct kiln__op *op, const struct geom *gm,
                                    const kiln_image *x, const kiln_image *dy,
                                    const kiln_image *dw) {
  const kiln_dtype dt = x->dtype;
  const size_t es = kiln_dtype_size(dt);
  const size_t cols_image = gm->groups * gm->kk * gm->ohw;
  const size_t dy_image = gm->oc * gm->ohw;
  const size_t nb = chunk_images(op, gm->n, (cols_image + dy_image) * es);
  const size_t last = gm->n - (gm->n - 1) / nb * nb;
  const size_t run = nb * gm->ohw; /* a row of either operand */
  const size_t dy_at = nb * cols_image; /* elements of dt */
  /* dy as the image of a 1x1 convolution: oc channels of oh x ow. */
  struct geom dg = *gm;
  dg.c = gm->oc;
  dg.h = gm->oh;
  dg.w = gm->ow;
  dg.cg = gm->ocg;
  dg.kh = dg.kw = dg.sh = dg.sw = dg.dh = dg.dw = 1;
  dg.ph = dg.pw = 0;
  dg.kk = gm->ocg;
  struct gemm_problem g = {
      .m = gm->ocg,
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
      .ws_base = round64(kiln__div_up((dy_at + nb * dy_image) * es, 4))};
  struct gemm_problem g_last = g;
  g_last.k = last * gm->ohw;
  size_t gemm = 0;
  cl_mem ws = NULL;
  kiln_status s = gemm_floats(op->queue->ctx, &g, &g_last, &gemm);
  KILN__CHECK(s, workspace(op, g.ws_base, gemm, &ws));
  g.a.mem = g.b.mem = ws;
  for (size_t i0 = 0; i0 < gm->n && s == KILN_OK; i0 += nb) {
    const size_t cnt = gm->n - i0 < nb ? gm->n - i0 : nb;
    s = im2col(op, dt, gm, x->buffer->cl,
               x->offset + i0 * gm->c * gm->h * gm->w, cnt, ws, 0,
               gm->kk * run, gm->ohw, run);
    KILN__CHECK(s, im2col(op, dt, &dg, dy->buffer->cl,
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
  struct geom gm;
  kiln_status s = check_conv(fn, queue, names,
                             (const kiln_image *const[3]){x, dw, dy}, 1,
                             params, &gm);
  if (s == KILN_OK && db != NULL && db->buffer == NULL)
    s = kiln__fail(KILN_ERR_NULL_POINTER,
                   "%s: db.buffer is NULL (a NULL db means no bias gradient)",
                   fn);
  KILN__CHECK(s, db == NULL ? KILN_OK
                            : kiln__ops_check_dtype(fn, "db.dtype", db->dtype,
                                                    KILN__DT(KILN_F32)));
  KILN__CHECK(s, db == NULL ? KILN_OK
                            : same_size(fn, "the output channels", db->count,
                                        "db.count", gm.oc, "dw.n"));
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
  s = begin_conv(&op, queue, fn, "conv2d_backward_weights", dt, &gm,
                 (size_t[]){gm.oc, gm.kk, gm.n * gm.ohw},
                 (double)(gm.x_count + gm.y_count) * (double)es +
                     (double)gm.w_count * 4.0,
                 num_wait, wait_list, out_event);
  if (s != KILN_OK)
    return s;
  if (gm.w_count > 0 && gm.n > 0 && cpu_family(&op))
    s = weights_one_gemm(&op, &gm, x, dy, dw);
  else if (gm.w_count > 0) {
    /* The chunk's columns [image][g][r][p] (elements of dt), then the
     * per-image products [image][o][r] (f32) from element part_off. */
    const size_t cols_image = gm.groups * gm.kk * gm.ohw;
    const size_t part_image = gm.oc * gm.kk; /* = w_count */
    const size_t nb = chunk_images(&op, gm.n, cols_image * es + part_image * 4);
    const size_t last = gm.n == 0 ? 0 : gm.n - (gm.n - 1) / nb * nb;
    const size_t part_off = round64(kiln__div_up(nb * cols_image * es, 4));
    struct gemm_problem g = {.m = gm.ocg,
                             .n = gm.kk,
                             .k = gm.ohw,
                             .batch = nb,
                             .alpha = 1.0f,
                             .beta = 0.0f,
                             .dtype = dt,
                             .a = {dy->buffer->cl, 0, gm.oc * gm.ohw, gm.ohw,
                                   1, false},
                             .b = {NULL, 0, cols_image, 1, gm.ohw, false},
                             .ldc = gm.kk,
                             .c_stride = part_image,
                             .act = KILN_ACT_NONE,
                             .ws_base = round64(part_off + nb * part_image)};
    struct gemm_problem g_last = g;
    g_last.batch = last;
    size_t gemm = 0;
    cl_mem ws = NULL;
    cl_kernel fold = NULL;
    s = gemm_floats(queue->ctx, &g, &g_last, &gemm);
    KILN__CHECK(s, workspace(&op, g.ws_base, gemm, &ws));
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
        s = im2col(&op, dt, &gm, x->buffer->cl,
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
    s = kiln__op_kernel(&op, "conv", CONV_OPTIONS,
                        width_name(name, sizeof name, "conv_bias_grad", dt), &k,
                        8, KILN__ARG(dy_mem), KILN__ARG(yo), KILN__ARG(oc32),
                        KILN__ARG(ohw32), KILN__ARG(n32), KILN__ARG(bf16),
                        KILN__ARG(db_mem), KILN__ARG(bo));
    const size_t global[1] = {gm.oc * BIAS_WG}, local[1] = {BIAS_WG};
    KILN__CHECK(s, kiln__op_launch(&op, k, 1, global, local));
  }
  return kiln__op_end(&op, s, out_event);
}

/* ---- cache warming ------------------------------------------------------- */

void kiln__ops_warm_conv(const kiln_context *ctx, kiln__warm_add_fn add,
                         void *user) {
  (void)ctx;
  add(user, "conv", CONV_OPTIONS);
}
