/* kiln report: the figures in each step's output (kiln bench's and kiln
 * tune's JSON, kiln-compare-cublas's table, the trainer's summary line),
 * and the database rows made from the exported tuning file. */
#define _GNU_SOURCE
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "gemm f32 4096x4096x4096" */
static void result_name(json_t *r, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "%s %s",
                                 json_string_value(json_object_get(r, "op")),
                                 json_string_value(json_object_get(r, "dtype")));
  size_t i;
  json_t *dim;
  json_array_foreach(json_object_get(r, "shape"), i, dim) {
    if (used < size)
      used += (size_t)snprintf(buf + used, size - used, "%s%lld",
                               i ? "x" : " ", (long long)json_integer_value(dim));
  }
}

/* kiln bench --json: one figure per result (GFLOP/s, GB/s or the launch
 * overhead; the times of the comparison ops). */
static void parse_bench(step *s, json_t *doc) {
  size_t i;
  json_t *r;
  json_array_foreach(json_object_get(doc, "results"), i, r) {
    char name[160];
    result_name(r, name, sizeof name);
    const char *unit = json_object_get(r, "gflops") ? "gflops"
                       : json_object_get(r, "gbps") ? "gbps"
                       : json_object_get(r, "overhead_us") ? "overhead_us"
                                                            : NULL;
    if (unit != NULL) {
      step_figure(s, name, json_number_value(json_object_get(r, unit)),
                  strcmp(unit, "gflops") == 0  ? "GFLOP/s"
                  : strcmp(unit, "gbps") == 0 ? "GB/s"
                                              : "us");
      continue;
    }
    const char *way;
    json_t *t;
    json_object_foreach(json_object_get(r, "times_s"), way, t) {
      char full[224];
      snprintf(full, sizeof full, "%s %s", name, way);
      step_figure(s, full, json_number_value(t), "s");
    }
  }
}

/* kiln tune --json: before and tuned rate at each size. */
static void parse_tune(step *s, json_t *doc) {
  const char *op = json_string_value(json_object_get(doc, "op"));
  const char *unit = json_string_value(json_object_get(doc, "unit"));
  size_t i;
  json_t *sz;
  json_array_foreach(json_object_get(doc, "sizes"), i, sz) {
    /* Sizes as kiln tune names them: MxNxK for GEMM, RxC for transpose,
     * elements for the others. */
    const int dims = op == NULL ? 3 : strncmp(op, "gemm", 4) == 0 ? 3
                                    : strcmp(op, "transpose") == 0 ? 2 : 1;
    char name[160];
    const long long m = (long long)json_integer_value(json_object_get(sz, "m")),
                    n = (long long)json_integer_value(json_object_get(sz, "n")),
                    k = (long long)json_integer_value(json_object_get(sz, "k"));
    if (dims == 3)
      snprintf(name, sizeof name, "%s %lldx%lldx%lld", op ? op : "?", m, n, k);
    else if (dims == 2)
      snprintf(name, sizeof name, "%s %lldx%lld", op, m, n);
    else
      snprintf(name, sizeof name, "%s %lld", op, m);
    char before[192], tuned[192];
    snprintf(before, sizeof before, "%s before", name);
    snprintf(tuned, sizeof tuned, "%s tuned", name);
    step_figure(s, before, json_number_value(json_object_get(sz, "before_gflops")),
                unit ? unit : "");
    step_figure(s, tuned, json_number_value(json_object_get(sz, "tuned_gflops")),
                unit ? unit : "");
  }
}

static char *read_text(const char *path) {
  FILE *f = path[0] ? fopen(path, "r") : NULL;
  if (f == NULL)
    return NULL;
  char *text = NULL;
  size_t size = 0;
  FILE *mem = open_memstream(&text, &size);
  char buf[4096];
  size_t n;
  while (mem != NULL && (n = fread(buf, 1, sizeof buf, f)) > 0)
    fwrite(buf, 1, n, mem);
  if (mem != NULL)
    fclose(mem);
  fclose(f);
  return text;
}

/* kiln-compare-cublas's table rows: "sgemm 1024 19.0 TF/s 21.8 TF/s 0.87
 * err 1.2e-07", the same for gemm_bf16 and gemm_f16, and "sum 67108864
 * 2500 GB/s 2900 GB/s 0.86". */
static void parse_cublas(step *s, const char *text) {
  for (const char *line = text; line != NULL && *line;) {
    char op[32], u1[8], u2[8];
    unsigned long long size;
    double kiln, ref, ratio, err;
    int used = 0;
    if (sscanf(line, "%31s %llu %lf %7s %lf %7s %lf%n", op, &size, &kiln, u1,
               &ref, u2, &ratio, &used) == 7) {
      const char *what = strcmp(op, "sgemm") == 0 ? "cuBLAS SGEMM (TF32 off)"
                         : strncmp(op, "gemm_", 5) == 0
                             ? "cuBLAS GemmEx (compute 32F)"
                             : "cudaMemcpy";
      char name[96];
      snprintf(name, sizeof name, "%s %llu kiln", op, size);
      step_figure(s, name, kiln, u1);
      snprintf(name, sizeof name, "%s %llu %s", op, size, what);
      step_figure(s, name, ref, u2);
      snprintf(name, sizeof name, "%s %llu kiln/reference", op, size);
      step_figure(s, name, ratio, "ratio");
      if (sscanf(line + used, " err %lf", &err) == 1) {
        snprintf(name, sizeof name, "%s %llu error against cuBLAS", op, size);
        step_figure(s, name, err, "relative");
      }
    }
    line = strchr(line, '\n');
    line = line ? line + 1 : NULL;
  }
}

/* The trainer's "summary: steps N, median step X ms, last epoch Y s, loss
 * L, test accuracy A%" line. */
static void parse_trainer(step *s, const char *text) {
  const char *line = text ? strstr(text, "summary: steps ") : NULL;
  unsigned long long steps;
  double step_ms, epoch_s, loss, accuracy;
  if (line == NULL ||
      sscanf(line, "summary: steps %llu, median step %lf ms, last epoch %lf s, "
                   "loss %lf, test accuracy %lf%%",
             &steps, &step_ms, &epoch_s, &loss, &accuracy) != 5)
    return;
  step_figure(s, "median step", step_ms, "ms");
  step_figure(s, "epoch", epoch_s, "s");
  step_figure(s, "loss", loss, "");
  step_figure(s, "test accuracy", accuracy, "%");
}

/* The GPT-2 trainer's "summary: steps N, mean step X ms, T tokens/s, loss
 * L" line (its mean leaves out the first step, which builds the kernels). */
static void parse_gpt(step *s, const char *text) {
  const char *line = text ? strstr(text, "summary: steps ") : NULL;
  unsigned long long steps;
  double step_ms, tokens, loss;
  if (line == NULL ||
      sscanf(line, "summary: steps %llu, mean step %lf ms, %lf tokens/s, "
                   "loss %lf", &steps, &step_ms, &tokens, &loss) != 4) {
    /* Cut short (its time limit): the mean of the steps it printed, the
     * first left out as in its summary ("step 2/8: loss L, lr X, T ms,
     * N tokens/s"). */
    double sum = 0, t;
    unsigned long long n = 0, k, of;
    for (line = text; line != NULL && *line;) {
      char lr[32];
      if (sscanf(line, "step %llu/%llu: loss %lf, lr %31[^,], %lf ms", &k, &of,
                 &loss, lr, &t) == 5 && k > 1)
        sum += t, n++;
      line = strchr(line, '\n');
      line = line ? line + 1 : NULL;
    }
    if (n > 0)
      step_figure(s, "mean step (after the first; cut short)", sum / (double)n,
                  "ms");
    return;
  }
  step_figure(s, "mean step (after the first)", step_ms, "ms");
  step_figure(s, "tokens per second", tokens, "tokens/s");
  step_figure(s, "loss", loss, "");
}

void report_parse_figures(step *s, const char *kind) {
  if (s->status != STEP_OK && s->status != STEP_FAILED &&
      s->status != STEP_TIMEOUT)
    return;
  char *text = read_text(s->stdout_apart ? s->out : s->log);
  if (text == NULL)
    return;
  if (strcmp(kind, "bench") == 0 || strcmp(kind, "tune") == 0) {
    /* kiln tune prints one document per op, kiln bench one in all. */
    size_t off = 0;
    while (text[off] != '\0') {
      json_error_t err;
      json_t *doc = json_loads(text + off, JSON_DISABLE_EOF_CHECK, &err);
      if (doc == NULL)
        break;
      if (kind[0] == 'b')
        parse_bench(s, doc);
      else
        parse_tune(s, doc);
      json_decref(doc);
      off += (size_t)err.position;
      off += strspn(text + off, " \t\r\n");
    }
  } else if (strcmp(kind, "cublas") == 0) {
    parse_cublas(s, text);
  } else if (strcmp(kind, "trainer") == 0) {
    parse_trainer(s, text);
  } else if (strcmp(kind, "gpt") == 0) {
    parse_gpt(s, text);
  }
  free(text);
}

/* backends/tuning_db.c rows ("op | pattern | kiln version | parameters |
 * figures") from a tuning file's op and figures lines; the pattern is the
 * device's name as OpenCL reports it. The number of rows, or -1 when the
 * file cannot be read. */
int report_db_rows(const char *tuning_path, const char *device_name,
                   const char *rows_path) {
  char *text = read_text(tuning_path), *whole = read_text(tuning_path);
  if (text == NULL || whole == NULL) {
    free(text);
    free(whole);
    return -1;
  }
  char kiln[64] = "";
  FILE *out = fopen(rows_path, "w");
  int rows = out ? 0 : -1;
  for (char *save = NULL, *line = strtok_r(text, "\n", &save);
       line != NULL && out != NULL; line = strtok_r(NULL, "\n", &save)) {
    if (strncmp(line, "kiln ", 5) == 0)
      snprintf(kiln, sizeof kiln, "%s", line + 5);
    if (strncmp(line, "op ", 3) != 0)
      continue;
    char *op = line + 3, *params = strchr(op, ' ');
    if (params == NULL)
      continue;
    *params++ = '\0';
    /* The op's figures line, wherever it is in the file. */
    const char *figures = "";
    char key[96];
    snprintf(key, sizeof key, "\nfigures %s ", op);
    const char *f = strstr(whole, key);
    char fig[1024] = "";
    if (f != NULL) {
      f += strlen(key);
      snprintf(fig, sizeof fig, "%.*s", (int)strcspn(f, "\n"), f);
      figures = fig;
    }
    fprintf(out, "    \"%s | %s | %s | %s | %s\\n\"\n", op, device_name, kiln,
            params, figures);
    rows++;
  }
  if (out != NULL && fclose(out) != 0)
    rows = -1;
  free(text);
  free(whole);
  return rows;
}
