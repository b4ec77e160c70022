"""The op library (kiln_ops.h) and the training ops (kiln_ops_train.h) as
functions on kiln.Array.

Every op enqueues on the queue of its output array (``out``, or a new array
on the first input's queue) and returns the output without waiting. Each
takes ``wait=`` (a sequence of kiln.Event to wait for first) and
``event=True`` (return ``(output, Event)`` instead of the output).

Adding an op binding: a function in _kiln.c in the pattern of op_axpy, one
line in its method table, and here a wrapper that allocates the output.
"""

import numpy as _np

from . import _kiln

UNARY = {"neg": 0, "abs": 1, "exp": 2, "log": 3, "sqrt": 4, "relu": 5,
         "gelu": 6, "sigmoid": 7, "tanh": 8}
BINARY = {"add": 0, "sub": 1, "mul": 2, "div": 3, "max": 4, "min": 5}
REDUCE = {"sum": 0, "min": 1, "max": 2, "mean": 3, "nrm2": 4, "argmax": 5}
ACTIVATION = {None: 0, "none": 0, "relu": 5, "gelu": 6}

__all__ = [
    "unary", "neg", "abs", "exp", "log", "sqrt", "relu", "gelu", "sigmoid",
    "tanh", "binary", "add", "subtract", "multiply", "divide", "maximum",
    "minimum", "axpy", "scale", "fill", "cast", "copy", "reduce", "sum", "mean",
    "amin", "amax", "nrm2", "argmax", "dot", "cumsum", "softmax", "layernorm",
    "transpose", "matmul", "gemm", "binary_broadcast", "unary_backward",
    "softmax_cross_entropy", "softmax_cross_entropy_backward", "accuracy_count",
    "softmax_backward", "layernorm_backward", "gather_rows", "scatter_add_rows",
    "random_bits", "random_uniform", "random_normal", "dropout_mask", "dropout",
    "sgd_step", "adamw_step", "grad_norm", "clip_grad_norm", "has_nonfinite",
]


def _dtype_code(dtype):
    from . import dtype_code  # late: the package imports this module
    return dtype_code(dtype)


def _new(like, shape=None, dtype=None):
    """A new array on like's queue: like's shape and dtype unless given."""
    code = like._dtype_code if dtype is None else dtype
    return _kiln.empty(like.queue, like.shape if shape is None else shape, code)


def _ret(out, ev):
    return out if ev is None else (out, ev)


def _key(table, name, what):
    try:
        return table[name]
    except KeyError:
        raise ValueError("unknown %s %r; one of %s" % (what, name, ", ".join(
            k for k in table if k))) from None


# ---- elementwise -------------------------------------------------------------

def unary(op, x, out=None, *, wait=None, event=False):
    """out = op(x) elementwise; op one of neg, abs, exp, log, sqrt, relu,
    gelu, sigmoid, tanh (float32, float16, bfloat16). out may be x."""
    out = _new(x) if out is None else out
    return _ret(out, _kiln.unary(_key(UNARY, op, "unary op"), x, out, wait, event))


def neg(x, out=None, **kw):
    """-x."""
    return unary("neg", x, out, **kw)


def abs(x, out=None, **kw):  # noqa: A001
    """|x|."""
    return unary("abs", x, out, **kw)


def exp(x, out=None, **kw):
    """e**x."""
    return unary("exp", x, out, **kw)


def log(x, out=None, **kw):
    """Natural logarithm."""
    return unary("log", x, out, **kw)


def sqrt(x, out=None, **kw):
    """Square root."""
    return unary("sqrt", x, out, **kw)


def relu(x, out=None, **kw):
    """max(x, 0)."""
    return unary("relu", x, out, **kw)


def gelu(x, out=None, **kw):
    """GELU, the tanh form."""
    return unary("gelu", x, out, **kw)


def sigmoid(x, out=None, **kw):
    """1 / (1 + e**-x)."""
    return unary("sigmoid", x, out, **kw)


def tanh(x, out=None, **kw):
    """tanh(x)."""
    return unary("tanh", x, out, **kw)


def binary(op, a, b, out=None, *, wait=None, event=False):
    """out = a op b elementwise, op one of add, sub, mul, div, max, min; b an
    Array of a's size and dtype or a Python number (kiln_binary_scalar)."""
    code = _key(BINARY, op, "binary op")
    out = _new(a) if out is None else out
    if isinstance(b, (int, float, _np.integer, _np.floating)):
        return _ret(out, _kiln.binary_scalar(code, a, out, float(b), wait, event))
    return _ret(out, _kiln.binary(code, a, b, out, wait, event))


def add(a, b, out=None, **kw):
    """a + b."""
    return binary("add", a, b, out, **kw)


def subtract(a, b, out=None, **kw):
    """a - b."""
    return binary("sub", a, b, out, **kw)


def multiply(a, b, out=None, **kw):
    """a * b."""
    return binary("mul", a, b, out, **kw)


def divide(a, b, out=None, **kw):
    """a / b."""
    return binary("div", a, b, out, **kw)


def maximum(a, b, out=None, **kw):
    """fmax(a, b)."""
    return binary("max", a, b, out, **kw)


def minimum(a, b, out=None, **kw):
    """fmin(a, b)."""
    return binary("min", a, b, out, **kw)


def axpy(alpha, x, y, *, wait=None, event=False):
    """y += alpha * x in place (BLAS axpy); returns y."""
    return _ret(y, _kiln.axpy(x, y, alpha, wait, event))


def scale(x, alpha, *, wait=None, event=False):
    """x *= alpha in place; returns x."""
    return _ret(x, _kiln.scale(x, alpha, wait, event))


def _element_bytes(value, code):
    if code == 2:
        bits = _np.empty(1, _np.uint16)
        _kiln.convert(_np.array([value], _np.float32), bits, 0)
        return bits.tobytes()
    from . import _NP
    return _np.array([value]).astype(_NP[code]).tobytes()


def fill(y, value, *, wait=None, event=False):
    """Every element of y = value (rounded to y's dtype); returns y. A
    non-contiguous view is filled through a contiguous temporary."""
    if not y.is_contiguous:
        tmp = _new(y, y.shape)
        fill(tmp, value)
        return copy(tmp, out=y, wait=wait, event=event)
    return _ret(y, _kiln.fill(y, _element_bytes(value, y._dtype_code), wait, event))


def cast(x, dtype, out=None, *, wait=None, event=False):
    """x converted to dtype (float32, float16, bfloat16), rounding to
    nearest even."""
    out = _new(x, None, _dtype_code(dtype)) if out is None else out
    return _ret(out, _kiln.cast(x, out, wait, event))


def _copy_new(x):
    return copy(x)


def copy(x, out=None, *, wait=None, event=False):
    """A device copy of x (any view: made contiguous); into out when given
    (same shape and dtype; out may be a view too). 2-D views go through
    kiln_transpose, which takes any leading dimension."""
    if out is None:
        out = _new(x, x.shape)
    if x.is_contiguous and out.is_contiguous:
        return _ret(out, _kiln.copy(x, out, wait, event))
    if x.ndim == 2 and out.ndim == 2 and x.shape == out.shape:
        x_row = x.strides[1] == 1 or x.shape[1] == 1
        o_row = out.strides[1] == 1 or out.shape[1] == 1
        if not x_row and not o_row:
            return copy(x.T, out.T, wait=wait, event=event)
        if not x_row:  # a column-major x is its transpose, row-major
            return _ret(out, _kiln.transpose(x.T, out, wait, event))
        if not o_row:
            return _ret(out, _kiln.transpose(x, out.T, wait, event))
        t = _kiln.empty(x.queue, (x.shape[1], x.shape[0]), x._dtype_code)
        _kiln.transpose(x, t, wait)
        return _ret(out, _kiln.transpose(t, out, None, event))
    raise ValueError("copy: kiln copies contiguous arrays and 2-D views; got strides %s -> %s"
                     % (x.strides, out.strides))


# ---- reductions ----------------------------------------------------------------

def reduce(op, x, axis=None, out=None, *, wait=None, event=False):
    """op over all of x (axis None: a 1-element float32 array, uint32 for
    argmax), over each row of a matrix (axis 1 or -1) or each column (axis 0).
    op: sum, min, max, mean, nrm2, argmax."""
    code = _key(REDUCE, op, "reduction")
    rcode = 4 if code == 5 else 0
    if axis is None:
        out = _kiln.empty(x.queue, (1,), rcode) if out is None else out
        return _ret(out, _kiln.reduce(code, x, out, wait, event))
    if x.ndim != 2:
        raise ValueError("axis= needs a 2-D array")
    if axis in (1, -1):
        out = _kiln.empty(x.queue, (x.shape[0],), rcode) if out is None else out
        return _ret(out, _kiln.reduce_rows(code, x, out, wait, event))
    if axis in (0, -2):
        out = _kiln.empty(x.queue, (x.shape[1],), rcode) if out is None else out
        return _ret(out, _kiln.reduce_cols(code, x, out, wait, event))
    raise ValueError("axis must be None, 0 or 1")


def sum(x, axis=None, out=None, **kw):  # noqa: A001
    """Sum (f32 accumulation; deterministic bits run to run)."""
    return reduce("sum", x, axis, out, **kw)


def mean(x, axis=None, out=None, **kw):
    """Mean."""
    return reduce("mean", x, axis, out, **kw)


def amin(x, axis=None, out=None, **kw):
    """Minimum (NaN ignored)."""
    return reduce("min", x, axis, out, **kw)


def amax(x, axis=None, out=None, **kw):
    """Maximum (NaN ignored)."""
    return reduce("max", x, axis, out, **kw)


def nrm2(x, axis=None, out=None, **kw):
    """Euclidean norm, without overflow."""
    return reduce("nrm2", x, axis, out, **kw)


def argmax(x, axis=None, out=None, **kw):
    """Index of the first maximum (uint32)."""
    return reduce("argmax", x, axis, out, **kw)


def dot(x, y, out=None, *, wait=None, event=False):
    """sum(x * y) as a 1-element float32 array."""
    out = _kiln.empty(x.queue, (1,), 0) if out is None else out
    return _ret(out, _kiln.dot(x, y, out, wait, event))


def cumsum(x, out=None, *, exclusive=False, wait=None, event=False):
    """Prefix sums (float32, int32, uint32); exclusive=True starts at 0."""
    out = _new(x) if out is None else out
    return _ret(out, _kiln.scan(1 if exclusive else 0, x, out, wait, event))


# ---- row ops ---------------------------------------------------------------------

def _rows(x):
    return x.reshape(1, x.size) if x.ndim == 1 else x


def softmax(x, out=None, *, wait=None, event=False):
    """Softmax of each row of a matrix (a vector is one row)."""
    out = _new(x) if out is None else out
    return _ret(out, _kiln.softmax_rows(_rows(x), _rows(out), wait, event))


def layernorm(x, scale=None, bias=None, eps=1e-5, out=None, *, wait=None, event=False):
    """Layer normalisation of each row: (x - mean) / sqrt(var + eps) * scale + bias."""
    out = _new(x) if out is None else out
    return _ret(out, _kiln.layernorm_rows(_rows(x), scale, bias, _rows(out), eps, wait, event))


def transpose(x, out=None, *, wait=None, event=False):
    """A new contiguous x^T (x.T is the free view)."""
    out = _new(x, (x.shape[1], x.shape[0])) if out is None else out
    return _ret(out, _kiln.transpose(x, out, wait, event))


def matmul(a, b, out=None, *, alpha=1.0, beta=0.0, bias=None, activation=None,
           wait=None, event=False):
    """out = activation(alpha * a @ b + beta * out + bias) (kiln_matmul).

    a and b: float32, float16 or bfloat16 (one dtype), 2-D or batched 3-D,
    row-major or column-major (a.T of a row-major matrix: no copy); out
    float32. bias: n float32, per column. activation: None, 'relu', 'gelu'.
    A 3-D out is a batch (a 2-D a or b is shared by every entry)."""
    if out is None:
        m, n = a.shape[-2], b.shape[-1]
        batch = a.shape[0] if a.ndim == 3 else b.shape[0] if b.ndim == 3 else None
        out = _kiln.empty(a.queue, (m, n) if batch is None else (batch, m, n), 0)
    return _ret(out, _kiln.matmul(a, b, out, alpha, beta, bias,
                                  _key(ACTIVATION, activation, "activation"), wait, event))


def gemm(a, b, c=None, alpha=1.0, beta=0.0, **kw):
    """BLAS-style name of matmul: c = alpha * a @ b + beta * c."""
    return matmul(a, b, c, alpha=alpha, beta=beta, **kw)


# ---- training ops -------------------------------------------------------------------

def binary_broadcast(op, a, b, out=None, *, axis="row", wait=None, event=False):
    """out[r][c] = a[r][c] op b[c] (axis 'row': b has cols entries) or
    a[r][c] op b[r] (axis 'col')."""
    bc = {"row": 0, "col": 1}[axis]
    out = _new(a) if out is None else out
    return _ret(out, _kiln.binary_broadcast(_key(BINARY, op, "binary op"), bc, a, b, out,
                                            wait, event))


def unary_backward(op, xy, dy, out=None, *, from_output=False, wait=None, event=False):
    """dx = dy * f'(x) for f relu, gelu, sigmoid or tanh; xy is x, or the
    forward output y when from_output=True."""
    out = _new(dy) if out is None else out
    return _ret(out, _kiln.unary_backward(_key(UNARY, op, "unary op"), 1 if from_output else 0,
                                          xy, dy, out, wait, event))


def softmax_cross_entropy(logits, labels, loss=None, mean=None, *, wait=None, event=False):
    """Per-row loss (into `loss` when given) and their mean: returns the
    1-element float32 mean array (a new one when mean is None). labels:
    int32/uint32 class indexes."""
    mean = _kiln.empty(logits.queue, (1,), 0) if mean is None else mean
    return _ret(mean, _kiln.softmax_cross_entropy(logits, labels, loss, mean, wait, event))


def softmax_cross_entropy_backward(logits, labels, out=None, scale=1.0, *, wait=None,
                                   event=False):
    """dlogits = (softmax(logits) - onehot(labels)) * scale."""
    out = _new(logits) if out is None else out
    return _ret(out, _kiln.softmax_cross_entropy_backward(logits, labels, out, scale, wait, event))


def accuracy_count(logits, labels, count=None, accumulate=False, *, wait=None, event=False):
    """Number of rows whose argmax is the label, as a 1-element uint32 array
    (added to count when accumulate=True)."""
    count = _kiln.empty(logits.queue, (1,), 4) if count is None else count
    return _ret(count, _kiln.accuracy_count(logits, labels, count, accumulate, wait, event))


def softmax_backward(y, dy, out=None, *, wait=None, event=False):
    """Backward of softmax from its output y."""
    out = _new(dy) if out is None else out
    return _ret(out, _kiln.softmax_rows_backward(y, dy, out, wait, event))


def layernorm_backward(x, dy, scale=None, eps=1e-5, dx=None, dscale=None, dbias=None, *,
                       wait=None, event=False):
    """dx (returned), and dscale / dbias when given, of layernorm."""
    dx = _new(dy) if dx is None else dx
    return _ret(dx, _kiln.layernorm_rows_backward(x, scale, dy, dx, dscale, dbias, eps,
                                                  wait, event))


def gather_rows(table, indices, out=None, *, wait=None, event=False):
    """out[i] = table[indices[i]] (embedding lookup)."""
    out = _new(table, (indices.size, table.shape[1])) if out is None else out
    return _ret(out, _kiln.gather_rows(table, indices, out, wait, event))


def scatter_add_rows(x, indices, table, *, wait=None, event=False):
    """table[indices[i]] += x[i]; returns table."""
    return _ret(table, _kiln.scatter_add_rows(x, indices, table, wait, event))


def random_bits(out, seed, offset=0, *, wait=None, event=False):
    """Philox4x32-10 words into the uint32 array out."""
    return _ret(out, _kiln.random_bits(out, seed, offset, wait, event))


def random_uniform(out, seed, offset=0, lo=0.0, hi=1.0, *, wait=None, event=False):
    """Uniform [lo, hi) float32 into out; element i is stream element offset + i."""
    return _ret(out, _kiln.random_uniform(out, seed, offset, lo, hi, wait, event))


def random_normal(out, seed, offset=0, mean=0.0, stddev=1.0, *, wait=None, event=False):
    """Normal float32 into out."""
    return _ret(out, _kiln.random_normal(out, seed, offset, mean, stddev, wait, event))


def dropout_mask(mask, seed, offset=0, p=0.5, *, wait=None, event=False):
    """The inverted-dropout mask (0 or 1 / (1 - p)) into mask."""
    return _ret(mask, _kiln.dropout_mask(mask, seed, offset, p, wait, event))


def dropout(x, seed, offset=0, p=0.5, out=None, *, wait=None, event=False):
    """Inverted dropout of x."""
    out = _new(x) if out is None else out
    return _ret(out, _kiln.dropout(x, out, seed, offset, p, wait, event))


def sgd_step(w, grad, velocity=None, *, lr, momentum=0.0, weight_decay=0.0, nesterov=False,
             grad_scale=1.0, skip=None, w_copy=None, wait=None, event=False):
    """One SGD (momentum) update of w in place, as torch.optim.SGD; returns w."""
    return _ret(w, _kiln.sgd_step(grad, skip, w, velocity, w_copy, lr, momentum, weight_decay,
                                  nesterov, grad_scale, wait, event))


def adamw_step(w, grad, m, v, *, lr, step, beta1=0.9, beta2=0.999, eps=1e-8,
               weight_decay=0.01, grad_scale=1.0, skip=None, w_copy=None, wait=None,
               event=False):
    """One AdamW update of w (and its moments m, v) in place, as
    torch.optim.AdamW; step counts from 1. Returns w."""
    return _ret(w, _kiln.adamw_step(grad, skip, w, m, v, w_copy, lr, beta1, beta2, eps,
                                    weight_decay, step, grad_scale, wait, event))


def grad_norm(arrays, out=None, *, wait=None, event=False):
    """sqrt of the sum of squares over every array: a 1-element float32 array."""
    arrays = list(arrays)
    out = _kiln.empty(arrays[0].queue, (1,), 0) if out is None else out
    return _ret(out, _kiln.grad_norm(arrays, out, wait, event))


def clip_grad_norm(arrays, max_norm, norm=None, *, wait=None, event=False):
    """Scale the arrays in place so their joint norm is at most max_norm;
    returns the norm array (computed when not given)."""
    arrays = list(arrays)
    if norm is None:
        norm = grad_norm(arrays)
    return _ret(norm, _kiln.clip_grad_norm(norm, arrays, max_norm, wait, event))


def has_nonfinite(arrays, out=None, *, wait=None, event=False):
    """A 1-element uint32 array: 1 when any element is inf or NaN."""
    arrays = list(arrays)
    out = _kiln.empty(arrays[0].queue, (1,), 4) if out is None else out
    return _ret(out, _kiln.has_nonfinite(arrays, out, wait, event))
