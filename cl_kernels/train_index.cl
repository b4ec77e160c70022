/* Training ops, rows by index: gather (an embedding lookup) and its
 * gradient, a deterministic scatter-add.
 *
 * Build options:
 *   -DDT=n  storage type (common.clh). Gather moves bits, so it uses the
 *           program of a type of the same width (f32 for 32-bit types, f16
 *           for 16-bit ones) and the kernels gather32 / gather16.
 * Launches: gather and scatter_add_rows take a 2-D range, dimension 0 the
 * columns (rounded up to the local size), dimension 1 the rows;
 * scatter_chain one work-item per row. Indices are read as uint: an i32
 * index below 0 becomes 2^31 or more, beyond any table (table_rows <=
 * INT32_MAX, checked on the host).
 *
 * Scatter-add without atomics: scatter_chain links each row i to the next
 * row with the same index (next[i], or UINT_MAX) and marks the first row of
 * each index (head[i]); then the work-item of column c of a head row walks
 * its chain, summing in f32 in increasing row order onto the table's
 * value, and stores once. Only heads write, one per table row, so the
 * result is the same bits on every run. */
#ifndef DT
#define DT 0
#endif
#include "common.clh"

#define GATHER(name, E, ALL_ONES)                                              \
  __kernel void name(__global const E *table, ulong to, ulong table_rows,      \
                     __global const uint *idx, ulong io, __global E *y,        \
                     ulong yo, ulong cols) {                                   \
    size_t c = get_global_id(0), r = get_global_id(1);                         \
    if (c >= cols)                                                             \
      return;                                                                  \
    uint t = idx[io + r];                                                      \
    y[yo + r * cols + c] =                                                     \
        t < table_rows ? table[to + (ulong)t * cols + c] : (E)(ALL_ONES);      \
  }
GATHER(gather32, uint, 0xffffffffu)
GATHER(gather16, ushort, 0xffffu)

/* next[i]: the next row j > i with idx[j] == idx[i], or UINT_MAX;
 * next[rows + i]: 1 when no row before i has i's index (a chain head) and
 * the index is in range, else 0. */
__kernel void scatter_chain(__global const uint *idx, ulong io, ulong rows,
                            ulong table_rows, __global uint *next) {
  size_t i = get_global_id(0);
  if (i >= rows)
    return;
  uint t = idx[io + i];
  uint nx = UINT_MAX, head = t < table_rows;
  for (ulong j = 0; j < i && head; j++)
    if (idx[io + j] == t)
      head = 0;
  for (ulong j = i + 1; j < rows; j++)
    if (idx[io + j] == t) {
      nx = (uint)j;
      break;
    }
  next[i] = nx;
  next[rows + i] = head;
}

__kernel void scatter_add_rows(__global const T *x, ulong xo,
                               __global const uint *idx, ulong io,
                               __global const uint *next, ulong rows,
                               __global T *table, ulong to, ulong cols) {
  size_t c = get_global_id(0), r = get_global_id(1);
  if (c >= cols || !next[rows + r])
    return;
  ulong dst = to + (ulong)idx[io + r] * cols + c;
  float s = LOAD(table, dst);
  for (uint i = (uint)r; i != UINT_MAX; i = next[i])
    s += LOAD(x + xo, (ulong)i * cols + c);
  STORE(table, dst, s);
}
