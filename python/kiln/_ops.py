"""The op library (kiln_ops.h), the training ops (kiln_ops_train.h), the
image ops (kiln_ops_conv.h, kiln_ops_image.h) and attention
(kiln_ops_attention.h) as functions on kiln.Array.

Every op enqueues on the queue of its output array (``out``, or a new array
on the first input's queue) and returns the output without waiting. Each
takes ``wait=`` (a sequence of kiln.Event to wait for first) and
``event=True`` (return ``(output, Event)`` instead of the output).

Adding an op binding: an OP line in _kiln_ops.c (its argument spec and the
C call), one line in its method table, and here a wrapper that allocates
the output.
"""

import numpy as _np

from . import _kiln
from ._dtype import dtype_code as _dtype_code, _NP

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
    "conv2d", "conv2d_backward_data", "conv2d_backward_weights", "pool2d",
    "max_pool2d", "avg_pool2d", "pool2d_backward", "batchnorm_train",
    "batchnorm_inference", "batchnorm_backward", "attention",
    "attention_backward", "attention_cache_append", "attention_decode",
]
POOL = {"max": 2, "mean": 3, "avg": 3}


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
    row-major or column-major (a.T of a row-major matrix: no copy), or a
    kiln.Packed of their role; out float32. bias: n float32, per column.
    activation: None, 'relu', 'gelu'. A 3-D out is a batch (a 2-D a or b
    is shared by every entry)."""
    if out is None:
        m, n = a.shape[-2], b.shape[-1]
        batch = a.shape[0] if a.ndim == 3 else b.shape[0] if b.ndim == 3 else None
        arrays = [x for x in (a, b) if isinstance(x, _kiln.ArrayBase)]
        if not arrays:
            raise TypeError("matmul: a and b are both kiln.Packed; pass out=")
        out = _kiln.empty(arrays[0].queue, (m, n) if batch is None else (batch, m, n), 0)
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


# ---- image ops (NCHW arrays of 4 dimensions) ------------------------------------------

def _pair(v, what):
    t = tuple(v) if isinstance(v, (tuple, list)) else (v, v)
    if len(t) != 2:
        raise ValueError("%s: an int or a pair of ints" % what)
    return t


def _conv_geometry(stride, padding, dilation, groups):
    sh, sw = _pair(stride, "stride")
    ph, pw = _pair(padding, "padding")
    dh, dw = _pair(dilation, "dilation")
    return (sh, sw, ph, pw, dh, dw, groups)


def _conv_out(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def conv2d(x, w, out=None, *, stride=1, padding=0, dilation=1, groups=1, bias=None,
           activation=None, alpha=1.0, beta=0.0, wait=None, event=False):
    """out = activation(alpha * conv2d(x, w) + beta * out + bias)
    (kiln_conv2d), as torch.nn.functional.conv2d: x (N, C, H, W), w
    (OC, C/groups, KH, KW) of one dtype (float32, float16, bfloat16); out
    (N, OC, OH, OW) float32; bias OC float32; activation None, 'relu', 'gelu'."""
    g = _conv_geometry(stride, padding, dilation, groups)
    if out is None:
        n, _, h, wd = x.shape
        oc, _, kh, kw = w.shape
        oh = _conv_out(h, kh, g[0], g[2], g[4])
        ow = _conv_out(wd, kw, g[1], g[3], g[5])
        out = _kiln.empty(x.queue, (n, oc, max(oh, 0), max(ow, 0)), 0)
    return _ret(out, _kiln.conv2d(x, w, out, *g, alpha, beta, bias,
                                  _key(ACTIVATION, activation, "activation"), wait, event))


def conv2d_backward_data(dy, w, out, *, stride=1, padding=0, dilation=1, groups=1,
                         wait=None, event=False):
    """The gradient to conv2d's input (kiln_conv2d_backward_data): out has
    the input's shape (N, C, H, W), float32, overwritten; dy and w share a
    dtype. out may also be the input's shape as a tuple (a new array)."""
    if isinstance(out, tuple):
        out = _kiln.empty(dy.queue, out, 0)
    g = _conv_geometry(stride, padding, dilation, groups)
    return _ret(out, _kiln.conv2d_backward_data(dy, w, out, *g, wait, event))


def conv2d_backward_weights(x, dy, out, db=None, *, stride=1, padding=0, dilation=1,
                            groups=1, wait=None, event=False):
    """The gradients to conv2d's weights (out: the weights' shape, or that
    shape as a tuple for a new array; float32, overwritten) and, when db is
    given (OC float32), to its bias (kiln_conv2d_backward_weights)."""
    if isinstance(out, tuple):
        out = _kiln.empty(x.queue, out, 0)
    g = _conv_geometry(stride, padding, dilation, groups)
    return _ret(out, _kiln.conv2d_backward_weights(x, dy, out, db, *g, wait, event))


def _pool_geometry(kernel, stride, padding):
    kh, kw = _pair(kernel, "kernel")
    sh, sw = _pair(kernel if stride is None else stride, "stride")
    ph, pw = _pair(padding, "padding")
    return (kh, kw, sh, sw, ph, pw)


def pool2d(op, x, kernel, out=None, *, stride=None, padding=0, exclude_padding=False,
           wait=None, event=False):
    """Max ('max') or average ('mean') 2-D pooling (kiln_pool2d), as
    torch.nn.MaxPool2d / AvgPool2d: stride defaults to the kernel; average
    pooling counts padding unless exclude_padding. Ties go to the first
    maximum in scan order."""
    g = _pool_geometry(kernel, stride, padding)
    if out is None:
        n, c, h, w = x.shape
        oh = (h + 2 * g[4] - g[0]) // g[2] + 1
        ow = (w + 2 * g[5] - g[1]) // g[3] + 1
        out = _new(x, (n, c, max(oh, 0), max(ow, 0)))
    return _ret(out, _kiln.pool2d(_key(POOL, op, "pool op"), x, out, *g, exclude_padding,
                                  wait, event))


def max_pool2d(x, kernel, out=None, **kw):
    """pool2d('max', ...)."""
    return pool2d("max", x, kernel, out, **kw)


def avg_pool2d(x, kernel, out=None, **kw):
    """pool2d('mean', ...)."""
    return pool2d("mean", x, kernel, out, **kw)


def pool2d_backward(op, x, dy, out=None, *, kernel, stride=None, padding=0,
                    exclude_padding=False, wait=None, event=False):
    """The gradient of pool2d to its input x (out: x's shape and dtype,
    overwritten); average pooling reads only x's shape (kiln_pool2d_backward)."""
    g = _pool_geometry(kernel, stride, padding)
    out = _new(x) if out is None else out
    return _ret(out, _kiln.pool2d_backward(_key(POOL, op, "pool op"), x, dy, out, *g,
                                           exclude_padding, wait, event))


def batchnorm_train(x, gamma=None, beta=None, running_mean=None, running_var=None, out=None,
                    saved=None, *, eps=1e-5, momentum=0.1, wait=None, event=False):
    """Batch normalisation in training mode (kiln_batchnorm_train), as
    torch.nn.BatchNorm2d: out = (x - mean) / sqrt(var + eps) * gamma + beta
    over the batch's statistics per channel; running_mean and running_var
    (float32, updated in place with momentum, unbiased variance) and saved
    (2C float32: mean, then 1/std; for batchnorm_backward) are optional.
    Returns out (or (out, saved) when saved is 'new')."""
    out = _new(x) if out is None else out
    want_saved = isinstance(saved, str) and saved == "new"
    if want_saved:
        saved = _kiln.empty(x.queue, (2 * x.shape[1],), 0)
    ev = _kiln.batchnorm_train(x, gamma, beta, out, running_mean, running_var, saved, eps,
                               momentum, wait, event)
    res = (out, saved) if want_saved else out
    return res if ev is None else (res, ev)


def batchnorm_inference(x, running_mean, running_var, gamma=None, beta=None, out=None, *,
                        eps=1e-5, wait=None, event=False):
    """Batch normalisation with the running statistics
    (kiln_batchnorm_inference)."""
    out = _new(x) if out is None else out
    return _ret(out, _kiln.batchnorm_inference(x, gamma, beta, running_mean, running_var, out,
                                               eps, wait, event))


def batchnorm_backward(x, saved, dy, gamma=None, dx=None, dgamma=None, dbeta=None, *,
                       wait=None, event=False):
    """The gradients of batchnorm_train (kiln_batchnorm_backward) from its
    input x, gamma and saved statistics: dx (x's shape and dtype), dgamma and
    dbeta (C float32), each overwritten; 'new' makes one. Returns (dx,
    dgamma, dbeta)."""
    c = x.shape[1]
    dx = _new(x) if isinstance(dx, str) else dx
    dgamma = _kiln.empty(x.queue, (c,), 0) if isinstance(dgamma, str) else dgamma
    dbeta = _kiln.empty(x.queue, (c,), 0) if isinstance(dbeta, str) else dbeta
    ev = _kiln.batchnorm_backward(x, gamma, saved, dy, dx, dgamma, dbeta, wait, event)
    return (dx, dgamma, dbeta) if ev is None else ((dx, dgamma, dbeta), ev)


# ---- attention (llm.c's fused qkv layout) ---------------------------------------------

def attention(qkv, heads, out=None, lse=None, *, scale=0.0, causal=True, wait=None,
              event=False):
    """Fused multi-head attention (kiln_attention_forward) of qkv (B, T, 3C:
    Q, K, V in consecutive thirds, each split into heads of C/heads
    columns) into out (B, T, C, qkv's dtype); lse (B*heads*T float32, the
    rows' log-sum-exp for attention_backward) or None. scale 0: 1/sqrt(C/heads)."""
    b, t, c3 = qkv.shape
    out = _new(qkv, (b, t, c3 // 3)) if out is None else out
    return _ret(out, _kiln.attention_forward(heads, qkv, out, lse, scale, causal, wait, event))


def attention_backward(qkv, out, dout, lse, heads, dqkv=None, *, scale=0.0, causal=True,
                       wait=None, event=False):
    """dqkv (qkv's shape, overwritten) from the forward's qkv, out, lse and
    dout (kiln_attention_backward)."""
    dqkv = _new(qkv) if dqkv is None else dqkv
    return _ret(dqkv, _kiln.attention_backward(heads, qkv, out, dout, lse, dqkv, scale, causal,
                                               wait, event))


def attention_cache_append(k, v, k_cache, v_cache, heads, pos, *, wait=None, event=False):
    """Copy n new keys and values (each (B, n, C)) into rows [pos, pos + n)
    of the caches ((B*heads, Tmax, C/heads) arrays) (kiln_attention_cache_append)."""
    return _ret(k_cache, _kiln.attention_cache_append(heads, pos, k, v, k_cache, v_cache,
                                                      wait, event))


def attention_decode(q, k_cache, v_cache, heads, t, out=None, *, scale=0.0, causal=True,
                     wait=None, event=False):
    """n new queries q (B, n, C) against the first t cached positions
    (kiln_attention_decode) into out (B, n, C)."""
    out = _new(q) if out is None else out
    return _ret(out, _kiln.attention_decode(heads, t, q, k_cache, v_cache, out, scale, causal,
                                            wait, event))
