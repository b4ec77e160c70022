/* kiln-compare: kiln's ops against their peers in one run, on the same
 * device and cores: CLBlast on the same OpenCL device (through the same
 * OpenCL queue, via kiln/kiln_cl.h interop), and on the host OpenBLAS
 * (sgemm, sdot, snrm2, saxpy, sscal) or a plain OpenMP loop (sum, copy,
 * transpose). Prints each one's rate and the ratios kiln/CLBlast and
 * kiln/host.
 *
 * Built only when CLBlast, OpenBLAS and OpenMP are found (tools/meson.build);
 * not installed. Every figure is the median of --runs runs after a warm-up,
 * and the three contenders' runs are interleaved, so that a change in the
 * machine's load during the run hits all of them alike; each round starts
 * with the next contender, so none always runs right after another. Device
 * timings run until the queue has finished (packing and every other step
 * included).
 *
 * OpenMP and OpenBLAS worker threads spin for a while after their work is
 * done. On a 2-core machine that spinning takes the cores from whatever
 * runs next (PoCL's workers lost 20-25% of a transpose's GB/s to it), so
 * the tool restarts itself with both told to sleep at once. */
#include <cblas.h>
#include <clblast_c.h>
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../commands.h"
#include "kiln/kiln.h"
#include "kiln/kiln_cl.h"

#define MAX_RUNS 51

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof t[0], cmp_double);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* Everything a contender needs. */
struct ctx {
  kiln_context *kctx;
  kiln_queue *q;
  cl_command_queue clq;
  size_t n, m, k;             /* vector length, or matrix sizes */
  float *ha, *hb, *hc;        /* host operands */
  kiln_buffer *a, *b, *c, *r; /* device operands; r: a scalar result */
  float sink;
};

typedef int (*contender)(struct ctx *c);

static int dev_done(struct ctx *c, int status) {
  if (status != 0)
    return status;
  return kiln_queue_finish(c->q) == KILN_OK ? 0 : -1;
}

/* ---- GEMM ---- */
static int kiln_gemm_run(struct ctx *c) {
  return dev_done(
      c, kiln_matmul(
             c->q, 1,
             &(kiln_matrix){
                 .buffer = c->a, .rows = c->m, .cols = c->k, .dtype = KILN_F32},
             &(kiln_matrix){
                 .buffer = c->b, .rows = c->k, .cols = c->n, .dtype = KILN_F32},
             &(kiln_matrix){
                 .buffer = c->c, .rows = c->m, .cols = c->n, .dtype = KILN_F32},
             NULL, 0, NULL, NULL));
}
static int clblast_gemm_run(struct ctx *c) {
  return dev_done(c, CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo,
                                  CLBlastTransposeNo, c->m, c->n, c->k, 1.0f,
                                  kiln_buffer_get_cl_mem(c->a), 0, c->k,
                                  kiln_buffer_get_cl_mem(c->b), 0, c->n, 0.0f,
                                  kiln_buffer_get_cl_mem(c->c), 0, c->n, &c->clq,
                                  NULL));
}
static int host_gemm_run(struct ctx *c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)c->m, (int)c->n,
              (int)c->k, 1.0f, c->ha, (int)c->k, c->hb, (int)c->n, 0.0f, c->hc,
              (int)c->n);
  return 0;
}

/* ---- sum ---- */
static int kiln_sum_run(struct ctx *c) {
  return dev_done(c, kiln_reduce(c->q, KILN_REDUCE_SUM,
                                 &(kiln_range){c->a, 0, c->n, KILN_F32},
                                 &(kiln_range){c->r, 0, 1, KILN_F32}, 0, NULL,
                                 NULL));
}
static int clblast_sum_run(struct ctx *c) {
  return dev_done(c,
                  CLBlastSsum(c->n, kiln_buffer_get_cl_mem(c->r), 0,
                              kiln_buffer_get_cl_mem(c->a), 0, 1, &c->clq, NULL));
}
static int host_sum_run(struct ctx *c) {
  float s = 0.0f;
  const float *x = c->ha;
  const long n = (long)c->n, whole = n / 16 * 16;
  /* Sixteen independent partial sums per thread: a loop both gcc and clang
   * vectorise as written (clang cannot vectorise `omp parallel for simd
   * reduction`: -Wpass-failed), so the baseline is as fast with either. */
#pragma omp parallel reduction(+ : s)
  {
    float acc[16] = {0};
#pragma omp for
    for (long i = 0; i < whole; i += 16)
      for (int lane = 0; lane < 16; lane++)
        acc[lane] += x[i + lane];
    for (int lane = 0; lane < 16; lane++)
      s += acc[lane];
  }
  for (long i = whole; i < n; i++)
    s += x[i];
  c->sink = s;
  return 0;
}

/* ---- dot, nrm2, axpy, scale ---- */
static int kiln_dot_run(struct ctx *c) {
  return dev_done(c,
                  kiln_dot(c->q, &(kiln_range){c->a, 0, c->n, KILN_F32},
                           &(kiln_range){c->b, 0, c->n, KILN_F32},
                           &(kiln_range){c->r, 0, 1, KILN_F32}, 0, NULL, NULL));
}
static int clblast_dot_run(struct ctx *c) {
  return dev_done(c,
                  CLBlastSdot(c->n, kiln_buffer_get_cl_mem(c->r), 0,
                              kiln_buffer_get_cl_mem(c->a), 0, 1,
                              kiln_buffer_get_cl_mem(c->b), 0, 1, &c->clq, NULL));
}
static int host_dot_run(struct ctx *c) {
  c->sink = cblas_sdot((int)c->n, c->ha, 1, c->hb, 1);
  return 0;
}
static int kiln_nrm2_run(struct ctx *c) {
  return dev_done(c, kiln_reduce(c->q, KILN_REDUCE_NRM2,
                                 &(kiln_range){c->a, 0, c->n, KILN_F32},
                                 &(kiln_range){c->r, 0, 1, KILN_F32}, 0, NULL,
                                 NULL));
}
static int clblast_nrm2_run(struct ctx *c) {
  return dev_done(c,
                  CLBlastSnrm2(c->n, kiln_buffer_get_cl_mem(c->r), 0,
                               kiln_buffer_get_cl_mem(c->a), 0, 1, &c->clq, NULL));
}
static int host_nrm2_run(struct ctx *c) {
  c->sink = cblas_snrm2((int)c->n, c->ha, 1);
  return 0;
}
static int kiln_axpy_run(struct ctx *c) {
  return dev_done(c, kiln_axpy(c->q, &(kiln_range){c->a, 0, c->n, KILN_F32},
                               &(kiln_range){c->b, 0, c->n, KILN_F32}, 1e-3f, 0,
                               NULL, NULL));
}
static int clblast_axpy_run(struct ctx *c) {
  return dev_done(c,
                  CLBlastSaxpy(c->n, 1e-3f, kiln_buffer_get_cl_mem(c->a), 0, 1,
                               kiln_buffer_get_cl_mem(c->b), 0, 1, &c->clq, NULL));
}
static int host_axpy_run(struct ctx *c) {
  cblas_saxpy((int)c->n, 1e-3f, c->ha, 1, c->hb, 1);
  return 0;
}
static int kiln_scale_run(struct ctx *c) {
  return dev_done(c, kiln_scale(c->q, &(kiln_range){c->a, 0, c->n, KILN_F32},
                                -1.0f, 0, NULL, NULL));
}
static int clblast_scale_run(struct ctx *c) {
  return dev_done(c, CLBlastSscal(c->n, -1.0f, kiln_buffer_get_cl_mem(c->a), 0, 1,
                                  &c->clq, NULL));
}
static int host_scale_run(struct ctx *c) {
  cblas_sscal((int)c->n, -1.0f, c->ha, 1);
  return 0;
}

/* ---- copy and transpose (m x k matrix) ---- */
static int kiln_copy_run(struct ctx *c) {
  return dev_done(
      c, kiln_buffer_copy(c->q, &(kiln_range){c->a, 0, c->n, KILN_F32}, &(kiln_range){c->b, 0, c->n, KILN_F32}, 0, NULL, NULL));
}
static int clblast_copy_run(struct ctx *c) {
  return dev_done(c,
                  CLBlastScopy(c->n, kiln_buffer_get_cl_mem(c->a), 0, 1,
                               kiln_buffer_get_cl_mem(c->b), 0, 1, &c->clq, NULL));
}
static int host_copy_run(struct ctx *c) {
  const float *x = c->ha;
  float *y = c->hb;
  const long n = (long)c->n;
#pragma omp parallel for simd
  for (long i = 0; i < n; i++)
    y[i] = x[i];
  return 0;
}
static int kiln_transpose_run(struct ctx *c) {
  return dev_done(
      c, kiln_transpose(
             c->q,
             &(kiln_matrix){
                 .buffer = c->a, .rows = c->m, .cols = c->k, .dtype = KILN_F32},
             &(kiln_matrix){
                 .buffer = c->b, .rows = c->k, .cols = c->m, .dtype = KILN_F32},
             0, NULL, NULL));
}
static int clblast_transpose_run(struct ctx *c) {
  return dev_done(
      c, CLBlastSomatcopy(CLBlastLayoutRowMajor, CLBlastTransposeYes, c->m,
                          c->k, 1.0f, kiln_buffer_get_cl_mem(c->a), 0, c->k,
                          kiln_buffer_get_cl_mem(c->b), 0, c->m, &c->clq, NULL));
}

struct row {
  const char *name;
  const char *host_name; /* what the host figure is */
  contender kiln, clblast, host;
  int kind;     /* 0 GEMM, 1 vector, 2 matrix (transpose) */
  double words; /* 4-byte words moved per element (memory ops) */
};

static const struct row rows[] = {
    {"gemm", "OpenBLAS sgemm", kiln_gemm_run, clblast_gemm_run, host_gemm_run,
     0, 0},
    {"sum", "OpenMP loop", kiln_sum_run, clblast_sum_run, host_sum_run, 1, 1},
    {"dot", "OpenBLAS sdot", kiln_dot_run, clblast_dot_run, host_dot_run, 1, 2},
    {"nrm2", "OpenBLAS snrm2", kiln_nrm2_run, clblast_nrm2_run, host_nrm2_run,
     1, 1},
    {"axpy", "OpenBLAS saxpy", kiln_axpy_run, clblast_axpy_run, host_axpy_run,
     1, 3},
    {"scale", "OpenBLAS sscal", kiln_scale_run, clblast_scale_run,
     host_scale_run, 1, 2},
    {"copy", "OpenMP copy", kiln_copy_run, clblast_copy_run, host_copy_run, 1,
     2},
    /* The transpose's host figure is an OpenMP copy of the same bytes: the
     * target is a share of what the memory system does at best. */
    {"transpose", "OpenMP copy", kiln_transpose_run, clblast_transpose_run,
     host_copy_run, 2, 2},
};

static void fill(float *x, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
  }
}

static kiln_buffer *upload(struct ctx *c, const float *h, size_t n) {
  kiln_buffer *b = NULL;
  if (kiln_buffer_create(c->kctx, (n ? n : 1) * 4, 0, &b) != KILN_OK ||
      (h && kiln_buffer_write_sync(c->q, h, &(kiln_range){b, 0, n, KILN_F32}) != KILN_OK)) {
    fprintf(stderr, "kiln-compare: %s\n", kiln_last_error());
    exit(1);
  }
  return b;
}

/* Run one row at one size; print it. Returns false on a failure. */
static bool run_row(struct ctx *c, const struct row *row, size_t size,
                    int runs) {
  size_t elems;
  if (row->kind == 0) {
    c->m = c->n = c->k = size;
    elems = size * size;
  } else if (row->kind == 2) {
    c->m = c->k = size;
    c->n = size * size;
    elems = size * size;
  } else {
    c->n = size;
    elems = size;
  }
  c->ha = malloc(elems * 4);
  c->hb = malloc(elems * 4);
  c->hc = malloc(elems * 4);
  if (!c->ha || !c->hb || !c->hc) {
    fprintf(stderr, "kiln-compare: out of host memory\n");
    exit(1);
  }
  fill(c->ha, elems, 1);
  fill(c->hb, elems, 2);
  memset(c->hc, 0, elems * 4);
  c->a = upload(c, c->ha, elems);
  c->b = upload(c, c->hb, elems);
  c->c = upload(c, NULL, elems);
  c->r = upload(c, NULL, 1);
  contender who[3] = {row->kiln, row->clblast, row->host};
  double t[3][MAX_RUNS];
  bool ok = true;
  for (int w = 0; w < 3; w++) /* warm-up: builds, first-touch */
    if (who[w](c) != 0) {
      fprintf(stderr, "kiln-compare: %s warm-up of %s failed: %s\n", row->name,
              w == 0   ? "kiln"
              : w == 1 ? "CLBlast"
                       : "host",
              w == 0 ? kiln_last_error() : "(status)");
      ok = false;
    }
  for (int r = 0; r < runs && ok; r++)
    for (int i = 0; i < 3; i++) {
      const int w = (r + i) % 3;
      double t0 = tools_now();
      if (who[w](c) != 0) {
        ok = false;
        break;
      }
      t[w][r] = tools_now() - t0;
    }
  if (ok) {
    double work = row->kind == 0 ? 2.0 * (double)size * size * size
                                 : row->words * 4.0 * (double)elems;
    double rate[3];
    for (int w = 0; w < 3; w++)
      rate[w] = work / median(t[w], runs) * 1e-9;
    char sz[32];
    if (row->kind == 0)
      snprintf(sz, sizeof sz, "%zu^3", size);
    else if (row->kind == 2)
      snprintf(sz, sizeof sz, "%zux%zu", size, size);
    else
      snprintf(sz, sizeof sz, "%zu", size);
    const char *unit = row->kind == 0 ? "GFLOP/s" : "GB/s";
    printf("%-10s %-10s %9.1f %9.1f %9.1f  %-7s %-15s %8.1fx %8.2f\n",
           row->name, sz, rate[0], rate[1], rate[2], unit, row->host_name,
           rate[0] / rate[1], rate[0] / rate[2]);
    fflush(stdout);
  }
  kiln_buffer_destroy(c->a);
  kiln_buffer_destroy(c->b);
  kiln_buffer_destroy(c->c);
  kiln_buffer_destroy(c->r);
  free(c->ha);
  free(c->hb);
  free(c->hc);
  return ok;
}

static void usage(FILE *out) {
  fputs("usage: kiln-compare [--device SEL] [--op NAME[,NAME...]] [--runs N]\n"
        "                    [--set SPACE:PARAMS]...\n"
        "\n"
        "Compare kiln's ops with CLBlast on the same OpenCL device and with\n"
        "OpenBLAS or an OpenMP loop on the host, at the standard sizes (GEMM\n"
        "1024 and 2048, vectors 2^24, transpose 4096 x 4096).\n"
        "ops: gemm sum dot nrm2 axpy scale copy transpose\n"
        "--set runs kiln with a space's parameters in place of its tuning\n"
        "file's (kiln_tuning_set), e.g. to compare two points in turn:\n"
        "  --set 'transpose_cpu:NT=1 ORDER=1 TILE=256 VW=16'\n",
        out);
}

/* Restart with idle OpenMP and OpenBLAS threads sleeping instead of
 * spinning (both read their settings once, before main). A variable the
 * user set is left alone. */
static void restart_with_sleeping_threads(char **argv) {
  if (getenv("OMP_WAIT_POLICY") != NULL ||
      getenv("OPENBLAS_THREAD_TIMEOUT") != NULL)
    return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1); /* 2^4 cycles: the least */
  execv("/proc/self/exe", argv);
  /* No /proc: measure anyway; the header shows the policy in force. */
}

int main(int argc, char **argv) {
  restart_with_sleeping_threads(argv);
  static const struct option longopts[] = {
      {"device", required_argument, NULL, 'd'},
      {"op", required_argument, NULL, 'o'},
      {"runs", required_argument, NULL, 'r'},
      {"set", required_argument, NULL, 's'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  const char *selector = NULL, *ops = NULL;
  const char *sets[8];
  int runs = 7, opt, nsets = 0;
  while ((opt = getopt_long(argc, argv, "d:o:r:s:h", longopts, NULL)) != -1) {
    if (opt == 's') {
      if (nsets == 8) {
        fprintf(stderr, "kiln-compare: at most 8 --set\n");
        return 2;
      }
      sets[nsets++] = optarg;
    } else if (opt == 'd')
      selector = optarg;
    else if (opt == 'o')
      ops = optarg;
    else if (opt == 'r')
      runs = atoi(optarg);
    else {
      usage(opt == 'h' ? stdout : stderr);
      return opt == 'h' ? 0 : 2;
    }
  }
  if (runs < 3 || runs > MAX_RUNS) {
    fprintf(stderr, "kiln-compare: --runs wants 3 to %d\n", MAX_RUNS);
    return 2;
  }
  struct ctx c;
  memset(&c, 0, sizeof c);
  kiln_device_list *list = NULL;
  const kiln_device *dev = NULL;
  if (kiln_device_list_create(&list) != KILN_OK ||
      kiln_device_select(list, selector, &dev) != KILN_OK ||
      kiln_context_create(dev, NULL, &c.kctx) != KILN_OK ||
      kiln_queue_create(c.kctx, 0, &c.q) != KILN_OK) {
    fprintf(stderr, "kiln-compare: %s\n", kiln_last_error());
    return 1;
  }
  for (int i = 0; i < nsets; i++) {
    char space[64];
    const char *colon = strchr(sets[i], ':');
    const size_t len = colon ? (size_t)(colon - sets[i]) : 0;
    if (len == 0 || len >= sizeof space) {
      fprintf(stderr, "kiln-compare: --set wants SPACE:PARAMS, not \"%s\"\n",
              sets[i]);
      return 2;
    }
    memcpy(space, sets[i], len);
    space[len] = '\0';
    if (kiln_tuning_set(c.kctx, space, colon + 1) != KILN_OK) {
      fprintf(stderr, "kiln-compare: --set %s: %s\n", sets[i],
              kiln_last_error());
      return 1;
    }
    printf("set %s: %s\n", space, colon + 1);
  }
  c.clq = kiln_queue_get_cl_queue(c.q);
  const kiln_device_info *info = kiln_context_get_device_info(c.kctx);
  printf("device: %s (%s; profile %s); host: %d OpenMP threads, OpenBLAS "
         "%s\n",
         info->name, info->platform_name, kiln_context_get_profile(c.kctx),
         omp_get_max_threads(), openblas_get_config());
  printf("median of %d interleaved runs after a warm-up; OMP_WAIT_POLICY=%s, "
         "OPENBLAS_THREAD_TIMEOUT=%s\n\n",
         runs, getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "",
         getenv("OPENBLAS_THREAD_TIMEOUT") ? getenv("OPENBLAS_THREAD_TIMEOUT")
                                           : "");
  printf("%-10s %-10s %9s %9s %9s  %-7s %-15s %9s %8s\n", "op", "size", "kiln",
         "CLBlast", "host", "unit", "host is", "kiln/CLB", "kiln/host");
  bool ok = true;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    if (ops != NULL) {
      /* Match whole names in the comma-separated list. */
      const char *p = strstr(ops, rows[i].name);
      size_t len = strlen(rows[i].name);
      bool hit = false;
      while (p != NULL && !hit) {
        hit = (p == ops || p[-1] == ',') && (p[len] == '\0' || p[len] == ',');
        p = strstr(p + 1, rows[i].name);
      }
      if (!hit)
        continue;
    }
    if (rows[i].kind == 0) {
      ok &= run_row(&c, &rows[i], 1024, runs);
      ok &= run_row(&c, &rows[i], 2048, runs);
    } else if (rows[i].kind == 2) {
      ok &= run_row(&c, &rows[i], 4096, runs);
    } else {
      ok &= run_row(&c, &rows[i], (size_t)1 << 24, runs);
    }
  }
  kiln_queue_destroy(c.q);
  kiln_context_destroy(c.kctx);
  kiln_device_list_destroy(list);
  return ok ? 0 : 1;
}
