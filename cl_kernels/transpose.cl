/* Out-of-place transpose of a rows x cols row-major matrix: y[c][r] =
 * x[r][c], moving elements bit for bit (32-bit and 16-bit elements).
 *
 * Two families, picked by the device's profile (runtime/ops_transpose.c):
 *   transpose_gpu_*: one work-item per element through a __local tile padded
 *     by one column, so that the column-wise reads of the tile hit distinct
 *     banks; reads and writes of global memory are both row-wise
 *     (coalesced). A work-group is TILE x TILE_ROWS items, each moving
 *     TILE / TILE_ROWS elements, so TILE = 32 stays within 256 items.
 *   transpose_cpu_*: one work-item per TILE x TILE tile, moved in 8 x 8
 *     register blocks: 8 vector loads of 8 along the rows of x, 8 vector
 *     stores of 8 along the rows of y. No __local memory (on CPU OpenCL it is
 *     ordinary memory plus barriers) and no cross-work-item vectorisation.
 *
 * Macros: TILE (tile edge; a multiple of 8 for the CPU family).
 */
#ifndef TILE
#define TILE 32
#endif
#define TILE_ROWS (TILE < 8 ? TILE : 8)

#define CPU_TRANSPOSE(NAME, T, T8)                                             \
  __kernel __attribute__((reqd_work_group_size(1, 1, 1))) void NAME(           \
      uint rows, uint cols, __global const T *x, ulong x_off, ulong ldx,       \
      __global T *y, ulong y_off, ulong ldy) {                                 \
    const uint r0 = get_global_id(1) * TILE, c0 = get_global_id(0) * TILE;     \
    const uint r1 = min(r0 + TILE, rows), c1 = min(c0 + TILE, cols);           \
    x += x_off;                                                                \
    y += y_off;                                                                \
    for (uint c = c0; c < c1; c += 8) {                                        \
      for (uint r = r0; r < r1; r += 8) {                                      \
        if (r + 8 <= r1 && c + 8 <= c1) {                                      \
          __global const T *p = x + (ulong)r * ldx + c;                        \
          const T8 a0 = vload8(0, p), a1 = vload8(0, p + ldx),                 \
                   a2 = vload8(0, p + 2 * ldx), a3 = vload8(0, p + 3 * ldx),   \
                   a4 = vload8(0, p + 4 * ldx), a5 = vload8(0, p + 5 * ldx),   \
                   a6 = vload8(0, p + 6 * ldx), a7 = vload8(0, p + 7 * ldx);   \
          __global T *q = y + (ulong)c * ldy + r;                              \
          vstore8((T8)(a0.s0, a1.s0, a2.s0, a3.s0, a4.s0, a5.s0, a6.s0, a7.s0),\
                  0, q);                                                       \
          vstore8((T8)(a0.s1, a1.s1, a2.s1, a3.s1, a4.s1, a5.s1, a6.s1, a7.s1),\
                  0, q + ldy);                                                 \
          vstore8((T8)(a0.s2, a1.s2, a2.s2, a3.s2, a4.s2, a5.s2, a6.s2, a7.s2),\
                  0, q + 2 * ldy);                                             \
          vstore8((T8)(a0.s3, a1.s3, a2.s3, a3.s3, a4.s3, a5.s3, a6.s3, a7.s3),\
                  0, q + 3 * ldy);                                             \
          vstore8((T8)(a0.s4, a1.s4, a2.s4, a3.s4, a4.s4, a5.s4, a6.s4, a7.s4),\
                  0, q + 4 * ldy);                                             \
          vstore8((T8)(a0.s5, a1.s5, a2.s5, a3.s5, a4.s5, a5.s5, a6.s5, a7.s5),\
                  0, q + 5 * ldy);                                             \
          vstore8((T8)(a0.s6, a1.s6, a2.s6, a3.s6, a4.s6, a5.s6, a6.s6, a7.s6),\
                  0, q + 6 * ldy);                                             \
          vstore8((T8)(a0.s7, a1.s7, a2.s7, a3.s7, a4.s7, a5.s7, a6.s7, a7.s7),\
                  0, q + 7 * ldy);                                             \
        } else {                                                               \
          /* A block cut by the matrix's edge. */                              \
          const uint re = min(r + 8, r1), ce = min(c + 8, c1);                 \
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

CPU_TRANSPOSE(transpose_cpu_32, uint, uint8)
CPU_TRANSPOSE(transpose_cpu_16, ushort, ushort8)
GPU_TRANSPOSE(transpose_gpu_32, uint)
GPU_TRANSPOSE(transpose_gpu_16, ushort)
