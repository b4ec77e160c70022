#!/usr/bin/env python3
"""Train the GPT-2 of examples/train_gpt.c in kiln, in PyTorch (CPU) and in
Karpathy's llm.c (train_gpt2.c) side by side, from the same llm.c checkpoint,
on the same batches, with the same schedule, and print one table: step time,
tokens per second and the losses; with --generate N also generation with a
key/value cache at batch 1 and 8 (kiln's generate_gpt against PyTorch's own
cached loop): time to the first token and tokens per second.

By default the model has GPT-2 124M's shape (12 layers, 12 heads, 768
channels, 50257 tokens, context 1024) at llm.c's batch (B 4, T 64), from
GPT-2's random initialisation (kiln's, saved with --steps 0 and loaded by
all three). The text of --data is read as bytes (or as tokens, if it is an
llm.c token file); its first nine tenths become llm.c's training token
file, the rest its validation file, and all three read those tokens.

Fairness: llm.c's train_gpt2.c fixes its run in main() (41 steps, shuffled
batches, a validation every 10 steps and sampling every 20, AdamW at a
constant lr 1e-4 with betas 0.9/0.999, no weight decay, no clipping). The
script builds a copy with its own Makefile flags (`make train_gpt2`) and
changes main() only: B, T and the step count; the batches in file order
(no shuffling, as kiln and this script read them); no validation or
sampling (kiln runs with --val-every 0); the update through llm.c's own
gpt2_update with train_gpt's schedule (linear warm-up, cosine to lr/10),
betas 0.9/0.95 and --weight-decay, after a global-norm clip as kiln's and
PyTorch's (an OpenMP loop, inside the timed step). Every change is a
textual replacement that must match once, so another llm.c version fails
loudly rather than run something else. PyTorch uses --threads threads and
AdamW(fused=True) where the build has it, llm.c OMP_NUM_THREADS=--threads.

llm.c comes from --llmc: a source tree (copied, never changed), or anything
`git clone` takes (default https://github.com/karpathy/llm.c); --llmc none
leaves its column out. Needs torch; exits 77 without it. Never run by the
test suite: speed is measured here, by hand.

usage: examples/gpt_side_by_side.py --data FILE [--steps N] [--threads N]
         [--llmc DIR|URL|none] [--layers N --heads N --channels N
         --vocab N --context N] [--batch N --seq N] [--lr X --warmup N
         --weight-decay X --clip X] [--generate N] [--build DIR]
         [--device SEL]
"""
import argparse
import array
import os
import re
import shlex
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

TOKENS_MAGIC = 20240520


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


def read_tokens(path):
    """An llm.c token file's tokens, or a file's bytes."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) >= 1024 and struct.unpack_from("<i", raw)[0] == TOKENS_MAGIC:
        n = struct.unpack_from("<i", raw, 8)[0]
        toks = array.array("H")
        toks.frombytes(raw[1024:1024 + 2 * n])
        if sys.byteorder != "little":
            toks.byteswap()
        return list(toks)
    return list(raw)


def write_tokens(path, toks):
    """llm.c's token file: 256 int32 (magic, version 1, count), uint16s."""
    header = [0] * 256
    header[0], header[1], header[2] = TOKENS_MAGIC, 1, len(toks)
    body = array.array("H", toks)
    if sys.byteorder != "little":
        body.byteswap()
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(body.tobytes())


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
    kw = dict(lr=args.lr, betas=(0.9, 0.95), eps=1e-8,
              weight_decay=args.weight_decay)
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
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(params, args.clip)
        opt.step()
        losses.append(loss.item())
        times.append(time.perf_counter() - t0)
    return losses, times, fused


def torch_generate(p, cfg, prompt, n):
    """Greedy decoding with a key/value cache: (seconds to the first token,
    tokens per second per sequence after it)."""
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


def run(cmd, **kw):
    print("+", shlex.join(cmd), file=sys.stderr)
    res = subprocess.run(cmd, capture_output=True, text=True,
                         errors="replace", **kw)
    if res.returncode != 0:
        sys.exit(f"{cmd[0]} failed:\n{res.stdout}{res.stderr}")
    return res.stdout + res.stderr


# llm.c's train_gpt2.c main(), changed as the docstring says. Each pattern
# must match exactly once.
LLMC_HELPERS = r'''
/* gpt_side_by_side.py: train_gpt.c's schedule and a global-norm clip as
 * kiln's and PyTorch's (coefficient max_norm / (norm + 1e-6) when below 1). */
static float kiln_lr(int step) {
    const float lr = %(lr)r, min_lr = 0.1f * lr;
    const int warmup = %(warmup)d, steps = %(steps)d;
    if (step < warmup) return lr * (float)(step + 1) / (float)warmup;
    const double span = steps > warmup ? (double)(steps - warmup) : 1;
    const double progress = (double)(step - warmup) / span;
    return min_lr + 0.5f * (lr - min_lr) *
        (float)(1.0 + cos(3.14159265358979323846 * progress));
}
static void kiln_clip(GPT2 *model, float max_norm) {
    if (max_norm <= 0.0f) return;
    float *g = model->grads_memory;
    const long n = (long)model->num_parameters;
    double ss = 0.0;
    #pragma omp parallel for reduction(+:ss)
    for (long i = 0; i < n; i++) ss += (double)g[i] * g[i];
    const float coef = max_norm / ((float)sqrt(ss) + 1e-6f);
    if (!(coef < 1.0f)) return;
    #pragma omp parallel for
    for (long i = 0; i < n; i++) g[i] *= coef;
}

int main() {'''


def patch_llmc(src, args):
    repl = [
        (r"int main\(\) \{", LLMC_HELPERS % dict(lr=args.lr, warmup=args.warmup,
                                                steps=args.steps)),
        (r"int B = 4;", f"int B = {args.batch};"),
        (r"int T = 64;", f"int T = {args.seq};"),
        (r"dataloader_init\(&train_loader, train_tokens, B, T, 0, 1, 1\);",
         "dataloader_init(&train_loader, train_tokens, B, T, 0, 1, 0);"),
        (r"for \(int step = 0; step <= 40; step\+\+\)",
         f"for (int step = 0; step < {args.steps}; step++)"),
        (r"if \(step % 10 == 0\)", "if (0)"),
        (r"if \(step > 0 && step % 20 == 0\)", "if (0)"),
        (r"gpt2_update\(&model, 1e-4f, 0\.9f, 0\.999f, 1e-8f, 0\.0f, step\+1\);",
         f"kiln_clip(&model, {args.clip!r}f); gpt2_update(&model, kiln_lr(step), "
         f"0.9f, 0.95f, 1e-8f, {args.weight_decay!r}f, step+1);"),
    ]
    for pat, new in repl:
        src, n = re.subn(pat, lambda m: new, src)
        if n != 1:
            sys.exit(f"llm.c's train_gpt2.c: '{pat}' matched {n} times, not "
                     "once: another version of llm.c than this script knows")
    return src


def build_llmc(source, work, args):
    """A patched train_gpt2 built by llm.c's Makefile; returns its path."""
    tree = os.path.join(work, "llm.c")
    if os.path.isfile(os.path.join(source, "train_gpt2.c")):
        shutil.copytree(source, tree, ignore=shutil.ignore_patterns(".git"))
    else:
        run(["git", "clone", "--quiet", "--depth", "1", source, tree])
    path = os.path.join(tree, "train_gpt2.c")
    with open(path) as f:
        src = f.read()
    with open(path, "w") as f:
        f.write(patch_llmc(src, args))
    run(["make", "-C", tree, "train_gpt2"])
    return os.path.join(tree, "train_gpt2")


def llmc_train(binary, work, init, train_bin, val_bin, args):
    """train_gpt2 in a directory where its fixed paths lead to our files."""
    d = os.path.join(work, "llmc-run")
    data = os.path.join(d, "dev", "data", "tinyshakespeare")
    os.makedirs(data)
    os.symlink(init, os.path.join(d, "gpt2_124M.bin"))
    os.symlink(train_bin, os.path.join(data, "tiny_shakespeare_train.bin"))
    os.symlink(val_bin, os.path.join(data, "tiny_shakespeare_val.bin"))
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    out = run([binary], cwd=d, env=env)
    steps = re.findall(r"^step (\d+): train loss ([\d.]+) \(took ([\d.]+) ms\)",
                       out, re.M)
    if len(steps) != args.steps:
        sys.exit(f"llm.c printed {len(steps)} steps, not {args.steps}:\n{out}")
    return [float(s[1]) for s in steps], [float(s[2]) for s in steps]


def kiln_generate(gen, init, vocab, n, batch, device):
    prompt = ["--prompt", "\n" * 8] if vocab == 256 else \
        ["--prompt", ",".join(["10"] * 8)]
    out = run([gen, "--load", init, "--tokens", str(n), "--temperature", "0",
               "--batch", str(batch), "--device", device] + prompt)
    g = re.search(r"first token after ([\d.]+) ms.*then ([\d.]+) tokens/s", out)
    if not g:
        sys.exit(f"generate_gpt printed no timing:\n{out}")
    return float(g.group(1)) / 1e3, float(g.group(2))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--build", default=os.path.join(here, "..", "build"))
    ap.add_argument("--device", default="pocl")
    ap.add_argument("--llmc", default="https://github.com/karpathy/llm.c")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
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
    if args.steps < 2:
        sys.exit("--steps must be at least 2 (the first step is not timed)")
    torch.set_num_threads(args.threads)
    train = os.path.join(args.build, "examples", "train_gpt")
    gen = os.path.join(args.build, "examples", "generate_gpt")
    load0 = os.getloadavg()[0]
    toks = read_tokens(args.data)
    split = len(toks) - len(toks) // 10
    with tempfile.TemporaryDirectory() as d:
        train_bin = os.path.join(d, "train.bin")
        val_bin = os.path.join(d, "val.bin")
        write_tokens(train_bin, toks[:split])
        write_tokens(val_bin, toks[split:])
        shape = ["--layers", str(args.layers), "--heads", str(args.heads),
                 "--channels", str(args.channels), "--vocab", str(args.vocab),
                 "--context", str(args.context), "--batch", str(args.batch),
                 "--seq", str(args.seq), "--device", args.device,
                 "--data", train_bin, "--val-data", val_bin, "--val-every", "0"]
        init = os.path.join(d, "init.ckpt")
        llmc = None
        if args.llmc != "none":
            llmc = build_llmc(args.llmc, d, args)
        run([train] + shape + ["--steps", "0", "--save", init])
        out = run([train] + shape + [
            "--load", init, "--steps", str(args.steps), "--warmup",
            str(args.warmup), "--lr", repr(args.lr), "--weight-decay",
            repr(args.weight_decay), "--clip", repr(args.clip)])
        k_losses = [float(v) for v in re.findall(
            r"^step \d+/\d+: loss ([\d.]+)", out, re.M)]
        k_ms = [float(v) for v in re.findall(r", ([\d.]+) ms,", out)]
        p, cfg = read_checkpoint(init)
        data = torch.tensor(toks[:split], dtype=torch.long)
        t_losses, t_s, fused = torch_train(p, cfg, data, args)
        del p
        if llmc:
            l_losses, l_ms = llmc_train(llmc, d, init, train_bin, val_bin, args)
        gen_rows = []
        if args.generate:
            for b in (1, 8):
                kf, kt = kiln_generate(gen, init, args.vocab, args.generate, b,
                                       args.device)
                p2, _ = read_checkpoint(init)
                tf, tt = torch_generate(p2, cfg, torch.full((b, 8), 10),
                                        args.generate)
                del p2
                gen_rows.append((b, kf, kt, tf, tt))
    cols = [("kiln", k_losses, statistics.median(k_ms[1:])),
            ("PyTorch", t_losses, statistics.median(t_s[1:]) * 1e3)]
    if llmc:
        cols.append(("llm.c", l_losses, statistics.median(l_ms[1:])))
    ntok = args.batch * args.seq
    print(f"GPT-2 L{args.layers} H{args.heads} C{args.channels} V{args.vocab}, "
          f"B {args.batch} T {args.seq}, {args.steps} steps (lr {args.lr:g}, "
          f"warm-up {args.warmup}, weight decay {args.weight_decay:g}, clip "
          f"{args.clip:g}); kiln on {args.device}, PyTorch {torch.__version__} "
          f"CPU ({args.threads} threads, AdamW {fused})"
          + (f", llm.c train_gpt2 (OMP_NUM_THREADS={args.threads})"
             if llmc else "") +
          f"; load average {load0:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end")
    names = [c[0] for c in cols]
    ratios = [f"kiln / {n}" for n in names[1:]]
    print("| measure | " + " | ".join(names + ratios) + " |")
    print("|" + " --- |" * (1 + len(names) + len(ratios)))
    k_step = cols[0][2]
    print(f"| median step time (steps 2-{args.steps}) | " +
          " | ".join(f"{c[2]:.0f} ms" for c in cols) + " | " +
          " | ".join(f"{k_step / c[2]:.2f}" for c in cols[1:]) + " |")
    print("| tokens per second | " +
          " | ".join(f"{ntok / c[2] * 1e3:.0f}" for c in cols) + " | " +
          " | ".join(f"{c[2] / k_step:.2f}" for c in cols[1:]) + " |")
    print(f"| loss after {args.steps} steps | " +
          " | ".join(f"{c[1][-1]:.5f}" for c in cols) + " | " +
          " | ".join("max difference over the steps "
                     f"{max(abs(a - b) for a, b in zip(k_losses, c[1])):.1e}"
                     for c in cols[1:]) + " |")
    print("losses: " + "; ".join(
        f"{c[0]} " + " ".join(f"{v:.6f}" for v in c[1]) for c in cols))
    if gen_rows:
        print()
        print(f"Generation, greedy, prompt of 8 tokens, {args.generate} tokens "
              "per sequence, key/value cache in both")
        print("| measure | kiln | PyTorch | kiln / PyTorch |")
        print("| --- | --- | --- | --- |")
        for b, kf, kt, tf, tt in gen_rows:
            print(f"| batch {b}: first token | {kf * 1e3:.1f} ms | "
                  f"{tf * 1e3:.1f} ms | {kf / tf:.2f} |")
            print(f"| batch {b}: tokens/s (all sequences) | {kt * b:.1f} | "
                  f"{tt * b:.1f} | {kt / tt:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
