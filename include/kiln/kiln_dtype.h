/* Element types: the one enum every layer (ops, buffers, multi-device, MPI)
 * names data with, and their sizes and names. */
#ifndef KILN_DTYPE_H
#define KILN_DTYPE_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"

KILN_BEGIN_DECLS

/* Element types. Values are stable. */
typedef enum kiln_dtype {
  KILN_F32 = 0,  /* IEEE binary32 */
  KILN_F16 = 1,  /* IEEE binary16, storage only */
  KILN_BF16 = 2, /* bfloat16 (the high half of a binary32), storage only */
  KILN_I32 = 3,  /* two's complement int32 */
  KILN_U32 = 4,  /* uint32 */
} kiln_dtype;

/* Size in bytes of one element of dtype, or 0 for an unknown value. */
KILN_API size_t kiln_dtype_size(kiln_dtype dtype);
/* "f32", "f16", "bf16", "i32", "u32"; "unknown" otherwise. Static storage. */
KILN_API const char *kiln_dtype_name(kiln_dtype dtype);

/* Host conversions of n elements between f32 and the 16-bit storage
 * formats, giving the same bits as kiln_cast on every device: narrowing
 * rounds to nearest even, overflows to infinity, keeps f16 subnormals, and
 * makes a NaN a quiet NaN of the same sign (bf16 keeps its top payload
 * bits, f16 none); widening is exact. src and dst must not overlap; with n
 * 0 neither is touched (NULL is fine). Thread-safe; nothing can fail, so
 * nothing is returned (like memcpy, n elements must be there). */
KILN_API void kiln_f32_to_f16(const float *src, uint16_t *dst, size_t n);
KILN_API void kiln_f16_to_f32(const uint16_t *src, float *dst, size_t n);
KILN_API void kiln_f32_to_bf16(const float *src, uint16_t *dst, size_t n);
KILN_API void kiln_bf16_to_f32(const uint16_t *src, float *dst, size_t n);

KILN_END_DECLS

#endif
