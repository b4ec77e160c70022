/* Internal knobs of the GEMM module (ops_gemm.c), for the test suite. */
#ifndef KILN_OPS_GEMM_H
#define KILN_OPS_GEMM_H

#include <stddef.h>

/* The most workspace one GEMM call asks of its queue, in bytes (default
 * 64 MiB, documented in kiln/ops.h); 0 restores the default. Tests lower it
 * to exercise the chunking of k and of the batch with small matrices. A
 * process-wide setting, so only for tests, set before any GEMM runs. */
void kiln__gemm_set_workspace_limit(size_t bytes);

/* Force the CPU family's register tile (rows mr 1..8, columns nr = vw or
 * 2 vw, vector width vw 4, 8 or 16) and k block kc; 0 leaves a value to
 * the profile and the device. Lets the tests run the tiles of devices they
 * do not have (AVX-512's 8 x 32, SSE's 6 x 8, 1-vector rows). Process-wide,
 * like the workspace limit: tests only. */
void kiln__gemm_set_cpu_tile(unsigned mr, unsigned nr, unsigned vw,
                             unsigned kc);

#endif
