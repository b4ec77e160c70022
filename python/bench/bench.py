#!/usr/bin/env python3
"""Speed of the Python binding (a benchmark, never a test): prints tables.

  python3 python/bench/bench.py [--device SEL] [--build build] [--rounds N]
      [--calls N] [--mlp-steps N] [--gpt-steps N] [--gpt-124m-steps N]
      [--gpt-data FILE] [--skip axpy,transfers,mlp,inference]

1. Per-call cost of a warm 16-element axpy: kiln.axpy from Python against
   kiln_axpy from C (build/python/bench/axpy_call) and PyOpenCL's launch of
   an axpy kernel on the same device (a row saying why when pyopencl is
   not importable). enqueue: N calls back to back, then one wait, per
   call; wait: each call followed by waiting for it.
2. kiln.asarray and Array.numpy() of 64 MiB of float32 against a NumPy copy
   of the same array (x.copy()), as the ratio copy time / kiln time.
3. The GPT-2 step: examples/train_gpt.py against the C trainer
   (build/examples/train_gpt), same arguments, at a small shape and at
   GPT-2 124M's (B 4, T 64), their mean step times run alternately.
4. The Fashion-MNIST MLP step (examples/train_fashion_mnist.py) against the
   C trainer (build/examples/train_fashion_mnist), same arguments, median
   step time of each, run alternately.
5. The MLP's batch-256 inference (three matmuls with bias and ReLU fused,
   PyTorch's (out, in) weights used as w.T) with its weights as they are
   against kiln.Packed weights packed once, alternately; the outputs are
   checked to be identical.
Each comparison alternates its sides for several rounds and reports the
median of the per-round figures and ratios, since the load of a shared
machine moves between rounds more than within one.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")


def median_of(fn, reps=3):
    ts = []
    for _ in range(reps):
        ts.append(fn())
    return float(np.median(ts))


def axpy_python(kiln, dev, n):
    x = kiln.full(16, 1.0, device=dev)
    y = kiln.full(16, 1.0, device=dev)
    for _ in range(100):
        kiln.axpy(1e-3, x, y)
    dev.sync()
    axpy, sync = kiln.axpy, dev.queue.sync

    def enqueue():
        t0 = time.perf_counter()
        for _ in range(n):
            axpy(1e-3, x, y)
        sync()
        return (time.perf_counter() - t0) / n * 1e6

    def wait():
        m = n // 10
        t0 = time.perf_counter()
        for _ in range(m):
            axpy(1e-3, x, y, event=True)[1].wait()
        return (time.perf_counter() - t0) / m * 1e6

    return median_of(enqueue), median_of(wait)


def ocl_version():
    import pyopencl as cl
    return cl.VERSION_TEXT


def axpy_pyopencl(dev, n):
    """PyOpenCL's launch of an axpy kernel on kiln's device (matched by
    name), each call through Kernel.__call__ as PyOpenCL's users write it.
    Raises ImportError when pyopencl is missing."""
    import pyopencl as cl
    devices = [d for p in cl.get_platforms() for d in p.get_devices() if d.name == dev.name]
    if not devices:
        raise ImportError("PyOpenCL sees no device named %r" % dev.name)
    ctx = cl.Context([devices[0]])
    q = cl.CommandQueue(ctx)
    prg = cl.Program(ctx, "__kernel void axpy(__global const float *x, __global float *y, "
                          "float a) { size_t i = get_global_id(0); y[i] = fma(a, x[i], y[i]); }"
                     ).build()
    mf = cl.mem_flags
    x = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.ones(16, np.float32))
    y = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.ones(16, np.float32))
    k = prg.axpy
    a = np.float32(1e-3)
    for _ in range(100):
        k(q, (16,), None, x, y, a)
    q.finish()

    def enqueue():
        t0 = time.perf_counter()
        for _ in range(n):
            k(q, (16,), None, x, y, a)
        q.finish()
        return (time.perf_counter() - t0) / n * 1e6

    def wait():
        m = n // 10
        t0 = time.perf_counter()
        for _ in range(m):
            k(q, (16,), None, x, y, a).wait()
        return (time.perf_counter() - t0) / m * 1e6

    return median_of(enqueue), median_of(wait)


def transfers(kiln, dev, reps=9):
    """Each measure alternates with the NumPy copy it is compared with, and
    the ratio is the median of the per-round ratios (the machine's load
    moves between rounds, less within one)."""
    x = np.random.default_rng(0).standard_normal(16 << 20).astype(np.float32)  # 64 MiB
    a = kiln.asarray(x, device=dev)
    buf = np.empty_like(x)
    kiln.asarray(x, device=dev).numpy()
    cases = {
        "kiln.asarray(x)": lambda: kiln.asarray(x, device=dev),
        "a.numpy()": lambda: a.numpy(),
        "a.copy_to_host(out=buf)": lambda: a.copy_to_host(out=buf),
        "np.copyto(np.empty_like(x), x)": lambda: np.copyto(np.empty_like(x), x),
    }
    rows = []
    for name, fn in cases.items():
        ratios, times, copies = [], [], []
        for _ in range(reps):
            t0 = time.perf_counter()
            r = x.copy()
            t1 = time.perf_counter()
            del r
            r = fn()
            t2 = time.perf_counter()
            del r
            copies.append(t1 - t0)
            times.append(t2 - t1)
            ratios.append((t1 - t0) / (t2 - t1))
        rows.append((name, float(np.median(times)), float(np.median(copies)),
                     float(np.median(ratios))))
    return rows


def c_against_python(program, args, dev_sel, build, rounds, pattern):
    """Run build/examples/PROGRAM and examples/PROGRAM.py with the same
    arguments, alternately, `rounds` times each; the step time each prints
    (pattern's group 1, ms). Returns the medians of C and Python and the
    median of the rounds' Python / C ratios."""
    if dev_sel:
        args = args + ["--device", dev_sel]
    c_exe = os.path.join(build, "examples", program)
    py = [sys.executable, os.path.join(ROOT, "examples", program + ".py")]
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
    res = {"c": [], "python": []}
    for _ in range(rounds):
        for name, cmd in (("c", [c_exe]), ("python", py)):
            out = subprocess.run(cmd + args, capture_output=True, text=True, env=env, check=True)
            res[name].append(float(re.search(pattern, out.stdout).group(1)))
    ratio = float(np.median(np.array(res["python"]) / np.array(res["c"])))
    return float(np.median(res["c"])), float(np.median(res["python"])), ratio


def mlp(dev_sel, build, steps, rounds):
    """The MLP trainers' median step times."""
    args = ["--steps", str(steps), "--limit", str(256 * steps), "--test-limit", "256"]
    return c_against_python("train_fashion_mnist", args, dev_sel, build, rounds,
                            r"median step ([0-9.]+) ms")


GPT_SHAPES = {
    "small": ["--layers", "4", "--heads", "4", "--channels", "128", "--context", "64",
              "--batch", "8"],
    "124M": ["--layers", "12", "--heads", "12", "--channels", "768", "--context", "1024",
             "--vocab", "50257", "--batch", "4", "--seq", "64"],
}


def gpt(dev_sel, build, data, shape, steps, rounds):
    """The GPT-2 trainers' mean step times (steps 2..N, as both print in
    their summary line)."""
    args = GPT_SHAPES[shape] + ["--data", data, "--steps", str(steps), "--val-every", "0"]
    return c_against_python("train_gpt", args, dev_sel, build, rounds,
                            r"mean step ([0-9.]+) ms")


def mlp_inference(kiln, dev, rounds, reps=20):
    """Median ms of the MLP's batch-256 forward pass with plain and with
    packed weights, and the median of the rounds' packed / plain ratios."""
    rng = np.random.default_rng(0)
    sizes = [784, 1024, 1024, 10]
    x = kiln.asarray(rng.standard_normal((256, 784)), device=dev)
    ws = [kiln.asarray(rng.standard_normal((o, i)) / np.sqrt(i), device=dev)
          for i, o in zip(sizes, sizes[1:])]
    bs = [kiln.asarray(rng.standard_normal(o) * 0.1, device=dev) for o in sizes[1:]]
    hs = [kiln.empty((256, o), device=dev) for o in sizes[1:]]
    plain = [w.T for w in ws]
    packed = [kiln.Packed(dev, w) for w in plain]
    for p, w in zip(packed, plain):
        p.pack(w)

    def forward(weights):
        h = x
        for i, (w, b, out) in enumerate(zip(weights, bs, hs)):
            kiln.matmul(h, w, out, bias=b, activation="relu" if i < 2 else None)
            h = out
        dev.sync()
        return h

    want = forward(plain).numpy()
    if not np.array_equal(forward(packed).numpy(), want):
        raise SystemExit("packed inference differs from unpacked")

    def timed(weights):
        t0 = time.perf_counter()
        for _ in range(reps):
            forward(weights)
        return (time.perf_counter() - t0) / reps * 1e3

    res = {"plain": [], "packed": []}
    for _ in range(rounds):
        for name, weights in (("plain", plain), ("packed", packed)):
            res[name].append(timed(weights))
    ratio = float(np.median(np.array(res["packed"]) / np.array(res["plain"])))
    return float(np.median(res["plain"])), float(np.median(res["packed"])), ratio


def axpy_table(kiln, dev, o):
    """The per-call table: C, Python and PyOpenCL alternating in each round."""
    axpy_c = [os.path.join(o.build, "python", "bench", "axpy_call"), dev.info["selector"],
              str(o.calls), "3"]
    rounds = {"c_e": [], "c_w": [], "py_e": [], "py_w": [], "ocl_e": [], "ocl_w": []}
    ocl_missing = None
    for _ in range(o.rounds):
        c = json.loads(subprocess.run(axpy_c, capture_output=True, text=True,
                                      check=True).stdout)
        pe, pw = axpy_python(kiln, dev, o.calls)
        rounds["c_e"].append(c["enqueue_us"])
        rounds["c_w"].append(c["wait_us"])
        rounds["py_e"].append(pe)
        rounds["py_w"].append(pw)
        try:
            ocl = axpy_pyopencl(dev, o.calls)
        except ImportError as e:
            ocl_missing = str(e)
            continue
        rounds["ocl_e"].append(ocl[0])
        rounds["ocl_w"].append(ocl[1])
    med = {k: float(np.median(v)) if v else None for k, v in rounds.items()}

    def ratio(a, b):
        return float(np.median(np.array(rounds[a]) / np.array(rounds[b])))

    print("\n| 16-element axpy, warm (%d rounds) | enqueue (us/call) | call + wait (us/call) |"
          % o.rounds)
    print("| --- | --- | --- |")
    print("| C, kiln_axpy | %.2f | %.2f |" % (med["c_e"], med["c_w"]))
    print("| Python, kiln.axpy | %.2f | %.2f |" % (med["py_e"], med["py_w"]))
    if ocl_missing is None:
        print("| PyOpenCL %s, the same kernel (kernel call) | %.2f | %.2f |"
              % (ocl_version(), med["ocl_e"], med["ocl_w"]))
    else:
        print("| PyOpenCL | skipped: %s (pip install pyopencl, or Debian's "
              "python3-pyopencl) | |" % ocl_missing)
    print("| kiln Python / C (median of the rounds' ratios) | %.2f | %.2f |"
          % (ratio("py_e", "c_e"), ratio("py_w", "c_w")))
    if ocl_missing is None:
        print("| kiln Python / PyOpenCL | %.2f | %.2f |"
              % (ratio("py_e", "ocl_e"), ratio("py_w", "ocl_w")))
        print("| PyOpenCL / C | %.2f | %.2f |" % (ratio("ocl_e", "c_e"), ratio("ocl_w", "c_w")))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default=None)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--mlp-steps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--gpt-data", default=os.path.join(ROOT, "README.md"),
                   help="the GPT trainers' data (any text; default README.md)")
    p.add_argument("--gpt-steps", type=int, default=11,
                   help="steps of the small GPT run (0: skip the GPT table)")
    p.add_argument("--gpt-124m-steps", type=int, default=4,
                   help="steps of the 124M-shape run, B 4, T 64 (0: skip it)")
    p.add_argument("--gpt-rounds", type=int, default=1)
    p.add_argument("--skip", default="",
                   help="comma-separated: axpy, transfers, mlp, inference")
    o = p.parse_args()
    sys.path.insert(0, os.path.join(o.build, "python"))
    import kiln
    dev = kiln.Device(o.device)
    print("device: %s; Python %s, NumPy %s" % (dev.name, sys.version.split()[0], np.__version__))
    skip = set(filter(None, o.skip.split(",")))
    if "axpy" not in skip:
        axpy_table(kiln, dev, o)
    if "transfers" not in skip:
        print("\n| 64 MiB float32 | ms | x.copy() alongside, ms | x.copy() time / this |")
        print("| --- | --- | --- | --- |")
        for name, t, c, r in transfers(kiln, dev):
            print("| %s | %.2f | %.2f | %.2f |" % (name, t * 1e3, c * 1e3, r))
    if o.gpt_steps or o.gpt_124m_steps:
        print("\n| GPT-2 step, f32 (mean of steps 2-N; %d round(s)) | C train_gpt, ms | "
              "examples/train_gpt.py, ms | Python / C |" % o.gpt_rounds)
        print("| --- | --- | --- | --- |")
        for shape, steps in (("small", o.gpt_steps), ("124M", o.gpt_124m_steps)):
            if steps:
                cm, pm, ratio = gpt(dev.info["selector"], o.build, o.gpt_data, shape, steps,
                                    o.gpt_rounds)
                print("| %s (%s) | %.1f | %.1f | %.3f |"
                      % (shape, " ".join(GPT_SHAPES[shape]), cm, pm, ratio))
    if o.mlp_steps and "mlp" not in skip:
        cm, pm, ratio = mlp(dev.info["selector"], o.build, o.mlp_steps, o.rounds)
        print("\n| MLP step (784-1024-1024-10, batch 256; %d rounds of %d steps) | median ms |"
              % (o.rounds, o.mlp_steps))
        print("| --- | --- |")
        print("| C trainer | %.2f |" % cm)
        print("| Python (examples/train_fashion_mnist.py) | %.2f |" % pm)
        print("| Python / C (median of the rounds' ratios) | %.3f |" % ratio)
    if "inference" not in skip:
        plain, packed, ratio = mlp_inference(kiln, dev, o.rounds)
        print("\n| MLP inference (784-1024-1024-10, batch 256, f32; %d rounds of 20) | "
              "median ms |" % o.rounds)
        print("| --- | --- |")
        print("| weights as they are, `matmul(h, w.T)` | %.2f |" % plain)
        print("| weights packed once, `kiln.Packed` (outputs identical) | %.2f |" % packed)
        print("| packed / as they are (median of the rounds' ratios) | %.3f |" % ratio)
    return 0


if __name__ == "__main__":
    sys.exit(main())
