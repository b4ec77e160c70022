/* run_ops.c's groups "transpose", "gemm", "gemm_space" and "gemm_mma"
 * (run_ops_gemm.c). */
#ifndef KILN_RUN_OPS_GEMM_H
#define KILN_RUN_OPS_GEMM_H

#include "run_ops_util.h"

/* kiln_transpose of a rows x cols matrix of dt with padded leading
 * dimensions, bit for bit. */
void run_transpose(kiln_dtype dt, size_t rows, size_t cols);
/* The group "gemm": kiln_matmul over layouts, transposes, dtypes, batches,
 * k = 0, the CPU family's unpacked kernel and a packed A. */
void run_gemm_group(void);
/* Samples of the GPU family's GEMM space (skipped on the CPU family). */
void run_gemm_space(void);
/* The matrix-unit GEMM with its instructions emulated (GPU family only). */
void run_gemm_mma(void);

#endif
