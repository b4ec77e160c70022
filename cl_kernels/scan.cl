/* Prefix sums (inclusive or exclusive) over f32, i32 and u32: a chunked
 * three-phase scan.
 *   1. scan_sums:  the sum of each chunk of `chunk` elements -> sums[k]
 *   2. scan_carry: an exclusive scan of sums[] in place (the carry into each
 *                  chunk)
 *   3. scan_apply: each chunk scanned again, starting from its carry
 * With a single chunk the host skips 1 and 2 and passes has_carry = 0.
 *
 * Build options:
 *   -DDT=n      0 f32, 3 i32, 4 u32 (kiln_dtype values)
 *   -DFAMILY=n  1 CPU: one work-item per chunk, 16-wide vector loops (PoCL runs
 *               work-items of a group one after another on one thread, so
 *               a chunk stays in one core's cache); 0 GPU: one work-group
 *               per chunk, passes of WG elements scanned in __local memory
 *               (Hillis-Steele) and chained by a running carry
 *   -DWG=n      GPU family: work-group size, a power of two
 * Integers are summed as uint, which wraps modulo 2^32 for i32 as well
 * (two's complement), where signed int overflow would be undefined.
 * Every sum runs in a fixed order, so f32 results repeat bit for bit. */
#ifndef DT
#define DT 0
#endif
#ifndef FAMILY
#define FAMILY 1
#endif
#ifndef WG
#define WG 256
#endif

#if DT == 0
#define T float
#define ACC float
#define ACC2 float2
#define ACC4 float4
#define ACC8 float8
#define ACC16 float16
#define TO_ACC(v) (v)
#define FROM_ACC(v) (v)
#define TO_ACC16(v) (v)
#define FROM_ACC16(v) (v)
#elif DT == 3
#define T int
#define ACC uint
#define ACC2 uint2
#define ACC4 uint4
#define ACC8 uint8
#define ACC16 uint16
#define TO_ACC(v) as_uint(v)
#define FROM_ACC(v) as_int(v)
#define TO_ACC16(v) as_uint16(v)
#define FROM_ACC16(v) as_int16(v)
#elif DT == 4
#define T uint
#define ACC uint
#define ACC2 uint2
#define ACC4 uint4
#define ACC8 uint8
#define ACC16 uint16
#define TO_ACC(v) (v)
#define FROM_ACC(v) (v)
#define TO_ACC16(v) (v)
#define FROM_ACC16(v) (v)
#else
#error "scan: DT must be 0 (f32), 3 (i32) or 4 (u32)"
#endif

#if FAMILY == 1

#define ADD(a, b) ((a) + (b))
#define HTREE16(v)                                                             \
  ADD(ADD(ADD(ADD((v).s0, (v).s1), ADD((v).s2, (v).s3)),                        \
          ADD(ADD((v).s4, (v).s5), ADD((v).s6, (v).s7))),                       \
      ADD(ADD(ADD((v).s8, (v).s9), ADD((v).sa, (v).sb)),                        \
          ADD(ADD((v).sc, (v).sd), ADD((v).se, (v).sf))))

/* Lanes moved up by k, zeros shifted in: the steps of an in-register
 * Hillis-Steele scan of 16 lanes. */
#define SHIFT1(v)                                                              \
  (ACC16)(0, (v).s0, (v).s1, (v).s2, (v).s3, (v).s4, (v).s5, (v).s6, (v).s7,  \
          (v).s8, (v).s9, (v).sa, (v).sb, (v).sc, (v).sd, (v).se)
#define SHIFT2(v)                                                              \
  (ACC16)((ACC2)0, (v).s01, (v).s23, (v).s45, (v).s67, (v).s89, (v).sab,       \
          (v).scd)
#define SHIFT4(v) (ACC16)((ACC4)0, (v).s0123, (v).s4567, (v).s89ab)
#define SHIFT8(v) (ACC16)((ACC8)0, (v).lo)

/* Vector sums: the order of the chunk total's additions need not match the
 * scan's, only be fixed. */
__kernel void scan_sums(__global const T *x, ulong xo, ulong n, ulong chunk,
                        __global ACC *sums) {
  size_t k = get_global_id(0);
  ulong start = k * chunk;
  if (start >= n)
    return;
  ulong end = min(n, start + chunk);
  __global const T *p = x + xo;
  ACC16 a = 0;
  ulong i = start;
  for (; i + 16 <= end; i += 16)
    a += TO_ACC16(vload16(0, p + i));
  ACC s = HTREE16(a);
  for (; i < end; i++)
    s += TO_ACC(p[i]);
  sums[k] = s;
}

__kernel void scan_carry(__global ACC *sums, ulong chunks) {
  if (get_global_id(0) != 0)
    return;
  ACC run = 0;
  for (ulong k = 0; k < chunks; k++) {
    ACC s = sums[k];
    sums[k] = run;
    run += s;
  }
}

/* 16 elements at a time: their prefix sums are formed in registers (four
 * shift-and-add steps, off the critical path), then offset by the running
 * total, so the loop-carried dependence is one broadcast add per 16
 * elements instead of one add per element. */
__kernel void scan_apply(__global const T *x, ulong xo, __global T *y,
                         ulong yo, ulong n, ulong chunk,
                         __global const ACC *sums, int has_carry,
                         int exclusive) {
  size_t k = get_global_id(0);
  ulong start = k * chunk;
  if (start >= n)
    return;
  ulong end = min(n, start + chunk);
  __global const T *p = x + xo;
  __global T *q = y + yo;
  ACC run = has_carry ? sums[k] : (ACC)0;
  ulong i = start;
  for (; i + 16 <= end; i += 16) {
    ACC16 v = TO_ACC16(vload16(0, p + i)); /* read before the write: x may be y */
    v += SHIFT1(v);
    v += SHIFT2(v);
    v += SHIFT4(v);
    v += SHIFT8(v);
    v += run;
    ACC16 out = exclusive ? SHIFT1(v) : v;
    if (exclusive)
      out.s0 = run;
    vstore16(FROM_ACC16(out), 0, q + i);
    run = v.sf;
  }
  for (; i < end; i++) {
    ACC v = TO_ACC(p[i]);
    q[i] = FROM_ACC(exclusive ? run : run + v);
    run += v;
  }
}

#else /* GPU family */

/* Inclusive scan of one value per work-item across the group; returns the
 * item's inclusive prefix, its exclusive prefix in *excl (read from the
 * neighbour, not computed as inclusive - v, which could cancel in f32) and
 * the group total in *total. */
ACC group_scan(__local ACC *buf, ACC v, ACC *total, ACC *excl) {
  size_t l = get_local_id(0);
  buf[l] = v;
  for (uint d = 1; d < WG; d *= 2) {
    barrier(CLK_LOCAL_MEM_FENCE);
    ACC add = l >= d ? buf[l - d] : (ACC)0;
    barrier(CLK_LOCAL_MEM_FENCE);
    buf[l] += add;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  ACC r = buf[l];
  *excl = l > 0 ? buf[l - 1] : (ACC)0;
  *total = buf[WG - 1];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

/* One group per chunk; the chunk's passes of WG elements are scanned in
 * order and chained by the carry, so the same code scans data (apply) and
 * computes totals (sums). */
void scan_chunk(__global const T *p, __global T *q, ulong start, ulong end,
                ACC carry, int exclusive, int write, __global ACC *total_out,
                __local ACC *buf) {
  size_t l = get_local_id(0);
  for (ulong base = start; base < end; base += WG) {
    ulong i = base + l;
    ACC v = i < end ? TO_ACC(p[i]) : (ACC)0;
    ACC total, excl;
    ACC inc = group_scan(buf, v, &total, &excl);
    if (write && i < end)
      q[i] = FROM_ACC(carry + (exclusive ? excl : inc));
    carry += total;
  }
  if (total_out != NULL && l == 0)
    *total_out = carry;
}

__kernel void scan_sums(__global const T *x, ulong xo, ulong n, ulong chunk,
                        __global ACC *sums) {
  __local ACC buf[WG];
  size_t k = get_group_id(0);
  ulong start = k * chunk;
  ulong end = min(n, start + chunk);
  scan_chunk(x + xo, NULL, start, end, 0, 0, 0, sums + k, buf);
}

/* A single group scans the chunk totals in place, exclusively. Reading a
 * pass completely before writing it keeps the in-place update safe. */
__kernel void scan_carry(__global ACC *sums, ulong chunks) {
  __local ACC buf[WG];
  size_t l = get_local_id(0);
  ACC carry = 0;
  for (ulong base = 0; base < chunks; base += WG) {
    ulong i = base + l;
    ACC v = i < chunks ? sums[i] : (ACC)0;
    ACC total, excl;
    group_scan(buf, v, &total, &excl);
    if (i < chunks)
      sums[i] = carry + excl;
    carry += total;
  }
}

__kernel void scan_apply(__global const T *x, ulong xo, __global T *y,
                         ulong yo, ulong n, ulong chunk,
                         __global const ACC *sums, int has_carry,
                         int exclusive) {
  __local ACC buf[WG];
  size_t k = get_group_id(0);
  ulong start = k * chunk;
  ulong end = min(n, start + chunk);
  ACC carry = has_carry ? sums[k] : (ACC)0;
  scan_chunk(x + xo, y + yo, start, end, carry, exclusive, 1, NULL, buf);
}

#endif
