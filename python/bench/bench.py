#!/usr/bin/env python3
"""Speed of the Python binding (a benchmark, never a test): prints one table.

  python3 python/bench/bench.py [--device SEL] [--build build] [--mlp-steps N]

1. Per-call cost of a warm 16-element axpy: kiln.axpy from Python against
   kiln_axpy from C (build/python/bench/axpy_call), and PyOpenCL's launch of
   the same kernel when pyopencl is importable. enqueue: N calls back to
   back, then one wait, per call; wait: each call followed by waiting for it.
2. kiln.asarray and Array.numpy() of 64 MiB of float32 against a NumPy copy
   of the same array (x.copy()), as the ratio copy time / kiln time.
3. The Fashion-MNIST MLP step (examples/train_fashion_mnist.py) against the
   C trainer (build/examples/train_fashion_mnist), same arguments, median
   step time of each, run alternately.
Each comparison alternates its two sides for several rounds and reports
the median of the per-round figures and ratios, since the load of a shared
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


def axpy_pyopencl(n):
    try:
        import pyopencl as cl
    except ImportError:
        return None
    ctx = cl.create_some_context(interactive=False)
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


def mlp(dev_sel, build, steps, rounds):
    args = ["--steps", str(steps), "--limit", str(256 * steps), "--test-limit", "256"]
    if dev_sel:
        args += ["--device", dev_sel]
    c_exe = os.path.join(build, "examples", "train_fashion_mnist")
    py = [sys.executable, os.path.join(ROOT, "examples", "train_fashion_mnist.py")]
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
    res = {"c": [], "python": []}
    for _ in range(rounds):
        for name, cmd in (("c", [c_exe]), ("python", py)):
            out = subprocess.run(cmd + args, capture_output=True, text=True, env=env, check=True)
            ms = float(re.search(r"median step ([0-9.]+) ms", out.stdout).group(1))
            res[name].append(ms)
    ratio = float(np.median(np.array(res["python"]) / np.array(res["c"])))
    return float(np.median(res["c"])), float(np.median(res["python"])), ratio


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default=None)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--mlp-steps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=5)
    o = p.parse_args()
    sys.path.insert(0, os.path.join(o.build, "python"))
    import kiln
    dev = kiln.Device(o.device)
    print("device: %s; Python %s, NumPy %s" % (dev.name, sys.version.split()[0], np.__version__))
    axpy_c = [os.path.join(o.build, "python", "bench", "axpy_call"), dev.info["selector"],
              str(o.calls), "3"]
    rounds = {"c_e": [], "c_w": [], "py_e": [], "py_w": [], "ocl_e": [], "ocl_w": []}
    for _ in range(o.rounds):
        c = json.loads(subprocess.run(axpy_c, capture_output=True, text=True,
                                      check=True).stdout)
        pe, pw = axpy_python(kiln, dev, o.calls)
        rounds["c_e"].append(c["enqueue_us"])
        rounds["c_w"].append(c["wait_us"])
        rounds["py_e"].append(pe)
        rounds["py_w"].append(pw)
        ocl = axpy_pyopencl(o.calls)
        if ocl:
            rounds["ocl_e"].append(ocl[0])
            rounds["ocl_w"].append(ocl[1])
    med = {k: float(np.median(v)) if v else None for k, v in rounds.items()}
    ratio_e = float(np.median(np.array(rounds["py_e"]) / np.array(rounds["c_e"])))
    ratio_w = float(np.median(np.array(rounds["py_w"]) / np.array(rounds["c_w"])))
    print("\n| 16-element axpy, warm (%d rounds) | enqueue (us/call) | call + wait (us/call) |"
          % o.rounds)
    print("| --- | --- | --- |")
    print("| C, kiln_axpy | %.2f | %.2f |" % (med["c_e"], med["c_w"]))
    print("| Python, kiln.axpy | %.2f | %.2f |" % (med["py_e"], med["py_w"]))
    print("| Python / C (median of the rounds' ratios) | %.2f | %.2f |" % (ratio_e, ratio_w))
    if med["ocl_e"] is not None:
        print("| PyOpenCL, same kernel | %.2f | %.2f |" % (med["ocl_e"], med["ocl_w"]))
    else:
        print("| PyOpenCL | not installed | not installed |")
    print("\n| 64 MiB float32 | ms | x.copy() alongside, ms | x.copy() time / this |")
    print("| --- | --- | --- | --- |")
    for name, t, c, r in transfers(kiln, dev):
        print("| %s | %.2f | %.2f | %.2f |" % (name, t * 1e3, c * 1e3, r))
    if o.mlp_steps:
        cm, pm, ratio = mlp(dev.info["selector"], o.build, o.mlp_steps, o.rounds)
        print("\n| MLP step (784-1024-1024-10, batch 256; %d rounds of %d steps) | median ms |"
              % (o.rounds, o.mlp_steps))
        print("| --- | --- |")
        print("| C trainer | %.2f |" % cm)
        print("| Python (examples/train_fashion_mnist.py) | %.2f |" % pm)
        print("| Python / C (median of the rounds' ratios) | %.3f |" % ratio)
    return 0


if __name__ == "__main__":
    sys.exit(main())
