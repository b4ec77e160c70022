#!/usr/bin/env python3
"""train_gpt.py: examples/train_gpt.c's GPT-2 (examples/gpt.c) in Python with kiln.

The same model in llm.c's layout (pre-LayerNorm blocks, learned positions,
GELU tanh, token embedding tied to the output projection; one parameter
buffer in llm.c's order, so llm.c's model files load and save unchanged),
the same initialisation (kiln's Philox stream of the seed, each tensor at
its offset), the same batches (consecutive windows of B x T + 1 tokens),
schedule and sequence of kiln ops, so one seed gives the C trainer's
losses:

    python3 examples/train_gpt.py --data kjv.txt --steps 100
    python3 examples/train_gpt.py --data kjv.txt --steps 3 --print-losses   # = train_gpt's
    python3 examples/train_gpt.py --data kjv.txt --layers 12 --heads 12 --channels 768 \\
        --context 1024 --vocab 50257 --batch 4 --seq 64 --steps 4         # GPT-2 124M's shape

Every op of a step is one kiln call on one queue: layer norms, GEMMs with
the bias fused and the residual added by the GEMM itself (beta = 1), the
fused attention on llm.c's (B, T, 3C) qkv buffer, GELU, the embedding
gather and scatter-add, the fused cross-entropy, the global gradient norm,
its clip and one AdamW launch over all parameters. The host waits once a
step, for the loss. --precision bf16 as in C: the GEMMs and the attention
read bf16 copies of the weights and of their inputs, with f32 master weights.

Data: any text file as bytes (vocabulary 256), or an llm.c token file (256
int32 header, magic 20240520, version 1, then uint16 tokens); the last
tenth is held out for validation.
"""

import argparse
import math
import os
import sys
import time

import numpy as np

try:
    import kiln
except ImportError:  # run from a checkout: the package built by Meson
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "build", "python"))
    import kiln

PROG = "train_gpt.py"
CKPT_MAGIC, CKPT_VERSION = 20240326, 3
TOKENS_MAGIC = 20240520
LN_EPS = 1e-5
# llm.c's parameter tensors in file order, with each one's per-layer shape.
TENSORS = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
           "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]


class GPTError(Exception):
    """A checkpoint or token file that cannot be used, with the reason."""


def tensor_shapes(cfg):
    """{name: (layers, shape of one layer's slice)} in file order."""
    C, L, Vp, T = cfg["channels"], cfg["layers"], cfg["padded_vocab"], cfg["max_seq"]
    return {"wte": (1, (Vp, C)), "wpe": (1, (T, C)), "ln1w": (L, (C,)), "ln1b": (L, (C,)),
            "qkvw": (L, (3 * C, C)), "qkvb": (L, (3 * C,)), "attprojw": (L, (C, C)),
            "attprojb": (L, (C,)), "ln2w": (L, (C,)), "ln2b": (L, (C,)),
            "fcw": (L, (4 * C, C)), "fcb": (L, (4 * C,)), "fcprojw": (L, (C, 4 * C)),
            "fcprojb": (L, (C,)), "lnfw": (1, (C,)), "lnfb": (1, (C,))}


def read_header(path):
    """The configuration of an llm.c model file (header only)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(1024)
    except OSError as e:
        raise GPTError("%s: cannot open: %s" % (path, e.strerror)) from None
    if len(raw) < 1024:
        raise GPTError("%s: truncated: shorter than llm.c's 1024-byte header" % path)
    h = np.frombuffer(raw, np.int32)
    if h[0] != CKPT_MAGIC:
        raise GPTError("%s: not an llm.c GPT-2 checkpoint (magic %d, expected %d)"
                       % (path, h[0], CKPT_MAGIC))
    if h[1] != CKPT_VERSION:
        raise GPTError("%s: llm.c checkpoint version %d; this program reads version %d"
                       % (path, h[1], CKPT_VERSION))
    if (h[2:8] <= 0).any():
        raise GPTError("%s: a size in the header is not positive" % path)
    cfg = {"max_seq": int(h[2]), "vocab": int(h[3]), "layers": int(h[4]),
           "heads": int(h[5]), "channels": int(h[6]), "padded_vocab": int(h[7])}
    if cfg["padded_vocab"] < cfg["vocab"] or cfg["channels"] % cfg["heads"]:
        raise GPTError("%s: inconsistent header (padded vocabulary below the vocabulary, "
                       "or heads not dividing channels)" % path)
    return cfg


class GPT:
    """GPT-2 on one kiln queue for batches of B sequences of T tokens: the
    parameters, their gradients and AdamW moments as one float32 array each
    (llm.c's order), views of them per tensor and layer, and every
    activation the backward pass needs."""

    def __init__(self, cfg, B, T, device=None, precision="float32"):
        self.cfg, self.B, self.T = dict(cfg), B, T
        if precision not in ("float32", "bfloat16"):
            raise ValueError("precision must be float32 or bfloat16, not %r" % (precision,))
        # bfloat16: the GEMMs and the attention read bf16 copies of the
        # weights (refreshed by AdamW) and of their inputs, and accumulate
        # in f32; everything else stays f32 (gpt.h).
        self.lp = precision == "bfloat16"
        self.dev = device if device is not None else kiln.default_device()
        C, L, V, NH = cfg["channels"], cfg["layers"], cfg["vocab"], cfg["heads"]
        if T > cfg["max_seq"]:
            raise ValueError("T %d is longer than the model's context of %d" % (T, cfg["max_seq"]))
        shapes = tensor_shapes(cfg)
        self.nparams = sum(n * math.prod(s) for n, s in shapes.values())
        zeros = lambda *shape: kiln.zeros(shape, device=self.dev)  # noqa: E731
        self.params, self.grads = zeros(self.nparams), zeros(self.nparams)
        self.opt_m, self.opt_v = zeros(self.nparams), zeros(self.nparams)
        self.offsets, self.sizes = {}, {}
        self.params_lp = (kiln.empty(self.nparams, "bfloat16", device=self.dev) if self.lp
                          else self.params)
        # name -> per-layer views of the weights, the GEMMs' copy, the gradients
        self.w, self.wl, self.g = {}, {}, {}
        off = 0
        for name, (layers, shape) in shapes.items():
            n = math.prod(shape)
            self.offsets[name], self.sizes[name] = off, layers * n
            for views, whole in ((self.w, self.params), (self.wl, self.params_lp),
                                 (self.g, self.grads)):
                views[name] = [whole[off + l * n:off + (l + 1) * n].reshape(shape)
                               for l in range(layers)]
            off += layers * n
        BT = B * T
        self.tokens = kiln.empty(BT, "uint32", device=self.dev)
        self.targets = kiln.empty(BT, "uint32", device=self.dev)
        self.encoded = zeros(BT, C)
        per_layer = lambda *shape: [zeros(*shape) for _ in range(L)]  # noqa: E731
        self.ln1, self.qkv, self.atty = per_layer(BT, C), per_layer(B, T, 3 * C), per_layer(B, T, C)
        self.lse = per_layer(B * NH * T)
        self.res2, self.ln2, self.res3 = per_layer(BT, C), per_layer(BT, C), per_layer(BT, C)
        self.fch, self.gelu = per_layer(BT, 4 * C), per_layer(BT, 4 * C)
        self.lnf, self.logits = zeros(BT, C), zeros(BT, V)
        # The GEMMs' and the attention's copies of their inputs (the arrays
        # themselves in f32): lp[id(x)] is x's bf16 shadow.
        self._lp = {}

        def shadow(x):
            if self.lp:
                self._lp[id(x)] = kiln.empty(x.shape, "bfloat16", device=self.dev)
            return x
        gemm_dt = "bfloat16" if self.lp else "float32"
        for x in self.ln1 + self.qkv + self.ln2 + self.gelu + [self.lnf]:
            shadow(x)
        # The attention writes its output in the GEMMs' dtype.
        self.atty = [kiln.empty((B, T, C), gemm_dt, device=self.dev) for _ in range(L)]
        self.loss, self.norm = zeros(1), zeros(1)
        # The backward pass's scratch.
        self.dres, self.dtmp = zeros(BT, C), zeros(BT, C)
        self.dbig1, self.dbig2 = zeros(BT, 4 * C), zeros(BT, 4 * C)
        self.dlogits = zeros(BT, V)
        for x in (self.dres, self.dtmp, self.dbig2, self.dlogits):
            shadow(x)
        self.dqkv = kiln.empty((B, T, 3 * C), gemm_dt, device=self.dev)  # the attention's
        # Views the steps use, made once.
        self.wte_v = self.wl["wte"][0][:V]
        self.dwte_v = self.g["wte"][0][:V]
        self.wpe_t = self.params[self.offsets["wpe"]:self.offsets["wpe"] + T * C]
        self.dwpe_t = self.grads[self.offsets["wpe"]:self.offsets["wpe"] + T * C]
        flat = self.encoded.reshape(-1)
        self.encoded_seq = [flat[b * T * C:(b + 1) * T * C] for b in range(B)]
        flat = self.dres.reshape(-1)
        self.dres_seq = [flat[b * T * C:(b + 1) * T * C] for b in range(B)]
        self.steps = 0

    # -- parameters -----------------------------------------------------------------
    def init(self, seed):
        """GPT-2's initialisation (gpt_init): weights normal(0, 0.02), the
        residual projections normal(0, 0.02 / sqrt(2 L)), biases 0, norms' weights 1."""
        resid = float(np.float32(0.02) / np.sqrt(np.float32(2.0 * self.cfg["layers"]),
                                                 dtype=np.float32))
        for name in TENSORS:
            view = self.params[self.offsets[name]:self.offsets[name] + self.sizes[name]]
            if name in ("wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"):
                sd = resid if name in ("attprojw", "fcprojw") else 0.02
                kiln.random_normal(view, seed, self.offsets[name], 0.0, sd)
            else:
                kiln.fill(view, 1.0 if name in ("ln1w", "ln2w", "lnfw") else 0.0)
        self._reset_optimizer()

    def _reset_optimizer(self):
        """Zero the AdamW state and refresh the GEMMs' copy of the weights."""
        kiln.fill(self.opt_m, 0.0)
        kiln.fill(self.opt_v, 0.0)
        if self.lp:
            kiln.cast(self.params, "bfloat16", out=self.params_lp)
        self.steps = 0

    def _to_lp(self, x):
        """x as the GEMMs read it: its bf16 shadow, cast now (x itself in f32)."""
        if not self.lp or x.dtype != "float32":
            return x
        y = self._lp[id(x)]
        kiln.cast(x, "bfloat16", out=y)
        return y

    def _lp_of(self, x):
        """x's shadow as the forward pass cast it (no cast now)."""
        return self._lp[id(x)] if self.lp and x.dtype == "float32" else x

    def load(self, path):
        """The parameters of an llm.c model file of this configuration."""
        cfg = read_header(path)
        if cfg != self.cfg:
            raise GPTError("%s: its model (%s) is not the one asked for (%s)" % (path, cfg, self.cfg))
        with open(path, "rb") as f:
            f.seek(1024)
            raw = f.read()
        if len(raw) % 4:
            raise GPTError("%s: its parameters are not whole float32s" % path)
        data = np.frombuffer(raw, np.float32)
        if data.size < self.nparams:
            raise GPTError("%s: truncated: the header promises %d parameters" % (path, self.nparams))
        if data.size > self.nparams:
            raise GPTError("%s: longer than its header's %d parameters" % (path, self.nparams))
        self.params.copy_from_host(data)
        self._reset_optimizer()

    def save(self, path):
        """The parameters as an llm.c model file, through path.tmp and rename."""
        c = self.cfg
        header = np.zeros(256, np.int32)
        header[:8] = [CKPT_MAGIC, CKPT_VERSION, c["max_seq"], c["vocab"], c["layers"],
                      c["heads"], c["channels"], c["padded_vocab"]]
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(header.tobytes())
            f.write(self.params.numpy().tobytes())
        os.replace(tmp, path)

    # -- forward ----------------------------------------------------------------------
    def forward(self, with_loss=True):
        """Logits of the batch in self.tokens into self.logits; with_loss: the
        mean cross-entropy against self.targets into self.loss."""
        C, L, NH = self.cfg["channels"], self.cfg["layers"], self.cfg["heads"]
        w, wl, lp = self.w, self.wl, self._to_lp
        kiln.gather_rows(w["wte"][0], self.tokens, out=self.encoded)
        for seq in self.encoded_seq:
            kiln.axpy(1.0, self.wpe_t, seq)
        for l in range(L):
            res = self.encoded if l == 0 else self.res3[l - 1]
            kiln.layernorm(res, w["ln1w"][l], w["ln1b"][l], LN_EPS, out=self.ln1[l])
            kiln.matmul(lp(self.ln1[l]), wl["qkvw"][l].T, self.qkv[l].reshape(-1, 3 * C),
                        bias=w["qkvb"][l])
            kiln.attention(lp(self.qkv[l]), NH, out=self.atty[l], lse=self.lse[l])
            # residual2 = res + atty W^T + b: the GEMM adds onto a copy of res.
            kiln.copy(res, out=self.res2[l])
            kiln.matmul(self.atty[l].reshape(-1, C), wl["attprojw"][l].T, self.res2[l],
                        beta=1.0, bias=w["attprojb"][l])
            kiln.layernorm(self.res2[l], w["ln2w"][l], w["ln2b"][l], LN_EPS, out=self.ln2[l])
            kiln.matmul(lp(self.ln2[l]), wl["fcw"][l].T, self.fch[l], bias=w["fcb"][l])
            kiln.gelu(self.fch[l], out=self.gelu[l])
            kiln.copy(self.res2[l], out=self.res3[l])
            kiln.matmul(lp(self.gelu[l]), wl["fcprojw"][l].T, self.res3[l], beta=1.0,
                        bias=w["fcprojb"][l])
        kiln.layernorm(self.res3[L - 1], w["lnfw"][0], w["lnfb"][0], LN_EPS, out=self.lnf)
        kiln.matmul(lp(self.lnf), self.wte_v.T, self.logits)
        if with_loss:
            kiln.softmax_cross_entropy(self.logits, self.targets, mean=self.loss)

    # -- backward ---------------------------------------------------------------------
    def _linear_backward(self, x, weight, dweight, dbias, dy, dx):
        """y = x W^T + b: dW = dy^T x, db = column sums of dy, dx = dy W (x
        and W as the forward pass read them)."""
        dyg = self._to_lp(dy)
        kiln.matmul(dyg.T, x, dweight)
        kiln.sum(dy, axis=0, out=dbias)
        kiln.matmul(dyg, weight, dx)

    def _layernorm_backward(self, x, name, l, dtmp, dres):
        """dres += the gradient to the norm's input from dtmp (overwritten)."""
        kiln.layernorm_backward(x, dtmp, self.w[name + "w"][l], LN_EPS, dx=dtmp,
                                dscale=self.g[name + "w"][l], dbias=self.g[name + "b"][l])
        kiln.axpy(1.0, dtmp, dres)

    def backward(self):
        """Every parameter's gradient into self.grads (after forward with the loss)."""
        C, L, NH = self.cfg["channels"], self.cfg["layers"], self.cfg["heads"]
        B, T, wl, g, was = self.B, self.T, self.wl, self.g, self._lp_of
        dres, dtmp = self.dres, self.dtmp
        kiln.softmax_cross_entropy_backward(self.logits, self.targets, self.dlogits,
                                            1.0 / (B * T))
        # The tied embedding: the output projection's gradient (overwrite);
        # the input embedding's scatter-add comes at the end.
        dl = self._to_lp(self.dlogits)
        kiln.matmul(dl.T, was(self.lnf), self.dwte_v)
        kiln.matmul(dl, self.wte_v, dtmp)
        kiln.fill(dres, 0.0)
        self._layernorm_backward(self.res3[L - 1], "lnf", 0, dtmp, dres)
        for l in reversed(range(L)):
            self._linear_backward(was(self.gelu[l]), wl["fcprojw"][l], g["fcprojw"][l],
                                  g["fcprojb"][l], dres, self.dbig1)
            kiln.unary_backward("gelu", self.fch[l], self.dbig1, self.dbig2)
            self._linear_backward(was(self.ln2[l]), wl["fcw"][l], g["fcw"][l], g["fcb"][l],
                                  self.dbig2, dtmp)
            self._layernorm_backward(self.res2[l], "ln2", l, dtmp, dres)
            self._linear_backward(self.atty[l].reshape(-1, C), wl["attprojw"][l],
                                  g["attprojw"][l], g["attprojb"][l], dres, dtmp)
            kiln.attention_backward(was(self.qkv[l]), self.atty[l],
                                    self._to_lp(dtmp).reshape(B, T, C), self.lse[l], NH,
                                    self.dqkv)
            self._linear_backward(was(self.ln1[l]), wl["qkvw"][l], g["qkvw"][l], g["qkvb"][l],
                                  self.dqkv.reshape(-1, 3 * C), dtmp)
            res = self.encoded if l == 0 else self.res3[l - 1]
            self._layernorm_backward(res, "ln1", l, dtmp, dres)
        # The embeddings: wte's token rows gain dres's rows; wpe's gradient
        # is the sum of dres over the sequences.
        kiln.scatter_add_rows(dres, self.tokens, g["wte"][0])
        kiln.copy(self.dres_seq[0], out=self.dwpe_t)
        for seq in self.dres_seq[1:]:
            kiln.axpy(1.0, seq, self.dwpe_t)

    def update(self, lr, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, max_norm=1.0):
        """Clip the global gradient norm to max_norm (0: no clipping) and take
        one AdamW step (which refreshes the GEMMs' bf16 copy of the weights)."""
        kiln.grad_norm([self.grads], out=self.norm)
        if max_norm > 0:
            kiln.clip_grad_norm([self.grads], max_norm, norm=self.norm)
        self.steps += 1
        kiln.adamw_step(self.params, self.grads, self.opt_m, self.opt_v, lr=lr, step=self.steps,
                        beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay,
                        w_copy=self.params_lp if self.lp else None)

    def step_loss(self, inputs, targets, backward=True):
        """Upload a batch, run the forward pass with the loss (and the
        backward pass) and read the loss back (the step's one wait)."""
        self.tokens.copy_from_host(inputs)
        self.targets.copy_from_host(targets)
        self.forward(True)
        if backward:
            self.backward()
        return float(self.loss.numpy()[0])


# ---- data ------------------------------------------------------------------------------

def load_tokens(path):
    """Tokens (uint32) of an llm.c token file, or a file's bytes."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise GPTError("%s: cannot open: %s" % (path, e.strerror)) from None
    if len(raw) >= 4 and np.frombuffer(raw[:4], np.int32)[0] == TOKENS_MAGIC:
        if len(raw) < 1024:
            raise GPTError("%s: truncated llm.c token file header" % path)
        h = np.frombuffer(raw[:1024], np.int32)
        if h[1] != 1:
            raise GPTError("%s: llm.c token file version %d; this program reads version 1 "
                           "(uint16 tokens)" % (path, h[1]))
        count = max(int(h[2]), 0)
        if len(raw) != 1024 + 2 * count:
            raise GPTError("%s: its header promises %d tokens, the file holds %d bytes of them"
                           % (path, count, len(raw) - 1024))
        return np.frombuffer(raw, np.uint16, offset=1024).astype(np.uint32)
    return np.frombuffer(raw, np.uint8).astype(np.uint32)


class Batches:
    """Consecutive windows of B T + 1 tokens, wrapping at the end (llm.c's loader)."""

    def __init__(self, tokens, B, T):
        self.t, self.bt, self.pos = tokens, B * T, 0

    def next(self):
        if self.pos + self.bt + 1 > self.t.size:
            self.pos = 0
        w = self.t[self.pos:self.pos + self.bt + 1]
        self.pos += self.bt
        return np.ascontiguousarray(w[:-1]), np.ascontiguousarray(w[1:])


def lr_at(o, step):
    """train_gpt.c's schedule, in its float32 arithmetic: linear warm-up,
    then a cosine down to a tenth of the peak."""
    f = np.float32
    lr = f(o.lr)
    if step < o.warmup:
        return float(lr * f(step + 1) / f(o.warmup))
    min_lr = f(0.1) * lr
    span = o.steps - o.warmup if o.steps > o.warmup else 1
    progress = (step - o.warmup) / span
    return float(min_lr + f(0.5) * (lr - min_lr) * f(1.0 + math.cos(math.pi * progress)))


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="training text (bytes) or llm.c token file")
    p.add_argument("--load", help="start from an llm.c checkpoint (fixes the model's shape)")
    p.add_argument("--save", help="at the end: the model (llm.c format)")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--channels", type=int, default=128)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=0, help="tokens per sequence (default: the context)")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--val-every", type=int, default=20)
    p.add_argument("--val-batches", type=int, default=4)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                   help="bf16: GEMMs and attention read bf16 copies, f32 master weights")
    p.add_argument("--device", default=None, help="kiln device selector")
    p.add_argument("--print-losses", action="store_true",
                   help="one line 'step N loss X' per step, nothing else per step")
    return p.parse_args(argv)


def main(argv=None):
    o = parse_args(argv)
    try:
        if o.load:
            cfg = read_header(o.load)
        else:
            cfg = {"max_seq": o.context, "vocab": o.vocab, "layers": o.layers, "heads": o.heads,
                   "channels": o.channels, "padded_vocab": (o.vocab + 127) // 128 * 128}
        if cfg["channels"] % cfg["heads"]:
            raise GPTError("%d heads do not divide %d channels" % (cfg["heads"], cfg["channels"]))
        T, B = o.seq or cfg["max_seq"], o.batch
        if T > cfg["max_seq"]:
            raise GPTError("--seq %d is longer than the model's context of %d positions"
                           % (T, cfg["max_seq"]))
        train = load_tokens(o.data)
        keep = train.size - train.size // 10
        train, val = train[:keep], train[keep:]
        for name, t in (("training", train), ("validation", val)):
            bad = np.flatnonzero(t >= cfg["vocab"])
            if bad.size:
                raise GPTError("token %d at position %d of the %s data is outside the model's "
                               "vocabulary of %d" % (t[bad[0]], bad[0], name, cfg["vocab"]))
            if t.size < B * T + 1 and (name == "training" or o.val_every):
                raise GPTError("the %s data holds %d tokens, fewer than one batch of %d x %d + 1"
                               % (name, t.size, B, T))
        dev = kiln.Device(o.device)
        m = GPT(cfg, B, T, dev, "bfloat16" if o.precision == "bf16" else "float32")
        if o.load:
            m.load(o.load)
        else:
            m.init(o.seed)
    except GPTError as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        return 1
    if not o.print_losses:
        print("%s: %s, %s, GPT-2 L %d, heads %d, C %d, context %d, vocab %d (%d parameters), "
              "batch %d x %d, %d training and %d validation tokens, %d steps"
              % (PROG, dev.name, o.precision, cfg["layers"], cfg["heads"], cfg["channels"], cfg["max_seq"],
                 cfg["vocab"], m.nparams, B, T, train.size, val.size, o.steps))
    batches = Batches(train, B, T)
    total, timed, loss = 0.0, 0, float("nan")
    for step in range(o.steps):
        t0 = time.perf_counter()
        loss = m.step_loss(*batches.next())
        m.update(lr_at(o, step), 0.9, 0.95, 1e-8, o.weight_decay, o.clip)
        dev.sync()
        dt = time.perf_counter() - t0
        if step > 0:  # the first step builds the kernels
            total += dt
            timed += 1
        if o.print_losses:
            print("step %d loss %.9g" % (step + 1, loss))
        else:
            print("step %d/%d: loss %.6f, lr %.3g, %.1f ms, %.0f tokens/s"
                  % (step + 1, o.steps, loss, lr_at(o, step), dt * 1e3, B * T / dt))
        if o.val_every and (step + 1) % o.val_every == 0:
            vb = Batches(val, B, T)  # every validation sees the same batches
            vl = sum(m.step_loss(*vb.next(), backward=False) for _ in range(o.val_batches))
            print("step %d: validation loss %.6f" % (step + 1, vl / o.val_batches))
        sys.stdout.flush()
    if o.save:
        m.save(o.save)
    if not o.print_losses:
        print("summary: steps %d, mean step %.3f ms, %.0f tokens/s, loss %.6f"
              % (o.steps, total / timed * 1e3 if timed else 0.0,
                 B * T * timed / total if timed else 0.0, loss))
    return 0


if __name__ == "__main__":
    sys.exit(main())
