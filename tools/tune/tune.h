/* kiln tune: the ops it knows (the table in tune_ops.c), their correctness
 * gates and timings (tune_op_gemm.c, tune_op_conv.c, tune_op_small.c, and
 * what they share in tune_shared.c), and their binding to the library's
 * search (tune_bind.c: kiln_tuning_search, kiln/kiln_tune.h, which holds
 * the engine); shared by the subcommand (cmd_tune.c) and the gates' tests
 * (tests/test_tune_gate.c, test_tune_spaces.c). Public kiln API only. */
#ifndef KILN_TOOLS_TUNE_H
#define KILN_TOOLS_TUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kiln/kiln.h>

#define TUNE_COMPILE_TIMEOUT 60.0
#define TUNE_RUN_TIMEOUT 20.0
/* A timed run repeats the op until this many seconds have passed and
 * counts the mean: one run of a small size (a 1024^2 transpose on PoCL,
 * 0.3 ms) swung by 2x on a shared machine, enough for the check against
 * the default to keep the default over a point 1.8 times faster at the
 * other size. */
#define TUNE_MIN_RUN_SECONDS 0.02

/* Test hooks: after the gate's or the timing's op of a candidate,
 * after_gemm may change its output (to inject a wrong candidate; count is
 * the output's size in 4-byte words) and time_scale scale its measured time
 * (to make it look fastest); before a candidate's build (on a build
 * worker's thread), before_build may take its time (to make the build run
 * past the compile timeout). NULL in the tool. */
typedef struct tune_hooks {
  void (*after_gemm)(void *user, const char *params, kiln_queue *q,
                     kiln_buffer *c, size_t count);
  double (*time_scale)(void *user, const char *params);
  void *user;
  void (*before_build)(void *user, const char *params);
} tune_hooks;

/* ---- the ops (tune_ops.c) ------------------------------------------------ */

/* An op's gate: the op with the parameters now set on awkward shapes
 * against a float64 host reference. false with why[] on a mismatch or a
 * failure (a kernel that does not build or launch), with *timed_out when a
 * launch ran past run_timeout_s (it still runs); false with why[] "" when
 * the deadline (tools_now() seconds; 0: none) came before the last case.
 * *seconds gets the gate's run time. */
typedef bool (*tune_gate_fn)(kiln_context *ctx, kiln_queue *q,
                             const char *params, const tune_hooks *hooks,
                             double run_timeout_s, double deadline,
                             double *seconds, bool *timed_out, char *why,
                             size_t why_size);
/* Seconds of one run at size (one op; a run repeats it for at least
 * TUNE_MIN_RUN_SECONDS and gives the mean): a warm-up, then the best of
 * runs, stopping
 * after the first run that takes more than stop_above seconds (0: never),
 * and before a run that would start past deadline (0: none; then the runs
 * so far count, and none gives 0). A failure gives -1 (kiln_last_error()
 * says why), a launch past run_timeout_s -2 (it is still running). */
typedef double (*tune_time_fn)(kiln_context *ctx, kiln_queue *q,
                               const size_t *size, int runs,
                               double stop_above, double deadline,
                               double run_timeout_s, const tune_hooks *hooks,
                               const char *params);

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
  tune_gate_fn gate;
  tune_time_fn time;
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

/* The gates and timings of the table (tune_op_*.c). */
bool tune_gate_gemm(kiln_context *ctx, kiln_queue *q, const char *params,
                    const tune_hooks *hooks, double run_timeout_s,
                    double deadline, double *seconds, bool *timed_out,
                    char *why, size_t why_size);
/* The gate of the matrix units (op gemm_mma): false with why[] when GEMM
 * does not run the matrix-unit kernel on ctx (kiln_tuning_info's used says
 * why), else GEMM's checks on f16 and bf16 cases, within 8 times its
 * tolerance (tune_op_gemm.c says why). */
bool tune_gate_mma(kiln_context *ctx, kiln_queue *q, const char *params,
                   const tune_hooks *hooks, double run_timeout_s,
                   double deadline, double *seconds, bool *timed_out,
                   char *why, size_t why_size);
bool tune_gate_conv(kiln_context *ctx, kiln_queue *q, const char *params,
                    const tune_hooks *hooks, double run_timeout_s,
                    double deadline, double *seconds, bool *timed_out,
                    char *why, size_t why_size);
bool tune_gate_transpose(kiln_context *ctx, kiln_queue *q, const char *params,
                         const tune_hooks *hooks, double run_timeout_s,
                         double deadline, double *seconds, bool *timed_out,
                         char *why, size_t why_size);
bool tune_gate_reduce(kiln_context *ctx, kiln_queue *q, const char *params,
                      const tune_hooks *hooks, double run_timeout_s,
                      double deadline, double *seconds, bool *timed_out,
                      char *why, size_t why_size);
bool tune_gate_elementwise(kiln_context *ctx, kiln_queue *q,
                           const char *params, const tune_hooks *hooks,
                           double run_timeout_s, double deadline,
                           double *seconds, bool *timed_out, char *why,
                           size_t why_size);
double tune_time_gemm(kiln_context *ctx, kiln_queue *q, const size_t *size,
                      int runs, double stop_above, double deadline,
                      double run_timeout_s, const tune_hooks *hooks,
                      const char *params);
double tune_time_gemm_mma(kiln_context *ctx, kiln_queue *q,
                          const size_t *size, int runs, double stop_above,
                          double deadline, double run_timeout_s,
                          const tune_hooks *hooks, const char *params);
double tune_time_conv(kiln_context *ctx, kiln_queue *q, const size_t *size,
                      int runs, double stop_above, double deadline,
                      double run_timeout_s, const tune_hooks *hooks,
                      const char *params);
double tune_time_transpose(kiln_context *ctx, kiln_queue *q,
                           const size_t *size, int runs, double stop_above,
                           double deadline, double run_timeout_s,
                           const tune_hooks *hooks, const char *params);
double tune_time_reduce(kiln_context *ctx, kiln_queue *q, const size_t *size,
                        int runs, double stop_above, double deadline,
                        double run_timeout_s, const tune_hooks *hooks,
                        const char *params);
double tune_time_elementwise(kiln_context *ctx, kiln_queue *q,
                             const size_t *size, int runs, double stop_above,
                             double deadline, double run_timeout_s,
                             const tune_hooks *hooks, const char *params);
double tune_work_gemm(const size_t *size);
double tune_work_conv(const size_t *size);
double tune_work_transpose(const size_t *size);
double tune_work_reduce(const size_t *size);
double tune_work_elementwise(const size_t *size);

/* ---- what the gates and timings share (tune_shared.c) -------------------- */

/* What a gate gives each of its cases. */
typedef struct tune_case_env {
  kiln_context *ctx;
  kiln_queue *q;
  const char *params;
  const tune_hooks *hooks;
  double run_timeout_s;
  bool *timed_out;
  char *why;
  size_t why_size;
} tune_case_env;

/* A gate's frame: *timed_out cleared, then run(env, case) on each of count
 * cases (stride bytes apart) in order until one fails, the deadline
 * checked before each (why "" when it came, as tune_gate_fn says);
 * *seconds the gate's run time. */
bool tune_run_cases(const tune_case_env *env, const void *cases,
                    size_t count, size_t stride,
                    bool (*run)(const tune_case_env *env, const void *c),
                    double deadline, double *seconds);

/* The deadline (0: none) has come: the gate's "" why. */
bool tune_past(double deadline, char *why);

/* Wait for ev, at most timeout_s: true when it completed; false when it
 * failed (kiln_last_error()) or, with *timed_out set, still runs (the
 * device stays busy with it). */
bool tune_wait(kiln_event *ev, double timeout_s, bool *timed_out);
/* Wait for everything enqueued on q, as tune_wait: false with why on a
 * failure, or with *timed_out when it still runs. */
bool tune_finish(kiln_queue *q, double run_timeout_s, bool *timed_out,
                 char *why, size_t size);
/* The test hook (tune_hooks.after_gemm) on an op's output buffer of
 * bytes. */
void tune_hook(const tune_hooks *hooks, const char *params, kiln_queue *q,
               kiln_buffer *out, size_t bytes);

/* The timings' frame: run(q, arg) once to warm up, then up to runs times,
 * each waited for (at most run_timeout_s), as tune_time_fn says. */
double tune_time_loop(kiln_queue *q, kiln_status (*run)(kiln_queue *q,
                                                        void *arg),
                      void *arg, int runs, double stop_above, double deadline,
                      double run_timeout_s, const tune_hooks *hooks,
                      const char *params);

/* tune_time_loop on an op over two f32 buffers a and b of elements (filled
 * with 1) and a 16-byte c: run(q, size, a, b, c) is one timed run. */
typedef kiln_status (*tune_f32_run_fn)(kiln_queue *q, const size_t *size,
                                       kiln_buffer *a, kiln_buffer *b,
                                       kiln_buffer *c);
double tune_time_f32(kiln_context *ctx, kiln_queue *q, const size_t *size,
                     size_t elements, tune_f32_run_fn run, int runs,
                     double stop_above, double deadline, double run_timeout_s,
                     const tune_hooks *hooks, const char *params);

/* Host data in any float storage format. float_types: f32, f16, bf16. */
extern const kiln_dtype tune_float_types[3];
uint32_t tune_lcg(uint32_t *s);
/* Element i of buf as a double; v (exact in dt) stored as element i. */
double tune_get(kiln_dtype dt, const void *buf, size_t i);
void tune_put(kiln_dtype dt, void *buf, size_t i, float v);
/* count random elements of dt in [-2, 2) exact in dt (f16: multiples of
 * 2^-10; bf16: f32 cut to 16 bits), and a device buffer holding them;
 * NULL (and *out NULL) on a failure. */
void *tune_random_data(kiln_context *ctx, kiln_queue *q, kiln_dtype dt,
                       size_t count, uint32_t seed, kiln_buffer **out);
/* The device range's contents, or NULL (why set). */
void *tune_download(kiln_queue *q, const kiln_range *src, char *why,
                    size_t size);

/* ---- the binding to the library's search (tune_bind.c) ------------------- */

/* What op's gate and timing need beside the search's arguments. */
typedef struct tune_binding {
  const tune_op *op;
  const tune_hooks *hooks; /* may be NULL */
  /* The search's progress (kiln_tuning_search_options.progress), with its
   * own user; NULL for none. */
  void (*progress)(void *user, size_t tried, size_t rejected, size_t skipped,
                   double best_score, const char *best_params);
  void *progress_user;
} tune_binding;

/* Fill o's gate, time, progress, before_build and user (b, which must
 * outlive the search) for b's op, and work[] for the sizes already in o. */
void tune_bind(tune_binding *b, kiln_tuning_search_options *o);

#endif
