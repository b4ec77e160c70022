/* kiln tune: the search (tune_search.c), the ops it knows (tune_ops.c)
 * and GEMM's correctness gate (tune_gate.c), shared by the subcommand
 * (cmd_tune.c) and the gate's test (tests/test_tune_gate.c). Public kiln
 * API only. */
#ifndef KILN_TOOLS_TUNE_H
#define KILN_TOOLS_TUNE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include <kiln/kiln.h>

#define TUNE_MAX_SIZES 8
#define TUNE_MAX_KNOBS 32

/* Test hooks: after the gate's or the timing's GEMM of a candidate, hook
 * may change C (to inject a wrong candidate) and scale its measured time
 * (to make it look fastest). NULL in the tool. The other ops' gates
 * (tune_ops.c) call after_gemm on their output buffer too, count being its
 * size in 4-byte words. */
typedef struct tune_hooks {
  void (*after_gemm)(void *user, const char *params, kiln_queue *q,
                     kiln_buffer *c, size_t count);
  double (*time_scale)(void *user, const char *params);
  void *user;
} tune_hooks;

/* ---- the gate (tune_gate.c) ---------------------------------------------- */

/* Run the GEMM with the parameters now set for ctx's device on awkward
 * shapes (1, primes, non-multiples of every tile, both layouts, transposes,
 * offsets, padded leading dimensions, f32 and bf16, beta over NaN, the
 * epilogue) and check every element against a float64 host reference
 * within the op's tolerance. false with why[] on a mismatch or a failure
 * (a kernel that does not build or launch); *seconds gets the gate's run
 * time. */
bool tune_gate(kiln_context *ctx, kiln_queue *q, const char *params,
               const tune_hooks *hooks, double *seconds, char *why,
               size_t why_size);

/* Median-free quick timing: seconds of one m x n x k f32 GEMM (C = A B),
 * best of up to runs, stopping after the first run when that run already
 * takes more than stop_above seconds (0: never). A failure gives < 0. */
double tune_time_gemm(kiln_context *ctx, kiln_queue *q, size_t m, size_t n,
                      size_t k, int runs, double stop_above,
                      const tune_hooks *hooks, const char *params);

/* ---- the ops (tune_ops.c) ------------------------------------------------ */

/* An op kiln tune searches: its space, its gate, and how to time it. A size
 * is three numbers (m, n, k for GEMM; rows, cols for transpose; elements
 * first for the others). */
typedef struct tune_op {
  const char *name;    /* the space (kiln_tuning_knob_get), the file's op */
  const char *aliases; /* more --op names for it ("sum,dot,nrm2"), or "" */
  const char *timed;   /* what one timed run does, for people */
  const char *unit;    /* of the figures: "GFLOP/s", "GB/s" */
  const char *sizes;   /* --size's default for the op */
  size_t max_size;     /* the largest number a size may hold */
  unsigned dims;       /* numbers of a size that the op reads (1 to 3) */
  /* The gate: the op with the parameters now set on awkward shapes against
   * a float64 host reference (tune_gate above, for GEMM). */
  bool (*gate)(kiln_context *ctx, kiln_queue *q, const char *params,
               const tune_hooks *hooks, double *seconds, char *why,
               size_t why_size);
  /* Seconds of one run at size, as tune_time_gemm; < 0 on failure. */
  double (*time)(kiln_context *ctx, kiln_queue *q, const size_t *size,
                 int runs, double stop_above, const tune_hooks *hooks,
                 const char *params);
  double (*work)(const size_t *size); /* FLOPs or bytes of one timed run */
} tune_op;

/* The op called name or one of its aliases; NULL when none. */
const tune_op *tune_op_find(const char *name);
/* The ops, in the order kiln tune --list shows them. */
const tune_op *tune_op_at(size_t index); /* NULL past the last */

/* ---- the search (tune_search.c) ------------------------------------------ */

typedef struct tune_options {
  size_t sizes[TUNE_MAX_SIZES][3]; /* m, n, k */
  size_t nsizes;
  double budget_s;       /* wall-clock seconds for the op */
  unsigned long seed;
  /* Exhaustive when the space has at most this many points, else seeded
   * random points then local search from the best. */
  double exhaustive_max;
  /* Knobs the search may change (names); the others keep the default's
   * value. Empty: every knob. */
  const char *knobs[TUNE_MAX_KNOBS];
  size_t nknobs;
  volatile sig_atomic_t *stop; /* set (Ctrl-C): finish with what was found */
  /* Called after each candidate: tried, rejected (failed the gate, did not
   * build, timed out), skipped (invalid on the device), best score. */
  void (*progress)(void *user, size_t tried, size_t rejected, size_t skipped,
                   double best_gflops, const char *best);
  void *progress_user;
  const tune_hooks *hooks;
} tune_options;

/* Figures are in the op's unit (GFLOP/s for GEMM, hence the names). */
typedef struct tune_result {
  char default_params[KILN_TUNING_TEXT_CAPACITY];
  char best_params[KILN_TUNING_TEXT_CAPACITY];
  double default_gflops[TUNE_MAX_SIZES];
  double best_gflops[TUNE_MAX_SIZES];
  double default_score, best_score; /* geometric means over the sizes */
  size_t tried, rejected, skipped;
  /* Of the rejected: wrong results or a failed build or launch (the gate),
   * and too slow to finish (over 20 times the best). */
  size_t rejected_gate, rejected_slow;
  bool exhaustive, interrupted;
  char last_rejection[KILN_TUNING_TEXT_CAPACITY + 600];
} tune_result;

/* Tune GEMM's GPU-family space on ctx (whose kernel family must be the
 * GPU one: the caller checks), starting from the parameters in effect
 * (the default). The best candidate is left set for ctx's device
 * (kiln_tuning_set) and in *result; nothing is written. false with why[]
 * when the default itself fails the gate or cannot be timed. */
bool tune_gemm(kiln_context *ctx, kiln_queue *q, const tune_options *opts,
               tune_result *result, char *why, size_t why_size);
/* The same for any op of tune_ops.c (its kernel family must have a space on
 * ctx's device). */
bool tune_search(kiln_context *ctx, kiln_queue *q, const tune_op *op,
                 const tune_options *opts, tune_result *result, char *why,
                 size_t why_size);

#endif
