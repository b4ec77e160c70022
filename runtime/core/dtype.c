/* The element types every layer names data with (kiln_dtype_size,
 * kiln_dtype_name in kiln/kiln_dtype.h): in core, the bottom room, because
 * buffer transfers, ops, multi-device calls and MPI all size their ranges
 * with them. */
#include "internal.h"

KILN_API size_t kiln_dtype_size(kiln_dtype dtype) {
  switch (dtype) {
  case KILN_F32:
  case KILN_I32:
  case KILN_U32:
    return 4;
  case KILN_F16:
  case KILN_BF16:
    return 2;
  }
  return 0;
}

KILN_API const char *kiln_dtype_name(kiln_dtype dtype) {
  switch (dtype) {
  case KILN_F32:
    return "f32";
  case KILN_F16:
    return "f16";
  case KILN_BF16:
    return "bf16";
  case KILN_I32:
    return "i32";
  case KILN_U32:
    return "u32";
  }
  return "unknown";
}
