/* The tuner's search over an op's space (kiln_tuning_knob_get): exhaustive
 * when the searched space is small, else seeded random points (half the
 * budget) and then local search from the best (each knob one value up or
 * down, keeping every improvement; a random restart when no neighbour
 * improves), within the wall-clock budget. Every candidate is first checked
 * for the device (kiln_tuning_check: skipped, not run, when it cannot run
 * there), then passes the correctness gate (tune_gate.c) or is rejected,
 * then is timed at every size, stopping at the first size where it is
 * clearly slower (over 1.5 times) than the best so far. The score is the
 * geometric mean of the op's figure (GFLOP/s, GB/s) over the sizes. The op
 * (tune_ops.c) says how to gate and time a candidate. */
#include "tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

struct space {
  kiln_tuning_knob knob[TUNE_MAX_KNOBS];
  bool free_knob[TUNE_MAX_KNOBS]; /* the search may change it */
  size_t count;
};

/* A point: an index into each knob's values. */
typedef struct point {
  unsigned idx[TUNE_MAX_KNOBS];
} point;

static void format(const struct space *sp, const point *p, char *buf,
                   size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < sp->count && used < size; i++) {
    int n = snprintf(buf + used, size - used, "%s%s=%u", i ? " " : "",
                     sp->knob[i].name, sp->knob[i].values[p->idx[i]]);
    if (n < 0)
      break;
    used += (size_t)n;
  }
}

/* The point of text (every knob NAME=VALUE); false when a value is not in
 * the space. */
static bool parse(const struct space *sp, const char *text, point *p) {
  for (size_t i = 0; i < sp->count; i++) {
    char key[40];
    snprintf(key, sizeof key, "%s=", sp->knob[i].name);
    const char *at = text;
    while ((at = strstr(at, key)) != NULL && at != text && at[-1] != ' ')
      at++;
    if (at == NULL)
      return false;
    const unsigned v = (unsigned)strtoul(at + strlen(key), NULL, 10);
    size_t j = 0;
    while (j < sp->knob[i].count && sp->knob[i].values[j] != v)
      j++;
    if (j == sp->knob[i].count)
      return false;
    p->idx[i] = (unsigned)j;
  }
  return true;
}

struct search {
  const tune_op *op;
  kiln_context *ctx;
  kiln_queue *q;
  const tune_options *o;
  const struct space *sp;
  tune_result *r;
  double t_end;
  double best_t[TUNE_MAX_SIZES]; /* the best candidate's seconds per size */
  bool have_best;
  /* Points already tried (a hash set of their texts would be overkill for
   * a few hundred candidates: a linear list). */
  point *seen;
  size_t nseen, capseen;
};

static bool already_seen(struct search *s, const point *p) {
  for (size_t i = 0; i < s->nseen; i++)
    if (memcmp(&s->seen[i], p, sizeof *p) == 0)
      return true;
  if (s->nseen == s->capseen) {
    size_t cap = s->capseen ? 2 * s->capseen : 256;
    point *grown = realloc(s->seen, cap * sizeof *grown);
    if (grown == NULL)
      return true; /* out of memory: try nothing more */
    s->seen = grown;
    s->capseen = cap;
  }
  s->seen[s->nseen++] = *p;
  return false;
}

static bool out_of_time(const struct search *s) {
  return now() >= s->t_end || (s->o->stop != NULL && *s->o->stop);
}

/* Evaluate one point; true when it became the best. */
static bool evaluate(struct search *s, const point *p) {
  if (already_seen(s, p) || out_of_time(s))
    return false;
  char text[KILN_TUNING_TEXT_CAPACITY], why[512];
  format(s->sp, p, text, sizeof text);
  if (kiln_tuning_check(s->ctx, s->op->name, text, why, sizeof why) !=
      KILN_OK) {
    s->r->skipped++;
    return false;
  }
  s->r->tried++;
  double gate_s = 0.0;
  bool improved = false;
  if (kiln_tuning_set(s->ctx, s->op->name, text) != KILN_OK ||
      !s->op->gate(s->ctx, s->q, text, s->o->hooks, &gate_s, why,
                   sizeof why)) {
    s->r->rejected++;
    s->r->rejected_gate++;
    snprintf(s->r->last_rejection, sizeof s->r->last_rejection,
             "%.1000s: %.500s", text, why);
  } else {
    double t[TUNE_MAX_SIZES], log_sum = 0.0;
    bool slower = false, failed = false;
    for (size_t i = 0; i < s->o->nsizes && !slower && !failed; i++) {
      const size_t *z = s->o->sizes[i];
      const double stop = s->have_best ? 1.5 * s->best_t[i] : 0.0;
      t[i] = s->op->time(s->ctx, s->q, z, 3, stop, s->o->hooks, text);
      /* A candidate slower than 20 times the best is as good as hung. */
      if (t[i] < 0.0 || (s->have_best && t[i] > 20.0 * s->best_t[i])) {
        failed = true;
        snprintf(s->r->last_rejection, sizeof s->r->last_rejection,
                 "%.1000s: %.500s", text,
                 t[i] < 0.0 ? kiln_last_error() : "timed out");
      } else if (s->have_best && t[i] > stop) {
        slower = true; /* clearly slower: stop timing it */
      } else {
        log_sum += log(s->op->work(z) / t[i] * 1e-9);
      }
    }
    if (failed) {
      s->r->rejected++;
      s->r->rejected_slow++;
    }
    if (!failed && !slower) {
      const double score = exp(log_sum / (double)s->o->nsizes);
      if (!s->have_best || score > s->r->best_score) {
        s->have_best = improved = true;
        s->r->best_score = score;
        snprintf(s->r->best_params, sizeof s->r->best_params, "%s", text);
        for (size_t i = 0; i < s->o->nsizes; i++) {
          s->best_t[i] = t[i];
          const size_t *z = s->o->sizes[i];
          s->r->best_gflops[i] = s->op->work(z) / t[i] * 1e-9;
        }
      }
    }
  }
  if (s->o->progress != NULL)
    s->o->progress(s->o->progress_user, s->r->tried, s->r->rejected,
                   s->r->skipped, s->r->best_score, s->r->best_params);
  return improved;
}

static unsigned long rng_next(unsigned long *state) {
  *state = *state * 6364136223846793005ul + 1442695040888963407ul;
  return *state >> 33;
}

bool tune_gemm(kiln_context *ctx, kiln_queue *q, const tune_options *o,
               tune_result *r, char *why, size_t why_size) {
  return tune_search(ctx, q, tune_op_find("gemm"), o, r, why, why_size);
}

bool tune_search(kiln_context *ctx, kiln_queue *q, const tune_op *op,
                 const tune_options *o, tune_result *r, char *why,
                 size_t why_size) {
  struct space sp;
  memset(&sp, 0, sizeof sp);
  memset(r, 0, sizeof *r);
  while (sp.count < TUNE_MAX_KNOBS &&
         kiln_tuning_knob_get(op->name, sp.count, &sp.knob[sp.count]) ==
             KILN_OK)
    sp.count++;
  double points = 1.0;
  for (size_t i = 0; i < sp.count; i++) {
    sp.free_knob[i] = o->nknobs == 0;
    for (size_t j = 0; j < o->nknobs; j++)
      sp.free_knob[i] = sp.free_knob[i] || strcmp(o->knobs[j], sp.knob[i].name) == 0;
    if (sp.free_knob[i])
      points *= (double)sp.knob[i].count;
  }
  /* The default: the parameters in effect before any tuner's setting. */
  kiln_tuning_info info;
  if (kiln_tuning_set(ctx, op->name, NULL) != KILN_OK ||
      kiln_tuning_get_info(ctx, op->name, &info) != KILN_OK) {
    snprintf(why, why_size, "%s", kiln_last_error());
    return false;
  }
  snprintf(r->default_params, sizeof r->default_params, "%s", info.params);
  point start;
  memset(&start, 0, sizeof start);
  if (!parse(&sp, info.params, &start)) {
    /* A profile row outside the listed values: start from the first
     * point instead, and time the default on its own below. */
    memset(&start, 0, sizeof start);
  }
  struct search s = {.op = op, .ctx = ctx, .q = q, .o = o, .sp = &sp, .r = r,
                     .t_end = now() + o->budget_s};
  /* The default first, always timed in full: the figure to beat. */
  double gate_s;
  if (!op->gate(ctx, q, info.params, NULL, &gate_s, why, why_size))
    return false;
  double log_sum = 0.0;
  for (size_t i = 0; i < o->nsizes; i++) {
    const size_t *z = o->sizes[i];
    const double t = op->time(ctx, q, z, 3, 0.0, NULL, info.params);
    if (t < 0.0) {
      snprintf(why, why_size, "the default does not run: %s",
               kiln_last_error());
      return false;
    }
    r->default_gflops[i] = r->best_gflops[i] = op->work(z) / t * 1e-9;
    s.best_t[i] = t;
    log_sum += log(r->default_gflops[i]);
  }
  r->default_score = r->best_score = exp(log_sum / (double)o->nsizes);
  snprintf(r->best_params, sizeof r->best_params, "%s", info.params);
  s.have_best = true;
  (void)already_seen(&s, &start); /* the default is the start point */

  unsigned long rng = o->seed ? o->seed : 1;
  if (points <= o->exhaustive_max) {
    r->exhaustive = true;
    point p = start;
    for (size_t i = 0; i < sp.count; i++)
      if (sp.free_knob[i])
        p.idx[i] = 0;
    for (;;) {
      evaluate(&s, &p);
      size_t i = 0; /* the next point, odometer order over the free knobs */
      for (; i < sp.count; i++) {
        if (!sp.free_knob[i])
          continue;
        if (++p.idx[i] < sp.knob[i].count)
          break;
        p.idx[i] = 0;
      }
      if (i == sp.count || out_of_time(&s))
        break;
    }
  } else {
    const double t_random = now() + o->budget_s / 2.0;
    while (now() < t_random && !out_of_time(&s)) {
      point p = start;
      for (size_t i = 0; i < sp.count; i++)
        if (sp.free_knob[i])
          p.idx[i] = (unsigned)(rng_next(&rng) % sp.knob[i].count);
      evaluate(&s, &p);
    }
    /* Local search from the best, restarting at a random point when stuck,
     * until the budget ends or every point has been seen. */
    while (!out_of_time(&s) && (double)s.nseen < points) {
      point best;
      if (!parse(&sp, r->best_params, &best))
        best = start;
      bool improved = false;
      for (size_t i = 0; i < sp.count && !out_of_time(&s); i++) {
        if (!sp.free_knob[i])
          continue;
        for (int d = -1; d <= 1; d += 2) {
          point p = best;
          const long v = (long)p.idx[i] + d;
          if (v < 0 || v >= (long)sp.knob[i].count)
            continue;
          p.idx[i] = (unsigned)v;
          improved = evaluate(&s, &p) || improved;
        }
      }
      if (!improved) {
        point p = start;
        for (size_t i = 0; i < sp.count; i++)
          if (sp.free_knob[i])
            p.idx[i] = (unsigned)(rng_next(&rng) % sp.knob[i].count);
        evaluate(&s, &p);
      }
    }
  }
  r->interrupted = o->stop != NULL && *o->stop;
  free(s.seen);
  kiln_status st = kiln_tuning_set(ctx, op->name, r->best_params);
  if (st != KILN_OK) {
    snprintf(why, why_size, "%s", kiln_last_error());
    return false;
  }
  return true;
}
