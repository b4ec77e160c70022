/* kiln._kiln's descriptors and calls: Arrays converted into the kiln_range,
 * kiln_matrix and kiln_image descriptors kiln's calls take, and what every
 * enqueueing call shares (Call: its queue, wait list, Event and the
 * buffers of its operands). */
#include "_kiln.h"

/* ---- descriptors ---------------------------------------------------------------
 * Converters for PyArg_Parse "O&": an Array into a kiln_range (contiguous),
 * kiln_matrix (2-D or batched 3-D, row- or column-major) or kiln_image
 * (4-D, NCHW contiguous). The _opt forms take None as NULL. */

int conv_range(PyObject *o, void *out) {
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

int conv_range_opt(PyObject *o, void *out) {
  RangeArg *r = out;
  if (o == Py_None) {
    r->p = NULL;
    r->a = NULL;
    return 1;
  }
  return conv_range(o, out);
}

int conv_matrix(PyObject *o, void *out) {
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

/* kiln_matmul's A and B: a matrix (conv_matrix) or a kiln.Packed, whose
 * descriptor names it (one matrix, shared by every batch entry). */
int conv_gemm_operand(PyObject *o, void *out) {
  MatrixArg *m = out;
  if (!PyObject_TypeCheck(o, &PackedType)) {
    if (!PyObject_TypeCheck(o, &ArrayType)) {
      PyErr_Format(PyExc_TypeError, "expected a kiln.Array or kiln.Packed for a matrix "
                   "operand, got %.100s", Py_TYPE(o)->tp_name);
      return 0;
    }
    return conv_matrix(o, out);
  }
  if (!packed_matrix((PackedObject *)o, &m->m))
    return 0;
  m->p = &m->m;
  m->a = NULL;
  m->batch = 1;
  return 1;
}

/* The image ops' operands (convolution, pooling, batch normalisation). */
int conv_image(PyObject *o, void *out) {
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

int conv_image_opt(PyObject *o, void *out) {
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

void call_touch(Call *c, BufferObject *b) {
  if (c && c->ntouched < MAX_TOUCH)
    c->touched[c->ntouched++] = b;
}

/* After a successful enqueue on c->q: remember c->q in every operand's
 * buffer that came from another queue's pool, so that the buffer's block
 * is reused only once c->q's commands are done. Beyond MAX_FOREIGN queues
 * (or MAX_TOUCH operands) nothing more is noted. */
void call_note(Call *c) {
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
int call_prepare(Call *c, QueueObject *q, ArrayObject *a) {
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
PyObject *call_finish(Call *c, kiln_status st) {
  if (st != KILN_OK)
    return raise_status(st);
  call_note(c);
  if (!c->want_event)
    Py_RETURN_NONE;
  return (PyObject *)event_wrap(c->ev, c->q);
}
