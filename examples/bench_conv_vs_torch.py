#!/usr/bin/env python3
"""Time the convolution layers of the Fashion-MNIST CNN (issue 21) through
kiln and through PyTorch on the CPU, same shapes, same thread count, and
print one table of median times and their ratio.

Layers (NCHW, 3x3 kernels, stride 1, padding 1, batch --batch, default 128):
  conv1  1 -> 32 channels on 28x28
  conv2 32 -> 64 channels on 28x28
For each: the forward pass with bias and ReLU fused (kiln: kiln_conv2d with
an epilogue; PyTorch: relu(conv2d(x, w, b))), the gradient to the input
(conv2 only: conv1's input is the image) and the gradients to the weights
and bias. kiln is called through ctypes on libkiln.so (--lib, default
build/runtime/libkiln.so) on the device --device selects (default: kiln's
default, PoCL here); operands stay on the device, and each timed run is
the call plus kiln_queue_finish. PyTorch runs torch.nn.grad's functions on
tensors in memory under torch.set_num_threads(--threads, default 2, the
cores PoCL uses here). Results are checked against PyTorch's first (max
abs difference relative to max |torch|) so a fast wrong answer cannot pass
unnoticed.

A ratio is kiln's speed over PyTorch's: torch_time / kiln_time (above 1:
kiln is faster). The script never runs in the test suite: speed is
measured by hand on an otherwise idle machine. Needs torch and numpy;
exits 77 without them.

usage: examples/bench_conv_vs_torch.py [--lib PATH] [--device SEL]
         [--batch N] [--threads N] [--runs N] [--dtype f32|bf16]
"""
import argparse
import ctypes as C
import os
import statistics
import sys
import time

KILN_F32, KILN_BF16 = 0, 2
ACT_RELU = 2  # KILN_ACT_RELU == KILN_UNARY_RELU, read from the header below


class Range(C.Structure):
    _fields_ = [("buffer", C.c_void_p), ("offset", C.c_size_t),
                ("count", C.c_size_t), ("dtype", C.c_int)]


class Image(C.Structure):
    _fields_ = [("buffer", C.c_void_p), ("offset", C.c_size_t),
                ("n", C.c_size_t), ("c", C.c_size_t), ("h", C.c_size_t),
                ("w", C.c_size_t), ("dtype", C.c_int), ("layout", C.c_int)]


class Params(C.Structure):
    _fields_ = [(f, C.c_size_t) for f in
                ("stride_h", "stride_w", "pad_h", "pad_w", "dilation_h",
                 "dilation_w", "groups")]


class Epilogue(C.Structure):
    _fields_ = [("alpha", C.c_float), ("beta", C.c_float),
                ("bias", C.POINTER(Range)), ("activation", C.c_int)]


def relu_value(root):
    """KILN_UNARY_RELU's value, from include/kiln/kiln_ops.h."""
    import re
    with open(os.path.join(root, "include", "kiln", "kiln_ops.h")) as f:
        m = re.search(r"KILN_UNARY_RELU\s*=\s*(\d+)", f.read())
    return int(m.group(1)) if m else ACT_RELU


class Kiln:
    def __init__(self, lib, device):
        self.k = C.CDLL(lib)
        self.k.kiln_last_error.restype = C.c_char_p
        self.ctx, self.q = C.c_void_p(), C.c_void_p()
        self.ok(self.k.kiln_context_create_default(
            device.encode() if device else None, C.byref(self.ctx)))
        self.ok(self.k.kiln_queue_create(self.ctx, 0, C.byref(self.q)))
        self.k.kiln_context_get_profile.restype = C.c_char_p
        self.bufs = []

    def ok(self, status):
        if status != 0:
            raise RuntimeError("kiln: %s" % self.k.kiln_last_error().decode())

    def upload(self, arr, dtype):
        """A device buffer holding the numpy array arr (f32) as dtype."""
        import numpy as np
        a = np.ascontiguousarray(arr, dtype=np.float32)
        if dtype == KILN_BF16:
            u = a.view(np.uint32)
            u = ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(np.uint16)
            a = u
        b = C.c_void_p()
        self.ok(self.k.kiln_buffer_create(self.ctx, C.c_size_t(a.nbytes), 0,
                                          C.byref(b)))
        r = Range(b, 0, a.size, dtype)
        self.ok(self.k.kiln_buffer_write_sync(self.q, a.ctypes.data_as(
            C.c_void_p), C.byref(r)))
        self.bufs.append(b)
        return b

    def zeros(self, count):
        import numpy as np
        return self.upload(np.zeros(count, np.float32), KILN_F32)

    def read(self, b, count):
        import numpy as np
        a = np.empty(count, np.float32)
        r = Range(b, 0, count, KILN_F32)
        self.ok(self.k.kiln_buffer_read_sync(self.q, C.byref(r),
                                             a.ctypes.data_as(C.c_void_p)))
        return a

    def finish(self):
        self.ok(self.k.kiln_queue_finish(self.q))


def median_time(fn, runs):
    fn()  # warm: kernel builds, workspace, caches
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--lib", default=os.path.join(root, "build", "runtime",
                                                  "libkiln.so"))
    ap.add_argument("--device", default=None)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    args = ap.parse_args()
    try:
        import numpy as np
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print("bench_conv_vs_torch: needs torch and numpy (%s)" % e)
        return 77
    torch.set_num_threads(args.threads)
    kdt = KILN_BF16 if args.dtype == "bf16" else KILN_F32
    kiln = Kiln(args.lib, args.device)
    relu = relu_value(root)
    print("# kiln profile %s, torch %s with %d threads, batch %d, %s"
          % (kiln.k.kiln_context_get_profile(kiln.ctx).decode(),
             torch.__version__, args.threads, args.batch, args.dtype))
    print("%-6s %-16s %10s %10s %8s %10s %9s" %
          ("layer", "pass", "kiln ms", "torch ms", "ratio", "GFLOP/s",
           "max diff"))
    n = args.batch
    gen = torch.Generator().manual_seed(1)
    for name, c, oc in (("conv1", 1, 32), ("conv2", 32, 64)):
        h = w = 28
        x = torch.rand(n, c, h, w, generator=gen) * 2 - 1
        wt = (torch.rand(oc, c, 3, 3, generator=gen) * 2 - 1) / (3 * c) ** 0.5
        b = torch.rand(oc, generator=gen) * 2 - 1
        dy = torch.rand(n, oc, h, w, generator=gen) * 2 - 1
        if kdt == KILN_BF16:  # both sides see the same rounded inputs
            x, wt, dy = (t.bfloat16().float() for t in (x, wt, dy))
        xb, wb = kiln.upload(x.numpy(), kdt), kiln.upload(wt.numpy(), kdt)
        bb, dyb = kiln.upload(b.numpy(), KILN_F32), kiln.upload(dy.numpy(), kdt)
        yb, dxb = kiln.zeros(n * oc * h * w), kiln.zeros(n * c * h * w)
        dwb, dbb = kiln.zeros(oc * c * 9), kiln.zeros(oc)
        X = Image(xb, 0, n, c, h, w, kdt, 0)
        W = Image(wb, 0, oc, c, 3, 3, kdt, 0)
        Y = Image(yb, 0, n, oc, h, w, KILN_F32, 0)
        DY = Image(dyb, 0, n, oc, h, w, kdt, 0)
        DX = Image(dxb, 0, n, c, h, w, KILN_F32, 0)
        DW = Image(dwb, 0, oc, c, 3, 3, KILN_F32, 0)
        P = Params(1, 1, 1, 1, 1, 1, 1)
        BR, DBR = Range(bb, 0, oc, KILN_F32), Range(dbb, 0, oc, KILN_F32)
        E = Epilogue(1.0, 0.0, C.pointer(BR), relu)
        flops = 2.0 * n * oc * h * w * c * 9
        k = kiln.k

        def kiln_fwd():
            kiln.ok(k.kiln_conv2d(kiln.q, C.byref(X), C.byref(W), C.byref(Y),
                                  C.byref(P), C.byref(E), C.c_size_t(0),
                                  None, None))
            kiln.finish()

        def kiln_bwd_data():
            kiln.ok(k.kiln_conv2d_backward_data(
                kiln.q, C.byref(DY), C.byref(W), C.byref(DX), C.byref(P),
                C.c_size_t(0), None, None))
            kiln.finish()

        def kiln_bwd_weights():
            kiln.ok(k.kiln_conv2d_backward_weights(
                kiln.q, C.byref(X), C.byref(DY), C.byref(DW), C.byref(DBR),
                C.byref(P), C.c_size_t(0), None, None))
            kiln.finish()

        with torch.no_grad():
            tx = x.bfloat16() if kdt == KILN_BF16 else x
            tw = wt.bfloat16() if kdt == KILN_BF16 else wt
            tdy = dy.bfloat16() if kdt == KILN_BF16 else dy
            tb = b.bfloat16() if kdt == KILN_BF16 else b
            passes = [
                ("forward+bias+relu", kiln_fwd,
                 lambda: F.relu(F.conv2d(tx, tw, tb, padding=1)),
                 lambda: kiln.read(yb, n * oc * h * w),
                 lambda: F.relu(F.conv2d(x.double(), wt.double(), b.double(),
                                         padding=1))),
                ("backward data", kiln_bwd_data,
                 lambda: torch.nn.grad.conv2d_input(tx.shape, tw, tdy,
                                                    padding=1),
                 lambda: kiln.read(dxb, n * c * h * w),
                 lambda: torch.nn.grad.conv2d_input(x.shape, wt.double(),
                                                    dy.double(), padding=1)),
                ("backward weights", kiln_bwd_weights,
                 lambda: (torch.nn.grad.conv2d_weight(tx, tw.shape, tdy,
                                                      padding=1),
                          tdy.sum((0, 2, 3))),
                 lambda: kiln.read(dwb, oc * c * 9),
                 lambda: torch.nn.grad.conv2d_weight(x.double(), wt.shape,
                                                     dy.double(), padding=1)),
            ]
            for pname, kf, tf, kread, ref in passes:
                if name == "conv1" and pname == "backward data":
                    continue  # the first layer's input needs no gradient
                kt = median_time(kf, args.runs)
                tt = median_time(tf, args.runs)
                want = ref().flatten().numpy()
                got = kread()
                diff = float(np.max(np.abs(got - want)) /
                             max(np.max(np.abs(want)), 1e-30))
                print("%-6s %-16s %10.3f %10.3f %7.2fx %10.1f %9.1e" %
                      (name, pname, kt * 1e3, tt * 1e3, tt / kt,
                       flops / kt / 1e9, diff))
    return 0


if __name__ == "__main__":
    sys.exit(main())
