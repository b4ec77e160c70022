/* kiln._kiln's op library: one function per kiln op, each the spec of its
 * Python arguments and the C call (most in one OP line). One parser
 * (op_parse) reads every op's arguments from its spec: the descriptors
 * through the converters of _kiln_call.c, the numbers as the C call takes
 * them, the wait list and event= of every call, and the queue, taken from
 * the op's output. Adding an op: one OP line here (or an OP_DEF function
 * when it builds a params struct), one line in ops_functions, a wrapper in
 * kiln/_ops.py if it should allocate its output, and a line in the stub. */
#include "_kiln.h"

#include <limits.h>

/* ---- the argument parser ----------------------------------------------------
 * A spec lists the op's arguments, "name:type" in the order of the Python
 * call (each required; wait= and event= follow, optional):
 *   r  a contiguous Array as a kiln_range    R  the same, or None (NULL)
 *   m  an Array as a kiln_matrix             g  a matrix or a kiln.Packed
 *   x  a 4-D Array as a kiln_image           X  the same, or None (NULL)
 *   l  a sequence of Arrays as kiln_range[]  y  bytes (one element's bits)
 *   i  an int (an op code or enum)           z  a size (an int >= 0)
 *   f  a float                               k  an unsigned 64-bit int
 *   b  a truth value
 * The outputs name the operands whose queue the call enqueues on: the
 * first of them that is given (not None). */

#define MAX_ARGS 14

typedef union {
  RangeArg r;
  MatrixArg m;
  ImageArg x;
  struct {
    kiln_range *r;
    size_t n;
  } l;
  Py_buffer y;
  int i;
  Py_ssize_t z;
  float f;
  unsigned long long k;
} Slot;

/* An op's spec, read once (at its first call): the keyword list and
 * format for PyArg_ParseTupleAndKeywords, the types, the outputs' slots. */
typedef struct {
  int ready;
  int n;                     /* arguments before wait and event */
  const char *op;
  char names[256];           /* the spec's names, NUL-terminated in place */
  char *kwl[MAX_ARGS + 3];
  char type[MAX_ARGS];
  char fmt[MAX_ARGS + 40];
  int nout;
  int out[4];
} OpSpec;

typedef struct {
  Call c;
  const OpSpec *s;
  int n;                /* slots converted (and to be freed) */
  Slot v[MAX_ARGS];
} OpArgs;

static void op_free(OpArgs *a) {
  for (int i = 0; i < a->n; i++) {
    if (a->s->type[i] == 'l')
      PyMem_Free(a->v[i].l.r);
    else if (a->s->type[i] == 'y')
      PyBuffer_Release(&a->v[i].y);
  }
  a->n = 0;
}

/* A number of the wrong type: TypeError naming the op and the argument. */
static int bad_number(const OpArgs *a, const char *name, const char *what, PyObject *o) {
  if (PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s(): %s must be %s, not %.100s", a->s->op, name, what,
                 Py_TYPE(o)->tp_name);
  }
  return 0;
}

static int conv_range_list(Call *c, PyObject *o, Slot *s) {
  PyObject *seq = PySequence_Fast(o, "expected a sequence of kiln.Array");
  if (!seq)
    return 0;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  s->l.r = PyMem_Malloc(sizeof *s->l.r * (size_t)(n ? n : 1));
  s->l.n = (size_t)n;
  if (!s->l.r) {
    Py_DECREF(seq);
    PyErr_NoMemory();
    return 0;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    RangeArg ra = {.call = c};
    if (!conv_range(PySequence_Fast_GET_ITEM(seq, i), &ra)) {
      PyMem_Free(s->l.r);
      Py_DECREF(seq);
      return 0;
    }
    s->l.r[i] = ra.r;
  }
  Py_DECREF(seq); /* the caller's sequence keeps the Arrays */
  return 1;
}

/* Argument o, named name, into slot s as type says. */
static int convert(OpArgs *a, char type, const char *name, PyObject *o, Slot *s) {
  switch (type) {
  case 'r':
  case 'R':
    s->r = (RangeArg){.call = &a->c};
    return (type == 'r' ? conv_range : conv_range_opt)(o, &s->r);
  case 'm':
  case 'g':
    s->m = (MatrixArg){.call = &a->c};
    return (type == 'm' ? conv_matrix : conv_gemm_operand)(o, &s->m);
  case 'x':
  case 'X':
    s->x = (ImageArg){.call = &a->c};
    return (type == 'x' ? conv_image : conv_image_opt)(o, &s->x);
  case 'l':
    return conv_range_list(&a->c, o, s);
  case 'y':
    return PyObject_GetBuffer(o, &s->y, PyBUF_SIMPLE) == 0;
  case 'i': {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred())
      return bad_number(a, name, "an int", o);
    if (v < INT_MIN || v > INT_MAX) {
      PyErr_Format(PyExc_OverflowError, "%s(): %s is out of range (%ld)", a->s->op, name,
                   v);
      return 0;
    }
    s->i = (int)v;
    return 1;
  }
  case 'z':
    s->z = PyNumber_AsSsize_t(o, PyExc_OverflowError);
    if (s->z == -1 && PyErr_Occurred())
      return bad_number(a, name, "an int", o);
    if (s->z < 0) {
      PyErr_Format(PyExc_ValueError, "%s(): %s must not be negative (got %zd)", a->s->op,
                   name, s->z);
      return 0;
    }
    return 1;
  case 'f': {
    double d = PyFloat_AsDouble(o);
    if (d == -1.0 && PyErr_Occurred())
      return bad_number(a, name, "a number", o);
    s->f = (float)d;
    return 1;
  }
  case 'k':
    s->k = PyLong_AsUnsignedLongLongMask(o);
    if (s->k == (unsigned long long)-1 && PyErr_Occurred())
      return bad_number(a, name, "an int", o);
    return 1;
  default: /* 'b' */
    s->i = PyObject_IsTrue(o);
    return s->i >= 0;
  }
}

/* The Array of slot i when it is an operand that was given, else NULL. */
static ArrayObject *slot_array(const OpArgs *a, int i) {
  switch (a->s->type[i]) {
  case 'r': case 'R': return a->v[i].r.a;
  case 'm': case 'g': return a->v[i].m.a;
  case 'x': case 'X': return a->v[i].x.a;
  default: return NULL;
  }
}

/* The next space-separated word at *p, NUL-terminated in place, or NULL. */
static char *next_word(char **p) {
  while (**p == ' ')
    (*p)++;
  if (!**p)
    return NULL;
  char *w = *p;
  while (**p && **p != ' ')
    (*p)++;
  if (**p)
    *(*p)++ = '\0';
  return w;
}

static void spec_read(OpSpec *s, const char *op, const char *spec, const char *outs) {
  int n = 0;
  s->op = op;
  snprintf(s->names, sizeof s->names, "%s", spec);
  char *rest = s->names;
  for (char *p; n < MAX_ARGS && (p = next_word(&rest));) {
    char *colon = strchr(p, ':');
    *colon = '\0';
    s->kwl[n] = p;
    s->type[n] = colon[1];
    s->fmt[n++] = 'O';
  }
  s->n = n;
  s->kwl[n] = "wait";
  s->kwl[n + 1] = "event";
  s->kwl[n + 2] = NULL;
  snprintf(s->fmt + n, sizeof s->fmt - (size_t)n, "|OO:%s", op);
  char want[64];
  snprintf(want, sizeof want, "%s", outs);
  rest = want;
  s->nout = 0;
  for (char *p; s->nout < 4 && (p = next_word(&rest));)
    for (int i = 0; i < n; i++)
      if (strcmp(s->kwl[i], p) == 0)
        s->out[s->nout++] = i;
  s->ready = 1;
}

/* Parse the arguments of op (args, kw) by its spec (read into s at the
 * first call) into a, and resolve the queue (the first given operand of
 * the outputs) and the wait list. Positional calls, as kiln/_ops.py
 * makes, take the tuple's items as they are. On failure nothing is left
 * to free. */
static int op_parse(OpArgs *a, OpSpec *s, const char *op, const char *spec, const char *outs,
                    PyObject *args, PyObject *kw) {
  PyObject *o[MAX_ARGS + 2] = {NULL};
  if (!s->ready)
    spec_read(s, op, spec, outs);
  int n = s->n;
  a->s = s;
  a->n = 0;
  a->c = (Call)CALL_INIT;
  Py_ssize_t given = PyTuple_GET_SIZE(args);
  if (!kw && given >= n && given <= n + 2) {
    for (Py_ssize_t i = 0; i < given; i++)
      o[i] = PyTuple_GET_ITEM(args, i);
  } else if (!PyArg_ParseTupleAndKeywords(args, kw, s->fmt, s->kwl, &o[0], &o[1], &o[2], &o[3],
                                          &o[4], &o[5], &o[6], &o[7], &o[8], &o[9], &o[10],
                                          &o[11], &o[12], &o[13], &o[14], &o[15])) {
    return 0;
  }
  if (o[n])
    a->c.wait = o[n];
  if (o[n + 1] && (a->c.want_event = PyObject_IsTrue(o[n + 1])) < 0)
    return 0;
  for (int i = 0; i < n; i++) {
    if (!convert(a, s->type[i], s->kwl[i], o[i], &a->v[i])) {
      op_free(a);
      return 0;
    }
    a->n = i + 1;
  }
  ArrayObject *out = NULL;
  for (int k = 0; k < s->nout && !out; k++)
    out = slot_array(a, s->out[k]);
  if (!call_prepare(&a->c, NULL, out)) {
    op_free(a);
    return 0;
  }
  return 1;
}

/* The op's result (call_finish: None or its Event), its arguments freed. */
static PyObject *op_finish(OpArgs *a, kiln_status st) {
  PyObject *res = call_finish(&a->c, st);
  op_free(a);
  return res;
}

/* Within an op: its parsed arguments `a`, read by position in the spec. */
#define OP_DEF(name) static PyObject *op_##name(PyObject *self, PyObject *args, PyObject *kw)
#define OP_ARGS(spec, outs)                                                          \
  static OpSpec spec_;                                                               \
  OpArgs a;                                                                          \
  if (!op_parse(&a, &spec_, __func__ + 3, spec, outs, args, kw))                     \
  return NULL
/* An op that is its C call. */
#define OP(name, spec, outs, call)                                                   \
  OP_DEF(name) {                                                                     \
    OP_ARGS(spec, outs);                                                             \
    return op_finish(&a, call);                                                      \
  }

#define Q a.c.q->queue
#define WAITS CALL_WAITS(a.c)
#define R(j) a.v[j].r.p
#define M(j) a.v[j].m.p
#define IM(j) a.v[j].x.p
#define LIST(j) a.v[j].l.r, a.v[j].l.n
#define INT(j) a.v[j].i
#define SIZE(j) ((size_t)a.v[j].z)
#define F(j) a.v[j].f
#define U64(j) a.v[j].k
#define BOOL(j) (a.v[j].i != 0)
/* The batch of matrix operand i: its first extent when 3-D, else 1. */
#define BATCH(j) ((size_t)a.v[j].m.batch)

/* ---- the op library (kiln_ops.h) ------------------------------------------------ */

OP_DEF(copy) {
  OP_ARGS("src:r dst:r", "dst");
  if (a.v[0].r.r.count == 0 && a.v[1].r.r.count == 0)
    return op_finish(&a, kiln_queue_marker(Q, WAITS));
  return op_finish(&a, kiln_buffer_copy(Q, R(0), R(1), WAITS));
}

OP(unary, "op:i x:r y:r", "y", kiln_unary(Q, INT(0), R(1), R(2), WAITS))
OP(binary, "op:i a:r b:r y:r", "y", kiln_binary(Q, INT(0), R(1), R(2), R(3), WAITS))
OP(binary_scalar, "op:i a:r y:r s:f", "y",
   kiln_binary_scalar(Q, INT(0), R(1), R(2), F(3), WAITS))
OP(axpy, "x:r y:r alpha:f", "y", kiln_axpy(Q, R(0), R(1), F(2), WAITS))
OP(scale, "x:r alpha:f", "x", kiln_scale(Q, R(0), F(1), WAITS))
OP(cast, "x:r y:r", "y", kiln_cast(Q, R(0), R(1), WAITS))

/* fill(y, value): value is one element's bits (bytes of the dtype's size). */
OP_DEF(fill) {
  OP_ARGS("y:r value:y", "y");
  size_t need = dtype_size(a.v[0].r.r.dtype);
  if ((size_t)a.v[1].y.len != need) {
    PyErr_Format(PyExc_ValueError, "value has %zd bytes, an element %zu", a.v[1].y.len, need);
    op_free(&a);
    return NULL;
  }
  return op_finish(&a, kiln_fill(Q, R(0), a.v[1].y.buf, WAITS));
}

OP(reduce, "op:i x:r result:r", "result", kiln_reduce(Q, INT(0), R(1), R(2), WAITS))
OP(dot, "x:r y:r result:r", "result", kiln_dot(Q, R(0), R(1), R(2), WAITS))
OP(reduce_rows, "op:i x:m result:r", "result", kiln_reduce_rows(Q, INT(0), M(1), R(2), WAITS))
OP(reduce_cols, "op:i x:m result:r", "result", kiln_reduce_cols(Q, INT(0), M(1), R(2), WAITS))
OP(scan, "kind:i x:r y:r", "y", kiln_scan(Q, INT(0), R(1), R(2), WAITS))
OP(softmax_rows, "x:m y:m", "y", kiln_softmax_rows(Q, M(0), M(1), WAITS))
OP(layernorm_rows, "x:m scale:R bias:R y:m eps:f", "y",
   kiln_layernorm_rows(Q, M(0), R(1), R(2), M(3), F(4), WAITS))
OP(transpose, "x:m y:m", "y", kiln_transpose(Q, M(0), M(1), WAITS))

/* a and b: matrices or kiln.Packed (in the role they were packed for). */
OP_DEF(matmul) {
  OP_ARGS("a:g b:g c:m alpha:f beta:f bias:R activation:i", "c");
  kiln_epilogue e = {F(3), F(4), R(5), INT(6)};
  return op_finish(&a, kiln_matmul(Q, BATCH(2), M(0), M(1), M(2), &e, WAITS));
}

/* ---- training ops (kiln_ops_train.h) ------------------------------------------ */

OP(binary_broadcast, "op:i broadcast:i a:m b:r y:m", "y",
   kiln_binary_broadcast(Q, INT(0), INT(1), M(2), R(3), M(4), WAITS))
OP(unary_backward, "op:i grad_from:i xy:r dy:r dx:r", "dx",
   kiln_unary_backward(Q, INT(0), INT(1), R(2), R(3), R(4), WAITS))
OP(softmax_cross_entropy, "logits:m labels:r loss:R mean:R", "mean loss logits",
   kiln_softmax_cross_entropy(Q, M(0), R(1), R(2), R(3), WAITS))
OP(softmax_cross_entropy_backward, "logits:m labels:r dlogits:m scale:f", "dlogits",
   kiln_softmax_cross_entropy_backward(Q, M(0), R(1), M(2), F(3), WAITS))
OP(accuracy_count, "logits:m labels:r count:r accumulate:b", "count",
   kiln_accuracy_count(Q, M(0), R(1), R(2), BOOL(3), WAITS))
OP(softmax_rows_backward, "y:m dy:m dx:m", "dx",
   kiln_softmax_rows_backward(Q, M(0), M(1), M(2), WAITS))
OP(layernorm_rows_backward, "x:m scale:R dy:m dx:m dscale:R dbias:R eps:f", "dx",
   kiln_layernorm_rows_backward(Q, M(0), R(1), M(2), M(3), R(4), R(5), F(6), WAITS))
OP(gather_rows, "table:m indices:r y:m", "y", kiln_gather_rows(Q, M(0), R(1), M(2), WAITS))
OP(scatter_add_rows, "x:m indices:r table:m", "table",
   kiln_scatter_add_rows(Q, M(0), R(1), M(2), WAITS))
OP(random_bits, "y:r seed:k offset:k", "y", kiln_random_bits(Q, R(0), U64(1), U64(2), WAITS))
OP(random_uniform, "y:r seed:k offset:k lo:f hi:f", "y",
   kiln_random_uniform(Q, R(0), U64(1), U64(2), F(3), F(4), WAITS))
OP(random_normal, "y:r seed:k offset:k mean:f stddev:f", "y",
   kiln_random_normal(Q, R(0), U64(1), U64(2), F(3), F(4), WAITS))
OP(dropout_mask, "mask:r seed:k offset:k p:f", "mask",
   kiln_dropout_mask(Q, R(0), U64(1), U64(2), F(3), WAITS))
OP(dropout, "x:r y:r seed:k offset:k p:f", "y",
   kiln_dropout(Q, R(0), R(1), U64(2), U64(3), F(4), WAITS))

OP_DEF(sgd_step) {
  OP_ARGS("grad:r skip:R w:r velocity:R w_copy:R lr:f momentum:f weight_decay:f nesterov:b "
          "grad_scale:f", "w");
  kiln_sgd_params p = {F(5), F(6), F(7), BOOL(8), F(9)};
  return op_finish(&a, kiln_sgd_step(Q, R(0), R(1), R(2), R(3), R(4), &p, WAITS));
}

OP_DEF(adamw_step) {
  OP_ARGS("grad:r skip:R w:r m:r v:r w_copy:R lr:f beta1:f beta2:f eps:f weight_decay:f "
          "step:k grad_scale:f", "w");
  kiln_adamw_params p = {F(6), F(7), F(8), F(9), F(10), U64(11), F(12)};
  return op_finish(&a, kiln_adamw_step(Q, R(0), R(1), R(2), R(3), R(4), R(5), &p, WAITS));
}

OP(grad_norm, "ranges:l norm:r", "norm", kiln_grad_norm(Q, LIST(0), R(1), WAITS))
OP(clip_grad_norm, "norm:r ranges:l max_norm:f", "norm",
   kiln_clip_grad_norm(Q, R(0), LIST(1), F(2), WAITS))
OP(has_nonfinite, "ranges:l flag:r", "flag", kiln_has_nonfinite(Q, LIST(0), R(1), WAITS))

/* ---- convolution, pooling, batch normalisation (kiln_ops_conv.h,
 * kiln_ops_image.h) ---------------------------------------------------------------- */

#define CONV_GEOMETRY "stride_h:z stride_w:z pad_h:z pad_w:z dilation_h:z dilation_w:z groups:z"
#define POOL_GEOMETRY "kernel_h:z kernel_w:z stride_h:z stride_w:z pad_h:z pad_w:z exclude_padding:b"

/* The seven convolution sizes from slot i on. */
static kiln_conv2d_params conv_geometry(const OpArgs *a, int i) {
  const Slot *v = a->v + i;
  return (kiln_conv2d_params){(size_t)v[0].z, (size_t)v[1].z, (size_t)v[2].z, (size_t)v[3].z,
                              (size_t)v[4].z, (size_t)v[5].z, (size_t)v[6].z};
}

/* Kernel, stride, padding and exclude_padding from slot i on. */
static kiln_pool2d_params pool_geometry(const OpArgs *a, int i) {
  const Slot *v = a->v + i;
  return (kiln_pool2d_params){(size_t)v[0].z, (size_t)v[1].z, (size_t)v[2].z,
                              (size_t)v[3].z, (size_t)v[4].z, (size_t)v[5].z, v[6].i != 0};
}

OP_DEF(conv2d) {
  OP_ARGS("x:x w:x y:x " CONV_GEOMETRY " alpha:f beta:f bias:R activation:i", "y");
  kiln_conv2d_params p = conv_geometry(&a, 3);
  kiln_epilogue e = {F(10), F(11), R(12), INT(13)};
  return op_finish(&a, kiln_conv2d(Q, IM(0), IM(1), IM(2), &p, &e, WAITS));
}

OP_DEF(conv2d_backward_data) {
  OP_ARGS("dy:x w:x dx:x " CONV_GEOMETRY, "dx");
  kiln_conv2d_params p = conv_geometry(&a, 3);
  return op_finish(&a, kiln_conv2d_backward_data(Q, IM(0), IM(1), IM(2), &p, WAITS));
}

OP_DEF(conv2d_backward_weights) {
  OP_ARGS("x:x dy:x dw:x db:R " CONV_GEOMETRY, "dw");
  kiln_conv2d_params p = conv_geometry(&a, 4);
  return op_finish(&a, kiln_conv2d_backward_weights(Q, IM(0), IM(1), IM(2), R(3), &p, WAITS));
}

OP_DEF(pool2d) {
  OP_ARGS("op:i x:x y:x " POOL_GEOMETRY, "y");
  kiln_pool2d_params p = pool_geometry(&a, 3);
  return op_finish(&a, kiln_pool2d(Q, INT(0), IM(1), IM(2), &p, WAITS));
}

OP_DEF(pool2d_backward) {
  OP_ARGS("op:i x:X dy:x dx:x " POOL_GEOMETRY, "dx");
  kiln_pool2d_params p = pool_geometry(&a, 4);
  return op_finish(&a, kiln_pool2d_backward(Q, INT(0), IM(1), IM(2), IM(3), &p, WAITS));
}

OP_DEF(batchnorm_train) {
  OP_ARGS("x:x gamma:R beta:R y:x running_mean:R running_var:R saved:R eps:f momentum:f", "y");
  kiln_batchnorm_params p = {F(7), F(8)};
  return op_finish(&a, kiln_batchnorm_train(Q, IM(0), R(1), R(2), IM(3), R(4), R(5), R(6), &p,
                                            WAITS));
}

OP_DEF(batchnorm_inference) {
  OP_ARGS("x:x gamma:R beta:R running_mean:r running_var:r y:x eps:f", "y");
  kiln_batchnorm_params p = KILN_BATCHNORM_PARAMS_INIT;
  p.eps = F(6);
  return op_finish(&a, kiln_batchnorm_inference(Q, IM(0), R(1), R(2), R(3), R(4), IM(5), &p,
                                                WAITS));
}

OP(batchnorm_backward, "x:x gamma:R saved:r dy:x dx:X dgamma:R dbeta:R", "dx dgamma dbeta",
   kiln_batchnorm_backward(Q, IM(0), R(1), R(2), IM(3), IM(4), R(5), R(6), WAITS))

/* ---- attention (kiln_ops_attention.h) ------------------------------------------- */

OP_DEF(attention_forward) {
  OP_ARGS("heads:z qkv:m out:m lse:R scale:f causal:b", "out");
  kiln_attention_params p = {F(4), BOOL(5)};
  return op_finish(&a, kiln_attention_forward(Q, BATCH(2), SIZE(0), M(1), M(2), R(3), &p,
                                              WAITS));
}

OP_DEF(attention_backward) {
  OP_ARGS("heads:z qkv:m out:m dout:m lse:r dqkv:m scale:f causal:b", "dqkv");
  kiln_attention_params p = {F(6), BOOL(7)};
  return op_finish(&a, kiln_attention_backward(Q, BATCH(5), SIZE(0), M(1), M(2), M(3), R(4),
                                               M(5), &p, WAITS));
}

OP(attention_cache_append, "heads:z pos:z k:m v:m k_cache:m v_cache:m", "k_cache",
   kiln_attention_cache_append(Q, BATCH(2), SIZE(0), SIZE(1), M(2), M(3), M(4), M(5), WAITS))

OP_DEF(attention_decode) {
  OP_ARGS("heads:z t:z q:m k_cache:m v_cache:m out:m scale:f causal:b", "out");
  kiln_attention_params p = {F(6), BOOL(7)};
  return op_finish(&a, kiln_attention_decode(Q, BATCH(5), SIZE(0), SIZE(1), M(2), M(3), M(4),
                                             M(5), &p, WAITS));
}

/* ---- the table: each op under its C name, its doc the kiln function --------- */

#define OPM(name, doc) {#name, KW op_##name, METH_VARARGS | METH_KEYWORDS, doc}

PyMethodDef ops_functions[] = {
    OPM(copy, "kiln_buffer_copy"),
    OPM(unary, "kiln_unary"),
    OPM(binary, "kiln_binary"),
    OPM(binary_scalar, "kiln_binary_scalar"),
    OPM(axpy, "kiln_axpy"),
    OPM(scale, "kiln_scale"),
    OPM(fill, "kiln_fill"),
    OPM(cast, "kiln_cast"),
    OPM(reduce, "kiln_reduce"),
    OPM(dot, "kiln_dot"),
    OPM(reduce_rows, "kiln_reduce_rows"),
    OPM(reduce_cols, "kiln_reduce_cols"),
    OPM(scan, "kiln_scan"),
    OPM(softmax_rows, "kiln_softmax_rows"),
    OPM(layernorm_rows, "kiln_layernorm_rows"),
    OPM(transpose, "kiln_transpose"),
    OPM(matmul, "kiln_matmul"),
    OPM(binary_broadcast, "kiln_binary_broadcast"),
    OPM(unary_backward, "kiln_unary_backward"),
    OPM(softmax_cross_entropy, "kiln_softmax_cross_entropy"),
    OPM(softmax_cross_entropy_backward, "kiln_softmax_cross_entropy_backward"),
    OPM(accuracy_count, "kiln_accuracy_count"),
    OPM(softmax_rows_backward, "kiln_softmax_rows_backward"),
    OPM(layernorm_rows_backward, "kiln_layernorm_rows_backward"),
    OPM(gather_rows, "kiln_gather_rows"),
    OPM(scatter_add_rows, "kiln_scatter_add_rows"),
    OPM(random_bits, "kiln_random_bits"),
    OPM(random_uniform, "kiln_random_uniform"),
    OPM(random_normal, "kiln_random_normal"),
    OPM(dropout_mask, "kiln_dropout_mask"),
    OPM(dropout, "kiln_dropout"),
    OPM(sgd_step, "kiln_sgd_step"),
    OPM(adamw_step, "kiln_adamw_step"),
    OPM(grad_norm, "kiln_grad_norm"),
    OPM(clip_grad_norm, "kiln_clip_grad_norm"),
    OPM(has_nonfinite, "kiln_has_nonfinite"),
    OPM(conv2d, "kiln_conv2d"),
    OPM(conv2d_backward_data, "kiln_conv2d_backward_data"),
    OPM(conv2d_backward_weights, "kiln_conv2d_backward_weights"),
    OPM(pool2d, "kiln_pool2d"),
    OPM(pool2d_backward, "kiln_pool2d_backward"),
    OPM(batchnorm_train, "kiln_batchnorm_train"),
    OPM(batchnorm_inference, "kiln_batchnorm_inference"),
    OPM(batchnorm_backward, "kiln_batchnorm_backward"),
    OPM(attention_forward, "kiln_attention_forward"),
    OPM(attention_backward, "kiln_attention_backward"),
    OPM(attention_cache_append, "kiln_attention_cache_append"),
    OPM(attention_decode, "kiln_attention_decode"),
    {0}};
