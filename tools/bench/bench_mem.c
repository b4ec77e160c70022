/* `kiln bench`: moving data and launch overhead (README, "Moving data").
 *
 *   pool       kiln_pool_alloc + kiln_buffer_destroy against the driver's
 *              clCreateBuffer + clReleaseMemObject, bare and with a first
 *              use (a 64-byte write, finished every BATCH pairs), since
 *              some drivers (PoCL) allocate only at first use: there a bare
 *              create costs next to nothing and the allocation is paid by
 *              the first command, which the note compares the bare pool
 *              with.
 *   h2d, d2h   host-to-device and device-to-host copies from pinned memory
 *              (kiln_pinned), through the staging ring (kiln_staging), from
 *              pageable memory (malloc) and by mapping the device buffer
 *              and copying with memcpy (map, memcpy, unmap: on a CPU device
 *              the map is the buffer's own memory, no copy), against a host
 *              memcpy of the same bytes between two warm malloc buffers.
 *              Every way runs once to warm up (the device buffer's memory
 *              is allocated at its first use on PoCL), then the median of
 *              env->runs blocking copies; the note gives the map+unmap
 *              alone.
 *   sequence   100 small ops recorded once and replayed (command buffer,
 *              prepared list) against the same ops launched one by one,
 *              and 100 bare clEnqueueNDRangeKernel of a plain kernel over
 *              the same elements (arguments set once): the driver's own
 *              cost per command, the floor under any replay.
 *
 * Each runner fills r->cols: named times per item, the last one being the
 * baseline every other is compared with. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln_cl.h"

#define PAIRS 2000
#define BATCH 100

static void col(struct bench_result *r, const char *name, double s) {
  r->cols[r->num_cols].name = name;
  r->cols[r->num_cols].s = s;
  r->num_cols++;
}

static bool fail(struct bench_result *r, const char *what) {
  snprintf(r->note, sizeof r->note, "%s: %s", what, kiln_last_error());
  return false;
}

/* ---- pool ---------------------------------------------------------------- */

/* Median over env->runs loops of PAIRS allocate+free pairs, per pair; with
 * use, each allocation gets a 64-byte write. */
static double time_pool(const struct bench_env *env, kiln_pool *pool,
                        size_t bytes, bool use, const void *src) {
  double t[101];
  for (int run = 0; run <= env->runs; run++) { /* run 0 warms up */
    double t0 = tools_now();
    for (int i = 0; i < PAIRS; i++) {
      kiln_buffer *b;
      if (kiln_pool_alloc(pool, bytes, 0, &b) != KILN_OK)
        return -1.0;
      if (use &&
          kiln_buffer_write(env->queue, src, &(kiln_range){b, 0, 16, KILN_U32},
                            0, NULL, NULL) != KILN_OK)
        return -1.0;
      if (kiln_buffer_destroy(b) != KILN_OK)
        return -1.0;
      if (use && (i + 1) % BATCH == 0 && kiln_queue_finish(env->queue))
        return -1.0;
    }
    if (kiln_queue_finish(env->queue) != KILN_OK)
      return -1.0;
    if (run > 0)
      t[run - 1] = (tools_now() - t0) / PAIRS;
  }
  bench_sort(t, (size_t)env->runs);
  return t[env->runs / 2];
}

static double time_driver(const struct bench_env *env, size_t bytes, bool use,
                          const void *src) {
  cl_context c = kiln_context_get_cl_context(env->ctx);
  cl_command_queue q = kiln_queue_get_cl_queue(env->queue);
  double t[101];
  for (int run = 0; run <= env->runs; run++) {
    double t0 = tools_now();
    for (int i = 0; i < PAIRS; i++) {
      cl_int err;
      cl_mem m = clCreateBuffer(c, CL_MEM_READ_WRITE, bytes, NULL, &err);
      if (err != CL_SUCCESS)
        return -1.0;
      if (use)
        err = clEnqueueWriteBuffer(q, m, CL_FALSE, 0, 64, src, 0, NULL, NULL);
      clReleaseMemObject(m);
      if (err != CL_SUCCESS)
        return -1.0;
      if (use && (i + 1) % BATCH == 0 && clFinish(q) != CL_SUCCESS)
        return -1.0;
    }
    if (clFinish(q) != CL_SUCCESS)
      return -1.0;
    if (run > 0)
      t[run - 1] = (tools_now() - t0) / PAIRS;
  }
  bench_sort(t, (size_t)env->runs);
  return t[env->runs / 2];
}

bool bench_run_pool(const struct bench_env *env, struct bench_result *r) {
  size_t bytes = r->shape[0];
  if (bytes < 64) {
    snprintf(r->note, sizeof r->note, "size must be at least 64 bytes");
    return false;
  }
  static const unsigned char src[64] = {1, 2, 3};
  kiln_pool *pool;
  if (kiln_pool_create(env->queue, 0, &pool) != KILN_OK)
    return fail(r, "kiln_pool_create");
  double pool_s = time_pool(env, pool, bytes, false, src);
  double pool_use_s = pool_s >= 0 ? time_pool(env, pool, bytes, true, src) : -1;
  kiln_pool_stats st = {0};
  kiln_pool_get_stats(pool, &st);
  kiln_pool_destroy(pool);
  if (pool_s < 0 || pool_use_s < 0)
    return fail(r, "pool");
  double drv_s = time_driver(env, bytes, false, src);
  double drv_use_s = time_driver(env, bytes, true, src);
  if (drv_s < 0 || drv_use_s < 0) {
    snprintf(r->note, sizeof r->note, "clCreateBuffer or a write failed");
    return false;
  }
  col(r, "pool", pool_s);
  col(r, "create", drv_s);
  col(r, "pool+write", pool_use_s);
  col(r, "create+write", drv_use_s);
  r->pairs = true;
  r->median_s = pool_s;
  snprintf(r->note, sizeof r->note,
           "per pair; pool vs create+write %.1fx; pool hits %llu, misses "
           "%llu, peak %zu bytes",
           drv_use_s / pool_s, (unsigned long long)st.hits,
           (unsigned long long)st.misses, st.peak_reserved_bytes);
  r->verified = false;
  return true;
}

/* ---- transfers ----------------------------------------------------------- */

/* Median time of env->runs copies (after one warm-up) by way. */
enum way { PINNED, STAGED, PAGEABLE, MAPPED, MAP_ONLY, MEMCPY };

/* Map dev (for writing when h2d), copy n bytes with memcpy unless
 * map_only, unmap, wait. */
static kiln_status map_copy(const struct bench_env *env, bool h2d,
                            kiln_buffer *dev, void *host, size_t n,
                            bool map_only) {
  void *p = NULL;
  kiln_event *ev = NULL;
  kiln_status s =
      kiln_buffer_map(env->queue, &(kiln_range){dev, 0, n / 4, KILN_U32}, &p,
                      h2d ? KILN_MAP_WRITE : KILN_MAP_READ, 0, NULL, &ev);
  if (s != KILN_OK)
    return s;
  s = kiln_event_wait(ev);
  kiln_event_release(ev);
  if (s == KILN_OK && !map_only) {
    if (h2d)
      memcpy(p, host, n);
    else
      memcpy(host, p, n);
  }
  kiln_status u = kiln_buffer_unmap(env->queue, dev, p, 0, NULL, NULL);
  if (s == KILN_OK)
    s = u;
  if (s == KILN_OK)
    s = kiln_queue_finish(env->queue);
  return s;
}

static double time_copy(const struct bench_env *env, enum way way, bool h2d,
                        kiln_buffer *dev, void *pinned, void *pageable,
                        void *other, kiln_staging *staging, size_t n) {
  double t[101];
  for (int run = 0; run <= env->runs; run++) {
    double t0 = tools_now();
    kiln_status s = KILN_OK;
    switch (way) {
    case PINNED:
    case PAGEABLE: {
      void *host = way == PINNED ? pinned : pageable;
      s = h2d ? kiln_buffer_write_sync(env->queue, host,
                                       &(kiln_range){dev, 0, n / 4, KILN_U32})
              : kiln_buffer_read_sync(
                    env->queue, &(kiln_range){dev, 0, n / 4, KILN_U32}, host);
      break;
    }
    case STAGED:
      s = h2d ? kiln_staging_write(staging, pageable,
                                   &(kiln_range){dev, 0, n / 4, KILN_U32}, 0,
                                   NULL, NULL)
              : kiln_staging_read(staging,
                                  &(kiln_range){dev, 0, n / 4, KILN_U32},
                                  pageable, 0, NULL, NULL);
      break;
    case MAPPED:
    case MAP_ONLY:
      s = map_copy(env, h2d, dev, pageable, n, way == MAP_ONLY);
      break;
    case MEMCPY:
      if (h2d)
        memcpy(other, pageable, n);
      else
        memcpy(pageable, other, n);
      break;
    }
    if (s != KILN_OK)
      return -1.0;
    if (run > 0)
      t[run - 1] = tools_now() - t0;
  }
  bench_sort(t, (size_t)env->runs);
  return t[env->runs / 2];
}

static bool run_transfer(const struct bench_env *env, struct bench_result *r,
                         bool h2d) {
  size_t n = r->shape[0];
  bool ok = false;
  kiln_buffer *dev = NULL;
  kiln_pinned *pinned = NULL;
  kiln_staging *staging = NULL;
  unsigned char *pageable = malloc(n), *other = malloc(n), *check = malloc(n);
  if (pageable == NULL || other == NULL || check == NULL) {
    snprintf(r->note, sizeof r->note, "out of host memory");
    goto done;
  }
  for (size_t i = 0; i < n; i++)
    pageable[i] = (unsigned char)(i * 131u + 7u);
  memset(other, 0, n);
  if (kiln_buffer_create(env->ctx, n, 0, &dev) != KILN_OK ||
      kiln_pinned_create(env->queue, n, &pinned) != KILN_OK ||
      kiln_staging_create(env->queue, 1u << 20, 4, &staging) != KILN_OK) {
    fail(r, "setup");
    goto done;
  }
  memcpy(kiln_pinned_get_ptr(pinned), pageable, n);
  static const enum way ways[] = {PINNED, STAGED,   PAGEABLE,
                                  MAPPED, MAP_ONLY, MEMCPY};
  static const char *names[] = {"pinned", "staged",   "pageable",
                                "mapped", "map-only", "memcpy"};
  double map_only_s = 0;
  for (int w = 0; w < 6; w++) {
    double s = time_copy(env, ways[w], h2d, dev, kiln_pinned_get_ptr(pinned),
                         pageable, other, staging, n);
    if (s < 0) {
      fail(r, names[w]);
      goto done;
    }
    if (ways[w] == MAP_ONLY)
      map_only_s = s;
    else
      col(r, names[w], s);
  }
  snprintf(r->note, sizeof r->note, "map+unmap alone %.1f us",
           map_only_s * 1e6);
  r->median_s = r->cols[0].s;
  r->col_bytes = (double)n;
  ok = true;
  if (env->verify) {
    /* Every way moved the same bytes: the device copy and the host copy
     * must both equal the pattern. */
    ok = kiln_buffer_read_sync(env->queue,
                               &(kiln_range){dev, 0, n / 4, KILN_U32},
                               check) == KILN_OK &&
         memcmp(check, h2d ? pageable : kiln_pinned_get_ptr(pinned), n) == 0;
    if (!ok)
      snprintf(r->note, sizeof r->note, "the device copy differs");
    r->verified = ok;
  }
done:
  kiln_staging_destroy(staging);
  kiln_pinned_destroy(pinned);
  kiln_buffer_destroy(dev);
  free(pageable);
  free(other);
  free(check);
  return ok;
}

bool bench_run_h2d(const struct bench_env *env, struct bench_result *r) {
  return run_transfer(env, r, true);
}

bool bench_run_d2h(const struct bench_env *env, struct bench_result *r) {
  return run_transfer(env, r, false);
}

/* ---- sequence ------------------------------------------------------------ */

#define SEQ_OPS 100

/* SEQ_OPS small ops on x and y, alternately an axpy and a scale: each one
 * depends on the one before. Factors keep values bounded and exact. */
static kiln_status small_ops(kiln_queue *q, size_t n, kiln_buffer *x,
                             kiln_buffer *y) {
  for (int i = 0; i < SEQ_OPS; i++) {
    kiln_status s = i % 2 == 0 ? kiln_axpy(q, &(kiln_range){x, 0, n, KILN_F32},
                                           &(kiln_range){y, 0, n, KILN_F32},
                                           0.5f, 0, NULL, NULL)
                               : kiln_scale(q, &(kiln_range){y, 0, n, KILN_F32},
                                            0.5f, 0, NULL, NULL);
    if (s != KILN_OK)
      return s;
  }
  return KILN_OK;
}

struct seq_args {
  kiln_queue *q;
  size_t n;
  kiln_buffer *x, *y;
  kiln_sequence *seq;
};

static kiln_status direct(void *p) {
  struct seq_args *a = p;
  return small_ops(a->q, a->n, a->x, a->y);
}

static kiln_status replay(void *p) {
  struct seq_args *a = p;
  return kiln_sequence_replay(a->seq, 0, NULL, NULL);
}

static const char bare_source[] =
    "__kernel void scale(__global float *x, float a, ulong n) {\n"
    "  size_t i = get_global_id(0);\n"
    "  if (i < n)\n"
    "    x[i] *= a;\n"
    "}\n";

struct bare_args {
  cl_command_queue q;
  cl_kernel k;
  size_t global, local;
};

static kiln_status bare(void *p) {
  const struct bare_args *a = p;
  for (int i = 0; i < SEQ_OPS; i++)
    if (clEnqueueNDRangeKernel(a->q, a->k, 1, NULL, &a->global, &a->local, 0,
                               NULL, NULL) != CL_SUCCESS)
      return KILN_ERR_OPENCL;
  return KILN_OK;
}

/* The bare loop's kernel on z (scaled by 1, so it stays as it is). */
static bool bare_setup(const struct bench_env *env, size_t n, kiln_buffer *z,
                       kiln_program **prog, kiln_kernel **k,
                       struct bare_args *b) {
  if (kiln_program_create_built(env->ctx, bare_source, NULL, prog) != KILN_OK ||
      kiln_kernel_create(*prog, "scale", k) != KILN_OK)
    return false;
  cl_kernel ck = kiln_kernel_get_cl_kernel(*k);
  cl_mem zm = kiln_buffer_get_cl_mem(z);
  float one = 1.0f;
  cl_ulong n64 = n;
  b->q = kiln_queue_get_cl_queue(env->queue);
  b->k = ck;
  b->local =
      env->info->max_work_group_size < 64 ? env->info->max_work_group_size : 64;
  b->global = (n + b->local - 1) / b->local * b->local;
  return clSetKernelArg(ck, 0, sizeof zm, &zm) == CL_SUCCESS &&
         clSetKernelArg(ck, 1, sizeof one, &one) == CL_SUCCESS &&
         clSetKernelArg(ck, 2, sizeof n64, &n64) == CL_SUCCESS;
}

bool bench_run_sequence(const struct bench_env *env, struct bench_result *r) {
  size_t n = r->shape[0];
  bool ok = false;
  kiln_buffer *x = NULL, *y = NULL, *z = NULL;
  kiln_sequence *cb = NULL, *list = NULL;
  kiln_program *prog = NULL;
  kiln_kernel *k = NULL;
  struct bare_args b;
  float *host = malloc(n * 4), *want = malloc(n * 4), *got = malloc(n * 4);
  if (host == NULL || want == NULL || got == NULL) {
    snprintf(r->note, sizeof r->note, "out of host memory");
    goto done;
  }
  for (size_t i = 0; i < n; i++)
    host[i] = (float)(i % 64) * 0.25f;
  if (kiln_buffer_create(env->ctx, n * 4, 0, &x) != KILN_OK ||
      kiln_buffer_create(env->ctx, n * 4, 0, &y) != KILN_OK ||
      kiln_buffer_create(env->ctx, n * 4, 0, &z) != KILN_OK ||
      kiln_buffer_write_sync(env->queue, host,
                             &(kiln_range){x, 0, n, KILN_F32}) != KILN_OK ||
      kiln_buffer_write_sync(env->queue, host,
                             &(kiln_range){y, 0, n, KILN_F32}) != KILN_OK ||
      kiln_buffer_write_sync(env->queue, host,
                             &(kiln_range){z, 0, n, KILN_F32}) != KILN_OK ||
      !bare_setup(env, n, z, &prog, &k, &b)) {
    fail(r, "setup");
    goto done;
  }
  struct seq_args a = {env->queue, n, x, y, NULL};
  if (kiln_sequence_begin(env->queue, KILN_SEQUENCE_COMMAND_BUFFER, &cb) !=
          KILN_OK ||
      small_ops(env->queue, n, x, y) != KILN_OK ||
      kiln_sequence_end(cb) != KILN_OK ||
      kiln_sequence_begin(env->queue, KILN_SEQUENCE_PREPARED_LIST, &list) !=
          KILN_OK ||
      small_ops(env->queue, n, x, y) != KILN_OK ||
      kiln_sequence_end(list) != KILN_OK) {
    fail(r, "recording");
    goto done;
  }
  a.seq = cb;
  double cb_s = bench_time(env, replay, &a);
  a.seq = list;
  double list_s = bench_time(env, replay, &a);
  double direct_s = bench_time(env, direct, &a);
  double bare_s = bench_time(env, bare, &b);
  if (cb_s < 0 || list_s < 0 || direct_s < 0 || bare_s < 0) {
    fail(r, "run");
    goto done;
  }
  col(r, "list", list_s);
  col(r, kiln_sequence_uses_command_buffer(cb) ? "cmdbuf" : "replay",
      cb_s);
  col(r, "bare-cl", bare_s);
  col(r, "one-by-one", direct_s);
  r->median_s = list_s;
  snprintf(r->note, sizeof r->note,
           "per command: list %.2f us, bare clEnqueueNDRangeKernel %.2f us",
           list_s / SEQ_OPS * 1e6, bare_s / SEQ_OPS * 1e6);
  ok = true;
  if (env->verify) {
    /* One direct run and one replay from the same start give the same. */
    kiln_status s = kiln_buffer_write_sync(env->queue, host,
                                           &(kiln_range){y, 0, n, KILN_F32});
    if (s == KILN_OK)
      s = small_ops(env->queue, n, x, y);
    if (s == KILN_OK)
      s = kiln_buffer_read_sync(env->queue, &(kiln_range){y, 0, n, KILN_F32},
                                want);
    if (s == KILN_OK)
      s = kiln_buffer_write_sync(env->queue, host,
                                 &(kiln_range){y, 0, n, KILN_F32});
    if (s == KILN_OK)
      s = kiln_sequence_replay(list, 0, NULL, NULL);
    if (s == KILN_OK)
      s = kiln_buffer_read_sync(env->queue, &(kiln_range){y, 0, n, KILN_F32},
                                got);
    ok = s == KILN_OK && memcmp(want, got, n * 4) == 0;
    if (!ok)
      snprintf(r->note, sizeof r->note, "replay differs from direct ops");
    r->verified = ok;
  }
done:
  kiln_sequence_destroy(cb);
  kiln_sequence_destroy(list);
  kiln_kernel_destroy(k);
  kiln_program_destroy(prog);
  kiln_buffer_destroy(x);
  kiln_buffer_destroy(y);
  kiln_buffer_destroy(z);
  free(host);
  free(want);
  free(got);
  return ok;
}

/* ---- pipeline ------------------------------------------------------------ */

#define BATCHES 64

struct pipe_args {
  kiln_queue *q;
  size_t n; /* floats per batch */
  float *in, *out;
  kiln_buffer *x, *y; /* the serial run's buffers */
};

/* The kernels of one batch: y = exp(-|x|) * 2 + x, a few passes. */
static kiln_status batch_ops(kiln_queue *q, size_t n, kiln_buffer *in,
                             kiln_buffer *out, size_t num_wait,
                             kiln_event *const *wait_list,
                             kiln_event **out_event) {
  kiln_status s =
      kiln_unary(q, KILN_UNARY_ABS, &(kiln_range){in, 0, n, KILN_F32},
                 &(kiln_range){out, 0, n, KILN_F32}, num_wait, wait_list, NULL);
  if (s == KILN_OK)
    s = kiln_scale(q, &(kiln_range){out, 0, n, KILN_F32}, -1.0f, 0, NULL, NULL);
  if (s == KILN_OK)
    s = kiln_unary(q, KILN_UNARY_EXP, &(kiln_range){out, 0, n, KILN_F32},
                   &(kiln_range){out, 0, n, KILN_F32}, 0, NULL, NULL);
  if (s == KILN_OK)
    s = kiln_scale(q, &(kiln_range){out, 0, n, KILN_F32}, 2.0f, 0, NULL, NULL);
  if (s == KILN_OK)
    s = kiln_axpy(q, &(kiln_range){in, 0, n, KILN_F32},
                  &(kiln_range){out, 0, n, KILN_F32}, 1.0f, 0, NULL, out_event);
  return s;
}

static kiln_status pipe_fn(void *user, kiln_queue *queue, size_t batch,
                           kiln_buffer *in, kiln_buffer *out, size_t num_wait,
                           kiln_event *const *wait_list,
                           kiln_event **out_event) {
  (void)batch;
  const struct pipe_args *a = user;
  return batch_ops(queue, a->n, in, out, num_wait, wait_list, out_event);
}

static kiln_status pipelined(void *p) {
  struct pipe_args *a = p;
  return kiln_pipeline_run(a->q, NULL, BATCHES, a->n * 4, a->n * 4, a->in,
                           a->out, pipe_fn, a, 0, NULL, NULL);
}

static kiln_status serial(void *p) {
  struct pipe_args *a = p;
  for (size_t i = 0; i < BATCHES; i++) {
    kiln_status s = kiln_buffer_write_sync(
        a->q, a->in + i * a->n, &(kiln_range){a->x, 0, a->n, KILN_F32});
    if (s == KILN_OK)
      s = batch_ops(a->q, a->n, a->x, a->y, 0, NULL, NULL);
    if (s == KILN_OK)
      s = kiln_buffer_read_sync(a->q, &(kiln_range){a->y, 0, a->n, KILN_F32},
                                a->out + i * a->n);
    if (s != KILN_OK)
      return s;
  }
  return KILN_OK;
}

bool bench_run_pipeline(const struct bench_env *env, struct bench_result *r) {
  size_t n = r->shape[0];
  bool ok = false;
  struct pipe_args a = {env->queue, n, NULL, NULL, NULL, NULL};
  float *want = NULL;
  size_t total;
  if (__builtin_mul_overflow(n, (size_t)BATCHES * 4, &total)) {
    snprintf(r->note, sizeof r->note, "size too large");
    return false;
  }
  a.in = malloc(total);
  a.out = malloc(total);
  want = malloc(total);
  if (a.in == NULL || a.out == NULL || want == NULL) {
    snprintf(r->note, sizeof r->note, "out of host memory");
    goto done;
  }
  for (size_t i = 0; i < n * BATCHES; i++)
    a.in[i] = (float)(i % 97) * 0.03125f - 1.5f;
  if (kiln_buffer_create(env->ctx, n * 4, 0, &a.x) != KILN_OK ||
      kiln_buffer_create(env->ctx, n * 4, 0, &a.y) != KILN_OK) {
    fail(r, "setup");
    goto done;
  }
  double serial_s = bench_time(env, serial, &a);
  memcpy(want, a.out, total);
  double pipe_s = bench_time(env, pipelined, &a);
  if (serial_s < 0 || pipe_s < 0) {
    fail(r, "run");
    goto done;
  }
  col(r, "pipelined", pipe_s);
  col(r, "serial", serial_s);
  r->median_s = pipe_s;
  r->col_bytes = 2.0 * (double)total; /* uploaded and downloaded */
  snprintf(r->note, sizeof r->note, "%d batches", BATCHES);
  ok = true;
  if (env->verify) {
    ok = memcmp(want, a.out, total) == 0;
    if (!ok)
      snprintf(r->note, sizeof r->note, "pipelined differs from serial");
    r->verified = ok;
  }
done:
  kiln_buffer_destroy(a.x);
  kiln_buffer_destroy(a.y);
  free(a.in);
  free(a.out);
  free(want);
  return ok;
}
