/* kiln tune's ops bound to the library's search (kiln_tuning_search,
 * kiln/kiln_tune.h): the op's gate and timing (tune_op_*.c), with the test
 * hooks, as the search's callbacks. */
#include "tune.h"

#include <stdio.h>

static kiln_tuning_verdict gate(void *user, kiln_queue *q, const char *params,
                                double run_timeout_s, double deadline,
                                char *why, size_t why_size) {
  const tune_binding *b = user;
  double seconds = 0.0;
  bool timed_out = false;
  why[0] = '\0';
  if (b->op->gate(kiln_queue_get_context(q), q, params, b->hooks, run_timeout_s,
                  deadline, &seconds, &timed_out, why, why_size))
    return KILN_TUNING_PASS;
  if (why[0] == '\0')
    return KILN_TUNING_DEADLINE;
  return timed_out ? KILN_TUNING_RUN_TIMEOUT : KILN_TUNING_FAIL;
}

static kiln_tuning_verdict time_op(void *user, kiln_queue *q,
                                   const char *params, const size_t *size,
                                   int runs, double stop_above, double deadline,
                                   double run_timeout_s, double *seconds,
                                   char *why, size_t why_size) {
  const tune_binding *b = user;
  *seconds = b->op->time(kiln_queue_get_context(q), q, size, runs, stop_above,
                         deadline, run_timeout_s, b->hooks, params);
  if (*seconds > 0.0)
    return KILN_TUNING_PASS;
  if (*seconds == 0.0)
    return KILN_TUNING_DEADLINE;
  if (*seconds == -2.0)
    return KILN_TUNING_RUN_TIMEOUT;
  snprintf(why, why_size, "%s", kiln_last_error());
  return KILN_TUNING_FAIL;
}

static void before_build(void *user, const char *params) {
  const tune_binding *b = user;
  if (b->hooks != NULL && b->hooks->before_build != NULL)
    b->hooks->before_build(b->hooks->user, params);
}

static void progress(void *user, size_t tried, size_t rejected, size_t skipped,
                     double best_score, const char *best_params) {
  const tune_binding *b = user;
  b->progress(b->progress_user, tried, rejected, skipped, best_score,
              best_params);
}

void tune_bind(tune_binding *b, kiln_tuning_search_options *o) {
  o->gate = gate;
  o->time = time_op;
  o->before_build = before_build;
  o->progress = b->progress != NULL ? progress : NULL;
  o->user = b;
  for (size_t i = 0; i < o->size_count && i < KILN_TUNING_MAX_SIZES; i++)
    o->work[i] = b->op->work(o->sizes[i]);
}
