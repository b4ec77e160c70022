/* Reductions: sum, min, max, mean, nrm2, argmax over rows of a row-major
 * matrix (a vector is one row), dot of two vectors, and the same ops over
 * columns. f32 accumulation whatever the storage type.
 *
 * Build options:
 *   -DDT=n       storage type of x (common.clh): 0 f32, 1 f16, 2 bf16
 *   -DFAMILY=n   0: GPU family, 1: CPU family (enum kiln_kernel_family)
 *   -DWG=n       GPU family: the work-group size (a power of two), which
 *                sizes the __local tree
 *   -DWPT=n -DVW=n  GPU family, row kernels: each pass over a segment has
 *                every item take WPT vectors of VW consecutive elements,
 *                the vectors of a group's items side by side (coalesced);
 *                the rest of the segment goes element by element. 1 and 1
 *                (the defaults) are the kernel before it had a space
 *                (runtime/ops/ops_reduce.c holds the space)
 *   -DCB=n       columns per work-item in the column kernels (CPU: 16 so one
 *                work-item reads 64 contiguous bytes per row; GPU: 1)
 *
 * Kernels, for OP in sum, min, max, mean, nrm2, argmax (and rows_dot):
 *   rows_OP   reduces segment `seg` of row `row` for each worker (CPU family:
 *             one work-item per (row, seg), walking its contiguous segment
 *             with 16-wide vector accumulators; GPU family: one work-group
 *             per (row, seg), items striding through it, then a __local
 *             tree). With segs == 1 it writes the row's final result,
 *             otherwise a partial state.
 *   cols_OP   one work-item per (block of CB columns, segment of rows).
 *   final_OP  one work-item per output: combines its segs partial states in
 *             segment order and writes the result.
 * Results are written as 32-bit words: f32 bits, or the u32 index for
 * argmax. Partial states are uint2: (f32 bits of the value, aux), aux being
 * argmax's index or nrm2's exponent.
 *
 * Determinism: the partition (rows, segs, seg_len) is chosen on the host
 * from the sizes and the profile only; every combine runs in a fixed order
 * (lanes in order, blocks in order, segments in order, tree levels by
 * index); there are no atomics. */
#ifndef DT
#define DT 0
#endif
#ifndef FAMILY
#define FAMILY 1
#endif
#ifndef WG
#define WG 256
#endif
#ifndef CB
#define CB 16
#endif
#ifndef WPT
#define WPT 1
#endif
#ifndef VW
#define VW 1
#endif
#include "common.clh"
#if FAMILY == 0
#include "vec_access.clh"
#endif

#define NONE 0xffffffffu /* argmax: no element seen yet */

typedef struct {
  float v; /* sum, min, max, argmax's value, nrm2's scaled sum of squares */
  uint a;  /* argmax's index; nrm2's exponent E (as int): sumsq = v 4^E */
} st_t;

st_t st(float v, uint a) {
  st_t s;
  s.v = v;
  s.a = a;
  return s;
}

/* ---- per-op scalar state functions: init, add one element, combine two
 * states (a covers lower indexes than b), final value bits ---------------- */

st_t init_sum(void) { return st(0.0f, 0); }
st_t add_sum(st_t s, float x, uint i) { return st(s.v + x, 0); }
st_t comb_sum(st_t a, st_t b) { return st(a.v + b.v, 0); }
uint fin_sum(st_t s, float count) { return as_uint(s.v); }

#define init_mean init_sum
#define add_mean add_sum
#define comb_mean comb_sum
uint fin_mean(st_t s, float count) { return as_uint(s.v / count); }

#define init_dot init_sum
#define comb_dot comb_sum
#define fin_dot fin_sum

/* fmin/fmax skip NaN: starting from NaN, an all-NaN input stays NaN. */
st_t init_min(void) { return st(NAN, 0); }
st_t add_min(st_t s, float x, uint i) { return st(fmin(s.v, x), 0); }
st_t comb_min(st_t a, st_t b) { return st(fmin(a.v, b.v), 0); }
#define fin_min fin_sum
st_t init_max(void) { return st(NAN, 0); }
st_t add_max(st_t s, float x, uint i) { return st(fmax(s.v, x), 0); }
st_t comb_max(st_t a, st_t b) { return st(fmax(a.v, b.v), 0); }
#define fin_max fin_sum

/* First index of the largest non-NaN value. NaN tests as x != x: PoCL
 * 3.1's isnan() is a slow call (image.cl measured a 2x2 max-pool 40x
 * slower with it). */
st_t init_argmax(void) { return st(-INFINITY, NONE); }
st_t add_argmax(st_t s, float x, uint i) {
  bool take = x == x && (s.a == NONE || x > s.v);
  return take ? st(x, i) : s;
}
st_t comb_argmax(st_t a, st_t b) {
  if (b.a == NONE)
    return a;
  if (a.a == NONE || b.v > a.v || (b.v == a.v && b.a < a.a))
    return b;
  return a;
}
uint fin_argmax(st_t s, float count) { return s.a == NONE ? 0u : s.a; }

/* nrm2 keeps sum x^2 as v * 4^E with v's terms scaled by 2^-E, E the
 * exponent of the largest |x| seen, clamped to [-126, 126] so 2^-E is a
 * normal float (devices may flush subnormals to zero). No square can overflow (scaled |x| < 2) or lose relative
 * precision that matters (terms below 2^-150 of the largest square are
 * negligible). ldexp is exact scaling, keeps inf and NaN, and sends what is
 * too small to 0. */
int nrm2_exp(float m) { return clamp(ilogb(m), -126, 126); }
st_t init_nrm2(void) { return st(0.0f, as_uint(-126)); }
st_t comb_nrm2(st_t a, st_t b) {
  int ea = as_int(a.a), eb = as_int(b.a);
  if (ea == eb) /* the common case: no rescaling */
    return st(a.v + b.v, a.a);
  /* An exact zero carries no scale: it must not raise the exponent and
   * flush the other side to zero. */
  if (a.v == 0.0f)
    return b;
  if (b.v == 0.0f)
    return a;
  int e = max(ea, eb);
  return st(ldexp(a.v, 2 * (ea - e)) + ldexp(b.v, 2 * (eb - e)), as_uint(e));
}
st_t add_nrm2(st_t s, float x, uint i) {
  int e = nrm2_exp(fabs(x));
  float y = ldexp(x, -e);
  return comb_nrm2(s, st(y * y, as_uint(e)));
}
uint fin_nrm2(st_t s, float count) {
  return as_uint(ldexp(sqrt(s.v), as_int(s.a)));
}

uint2 pack(st_t s) { return (uint2)(as_uint(s.v), s.a); }
st_t unpack(uint2 p) { return st(as_float(p.x), p.y); }

#if FAMILY == 1
/* ---- CPU family: contiguous chunks with 16-wide accumulators ------------ */

#define HTREE KILN_HTREE16
#define F_ADD KILN_ADD

st_t chunk_sum(__global const T *p, __global const T *q, ulong n, uint base) {
  float16 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
  ulong k = 0;
  for (; k + 64 <= n; k += 64) {
    a0 += LOAD16(p + k);
    a1 += LOAD16(p + k + 16);
    a2 += LOAD16(p + k + 32);
    a3 += LOAD16(p + k + 48);
  }
  for (; k + 16 <= n; k += 16)
    a0 += LOAD16(p + k);
  a0 = (a0 + a1) + (a2 + a3);
  float s = HTREE(a0, F_ADD);
  for (; k < n; k++)
    s += LOAD(p, k);
  return st(s, 0);
}
#define chunk_mean chunk_sum

st_t chunk_dot(__global const T *p, __global const T *q, ulong n, uint base) {
  float16 a0 = 0.0f, a1 = 0.0f;
  ulong k = 0;
  for (; k + 32 <= n; k += 32) {
    a0 = fma(LOAD16(p + k), LOAD16(q + k), a0);
    a1 = fma(LOAD16(p + k + 16), LOAD16(q + k + 16), a1);
  }
  if (k + 16 <= n) {
    a0 = fma(LOAD16(p + k), LOAD16(q + k), a0);
    k += 16;
  }
  a0 += a1;
  float s = HTREE(a0, F_ADD);
  for (; k < n; k++)
    s = fma(LOAD(p, k), LOAD(q, k), s);
  return st(s, 0);
}

#define CHUNK_MINMAX(name, f)                                                  \
  st_t chunk_##name(__global const T *p, __global const T *q, ulong n,         \
                    uint base) {                                               \
    float16 a = NAN;                                                           \
    ulong k = 0;                                                               \
    for (; k + 16 <= n; k += 16)                                               \
      a = f(a, LOAD16(p + k));                                                 \
    float s = HTREE(a, f);                                                     \
    for (; k < n; k++)                                                         \
      s = f(s, LOAD(p, k));                                                    \
    return st(s, 0);                                                           \
  }
CHUNK_MINMAX(min, fmin)
CHUNK_MINMAX(max, fmax)

/* Blocks of NB elements (16 KiB of f32), small enough to stay in L1: the block's maximum
 * comes from a fast vector fmax pass, and only a block whose maximum beats
 * the best so far (rare once the running maximum has grown) is scanned
 * again for the first index holding it. fmax skips NaN; a block of only NaN
 * has maximum NaN, which never beats anything. */
#define NB 4096
st_t chunk_argmax(__global const T *p, __global const T *q, ulong n,
                         uint base) {
  st_t s = init_argmax();
  ulong k = 0;
  for (; k + NB <= n; k += NB) {
    float16 m16 = NAN;
    for (int j = 0; j < NB; j += 16)
      m16 = fmax(m16, LOAD16(p + k + j));
    float m = HTREE(m16, fmax);
    if (m == m && (s.a == NONE || m > s.v)) {
      uint j = 0;
      while (!(LOAD(p, k + j) == m)) /* the max is in the block */
        j++;
      s = st(m, base + (uint)(k + j));
    }
  }
  for (; k < n; k++)
    s = add_argmax(s, LOAD(p, k), base + (uint)k);
  return s;
}

/* One pass per block of NB elements computes both the largest |x| and the
 * plain sum of squares. When that maximum lies in [2^-40, 2^40] no square
 * can overflow (sums stay below 2^112) and none that matters underflows,
 * so the block's exponent is 0 and the sum stands; otherwise (rare) the
 * block, still in L1, is summed again scaled by 2^-E. Either way memory is
 * read once. */
st_t chunk_nrm2(__global const T *p, __global const T *q, ulong n,
                       uint base) {
  st_t s = init_nrm2();
  ulong k = 0;
  while (k < n) {
    ulong len = min((ulong)NB, n - k);
    __global const T *b = p + k;
    float16 m16 = 0.0f, a16 = 0.0f;
    ulong j = 0;
    for (; j + 16 <= len; j += 16) {
      float16 v = LOAD16(b + j), av = fabs(v);
      /* A plain compare-select (one maxps) instead of fmax, whose NaN rule
       * costs several instructions on x86: a NaN is never selected here,
       * and it reaches the result through the sum of squares anyway. */
      m16 = av > m16 ? av : m16;
      a16 = fma(v, v, a16);
    }
    float m = HTREE(m16, fmax), a = HTREE(a16, F_ADD);
    for (; j < len; j++) {
      float v = LOAD(b, j);
      m = fmax(m, fabs(v));
      a = fma(v, v, a);
    }
    int e = 0;
    if (m > 0x1p40f || (m < 0x1p-40f && m > 0.0f)) {
      e = nrm2_exp(m);
      float scale = ldexp(1.0f, -e);
      float16 c16 = 0.0f;
      for (j = 0; j + 16 <= len; j += 16) {
        float16 y = LOAD16(b + j) * scale;
        c16 = fma(y, y, c16);
      }
      a = HTREE(c16, F_ADD);
      for (; j < len; j++) {
        float y = LOAD(b, j) * scale;
        a = fma(y, y, a);
      }
    }
    s = comb_nrm2(s, st(a, as_uint(e)));
    k += len;
  }
  return s;
}

#define ROWS_KERNEL(OP)                                                        \
  __kernel void rows_##OP(__global const T *x, ulong xo,                       \
                          __global const T *y, ulong yo, ulong rows,           \
                          ulong cols, ulong seg_len, uint segs,                \
                          __global uint2 *part, __global uint *res, ulong ro,  \
                          float count) {                                       \
    size_t w = get_global_id(0);                                               \
    if (w >= rows * segs)                                                      \
      return;                                                                  \
    size_t row = w / segs, seg = w % segs;                                     \
    ulong start = seg * seg_len;                                               \
    ulong len = min(seg_len, cols - start);                                    \
    ulong at = row * cols + start;                                             \
    st_t s = chunk_##OP(x + xo + at, y + yo + at, len, (uint)start);           \
    if (segs == 1)                                                             \
      res[ro + row] = fin_##OP(s, count);                                      \
    else                                                                       \
      part[w] = pack(s);                                                       \
  }

#else
/* ---- GPU family: a work-group per segment, a __local tree --------------- */

/* Item l adds elements l, l + WG, ... (coalesced), then the group combines
 * its WG states pairwise, lower half with upper half, log2(WG) levels.
 * With vectors (WPT or VW above 1) a pass of the group covers WG x WPT x VW
 * elements, item l taking vectors l, l + WG, ...; the segment's rest goes
 * element by element after the passes. An item meets its elements in
 * increasing order either way (argmax keeps the first of equal maxima).
 * al: x (and y) at the segment's start are aligned to whole vectors, so
 * aligned vector loads may be used (any offset works without). The op's
 * VADD is pasted here, not in ROW_PASSES: an argument passed on is
 * expanded first, and `dot` is a macro in some compilers' headers. */
#if WPT == 1 && VW == 1
#define ROW_PASSES(VADD_OP, s, p, q, len, start, k0) ulong k0 = 0;
#else
#define ROW_PASSES(VADD_OP, s, p, q, len, start, k0)                           \
  ulong k0 = 0;                                                                \
  {                                                                            \
    const bool al = ALIGNED(p) && ALIGNED(q);                                  \
    for (; k0 + WG * WPT * VW <= len; k0 += WG * WPT * VW)                     \
      for (uint j = 0; j < WPT; j++) {                                         \
        const ulong k = k0 + (j * WG + l) * VW;                                \
        VADD_OP(s, p, q, k, (uint)(start + k), al);                            \
      }                                                                        \
  }
#endif
#define ROWS_KERNEL(OP)                                                        \
  __kernel void rows_##OP(__global const T *x, ulong xo,                       \
                          __global const T *y, ulong yo, ulong rows,           \
                          ulong cols, ulong seg_len, uint segs,                \
                          __global uint2 *part, __global uint *res, ulong ro,  \
                          float count) {                                       \
    __local uint2 tree[WG];                                                    \
    size_t w = get_group_id(0), l = get_local_id(0);                           \
    size_t row = w / segs, seg = w % segs;                                     \
    ulong start = seg * seg_len;                                               \
    ulong len = min(seg_len, cols - start);                                    \
    ulong at = row * cols + start;                                             \
    __global const T *p = x + xo + at;                                         \
    __global const T *q = y + yo + at;                                         \
    st_t s = init_##OP();                                                      \
    ROW_PASSES(VADD_##OP, s, p, q, len, start, k0)                             \
    for (ulong k = k0 + l; k < len; k += WG)                                   \
      s = ADD_##OP(s, p, q, k, (uint)(start + k));                             \
    tree[l] = pack(s);                                                         \
    for (uint h = WG / 2; h > 0; h /= 2) {                                     \
      barrier(CLK_LOCAL_MEM_FENCE);                                            \
      if (l < h)                                                               \
        tree[l] = pack(comb_##OP(unpack(tree[l]), unpack(tree[l + h])));       \
    }                                                                          \
    if (l == 0) {                                                              \
      s = unpack(tree[0]);                                                     \
      if (segs == 1)                                                           \
        res[ro + row] = fin_##OP(s, count);                                    \
      else                                                                     \
        part[w] = pack(s);                                                     \
    }                                                                          \
  }
/* Each lane of the VFs v and w, in order: F(v's lane, w's lane, index). */
#if VW == 1
#define LANES(v, w, F) F(v, w, 0)
#elif VW == 2
#define LANES(v, w, F) F((v).s0, (w).s0, 0) F((v).s1, (w).s1, 1)
#elif VW == 4
#define LANES(v, w, F)                                                         \
  F((v).s0, (w).s0, 0) F((v).s1, (w).s1, 1) F((v).s2, (w).s2, 2)               \
      F((v).s3, (w).s3, 3)
#else
#define LANES(v, w, F)                                                         \
  F((v).s0, (w).s0, 0) F((v).s1, (w).s1, 1) F((v).s2, (w).s2, 2)               \
      F((v).s3, (w).s3, 3) F((v).s4, (w).s4, 4) F((v).s5, (w).s5, 5)           \
          F((v).s6, (w).s6, 6) F((v).s7, (w).s7, 7)
#endif
/* The VW elements at p + k (and q + k for dot) into state s; i is the
 * first one's index in the row. */
#define VADD(OP, s, p, q, k, i, al)                                            \
  {                                                                            \
    const uint i_ = (i);                                                       \
    LOADV_DECL(v_, p + k, al)                                                  \
    DOT_ONLY_##OP(LOADV_DECL(w_, q + k, al), const VF w_ = v_;)                \
    LANES(v_, w_, LANE_##OP)                                                   \
    (void)i_;                                                                  \
    (void)w_;                                                                  \
  }
#define VADD_sum(s, p, q, k, i, al) VADD(sum, s, p, q, k, i, al)
#define VADD_mean(s, p, q, k, i, al) VADD(sum, s, p, q, k, i, al)
#define VADD_min(s, p, q, k, i, al) VADD(min, s, p, q, k, i, al)
#define VADD_max(s, p, q, k, i, al) VADD(max, s, p, q, k, i, al)
#define VADD_argmax(s, p, q, k, i, al) VADD(argmax, s, p, q, k, i, al)
#define VADD_dot(s, p, q, k, i, al) VADD(dot, s, p, q, k, i, al)
/* y is read by dot only (the others pass x as y, not read again): the
 * first declaration for dot, the second for the others. */
#define DOT_ONLY_dot(load_y, same_x) load_y
#define DOT_ONLY_sum(load_y, same_x) same_x
#define DOT_ONLY_min(load_y, same_x) same_x
#define DOT_ONLY_max(load_y, same_x) same_x
#define DOT_ONLY_argmax(load_y, same_x) same_x
#define LANE_sum(e, f, j) s = add_sum(s, e, 0);
#define LANE_min(e, f, j) s = add_min(s, e, 0);
#define LANE_max(e, f, j) s = add_max(s, e, 0);
#define LANE_argmax(e, f, j) s = add_argmax(s, e, i_ + j);
#define LANE_dot(e, f, j) s = st(fma(e, f, s.v), 0);
#define ADD_sum(s, p, q, k, i) add_sum(s, LOAD(p, k), i)
#define ADD_mean ADD_sum
#define ADD_min(s, p, q, k, i) add_min(s, LOAD(p, k), i)
#define ADD_max(s, p, q, k, i) add_max(s, LOAD(p, k), i)
#define ADD_argmax(s, p, q, k, i) add_argmax(s, LOAD(p, k), i)
#define ADD_dot(s, p, q, k, i) st(fma(LOAD(p, k), LOAD(q, k), (s).v), 0)

/* nrm2's passes over whole vectors (as ROW_PASSES), each lane through F;
 * k0 is where the element by element rest starts. */
#if WPT == 1 && VW == 1
#define NRM2_PASSES(F) ulong k0 = 0;
#else
#define NRM2_PASSES(F)                                                         \
  ulong k0 = 0;                                                                \
  {                                                                            \
    const bool al = ALIGNED(p);                                                \
    for (; k0 + WG * WPT * VW <= len; k0 += WG * WPT * VW)                     \
      for (uint j = 0; j < WPT; j++) {                                         \
        LOADV_DECL(v_, p + k0 + (j * WG + l) * VW, al)                         \
        LANES(v_, v_, F)                                                       \
      }                                                                        \
  }
#endif
#define LANE_nrm2(e, f, j)                                                     \
  m = fmax(m, fabs(e));                                                        \
  a = fma(e, e, a);
#define LANE_nrm2_scaled(e, f, j)                                              \
  {                                                                            \
    const float t_ = (e) * scale;                                              \
    a = fma(t_, t_, a);                                                        \
  }

/* nrm2 without per-element rescaling: items accumulate the largest |x| and
 * the plain sum of squares together; when the segment's largest |x| lies in
 * [2^-40, 2^40] that sum is safe (see chunk_nrm2) and stands, otherwise
 * (rare, decided for the whole group) the segment is summed again scaled
 * by 2^-E. */
__kernel void rows_nrm2(__global const T *x, ulong xo, __global const T *y,
                        ulong yo, ulong rows, ulong cols, ulong seg_len,
                        uint segs, __global uint2 *part, __global uint *res,
                        ulong ro, float count) {
  __local uint2 tree[WG];
  size_t w = get_group_id(0), l = get_local_id(0);
  size_t row = w / segs, seg = w % segs;
  ulong start = seg * seg_len;
  ulong len = min(seg_len, cols - start);
  __global const T *p = x + xo + row * cols + start;
  float m = 0.0f, a = 0.0f;
  NRM2_PASSES(LANE_nrm2)
  for (ulong k = k0 + l; k < len; k += WG) {
    float v = LOAD(p, k);
    m = fmax(m, fabs(v));
    a = fma(v, v, a);
  }
  tree[l] = (uint2)(as_uint(m), as_uint(a));
  for (uint h = WG / 2; h > 0; h /= 2) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l < h)
      tree[l] = (uint2)(as_uint(fmax(as_float(tree[l].x),
                                     as_float(tree[l + h].x))),
                        as_uint(as_float(tree[l].y) + as_float(tree[l + h].y)));
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  float gm = as_float(tree[0].x), ga = as_float(tree[0].y);
  int e = 0;
  if (gm > 0x1p40f || (gm < 0x1p-40f && gm > 0.0f)) {
    e = nrm2_exp(gm);
    float scale = ldexp(1.0f, -e);
    a = 0.0f;
    NRM2_PASSES(LANE_nrm2_scaled)
    for (ulong k = k0 + l; k < len; k += WG) {
      float v = LOAD(p, k) * scale;
      a = fma(v, v, a);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    tree[l] = (uint2)(0, as_uint(a));
    for (uint h = WG / 2; h > 0; h /= 2) {
      barrier(CLK_LOCAL_MEM_FENCE);
      if (l < h)
        tree[l].y = as_uint(as_float(tree[l].y) + as_float(tree[l + h].y));
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    ga = as_float(tree[0].y);
  }
  if (l == 0) {
    st_t s = st(ga, as_uint(e));
    if (segs == 1)
      res[ro + row] = fin_nrm2(s, count);
    else
      part[w] = pack(s);
  }
}
#endif

ROWS_KERNEL(sum)
ROWS_KERNEL(mean)
ROWS_KERNEL(min)
ROWS_KERNEL(max)
ROWS_KERNEL(argmax)
ROWS_KERNEL(dot)
#if FAMILY == 1
ROWS_KERNEL(nrm2)
#endif

/* ---- columns: work-item per (block of CB columns, segment of rows) ------ */

/* The row loop is outermost so each row's CB columns are read together:
 * contiguous on a CPU, and across a GPU's work-items (CB = 1) coalesced. */
#define COLS_KERNEL(OP)                                                        \
  __kernel void cols_##OP(__global const T *x, ulong xo, ulong rows,           \
                          ulong cols, ulong seg_len, uint segs,                \
                          __global uint2 *part, __global uint *res, ulong ro,  \
                          float count) {                                       \
    size_t w = get_global_id(0);                                               \
    ulong blocks = (cols + CB - 1) / CB;                                       \
    if (w >= blocks * segs)                                                    \
      return;                                                                  \
    ulong cb = w % blocks, seg = w / blocks;                                   \
    ulong c0 = cb * CB, nc = min((ulong)CB, cols - c0);                        \
    ulong r0 = seg * seg_len, r1 = min(rows, r0 + seg_len);                    \
    st_t s[CB];                                                                \
    for (int c = 0; c < CB; c++)                                               \
      s[c] = init_##OP();                                                      \
    __global const T *p = x + xo + c0;                                         \
    if (nc == CB) {                                                            \
      for (ulong r = r0; r < r1; r++)                                          \
        for (int c = 0; c < CB; c++)                                           \
          s[c] = add_##OP(s[c], LOAD(p, r * cols + c), (uint)r);               \
    } else {                                                                   \
      for (ulong r = r0; r < r1; r++)                                          \
        for (uint c = 0; c < nc; c++)                                          \
          s[c] = add_##OP(s[c], LOAD(p, r * cols + c), (uint)r);               \
    }                                                                          \
    for (uint c = 0; c < nc; c++) {                                            \
      if (segs == 1)                                                           \
        res[ro + c0 + c] = fin_##OP(s[c], count);                              \
      else                                                                     \
        part[(c0 + c) * segs + seg] = pack(s[c]);                              \
    }                                                                          \
  }

COLS_KERNEL(sum)
COLS_KERNEL(mean)
COLS_KERNEL(min)
COLS_KERNEL(max)
COLS_KERNEL(argmax)
COLS_KERNEL(nrm2)

/* ---- final pass: one work-item per output, segments in order ------------ */

#define FINAL_KERNEL(OP)                                                       \
  __kernel void final_##OP(__global const uint2 *part, uint segs,              \
                           ulong outputs, __global uint *res, ulong ro,        \
                           float count) {                                      \
    size_t o = get_global_id(0);                                               \
    if (o >= outputs)                                                          \
      return;                                                                  \
    st_t s = unpack(part[o * segs]);                                           \
    for (uint k = 1; k < segs; k++)                                            \
      s = comb_##OP(s, unpack(part[o * segs + k]));                            \
    res[ro + o] = fin_##OP(s, count);                                          \
  }

FINAL_KERNEL(sum)
FINAL_KERNEL(mean)
FINAL_KERNEL(min)
FINAL_KERNEL(max)
FINAL_KERNEL(argmax)
FINAL_KERNEL(nrm2)
FINAL_KERNEL(dot)
