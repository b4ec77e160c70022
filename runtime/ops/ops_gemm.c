/* GEMM: argument checks, reduction of every layout and transpose to one
 * row-major form with general strides, and the two kernel families.
 *
 * Canonical form. Element (r, c) of op(X) lives at r * sr + c * sc from X's
 * offset: row-major as stored (sr, sc) = (ld, 1), transposed (1, ld);
 * column-major as stored (1, ld), transposed (ld, 1). A column-major C is
 * the row-major C^T = op(B)^T op(A)^T, so the column-major problem becomes
 * a row-major one with m and n swapped and A and B swapped (and their
 * strides exchanged). The kernels only ever see row-major C with ldc and
 * (rs, cs) strides for A and B.
 *
 * Families (the profile's tuning.family):
 *   CPU (cl_kernels/gemm_cpu.cl): pack op(A) and op(B) into f32 panels in the
 *     queue's workspace, then one work-item per block of C runs a register
 *     tile with explicit fma() (ops_gemm_cpu.c). The workspace is capped;
 *     bigger problems are packed and multiplied in chunks of the batch, or
 *     of k (later k chunks accumulate into C with beta = 1). With m or n
 *     small (use_skinny), packing would cost more than it saves:
 *     ops_gemm_skinny.c reads the operands in place instead.
 *   GPU (cl_kernels/gemm_gpu.cl): __local tiles, no workspace; a kernel
 *     with a parameter space, chosen, checked and launched by
 *     ops_gemm_gpu.c (the profile's row, a tuning file or kiln_tuning_set).
 *
 * Epilogue (kiln_matmul's kiln_epilogue): a bias per column of C and an
 * activation, applied by the kernel that writes the final value of C (the last
 * chunk of k on the CPU family), so a dense layer is one pass over C. In the
 * canonical form the bias runs along C's columns (row-major) or rows (a
 * column-major C, transposed): the kernels take its two strides.
 */
#include "ops_gemm.h"
#include "ops_internal.h"

#include <stdio.h>

/* The switch point of the unpacked kernel for few rows or columns. It pays
 * off while packing op(B) (n k copies) costs more than what the unpacked
 * kernel loses per output (a horizontal sum and a scalar epilogue), so it
 * grows with k: measured on 2 PoCL threads with n = 1024, both layouts of
 * B, the unpacked kernel won up to m = 8 at k = 64, about 16 to 32 at k =
 * 128 and 256, 64 (by a quarter) at k = 1024 and 4096, and tied at 128
 * (README, Training a network). Hence few <= k / 8, kept within [8, 64].
 * A test may fix the switch point instead (kiln__gemm_set_skinny_max);
 * atomic only so that doing so is not a data race. */
static atomic_int skinny_override = -1;

void kiln__gemm_set_skinny_max(int rows) {
  atomic_store(&skinny_override, rows < 0 ? -1 : rows);
}

bool kiln__gemm_use_skinny(size_t m, size_t n, size_t k) {
  const size_t few = m < n ? m : n;
  const int fixed = atomic_load(&skinny_override);
  if (fixed >= 0)
    return few <= (size_t)fixed;
  const size_t max = k / 8 < 8 ? 8 : k / 8 > 64 ? 64 : k / 8;
  return few <= max;
}

/* ---- argument checks ----------------------------------------------------- */

/* Elements spanned by a rows x cols matrix with leading dimension ld in
 * layout (0 when empty). */
static bool matrix_extent(kiln_layout layout, size_t rows, size_t cols,
                          size_t ld, size_t *out) {
  *out = 0;
  if (rows == 0 || cols == 0)
    return true;
  size_t lines = layout == KILN_ROW_MAJOR ? rows : cols;
  size_t len = layout == KILN_ROW_MAJOR ? cols : rows;
  size_t span;
  return !kiln__mul_overflows(lines - 1, ld, &span) &&
         !kiln__add_overflows(span, len, out);
}

/* Check one matrix argument: its leading dimension against the stored
 * shape, and that every batch entry lies in its buffer. *extent receives
 * one entry's extent. */
static kiln_status check_matrix(const char *fn, const kiln_queue *queue,
                                const char *name, const char *ld_name,
                                const char *stride_name, kiln_layout layout,
                                size_t rows, size_t cols,
                                const kiln_buffer *buf, size_t offset,
                                size_t ld, size_t stride, size_t batch,
                                kiln_dtype dtype, size_t *extent) {
  size_t len = layout == KILN_ROW_MAJOR ? cols : rows;
  size_t min_ld = len > 1 ? len : 1;
  if (ld < min_ld)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s %zu is less than %zu, the %s length of %s as "
                      "stored (%zu x %zu, %s)",
                      fn, ld_name, ld, min_ld,
                      layout == KILN_ROW_MAJOR ? "row" : "column", name, rows,
                      cols,
                      layout == KILN_ROW_MAJOR ? "row-major" : "column-major");
  size_t one, span = 0, total;
  if (!matrix_extent(layout, rows, cols, ld, &one) ||
      (batch > 1 && kiln__mul_overflows(batch - 1, stride, &span)) ||
      kiln__add_overflows(span, one, &total))
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: the extent of %s (%zu x %zu, %s %zu, %s %zu, "
                      "batch %zu) overflows size_t",
                      fn, name, rows, cols, ld_name, ld, stride_name, stride,
                      batch);
  *extent = one;
  if (one == 0)
    total = 0;
  return kiln__ops_check_range(fn, queue, name, buf, offset, total, dtype);
}

/* value is 0 or 1, the two values of the enum type_name. */
static kiln_status check_enum(const char *fn, const char *what, int value,
                              const char *type_name) {
  if (value != 0 && value != 1)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT, "%s: %s %d is not a valid %s",
                      fn, what, value, type_name);
  return KILN_OK;
}

/* Strides of op(X) for X stored in layout, transposed or not. */
static void op_strides(kiln_layout layout, kiln_trans trans, size_t ld,
                       size_t *rs, size_t *cs) {
  bool unit_cols = (layout == KILN_ROW_MAJOR) == (trans == KILN_NO_TRANS);
  *rs = unit_cols ? ld : 1;
  *cs = unit_cols ? 1 : ld;
}

/* The program the device's family builds ("gemm_cpu" or "gemm_gpu") into
 * *source and its options for operands of dtype, as the runs above pass
 * them; KILN_ERR_UNSUPPORTED, naming the reason, when a test's override
 * does not fit the device. */
static kiln_status family_program(const kiln_context *ctx, kiln_dtype dtype,
                                  const char **source, char *options,
                                  size_t size) {
  if (kiln__ops_tuning(ctx)->family == KILN_FAMILY_CPU) {
    const char *cpu_options = "";
    kiln_status s = kiln__gemm_cpu_options(ctx, &cpu_options);
    if (s == KILN_OK)
      snprintf(options, size, "%s", cpu_options);
    *source = "gemm_cpu";
    return s;
  }
  struct kiln__gemm_gpu_params p;
  kiln_status s = kiln__gemm_gpu_params_for(ctx, &p);
  if (s == KILN_OK)
    kiln__gemm_gpu_options(&p, dtype, options, size);
  *source = "gemm_gpu";
  return s;
}

kiln_status kiln__gemm_copy_lines(struct kiln__op *op, kiln_dtype dtype,
                                  cl_mem src, size_t src_off, size_t ld,
                                  size_t lines, size_t len, cl_mem dst) {
  char options[320];
  const char *source;
  cl_kernel copy;
  kiln_status s = family_program(op->queue->ctx, dtype, &source, options,
                                 sizeof options);
  if (s == KILN_OK)
    s = kiln__queue_kernel(op->queue, source, options,
                           kiln_dtype_size(dtype) == 4 ? "gemm_copy_lines_32"
                                                       : "gemm_copy_lines_16",
                           &copy);
  if (s != KILN_OK)
    return s;
  /* gemm_scale.clh: whole runs of a line per work-item on the CPU family,
   * element by element in groups of 16 on the GPU family. */
  const bool cpu = kiln__ops_tuning(op->queue->ctx)->family == KILN_FAMILY_CPU;
  const cl_uint per = cpu ? 1024 : 1;
  const cl_ulong off = src_off, ld64 = ld;
  const cl_uint len32 = (cl_uint)len, lines32 = (cl_uint)lines;
  const size_t local[3] = {cpu ? 1 : 16, 1, 1};
  const size_t items = kiln__div_up(len, per);
  const size_t global[3] = {cpu ? items : kiln__div_up(items, 16) * 16, lines,
                            1};
  s = kiln__op_args(op, copy, 7, KILN__ARG(src), KILN__ARG(off),
                    KILN__ARG(ld64), KILN__ARG(len32), KILN__ARG(lines32),
                    KILN__ARG(per), KILN__ARG(dst));
  if (s == KILN_OK)
    s = kiln__op_launch(op, copy, 3, global, local);
  return s;
}

void kiln__ops_warm_gemm(const kiln_context *ctx, kiln__warm_add_fn add,
                         void *user) {
  char options[320];
  const char *source;
  static const kiln_dtype dtypes[] = {KILN_F32, KILN_F16, KILN_BF16};
  if (kiln__ops_tuning(ctx)->family != KILN_FAMILY_CPU) {
    /* The GPU family builds one program per dtype, and the matrix units'
     * for f16 and bf16 where they run (tune/space_mma.c). */
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
      if (family_program(ctx, dtypes[i], &source, options, sizeof options) ==
          KILN_OK)
        add(user, source, options);
      const struct kiln__variant *v = NULL;
      if (dtypes[i] != KILN_F32 &&
          kiln__variant_get(ctx, KILN__TUNED_GEMM_MMA, dtypes[i], &v) ==
              KILN_OK &&
          v != NULL && v->off[0] == '\0')
        add(user, "gemm_mma", v->options);
    }
    return;
  }
  bool wide;
  if (family_program(ctx, KILN_F32, &source, options, sizeof options) !=
          KILN_OK ||
      kiln__gemm_cpu_skinny_wide(ctx, &wide) != KILN_OK)
    return;
  add(user, source, options);
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
    kiln__gemm_skinny_options(dtypes[i], wide, options, sizeof options);
    add(user, "gemm_skinny", options);
  }
}

/* C = act(beta * C + bias), for alpha == 0 or k == 0: A and B are not
 * read. */
static kiln_status run_scale(struct kiln__op *op,
                             const struct gemm_problem *g) {
  cl_kernel kernel;
  /* The kernel is in both programs; take the one the family builds anyway,
   * with the same options so that it is not built twice. */
  char options[320];
  const char *source;
  kiln_status s = family_program(op->queue->ctx, g->dtype, &source, options,
                                 sizeof options);
  if (s == KILN_OK)
    s = kiln__queue_kernel(op->queue, source, options, "gemm_scale_c",
                           &kernel);
  if (s != KILN_OK)
    return s;
  const cl_uint m32 = (cl_uint)g->m, n32 = (cl_uint)g->n;
  const cl_ulong c_off = g->c_offset, c_bs = g->c_stride, ldc = g->ldc;
  cl_mem c_mem = g->c;
  struct gemm_epilogue_args e = kiln__gemm_epilogue_args(g);
  const size_t local[3] = {16, 1, 1};
  const size_t global[3] = {kiln__div_up(g->n, 16) * 16, g->m, g->batch};
  s = kiln__op_args(op, kernel, 13, KILN__ARG(m32), KILN__ARG(n32),
                    KILN__ARG(g->beta), KILN__ARG(c_mem), KILN__ARG(c_off),
                    KILN__ARG(c_bs), KILN__ARG(ldc), KILN__ARG(e.act),
                    KILN__ARG(e.use_bias), KILN__ARG(e.bias), KILN__ARG(e.off),
                    KILN__ARG(e.rs), KILN__ARG(e.cs));
  if (s == KILN_OK)
    s = kiln__op_launch(op, kernel, 3, global, local);
  return s;
}

/* ---- the internal entry ------------------------------------------------- */

kiln_status kiln__gemm_workspace_floats(const kiln_context *ctx,
                                        const struct gemm_problem *g,
                                        size_t *floats) {
  *floats = 0;
  if (g->k == 0 || g->alpha == 0.0f ||
      kiln__ops_tuning(ctx)->family != KILN_FAMILY_CPU ||
      (!g->a.panels && !g->b.panels && kiln__gemm_use_skinny(g->m, g->n, g->k)))
    return KILN_OK;
  return kiln__gemm_cpu_workspace_floats(ctx, g, floats);
}

kiln_status kiln__gemm_enqueue(struct kiln__op *op,
                               const struct gemm_problem *g) {
  const kiln_context *ctx = op->queue->ctx;
  if (g->k == 0 || g->alpha == 0.0f)
    return run_scale(op, g);
  if (kiln__ops_tuning(ctx)->family != KILN_FAMILY_CPU)
    return kiln__gemm_run_gpu(op, g);
  /* A packed operand is in panels: the register-tile kernel reads them. */
  if (g->a.panels || g->b.panels)
    return kiln__gemm_run_cpu(op, g);
  bool wide = false;
  kiln_status s = kiln__gemm_cpu_skinny_wide(ctx, &wide);
  if (s == KILN_OK)
    s = kiln__gemm_use_skinny(g->m, g->n, g->k)
            ? kiln__gemm_run_skinny(op, g, wide)
            : kiln__gemm_run_cpu(op, g);
  return s;
}

/* ---- entry points -------------------------------------------------------- */

static bool ranges_overlap(size_t a0, size_t a1, size_t b0, size_t b1) {
  return a0 < b1 && b0 < a1;
}

static kiln_status
gemm(const char *fn, kiln_queue *queue, kiln_layout layout, kiln_trans trans_a,
     kiln_trans trans_b, size_t m, size_t n, size_t k, float alpha,
     kiln_dtype dtype, const kiln_buffer *a, size_t a_offset, size_t lda,
     size_t stride_a, const kiln_buffer *b, size_t b_offset, size_t ldb,
     size_t stride_b, float beta, kiln_buffer *c, size_t c_offset, size_t ldc,
     size_t stride_c, size_t batch, const kiln_buffer *bias, size_t bias_offset,
     kiln_activation act, bool a_panels, bool b_panels, size_t num_wait,
     kiln_event *const *wait_list, kiln_event **out_event) {
  kiln_status s = kiln__ops_check_queue(fn, queue);
  if (s == KILN_OK)
    s = check_enum(fn, "layout", (int)layout, "kiln_layout");
  if (s == KILN_OK)
    s = check_enum(fn, "trans_a", (int)trans_a, "kiln_trans");
  if (s == KILN_OK)
    s = check_enum(fn, "trans_b", (int)trans_b, "kiln_trans");
  if (s == KILN_OK)
    s = kiln__ops_check_dtype(fn, "a.dtype", dtype, KILN__DT_FLOATS);
  if (s != KILN_OK)
    return s;
  const size_t dims[3] = {m, n, k};
  static const char *const dim_names[3] = {"m", "n", "k"};
  for (int i = 0; i < 3; i++)
    if (dims[i] > INT32_MAX)
      return kiln__fail(KILN_ERR_INVALID_SIZE,
                        "%s: %s %zu exceeds INT32_MAX, the largest dimension "
                        "the kernels index",
                        fn, dim_names[i], dims[i]);
  if (batch > UINT32_MAX)
    return kiln__fail(KILN_ERR_INVALID_SIZE, "%s: batch %zu exceeds UINT32_MAX",
                      fn, batch);
  const bool ta = trans_a == KILN_TRANS, tb = trans_b == KILN_TRANS;
  /* Panels (a kiln_packed, checked by kiln__packed_resolve) lie in a
   * buffer of their own, of their own layout. */
  size_t a_ext = 0, b_ext = 0, c_ext;
  if (!a_panels)
    s = check_matrix(fn, queue, "a", "a.ld", "a.batch_stride", layout,
                     ta ? k : m, ta ? m : k, a, a_offset, lda, stride_a, batch,
                     dtype, &a_ext);
  if (s == KILN_OK && !b_panels)
    s = check_matrix(fn, queue, "b", "b.ld", "b.batch_stride", layout,
                     tb ? n : k, tb ? k : n, b, b_offset, ldb, stride_b, batch,
                     dtype, &b_ext);
  if (s == KILN_OK)
    s = check_matrix(fn, queue, "c", "c.ld", "c.batch_stride", layout, m, n, c,
                     c_offset, ldc, stride_c, batch, KILN_F32, &c_ext);
  if (s == KILN_OK && act != KILN_ACT_NONE && act != KILN_ACT_RELU &&
      act != KILN_ACT_GELU)
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: epilogue.activation %d is not a valid kiln_activation",
                   fn, (int)act);
  /* The bias is read whenever C is written (m, n and batch > 0), even when
   * k or alpha is 0. */
  if (s == KILN_OK && bias != NULL)
    s = kiln__ops_check_in(fn, queue, "bias", bias, bias_offset, n, KILN_F32);
  /* Other work-items write C while the bias is read. */
  if (s == KILN_OK && bias != NULL)
    s = kiln__ops_check_overlap(fn, "bias", bias, bias_offset, n, KILN_F32,
                                "c", c, c_offset, c_ext, KILN_F32, false);
  if (s != KILN_OK)
    return s;
  if (batch > 1 && c_ext > 0 && stride_c < c_ext)
    return kiln__fail(
        KILN_ERR_INVALID_ARGUMENT,
        "%s: c.batch_stride %zu is less than the %zu elements one C "
        "spans, so batch entries of C would overlap",
        fn, stride_c, c_ext);
  /* C must not overlap A or B: a cheap check for the common mistake of
   * passing the same buffer (views of one parent are not detected). */
  size_t esize = kiln_dtype_size(dtype), c_end = 0, x_end = 0;
  const size_t c_lo = c_offset * 4;
  c_end = c_lo + ((batch - (batch > 0)) * stride_c + c_ext) * 4;
  const kiln_buffer *inputs[2] = {a, b};
  const size_t in_off[2] = {a_offset, b_offset}, in_ext[2] = {a_ext, b_ext},
               in_stride[2] = {stride_a, stride_b};
  for (int i = 0; i < 2 && batch > 0 && c_ext > 0 && k > 0; i++) {
    if (inputs[i]->cl != c->cl || in_ext[i] == 0)
      continue;
    const size_t lo = in_off[i] * esize;
    x_end = lo + ((batch - 1) * in_stride[i] + in_ext[i]) * esize;
    if (ranges_overlap(lo, x_end, c_lo, c_end))
      return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                        "%s: c overlaps %s in the same buffer", fn,
                        i == 0 ? "a" : "b");
  }

  struct kiln__op op;
  s = kiln__op_begin(&op, queue, fn, num_wait, wait_list, out_event);
  if (s != KILN_OK)
    return s;
  const double mnk = (double)m * (double)n * (double)k * (double)batch;
  const double bytes =
      (double)batch * ((double)(m * k + k * n) * (double)esize +
                       (double)(m * n) * 4.0 * (beta != 0.0f ? 2.0 : 1.0));
  kiln__op_describe(&op, batch > 1 ? "gemm_batched" : "gemm", dtype, 3,
                    (size_t[]){m, n, k}, bytes, 2.0 * mnk);
  if (m > 0 && n > 0 && batch > 0) {
    struct gemm_problem g = {.m = m,
                             .n = n,
                             .k = k,
                             .batch = batch,
                             .alpha = alpha,
                             .beta = beta,
                             .dtype = dtype,
                             .c = c->cl,
                             .c_offset = c_offset,
                             .c_stride = stride_c,
                             .ldc = ldc,
                             .act = act,
                             .bias = bias != NULL ? bias->cl : NULL,
                             .bias_offset = bias_offset,
                             .bias_rs = layout == KILN_ROW_MAJOR ? 0 : 1,
                             .bias_cs = layout == KILN_ROW_MAJOR ? 1 : 0};
    size_t ars, acs, brs, bcs;
    op_strides(layout, trans_a, lda, &ars, &acs);
    op_strides(layout, trans_b, ldb, &brs, &bcs);
    struct gemm_operand opa = {a->cl, a_offset, stride_a, ars, acs, a_panels};
    struct gemm_operand opb = {b->cl, b_offset, stride_b, brs, bcs, b_panels};
    if (layout == KILN_ROW_MAJOR) {
      g.a = opa;
      g.b = opb;
    } else {
      /* C^T (n x m, row-major with ldc) = op(B)^T op(A)^T. */
      g.m = n;
      g.n = m;
      /* (kiln_matmul takes no panels with a column-major C.) */
      g.a = (struct gemm_operand){b->cl, b_offset, stride_b, bcs, brs, false};
      g.b = (struct gemm_operand){a->cl, a_offset, stride_a, acs, ars, false};
    }
    s = kiln__gemm_enqueue(&op, &g);
  }
  return kiln__op_end(&op, s, out_event);
}

void kiln__gemm_op_dims(const kiln_matrix *x, size_t *rows, size_t *cols) {
  const bool t = x->trans == KILN_TRANS;
  *rows = t ? x->cols : x->rows;
  *cols = t ? x->rows : x->cols;
}

/* x, an operand of a GEMM computed in layout: as stored, or, when x is in
 * the other layout, the same elements read as the transpose in layout (a
 * column-major r x c matrix is the row-major c x r one), with trans
 * flipped so that op(x) is unchanged. */
static kiln_matrix in_layout(const kiln_matrix *x, size_t ld,
                             kiln_layout layout) {
  kiln_matrix y = *x;
  y.ld = ld;
  if (x->layout != layout) {
    y.layout = layout;
    y.rows = x->cols;
    y.cols = x->rows;
    y.trans = x->trans == KILN_TRANS ? KILN_NO_TRANS : KILN_TRANS;
  }
  return y;
}

/* Operands whose sizes must agree; KILN_ERR_SHAPE_MISMATCH naming both. */
static kiln_status check_dim(const char *fn, const char *what, size_t x,
                             const char *x_name, size_t y, const char *y_name) {
  if (x != y)
    return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                      "%s: %s disagree: %zu from %s, %zu from %s", fn, what, x,
                      x_name, y, y_name);
  return KILN_OK;
}

KILN_API kiln_status kiln_matmul(kiln_queue *queue, size_t batch,
                                 const kiln_matrix *a_in,
                                 const kiln_matrix *b_in, const kiln_matrix *c,
                                 const kiln_epilogue *epilogue, size_t num_wait,
                                 kiln_event *const *wait_list,
                                 kiln_event **out_event) {
  static const char fn[] = "kiln_matmul";
  static const kiln_epilogue plain = KILN_EPILOGUE_INIT;
  const kiln_epilogue *e = epilogue != NULL ? epilogue : &plain;
  size_t lda = 0, ldb = 0, ldc = 0;
  /* A packed operand becomes the matrix it holds: its copy in a buffer, or
   * below, where the problem runs them, its panels (a_panels, b_panels),
   * which the checks pass over. */
  kiln_matrix ra, rb;
  const kiln_packed *pa = NULL, *pb = NULL;
  bool a_panels = false, b_panels = false;
  kiln_status s = kiln__ops_check_queue(fn, queue);
  if (s == KILN_OK)
    s = kiln__packed_resolve(fn, "a", queue, a_in, KILN_OPERAND_A, &ra, &pa);
  if (s == KILN_OK)
    s = kiln__packed_resolve(fn, "b", queue, b_in, KILN_OPERAND_B, &rb, &pb);
  if (s != KILN_OK)
    return s;
  const kiln_matrix *a = &ra, *b = &rb;
  if (s == KILN_OK)
    s = kiln__ops_check_matrix(fn, "a", a, &lda);
  if (s == KILN_OK)
    s = kiln__ops_check_matrix(fn, "b", b, &ldb);
  if (s == KILN_OK)
    s = kiln__ops_check_matrix(fn, "c", c, &ldc);
  if (s != KILN_OK)
    return s;
  if (c->trans != KILN_NO_TRANS)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: c.trans is KILN_TRANS: C is written as stored "
                      "(for C^T, swap A and B and transpose both)",
                      fn);
  size_t m, k, kb, n;
  kiln__gemm_op_dims(a, &m, &k);
  kiln__gemm_op_dims(b, &kb, &n);
  s = check_dim(fn, "the inner dimensions (k)", k, "op(a)'s columns", kb,
                "op(b)'s rows");
  if (s == KILN_OK)
    s = check_dim(fn, "the rows of the product (m)", m, "op(a)", c->rows, "c");
  if (s == KILN_OK)
    s = check_dim(fn, "the columns of the product (n)", n, "op(b)", c->cols,
                  "c");
  if (s == KILN_OK && a->dtype != b->dtype)
    s = kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                   "%s: a (%s) and b (%s) disagree: A and B share one dtype",
                   fn, kiln_dtype_name(a->dtype), kiln_dtype_name(b->dtype));
  if (s == KILN_OK)
    s = kiln__ops_check_dtype(fn, "c.dtype", c->dtype, KILN__DT(KILN_F32));
  if (s == KILN_OK && e->bias != NULL && e->bias->buffer == NULL)
    s = kiln__fail(KILN_ERR_NULL_POINTER,
                   "%s: epilogue.bias's buffer is NULL (a NULL bias range "
                   "means no bias)",
                   fn);
  if (s == KILN_OK && e->bias != NULL)
    s = kiln__ops_check_dtype(fn, "epilogue.bias dtype", e->bias->dtype,
                              KILN__DT(KILN_F32));
  if (s == KILN_OK && e->bias != NULL)
    s = check_dim(fn, "the bias and the columns of C", e->bias->count,
                  "epilogue.bias", n, "c");
  if (s != KILN_OK)
    return s;
  /* Panels wherever the unpacked call would pack them (the same kernel, so
   * the same bits); the copy where it reads operands in place, and with a
   * column-major C, whose canonical form swaps A and B (the panels are
   * MR rows of op(A) or NR columns of op(B), not the other role's). */
  if (c->layout == KILN_ROW_MAJOR &&
      ((pa != NULL && pa->panels != NULL) ||
       (pb != NULL && pb->panels != NULL))) {
    const bool in_place = kiln__gemm_use_skinny(m, n, k);
    a_panels = !in_place && pa != NULL && pa->panels != NULL;
    b_panels = !in_place && pb != NULL && pb->panels != NULL;
    if (a_panels)
      ra.buffer = pa->panels;
    if (b_panels)
      rb.buffer = pb->panels;
    /* (Unchecked below: a recording keeps them alive from here.) */
    if (a_panels)
      s = kiln__ops_record_buffer(queue, pa->panels);
    if (s == KILN_OK && b_panels)
      s = kiln__ops_record_buffer(queue, pb->panels);
    if (s != KILN_OK)
      return s;
  }
  /* Everything in C's layout: kernels see one layout (ops_gemm.c's
   * canonical form starts from there). */
  const kiln_matrix ca = in_layout(a, lda, c->layout);
  const kiln_matrix cb = in_layout(b, ldb, c->layout);
  return gemm(fn, queue, c->layout, ca.trans, cb.trans, m, n, k, e->alpha,
              a->dtype, ca.buffer, ca.offset, ca.ld, ca.batch_stride, cb.buffer,
              cb.offset, cb.ld, cb.batch_stride, e->beta, c->buffer, c->offset,
              ldc, c->batch_stride, batch,
              e->bias != NULL ? e->bias->buffer : NULL,
              e->bias != NULL ? e->bias->offset : 0, e->activation, a_panels,
              b_panels, num_wait, wait_list, out_event);
}
