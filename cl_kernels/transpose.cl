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
 * runtime/tune/space_small.c, whose defaults (PAD 1, groups of TILE x
 * min(TILE, 8) items) are the kernel's historic shape; CPU family only
 * (runtime/tune/space_cpu.c), NT (1: streaming stores of y) and ORDER (the
 * order of a tile's blocks: 0 a column of blocks after another, 1 a row
 * of blocks after another), both 0 by default, the kernel's historic way.
 */
#ifndef TILE
#define TILE 32
#endif
#ifndef NT
#define NT 0
#endif
#ifndef ORDER
#define ORDER 0
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
#define TR8(T8, M8, ST, p, ldx, q, ldy)                                        \
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
    ST(T8, SHUF8(M8, u0, u4, 0, 1, 2, 3, 8, 9, 10, 11), q);                    \
    ST(T8, SHUF8(M8, u1, u5, 0, 1, 2, 3, 8, 9, 10, 11), q + ldy);              \
    ST(T8, SHUF8(M8, u2, u6, 0, 1, 2, 3, 8, 9, 10, 11), q + 2 * ldy);          \
    ST(T8, SHUF8(M8, u3, u7, 0, 1, 2, 3, 8, 9, 10, 11), q + 3 * ldy);          \
    ST(T8, SHUF8(M8, u0, u4, 4, 5, 6, 7, 12, 13, 14, 15), q + 4 * ldy);        \
    ST(T8, SHUF8(M8, u1, u5, 4, 5, 6, 7, 12, 13, 14, 15), q + 5 * ldy);        \
    ST(T8, SHUF8(M8, u2, u6, 4, 5, 6, 7, 12, 13, 14, 15), q + 6 * ldy);        \
    ST(T8, SHUF8(M8, u3, u7, 4, 5, 6, 7, 12, 13, 14, 15), q + 7 * ldy);        \
  }

/* The stores of TR8: plain (vstore8: element alignment), or streaming
 * (non-temporal: the line goes to memory without being read first, which
 * saves a transpose a third of its traffic, since every line of y is
 * written whole; only with clang's builtin, on whole aligned vectors). */
#define ST_PLAIN(T8, v, q) vstore8(v, 0, q)
#if defined(__clang__) && defined(__has_builtin)
#if __has_builtin(__builtin_nontemporal_store)
#define HAVE_NT 1
#endif
#endif
#ifdef HAVE_NT
#define ST_NT(T8, v, q) __builtin_nontemporal_store(v, (__global T8 *)(q))
#else
#define ST_NT ST_PLAIN
#endif

/* Streaming stores are weakly ordered on x86: fence them before the
 * work-item ends, as memcpy's streaming loops do. */
#define NT_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)
#if defined(HAVE_NT) && defined(__SSE__)
#if __has_builtin(__builtin_ia32_sfence)
#undef NT_FENCE
#define NT_FENCE() __builtin_ia32_sfence()
#endif
#endif

/* Columns [c0, c1) of rows [r0, r1) in 16 x 16 blocks, each as four 8 x 8
 * transposes: the two that fill the first 16 elements of y's rows c to c +
 * 7 (whole 64-byte lines for 4-byte elements), then the two of rows c + 8
 * to c + 15. Either half of every 64-byte line of x and y is read or
 * written right after the other, while the line is still in L1, so every
 * line is brought in once even at power-of-two leading dimensions (4096 x
 * 4096), where all the lines of a tile's column fall into one cache set;
 * and a streaming store's write-combining buffer fills whole. */
/* ORDER 1 reads x's rows in runs of TILE elements (16 rows at a time), for
 * the hardware prefetchers, and writes y's lines whole but scattered,
 * which streaming stores do not mind; ORDER 0 writes y's rows in runs and
 * reads x's lines scattered. */
#if ORDER
#define CPU_LOOPS                                                              \
  for (uint r = r0; r < r1; r += 16)                                           \
    for (uint c = c0; c < c1; c += 16)
#else
#define CPU_LOOPS                                                              \
  for (uint c = c0; c < c1; c += 16)                                           \
    for (uint r = r0; r < r1; r += 16)
#endif
#define CPU_TILE(T, T8, M8, ST)                                                \
  CPU_LOOPS {                                                                  \
    {                                                                          \
      if (r + 16 <= r1 && c + 16 <= c1) {                                      \
        __global const T *p = x + (ulong)r * ldx + c;                          \
        __global T *q = y + (ulong)c * ldy + r;                                \
        TR8(T8, M8, ST, p, ldx, q, ldy)                                        \
        TR8(T8, M8, ST, (p + 8 * ldx), ldx, (q + 8), ldy)                      \
        TR8(T8, M8, ST, (p + 8), ldx, (q + 8 * ldy), ldy)                      \
        TR8(T8, M8, ST, (p + 8 * ldx + 8), ldx, (q + 8 * ldy + 8), ldy)        \
      } else {                                                                 \
        /* A block cut by the matrix's edge. */                                \
        const uint re = min(r + 16, r1), ce = min(c + 16, c1);                 \
        for (uint i = r; i < re; i++)                                          \
          for (uint j = c; j < ce; j++)                                        \
            y[(ulong)j * ldy + i] = x[(ulong)i * ldx + j];                     \
      }                                                                        \
    }                                                                          \
  }

/* One work-item per TILE x TILE tile. With NT, the stores of 32-bit
 * elements stream where every store of the item is a whole aligned vector:
 * y's start and its leading dimension whole vectors (block starts are
 * multiples of 16). 16-bit elements keep plain stores: a block writes half
 * of each 64-byte line of y, and a streamed half line is written to memory
 * on its own once the line's write-combining buffer is needed elsewhere. */
#define CPU_TRANSPOSE(NAME, T, T8, M8)                                         \
  __kernel __attribute__((reqd_work_group_size(1, 1, 1))) void NAME(           \
      uint rows, uint cols, __global const T *x, ulong x_off, ulong ldx,       \
      __global T *y, ulong y_off, ulong ldy) {                                 \
    const uint r0 = get_global_id(1) * TILE, c0 = get_global_id(0) * TILE;     \
    const uint r1 = min(r0 + TILE, rows), c1 = min(c0 + TILE, cols);           \
    x += x_off;                                                                \
    y += y_off;                                                                \
    if (NT && sizeof(T) == 4 && (ulong)y % sizeof(T8) == 0 && ldy % 8 == 0) {  \
      CPU_TILE(T, T8, M8, ST_NT)                                               \
      NT_FENCE();                                                              \
    } else {                                                                   \
      CPU_TILE(T, T8, M8, ST_PLAIN)                                            \
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
