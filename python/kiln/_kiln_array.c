/* kiln._kiln's Array: a view (offset, shape, strides in elements, dtype)
 * of a Buffer, with the queue its work runs on. The package's kiln.Array
 * subclasses it (numpy(), indexing, DLPack). */
#include "_kiln.h"

PyTypeObject *array_class = &ArrayType;

/* ---- sizes, spans, checks ------------------------------------------------------ */

int array_is_contiguous(const ArrayObject *a) {
  Py_ssize_t expect = 1;
  for (int i = a->ndim - 1; i >= 0; i--) {
    if (a->shape[i] != 1 && a->strides[i] != expect)
      return 0;
    expect *= a->shape[i];
  }
  return 1;
}

Py_ssize_t array_size(const ArrayObject *a) {
  Py_ssize_t n = 1;
  for (int i = 0; i < a->ndim; i++)
    n *= a->shape[i];
  return n;
}

/* Span of elements [lo, hi) from the buffer start that the array touches. */
void array_span(const ArrayObject *a, Py_ssize_t *lo, Py_ssize_t *hi) {
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

int check_array(PyObject *o, const char *what) {
  if (!PyObject_TypeCheck(o, &ArrayType)) {
    PyErr_Format(PyExc_TypeError, "expected a kiln.Array for %s, got %.100s", what,
                 Py_TYPE(o)->tp_name);
    return 0;
  }
  return 1;
}

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

ArrayObject *array_make(BufferObject *buf, QueueObject *q, kiln_dtype dt, int ndim,
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

PyTypeObject ArrayType = {
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

static PyObject *mod_set_array_class(PyObject *self, PyObject *cls) {
  if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &ArrayType)) {
    PyErr_SetString(PyExc_TypeError, "expected a subclass of ArrayBase");
    return NULL;
  }
  Py_INCREF(cls); /* kept for the life of the process */
  array_class = (PyTypeObject *)cls;
  Py_RETURN_NONE;
}

PyMethodDef array_functions[] = {
    {"empty", mod_empty, METH_VARARGS, "empty(queue, shape, dtype_code) -> Array"},
    {"set_array_class", mod_set_array_class, METH_O, "The class new arrays get."},
    {0}};
