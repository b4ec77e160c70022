/* The op checks of `kiln demo` (demo_ops.c), built once the op library is. */
#ifndef KILN_TOOLS_DEMO_H
#define KILN_TOOLS_DEMO_H

#include <stdbool.h>

#include "kiln/kiln.h"

/* Run a sum and a small GEMM on queue, check them against the host, print
 * one line each; true when both pass. */
bool kiln_demo_ops(kiln_context *ctx, kiln_queue *queue);

#endif
