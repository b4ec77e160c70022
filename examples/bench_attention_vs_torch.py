#!/usr/bin/env python3
"""Time kiln's fused attention forward + backward against PyTorch CPU's
F.scaled_dot_product_attention on one shape (default GPT-2 124M's
attention in llm.c's default run: B=4, T=64, 12 heads of 64, causal), on
the same data, and print the median times, their ratio and the largest
differences between the two results.

kiln runs on its default device (KILN_DEVICE, or --device) through
libkiln's C API by ctypes, on llm.c's fused (B, T, 3C) qkv buffer;
PyTorch splits the same qkv into heads as nanoGPT does (view, transpose),
calls SDPA with is_causal=True and backpropagates a fixed dout, with
--threads threads (default 2). One iteration is forward + backward +
waiting for the result (kiln: kiln_queue_finish). Needs torch and numpy;
without them the script says so and exits 77. Run by hand on an otherwise
idle machine; never in the test suite. GFLOP/s counts 4 hs flops per (query, key)
pair forward (QK^T and PV) and 10 hs backward, halved by the causal mask.

usage: examples/bench_attention_vs_torch.py [--lib build/runtime/libkiln.so]
         [--device SEL] [--threads N] [--batch B] [--seq T] [--heads H]
         [--head-size HS] [--runs N] [--no-causal]
"""
import argparse
import ctypes as C
import os
import statistics
import sys
import time


class Matrix(C.Structure):
    _fields_ = [("buffer", C.c_void_p), ("offset", C.c_size_t),
                ("rows", C.c_size_t), ("cols", C.c_size_t),
                ("ld", C.c_size_t), ("batch_stride", C.c_size_t),
                ("dtype", C.c_int), ("layout", C.c_int), ("trans", C.c_int)]


class Range(C.Structure):
    _fields_ = [("buffer", C.c_void_p), ("offset", C.c_size_t),
                ("count", C.c_size_t), ("dtype", C.c_int)]


class Params(C.Structure):
    _fields_ = [("scale", C.c_float), ("causal", C.c_bool)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--lib", default=os.path.join(here, "..", "build",
                                                  "runtime", "libkiln.so"))
    ap.add_argument("--device", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--head-size", type=int, default=64)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--no-causal", action="store_true")
    a = ap.parse_args()
    try:
        import numpy as np
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print(f"bench_attention_vs_torch: needs torch and numpy ({e})")
        return 77
    torch.set_num_threads(a.threads)
    B, T, H, D = a.batch, a.seq, a.heads, a.head_size
    Cc, causal = H * D, not a.no_causal

    lib = C.CDLL(a.lib)
    lib.kiln_last_error.restype = C.c_char_p

    def ok(status, what):
        if status != 0:
            sys.exit(f"{what}: status {status}: "
                     f"{lib.kiln_last_error().decode()}")

    ctx, q = C.c_void_p(), C.c_void_p()
    sel = a.device.encode() if a.device else None
    ok(lib.kiln_context_create_default(C.c_char_p(sel), C.byref(ctx)),
       "kiln_context_create_default")
    ok(lib.kiln_queue_create(ctx, 0, C.byref(q)), "kiln_queue_create")
    lib.kiln_context_get_profile.restype = C.c_char_p
    profile = lib.kiln_context_get_profile(ctx).decode()

    rng = np.random.default_rng(1)
    qkv = rng.uniform(-1, 1, (B, T, 3 * Cc)).astype(np.float32)
    dout = rng.uniform(-1, 1, (B, T, Cc)).astype(np.float32)

    def buffer(n_floats, data=None):
        b = C.c_void_p()
        ok(lib.kiln_buffer_create(ctx, C.c_size_t(4 * n_floats), 0,
                                  C.byref(b)), "kiln_buffer_create")
        if data is not None:
            r = Range(b.value, 0, n_floats, 0)
            ok(lib.kiln_buffer_write_sync(q, data.ctypes.data_as(C.c_void_p),
                                          C.byref(r)), "kiln_buffer_write_sync")
        return b

    bq, bo = buffer(qkv.size, qkv), buffer(B * T * Cc)
    bg, bx = buffer(dout.size, dout), buffer(qkv.size)
    bl = buffer(B * H * T)
    mq = Matrix(bq.value, 0, T, 3 * Cc, 0, T * 3 * Cc, 0, 0, 0)
    mo = Matrix(bo.value, 0, T, Cc, 0, T * Cc, 0, 0, 0)
    mg = Matrix(bg.value, 0, T, Cc, 0, T * Cc, 0, 0, 0)
    mx = Matrix(bx.value, 0, T, 3 * Cc, 0, T * 3 * Cc, 0, 0, 0)
    rl = Range(bl.value, 0, B * H * T, 0)
    params = Params(0.0, causal)
    sz = C.c_size_t

    def kiln_step():
        ok(lib.kiln_attention_forward(q, sz(B), sz(H), C.byref(mq), C.byref(mo),
                                      C.byref(rl), C.byref(params), sz(0),
                                      None, None), "kiln_attention_forward")
        ok(lib.kiln_attention_backward(q, sz(B), sz(H), C.byref(mq),
                                       C.byref(mo), C.byref(mg), C.byref(rl),
                                       C.byref(mx), C.byref(params), sz(0),
                                       None, None), "kiln_attention_backward")
        ok(lib.kiln_queue_finish(q), "kiln_queue_finish")

    tq = torch.from_numpy(qkv.copy()).requires_grad_(True)
    tg = torch.from_numpy(dout.copy())

    def torch_step():
        tq.grad = None
        qq, kk, vv = tq.split(Cc, dim=2)
        qq = qq.view(B, T, H, D).transpose(1, 2)
        kk = kk.view(B, T, H, D).transpose(1, 2)
        vv = vv.view(B, T, H, D).transpose(1, 2)
        y = F.scaled_dot_product_attention(qq, kk, vv, is_causal=causal)
        y = y.transpose(1, 2).contiguous().view(B, T, Cc)
        y.backward(tg)
        return y

    def timed(step):
        for _ in range(5):
            step()
        times = []
        for _ in range(a.runs):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        return statistics.median(times), min(times)

    # Interleave the two so that a change in the machine's load hits both.
    tk, tt = [], []
    for _ in range(3):
        tk.append(timed(kiln_step))
        tt.append(timed(torch_step))
    # The best of the three medians, and the fastest single iteration (on a
    # loaded machine the closest to what the code does alone).
    t_kiln, t_torch = min(t[0] for t in tk), min(t[0] for t in tt)
    b_kiln, b_torch = min(t[1] for t in tk), min(t[1] for t in tt)

    out = np.empty((B, T, Cc), np.float32)
    dq = np.empty_like(qkv)
    ok(lib.kiln_buffer_read_sync(q, C.byref(Range(bo.value, 0, out.size, 0)),
                                 out.ctypes.data_as(C.c_void_p)), "read out")
    ok(lib.kiln_buffer_read_sync(q, C.byref(Range(bx.value, 0, dq.size, 0)),
                                 dq.ctypes.data_as(C.c_void_p)), "read dqkv")
    y = torch_step().detach().numpy()
    g = tq.grad.numpy()
    flops = 4.0 * B * H * T * T * D * (0.5 if causal else 1.0) * 3.5

    print(f"attention B={B} T={T} heads={H} hs={D} "
          f"{'causal' if causal else 'full'}, f32; kiln profile {profile}, "
          f"torch {torch.__version__} with {a.threads} threads")
    print(f"{'fwd+bwd':24}{'median':>12}{'fastest':>12}{'GFLOP/s':>10}")
    for name, t, b in (("kiln", t_kiln, b_kiln),
                       ("torch SDPA", t_torch, b_torch)):
        print(f"{name:24}{t * 1e3:9.3f} ms{b * 1e3:9.3f} ms"
              f"{flops / b / 1e9:10.1f}")
    print(f"ratio kiln / torch: {t_kiln / t_torch:.2f} (medians), "
          f"{b_kiln / b_torch:.2f} (fastest)")
    print(f"max |out diff| {np.abs(out - y).max():.2e}, "
          f"max |dqkv diff| {np.abs(dq - g).max():.2e}")
    for b in (bq, bo, bg, bx, bl):
        lib.kiln_buffer_destroy(b)
    lib.kiln_queue_destroy(q)
    lib.kiln_context_destroy(ctx)
    return 0


if __name__ == "__main__":
    sys.exit(main())
