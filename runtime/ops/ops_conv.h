/* What ops_conv.c (the checks, the chunks and workspace, im2col and the
 * forward pass) shares with ops_conv_grad.c (both gradients): a checked
 * call's geometry and the steps every entry point runs. */
#ifndef KILN_OPS_CONV_INTERNAL_H
#define KILN_OPS_CONV_INTERNAL_H

#include "ops_conv_gpu.h"
#include "ops_gemm.h"
#include "ops_train_internal.h"

/* cl_kernels/conv.cl is one program for every dtype (its kernels come in
 * two widths, 32 and 16 bits), built without options. */
#define CONV_OPTIONS ""

/* A checked call's geometry (kiln__conv_check): x n x c x h x w, w oc x cg
 * x kh x kw, y n x oc x oh x ow; cg = c / groups and ocg = oc / groups
 * channels per group, kk = cg kh kw, ohw = oh ow positions; the three
 * images' element counts. */
struct kiln__conv_geom {
  size_t n, c, h, w, oc, oh, ow;
  size_t kh, kw, sh, sw, ph, pw, dh, dw, groups;
  size_t cg, ocg, kk, ohw;
  size_t x_count, w_count, y_count;
};

/* gm as ops_conv_gpu.h's shape (an initializer). */
#define GPU_SHAPE(gm)                                                          \
  {(gm).n,  (gm).c,  (gm).h,  (gm).w,  (gm).oc, (gm).oh, (gm).ow, (gm).kh,     \
   (gm).kw, (gm).sh, (gm).sw, (gm).ph, (gm).pw, (gm).dh, (gm).dw, (gm).groups}

/* The geometry's kernel arguments shared by im2col and col2im (c through
 * groups), as uint. */
struct kiln__conv_args {
  cl_uint c, h, w, cg, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, groups;
};

struct kiln__conv_args kiln__conv_args(const struct kiln__conv_geom *gm);

/* The name of conv.cl's kernel base for elements of dt: base32 or base16. */
const char *kiln__conv_width_name(char *buf, size_t size, const char *base,
                                  kiln_dtype dt);

/* KILN_OK when a == b, else KILN_ERR_SHAPE_MISMATCH naming what disagrees
 * and both sources. */
kiln_status kiln__conv_same_size(const char *fn, const char *what, size_t a,
                                 const char *a_name, size_t b,
                                 const char *b_name);

/* The checks every entry point makes (ops_conv.c says which), filling in
 * gm. */
kiln_status kiln__conv_check(const char *fn, const kiln_queue *queue,
                             const char *const names[3],
                             const kiln_image *const im[3], int out,
                             const kiln_conv2d_params *params,
                             struct kiln__conv_geom *gm);

/* Start the op after its checks and describe it for tracing. */
kiln_status kiln__conv_begin(struct kiln__op *op, kiln_queue *queue,
                             const char *fn, const char *name, kiln_dtype dt,
                             const struct kiln__conv_geom *gm,
                             const size_t shape[3], double bytes,
                             size_t num_wait, kiln_event *const *wait_list,
                             kiln_event **out_event);

/* Images per chunk of n that keep per_image bytes each within the family's
 * limit (at least 1). */
size_t kiln__conv_chunk_images(const struct kiln__op *op, size_t n,
                               size_t per_image);

/* x rounded up to a multiple of 64 (elements: where workspace parts start). */
static inline size_t kiln__conv_round64(size_t x) {
  return kiln__div_up(x, 64) * 64;
}

/* The larger of the workspace floats the first and the last chunk's GEMM
 * need after ws_base. */
kiln_status kiln__conv_gemm_floats(const kiln_context *ctx,
                                   const struct gemm_problem *g_first,
                                   const struct gemm_problem *g_last,
                                   size_t *floats);

/* The queue's workspace for base_floats of the module's operands and gemm
 * floats of the GEMM's. */
kiln_status kiln__conv_workspace(struct kiln__op *op, size_t base_floats,
                                 size_t gemm, cl_mem *ws);

/* Work-group width along dimension 0 (image columns or positions). */
static inline size_t kiln__conv_row_local(size_t width) {
  return width >= 32 ? 32 : 16;
}

/* Whether op's context runs the CPU family (a plane per work-item). */
bool kiln__conv_cpu_family(const struct kiln__op *op);

/* Columns of nb images of x into ws (ops_conv.c gives the layout). */
kiln_status kiln__conv_im2col(struct kiln__op *op, kiln_dtype dt,
                              const struct kiln__conv_geom *gm, cl_mem x,
                              size_t xo, size_t nb, cl_mem ws, size_t co,
                              size_t g_st, size_t n_st, size_t r_st);

#endif
