/* The search's build workers (build_pool.h): the next candidates' programs
 * are compiled on other threads (kiln_tuning_build) while the search checks
 * and times the current one, and a build that runs past its timeout is
 * given up on.
 *
 * clBuildProgram cannot be cancelled, so a build is never stopped: the
 * search stops *waiting* for it (kiln__build_pool_wait says
 * KILN__POOL_TIMEOUT,
 * and the candidate is rejected) and moves on. What keeps that safe:
 *  - the worker owns nothing the tuner frees: jobs live in the pool, and
 *    the pool is freed by whoever leaves it last, the tuner
 *    (kiln__build_pool_destroy) or a worker returning from its last build, so a
 *    build that ends after the tuner finished writes into live memory and
 *    nothing leaks once it returns;
 *  - each worker holds a queue of the context for its whole life, which
 *    kiln counts as a child of the context: kiln_context_destroy fails with
 *    KILN_ERR_BUSY while a worker lives (stuck in a compiler or not)
 *    instead of freeing the program memo the build writes to. the caller
 *    (kiln tune) leaves the context to the process's exit; a test waits;
 *  - a worker stuck in a timed-out build is replaced by a new one (up to a
 *    limit), so that the other candidates keep being built.
 * The tuner never blocks on a build for longer than its timeout or past
 * its deadline, whichever comes first. */
#include "build_pool.h"

#include "core/internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_BUILT, JOB_FAILED };

struct kiln__build_job {
  struct kiln__build_job *next_queued; /* FIFO of jobs not yet started */
  struct kiln__build_job *next_all;    /* every job, freed with the pool */
  enum job_state state;
  double started; /* when a worker took it */
  char params[KILN_TUNING_TEXT_CAPACITY];
  char why[512];
};

struct kiln__build_pool {
  pthread_mutex_t lock;
  pthread_cond_t work, done; /* a job was queued; a build ended */
  kiln_context *ctx;
  char op[32];
  void (*before_build)(void *user, const char *params);
  void *user;
  struct kiln__build_job *head, *tail, *all;
  unsigned refs;     /* the tuner's, and one per live worker */
  unsigned workers;  /* live workers (each holding its lease) */
  unsigned building; /* of them, those between taking a job and its end */
  unsigned max_workers;
  bool stop;
};

static double now(void) { return 1e-9 * (double)kiln__now_ns(); }

static void pool_free(struct kiln__build_pool *p) {
  for (struct kiln__build_job *b = p->all, *next; b != NULL; b = next) {
    next = b->next_all;
    free(b);
  }
  pthread_cond_destroy(&p->work);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

/* Drop one reference (under the lock, which it releases); the last frees. */
static void unref_unlock(struct kiln__build_pool *p) {
  const bool last = --p->refs == 0;
  pthread_mutex_unlock(&p->lock);
  if (last)
    pool_free(p);
}

struct worker_start {
  struct kiln__build_pool *pool;
  kiln_queue *lease; /* keeps the context alive while the worker lives */
};

static void *worker(void *arg) {
  struct worker_start *w = arg;
  struct kiln__build_pool *p = w->pool;
  kiln_queue *lease = w->lease;
  free(w);
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (!p->stop && p->head == NULL)
      pthread_cond_wait(&p->work, &p->lock);
    if (p->stop)
      break;
    struct kiln__build_job *b = p->head;
    p->head = b->next_queued;
    if (p->head == NULL)
      p->tail = NULL;
    b->state = JOB_RUNNING;
    b->started = now();
    p->building++;
    pthread_mutex_unlock(&p->lock);
    if (p->before_build != NULL)
      p->before_build(p->user, b->params);
    const kiln_status s = kiln_tuning_build(p->ctx, p->op, b->params);
    pthread_mutex_lock(&p->lock);
    if (s != KILN_OK)
      snprintf(b->why, sizeof b->why, "%s", kiln_last_error());
    b->state = s == KILN_OK ? JOB_BUILT : JOB_FAILED;
    p->building--;
    pthread_cond_broadcast(&p->done);
  }
  pthread_mutex_unlock(&p->lock);
  kiln_queue_destroy(lease);
  pthread_mutex_lock(&p->lock);
  p->workers--;
  pthread_cond_broadcast(&p->done);
  unref_unlock(p);
  return NULL;
}

/* Start one more worker (under the lock); false when it cannot. */
static bool spawn_locked(struct kiln__build_pool *p) {
  struct worker_start *w = malloc(sizeof *w);
  if (w == NULL)
    return false;
  w->pool = p;
  w->lease = NULL;
  pthread_t thread;
  if (kiln_queue_create(p->ctx, 0, &w->lease) != KILN_OK) {
    free(w);
    return false;
  }
  p->refs++;
  p->workers++;
  kiln_queue *lease = w->lease;
  if (pthread_create(&thread, NULL, worker, w) != 0) {
    p->refs--;
    p->workers--;
    kiln_queue_destroy(lease);
    free(w);
    return false;
  }
  pthread_detach(thread);
  return true;
}

struct kiln__build_pool *
kiln__build_pool_create(kiln_context *ctx, const char *op, unsigned jobs,
                        void (*before_build)(void *user, const char *params),
                        void *user) {
  struct kiln__build_pool *p = calloc(1, sizeof *p);
  if (p == NULL)
    return NULL;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->work, NULL);
  pthread_cond_init(&p->done, &attr);
  pthread_condattr_destroy(&attr);
  p->ctx = ctx;
  snprintf(p->op, sizeof p->op, "%s", op);
  p->before_build = before_build;
  p->user = user;
  p->refs = 1;
  if (jobs == 0)
    jobs = 1;
  /* Replacements for stuck workers: as many again, and a few more. */
  p->max_workers = 2 * jobs + 4;
  pthread_mutex_lock(&p->lock);
  unsigned started = 0;
  while (started < jobs && spawn_locked(p))
    started++;
  pthread_mutex_unlock(&p->lock);
  if (started == 0) {
    pthread_mutex_lock(&p->lock);
    unref_unlock(p);
    return NULL;
  }
  return p;
}

struct kiln__build_job *kiln__build_pool_submit(struct kiln__build_pool *p,
                                                const char *params) {
  struct kiln__build_job *b = calloc(1, sizeof *b);
  if (b == NULL)
    return NULL;
  snprintf(b->params, sizeof b->params, "%s", params);
  pthread_mutex_lock(&p->lock);
  b->next_all = p->all;
  p->all = b;
  if (p->tail != NULL)
    p->tail->next_queued = b;
  else
    p->head = b;
  p->tail = b;
  pthread_cond_signal(&p->work);
  pthread_mutex_unlock(&p->lock);
  return b;
}

enum kiln__pool_result kiln__build_pool_wait(struct kiln__build_pool *p,
                                             struct kiln__build_job *b,
                                             double timeout_s, double deadline,
                                             const volatile sig_atomic_t *stop,
                                             char *why, size_t why_size) {
  enum kiln__pool_result r = KILN__POOL_DEADLINE;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    const double t = now();
    if (b->state == JOB_BUILT) {
      r = KILN__POOL_OK;
      break;
    }
    if (b->state == JOB_FAILED) {
      snprintf(why, why_size, "%s", b->why);
      r = KILN__POOL_FAILED;
      break;
    }
    if (b->state == JOB_RUNNING && t >= b->started + timeout_s) {
      snprintf(why, why_size, "compile timeout (the build ran past %g s)",
               timeout_s);
      r = KILN__POOL_TIMEOUT;
      /* Its worker is lost to the compiler for now: replace it. */
      if (p->workers < p->max_workers)
        (void)spawn_locked(p);
      break;
    }
    if (t >= deadline || (stop != NULL && *stop))
      break;
    /* Wake at least every 100 ms for Ctrl-C, and at the timeout. */
    double until = t + 0.1;
    if (b->state == JOB_RUNNING && b->started + timeout_s < until)
      until = b->started + timeout_s;
    if (deadline < until)
      until = deadline;
    struct timespec ts = {(time_t)until,
                          (long)((until - (double)(time_t)until) * 1e9)};
    pthread_cond_timedwait(&p->done, &p->lock, &ts);
  }
  pthread_mutex_unlock(&p->lock);
  return r;
}

void kiln__build_pool_destroy(struct kiln__build_pool *p) {
  if (p == NULL)
    return;
  pthread_mutex_lock(&p->lock);
  p->stop = true;
  p->head = p->tail = NULL; /* queued builds are not needed any more */
  pthread_cond_broadcast(&p->work);
  /* Idle workers leave at once: wait for them (and their leases), so that
   * only a build given up on can keep the context busy. */
  while (p->workers > p->building)
    pthread_cond_wait(&p->done, &p->lock);
  unref_unlock(p);
}
