#!/usr/bin/env python3
"""Why kiln._kiln is a hand-written C extension: the per-call cost of a warm
16-element axpy through a cffi API-mode binding (built here, in a temporary
folder, against build/runtime's libkiln) against the extension's kiln.axpy.
Both sides build the kiln_range descriptors from Python array objects at
each call, as a binding must. A benchmark, not a test.

  python3 python/bench/cffi_vs_ext.py [--build build] [--device pocl]
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

CDEF = """
typedef struct kiln_context kiln_context; typedef struct kiln_queue kiln_queue;
typedef struct kiln_buffer kiln_buffer; typedef struct kiln_event kiln_event;
typedef enum kiln_dtype { KILN_F32 = 0, ... } kiln_dtype;
typedef struct kiln_range { kiln_buffer *buffer; size_t offset; size_t count;
                            kiln_dtype dtype; } kiln_range;
typedef enum kiln_status { KILN_OK = 0, ... } kiln_status;
kiln_status kiln_context_create_default(const char *selector, kiln_context **out);
kiln_status kiln_queue_create(kiln_context *ctx, unsigned flags, kiln_queue **out);
kiln_status kiln_buffer_create(kiln_context *ctx, size_t size_bytes, unsigned flags,
                               kiln_buffer **out);
kiln_status kiln_axpy(kiln_queue *queue, const kiln_range *x, const kiln_range *y,
                      float alpha, size_t num_wait, kiln_event *const *wait_list,
                      kiln_event **out_event);
kiln_status kiln_queue_finish(kiln_queue *queue);
"""


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--device", default="pocl")
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=7)
    o = p.parse_args()
    build = os.path.abspath(o.build)
    from cffi import FFI
    tmp = tempfile.mkdtemp(prefix="kiln-cffi-")
    ffi = FFI()
    ffi.cdef(CDEF)
    ffi.set_source("_kiln_cffi_probe", "#include <kiln/kiln.h>",
                   include_dirs=[os.path.join(ROOT, "include"), os.path.join(build, "include")],
                   library_dirs=[os.path.join(build, "runtime")], libraries=["kiln"],
                   runtime_library_dirs=[os.path.join(build, "runtime")])
    ffi.compile(tmpdir=tmp)
    sys.path.insert(0, tmp)
    sys.path.insert(0, os.path.join(build, "python"))
    import kiln
    from _kiln_cffi_probe import ffi as cffi, lib

    ctx, q = cffi.new("kiln_context **"), cffi.new("kiln_queue **")
    xb, yb = cffi.new("kiln_buffer **"), cffi.new("kiln_buffer **")
    assert lib.kiln_context_create_default(o.device.encode(), ctx) == 0
    assert lib.kiln_queue_create(ctx[0], 0, q) == 0
    assert lib.kiln_buffer_create(ctx[0], 64, 0, xb) == 0
    assert lib.kiln_buffer_create(ctx[0], 64, 0, yb) == 0

    class Arr:  # what a cffi binding's array would hold
        def __init__(self, buf):
            self.buf, self.offset, self.size = buf, 0, 16

    X, Y = Arr(xb[0]), Arr(yb[0])

    def cffi_axpy(alpha, x, y):
        xr = cffi.new("kiln_range *", (x.buf, x.offset, x.size, 0))
        yr = cffi.new("kiln_range *", (y.buf, y.offset, y.size, 0))
        if lib.kiln_axpy(q[0], xr, yr, alpha, 0, cffi.NULL, cffi.NULL) != 0:
            raise RuntimeError("kiln_axpy failed")
        return y

    dev = kiln.Device(o.device)
    kx, ky = kiln.full(16, 1.0, device=dev), kiln.full(16, 1.0, device=dev)

    def loop(f, sync):
        for _ in range(200):
            f()
        sync()
        t0 = time.perf_counter()
        for _ in range(o.calls):
            f()
        sync()
        return (time.perf_counter() - t0) / o.calls * 1e6

    c, e = [], []
    for _ in range(o.rounds):  # alternating, for a machine whose load moves
        c.append(loop(lambda: cffi_axpy(1e-3, X, Y), lambda: lib.kiln_queue_finish(q[0])))
        e.append(loop(lambda: kiln.axpy(1e-3, kx, ky), dev.sync))
    print("| warm 16-element axpy, %d rounds | us/call (median) |" % o.rounds)
    print("| --- | --- |")
    print("| cffi API mode | %.2f |" % np.median(c))
    print("| C extension (kiln.axpy) | %.2f |" % np.median(e))
    print("| cffi / extension (median of the rounds' ratios) | %.2f |"
          % np.median(np.array(c) / np.array(e)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
