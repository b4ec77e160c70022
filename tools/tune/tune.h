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
#define TUNE_COMPILE_TIMEOUT 60.0
#define TUNE_RUN_TIMEOUT 20.0

/* Test hooks: after the gate's or the timing's GEMM of a candidate, hook
 * may change C (to inject a wrong candidate) and scale its measured time
 * (to make it look fastest); before a candidate's build (on a build
 * worker's thread), it may take its time (to make the build run past the
 * compile timeout). NULL in the tool. The other ops' gates (tune_ops.c)
 * call after_gemm on their output buffer too, count being its size in
 * 4-byte words. */
typedef struct tune_hooks {
  void (*after_gemm)(void *user, const char *params, kiln_queue *q,
                     kiln_buffer *c, size_t count);
  double (*time_scale)(void *user, const char *params);
  void *user;
  void (*before_build)(void *user, const char *params);
} tune_hooks;

/* ---- build workers (tune_pool.c) ----------------------------------------- */

typedef struct tune_pool tune_pool;
typedef struct tune_build tune_build;
typedef enum tune_build_result {
  TUNE_BUILD_OK,      /* built: the candidate's first launch finds it */
  TUNE_BUILD_FAILED,  /* the build failed (why) */
  TUNE_BUILD_TIMEOUT, /* it ran past the timeout and was given up on */
  TUNE_BUILD_DEADLINE /* the deadline came (or Ctrl-C) first: undecided */
} tune_build_result;

/* jobs threads that build op's candidates on ctx (kiln_tuning_build). NULL
 * when not even one can start. ctx cannot be destroyed while a worker
 * lives (KILN_ERR_BUSY): after tune_pool_destroy, workers leave once their
 * build, if any, returns. */
tune_pool *tune_pool_create(kiln_context *ctx, const char *op, unsigned jobs,
                            const tune_hooks *hooks);
/* Queue a build of params; NULL when out of memory. Valid until the pool
 * is destroyed. */
tune_build *tune_pool_submit(tune_pool *p, const char *params);
/* Wait for b: at most timeout_s from the moment a worker started it, and
 * never past deadline (or *stop). */
tune_build_result tune_build_wait(tune_pool *p, tune_build *b,
                                  double timeout_s, double deadline,
                                  volatile sig_atomic_t *stop, char *why,
                                  size_t why_size);
/* Drop queued builds; return once the idle workers have left. Builds
 * still running finish on their own, then their workers leave. */
void tune_pool_destroy(tune_pool *p);

/* ---- the gate (tune_gate.c) ---------------------------------------------- */

/* Run the GEMM with the parameters now set for ctx's device on awkward
 * shapes (1, primes, non-multiples of every tile, both layouts, transposes,
 * offsets, padded leading dimensions, f32 and bf16, beta over NaN, the
 * epilogue) and check every element against a float64 host reference
 * within the op's tolerance. false with why[] on a mismatch or a failure
 * (a kernel that does not build or launch), with *timed_out when a launch
 * ran past run_timeout_s (it still runs); false with why[] "" when the
 * deadline (0: none) came before the last shape. *seconds gets the gate's
 * run time. */
bool tune_gate(kiln_context *ctx, kiln_queue *q, const char *params,
               const tune_hooks *hooks, double run_timeout_s,
               double deadline, double *seconds, bool *timed_out, char *why,
               size_t why_size);

/* The gate of the matrix units (op gemm_mma): false with why[] when GEMM
 * does not run the matrix-unit kernel on ctx (kiln_tuning_info's used says
 * why), else tune_gate's checks on f16 and bf16 cases, within 8 times its
 * tolerance (tune_gate.c says why). */
bool tune_gate_mma(kiln_context *ctx, kiln_queue *q, const char *params,
                   const tune_hooks *hooks, double run_timeout_s,
                   double deadline, double *seconds, bool *timed_out,
                   char *why, size_t why_size);

/* Wait for ev, at most timeout_s: true when it completed; false when it
 * failed (kiln_last_error()) or, with *timed_out set, still runs (the
 * device stays busy with it). */
bool tune_wait(kiln_event *ev, double timeout_s, bool *timed_out);

/* Median-free quick timing: seconds of one m x n x k f32 GEMM (C = A B),
 * best of up to runs, stopping after the first run when that run already
 * takes more than stop_above seconds (0: never), and before a run that
 * would start past deadline (0: none; then the runs so far count, and none
 * gives 0). A failure gives < 0 (-2 when a launch ran past run_timeout_s,
 * and is still running). */
double tune_time_gemm(kiln_context *ctx, kiln_queue *q, size_t m, size_t n,
                      size_t k, int runs, double stop_above, double deadline,
                      double run_timeout_s, const tune_hooks *hooks,
                      const char *params);
/* The same with A and B of dtype (f32, f16 or bf16; C f32). */
double tune_time_gemm_dtype(kiln_context *ctx, kiln_queue *q,
                            kiln_dtype dtype, size_t m, size_t n, size_t k,
                            int runs, double stop_above, double deadline,
                            double run_timeout_s, const tune_hooks *hooks,
                            const char *params);

/* ---- the ops (tune_ops.c) ------------------------------------------------ */

/* An op kiln tune searches: its space, its gate, and how to time it. A size
 * is three numbers (m, n, k for GEMM; rows, cols for transpose; elements
 * first for the others). */
typedef struct tune_op {
  const char *name;    /* the space (kiln_tuning_get_knob), the file's op */
  const char *aliases; /* more --op names for it ("sum,dot,nrm2"), or "" */
  const char *timed;   /* what one timed run does, for people */
  const char *unit;    /* of the figures: "GFLOP/s", "GB/s" */
  const char *sizes;   /* --size's default for the op */
  size_t max_size;     /* the largest number a size may hold */
  unsigned dims;       /* numbers of a size that the op reads (1 to 3) */
  /* The gate: the op with the parameters now set on awkward shapes against
   * a float64 host reference, as tune_gate above (which is GEMM's): a
   * launch past run_timeout_s sets *timed_out, the deadline gives why "". */
  bool (*gate)(kiln_context *ctx, kiln_queue *q, const char *params,
               const tune_hooks *hooks, double run_timeout_s,
               double deadline, double *seconds, bool *timed_out, char *why,
               size_t why_size);
  /* Seconds of one run at size, as tune_time_gemm (0: the deadline came
   * first; -1: a failure; -2: a launch ran past run_timeout_s). */
  double (*time)(kiln_context *ctx, kiln_queue *q, const size_t *size,
                 int runs, double stop_above, double deadline,
                 double run_timeout_s, const tune_hooks *hooks,
                 const char *params);
  double (*work)(const size_t *size); /* FLOPs or bytes of one timed run */
  const char *family; /* "GPU" or "CPU": the kernel family of its space */
  /* The op's space on the other family's devices (kiln tune takes it when
   * the device runs the other family), or NULL when that family's kernels
   * have none. */
  const char *twin;
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
  /* Candidates built ahead on this many threads (0: 1); a build that runs
   * past compile_timeout_s, or a launch past run_timeout_s, rejects its
   * candidate (0: the defaults, TUNE_COMPILE_TIMEOUT and TUNE_RUN_TIMEOUT). */
  unsigned jobs;
  double compile_timeout_s, run_timeout_s;
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
   * too slow to finish (over 20 times the best), and a build or a launch
   * past its timeout. */
  size_t rejected_gate, rejected_slow, rejected_timeout;
  bool exhaustive, interrupted;
  /* The search's best was timed again against the default, alternately,
   * and was not faster: the default is kept (tune_search.c, confirm). */
  bool kept_default;
  /* A launch ran past the run timeout and still runs: the search stopped
   * there, and the device (its queue) stays busy until it ends. */
  bool stuck;
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
 * ctx's device). A best other than the default is timed again against it,
 * alternately, and kept only when faster (result->kept_default otherwise);
 * the figures are those of that check. */
bool tune_search(kiln_context *ctx, kiln_queue *q, const tune_op *op,
                 const tune_options *opts, tune_result *result, char *why,
                 size_t why_size);

#endif
