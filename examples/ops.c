/* ops.c: kiln's op library, chained on one queue without host round trips:
 * a GEMM, a softmax over its rows, row maxima (argmax) and a total sum, each
 * checked against a plain C loop on the host.
 *
 * Ops are asynchronous: each returns once enqueued. On an in-order queue
 * they run in order, so the next op may read what the previous one wrote;
 * a blocking read at the end waits for all of them.
 *
 * Build: cc ops.c $(pkg-config --cflags --libs kiln) -lm */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/kiln.h>

#include "log_stderr.h"

enum { M = 64, N = 48, K = 32 };

int main(int argc, char **argv) {
  log_to_stderr(); /* kiln never prints: its log on stderr */
  /* --help; anything else is a usage error (exit 2). The device comes
   * from KILN_DEVICE. */
  if (argc > 1) {
    const int help = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h");
    if (!help)
      fprintf(stderr, "ops: unknown argument '%s'\n", argv[1]);
    fprintf(help ? stdout : stderr,
            "usage: ops\n"
            "Chain a GEMM, a softmax, argmax and a sum on one queue; check each.\n"
            "options:\n"
            "  -h, --help   this help\n"
            "environment: KILN_DEVICE, the device selector (default: a GPU,\n"
            "else the CPU)\n");
    return help ? 0 : 2;
  }

  static float a[M * K], b[K * N], c[M * N], probs[M * N], host_c[M * N];
  static uint32_t argmax[M];
  float total = 0.0f;
  /* Small integers make the GEMM exact in f32 whatever the summation order. */
  for (size_t i = 0; i < M * K; i++)
    a[i] = (float)((int)(i % 7) - 3);
  for (size_t i = 0; i < K * N; i++)
    b[i] = (float)((int)(i % 5) - 2);

  kiln_context *ctx = NULL;
  kiln_queue *q = NULL;
  kiln_buffer *ba = NULL, *bb = NULL, *bc = NULL, *bp = NULL, *bmax = NULL,
              *bsum = NULL;
  int rc = EXIT_FAILURE;
  if (kiln_context_create_default(NULL, &ctx) != KILN_OK ||
      kiln_queue_create(ctx, 0, &q) != KILN_OK ||
      kiln_buffer_create(ctx, sizeof a, KILN_MEM_READ_ONLY, &ba) != KILN_OK ||
      kiln_buffer_create(ctx, sizeof b, KILN_MEM_READ_ONLY, &bb) != KILN_OK ||
      kiln_buffer_create(ctx, sizeof c, KILN_MEM_READ_WRITE, &bc) != KILN_OK ||
      kiln_buffer_create(ctx, sizeof probs, KILN_MEM_READ_WRITE, &bp) != KILN_OK ||
      kiln_buffer_create(ctx, sizeof argmax, KILN_MEM_WRITE_ONLY, &bmax) != KILN_OK ||
      kiln_buffer_create(ctx, sizeof total, KILN_MEM_WRITE_ONLY, &bsum) != KILN_OK ||
      kiln_buffer_write_sync(q, a, &(kiln_range){ba, 0, M * K, KILN_F32}) != KILN_OK ||
      kiln_buffer_write_sync(q, b, &(kiln_range){bb, 0, K * N, KILN_F32}) != KILN_OK)
    goto fail;

  /* Operands are descriptors: buffer, offset, shape and element type (a
   * zeroed kiln_matrix is row-major, packed, not transposed). Offsets and
   * leading dimensions count elements. */
  const kiln_matrix ma = {
      .buffer = ba, .rows = M, .cols = K, .dtype = KILN_F32};
  const kiln_matrix mb = {
      .buffer = bb, .rows = K, .cols = N, .dtype = KILN_F32};
  const kiln_matrix mc = {
      .buffer = bc, .rows = M, .cols = N, .dtype = KILN_F32};
  const kiln_matrix mp = {
      .buffer = bp, .rows = M, .cols = N, .dtype = KILN_F32};
  const kiln_range rp = {bp, 0, (size_t)M * N, KILN_F32};
  const kiln_range rmax = {bmax, 0, M, KILN_U32}, rsum = {bsum, 0, 1, KILN_F32};
  /* C = A B (a NULL epilogue: alpha 1, beta 0). The first op of a kind on a
   * device builds its kernel (or loads it from the program cache). */
  if (kiln_matmul(q, 1, &ma, &mb, &mc, NULL, 0, NULL, NULL) != KILN_OK ||
      /* Softmax of each row of C: the probabilities of a row sum to 1. */
      kiln_softmax_rows(q, &mc, &mp, 0, NULL, NULL) != KILN_OK ||
      /* Where each row of C peaks: u32 column indexes. */
      kiln_reduce_rows(q, KILN_REDUCE_ARGMAX, &mc, &rmax, 0, NULL, NULL) !=
          KILN_OK ||
      /* The sum of every probability: M, one per row. */
      kiln_reduce(q, KILN_REDUCE_SUM, &rp, &rsum, 0, NULL, NULL) != KILN_OK)
    goto fail;
  if (kiln_buffer_read_sync(q, &(kiln_range){bc, 0, M * N, KILN_F32}, c) != KILN_OK ||
      kiln_buffer_read_sync(q, &(kiln_range){bp, 0, M * N, KILN_F32}, probs) != KILN_OK ||
      kiln_buffer_read_sync(q, &(kiln_range){bmax, 0, M, KILN_U32}, argmax) != KILN_OK ||
      kiln_buffer_read_sync(q, &(kiln_range){bsum, 0, 1, KILN_F32}, &total) != KILN_OK)
    goto fail;

  /* The host's answers. */
  for (size_t i = 0; i < M; i++)
    for (size_t j = 0; j < N; j++) {
      float s = 0.0f;
      for (size_t p = 0; p < K; p++)
        s += a[i * K + p] * b[p * N + j];
      host_c[i * N + j] = s;
    }
  for (size_t i = 0; i < M * N; i++)
    if (c[i] != host_c[i]) {
      fprintf(stderr, "ops: gemm c[%zu] = %g, expected %g\n", i, c[i], host_c[i]);
      goto done;
    }
  for (size_t i = 0; i < M; i++) {
    const float *row = &host_c[i * N];
    uint32_t best = 0;
    float max = row[0], sum = 0.0f;
    for (uint32_t j = 1; j < N; j++)
      if (row[j] > max) {
        max = row[j];
        best = j;
      }
    for (size_t j = 0; j < N; j++)
      sum += expf(row[j] - max);
    for (size_t j = 0; j < N; j++) {
      float want = expf(row[j] - max) / sum;
      if (fabsf(probs[i * N + j] - want) > 1e-5f + 1e-4f * want) {
        fprintf(stderr, "ops: softmax [%zu][%zu] = %g, expected %g\n", i, j,
                probs[i * N + j], want);
        goto done;
      }
    }
    if (argmax[i] != best) {
      fprintf(stderr, "ops: argmax of row %zu = %u, expected %u\n", i,
              argmax[i], best);
      goto done;
    }
  }
  if (fabsf(total - (float)M) > 1e-3f * M) {
    fprintf(stderr, "ops: the probabilities sum to %g, expected %d\n", total, M);
    goto done;
  }
  printf("ops: gemm %dx%dx%d, softmax, argmax and sum correct on %s\n", M, N,
         K, kiln_context_get_device_info(ctx)->name);
  rc = EXIT_SUCCESS;
  goto done;
fail:
  fprintf(stderr, "ops: %s\n", kiln_last_error());
done:
  kiln_buffer_destroy(ba);
  kiln_buffer_destroy(bb);
  kiln_buffer_destroy(bc);
  kiln_buffer_destroy(bp);
  kiln_buffer_destroy(bmax);
  kiln_buffer_destroy(bsum);
  kiln_queue_destroy(q);
  if (kiln_context_destroy(ctx) != KILN_OK)
    rc = EXIT_FAILURE;
  return rc;
}
