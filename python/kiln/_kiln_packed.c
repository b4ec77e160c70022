/* kiln._kiln's Packed: a kiln_packed GEMM operand (kiln_ops.h, "operands
 * that stay packed"), a layer's weights packed once by pack() and read by
 * every kiln_matmul that names it as its A or B, until they change. */
#include "_kiln.h"

/* Packed(context, src, role): allocated for the shape, dtype and layout of
 * src (an Array: a 2-D matrix; its data is not read) as operand role
 * (KILN_OPERAND_A or _B) on the context's device. */
static PyObject *Packed_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  static char *kwl[] = {"context", "src", "role", NULL};
  ContextObject *ctx;
  MatrixArg src = {0};
  int role;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O&i:Packed", kwl, &ContextType, &ctx,
                                   conv_matrix, &src, &role) ||
      !ctx_open(ctx))
    return NULL;
  if (src.a->ndim != 2) {
    PyErr_SetString(PyExc_ValueError,
                    "Packed: src must be a 2-D matrix (a batch's entries share one packed "
                    "operand)");
    return NULL;
  }
  kiln_packed *p = NULL;
  kiln_status st = kiln_packed_create(ctx->ctx, (kiln_operand)role, src.p, &p);
  if (st != KILN_OK)
    return raise_status(st);
  PackedObject *self = (PackedObject *)type->tp_alloc(type, 0);
  if (!self) {
    kiln_packed_destroy(p);
    return NULL;
  }
  self->packed = p;
  self->ctx = ctx;
  Py_INCREF(ctx);
  self->role = (kiln_operand)role;
  kiln_packed_get_matrix(p, &self->desc);
  return (PyObject *)self;
}

static void Packed_dealloc(PackedObject *self) {
  /* GEMMs already enqueued that read it complete normally. */
  kiln_packed_destroy(self->packed);
  Py_XDECREF(self->ctx);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int packed_open(PackedObject *p) {
  if (!p->packed) {
    raise_with(KILN_ERR_INVALID_STATE, "the packed matrix (kiln.Packed) is closed");
    return 0;
  }
  return 1;
}

int packed_matrix(PackedObject *p, kiln_matrix *out) {
  if (!packed_open(p))
    return 0;
  *out = p->desc;
  return 1;
}

/* pack(src, queue=None, wait=None, event=False): kiln_pack of src (a
 * matrix of the shape, dtype and layout it was made for) on queue, else
 * src's queue. */
static PyObject *Packed_pack(PackedObject *self, PyObject *args, PyObject *kw) {
  static char *kwl[] = {"src", "queue", CALL_KW, NULL};
  Call c = CALL_INIT;
  MatrixArg src = {.call = &c};
  PyObject *qo = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|OOp:pack", kwl, conv_matrix, &src, &qo,
                                   &c.wait, &c.want_event) ||
      !packed_open(self))
    return NULL;
  if (qo != Py_None && !PyObject_TypeCheck(qo, &QueueType)) {
    PyErr_Format(PyExc_TypeError, "pack: queue must be a kiln.Queue, not %.100s",
                 Py_TYPE(qo)->tp_name);
    return NULL;
  }
  if (!call_prepare(&c, qo == Py_None ? NULL : (QueueObject *)qo, src.a))
    return NULL;
  return call_finish(&c, kiln_pack(c.q->queue, src.p, self->packed, CALL_WAITS(c)));
}

static PyObject *Packed_close(PackedObject *self, PyObject *unused) {
  if (self->packed) {
    kiln_status st = kiln_packed_destroy(self->packed);
    if (st != KILN_OK)
      return raise_status(st);
    self->packed = NULL;
  }
  Py_RETURN_NONE;
}

static PyObject *Packed_get_shape(PackedObject *self, void *u) {
  return Py_BuildValue("(nn)", (Py_ssize_t)self->desc.rows, (Py_ssize_t)self->desc.cols);
}

static PyObject *Packed_get_role(PackedObject *self, void *u) {
  return PyUnicode_FromString(self->role == KILN_OPERAND_A ? "a" : "b");
}

static PyObject *Packed_get_dtype_code(PackedObject *self, void *u) {
  return PyLong_FromLong(self->desc.dtype);
}

static PyObject *Packed_get_column_major(PackedObject *self, void *u) {
  return PyBool_FromLong(self->desc.layout == KILN_COL_MAJOR);
}

static PyObject *Packed_get_context(PackedObject *self, void *u) {
  Py_INCREF(self->ctx);
  return (PyObject *)self->ctx;
}

static PyObject *Packed_get_closed(PackedObject *self, void *u) {
  return PyBool_FromLong(self->packed == NULL);
}

static PyMethodDef Packed_methods[] = {
    {"pack", KW Packed_pack, METH_VARARGS | METH_KEYWORDS,
     "pack(src, queue=None, wait=None, event=False): copy src (a matrix of the shape, dtype "
     "and layout it was made for) in, on queue (else src's); again whenever src changes. "
     "Returns None, or the Event with event=True."},
    {"close", (PyCFunction)Packed_close, METH_NOARGS,
     "Release the packed matrix now (GEMMs already enqueued complete); later use raises "
     "InvalidStateError."},
    {0}};

static PyGetSetDef Packed_getset[] = {
    {"shape", (getter)Packed_get_shape, NULL, "(rows, cols) of the matrix as stored", NULL},
    {"role", (getter)Packed_get_role, NULL, "'a' or 'b': which operand of matmul it is", NULL},
    {"_dtype_code", (getter)Packed_get_dtype_code, NULL, "kiln_dtype value", NULL},
    {"column_major", (getter)Packed_get_column_major, NULL,
     "whether the matrix is stored column-major (made from a.T)", NULL},
    {"context", (getter)Packed_get_context, NULL, "the Context", NULL},
    {"closed", (getter)Packed_get_closed, NULL, "whether close() was called", NULL},
    {0}};

PyTypeObject PackedType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kiln._kiln.Packed",
    .tp_basicsize = sizeof(PackedObject),
    .tp_dealloc = (destructor)Packed_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Packed(context, src, role): a GEMM operand kept packed (kiln_packed) for the "
              "shape, dtype and layout of src, as matmul's a (role 0) or b (role 1).",
    .tp_methods = Packed_methods,
    .tp_getset = Packed_getset,
    .tp_new = Packed_new,
};
