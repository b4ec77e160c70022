/* The element types every layer names data with (kiln_dtype_size,
 * kiln_dtype_name and the host conversions in kiln/kiln_dtype.h): in core,
 * the bottom room, because buffer transfers, ops, multi-device calls and MPI
 * all size their ranges with them, and libkiln_mpi, the tools and the tests
 * convert through the public header. */
#include "internal.h"

#include <string.h>

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

/* The conversions below are cl_kernels/common.clh's kiln_f32_to_f16 and
 * siblings, written again in host C: the two must give the same bits
 * (test_dtype checks every f16 and bf16 and a sample of f32 patterns). */

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* After F. Giesen's float_to_half_fast3_rtne, in integer arithmetic except
 * below 2^-14, where one float addition aligns the binary point so that the
 * FPU rounds (exact with or without denormals: the sum is normal). */
static uint16_t f32_to_f16(float f) {
  uint32_t u = f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u, o;
  u &= 0x7fffffffu;
  if (u >= 0x47800000u) /* >= 2^16: inf after rounding; inf; NaN */
    o = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
  else if (u < 0x38800000u) /* below 2^-14: subnormal or zero */
    o = f32_bits(bits_f32(u) + 0.5f) - 0x3f000000u;
  else /* rebias the exponent by -112 and round on the 13 dropped bits */
    o = (u + 0xc8000fffu + ((u >> 13) & 1u)) >> 13;
  return (uint16_t)(o | sign);
}

/* The f32 bits of h, exact; a subnormal m 2^-24 as a float product whose
 * result is normal. Bits rather than a float, so that a signalling NaN is
 * not quieted on its way to memory (x87 would). */
static uint32_t f16_to_f32_bits(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0)
    return sign | f32_bits((float)m * 0x1p-24f);
  if (e == 31)
    return sign | 0x7f800000u | (m << 13);
  return sign | ((e + 112u) << 23) | (m << 13);
}

/* Adding 0x7fff plus the lowest kept bit carries into the kept half exactly
 * when the dropped half exceeds half an ulp, or equals it and the kept half
 * is odd; overflow carries into infinity. NaN is made quiet first, so it
 * cannot round into infinity. */
static uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

KILN_API void kiln_f32_to_f16(const float *src, uint16_t *dst, size_t n) {
  for (size_t i = 0; i < n; i++)
    dst[i] = f32_to_f16(src[i]);
}

KILN_API void kiln_f16_to_f32(const uint16_t *src, float *dst, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u = f16_to_f32_bits(src[i]);
    memcpy(dst + i, &u, sizeof u);
  }
}

KILN_API void kiln_f32_to_bf16(const float *src, uint16_t *dst, size_t n) {
  for (size_t i = 0; i < n; i++)
    dst[i] = f32_to_bf16(src[i]);
}

/* bf16 is the high half of a binary32: widening is exact. */
KILN_API void kiln_bf16_to_f32(const uint16_t *src, float *dst, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u = (uint32_t)src[i] << 16;
    memcpy(dst + i, &u, sizeof u);
  }
}
