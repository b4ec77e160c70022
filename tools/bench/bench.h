/* `kiln bench` internals shared by cmd_bench.c (options, table, JSON),
 * bench_peaks.c (the device's measured peaks, cached), bench_ops.c and
 * bench_extra.c (one runner per op) and bench_clock.c (timing). Everything goes through kiln's public API (plus
 * kiln/kiln_cl.h for the raw-OpenCL launch comparison). */
#ifndef KILN_TOOLS_BENCH_H
#define KILN_TOOLS_BENCH_H

#include <stdbool.h>
#include <stddef.h>

#include "commands.h"
#include "kiln/kiln.h"

/* What every runner gets. */
struct bench_env {
  kiln_context *ctx;
  kiln_queue *queue;
  const kiln_device_info *info;
  int runs; /* timed runs after one warm-up (>= 5) */
  bool verify;
};

/* One line of output. rate is GFLOP/s when flops is true, else GB/s. */
struct bench_result {
  char op[24];
  const char *dtype;
  unsigned ndim;
  size_t shape[3];
  double median_s;
  double rate;
  bool flops;
  bool verified; /* checked against a host reference in this run */
  bool failed;   /* the op failed or its check did not pass: see note */
  char note[160];
  /* The launch benchmark: microseconds per launch, kiln's op and the bare
   * clEnqueueNDRangeKernel of an equivalent kernel. */
  bool is_launch;
  double kiln_us, raw_us;
  /* The data-movement benchmarks (bench_mem.c): named times per item, the
   * last the baseline the others are compared with; GB/s shown when
   * col_bytes > 0; pairs: cols come as (kiln, baseline) pairs instead. */
  unsigned num_cols;
  struct {
    const char *name;
    double s;
  } cols[6];
  double col_bytes;
  bool pairs;
};

/* A runner: run the op at shape, fill *r (op, dtype and shape are already
 * set). Returns false on failure with r->note saying why. */
typedef bool (*bench_fn)(const struct bench_env *env, struct bench_result *r);

struct bench_op {
  const char *name;
  const char *dtype;
  const char *shape_help; /* what a --size token means for this op */
  unsigned ndim;          /* 1 vector, 2 matrix, 3 GEMM m x n x k */
  size_t defaults[4][3];  /* standard sizes; a zero row ends the list */
#define BENCH_MAX_DEFAULTS 4
  bench_fn run;
};

/* Runners in bench_extra.c: the launch cost, and the row ops (r->op names
 * which). */
bool bench_run_launch(const struct bench_env *env, struct bench_result *r);
bool bench_run_rows(const struct bench_env *env, struct bench_result *r);

/* Runners in bench_mem.c: the pool, transfers, recorded sequences. */
bool bench_run_pool(const struct bench_env *env, struct bench_result *r);
bool bench_run_h2d(const struct bench_env *env, struct bench_result *r);
bool bench_run_d2h(const struct bench_env *env, struct bench_result *r);
bool bench_run_sequence(const struct bench_env *env, struct bench_result *r);
bool bench_run_pipeline(const struct bench_env *env, struct bench_result *r);

/* Every op, in the default order. */
const struct bench_op *bench_ops(size_t *count);

/* The device's measured peaks, from the cache under kiln's cache directory
 * (keyed by the device's stable id and driver version) or measured now
 * with small kiln kernels and then cached. */
struct bench_peaks {
  double gbps;     /* best of a copy and a triad kernel */
  double gflops;   /* an fma chain kernel */
  bool cached;     /* read from the cache file */
  char path[4200]; /* the cache file ("" when the cache is unusable) */
};
bool bench_peaks_get(kiln_context *ctx, kiln_queue *queue, bool remeasure,
                     struct bench_peaks *out, char *err, size_t err_size);

/* ---- bench_clock.c ---- */

/* Sort count samples in ascending order. */
void bench_sort(double *t, size_t count);

/* Median of the timed runs of op(arg) (each: enqueue, then finish the
 * queue), after one warm-up run. Returns a negative value when op fails;
 * kiln_last_error() then says why. */
double bench_time(const struct bench_env *env, kiln_status (*op)(void *arg),
                  void *arg);

#endif
