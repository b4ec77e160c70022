/* GEMM on the CPU family (cl_kernels/gemm_cpu.cl): the register tile's
 * parameters from the context's gemm_cpu variant, the workspace plan, and
 * the packing and multiplying launches; also the panels of operands that
 * stay packed (ops_gemm_packed.c). ops_gemm.c checks the arguments, brings
 * every layout to the canonical row-major form and picks the family. */
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

/* The epilogue does anything. */
static bool has_epilogue(const struct gemm_problem *g) {
  return g->bias != NULL || g->act != KILN_ACT_NONE;
}

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

kiln_status kiln__gemm_run_cpu(struct kiln__op *op,
                               const struct gemm_problem *g) {
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

/* ---- operands that stay packed: their panels (ops_gemm_packed.c) -------- */

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
   * columns of op(B)), sk along k; as kiln__gemm_run_cpu passes them. */
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

/* ---- what ops_gemm.c asks of the family -------------------------------- */

/* Whether the CPU family's unpacked kernel takes the larger register
 * blocks: 16-float vectors (the same width the packed tile uses). Fails as
 * cpu_params does, so that a bad override is refused on either path. */
kiln_status kiln__gemm_cpu_skinny_wide(const kiln_context *ctx, bool *wide) {
  struct cpu_params p;
  kiln_status s = cpu_params(ctx, &p);
  *wide = s == KILN_OK && p.vw >= 16;
  return s;
}

kiln_status kiln__gemm_cpu_options(const kiln_context *ctx,
                                   const char **options) {
  struct cpu_params p;
  kiln_status s = cpu_params(ctx, &p);
  if (s == KILN_OK)
    *options = p.options;
  return s;
}

kiln_status kiln__gemm_cpu_workspace_floats(const kiln_context *ctx,
                                            const struct gemm_problem *g,
                                            size_t *floats) {
  struct cpu_params p;
  kiln_status s = cpu_params(ctx, &p);
  if (s != KILN_OK)
    return s;
  struct cpu_plan pl;
  cpu_plan(&p, g, &pl);
  *floats = pl.ws_floats;
  return KILN_OK;
}
