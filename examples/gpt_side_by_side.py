#!/usr/bin/env python3
"""Train the GPT-2 of examples/train_gpt.c in kiln and in PyTorch (CPU) side
by side, from the same llm.c checkpoint, on the same batches, with the same
schedule, and print one table: step time, tokens per second and the loss
after each step; with --generate N also generation speed with a key/value
cache (kiln's generate_gpt against PyTorch's own cached loop).

By default the model has GPT-2 124M's shape (12 layers, 12 heads, 768
channels, 50257 tokens, context 1024) at llm.c's batch (B 4, T 64), from
GPT-2's random initialisation (kiln's, saved with --steps 0 and loaded by
both), on the text of --data as bytes. PyTorch uses --threads threads and
AdamW(fused=True) where the build has it. Needs torch; exits 77 without it.
Never run by the test suite: speed is measured here, by hand.

usage: examples/gpt_side_by_side.py --data FILE [--steps N] [--threads N]
         [--layers N --heads N --channels N --vocab N --context N]
         [--batch N --seq N] [--generate N] [--build DIR] [--device SEL]
"""
import argparse
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time


def read_checkpoint(path):
    import torch
    with open(path, "rb") as f:
        h = struct.unpack("<256i", f.read(1024))
        maxt, v, L, nh, c, vp = h[2], h[3], h[4], h[5], h[6], h[7]
        flat = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
    shapes = [("wte", (vp, c)), ("wpe", (maxt, c)), ("ln1w", (L, c)),
              ("ln1b", (L, c)), ("qkvw", (L, 3 * c, c)), ("qkvb", (L, 3 * c)),
              ("attprojw", (L, c, c)), ("attprojb", (L, c)), ("ln2w", (L, c)),
              ("ln2b", (L, c)), ("fcw", (L, 4 * c, c)), ("fcb", (L, 4 * c)),
              ("fcprojw", (L, c, 4 * c)), ("fcprojb", (L, c)), ("lnfw", (c,)),
              ("lnfb", (c,))]
    p, off = {}, 0
    for name, shape in shapes:
        n = 1
        for s in shape:
            n *= s
        p[name] = flat[off:off + n].reshape(shape).clone()
        off += n
    p["wte"] = p["wte"][:v].clone()  # the padded rows are never read
    return p, dict(maxt=maxt, v=v, L=L, nh=nh, c=c)


def forward(p, cfg, tokens, cache=None, pos=0):
    """GPT-2 as gpt.c computes it; with cache (a list of per-layer [k, v])
    the keys and values of earlier positions are reused."""
    import torch
    f = torch.nn.functional
    B, T = tokens.shape
    C, nh = cfg["c"], cfg["nh"]
    x = p["wte"][tokens] + p["wpe"][pos:pos + T]
    for l in range(cfg["L"]):
        h = f.layer_norm(x, (C,), p["ln1w"][l], p["ln1b"][l], 1e-5)
        q, k, v = (h @ p["qkvw"][l].T + p["qkvb"][l]).split(C, dim=-1)
        q, k, v = (t.view(B, T, nh, C // nh).transpose(1, 2) for t in (q, k, v))
        if cache is not None:
            if cache[l] is not None:
                k = torch.cat([cache[l][0], k], 2)
                v = torch.cat([cache[l][1], v], 2)
            cache[l] = (k, v)
        y = f.scaled_dot_product_attention(q, k, v, is_causal=cache is None
                                           or T > 1)
        x = x + y.transpose(1, 2).reshape(B, T, C) @ p["attprojw"][l].T + p["attprojb"][l]
        h = f.layer_norm(x, (C,), p["ln2w"][l], p["ln2b"][l], 1e-5)
        h = f.gelu(h @ p["fcw"][l].T + p["fcb"][l], approximate="tanh")
        x = x + h @ p["fcprojw"][l].T + p["fcprojb"][l]
    x = f.layer_norm(x, (C,), p["lnfw"], p["lnfb"], 1e-5)
    return x @ p["wte"].T


def lr_at(step, steps, lr, warmup):
    """train_gpt.c's schedule: linear warm-up, cosine to lr / 10."""
    import math
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(steps - warmup, 1)
    return 0.1 * lr + 0.5 * (lr - 0.1 * lr) * (1 + math.cos(math.pi * progress))


def torch_train(p, cfg, data, args):
    import torch
    params = [t.requires_grad_(True) for t in p.values()]
    kw = dict(lr=args.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    try:
        opt = torch.optim.AdamW(params, fused=True, **kw)
        fused = "fused"
    except (TypeError, RuntimeError):
        opt = torch.optim.AdamW(params, **kw)
        fused = "foreach"
    B, T = args.batch, args.seq
    pos, losses, times = 0, [], []
    for step in range(args.steps):
        if pos + B * T + 1 > len(data):
            pos = 0
        win = data[pos:pos + B * T + 1]
        pos += B * T
        x, y = win[:-1].view(B, T), win[1:].view(B, T)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.steps, args.lr, args.warmup)
        t0 = time.perf_counter()
        logits = forward(p, cfg, x)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, cfg["v"]),
                                                 y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(loss.item())
        times.append(time.perf_counter() - t0)
    return losses, times, fused


def torch_generate(p, cfg, prompt, n):
    import torch
    with torch.no_grad():
        cache = [None] * cfg["L"]
        t0 = time.perf_counter()
        logits = forward(p, cfg, prompt, cache, 0)
        tok = logits[:, -1].argmax(-1, keepdim=True)
        first = time.perf_counter() - t0
        pos = prompt.shape[1]
        for _ in range(n - 1):
            logits = forward(p, cfg, tok, cache, pos)
            tok = logits[:, -1].argmax(-1, keepdim=True)
            pos += 1
        total = time.perf_counter() - t0
    return first, (n - 1) / (total - first)


def run(cmd):
    print("+", " ".join(cmd), file=sys.stderr)
    res = subprocess.run(cmd, capture_output=True, text=True,
                         errors="replace")
    if res.returncode != 0:
        sys.exit(f"{cmd[0]} failed:\n{res.stdout}{res.stderr}")
    return res.stdout + res.stderr


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--build", default=os.path.join(here, "..", "build"))
    ap.add_argument("--device", default="pocl")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--channels", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--generate", type=int, default=0)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("gpt_side_by_side: PyTorch is not installed", file=sys.stderr)
        return 77
    torch.set_num_threads(args.threads)
    train = os.path.join(args.build, "examples", "train_gpt")
    gen = os.path.join(args.build, "examples", "generate_gpt")
    shape = ["--layers", str(args.layers), "--heads", str(args.heads),
             "--channels", str(args.channels), "--vocab", str(args.vocab),
             "--context", str(args.context), "--batch", str(args.batch),
             "--seq", str(args.seq), "--device", args.device,
             "--data", args.data, "--val-every", "0"]
    with open(args.data, "rb") as f:
        raw = f.read()
    data = torch.tensor(list(raw[:len(raw) - len(raw) // 10]), dtype=torch.long)
    with tempfile.TemporaryDirectory() as d:
        init = os.path.join(d, "init.ckpt")
        run([train] + shape + ["--steps", "0", "--save", init])
        out = run([train] + shape + ["--load", init, "--steps", str(args.steps),
                                     "--warmup", str(args.warmup),
                                     "--lr", repr(args.lr)])
        k_losses = [float(v) for v in re.findall(r"^step \d+/\d+: loss ([\d.]+)",
                                                 out, re.M)]
        k_ms = [float(v) for v in re.findall(r", ([\d.]+) ms,", out)]
        p, cfg = read_checkpoint(init)
        t_losses, t_s, fused = torch_train(p, cfg, data, args)
        if args.generate:
            gout = run([gen, "--load", init, "--tokens", str(args.generate),
                        "--temperature", "0", "--prompt", "\n" * 8,
                        "--device", args.device]
                       if args.vocab == 256 else
                       [gen, "--load", init, "--tokens", str(args.generate),
                        "--temperature", "0", "--prompt", "10,10,10,10,10,10,10,10",
                        "--device", args.device])
            g = re.search(r"first token after ([\d.]+) ms.*then ([\d.]+) tokens/s",
                          gout)
            p2, _ = read_checkpoint(init)
            tf, ttps = torch_generate(p2, cfg, torch.full((1, 8), 10), args.generate)
    k_step = statistics.median(k_ms[1:])
    t_step = statistics.median(t_s[1:]) * 1e3
    toks = args.batch * args.seq
    print(f"GPT-2 L{args.layers} H{args.heads} C{args.channels} V{args.vocab}, "
          f"B {args.batch} T {args.seq}, {args.steps} steps; kiln on "
          f"{args.device} vs PyTorch {torch.__version__} CPU ({args.threads} "
          f"threads, AdamW {fused})")
    print("| measure | kiln | PyTorch | kiln / PyTorch |")
    print("| --- | --- | --- | --- |")
    print(f"| median step time (steps 2..) | {k_step:.0f} ms | {t_step:.0f} ms "
          f"| {k_step / t_step:.2f} |")
    print(f"| tokens per second | {toks / k_step * 1e3:.0f} | "
          f"{toks / t_step * 1e3:.0f} | {t_step / k_step:.2f} |")
    worst = max(abs(a - b) for a, b in zip(k_losses, t_losses))
    print(f"| loss after {args.steps} steps | {k_losses[-1]:.5f} | "
          f"{t_losses[-1]:.5f} | max difference over the steps {worst:.1e} |")
    if args.generate:
        kf, ktps = float(g.group(1)), float(g.group(2))
        print(f"| generation, first token (prompt of 8) | {kf:.1f} ms | "
              f"{tf * 1e3:.1f} ms | {kf / (tf * 1e3):.2f} |")
        print(f"| generation, tokens/s at batch 1 | {ktps:.1f} | {ttps:.1f} | "
              f"{ktps / ttps:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
