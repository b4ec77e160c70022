"""kiln's dtypes: their names, their kiln_dtype codes and their host
(numpy) counterparts."""

import numpy as _np

float32, float16, bfloat16, int32, uint32 = ("float32", "float16", "bfloat16",
                                             "int32", "uint32")
_DTYPE_CODE = {"float32": 0, "float16": 1, "bfloat16": 2, "int32": 3, "uint32": 4}
_DTYPE_NAME = {v: k for k, v in _DTYPE_CODE.items()}
_ALIASES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16",
            "i32": "int32", "u32": "uint32", "half": "float16",
            "float": "float32"}
# numpy dtype of the host side of each kiln dtype (bfloat16: raw bits).
_NP = {0: _np.dtype(_np.float32), 1: _np.dtype(_np.float16),
       2: _np.dtype(_np.uint16), 3: _np.dtype(_np.int32),
       4: _np.dtype(_np.uint32)}
# numpy dtypes asarray takes and what they become.
_FROM_NP = {"float32": 0, "float16": 1, "int32": 3, "uint32": 4,
            "float64": 0, "int64": 3, "uint64": 4}


def dtype_code(dtype):
    """The kiln_dtype value of a dtype name ('float32', 'bf16', ...) or numpy dtype."""
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype, dtype)
        if name in _DTYPE_CODE:
            return _DTYPE_CODE[name]
    else:
        try:
            name = _np.dtype(dtype).name
        except TypeError:
            name = None
        if name in ("float32", "float16", "int32", "uint32"):
            return _DTYPE_CODE[name]
    raise TypeError("dtype %r is not one of kiln's: float32, float16, bfloat16, "
                    "int32, uint32" % (dtype,))
