/* Out-of-place transpose of a rows x cols row-major matrix: y[c][r] =
 * x[r][c], moving elements bit for bit (32-bit and 16-bit elements).
 *
 * Two families, picked by the device's profile (runtime/ops_transpose.c):
 *   transpose_gpu_*: one work-item per element through a __local tile padded
 *     by one column, so that the column-wise reads of the tile hit distinct
 *     banks; reads and writes of global memory are both row-wise
 *     (coalesced). A work-group is TILE x TILE_ROWS items, each moving
 *     TILE / TILE_ROWS elements, so TILE = 32 stays within 256 items.
 *   transpose_cpu_*: one work-item per TILE x TILE tile, moved in 16 x 16
 *     register blocks: 32 vector loads of 8 along the rows of x, four 8 x 8
 *     in-register transposes, 32 vector stores of 8 along the rows of y. No
 *     __local memory (on CPU OpenCL it is ordinary memory plus barriers)
 *     and no cross-work-item vectorisation.
 *
 * Macros: TILE (tile edge; a multiple of 16 for the CPU family).
 */
#ifndef TILE
#define TILE 32
#endif
#define TILE_ROWS (TILE < 8 ? TILE : 8)

/* Transpose the 8 x 8 block in rows r0..r7 into o0..o7 in three stages,
 * each output vector built from two input vectors only: compilers turn
 * such constructions into single unpack, shuffle and lane-permute
 * instructions, where building a column straight from eight rows costs an
 * insert per element (PoCL: 12 GB/s against 17 at 4096^2). */
#define TR8(T8, r0, r1, r2, r3, r4, r5, r6, r7, o0, o1, o2, o3, o4, o5, o6,   \
            o7)                                                                \
  {                                                                            \
    const T8 t0 = (T8)(r0.s0, r1.s0, r0.s1, r1.s1, r0.s4, r1.s4, r0.s5, r1.s5);\
    const T8 t1 = (T8)(r0.s2, r1.s2, r0.s3, r1.s3, r0.s6, r1.s6, r0.s7, r1.s7);\
    const T8 t2 = (T8)(r2.s0, r3.s0, r2.s1, r3.s1, r2.s4, r3.s4, r2.s5, r3.s5);\
    const T8 t3 = (T8)(r2.s2, r3.s2, r2.s3, r3.s3, r2.s6, r3.s6, r2.s7, r3.s7);\
    const T8 t4 = (T8)(r4.s0, r5.s0, r4.s1, r5.s1, r4.s4, r5.s4, r4.s5, r5.s5);\
    const T8 t5 = (T8)(r4.s2, r5.s2, r4.s3, r5.s3, r4.s6, r5.s6, r4.s7, r5.s7);\
    const T8 t6 = (T8)(r6.s0, r7.s0, r6.s1, r7.s1, r6.s4, r7.s4, r6.s5, r7.s5);\
    const T8 t7 = (T8)(r6.s2, r7.s2, r6.s3, r7.s3, r6.s6, r7.s6, r6.s7, r7.s7);\
    const T8 u0 = (T8)(t0.s0, t0.s1, t2.s0, t2.s1, t0.s4, t0.s5, t2.s4, t2.s5);\
    const T8 u1 = (T8)(t0.s2, t0.s3, t2.s2, t2.s3, t0.s6, t0.s7, t2.s6, t2.s7);\
    const T8 u2 = (T8)(t1.s0, t1.s1, t3.s0, t3.s1, t1.s4, t1.s5, t3.s4, t3.s5);\
    const T8 u3 = (T8)(t1.s2, t1.s3, t3.s2, t3.s3, t1.s6, t1.s7, t3.s6, t3.s7);\
    const T8 u4 = (T8)(t4.s0, t4.s1, t6.s0, t6.s1, t4.s4, t4.s5, t6.s4, t6.s5);\
    const T8 u5 = (T8)(t4.s2, t4.s3, t6.s2, t6.s3, t4.s6, t4.s7, t6.s6, t6.s7);\
    const T8 u6 = (T8)(t5.s0, t5.s1, t7.s0, t7.s1, t5.s4, t5.s5, t7.s4, t7.s5);\
    const T8 u7 = (T8)(t5.s2, t5.s3, t7.s2, t7.s3, t5.s6, t5.s7, t7.s6, t7.s7);\
    o0 = (T8)(u0.s0123, u4.s0123);                                             \
    o1 = (T8)(u1.s0123, u5.s0123);                                             \
    o2 = (T8)(u2.s0123, u6.s0123);                                             \
    o3 = (T8)(u3.s0123, u7.s0123);                                             \
    o4 = (T8)(u0.s4567, u4.s4567);                                             \
    o5 = (T8)(u1.s4567, u5.s4567);                                             \
    o6 = (T8)(u2.s4567, u6.s4567);                                             \
    o7 = (T8)(u3.s4567, u7.s4567);                                             \
  }

/* Load rows 0..7 of x from p into v0..v7, 8 elements from column 8 * half. */
#define LOAD8ROWS(v, p, half)                                                  \
  v##0 = vload8(half, p);                                                      \
  v##1 = vload8(half, p + ldx);                                                \
  v##2 = vload8(half, p + 2 * ldx);                                            \
  v##3 = vload8(half, p + 3 * ldx);                                            \
  v##4 = vload8(half, p + 4 * ldx);                                            \
  v##5 = vload8(half, p + 5 * ldx);                                            \
  v##6 = vload8(half, p + 6 * ldx);                                            \
  v##7 = vload8(half, p + 7 * ldx);

/* Blocks of 16 x 16: every 64-byte line of x (16 elements of 4 bytes) is
 * read whole and every line of y written whole, at once. With 8 x 8 blocks
 * each line is touched twice, half at a time, and at power-of-two leading
 * dimensions (4096 x 4096) all the lines of a tile fall into one cache set,
 * so the second touch misses. */
#define CPU_TRANSPOSE(NAME, T, T8)                                             \
  __kernel __attribute__((reqd_work_group_size(1, 1, 1))) void NAME(           \
      uint rows, uint cols, __global const T *x, ulong x_off, ulong ldx,       \
      __global T *y, ulong y_off, ulong ldy) {                                 \
    const uint r0 = get_global_id(1) * TILE, c0 = get_global_id(0) * TILE;     \
    const uint r1 = min(r0 + TILE, rows), c1 = min(c0 + TILE, cols);           \
    x += x_off;                                                                \
    y += y_off;                                                                \
    for (uint c = c0; c < c1; c += 16) {                                       \
      for (uint r = r0; r < r1; r += 16) {                                     \
        if (r + 16 <= r1 && c + 16 <= c1) {                                    \
          /* Quadrants of the block: a (rows 0-7, columns 0-7), b (rows 0-7,  \
           * columns 8-15), e (rows 8-15, columns 0-7), f (rows 8-15,        \
           * columns 8-15); capitals are their transposes. */                  \
          T8 a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, b4, b5, b6, b7;   \
          T8 e0, e1, e2, e3, e4, e5, e6, e7, f0, f1, f2, f3, f4, f5, f6, f7;   \
          __global const T *p = x + (ulong)r * ldx + c;                        \
          LOAD8ROWS(a, p, 0)                                                   \
          LOAD8ROWS(b, p, 1)                                                   \
          p += 8 * ldx;                                                        \
          LOAD8ROWS(e, p, 0)                                                   \
          LOAD8ROWS(f, p, 1)                                                   \
          T8 A0, A1, A2, A3, A4, A5, A6, A7, B0, B1, B2, B3, B4, B5, B6, B7;   \
          T8 E0, E1, E2, E3, E4, E5, E6, E7, F0, F1, F2, F3, F4, F5, F6, F7;   \
          TR8(T8, a0, a1, a2, a3, a4, a5, a6, a7, A0, A1, A2, A3, A4, A5, A6,  \
              A7)                                                              \
          TR8(T8, b0, b1, b2, b3, b4, b5, b6, b7, B0, B1, B2, B3, B4, B5, B6,  \
              B7)                                                              \
          TR8(T8, e0, e1, e2, e3, e4, e5, e6, e7, E0, E1, E2, E3, E4, E5, E6,  \
              E7)                                                              \
          TR8(T8, f0, f1, f2, f3, f4, f5, f6, f7, F0, F1, F2, F3, F4, F5, F6,  \
              F7)                                                              \
          /* Row j of y's block: column j of x's, A then E (j < 8), B then F. \
           */                                                                  \
          __global T *q = y + (ulong)c * ldy + r;                              \
          STORE2(q, A0, E0) STORE2(q, A1, E1) STORE2(q, A2, E2)                \
          STORE2(q, A3, E3) STORE2(q, A4, E4) STORE2(q, A5, E5)                \
          STORE2(q, A6, E6) STORE2(q, A7, E7) STORE2(q, B0, F0)                \
          STORE2(q, B1, F1) STORE2(q, B2, F2) STORE2(q, B3, F3)                \
          STORE2(q, B4, F4) STORE2(q, B5, F5) STORE2(q, B6, F6)                \
          STORE2(q, B7, F7)                                                    \
        } else {                                                               \
          /* A block cut by the matrix's edge. */                              \
          const uint re = min(r + 16, r1), ce = min(c + 16, c1);               \
          for (uint i = r; i < re; i++)                                        \
            for (uint j = c; j < ce; j++)                                      \
              y[(ulong)j * ldy + i] = x[(ulong)i * ldx + j];                   \
        }                                                                      \
      }                                                                        \
    }                                                                          \
  }
/* One 16-element row of y's block from two halves, then the next row. */
#define STORE2(q, lo, hi)                                                      \
  vstore8(lo, 0, q);                                                           \
  vstore8(hi, 1, q);                                                           \
  q += ldy;

#define GPU_TRANSPOSE(NAME, T)                                                 \
  __kernel __attribute__((reqd_work_group_size(TILE, TILE_ROWS, 1))) void      \
  NAME(uint rows, uint cols, __global const T *x, ulong x_off, ulong ldx,      \
       __global T *y, ulong y_off, ulong ldy) {                                \
    __local T tile[TILE][TILE + 1];                                            \
    const uint lx = get_local_id(0), ly = get_local_id(1);                     \
    const uint bc = get_group_id(0) * TILE, br = get_group_id(1) * TILE;       \
    x += x_off;                                                                \
    y += y_off;                                                                \
    for (uint i = ly; i < TILE; i += TILE_ROWS) {                              \
      const uint r = br + i, c = bc + lx;                                      \
      if (r < rows && c < cols)                                                \
        tile[i][lx] = x[(ulong)r * ldx + c];                                   \
    }                                                                          \
    barrier(CLK_LOCAL_MEM_FENCE);                                              \
    for (uint i = ly; i < TILE; i += TILE_ROWS) {                              \
      const uint c = bc + i, r = br + lx; /* y row c, column r */              \
      if (c < cols && r < rows)                                                \
        y[(ulong)c * ldy + r] = tile[lx][i];                                   \
    }                                                                          \
  }

CPU_TRANSPOSE(transpose_cpu_32, uint, uint8)
CPU_TRANSPOSE(transpose_cpu_16, ushort, ushort8)
GPU_TRANSPOSE(transpose_gpu_32, uint)
GPU_TRANSPOSE(transpose_gpu_16, ushort)
