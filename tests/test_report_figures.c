/* kiln report's parsers on the outputs it cannot produce here: a
 * kiln-compare-cublas table (no GPU on CI) and a GPT-2 run cut short at
 * its time limit (no summary line). The figure names are the ones the
 * speed targets look up (tools/report/report_write.c). */
#define _GNU_SOURCE
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report.h"

static int failures;

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "FAIL: %s\n", what);
    failures++;
  }
}

/* A step whose log (stdout and stderr together) holds text. */
static void parse(step *s, const char *kind, const char *text) {
  memset(s, 0, sizeof *s);
  snprintf(s->log, sizeof s->log, "/tmp/kiln-test-report-XXXXXX");
  const int fd = mkstemp(s->log);
  check(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text),
        "write the log");
  if (fd >= 0)
    close(fd);
  s->status = STEP_OK;
  report_parse_figures(s, kind);
  unlink(s->log);
}

static double value(const step *s, const char *name) {
  size_t i;
  json_t *f;
  json_array_foreach(s->figures, i, f) {
    if (strcmp(json_string_value(json_object_get(f, "name")), name) == 0)
      return json_number_value(json_object_get(f, "value"));
  }
  fprintf(stderr, "no figure '%s'\n", name);
  return NAN;
}

int main(void) {
  step s;
  parse(&s, "cublas",
        "kiln on NVIDIA H100 80GB HBM3 (profile nvidia); cuBLAS on CUDA "
        "device 0 (CUBLAS_DEFAULT_MATH, NVIDIA_TF32_OVERRIDE=0)\n"
        "op             size         kiln    reference    ratio\n"
        "sgemm          4096    41.2 TF/s    45.7 TF/s     0.90  err 3.1e-07\n"
        "gemm_bf16      8192   401.5 TF/s   760.0 TF/s     0.53  err 2.0e-06"
        " WRONG\n"
        "sum        67108864    2500 GB/s    2900 GB/s     0.86\n");
  check(value(&s, "sgemm 4096 kiln") == 41.2, "sgemm kiln");
  check(value(&s, "sgemm 4096 cuBLAS SGEMM (TF32 off)") == 45.7,
        "sgemm cuBLAS");
  check(value(&s, "sgemm 4096 kiln/reference") == 0.90, "sgemm ratio");
  check(value(&s, "sgemm 4096 error against cuBLAS") == 3.1e-07, "sgemm err");
  check(value(&s, "gemm_bf16 8192 cuBLAS GemmEx (compute 32F)") == 760.0,
        "bf16 cuBLAS");
  check(value(&s, "gemm_bf16 8192 kiln/reference") == 0.53, "bf16 ratio");
  check(value(&s, "sum 67108864 cudaMemcpy") == 2900, "sum copy");
  check(json_array_size(s.figures) == 4 + 4 + 3, "figure count");
  step_free(&s);

  parse(&s, "gpt",
        "train_gpt: NVIDIA H100, bf16, GPT-2 L 12 ...\n"
        "step 1/6: loss 10.9, lr 3e-05, 9000.0 ms, 455 tokens/s\n"
        "step 2/6: loss 10.8, lr 6e-05, 300.0 ms, 13653 tokens/s\n"
        "step 3/6: loss 10.7, lr 9e-05, 310.0 ms, 13212 tokens/s\n");
  check(value(&s, "mean step (after the first; cut short)") == 305.0,
        "gpt cut short");
  step_free(&s);
  parse(&s, "gpt",
        "step 2/3: loss 5.56, lr 6e-05, 19.5 ms, 6549 tokens/s\n"
        "summary: steps 3, mean step 17.961 ms, 7127 tokens/s, loss 5.474408\n");
  check(value(&s, "mean step (after the first)") == 17.961, "gpt summary");
  check(value(&s, "tokens per second") == 7127, "gpt tokens");
  check(json_array_size(s.figures) == 3, "gpt figure count");
  step_free(&s);
  if (failures == 0)
    printf("ok\n");
  return failures ? 1 : 0;
}
