/* Scaffolding of run_ops.c: the context and queue under test, counters of
 * checks and failures, host conversions of the storage formats, buffers
 * whose elements outside an op's range hold sentinels, and comparisons
 * against host references (run_ops_util.c). */
#ifndef KILN_RUN_OPS_UTIL_H
#define KILN_RUN_OPS_UTIL_H

#include <stdio.h>

#include "program/program.h"

extern int failures; /* failed checks so far */
extern int checks;   /* checks made so far */
extern kiln_context *ctx;
extern kiln_queue *q;

#define CHECK_OK(expr)                                                        \
  do {                                                                        \
    kiln_status s_ = (expr);                                                  \
    if (s_ != KILN_OK) {                                                      \
      fprintf(stderr, "FAIL %s:%d: %s returned %s: %s\n", __FILE__, __LINE__, \
              #expr, kiln_status_name(s_), kiln_last_error());                \
      failures++;                                                             \
      return;                                                                 \
    }                                                                         \
  } while (0)

/* Element size of dt in bytes. */
size_t dsize(kiln_dtype dt);
/* Element i of p, stored as dt, as a double. */
double load(kiln_dtype dt, const void *p, size_t i);
/* A buffer of offset + n + 3 elements of dt: [offset, offset + n) holds
 * seeded inputs, the rest sentinels; *host gets a copy of the n inputs
 * (caller frees). Exits on failure. */
kiln_buffer *input(kiln_dtype dt, size_t offset, size_t n, uint32_t seed,
                   void **host);
/* An output buffer of count + 3 elements, all sentinels. */
kiln_buffer *output(kiln_dtype dt, size_t count);
/* A host copy of elements [offset, offset + n) of b (caller frees), after
 * checking that the elements outside that range still hold sentinels. */
void *download(kiln_buffer *b, kiln_dtype dt, size_t offset, size_t n);
/* Compare got[i] (stored as dt) with want[i] within dt's relative
 * tolerance plus abs_tol; count a failure and say so on the first miss. */
void expect(const char *what, kiln_dtype dt, const void *got,
            const double *want, size_t n, double abs_tol);

#endif
