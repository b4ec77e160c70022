/* kiln._kiln's Pinned: pinned (page-locked) host memory (kiln_pinned). */
#include "_kiln.h"

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
