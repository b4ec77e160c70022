/* The runner's scaffolding (run_ops_util.h): host values in the storage
 * formats, buffers framed by sentinels, and result checks. */
#include "run_ops_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int failures;
int checks;
kiln_context *ctx;
kiln_queue *q;

size_t dsize(kiln_dtype dt) { return kiln_dtype_size(dt); }

/* Host values in double -> storage of dt (f16 and bf16 through the
 * library's host conversions). */
static void store(kiln_dtype dt, void *p, size_t i, double v) {
  float f = (float)v;
  switch (dt) {
  case KILN_F32: ((float *)p)[i] = f; break;
  case KILN_F16: kiln_f32_to_f16(&f, (uint16_t *)p + i, 1); break;
  case KILN_BF16: kiln_f32_to_bf16(&f, (uint16_t *)p + i, 1); break;
  case KILN_I32: ((int32_t *)p)[i] = (int32_t)v; break;
  case KILN_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
  }
}
double load(kiln_dtype dt, const void *p, size_t i) {
  float f;
  switch (dt) {
  case KILN_F32: return ((const float *)p)[i];
  case KILN_F16: kiln_f16_to_f32((const uint16_t *)p + i, &f, 1); return f;
  case KILN_BF16: kiln_bf16_to_f32((const uint16_t *)p + i, &f, 1); return f;
  case KILN_I32: return ((const int32_t *)p)[i];
  case KILN_U32: return ((const uint32_t *)p)[i];
  }
  return NAN;
}
/* Relative tolerance for results stored in dt after f32 arithmetic. */
static double rel_tol(kiln_dtype dt) {
  return dt == KILN_F16 ? 2e-3 : dt == KILN_BF16 ? 1.6e-2 : 2e-5;
}

/* Values in [-4, 4) on a 1/64 grid: exact in f32, f16 and bf16. */
static double input_value(uint32_t seed, size_t i) {
  uint32_t h = (uint32_t)i * 2654435761u ^ seed;
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  return ((double)(h % 512) - 256.0) / 64.0;
}

/* ---- buffers ------------------------------------------------------------- */

/* The bits that fill every element of a buffer outside the range an op may
 * touch, by element size: a NaN for f32 (4 bytes; a large value as i32 or
 * u32) and for f16 and bf16 alike (2 bytes). An op that reads outside its
 * range spoils its result; one that writes outside it is caught by
 * download(), which checks that the rest of the buffer still holds them.
 * Outputs start filled with them too, so GEMM with beta 0 reading C would
 * turn its result into NaN. */
static void fill_sentinels(void *p, size_t es, size_t count) {
  for (size_t i = 0; i < count; i++) {
    if (es == 2)
      ((uint16_t *)p)[i] = 0x7fc1;
    else
      ((uint32_t *)p)[i] = 0x7fc0dead;
  }
}

/* A buffer of offset + n + 3 elements of dt, of which [offset, offset + n)
 * holds input_value(seed, i) (scaled to integers for i32 and u32) and the
 * rest sentinels. The whole buffer is written at once: Oclgrind 21.10's
 * uninitialised-value tracking mishandles host writes at an offset (it
 * marks [0, size) instead of [offset, offset + size) as written, reporting
 * false uninitialised reads of the range's tail). *host receives a host
 * copy of the n values (caller frees). */
kiln_buffer *input(kiln_dtype dt, size_t offset, size_t n,
                          uint32_t seed, void **host) {
  size_t es = dsize(dt), total = offset + n + 3;
  void *h = calloc(n ? n : 1, es);
  unsigned char *image = malloc(total * es);
  fill_sentinels(image, es, total);
  for (size_t i = 0; i < n; i++) {
    double v = input_value(seed, i);
    /* Integers: -256..255 for i32, 0..256 for u32. */
    store(dt, h, i, dt == KILN_I32 ? v * 64 : dt == KILN_U32 ? fabs(v) * 64 : v);
  }
  memcpy(image + offset * es, h, n * es);
  kiln_buffer *b = NULL;
  if (kiln_buffer_create(ctx, total * es, 0, &b) != KILN_OK ||
      kiln_buffer_write_sync(q, image, &(kiln_range){b, 0, total, dt}) != KILN_OK) {
    fprintf(stderr, "FAIL input buffer: %s\n", kiln_last_error());
    exit(1);
  }
  free(image);
  *host = h;
  return b;
}

/* An output buffer of count + 3 elements, all sentinels. */
kiln_buffer *output(kiln_dtype dt, size_t count) {
  size_t es = dsize(dt), total = count + 3;
  void *image = malloc(total * es);
  fill_sentinels(image, es, total);
  kiln_buffer *b = NULL;
  if (kiln_buffer_create(ctx, total * es, 0, &b) != KILN_OK ||
      kiln_buffer_write_sync(q, image, &(kiln_range){b, 0, total, dt}) != KILN_OK) {
    fprintf(stderr, "FAIL output buffer: %s\n", kiln_last_error());
    exit(1);
  }
  free(image);
  return b;
}

/* A host copy of elements [offset, offset + n) of b, after checking that
 * every element outside that range still holds its sentinel. */
void *download(kiln_buffer *b, kiln_dtype dt, size_t offset,
                      size_t n) {
  size_t es = dsize(dt), total = kiln_buffer_get_size(b) / es;
  unsigned char *all = malloc(total * es), *want = malloc(es);
  void *h = calloc(n ? n : 1, es);
  fill_sentinels(want, es, 1);
  if (kiln_buffer_read_sync(q, &(kiln_range){b, 0, total, dt}, all) != KILN_OK) {
    fprintf(stderr, "FAIL read back: %s\n", kiln_last_error());
    failures++;
  } else {
    memcpy(h, all + offset * es, n * es);
    checks++;
    for (size_t i = 0; i < total; i++)
      if ((i < offset || i >= offset + n) &&
          memcmp(all + i * es, want, es) != 0) {
        fprintf(stderr, "FAIL element %zu of a %zu-element buffer changed, "
                        "outside the op's range [%zu, %zu)\n",
                i, total, offset, offset + n);
        failures++;
        break;
      }
  }
  free(all), free(want);
  return h;
}

/* Compare got[i] (stored as dt) with want[i]; abs_tol adds to the relative
 * tolerance. */
void expect(const char *what, kiln_dtype dt, const void *got,
                   const double *want, size_t n, double abs_tol) {
  for (size_t i = 0; i < n; i++) {
    double g = load(dt, got, i), w = want[i];
    double tol = rel_tol(dt) * fabs(w) + abs_tol;
    checks++;
    if (!(fabs(g - w) <= tol || (isnan(g) && isnan(w)) ||
          (isinf(w) && g == w))) {
      fprintf(stderr, "FAIL %s [%zu]: got %.9g, want %.9g (tol %.3g)\n",
              what, i, g, w, tol);
      failures++;
      return;
    }
  }
  printf("ok   %s\n", what);
}
