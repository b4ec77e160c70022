/* `kiln bench`: op throughput on one device against the device's measured
 * peaks. Options, the run loop, and the text and JSON reports; the peaks are
 * in bench_peaks.c, the op runners in bench_ops.c and bench_extra.c. */
#include "cli/cli.h"
#include "commands.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define MAX_SELECTED 32
#define MAX_SIZES 16

static void usage(FILE *out) {
  size_t count;
  const struct bench_op *ops = bench_ops(&count);
  fputs(
      "usage: kiln bench [--device SEL] [--op NAME[,NAME...]]\n"
      "                  [--size SPEC[,SPEC...]] [--runs N] [--json]\n"
      "                  [--remeasure-peaks] [--no-verify] [--wide]\n"
      "\n"
      "Run kiln's ops on one device: a warm-up, then the median of the\n"
      "timed runs (each until the queue has finished, so every step of an\n"
      "op counts); print the time, the GB/s or GFLOP/s, and the share of\n"
      "the device's peak bandwidth or FMA throughput. The peaks are measured\n"
      "once per device with small kernels and cached under kiln's cache\n"
      "directory. Each result is checked against a host reference in the\n"
      "same run (GEMM and row ops: a sample of rows).\n"
      "\n"
      "options:\n"
      "  -d, --device SEL     device selector (as KILN_DEVICE)\n"
      "  -o, --op NAMES       ops to run (default: all), comma-separated\n"
      "  -s, --size SPECS     sizes instead of each op's standard ones:\n"
      "                       N, RxC or MxNxK, comma-separated (at most 16\n"
      "                       sizes, each number 1 to 2^40)\n"
      "  -r, --runs N         timed runs per op (5 to 101, default 7)\n"
      "  -j, --json           print a kiln-bench/1 JSON document\n"
      "      --remeasure-peaks  measure the peaks again and update the cache\n"
      "      --no-verify      skip the host checks (verified: false)\n"
      "      --wide           one line per result whatever its width (else\n"
      "                       fitted to the terminal, or to 80 columns)\n"
      "  -h, --help           this help\n"
      "\n"
      "ops and what a size means for them:\n",
      out);
  for (size_t i = 0; i < count; i++)
    fprintf(out, "  %-12s %s\n", ops[i].name, ops[i].shape_help);
  fputs("\n"
        "`launch` compares the host cost of launching kiln_scale on a tiny\n"
        "vector with a bare clEnqueueNDRangeKernel of an equivalent kernel.\n"
        "`pool`, `h2d`, `d2h`, `sequence` and `pipeline` print one time per\n"
        "way (the pool against the driver's allocation; pinned, staged and\n"
        "pageable copies against memcpy; replays against ops launched one by\n"
        "one; the pipeline against batches run one after another), each with\n"
        "its speed relative to the last.\n"
        "\n"
        "exit status: 0 when every op ran and passed its check, 1 otherwise\n"
        "(no usable device included), 2 on a usage error (a selector that\n"
        "does not parse included).\n",
        out);
}

static const struct bench_op *find_op(const char *name) {
  size_t count;
  const struct bench_op *ops = bench_ops(&count);
  for (size_t i = 0; i < count; i++)
    if (strcmp(ops[i].name, name) == 0)
      return &ops[i];
  return NULL;
}

/* Parse "N", "AxB" or "AxBxC" into dims (count in *ndims). */
static bool parse_spec(const char *s, size_t dims[3], unsigned *ndims) {
  *ndims = 0;
  while (*ndims < 3) {
    if (*s < '0' || *s > '9')
      return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || v == 0 || v > (1ull << 40))
      return false;
    dims[(*ndims)++] = (size_t)v;
    if (*end == '\0')
      return true;
    if (*end != 'x')
      return false;
    s = end + 1;
  }
  return false;
}

/* Shape of op for a size spec; false (with a message) when it does not
 * fit the op. */
static bool shape_for(const struct bench_op *op, const size_t dims[3],
                      unsigned nd, size_t shape[3]) {
  shape[0] = shape[1] = shape[2] = 0;
  if (op->ndim == 1 && nd == 1) {
    shape[0] = dims[0];
    return true;
  }
  if (op->ndim == 2 && nd <= 2) {
    shape[0] = dims[0];
    /* A single number: square for transpose, rows of the standard width
     * for the row ops. */
    shape[1] = nd == 2                              ? dims[1]
               : strcmp(op->name, "transpose") == 0 ? dims[0]
                                                    : op->defaults[0][1];
    return true;
  }
  if (op->ndim == 3 && (nd == 1 || nd == 3)) {
    shape[0] = dims[0];
    shape[1] = nd == 3 ? dims[1] : dims[0];
    shape[2] = nd == 3 ? dims[2] : dims[0];
    return true;
  }
  return false;
}

static void shape_text(const struct bench_result *r, char *buf, size_t size) {
  if (r->ndim == 1)
    snprintf(buf, size, "%zu", r->shape[0]);
  else if (r->ndim == 2)
    snprintf(buf, size, "%zux%zu", r->shape[0], r->shape[1]);
  else
    snprintf(buf, size, "%zux%zux%zu", r->shape[0], r->shape[1], r->shape[2]);
}

static void time_text(double s, char *buf, size_t size) {
  if (s >= 1.0)
    snprintf(buf, size, "%.3f s", s);
  else if (s >= 1e-3)
    snprintf(buf, size, "%.3f ms", s * 1e3);
  else
    snprintf(buf, size, "%.2f us", s * 1e6);
}

/* "name time [GB/s] (x.xx)" per column, each compared with the last one
 * (or, for pairs, each even column with the next). */
/* The columns of a row: op, dtype, shape (ROW_LEAD wide), then the rest. */
#define ROW_FORMAT "%-11s %-4s %-14s"
#define ROW_LEAD 31

/* Rows wider than the output (cli_width) continue on lines indented by
 * ROW_LEAD, broken between items. */
static void print_cols(const struct bench_result *r, const char *shape) {
  const int width = cli_width();
  int col = printf(ROW_FORMAT, r->op, r->dtype, shape);
  for (unsigned i = 0; i < r->num_cols; i++) {
    char t[24], item[128];
    time_text(r->cols[i].s, t, sizeof t);
    unsigned base = r->pairs ? (i | 1u) : r->num_cols - 1;
    int len = snprintf(item, sizeof item, "%s %s", r->cols[i].name, t);
    if (r->col_bytes > 0)
      len += snprintf(item + len, sizeof item - (size_t)len, " %.2f GB/s",
                      r->col_bytes / r->cols[i].s / 1e9);
    if (i != base)
      snprintf(item + len, sizeof item - (size_t)len, " (%.2fx)",
               r->cols[base].s / r->cols[i].s);
    cli_item(stdout, &col, i > 0 ? "; " : " ", item, ROW_LEAD + 1, width);
  }
  /* The check and its note: words, wrapped under the row's items. */
  char check[300];
  snprintf(check, sizeof check, "%s%s%s", r->verified ? "verified" : "not checked",
           r->note[0] ? "; " : "", r->note);
  if (col + 2 + (int)strlen(check) <= width) {
    printf("  %s\n", check);
    return;
  }
  printf("\n%*s", ROW_LEAD + 1, "");
  cli_wrap(stdout, check, ROW_LEAD + 1, ROW_LEAD + 1, width);
}

static void print_text(const struct bench_result *r,
                       const struct bench_peaks *peaks) {
  char shape[48], t[24], line[512];
  shape_text(r, shape, sizeof shape);
  if (r->failed) {
    snprintf(line, sizeof line, ROW_FORMAT " FAILED: %s", r->op, r->dtype,
             shape, r->note);
    cli_wrap(stdout, line, 0, ROW_LEAD + 1, cli_width());
    return;
  }
  if (r->is_launch) {
    snprintf(line, sizeof line, ROW_FORMAT " %.2f us per launch; bare "
             "clEnqueueNDRangeKernel %.2f us; kiln adds %.2f us",
             r->op, r->dtype, shape, r->kiln_us, r->raw_us,
             r->kiln_us - r->raw_us);
    cli_wrap(stdout, line, 0, ROW_LEAD + 1, cli_width());
    return;
  }
  if (r->num_cols > 0) {
    print_cols(r, shape);
    return;
  }
  time_text(r->median_s, t, sizeof t);
  double peak = r->flops ? peaks->gflops : peaks->gbps;
  printf(ROW_FORMAT " %10s %9.1f %-7s %6.1f%%  %s\n", r->op, r->dtype,
         shape, t, r->rate, r->flops ? "GFLOP/s" : "GB/s",
         peak > 0 ? 100.0 * r->rate / peak : 0.0,
         r->verified ? "verified" : "not checked");
}

static json_t *result_json(const struct bench_result *r,
                           const struct bench_peaks *peaks) {
  json_t *shape = json_array();
  for (unsigned i = 0; i < r->ndim; i++)
    json_array_append_new(shape, json_integer((json_int_t)r->shape[i]));
  json_t *o = json_pack("{s:s, s:s, s:o, s:b}", "op", r->op, "dtype", r->dtype,
                        "shape", shape, "verified", r->verified);
  if (r->failed) {
    json_object_set_new(o, "error", json_string(r->note));
    return o;
  }
  json_object_set_new(o, "median_s", json_real(r->median_s));
  if (r->is_launch) {
    json_object_set_new(o, "kiln_us", json_real(r->kiln_us));
    json_object_set_new(o, "raw_us", json_real(r->raw_us));
    json_object_set_new(o, "overhead_us", json_real(r->kiln_us - r->raw_us));
    return o;
  }
  if (r->num_cols > 0) {
    json_t *cols = json_object();
    for (unsigned i = 0; i < r->num_cols; i++)
      json_object_set_new(cols, r->cols[i].name, json_real(r->cols[i].s));
    json_object_set_new(o, "times_s", cols);
    if (r->col_bytes > 0)
      json_object_set_new(o, "bytes", json_real(r->col_bytes));
    return o;
  }
  double peak = r->flops ? peaks->gflops : peaks->gbps;
  json_object_set_new(o, r->flops ? "gflops" : "gbps", json_real(r->rate));
  if (peak > 0)
    json_object_set_new(o, "pct_peak", json_real(100.0 * r->rate / peak));
  return o;
}

static json_t *device_json(kiln_context *ctx, const struct bench_peaks *p) {
  const kiln_device_info *d = kiln_context_get_device_info(ctx);
  return json_pack(
      "{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:f, s:f, s:b}", "name",
      d->name, "vendor", d->vendor, "platform", d->platform_name,
      "driver_version", d->driver_version, "stable_id", d->stable_id, "type",
      kiln_device_type_name(d->type), "profile", kiln_context_get_profile(ctx),
      "compute_units", (int)d->compute_units, "peak_gbps", p->gbps,
      "peak_gflops", p->gflops, "peaks_cached", p->cached);
}

int kiln_cmd_bench(int argc, char **argv) {
  enum { OPT_REMEASURE = 256, OPT_NO_VERIFY };
  static const struct option longopts[] = {
      {"device", required_argument, NULL, 'd'},
      {"op", required_argument, NULL, 'o'},
      {"size", required_argument, NULL, 's'},
      {"runs", required_argument, NULL, 'r'},
      {"json", no_argument, NULL, 'j'},
      {"remeasure-peaks", no_argument, NULL, OPT_REMEASURE},
      {"no-verify", no_argument, NULL, OPT_NO_VERIFY},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  const char *selector = NULL, *op_list = NULL, *size_list = NULL;
  int runs = 7;
  bool json = false, remeasure = false, verify = true;
  cli args;
  cli_begin(&args, "kiln bench", argc, argv, "d:o:s:r:jh", longopts);
  for (int c; (c = cli_next(&args)) != -1;) {
    switch (c) {
    case 'd':
      selector = optarg;
      break;
    case 'o':
      op_list = optarg;
      if (cli_check_list("kiln bench", "--op", optarg) != CLI_OK)
        return CLI_USAGE;
      break;
    case 's':
      size_list = optarg;
      if (cli_check_list("kiln bench", "--size", optarg) != CLI_OK)
        return CLI_USAGE;
      break;
    case 'r': {
      char *end;
      long v = strtol(optarg, &end, 10);
      if (end == optarg || *end != '\0' || v < 5 || v > 101)
        return cli_usage_error("kiln bench", "--runs wants a number of runs "
                               "from 5 to 101, not '%s'", optarg);
      runs = (int)v;
      break;
    }
    case 'j':
      json = true;
      break;
    case OPT_REMEASURE:
      remeasure = true;
      break;
    case OPT_NO_VERIFY:
      verify = false;
      break;
    case 'h':
      usage(stdout);
      return CLI_OK;
    default:
      return CLI_USAGE;
    }
  }
  if (cli_no_operands(&args) != CLI_OK)
    return CLI_USAGE;

  /* The ops to run. */
  const struct bench_op *selected[MAX_SELECTED];
  size_t nsel = 0;
  if (op_list == NULL) {
    size_t count;
    const struct bench_op *ops = bench_ops(&count);
    for (size_t i = 0; i < count && nsel < MAX_SELECTED; i++)
      selected[nsel++] = &ops[i];
  } else {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", op_list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
      const struct bench_op *op = find_op(tok);
      if (op == NULL) {
        size_t count;
        const struct bench_op *ops = bench_ops(&count);
        const char *names[MAX_SELECTED];
        for (size_t i = 0; i < count && i < MAX_SELECTED; i++)
          names[i] = ops[i].name;
        const char *near =
            cli_suggest(tok, names, count < MAX_SELECTED ? count : MAX_SELECTED);
        if (near != NULL)
          return cli_usage_error("kiln bench", "unknown op '%s'; did you mean "
                                 "'%s'?", tok, near);
        return cli_usage_error("kiln bench", "unknown op '%s'", tok);
      }
      if (nsel == MAX_SELECTED)
        return cli_usage_error("kiln bench", "--op names more than %d ops",
                               MAX_SELECTED);
      selected[nsel++] = op;
    }
  }
  size_t sizes[MAX_SIZES][3];
  unsigned size_dims[MAX_SIZES];
  size_t nsizes = 0;
  if (size_list != NULL) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", size_list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
      if (nsizes == MAX_SIZES)
        return cli_usage_error("kiln bench", "--size gives more than %d sizes",
                               MAX_SIZES);
      if (!parse_spec(tok, sizes[nsizes], &size_dims[nsizes]))
        return cli_usage_error("kiln bench", "--size '%s' is not N, RxC or "
                               "MxNxK with each number from 1 to 2^40", tok);
      nsizes++;
    }
    for (size_t i = 0; i < nsel; i++)
      for (size_t j = 0; j < nsizes; j++) {
        size_t shape[3];
        if (!shape_for(selected[i], sizes[j], size_dims[j], shape)) {
          return cli_usage_error("kiln bench", "--size '%s' does not fit op "
                                 "%s (%s)", size_list, selected[i]->name,
                                 selected[i]->shape_help);
        }
      }
  }

  /* The device, a context, queues. */
  int status = 1;
  kiln_device_list *list = NULL;
  kiln_context *ctx = NULL;
  kiln_queue *queue = NULL, *pqueue = NULL;
  json_t *results = json ? json_array() : NULL;
  const kiln_device *device = NULL;
  status = cli_select_device("kiln bench", selector, &list, &device);
  if (status != CLI_OK)
    goto done;
  status = CLI_FAILURE;
  if (kiln_context_create(device, NULL, &ctx) != KILN_OK ||
      kiln_queue_create(ctx, 0, &queue) != KILN_OK ||
      kiln_queue_create(ctx, KILN_QUEUE_PROFILING, &pqueue) != KILN_OK) {
    fprintf(stderr, "kiln bench: %s\n", kiln_last_error());
    goto done;
  }
  const kiln_device_info *info = kiln_context_get_device_info(ctx);
  struct bench_peaks peaks;
  char err[512] = "";
  if (!bench_peaks_get(ctx, pqueue, remeasure, &peaks, err, sizeof err)) {
    fprintf(stderr, "kiln bench: measuring the device's peaks: %s\n", err);
    goto done;
  }
  if (!json) {
    const int width = cli_width();
    char line[sizeof peaks.path + 1024];
    snprintf(line, sizeof line, "device: %s (%s; profile %s)", info->name,
             info->platform_name, kiln_context_get_profile(ctx));
    cli_wrap(stdout, line, 0, 8, width);
    snprintf(line, sizeof line, "peaks:  %.1f GB/s (copy/triad/scale), %.1f "
             "GFLOP/s (fma)%s%s", peaks.gbps, peaks.gflops,
             peaks.cached ? ", cached in " : ", measured now",
             peaks.cached ? peaks.path : "");
    cli_wrap(stdout, line, 0, 8, width);
    printf("runs:   1 warm-up + median of %d\n\n", runs);
    printf(ROW_FORMAT " %10s %17s %7s  %s\n", "op", "type", "shape", "median",
           "rate", "% peak", "check");
    fflush(stdout);
  }
  struct bench_env env = {ctx, queue, info, runs, verify};
  bool all_ok = true;
  for (size_t i = 0; i < nsel; i++) {
    const struct bench_op *op = selected[i];
    size_t count = nsizes ? nsizes : BENCH_MAX_DEFAULTS;
    for (size_t j = 0; j < count; j++) {
      struct bench_result r;
      memset(&r, 0, sizeof r);
      snprintf(r.op, sizeof r.op, "%s", op->name);
      r.dtype = op->dtype;
      r.ndim = op->ndim;
      if (nsizes) {
        shape_for(op, sizes[j], size_dims[j], r.shape);
      } else {
        if (op->defaults[j][0] == 0)
          break;
        memcpy(r.shape, op->defaults[j], sizeof r.shape);
      }
      if (!op->run(&env, &r)) {
        r.failed = true;
        all_ok = false;
      }
      if (json)
        json_array_append_new(results, result_json(&r, &peaks));
      else {
        print_text(&r, &peaks);
        fflush(stdout);
      }
    }
  }
  if (json) {
    json_t *doc =
        json_pack("{s:s, s:o, s:O}", "schema", "kiln-bench/1", "device",
                  device_json(ctx, &peaks), "results", results);
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (text != NULL) {
      printf("%s\n", text);
      free(text);
    }
    json_decref(doc);
  }
  status = all_ok ? 0 : 1;
done:
  json_decref(results);
  kiln_queue_destroy(queue);
  kiln_queue_destroy(pqueue);
  kiln_context_destroy(ctx);
  kiln_device_list_destroy(list);
  return status;
}
