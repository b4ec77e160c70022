#!/usr/bin/env python3
"""Train a Fashion-MNIST network of examples/train_fashion_mnist.c (--model
mlp, the default, or cnn) in kiln and in PyTorch (CPU) side by side, from the
same initial weights, in the same batch order, with the same hyperparameters,
and print one table:

- one step (MLP only: the CNN's dropout masks come from kiln's Philox stream,
  which PyTorch does not draw; tests/test_cnn_step.c checks that step against
  a PyTorch fixture instead): the max difference of the weights after the first update
  (normwise per tensor: max|w_kiln - w_torch| / max|w_torch|, and
  elementwise max |w_kiln - w_torch| / |w_torch| over elements above 1e-3 of
  the tensor's largest);
- training: median step time, epoch time, final mean training loss and test
  accuracy after --epochs epochs;
- inference (--bench-infer RUNS): median latency at batch 1 and the training
  batch (kiln:
  upload, forward, read of the logits; PyTorch: model(x) under no_grad on a
  tensor already in memory).

kiln exports its initial weights (drawn by its Philox op from the seed) and
its batch order with --export; this script loads both into torch. PyTorch
uses --threads threads (default: every core, as PoCL does). Needs torch
(pip install torch; the CPU build suffices); without it the script says so
and exits 77. It never runs in the test suite: speed is measured here, by
hand, on an otherwise idle machine.

usage: examples/torch_side_by_side.py [--model mlp|cnn] [--batch N]
         [--trainer PATH] [--device SEL] [--epochs N]
         [--optimizer adamw|sgd] [--lr X] [--weight-decay X] [--limit N]
         [--threads N] [--bench-infer RUNS] [--precision f32|bf16] [--data DIR]
"""
import argparse
import gzip
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time

WIDTHS = [784, 1024, 1024, 10]


def load_split(data, split, limit):
    """Images as an N x 784 float tensor in [0, 1] and labels as int64."""
    import torch
    with gzip.open(os.path.join(data, split + "-images-idx3-ubyte.gz")) as f:
        raw = f.read()
    magic, n, rows, cols = struct.unpack(">IIII", raw[:16])
    assert magic == 0x803 and rows * cols == 784, "not an IDX image file"
    with gzip.open(os.path.join(data, split + "-labels-idx1-ubyte.gz")) as f:
        lraw = f.read()
    if limit:
        n = min(n, limit)
    x = torch.frombuffer(bytearray(raw[16:16 + n * 784]), dtype=torch.uint8)
    x = x.reshape(n, 784).float() / 255.0
    y = torch.frombuffer(bytearray(lraw[8:8 + n]), dtype=torch.uint8).long()
    return x, y


def read_f32(path):
    import torch
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=torch.float32)


def read_u32(path):
    import torch
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=torch.int32).long()


def make_cnn(flat):
    """examples/cnn.h's network, loaded from its layout: PyTorch's state_dict
    order less the batch norms' running statistics."""
    import torch
    nn = torch.nn
    net = nn.Sequential(
        nn.Conv2d(1, 32, 3, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
        nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),
        nn.Linear(9216, 128), nn.ReLU(), nn.Linear(128, 10))
    off = 0
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(flat[off:off + p.numel()].reshape(p.shape))
            off += p.numel()
    assert off == flat.numel(), "weight file does not match the model"
    return net


def make_model(flat, kind="mlp"):
    """nn.Linear layers loaded from kiln's layout: W1, b1, W2, b2, W3, b3."""
    import torch
    if kind == "cnn":
        return make_cnn(flat)
    layers, off = [], 0
    for i in range(3):
        lin = torch.nn.Linear(WIDTHS[i], WIDTHS[i + 1])
        with torch.no_grad():
            nw = WIDTHS[i] * WIDTHS[i + 1]
            lin.weight.copy_(flat[off:off + nw].reshape(WIDTHS[i + 1], WIDTHS[i]))
            off += nw
            lin.bias.copy_(flat[off:off + WIDTHS[i + 1]])
            off += WIDTHS[i + 1]
        layers.append(lin)
        if i < 2:
            layers.append(torch.nn.ReLU())
    assert off == flat.numel(), "weight file does not match the model"
    return torch.nn.Sequential(*layers)


def flat_params(model):
    import torch
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def make_optimizer(model, args):
    import torch
    if args.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9,
                               weight_decay=args.weight_decay)
    return torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999),
                             eps=1e-8, weight_decay=args.weight_decay)


def run_kiln(args, out_dir, extra):
    cmd = [args.trainer, "--model", args.model, "--batch", str(args.batch),
           "--device", args.device, "--optimizer", args.optimizer,
           "--lr", repr(args.lr), "--weight-decay", repr(args.weight_decay),
           "--precision", args.precision, "--data", args.data,
           "--export", out_dir] + extra
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    print("+", " ".join(cmd), file=sys.stderr)
    res = subprocess.run(cmd, capture_output=True, text=True)
    sys.stderr.write(res.stdout)
    if res.returncode != 0:
        sys.exit("kiln trainer failed:\n" + res.stderr)
    return res.stdout


def one_step_difference(args, x, y):
    import torch
    with tempfile.TemporaryDirectory() as d:
        run_kiln(args, d, ["--steps", "1", "--test-limit", str(args.batch)])
        init = read_f32(os.path.join(d, "init.f32"))
        final = read_f32(os.path.join(d, "final.f32"))
        order = read_u32(os.path.join(d, "order.u32"))
    model = make_model(init, args.model)
    opt = make_optimizer(model, args)
    idx = order[:args.batch]
    loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
    normwise, elementwise, off = 0.0, 0.0, 0
    for p in model.parameters():
        t = p.detach().reshape(-1)
        k = final[off:off + t.numel()]
        off += t.numel()
        diff = (k - t).abs()
        top = t.abs().max().item()
        normwise = max(normwise, diff.max().item() / top)
        big = t.abs() > 1e-3 * top
        elementwise = max(elementwise, (diff[big] / t[big].abs()).max().item())
    return normwise, elementwise


def torch_train(args, init, order, x, y, tx, ty, epochs, steps_per_epoch):
    import torch
    model = make_model(init, args.model)
    opt = make_optimizer(model, args)
    step_ms, epoch_s, losses = [], 0.0, []
    batch = args.batch
    for e in range(epochs):
        t0 = time.perf_counter()
        losses = []
        for k in range(steps_per_epoch):
            s0 = time.perf_counter()
            base = (e * steps_per_epoch + k) * batch
            idx = order[base:base + batch]
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if k > 0:
                step_ms.append((time.perf_counter() - s0) * 1e3)
        epoch_s = time.perf_counter() - t0
    model.eval()
    with torch.no_grad():
        correct = sum((model(tx[i:i + batch]).argmax(1) == ty[i:i + batch]).sum().item()
                      for i in range(0, len(ty), batch))
    return (model, statistics.median(step_ms), epoch_s,
            sum(losses) / len(losses), 100.0 * correct / len(ty))


def torch_infer(model, tx, rows, runs):
    import torch
    xb = tx[:rows].clone()
    times = []
    with torch.no_grad():
        for k in range(runs + 1):
            t0 = time.perf_counter()
            model(xb)
            if k > 0:
                times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trainer", default=os.path.join(
        here, "..", "build", "examples", "train_fashion_mnist"))
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--batch", type=int, default=None,
                    help="batch size (default 256 for mlp, 128 for cnn)")
    ap.add_argument("--device", default="pocl")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--bench-infer", type=int, default=0)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    args = ap.parse_args()
    if args.batch is None:
        args.batch = 128 if args.model == "cnn" else 256
    if args.lr is None:
        args.lr = 0.05 if args.optimizer == "sgd" else 1e-3
    try:
        import torch
    except ImportError:
        print("torch_side_by_side: PyTorch is not installed (pip install torch);"
              " nothing to compare", file=sys.stderr)
        return 77
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x, y = load_split(args.data, "train", args.limit)
    tx, ty = load_split(args.data, "t10k", 0)
    if args.model == "cnn":
        x, tx = x.reshape(-1, 1, 28, 28), tx.reshape(-1, 1, 28, 28)
        normwise = elementwise = None
    else:
        normwise, elementwise = one_step_difference(args, x, y)

    extra = ["--epochs", str(args.epochs)]
    if args.bench_infer:
        extra += ["--bench-infer", str(args.bench_infer)]
    with tempfile.TemporaryDirectory() as d:
        out = run_kiln(args, d, extra)
        init = read_f32(os.path.join(d, "init.f32"))
        order = read_u32(os.path.join(d, "order.u32"))
    m = re.search(r"summary: steps (\d+), median step ([\d.]+) ms, last epoch "
                  r"([\d.]+) s, loss ([\d.naif-]+), test accuracy ([\d.]+)%", out)
    k_steps, k_step, k_epoch, k_loss, k_acc = (float(v) for v in m.groups())
    steps_per_epoch = int(k_steps) // args.epochs
    model, t_step, t_epoch, t_loss, t_acc = torch_train(
        args, init, order, x, y, tx, ty, args.epochs, steps_per_epoch)

    device = re.search(r"train_fashion_mnist: ([^,]+),", out).group(1)
    print(f"kiln on {device} ({args.precision}) vs PyTorch {torch.__version__} CPU "
          f"({args.threads} threads, f32); {args.optimizer} lr {args.lr}, "
          f"{args.model}, batch {args.batch}, {args.epochs} epoch(s) of "
          f"{steps_per_epoch} steps")
    print("| measure | kiln | PyTorch | kiln / PyTorch |")
    print("| --- | --- | --- | --- |")
    print(f"| median step time | {k_step:.1f} ms | {t_step:.1f} ms | {k_step / t_step:.2f} |")
    print(f"| epoch time (last) | {k_epoch:.2f} s | {t_epoch:.2f} s | {k_epoch / t_epoch:.2f} |")
    print(f"| final epoch's mean training loss | {k_loss:.4f} | {t_loss:.4f} | |")
    print(f"| test accuracy | {k_acc:.2f}% | {t_acc:.2f}% | |")
    if args.bench_infer:
        inf = re.search(r"inference: batch 1 ([\d.]+) ms, batch \d+ ([\d.]+) ms", out)
        k1, k256 = float(inf.group(1)), float(inf.group(2))
        t1 = torch_infer(model, tx, 1, args.bench_infer)
        t256 = torch_infer(model, tx, args.batch, args.bench_infer)
        print(f"| inference, batch 1 | {k1:.3f} ms | {t1:.3f} ms | {k1 / t1:.2f} |")
        print(f"| inference, batch {args.batch} | {k256:.3f} ms | {t256:.3f} ms | {k256 / t256:.2f} |")
    if normwise is not None:
        print(f"| weights after one step: max rel. difference | normwise {normwise:.2e} "
              f"| elementwise {elementwise:.2e} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
