/* What kiln tune's gates and timings (tune_op_*.c) share: host data in
 * every storage format, the gates' frame (tune_run_cases) and the timings'
 * (tune_time_loop, tune_time_f32).
 *
 * Inputs are exact in every storage format (bf16: f32 cut to 16 bits; f16:
 * multiples of 2^-10 below 2), so the references need no rounding. */
#include "../commands.h"
#include "tune.h"

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- host data in any storage format ------------------------------------- */

const kiln_dtype tune_float_types[3] = {KILN_F32, KILN_F16, KILN_BF16};

uint32_t tune_lcg(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

/* A value in [-2, 2) exact in dt (see the opening comment). */
static float draw(uint32_t *s, kiln_dtype dt) {
  const int k = (int)(tune_lcg(s) % 4096) - 2048;
  if (dt == KILN_F16)
    return (float)k / 1024.0f;
  float v = (float)tune_lcg(s) / (float)(1u << 24) * 4.0f - 2.0f;
  if (dt == KILN_BF16) {
    uint32_t u;
    memcpy(&u, &v, 4);
    u &= 0xffff0000u;
    memcpy(&v, &u, 4);
  }
  return v;
}

/* Store v (exact in dt) as element i of buf. */
void tune_put(kiln_dtype dt, void *buf, size_t i, float v) {
  if (dt == KILN_F32) {
    memcpy((char *)buf + 4 * i, &v, 4);
    return;
  }
  uint16_t h;
  if (dt == KILN_F16)
    kiln_f32_to_f16(&v, &h, 1);
  else
    kiln_f32_to_bf16(&v, &h, 1);
  memcpy((char *)buf + 2 * i, &h, 2);
}

double tune_get(kiln_dtype dt, const void *buf, size_t i) {
  float v;
  if (dt == KILN_F32) {
    memcpy(&v, (const char *)buf + 4 * i, 4);
    return v;
  }
  uint16_t h;
  memcpy(&h, (const char *)buf + 2 * i, 2);
  if (dt == KILN_F16)
    kiln_f16_to_f32(&h, &v, 1);
  else
    kiln_bf16_to_f32(&h, &v, 1);
  return v;
}

void *tune_random_data(kiln_context *ctx, kiln_queue *q, kiln_dtype dt,
                       size_t count, uint32_t seed, kiln_buffer **out) {
  const size_t bytes = count * kiln_dtype_size(dt);
  void *h = malloc(bytes);
  *out = NULL;
  if (h == NULL)
    return NULL;
  for (size_t i = 0; i < count; i++)
    tune_put(dt, h, i, draw(&seed, dt));
  if (kiln_buffer_create(ctx, bytes, 0, out) != KILN_OK ||
      kiln_buffer_write_sync(q, h, &(kiln_range){*out, 0, count, dt}) !=
          KILN_OK) {
    kiln_buffer_destroy(*out);
    *out = NULL;
    free(h);
    return NULL;
  }
  return h;
}

void *tune_download(kiln_queue *q, const kiln_range *src, char *why,
                    size_t size) {
  void *h = malloc(src->count * kiln_dtype_size(src->dtype));
  if (h == NULL || kiln_buffer_read_sync(q, src, h) != KILN_OK) {
    snprintf(why, size, "%s", h ? kiln_last_error() : "out of host memory");
    free(h);
    return NULL;
  }
  return h;
}

bool tune_finish(kiln_queue *q, double run_timeout_s, bool *timed_out,
                 char *why, size_t size) {
  kiln_event *ev = NULL;
  const bool ok = kiln_queue_marker(q, 0, NULL, &ev) == KILN_OK &&
                  tune_wait(ev, run_timeout_s, timed_out);
  kiln_event_release(ev);
  if (!ok && *timed_out)
    snprintf(why, size, "run timeout (a launch ran past %g s)", run_timeout_s);
  else if (!ok)
    snprintf(why, size, "%s", kiln_last_error());
  return ok;
}

void tune_hook(const tune_hooks *hooks, const char *params, kiln_queue *q,
               kiln_buffer *out, size_t bytes) {
  if (hooks != NULL && hooks->after_gemm != NULL)
    hooks->after_gemm(hooks->user, params, q, out, bytes / 4);
}

bool tune_past(double deadline, char *why) {
  if (deadline > 0.0 && tools_now() >= deadline) {
    why[0] = '\0';
    return true;
  }
  return false;
}

bool tune_run_cases(const tune_case_env *env, const void *cases, size_t count,
                    size_t stride,
                    bool (*run)(const tune_case_env *env, const void *c),
                    double deadline, double *seconds) {
  const double t0 = tools_now();
  bool ok = true;
  *env->timed_out = false;
  for (size_t i = 0; i < count && ok; i++)
    ok = !tune_past(deadline, env->why) &&
         run(env, (const char *)cases + i * stride);
  *seconds = tools_now() - t0;
  return ok;
}

bool tune_wait(kiln_event *ev, double timeout_s, bool *timed_out) {
  *timed_out = false;
  const double t_end = tools_now() + timeout_s;
  /* Poll: kiln_event_wait cannot be given up on. A few yields first (a
   * short kernel's time stays exact), then sleeps growing from 20 us to
   * 1 ms (a long one's is off by under 1 ms, and the waiting thread leaves
   * the CPU to a CPU device). */
  long sleep_ns = 20000;
  for (int spins = 0;; spins++) {
    kiln_event_state st;
    if (kiln_event_get_state(ev, &st) != KILN_OK)
      return false;
    if (st == KILN_EVENT_COMPLETE || st == KILN_EVENT_FAILED)
      return kiln_event_wait(ev) == KILN_OK; /* the failure's message */
    if (tools_now() >= t_end) {
      *timed_out = true;
      return false;
    }
    if (spins < 100) {
      sched_yield();
      continue;
    }
    struct timespec ts = {0, sleep_ns};
    nanosleep(&ts, NULL);
    if (sleep_ns < 1000000)
      sleep_ns *= 2;
  }
}

double tune_time_loop(kiln_queue *q,
                      kiln_status (*run)(kiln_queue *q, void *arg), void *arg,
                      int runs, double stop_above, double deadline,
                      double run_timeout_s, const tune_hooks *hooks,
                      const char *params) {
  double best = -1.0;
  /* One warm-up run (kernel build and first-touch costs), then timed runs. */
  for (int r = -1; r < runs; r++) {
    if (deadline > 0.0 && tools_now() >= deadline)
      return best < 0.0 ? 0.0 : best; /* 0: no figure, out of time */
    const double t0 = tools_now();
    double t = 0.0;
    int ops = 0;
    do { /* the warm-up once; a timed run for TUNE_MIN_RUN_SECONDS */
      bool timed_out = false;
      char why[8];
      if (run(q, arg) != KILN_OK ||
          !tune_finish(q, run_timeout_s, &timed_out, why, sizeof why))
        return timed_out ? -2.0 : -1.0;
      t = tools_now() - t0;
      ops++;
    } while (r >= 0 && t < TUNE_MIN_RUN_SECONDS &&
             !(deadline > 0.0 && tools_now() >= deadline));
    t /= ops;
    if (hooks != NULL && hooks->time_scale != NULL)
      t *= hooks->time_scale(hooks->user, params);
    /* The warm-up already says when a candidate is clearly slower (its
     * program was built by the gate): a slow candidate at a large size
     * would otherwise cost the budget several long runs. Only when far
     * slower, though: its time also holds one-time costs (PoCL compiles a
     * kernel's work-group function again at the first launch of a new
     * size, and buffers are touched first), which under load took the
     * transpose's fastest points for slow ones. */
    if (r < 0 && !(stop_above > 0.0 && t > 3.0 * stop_above))
      continue;
    if (best < 0.0 || t < best)
      best = t;
    if (stop_above > 0.0 && t > stop_above)
      break; /* clearly slower than the best so far: no need for more */
  }
  return best;
}

struct f32_run {
  tune_f32_run_fn run;
  const size_t *z;
  kiln_buffer *a, *b, *c;
};

static kiln_status run_f32(kiln_queue *q, void *arg) {
  const struct f32_run *r = arg;
  return r->run(q, r->z, r->a, r->b, r->c);
}

double tune_time_f32(kiln_context *ctx, kiln_queue *q, const size_t *z,
                     size_t elements, tune_f32_run_fn run, int runs,
                     double stop_above, double deadline, double run_timeout_s,
                     const tune_hooks *hooks, const char *params) {
  struct f32_run r = {run, z, NULL, NULL, NULL};
  double best = -1.0;
  const float one = 1.0f;
  if (kiln_buffer_create(ctx, elements * 4, 0, &r.a) == KILN_OK &&
      kiln_buffer_create(ctx, elements * 4, 0, &r.b) == KILN_OK &&
      kiln_buffer_create(ctx, 16, 0, &r.c) == KILN_OK &&
      kiln_buffer_fill(q, &one, 4, &(kiln_range){r.a, 0, elements, KILN_F32}, 0,
                       NULL, NULL) == KILN_OK &&
      kiln_buffer_fill(q, &one, 4, &(kiln_range){r.b, 0, elements, KILN_F32}, 0,
                       NULL, NULL) == KILN_OK &&
      kiln_queue_finish(q) == KILN_OK)
    best = tune_time_loop(q, run_f32, &r, runs, stop_above, deadline,
                          run_timeout_s, hooks, params);
  kiln_buffer_destroy(r.a);
  kiln_buffer_destroy(r.b);
  kiln_buffer_destroy(r.c);
  return best;
}
