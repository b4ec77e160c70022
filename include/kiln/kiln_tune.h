/* Tuned kernel parameters: the parameter spaces of the ops that have one,
 * and the tuning files that `kiln tune` writes and every context reads.
 *
 * An op with a space ("gemm": the GPU-family GEMM kernel; "transpose",
 * "reduce" (every reduction) and "elementwise" (the maps, axpy, scale and
 * fill): the GPU-family kernels of those ops; "gemm_mma": the GPU family's
 * f16 and bf16 GEMM on the matrix units (NVIDIA, AMD, Intel), run only where
 * kiln_tuning_info's used says so; "gemm_cpu" and
 * "transpose_cpu": the CPU family's GEMM and transpose, which CPU-family
 * devices such as PoCL run) runs with the
 * parameters of, first that applies: kiln_tuning_set() in this process;
 * the device's tuning file (in the cache directory's tuning/ folder, keyed
 * by the device's stable id, its driver version and kiln's version), read
 * once per process at the first use on the device (an op, a query such as
 * kiln_tuning_get_info); the first row of kiln's
 * tuning database (shipped in the library) whose device name pattern
 * matches the device; the backend profile's row. KILN_TUNING=off ignores
 * the files, KILN_TUNING=PATH reads that file instead. A damaged, foreign
 * or stale file, a malformed database row, or parameters outside the space
 * or beyond the device, are ignored and never trusted;
 * kiln_tuning_get_info() says why. Parameters are text, "NAME=VALUE ..."
 * with every knob of the op's space. Every function here is thread-safe. */
#ifndef KILN_TUNE_H
#define KILN_TUNE_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include <signal.h>

#include "kiln/kiln_common.h"
#include "kiln/kiln_context.h"
#include "kiln/kiln_event.h"

KILN_BEGIN_DECLS

#define KILN_TUNING_TEXT_CAPACITY 1024
#define KILN_TUNING_PATH_CAPACITY 4096

/* One knob of an op's space. */
typedef struct kiln_tuning_knob {
  const char *name;    /* "MWG" (static storage) */
  const char *what;    /* one line for people (static storage) */
  size_t count;        /* values below */
  unsigned values[8];  /* the values a tuner tries, ascending */
} kiln_tuning_knob;

/* Knob index of op's space ("gemm", ...). KILN_ERR_NOT_FOUND for an op without
 * a space, KILN_ERR_OUT_OF_RANGE past the last knob (so a loop from 0 ends
 * there), KILN_ERR_NULL_POINTER. */
KILN_API kiln_status kiln_tuning_get_knob(const char *op, size_t index,
                                          kiln_tuning_knob *out);

/* Whether params, a point of op's space, runs on ctx's device: KILN_OK, or
 * KILN_ERR_INVALID_ARGUMENT (not a point of the space: unknown or missing
 * knob, value not in the space) or KILN_ERR_UNSUPPORTED (a rule of the
 * kernel or a limit of the device), with the reason in reason[size] (and
 * kiln_last_error()). reason may be NULL. */
KILN_API kiln_status kiln_tuning_check(const kiln_context *ctx, const char *op,
                                       const char *params, char *reason,
                                       size_t size);

/* Use params for op on ctx's device in this process (checked as
 * kiln_tuning_check does), ahead of any file; NULL returns to the file or
 * the profile. For tuners: the setting is per device, not per context. */
KILN_API kiln_status kiln_tuning_set(kiln_context *ctx, const char *op,
                                     const char *params);

/* Write op's params and figures (one line of free text: what was measured)
 * to the device's tuning file, or to path when not NULL (an export), after
 * checking them as kiln_tuning_check does; other ops' lines in the file are
 * kept. Atomic: readers see the old file or the new one. KILN_ERR_IO with
 * the reason when it cannot be written. */
KILN_API kiln_status kiln_tuning_save(kiln_context *ctx, const char *op,
                                      const char *params, const char *figures,
                                      const char *path);

/* Build (or find in ctx's memory or kiln's program cache) every program
 * that op runs with params on ctx's device, without running anything and
 * without changing the parameters in effect: a tuner compiles its next
 * candidates on other threads while it times one. params is checked as
 * kiln_tuning_check does. While a build runs, kiln_context_destroy(ctx)
 * fails with KILN_ERR_BUSY (a compiler cannot be stopped: a tuner that
 * gave up on a build leaves it to finish). */
KILN_API kiln_status kiln_tuning_build(kiln_context *ctx, const char *op,
                                       const char *params);

/* Remove the device's tuning file (or path); none is not an error. */
KILN_API kiln_status kiln_tuning_reset(kiln_context *ctx, const char *path);

typedef struct kiln_tuning_info {
  /* Where op's parameters come from now: "set", "file", "database",
   * "profile", or "profile (CPU family)" / "profile (GPU family)" when the
   * device runs the other family's kernels, which are not of op's space. */
  char source[32];
  /* In effect; "" when the device runs the other family's kernels. */
  char params[KILN_TUNING_TEXT_CAPACITY];
  /* The file's, else the database row's; "" when none. */
  char figures[KILN_TUNING_TEXT_CAPACITY];
  char path[KILN_TUNING_PATH_CAPACITY];    /* the file kiln reads, or "" */
  /* Why the file (or its line for op), or a database row, is ignored; ""
   * when nothing is. */
  char ignored[KILN_TUNING_TEXT_CAPACITY];
  /* The database row for op that matches the device, "PATTERN (kiln
   * VERSION)" (the kiln that measured it), or "" when none does. */
  char database[256];
  /* Whether ops run the space's kernels on the device, and why not: "" for
   * the spaces whose kernels always run on their family's devices;
   * "gemm_mma" (f16 and bf16 GEMM on NVIDIA's, AMD's and Intel's matrix
   * units) says "yes, ..." or "no: REASON" (not an NVIDIA, AMD or Intel GPU
   * of a known kind, the compile probe did not build,
   * no point has passed kiln tune's correctness gate, ...). */
  char used[512];
} kiln_tuning_info;

/* Fill *info for op on ctx. KILN_ERR_NOT_FOUND for an op without a space. */
KILN_API kiln_status kiln_tuning_get_info(const kiln_context *ctx,
                                          const char *op,
                                          kiln_tuning_info *info);

/* ---- the search -------------------------------------------------------------
 *
 * kiln_tuning_search() searches an op's space on a queue's device, the
 * engine that `kiln tune` drives: exhaustive when the searched space is
 * small, else seeded random points (half the budget) then local search from
 * the best (each knob one value up or down, a random restart when no
 * neighbour improves), within a wall-clock budget. Every candidate is first
 * checked for the device (kiln_tuning_check: skipped when it cannot run
 * there), its programs are built ahead on build threads
 * (kiln_tuning_build), then it must pass the caller's correctness gate and
 * is timed by the caller's timing at every size. The library knows no op's
 * correctness: the gate and the timing are the caller's (kiln tune's are in
 * tools/tune/). It prints nothing; progress goes to a callback. */

#define KILN_TUNING_MAX_SIZES 8

/* What a gate or a timing came to. */
typedef enum kiln_tuning_verdict {
  KILN_TUNING_PASS = 0,    /* gate: every check passed; timing: a figure */
  KILN_TUNING_FAIL = 1,    /* a wrong result, a failed build or launch */
  KILN_TUNING_RUN_TIMEOUT = 2, /* a launch ran past run_timeout_s and still
                                * runs: the search stops there */
  KILN_TUNING_DEADLINE = 3 /* the deadline came first: no verdict */
} kiln_tuning_verdict;

/* The op's correctness gate, run with params set for the queue's device
 * (kiln_tuning_set): the op on awkward shapes against a reference. A launch
 * that runs past run_timeout_s gives KILN_TUNING_RUN_TIMEOUT; deadline_s
 * (seconds of CLOCK_MONOTONIC, clock_gettime; 0: none) gives
 * KILN_TUNING_DEADLINE when it comes before the last check. why[why_size]
 * says what failed. */
typedef kiln_tuning_verdict (*kiln_tuning_gate_fn)(
    void *user, kiln_queue *queue, const char *params, double run_timeout_s,
    double deadline_s, char *why, size_t why_size);

/* The op's timing at size (the three numbers of options.sizes[i]): after a
 * warm-up, the best of runs runs in *seconds, stopping after a run slower
 * than stop_above_s (0: never); deadline_s and run_timeout_s as the gate's
 * (KILN_TUNING_DEADLINE: no figure). */
typedef kiln_tuning_verdict (*kiln_tuning_time_fn)(
    void *user, kiln_queue *queue, const char *params, const size_t *size,
    int runs, double stop_above_s, double deadline_s, double run_timeout_s,
    double *seconds, char *why, size_t why_size);

/* Zero-initialise, then set what you need: a zero field is its default. */
typedef struct kiln_tuning_search_options {
  /* The sizes the timing is given, 1 to KILN_TUNING_MAX_SIZES, and the
   * work of one timed run at each (FLOPs, bytes): a candidate's figure at
   * size i is work[i] / seconds / 1e9 (GFLOP/s, GB/s) and its score the
   * geometric mean of its figures. */
  size_t sizes[KILN_TUNING_MAX_SIZES][3];
  double work[KILN_TUNING_MAX_SIZES];
  size_t size_count;
  double budget_s; /* wall-clock seconds for the search, > 0 */
  uint64_t seed;   /* of the random points; 0: 1 */
  /* Exhaustive when the searched space has at most this many points; 0:
   * 256. */
  size_t exhaustive_max;
  /* Knobs the search may change (kiln_tuning_get_knob's names); the others
   * keep the default's value. knob_count 0: every knob. */
  const char *const *knobs;
  size_t knob_count;
  /* Candidates built ahead on this many threads; 0: 1. */
  unsigned jobs;
  /* A build past compile_timeout_s or a launch past run_timeout_s rejects
   * its candidate; 0: 60 and 20 seconds. A build cannot be stopped: it is
   * left to finish (kiln_tuning_build). */
  double compile_timeout_s, run_timeout_s;
  /* When *stop becomes non-zero (a signal handler), the search ends with
   * what it found. May be NULL. */
  const volatile sig_atomic_t *stop;
  kiln_tuning_gate_fn gate; /* required */
  kiln_tuning_time_fn time; /* required */
  /* Called on the calling thread after each candidate; may be NULL. */
  void (*progress)(void *user, size_t tried, size_t rejected, size_t skipped,
                   double best_score, const char *best_params);
  /* For tests: called on a build thread before a candidate's build. */
  void (*before_build)(void *user, const char *params);
  void *user; /* given to gate, time, progress and before_build */
} kiln_tuning_search_options;

typedef struct kiln_tuning_result {
  /* The parameters in effect before the search (its start), and the best
   * found (the default when nothing beat it). */
  char default_params[KILN_TUNING_TEXT_CAPACITY];
  char best_params[KILN_TUNING_TEXT_CAPACITY];
  /* Per size (work / seconds / 1e9), and their geometric means. */
  double default_figures[KILN_TUNING_MAX_SIZES];
  double best_figures[KILN_TUNING_MAX_SIZES];
  double default_score, best_score;
  size_t tried, rejected, skipped; /* skipped: cannot run on the device */
  /* Of the rejected: by the gate (or a failed build), too slow to finish
   * (a failed timing, or over 20 times the best), past a timeout. */
  size_t rejected_gate, rejected_slow, rejected_timeout;
  bool exhaustive, interrupted;
  /* A best other than the default is timed again against it, alternately,
   * at every size, and kept only when faster: false, the default is kept
   * and the figures are those of that check. */
  bool kept_default;
  /* A launch ran past the run timeout and still runs: the search stopped
   * there, and the queue stays busy until it ends. */
  bool stuck;
  char last_rejection[KILN_TUNING_TEXT_CAPACITY + 600]; /* params: why */
} kiln_tuning_result;

/* Search op's space on queue's device, starting from the parameters in
 * effect (the default, which must pass the gate), and leave the best set
 * for the device (kiln_tuning_set) and in *result; nothing is written to a
 * file (kiln_tuning_save does that). The host waits for wait_list first;
 * *out_event (may be NULL) completes with the search's last command: at
 * once, or, when result->stuck, once the launch still running has ended.
 * The context must not be destroyed meanwhile; a build given up on keeps
 * it busy (KILN_ERR_BUSY) until it returns. Statuses:
 * KILN_ERR_NULL_POINTER (queue, op, options, result, options->gate or
 * ->time, knobs), KILN_ERR_NOT_FOUND (an op without a space, an unknown
 * knob), KILN_ERR_UNSUPPORTED (the device runs the other kernel family,
 * whose kernels are not of op's space), KILN_ERR_INVALID_SIZE (size_count
 * 0 or past KILN_TUNING_MAX_SIZES, a size with a 0), KILN_ERR_INVALID_ARGUMENT
 * (budget_s, a timeout or a work not a positive number),
 * KILN_ERR_EXEC_FAILED (the default fails the gate or its timing: *result
 * holds what is known, result->stuck when a launch ran past the timeout),
 * KILN_ERR_OUT_OF_HOST_MEMORY (no build thread could start). Not
 * thread-safe with other uses of queue; other threads may use other queues
 * of the context, but their ops run with the candidate of the moment. */
KILN_API kiln_status kiln_tuning_search(
    kiln_queue *queue, const char *op,
    const kiln_tuning_search_options *options, kiln_tuning_result *result,
    size_t num_wait, kiln_event *const *wait_list, kiln_event **out_event);

KILN_END_DECLS

#endif
