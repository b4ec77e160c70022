/* kiln._kiln: the CPython extension under the kiln package (see _kiln.h
 * for its files). This one: kiln's statuses as exceptions, the module's
 * small functions and PyInit__kiln, which adds every file's functions and
 * types. */
#include "_kiln.h"

/* ---- errors --------------------------------------------------------------- */

static PyObject *Error;                /* kiln.Error */
static PyObject *status_classes[32];   /* by -status */

PyObject *raise_status(kiln_status st) {
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

PyObject *raise_with(kiln_status st, const char *msg) {
  kiln_set_last_error(st, msg);
  return raise_status(st);
}

PyObject *no_new(PyTypeObject *t, PyObject *a, PyObject *k) {
  PyErr_Format(PyExc_TypeError, "cannot create '%s' directly", t->tp_name);
  return NULL;
}

/* ---- module ------------------------------------------------------------------ */

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

static PyMethodDef module_functions[] = {
    {"last_error", mod_last_error, METH_NOARGS, "(status name, message) of this thread."},
    {"fail", mod_fail, METH_VARARGS, "Raise a status's exception with a message."},
    {"version", mod_version, METH_NOARGS, "kiln_version() of the loaded library."},
    {"convert", mod_convert, METH_VARARGS, "host f32 <-> bf16/f16 conversion."},
    {0}};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_kiln",
                                       "kiln's C extension; use the kiln package.", -1,
                                       module_functions, NULL, NULL, NULL, NULL};

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
                           &PinnedType, &PackedType};
  for (size_t i = 0; i < sizeof types / sizeof *types; i++)
    if (PyType_Ready(types[i]) < 0)
      return NULL;
  PyObject *m = PyModule_Create(&moduledef);
  if (!m)
    return NULL;
  PyMethodDef *tables[] = {context_functions, event_functions, array_functions,
                           transfer_functions, ops_functions, dlpack_functions,
                           log_functions};
  for (size_t i = 0; i < sizeof tables / sizeof *tables; i++)
    if (PyModule_AddFunctions(m, tables[i]) < 0)
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
      PyModule_AddObjectRef(m, "Pinned", (PyObject *)&PinnedType) < 0 ||
      PyModule_AddObjectRef(m, "Packed", (PyObject *)&PackedType) < 0)
    return NULL;
  return m;
}
