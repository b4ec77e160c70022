/* kiln._kiln's Event (completion of an enqueued command), the waits on
 * events, and wait_all(). */
#include "_kiln.h"

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

PyMethodDef event_functions[] = {
    {"wait_all", mod_wait_all, METH_VARARGS, "Wait for every Event of a sequence."},
    {0}};
