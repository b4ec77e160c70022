/* How a call names data in buffers: a kiln_range (a span of elements) or a
 * kiln_matrix (a matrix, or a batch of equally shaped matrices, inside one
 * buffer). Every layer takes these (ops, buffer transfers, multi-device
 * calls, MPI collectives), so a range that one call produced goes to the
 * next unchanged. Offsets, counts, leading dimensions and strides are in
 * elements of the descriptor's dtype (docs/conventions.md). */
#ifndef KILN_TENSOR_H
#define KILN_TENSOR_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"
#include "kiln/kiln_dtype.h"

KILN_BEGIN_DECLS

/* count elements of dtype from element offset of buffer. */
typedef struct kiln_range {
  kiln_buffer *buffer;
  size_t offset; /* elements of dtype from the buffer's start */
  size_t count;  /* elements */
  kiln_dtype dtype;
} kiln_range;

/* How a matrix is laid out: row-major (row r starts at offset + r * ld) or
 * column-major (column c starts at offset + c * ld, as in Fortran BLAS). */
typedef enum kiln_layout {
  KILN_ROW_MAJOR = 0,
  KILN_COL_MAJOR = 1,
} kiln_layout;

/* Whether an operand is used as stored or transposed. */
typedef enum kiln_trans {
  KILN_NO_TRANS = 0,
  KILN_TRANS = 1,
} kiln_trans;

/* A rows x cols matrix as stored in buffer, from element offset, in layout,
 * with leading dimension ld (0: packed, i.e. cols for row-major and rows
 * for column-major). A batch of matrices lies batch_stride elements apart
 * (0: one matrix shared by every entry of a batch). trans says whether a
 * call uses the matrix as stored or transposed; calls that do not
 * transpose (row ops) require KILN_NO_TRANS. A zero-initialised descriptor
 * plus buffer, rows, cols and dtype is a packed row-major matrix.
 * packed, when not NULL, names a pre-packed GEMM operand (kiln_packed,
 * kiln/kiln_ops.h) in place of buffer, offset and ld: only kiln_matmul's
 * A and B take one; every other call refuses it by name ("x.packed"). */
typedef struct kiln_matrix {
  kiln_buffer *buffer;
  size_t offset;
  size_t rows;
  size_t cols;
  size_t ld;
  size_t batch_stride;
  kiln_dtype dtype;
  kiln_layout layout;
  kiln_trans trans;
  const kiln_packed *packed;
} kiln_matrix;

/* How a batch of images is laid out: NCHW (each channel a plane of h x w;
 * the default, PyTorch's layout, what every kiln image op takes) or NHWC
 * (channels innermost; an op that does not take it says so by name). */
typedef enum kiln_image_layout {
  KILN_NCHW = 0,
  KILN_NHWC = 1,
} kiln_image_layout;

/* A batch of n images of c channels of h x w pixels, packed in buffer from
 * element offset in layout: n * c * h * w elements of dtype. Image ops
 * (convolution, pooling, batch normalisation) take their data as these; the
 * same rules as the other descriptors apply (elements, not bytes; a
 * zero-initialised descriptor plus buffer, sizes and dtype is NCHW). */
typedef struct kiln_image {
  kiln_buffer *buffer;
  size_t offset;
  size_t n;
  size_t c;
  size_t h;
  size_t w;
  kiln_dtype dtype;
  kiln_image_layout layout;
} kiln_image;

KILN_END_DECLS

#endif
