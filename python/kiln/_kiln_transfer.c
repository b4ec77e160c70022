/* kiln._kiln's transfers between host memory (anything with the buffer
 * protocol) and Arrays, blocking or not. */
#include "_kiln.h"

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
kiln_status transfer_blocking(QueueObject *q, const kiln_range *r, void *host, int write,
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
  RangeArg dst = {.call = &c};
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

PyMethodDef transfer_functions[] = {
    {"read_new", mod_read_new, METH_VARARGS,
     "read_new(array, lo, count, make) -> make(page offset or -1, count) filled with count elements "
     "from lo; waits"},
    {"write", KW mod_write, METH_VARARGS | METH_KEYWORDS, "host -> array"},
    {"read", KW mod_read, METH_VARARGS | METH_KEYWORDS, "array span -> host"},
    {0}};
