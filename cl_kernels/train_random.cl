/* Training ops, random numbers: Philox4x32-10 (Salmon, Moraes, Dror, Shaw,
 * "Parallel random numbers: as easy as 1, 2, 3", SC'11; the Random123
 * library) and what is made of its words: raw bits, uniform and normal
 * floats, dropout.
 *
 * Build options:
 *   -DDT=n  storage type of float outputs and dropout's input (common.clh)
 * Launch: one work-item per Philox block of four elements. Element g of the
 * stream (g = offset + i, i the output index) is word g % 4 of the block
 * with counter (g / 4 low, high, 0, 0) and key (seed low, high); the
 * work-item of block first + j writes the elements of its block that fall
 * in the output. Nothing depends on the launch, so every split of a stream
 * gives the same numbers.
 *
 * Same bits on every device: floats are made with additions,
 * multiplications and fma only, which OpenCL rounds correctly, never with
 * the built-in log, sqrt, sin or cos (whose accuracy varies by device),
 * and contraction of a * b + c into fma is off, so no compiler fuses
 * differently. kiln_log, kiln_sqrt and kiln_sincos_quarter below are
 * accurate to a few ulp over the ranges used; they handle normal positive
 * inputs only, which is all they get (u >= 2^-24). */
#pragma OPENCL FP_CONTRACT OFF
#ifndef DT
#define DT 0
#endif
#include "common.clh"

/* Ten rounds, unrolled, on four scalar words: a loop with the key bump
 * under a branch, uint4 arithmetic and mul_hi each kept PoCL from
 * vectorising across work-items (45 ms for 2^20 words on two cores). */
#define KILN_PHILOX_ROUND(c0, c1, c2, c3, k0, k1)                              \
  do {                                                                         \
    ulong p0_ = (ulong)0xD2511F53u * c0, p1_ = (ulong)0xCD9E8D57u * c2;        \
    uint n0_ = (uint)(p1_ >> 32) ^ c1 ^ k0, n2_ = (uint)(p0_ >> 32) ^ c3 ^ k1; \
    c1 = (uint)p1_;                                                            \
    c3 = (uint)p0_;                                                            \
    c0 = n0_;                                                                  \
    c2 = n2_;                                                                  \
    k0 += 0x9E3779B9u;                                                         \
    k1 += 0xBB67AE85u;                                                         \
  } while (0)

uint4 kiln_philox4x32_10(uint4 ctr, uint2 key) {
  uint c0 = ctr.x, c1 = ctr.y, c2 = ctr.z, c3 = ctr.w, k0 = key.x, k1 = key.y;
  /* The bump after the tenth round is unused. */
  KILN_PHILOX_ROUND(c0, c1, c2, c3, k0, k1);
  KILN_PHILOX_ROUND(c0, c1, c2, c3, k0, k1);
  KILN_PHILOX_ROUND(c0, c1, c2, c3, k0, k1);
  KILN_PHILOX_ROUND(c0, c1, c2, c3, k0, k1);
  KILN_PHILOX_ROUND(c0, c1, c2, c3, k0, k1);
  KILN_PHILOX_ROUND(c0, c1, c2, c3, k0, k1);
  KILN_PHILOX_ROUND(c0, c1, c2, c3, k0, k1);
  KILN_PHILOX_ROUND(c0, c1, c2, c3, k0, k1);
  KILN_PHILOX_ROUND(c0, c1, c2, c3, k0, k1);
  KILN_PHILOX_ROUND(c0, c1, c2, c3, k0, k1);
  return (uint4)(c0, c1, c2, c3);
}

/* The block's four words. */
uint4 kiln_block(ulong seed, ulong b) {
  return kiln_philox4x32_10((uint4)((uint)b, (uint)(b >> 32), 0u, 0u),
                            (uint2)((uint)seed, (uint)(seed >> 32)));
}

/* u in [0, 1), exact: the top 24 bits. */
float kiln_u01(uint w) { return (float)(w >> 8) * 0x1p-24f; }

/* Natural log of x in [2^-24, 1]: x = 2^e m, m in [sqrt(1/2), sqrt(2)),
 * log m = 2 atanh(s) with s = (m - 1) / (m + 1), the reciprocal by Newton
 * from 1/2 (four steps: error below 1e-11), atanh by its series to s^11
 * (|s| <= 0.1716: truncation below 1e-9 relative). */
float kiln_log(float x) {
  uint b = as_uint(x);
  int e = (int)(b >> 23) - 127;
  float m = as_float((b & 0x7fffffu) | 0x3f800000u);
  if (m > 1.41421356f) {
    m = m * 0.5f;
    e += 1;
  }
  float f = m - 1.0f, d = m + 1.0f, r = 0.5f;
  for (int i = 0; i < 4; i++)
    r = fma(r, fma(-d, r, 1.0f), r);
  float s = f * r, s2 = s * s;
  float p = fma(s2, 1.0f / 11.0f, 1.0f / 9.0f);
  p = fma(s2, p, 1.0f / 7.0f);
  p = fma(s2, p, 1.0f / 5.0f);
  p = fma(s2, p, 1.0f / 3.0f);
  p = fma(s2, p, 1.0f);
  float lm = 2.0f * s * p;
  float fe = (float)e;
  return fma(fe, 0.693145751953125f, fma(fe, 1.4286068202862268e-06f, lm));
}

/* sqrt of x >= 0: Newton on 1/sqrt from the classic bit estimate (four
 * steps), then one residual correction of x * y. */
float kiln_sqrt(float x) {
  if (x == 0.0f)
    return 0.0f;
  float y = as_float(0x5f3759dfu - (as_uint(x) >> 1));
  float h = 0.5f * x;
  for (int i = 0; i < 4; i++)
    y = y * fma(-h * y, y, 1.5f);
  float s = x * y;
  return fma(fma(-s, s, x), 0.5f * y, s);
}

/* sin and cos of 2 pi W 2^-24 for a 24-bit integer W: the nearest quarter
 * turn k in integers, the rest f in [-1/2, 1/2] exact, then Taylor
 * polynomials in f of sin and cos of (pi/2) f to degree 9 and 10
 * (truncation below 2e-10), rotated by k quarter turns. */
float2 kiln_sincos_turn(uint W) {
  uint k = (W + (1u << 21)) >> 22;
  float f = (float)((int)W - (int)(k << 22)) * 0x1p-22f;
  float f2 = f * f;
  float sp = fma(f2, 0.00016044118478735975f, -0.004681754135318687f);
  sp = fma(f2, sp, 0.07969262624616703f);
  sp = fma(f2, sp, -0.6459640975062462f);
  sp = fma(f2, sp, 1.5707963267948966f);
  float sv = f * sp;
  float cp = fma(f2, -2.5202042373060596e-05f, 0.0009192602748394263f);
  cp = fma(f2, cp, -0.020863480763352957f);
  cp = fma(f2, cp, 0.253669507901048f);
  cp = fma(f2, cp, -1.2337005501361697f);
  float cv = fma(f2, cp, 1.0f);
  /* Rotate by k quarter turns with selects, not a switch (branches kept
   * PoCL from vectorising). */
  uint q = k & 3u;
  float sn = q == 0 ? sv : q == 1 ? cv : q == 2 ? -sv : -cv;
  float cs = q == 0 ? cv : q == 1 ? -sv : q == 2 ? -cv : sv;
  return (float2)(sn, cs);
}

/* Standard normals of a block: (w0, w1) give lanes 0 and 1 (r cos t,
 * r sin t), (w2, w3) lanes 2 and 3. */
float4 kiln_normal4(uint4 w) {
  float r0 = kiln_sqrt(-2.0f * kiln_log((float)((w.x >> 8) + 1u) * 0x1p-24f));
  float r1 = kiln_sqrt(-2.0f * kiln_log((float)((w.z >> 8) + 1u) * 0x1p-24f));
  float2 a = kiln_sincos_turn(w.y >> 8), b = kiln_sincos_turn(w.w >> 8);
  return (float4)(r0 * a.y, r0 * a.x, r1 * b.y, r1 * b.x);
}

/* Run BODY for each lane l of block j (relative to the first block) whose
 * element i = 4 j + l - lane0 falls in [0, n). Every group but the first
 * and the last holds whole blocks inside the output, so it writes all four
 * lanes without a check (a group-uniform branch, as FOR_ELEMENT). */
#define FOR_LANES(j, lane0, n, BODY)                                           \
  if (get_group_id(0) > 0 && get_group_id(0) + 1 < get_num_groups(0)) {       \
    for (uint l = 0; l < 4; l++) {                                             \
      ulong i = (ulong)(j) * 4 + l - (lane0);                                  \
      BODY;                                                                    \
    }                                                                          \
  } else {                                                                     \
    for (uint l = 0; l < 4; l++) {                                             \
      ulong e_ = (ulong)(j) * 4 + l;                                           \
      if (e_ < (lane0) || e_ - (lane0) >= (n))                                 \
        continue;                                                              \
      ulong i = e_ - (lane0);                                                  \
      BODY;                                                                    \
    }                                                                          \
  }

#define ELEM(v4, l)                                                            \
  ((l) == 0 ? (v4).s0 : (l) == 1 ? (v4).s1 : (l) == 2 ? (v4).s2 : (v4).s3)

__kernel void random_bits(ulong seed, ulong first, uint lane0,
                          __global uint *y, ulong yo, ulong n) {
  size_t j = get_global_id(0);
  uint4 w = kiln_block(seed, first + j);
  FOR_LANES(j, lane0, n, y[yo + i] = ELEM(w, l))
}

__kernel void random_uniform(ulong seed, ulong first, uint lane0, float lo,
                             float hi, __global T *y, ulong yo, ulong n) {
  size_t j = get_global_id(0);
  uint4 w = kiln_block(seed, first + j);
  float span = hi - lo;
  FOR_LANES(j, lane0, n, STORE(y + yo, i, fma(kiln_u01(ELEM(w, l)), span, lo)))
}

__kernel void random_normal(ulong seed, ulong first, uint lane0, float mean,
                            float stddev, __global T *y, ulong yo, ulong n) {
  size_t j = get_global_id(0);
  float4 z = kiln_normal4(kiln_block(seed, first + j));
  FOR_LANES(j, lane0, n, STORE(y + yo, i, fma(stddev, ELEM(z, l), mean)))
}

/* keep = u >= p; mask = keep ? scale : 0; dropout: y = x * mask. */
__kernel void dropout_mask(ulong seed, ulong first, uint lane0, float p,
                           float scale, __global T *y, ulong yo, ulong n) {
  size_t j = get_global_id(0);
  uint4 w = kiln_block(seed, first + j);
  FOR_LANES(j, lane0, n,
            STORE(y + yo, i, kiln_u01(ELEM(w, l)) >= p ? scale : 0.0f))
}

__kernel void dropout(ulong seed, ulong first, uint lane0, float p,
                      float scale, __global const T *x, ulong xo,
                      __global T *y, ulong yo, ulong n) {
  size_t j = get_global_id(0);
  uint4 w = kiln_block(seed, first + j);
  FOR_LANES(j, lane0, n,
            STORE(y + yo, i,
                  LOAD(x + xo, i) *
                      (kiln_u01(ELEM(w, l)) >= p ? scale : 0.0f)))
}

/* One block with an explicit 128-bit counter, for known-answer tests. */
__kernel void philox_block(uint4 ctr, uint2 key, __global uint *out) {
  vstore4(kiln_philox4x32_10(ctr, key), 0, out);
}
