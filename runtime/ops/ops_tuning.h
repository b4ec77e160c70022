/* Tuning files (ops_tuning.c) and kiln's tuning database (ops_tuning_db.c)
 * for the op modules that have a parameter space, and the table of those
 * spaces (ops_tune_api.c). */
#ifndef KILN_OPS_TUNING_H
#define KILN_OPS_TUNING_H

#include "ops_internal.h"

/* ---- an op's space, as the tuning API sees it ----------------------------- */

struct kiln__space; /* ops_space.h */

/* What an op module with a parameter space gives the tuning API
 * (kiln/kiln_tune.h). To add an op: define one of these in its module,
 * declare it below and list it in ops_tune_api.c's table; the module asks
 * kiln__tuning_lookup for its parameters and validates them itself. The
 * small spaces (ops_space.h) share one set of callbacks (ops_space.c),
 * hence the self pointer each callback gets. */
struct kiln__tuning_space {
  const char *op;      /* "gemm" */
  const char *summary; /* one line: which kernel the space is of */
  size_t knobs;
  /* A small space's data (ops_space.h); NULL for GEMM's own. */
  const struct kiln__space *small;
  /* Knob index (< knobs) into *out. */
  void (*knob)(const struct kiln__tuning_space *self, size_t index,
               kiln_tuning_knob *out);
  /* Whether params is a point of the space (else KILN_ERR_INVALID_ARGUMENT)
   * that ctx's device runs (else KILN_ERR_UNSUPPORTED), with the reason in
   * why (no kiln__fail: the caller words the error). */
  kiln_status (*check)(const struct kiln__tuning_space *self,
                       const kiln_context *ctx, const char *params, char *why,
                       size_t why_size);
  /* The parameters ops use on ctx now, and their source (a static string:
   * "set", "file", "database", "profile" or "test override"); params ""
   * when ctx's kernel family runs a kernel without this space. */
  kiln_status (*in_effect)(const struct kiln__tuning_space *self,
                           const kiln_context *ctx, char *params,
                           size_t size, const char **source);
  /* Build (or find in ctx's memo or the persistent cache) every program
   * that params runs, without running anything. params is checked. */
  kiln_status (*build)(const struct kiln__tuning_space *self,
                       kiln_context *ctx, const char *params);
};

extern const struct kiln__tuning_space kiln__gemm_tuning_space;
/* The small spaces (ops_space.h) of ops_transpose.c, ops_reduce.c and
 * ops_elementwise.c. */
extern const struct kiln__tuning_space kiln__transpose_tuning_space;
extern const struct kiln__tuning_space kiln__reduce_tuning_space;
extern const struct kiln__tuning_space kiln__elementwise_tuning_space;

/* ---- parameters in effect -------------------------------------------------- */

/* One op's parameters from a tuning file or a database row. */
struct kiln__tuning_line {
  char name[32];
  char params[KILN_TUNING_TEXT_CAPACITY];
  char figures[KILN_TUNING_TEXT_CAPACITY];
  char origin[200]; /* a database row's "PATTERN (kiln VERSION)" */
};

/* op's parameters for ctx's device, first that applies: kiln_tuning_set's
 * ("set"), the device's tuning file ("file"), the first matching row of
 * kiln's tuning database ("database"); false when none. The text is not
 * validated: the caller checks it against its space and calls
 * kiln__tuning_reject when it fails, which drops that source for the
 * process and records the reason. */
bool kiln__tuning_lookup(const kiln_context *ctx, const char *op,
                         char *params, size_t size, const char **source);
void kiln__tuning_reject(const kiln_context *ctx, const char *op,
                         const char *reason);
/* Record (params) or clear (NULL) kiln_tuning_set's parameters. */
kiln_status kiln__tuning_set(const kiln_context *ctx, const char *op,
                             const char *params);
/* The file's path, why it or a database row is ignored, op's figures and
 * its database row, into info. */
void kiln__tuning_file_info(const kiln_context *ctx, const char *op,
                            kiln_tuning_info *info);
/* Write op's line (keeping the file's other ops) to path, or to the
 * device's file when path is NULL, atomically; then reread the file. fn
 * names the caller in errors. */
kiln_status kiln__tuning_write(const char *fn, const kiln_context *ctx,
                               const char *op, const char *params,
                               const char *figures, const char *path);
/* Remove path, or the device's file; a missing file is not an error. */
kiln_status kiln__tuning_remove(const char *fn, const kiln_context *ctx,
                                const char *path);

/* Forget every device's file and kiln_tuning_set's parameters, so that the
 * next context or use reads the files again (tests, after changing
 * KILN_TUNING or a file behind kiln's back). */
void kiln__tuning_forget(void);

/* ---- kiln's tuning database (ops_tuning_db.c) ------------------------------ */

/* The rows matching the device called device_name, the first per op, into
 * rows[max]; returns how many. why gets the first malformed row's reason
 * ("" when every row is well formed). */
size_t kiln__tuning_db_match(const char *device_name,
                             struct kiln__tuning_line *rows, size_t max,
                             char *why, size_t why_size);
/* Tests: read text instead of the shipped database (NULL: the shipped one
 * again); text must outlive its use. Call kiln__tuning_forget after. */
void kiln__tuning_db_use(const char *text);

#endif
