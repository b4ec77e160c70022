/* The ops kiln tune searches, in the order --list shows them: GEMM and its
 * matrix-unit twin (tune_op_gemm.c), the convolution (tune_op_conv.c), the
 * bandwidth-bound kernels with small spaces (transpose, the reductions,
 * elementwise: tune_op_small.c). The CPU family's GEMM and transpose run
 * the same ops, so the same gates and timings. */
#include "tune.h"

#include <string.h>

static const tune_op ops[] = {
    {"gemm", "", "f32 C = A B", "GFLOP/s", "512,1024", 16384, 3, tune_gate_gemm,
     tune_time_gemm, tune_work_gemm, "GPU", "gemm_cpu"},
    {"transpose", "", "f32 N x N transpose", "GB/s", "1024,2048", 32768, 2,
     tune_gate_transpose, tune_time_transpose, tune_work_transpose, "GPU",
     "transpose_cpu"},
    {"reduce", "sum,dot,nrm2", "f32 sum, dot and nrm2 of N", "GB/s",
     "4194304,16777216", 1u << 30, 1, tune_gate_reduce, tune_time_reduce,
     tune_work_reduce, "GPU", NULL},
    {"elementwise", "axpy,scale", "f32 axpy and scale of N", "GB/s",
     "4194304,16777216", 1u << 30, 1, tune_gate_elementwise,
     tune_time_elementwise, tune_work_elementwise, "GPU", NULL},
    {"gemm_mma", "", "bf16 C = A B on the matrix units (NVIDIA, AMD, Intel)",
     "GFLOP/s",
     "1024,4096", 16384, 3, tune_gate_mma, tune_time_gemm_mma, tune_work_gemm,
     "GPU", NULL},
    {"conv2d", "conv",
     "f32 NxCx28x28 3x3 convolution to K channels + ReLU, and its input "
     "gradient (NxCxK)",
     "GFLOP/s", "32x1x32,32x32x64", 4096, 3, tune_gate_conv, tune_time_conv,
     tune_work_conv, "GPU", NULL},
    /* 1024 and 2048: a point tuned at 512 and 1024 left 2048 at 0.97 of
     * OpenBLAS on PoCL, one tuned here 1.05, and no slower at 1024. */
    {"gemm_cpu", "", "f32 C = A B", "GFLOP/s", "1024,2048", 16384, 3,
     tune_gate_gemm, tune_time_gemm, tune_work_gemm, "CPU", "gemm"},
    {"transpose_cpu", "", "f32 N x N transpose", "GB/s", "1024,4096", 32768, 2,
     tune_gate_transpose, tune_time_transpose, tune_work_transpose, "CPU",
     "transpose"},
};

const tune_op *tune_op_at(size_t index) {
  return index < sizeof ops / sizeof ops[0] ? &ops[index] : NULL;
}

const tune_op *tune_op_find(const char *name) {
  const size_t len = strlen(name);
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    if (strcmp(ops[i].name, name) == 0)
      return &ops[i];
    for (const char *a = ops[i].aliases; *a;) {
      const size_t n = strcspn(a, ",");
      if (n == len && strncmp(a, name, n) == 0)
        return &ops[i];
      a += n + (a[n] == ',');
    }
  }
  return NULL;
}
