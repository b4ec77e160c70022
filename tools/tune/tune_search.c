/* The tuner's search over an op's space (kiln_tuning_get_knob): exhaustive
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
  tune_pool *pool;
  double t_end, compile_timeout, run_timeout;
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
  return now() >= s->t_end || (s->o->stop != NULL && *s->o->stop) ||
         s->r->stuck;
}

static void reject(struct search *s, size_t *counter, const char *text,
                   const char *why) {
  s->r->rejected++;
  (*counter)++;
  snprintf(s->r->last_rejection, sizeof s->r->last_rejection,
           "%.1000s: %.500s", text, why);
}

/* Check, then time, one candidate whose build was waited for; true when
 * it became the best. Out of time half-way, it counts as not tried. */
static bool run_candidate(struct search *s, const char *text) {
  char why[512];
  double gate_s = 0.0;
  bool timed_out = false;
  if (kiln_tuning_set(s->ctx, s->op->name, text) != KILN_OK) {
    reject(s, &s->r->rejected_gate, text, kiln_last_error());
    return false;
  }
  if (!s->op->gate(s->ctx, s->q, text, s->o->hooks, s->run_timeout,
                   s->t_end, &gate_s, &timed_out, why, sizeof why)) {
    if (why[0] == '\0') { /* the deadline */
      s->r->tried--;
      return false;
    }
    s->r->stuck = timed_out;
    reject(s, timed_out ? &s->r->rejected_timeout : &s->r->rejected_gate,
           text, why);
    return false;
  }
  double t[TUNE_MAX_SIZES], log_sum = 0.0;
  for (size_t i = 0; i < s->o->nsizes; i++) {
    const size_t *z = s->o->sizes[i];
    const double stop = s->have_best ? 1.5 * s->best_t[i] : 0.0;
    t[i] = s->op->time(s->ctx, s->q, z, 3, stop, s->t_end, s->run_timeout,
                       s->o->hooks, text);
    if (t[i] == 0.0) { /* the deadline came first: no figure */
      s->r->tried--;
      return false;
    }
    if (t[i] == -2.0) {
      s->r->stuck = true;
      snprintf(why, sizeof why, "run timeout (a launch ran past %g s)",
               s->run_timeout);
      reject(s, &s->r->rejected_timeout, text, why);
      return false;
    }
    /* A candidate slower than 20 times the best is as good as hung. */
    if (t[i] < 0.0 || (s->have_best && t[i] > 20.0 * s->best_t[i])) {
      reject(s, &s->r->rejected_slow, text,
             t[i] < 0.0 ? kiln_last_error() : "timed out");
      return false;
    }
    if (s->have_best && t[i] > stop)
      return false; /* clearly slower: stop timing it */
    log_sum += log(s->op->work(z) / t[i] * 1e-9);
  }
  const double score = exp(log_sum / (double)s->o->nsizes);
  if (s->have_best && score <= s->r->best_score)
    return false;
  s->have_best = true;
  s->r->best_score = score;
  snprintf(s->r->best_params, sizeof s->r->best_params, "%s", text);
  for (size_t i = 0; i < s->o->nsizes; i++) {
    s->best_t[i] = t[i];
    const size_t *z = s->o->sizes[i];
    s->r->best_gflops[i] = s->op->work(z) / t[i] * 1e-9;
  }
  return true;
}

/* A candidate on its way: its text and build (NULL: not to be run). */
struct pending {
  char text[KILN_TUNING_TEXT_CAPACITY];
  tune_build *build;
};

/* Prepare point p in order: seen points and points the device cannot run
 * (skipped) get no build; the others are queued for the build workers. */
static void prepare(struct search *s, const point *p, struct pending *c) {
  char why[512];
  c->build = NULL;
  if (already_seen(s, p))
    return;
  format(s->sp, p, c->text, sizeof c->text);
  if (kiln_tuning_check(s->ctx, s->op->name, c->text, why, sizeof why) !=
      KILN_OK) {
    s->r->skipped++;
    return;
  }
  c->build = tune_pool_submit(s->pool, c->text);
  if (c->build == NULL) /* out of memory: counted, never run unbuilt */
    reject(s, &s->r->rejected_gate, c->text, "out of host memory");
}

/* Evaluate pts[0..n) in order, the builds of the next ones running on the
 * workers meanwhile (as many ahead as there are workers, so that the order
 * of evaluation, hence the result for a seed, does not depend on them);
 * true when one became the best. */
static bool evaluate_list(struct search *s, const point *pts, size_t n) {
  const size_t ahead = s->o->jobs > 0 ? s->o->jobs : 1;
  struct pending *c = malloc(n * sizeof *c);
  if (c == NULL)
    return false;
  bool improved = false;
  size_t prepared = 0;
  for (size_t i = 0; i < n && !out_of_time(s); i++) {
    while (prepared < n && prepared <= i + ahead)
      prepare(s, &pts[prepared], &c[prepared]), prepared++;
    if (c[i].build == NULL)
      continue;
    char why[600];
    const tune_build_result b =
        tune_build_wait(s->pool, c[i].build, s->compile_timeout, s->t_end,
                        s->o->stop, why, sizeof why);
    if (b == TUNE_BUILD_DEADLINE)
      break;
    s->r->tried++;
    if (b == TUNE_BUILD_TIMEOUT)
      reject(s, &s->r->rejected_timeout, c[i].text, why);
    else if (b == TUNE_BUILD_FAILED)
      reject(s, &s->r->rejected_gate, c[i].text, why);
    else
      improved = run_candidate(s, c[i].text) || improved;
    if (s->o->progress != NULL)
      s->o->progress(s->o->progress_user, s->r->tried, s->r->rejected,
                     s->r->skipped, s->r->best_score, s->r->best_params);
  }
  free(c);
  return improved;
}

static bool evaluate(struct search *s, const point *p) {
  return evaluate_list(s, p, 1);
}

static unsigned long rng_next(unsigned long *state) {
  *state = *state * 6364136223846793005ul + 1442695040888963407ul;
  return *state >> 33;
}

bool tune_gemm(kiln_context *ctx, kiln_queue *q, const tune_options *o,
               tune_result *r, char *why, size_t why_size) {
  return tune_search(ctx, q, tune_op_find("gemm"), o, r, why, why_size);
}

/* The search's figures come from moments minutes apart, and on a shared
 * machine the load moves in between: a candidate timed in a quiet moment
 * beats a default timed in a busy one (on PoCL at load 6 a GEMM point
 * "1.8 times faster" ran slower than the default in kiln-compare). So the
 * best is timed again against the default, alternately, CONFIRM_ROUNDS
 * times at every size, and kept only when the geometric mean of its
 * speed-ups (best time of the rounds) is above 1; the figures reported are
 * these. A failed run keeps the search's verdict. */
#define CONFIRM_ROUNDS 3
static void confirm(struct search *s) {
  tune_result *r = s->r;
  const char *const params[2] = {r->default_params, r->best_params};
  double t[2][TUNE_MAX_SIZES] = {{0}};
  for (int round = 0; round < CONFIRM_ROUNDS; round++)
    for (size_t i = 0; i < s->o->nsizes; i++)
      for (int w = 0; w < 2; w++) {
        if (kiln_tuning_set(s->ctx, s->op->name, params[w]) != KILN_OK)
          return;
        const double x = s->op->time(s->ctx, s->q, s->o->sizes[i], 1, 0.0,
                                     0.0, s->run_timeout, s->o->hooks,
                                     params[w]);
        if (x <= 0.0)
          return;
        if (t[w][i] == 0.0 || x < t[w][i])
          t[w][i] = x;
      }
  double log_sum[2] = {0.0, 0.0};
  for (size_t i = 0; i < s->o->nsizes; i++)
    for (int w = 0; w < 2; w++) {
      const double rate = s->op->work(s->o->sizes[i]) / t[w][i] * 1e-9;
      log_sum[w] += log(rate);
      *(w ? &r->best_gflops[i] : &r->default_gflops[i]) = rate;
    }
  r->default_score = exp(log_sum[0] / (double)s->o->nsizes);
  r->best_score = exp(log_sum[1] / (double)s->o->nsizes);
  if (r->best_score <= r->default_score) {
    r->kept_default = true;
    snprintf(r->best_params, sizeof r->best_params, "%s", r->default_params);
    memcpy(r->best_gflops, r->default_gflops, sizeof r->best_gflops);
    r->best_score = r->default_score;
  }
}

bool tune_search(kiln_context *ctx, kiln_queue *q, const tune_op *op,
                 const tune_options *o, tune_result *r, char *why,
                 size_t why_size) {
  struct space sp;
  memset(&sp, 0, sizeof sp);
  memset(r, 0, sizeof *r);
  while (sp.count < TUNE_MAX_KNOBS &&
         kiln_tuning_get_knob(op->name, sp.count, &sp.knob[sp.count]) ==
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
                     .t_end = now() + o->budget_s,
                     .compile_timeout = o->compile_timeout_s > 0.0
                                            ? o->compile_timeout_s
                                            : TUNE_COMPILE_TIMEOUT,
                     .run_timeout = o->run_timeout_s > 0.0
                                        ? o->run_timeout_s
                                        : TUNE_RUN_TIMEOUT};
  /* The default first, always timed in full: the figure to beat. */
  double gate_s;
  bool timed_out = false;
  if (!op->gate(ctx, q, info.params, NULL, s.run_timeout, 0.0, &gate_s,
                &timed_out, why, why_size)) {
    r->stuck = timed_out;
    return false;
  }
  double log_sum = 0.0;
  for (size_t i = 0; i < o->nsizes; i++) {
    const size_t *z = o->sizes[i];
    const double t = op->time(ctx, q, z, 3, 0.0, 0.0, s.run_timeout, NULL,
                              info.params);
    if (t <= 0.0) {
      r->stuck = t == -2.0;
      snprintf(why, why_size, "the default does not run: %s",
               r->stuck ? "a launch ran past the run timeout"
                        : kiln_last_error());
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
  s.pool = tune_pool_create(ctx, op->name, o->jobs, o->hooks);
  if (s.pool == NULL) {
    snprintf(why, why_size, "cannot start a build thread");
    return false;
  }

  /* Two streams: the random phase's points do not depend on where the
   * budget cut it. */
  unsigned long rng = o->seed ? o->seed : 1, restart_rng = ~rng;
  const size_t batch = 4 * (o->jobs > 0 ? o->jobs : 1);
  point *list = malloc((points <= o->exhaustive_max ? (size_t)points : 0) *
                           sizeof *list +
                       (batch + 2 * TUNE_MAX_KNOBS) * sizeof *list);
  if (list == NULL) {
    tune_pool_destroy(s.pool);
    snprintf(why, why_size, "out of host memory");
    return false;
  }
  if (points <= o->exhaustive_max) {
    r->exhaustive = true;
    point p = start;
    for (size_t i = 0; i < sp.count; i++)
      if (sp.free_knob[i])
        p.idx[i] = 0;
    size_t n = 0;
    for (;;) {
      list[n++] = p;
      size_t i = 0; /* the next point, odometer order over the free knobs */
      for (; i < sp.count; i++) {
        if (!sp.free_knob[i])
          continue;
        if (++p.idx[i] < sp.knob[i].count)
          break;
        p.idx[i] = 0;
      }
      if (i == sp.count)
        break;
    }
    evaluate_list(&s, list, n);
  } else {
    const double t_random = now() + o->budget_s / 2.0;
    while (now() < t_random && !out_of_time(&s) &&
           (double)s.nseen < points) {
      for (size_t j = 0; j < batch; j++) {
        list[j] = start;
        for (size_t i = 0; i < sp.count; i++)
          if (sp.free_knob[i])
            list[j].idx[i] = (unsigned)(rng_next(&rng) % sp.knob[i].count);
      }
      evaluate_list(&s, list, batch);
    }
    /* Local search from the best, restarting at a random point when stuck,
     * until the budget ends or every point has been seen. Each round's
     * neighbours are known before it starts: built ahead together. */
    while (!out_of_time(&s) && (double)s.nseen < points) {
      point best;
      if (!parse(&sp, r->best_params, &best))
        best = start;
      size_t n = 0;
      for (size_t i = 0; i < sp.count; i++) {
        if (!sp.free_knob[i])
          continue;
        for (int d = -1; d <= 1; d += 2) {
          const long v = (long)best.idx[i] + d;
          if (v < 0 || v >= (long)sp.knob[i].count)
            continue;
          list[n] = best;
          list[n++].idx[i] = (unsigned)v;
        }
      }
      if (!evaluate_list(&s, list, n)) {
        point p = start;
        for (size_t i = 0; i < sp.count; i++)
          if (sp.free_knob[i])
            p.idx[i] = (unsigned)(rng_next(&restart_rng) % sp.knob[i].count);
        evaluate(&s, &p);
      }
    }
  }
  /* Builds still queued are dropped; one still compiling finishes on its
   * own (tune_pool.c). */
  tune_pool_destroy(s.pool);
  free(list);
  r->interrupted = o->stop != NULL && *o->stop;
  free(s.seen);
  if (strcmp(r->best_params, r->default_params) != 0 && !r->interrupted)
    confirm(&s);
  kiln_status st = kiln_tuning_set(ctx, op->name, r->best_params);
  if (st != KILN_OK) {
    snprintf(why, why_size, "%s", kiln_last_error());
    return false;
  }
  return true;
}
