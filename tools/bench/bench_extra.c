/* `kiln bench`: the launch-cost benchmark and the row ops.
 *
 * Launch cost: what kiln adds to an op's launch over a bare
 * clEnqueueNDRangeKernel. kiln_scale on a tiny vector and a
 * clEnqueueNDRangeKernel of an equivalent scale kernel (built through kiln,
 * launched through kiln/kiln_cl.h interop on the same OpenCL queue,
 * arguments set once) are issued in alternation, and the host time of each
 * call is taken on its own: only the cost of issuing a launch is compared,
 * the device's execution overlapping it. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln_cl.h"

#define U (ldexp(1.0, -24))
#define LAUNCHES 4000
#define BATCH 200

static const char scale_source[] =
    "__kernel void scale(__global float *x, float a, ulong n) {\n"
    "  size_t i = get_global_id(0);\n"
    "  if (i < n)\n"
    "    x[i] *= a;\n"
    "}\n";

bool bench_run_launch(const struct bench_env *env, struct bench_result *r) {
  const size_t n = r->shape[0];
  bool ok = false;
  kiln_buffer *x = NULL;
  kiln_program *prog = NULL;
  kiln_kernel *k = NULL;
  static double kiln_t[LAUNCHES], raw_t[LAUNCHES];
  float *host = malloc(n * 4), *back = malloc(n * 4);
  if (host == NULL || back == NULL) {
    snprintf(r->note, sizeof r->note, "out of host memory");
    goto done;
  }
  for (size_t i = 0; i < n; i++)
    host[i] = (float)i * 0.25f - 3.0f;
  if (kiln_buffer_create(env->ctx, n * 4, 0, &x) != KILN_OK ||
      kiln_buffer_write_sync(env->queue, host, &(kiln_range){x, 0, n, KILN_F32}) != KILN_OK ||
      kiln_program_create_built(env->ctx, scale_source, NULL, &prog) !=
          KILN_OK ||
      kiln_kernel_create(prog, "scale", &k) != KILN_OK) {
    snprintf(r->note, sizeof r->note, "%s", kiln_last_error());
    goto done;
  }
  cl_command_queue q = kiln_queue_get_cl_queue(env->queue);
  cl_kernel ck = kiln_kernel_get_cl_kernel(k);
  cl_mem xm = kiln_buffer_get_cl_mem(x);
  float a = 1.0f;
  cl_ulong n64 = n;
  size_t local =
      env->info->max_work_group_size < 64 ? env->info->max_work_group_size : 64;
  size_t global = (n + local - 1) / local * local;
  if (clSetKernelArg(ck, 0, sizeof xm, &xm) != CL_SUCCESS ||
      clSetKernelArg(ck, 1, sizeof a, &a) != CL_SUCCESS ||
      clSetKernelArg(ck, 2, sizeof n64, &n64) != CL_SUCCESS) {
    snprintf(r->note, sizeof r->note, "clSetKernelArg failed");
    goto done;
  }
  /* Warm both paths: builds, first-launch JIT, caches. */
  if (kiln_scale(env->queue, &(kiln_range){x, 0, n, KILN_F32}, 1.0f, 0, NULL,
                 NULL) != KILN_OK ||
      clEnqueueNDRangeKernel(q, ck, 1, NULL, &global, &local, 0, NULL, NULL) !=
          CL_SUCCESS ||
      kiln_queue_finish(env->queue) != KILN_OK) {
    snprintf(r->note, sizeof r->note, "warm-up: %s", kiln_last_error());
    goto done;
  }
  /* Pairs: one kiln launch, then one bare launch, each timed on its own,
   * so that a change in the machine's load hits both alike; the queue is
   * drained every BATCH pairs so that its depth stays the same. The
   * medians of the per-call times are compared. */
  for (int i = 0; i < LAUNCHES; i++) {
    double t0 = tools_now();
    kiln_status ks = kiln_scale(env->queue, &(kiln_range){x, 0, n, KILN_F32},
                                1.0f, 0, NULL, NULL);
    double t1 = tools_now();
    cl_int ce =
        clEnqueueNDRangeKernel(q, ck, 1, NULL, &global, &local, 0, NULL, NULL);
    double t2 = tools_now();
    if (ks != KILN_OK || ce != CL_SUCCESS) {
      snprintf(r->note, sizeof r->note, "%s",
               ks != KILN_OK ? kiln_last_error()
                             : "clEnqueueNDRangeKernel failed");
      goto done;
    }
    kiln_t[i] = t1 - t0;
    raw_t[i] = t2 - t1;
    if ((i + 1) % BATCH == 0 && kiln_queue_finish(env->queue) != KILN_OK)
      goto done;
  }
  if (kiln_queue_finish(env->queue) != KILN_OK)
    goto done;
  bench_sort(kiln_t, LAUNCHES);
  bench_sort(raw_t, LAUNCHES);
  r->is_launch = true;
  r->median_s = kiln_t[LAUNCHES / 2];
  r->kiln_us = kiln_t[LAUNCHES / 2] * 1e6;
  r->raw_us = raw_t[LAUNCHES / 2] * 1e6;
  r->rate = 0.0;
  /* Every launch scaled x by 1: it must be exactly what was written. */
  ok = true;
  if (env->verify) {
    if (kiln_buffer_read_sync(env->queue, &(kiln_range){x, 0, n, KILN_F32}, back) != KILN_OK) {
      snprintf(r->note, sizeof r->note, "%s", kiln_last_error());
      ok = false;
    } else if (memcmp(host, back, n * 4) != 0) {
      snprintf(r->note, sizeof r->note, "x changed under scaling by 1");
      ok = false;
    }
    r->verified = ok;
  }
done:
  free(host);
  free(back);
  kiln_kernel_destroy(k);
  kiln_program_destroy(prog);
  kiln_buffer_destroy(x);
  return ok;
}

/* ---- row ops ------------------------------------------------------------- */

enum row_kind { ROW_SUM, ROW_SOFTMAX, ROW_LAYERNORM };

struct row_args {
  kiln_queue *q;
  enum row_kind kind;
  size_t rows, cols;
  kiln_buffer *x, *y;
};

static kiln_status row_op(void *p) {
  struct row_args *a = p;
  switch (a->kind) {
  case ROW_SUM:
    return kiln_reduce_rows(a->q, KILN_REDUCE_SUM,
                            &(kiln_matrix){.buffer = a->x,
                                           .rows = a->rows,
                                           .cols = a->cols,
                                           .dtype = KILN_F32},
                            &(kiln_range){a->y, 0, a->rows, KILN_F32}, 0, NULL,
                            NULL);
  case ROW_SOFTMAX:
    return kiln_softmax_rows(a->q,
                             &(kiln_matrix){.buffer = a->x,
                                            .rows = a->rows,
                                            .cols = a->cols,
                                            .dtype = KILN_F32},
                             &(kiln_matrix){.buffer = a->y,
                                            .rows = a->rows,
                                            .cols = a->cols,
                                            .dtype = KILN_F32},
                             0, NULL, NULL);
  case ROW_LAYERNORM:
    return kiln_layernorm_rows(a->q,
                               &(kiln_matrix){.buffer = a->x,
                                              .rows = a->rows,
                                              .cols = a->cols,
                                              .dtype = KILN_F32},
                               NULL, NULL,
                               &(kiln_matrix){.buffer = a->y,
                                              .rows = a->rows,
                                              .cols = a->cols,
                                              .dtype = KILN_F32},
                               1e-5f, 0, NULL, NULL);
  }
  return KILN_ERR_INVALID_ARGUMENT;
}

/* The reference of one row into want (cols values, or 1 for the sum) and
 * the per-element tolerance into tol. */
static void row_reference(enum row_kind kind, const float *x, size_t cols,
                          double *want, double *tol) {
  double sum = 0.0, mag = 0.0, mx = -INFINITY;
  for (size_t j = 0; j < cols; j++) {
    sum += x[j];
    mag += fabs((double)x[j]);
    if (x[j] > mx)
      mx = x[j];
  }
  if (kind == ROW_SUM) {
    want[0] = sum;
    tol[0] = 2.0 * (double)cols * U * mag + 1e-30;
    return;
  }
  if (kind == ROW_SOFTMAX) {
    double z = 0.0;
    for (size_t j = 0; j < cols; j++)
      z += exp((double)x[j] - mx);
    for (size_t j = 0; j < cols; j++) {
      want[j] = exp((double)x[j] - mx) / z;
      /* exp within a few ulp, a sum of cols terms, one division. */
      tol[j] = ((double)cols + 16.0) * 2.0 * U * want[j] + 1e-30;
    }
    return;
  }
  double mean = sum / (double)cols, var = 0.0;
  for (size_t j = 0; j < cols; j++)
    var += ((double)x[j] - mean) * ((double)x[j] - mean);
  var /= (double)cols;
  double inv = 1.0 / sqrt(var + 1e-5);
  for (size_t j = 0; j < cols; j++) {
    want[j] = ((double)x[j] - mean) * inv;
    tol[j] = ((double)cols + 16.0) * 4.0 * U * (fabs(want[j]) + 1.0);
  }
}

bool bench_run_rows(const struct bench_env *env, struct bench_result *r) {
  const enum row_kind kind = strcmp(r->op, "softmax") == 0     ? ROW_SOFTMAX
                             : strcmp(r->op, "layernorm") == 0 ? ROW_LAYERNORM
                                                               : ROW_SUM;
  const size_t rows = r->shape[0], cols = r->shape[1], n = rows * cols;
  const size_t out_n = kind == ROW_SUM ? rows : n;
  bool ok = false;
  float *x = malloc(n * 4), *y = malloc(out_n * 4);
  double *want = malloc(cols * sizeof *want), *tol = malloc(cols * sizeof *tol);
  struct row_args a = {env->queue, kind, rows, cols, NULL, NULL};
  if (x == NULL || y == NULL || want == NULL || tol == NULL) {
    snprintf(r->note, sizeof r->note, "out of host memory");
    goto done;
  }
  uint32_t s = 7;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    x[i] = (float)(s >> 8) / (float)(1u << 23) - 1.0f;
  }
  if (kiln_buffer_create(env->ctx, n * 4, 0, &a.x) != KILN_OK ||
      kiln_buffer_create(env->ctx, out_n * 4, 0, &a.y) != KILN_OK ||
      kiln_buffer_write_sync(env->queue, x, &(kiln_range){a.x, 0, n, KILN_F32}) != KILN_OK) {
    snprintf(r->note, sizeof r->note, "%s", kiln_last_error());
    goto done;
  }
  double s_med = bench_time(env, row_op, &a);
  if (s_med <= 0) {
    snprintf(r->note, sizeof r->note, "%s", kiln_last_error());
    goto done;
  }
  r->median_s = s_med;
  r->flops = false;
  r->rate = (double)(n + out_n) * 4.0 / s_med * 1e-9;
  ok = true;
  if (!env->verify)
    goto done;
  if (kiln_buffer_read_sync(env->queue, &(kiln_range){a.y, 0, out_n, KILN_F32}, y) != KILN_OK) {
    snprintf(r->note, sizeof r->note, "%s", kiln_last_error());
    ok = false;
    goto done;
  }
  /* Every 64th row and the last. */
  for (size_t i = 0; i < rows && ok;
       i += i + 64 < rows || i == rows - 1 ? 64 : rows - 1 - i) {
    row_reference(kind, x + i * cols, cols, want, tol);
    size_t count = kind == ROW_SUM ? 1 : cols;
    const float *got = kind == ROW_SUM ? y + i : y + i * cols;
    for (size_t j = 0; j < count; j++)
      if (!(fabs((double)got[j] - want[j]) <= tol[j])) {
        snprintf(r->note, sizeof r->note,
                 "row %zu element %zu = %.9g, reference %.9g", i, j,
                 (double)got[j], want[j]);
        ok = false;
        break;
      }
    if (i == rows - 1)
      break;
  }
  r->verified = ok;
done:
  kiln_buffer_destroy(a.x);
  kiln_buffer_destroy(a.y);
  free(x);
  free(y);
  free(want);
  free(tol);
  return ok;
}
