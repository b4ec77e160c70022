/* The GPU family's implicit GEMM convolution (ops_conv_gpu.c), for
 * kiln_conv2d (ops_conv.c) and the tests. */
#ifndef KILN_OPS_CONV_GPU_H
#define KILN_OPS_CONV_GPU_H

#include "ops_internal.h"

/* A checked convolution's geometry (ops_conv.c's, kiln/kiln_ops_conv.h's
 * names): x n x c x h x w, w oc x c/groups x kh x kw, y n x oc x oh x ow. */
struct kiln__conv_shape {
  size_t n, c, h, w, oc, oh, ow;
  size_t kh, kw, sh, sw, ph, pw, dh, dw, groups;
};

/* The forward pass y = act(alpha conv(x, w) + beta y + bias) of a checked
 * call with something to write, as one launch of cl_kernels/conv_gemm.cl
 * over the whole batch, when op's context runs the GPU family and the
 * implicit kernel applies (ops_conv_gpu.c says when); *done false leaves
 * the call to im2col and the family's GEMM. */
kiln_status kiln__conv_forward_gpu(struct kiln__op *op,
                                   const struct kiln__conv_shape *cs,
                                   const kiln_image *x, const kiln_image *w,
                                   const kiln_image *y,
                                   const kiln_epilogue *e, bool *done);

/* The input gradient dx = conv_transpose(dy, w) of a checked call with
 * something to write, as one launch of cl_kernels/conv_gemm_data.cl, where
 * the implicit kernels apply (as above); *done false leaves it to im2col's
 * GEMM and col2im. */
kiln_status kiln__conv_backward_data_gpu(struct kiln__op *op,
                                         const struct kiln__conv_shape *cs,
                                         const kiln_image *dy,
                                         const kiln_image *w,
                                         const kiln_image *dx, bool *done);

/* Tests and benchmarks: false makes the GPU family's forward pass and
 * input gradient take im2col and the GEMM as where the implicit kernels do
 * not apply, true
 * (the default) restores it. Process-wide, set between ops like the other
 * test overrides; not exported by the shared library. */
void kiln__conv_set_implicit(bool on);

/* The conv_gemm and conv_gemm_data programs kiln_cache_warm builds: one
 * each per dtype on the GPU family. */
void kiln__ops_warm_conv_gpu(const kiln_context *ctx, kiln__warm_add_fn add,
                             void *user);

#endif
