#!/usr/bin/env python3
"""train_fashion_mnist.py: examples/train_fashion_mnist.c in Python with kiln.

The same multilayer perceptron (784 -> H -> H -> 10, ReLU, batch 256,
AdamW or SGD with momentum), the same initialisation (kiln's Philox stream
of the seed, each tensor at its offset in one parameter buffer), the same
batch order (the C program's Fisher-Yates shuffle from the seed) and the
same sequence of kiln ops, so one seed gives the C trainer's losses:

    python3 examples/train_fashion_mnist.py --device pocl --epochs 1
    python3 examples/train_fashion_mnist.py --hidden 64 --steps 3 --limit 768 \
        --seed 7 --print-losses        # compare with the C program's output

Each dense layer is one kiln.matmul (bias and ReLU fused); the rest of a
step is kiln's training ops. The next batch is uploaded on a second queue
while the current step computes, as in C. The test-set evaluation reads
the weights packed once per evaluation (kiln.Packed), as the C trainer
does: the same bits as the weights as they are, without packing them into
the queue's workspace at every matmul. Needs the Fashion-MNIST files of
Debian's dataset-fashion-mnist (or --data DIR).
"""

import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np

try:
    import kiln
except ImportError:  # run from a checkout: the package built by Meson
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "build", "python"))
    import kiln

INPUTS, CLASSES = 784, 10
M64 = (1 << 64) - 1


def load_idx(data, split, limit):
    """Images (uint8, n x 784) and labels (uint32) of a split."""
    def read(name, magic):
        path = os.path.join(data, "%s-%s-idx%d-ubyte.gz" % (split, name, 3 if magic == 2051 else 1))
        try:
            with gzip.open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            sys.exit("train_fashion_mnist.py: %s is missing (apt-get install "
                     "dataset-fashion-mnist, or --data DIR)" % path)
        got, n = struct.unpack(">II", raw[:8])
        if got != magic:
            sys.exit("train_fashion_mnist.py: %s: magic %d, not %d" % (path, got, magic))
        if magic == 2051:
            return np.frombuffer(raw, np.uint8, offset=16).reshape(n, INPUTS)
        return np.frombuffer(raw, np.uint8, offset=8).astype(np.uint32)

    images, labels = read("images", 2051), read("labels", 2049)
    if limit:
        images, labels = images[:limit], labels[:limit]
    return images, labels


def shuffle(n, seed, epoch):
    """The C trainer's Fisher-Yates shuffle (splitmix64 from seed, epoch)."""
    state = (seed * 0x100000001b3 + epoch) & M64
    order = list(range(n))
    for i in range(n, 1, -1):
        state = (state + 0x9e3779b97f4a7c15) & M64
        z = state
        z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M64
        z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M64
        z ^= z >> 31
        j = z % i
        order[i - 1], order[j] = order[j], order[i - 1]
    return np.array(order, np.uint32)


class MLP:
    """784 -> hidden -> hidden -> 10 on one queue; parameters in one f32
    Array (W1, b1, W2, b2, W3, b3; W as out x in), gradients in another
    with the same offsets (examples/mlp.h)."""

    def __init__(self, dev, batch, hidden):
        self.dev, self.q = dev, dev.queue
        sizes = [(INPUTS, hidden), (hidden, hidden), (hidden, CLASSES)]
        self.layers, off = [], 0
        for i, o in sizes:
            self.layers.append((i, o, off, off + i * o))
            off += i * o + o
        self.nparams = off
        new = lambda *shape: kiln.empty(shape, queue=self.q)  # noqa: E731
        self.params, self.grads = new(off), new(off)
        self.m, self.v = new(off), new(off)
        self.h = [new(batch, o) for _, o, _, _ in self.layers]
        self.dz = new(batch * max(hidden, CLASSES))
        self.dh = new(batch * hidden)
        self.steps = 0
        self.packed, self.packed_steps = None, None
        # Views: per layer W (out x in), b, and their gradients.
        self.w = [self.params[w:w + i * o].reshape(o, i) for i, o, w, _ in self.layers]
        self.b = [self.params[b:b + o] for _, o, _, b in self.layers]
        self.dw = [self.grads[w:w + i * o].reshape(o, i) for i, o, w, _ in self.layers]
        self.db = [self.grads[b:b + o] for _, o, _, b in self.layers]

    def init(self, seed):
        for (i, o, w, b), wv, bv in zip(self.layers, self.w, self.b):
            bound = float(np.float32(1.0) / np.sqrt(np.float32(i)))
            kiln.random_uniform(wv.reshape(-1), seed, w, -bound, bound)
            kiln.random_uniform(bv, seed, b, -bound, bound)
        kiln.fill(self.m, 0.0)
        kiln.fill(self.v, 0.0)
        self.steps = 0
        self.packed_steps = None

    def pack_weights(self):
        """The weights packed for inference, packed again when an optimizer
        step (or init) changed them: the first inference of an evaluation
        packs, the others reuse (examples/mlp.c)."""
        if self.packed_steps == self.steps:
            return
        if self.packed is None:
            self.packed = [kiln.Packed(self.dev, w.T) for w in self.w]
        for wp, w in zip(self.packed, self.w):
            wp.pack(w.T)
        self.packed_steps = self.steps

    def forward(self, x, rows, wait=None, training=True):
        """Logits of x's rows; inference (training=False) reads the packed
        weights (training changes them at every step)."""
        if not training:
            self.pack_weights()
        a = x
        for l, (i, o, _, _) in enumerate(self.layers):
            h = self.h[l][:rows]
            w = self.w[l].T if training else self.packed[l]
            kiln.matmul(a, w, h, bias=self.b[l],
                        activation=None if l == len(self.layers) - 1 else "relu", wait=wait)
            wait = None
            a = h
        return a

    def gradients(self, x, labels, rows, loss, wait=None):
        logits = self.forward(x, rows, wait)
        kiln.softmax_cross_entropy(logits, labels, None, loss)
        dz = self.dz[:rows * CLASSES].reshape(rows, CLASSES)
        kiln.softmax_cross_entropy_backward(logits, labels, dz, 1.0 / rows)
        for l in range(len(self.layers) - 1, -1, -1):
            i, o, _, _ = self.layers[l]
            dz = self.dz[:rows * o].reshape(rows, o)
            a = x if l == 0 else self.h[l - 1][:rows]
            kiln.matmul(dz.T, a, self.dw[l])
            kiln.sum(dz, axis=0, out=self.db[l])
            if l == 0:
                break
            da = self.dh[:rows * i].reshape(rows, i)
            kiln.matmul(dz, self.w[l], da)
            kiln.unary_backward("relu", self.h[l - 1][:rows].reshape(-1), da.reshape(-1),
                                self.dz[:rows * i], from_output=True)

    def step(self, opt):
        self.steps += 1
        if opt.optimizer == "sgd":
            kiln.sgd_step(self.params, self.grads, self.m, lr=opt.lr, momentum=0.9,
                          weight_decay=opt.weight_decay)
        else:
            kiln.adamw_step(self.params, self.grads, self.m, self.v, lr=opt.lr,
                            step=self.steps, beta1=0.9, beta2=0.999, eps=1e-8,
                            weight_decay=opt.weight_decay)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default=None, help="kiln selector (default: KILN_DEVICE, else GPU, else CPU)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--test-limit", type=int, default=0)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--print-losses", action="store_true")
    o = p.parse_args(argv)
    if o.lr is None:
        o.lr = 0.05 if o.optimizer == "sgd" else 1e-3

    train_x, train_y = load_idx(o.data, "train", o.limit)
    test_x, test_y = load_idx(o.data, "t10k", o.test_limit)
    B = o.batch
    steps_per_epoch = len(train_y) // B
    if steps_per_epoch == 0:
        sys.exit("train_fashion_mnist.py: fewer training examples than a batch")
    total = steps_per_epoch * o.epochs
    if o.steps and o.steps < total:
        total = o.steps
    used = np.concatenate([shuffle(len(train_y), o.seed, e)[:steps_per_epoch * B]
                           for e in range((total + steps_per_epoch - 1) // steps_per_epoch)])

    dev = kiln.Device(o.device)
    q, up = dev.queue, dev.new_queue()
    model = MLP(dev, B, o.hidden)
    slots_x = [kiln.empty((B, INPUTS), queue=up) for _ in range(2)]
    slots_y = [kiln.empty(B, "uint32", queue=up) for _ in range(2)]
    host_x = [np.empty((B, INPUTS), np.float32) for _ in range(2)]
    host_y = [np.empty(B, np.uint32) for _ in range(2)]
    losses = kiln.empty(steps_per_epoch, queue=q)
    tx = kiln.asarray(test_x.astype(np.float32) * np.float32(1.0 / 255.0), queue=q)
    ty = kiln.asarray(test_y, queue=q)
    correct = kiln.empty(1, "uint32", queue=q)
    model.init(o.seed)
    print("train_fashion_mnist.py: %s, %s lr %g, weight decay %g, batch %d, hidden %d, "
          "%d training and %d test examples, %d steps per epoch, seed %d"
          % (dev.name, o.optimizer, o.lr, o.weight_decay, B, o.hidden, len(train_y),
             len(test_y), steps_per_epoch, o.seed))

    def stage(t, s):
        idx = used[t * B:(t + 1) * B]
        np.multiply(train_x[idx], np.float32(1.0 / 255.0), out=host_x[s], dtype=np.float32)
        host_y[s][:] = train_y[idx]
        slots_x[s].copy_from_host_async(host_x[s])
        ev = slots_y[s].copy_from_host_async(host_y[s])
        up.flush()
        return ev

    up_ev = [stage(0, 0), None]
    done = [None, None]
    step_ms = []
    t = 0
    for e in range(o.epochs):
        if t >= total:
            break
        t0 = last = time.perf_counter()
        first = t
        for k in range(steps_per_epoch):
            if t >= total:
                break
            s, ns = t % 2, 1 - t % 2
            model.gradients(slots_x[s], slots_y[s], B, losses[k:k + 1], wait=[up_ev[s]])
            model.step(o)
            up_ev[s] = None
            done[s] = q.marker()
            q.flush()
            if done[ns] is not None:
                done[ns].wait()
                done[ns] = None
                now = time.perf_counter()
                if k > 0:
                    step_ms.append((now - last) * 1e3)
                last = now
            if t + 1 < total:
                up_ev[ns] = stage(t + 1, ns)
            t += 1
        q.sync()
        done = [None, None]
        epoch_s = time.perf_counter() - t0
        n = t - first
        step_loss = losses[:n].numpy()
        if o.print_losses:
            for k in range(n):
                print("step %d loss %.9g" % (first + k + 1, step_loss[k]))
        kiln.fill(correct, 0)
        for start in range(0, len(test_y), B):
            rows = min(B, len(test_y) - start)
            logits = model.forward(tx[start:start + rows], rows, training=False)
            kiln.accuracy_count(logits, ty[start:start + rows], correct, True)
        acc = 100.0 * int(correct.numpy()[0]) / len(test_y)
        print("epoch %d/%d: loss %.6f, test accuracy %.2f%%, %.2f s (%d steps)"
              % (e + 1, o.epochs, float(np.mean(step_loss, dtype=np.float64)), acc, epoch_s, n))
    if step_ms:
        print("summary: steps %d, median step %.3f ms" % (t, float(np.median(step_ms))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
