/* kiln._kiln's objects around kiln's handles: the device list, Context,
 * Queue, Buffer (a block of device memory, from a queue's pool), Pinned
 * host memory and Event. */
#include "_kiln.h"

#include <sys/mman.h>

/* ---- open or closed ---------------------------------------------------------- */

int ctx_open(ContextObject *c) {
  if (c->closed || !c->ctx) {
    raise_with(KILN_ERR_INVALID_STATE, "the context (kiln.Device) is closed");
    return 0;
  }
  return 1;
}

int queue_open(QueueObject *q) {
  if (!q->queue) {
    raise_with(KILN_ERR_INVALID_STATE, "the queue is closed");
    return 0;
  }
  return 1;
}

EventObject *event_wrap(kiln_event *ev, QueueObject *q) {
  EventObject *e = PyObject_New(EventObject, &EventType);
  if (!e) {
    kiln_event_release(ev);
    return NULL;
  }
  e->event = ev;
  e->ctx = q->ctx;
  Py_INCREF(e->ctx);
  e->queue = q;
  Py_INCREF(q);
  e->holding = 0;
  return e;
}

/* Wait for ev without the GIL, after flushing q (when open), the queue of
 * ev's command: some drivers start nothing until a queue is flushed, and
 * a wait does not flush it (Mesa 22.3 rusticl waits for ever). */
kiln_status flush_wait(QueueObject *q, kiln_event *ev) {
  kiln_status st;
  if (q && q->queue)
    kiln_queue_flush(q->queue);
  Py_BEGIN_ALLOW_THREADS
  st = kiln_event_wait(ev);
  Py_END_ALLOW_THREADS
  return st;
}

/* ---- Context ----------------------------------------------------------------- */

static PyObject *info_dict(const kiln_device_info *d) {
  PyObject *quirks = PyList_New(0);
  if (!quirks)
    return NULL;
  for (unsigned bit = 1; bit; bit <<= 1) {
    const char *qn = (d->quirks & bit) ? kiln_quirk_name(bit) : NULL;
    if (qn) {
      PyObject *s = PyUnicode_FromString(qn);
      if (!s || PyList_Append(quirks, s) < 0) {
        Py_XDECREF(s);
        Py_DECREF(quirks);
        return NULL;
      }
      Py_DECREF(s);
    }
  }
  char selector[64];
  snprintf(selector, sizeof selector, "%zu:%zu", d->platform_index, d->device_index);
  return Py_BuildValue(
      "{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:K,"
      "s:K,s:K,s:K,s:I,s:n,s:I,s:I,s:O,s:O,s:O,s:N,s:n,s:n}",
      "name", d->name, "vendor", d->vendor, "driver_version", d->driver_version,
      "device_version", d->device_version, "opencl_c_version", d->opencl_c_version,
      "extensions", d->extensions, "platform_name", d->platform_name,
      "platform_vendor", d->platform_vendor, "platform_version", d->platform_version,
      "stable_id", d->stable_id, "profile", d->profile, "selector", selector,
      "type", kiln_device_type_name(d->type), "vendor_id", (unsigned)d->vendor_id,
      "compute_units", (unsigned)d->compute_units, "clock_mhz", (unsigned)d->clock_mhz,
      "global_mem_bytes", (unsigned long long)d->global_mem_bytes,
      "local_mem_bytes", (unsigned long long)d->local_mem_bytes,
      "constant_mem_bytes", (unsigned long long)d->constant_mem_bytes,
      "max_alloc_bytes", (unsigned long long)d->max_alloc_bytes,
      "mem_base_addr_align_bits", (unsigned)d->mem_base_addr_align_bits,
      "max_work_group_size", (Py_ssize_t)d->max_work_group_size,
      "cl_version", (unsigned)d->cl_version,
      "platform_cl_version", (unsigned)d->platform_cl_version,
      "fp16", d->fp16 ? Py_True : Py_False, "fp64", d->fp64 ? Py_True : Py_False,
      "subgroups", d->subgroups ? Py_True : Py_False, "quirks", quirks,
      "platform_index", (Py_ssize_t)d->platform_index,
      "device_index", (Py_ssize_t)d->device_index);
}

static PyObject *mod_devices(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kwl[] = {"selector", NULL};
  const char *selector = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|z", kwl, &selector))
    return NULL;
  kiln_device_list *list = NULL;
  kiln_selection *sel = NULL;
  kiln_status st = kiln_device_list_create(&list);
  if (st != KILN_OK)
    return raise_status(st);
  PyObject *out = NULL;
  if (selector && (st = kiln_selection_create(list, selector, &sel)) != KILN_OK) {
    raise_status(st);
    goto done;
  }
  out = PyList_New(0);
  for (size_t i = 0; out && i < kiln_device_list_get_count(list); i++) {
    bool taken = true;
    if (sel)
      kiln_selection_get_explanation(sel, i, &taken);
    if (!taken)
      continue;
    PyObject *d = info_dict(kiln_device_get_info(kiln_device_list_get(list, i)));
    PyObject *idx = PyLong_FromSize_t(i);
    if (!d || !idx || PyDict_SetItemString(d, "index", idx) < 0 ||
        PyList_Append(out, d) < 0)
      Py_CLEAR(out);
    Py_XDECREF(d);
    Py_XDECREF(idx);
  }
done:
  kiln_selection_destroy(sel);
  kiln_device_list_destroy(list);
  return out;
}

static PyObject *mod_explain(PyObject *self, PyObject *args) {
  const char *selector = NULL;
  if (!PyArg_ParseTuple(args, "z", &selector))
    return NULL;
  kiln_device_list *list = NULL;
  kiln_selection *sel = NULL;
  kiln_status st = kiln_device_list_create(&list);
  if (st != KILN_OK)
    return raise_status(st);
  if ((st = kiln_selection_create(list, selector, &sel)) != KILN_OK) {
    kiln_device_list_destroy(list);
    return raise_status(st);
  }
  PyObject *out = PyList_New(0);
  for (size_t i = 0; out && i < kiln_device_list_get_count(list); i++) {
    bool taken = false;
    const char *why = kiln_selection_get_explanation(sel, i, &taken);
    PyObject *t = Py_BuildValue("(sOs)", kiln_device_get_info(kiln_device_list_get(list, i))->name,
                                taken ? Py_True : Py_False, why ? why : "");
    if (!t || PyList_Append(out, t) < 0)
      Py_CLEAR(out);
    Py_XDECREF(t);
  }
  kiln_selection_destroy(sel);
  kiln_device_list_destroy(list);
  return out;
}

static PyObject *Context_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  static char *kwl[] = {"selector", "profile", "no_cache", NULL};
  const char *selector = NULL, *profile = NULL;
  int no_cache = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|zzp", kwl, &selector, &profile, &no_cache))
    return NULL;
  kiln_device_list *list = NULL;
  const kiln_device *dev = NULL;
  kiln_context *ctx = NULL;
  kiln_status st = kiln_device_list_create(&list);
  if (st == KILN_OK)
    st = kiln_device_select(list, selector, &dev);
  if (st == KILN_OK) {
    kiln_context_options opt = {profile, no_cache ? KILN_CONTEXT_NO_CACHE : 0u};
    st = kiln_context_create(dev, &opt, &ctx);
  }
  Py_ssize_t index = 0;
  for (size_t i = 0; st == KILN_OK && i < kiln_device_list_get_count(list); i++)
    if (kiln_device_list_get(list, i) == dev)
      index = (Py_ssize_t)i;
  kiln_device_list_destroy(list);
  if (st != KILN_OK)
    return raise_status(st);
  ContextObject *self = (ContextObject *)type->tp_alloc(type, 0);
  if (!self) {
    kiln_context_destroy(ctx);
    return NULL;
  }
  self->ctx = ctx;
  self->list_index = index;
  self->host_memory = kiln_context_get_device_info(ctx)->type == KILN_DEVICE_CPU;
  self->info = info_dict(kiln_context_get_device_info(ctx));
  if (!self->info) {
    Py_DECREF(self);
    return NULL;
  }
  PyObject *prof = PyUnicode_FromString(kiln_context_get_profile(ctx));
  PyObject *idx = PyLong_FromSsize_t(index);
  int bad = !prof || !idx || PyDict_SetItemString(self->info, "context_profile", prof) < 0 ||
            PyDict_SetItemString(self->info, "index", idx) < 0;
  Py_XDECREF(prof);
  Py_XDECREF(idx);
  if (bad) {
    Py_DECREF(self);
    return NULL;
  }
  return (PyObject *)self;
}

static void Context_dealloc(ContextObject *self) {
  /* Every child holds a reference, so none is alive here. */
  kiln_queue_destroy(self->aux);
  if (self->ctx)
    kiln_context_destroy(self->ctx);
  Py_XDECREF(self->info);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Context_close(ContextObject *self, PyObject *unused) {
  self->closed = 1;
  Py_RETURN_NONE;
}

static PyObject *Context_get_info(ContextObject *self, void *unused) {
  Py_INCREF(self->info);
  return self->info;
}

static PyObject *Context_get_closed(ContextObject *self, void *unused) {
  return PyBool_FromLong(self->closed);
}

static PyObject *Context_get_index(ContextObject *self, void *unused) {
  return PyLong_FromSsize_t(self->list_index);
}

/* tuning_info(op): kiln_tuning_get_info as a dict (which parameters op runs
 * with on this device, where they come from, why a file is ignored, whether
 * the space's kernels run here at all). */
static PyObject *Context_tuning_info(ContextObject *self, PyObject *args) {
  const char *op;
  if (!PyArg_ParseTuple(args, "s", &op))
    return NULL;
  kiln_tuning_info *info = PyMem_Malloc(sizeof *info);
  if (!info)
    return PyErr_NoMemory();
  kiln_status st;
  Py_BEGIN_ALLOW_THREADS /* the first query reads the tuning file */
  st = kiln_tuning_get_info(self->ctx, op, info);
  Py_END_ALLOW_THREADS
  PyObject *d = st != KILN_OK ? raise_status(st)
                              : Py_BuildValue("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "source",
                                              info->source, "params", info->params, "figures",
                                              info->figures, "path", info->path, "ignored",
                                              info->ignored, "database", info->database,
                                              "used", info->used);
  PyMem_Free(info);
  return d;
}

/* tuning_knobs(op): op's parameter space, [(name, what, (values...)), ...]. */
static PyObject *mod_tuning_knobs(PyObject *self, PyObject *args) {
  const char *op;
  if (!PyArg_ParseTuple(args, "s", &op))
    return NULL;
  PyObject *list = PyList_New(0);
  for (size_t i = 0; list; i++) {
    kiln_tuning_knob k;
    kiln_status st = kiln_tuning_get_knob(op, i, &k);
    if (st == KILN_ERR_OUT_OF_RANGE && i > 0)
      break;
    if (st != KILN_OK) {
      Py_DECREF(list);
      return raise_status(st);
    }
    PyObject *values = PyTuple_New((Py_ssize_t)k.count);
    for (size_t v = 0; values && v < k.count; v++)
      PyTuple_SET_ITEM(values, (Py_ssize_t)v, PyLong_FromUnsignedLong(k.values[v]));
    PyObject *item = values ? Py_BuildValue("(ssN)", k.name, k.what, values) : NULL;
    if (!item || PyList_Append(list, item) < 0) {
      Py_XDECREF(item);
      Py_DECREF(list);
      return NULL;
    }
    Py_DECREF(item);
  }
  return list;
}

static PyMethodDef Context_methods[] = {
    {"close", (PyCFunction)Context_close, METH_NOARGS,
     "Refuse new queues, programs and arrays from now on."},
    {"tuning_info", (PyCFunction)Context_tuning_info, METH_VARARGS,
     "tuning_info(op) -> dict: kiln_tuning_get_info for op ('gemm', 'gemm_cpu', ...) on this "
     "device"},
    {0}};

static PyGetSetDef Context_getset[] = {
    {"info", (getter)Context_get_info, NULL, "device facts (dict)", NULL},
    {"closed", (getter)Context_get_closed, NULL, "whether close() was called", NULL},
    {"index", (getter)Context_get_index, NULL, "index in kiln's device list", NULL},
    {0}};

PyTypeObject ContextType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kiln._kiln.Context",
    .tp_basicsize = sizeof(ContextObject),
    .tp_dealloc = (destructor)Context_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Context(selector=None, profile=None, no_cache=False): a kiln context on the "
              "first device the selector takes.",
    .tp_methods = Context_methods,
    .tp_getset = Context_getset,
    .tp_new = Context_new,
};

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

/* ---- Pinned host memory ----------------------------------------------------------- */

/* kiln_pinned: host memory the driver allocated for DMA, mapped through a
 * queue for its whole life; exposes the buffer protocol (writable bytes),
 * so numpy.frombuffer views it and keeps it alive. */
static PyObject *Pinned_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  static char *kwl[] = {"queue", "nbytes", NULL};
  PyObject *qo;
  Py_ssize_t nbytes;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!n", kwl, &QueueType, &qo, &nbytes))
    return NULL;
  QueueObject *q = (QueueObject *)qo;
  if (nbytes <= 0) {
    PyErr_SetString(PyExc_ValueError, "nbytes must be > 0");
    return NULL;
  }
  if (!queue_open(q) || !ctx_open(q->ctx))
    return NULL;
  kiln_pinned *p = NULL;
  kiln_status st;
  Py_BEGIN_ALLOW_THREADS /* the map is blocking */
  st = kiln_pinned_create(q->queue, (size_t)nbytes, &p);
  Py_END_ALLOW_THREADS
  if (st != KILN_OK)
    return raise_status(st);
  PinnedObject *self = (PinnedObject *)type->tp_alloc(type, 0);
  if (!self) {
    kiln_pinned_destroy(p);
    return NULL;
  }
  self->pinned = p;
  self->queue = q;
  Py_INCREF(q);
  return (PyObject *)self;
}

static void Pinned_dealloc(PinnedObject *self) {
  /* No export is alive. The unmap waits for the
   * queue's earlier commands, transfers from or into this memory among them. */
  if (self->pinned) {
    Py_BEGIN_ALLOW_THREADS
    kiln_pinned_destroy(self->pinned);
    Py_END_ALLOW_THREADS
  }
  Py_XDECREF(self->queue);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Each export holds a reference (view->obj), so the memory outlives it. */
static int Pinned_getbuffer(PinnedObject *self, Py_buffer *view, int flags) {
  return PyBuffer_FillInfo(view, (PyObject *)self, kiln_pinned_get_ptr(self->pinned),
                           (Py_ssize_t)kiln_pinned_get_size(self->pinned), 0, flags);
}

static PyObject *Pinned_get_nbytes(PinnedObject *self, void *u) {
  return PyLong_FromSize_t(kiln_pinned_get_size(self->pinned));
}

static PyObject *Pinned_get_queue(PinnedObject *self, void *u) {
  Py_INCREF(self->queue);
  return (PyObject *)self->queue;
}

static PyBufferProcs Pinned_as_buffer = {(getbufferproc)Pinned_getbuffer, NULL};

static PyGetSetDef Pinned_getset[] = {
    {"nbytes", (getter)Pinned_get_nbytes, NULL, "size in bytes", NULL},
    {"queue", (getter)Pinned_get_queue, NULL, "the Queue it was mapped through", NULL},
    {0}};

PyTypeObject PinnedType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kiln._kiln.Pinned",
    .tp_basicsize = sizeof(PinnedObject),
    .tp_dealloc = (destructor)Pinned_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Pinned(queue, nbytes): pinned (page-locked) host memory for fast transfers "
              "(kiln_pinned); a writable buffer (numpy.frombuffer).",
    .tp_as_buffer = &Pinned_as_buffer,
    .tp_getset = Pinned_getset,
    .tp_new = Pinned_new,
};

/* ---- Event -------------------------------------------------------------------- */

static void Event_dealloc(EventObject *self) {
  if (self->holding) {
    /* A pending transfer still uses the host memory: wait before freeing. */
    flush_wait(self->queue, self->event);
    PyBuffer_Release(&self->hold);
  }
  kiln_event_release(self->event);
  Py_XDECREF(self->queue);
  Py_XDECREF(self->ctx);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Event_wait(EventObject *self, PyObject *unused) {
  kiln_status st = flush_wait(self->queue, self->event);
  if (self->holding) {
    self->holding = 0;
    PyBuffer_Release(&self->hold);
  }
  if (st != KILN_OK)
    return raise_status(st);
  Py_RETURN_NONE;
}

static PyObject *Event_get_state(EventObject *self, void *unused) {
  kiln_event_state s;
  kiln_status st = kiln_event_get_state(self->event, &s);
  if (st != KILN_OK)
    return raise_status(st);
  const char *name = s == KILN_EVENT_COMPLETE ? "complete" : s == KILN_EVENT_RUNNING ? "running"
                     : s == KILN_EVENT_SUBMITTED ? "submitted" : s == KILN_EVENT_QUEUED ? "queued"
                     : "failed";
  return PyUnicode_FromString(name);
}

static PyObject *Event_profiling(EventObject *self, PyObject *unused) {
  uint64_t a = 0, b = 0;
  kiln_status st = kiln_event_get_profiling(self->event, &a, &b);
  if (st != KILN_OK)
    return raise_status(st);
  return Py_BuildValue("(KK)", (unsigned long long)a, (unsigned long long)b);
}

static PyMethodDef Event_methods[] = {
    {"wait", (PyCFunction)Event_wait, METH_NOARGS, "Block until the command has completed."},
    {"profiling", (PyCFunction)Event_profiling, METH_NOARGS,
     "(start_ns, end_ns) device timestamps; needs a profiling queue."},
    {0}};

static PyGetSetDef Event_getset[] = {
    {"state", (getter)Event_get_state, NULL,
     "'queued', 'submitted', 'running', 'complete' or 'failed'", NULL},
    {0}};

PyTypeObject EventType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kiln._kiln.Event",
    .tp_basicsize = sizeof(EventObject),
    .tp_dealloc = (destructor)Event_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Completion of an enqueued command.",
    .tp_methods = Event_methods,
    .tp_getset = Event_getset,
    .tp_new = no_new,
};

static PyObject *mod_wait_all(PyObject *self, PyObject *args) {
  PyObject *seq_in;
  if (!PyArg_ParseTuple(args, "O", &seq_in))
    return NULL;
  Call c = CALL_INIT;
  c.wait = seq_in;
  /* call_prepare needs a queue only to check it is open; take the list alone. */
  PyObject *seq = PySequence_Fast(seq_in, "expected a sequence of kiln.Event");
  if (!seq)
    return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  kiln_event **evs = PyMem_Malloc(sizeof *evs * (size_t)(n ? n : 1));
  if (!evs) {
    Py_DECREF(seq);
    return PyErr_NoMemory();
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *e = PySequence_Fast_GET_ITEM(seq, i);
    if (!PyObject_TypeCheck(e, &EventType)) {
      PyMem_Free(evs);
      Py_DECREF(seq);
      return PyErr_Format(PyExc_TypeError, "events[%zd] is not a kiln.Event", i);
    }
    evs[i] = ((EventObject *)e)->event;
    QueueObject *eq = ((EventObject *)e)->queue;
    if (eq && eq->queue)
      kiln_queue_flush(eq->queue);
  }
  kiln_status st;
  Py_BEGIN_ALLOW_THREADS
  st = kiln_event_wait_all((size_t)n, evs);
  Py_END_ALLOW_THREADS
  PyMem_Free(evs);
  Py_DECREF(seq);
  (void)c;
  if (st != KILN_OK)
    return raise_status(st);
  Py_RETURN_NONE;
}

PyMethodDef objects_functions[] = {
    {"devices", KW mod_devices, METH_VARARGS | METH_KEYWORDS, "List devices (dicts)."},
    {"explain", mod_explain, METH_VARARGS, "(name, taken, reason) per device for a selector."},
    {"tuning_knobs", mod_tuning_knobs, METH_VARARGS,
     "tuning_knobs(op) -> [(name, what, values), ...]: op's tuning parameter space"},
    {"wait_all", mod_wait_all, METH_VARARGS, "Wait for every Event of a sequence."},
    {0}};
