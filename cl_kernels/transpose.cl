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
 *     register blocks: 32 vector loads of 8 along the rows of x, 16 vector
 *     stores of 16 along the rows of y. No __local memory (on CPU OpenCL it
 *     is ordinary memory plus barriers) and no cross-work-item
 *     vectorisation.
 *
 * Macros: TILE (tile edge; a multiple of 16 for the CPU family).
 */
#ifndef TILE
#define TILE 32
#endif
#define TILE_ROWS (TILE < 8 ? TILE : 8)

/* Column j of an 8 x 8 block held in rows a0..a7, as one vector. */
#define COL8(T8, j, a0, a1, a2, a3, a4, a5, a6, a7)                            \
  (T8)(a0.s##j, a1.s##j, a2.s##j, a3.s##j, a4.s##j, a5.s##j, a6.s##j, a7.s##j)
/* Output row j (0..7) of the upper (lo) or lower (hi) half of a 16 x 16
 * block: 16 elements, 8 from each 8-row half of the input. */
#define OUT16(T8, T16, j, lo, hi)                                              \
  (T16)(COL8(T8, j, lo##0, lo##1, lo##2, lo##3, lo##4, lo##5, lo##6, lo##7),   \
        COL8(T8, j, hi##0, hi##1, hi##2, hi##3, hi##4, hi##5, hi##6, hi##7))

/* Blocks of 16 x 16: every line of x (16 elements of 4 bytes = one 64-byte
 * cache line) is read whole and every line of y written whole, at once.
 * With 8 x 8 blocks each line is touched twice, half at a time, and at
 * power-of-two leading dimensions (4096 x 4096) all the lines of a tile
 * fall into one cache set, so the second touch misses: 16 x 16 blocks ran
 * at 70-75% of an OpenMP copy there against 45% for 8 x 8. */
#define CPU_TRANSPOSE(NAME, T, T8, T16)                                        \
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
          __global const T *p = x + (ulong)r * ldx + c;                        \
          /* a: rows 0-7, columns 0-7; b: rows 0-7, columns 8-15; */           \
          /* e: rows 8-15, columns 0-7; f: rows 8-15, columns 8-15. */         \
          T8 a0 = vload8(0, p), b0 = vload8(1, p);                             \
          T8 a1 = vload8(0, p + ldx), b1 = vload8(1, p + ldx);                 \
          T8 a2 = vload8(0, p + 2 * ldx), b2 = vload8(1, p + 2 * ldx);         \
          T8 a3 = vload8(0, p + 3 * ldx), b3 = vload8(1, p + 3 * ldx);         \
          T8 a4 = vload8(0, p + 4 * ldx), b4 = vload8(1, p + 4 * ldx);         \
          T8 a5 = vload8(0, p + 5 * ldx), b5 = vload8(1, p + 5 * ldx);         \
          T8 a6 = vload8(0, p + 6 * ldx), b6 = vload8(1, p + 6 * ldx);         \
          T8 a7 = vload8(0, p + 7 * ldx), b7 = vload8(1, p + 7 * ldx);         \
          p += 8 * ldx;                                                        \
          T8 e0 = vload8(0, p), f0 = vload8(1, p);                             \
          T8 e1 = vload8(0, p + ldx), f1 = vload8(1, p + ldx);                 \
          T8 e2 = vload8(0, p + 2 * ldx), f2 = vload8(1, p + 2 * ldx);         \
          T8 e3 = vload8(0, p + 3 * ldx), f3 = vload8(1, p + 3 * ldx);         \
          T8 e4 = vload8(0, p + 4 * ldx), f4 = vload8(1, p + 4 * ldx);         \
          T8 e5 = vload8(0, p + 5 * ldx), f5 = vload8(1, p + 5 * ldx);         \
          T8 e6 = vload8(0, p + 6 * ldx), f6 = vload8(1, p + 6 * ldx);         \
          T8 e7 = vload8(0, p + 7 * ldx), f7 = vload8(1, p + 7 * ldx);         \
          __global T *q = y + (ulong)c * ldy + r;                              \
          vstore16(OUT16(T8, T16, 0, a, e), 0, q);                             \
          vstore16(OUT16(T8, T16, 1, a, e), 0, q + ldy);                       \
          vstore16(OUT16(T8, T16, 2, a, e), 0, q + 2 * ldy);                   \
          vstore16(OUT16(T8, T16, 3, a, e), 0, q + 3 * ldy);                   \
          vstore16(OUT16(T8, T16, 4, a, e), 0, q + 4 * ldy);                   \
          vstore16(OUT16(T8, T16, 5, a, e), 0, q + 5 * ldy);                   \
          vstore16(OUT16(T8, T16, 6, a, e), 0, q + 6 * ldy);                   \
          vstore16(OUT16(T8, T16, 7, a, e), 0, q + 7 * ldy);                   \
          q += 8 * ldy;                                                        \
          vstore16(OUT16(T8, T16, 0, b, f), 0, q);                             \
          vstore16(OUT16(T8, T16, 1, b, f), 0, q + ldy);                       \
          vstore16(OUT16(T8, T16, 2, b, f), 0, q + 2 * ldy);                   \
          vstore16(OUT16(T8, T16, 3, b, f), 0, q + 3 * ldy);                   \
          vstore16(OUT16(T8, T16, 4, b, f), 0, q + 4 * ldy);                   \
          vstore16(OUT16(T8, T16, 5, b, f), 0, q + 5 * ldy);                   \
          vstore16(OUT16(T8, T16, 6, b, f), 0, q + 6 * ldy);                   \
          vstore16(OUT16(T8, T16, 7, b, f), 0, q + 7 * ldy);                   \
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

CPU_TRANSPOSE(transpose_cpu_32, uint, uint8, uint16)
CPU_TRANSPOSE(transpose_cpu_16, ushort, ushort8, ushort16)
GPU_TRANSPOSE(transpose_gpu_32, uint)
GPU_TRANSPOSE(transpose_gpu_16, ushort)
