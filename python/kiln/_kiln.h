/* kiln._kiln's shared declarations: the object structs, the descriptor
 * converters and the call machinery every enqueueing function uses, and
 * the helpers the files of the extension share. One extension module,
 * several files:
 *
 *   _kiln_module.c    errors as exceptions, small module functions, PyInit
 *   _kiln_context.c   device lists, Context, tuning queries
 *   _kiln_queue.c     Queue, Buffer (a block of a queue's pool)
 *   _kiln_pinned.c    Pinned host memory
 *   _kiln_event.c     Event, waits
 *   _kiln_array.c     Array: shapes, views, kiln.empty
 *   _kiln_call.c      Arrays as kiln_range / kiln_matrix / kiln_image,
 *                     wait lists, results (Call)
 *   _kiln_transfer.c  host <-> device copies
 *   _kiln_program.c   Program and Kernel (user kernels)
 *   _kiln_ops.c       the op library: one argument parser, one line per op
 *   _kiln_packed.c    Packed: GEMM operands that stay packed
 *   _kiln_dlpack.c    DLPack export and import
 *   _kiln_log.c       kiln's log: kiln_trace_diagnostic, the bridge to
 *                     Python's logging module
 *
 * Everything declared here is hidden (the visibility pragma below): the
 * only name the shared object exports is PyInit__kiln.
 *
 * Lifetimes: every object holds a strong reference to what it was made
 * from (Array -> Buffer -> Queue -> Context, Kernel -> Program -> Context,
 * Event -> Context, Packed -> Context), so Python frees children before
 * parents and kiln_context_destroy never meets live children. close()
 * methods end an object's use early (a closed queue refuses work); memory
 * goes back when the last reference goes.
 *
 * Threads: the GIL is held while commands are enqueued (kiln's rule that a
 * queue is used by one thread at a time then holds for Python threads);
 * it is released only while waiting for events. */
#ifndef KILN_PY_KILN_H
#define KILN_PY_KILN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

#define CL_TARGET_OPENCL_VERSION 300
#include <kiln/kiln.h>
#include <kiln/kiln_cl.h>

#pragma GCC visibility push(hidden)

#define MAX_DIMS 8
#define MAX_WAIT 64
/* Other queues a buffer remembers (BufferObject.foreign). */
#define MAX_FOREIGN 4
/* Operands whose buffers one call notes (Call.touched). */
#define MAX_TOUCH 64

/* A cast for METH_VARARGS | METH_KEYWORDS functions in method tables. */
#define KW (PyCFunction)(void (*)(void))

typedef struct {
  PyObject_HEAD
  kiln_context *ctx;
  PyObject *info;         /* dict */
  Py_ssize_t list_index;  /* position in kiln's device list (DLPack index) */
  int closed;
  int host_memory;        /* a CPU device: its buffers are host memory */
  kiln_queue *aux;        /* made on first use by advise_huge_pages, else NULL */
} ContextObject;

typedef struct {
  PyObject_HEAD
  kiln_queue *queue;      /* NULL once closed */
  kiln_pool *pool;
  ContextObject *ctx;
} QueueObject;

typedef struct {
  PyObject_HEAD
  kiln_buffer *buf;
  QueueObject *home;      /* the queue whose pool it came from */
  PyObject *keep;         /* a DLPack capsule it wraps, else NULL */
  size_t nbytes;
  int pooled;             /* from home's pool */
  /* Other queues that ran commands on it: the pool may reuse the block
   * only after them too (kiln_pool_release_after), so they are held. */
  int nforeign;
  QueueObject *foreign[MAX_FOREIGN];
} BufferObject;

typedef struct {
  PyObject_HEAD
  BufferObject *buf;
  QueueObject *queue;
  kiln_dtype dtype;
  int ndim;
  Py_ssize_t offset;      /* elements */
  Py_ssize_t shape[MAX_DIMS];
  Py_ssize_t strides[MAX_DIMS]; /* elements */
  PyObject *weakreflist;
  PyObject *dict;
} ArrayObject;

typedef struct {
  PyObject_HEAD
  kiln_event *event;
  ContextObject *ctx;
  QueueObject *queue;     /* the queue of its command: flushed before a wait */
  Py_buffer hold;         /* host memory a pending transfer uses */
  int holding;
} EventObject;

typedef struct {
  PyObject_HEAD
  kiln_program *prog;
  ContextObject *ctx;
} ProgramObject;

typedef struct {
  PyObject_HEAD
  kiln_kernel *kernel;
  ProgramObject *prog;
  uint32_t nargs;
} KernelObject;

/* kiln_pinned: host memory the driver allocated for DMA, mapped through a
 * queue for its whole life (_kiln_pinned.c). */
typedef struct {
  PyObject_HEAD
  kiln_pinned *pinned;
  QueueObject *queue;
} PinnedObject;

/* A kiln_packed GEMM operand (_kiln_packed.c) and the descriptor that
 * names it (its shape, dtype and layout as created). */
typedef struct {
  PyObject_HEAD
  kiln_packed *packed;    /* NULL once closed */
  ContextObject *ctx;
  kiln_operand role;
  kiln_matrix desc;       /* kiln_packed_get_matrix's descriptor */
} PackedObject;

extern PyTypeObject ContextType, QueueType, BufferType, ArrayType, EventType, ProgramType,
    KernelType, PinnedType, PackedType, HeldType;
/* The class new arrays get: kiln.Array (a Python subclass of ArrayBase that
 * adds numpy(), indexing and the DLPack methods) once the package set it. */
extern PyTypeObject *array_class;

/* ---- errors (_kiln_module.c) ---------------------------------------------- */

/* tp_new of the types Python cannot make directly. */
PyObject *no_new(PyTypeObject *t, PyObject *a, PyObject *k);
/* Raise the exception of status st with kiln_last_error() (NULL). */
PyObject *raise_status(kiln_status st);
/* A Python-side refusal with a kiln status (closed objects). */
PyObject *raise_with(kiln_status st, const char *msg);

/* ---- Context (_kiln_context.c) --------------------------------------------- */

int ctx_open(ContextObject *c);

/* ---- Queue and Buffer (_kiln_queue.c) -------------------------------------- */

int queue_open(QueueObject *q);
kiln_status queue_sync(QueueObject *q);
BufferObject *buffer_alloc(QueueObject *q, size_t nbytes);

/* ---- Event (_kiln_event.c) ------------------------------------------------- */

EventObject *event_wrap(kiln_event *ev, QueueObject *q);
kiln_status flush_wait(QueueObject *q, kiln_event *ev);

/* ---- arrays (_kiln_array.c) --------------------------------------------------- */

static inline size_t dtype_size(kiln_dtype d) { return kiln_dtype_size(d); }
int array_is_contiguous(const ArrayObject *a);
Py_ssize_t array_size(const ArrayObject *a);
/* Span of elements [lo, hi) from the buffer start that the array touches. */
void array_span(const ArrayObject *a, Py_ssize_t *lo, Py_ssize_t *hi);
ArrayObject *array_make(BufferObject *buf, QueueObject *q, kiln_dtype dt, int ndim,
                        const Py_ssize_t *shape, const Py_ssize_t *strides, Py_ssize_t offset);
/* o is a kiln.Array, else TypeError naming what. */
int check_array(PyObject *o, const char *what);

/* ---- descriptors and calls (_kiln_call.c) ---------------------------------------- */

/* What every enqueueing call shares: the queue, the wait list, whether an
 * Event is wanted back, and the buffers of its operands (so that the queue
 * it enqueues on is recorded in each, see BufferObject.foreign). */
typedef struct Call {
  PyObject *wait;   /* None or a sequence of Events */
  int want_event;
  QueueObject *q;
  size_t nwait;
  kiln_event *waits[MAX_WAIT];
  kiln_event *ev;
  int ntouched;
  BufferObject *touched[MAX_TOUCH]; /* borrowed: the arguments hold them */
} Call;

#define CALL_INIT {Py_None, 0, NULL, 0, {0}, NULL, 0, {0}}
/* The last three arguments of every enqueueing kiln call. */
#define CALL_WAITS(c) (c).nwait, (c).waits, ((c).want_event ? &(c).ev : NULL)
#define CALL_KW "wait", "event"

/* Converters for PyArg_Parse "O&" (and the op parser): an Array into a
 * kiln_range (contiguous), kiln_matrix (2-D or batched 3-D, row- or
 * column-major) or kiln_image (4-D, NCHW contiguous). The _opt forms take
 * None as NULL. Each converted operand's buffer is noted in .call when it
 * is set. */
typedef struct {
  Call *call;
  kiln_range r;
  const kiln_range *p; /* &r, or NULL for None */
  ArrayObject *a;
} RangeArg;

typedef struct {
  Call *call;
  kiln_matrix m;
  const kiln_matrix *p;
  ArrayObject *a;      /* NULL for a Packed operand */
  Py_ssize_t batch;
} MatrixArg;

typedef struct {
  Call *call;
  kiln_image im;
  const kiln_image *p; /* &im, or NULL for None (the _opt form) */
  ArrayObject *a;
} ImageArg;

int conv_range(PyObject *o, void *out);
int conv_range_opt(PyObject *o, void *out);
int conv_matrix(PyObject *o, void *out);
/* A matrix or a kiln.Packed (kiln_matmul's A and B). */
int conv_gemm_operand(PyObject *o, void *out);
int conv_image(PyObject *o, void *out);
int conv_image_opt(PyObject *o, void *out);

void call_touch(Call *c, BufferObject *b);
void call_note(Call *c);
/* Resolve the queue (q, else the given array's) and the wait list. */
int call_prepare(Call *c, QueueObject *q, ArrayObject *a);
/* Turn a call's status into its result: None, or the Event. */
PyObject *call_finish(Call *c, kiln_status st);

/* ---- transfers (_kiln_transfer.c) --------------------------------------------- */

/* A blocking transfer: mapped on a CPU device, else a read or write; the
 * caller waits for *ev. */
kiln_status transfer_blocking(QueueObject *q, const kiln_range *r, void *host, int write,
                              size_t nwait, kiln_event *const *waits, kiln_event **ev);

/* ---- Packed (_kiln_packed.c) ---------------------------------------------------- */

/* A Packed as kiln_matmul's operand: its descriptor (packed set), or
 * InvalidStateError when closed. */
int packed_matrix(PackedObject *p, kiln_matrix *out);

/* ---- module functions of each file, added by PyInit__kiln ------------------ */

extern PyMethodDef context_functions[], event_functions[], array_functions[],
    transfer_functions[], ops_functions[], dlpack_functions[], log_functions[];

#pragma GCC visibility pop

#endif
