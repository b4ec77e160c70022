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
 *     blocks of four 8 x 8 in-register transposes (VW 8: 8 vector loads of
 *     8 along the rows of x, 24 shuffles, 8 vector stores of 8 along the
 *     rows of y each) or of one 16 x 16 transpose (VW 16: 16 loads, 64
 *     shuffles, 16 stores). No __local memory (on CPU OpenCL it is
 *     ordinary memory plus barriers) and no cross-work-item vectorisation.
 *
 * Macros: TILE (tile edge; a multiple of 16 for the CPU family); GPU family
 * only, PAD (columns of padding, 0 or more) and WPT (elements per
 * work-item, dividing TILE): the knobs of the space in
 * runtime/tune/space_small.c, whose defaults (PAD 1, groups of TILE x
 * min(TILE, 8) items) are the kernel's historic shape; CPU family only
 * (runtime/tune/space_cpu.c), NT (1: streaming stores of y), ORDER (the
 * order of a tile's blocks: 0 a column of blocks after another, 1 a row
 * of blocks after another), both 0 by default, the kernel's historic way,
 * and VW (8 or 16: the vectors of the in-register transpose).
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
#ifndef VW
#define VW 8
#endif
#if VW != 8 && VW != 16
#error "VW must be 8 or 16"
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
    ST(8, T8, SHUF8(M8, u0, u4, 0, 1, 2, 3, 8, 9, 10, 11), q);                 \
    ST(8, T8, SHUF8(M8, u1, u5, 0, 1, 2, 3, 8, 9, 10, 11), q + ldy);           \
    ST(8, T8, SHUF8(M8, u2, u6, 0, 1, 2, 3, 8, 9, 10, 11), q + 2 * ldy);       \
    ST(8, T8, SHUF8(M8, u3, u7, 0, 1, 2, 3, 8, 9, 10, 11), q + 3 * ldy);       \
    ST(8, T8, SHUF8(M8, u0, u4, 4, 5, 6, 7, 12, 13, 14, 15), q + 4 * ldy);     \
    ST(8, T8, SHUF8(M8, u1, u5, 4, 5, 6, 7, 12, 13, 14, 15), q + 5 * ldy);     \
    ST(8, T8, SHUF8(M8, u2, u6, 4, 5, 6, 7, 12, 13, 14, 15), q + 6 * ldy);     \
    ST(8, T8, SHUF8(M8, u3, u7, 4, 5, 6, 7, 12, 13, 14, 15), q + 7 * ldy);     \
  }

/* A 16 x 16 block in one go, for 32 vector registers (AVX-512): 16 loads of
 * whole 64-byte lines of x, four stages of 16 two-input shuffles, 16 stores
 * of whole lines of y. Stage s swaps the off-diagonal s x s sub-blocks of
 * every 2s x 2s block: rows i and i + s trade the elements whose column
 * has bit s set in one (lane k + s of row i with lane k of row i + s).
 * Every line of x is read once and every line of y written by one store,
 * which a streaming store's write-combining buffer takes whole; the 8 x 8
 * form above reads each line of x in two halves. The stages commute; they
 * run 1, 2, 4, 8: with the 128-bit-lane stages (8, 4) first, LLVM folded
 * them into the loads and read each line of x as four 16-byte pieces. */
#if defined(__clang__)
#define SHUF16(M16, a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define SHUF16(M16, a, b, ...) shuffle2(a, b, (M16)(__VA_ARGS__))
#endif
#define LO8 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define HI8 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
#define LO4 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27
#define HI4 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31
#define LO2 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define HI2 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define LO1 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30
#define HI1 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31
#define SWAP16(T16, M16, S, a, b)                                              \
  {                                                                            \
    const T16 t_ = a;                                                          \
    a = SHUF16(M16, t_, b, LO##S);                                             \
    b = SHUF16(M16, t_, b, HI##S);                                             \
  }
#define TR16(T16, M16, ST, p, ldx, q, ldy)                                     \
  {                                                                            \
    T16 r0 = vload16(0, p), r1 = vload16(0, p + ldx),                          \
        r2 = vload16(0, p + 2 * ldx), r3 = vload16(0, p + 3 * ldx),            \
        r4 = vload16(0, p + 4 * ldx), r5 = vload16(0, p + 5 * ldx),            \
        r6 = vload16(0, p + 6 * ldx), r7 = vload16(0, p + 7 * ldx),            \
        r8 = vload16(0, p + 8 * ldx), r9 = vload16(0, p + 9 * ldx),            \
        r10 = vload16(0, p + 10 * ldx), r11 = vload16(0, p + 11 * ldx),        \
        r12 = vload16(0, p + 12 * ldx), r13 = vload16(0, p + 13 * ldx),        \
        r14 = vload16(0, p + 14 * ldx), r15 = vload16(0, p + 15 * ldx);        \
    SWAP16(T16, M16, 1, r0, r1) SWAP16(T16, M16, 1, r2, r3)                    \
    SWAP16(T16, M16, 1, r4, r5) SWAP16(T16, M16, 1, r6, r7)                    \
    SWAP16(T16, M16, 1, r8, r9) SWAP16(T16, M16, 1, r10, r11)                  \
    SWAP16(T16, M16, 1, r12, r13) SWAP16(T16, M16, 1, r14, r15)                \
    SWAP16(T16, M16, 2, r0, r2) SWAP16(T16, M16, 2, r1, r3)                    \
    SWAP16(T16, M16, 2, r4, r6) SWAP16(T16, M16, 2, r5, r7)                    \
    SWAP16(T16, M16, 2, r8, r10) SWAP16(T16, M16, 2, r9, r11)                  \
    SWAP16(T16, M16, 2, r12, r14) SWAP16(T16, M16, 2, r13, r15)                \
    SWAP16(T16, M16, 4, r0, r4) SWAP16(T16, M16, 4, r1, r5)                    \
    SWAP16(T16, M16, 4, r2, r6) SWAP16(T16, M16, 4, r3, r7)                    \
    SWAP16(T16, M16, 4, r8, r12) SWAP16(T16, M16, 4, r9, r13)                  \
    SWAP16(T16, M16, 4, r10, r14) SWAP16(T16, M16, 4, r11, r15)                \
    SWAP16(T16, M16, 8, r0, r8) SWAP16(T16, M16, 8, r1, r9)                    \
    SWAP16(T16, M16, 8, r2, r10) SWAP16(T16, M16, 8, r3, r11)                  \
    SWAP16(T16, M16, 8, r4, r12) SWAP16(T16, M16, 8, r5, r13)                  \
    SWAP16(T16, M16, 8, r6, r14) SWAP16(T16, M16, 8, r7, r15)                  \
    ST(16, T16, r0, q); ST(16, T16, r1, q + ldy);                              \
    ST(16, T16, r2, q + 2 * ldy); ST(16, T16, r3, q + 3 * ldy);                \
    ST(16, T16, r4, q + 4 * ldy); ST(16, T16, r5, q + 5 * ldy);                \
    ST(16, T16, r6, q + 6 * ldy); ST(16, T16, r7, q + 7 * ldy);                \
    ST(16, T16, r8, q + 8 * ldy); ST(16, T16, r9, q + 9 * ldy);                \
    ST(16, T16, r10, q + 10 * ldy); ST(16, T16, r11, q + 11 * ldy);            \
    ST(16, T16, r12, q + 12 * ldy); ST(16, T16, r13, q + 13 * ldy);            \
    ST(16, T16, r14, q + 14 * ldy); ST(16, T16, r15, q + 15 * ldy);            \
  }

/* The stores of TR8 and TR16 (N elements of vector type TV): plain
 * (vstoreN: element alignment), or streaming
 * (non-temporal: the line goes to memory without being read first, which
 * saves a transpose a third of its traffic, since every line of y is
 * written whole; only with clang's builtin, on whole aligned vectors). */
#define ST_PLAIN(N, TV, v, q) vstore##N(v, 0, q)
#if defined(__clang__) && defined(__has_builtin)
#if __has_builtin(__builtin_nontemporal_store)
#define HAVE_NT 1
#endif
#endif
#ifdef HAVE_NT
#define ST_NT(N, TV, v, q) __builtin_nontemporal_store(v, (__global TV *)(q))
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

/* One 16 x 16 block at p into q: VW 16 as one TR16, VW 8 as four TR8s, the
 * two that fill the first 16 elements of y's rows c to c + 7 (whole 64-byte
 * lines for 4-byte elements), then the two of rows c + 8 to c + 15. */
#if VW == 16
#define BLOCK16(T8, T16, M8, M16, ST, p, ldx, q, ldy)                          \
  TR16(T16, M16, ST, p, ldx, q, ldy)
#else
#define BLOCK16(T8, T16, M8, M16, ST, p, ldx, q, ldy)                          \
  TR8(T8, M8, ST, p, ldx, q, ldy)                                              \
  TR8(T8, M8, ST, (p + 8 * ldx), ldx, (q + 8), ldy)                            \
  TR8(T8, M8, ST, (p + 8), ldx, (q + 8 * ldy), ldy)                            \
  TR8(T8, M8, ST, (p + 8 * ldx + 8), ldx, (q + 8 * ldy + 8), ldy)
#endif

/* Columns [c0, c1) of rows [r0, r1) in 16 x 16 blocks. With VW 8, either
 * half of every 64-byte line of y is written right after the other, and
 * either half of x's lines read close together, while the line is still in
 * L1, so every line is brought in once even at power-of-two leading
 * dimensions (4096 x 4096), where all the lines of a tile's column fall
 * into one cache set; and a streaming store's write-combining buffer fills
 * whole. With VW 16 each line is one load or one store. */
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
#define CPU_TILE(T, T8, T16, M8, M16, ST)                                      \
  CPU_LOOPS {                                                                  \
    {                                                                          \
      if (r + 16 <= r1 && c + 16 <= c1) {                                      \
        __global const T *p = x + (ulong)r * ldx + c;                          \
        __global T *q = y + (ulong)c * ldy + r;                                \
        BLOCK16(T8, T16, M8, M16, ST, p, ldx, q, ldy)                          \
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
 * elements stream where every store of the item is a whole aligned vector
 * of VW: y's start and its leading dimension whole vectors (block starts
 * are multiples of 16). 16-bit elements keep plain stores: a block writes half
 * of each 64-byte line of y, and a streamed half line is written to memory
 * on its own once the line's write-combining buffer is needed elsewhere. */
#define CPU_TRANSPOSE(NAME, T, T8, T16, M8, M16)                               \
  __kernel __attribute__((reqd_work_group_size(1, 1, 1))) void NAME(           \
      uint rows, uint cols, __global const T *x, ulong x_off, ulong ldx,       \
      __global T *y, ulong y_off, ulong ldy) {                                 \
    const uint r0 = get_global_id(1) * TILE, c0 = get_global_id(0) * TILE;     \
    const uint r1 = min(r0 + TILE, rows), c1 = min(c0 + TILE, cols);           \
    x += x_off;                                                                \
    y += y_off;                                                                \
    if (NT && sizeof(T) == 4 && (ulong)y % (VW * sizeof(T)) == 0 &&           \
        ldy % VW == 0) {                                                       \
      CPU_TILE(T, T8, T16, M8, M16, ST_NT)                                     \
      NT_FENCE();                                                              \
    } else {                                                                   \
      CPU_TILE(T, T8, T16, M8, M16, ST_PLAIN)                                  \
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

CPU_TRANSPOSE(transpose_cpu_32, uint, uint8, uint16, uint8, uint16)
CPU_TRANSPOSE(transpose_cpu_16, ushort, ushort8, ushort16, ushort8, ushort16)
GPU_TRANSPOSE(transpose_gpu_32, uint)
GPU_TRANSPOSE(transpose_gpu_16, ushort)
