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
 *     tile with explicit fma(). The workspace is capped (workspace_limit);
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

/* The most workspace one GEMM call asks of its queue (documented in
 * kiln_ops.h). Atomic only so that a test changing it is not a data race. */
#define GEMM_WORKSPACE_MAX ((size_t)64 << 20)
static atomic_size_t workspace_limit = GEMM_WORKSPACE_MAX;

void kiln__gemm_set_workspace_limit(size_t bytes) {
  atomic_store(&workspace_limit, bytes ? bytes : GEMM_WORKSPACE_MAX);
}

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

/* The epilogue does anything. */
static bool has_epilogue(const struct gemm_problem *g) {
  return g->bias != NULL || g->act != KILN_ACT_NONE;
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

/* ---- CPU family ---------------------------------------------------------- */

/* The CPU family's point (tune/space_cpu.c: register tile MR x NR of VW
 * floats, KC steps of k per pass, blocks of MB x NB register tiles per
 * work-item), from the context's variant, and the gemm_cpu program's
 * build options: one program per distinct tile, for every dtype. */
struct cpu_params {
  unsigned mr, nr, vw, kc, mb, nb;
  const char *options;
};

static kiln_status cpu_params(const kiln_context *ctx, struct cpu_params *p) {
  const struct kiln__variant *v;
  kiln_status s = kiln__variant_get(ctx, KILN__TUNED_GEMM_CPU, KILN_F32, &v);
  if (s != KILN_OK)
    return s; /* a test's override the kernel cannot run */
  const unsigned *x = v->point.v;
  *p = (struct cpu_params){x[KILN__GEMM_CPU_MR], x[KILN__GEMM_CPU_NR],
                           x[KILN__GEMM_CPU_VW], x[KILN__GEMM_CPU_KC],
                           x[KILN__GEMM_CPU_MB], x[KILN__GEMM_CPU_NB],
                           v->options};
  return KILN_OK;
}

void kiln__gemm_set_cpu_tile(unsigned mr, unsigned nr, unsigned vw,
                             unsigned kc) {
  struct kiln__point p = {{0}};
  kiln__gemm_cpu_point(vw, mr, nr, kc, &p);
  kiln__space_set_override(&kiln__gemm_cpu_space,
                           mr | nr | vw | kc ? &p : NULL);
}

/* Blocks of C per work-item: MB x NB register tiles (a B micro-panel in L1
 * across the block's rows, the block's A panels in L2); smaller blocks when
 * that would leave compute units idle (at least four blocks each). */
static void cpu_blocks(const kiln_context *ctx, const struct cpu_params *p,
                       size_t m, size_t n, size_t batch, size_t *mb,
                       size_t *nb) {
  size_t want = 4 * (size_t)(ctx->device->info.compute_units
                                 ? ctx->device->info.compute_units
                                 : 1);
  *mb = (size_t)p->mb * p->mr;
  *nb = (size_t)p->nb * p->nr;
  if (*mb > kiln__div_up(m, p->mr) * p->mr)
    *mb = kiln__div_up(m, p->mr) * p->mr;
  if (*nb > kiln__div_up(n, p->nr) * p->nr)
    *nb = kiln__div_up(n, p->nr) * p->nr;
  while (kiln__div_up(m, *mb) * kiln__div_up(n, *nb) * batch < want) {
    if (*mb / p->mr >= *nb / p->nr && *mb > p->mr)
      *mb = kiln__div_up(*mb / p->mr, 2) * p->mr;
    else if (*nb > p->nr)
      *nb = kiln__div_up(*nb / p->nr, 2) * p->nr;
    else
      break;
  }
}

/* Panels and steps of k per packing work-item: gemm_cpu.cl's PACK_PANELS
 * and PACK_STEPS. */
enum { PACK_PANELS = 4, PACK_STEPS = 256 };

static const char *dtype_suffix(kiln_dtype dtype) {
  return dtype == KILN_F16 ? "f16" : dtype == KILN_BF16 ? "bf16" : "f32";
}

/* The CPU family's workspace plan for g: per batch entry and step of k,
 * one padded column of A panels and one padded row of B panels, in chunks
 * of bch batch entries and kch steps of k. An operand shared by every
 * batch entry (stride 0) is packed once per chunk, not once per entry; an
 * operand already in panels (a kiln_packed) takes no workspace. Chunks of
 * k are whole passes of KC steps, so that chunking changes no bits (each
 * pass adds into C alike). Offsets in floats from the workspace's start
 * (after g->ws_base). */
struct cpu_plan {
  size_t mpan, npan, kch, bch;
  bool a_shared, b_shared;
  size_t a_off, a_batch, b_off, b_batch, ws_floats;
};

static void cpu_plan(const struct cpu_params *p, const struct gemm_problem *g,
                     struct cpu_plan *pl) {
  pl->mpan = kiln__div_up(g->m, p->mr);
  pl->npan = kiln__div_up(g->n, p->nr);
  pl->a_shared = g->a.batch_stride == 0 && g->batch > 1;
  pl->b_shared = g->b.batch_stride == 0 && g->batch > 1;
  const size_t per_k = (g->a.panels ? 0 : pl->mpan * p->mr) +
                       (g->b.panels ? 0 : pl->npan * p->nr); /* floats */
  const size_t cap = atomic_load(&workspace_limit) / sizeof(float);
  size_t per_batch;
  pl->kch = g->k;
  pl->bch = 1;
  if (per_k == 0) {
    pl->bch = g->batch; /* both operands packed: no workspace */
  } else if (!kiln__mul_overflows(per_k, g->k, &per_batch) &&
             per_batch <= cap) {
    pl->bch = cap / per_batch;
    if (pl->bch > g->batch)
      pl->bch = g->batch;
  } else {
    pl->kch = cap / per_k / p->kc * p->kc;
    if (pl->kch < p->kc)
      pl->kch = p->kc;
    if (pl->kch > g->k)
      pl->kch = g->k;
  }
  pl->a_batch = pl->a_shared ? 0 : pl->mpan * p->mr * pl->kch;
  pl->b_batch = pl->b_shared ? 0 : pl->npan * p->nr * pl->kch;
  const size_t a_floats =
      g->a.panels ? 0
      : pl->a_shared ? pl->mpan * p->mr * pl->kch
                     : pl->a_batch * pl->bch;
  const size_t b_floats =
      g->b.panels ? 0
      : pl->b_shared ? pl->npan * p->nr * pl->kch
                     : pl->b_batch * pl->bch;
  /* B's panels start on a 64-float boundary: the kernel reads them as
   * aligned vectors (ws_base is a multiple of 64 too). */
  pl->a_off = g->ws_base;
  pl->b_off = g->ws_base + kiln__div_up(a_floats, 64) * 64;
  pl->ws_floats = pl->b_off - g->ws_base + b_floats;
}

static kiln_status run_cpu(struct kiln__op *op, const struct gemm_problem *g) {
  kiln_queue *queue = op->queue;
  struct cpu_params p;
  kiln_status s = cpu_params(queue->ctx, &p);
  if (s != KILN_OK)
    return s;
  const char *options = p.options;
  char pack_a_name[32], pack_b_name[32];
  snprintf(pack_a_name, sizeof pack_a_name, "gemm_pack_a_%s",
           dtype_suffix(g->dtype));
  snprintf(pack_b_name, sizeof pack_b_name, "gemm_pack_b_%s",
           dtype_suffix(g->dtype));
  cl_kernel pack_a, pack_b, mul;
  s = kiln__queue_kernel(queue, "gemm_cpu", options, pack_a_name, &pack_a);
  if (s == KILN_OK)
    s = kiln__queue_kernel(queue, "gemm_cpu", options, pack_b_name, &pack_b);
  if (s == KILN_OK)
    s = kiln__queue_kernel(queue, "gemm_cpu", options, "gemm_cpu", &mul);
  if (s != KILN_OK)
    return s;

  struct cpu_plan pl;
  cpu_plan(&p, g, &pl);
  const size_t mpan = pl.mpan, npan = pl.npan, kch = pl.kch, bch = pl.bch;
  const bool a_shared = pl.a_shared, b_shared = pl.b_shared;
  const size_t a_batch = pl.a_batch, b_batch = pl.b_batch;
  cl_mem ws = NULL;
  if (pl.ws_floats > 0)
    s = kiln__op_workspace(op, (g->ws_base + pl.ws_floats) * sizeof(float),
                           &ws);
  if (s != KILN_OK)
    return s;
  /* Where the kernel reads each operand's panels: the workspace, chunk by
   * chunk, or a kiln_packed's buffer (full k, shared by the batch). */
  cl_mem pa = g->a.panels ? g->a.mem : ws, pb = g->b.panels ? g->b.mem : ws;
  const cl_ulong a_batch_k = g->a.panels ? 0 : a_batch,
                 b_batch_k = g->b.panels ? 0 : b_batch;

  size_t mb, nb;
  cpu_blocks(queue->ctx, &p, g->m, g->n, bch, &mb, &nb);
  const cl_uint m32 = (cl_uint)g->m, n32 = (cl_uint)g->n;
  const cl_uint mb32 = (cl_uint)mb, nb32 = (cl_uint)nb;
  const cl_ulong a_off64 = pl.a_off, a_batch64 = a_batch, b_batch64 = b_batch,
                 b_off64 = pl.b_off, ldc64 = g->ldc;
  const cl_ulong a_st = g->a.rs, a_sk = g->a.cs; /* A panels run along rows */
  const cl_ulong b_st = g->b.cs, b_sk = g->b.rs; /* B panels along columns */
  const cl_ulong a_bs = g->a.batch_stride, b_bs = g->b.batch_stride,
                 c_bs = g->c_stride;
  const size_t one[3] = {1, 1, 1};
  struct gemm_epilogue_args e = kiln__gemm_epilogue_args(g);

  for (size_t b0 = 0; b0 < g->batch && s == KILN_OK; b0 += bch) {
    const size_t bn = g->batch - b0 < bch ? g->batch - b0 : bch;
    const cl_ulong a_src = g->a.offset + b0 * g->a.batch_stride;
    const cl_ulong b_src = g->b.offset + b0 * g->b.batch_stride;
    const cl_ulong c_off = g->c_offset + b0 * g->c_stride;
    for (size_t k0 = 0; k0 < g->k && s == KILN_OK; k0 += kch) {
      const size_t kn = g->k - k0 < kch ? g->k - k0 : kch;
      const cl_uint kn32 = (cl_uint)kn, k0_32 = (cl_uint)k0;
      const float beta = k0 == 0 ? g->beta : 1.0f;
      const cl_uint read_c = k0 != 0 || g->beta != 0.0f;
      const cl_uint epi = has_epilogue(g) && k0 + kn == g->k;
      const size_t ga[3] = {kiln__div_up(mpan, PACK_PANELS),
                             kiln__div_up(kn, PACK_STEPS), a_shared ? 1 : bn};
      const size_t gb[3] = {kiln__div_up(npan, PACK_PANELS),
                             kiln__div_up(kn, PACK_STEPS), b_shared ? 1 : bn};
      const size_t gm[3] = {kiln__div_up(g->n, nb), kiln__div_up(g->m, mb), bn};
      cl_mem a_mem = g->a.mem, b_mem = g->b.mem, c_mem = g->c;
      /* Panels of a kiln_packed hold every step of k: the chunk starts k0
       * steps in, and a panel is k steps long. */
      const cl_ulong a_at = g->a.panels ? (cl_ulong)k0 * p.mr : a_off64,
                     b_at = g->b.panels ? (cl_ulong)k0 * p.nr : b_off64;
      const cl_ulong a_ks = g->a.panels ? g->k : kn,
                     b_ks = g->b.panels ? g->k : kn;
      if (!g->a.panels)
        s = kiln__op_args(op, pack_a, 11, KILN__ARG(a_mem), KILN__ARG(a_src),
                          KILN__ARG(a_bs), KILN__ARG(a_st), KILN__ARG(a_sk),
                          KILN__ARG(m32), KILN__ARG(kn32), KILN__ARG(k0_32),
                          KILN__ARG(ws), KILN__ARG(a_off64),
                          KILN__ARG(a_batch64));
      if (s == KILN_OK && !g->a.panels)
        s = kiln__op_launch(op, pack_a, 3, ga, one);
      if (s == KILN_OK && !g->b.panels)
        s = kiln__op_args(op, pack_b, 11, KILN__ARG(b_mem), KILN__ARG(b_src),
                          KILN__ARG(b_bs), KILN__ARG(b_st), KILN__ARG(b_sk),
                          KILN__ARG(n32), KILN__ARG(kn32), KILN__ARG(k0_32),
                          KILN__ARG(ws), KILN__ARG(b_off64),
                          KILN__ARG(b_batch64));
      if (s == KILN_OK && !g->b.panels)
        s = kiln__op_launch(op, pack_b, 3, gb, one);
      if (s == KILN_OK)
        s = kiln__op_args(
            op, mul, 27, KILN__ARG(m32), KILN__ARG(n32), KILN__ARG(kn32),
            KILN__ARG(mb32), KILN__ARG(nb32), KILN__ARG(g->alpha),
            KILN__ARG(beta), KILN__ARG(read_c), KILN__ARG(pa), KILN__ARG(a_at),
            KILN__ARG(a_batch_k), KILN__ARG(a_ks), KILN__ARG(pb),
            KILN__ARG(b_at), KILN__ARG(b_batch_k), KILN__ARG(b_ks),
            KILN__ARG(c_mem), KILN__ARG(c_off), KILN__ARG(c_bs),
            KILN__ARG(ldc64), KILN__ARG(epi), KILN__ARG(e.act),
            KILN__ARG(e.use_bias), KILN__ARG(e.bias), KILN__ARG(e.off),
            KILN__ARG(e.rs), KILN__ARG(e.cs));
      if (s == KILN_OK)
        s = kiln__op_launch(op, mul, 3, gm, one);
    }
  }
  return s;
}

/* The program the device's family builds ("gemm_cpu" or "gemm_gpu") into
 * *source and its options for operands of dtype, as the runs above pass
 * them; KILN_ERR_UNSUPPORTED, naming the reason, when a test's override
 * does not fit the device. */
static kiln_status family_program(const kiln_context *ctx, kiln_dtype dtype,
                                  const char **source, char *options,
                                  size_t size) {
  if (kiln__ops_tuning(ctx)->family == KILN_FAMILY_CPU) {
    struct cpu_params p;
    kiln_status s = cpu_params(ctx, &p);
    if (s == KILN_OK)
      snprintf(options, size, "%s", p.options);
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

/* ---- operands that stay packed: the kernels (ops_gemm_packed.c) --------- */

kiln_status kiln__gemm_panel_width(const kiln_context *ctx, kiln_operand role,
                                   unsigned *width) {
  struct cpu_params p;
  kiln_status s = cpu_params(ctx, &p);
  if (s == KILN_OK)
    *width = role == KILN_OPERAND_A ? p.mr : p.nr;
  return s;
}

kiln_status kiln__gemm_pack_panels(struct kiln__op *op, kiln_operand role,
                                   kiln_dtype dtype,
                                   const struct gemm_operand *src, size_t span,
                                   size_t k, cl_mem dst) {
  struct cpu_params p;
  kiln_status s = cpu_params(op->queue->ctx, &p);
  if (s != KILN_OK)
    return s;
  const bool is_a = role == KILN_OPERAND_A;
  char name[32];
  snprintf(name, sizeof name, "gemm_pack_%c_%s", is_a ? 'a' : 'b',
           dtype_suffix(dtype));
  cl_kernel pack;
  s = kiln__queue_kernel(op->queue, "gemm_cpu", p.options, name, &pack);
  if (s != KILN_OK)
    return s;
  const unsigned w = is_a ? p.mr : p.nr;
  /* The pack kernels' strides: st along the panels (rows of op(A),
   * columns of op(B)), sk along k; as run_cpu passes them. */
  const cl_ulong off = src->offset, bs = 0, st = is_a ? src->rs : src->cs,
                 sk = is_a ? src->cs : src->rs, dst_off = 0, dst_bs = 0;
  const cl_uint tn = (cl_uint)span, kn = (cl_uint)k, k0 = 0;
  cl_mem mem = src->mem;
  const size_t global[3] = {
      kiln__div_up(kiln__div_up(span, w), PACK_PANELS),
      kiln__div_up(k, PACK_STEPS), 1};
  const size_t one[3] = {1, 1, 1};
  s = kiln__op_args(op, pack, 11, KILN__ARG(mem), KILN__ARG(off),
                    KILN__ARG(bs), KILN__ARG(st), KILN__ARG(sk), KILN__ARG(tn),
                    KILN__ARG(kn), KILN__ARG(k0), KILN__ARG(dst),
                    KILN__ARG(dst_off), KILN__ARG(dst_bs));
  if (s == KILN_OK)
    s = kiln__op_launch(op, pack, 3, global, one);
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

/* Whether the CPU family's unpacked kernel takes the larger register
 * blocks: 16-float vectors (the same width the packed tile uses). Fails as
 * cpu_params does, so that a bad override is refused on either path. */
static kiln_status skinny_wide(const kiln_context *ctx, bool *wide) {
  struct cpu_params p;
  kiln_status s = cpu_params(ctx, &p);
  *wide = s == KILN_OK && p.vw >= 16;
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
      skinny_wide(ctx, &wide) != KILN_OK)
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
  struct cpu_params p;
  kiln_status s = cpu_params(ctx, &p);
  if (s != KILN_OK)
    return s;
  struct cpu_plan pl;
  cpu_plan(&p, g, &pl);
  *floats = pl.ws_floats;
  return KILN_OK;
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
    return run_cpu(op, g);
  bool wide = false;
  kiln_status s = skinny_wide(ctx, &wide);
  if (s == KILN_OK)
    s = kiln__gemm_use_skinny(g->m, g->n, g->k)
            ? kiln__gemm_run_skinny(op, g, wide)
            : run_cpu(op, g);
  return s;
}

/* ---- packed operands: the checks of their use (ops_gemm_packed.c makes
 * them; kiln_matmul and kiln_pack check them here) ------------------------ */

static const char *role_name(kiln_operand role) {
  return role == KILN_OPERAND_A ? "KILN_OPERAND_A" : "KILN_OPERAND_B";
}

static const char *layout_name(kiln_layout layout) {
  return layout == KILN_ROW_MAJOR ? "row-major" : "column-major";
}

/* x (named what) has p's shape, dtype, layout and trans:
 * KILN_ERR_SHAPE_MISMATCH naming both when not. */
kiln_status kiln__packed_check_shape(const char *fn, const char *what,
                                     const kiln_matrix *x,
                                     const kiln_packed *p) {
  const kiln_matrix *y = &p->shape;
  if (x->rows == y->rows && x->cols == y->cols && x->dtype == y->dtype &&
      x->layout == y->layout && x->trans == y->trans)
    return KILN_OK;
  return kiln__fail(KILN_ERR_SHAPE_MISMATCH,
                    "%s: %s (%zu x %zu %s, %s%s) and the packed matrix (%zu x "
                    "%zu %s, %s%s) disagree: a packed matrix is used with the "
                    "shape, dtype, layout and trans it was created with",
                    fn, what, x->rows, x->cols, kiln_dtype_name(x->dtype),
                    layout_name(x->layout),
                    x->trans == KILN_TRANS ? ", transposed" : "", y->rows,
                    y->cols, kiln_dtype_name(y->dtype), layout_name(y->layout),
                    y->trans == KILN_TRANS ? ", transposed" : "");
}

/* p's panels still fit the context's register tile. */
kiln_status kiln__packed_check_tile(const char *fn, const char *what,
                                    const kiln_packed *p) {
  if (p->panels == NULL)
    return KILN_OK;
  unsigned width = 0;
  kiln_status s = kiln__gemm_panel_width(p->ctx, p->role, &width);
  if (s != KILN_OK)
    return s;
  if (width != p->width)
    return kiln__fail(
        KILN_ERR_INVALID_STATE,
        "%s: %s was packed for panels of %s %u, but the context's gemm_cpu "
        "tuning now has %s %u: kiln_pack packs it again for the new tile",
        fn, what, p->role == KILN_OPERAND_A ? "MR" : "NR", p->width,
        p->role == KILN_OPERAND_A ? "MR" : "NR", width);
  return KILN_OK;
}

kiln_status kiln__packed_resolve(const char *fn, const char *what,
                                 const kiln_queue *queue, const kiln_matrix *x,
                                 kiln_operand role, kiln_matrix *out,
                                 const kiln_packed **packed) {
  *packed = NULL;
  kiln_status s = kiln__ops_check_desc(fn, what, x);
  if (s != KILN_OK)
    return s;
  *out = *x;
  const kiln_packed *p = x->packed;
  if (p == NULL)
    return KILN_OK;
  if (p->ctx != queue->ctx)
    return kiln__fail(KILN_ERR_WRONG_CONTEXT,
                      "%s: %s.packed belongs to another context than queue", fn,
                      what);
  if (p->role != role)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s.packed was created as %s, not as %s", fn, what,
                      role_name(p->role), role_name(role));
  const char *set = x->buffer != NULL   ? "buffer"
                    : x->offset != 0    ? "offset"
                    : x->ld != 0        ? "ld"
                    : x->batch_stride   ? "batch_stride"
                                        : NULL;
  if (set != NULL)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: %s.%s is set beside %s.packed: a packed operand has "
                      "buffer NULL and offset, ld and batch_stride 0 "
                      "(kiln_packed_get_matrix)",
                      fn, what, set, what);
  s = kiln__packed_check_shape(fn, what, x, p);
  if (s == KILN_OK)
    s = kiln__packed_check_tile(fn, what, p);
  if (s == KILN_OK && !atomic_load(&p->filled))
    s = kiln__fail(KILN_ERR_INVALID_STATE,
                   "%s: %s.packed holds no data yet: kiln_pack fills it", fn,
                   what);
  if (s != KILN_OK)
    return s;
  out->packed = NULL;
  out->buffer = p->copy;
  *packed = p;
  return KILN_OK;
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
