/* Out-of-place transpose of a rows x cols row-major matrix: y[c][r] =
 * x[r][c], moving elements bit for bit (32-bit and 16-bit elements).
 *
 * Two families, picked by the device's profile (runtime/ops/ops_transpose.c):
 *   transpose_gpu_*: a TILE x TILE tile per work-group through __local
 *     memory padded by PAD columns, so that the column-wise reads of the
 *     tile hit distinct banks; reads and writes of global memory are both
 *     row-wise (coalesced). A work-group is TILE x (TILE / WPT) items, each
 *     moving WPT elements of a column of the tile (rows TILE / WPT apart).
 *   transpose_cpu_*: one work-item per TILE x TILE tile, moved in 16 x 16
 *     blocks of four 8 x 8 in-register transposes (8 vector loads of 8
 *     along the rows of x, 24 shuffles, 8 vector stores of 8 along the rows
 *     of y each). No __local memory (on CPU OpenCL it is ordinary memory
 *     plus barriers) and no cross-work-item vectorisation.
 *
 * Macros: TILE (tile edge; a multiple of 16 for the CPU family); GPU family
 * only, PAD (columns of padding, 0 or more) and WPT (elements per
 * work-item, dividing TILE): the knobs of the space in
 * runtime/ops/ops_transpose.c, whose defaults (PAD 1, groups of TILE x
 * min(TILE, 8) items) are the kernel's historic shape.
 */
#ifndef TILE
#define TILE 32
#endif
#ifndef PAD
#define PAD 1
#endif
#ifndef WPT
#define WPT (TILE < 8 ? 1 : TILE / 8)
#endif
#if TILE % WPT != 0
#error "WPT must divide TILE"
#endif
#define TILE_ROWS (TILE / WPT)

/* Two-input shuffle with constant lanes. Clang (PoCL, rusticl, the Intel
 * and AMD compilers) gets __builtin_shufflevector, which LLVM lowers to
 * single unpack and lane-permute instructions; vector literals built from
 * components of two vectors came out of PoCL 3.1 as broadcasts, blends and
 * inserts (168 vbroadcastss and 288 vblendps per 16 x 16 block, against 48
 * each of vunpck{l,h}p{s,d}, vperm2f128 and vinsertf128 now). Elsewhere the
 * standard shuffle2, whose mask has the elements' width (M8). */
#if defined(__clang__)
#define SHUF8(M8, a, b, i0, i1, i2, i3, i4, i5, i6, i7)                        \
  __builtin_shufflevector(a, b, i0, i1, i2, i3, i4, i5, i6, i7)
#else
#define SHUF8(M8, a, b, i0, i1, i2, i3, i4, i5, i6, i7)                        \
  shuffle2(a, b, (M8)(i0, i1, i2, i3, i4, i5, i6, i7))
#endif

/* Transpose the 8 x 8 block at p (rows ldx apart) into q (rows ldy apart):
 * 8 loads, three stages of 8 two-input shuffles (pairs of elements, pairs
 * of pairs, then 128-bit halves), 8 stores. 8 inputs and 8 outputs live at
 * once, which fits AVX2's 16 registers; a whole 16 x 16 block in registers
 * spilled (287 vmovaps of spills and reloads per block on PoCL). */
#define TR8(T8, M8, p, ldx, q, ldy)                                            \
  {                                                                            \
    const T8 r0 = vload8(0, p), r1 = vload8(0, p + ldx),                       \
             r2 = vload8(0, p + 2 * ldx), r3 = vload8(0, p + 3 * ldx),         \
             r4 = vload8(0, p + 4 * ldx), r5 = vload8(0, p + 5 * ldx),         \
             r6 = vload8(0, p + 6 * ldx), r7 = vload8(0, p + 7 * ldx);         \
    const T8 t0 = SHUF8(M8, r0, r1, 0, 8, 1, 9, 4, 12, 5, 13);                 \
    const T8 t1 = SHUF8(M8, r0, r1, 2, 10, 3, 11, 6, 14, 7, 15);               \
    const T8 t2 = SHUF8(M8, r2, r3, 0, 8, 1, 9, 4, 12, 5, 13);                 \
    const T8 t3 = SHUF8(M8, r2, r3, 2, 10, 3, 11, 6, 14, 7, 15);               \
    const T8 t4 = SHUF8(M8, r4, r5, 0, 8, 1, 9, 4, 12, 5, 13);                 \
    const T8 t5 = SHUF8(M8, r4, r5, 2, 10, 3, 11, 6, 14, 7, 15);               \
    const T8 t6 = SHUF8(M8, r6, r7, 0, 8, 1, 9, 4, 12, 5, 13);                 \
    const T8 t7 = SHUF8(M8, r6, r7, 2, 10, 3, 11, 6, 14, 7, 15);               \
    const T8 u0 = SHUF8(M8, t0, t2, 0, 1, 8, 9, 4, 5, 12, 13);                 \
    const T8 u1 = SHUF8(M8, t0, t2, 2, 3, 10, 11, 6, 7, 14, 15);               \
    const T8 u2 = SHUF8(M8, t1, t3, 0, 1, 8, 9, 4, 5, 12, 13);                 \
    const T8 u3 = SHUF8(M8, t1, t3, 2, 3, 10, 11, 6, 7, 14, 15);               \
    const T8 u4 = SHUF8(M8, t4, t6, 0, 1, 8, 9, 4, 5, 12, 13);                 \
    const T8 u5 = SHUF8(M8, t4, t6, 2, 3, 10, 11, 6, 7, 14, 15);               \
    const T8 u6 = SHUF8(M8, t5, t7, 0, 1, 8, 9, 4, 5, 12, 13);                 \
    const T8 u7 = SHUF8(M8, t5, t7, 2, 3, 10, 11, 6, 7, 14, 15);               \
    vstore8(SHUF8(M8, u0, u4, 0, 1, 2, 3, 8, 9, 10, 11), 0, q);                \
    vstore8(SHUF8(M8, u1, u5, 0, 1, 2, 3, 8, 9, 10, 11), 0, q + ldy);          \
    vstore8(SHUF8(M8, u2, u6, 0, 1, 2, 3, 8, 9, 10, 11), 0, q + 2 * ldy);      \
    vstore8(SHUF8(M8, u3, u7, 0, 1, 2, 3, 8, 9, 10, 11), 0, q + 3 * ldy);      \
    vstore8(SHUF8(M8, u0, u4, 4, 5, 6, 7, 12, 13, 14, 15), 0, q + 4 * ldy);    \
    vstore8(SHUF8(M8, u1, u5, 4, 5, 6, 7, 12, 13, 14, 15), 0, q + 5 * ldy);    \
    vstore8(SHUF8(M8, u2, u6, 4, 5, 6, 7, 12, 13, 14, 15), 0, q + 6 * ldy);    \
    vstore8(SHUF8(M8, u3, u7, 4, 5, 6, 7, 12, 13, 14, 15), 0, q + 7 * ldy);    \
  }

/* A tile in blocks of 16 x 16, each as four 8 x 8 transposes one after the
 * other: the second half of every 64-byte line (16 elements of 4 bytes) is
 * read or written right after the first, while the line is still in L1, so
 * every line of x and y is brought in once even at power-of-two leading
 * dimensions (4096 x 4096), where all the lines of a tile's column fall
 * into one cache set. */
#define CPU_TRANSPOSE(NAME, T, T8, M8)                                         \
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
          __global T *q = y + (ulong)c * ldy + r;                              \
          TR8(T8, M8, p, ldx, q, ldy)                                          \
          TR8(T8, M8, (p + 8), ldx, (q + 8 * ldy), ldy)                        \
          TR8(T8, M8, (p + 8 * ldx), ldx, (q + 8), ldy)                        \
          TR8(T8, M8, (p + 8 * ldx + 8), ldx, (q + 8 * ldy + 8), ldy)          \
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
    __local T tile[TILE][TILE + PAD];                                          \
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

CPU_TRANSPOSE(transpose_cpu_32, uint, uint8, uint8)
CPU_TRANSPOSE(transpose_cpu_16, ushort, ushort8, ushort8)
GPU_TRANSPOSE(transpose_gpu_32, uint)
GPU_TRANSPOSE(transpose_gpu_16, ushort)
