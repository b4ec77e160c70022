/* Tuned kernel parameters: the parameter spaces of the ops that have one,
 * and the tuning files that `kiln tune` writes and every context reads.
 *
 * An op with a space ("gemm": the GPU-family GEMM kernel; "transpose",
 * "reduce" (every reduction) and "elementwise" (the maps, axpy, scale and
 * fill): the GPU-family kernels of those ops; "gemm_mma": the GPU family's
 * f16 and bf16 GEMM on NVIDIA's matrix units, run only where
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

#include "kiln/kiln_common.h"
#include "kiln/kiln_context.h"

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
   * "gemm_mma" (NVIDIA's matrix units, f16 and bf16 GEMM) says "yes, ..."
   * or "no: REASON" (not an NVIDIA device, the compile probe did not build,
   * no point has passed kiln tune's correctness gate, ...). */
  char used[512];
} kiln_tuning_info;

/* Fill *info for op on ctx. KILN_ERR_NOT_FOUND for an op without a space. */
KILN_API kiln_status kiln_tuning_get_info(const kiln_context *ctx,
                                          const char *op,
                                          kiln_tuning_info *info);

KILN_END_DECLS

#endif
