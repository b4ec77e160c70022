/* The element types of the op library (kiln_dtype_size, kiln_dtype_name in
 * kiln/kiln_ops.h): the bottom of the ops room, used by the checks, the ops and
 * the trace writer alike. */
#include "ops_internal.h"

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
