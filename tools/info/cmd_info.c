/* `kiln info`: the clinfo-style report of every platform and device, kiln's
 * own view of each device (stable id, profile, quirks), the compact list,
 * selector explanations, the device check and the doctor. */
#include "cli/cli.h"
#include "commands.h"
#include "info.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

/* Bounds on what a driver may claim: a broken ICD must not make the tool
 * allocate without limit. */
#define MAX_PLATFORMS 64
#define MAX_DEVICES 256
/* Width of the label column of the text report, as clinfo's, on a line
 * of at least LABEL_WIDTH + MIN_VALUE_WIDTH columns; narrower lines give
 * the label half. */
#define LABEL_WIDTH 44
#define MIN_VALUE_WIDTH 36

/* The columns the text report fits to (cli_width: the terminal's, 80 when
 * not a terminal, unlimited under --wide) and its label column. */
static int wrap_width = 80;
static int label_width = LABEL_WIDTH;

static void usage(FILE *out) {
  fputs(
      "usage: kiln info [options]\n"
      "\n"
      "Report every OpenCL platform and device the ICD loader offers: each\n"
      "standard query of OpenCL 1.2 to 3.0 the device answers, then kiln's own\n"
      "view (selector, stable id, matched profile, quirks).\n"
      "\n"
      "options:\n"
      "  -l, --list          compact platform/device tree, one line each\n"
      "  -j, --json          JSON document (schema \"kiln-info/1\", see\n"
      "                      kiln-info(1))\n"
      "  -d, --device SEL    only the devices selector SEL takes (grammar as\n"
      "                      KILN_DEVICE: gpu, cpu, pocl, 0:1, name:TEXT, ...)\n"
      "      --select SEL    the same as --device (its old name)\n"
      "  -e, --explain       every device with the reason the selector (SEL,\n"
      "                      else KILN_DEVICE, else the default) took or\n"
      "                      refused it; the verdicts are summed up at the end\n"
      "  -c, --check         build and run a small kernel and kiln's sum op on\n"
      "                      each device shown; print PASS/FAIL (with a build\n"
      "                      log excerpt on failure), summed up at the end\n"
      "  -D, --doctor        diagnose the OpenCL installation (ICD files,\n"
      "                      loader variables, driver libraries, device node\n"
      "                      permissions, failing platforms, kernel builds);\n"
      "                      exit 0 when all is well, 1 when a problem is found\n"
      "      --wide          do not wrap the report to the terminal's width\n"
      "                      (or to 80 columns when not a terminal)\n"
      "  -h, --help          this help\n"
      "\n"
      "Unsupported queries (the device's version or extensions lack them) show\n"
      "as \"(unsupported: ...)\"; failed queries as \"(error: CL_...)\".\n"
      "\n"
      "exit status: 0 when at least one device is shown, 1 when none (or, with\n"
      "--doctor, when a problem was found; with --check, when a check\n"
      "failed), 2 on a usage error (KILN_DEVICE or --device that does not\n"
      "parse included).\n",
      out);
}

/* Cut a name for one-line display (the list, headings). */
static void shorten(char *name) {
  if (name != NULL && strlen(name) > 160)
    strcpy(name + 150, "[...]");
}

static void model_free(info_model *m) {
  for (size_t p = 0; p < m->platform_count; p++) {
    for (size_t d = 0; d < m->platforms[p].device_count; d++)
      free(m->platforms[p].devices[d].check_detail);
    free(m->platforms[p].devices);
  }
  free(m->platforms);
  kiln_selection_destroy(m->selection);
  kiln_device_list_destroy(m->list);
}

/* Enumerate through the ICD loader directly (so platforms kiln skipped are
 * still reported) and pair each device with kiln's record. Returns 2 on a
 * selector syntax error, 0 otherwise. */
static int model_build(info_model *m) {
  cl_uint n = 0;
  cl_int err = clGetPlatformIDs(0, NULL, &n);
  if (err != CL_SUCCESS) {
    m->platform_error = err;
    n = 0;
  }
  if (n > MAX_PLATFORMS)
    n = MAX_PLATFORMS;
  if (n > 0) {
    cl_platform_id ids[MAX_PLATFORMS];
    cl_uint got = 0;
    err = clGetPlatformIDs(n, ids, &got);
    if (err != CL_SUCCESS) {
      m->platform_error = err;
      got = 0;
    }
    if (got > n)
      got = n;
    m->platforms = calloc(got ? got : 1, sizeof(*m->platforms));
    if (m->platforms == NULL)
      return 1;
    m->platform_count = got;
    for (cl_uint p = 0; p < got; p++) {
      info_platform *plat = &m->platforms[p];
      plat->id = ids[p];
      cl_uint nd = 0;
      err = clGetDeviceIDs(ids[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
      if (err != CL_SUCCESS) {
        plat->device_error = err;
        continue;
      }
      if (nd > MAX_DEVICES)
        nd = MAX_DEVICES;
      cl_device_id devs[MAX_DEVICES];
      cl_uint gotd = 0;
      err = nd ? clGetDeviceIDs(ids[p], CL_DEVICE_TYPE_ALL, nd, devs, &gotd)
               : CL_DEVICE_NOT_FOUND;
      if (err != CL_SUCCESS) {
        plat->device_error = err;
        continue;
      }
      if (gotd > nd)
        gotd = nd;
      plat->devices = calloc(gotd ? gotd : 1, sizeof(*plat->devices));
      if (plat->devices == NULL)
        return 1;
      plat->device_count = gotd;
      for (cl_uint d = 0; d < gotd; d++) {
        plat->devices[d].id = devs[d];
        plat->devices[d].index = d;
        plat->devices[d].taken = true;
        plat->devices[d].check = -1;
      }
    }
  }

  if (kiln_device_list_create(&m->list) != KILN_OK)
    m->list = NULL;
  size_t count = m->list ? kiln_device_list_get_count(m->list) : 0;
  for (size_t i = 0; i < count; i++) {
    const kiln_device *kd = kiln_device_list_get(m->list, i);
    const kiln_device_info *ki = kiln_device_get_info(kd);
    cl_device_id cid = kiln_device_get_cl_device(kd);
    for (size_t p = 0; p < m->platform_count; p++) {
      for (size_t d = 0; d < m->platforms[p].device_count; d++) {
        info_device *dev = &m->platforms[p].devices[d];
        /* Handles identify the device; indices are the fallback for a
         * loader that hands out different handles per call. */
        if (dev->kdev == NULL &&
            (dev->id == cid || (cid == NULL && ki->platform_index == p &&
                                ki->device_index == d))) {
          dev->kdev = kd;
          dev->list_index = i;
        }
      }
    }
  }

  if ((m->selector != NULL || m->explain) && m->list != NULL) {
    if (kiln_selection_create(m->list, m->selector, &m->selection) != KILN_OK) {
      fprintf(stderr, "kiln info: %s\n", kiln_last_error());
      return 2;
    }
    for (size_t p = 0; p < m->platform_count; p++) {
      for (size_t d = 0; d < m->platforms[p].device_count; d++) {
        info_device *dev = &m->platforms[p].devices[d];
        dev->taken = false;
        if (dev->kdev != NULL)
          dev->explain = kiln_selection_get_explanation(m->selection, dev->list_index,
                                                &dev->taken);
      }
    }
  }
  return 0;
}

static size_t shown_kiln_devices(const info_model *m) {
  size_t n = 0;
  for (size_t p = 0; p < m->platform_count; p++)
    for (size_t d = 0; d < m->platforms[p].device_count; d++) {
      const info_device *dev = &m->platforms[p].devices[d];
      if (dev->kdev != NULL && info_device_shown(m, dev) && dev->taken)
        n++;
    }
  return n;
}

static void run_checks(info_model *m) {
  m->checked = true;
  for (size_t p = 0; p < m->platform_count; p++)
    for (size_t d = 0; d < m->platforms[p].device_count; d++) {
      info_device *dev = &m->platforms[p].devices[d];
      if (dev->kdev == NULL || !info_device_shown(m, dev) || !dev->taken)
        continue;
      char detail[2048];
      dev->check = info_check_device(dev->kdev, detail, sizeof(detail),
                                     &dev->check_ms);
      dev->check_detail = strdup(detail);
    }
}

/* Print "label value" with the value wrapped under its column, within
 * wrap_width. Lists wrap between items: at the first of ", ", " | ", "; "
 * that the value uses, else at spaces; an item wider than the column (a
 * path) is cut across lines. */
static void print_row(FILE *out, int indent, const char *label,
                      const char *value) {
  const int lw = label_width;
  int pad = lw - indent;
  if (value[0] == '\0') {
    fprintf(out, "%*s%s\n", indent, "", label);
    return;
  }
  if ((int)strlen(label) > pad) {
    /* A label wider than its column has a line of its own (wrapped on a
     * narrow terminal), the value under the column. */
    fprintf(out, "%*s", indent, "");
    cli_wrap(out, label, indent, indent + 2, wrap_width);
    fprintf(out, "%*s", lw + 1, "");
  } else {
    fprintf(out, "%*s%-*s ", indent, "", pad, label);
  }
  static const char *seps[] = {", ", " | ", "; ", " "};
  const char *sep = " ";
  for (size_t i = 0; i < sizeof(seps) / sizeof(seps[0]); i++) {
    if (strstr(value, seps[i]) != NULL) {
      sep = seps[i];
      break;
    }
  }
  const size_t start = (size_t)lw + 1, width = (size_t)wrap_width;
  const size_t room = width > start ? width - start : 1;
  size_t seplen = strlen(sep);
  size_t col = start;
  size_t pending = 0; /* trailing blanks of the last separator, unprinted */
  const char *p = value;
  while (*p) {
    const char *next = strstr(p, sep);
    /* An item keeps its separator, so the line break follows it; the
     * separator's trailing blank is printed only if the line goes on. */
    size_t item = next ? (size_t)(next - p) + seplen : strlen(p);
    size_t blanks = 0;
    while (blanks < item && p[item - 1 - blanks] == ' ')
      blanks++;
    if (col > start && col + pending + item - blanks > width) {
      fprintf(out, "\n%*s", (int)start, "");
      col = start;
      pending = 0;
    }
    size_t left = item - blanks;
    while (col == start && left > room) {
      fprintf(out, "%.*s\n%*s", (int)room, p, (int)start, "");
      p += room;
      item -= room;
      left -= room;
    }
    fprintf(out, "%*s%.*s", (int)pending, "", (int)left, p);
    col += pending + left;
    pending = blanks;
    p += item;
  }
  fputc('\n', out);
}

static void print_props(FILE *out, int indent, const info_subject *subject) {
  for (size_t i = 0; i < info_prop_count(subject->target); i++) {
    const info_prop *prop = info_prop_at(subject->target, i);
    info_result r;
    info_query(subject, prop, &r);
    /* Vendor extension rows (NVIDIA, AMD, Intel, ...) are noise on every
     * other device: the text report leaves them out, as clinfo does; the
     * JSON keeps every key. */
    if (r.state == INFO_UNSUPPORTED && prop->min_version == 0) {
      info_result_free(&r);
      continue;
    }
    char *text = info_format_text(prop, &r);
    print_row(out, indent, prop->label, text);
    free(text);
    info_result_free(&r);
  }
}

/* Each op's parameters a context on the device would use (the ops with a
 * space, kiln/kiln_tune.h), where they come from, whether they run at all
 * (the matrix units: why not), and the tuning file (or why it, or a
 * database row, is ignored). */
static void print_tuning(FILE *out, const kiln_device *kdev) {
  static const char *const ops[][2] = {{"gemm", "GEMM"},
                                       {"transpose", "Transpose"},
                                       {"reduce", "Reduce"},
                                       {"elementwise", "Elementwise"},
                                       {"gemm_mma", "GEMM (matrix units)"},
                                       {"conv2d", "Convolution"},
                                       {"gemm_cpu", "GEMM (CPU)"},
                                       {"transpose_cpu", "Transpose (CPU)"}};
  kiln_context *ctx = NULL;
  kiln_tuning_info *t = malloc(sizeof *t);
  if (t == NULL || kiln_context_create(kdev, NULL, &ctx) != KILN_OK) {
    print_row(out, 6, "GEMM params", kiln_last_error());
    free(t);
    return;
  }
  char label[64];
  bool ok = true;
  for (size_t i = 0; i < sizeof ops / sizeof ops[0] && ok; i++) {
    snprintf(label, sizeof label, "%s params", ops[i][1]);
    ok = kiln_tuning_get_info(ctx, ops[i][0], t) == KILN_OK;
    if (!ok) {
      print_row(out, 6, label, kiln_last_error());
      break;
    }
    char buf[KILN_TUNING_TEXT_CAPACITY + 64];
    snprintf(buf, sizeof buf, "%s%s%s", t->source, t->params[0] ? ": " : "",
             t->params);
    print_row(out, 6, label, buf);
    snprintf(label, sizeof label, "%s tuned", ops[i][1]);
    if (t->figures[0] != '\0')
      print_row(out, 6, label, t->figures);
    snprintf(label, sizeof label, "%s database", ops[i][1]);
    if (t->database[0] != '\0')
      print_row(out, 6, label, t->database);
    /* Whether ops run the kernels at all, and why not (the matrix units:
     * probe, vendor, gate). */
    snprintf(label, sizeof label, "%s used", ops[i][1]);
    if (t->used[0] != '\0')
      print_row(out, 6, label, t->used);
  }
  /* The file and what was ignored are the device's, for every op; read
   * after every op's parameters, so that each op's rejection shows. */
  if (ok) {
    print_row(out, 6, "Tuning file", t->path[0] ? t->path : "(none)");
    if (t->ignored[0] != '\0')
      print_row(out, 6, "Tuning ignored", t->ignored);
  }
  kiln_context_destroy(ctx);
  free(t);
}

static void print_kiln_view(FILE *out, const info_device *dev) {
  fprintf(out, "    kiln:\n");
  if (dev->kdev == NULL) {
    print_row(out, 6, "Status", "skipped by kiln (see the problems below)");
    return;
  }
  const kiln_device_info *ki = kiln_device_get_info(dev->kdev);
  char buf[512];
  snprintf(buf, sizeof(buf), "%zu:%zu", ki->platform_index, ki->device_index);
  print_row(out, 6, "Selector", buf);
  print_row(out, 6, "Stable id", ki->stable_id);
  print_row(out, 6, "Profile", ki->profile);
  buf[0] = '\0';
  for (unsigned bit = 1; bit != 0; bit <<= 1) {
    if (!(ki->quirks & bit))
      continue;
    const char *name = kiln_quirk_name(bit);
    size_t len = strlen(buf);
    snprintf(buf + len, sizeof(buf) - len, "%s%s", len ? ", " : "",
             name ? name : "unknown");
  }
  print_row(out, 6, "Quirks", buf[0] ? buf : "(none)");
  snprintf(buf, sizeof(buf), "fp16 %s, fp64 %s, sub-groups %s",
           ki->fp16 ? "yes" : "no", ki->fp64 ? "yes" : "no",
           ki->subgroups ? "yes" : "no");
  print_row(out, 6, "Capabilities", buf);
  print_tuning(out, dev->kdev);
  if (dev->explain != NULL)
    print_row(out, 6, "Selection", dev->explain);
  if (dev->check >= 0) {
    snprintf(buf, sizeof(buf), "%s (%.0f ms)", dev->check ? "PASS" : "FAIL",
             dev->check_ms);
    print_row(out, 6, "Check", buf);
    if (!dev->check && dev->check_detail)
      fprintf(out, "%s\n", dev->check_detail);
  }
}

static void print_problems(FILE *out, const info_model *m) {
  char line[1024];
  if (m->platform_error != 0) {
    snprintf(line, sizeof line, "clGetPlatformIDs failed: %s (%d): the ICD "
             "loader found no usable platform; run `kiln info --doctor`",
             kiln_cl_error_name(m->platform_error), m->platform_error);
    fputc('\n', out);
    cli_wrap(out, line, 0, 2, wrap_width);
  }
  if (m->list == NULL) {
    snprintf(line, sizeof line, "kiln could not enumerate devices: %s",
             kiln_last_error());
    fputc('\n', out);
    cli_wrap(out, line, 0, 2, wrap_width);
    return;
  }
  size_t n = kiln_device_list_get_problem_count(m->list);
  bool heading = false;
  for (size_t i = 0; i < n; i++) {
    const kiln_device_problem *p = kiln_device_list_get_problem(m->list, i);
    if (p == NULL || info_problem_repeats_platform_error(m, p))
      continue;
    if (!heading)
      fprintf(out, "\nPlatforms and devices kiln skipped:\n");
    heading = true;
    fputs("  ", out);
    cli_wrap(out, p->message, 2, 4, wrap_width);
  }
}

static void print_report(FILE *out, const info_model *m) {
  fprintf(out, "kiln %s: %zu platform%s\n", kiln_version(), m->platform_count,
          m->platform_count == 1 ? "" : "s");
  if (m->selection != NULL)
    fprintf(out, "selector: %s\n", kiln_selection_get_selector(m->selection));
  for (size_t p = 0; p < m->platform_count; p++) {
    const info_platform *plat = &m->platforms[p];
    bool any = false;
    for (size_t d = 0; d < plat->device_count; d++)
      any = any || info_device_shown(m, &plat->devices[d]);
    if (m->selector != NULL && !m->explain && !any)
      continue;
    char *name = info_query_string(INFO_PLATFORM, plat->id, CL_PLATFORM_NAME);
    char *version = info_query_string(INFO_PLATFORM, plat->id, CL_PLATFORM_VERSION);
    char *exts = info_query_string(INFO_PLATFORM, plat->id, CL_PLATFORM_EXTENSIONS);
    shorten(name);
    char heading[256];
    snprintf(heading, sizeof heading, "Platform %zu: %s", p,
             name ? name : "(name query failed)");
    fputc('\n', out);
    cli_wrap(out, heading, 0, 2, wrap_width);
    info_subject ps = {INFO_PLATFORM, plat->id, info_parse_version(version), exts};
    print_props(out, 2, &ps);
    free(name);
    free(version);
    free(exts);
    if (plat->device_error != 0) {
      char none[128];
      snprintf(none, sizeof none, "  Devices: none (clGetDeviceIDs: %s)",
               kiln_cl_error_name(plat->device_error));
      cli_wrap(out, none, 0, 4, wrap_width);
    }
    for (size_t d = 0; d < plat->device_count; d++) {
      const info_device *dev = &plat->devices[d];
      if (!info_device_shown(m, dev))
        continue;
      char *dname = info_query_string(INFO_DEVICE, dev->id, CL_DEVICE_NAME);
      char *dver = info_query_string(INFO_DEVICE, dev->id, CL_DEVICE_VERSION);
      char *dexts = info_query_string(INFO_DEVICE, dev->id, CL_DEVICE_EXTENSIONS);
      shorten(dname);
      snprintf(heading, sizeof heading, "Device %zu:%zu: %s", p, d,
               dname ? dname : "(name query failed)");
      fputs("\n  ", out);
      cli_wrap(out, heading, 2, 4, wrap_width);
      info_subject ds = {INFO_DEVICE, dev->id, info_parse_version(dver), dexts};
      print_props(out, 4, &ds);
      free(dname);
      free(dver);
      free(dexts);
      print_kiln_view(out, dev);
    }
  }
  print_problems(out, m);
}

/* --explain's and --check's verdicts, one line per device, at the end of
 * the long report where a reader sees them. */
static void print_verdicts(FILE *out, const info_model *m) {
  if (m->selection == NULL && !m->checked)
    return;
  fprintf(out, "\nSummary");
  if (m->selection != NULL)
    fprintf(out, " (selector %s)", kiln_selection_get_selector(m->selection));
  fprintf(out, ":\n");
  for (size_t p = 0; p < m->platform_count; p++)
    for (size_t d = 0; d < m->platforms[p].device_count; d++) {
      const info_device *dev = &m->platforms[p].devices[d];
      if (!info_device_shown(m, dev))
        continue;
      char *name = info_query_string(INFO_DEVICE, dev->id, CL_DEVICE_NAME);
      shorten(name);
      char line[1024];
      size_t len = (size_t)snprintf(line, sizeof line, "%zu:%zu %s:", p, d,
                                    name ? name : "(name query failed)");
      free(name);
      if (dev->kdev == NULL)
        len += (size_t)snprintf(line + len, sizeof line - len,
                                " skipped by kiln");
      else if (m->selection != NULL && len < sizeof line)
        len += (size_t)snprintf(line + len, sizeof line - len, " %s",
                                dev->explain ? dev->explain : "refused");
      if (dev->check >= 0 && len < sizeof line)
        snprintf(line + len, sizeof line - len, "%s check %s (%.0f ms)",
                 m->selection != NULL ? ";" : "", dev->check ? "PASS" : "FAIL",
                 dev->check_ms);
      fputs("  ", out);
      cli_wrap(out, line, 2, 6, wrap_width);
    }
}

/* Exit status 1 must never come without a word: say that no device was
 * shown and why, with each device's reason as --explain gives it. */
static void explain_nothing_shown(FILE *out, const info_model *m) {
  if (m->selection == NULL) {
    fprintf(out, "kiln info: no usable OpenCL device%s\n",
            m->platform_count == 0 ? " (no OpenCL platform; run `kiln info "
                                     "--doctor`)" : "");
    return;
  }
  fprintf(out, "kiln info: no device matches '%s'\n",
          kiln_selection_get_selector(m->selection));
  size_t devices = 0;
  for (size_t p = 0; p < m->platform_count; p++)
    for (size_t d = 0; d < m->platforms[p].device_count; d++) {
      const info_device *dev = &m->platforms[p].devices[d];
      char *name = info_query_string(INFO_DEVICE, dev->id, CL_DEVICE_NAME);
      shorten(name);
      fprintf(out, "  %zu:%zu %s: %s\n", p, d, name ? name : "(name query failed)",
              dev->kdev == NULL ? "skipped by kiln (see `kiln info`)"
              : dev->explain    ? dev->explain
                                : "refused");
      free(name);
      devices++;
    }
  if (devices == 0)
    fprintf(out, "  (there is no OpenCL device at all; run `kiln info --doctor`)\n");
}

static void print_list(FILE *out, const info_model *m) {
  for (size_t p = 0; p < m->platform_count; p++) {
    const info_platform *plat = &m->platforms[p];
    size_t last = SIZE_MAX;
    for (size_t d = 0; d < plat->device_count; d++)
      if (info_device_shown(m, &plat->devices[d]))
        last = d;
    if (m->selector != NULL && !m->explain && last == SIZE_MAX)
      continue;
    char *name = info_query_string(INFO_PLATFORM, plat->id, CL_PLATFORM_NAME);
    shorten(name);
    char heading[256];
    snprintf(heading, sizeof heading, "Platform #%zu: %s", p,
             name ? name : "(name query failed)");
    cli_wrap(out, heading, 0, 2, wrap_width);
    free(name);
    for (size_t d = 0; d < plat->device_count; d++) {
      const info_device *dev = &plat->devices[d];
      if (!info_device_shown(m, dev))
        continue;
      char *dname = info_query_string(INFO_DEVICE, dev->id, CL_DEVICE_NAME);
      shorten(dname);
      char line[1024];
      size_t len = (size_t)snprintf(line, sizeof line, "Device #%zu: %s", d,
                                    dname ? dname : "(name query failed)");
      free(dname);
      if (dev->kdev != NULL) {
        const kiln_device_info *ki = kiln_device_get_info(dev->kdev);
        len += (size_t)snprintf(line + len, sizeof line - len, "  [%s, %s]",
                                ki->profile, ki->stable_id);
      } else {
        len += (size_t)snprintf(line + len, sizeof line - len,
                                "  [skipped by kiln]");
      }
      if (dev->explain != NULL && len < sizeof line)
        len += (size_t)snprintf(line + len, sizeof line - len, "  %s",
                                dev->explain);
      if (dev->check >= 0 && len < sizeof line)
        snprintf(line + len, sizeof line - len, "  %s",
                 dev->check ? "PASS" : "FAIL");
      fprintf(out, " %s-- ", d == last ? "`" : "+");
      cli_wrap(out, line, 4, 6, wrap_width);
      if (dev->check == 0 && dev->check_detail)
        fprintf(out, "%s\n", dev->check_detail);
    }
  }
}

int kiln_cmd_info(int argc, char **argv) {
  enum { OPT_SELECT = 256 };
  static const struct option longopts[] = {
      {"list", no_argument, NULL, 'l'},
      {"json", no_argument, NULL, 'j'},
      {"device", required_argument, NULL, 'd'},
      {"select", required_argument, NULL, OPT_SELECT},
      {"explain", no_argument, NULL, 'e'},
      {"check", no_argument, NULL, 'c'},
      {"doctor", no_argument, NULL, 'D'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  bool list = false, json = false, check = false, doctor = false;
  info_model model = {0};
  cli args;
  cli_begin(&args, "kiln info", argc, argv, "ljd:ecDh", longopts);
  for (int c; (c = cli_next(&args)) != -1;) {
    switch (c) {
    case 'l': list = true; break;
    case 'j': json = true; break;
    case 'd':
    case OPT_SELECT: model.selector = optarg; break;
    case 'e': model.explain = true; break;
    case 'c': check = true; break;
    case 'D': doctor = true; break;
    case 'h': usage(stdout); return CLI_OK;
    default: return CLI_USAGE;
    }
  }
  if (cli_no_operands(&args) != CLI_OK)
    return CLI_USAGE;
  if (list && json)
    return cli_usage_error("kiln info", "--list and --json exclude each other");
  wrap_width = cli_width();
  if (wrap_width < 40)
    wrap_width = 40;
  label_width = wrap_width >= LABEL_WIDTH + MIN_VALUE_WIDTH ? LABEL_WIDTH
                                                            : wrap_width / 2;

  int rc;
  json_t *doctor_json = NULL;
  int doctor_rc = 0;
  if (doctor) {
    /* First, before anything loads an ICD: it forks to probe them. */
    doctor_rc = info_doctor(stdout, json ? &doctor_json : NULL);
    if (!json)
      return doctor_rc;
  }
  /* A KILN_DEVICE that does not parse is a usage error here too, though
   * the report shows every device whatever it says (--device filters);
   * the doctor reports it as one of its findings instead. */
  if (!doctor && model.selector == NULL && !model.explain &&
      cli_check_selector("kiln info", NULL) != CLI_OK) {
    json_decref(doctor_json);
    return CLI_USAGE;
  }
  rc = model_build(&model);
  if (rc != 0) {
    json_decref(doctor_json);
    model_free(&model);
    return rc;
  }
  if (check)
    run_checks(&model);
  if (json) {
    json_t *doc = info_json_document(&model, doctor_json);
    if (json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0)
      fprintf(stderr, "kiln info: writing JSON failed\n");
    fputc('\n', stdout);
    json_decref(doc);
  } else if (list) {
    print_list(stdout, &model);
  } else {
    print_report(stdout, &model);
    print_verdicts(stdout, &model);
  }
  size_t shown = shown_kiln_devices(&model);
  rc = shown > 0 ? 0 : 1;
  if (shown == 0 && !doctor)
    explain_nothing_shown(stderr, &model);
  if (doctor)
    rc = doctor_rc;
  else if (check) {
    for (size_t p = 0; p < model.platform_count; p++)
      for (size_t d = 0; d < model.platforms[p].device_count; d++)
        if (model.platforms[p].devices[d].check == 0)
          rc = 1;
  }
  model_free(&model);
  return rc;
}
