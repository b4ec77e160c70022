/* Tuning files (ops_tuning.c), for the op modules that have a space. */
#ifndef KILN_OPS_TUNING_H
#define KILN_OPS_TUNING_H

#include "ops_internal.h"

/* op's parameters for ctx's device: kiln_tuning_set's (*from_set true),
 * else the tuning file's; false when neither. The text is not validated:
 * the caller checks it against its space and calls kiln__tuning_reject when
 * it fails, which drops the file's line and records the reason. */
bool kiln__tuning_params(const kiln_context *ctx, const char *op,
                         char *params, size_t size, bool *from_set);
void kiln__tuning_reject(const kiln_context *ctx, const char *op,
                         const char *reason);
/* Record (params) or clear (NULL) kiln_tuning_set's parameters. */
kiln_status kiln__tuning_set(const kiln_context *ctx, const char *op,
                             const char *params);
/* The file's path, why it is ignored, and op's figures, into info. */
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
 * next use reads the files again (tests, after changing KILN_TUNING or a
 * file behind kiln's back). */
void kiln__tuning_forget(void);

#endif
