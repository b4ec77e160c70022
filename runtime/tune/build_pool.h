/* The search's build workers (build_pool.c), private to the tune room:
 * threads that build an op's candidates on a context (kiln_tuning_build)
 * while the search checks and times the current one. */
#ifndef KILN_TUNE_BUILD_POOL_H
#define KILN_TUNE_BUILD_POOL_H

#include <signal.h>

#include "kiln/kiln.h"

struct kiln__build_pool;
struct kiln__build_job;

enum kiln__pool_result {
  KILN__POOL_OK,      /* built: the candidate's first launch finds it */
  KILN__POOL_FAILED,  /* the build failed (why) */
  KILN__POOL_TIMEOUT, /* it ran past the timeout and was given up on */
  KILN__POOL_DEADLINE /* the deadline came (or *stop) first: undecided */
};

/* jobs threads (0: 1) that build op's candidates on ctx; before_build (may
 * be NULL) is called on a worker's thread before each build. NULL when not
 * even one can start. ctx cannot be destroyed while a worker lives
 * (KILN_ERR_BUSY): after kiln__build_pool_destroy, workers leave once
 * their build, if any, returns. */
struct kiln__build_pool *kiln__build_pool_create(
    kiln_context *ctx, const char *op, unsigned jobs,
    void (*before_build)(void *user, const char *params), void *user);
/* Queue a build of params; NULL when out of memory. Valid until the pool
 * is destroyed. */
struct kiln__build_job *kiln__build_pool_submit(struct kiln__build_pool *p,
                                                const char *params);
/* Wait for job: at most timeout_s from the moment a worker started it, and
 * never past deadline (seconds of the monotonic clock) or *stop. */
enum kiln__pool_result kiln__build_pool_wait(
    struct kiln__build_pool *p, struct kiln__build_job *job, double timeout_s,
    double deadline, const volatile sig_atomic_t *stop, char *why,
    size_t why_size);
/* Drop queued builds; return once the idle workers have left. Builds
 * still running finish on their own, then their workers leave. */
void kiln__build_pool_destroy(struct kiln__build_pool *p);

#endif
