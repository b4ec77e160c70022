/* Casts between the float storage formats f32, f16 and bf16:
 * cast_<from>_<to>(x, xo, y, yo, n), one work-item per element (or per 16
 * with -DVEC=16, the CPU family's layout, as in elementwise.cl), range
 * rounded up to the local size. Every value passes through f32, which holds
 * f16 and bf16 exactly, so the only rounding is the final store's (to
 * nearest even); equal types copy bits. */
#include "common.clh"

#define LD_f32(p, i) ((p)[i])
#define LD_f16(p, i) kiln_f16_to_f32(((__global const ushort *)(p))[i])
#define LD_bf16(p, i) kiln_bf16_to_f32((p)[i])
#define ST_f32(p, i, v) ((p)[i] = (v))
#define ST_f16(p, i, v) (((__global ushort *)(p))[i] = kiln_f32_to_f16(v))
#define ST_bf16(p, i, v) ((p)[i] = kiln_f32_to_bf16(v))
#define LD16_f32(p) vload16(0, (p))
#define LD16_f16(p) kiln_half16_to_f32_16(vload16(0, (__global const ushort *)(p)))
#define LD16_bf16(p) kiln_bf16_to_f32_16(vload16(0, (p)))
#define ST16_f32(p, v) vstore16((v), 0, (p))
#define ST16_bf16(p, v) vstore16(kiln_f32_to_bf16_16(v), 0, (p))
#define ST16_f16(p, v)                                                         \
  do {                                                                         \
    vstore16((v), 0, kiln_tmp16_);                                             \
    for (int j_ = 0; j_ < 16; j_++)                                            \
      ST_f16((p), j_, kiln_tmp16_[j_]);                                        \
  } while (0)
#define TY_f32 float
#define TY_f16 half
#define TY_bf16 ushort

#define CAST(from, to)                                                        \
  __kernel void cast_##from##_##to(__global const TY_##from *x, ulong xo,     \
                                   __global TY_##to *y, ulong yo, ulong n) {  \
    __global const TY_##from *p = x + xo;                                     \
    __global TY_##to *q = y + yo;                                             \
    FOR_ELEMENTS(i, n, ST16_##to(q + i, LD16_##from(p + i)),                  \
                 ST_##to(q, i, LD_##from(p, i)))                              \
  }

/* Equal types copy the bits, so a cast to the same type is an exact copy
 * (NaN payloads included, which a round trip through float may alter). */
#define COPY(name, type)                                                      \
  __kernel void cast_##name##_##name(__global const type *x, ulong xo,        \
                                     __global type *y, ulong yo, ulong n) {   \
    __global const type *p = x + xo;                                          \
    __global type *q = y + yo;                                                \
    FOR_ELEMENTS(i, n, vstore16(vload16(0, p + i), 0, q + i), q[i] = p[i])    \
  }

COPY(f32, uint)
COPY(f16, ushort)
COPY(bf16, ushort)
CAST(f32, f16)
CAST(f32, bf16)
CAST(f16, f32)
CAST(f16, bf16)
CAST(bf16, f32)
CAST(bf16, f16)
