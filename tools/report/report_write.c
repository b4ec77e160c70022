/* kiln report's two files: report.json (kiln-report/1: everything, every
 * figure with the command that produced it) and summary.md (the same for a
 * reader). Paths inside the folder are relative to it, so the folder can
 * be sent as it is. */
#define _GNU_SOURCE
#include "report_plan.h"
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln/kiln.h"

/* path relative to the report's folder when inside it. */
static const char *rel(const report *r, const char *path) {
  const size_t n = strlen(r->out);
  if (strncmp(path, r->out, n) == 0 && path[n] == '/')
    return path + n + 1;
  return path;
}

static json_t *str_or_null(const char *s) {
  return s != NULL && s[0] ? json_string(s) : json_null();
}

static json_t *device_json(const report *r) {
  if (r->selector[0] == '\0')
    return json_null();
  return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "name",
                   r->device_name, "vendor", r->device_vendor,
                   "driver_version", r->driver, "platform", r->platform,
                   "device_version", r->device_version, "type",
                   kiln_device_type_name((kiln_device_type)r->device_type),
                   "profile", r->profile, "stable_id", r->stable_id,
                   "selector", r->selector);
}

/* The value of step's figure, or -1 when the report has none. */
static double figure(const report *r, const char *step_name, const char *name) {
  for (size_t i = 0; i < r->nsteps; i++) {
    if (strcmp(r->steps[i].name, step_name) != 0)
      continue;
    size_t j;
    json_t *f;
    json_array_foreach(r->steps[i].figures, j, f) {
      if (strcmp(json_string_value(json_object_get(f, "name")), name) == 0)
        return json_number_value(json_object_get(f, "value"));
    }
  }
  return -1;
}

/* Issue 22's speed targets, from the figures this report has: kiln over
 * cuBLAS at 4096 and 8192 (SGEMM with TF32 off, at least 0.9; bf16 and f16
 * GEMM, at least 0.5) and the MLP's f32 step over its bf16 step (at least
 * 5). An array of {target, value, goal, met}; empty when none applies. */
static json_t *targets(const report *r) {
  json_t *out = json_array();
  static const struct {
    const char *op;
    double goal;
  } gemms[] = {{"sgemm", 0.9}, {"gemm_bf16", 0.5}, {"gemm_f16", 0.5}};
  static const char *const sizes[] = {"4096", "8192"};
  for (size_t g = 0; g < 3; g++)
    for (size_t n = 0; n < 2; n++) {
      char name[96], what[160];
      snprintf(name, sizeof name, "%s %s kiln/reference", gemms[g].op,
               sizes[n]);
      const double v = figure(r, "compare-cublas", name);
      if (v < 0)
        continue;
      snprintf(what, sizeof what, "%s %s: kiln / cuBLAS%s", gemms[g].op,
               sizes[n], g == 0 ? " (TF32 off)" : "");
      json_array_append_new(out, json_pack("{s:s, s:f, s:f, s:b}", "target",
                                           what, "value", v, "goal",
                                           gemms[g].goal, "met",
                                           v >= gemms[g].goal));
    }
  const double f32 = figure(r, "train mlp f32", "median step"),
               bf16 = figure(r, "train mlp bf16", "median step");
  if (f32 > 0 && bf16 > 0)
    json_array_append_new(
        out, json_pack("{s:s, s:f, s:f, s:b}", "target",
                       "MLP step: f32 time / bf16 time", "value", f32 / bf16,
                       "goal", 5.0, "met", f32 / bf16 >= 5.0));
  return out;
}

static json_t *build_json(report *r) {
  json_t *steps = json_array(), *figures = json_array();
  for (size_t i = 0; i < r->nsteps; i++) {
    const step *s = &r->steps[i];
    json_t *o = json_pack(
        "{s:s, s:s, s:o, s:s, s:o, s:f, s:f, s:o, s:o, s:o}", "name", s->name,
        "status", step_status_name(s->status), "reason", str_or_null(s->reason),
        "command", s->command,
        "exit_code", s->exit_code >= 0 ? json_integer(s->exit_code) : json_null(),
        "duration_s", s->seconds, "limit_s", s->limit_s, "log",
        str_or_null(s->log[0] ? rel(r, s->log) : NULL), "stdout",
        str_or_null(s->out[0] ? rel(r, s->out) : NULL), "figures",
        s->figures ? json_incref(s->figures) : json_array());
    json_array_append_new(steps, o);
    size_t j;
    json_t *f;
    json_array_foreach(s->figures, j, f) {
      json_t *flat = json_deep_copy(f);
      json_object_set_new(flat, "step", json_string(s->name));
      json_object_set_new(flat, "command", json_string(s->command));
      json_array_append_new(figures, flat);
    }
  }
  char created[32];
  const time_t now = time(NULL);
  strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  json_t *doc = json_pack(
      "{s:s, s:s, s:s, s:s, s:f, s:f, s:o, s:o, s:o}", "schema",
      "kiln-report/1", "kiln_version", kiln_version(), "created", created,
      "scale", r->quick ? "quick" : "full", "time_limit_s",
      r->deadline - r->start, "duration_s", tools_now() - r->start, "device",
      device_json(r), "diagnosis", str_or_null(r->diagnosis), "build_tree",
      str_or_null(r->build[0] ? r->build : NULL));
  if (r->build[0] == '\0')
    json_object_set_new(doc, "build_tree_why", json_string(r->build_why));
  json_object_set_new(doc, "steps", steps);
  json_object_set_new(doc, "figures", figures);
  json_object_set_new(doc, "tuning_file",
                      str_or_null(r->tuning_file[0] ? rel(r, r->tuning_file) : NULL));
  json_object_set_new(doc, "tuning_db_rows",
                      str_or_null(r->db_rows[0] ? rel(r, r->db_rows) : NULL));
  if (r->tuning_why[0])
    json_object_set_new(doc, "tuning_why", json_string(r->tuning_why));
  json_object_set_new(doc, "targets", targets(r));
  json_object_set_new(doc, "matrix_units",
                      str_or_null(r->mma_verdict[0] ? r->mma_verdict : NULL));
  static const char *const groups[] = {"info",  "tests",  "tune",
                                       "bench", "cublas", "train"};
  json_t *ran = json_array();
  for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
    if (r->groups & (1u << i))
      json_array_append_new(ran, json_string(groups[i]));
  json_object_set_new(doc, "step_groups", ran);
  /* kiln info --json's document, as it is: every device and platform. */
  for (size_t i = 0; i < r->nsteps; i++)
    if (strcmp(r->steps[i].name, "info") == 0 && r->steps[i].status == STEP_OK) {
      json_t *info = json_load_file(r->steps[i].out, 0, NULL);
      json_object_set_new(doc, "info", info ? info : json_null());
    }
  return doc;
}

/* Markdown table cells hold no '|' or newline. */
static void cell(FILE *f, const char *text) {
  for (const char *c = text; *c; c++) {
    if (*c == '|')
      fputc('\\', f);
    fputc(*c == '\n' ? ' ' : *c, f);
  }
}

static void write_summary(report *r, FILE *f) {
  fprintf(f, "# kiln report: %s\n\n", r->selector[0] ? r->device_name : "no device");
  fprintf(f, "- kiln %s, %s scale%s, %.0f s of a %.0f s limit\n", kiln_version(),
          r->quick ? "small (quick)" : "full",
          r->quick && r->device_type != KILN_DEVICE_GPU ? " (not a GPU)" : "",
          tools_now() - r->start, r->deadline - r->start);
  if (r->selector[0])
    fprintf(f, "- device %s (%s, %s), driver %s, platform %s, profile %s, "
               "selector %s\n",
            r->device_name, kiln_device_type_name((kiln_device_type)r->device_type),
            r->device_vendor, r->driver, r->platform, r->profile, r->selector);
  fprintf(f, "- build tree: %s\n", r->build[0] ? r->build : r->build_why);
  if (r->groups != REPORT_ALL)
    fprintf(f, "- a part of the report (--steps): only some groups of steps "
               "ran\n");
  if (r->mma_verdict[0])
    fprintf(f, "- GEMM on the matrix units (after tuning): %s\n",
            r->mma_verdict);
  fputc('\n', f);
  if (r->diagnosis[0])
    fprintf(f, "## No GPU report\n\n%s\n\n", r->diagnosis);
  if (r->nsteps > 0) {
    fprintf(f, "## Steps\n\n| step | status | seconds | note | log |\n"
               "|---|---|---|---|---|\n");
    for (size_t i = 0; i < r->nsteps; i++) {
      const step *s = &r->steps[i];
      fprintf(f, "| %s | %s | %.1f | ", s->name, step_status_name(s->status),
              s->seconds);
      cell(f, s->reason);
      fprintf(f, " | %s |\n", s->log[0] ? rel(r, s->log) : "");
    }
  }
  for (size_t i = 0; i < r->nsteps; i++) {
    const step *s = &r->steps[i];
    if (json_array_size(s->figures) == 0)
      continue;
    fprintf(f, "\n## %s\n\n`%s`\n\n| figure | value | unit |\n|---|---|---|\n",
            s->name, s->command);
    size_t j;
    json_t *fig;
    json_array_foreach(s->figures, j, fig) {
      fprintf(f, "| %s | %.4g | %s |\n",
              json_string_value(json_object_get(fig, "name")),
              json_number_value(json_object_get(fig, "value")),
              json_string_value(json_object_get(fig, "unit")));
    }
  }
  json_t *t = targets(r);
  if (json_array_size(t) > 0) {
    fprintf(f, "\n## Speed targets (issue 22)\n\n| target | value | goal "
               "| met |\n|---|---|---|---|\n");
    size_t j;
    json_t *o;
    json_array_foreach(t, j, o) {
      fprintf(f, "| %s | %.3g | %.3g | %s |\n",
              json_string_value(json_object_get(o, "target")),
              json_number_value(json_object_get(o, "value")),
              json_number_value(json_object_get(o, "goal")),
              json_is_true(json_object_get(o, "met")) ? "yes" : "no");
    }
  }
  json_decref(t);
  if (r->nsteps > 0) {
    fprintf(f, "\n## Tuning file\n\n");
    if (r->tuning_file[0])
      fprintf(f, "%s (what kiln tune saved for this device; copy it to the "
                 "device's tuning file or send it), and %d rows for "
                 "backends/tuning_db.c in %s.\n",
              rel(r, r->tuning_file), r->db_row_count,
              r->db_rows[0] ? rel(r, r->db_rows) : "(none: not written)");
    else
      fprintf(f, "None: %s.\n", r->tuning_why);
  }
}

bool report_write(report *r) {
  char path[PATH_MAX + 32];
  json_t *doc = build_json(r);
  snprintf(path, sizeof path, "%s/report.json", r->out);
  const bool json_ok =
      json_dump_file(doc, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0;
  json_decref(doc);
  snprintf(path, sizeof path, "%s/summary.md", r->out);
  FILE *f = fopen(path, "w");
  if (f != NULL) {
    write_summary(r, f);
    if (fclose(f) != 0)
      f = NULL;
  }
  if (!json_ok || f == NULL)
    fprintf(stderr, "kiln report: cannot write %s/report.json or summary.md\n",
            r->out);
  if (r->diagnosis[0])
    fprintf(stderr, "kiln report: %s\n", r->diagnosis);
  return json_ok && f != NULL;
}
