/* kiln._kiln's user kernels: Program (OpenCL C built through kiln's
 * program cache) and Kernel (called with a queue, sizes and arguments). */
#include "_kiln.h"

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

PyTypeObject ProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kiln._kiln.Program",
    .tp_basicsize = sizeof(ProgramObject),
    .tp_dealloc = (destructor)Program_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Program(context, source, options=None): OpenCL C built through kiln's cache.",
    .tp_methods = Program_methods,
    .tp_getset = Program_getset,
    .tp_new = Program_new,
};

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
                                            local == Py_None ? NULL : lsz, CALL_WAITS(c)));
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

PyTypeObject KernelType = {
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
