/* kiln._kiln: the CPython extension under the kiln package.
 *
 * A hand-written extension in C (no C++, no generator): the objects wrap
 * kiln's handles, and each op is one small function that converts Arrays
 * into kiln_range / kiln_matrix / kiln_image descriptors with the shared
 * converters below and calls the C op. Adding an op is: one function here
 * (the pattern of op_axpy: descriptors declared `= OPERAND`, parsed with
 * OP_PARSE, the queue taken from the output by call_prepare, the result by
 * call_finish), one line in the method table, a Python wrapper
 * in kiln/_ops.py if it should allocate its output, and a line in the stub.
 *
 * Lifetimes: every object holds a strong reference to what it was made
 * from (Array -> Buffer -> Queue -> Context, Kernel -> Program -> Context,
 * Event -> Context), so Python frees children before parents and
 * kiln_context_destroy never meets live children. close() methods end an
 * object's use early (a closed queue refuses work); memory goes back when
 * the last reference goes.
 *
 * Threads: the GIL is held while commands are enqueued (kiln's rule that a
 * queue is used by one thread at a time then holds for Python threads);
 * it is released only while waiting for events. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define CL_TARGET_OPENCL_VERSION 300
#include <kiln/kiln.h>
#include <kiln/kiln_cl.h>

#define MAX_DIMS 8
#define MAX_WAIT 64

/* ---- errors --------------------------------------------------------------- */

static PyObject *Error;                /* kiln.Error */
static PyObject *status_classes[32];   /* by -status */

static PyObject *raise_status(kiln_status st) {
  int i = -(int)st;
  PyObject *cls = (i > 0 && i < 32 && status_classes[i]) ? status_classes[i] : Error;
  const char *msg = kiln_last_error();
  PyObject *exc = PyObject_CallFunction(cls, "s", msg);
  if (!exc)
    return NULL;
  PyObject *code = PyLong_FromLong((long)st);
  PyObject *name = PyUnicode_FromString(kiln_status_name(st));
  int bad = !code || !name || PyObject_SetAttrString(exc, "status", code) < 0 ||
            PyObject_SetAttrString(exc, "status_name", name) < 0 ||
            PyObject_SetAttrString(exc, "message", PyTuple_GET_ITEM(
                                       ((PyBaseExceptionObject *)exc)->args, 0)) < 0;
  Py_XDECREF(code);
  Py_XDECREF(name);
  if (!bad && st == KILN_ERR_BUILD_FAILED) {
    PyObject *log = PyUnicode_DecodeUTF8(kiln_last_build_log(),
                                         (Py_ssize_t)strlen(kiln_last_build_log()), "replace");
    bad = !log || PyObject_SetAttrString(exc, "build_log", log) < 0;
    Py_XDECREF(log);
  }
  if (!bad)
    PyErr_SetObject(cls, exc);
  Py_DECREF(exc);
  return NULL;
}

/* A Python-side refusal with a kiln status (closed objects). */
static PyObject *raise_with(kiln_status st, const char *msg) {
  kiln_set_last_error(st, msg);
  return raise_status(st);
}

/* ---- object structs -------------------------------------------------------- */

typedef struct {
  PyObject_HEAD
  kiln_context *ctx;
  PyObject *info;         /* dict */
  Py_ssize_t list_index;  /* position in kiln's device list (DLPack index) */
  int closed;
  int host_memory;        /* a CPU device: its buffers are host memory */
  kiln_queue *aux;        /* made on first use by advise_huge_pages, else NULL */
} ContextObject;

typedef struct {
  PyObject_HEAD
  kiln_queue *queue;      /* NULL once closed */
  kiln_pool *pool;
  ContextObject *ctx;
} QueueObject;

#define MAX_FOREIGN 4

typedef struct {
  PyObject_HEAD
  kiln_buffer *buf;
  QueueObject *home;      /* the queue whose pool it came from */
  PyObject *keep;         /* a DLPack capsule it wraps, else NULL */
  size_t nbytes;
  int pooled;             /* from home's pool */
  /* Other queues that ran commands on it: the pool may reuse the block
   * only after them too (kiln_pool_release_after), so they are held. */
  int nforeign;
  QueueObject *foreign[MAX_FOREIGN];
} BufferObject;

typedef struct {
  PyObject_HEAD
  BufferObject *buf;
  QueueObject *queue;
  kiln_dtype dtype;
  int ndim;
  Py_ssize_t offset;      /* elements */
  Py_ssize_t shape[MAX_DIMS];
  Py_ssize_t strides[MAX_DIMS]; /* elements */
  PyObject *weakreflist;
  PyObject *dict;
} ArrayObject;

typedef struct {
  PyObject_HEAD
  kiln_event *event;
  ContextObject *ctx;
  QueueObject *queue;     /* the queue of its command: flushed before a wait */
  Py_buffer hold;         /* host memory a pending transfer uses */
  int holding;
} EventObject;

typedef struct {
  PyObject_HEAD
  kiln_program *prog;
  ContextObject *ctx;
} ProgramObject;

typedef struct {
  PyObject_HEAD
  kiln_kernel *kernel;
  ProgramObject *prog;
  uint32_t nargs;
} KernelObject;

static PyTypeObject ContextType, QueueType, BufferType, ArrayType, EventType,
    ProgramType, KernelType;
/* The class new arrays get: kiln.Array (a Python subclass of ArrayBase that
 * adds numpy(), indexing and the DLPack methods) once the package set it. */
static PyTypeObject *array_class = &ArrayType;

/* ---- helpers --------------------------------------------------------------- */

static int ctx_open(ContextObject *c) {
  if (c->closed || !c->ctx) {
    raise_with(KILN_ERR_INVALID_STATE, "the context (kiln.Device) is closed");
    return 0;
  }
  return 1;
}

static int queue_open(QueueObject *q) {
  if (!q->queue) {
    raise_with(KILN_ERR_INVALID_STATE, "the queue is closed");
    return 0;
  }
  return 1;
}

static size_t dtype_size(kiln_dtype d) { return kiln_dtype_size(d); }

static int array_is_contiguous(const ArrayObject *a) {
  Py_ssize_t expect = 1;
  for (int i = a->ndim - 1; i >= 0; i--) {
    if (a->shape[i] != 1 && a->strides[i] != expect)
      return 0;
    expect *= a->shape[i];
  }
  return 1;
}

static Py_ssize_t array_size(const ArrayObject *a) {
  Py_ssize_t n = 1;
  for (int i = 0; i < a->ndim; i++)
    n *= a->shape[i];
  return n;
}

/* Span of elements [lo, hi) from the buffer start that the array touches. */
static void array_span(const ArrayObject *a, Py_ssize_t *lo, Py_ssize_t *hi) {
  Py_ssize_t end = a->offset + 1;
  if (array_size(a) == 0) {
    *lo = *hi = a->offset;
    return;
  }
  for (int i = 0; i < a->ndim; i++)
    end += (a->shape[i] - 1) * a->strides[i];
  *lo = a->offset;
  *hi = end;
}

static EventObject *event_wrap(kiln_event *ev, QueueObject *q) {
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
static kiln_status flush_wait(QueueObject *q, kiln_event *ev) {
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

static kiln_status queue_sync(QueueObject *q) {
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

static void advise_huge_pages(ContextObject *ctx, kiln_buffer *b, size_t nbytes);
/* Blocks at least this large, new from the driver of a CPU device, are
 * advised to use transparent huge pages (advise_huge_pages). */
#define HUGE_ADVICE_MIN (4u << 20)

static BufferObject *buffer_alloc(QueueObject *q, size_t nbytes) {
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

/* ---- Pinned host memory ----------------------------------------------------------- */

/* kiln_pinned: host memory the driver allocated for DMA, mapped through a
 * queue for its whole life; exposes the buffer protocol (writable bytes),
 * so numpy.frombuffer views it and keeps it alive. */
typedef struct {
  PyObject_HEAD
  kiln_pinned *pinned;
  QueueObject *queue;
} PinnedObject;

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

static PyTypeObject PinnedType = {
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

/* ---- Array ------------------------------------------------------------------- */

static int parse_shape(PyObject *shape, int *ndim, Py_ssize_t *dims) {
  PyObject *seq = PySequence_Fast(shape, "shape must be a sequence of ints");
  if (!seq)
    return 0;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (n > MAX_DIMS) {
    Py_DECREF(seq);
    PyErr_Format(PyExc_ValueError, "at most %d dimensions", MAX_DIMS);
    return 0;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    Py_ssize_t v = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i), PyExc_OverflowError);
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(seq);
      return 0;
    }
    if (v < 0) {
      Py_DECREF(seq);
      PyErr_Format(PyExc_ValueError, "shape[%zd] is negative (%zd)", i, v);
      return 0;
    }
    dims[i] = v;
  }
  *ndim = (int)n;
  Py_DECREF(seq);
  return 1;
}

static ArrayObject *array_make(BufferObject *buf, QueueObject *q, kiln_dtype dt, int ndim,
                               const Py_ssize_t *shape, const Py_ssize_t *strides,
                               Py_ssize_t offset) {
  ArrayObject *a = (ArrayObject *)array_class->tp_alloc(array_class, 0);
  if (!a)
    return NULL;
  a->buf = buf;
  Py_INCREF(buf);
  a->queue = q;
  Py_INCREF(q);
  a->dtype = dt;
  a->ndim = ndim;
  a->offset = offset;
  Py_ssize_t st = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    a->shape[i] = shape[i];
    a->strides[i] = strides ? strides[i] : st;
    st *= shape[i];
  }
  return a;
}

static int parse_dtype(PyObject *o, kiln_dtype *out) {
  long v = PyLong_AsLong(o);
  if (v == -1 && PyErr_Occurred())
    return 0;
  if (v < 0 || v > KILN_U32) {
    PyErr_Format(PyExc_ValueError, "unknown dtype code %ld", v);
    return 0;
  }
  *out = (kiln_dtype)v;
  return 1;
}

/* _kiln.empty(queue, shape, dtype_code) */
static PyObject *mod_empty(PyObject *self, PyObject *args) {
  QueueObject *q;
  PyObject *shape, *dto;
  int ndim;
  Py_ssize_t dims[MAX_DIMS];
  kiln_dtype dt;
  if (!PyArg_ParseTuple(args, "O!OO", &QueueType, &q, &shape, &dto) ||
      !parse_shape(shape, &ndim, dims) || !parse_dtype(dto, &dt))
    return NULL;
  size_t n = 1, es = dtype_size(dt);
  for (int i = 0; i < ndim; i++) {
    if (dims[i] && n > SIZE_MAX / es / (size_t)dims[i]) {
      kiln_set_last_error(KILN_ERR_INVALID_SIZE, "shape: the array's size overflows");
      return raise_status(KILN_ERR_INVALID_SIZE);
    }
    n *= (size_t)dims[i];
  }
  BufferObject *b = buffer_alloc(q, n * es);
  if (!b)
    return NULL;
  ArrayObject *a = array_make(b, q, dt, ndim, dims, NULL, 0);
  Py_DECREF(b);
  return (PyObject *)a;
}

static void Array_dealloc(ArrayObject *self) {
  if (self->weakreflist)
    PyObject_ClearWeakRefs((PyObject *)self);
  Py_XDECREF(self->dict);
  Py_XDECREF(self->buf);
  Py_XDECREF(self->queue);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *tuple_of(const Py_ssize_t *v, int n) {
  PyObject *t = PyTuple_New(n);
  for (int i = 0; t && i < n; i++) {
    PyObject *x = PyLong_FromSsize_t(v[i]);
    if (!x) {
      Py_DECREF(t);
      return NULL;
    }
    PyTuple_SET_ITEM(t, i, x);
  }
  return t;
}

static PyObject *Array_get_shape(ArrayObject *a, void *u) { return tuple_of(a->shape, a->ndim); }
static PyObject *Array_get_strides(ArrayObject *a, void *u) { return tuple_of(a->strides, a->ndim); }
static PyObject *Array_get_ndim(ArrayObject *a, void *u) { return PyLong_FromLong(a->ndim); }
static PyObject *Array_get_size(ArrayObject *a, void *u) { return PyLong_FromSsize_t(array_size(a)); }
static PyObject *Array_get_offset(ArrayObject *a, void *u) { return PyLong_FromSsize_t(a->offset); }
static PyObject *Array_get_dtype_code(ArrayObject *a, void *u) { return PyLong_FromLong(a->dtype); }
static PyObject *Array_get_itemsize(ArrayObject *a, void *u) {
  return PyLong_FromSize_t(dtype_size(a->dtype));
}
static PyObject *Array_get_contiguous(ArrayObject *a, void *u) {
  return PyBool_FromLong(array_is_contiguous(a));
}
static PyObject *Array_get_queue(ArrayObject *a, void *u) {
  Py_INCREF(a->queue);
  return (PyObject *)a->queue;
}
static PyObject *Array_get_context(ArrayObject *a, void *u) {
  Py_INCREF(a->queue->ctx);
  return (PyObject *)a->queue->ctx;
}
static PyObject *Array_get_buffer_nbytes(ArrayObject *a, void *u) {
  return PyLong_FromSize_t(a->buf->nbytes);
}

/* _view(offset, shape, strides[, queue]): another Array over the same buffer;
 * checked to lie inside it. */
static PyObject *Array_view(ArrayObject *self, PyObject *args) {
  Py_ssize_t offset;
  PyObject *shape, *strides;
  QueueObject *q = self->queue;
  int ndim, nst;
  Py_ssize_t dims[MAX_DIMS], st[MAX_DIMS];
  if (!PyArg_ParseTuple(args, "nOO|O!", &offset, &shape, &strides, &QueueType, &q))
    return NULL;
  if (q->ctx != self->queue->ctx)
    return raise_with(KILN_ERR_WRONG_CONTEXT, "queue: of another context than the array");
  if (!parse_shape(shape, &ndim, dims))
    return NULL;
  PyObject *seq = PySequence_Fast(strides, "strides must be a sequence of ints");
  if (!seq)
    return NULL;
  nst = (int)PySequence_Fast_GET_SIZE(seq);
  for (int i = 0; i < nst && i < MAX_DIMS; i++) {
    st[i] = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i), PyExc_OverflowError);
    if (st[i] == -1 && PyErr_Occurred()) {
      Py_DECREF(seq);
      return NULL;
    }
  }
  Py_DECREF(seq);
  if (nst != ndim) {
    PyErr_SetString(PyExc_ValueError, "strides and shape differ in length");
    return NULL;
  }
  if (offset < 0) {
    PyErr_SetString(PyExc_ValueError, "offset is negative");
    return NULL;
  }
  Py_ssize_t end = offset + 1, size = 1, cap = (Py_ssize_t)(self->buf->nbytes / dtype_size(self->dtype));
  for (int i = 0; i < ndim; i++) {
    if (st[i] < 0) {
      PyErr_Format(PyExc_ValueError, "strides[%d] is negative", i);
      return NULL;
    }
    size *= dims[i];
    if (dims[i])
      end += (dims[i] - 1) * st[i];
  }
  if (size && end > cap)
    return raise_with(KILN_ERR_OUT_OF_RANGE, "view: reaches past the end of the array's buffer");
  if (q != self->queue && self->queue->queue) {
    /* The new queue's later commands follow what the old one has enqueued
     * on the data so far (a marker there, waited for by a marker here; a
     * closed queue finished its commands when it closed). */
    if (!queue_open(q))
      return NULL;
    kiln_event *before = NULL;
    kiln_status st2 = kiln_queue_marker(self->queue->queue, 0, NULL, &before);
    if (st2 == KILN_OK) {
      kiln_queue_flush(self->queue->queue);
      st2 = kiln_queue_marker(q->queue, 1, &before, NULL);
      kiln_event_release(before);
    }
    if (st2 != KILN_OK)
      return raise_status(st2);
  }
  return (PyObject *)array_make(self->buf, q, self->dtype, ndim, dims, st, offset);
}

/* ---- descriptors ---------------------------------------------------------------
 * Converters for PyArg_Parse "O&": an Array into a kiln_range (contiguous),
 * kiln_matrix (2-D or batched 3-D, row- or column-major) or kiln_image
 * (4-D, NCHW contiguous). The _opt forms take None as NULL. */

typedef struct Call Call;

/* Each converted operand's buffer is noted in its call (when the
 * descriptor's .call is set, as OPERAND does), so that the queue the call
 * enqueues on is recorded in the buffer (see BufferObject.foreign). */
typedef struct {
  Call *call;
  kiln_range r;
  const kiln_range *p; /* &r, or NULL for None */
  ArrayObject *a;
} RangeArg;

typedef struct {
  Call *call;
  kiln_matrix m;
  const kiln_matrix *p;
  ArrayObject *a;
  Py_ssize_t batch;
} MatrixArg;

typedef struct {
  Call *call;
  kiln_image im;
  const kiln_image *p; /* &im, or NULL for None (the _opt form) */
  ArrayObject *a;
} ImageArg;

static void call_touch(Call *c, BufferObject *b);

static int check_array(PyObject *o, const char *what) {
  if (!PyObject_TypeCheck(o, &ArrayType)) {
    PyErr_Format(PyExc_TypeError, "expected a kiln.Array for %s, got %.100s", what,
                 Py_TYPE(o)->tp_name);
    return 0;
  }
  return 1;
}

static int conv_range(PyObject *o, void *out) {
  RangeArg *r = out;
  if (!check_array(o, "a vector operand"))
    return 0;
  ArrayObject *a = (ArrayObject *)o;
  if (!array_is_contiguous(a)) {
    PyErr_SetString(PyExc_ValueError,
                    "this op takes contiguous arrays; copy the view first (kiln.copy)");
    return 0;
  }
  r->r = (kiln_range){a->buf->buf, (size_t)a->offset, (size_t)array_size(a), a->dtype};
  r->p = &r->r;
  r->a = a;
  call_touch(r->call, a->buf);
  return 1;
}

static int conv_range_opt(PyObject *o, void *out) {
  RangeArg *r = out;
  if (o == Py_None) {
    r->p = NULL;
    r->a = NULL;
    return 1;
  }
  return conv_range(o, out);
}

static int conv_matrix(PyObject *o, void *out) {
  MatrixArg *m = out;
  if (!check_array(o, "a matrix operand"))
    return 0;
  ArrayObject *a = (ArrayObject *)o;
  if (a->ndim != 2 && a->ndim != 3) {
    PyErr_Format(PyExc_ValueError, "expected a 2-D matrix or a 3-D batch, got %d-D", a->ndim);
    return 0;
  }
  int d = a->ndim - 2;
  Py_ssize_t r = a->shape[d], c = a->shape[d + 1], s0 = a->strides[d], s1 = a->strides[d + 1];
  memset(&m->m, 0, sizeof m->m);
  m->m.buffer = a->buf->buf;
  m->m.offset = (size_t)a->offset;
  m->m.rows = (size_t)r;
  m->m.cols = (size_t)c;
  m->m.dtype = a->dtype;
  if ((s1 == 1 || c <= 1) && s0 >= c) {
    m->m.layout = KILN_ROW_MAJOR;
    m->m.ld = s0 == c ? 0 : (size_t)s0;
  } else if ((s0 == 1 || r <= 1) && s1 >= r) {
    m->m.layout = KILN_COL_MAJOR;
    m->m.ld = s1 == r ? 0 : (size_t)s1;
  } else {
    PyErr_SetString(PyExc_ValueError,
                    "matrix strides are neither row- nor column-major; copy the view first");
    return 0;
  }
  m->batch = d ? a->shape[0] : 1;
  m->m.batch_stride = d ? (size_t)a->strides[0] : 0;
  m->p = &m->m;
  m->a = a;
  call_touch(m->call, a->buf);
  return 1;
}

/* The image ops' operands (convolution, pooling, batch normalisation). */
static int conv_image(PyObject *o, void *out) {
  ImageArg *im = out;
  if (!check_array(o, "an image operand"))
    return 0;
  ArrayObject *a = (ArrayObject *)o;
  if (a->ndim != 4 || !array_is_contiguous(a)) {
    PyErr_SetString(PyExc_ValueError, "expected a contiguous 4-D (N, C, H, W) array");
    return 0;
  }
  im->im = (kiln_image){a->buf->buf, (size_t)a->offset, (size_t)a->shape[0],
                        (size_t)a->shape[1], (size_t)a->shape[2], (size_t)a->shape[3],
                        a->dtype, KILN_NCHW};
  im->p = &im->im;
  im->a = a;
  call_touch(im->call, a->buf);
  return 1;
}

static int conv_image_opt(PyObject *o, void *out) {
  ImageArg *im = out;
  if (o == Py_None) {
    im->p = NULL;
    im->a = NULL;
    return 1;
  }
  if (!conv_image(o, out))
    return 0;
  im->p = &im->im;
  return 1;
}

/* What every enqueueing call shares: the queue, the wait list and whether
 * an Event is wanted back. */
#define MAX_TOUCH 64

struct Call {
  PyObject *wait;   /* None or a sequence of Events */
  int want_event;
  QueueObject *q;
  size_t nwait;
  kiln_event *waits[MAX_WAIT];
  kiln_event *ev;
  int ntouched;
  BufferObject *touched[MAX_TOUCH]; /* borrowed: the arguments hold them */
};

#define CALL_INIT {Py_None, 0, NULL, 0, {0}, NULL, 0, {0}}
/* An operand descriptor whose buffer is noted in call c. */
#define OPERAND {.call = &c}

static void call_touch(Call *c, BufferObject *b) {
  if (c && c->ntouched < MAX_TOUCH)
    c->touched[c->ntouched++] = b;
}

/* After a successful enqueue on c->q: remember c->q in every operand's
 * buffer that came from another queue's pool, so that the buffer's block
 * is reused only once c->q's commands are done. Beyond MAX_FOREIGN queues
 * (or MAX_TOUCH operands) nothing more is noted. */
static void call_note(Call *c) {
  for (int i = 0; i < c->ntouched; i++) {
    BufferObject *b = c->touched[i];
    int known = b->home == c->q || !b->pooled;
    for (int k = 0; !known && k < b->nforeign; k++)
      known = b->foreign[k] == c->q;
    if (!known && b->nforeign < MAX_FOREIGN) {
      Py_INCREF(c->q);
      b->foreign[b->nforeign++] = c->q;
    }
  }
}

/* Resolve the queue (q, else the given array's) and the wait list. */
static int call_prepare(Call *c, QueueObject *q, ArrayObject *a) {
  c->q = q ? q : a ? a->queue : NULL;
  if (!c->q) {
    PyErr_SetString(PyExc_TypeError, "no queue: pass queue= or an array");
    return 0;
  }
  if (!queue_open(c->q))
    return 0;
  if (c->wait != Py_None) {
    PyObject *seq = PySequence_Fast(c->wait, "wait must be a sequence of kiln.Event");
    if (!seq)
      return 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > MAX_WAIT) {
      Py_DECREF(seq);
      PyErr_Format(PyExc_ValueError, "at most %d events to wait for", MAX_WAIT);
      return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
      PyObject *e = PySequence_Fast_GET_ITEM(seq, i);
      if (!PyObject_TypeCheck(e, &EventType)) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_TypeError, "wait[%zd] is not a kiln.Event", i);
        return 0;
      }
      /* The Events stay alive through the list until the call returns. */
      c->waits[i] = ((EventObject *)e)->event;
      /* A command waiting for another queue's event waits for ever on
       * drivers that start nothing until a queue is flushed (rusticl). */
      QueueObject *eq = ((EventObject *)e)->queue;
      if (eq && eq != c->q && eq->queue)
        kiln_queue_flush(eq->queue);
    }
    c->nwait = (size_t)n;
    Py_DECREF(seq); /* the caller's sequence still holds them */
  }
  return 1;
}

/* Turn a call's status into its result: None, or the Event. */
static PyObject *call_finish(Call *c, kiln_status st) {
  if (st != KILN_OK)
    return raise_status(st);
  call_note(c);
  if (!c->want_event)
    Py_RETURN_NONE;
  return (PyObject *)event_wrap(c->ev, c->q);
}

#define WAITS c.nwait, c.waits, (c.want_event ? &c.ev : NULL)
#define CALL_KW "wait", "event"

/* ---- transfers ---------------------------------------------------------------- */

/* Blocking transfers on a CPU device go through a mapping: the buffer's
 * memory is host memory there, so the map costs nothing and the copy runs
 * on the calling thread, without the GIL, with one wait (for the map: the
 * work before it) where a read or write (done by the driver's worker
 * thread) has its own. The unmap is enqueued and flushed, not waited for:
 * later commands on the queue follow it, and other queues meet the array
 * through with_queue's marker or events, which follow it too. Measured on
 * PoCL (docs/python.md, Speed): a 64 MiB read into a new NumPy array took
 * about twice a NumPy copy through clEnqueueReadBuffer; each wait costs a
 * wake-up of both threads, which on a loaded machine is milliseconds. */
static kiln_status map_wait(QueueObject *q, const kiln_range *r, int write, size_t nwait,
                            kiln_event *const *waits, void **mapped) {
  kiln_event *ev = NULL;
  kiln_status st = kiln_buffer_map(q->queue, r, mapped, write ? KILN_MAP_WRITE : KILN_MAP_READ,
                                   nwait, waits, &ev);
  if (st != KILN_OK)
    return st;
  st = flush_wait(q, ev);
  kiln_event_release(ev);
  if (st != KILN_OK) {
    kiln_buffer_unmap(q->queue, r->buffer, *mapped, 0, NULL, NULL);
    kiln_queue_flush(q->queue);
  }
  return st;
}

static kiln_status unmap_flush(QueueObject *q, kiln_buffer *b, void *mapped,
                               kiln_event **out_event) {
  kiln_status st = kiln_buffer_unmap(q->queue, b, mapped, 0, NULL, out_event);
  kiln_queue_flush(q->queue);
  return st;
}

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

static void copy_nogil(void *dst, const void *src, size_t bytes) {
  Py_BEGIN_ALLOW_THREADS
  memcpy(dst, src, bytes);
  Py_END_ALLOW_THREADS
}

/* The whole mapped transfer of r to or from host; *out_event (may be NULL)
 * is the unmap's. */
static kiln_status mapped_copy(QueueObject *q, const kiln_range *r, void *host, int write,
                               size_t nwait, kiln_event *const *waits, kiln_event **out_event) {
  void *mapped = NULL;
  kiln_status st = map_wait(q, r, write, nwait, waits, &mapped);
  if (st != KILN_OK)
    return st;
  size_t bytes = r->count * dtype_size(r->dtype);
  copy_nogil(write ? mapped : host, write ? host : mapped, bytes);
  return unmap_flush(q, r->buffer, mapped, out_event);
}

/* read_new(array, lo, count, make): a new host copy of count elements of
 * the array's buffer from element lo; make(offset, count) returns the writable,
 * C-contiguous destination of count * itemsize bytes, where offset is
 * where element lo lies within a 4 KiB page of host memory on a CPU
 * device (else -1): numpy() places the copy at that same offset, because
 * copying into new pages between addresses at different offsets within
 * their pages took PoCL 1.3 to 1.8 times as long. Waits; returns make's
 * result. */
static PyObject *mod_read_new(PyObject *self, PyObject *args) {
  PyObject *srco, *make;
  Py_ssize_t lo, count;
  if (!PyArg_ParseTuple(args, "OnnO", &srco, &lo, &count, &make) || !check_array(srco, "src"))
    return NULL;
  ArrayObject *a = (ArrayObject *)srco;
  if (!queue_open(a->queue))
    return NULL;
  size_t es = dtype_size(a->dtype);
  if (lo < 0 || count <= 0 || (size_t)(lo + count) > a->buf->nbytes / es) {
    PyErr_SetString(PyExc_ValueError, "read_new: the span is outside the buffer or empty");
    return NULL;
  }
  kiln_range r = {a->buf->buf, (size_t)lo, (size_t)count, a->dtype};
  QueueObject *q = a->queue;
  void *mapped = NULL;
  kiln_status st = KILN_OK;
  if (q->ctx->host_memory && (st = map_wait(q, &r, 0, 0, NULL, &mapped)) != KILN_OK)
    return raise_status(st);
  PyObject *dst = PyObject_CallFunction(
      make, "ln", mapped ? (long)((uintptr_t)mapped % 4096u) : -1L, count);
  Py_buffer view;
  int have = dst && PyObject_GetBuffer(dst, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) == 0;
  if (have && (size_t)view.len != (size_t)count * es) {
    PyErr_Format(PyExc_ValueError, "make gave %zd bytes, not %zu", view.len, (size_t)count * es);
    PyBuffer_Release(&view);
    have = 0;
  }
  if (have && mapped)
    copy_nogil(view.buf, mapped, view.len);
  if (mapped)
    st = unmap_flush(q, r.buffer, mapped, NULL);
  else if (have) {
    kiln_event *ev = NULL;
    st = kiln_buffer_read(q->queue, &r, view.buf, 0, NULL, &ev);
    if (st == KILN_OK)
      st = flush_wait(q, ev);
    kiln_event_release(ev);
  }
  if (have)
    PyBuffer_Release(&view);
  if (!have) {
    Py_XDECREF(dst);
    return NULL;
  }
  if (st != KILN_OK) {
    Py_DECREF(dst);
    return raise_status(st);
  }
  return dst;
}

/* A blocking transfer: mapped on a CPU device (mapped_copy), else a read or
 * write; the caller waits for *ev. */
static kiln_status transfer_blocking(QueueObject *q, const kiln_range *r, void *host, int write,
                                     size_t nwait, kiln_event *const *waits, kiln_event **ev) {
  if (q->ctx->host_memory)
    return mapped_copy(q, r, host, write, nwait, waits, ev);
  return write ? kiln_buffer_write(q->queue, host, r, nwait, waits, ev)
               : kiln_buffer_read(q->queue, r, host, nwait, waits, ev);
}

/* The end of a transfer between host memory `view` and a buffer, enqueued
 * with status st as ev. Blocking (1): wait, let go of view, return None (or
 * the Event when asked); 2: the same without waiting (a mapped copy, done
 * with the host memory already). Non-blocking: return the Event, which holds view
 * until it is waited for or freed (the command still uses the memory). */
static PyObject *transfer_finish(Call *c, kiln_status st, kiln_event *ev, Py_buffer *view,
                                 int blocking) {
  if (st == KILN_OK)
    call_note(c);
  if (st == KILN_OK && blocking == 1)
    st = flush_wait(c->q, ev);
  if (st != KILN_OK || blocking) {
    PyBuffer_Release(view);
    if (st != KILN_OK) {
      kiln_event_release(ev); /* NULL when the enqueue failed */
      return raise_status(st);
    }
    if (!c->want_event) {
      kiln_event_release(ev);
      Py_RETURN_NONE;
    }
    return (PyObject *)event_wrap(ev, c->q);
  }
  EventObject *e = PyObject_New(EventObject, &EventType);
  if (!e) {
    flush_wait(c->q, ev);
    kiln_event_release(ev);
    PyBuffer_Release(view);
    return NULL;
  }
  e->event = ev;
  e->ctx = c->q->ctx;
  Py_INCREF(e->ctx);
  e->queue = c->q;
  Py_INCREF(e->queue);
  e->hold = *view;
  e->holding = 1;
  return (PyObject *)e;
}

/* write(array, host, blocking, wait=None, event=False): host is any
 * C-contiguous buffer of the array's size in bytes. Non-blocking: the
 * returned Event holds the host buffer until it is waited for or freed. */
static PyObject *mod_write(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kwl[] = {"dst", "src", "blocking", CALL_KW, NULL};
  Call c = CALL_INIT;
  RangeArg dst = OPERAND;
  PyObject *src;
  int blocking = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O|pOp", kwl, conv_range, &dst, &src, &blocking,
                                   &c.wait, &c.want_event) ||
      !call_prepare(&c, NULL, dst.a))
    return NULL;
  Py_buffer view;
  if (PyObject_GetBuffer(src, &view, PyBUF_C_CONTIGUOUS) < 0)
    return NULL;
  size_t need = dst.r.count * dtype_size(dst.r.dtype);
  if ((size_t)view.len != need) {
    PyBuffer_Release(&view);
    PyErr_Format(PyExc_ValueError, "src has %zd bytes, the array %zu", view.len, need);
    return NULL;
  }
  if (need == 0) {
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
  }
  kiln_event *ev = NULL;
  kiln_status st;
  if (blocking && c.q->ctx->host_memory) {
    st = mapped_copy(c.q, dst.p, view.buf, 1, c.nwait, c.waits, &ev);
    blocking = 2; /* the host memory is done with; the unmap is not waited for */
  } else {
    st = kiln_buffer_write(c.q->queue, view.buf, dst.p, c.nwait, c.waits, &ev);
  }
  return transfer_finish(&c, st, ev, &view, blocking);
}

/* read(array_span_lo, count, array, host, blocking, wait, event): copy count
 * elements of the array's buffer from element lo into host (writable,
 * C-contiguous, exactly that many bytes). */
static PyObject *mod_read(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kwl[] = {"src", "dst", "lo", "count", "blocking", CALL_KW, NULL};
  Call c = CALL_INIT;
  PyObject *srco, *dsto;
  Py_ssize_t lo, count;
  int blocking = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOnn|pOp", kwl, &srco, &dsto, &lo, &count,
                                   &blocking, &c.wait, &c.want_event) ||
      !check_array(srco, "src"))
    return NULL;
  ArrayObject *a = (ArrayObject *)srco;
  if (!call_prepare(&c, NULL, a))
    return NULL;
  if (lo < 0 || count < 0) {
    PyErr_SetString(PyExc_ValueError, "negative offset or count");
    return NULL;
  }
  Py_buffer view;
  if (PyObject_GetBuffer(dsto, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
    return NULL;
  size_t need = (size_t)count * dtype_size(a->dtype);
  if ((size_t)view.len != need) {
    PyBuffer_Release(&view);
    PyErr_Format(PyExc_ValueError, "out has %zd bytes, the array %zu", view.len, need);
    return NULL;
  }
  if (need == 0) {
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
  }
  kiln_range r = {a->buf->buf, (size_t)lo, (size_t)count, a->dtype};
  call_touch(&c, a->buf);
  kiln_event *ev = NULL;
  kiln_status st;
  if (blocking && c.q->ctx->host_memory) {
    st = mapped_copy(c.q, &r, view.buf, 0, c.nwait, c.waits, &ev);
    blocking = 2; /* the host memory is done with; the unmap is not waited for */
  } else {
    st = kiln_buffer_read(c.q->queue, &r, view.buf, c.nwait, c.waits, &ev);
  }
  return transfer_finish(&c, st, ev, &view, blocking);
}

static PyObject *op_copy(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kwl[] = {"src", "dst", CALL_KW, NULL};
  Call c = CALL_INIT;
  RangeArg x = OPERAND, y = OPERAND;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O&|Op", kwl, conv_range, &x, conv_range, &y,
                                   &c.wait, &c.want_event) ||
      !call_prepare(&c, NULL, y.a))
    return NULL;
  if (x.r.count == 0 && y.r.count == 0)
    return call_finish(&c, kiln_queue_marker(c.q->queue, WAITS));
  return call_finish(&c, kiln_buffer_copy(c.q->queue, x.p, y.p, WAITS));
}

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

/* ---- Program and Kernel ----------------------------------------------------------- */

static PyObject *Program_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  static char *kwl[] = {"context", "source", "options", NULL};
  ContextObject *ctx;
  const char *source, *options = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!s|z", kwl, &ContextType, &ctx, &source, &options))
    return NULL;
  if (!ctx_open(ctx))
    return NULL;
  kiln_program *p = NULL;
  kiln_status st;
  Py_BEGIN_ALLOW_THREADS
  st = kiln_program_create_built(ctx->ctx, source, options, &p);
  Py_END_ALLOW_THREADS
  if (st != KILN_OK)
    return raise_status(st);
  ProgramObject *self = (ProgramObject *)type->tp_alloc(type, 0);
  if (!self) {
    kiln_program_destroy(p);
    return NULL;
  }
  self->prog = p;
  self->ctx = ctx;
  Py_INCREF(ctx);
  return (PyObject *)self;
}

static void Program_dealloc(ProgramObject *self) {
  if (self->prog)
    kiln_program_destroy(self->prog);
  Py_XDECREF(self->ctx);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Program_kernel(ProgramObject *self, PyObject *args) {
  const char *name;
  if (!PyArg_ParseTuple(args, "s", &name))
    return NULL;
  kiln_kernel *k = NULL;
  kiln_status st = kiln_kernel_create(self->prog, name, &k);
  if (st != KILN_OK)
    return raise_status(st);
  KernelObject *ko = PyObject_New(KernelObject, &KernelType);
  if (!ko) {
    kiln_kernel_destroy(k);
    return NULL;
  }
  ko->kernel = k;
  ko->prog = self;
  Py_INCREF(self);
  ko->nargs = kiln_kernel_get_arg_count(k);
  return (PyObject *)ko;
}

static PyObject *Program_get_from_cache(ProgramObject *self, void *u) {
  return PyBool_FromLong(kiln_program_is_from_cache(self->prog));
}

static PyObject *Program_get_build_log(ProgramObject *self, void *u) {
  const char *log = kiln_program_get_build_log(self->prog);
  return PyUnicode_DecodeUTF8(log, (Py_ssize_t)strlen(log), "replace");
}

static PyMethodDef Program_methods[] = {
    {"kernel", (PyCFunction)Program_kernel, METH_VARARGS,
     "kernel(name) -> Kernel for the __kernel function name (NotFoundError if none)."},
    {0}};

static PyGetSetDef Program_getset[] = {
    {"from_cache", (getter)Program_get_from_cache, NULL,
     "whether the build came from kiln's persistent cache", NULL},
    {"build_log", (getter)Program_get_build_log, NULL, "the full build log", NULL},
    {0}};

static void Kernel_dealloc(KernelObject *self) {
  if (self->kernel)
    kiln_kernel_destroy(self->kernel);
  Py_XDECREF(self->prog);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int parse_sizes(PyObject *o, const char *what, uint32_t *dims, size_t *out) {
  if (PyLong_Check(o)) {
    Py_ssize_t v = PyLong_AsSsize_t(o);
    if (v == -1 && PyErr_Occurred())
      return 0;
    if (v <= 0) {
      PyErr_Format(PyExc_ValueError, "%s must be > 0, got %zd", what, v);
      return 0;
    }
    out[0] = (size_t)v;
    *dims = 1;
    return 1;
  }
  PyObject *seq = PySequence_Fast(o, "sizes must be an int or a sequence of 1 to 3 ints");
  if (!seq)
    return 0;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (n < 1 || n > 3) {
    Py_DECREF(seq);
    PyErr_Format(PyExc_ValueError, "%s needs 1 to 3 entries, got %zd", what, n);
    return 0;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    Py_ssize_t v = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i), PyExc_OverflowError);
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(seq);
      return 0;
    }
    if (v <= 0) {
      Py_DECREF(seq);
      PyErr_Format(PyExc_ValueError, "%s[%zd] must be > 0, got %zd", what, i, v);
      return 0;
    }
    out[i] = (size_t)v;
  }
  *dims = (uint32_t)n;
  Py_DECREF(seq);
  return 1;
}

/* kernel(queue, global_size, *args, local_size=None, wait=None, event=False)
 * Arguments: a kiln.Array (its buffer; its offset must be 0), a
 * kiln.LocalMemory(nbytes), or anything with the buffer protocol of the
 * parameter's size (numpy scalars: np.float32(2), np.int32(7)); a Python
 * float is an f32 and a Python int an i32. */
static PyObject *Kernel_call(KernelObject *self, PyObject *args, PyObject *kw) {
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  if (n < 2) {
    PyErr_SetString(PyExc_TypeError, "kernel(queue, global_size, *args)");
    return NULL;
  }
  PyObject *qo = PyTuple_GET_ITEM(args, 0);
  if (!PyObject_TypeCheck(qo, &QueueType)) {
    PyErr_SetString(PyExc_TypeError, "the first argument must be a kiln.Queue");
    return NULL;
  }
  Call c = CALL_INIT;
  PyObject *local = Py_None;
  if (kw) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kw, &pos, &k, &v)) {
      if (PyUnicode_CompareWithASCIIString(k, "local_size") == 0)
        local = v;
      else if (PyUnicode_CompareWithASCIIString(k, "wait") == 0)
        c.wait = v;
      else if (PyUnicode_CompareWithASCIIString(k, "event") == 0)
        c.want_event = PyObject_IsTrue(v);
      else
        return PyErr_Format(PyExc_TypeError, "unexpected keyword argument %R", k);
    }
  }
  QueueObject *q = (QueueObject *)qo;
  if (q->ctx != self->prog->ctx)
    return raise_with(KILN_ERR_WRONG_CONTEXT, "queue: of another context than the kernel");
  if (!call_prepare(&c, q, NULL))
    return NULL;
  size_t gsz[3], lsz[3];
  uint32_t gd, ld = 0;
  if (!parse_sizes(PyTuple_GET_ITEM(args, 1), "global_size", &gd, gsz))
    return NULL;
  if (local != Py_None && !parse_sizes(local, "local_size", &ld, lsz))
    return NULL;
  if (local != Py_None && ld != gd) {
    PyErr_SetString(PyExc_ValueError, "local_size and global_size differ in length");
    return NULL;
  }
  if ((uint32_t)(n - 2) != self->nargs)
    return PyErr_Format(PyExc_TypeError, "the kernel takes %u arguments, got %zd",
                        (unsigned)self->nargs, n - 2);
  for (Py_ssize_t i = 2; i < n; i++) {
    PyObject *o = PyTuple_GET_ITEM(args, i);
    uint32_t idx = (uint32_t)(i - 2);
    kiln_status st;
    if (PyObject_TypeCheck(o, &ArrayType)) {
      ArrayObject *a = (ArrayObject *)o;
      if (a->offset != 0)
        return PyErr_Format(PyExc_ValueError,
                            "argument %u: a view with an offset cannot be a kernel argument; "
                            "pass the offset as an int",
                            idx);
      st = kiln_kernel_set_arg_buffer(self->kernel, idx, a->buf->buf);
      call_touch(&c, a->buf);
    } else if (PyFloat_CheckExact(o)) {
      st = kiln_kernel_set_arg_f32(self->kernel, idx, (float)PyFloat_AS_DOUBLE(o));
    } else if (PyLong_CheckExact(o)) {
      long v = PyLong_AsLong(o);
      if ((v == -1 && PyErr_Occurred()) || v < INT32_MIN || v > INT32_MAX) {
        PyErr_Clear();
        return PyErr_Format(PyExc_OverflowError,
                            "argument %u: a Python int is an i32; use numpy.int64 etc. "
                            "for other types", idx);
      }
      st = kiln_kernel_set_arg_i32(self->kernel, idx, (int32_t)v);
    } else if (PyObject_HasAttrString(o, "_kiln_local_bytes")) {
      PyObject *nb = PyObject_GetAttrString(o, "_kiln_local_bytes");
      Py_ssize_t v = nb ? PyNumber_AsSsize_t(nb, PyExc_OverflowError) : -1;
      Py_XDECREF(nb);
      if (v < 0) {
        if (!PyErr_Occurred())
          PyErr_Format(PyExc_ValueError, "argument %u: negative local size", idx);
        return NULL;
      }
      st = kiln_kernel_set_arg_local(self->kernel, idx, (size_t)v);
    } else if (PyObject_CheckBuffer(o)) {
      Py_buffer view;
      if (PyObject_GetBuffer(o, &view, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
      st = kiln_kernel_set_arg_scalar(self->kernel, idx, view.buf, (size_t)view.len);
      PyBuffer_Release(&view);
    } else {
      return PyErr_Format(PyExc_TypeError,
                          "argument %u: expected a kiln.Array, LocalMemory, int, float or a "
                          "numpy scalar, got %.100s",
                          idx, Py_TYPE(o)->tp_name);
    }
    if (st != KILN_OK)
      return raise_status(st);
  }
  return call_finish(&c, kiln_kernel_launch(q->queue, self->kernel, gd, gsz,
                                            local == Py_None ? NULL : lsz, WAITS));
}

static PyObject *Kernel_info(KernelObject *self, PyObject *unused) {
  kiln_kernel_info i;
  kiln_status st = kiln_kernel_get_info(self->kernel, &i);
  if (st != KILN_OK)
    return raise_status(st);
  return Py_BuildValue("{s:s,s:I,s:n,s:n,s:(nnn),s:K,s:K,s:K}", "name", i.name, "num_args",
                       (unsigned)i.num_args, "work_group_size", (Py_ssize_t)i.work_group_size,
                       "preferred_multiple", (Py_ssize_t)i.preferred_multiple,
                       "required_size", (Py_ssize_t)i.required_size[0],
                       (Py_ssize_t)i.required_size[1], (Py_ssize_t)i.required_size[2],
                       "local_mem_bytes", (unsigned long long)i.local_mem_bytes,
                       "local_arg_bytes", (unsigned long long)i.local_arg_bytes,
                       "private_mem_bytes", (unsigned long long)i.private_mem_bytes);
}

static PyObject *Kernel_get_num_args(KernelObject *self, void *u) {
  return PyLong_FromUnsignedLong(self->nargs);
}

static PyMethodDef Kernel_methods[] = {
    {"info", (PyCFunction)Kernel_info, METH_NOARGS, "What the driver says of the kernel (dict)."},
    {0}};

static PyGetSetDef Kernel_getset[] = {
    {"num_args", (getter)Kernel_get_num_args, NULL, "number of declared arguments", NULL},
    {0}};

/* ---- ops -----------------------------------------------------------------------------
 * One function per C op. The pattern: parse descriptors with the converters,
 * take the queue from the output array, call, finish. */

#define OP_PARSE(fmt, ...)                                                                  \
  if (!PyArg_ParseTupleAndKeywords(args, kw, fmt "|Op", (char **)kwl, __VA_ARGS__, &c.wait, \
                                   &c.want_event))                                          \
  return NULL

#define OP_DEF(name)                                                                        \
  static PyObject *op_##name(PyObject *self, PyObject *args, PyObject *kw)

OP_DEF(unary) {
  static const char *kwl[] = {"op", "x", "y", CALL_KW, NULL};
  Call c = CALL_INIT;
  int op;
  RangeArg x = OPERAND, y = OPERAND;
  OP_PARSE("iO&O&", &op, conv_range, &x, conv_range, &y);
  if (!call_prepare(&c, NULL, y.a))
    return NULL;
  return call_finish(&c, kiln_unary(c.q->queue, (kiln_unary_op)op, x.p, y.p, WAITS));
}

OP_DEF(binary) {
  static const char *kwl[] = {"op", "a", "b", "y", CALL_KW, NULL};
  Call c = CALL_INIT;
  int op;
  RangeArg a = OPERAND, b = OPERAND, y = OPERAND;
  OP_PARSE("iO&O&O&", &op, conv_range, &a, conv_range, &b, conv_range, &y);
  if (!call_prepare(&c, NULL, y.a))
    return NULL;
  return call_finish(&c, kiln_binary(c.q->queue, (kiln_binary_op)op, a.p, b.p, y.p, WAITS));
}

OP_DEF(binary_scalar) {
  static const char *kwl[] = {"op", "a", "y", "s", CALL_KW, NULL};
  Call c = CALL_INIT;
  int op;
  float s;
  RangeArg a = OPERAND, y = OPERAND;
  OP_PARSE("iO&O&f", &op, conv_range, &a, conv_range, &y, &s);
  if (!call_prepare(&c, NULL, y.a))
    return NULL;
  return call_finish(&c, kiln_binary_scalar(c.q->queue, (kiln_binary_op)op, a.p, y.p, s, WAITS));
}

OP_DEF(axpy) {
  static const char *kwl[] = {"x", "y", "alpha", CALL_KW, NULL};
  Call c = CALL_INIT;
  float alpha;
  RangeArg x = OPERAND, y = OPERAND;
  OP_PARSE("O&O&f", conv_range, &x, conv_range, &y, &alpha);
  if (!call_prepare(&c, NULL, y.a))
    return NULL;
  return call_finish(&c, kiln_axpy(c.q->queue, x.p, y.p, alpha, WAITS));
}

OP_DEF(scale) {
  static const char *kwl[] = {"x", "alpha", CALL_KW, NULL};
  Call c = CALL_INIT;
  float alpha;
  RangeArg x = OPERAND;
  OP_PARSE("O&f", conv_range, &x, &alpha);
  if (!call_prepare(&c, NULL, x.a))
    return NULL;
  return call_finish(&c, kiln_scale(c.q->queue, x.p, alpha, WAITS));
}

/* fill(y, value_bytes): value is one element's bits (bytes of the dtype's size). */
OP_DEF(fill) {
  static const char *kwl[] = {"y", "value", CALL_KW, NULL};
  Call c = CALL_INIT;
  RangeArg y = OPERAND;
  Py_buffer v;
  OP_PARSE("O&y*", conv_range, &y, &v);
  if (!call_prepare(&c, NULL, y.a)) {
    PyBuffer_Release(&v);
    return NULL;
  }
  if ((size_t)v.len != dtype_size(y.r.dtype)) {
    PyBuffer_Release(&v);
    return PyErr_Format(PyExc_ValueError, "value has %zd bytes, an element %zu", v.len,
                        dtype_size(y.r.dtype));
  }
  kiln_status st = kiln_fill(c.q->queue, y.p, v.buf, WAITS);
  PyBuffer_Release(&v);
  return call_finish(&c, st);
}

OP_DEF(cast) {
  static const char *kwl[] = {"x", "y", CALL_KW, NULL};
  Call c = CALL_INIT;
  RangeArg x = OPERAND, y = OPERAND;
  OP_PARSE("O&O&", conv_range, &x, conv_range, &y);
  if (!call_prepare(&c, NULL, y.a))
    return NULL;
  return call_finish(&c, kiln_cast(c.q->queue, x.p, y.p, WAITS));
}

OP_DEF(reduce) {
  static const char *kwl[] = {"op", "x", "result", CALL_KW, NULL};
  Call c = CALL_INIT;
  int op;
  RangeArg x = OPERAND, r = OPERAND;
  OP_PARSE("iO&O&", &op, conv_range, &x, conv_range, &r);
  if (!call_prepare(&c, NULL, r.a))
    return NULL;
  return call_finish(&c, kiln_reduce(c.q->queue, (kiln_reduce_op)op, x.p, r.p, WAITS));
}

OP_DEF(dot) {
  static const char *kwl[] = {"x", "y", "result", CALL_KW, NULL};
  Call c = CALL_INIT;
  RangeArg x = OPERAND, y = OPERAND, r = OPERAND;
  OP_PARSE("O&O&O&", conv_range, &x, conv_range, &y, conv_range, &r);
  if (!call_prepare(&c, NULL, r.a))
    return NULL;
  return call_finish(&c, kiln_dot(c.q->queue, x.p, y.p, r.p, WAITS));
}

OP_DEF(reduce_rows) {
  static const char *kwl[] = {"op", "x", "result", CALL_KW, NULL};
  Call c = CALL_INIT;
  int op;
  MatrixArg x = OPERAND;
  RangeArg r = OPERAND;
  OP_PARSE("iO&O&", &op, conv_matrix, &x, conv_range, &r);
  if (!call_prepare(&c, NULL, r.a))
    return NULL;
  return call_finish(&c, kiln_reduce_rows(c.q->queue, (kiln_reduce_op)op, x.p, r.p, WAITS));
}

OP_DEF(reduce_cols) {
  static const char *kwl[] = {"op", "x", "result", CALL_KW, NULL};
  Call c = CALL_INIT;
  int op;
  MatrixArg x = OPERAND;
  RangeArg r = OPERAND;
  OP_PARSE("iO&O&", &op, conv_matrix, &x, conv_range, &r);
  if (!call_prepare(&c, NULL, r.a))
    return NULL;
  return call_finish(&c, kiln_reduce_cols(c.q->queue, (kiln_reduce_op)op, x.p, r.p, WAITS));
}

OP_DEF(scan) {
  static const char *kwl[] = {"kind", "x", "y", CALL_KW, NULL};
  Call c = CALL_INIT;
  int kind;
  RangeArg x = OPERAND, y = OPERAND;
  OP_PARSE("iO&O&", &kind, conv_range, &x, conv_range, &y);
  if (!call_prepare(&c, NULL, y.a))
    return NULL;
  return call_finish(&c, kiln_scan(c.q->queue, (kiln_scan_kind)kind, x.p, y.p, WAITS));
}

OP_DEF(softmax_rows) {
  static const char *kwl[] = {"x", "y", CALL_KW, NULL};
  Call c = CALL_INIT;
  MatrixArg x = OPERAND, y = OPERAND;
  OP_PARSE("O&O&", conv_matrix, &x, conv_matrix, &y);
  if (!call_prepare(&c, NULL, y.a))
    return NULL;
  return call_finish(&c, kiln_softmax_rows(c.q->queue, x.p, y.p, WAITS));
}

OP_DEF(layernorm_rows) {
  static const char *kwl[] = {"x", "scale", "bias", "y", "eps", CALL_KW, NULL};
  Call c = CALL_INIT;
  MatrixArg x = OPERAND, y = OPERAND;
  RangeArg s = OPERAND, b = OPERAND;
  float eps;
  OP_PARSE("O&O&O&O&f", conv_matrix, &x, conv_range_opt, &s, conv_range_opt, &b, conv_matrix,
           &y, &eps);
  if (!call_prepare(&c, NULL, y.a))
    return NULL;
  return call_finish(&c, kiln_layernorm_rows(c.q->queue, x.p, s.p, b.p, y.p, eps, WAITS));
}

OP_DEF(transpose) {
  static const char *kwl[] = {"x", "y", CALL_KW, NULL};
  Call c = CALL_INIT;
  MatrixArg x = OPERAND, y = OPERAND;
  OP_PARSE("O&O&", conv_matrix, &x, conv_matrix, &y);
  if (!call_prepare(&c, NULL, y.a))
    return NULL;
  return call_finish(&c, kiln_transpose(c.q->queue, x.p, y.p, WAITS));
}

OP_DEF(matmul) {
  static const char *kwl[] = {"a", "b", "c", "alpha", "beta", "bias", "activation", CALL_KW, NULL};
  Call c = CALL_INIT;
  MatrixArg a = OPERAND, b = OPERAND, cm = OPERAND;
  RangeArg bias = OPERAND;
  kiln_epilogue e = KILN_EPILOGUE_INIT;
  int act = 0;
  OP_PARSE("O&O&O&ffO&i", conv_matrix, &a, conv_matrix, &b, conv_matrix, &cm, &e.alpha, &e.beta,
           conv_range_opt, &bias, &act);
  if (!call_prepare(&c, NULL, cm.a))
    return NULL;
  e.bias = bias.p;
  e.activation = (kiln_activation)act;
  return call_finish(&c, kiln_matmul(c.q->queue, (size_t)cm.batch, a.p, b.p, cm.p, &e, WAITS));
}

/* -- training ops (kiln_ops_train.h) -- */

OP_DEF(binary_broadcast) {
  static const char *kwl[] = {"op", "broadcast", "a", "b", "y", CALL_KW, NULL};
  Call c = CALL_INIT;
  int op, bc;
  MatrixArg a = OPERAND, y = OPERAND;
  RangeArg b = OPERAND;
  OP_PARSE("iiO&O&O&", &op, &bc, conv_matrix, &a, conv_range, &b, conv_matrix, &y);
  if (!call_prepare(&c, NULL, y.a))
    return NULL;
  return call_finish(&c, kiln_binary_broadcast(c.q->queue, (kiln_binary_op)op,
                                               (kiln_broadcast)bc, a.p, b.p, y.p, WAITS));
}

OP_DEF(unary_backward) {
  static const char *kwl[] = {"op", "grad_from", "xy", "dy", "dx", CALL_KW, NULL};
  Call c = CALL_INIT;
  int op, from;
  RangeArg xy = OPERAND, dy = OPERAND, dx = OPERAND;
  OP_PARSE("iiO&O&O&", &op, &from, conv_range, &xy, conv_range, &dy, conv_range, &dx);
  if (!call_prepare(&c, NULL, dx.a))
    return NULL;
  return call_finish(&c, kiln_unary_backward(c.q->queue, (kiln_unary_op)op, (kiln_grad_from)from,
                                             xy.p, dy.p, dx.p, WAITS));
}

OP_DEF(softmax_cross_entropy) {
  static const char *kwl[] = {"logits", "labels", "loss", "mean", CALL_KW, NULL};
  Call c = CALL_INIT;
  MatrixArg lg = OPERAND;
  RangeArg lb = OPERAND, loss = OPERAND, mean = OPERAND;
  OP_PARSE("O&O&O&O&", conv_matrix, &lg, conv_range, &lb, conv_range_opt, &loss, conv_range_opt,
           &mean);
  if (!call_prepare(&c, NULL, mean.a ? mean.a : loss.a ? loss.a : lg.a))
    return NULL;
  return call_finish(&c, kiln_softmax_cross_entropy(c.q->queue, lg.p, lb.p, loss.p, mean.p, WAITS));
}

OP_DEF(softmax_cross_entropy_backward) {
  static const char *kwl[] = {"logits", "labels", "dlogits", "scale", CALL_KW, NULL};
  Call c = CALL_INIT;
  MatrixArg lg = OPERAND, dl = OPERAND;
  RangeArg lb = OPERAND;
  float scale;
  OP_PARSE("O&O&O&f", conv_matrix, &lg, conv_range, &lb, conv_matrix, &dl, &scale);
  if (!call_prepare(&c, NULL, dl.a))
    return NULL;
  return call_finish(&c, kiln_softmax_cross_entropy_backward(c.q->queue, lg.p, lb.p, dl.p, scale,
                                                             WAITS));
}

OP_DEF(accuracy_count) {
  static const char *kwl[] = {"logits", "labels", "count", "accumulate", CALL_KW, NULL};
  Call c = CALL_INIT;
  MatrixArg lg = OPERAND;
  RangeArg lb = OPERAND, cnt = OPERAND;
  int acc;
  OP_PARSE("O&O&O&p", conv_matrix, &lg, conv_range, &lb, conv_range, &cnt, &acc);
  if (!call_prepare(&c, NULL, cnt.a))
    return NULL;
  return call_finish(&c, kiln_accuracy_count(c.q->queue, lg.p, lb.p, cnt.p, acc != 0, WAITS));
}

OP_DEF(softmax_rows_backward) {
  static const char *kwl[] = {"y", "dy", "dx", CALL_KW, NULL};
  Call c = CALL_INIT;
  MatrixArg y = OPERAND, dy = OPERAND, dx = OPERAND;
  OP_PARSE("O&O&O&", conv_matrix, &y, conv_matrix, &dy, conv_matrix, &dx);
  if (!call_prepare(&c, NULL, dx.a))
    return NULL;
  return call_finish(&c, kiln_softmax_rows_backward(c.q->queue, y.p, dy.p, dx.p, WAITS));
}

OP_DEF(layernorm_rows_backward) {
  static const char *kwl[] = {"x", "scale", "dy", "dx", "dscale", "dbias", "eps", CALL_KW, NULL};
  Call c = CALL_INIT;
  MatrixArg x = OPERAND, dy = OPERAND, dx = OPERAND;
  RangeArg s = OPERAND, ds = OPERAND, db = OPERAND;
  float eps;
  OP_PARSE("O&O&O&O&O&O&f", conv_matrix, &x, conv_range_opt, &s, conv_matrix, &dy, conv_matrix,
           &dx, conv_range_opt, &ds, conv_range_opt, &db, &eps);
  if (!call_prepare(&c, NULL, dx.a))
    return NULL;
  return call_finish(&c, kiln_layernorm_rows_backward(c.q->queue, x.p, s.p, dy.p, dx.p, ds.p,
                                                      db.p, eps, WAITS));
}

OP_DEF(gather_rows) {
  static const char *kwl[] = {"table", "indices", "y", CALL_KW, NULL};
  Call c = CALL_INIT;
  MatrixArg t = OPERAND, y = OPERAND;
  RangeArg ix = OPERAND;
  OP_PARSE("O&O&O&", conv_matrix, &t, conv_range, &ix, conv_matrix, &y);
  if (!call_prepare(&c, NULL, y.a))
    return NULL;
  return call_finish(&c, kiln_gather_rows(c.q->queue, t.p, ix.p, y.p, WAITS));
}

OP_DEF(scatter_add_rows) {
  static const char *kwl[] = {"x", "indices", "table", CALL_KW, NULL};
  Call c = CALL_INIT;
  MatrixArg x = OPERAND, t = OPERAND;
  RangeArg ix = OPERAND;
  OP_PARSE("O&O&O&", conv_matrix, &x, conv_range, &ix, conv_matrix, &t);
  if (!call_prepare(&c, NULL, t.a))
    return NULL;
  return call_finish(&c, kiln_scatter_add_rows(c.q->queue, x.p, ix.p, t.p, WAITS));
}

OP_DEF(random_bits) {
  static const char *kwl[] = {"y", "seed", "offset", CALL_KW, NULL};
  Call c = CALL_INIT;
  RangeArg y = OPERAND;
  unsigned long long seed, off;
  OP_PARSE("O&KK", conv_range, &y, &seed, &off);
  if (!call_prepare(&c, NULL, y.a))
    return NULL;
  return call_finish(&c, kiln_random_bits(c.q->queue, y.p, seed, off, WAITS));
}

OP_DEF(random_uniform) {
  static const char *kwl[] = {"y", "seed", "offset", "lo", "hi", CALL_KW, NULL};
  Call c = CALL_INIT;
  RangeArg y = OPERAND;
  unsigned long long seed, off;
  float lo, hi;
  OP_PARSE("O&KKff", conv_range, &y, &seed, &off, &lo, &hi);
  if (!call_prepare(&c, NULL, y.a))
    return NULL;
  return call_finish(&c, kiln_random_uniform(c.q->queue, y.p, seed, off, lo, hi, WAITS));
}

OP_DEF(random_normal) {
  static const char *kwl[] = {"y", "seed", "offset", "mean", "stddev", CALL_KW, NULL};
  Call c = CALL_INIT;
  RangeArg y = OPERAND;
  unsigned long long seed, off;
  float mean, sd;
  OP_PARSE("O&KKff", conv_range, &y, &seed, &off, &mean, &sd);
  if (!call_prepare(&c, NULL, y.a))
    return NULL;
  return call_finish(&c, kiln_random_normal(c.q->queue, y.p, seed, off, mean, sd, WAITS));
}

OP_DEF(dropout_mask) {
  static const char *kwl[] = {"mask", "seed", "offset", "p", CALL_KW, NULL};
  Call c = CALL_INIT;
  RangeArg m = OPERAND;
  unsigned long long seed, off;
  float p;
  OP_PARSE("O&KKf", conv_range, &m, &seed, &off, &p);
  if (!call_prepare(&c, NULL, m.a))
    return NULL;
  return call_finish(&c, kiln_dropout_mask(c.q->queue, m.p, seed, off, p, WAITS));
}

OP_DEF(dropout) {
  static const char *kwl[] = {"x", "y", "seed", "offset", "p", CALL_KW, NULL};
  Call c = CALL_INIT;
  RangeArg x = OPERAND, y = OPERAND;
  unsigned long long seed, off;
  float p;
  OP_PARSE("O&O&KKf", conv_range, &x, conv_range, &y, &seed, &off, &p);
  if (!call_prepare(&c, NULL, y.a))
    return NULL;
  return call_finish(&c, kiln_dropout(c.q->queue, x.p, y.p, seed, off, p, WAITS));
}

OP_DEF(sgd_step) {
  static const char *kwl[] = {"grad", "skip", "w", "velocity", "w_copy", "lr", "momentum",
                              "weight_decay", "nesterov", "grad_scale", CALL_KW, NULL};
  Call c = CALL_INIT;
  RangeArg g = OPERAND, sk = OPERAND, w = OPERAND, v = OPERAND, wc = OPERAND;
  kiln_sgd_params p = {0};
  int nesterov;
  OP_PARSE("O&O&O&O&O&fffpf", conv_range, &g, conv_range_opt, &sk, conv_range, &w,
           conv_range_opt, &v, conv_range_opt, &wc, &p.lr, &p.momentum, &p.weight_decay,
           &nesterov, &p.grad_scale);
  if (!call_prepare(&c, NULL, w.a))
    return NULL;
  p.nesterov = nesterov != 0;
  return call_finish(&c, kiln_sgd_step(c.q->queue, g.p, sk.p, w.p, v.p, wc.p, &p, WAITS));
}

OP_DEF(adamw_step) {
  static const char *kwl[] = {"grad", "skip", "w", "m", "v", "w_copy", "lr", "beta1", "beta2",
                              "eps", "weight_decay", "step", "grad_scale", CALL_KW, NULL};
  Call c = CALL_INIT;
  RangeArg g = OPERAND, sk = OPERAND, w = OPERAND, m = OPERAND, v = OPERAND, wc = OPERAND;
  kiln_adamw_params p = {0};
  unsigned long long step;
  OP_PARSE("O&O&O&O&O&O&fffffKf", conv_range, &g, conv_range_opt, &sk, conv_range, &w,
           conv_range, &m, conv_range, &v, conv_range_opt, &wc, &p.lr, &p.beta1, &p.beta2,
           &p.eps, &p.weight_decay, &step, &p.grad_scale);
  if (!call_prepare(&c, NULL, w.a))
    return NULL;
  p.step = step;
  return call_finish(&c, kiln_adamw_step(c.q->queue, g.p, sk.p, w.p, m.p, v.p, wc.p, &p, WAITS));
}

/* A sequence of Arrays as kiln_range[]. */
typedef struct {
  Call *call;
  kiln_range *r;
  size_t n;
} RangeList;

static int conv_range_list(PyObject *o, void *out) {
  RangeList *l = out;
  if (o == NULL) { /* cleanup call (Py_CLEANUP_SUPPORTED) */
    PyMem_Free(l->r);
    return 1;
  }
  PyObject *seq = PySequence_Fast(o, "expected a sequence of kiln.Array");
  if (!seq)
    return 0;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  l->r = PyMem_Malloc(sizeof *l->r * (size_t)(n ? n : 1));
  l->n = (size_t)n;
  if (!l->r) {
    Py_DECREF(seq);
    PyErr_NoMemory();
    return 0;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    RangeArg ra = {.call = l->call};
    if (!conv_range(PySequence_Fast_GET_ITEM(seq, i), &ra)) {
      PyMem_Free(l->r);
      l->r = NULL;
      Py_DECREF(seq);
      return 0;
    }
    l->r[i] = ra.r;
  }
  Py_DECREF(seq); /* the caller's sequence keeps the Arrays */
  return Py_CLEANUP_SUPPORTED;
}

OP_DEF(grad_norm) {
  static const char *kwl[] = {"ranges", "norm", CALL_KW, NULL};
  Call c = CALL_INIT;
  RangeList l = {.call = &c};
  RangeArg norm = OPERAND;
  OP_PARSE("O&O&", conv_range_list, &l, conv_range, &norm);
  PyObject *res = NULL;
  if (call_prepare(&c, NULL, norm.a))
    res = call_finish(&c, kiln_grad_norm(c.q->queue, l.r, l.n, norm.p, WAITS));
  PyMem_Free(l.r);
  return res;
}

OP_DEF(clip_grad_norm) {
  static const char *kwl[] = {"norm", "ranges", "max_norm", CALL_KW, NULL};
  Call c = CALL_INIT;
  RangeList l = {.call = &c};
  RangeArg norm = OPERAND;
  float mx;
  OP_PARSE("O&O&f", conv_range, &norm, conv_range_list, &l, &mx);
  PyObject *res = NULL;
  if (call_prepare(&c, NULL, norm.a))
    res = call_finish(&c, kiln_clip_grad_norm(c.q->queue, norm.p, l.r, l.n, mx, WAITS));
  PyMem_Free(l.r);
  return res;
}

OP_DEF(has_nonfinite) {
  static const char *kwl[] = {"ranges", "flag", CALL_KW, NULL};
  Call c = CALL_INIT;
  RangeList l = {.call = &c};
  RangeArg flag = OPERAND;
  OP_PARSE("O&O&", conv_range_list, &l, conv_range, &flag);
  PyObject *res = NULL;
  if (call_prepare(&c, NULL, flag.a))
    res = call_finish(&c, kiln_has_nonfinite(c.q->queue, l.r, l.n, flag.p, WAITS));
  PyMem_Free(l.r);
  return res;
}

/* ---- DLPack ---------------------------------------------------------------------------- */

typedef struct { int32_t device_type, device_id; } DLDevice;
typedef struct { uint8_t code, bits; uint16_t lanes; } DLDataType;
typedef struct {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
typedef struct { uint32_t major, minor; } DLPackVersion;
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

enum { kDLCPU = 1, kDLOpenCL = 4 };
enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4 };
#define DLPACK_FLAG_BITMASK_IS_COPIED (1ull << 1)

/* One allocation per exported tensor: both managed structs' shapes and the
 * owner (an Array for device tensors) or the host copy. Two references,
 * the capsule's and the managed tensor's (its deleter), taken and dropped
 * under the GIL: a consumer that calls the deleter but leaves the capsule
 * unrenamed (PyTorch 2.15 does, when it refuses an OpenCL tensor) must not
 * make the capsule's destructor delete it twice. */
typedef struct {
  DLManagedTensor legacy;
  DLManagedTensorVersioned versioned;
  int64_t shape[MAX_DIMS], strides[MAX_DIMS];
  PyObject *owner;
  void *host;
  int refs;
  int deleted;
} Export;

static void export_unref(Export *x) {
  if (--x->refs == 0)
    free(x);
}

static void export_delete(Export *x) {
  PyGILState_STATE g = PyGILState_Ensure();
  if (!x->deleted) {
    x->deleted = 1;
    Py_CLEAR(x->owner);
    free(x->host);
    x->host = NULL;
    export_unref(x);
  }
  PyGILState_Release(g);
}
static void legacy_deleter(DLManagedTensor *t) { export_delete((Export *)t->manager_ctx); }
static void versioned_deleter(DLManagedTensorVersioned *t) {
  export_delete((Export *)t->manager_ctx);
}

/* Unconsumed (name unchanged, deleter not called): delete; then drop the
 * capsule's reference. */
static void capsule_destructor(PyObject *cap) {
  Export *x = PyCapsule_GetContext(cap);
  if (!x)
    return;
  const char *name = PyCapsule_GetName(cap);
  if (name && strncmp(name, "used_", 5) != 0)
    export_delete(x);
  export_unref(x);
}

static DLDataType dl_dtype(kiln_dtype d) {
  switch (d) {
  case KILN_F32: return (DLDataType){kDLFloat, 32, 1};
  case KILN_F16: return (DLDataType){kDLFloat, 16, 1};
  case KILN_BF16: return (DLDataType){kDLBfloat, 16, 1};
  case KILN_I32: return (DLDataType){kDLInt, 32, 1};
  default: return (DLDataType){kDLUInt, 32, 1};
  }
}

/* _dlpack(array, to_cpu, versioned) -> capsule. to_cpu: a host copy (read
 * now, blocking) flagged IS_COPIED; else the device tensor (data is the
 * cl_mem, byte_offset the array's offset) after the array's queue is synced,
 * as DLPack asks for when no stream is given. */
static PyObject *mod_dlpack(PyObject *self, PyObject *args) {
  PyObject *ao;
  int to_cpu, versioned;
  if (!PyArg_ParseTuple(args, "Opp", &ao, &to_cpu, &versioned) || !check_array(ao, "array"))
    return NULL;
  ArrayObject *a = (ArrayObject *)ao;
  if (!queue_open(a->queue))
    return NULL;
  Export *x = calloc(1, sizeof *x);
  if (!x)
    return PyErr_NoMemory();
  size_t es = dtype_size(a->dtype);
  Py_ssize_t lo, hi;
  array_span(a, &lo, &hi);
  DLTensor t = {0};
  t.ndim = a->ndim;
  t.dtype = dl_dtype(a->dtype);
  t.shape = x->shape;
  t.strides = x->strides;
  for (int i = 0; i < a->ndim; i++) {
    x->shape[i] = a->shape[i];
    x->strides[i] = a->strides[i];
  }
  kiln_status st;
  if (to_cpu) {
    size_t bytes = (size_t)(hi - lo) * es;
    x->host = malloc(bytes ? bytes : 1);
    if (!x->host) {
      free(x);
      return PyErr_NoMemory();
    }
    if (bytes) {
      kiln_range r = {a->buf->buf, (size_t)lo, (size_t)(hi - lo), a->dtype};
      kiln_event *ev = NULL;
      st = transfer_blocking(a->queue, &r, x->host, 0, 0, NULL, &ev);
      if (st == KILN_OK) {
        st = flush_wait(a->queue, ev);
        kiln_event_release(ev);
      }
      if (st != KILN_OK) {
        free(x->host);
        free(x);
        return raise_status(st);
      }
    }
    t.data = x->host;
    t.device = (DLDevice){kDLCPU, 0};
  } else {
    if ((st = queue_sync(a->queue)) != KILN_OK) {
      free(x);
      return raise_status(st);
    }
    t.data = (void *)kiln_buffer_get_cl_mem(a->buf->buf);
    /* (the owner reference is taken below, once nothing can fail) */
    t.byte_offset = (uint64_t)a->offset * es;
    t.device = (DLDevice){kDLOpenCL, (int32_t)a->queue->ctx->list_index};
  }
  PyObject *cap;
  x->refs = 2;
  if (versioned) {
    x->versioned.version = (DLPackVersion){1, 0};
    x->versioned.manager_ctx = x;
    x->versioned.deleter = versioned_deleter;
    x->versioned.flags = to_cpu ? DLPACK_FLAG_BITMASK_IS_COPIED : 0;
    x->versioned.dl_tensor = t;
    cap = PyCapsule_New(&x->versioned, "dltensor_versioned", capsule_destructor);
  } else {
    x->legacy.manager_ctx = x;
    x->legacy.deleter = legacy_deleter;
    x->legacy.dl_tensor = t;
    cap = PyCapsule_New(&x->legacy, "dltensor", capsule_destructor);
  }
  if (!cap || PyCapsule_SetContext(cap, x) < 0) {
    if (cap) {
      PyCapsule_SetDestructor(cap, NULL);
      Py_DECREF(cap);
    }
    free(x->host);
    free(x);
    return NULL;
  }
  if (!to_cpu) { /* the capsule's data is the array's cl_mem: keep it alive */
    x->owner = ao;
    Py_INCREF(ao);
  }
  return cap;
}

/* A consumed foreign capsule kept alive by a Buffer wrapping its cl_mem,
 * or freed once its data is uploaded. */
typedef struct {
  PyObject_HEAD
  DLManagedTensor *legacy;
  DLManagedTensorVersioned *versioned;
} HeldTensor;

static void Held_dealloc(HeldTensor *self) {
  if (self->legacy && self->legacy->deleter)
    self->legacy->deleter(self->legacy);
  if (self->versioned && self->versioned->deleter)
    self->versioned->deleter(self->versioned);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject HeldType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kiln._kiln._HeldTensor",
    .tp_basicsize = sizeof(HeldTensor),
    .tp_dealloc = (destructor)Held_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
};

static int kiln_dtype_of(DLDataType d, kiln_dtype *out) {
  if (d.lanes != 1)
    return 0;
  if (d.code == kDLFloat && d.bits == 32) *out = KILN_F32;
  else if (d.code == kDLFloat && d.bits == 16) *out = KILN_F16;
  else if (d.code == kDLBfloat && d.bits == 16) *out = KILN_BF16;
  else if (d.code == kDLInt && d.bits == 32) *out = KILN_I32;
  else if (d.code == kDLUInt && d.bits == 32) *out = KILN_U32;
  else return 0;
  return 1;
}

/* _from_capsule(queue, capsule) -> Array. CPU tensors are copied to the
 * device (any strides: gathered on the host first when not C-contiguous);
 * OpenCL tensors are wrapped (kiln_buffer_wrap_cl refuses a cl_mem of
 * another context with WrongContextError) and share memory. */
static PyObject *mod_from_capsule(PyObject *self, PyObject *args) {
  QueueObject *q;
  PyObject *cap;
  if (!PyArg_ParseTuple(args, "O!O", &QueueType, &q, &cap))
    return NULL;
  if (!queue_open(q) || !ctx_open(q->ctx))
    return NULL;
  HeldTensor *held = PyObject_New(HeldTensor, &HeldType);
  if (!held)
    return NULL;
  held->legacy = NULL;
  held->versioned = NULL;
  DLTensor *t;
  if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    held->versioned = PyCapsule_GetPointer(cap, "dltensor_versioned");
    unsigned major = held->versioned->version.major;
    if (major != 1) {
      held->versioned = NULL; /* not ours to delete: the capsule stays unused */
      Py_DECREF(held);
      return PyErr_Format(PyExc_BufferError, "DLPack major version %u is not supported", major);
    }
    t = &held->versioned->dl_tensor;
    PyCapsule_SetName(cap, "used_dltensor_versioned");
  } else if (PyCapsule_IsValid(cap, "dltensor")) {
    held->legacy = PyCapsule_GetPointer(cap, "dltensor");
    t = &held->legacy->dl_tensor;
    PyCapsule_SetName(cap, "used_dltensor");
  } else {
    Py_DECREF(held);
    PyErr_SetString(PyExc_TypeError, "expected an unused DLPack capsule");
    return NULL;
  }
  PyObject *result = NULL;
  kiln_dtype dt;
  Py_ssize_t shape[MAX_DIMS], strides[MAX_DIMS];
  if (!kiln_dtype_of(t->dtype, &dt)) {
    PyErr_Format(PyExc_BufferError,
                 "DLPack dtype (code %u, %u bits, %u lanes) is not one of kiln's "
                 "(float32, float16, bfloat16, int32, uint32)",
                 t->dtype.code, t->dtype.bits, t->dtype.lanes);
    goto out;
  }
  if (t->ndim < 0 || t->ndim > MAX_DIMS) {
    PyErr_Format(PyExc_BufferError, "DLPack tensor has %d dimensions", (int)t->ndim);
    goto out;
  }
  size_t es = dtype_size(dt), n = 1;
  int contiguous = 1;
  Py_ssize_t expect = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] < 0) {
      PyErr_SetString(PyExc_BufferError, "DLPack tensor has a negative extent");
      goto out;
    }
    shape[i] = (Py_ssize_t)t->shape[i];
    strides[i] = t->strides ? (Py_ssize_t)t->strides[i] : expect;
    if (shape[i] != 1 && strides[i] != expect)
      contiguous = 0;
    if (strides[i] < 0) {
      PyErr_SetString(PyExc_BufferError, "negative DLPack strides are not supported");
      goto out;
    }
    expect *= shape[i];
    n *= (size_t)shape[i];
  }
  if (t->device.device_type == kDLCPU) {
    BufferObject *b = buffer_alloc(q, n * es);
    if (!b)
      goto out;
    const char *base = (const char *)t->data + t->byte_offset;
    char *gather = NULL;
    if (!contiguous && n) {
      gather = PyMem_Malloc(n * es);
      if (!gather) {
        Py_DECREF(b);
        PyErr_NoMemory();
        goto out;
      }
      size_t idx[MAX_DIMS] = {0};
      for (size_t k = 0; k < n; k++) {
        Py_ssize_t off = 0;
        for (int i = 0; i < t->ndim; i++)
          off += (Py_ssize_t)idx[i] * strides[i];
        memcpy(gather + k * es, base + (size_t)off * es, es);
        for (int i = t->ndim - 1; i >= 0; i--) {
          if (++idx[i] < (size_t)shape[i])
            break;
          idx[i] = 0;
        }
      }
      base = gather;
    }
    kiln_status st = KILN_OK;
    if (n) {
      kiln_range r = {b->buf, 0, n, dt};
      kiln_event *ev = NULL;
      st = transfer_blocking(q, &r, (void *)(uintptr_t)base, 1, 0, NULL, &ev);
      if (st == KILN_OK) {
        st = flush_wait(q, ev);
        kiln_event_release(ev);
      }
    }
    PyMem_Free(gather);
    if (st != KILN_OK) {
      Py_DECREF(b);
      raise_status(st);
      goto out;
    }
    result = (PyObject *)array_make(b, q, dt, t->ndim, shape, NULL, 0);
    Py_DECREF(b);
  } else if (t->device.device_type == kDLOpenCL) {
    if (t->byte_offset % es) {
      PyErr_SetString(PyExc_BufferError, "DLPack byte_offset is not a multiple of the element size");
      goto out;
    }
    kiln_buffer *kb = NULL;
    kiln_status st = kiln_buffer_wrap_cl(q->ctx->ctx, (cl_mem)t->data, &kb);
    if (st != KILN_OK) {
      raise_status(st);
      goto out;
    }
    BufferObject *b = PyObject_New(BufferObject, &BufferType);
    if (!b) {
      kiln_buffer_destroy(kb);
      goto out;
    }
    b->buf = kb;
    b->home = q;
    Py_INCREF(q);
    b->nbytes = kiln_buffer_get_size(kb);
    b->pooled = 0;
    b->nforeign = 0;
    b->keep = (PyObject *)held;
    Py_INCREF(held);
    ArrayObject *a = array_make(b, q, dt, t->ndim, shape, strides, (Py_ssize_t)(t->byte_offset / es));
    Py_DECREF(b);
    if (a) {
      Py_ssize_t lo, hi;
      array_span(a, &lo, &hi);
      if (hi > (Py_ssize_t)(b->nbytes / es)) {
        Py_DECREF(a);
        raise_with(KILN_ERR_OUT_OF_RANGE, "DLPack tensor reaches past the end of its cl_mem");
        goto out;
      }
    }
    result = (PyObject *)a;
  } else {
    PyErr_Format(PyExc_BufferError,
                 "DLPack device type %d: kiln takes CPU (1) and OpenCL (4) tensors",
                 (int)t->device.device_type);
  }
out:
  Py_DECREF(held);
  return result;
}

/* ---- module ----------------------------------------------------------------------------- */

static PyObject *mod_last_error(PyObject *self, PyObject *unused) {
  return Py_BuildValue("(ss)", kiln_status_name(kiln_last_status()), kiln_last_error());
}

/* fail(status, message): raise the status's exception as kiln's own calls
 * do (it becomes this thread's kiln_last_error() too), for refusals that
 * the Python layer makes. */
static PyObject *mod_fail(PyObject *self, PyObject *args) {
  int st;
  const char *msg;
  if (!PyArg_ParseTuple(args, "is", &st, &msg))
    return NULL;
  if (st >= 0 || st <= -32) {
    PyErr_SetString(PyExc_ValueError, "fail: not an error status");
    return NULL;
  }
  return raise_with((kiln_status)st, msg);
}

static PyObject *mod_set_array_class(PyObject *self, PyObject *cls) {
  if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &ArrayType)) {
    PyErr_SetString(PyExc_TypeError, "expected a subclass of ArrayBase");
    return NULL;
  }
  Py_INCREF(cls); /* kept for the life of the process */
  array_class = (PyTypeObject *)cls;
  Py_RETURN_NONE;
}

static PyObject *mod_version(PyObject *self, PyObject *unused) {
  return PyUnicode_FromString(kiln_version());
}

/* f32 <-> bf16/f16 on the host, as the device rounds: conv(src, dst, kind). */
static PyObject *mod_convert(PyObject *self, PyObject *args) {
  Py_buffer src, dst;
  int kind;
  if (!PyArg_ParseTuple(args, "y*w*i", &src, &dst, &kind))
    return NULL;
  size_t n = (size_t)src.len / (kind < 2 ? 4 : 2);
  size_t need = n * (kind < 2 ? 2 : 4);
  PyObject *res = NULL;
  if ((size_t)dst.len != need || !PyBuffer_IsContiguous(&src, 'C') ||
      !PyBuffer_IsContiguous(&dst, 'C'))
    PyErr_SetString(PyExc_ValueError, "convert: sizes or layouts disagree");
  else {
    switch (kind) {
    case 0: kiln_f32_to_bf16(src.buf, dst.buf, n); break;
    case 1: kiln_f32_to_f16(src.buf, dst.buf, n); break;
    case 2: kiln_bf16_to_f32(src.buf, dst.buf, n); break;
    default: kiln_f16_to_f32(src.buf, dst.buf, n); break;
    }
    res = Py_None;
    Py_INCREF(res);
  }
  PyBuffer_Release(&src);
  PyBuffer_Release(&dst);
  return res;
}

#define KW (PyCFunction)(void (*)(void))
#define OPM(name, doc) {#name, KW op_##name, METH_VARARGS | METH_KEYWORDS, doc}

/* -- convolution, pooling, batch normalisation (kiln_ops_conv.h,
 * kiln_ops_image.h) and attention (kiln_ops_attention.h) -- */

#define CONV_PARAMS_FMT "nnnnnnn"
#define CONV_PARAMS_ARGS(p)                                                    \
  &p[0], &p[1], &p[2], &p[3], &p[4], &p[5], &p[6]

/* The seven geometry numbers as kiln_conv2d_params; negatives refused. */
static int conv_params(const Py_ssize_t v[7], kiln_conv2d_params *p) {
  for (int i = 0; i < 7; i++)
    if (v[i] < 0) {
      PyErr_SetString(PyExc_ValueError, "convolution sizes must not be negative");
      return 0;
    }
  *p = (kiln_conv2d_params){(size_t)v[0], (size_t)v[1], (size_t)v[2], (size_t)v[3],
                            (size_t)v[4], (size_t)v[5], (size_t)v[6]};
  return 1;
}

OP_DEF(conv2d) {
  static const char *kwl[] = {"x", "w", "y", "stride_h", "stride_w", "pad_h", "pad_w",
                              "dilation_h", "dilation_w", "groups", "alpha", "beta",
                              "bias", "activation", CALL_KW, NULL};
  Call c = CALL_INIT;
  ImageArg x = OPERAND, w = OPERAND, y = OPERAND;
  RangeArg bias = OPERAND;
  Py_ssize_t v[7];
  kiln_conv2d_params p;
  kiln_epilogue e = KILN_EPILOGUE_INIT;
  int act = 0;
  OP_PARSE("O&O&O&" CONV_PARAMS_FMT "ffO&i", conv_image, &x, conv_image, &w, conv_image, &y,
           CONV_PARAMS_ARGS(v), &e.alpha, &e.beta, conv_range_opt, &bias, &act);
  if (!conv_params(v, &p) || !call_prepare(&c, NULL, y.a))
    return NULL;
  e.bias = bias.p;
  e.activation = (kiln_activation)act;
  return call_finish(&c, kiln_conv2d(c.q->queue, x.p, w.p, y.p, &p, &e, WAITS));
}

OP_DEF(conv2d_backward_data) {
  static const char *kwl[] = {"dy", "w", "dx", "stride_h", "stride_w", "pad_h", "pad_w",
                              "dilation_h", "dilation_w", "groups", CALL_KW, NULL};
  Call c = CALL_INIT;
  ImageArg dy = OPERAND, w = OPERAND, dx = OPERAND;
  Py_ssize_t v[7];
  kiln_conv2d_params p;
  OP_PARSE("O&O&O&" CONV_PARAMS_FMT, conv_image, &dy, conv_image, &w, conv_image, &dx,
           CONV_PARAMS_ARGS(v));
  if (!conv_params(v, &p) || !call_prepare(&c, NULL, dx.a))
    return NULL;
  return call_finish(&c, kiln_conv2d_backward_data(c.q->queue, dy.p, w.p, dx.p, &p, WAITS));
}

OP_DEF(conv2d_backward_weights) {
  static const char *kwl[] = {"x", "dy", "dw", "db", "stride_h", "stride_w", "pad_h",
                              "pad_w", "dilation_h", "dilation_w", "groups", CALL_KW, NULL};
  Call c = CALL_INIT;
  ImageArg x = OPERAND, dy = OPERAND, dw = OPERAND;
  RangeArg db = OPERAND;
  Py_ssize_t v[7];
  kiln_conv2d_params p;
  OP_PARSE("O&O&O&O&" CONV_PARAMS_FMT, conv_image, &x, conv_image, &dy, conv_image, &dw,
           conv_range_opt, &db, CONV_PARAMS_ARGS(v));
  if (!conv_params(v, &p) || !call_prepare(&c, NULL, dw.a))
    return NULL;
  return call_finish(&c, kiln_conv2d_backward_weights(c.q->queue, x.p, dy.p, dw.p, db.p, &p,
                                                      WAITS));
}

/* kernel, stride and padding as kiln_pool2d_params; negatives refused. */
static int pool_params(const Py_ssize_t v[6], int exclude, kiln_pool2d_params *p) {
  for (int i = 0; i < 6; i++)
    if (v[i] < 0) {
      PyErr_SetString(PyExc_ValueError, "pooling sizes must not be negative");
      return 0;
    }
  *p = (kiln_pool2d_params){(size_t)v[0], (size_t)v[1], (size_t)v[2],
                            (size_t)v[3], (size_t)v[4], (size_t)v[5], exclude != 0};
  return 1;
}

OP_DEF(pool2d) {
  static const char *kwl[] = {"op", "x", "y", "kernel_h", "kernel_w", "stride_h",
                              "stride_w", "pad_h", "pad_w", "exclude_padding", CALL_KW, NULL};
  Call c = CALL_INIT;
  int op, exclude;
  ImageArg x = OPERAND, y = OPERAND;
  Py_ssize_t v[6];
  kiln_pool2d_params p;
  OP_PARSE("iO&O&nnnnnnp", &op, conv_image, &x, conv_image, &y, &v[0], &v[1], &v[2], &v[3],
           &v[4], &v[5], &exclude);
  if (!pool_params(v, exclude, &p) || !call_prepare(&c, NULL, y.a))
    return NULL;
  return call_finish(&c, kiln_pool2d(c.q->queue, (kiln_pool_op)op, x.p, y.p, &p, WAITS));
}

OP_DEF(pool2d_backward) {
  static const char *kwl[] = {"op", "x", "dy", "dx", "kernel_h", "kernel_w", "stride_h",
                              "stride_w", "pad_h", "pad_w", "exclude_padding", CALL_KW, NULL};
  Call c = CALL_INIT;
  int op, exclude;
  ImageArg x = OPERAND, dy = OPERAND, dx = OPERAND;
  Py_ssize_t v[6];
  kiln_pool2d_params p;
  OP_PARSE("iO&O&O&nnnnnnp", &op, conv_image_opt, &x, conv_image, &dy, conv_image, &dx,
           &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &exclude);
  if (!pool_params(v, exclude, &p) || !call_prepare(&c, NULL, dx.a))
    return NULL;
  return call_finish(&c, kiln_pool2d_backward(c.q->queue, (kiln_pool_op)op, x.p, dy.p, dx.p,
                                              &p, WAITS));
}

OP_DEF(batchnorm_train) {
  static const char *kwl[] = {"x", "gamma", "beta", "y", "running_mean", "running_var",
                              "saved", "eps", "momentum", CALL_KW, NULL};
  Call c = CALL_INIT;
  ImageArg x = OPERAND, y = OPERAND;
  RangeArg g = OPERAND, b = OPERAND, rm = OPERAND, rv = OPERAND, sv = OPERAND;
  kiln_batchnorm_params p;
  OP_PARSE("O&O&O&O&O&O&O&ff", conv_image, &x, conv_range_opt, &g, conv_range_opt, &b,
           conv_image, &y, conv_range_opt, &rm, conv_range_opt, &rv, conv_range_opt, &sv,
           &p.eps, &p.momentum);
  if (!call_prepare(&c, NULL, y.a))
    return NULL;
  return call_finish(&c, kiln_batchnorm_train(c.q->queue, x.p, g.p, b.p, y.p, rm.p, rv.p,
                                              sv.p, &p, WAITS));
}

OP_DEF(batchnorm_inference) {
  static const char *kwl[] = {"x", "gamma", "beta", "running_mean", "running_var", "y",
                              "eps", CALL_KW, NULL};
  Call c = CALL_INIT;
  ImageArg x = OPERAND, y = OPERAND;
  RangeArg g = OPERAND, b = OPERAND, rm = OPERAND, rv = OPERAND;
  kiln_batchnorm_params p = KILN_BATCHNORM_PARAMS_INIT;
  OP_PARSE("O&O&O&O&O&O&f", conv_image, &x, conv_range_opt, &g, conv_range_opt, &b,
           conv_range, &rm, conv_range, &rv, conv_image, &y, &p.eps);
  if (!call_prepare(&c, NULL, y.a))
    return NULL;
  return call_finish(&c, kiln_batchnorm_inference(c.q->queue, x.p, g.p, b.p, rm.p, rv.p, y.p,
                                                  &p, WAITS));
}

OP_DEF(batchnorm_backward) {
  static const char *kwl[] = {"x", "gamma", "saved", "dy", "dx", "dgamma", "dbeta",
                              CALL_KW, NULL};
  Call c = CALL_INIT;
  ImageArg x = OPERAND, dy = OPERAND, dx = OPERAND;
  RangeArg g = OPERAND, sv = OPERAND, dg = OPERAND, db = OPERAND;
  OP_PARSE("O&O&O&O&O&O&O&", conv_image, &x, conv_range_opt, &g, conv_range, &sv, conv_image,
           &dy, conv_image_opt, &dx, conv_range_opt, &dg, conv_range_opt, &db);
  ArrayObject *first = dx.a ? dx.a : dg.a ? dg.a : db.a;
  if (!call_prepare(&c, NULL, first))
    return NULL;
  return call_finish(&c, kiln_batchnorm_backward(c.q->queue, x.p, g.p, sv.p, dy.p, dx.p, dg.p,
                                                 db.p, WAITS));
}

OP_DEF(attention_forward) {
  static const char *kwl[] = {"heads", "qkv", "out", "lse", "scale", "causal", CALL_KW, NULL};
  Call c = CALL_INIT;
  Py_ssize_t heads;
  MatrixArg qkv = OPERAND, out = OPERAND;
  RangeArg lse = OPERAND;
  kiln_attention_params p;
  int causal;
  OP_PARSE("nO&O&O&fp", &heads, conv_matrix, &qkv, conv_matrix, &out, conv_range_opt, &lse,
           &p.scale, &causal);
  p.causal = causal != 0;
  if (!call_prepare(&c, NULL, out.a))
    return NULL;
  return call_finish(&c, kiln_attention_forward(c.q->queue, (size_t)out.batch,
                                                heads < 0 ? 0 : (size_t)heads, qkv.p, out.p,
                                                lse.p, &p, WAITS));
}

OP_DEF(attention_backward) {
  static const char *kwl[] = {"heads", "qkv", "out", "dout", "lse", "dqkv", "scale",
                              "causal", CALL_KW, NULL};
  Call c = CALL_INIT;
  Py_ssize_t heads;
  MatrixArg qkv = OPERAND, out = OPERAND, dout = OPERAND, dqkv = OPERAND;
  RangeArg lse = OPERAND;
  kiln_attention_params p;
  int causal;
  OP_PARSE("nO&O&O&O&O&fp", &heads, conv_matrix, &qkv, conv_matrix, &out, conv_matrix, &dout,
           conv_range, &lse, conv_matrix, &dqkv, &p.scale, &causal);
  p.causal = causal != 0;
  if (!call_prepare(&c, NULL, dqkv.a))
    return NULL;
  return call_finish(&c, kiln_attention_backward(c.q->queue, (size_t)dqkv.batch,
                                                 heads < 0 ? 0 : (size_t)heads, qkv.p, out.p,
                                                 dout.p, lse.p, dqkv.p, &p, WAITS));
}

OP_DEF(attention_cache_append) {
  static const char *kwl[] = {"heads", "pos", "k", "v", "k_cache", "v_cache", CALL_KW, NULL};
  Call c = CALL_INIT;
  Py_ssize_t heads, pos;
  MatrixArg k = OPERAND, v = OPERAND, kc = OPERAND, vc = OPERAND;
  OP_PARSE("nnO&O&O&O&", &heads, &pos, conv_matrix, &k, conv_matrix, &v, conv_matrix, &kc,
           conv_matrix, &vc);
  if (heads < 0 || pos < 0) {
    PyErr_SetString(PyExc_ValueError, "heads and pos must not be negative");
    return NULL;
  }
  if (!call_prepare(&c, NULL, kc.a))
    return NULL;
  return call_finish(&c, kiln_attention_cache_append(c.q->queue, (size_t)k.batch,
                                                     (size_t)heads, (size_t)pos, k.p, v.p,
                                                     kc.p, vc.p, WAITS));
}

OP_DEF(attention_decode) {
  static const char *kwl[] = {"heads", "t", "q", "k_cache", "v_cache", "out", "scale",
                              "causal", CALL_KW, NULL};
  Call c = CALL_INIT;
  Py_ssize_t heads, t;
  MatrixArg q = OPERAND, kc = OPERAND, vc = OPERAND, out = OPERAND;
  kiln_attention_params p;
  int causal;
  OP_PARSE("nnO&O&O&O&fp", &heads, &t, conv_matrix, &q, conv_matrix, &kc, conv_matrix, &vc,
           conv_matrix, &out, &p.scale, &causal);
  p.causal = causal != 0;
  if (heads < 0 || t < 0) {
    PyErr_SetString(PyExc_ValueError, "heads and t must not be negative");
    return NULL;
  }
  if (!call_prepare(&c, NULL, out.a))
    return NULL;
  return call_finish(&c, kiln_attention_decode(c.q->queue, (size_t)out.batch, (size_t)heads,
                                               (size_t)t, q.p, kc.p, vc.p, out.p, &p, WAITS));
}

static PyMethodDef module_methods[] = {
    {"tuning_knobs", mod_tuning_knobs, METH_VARARGS,
     "tuning_knobs(op) -> [(name, what, values), ...]: op's tuning parameter space"},
    {"read_new", mod_read_new, METH_VARARGS,
     "read_new(array, lo, count, make) -> make(page offset or -1, count) filled with count elements "
     "from lo; waits"},
    {"devices", KW mod_devices, METH_VARARGS | METH_KEYWORDS, "List devices (dicts)."},
    {"explain", mod_explain, METH_VARARGS, "(name, taken, reason) per device for a selector."},
    {"empty", mod_empty, METH_VARARGS, "empty(queue, shape, dtype_code) -> Array"},
    {"write", KW mod_write, METH_VARARGS | METH_KEYWORDS, "host -> array"},
    {"read", KW mod_read, METH_VARARGS | METH_KEYWORDS, "array span -> host"},
    {"wait_all", mod_wait_all, METH_VARARGS, "Wait for every Event of a sequence."},
    {"dlpack", mod_dlpack, METH_VARARGS, "DLPack capsule of an array."},
    {"from_capsule", mod_from_capsule, METH_VARARGS, "Array from a DLPack capsule."},
    {"last_error", mod_last_error, METH_NOARGS, "(status name, message) of this thread."},
    {"fail", mod_fail, METH_VARARGS, "Raise a status's exception with a message."},
    {"set_array_class", mod_set_array_class, METH_O, "The class new arrays get."},
    {"version", mod_version, METH_NOARGS, "kiln_version() of the loaded library."},
    {"convert", mod_convert, METH_VARARGS, "host f32 <-> bf16/f16 conversion."},
    OPM(copy, "kiln_buffer_copy"),
    OPM(unary, "kiln_unary"),
    OPM(binary, "kiln_binary"),
    OPM(binary_scalar, "kiln_binary_scalar"),
    OPM(axpy, "kiln_axpy"),
    OPM(scale, "kiln_scale"),
    OPM(fill, "kiln_fill"),
    OPM(cast, "kiln_cast"),
    OPM(reduce, "kiln_reduce"),
    OPM(dot, "kiln_dot"),
    OPM(reduce_rows, "kiln_reduce_rows"),
    OPM(reduce_cols, "kiln_reduce_cols"),
    OPM(scan, "kiln_scan"),
    OPM(softmax_rows, "kiln_softmax_rows"),
    OPM(layernorm_rows, "kiln_layernorm_rows"),
    OPM(transpose, "kiln_transpose"),
    OPM(matmul, "kiln_matmul"),
    OPM(binary_broadcast, "kiln_binary_broadcast"),
    OPM(unary_backward, "kiln_unary_backward"),
    OPM(softmax_cross_entropy, "kiln_softmax_cross_entropy"),
    OPM(softmax_cross_entropy_backward, "kiln_softmax_cross_entropy_backward"),
    OPM(accuracy_count, "kiln_accuracy_count"),
    OPM(softmax_rows_backward, "kiln_softmax_rows_backward"),
    OPM(layernorm_rows_backward, "kiln_layernorm_rows_backward"),
    OPM(gather_rows, "kiln_gather_rows"),
    OPM(scatter_add_rows, "kiln_scatter_add_rows"),
    OPM(random_bits, "kiln_random_bits"),
    OPM(random_uniform, "kiln_random_uniform"),
    OPM(random_normal, "kiln_random_normal"),
    OPM(dropout_mask, "kiln_dropout_mask"),
    OPM(dropout, "kiln_dropout"),
    OPM(sgd_step, "kiln_sgd_step"),
    OPM(adamw_step, "kiln_adamw_step"),
    OPM(grad_norm, "kiln_grad_norm"),
    OPM(clip_grad_norm, "kiln_clip_grad_norm"),
    OPM(has_nonfinite, "kiln_has_nonfinite"),
    OPM(conv2d, "kiln_conv2d"),
    OPM(conv2d_backward_data, "kiln_conv2d_backward_data"),
    OPM(conv2d_backward_weights, "kiln_conv2d_backward_weights"),
    OPM(pool2d, "kiln_pool2d"),
    OPM(pool2d_backward, "kiln_pool2d_backward"),
    OPM(batchnorm_train, "kiln_batchnorm_train"),
    OPM(batchnorm_inference, "kiln_batchnorm_inference"),
    OPM(batchnorm_backward, "kiln_batchnorm_backward"),
    OPM(attention_forward, "kiln_attention_forward"),
    OPM(attention_backward, "kiln_attention_backward"),
    OPM(attention_cache_append, "kiln_attention_cache_append"),
    OPM(attention_decode, "kiln_attention_decode"),
    {0}};

static PyMethodDef Array_methods[] = {
    {"_view", (PyCFunction)Array_view, METH_VARARGS,
     "_view(offset, shape, strides[, queue]) -> Array over the same buffer"},
    {0}};

static PyGetSetDef Array_getset[] = {
    {"shape", (getter)Array_get_shape, NULL, "tuple of extents", NULL},
    {"strides", (getter)Array_get_strides, NULL, "tuple of strides, in elements", NULL},
    {"ndim", (getter)Array_get_ndim, NULL, "number of dimensions", NULL},
    {"size", (getter)Array_get_size, NULL, "number of elements", NULL},
    {"offset", (getter)Array_get_offset, NULL, "first element's offset in the buffer", NULL},
    {"_dtype_code", (getter)Array_get_dtype_code, NULL, "kiln_dtype value", NULL},
    {"itemsize", (getter)Array_get_itemsize, NULL, "bytes per element", NULL},
    {"is_contiguous", (getter)Array_get_contiguous, NULL, "C-contiguous", NULL},
    {"queue", (getter)Array_get_queue, NULL, "the Queue the array's work runs on", NULL},
    {"context", (getter)Array_get_context, NULL, "the Context", NULL},
    {"buffer_nbytes", (getter)Array_get_buffer_nbytes, NULL, "bytes of the underlying buffer",
     NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {0}};

static PyObject *no_new(PyTypeObject *t, PyObject *a, PyObject *k) {
  PyErr_Format(PyExc_TypeError, "cannot create '%s' directly", t->tp_name);
  return NULL;
}

static PyTypeObject ContextType = {
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
static PyTypeObject QueueType = {
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
static PyTypeObject BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kiln._kiln.Buffer",
    .tp_basicsize = sizeof(BufferObject),
    .tp_dealloc = (destructor)Buffer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = no_new,
};
static PyTypeObject ArrayType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kiln._kiln.ArrayBase",
    .tp_basicsize = sizeof(ArrayObject),
    .tp_dealloc = (destructor)Array_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A device array: buffer, offset, shape, strides (elements), dtype, queue.",
    .tp_weaklistoffset = offsetof(ArrayObject, weakreflist),
    .tp_dictoffset = offsetof(ArrayObject, dict),
    .tp_methods = Array_methods,
    .tp_getset = Array_getset,
    .tp_new = no_new,
};
static PyTypeObject EventType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kiln._kiln.Event",
    .tp_basicsize = sizeof(EventObject),
    .tp_dealloc = (destructor)Event_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Completion of an enqueued command.",
    .tp_methods = Event_methods,
    .tp_getset = Event_getset,
    .tp_new = no_new,
};
static PyTypeObject ProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kiln._kiln.Program",
    .tp_basicsize = sizeof(ProgramObject),
    .tp_dealloc = (destructor)Program_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Program(context, source, options=None): OpenCL C built through kiln's cache.",
    .tp_methods = Program_methods,
    .tp_getset = Program_getset,
    .tp_new = Program_new,
};
static PyTypeObject KernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kiln._kiln.Kernel",
    .tp_basicsize = sizeof(KernelObject),
    .tp_dealloc = (destructor)Kernel_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "kernel(queue, global_size, *args, local_size=None, wait=None, event=False)",
    .tp_call = (ternaryfunc)Kernel_call,
    .tp_methods = Kernel_methods,
    .tp_getset = Kernel_getset,
    .tp_new = no_new,
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_kiln",
                                       "kiln's C extension; use the kiln package.", -1,
                                       module_methods, NULL, NULL, NULL, NULL};

/* "ERR_INVALID_ARGUMENT" -> "InvalidArgumentError" */
static void class_name(const char *status, char *out, size_t cap) {
  const char *s = strncmp(status, "ERR_", 4) == 0 ? status + 4 : status;
  size_t o = 0;
  int up = 1;
  for (; *s && o + 6 < cap; s++) {
    if (*s == '_') {
      up = 1;
      continue;
    }
    out[o++] = up ? *s : (char)(*s >= 'A' && *s <= 'Z' ? *s + 32 : *s);
    up = 0;
  }
  memcpy(out + o, "Error", 6);
}

PyMODINIT_FUNC PyInit__kiln(void);
PyMODINIT_FUNC PyInit__kiln(void) {
  PyTypeObject *types[] = {&ContextType, &QueueType, &BufferType, &ArrayType,
                           &EventType, &ProgramType, &KernelType, &HeldType,
                           &PinnedType};
  for (size_t i = 0; i < sizeof types / sizeof *types; i++)
    if (PyType_Ready(types[i]) < 0)
      return NULL;
  PyObject *m = PyModule_Create(&moduledef);
  if (!m)
    return NULL;
  Error = PyErr_NewExceptionWithDoc(
      "kiln.Error",
      "A kiln call failed: .status (the kiln_status value), .status_name "
      "('KILN_ERR_...') and .message (kiln_last_error()).",
      NULL, NULL);
  if (!Error || PyModule_AddObjectRef(m, "Error", Error) < 0)
    return NULL;
  struct { const char *name; int value; } table[] = {
#define KILN_PY_STATUS_(name, value, text) {#name, value},
      KILN_STATUS_MAP(KILN_PY_STATUS_)
#undef KILN_PY_STATUS_
  };
  for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
    if (table[i].value >= 0 || -table[i].value >= 32)
      continue;
    char cname[80], full[96];
    class_name(table[i].name, cname, sizeof cname);
    snprintf(full, sizeof full, "kiln.%s", cname);
    PyObject *base = Error;
    PyObject *bases = NULL;
    /* Also the matching builtin, so `except ValueError` works too. */
    PyObject *builtin = NULL;
    switch ((kiln_status)table[i].value) {
    case KILN_ERR_INVALID_ARGUMENT:
    case KILN_ERR_INVALID_SIZE:
    case KILN_ERR_SHAPE_MISMATCH: builtin = PyExc_ValueError; break;
    case KILN_ERR_NULL_POINTER: builtin = PyExc_TypeError; break;
    case KILN_ERR_OUT_OF_RANGE: builtin = PyExc_IndexError; break;
    case KILN_ERR_OUT_OF_HOST_MEMORY: builtin = PyExc_MemoryError; break;
    default: break;
    }
    if (builtin)
      bases = PyTuple_Pack(2, Error, builtin);
    char doc[160];
    snprintf(doc, sizeof doc, "kiln status KILN_%s (%d): %s.", table[i].name, table[i].value,
             kiln_status_string((kiln_status)table[i].value));
    PyObject *cls = PyErr_NewExceptionWithDoc(full, doc, bases ? bases : base, NULL);
    Py_XDECREF(bases);
    if (!cls || PyModule_AddObjectRef(m, cname, cls) < 0)
      return NULL;
    status_classes[-table[i].value] = cls;
  }
  if (PyModule_AddObjectRef(m, "Context", (PyObject *)&ContextType) < 0 ||
      PyModule_AddObjectRef(m, "Queue", (PyObject *)&QueueType) < 0 ||
      PyModule_AddObjectRef(m, "ArrayBase", (PyObject *)&ArrayType) < 0 ||
      PyModule_AddObjectRef(m, "Event", (PyObject *)&EventType) < 0 ||
      PyModule_AddObjectRef(m, "Program", (PyObject *)&ProgramType) < 0 ||
      PyModule_AddObjectRef(m, "Kernel", (PyObject *)&KernelType) < 0 ||
      PyModule_AddObjectRef(m, "Pinned", (PyObject *)&PinnedType) < 0)
    return NULL;
  return m;
}
