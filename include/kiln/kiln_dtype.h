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

KILN_END_DECLS

#endif
