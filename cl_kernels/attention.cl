/* Fused multi-head attention (kiln/kiln_ops_attention.h): forward with an
 * online softmax, backward from the saved log-sum-exp, and the key/value
 * cache copy.
 *
 * Build options:
 *   -DDT=n      storage type of q, k, v, o and the gradients (common.clh);
 *               lse and the backward's D are f32.
 *   -DFAMILY=f  0 GPU: a work-group of BQ rows, one per work-item, stages
 *               tiles of BK rows of the other operand (K and V forward and
 *               for dQ; Q and dO for dK and dV) in local memory as f32,
 *               between barriers. 1 CPU: a work-item (alone in its group)
 *               takes 16 rows, one per lane of float16 vectors, and reads
 *               the other operand's rows straight from global memory (its
 *               caches); no local memory, no barriers (see below).
 *   -DDMAX=n    32, 64 or 128: the private row arrays' length; the head
 *               size d <= DMAX is a kernel argument.
 *   -DBQ=n      GPU: rows per work-group (the local size of dimension 0).
 *   -DBK=n      keys per tile of the online softmax (2048 / DMAX: 16 KiB
 *               of local f32 for two tiles on the GPU family).
 * Launches: dimension 0 covers the rows (queries, or keys for dK/dV),
 * rounded up to BQ (GPU) or in blocks of 16 (CPU, local size 1),
 * dimension 1 the batch x heads pairs (entry b heads + h). Operands are addressed by strides in elements: a row r of batch
 * entry b and head h of operand x is at x_off + b x_bs + h x_hs + r x_ld,
 * its d elements consecutive. The causal mask lets query i (at position
 * qpos0 + i) see keys j <= qpos0 + i.
 *
 * Online softmax per query row: over each tile of BK keys the row's running maximum m
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

/* Where row r of entry (b, h) of an operand starts. */
#define ROW(off, bs, hs, ld, b, h, r)                                          \
  ((off) + (ulong)(b) * (bs) + (ulong)(h) * (hs) + (ulong)(r) * (ld))

#if FAMILY == 0
/* ---- GPU family: a work-group of BQ rows, one per work-item ------------- */

/* Stage rows [j0, j0 + n) of a (row stride ld from base) as f32 in t:
 * BQ work-items share the n d elements. Barriers on both sides. */
#define STAGE(t, a, base, ld, j0, n, d)                                        \
  for (uint e_ = get_local_id(0); e_ < (n) * (d); e_ += BQ) {                  \
    uint r_ = e_ / (d), c_ = e_ % (d);                                         \
    (t)[r_ * DMAX + c_] = LOAD(a, (base) + (ulong)((j0) + r_) * (ld) + c_);    \
  }

/* The private row a dotted with a staged row t; y += alpha t. */
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

__kernel __attribute__((reqd_work_group_size(BQ, 1, 1))) void
attn_fwd(__global const T *q, ulong q_off, ulong q_ld, ulong q_bs,
         __global const T *k, ulong k_off, ulong k_ld, ulong k_bs, ulong k_hs,
         __global const T *v, ulong v_off, ulong v_ld, ulong v_bs, ulong v_hs,
         __global T *o, ulong o_off, ulong o_ld, ulong o_bs,
         __global float *lse, ulong lse_off, uint has_lse, uint tq, uint tk,
         uint qpos0, uint heads, uint d, uint causal, float scale) {
  __local float kt[BK * DMAX], vt[BK * DMAX];
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
  /* The keys any row of this group sees. */
  const uint last = min(tq, (uint)(get_group_id(0) + 1) * BQ) - 1;
  const uint kend = causal ? min(tk, qpos0 + last + 1) : tk;
  const uint mine = causal ? qpos0 + i + 1 : tk; /* this row's key limit */
  for (uint j0 = 0; j0 < kend; j0 += BK) {
    const uint n = min((uint)BK, kend - j0);
    barrier(CLK_LOCAL_MEM_FENCE);
    STAGE(kt, k, kb, k_ld, j0, n, d);
    STAGE(vt, v, vb, v_ld, j0, n, d);
    barrier(CLK_LOCAL_MEM_FENCE);
    const uint lim = !active || mine <= j0 ? 0 : min(n, mine - j0);
    float s[BK];
    float mt = m;
    for (uint r = 0; r < lim; r++) {
      s[r] = dot_tile(qr, kt + r * DMAX, d);
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
        axpy_tile(acc, p, vt + r * DMAX, d);
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
  __local float kt[BK * DMAX], vt[BK * DMAX];
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
  const uint last = min(t, (uint)(get_group_id(0) + 1) * BQ) - 1;
  const uint kend = causal ? last + 1 : t;
  const uint mine = causal ? i + 1 : t;
  for (uint j0 = 0; j0 < kend; j0 += BK) {
    const uint n = min((uint)BK, kend - j0);
    barrier(CLK_LOCAL_MEM_FENCE);
    STAGE(kt, x, kb, x_ld, j0, n, d);
    STAGE(vt, x, vb, x_ld, j0, n, d);
    barrier(CLK_LOCAL_MEM_FENCE);
    const uint lim = !active || mine <= j0 ? 0 : min(n, mine - j0);
    for (uint r = 0; r < lim; r++) {
      const float s = dot_tile(qr, kt + r * DMAX, d);
      const float dp = dot_tile(dor, vt + r * DMAX, d);
      const float ds = exp(s - li) * (dp - dd);
      axpy_tile(dq, ds, kt + r * DMAX, d);
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
  __local float qt[BK * DMAX], gt[BK * DMAX];
  __local float lt[BK], dt[BK];
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
  /* Queries from the group's first key on see it under the mask. */
  const uint first = causal ? (uint)get_group_id(0) * BQ : 0;
  for (uint i0 = first; i0 < t; i0 += BK) {
    const uint n = min((uint)BK, t - i0);
    barrier(CLK_LOCAL_MEM_FENCE);
    STAGE(qt, x, qb, x_ld, i0, n, d);
    STAGE(gt, dout, dob, do_ld, i0, n, d);
    for (uint e = get_local_id(0); e < n; e += BQ) {
      lt[e] = lse[sb + i0 + e];
      dt[e] = dsum[db + i0 + e];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* Rows i0 + r < j are masked (causal): start past them. */
    const uint r0 = !active ? n : causal && jj > i0 ? min(n, jj - i0) : 0;
    for (uint r = r0; r < n; r++) {
      const float s = dot_tile(kr, qt + r * DMAX, d);
      const float dp = dot_tile(vr, gt + r * DMAX, d);
      const float p = exp(s - lt[r]);
      const float ds = p * (dp - dt[r]);
      axpy_tile(dv, p, gt + r * DMAX, d);
      axpy_tile(dk, ds, qt + r * DMAX, d);
    }
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

#else

/* ---- CPU family: 16 rows per work-item, one per lane --------------------- */
/* Lane r of a work-item is row r0 + r of its block of 16 (queries; keys for
 * dK/dV). Its private rows are stored transposed, a float16 per column c
 * (qt[c] = the 16 rows' q[c]), so a dot product with one key row is d
 * vector fma with the key's element broadcast: no horizontal sums, and
 * each key row is read once for 16 rows. Rows past the end repeat the last
 * row's values and are never stored. Masked pairs get p = 0 exactly, which
 * leaves every sum unchanged. */

/* The 16 rows of operand x from row r0 (of n), column c: a float16. */
float16 lanes(__global const T *x, ulong base, ulong ld, uint r0, uint n,
              uint c) {
  float t[16];
  for (uint r = 0; r < 16; r++)
    t[r] = LOAD(x, base + (ulong)min(r0 + r, n - 1) * ld + c);
  return vload16(0, t);
}

/* Store the lanes of v of rows r0.. below n at column c. */
void store_lanes(__global T *x, ulong base, ulong ld, uint r0, uint n, uint c,
                 float16 v) {
  float t[16];
  vstore16(v, 0, t);
  for (uint r = 0; r < 16 && r0 + r < n; r++)
    STORE(x, base + (ulong)r * ld + c, t[r]);
}

__constant int16 lane_id = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                   13, 14, 15);

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
attn_fwd(__global const T *q, ulong q_off, ulong q_ld, ulong q_bs,
         __global const T *k, ulong k_off, ulong k_ld, ulong k_bs, ulong k_hs,
         __global const T *v, ulong v_off, ulong v_ld, ulong v_bs, ulong v_hs,
         __global T *o, ulong o_off, ulong o_ld, ulong o_bs,
         __global float *lse, ulong lse_off, uint has_lse, uint tq, uint tk,
         uint qpos0, uint heads, uint d, uint causal, float scale) {
  const uint i0 = get_global_id(0) * 16, bh = get_global_id(1);
  if (i0 >= tq)
    return;
  const uint b = bh / heads, h = bh % heads;
  const ulong kb = ROW(k_off, k_bs, k_hs, 0, b, h, 0);
  const ulong vb = ROW(v_off, v_bs, v_hs, 0, b, h, 0);
  const ulong qb = ROW(q_off, q_bs, d, 0, b, h, 0);
  float16 qt[DMAX], acc[DMAX];
  for (uint c = 0; c < d; c++) {
    qt[c] = lanes(q, qb, q_ld, i0, tq, c) * scale;
    acc[c] = (float16)0.0f;
  }
  /* Key j is visible to lane r when j <= qpos0 + i0 + r (causal). */
  const int16 pos = (int16)(int)(qpos0 + i0) + lane_id;
  const uint kend = causal ? min(tk, qpos0 + min(tq, i0 + 16)) : tk;
  float16 m = (float16)(-INFINITY), l = (float16)0.0f;
  for (uint j0 = 0; j0 < kend; j0 += BK) {
    const uint n = min((uint)BK, kend - j0);
    float16 s[BK];
    float16 mt = m;
    /* Two keys per pass share the loads of qt (and below of acc). */
    for (uint r = 0; r < n; r += 2) {
      const uint r1 = min(r + 1, n - 1);
      const ulong k0 = kb + (ulong)(j0 + r) * k_ld;
      const ulong k1 = kb + (ulong)(j0 + r1) * k_ld;
      float16 a0 = (float16)0.0f, a1 = (float16)0.0f;
      for (uint c = 0; c < d; c++) {
        a0 = fma(qt[c], (float16)LOAD(k, k0 + c), a0);
        a1 = fma(qt[c], (float16)LOAD(k, k1 + c), a1);
      }
      if (causal) {
        a0 = select(a0, (float16)(-INFINITY), (int16)(int)(j0 + r) > pos);
        a1 = select(a1, (float16)(-INFINITY), (int16)(int)(j0 + r1) > pos);
      }
      s[r] = a0;
      s[r1] = a1;
      mt = fmax(mt, fmax(a0, a1));
    }
    /* Key 0 is visible to every lane, so mt is finite from the first tile
     * on and exp(m - mt) is 0 there, 1 for a lane the tile leaves alone. */
    const float16 corr = exp(m - mt);
    l *= corr;
    for (uint c = 0; c < d; c++)
      acc[c] *= corr;
    for (uint r = 0; r < n; r += 2) {
      const uint r1 = min(r + 1, n - 1);
      const float16 p0 = exp(s[r] - mt);
      const float16 p1 = r1 == r ? (float16)0.0f : exp(s[r1] - mt);
      const ulong v0 = vb + (ulong)(j0 + r) * v_ld;
      const ulong v1 = vb + (ulong)(j0 + r1) * v_ld;
      l += p0;
      l += p1;
      for (uint c = 0; c < d; c++)
        acc[c] = fma(p1, (float16)LOAD(v, v1 + c),
                     fma(p0, (float16)LOAD(v, v0 + c), acc[c]));
    }
    m = mt;
  }
  const float16 inv = 1.0f / l;
  const ulong ob = ROW(o_off, o_bs, d, o_ld, b, h, i0);
  for (uint c = 0; c < d; c++)
    store_lanes(o, ob, o_ld, i0, tq, c, acc[c] * inv);
  if (has_lse) {
    float t[16];
    vstore16(m + log(l), 0, t);
    for (uint r = 0; r < 16 && i0 + r < tq; r++)
      lse[lse_off + (ulong)bh * tq + i0 + r] = t[r];
  }
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
attn_bwd_dq(__global const T *x, ulong q_off, ulong k_off, ulong v_off,
            ulong x_ld, ulong x_bs, __global const T *o, ulong o_off,
            ulong o_ld, ulong o_bs, __global const T *dout, ulong do_off,
            ulong do_ld, ulong do_bs, __global const float *lse, ulong lse_off,
            __global float *dsum, __global T *dx, ulong dq_off, ulong dx_ld,
            ulong dx_bs, uint t, uint heads, uint d, uint causal,
            float scale) {
  const uint i0 = get_global_id(0) * 16, bh = get_global_id(1);
  if (i0 >= t)
    return;
  const uint b = bh / heads, h = bh % heads;
  const ulong kb = ROW(k_off, x_bs, d, 0, b, h, 0);
  const ulong vb = ROW(v_off, x_bs, d, 0, b, h, 0);
  const ulong qb = ROW(q_off, x_bs, d, 0, b, h, 0);
  const ulong ob = ROW(o_off, o_bs, d, 0, b, h, 0);
  const ulong gb = ROW(do_off, do_bs, d, 0, b, h, 0);
  float16 qt[DMAX], gt[DMAX], dq[DMAX];
  float16 dd = (float16)0.0f;
  for (uint c = 0; c < d; c++) {
    qt[c] = lanes(x, qb, x_ld, i0, t, c) * scale;
    gt[c] = lanes(dout, gb, do_ld, i0, t, c);
    dd = fma(gt[c], lanes(o, ob, o_ld, i0, t, c), dd);
    dq[c] = (float16)0.0f;
  }
  float lt[16];
  for (uint r = 0; r < 16; r++)
    lt[r] = lse[lse_off + (ulong)bh * t + min(i0 + r, t - 1)];
  const float16 li = vload16(0, lt);
  const int16 pos = (int16)(int)i0 + lane_id;
  const uint kend = causal ? min(t, i0 + 16) : t;
  /* Two keys per pass share the loads of qt, gt and dq; key j is added
   * before j + 1, so the sums keep their order. */
  for (uint j = 0; j < kend; j += 2) {
    const uint j1 = min(j + 1, kend - 1); /* a lone last key: p1 = 0 */
    const ulong k0 = kb + (ulong)j * x_ld, v0 = vb + (ulong)j * x_ld;
    const ulong k1 = kb + (ulong)j1 * x_ld, v1 = vb + (ulong)j1 * x_ld;
    float16 s0 = (float16)0.0f, dp0 = (float16)0.0f;
    float16 s1 = (float16)0.0f, dp1 = (float16)0.0f;
    for (uint c = 0; c < d; c++) {
      s0 = fma(qt[c], (float16)LOAD(x, k0 + c), s0);
      dp0 = fma(gt[c], (float16)LOAD(x, v0 + c), dp0);
      s1 = fma(qt[c], (float16)LOAD(x, k1 + c), s1);
      dp1 = fma(gt[c], (float16)LOAD(x, v1 + c), dp1);
    }
    float16 p0 = exp(s0 - li), p1 = exp(s1 - li);
    if (causal) {
      p0 = select(p0, (float16)0.0f, (int16)(int)j > pos);
      p1 = select(p1, (float16)0.0f, (int16)(int)j1 > pos);
    }
    if (j1 == j)
      p1 = (float16)0.0f;
    const float16 ds0 = p0 * (dp0 - dd), ds1 = p1 * (dp1 - dd);
    for (uint c = 0; c < d; c++)
      dq[c] = fma(ds1, (float16)LOAD(x, k1 + c),
                  fma(ds0, (float16)LOAD(x, k0 + c), dq[c]));
  }
  float tmp[16];
  vstore16(dd, 0, tmp);
  for (uint r = 0; r < 16 && i0 + r < t; r++)
    dsum[(ulong)bh * t + i0 + r] = tmp[r];
  const ulong qo = ROW(dq_off, dx_bs, d, dx_ld, b, h, i0);
  for (uint c = 0; c < d; c++)
    store_lanes(dx, qo, dx_ld, i0, t, c, dq[c] * scale);
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
attn_bwd_dkdv(__global const T *x, ulong q_off, ulong k_off, ulong v_off,
              ulong x_ld, ulong x_bs, __global const T *dout, ulong do_off,
              ulong do_ld, ulong do_bs, __global const float *lse,
              ulong lse_off, __global const float *dsum, __global T *dx,
              ulong dk_off, ulong dv_off, ulong dx_ld, ulong dx_bs, uint t,
              uint heads, uint d, uint causal, float scale) {
  const uint j0 = get_global_id(0) * 16, bh = get_global_id(1);
  if (j0 >= t)
    return;
  const uint b = bh / heads, h = bh % heads;
  const ulong qb = ROW(q_off, x_bs, d, 0, b, h, 0);
  const ulong kb = ROW(k_off, x_bs, d, 0, b, h, 0);
  const ulong vb = ROW(v_off, x_bs, d, 0, b, h, 0);
  const ulong gb = ROW(do_off, do_bs, d, 0, b, h, 0);
  float16 kt[DMAX], vt[DMAX], dk[DMAX], dv[DMAX];
  for (uint c = 0; c < d; c++) {
    kt[c] = lanes(x, kb, x_ld, j0, t, c) * scale;
    vt[c] = lanes(x, vb, x_ld, j0, t, c);
    dk[c] = (float16)0.0f;
    dv[c] = (float16)0.0f;
  }
  /* Query i sees lane r's key j0 + r when j0 + r <= i (causal). Two
   * queries per pass share the loads of kt, vt, dk and dv; the updates
   * still add query i before i + 1, so the sums keep their order. */
  const int16 pos = (int16)(int)j0 + lane_id;
  for (uint i = causal ? j0 : 0; i < t; i += 2) {
    const uint i1 = min(i + 1, t - 1); /* a lone last query: i1 = i, p1 = 0 */
    const ulong q0 = qb + (ulong)i * x_ld, g0 = gb + (ulong)i * do_ld;
    const ulong q1 = qb + (ulong)i1 * x_ld, g1 = gb + (ulong)i1 * do_ld;
    float16 s0 = (float16)0.0f, dp0 = (float16)0.0f;
    float16 s1 = (float16)0.0f, dp1 = (float16)0.0f;
    for (uint c = 0; c < d; c++) {
      s0 = fma(kt[c], (float16)LOAD(x, q0 + c), s0);
      dp0 = fma(vt[c], (float16)LOAD(dout, g0 + c), dp0);
      s1 = fma(kt[c], (float16)LOAD(x, q1 + c), s1);
      dp1 = fma(vt[c], (float16)LOAD(dout, g1 + c), dp1);
    }
    const ulong l0 = lse_off + (ulong)bh * t, d0 = (ulong)bh * t;
    float16 p0 = exp(s0 - lse[l0 + i]), p1 = exp(s1 - lse[l0 + i1]);
    if (causal) {
      p0 = select(p0, (float16)0.0f, pos > (int16)(int)i);
      p1 = select(p1, (float16)0.0f, pos > (int16)(int)i1);
    }
    if (i1 == i)
      p1 = (float16)0.0f;
    const float16 ds0 = p0 * (dp0 - dsum[d0 + i]);
    const float16 ds1 = p1 * (dp1 - dsum[d0 + i1]);
    for (uint c = 0; c < d; c++) {
      dv[c] = fma(p1, (float16)LOAD(dout, g1 + c),
                  fma(p0, (float16)LOAD(dout, g0 + c), dv[c]));
      dk[c] = fma(ds1, (float16)LOAD(x, q1 + c),
                  fma(ds0, (float16)LOAD(x, q0 + c), dk[c]));
    }
  }
  const ulong ko = ROW(dk_off, dx_bs, d, dx_ld, b, h, j0);
  const ulong vo = ROW(dv_off, dx_bs, d, dx_ld, b, h, j0);
  for (uint c = 0; c < d; c++) {
    store_lanes(dx, ko, dx_ld, j0, t, c, dk[c] * scale);
    store_lanes(dx, vo, dx_ld, j0, t, c, dv[c]);
  }
}

#endif

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
