/* kiln._kiln's device list and Context (a kiln context on one device):
 * devices(), explain(), tuning_knobs() and Context.tuning_info(). */
#include "_kiln.h"

/* ---- open or closed ---------------------------------------------------------- */

int ctx_open(ContextObject *c) {
  if (c->closed || !c->ctx) {
    raise_with(KILN_ERR_INVALID_STATE, "the context (kiln.Device) is closed");
    return 0;
  }
  return 1;
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

/* The machine's device list and, when wanted, selector's selection over it
 * (NULL: the default selection). -1 with the exception set and nothing
 * left open on a failure. */
static int open_selection(const char *selector, bool wanted,
                          kiln_device_list **list, kiln_selection **sel) {
  *sel = NULL;
  kiln_status st = kiln_device_list_create(list);
  if (st == KILN_OK && wanted)
    st = kiln_selection_create(*list, selector, sel);
  if (st == KILN_OK)
    return 0;
  raise_status(st);
  kiln_device_list_destroy(*list);
  *list = NULL;
  return -1;
}

static PyObject *mod_devices(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kwl[] = {"selector", NULL};
  const char *selector = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|z", kwl, &selector))
    return NULL;
  kiln_device_list *list = NULL;
  kiln_selection *sel = NULL;
  if (open_selection(selector, selector != NULL, &list, &sel) < 0)
    return NULL;
  PyObject *out = PyList_New(0);
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
  if (open_selection(selector, true, &list, &sel) < 0)
    return NULL;
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

PyMethodDef context_functions[] = {
    {"devices", KW mod_devices, METH_VARARGS | METH_KEYWORDS, "List devices (dicts)."},
    {"explain", mod_explain, METH_VARARGS, "(name, taken, reason) per device for a selector."},
    {"tuning_knobs", mod_tuning_knobs, METH_VARARGS,
     "tuning_knobs(op) -> [(name, what, values), ...]: op's tuning parameter space"},
    {0}};
