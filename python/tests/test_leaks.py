"""Reference counting: 10,000 create/destroy cycles leave no Python memory
(tracemalloc) and no device buffer (the pools' statistics) behind."""

import gc
import tracemalloc

import numpy as np

import kiln

CYCLES = 10000


def cycle(dev, q, host, i):
    if i % 10 == 0:
        a = kiln.asarray(host, device=dev)          # buffer from the pool, upload
    else:
        a = kiln.full(4, 1.0, device=dev)           # buffer from the pool, fill
    b = kiln.exp(a)                                 # op output
    v = b[1:3]                                      # view (shares the buffer)
    ev = q.marker()                                 # event
    c = kiln.empty(4, queue=q)                      # second queue's pool
    cap = a.__dlpack__()                            # capsule holding the array
    out = np.empty(4, np.float32)
    e2 = c.copy_to_host_async(out, wait=[ev])       # event holding host memory
    if i % 10 == 5:
        r = b.numpy()                               # read_new (mapped on a CPU device)
        a.copy_from_host(host)                      # blocking write (mapped likewise)
        if i % 100 == 5:
            p = kiln.pinned_empty(4, device=dev)    # pinned host memory
            p[:] = r
    if i % 100 == 50:
        w = a.reshape(2, 2)
        wp = kiln.Packed(dev, w)                    # packed operand, closed or dropped
        wp.pack(w)
        kiln.matmul(w, wp)
        if i % 200 == 50:
            wp.close()
    del cap, v
    return b, e2


def test_no_leak(dev):
    q = dev.new_queue()
    host = np.arange(4, dtype=np.float32)
    big = kiln.zeros(1 << 19, device=dev)  # 2 MiB: numpy() places its copy in a page
    for _ in range(200):  # warm: kernels built, pools filled, caches made
        cycle(dev, q, host, 0)
    dev.sync()
    q.sync()
    gc.collect()
    base = (dev.queue.pool_stats(), q.pool_stats())
    tracemalloc.start()
    snap0 = tracemalloc.take_snapshot()
    for i in range(CYCLES):
        b, e2 = cycle(dev, q, host, i)
        if i % 1000 == 0:
            e2.wait()
            assert big.numpy()[-1] == 0
    e2.wait()
    np.testing.assert_allclose(b.numpy(), np.exp(np.ones(4)), rtol=1e-6)
    del b, e2
    dev.sync()
    q.sync()
    gc.collect()
    snap1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in snap1.compare_to(snap0, "filename")
                if "kiln" in s.traceback[0].filename or "test_leaks" in s.traceback[0].filename)
    assert grown < 64 * 1024, "Python memory grew by %d bytes over %d cycles" % (grown, CYCLES)
    for before, pool in zip(base, (dev.queue.pool_stats(), q.pool_stats())):
        assert pool["live_buffers"] == before["live_buffers"], (before, pool)
        assert pool["in_use_bytes"] == before["in_use_bytes"]
        # reuse, not growth: the pool's reservation stays at its warm size
        assert pool["reserved_bytes"] <= before["peak_reserved_bytes"] + (1 << 20), (before, pool)
        # most allocations reuse a cached block (a few find theirs still pending)
        assert pool["hits"] - before["hits"] >= 0.9 * CYCLES, (before, pool)


def test_program_cycles_no_leak(dev):
    src = "__kernel void k(__global float *x) { x[get_global_id(0)] += 1.0f; }"
    a = kiln.zeros(16, device=dev)
    for _ in range(20):
        kiln.Program(src, device=dev).kernel("k")(dev.queue, 16, a)
    dev.sync()
    gc.collect()
    tracemalloc.start()
    snap0 = tracemalloc.take_snapshot()
    for _ in range(500):
        kiln.Program(src, device=dev).kernel("k")(dev.queue, 16, a)
    dev.sync()
    gc.collect()
    snap1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in snap1.compare_to(snap0, "filename"))
    assert grown < 64 * 1024, grown
    np.testing.assert_array_equal(a.numpy(), [520.0] * 16)
