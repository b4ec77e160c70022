/* The search over an op's space (kiln_tuning_search, kiln/kiln_tune.h), the
 * engine `kiln tune` drives: exhaustive when the searched space is small,
 * else seeded random points (half the budget) and then local search from
 * the best (each knob one value up or down, keeping every improvement; a
 * random restart when no neighbour improves), within the wall-clock budget.
 * Every candidate is first checked for the device (kiln_tuning_check:
 * skipped, not run, when it cannot run there), is built ahead on the build
 * workers (build_pool.c), then passes the caller's correctness gate or is
 * rejected, then is timed by the caller at every size, stopping at the
 * first size where it is clearly slower (over 1.5 times) than the best so
 * far. The score is the geometric mean of the op's figure (GFLOP/s, GB/s)
 * over the sizes. The library knows no op's correctness: the gate and the
 * timing are callbacks (kiln tune's are in tools/tune/). Nothing here
 * prints or takes a process-wide lock. */
#include "build_pool.h"
#include "tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KNOBS 32
#define MAX_SIZES KILN_TUNING_MAX_SIZES
#define DEFAULT_EXHAUSTIVE_MAX 256
#define DEFAULT_COMPILE_TIMEOUT 60.0
#define DEFAULT_RUN_TIMEOUT 20.0
#define FN "kiln_tuning_search"

static double now(void) { return 1e-9 * (double)kiln__now_ns(); }

struct space {
  kiln_tuning_knob knob[MAX_KNOBS];
  bool free_knob[MAX_KNOBS]; /* the search may change it */
  size_t count;
};

/* A point: an index into each knob's values. */
typedef struct point {
  unsigned idx[MAX_KNOBS];
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
  const char *op;
  kiln_context *ctx;
  kiln_queue *q;
  const kiln_tuning_search_options *o;
  const struct space *sp;
  kiln_tuning_result *r;
  struct kiln__build_pool *pool;
  double t_end, compile_timeout, run_timeout;
  double best_t[MAX_SIZES]; /* the best candidate's seconds per size */
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
  snprintf(s->r->last_rejection, sizeof s->r->last_rejection, "%.1000s: %.500s",
           text, why);
}

/* The caller's timing of text at size i: seconds, 0 when the deadline came
 * first, -1 on a failure, -2 when a launch ran past the run timeout. */
static double time_at(const struct search *s, const char *text, size_t i,
                      int runs, double stop_above, double deadline, char *why,
                      size_t why_size) {
  double t = 0.0;
  why[0] = '\0';
  switch (s->o->time(s->o->user, s->q, text, s->o->sizes[i], runs, stop_above,
                     deadline, s->run_timeout, &t, why, why_size)) {
  case KILN_TUNING_PASS:
    if (t > 0.0)
      return t;
    snprintf(why, why_size, "the timing gave %g seconds", t);
    return -1.0;
  case KILN_TUNING_DEADLINE:
    return 0.0;
  case KILN_TUNING_RUN_TIMEOUT:
    return -2.0;
  default:
    return -1.0;
  }
}

static double rate(const struct search *s, size_t i, double t) {
  return s->o->work[i] / t * 1e-9;
}

/* Check, then time, one candidate whose build was waited for; true when
 * it became the best. Out of time half-way, it counts as not tried. */
static bool run_candidate(struct search *s, const char *text) {
  char why[512];
  if (kiln_tuning_set(s->ctx, s->op, text) != KILN_OK) {
    reject(s, &s->r->rejected_gate, text, kiln_last_error());
    return false;
  }
  why[0] = '\0';
  const kiln_tuning_verdict v = s->o->gate(
      s->o->user, s->q, text, s->run_timeout, s->t_end, why, sizeof why);
  if (v == KILN_TUNING_DEADLINE) {
    s->r->tried--;
    return false;
  }
  if (v != KILN_TUNING_PASS) {
    s->r->stuck = v == KILN_TUNING_RUN_TIMEOUT;
    reject(s, s->r->stuck ? &s->r->rejected_timeout : &s->r->rejected_gate,
           text, why);
    return false;
  }
  double t[MAX_SIZES], log_sum = 0.0;
  for (size_t i = 0; i < s->o->size_count; i++) {
    const double stop = s->have_best ? 1.5 * s->best_t[i] : 0.0;
    t[i] = time_at(s, text, i, 3, stop, s->t_end, why, sizeof why);
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
      reject(s, &s->r->rejected_slow, text, t[i] < 0.0 ? why : "timed out");
      return false;
    }
    if (s->have_best && t[i] > stop)
      return false; /* clearly slower: stop timing it */
    log_sum += log(rate(s, i, t[i]));
  }
  const double score = exp(log_sum / (double)s->o->size_count);
  if (s->have_best && score <= s->r->best_score)
    return false;
  s->have_best = true;
  s->r->best_score = score;
  snprintf(s->r->best_params, sizeof s->r->best_params, "%s", text);
  for (size_t i = 0; i < s->o->size_count; i++) {
    s->best_t[i] = t[i];
    s->r->best_figures[i] = rate(s, i, t[i]);
  }
  return true;
}

/* A candidate on its way: its text and build (NULL: not to be run). */
struct pending {
  char text[KILN_TUNING_TEXT_CAPACITY];
  struct kiln__build_job *build;
};

/* Prepare point p in order: seen points and points the device cannot run
 * (skipped) get no build; the others are queued for the build workers. */
static void prepare(struct search *s, const point *p, struct pending *c) {
  char why[512];
  c->build = NULL;
  if (already_seen(s, p))
    return;
  format(s->sp, p, c->text, sizeof c->text);
  if (kiln_tuning_check(s->ctx, s->op, c->text, why, sizeof why) != KILN_OK) {
    s->r->skipped++;
    return;
  }
  c->build = kiln__build_pool_submit(s->pool, c->text);
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
    const enum kiln__pool_result b =
        kiln__build_pool_wait(s->pool, c[i].build, s->compile_timeout, s->t_end,
                              s->o->stop, why, sizeof why);
    if (b == KILN__POOL_DEADLINE)
      break;
    s->r->tried++;
    if (b == KILN__POOL_TIMEOUT)
      reject(s, &s->r->rejected_timeout, c[i].text, why);
    else if (b == KILN__POOL_FAILED)
      reject(s, &s->r->rejected_gate, c[i].text, why);
    else
      improved = run_candidate(s, c[i].text) || improved;
    if (s->o->progress != NULL)
      s->o->progress(s->o->user, s->r->tried, s->r->rejected, s->r->skipped,
                     s->r->best_score, s->r->best_params);
  }
  free(c);
  return improved;
}

static unsigned long rng_next(uint64_t *state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return (unsigned long)(*state >> 33);
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
  kiln_tuning_result *r = s->r;
  const char *const params[2] = {r->default_params, r->best_params};
  double t[2][MAX_SIZES] = {{0}};
  char why[512];
  for (int round = 0; round < CONFIRM_ROUNDS; round++)
    for (size_t i = 0; i < s->o->size_count; i++)
      for (int w = 0; w < 2; w++) {
        if (kiln_tuning_set(s->ctx, s->op, params[w]) != KILN_OK)
          return;
        const double x = time_at(s, params[w], i, 1, 0.0, 0.0, why, sizeof why);
        if (x <= 0.0)
          return;
        if (t[w][i] == 0.0 || x < t[w][i])
          t[w][i] = x;
      }
  double log_sum[2] = {0.0, 0.0};
  for (size_t i = 0; i < s->o->size_count; i++)
    for (int w = 0; w < 2; w++) {
      const double x = rate(s, i, t[w][i]);
      log_sum[w] += log(x);
      *(w ? &r->best_figures[i] : &r->default_figures[i]) = x;
    }
  r->default_score = exp(log_sum[0] / (double)s->o->size_count);
  r->best_score = exp(log_sum[1] / (double)s->o->size_count);
  if (r->best_score <= r->default_score) {
    r->kept_default = true;
    snprintf(r->best_params, sizeof r->best_params, "%s", r->default_params);
    memcpy(r->best_figures, r->default_figures, sizeof r->best_figures);
    r->best_score = r->default_score;
  }
}

/* The arguments; on success the op's space in *sp (its free knobs marked)
 * and its number of searched points in *points. */
static kiln_status check_args(kiln_queue *queue, const char *op,
                              const kiln_tuning_search_options *o,
                              const kiln_tuning_result *r, struct space *sp,
                              double *points) {
  if (queue == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, FN ": queue is NULL");
  if (op == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, FN ": op is NULL");
  if (o == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, FN ": options is NULL");
  if (r == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, FN ": result is NULL");
  if (o->gate == NULL || o->time == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      FN ": options->%s is NULL (the op's %s, which the "
                         "caller supplies)",
                      o->gate == NULL ? "gate" : "time",
                      o->gate == NULL ? "correctness gate" : "timing");
  if (o->size_count == 0 || o->size_count > MAX_SIZES)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      FN ": options->size_count is %zu (1 to %d sizes)",
                      o->size_count, MAX_SIZES);
  for (size_t i = 0; i < o->size_count; i++) {
    if (o->sizes[i][0] == 0 || o->sizes[i][1] == 0 || o->sizes[i][2] == 0)
      return kiln__fail(KILN_ERR_INVALID_SIZE,
                        FN ": options->sizes[%zu] is %zux%zux%zu (each "
                           "number at least 1)",
                        i, o->sizes[i][0], o->sizes[i][1], o->sizes[i][2]);
    if (!(o->work[i] > 0.0) || isinf(o->work[i]))
      return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                        FN ": options->work[%zu] is %g (the work of one "
                           "timed run: a positive number)",
                        i, o->work[i]);
  }
  if (!(o->budget_s > 0.0) || isinf(o->budget_s))
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      FN ": options->budget_s is %g (seconds: a positive "
                         "number)",
                      o->budget_s);
  if (!(o->compile_timeout_s >= 0.0) || !(o->run_timeout_s >= 0.0))
    return kiln__fail(
        KILN_ERR_INVALID_ARGUMENT,
        FN ": options->%s is %g (seconds, 0 for the default)",
        o->compile_timeout_s >= 0.0 ? "run_timeout_s" : "compile_timeout_s",
        o->compile_timeout_s >= 0.0 ? o->run_timeout_s : o->compile_timeout_s);
  if (o->knob_count > 0 && o->knobs == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      FN ": options->knobs is NULL with knob_count %zu",
                      o->knob_count);
  memset(sp, 0, sizeof *sp);
  kiln_status st = KILN_ERR_NOT_FOUND;
  while (sp->count < MAX_KNOBS &&
         (st = kiln_tuning_get_knob(op, sp->count, &sp->knob[sp->count])) ==
             KILN_OK)
    sp->count++;
  if (sp->count == 0) {
    char message[512];
    snprintf(message, sizeof message, "%s", kiln_last_error());
    return kiln__fail(st, FN ": op: %s", message);
  }
  for (size_t j = 0; j < o->knob_count; j++) {
    size_t i = 0;
    while (i < sp->count &&
           (o->knobs[j] == NULL || strcmp(o->knobs[j], sp->knob[i].name)))
      i++;
    if (o->knobs[j] == NULL)
      return kiln__fail(KILN_ERR_NULL_POINTER,
                        FN ": options->knobs[%zu] "
                           "is NULL",
                        j);
    if (i == sp->count)
      return kiln__fail(KILN_ERR_NOT_FOUND,
                        FN ": options->knobs[%zu] '%s' is not a knob of "
                           "op '%s'",
                        j, o->knobs[j], op);
    sp->free_knob[i] = true;
  }
  *points = 1.0;
  for (size_t i = 0; i < sp->count; i++) {
    if (o->knob_count == 0)
      sp->free_knob[i] = true;
    if (sp->free_knob[i])
      *points *= (double)sp->knob[i].count;
  }
  return KILN_OK;
}

/* Time the default at every size into s's best (the figure to beat);
 * KILN_OK, else the failure. */
static kiln_status time_default(struct search *s, const char *params) {
  kiln_tuning_result *r = s->r;
  char why[512];
  why[0] = '\0';
  const kiln_tuning_verdict v = s->o->gate(
      s->o->user, s->q, params, s->run_timeout, 0.0, why, sizeof why);
  if (v != KILN_TUNING_PASS) {
    r->stuck = v == KILN_TUNING_RUN_TIMEOUT;
    return kiln__fail(KILN_ERR_EXEC_FAILED,
                      FN ": the default (%.400s) fails the gate: %s", params,
                      r->stuck ? "a launch ran past the run timeout" : why);
  }
  double log_sum = 0.0;
  for (size_t i = 0; i < s->o->size_count; i++) {
    const double t = time_at(s, params, i, 3, 0.0, 0.0, why, sizeof why);
    if (t <= 0.0) {
      r->stuck = t == -2.0;
      return kiln__fail(KILN_ERR_EXEC_FAILED,
                        FN ": the default does not run: %s",
                        r->stuck ? "a launch ran past the run timeout" : why);
    }
    r->default_figures[i] = r->best_figures[i] = rate(s, i, t);
    s->best_t[i] = t;
    log_sum += log(r->default_figures[i]);
  }
  r->default_score = r->best_score = exp(log_sum / (double)s->o->size_count);
  snprintf(r->best_params, sizeof r->best_params, "%s", params);
  s->have_best = true;
  return KILN_OK;
}

/* Every point of the free knobs, odometer order, into list. */
static size_t all_points(const struct space *sp, const point *start,
                         point *list) {
  point p = *start;
  for (size_t i = 0; i < sp->count; i++)
    if (sp->free_knob[i])
      p.idx[i] = 0;
  size_t n = 0;
  for (;;) {
    list[n++] = p;
    size_t i = 0;
    for (; i < sp->count; i++) {
      if (!sp->free_knob[i])
        continue;
      if (++p.idx[i] < sp->knob[i].count)
        break;
      p.idx[i] = 0;
    }
    if (i == sp->count)
      return n;
  }
}

/* start with each free knob drawn from rng. */
static point random_point(const struct space *sp, const point *start,
                          uint64_t *rng) {
  point p = *start;
  for (size_t i = 0; i < sp->count; i++)
    if (sp->free_knob[i])
      p.idx[i] = (unsigned)(rng_next(rng) % sp->knob[i].count);
  return p;
}

/* Random points for half the budget, then local search from the best,
 * restarting at a random point when stuck, until the budget ends or every
 * point has been seen. list holds batch + 2 MAX_KNOBS points. */
static void sample_and_climb(struct search *s, const point *start,
                             double points, size_t batch, point *list) {
  const struct space *sp = s->sp;
  /* Two streams: the random phase's points do not depend on where the
   * budget cut it. */
  uint64_t rng = s->o->seed ? s->o->seed : 1, restart_rng = ~rng;
  const double t_random = now() + s->o->budget_s / 2.0;
  while (now() < t_random && !out_of_time(s) && (double)s->nseen < points) {
    for (size_t j = 0; j < batch; j++)
      list[j] = random_point(sp, start, &rng);
    evaluate_list(s, list, batch);
  }
  /* Each round's neighbours are known before it starts: built ahead
   * together. */
  while (!out_of_time(s) && (double)s->nseen < points) {
    point best;
    if (!parse(sp, s->r->best_params, &best))
      best = *start;
    size_t n = 0;
    for (size_t i = 0; i < sp->count; i++) {
      if (!sp->free_knob[i])
        continue;
      for (int d = -1; d <= 1; d += 2) {
        const long v = (long)best.idx[i] + d;
        if (v < 0 || v >= (long)sp->knob[i].count)
          continue;
        list[n] = best;
        list[n++].idx[i] = (unsigned)v;
      }
    }
    if (!evaluate_list(s, list, n)) {
      const point p = random_point(sp, start, &restart_rng);
      evaluate_list(s, &p, 1);
    }
  }
}

/* The search proper, once the arguments are checked. */
static kiln_status search(struct search *s, double points) {
  const kiln_tuning_search_options *o = s->o;
  kiln_tuning_result *r = s->r;
  /* The default: the parameters in effect before any tuner's setting. */
  kiln_tuning_info *info = malloc(sizeof *info);
  if (info == NULL)
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY, FN ": out of host memory");
  kiln_status st = kiln_tuning_set(s->ctx, s->op, NULL);
  if (st == KILN_OK)
    st = kiln_tuning_get_info(s->ctx, s->op, info);
  if (st == KILN_OK && info->params[0] == '\0')
    st = kiln__fail(KILN_ERR_UNSUPPORTED,
                    FN ": for op '%s' the queue's device runs the other "
                       "kernel family's kernels (%s), which are not of the "
                       "op's space",
                    s->op, info->source);
  if (st != KILN_OK) {
    free(info);
    return st;
  }
  snprintf(r->default_params, sizeof r->default_params, "%s", info->params);
  free(info);
  point start;
  memset(&start, 0, sizeof start);
  if (!parse(s->sp, r->default_params, &start)) {
    /* A profile row outside the listed values: start from the first
     * point instead; the default is timed on its own below. */
    memset(&start, 0, sizeof start);
  }
  /* The default first, always timed in full: the figure to beat. */
  st = time_default(s, r->default_params);
  if (st != KILN_OK)
    return st;
  (void)already_seen(s, &start); /* the default is the start point */
  const size_t batch = 4 * (o->jobs > 0 ? o->jobs : 1);
  const size_t exhaustive_max =
      o->exhaustive_max ? o->exhaustive_max : DEFAULT_EXHAUSTIVE_MAX;
  r->exhaustive = points <= (double)exhaustive_max;
  point *list =
      malloc(((r->exhaustive ? (size_t)points : 0) + batch + 2 * MAX_KNOBS) *
             sizeof *list);
  s->pool =
      kiln__build_pool_create(s->ctx, s->op, o->jobs, o->before_build, o->user);
  if (list == NULL || s->pool == NULL) {
    free(list);
    kiln__build_pool_destroy(s->pool);
    return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY, FN ": %s",
                      list ? "cannot start a build thread"
                           : "out of host memory");
  }
  if (r->exhaustive)
    evaluate_list(s, list, all_points(s->sp, &start, list));
  else
    sample_and_climb(s, &start, points, batch, list);
  /* Builds still queued are dropped; one still compiling finishes on its
   * own (build_pool.c). */
  kiln__build_pool_destroy(s->pool);
  free(list);
  r->interrupted = o->stop != NULL && *o->stop;
  if (strcmp(r->best_params, r->default_params) != 0 && !r->interrupted &&
      !r->stuck)
    confirm(s);
  return kiln_tuning_set(s->ctx, s->op, r->best_params);
}

kiln_status kiln_tuning_search(kiln_queue *queue, const char *op,
                               const kiln_tuning_search_options *options,
                               kiln_tuning_result *result, size_t num_wait,
                               kiln_event *const *wait_list,
                               kiln_event **out_event) {
  struct space sp;
  double points = 0.0;
  if (result != NULL)
    memset(result, 0, sizeof *result);
  kiln_status st = check_args(queue, op, options, result, &sp, &points);
  if (st != KILN_OK)
    return st;
  cl_event inline_buf[KILN__WAIT_INLINE], *checked = NULL;
  st = kiln__wait_list(queue, num_wait, wait_list, inline_buf, &checked);
  kiln__wait_list_free(checked, inline_buf);
  if (st != KILN_OK) {
    char message[1024];
    snprintf(message, sizeof message, "%s", kiln_last_error());
    return kiln__fail(st, FN ": %s", message);
  }
  st = kiln_event_wait_all(num_wait, wait_list);
  if (st != KILN_OK)
    return st;
  const double t0 = now();
  struct search s = {
      .op = op,
      .ctx = kiln_queue_get_context(queue),
      .q = queue,
      .o = options,
      .sp = &sp,
      .r = result,
      .t_end = t0 + options->budget_s,
      .compile_timeout = options->compile_timeout_s > 0.0
                             ? options->compile_timeout_s
                             : DEFAULT_COMPILE_TIMEOUT,
      .run_timeout = options->run_timeout_s > 0.0 ? options->run_timeout_s
                                                  : DEFAULT_RUN_TIMEOUT,
  };
  st = search(&s, points);
  free(s.seen);
  if (st != KILN_OK)
    return st;
  if (out_event == NULL)
    return KILN_OK;
  /* Stuck: the queue still runs a launch, and a marker waited for would
   * wait for it too; the event completes once it ends. */
  if (result->stuck)
    return kiln_queue_marker(queue, 0, NULL, out_event);
  return kiln__done_event(queue, out_event);
}
