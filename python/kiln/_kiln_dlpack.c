/* kiln._kiln's DLPack: Arrays exported as DLPack capsules (the device
 * tensor, or a host copy flagged IS_COPIED) and capsules imported as
 * Arrays (CPU tensors uploaded, OpenCL tensors of the same context
 * wrapped). */
#include "_kiln.h"

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

PyTypeObject HeldType = {
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

PyMethodDef dlpack_functions[] = {
    {"dlpack", mod_dlpack, METH_VARARGS, "DLPack capsule of an array."},
    {"from_capsule", mod_from_capsule, METH_VARARGS, "Array from a DLPack capsule."},
    {0}};
