/* Fused multi-head attention (kiln/kiln_ops_attention.h): forward with an
 * online softmax, backward from the saved log-sum-exp, and the key/value
 * cache copy.
 *
 * Build options:
 *   -DDT=n      storage type of q, k, v, o and the gradients (common.clh);
 *               lse and the backward's D are f32.
 *   -DFAMILY=f  0 GPU: a work-group of BQ rows stages tiles of BK rows of
 *               the other operand (K and V forward and for dQ; Q and dO for
 *               dK and dV) in local memory as f32, between barriers.
 *               1 CPU: one work-item per row reads the tiles straight from
 *               global memory (its caches); no local memory, no barriers.
 *   -DDMAX=n    32, 64 or 128: the private row arrays' length; the head
 *               size d <= DMAX is a kernel argument.
 *   -DBQ=n      rows per work-group (the local size of dimension 0).
 *   -DBK=n      rows per tile (2048 / DMAX: 16 KiB of local f32 for two
 *               tiles on the GPU family).
 * Launches: dimension 0 covers the rows (queries, or keys for dK/dV)
 * rounded up to BQ, dimension 1 the batch x heads pairs (entry b heads +
 * h). Operands are addressed by strides in elements: a row r of batch
 * entry b and head h of operand x is at x_off + b x_bs + h x_hs + r x_ld,
 * its d elements consecutive. The causal mask lets query i (at position
 * qpos0 + i) see keys j <= qpos0 + i.
 *
 * Online softmax per query row: over each tile the row's running maximum m
 * and sum l and accumulator acc are rescaled once by exp(m_old - m_new),
 * then p_j = exp(s_j - m_new) is added; out = acc / l, lse = m + log(l).
 * Backward (dS = P o (dP - D), D_i = dO_i . O_i): attn_bwd_dq walks the
 * keys for its query row (dQ = scale dS K) and stores D_i; attn_bwd_dkdv
 * then walks the queries for its key row (dV = P^T dO, dK = scale dS^T Q).
 * Every sum runs in index order, so results do not depend on the launch. */
#include "common.clh"

#ifndef FAMILY
#define FAMILY 1
#endif
#ifndef DMAX
#define DMAX 64
#endif
#ifndef BQ
#define BQ 16
#endif
#ifndef BK
#define BK (2048 / DMAX)
#endif

/* The row operations of every kernel: DOT(a, tile, x, base, ld, j0, r) is
 * the dot product of the private row a with row r of a tile (staged, GPU)
 * or of rows from j0 (CPU); AXPY(y, alpha, ...) adds alpha times that row
 * to the private row y. The GPU family goes element by element (its
 * parallelism is across rows); the CPU family keeps 16 partial sums in a
 * float16, which breaks the one serial fma chain LLVM would otherwise keep
 * (it does not reassociate float sums) into vector operations, then adds
 * the 16 lanes in a fixed tree and the d % 16 tail in order. */
#if FAMILY == 0
float dot_tile(const float *a, __local const float *t, uint d) {
  float s = 0.0f;
  for (uint c = 0; c < d; c++)
    s = fma(a[c], t[c], s);
  return s;
}
void axpy_tile(float *y, float alpha, __local const float *t, uint d) {
  for (uint c = 0; c < d; c++)
    y[c] = fma(alpha, t[c], y[c]);
}
#define DOT(a, t, x, base, ld, j0, r) dot_tile((a), (t) + (r) * DMAX, d)
#define AXPY(y, alpha, t, x, base, ld, j0, r)                                  \
  axpy_tile((y), (alpha), (t) + (r) * DMAX, d)
#else
float dot_row(const float *a, __global const T *x, ulong at, uint d) {
  float16 acc = (float16)0.0f;
  uint c = 0;
  for (; c + 16 <= d; c += 16)
    acc = fma(vload16(0, a + c), LOAD16(x + at + c), acc);
  float s = KILN_HTREE16(acc, KILN_ADD);
  for (; c < d; c++)
    s = fma(a[c], LOAD(x, at + c), s);
  return s;
}
void axpy_row(float *y, float alpha, __global const T *x, ulong at, uint d) {
  uint c = 0;
  for (; c + 16 <= d; c += 16)
    vstore16(fma((float16)alpha, LOAD16(x + at + c), vload16(0, y + c)), 0,
             y + c);
  for (; c < d; c++)
    y[c] = fma(alpha, LOAD(x, at + c), y[c]);
}
#define DOT(a, t, x, base, ld, j0, r)                                          \
  dot_row((a), (x), (base) + (ulong)((j0) + (r)) * (ld), d)
#define AXPY(y, alpha, t, x, base, ld, j0, r)                                  \
  axpy_row((y), (alpha), (x), (base) + (ulong)((j0) + (r)) * (ld), d)
#endif

#if FAMILY == 0
/* Stage rows [j0, j0 + n) of a (row stride ld from base) as f32 in t:
 * BQ work-items share the n d elements. Barriers on both sides. */
#define STAGE(t, a, base, ld, j0, n, d)                                        \
  for (uint e_ = get_local_id(0); e_ < (n) * (d); e_ += BQ) {                  \
    uint r_ = e_ / (d), c_ = e_ % (d);                                         \
    (t)[r_ * DMAX + c_] = LOAD(a, (base) + (ulong)((j0) + r_) * (ld) + c_);    \
  }
#define SYNC() barrier(CLK_LOCAL_MEM_FENCE)
#else
#define SYNC()
#endif

/* Where row r of entry (b, h) of an operand starts. */
#define ROW(off, bs, hs, ld, b, h, r)                                          \
  ((off) + (ulong)(b) * (bs) + (ulong)(h) * (hs) + (ulong)(r) * (ld))

__kernel __attribute__((reqd_work_group_size(BQ, 1, 1))) void
attn_fwd(__global const T *q, ulong q_off, ulong q_ld, ulong q_bs,
         __global const T *k, ulong k_off, ulong k_ld, ulong k_bs, ulong k_hs,
         __global const T *v, ulong v_off, ulong v_ld, ulong v_bs, ulong v_hs,
         __global T *o, ulong o_off, ulong o_ld, ulong o_bs,
         __global float *lse, ulong lse_off, uint has_lse, uint tq, uint tk,
         uint qpos0, uint heads, uint d, uint causal, float scale) {
#if FAMILY == 0
  __local float kt[BK * DMAX], vt[BK * DMAX];
#endif
  const uint i = get_global_id(0), bh = get_global_id(1);
  const uint b = bh / heads, h = bh % heads;
  const bool active = i < tq;
  const ulong kb = ROW(k_off, k_bs, k_hs, 0, b, h, 0);
  const ulong vb = ROW(v_off, v_bs, v_hs, 0, b, h, 0);
  float qr[DMAX], acc[DMAX];
  const ulong qrow = ROW(q_off, q_bs, d, q_ld, b, h, active ? i : 0);
  for (uint c = 0; c < d; c++) {
    qr[c] = active ? LOAD(q, qrow + c) * scale : 0.0f;
    acc[c] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  /* The keys any row of this group (GPU) or this row (CPU) sees. */
#if FAMILY == 0
  const uint last = min(tq, (uint)(get_group_id(0) + 1) * BQ) - 1;
#else
  const uint last = active ? i : 0;
#endif
  const uint kend = causal ? min(tk, qpos0 + last + 1) : tk;
  const uint mine = causal ? qpos0 + i + 1 : tk; /* this row's key limit */
  for (uint j0 = 0; j0 < kend; j0 += BK) {
    const uint n = min((uint)BK, kend - j0);
#if FAMILY == 0
    SYNC();
    STAGE(kt, k, kb, k_ld, j0, n, d);
    STAGE(vt, v, vb, v_ld, j0, n, d);
    SYNC();
#endif
    const uint lim = !active || mine <= j0 ? 0 : min(n, mine - j0);
    float s[BK];
    float mt = m;
    for (uint r = 0; r < lim; r++) {
      s[r] = DOT(qr, kt, k, kb, k_ld, j0, r);
      mt = fmax(mt, s[r]);
    }
    if (lim > 0) {
      const float corr = exp(m - mt);
      l *= corr;
      for (uint c = 0; c < d; c++)
        acc[c] *= corr;
      for (uint r = 0; r < lim; r++) {
        const float p = exp(s[r] - mt);
        l += p;
        AXPY(acc, p, vt, v, vb, v_ld, j0, r);
      }
      m = mt;
    }
  }
  if (!active)
    return;
  const float inv = 1.0f / l;
  const ulong orow = ROW(o_off, o_bs, d, o_ld, b, h, i);
  for (uint c = 0; c < d; c++)
    STORE(o, orow + c, acc[c] * inv);
  if (has_lse)
    lse[lse_off + (ulong)bh * tq + i] = m + log(l);
}

/* dQ for query rows, and D_i = dO_i . O_i into dsum (bh t + i). qkv-style
 * operands: q, k, v share one buffer layout (x_ld, x_bs) at their column
 * offsets; o and do likewise (o_ld, o_bs); dq is written at dq_off in dq's
 * layout. */
__kernel __attribute__((reqd_work_group_size(BQ, 1, 1))) void
attn_bwd_dq(__global const T *x, ulong q_off, ulong k_off, ulong v_off,
            ulong x_ld, ulong x_bs, __global const T *o, ulong o_off,
            ulong o_ld, ulong o_bs, __global const T *dout, ulong do_off,
            ulong do_ld, ulong do_bs, __global const float *lse, ulong lse_off,
            __global float *dsum, __global T *dx, ulong dq_off, ulong dx_ld,
            ulong dx_bs, uint t, uint heads, uint d, uint causal,
            float scale) {
#if FAMILY == 0
  __local float kt[BK * DMAX], vt[BK * DMAX];
#endif
  const uint i = get_global_id(0), bh = get_global_id(1);
  const uint b = bh / heads, h = bh % heads;
  const bool active = i < t;
  const uint ii = active ? i : 0;
  const ulong kb = ROW(k_off, x_bs, d, 0, b, h, 0);
  const ulong vb = ROW(v_off, x_bs, d, 0, b, h, 0);
  float qr[DMAX], dor[DMAX], dq[DMAX];
  const ulong qrow = ROW(q_off, x_bs, d, x_ld, b, h, ii);
  const ulong orow = ROW(o_off, o_bs, d, o_ld, b, h, ii);
  const ulong dorow = ROW(do_off, do_bs, d, do_ld, b, h, ii);
  float dd = 0.0f;
  for (uint c = 0; c < d; c++) {
    qr[c] = active ? LOAD(x, qrow + c) * scale : 0.0f;
    dor[c] = active ? LOAD(dout, dorow + c) : 0.0f;
    dd = fma(dor[c], active ? LOAD(o, orow + c) : 0.0f, dd);
    dq[c] = 0.0f;
  }
  const float li = active ? lse[lse_off + (ulong)bh * t + i] : 0.0f;
#if FAMILY == 0
  const uint last = min(t, (uint)(get_group_id(0) + 1) * BQ) - 1;
#else
  const uint last = ii;
#endif
  const uint kend = causal ? last + 1 : t;
  const uint mine = causal ? i + 1 : t;
  for (uint j0 = 0; j0 < kend; j0 += BK) {
    const uint n = min((uint)BK, kend - j0);
#if FAMILY == 0
    SYNC();
    STAGE(kt, x, kb, x_ld, j0, n, d);
    STAGE(vt, x, vb, x_ld, j0, n, d);
    SYNC();
#endif
    const uint lim = !active || mine <= j0 ? 0 : min(n, mine - j0);
    for (uint r = 0; r < lim; r++) {
      const float s = DOT(qr, kt, x, kb, x_ld, j0, r);
      const float dp = DOT(dor, vt, x, vb, x_ld, j0, r);
      const float ds = exp(s - li) * (dp - dd);
      AXPY(dq, ds, kt, x, kb, x_ld, j0, r);
    }
  }
  if (!active)
    return;
  dsum[(ulong)bh * t + i] = dd;
  const ulong dqrow = ROW(dq_off, dx_bs, d, dx_ld, b, h, i);
  for (uint c = 0; c < d; c++)
    STORE(dx, dqrow + c, dq[c] * scale);
}

/* dK and dV for key rows j, from the queries i that see them. */
__kernel __attribute__((reqd_work_group_size(BQ, 1, 1))) void
attn_bwd_dkdv(__global const T *x, ulong q_off, ulong k_off, ulong v_off,
              ulong x_ld, ulong x_bs, __global const T *dout, ulong do_off,
              ulong do_ld, ulong do_bs, __global const float *lse,
              ulong lse_off, __global const float *dsum, __global T *dx,
              ulong dk_off, ulong dv_off, ulong dx_ld, ulong dx_bs, uint t,
              uint heads, uint d, uint causal, float scale) {
#if FAMILY == 0
  __local float qt[BK * DMAX], gt[BK * DMAX];
  __local float lt[BK], dt[BK];
#endif
  const uint j = get_global_id(0), bh = get_global_id(1);
  const uint b = bh / heads, h = bh % heads;
  const bool active = j < t;
  const uint jj = active ? j : 0;
  const ulong qb = ROW(q_off, x_bs, d, 0, b, h, 0);
  const ulong dob = ROW(do_off, do_bs, d, 0, b, h, 0);
  const ulong sb = lse_off + (ulong)bh * t, db = (ulong)bh * t;
  float kr[DMAX], vr[DMAX], dk[DMAX], dv[DMAX];
  const ulong krow = ROW(k_off, x_bs, d, x_ld, b, h, jj);
  const ulong vrow = ROW(v_off, x_bs, d, x_ld, b, h, jj);
  for (uint c = 0; c < d; c++) {
    kr[c] = active ? LOAD(x, krow + c) * scale : 0.0f;
    vr[c] = active ? LOAD(x, vrow + c) : 0.0f;
    dk[c] = 0.0f;
    dv[c] = 0.0f;
  }
  /* Queries from the group's (row's) first key on see it under the mask. */
#if FAMILY == 0
  const uint first = causal ? (uint)get_group_id(0) * BQ : 0;
#else
  const uint first = causal ? jj : 0;
#endif
  for (uint i0 = first; i0 < t; i0 += BK) {
    const uint n = min((uint)BK, t - i0);
#if FAMILY == 0
    SYNC();
    STAGE(qt, x, qb, x_ld, i0, n, d);
    STAGE(gt, dout, dob, do_ld, i0, n, d);
    for (uint e = get_local_id(0); e < n; e += BQ) {
      lt[e] = lse[sb + i0 + e];
      dt[e] = dsum[db + i0 + e];
    }
    SYNC();
#define LSE(r) lt[r]
#define DSUM(r) dt[r]
#else
#define LSE(r) lse[sb + i0 + (r)]
#define DSUM(r) dsum[db + i0 + (r)]
#endif
    /* Rows i0 + r < j are masked (causal): start past them. */
    const uint r0 = !active ? n : causal && jj > i0 ? min(n, jj - i0) : 0;
    for (uint r = r0; r < n; r++) {
      const float s = DOT(kr, qt, x, qb, x_ld, i0, r);
      const float dp = DOT(vr, gt, dout, dob, do_ld, i0, r);
      const float p = exp(s - LSE(r));
      const float ds = p * (dp - DSUM(r));
      AXPY(dv, p, gt, dout, dob, do_ld, i0, r);
      AXPY(dk, ds, qt, x, qb, x_ld, i0, r);
    }
#undef LSE
#undef DSUM
  }
  if (!active)
    return;
  const ulong dkrow = ROW(dk_off, dx_bs, d, dx_ld, b, h, j);
  const ulong dvrow = ROW(dv_off, dx_bs, d, dx_ld, b, h, j);
  for (uint c = 0; c < d; c++) {
    STORE(dx, dkrow + c, dk[c] * scale);
    STORE(dx, dvrow + c, dv[c]);
  }
}

/* Cache append: element c of row r of entry (b, h) of the new keys (or
 * values) x into cache row pos + r. Dimension 0: n d elements, rounded up;
 * dimension 1: batch x heads. Moves the bits, as words of the storage
 * type's width (no f16 arithmetic type needed). */
#if DT == 1 || DT == 2
#define BITS ushort
#else
#define BITS uint
#endif
__kernel void attn_cache_append(__global const BITS *x, ulong x_off,
                                ulong x_ld, ulong x_bs, __global BITS *cache,
                                ulong c_off, ulong c_ld, ulong c_bs, uint n,
                                uint pos, uint heads, uint d) {
  const uint e = get_global_id(0), bh = get_global_id(1);
  if (e >= n * d)
    return;
  const uint r = e / d, c = e % d, b = bh / heads, h = bh % heads;
  cache[c_off + (ulong)bh * c_bs + (ulong)(pos + r) * c_ld + c] =
      x[ROW(x_off, x_bs, d, x_ld, b, h, r) + c];
}
