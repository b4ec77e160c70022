/* Internal knobs of the GEMM module (ops_gemm.c), for the test suite. */
#ifndef KILN_OPS_GEMM_H
#define KILN_OPS_GEMM_H

#include <stddef.h>

/* The most workspace one GEMM call asks of its queue, in bytes (default
 * 64 MiB, documented in kiln/ops.h); 0 restores the default. Tests lower it
 * to exercise the chunking of k and of the batch with small matrices. A
 * process-wide setting, so only for tests, set before any GEMM runs. */
void kiln__gemm_set_workspace_limit(size_t bytes);

#endif
