/* kiln._kiln's Queue (an in-order queue with its memory pool) and Buffer
 * (a block of device memory from a queue's pool). */
#include "_kiln.h"

#include <sys/mman.h>

/* ---- open or closed ---------------------------------------------------------- */

int queue_open(QueueObject *q) {
  if (!q->queue) {
    raise_with(KILN_ERR_INVALID_STATE, "the queue is closed");
    return 0;
  }
  return 1;
}

/* ---- Queue ------------------------------------------------------------------- */

static PyObject *Queue_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  static char *kwl[] = {"context", "profiling", "pool_limit", NULL};
  ContextObject *ctx;
  int profiling = 0;
  Py_ssize_t limit = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|pn", kwl, &ContextType, &ctx,
                                   &profiling, &limit))
    return NULL;
  if (!ctx_open(ctx))
    return NULL;
  if (limit < 0) {
    PyErr_SetString(PyExc_ValueError, "pool_limit must be >= 0");
    return NULL;
  }
  kiln_queue *q = NULL;
  kiln_pool *pool = NULL;
  kiln_status st = kiln_queue_create(ctx->ctx, profiling ? KILN_QUEUE_PROFILING : 0u, &q);
  if (st == KILN_OK && (st = kiln_pool_create(q, (size_t)limit, &pool)) != KILN_OK)
    kiln_queue_destroy(q);
  if (st != KILN_OK)
    return raise_status(st);
  QueueObject *self = (QueueObject *)type->tp_alloc(type, 0);
  if (!self) {
    kiln_pool_destroy(pool);
    kiln_queue_destroy(q);
    return NULL;
  }
  self->queue = q;
  self->pool = pool;
  self->ctx = ctx;
  Py_INCREF(ctx);
  return (PyObject *)self;
}

kiln_status queue_sync(QueueObject *q) {
  kiln_event *ev = NULL;
  kiln_status st = kiln_queue_marker(q->queue, 0, NULL, &ev);
  if (st == KILN_OK) {
    st = flush_wait(q, ev);
    kiln_event_release(ev);
  }
  return st;
}

static void Queue_dealloc(QueueObject *self) {
  if (self->queue) {
    Py_BEGIN_ALLOW_THREADS
    kiln_queue_destroy(self->queue);
    Py_END_ALLOW_THREADS
  }
  if (self->pool)
    kiln_pool_destroy(self->pool);
  Py_XDECREF(self->ctx);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Queue_sync(QueueObject *self, PyObject *unused) {
  if (!queue_open(self))
    return NULL;
  kiln_status st = queue_sync(self);
  if (st != KILN_OK)
    return raise_status(st);
  Py_RETURN_NONE;
}

static PyObject *Queue_flush(QueueObject *self, PyObject *unused) {
  if (!queue_open(self))
    return NULL;
  kiln_status st = kiln_queue_flush(self->queue);
  if (st != KILN_OK)
    return raise_status(st);
  Py_RETURN_NONE;
}

static PyObject *Queue_close(QueueObject *self, PyObject *unused) {
  if (self->queue) {
    kiln_queue *q = self->queue;
    kiln_status st;
    self->queue = NULL;
    Py_BEGIN_ALLOW_THREADS
    st = kiln_queue_destroy(q);
    Py_END_ALLOW_THREADS
    if (st != KILN_OK)
      return raise_status(st);
  }
  Py_RETURN_NONE;
}

static PyObject *Queue_marker(QueueObject *self, PyObject *unused) {
  if (!queue_open(self))
    return NULL;
  kiln_event *ev = NULL;
  kiln_status st = kiln_queue_marker(self->queue, 0, NULL, &ev);
  if (st != KILN_OK)
    return raise_status(st);
  return (PyObject *)event_wrap(ev, self);
}

static PyObject *Queue_pool_stats(QueueObject *self, PyObject *unused) {
  kiln_pool_stats s;
  kiln_status st = kiln_pool_get_stats(self->pool, &s);
  if (st != KILN_OK)
    return raise_status(st);
  return Py_BuildValue("{s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:K,s:K}",
                       "in_use_bytes", (Py_ssize_t)s.in_use_bytes,
                       "requested_bytes", (Py_ssize_t)s.requested_bytes,
                       "pending_bytes", (Py_ssize_t)s.pending_bytes,
                       "cached_bytes", (Py_ssize_t)s.cached_bytes,
                       "reserved_bytes", (Py_ssize_t)s.reserved_bytes,
                       "peak_reserved_bytes", (Py_ssize_t)s.peak_reserved_bytes,
                       "limit_bytes", (Py_ssize_t)s.limit_bytes,
                       "live_buffers", (Py_ssize_t)s.live_buffers,
                       "hits", (unsigned long long)s.hits,
                       "misses", (unsigned long long)s.misses);
}

static PyObject *Queue_trim(QueueObject *self, PyObject *unused) {
  size_t released = 0;
  kiln_status st = kiln_pool_trim(self->pool, &released);
  if (st != KILN_OK)
    return raise_status(st);
  return PyLong_FromSize_t(released);
}

static PyObject *Queue_get_context(QueueObject *self, void *unused) {
  Py_INCREF(self->ctx);
  return (PyObject *)self->ctx;
}

static PyObject *Queue_get_closed(QueueObject *self, void *unused) {
  return PyBool_FromLong(self->queue == NULL);
}

static PyMethodDef Queue_methods[] = {
    {"sync", (PyCFunction)Queue_sync, METH_NOARGS,
     "Block until every command enqueued so far has completed."},
    {"flush", (PyCFunction)Queue_flush, METH_NOARGS, "Submit enqueued commands without waiting."},
    {"close", (PyCFunction)Queue_close, METH_NOARGS,
     "Wait for pending work and destroy the queue; later use raises InvalidStateError."},
    {"marker", (PyCFunction)Queue_marker, METH_NOARGS,
     "An Event completing when everything enqueued so far has."},
    {"pool_stats", (PyCFunction)Queue_pool_stats, METH_NOARGS,
     "The statistics of the queue's memory pool (dict)."},
    {"trim", (PyCFunction)Queue_trim, METH_NOARGS,
     "Give the pool's cached blocks back to the driver; returns the bytes released."},
    {0}};

static PyGetSetDef Queue_getset[] = {
    {"context", (getter)Queue_get_context, NULL, "the Context", NULL},
    {"closed", (getter)Queue_get_closed, NULL, "whether close() was called", NULL},
    {0}};

PyTypeObject QueueType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kiln._kiln.Queue",
    .tp_basicsize = sizeof(QueueObject),
    .tp_dealloc = (destructor)Queue_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Queue(context, profiling=False, pool_limit=0): an in-order queue with its "
              "memory pool.",
    .tp_methods = Queue_methods,
    .tp_getset = Queue_getset,
    .tp_new = Queue_new,
};

/* ---- Buffer ------------------------------------------------------------------ */

static void Buffer_dealloc(BufferObject *self) {
  kiln_event *after[MAX_FOREIGN];
  size_t n = 0;
  for (int i = 0; i < self->nforeign; i++) {
    /* A closed queue finished its commands when it was destroyed. */
    /* Flushed: the pool's marker on the home queue waits for it, and some
     * drivers start nothing on a queue until it is flushed. */
    if (self->foreign[i]->queue &&
        kiln_queue_marker(self->foreign[i]->queue, 0, NULL, &after[n]) == KILN_OK) {
      kiln_queue_flush(self->foreign[i]->queue);
      n++;
    }
  }
  if (self->buf && (!self->pooled || n == 0 ||
                    kiln_pool_release_after(self->home->pool, self->buf, n, after, NULL) !=
                        KILN_OK))
    kiln_buffer_destroy(self->buf);
  for (size_t i = 0; i < n; i++)
    kiln_event_release(after[i]);
  for (int i = 0; i < self->nforeign; i++)
    Py_DECREF(self->foreign[i]);
  Py_XDECREF(self->keep);
  Py_XDECREF(self->home);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Blocks at least this large, new from the driver of a CPU device, are
 * advised to use transparent huge pages (advise_huge_pages). */
#define HUGE_ADVICE_MIN (4u << 20)

/* Wait for ev (released) without the GIL. */
static kiln_status wait_release(kiln_event *ev) {
  kiln_status st;
  Py_BEGIN_ALLOW_THREADS
  st = kiln_event_wait(ev);
  Py_END_ALLOW_THREADS
  kiln_event_release(ev);
  return st;
}

/* On a CPU device a block of device memory is host memory that the driver
 * allocated with 4 KiB pages, where NumPy advises transparent huge pages
 * for its large arrays: 64 MiB copies between the two measured 1.3-1.7
 * times as long as between two NumPy arrays on PoCL (the TLB misses of a
 * virtual machine). Advise the same for a block new from the driver, whose
 * pages nothing has touched yet (the advice applies at the first touch),
 * mapping it through the context's own idle queue, so that the host waits
 * for nothing else. A hint: failures are ignored. */
static void advise_huge_pages(ContextObject *ctx, kiln_buffer *b, size_t nbytes) {
#ifdef MADV_HUGEPAGE
  const uintptr_t huge = 2u << 20;
  if (!ctx->aux && kiln_queue_create(ctx->ctx, 0, &ctx->aux) != KILN_OK) {
    ctx->aux = NULL;
    return;
  }
  kiln_range r = {b, 0, nbytes / 4, KILN_F32};
  void *mapped = NULL;
  kiln_event *ev = NULL;
  if (kiln_buffer_map(ctx->aux, &r, &mapped, KILN_MAP_WRITE, 0, NULL, &ev) != KILN_OK)
    return;
  kiln_queue_flush(ctx->aux);
  if (wait_release(ev) == KILN_OK) {
    uintptr_t lo = ((uintptr_t)mapped + huge - 1) & ~(huge - 1);
    uintptr_t hi = ((uintptr_t)mapped + nbytes) & ~(huge - 1);
    if (hi > lo)
      madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
  }
  ev = NULL;
  /* Unmapped before the block is used on any queue. */
  if (kiln_buffer_unmap(ctx->aux, b, mapped, 0, NULL, &ev) == KILN_OK) {
    kiln_queue_flush(ctx->aux);
    wait_release(ev);
  }
#else
  (void)ctx;
  (void)b;
  (void)nbytes;
#endif
}

BufferObject *buffer_alloc(QueueObject *q, size_t nbytes) {
  if (!ctx_open(q->ctx))
    return NULL;
  kiln_buffer *b = NULL;
  kiln_pool_stats before = {0}, after = {0};
  int advise = q->ctx->host_memory && nbytes >= HUGE_ADVICE_MIN &&
               kiln_pool_get_stats(q->pool, &before) == KILN_OK;
  kiln_status st = kiln_pool_alloc(q->pool, nbytes ? nbytes : 4, 0, &b);
  if (st != KILN_OK)
    return (BufferObject *)raise_status(st);
  if (advise && kiln_pool_get_stats(q->pool, &after) == KILN_OK && after.misses > before.misses)
    advise_huge_pages(q->ctx, b, nbytes);
  BufferObject *self = PyObject_New(BufferObject, &BufferType);
  if (!self) {
    kiln_buffer_destroy(b);
    return NULL;
  }
  self->buf = b;
  self->home = q;
  Py_INCREF(q);
  self->keep = NULL;
  self->nbytes = nbytes;
  self->pooled = 1;
  self->nforeign = 0;
  return self;
}

PyTypeObject BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kiln._kiln.Buffer",
    .tp_basicsize = sizeof(BufferObject),
    .tp_dealloc = (destructor)Buffer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = no_new,
};
