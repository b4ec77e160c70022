"""examples/train_gpt.py, the GPT-2 of examples/gpt.c written in Python with
kiln, against PyTorch in float64 (tests/fixtures/gpt, the fixtures of the C
test gpt_reference, written by make_gpt_fixtures.py): from the same llm.c
checkpoint and batch, the loss and logits of the forward pass, every
parameter's gradient and the losses of 10 AdamW steps, with the C test's
normwise tolerances (tests/test_gpt_reference.c derives them: 1e-5 forward
and loss, 2e-5 gradients). Also: the Python trainer gives the C trainer's
losses bit for bit (same ops, same order, same device), checkpoints save
and load back, and bad files are refused with the reason. In f32 and, with
the C test's bf16 tolerances (1e-2, 2e-2, 1e-3), in bf16."""

import os
import subprocess
import sys

import numpy as np
import pytest

import kiln

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "gpt")
B, T, STEPS = 2, 11, 10
# (forward and loss, gradients, AdamW steps' losses), as gpt_reference.c
TOLERANCES = {"float32": (1e-5, 2e-5, 1e-5), "bfloat16": (1e-2, 2e-2, 1e-3)}


@pytest.fixture(scope="module")
def example():
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    try:
        import train_gpt
    finally:
        sys.path.pop(0)
    return train_gpt


def normwise(got, ref):
    top = np.abs(ref).max()
    diff = np.abs(got.astype(np.float64) - ref).max()
    return diff / top if top > 0 else diff


def tiny_model(example, dev, precision="float32"):
    ckpt = os.path.join(FIXTURES, "gpt_tiny.ckpt")
    m = example.GPT(example.read_header(ckpt), B, T, dev, precision)
    m.load(ckpt)
    tokens = example.load_tokens(os.path.join(FIXTURES, "gpt_tiny_tokens.bin"))
    assert tokens.size == B * T + 1
    return m, tokens[:-1].copy(), tokens[1:].copy()


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_against_pytorch(dev, example, precision):
    tol_forward, tol_grad, tol_loss = TOLERANCES[precision]
    m, inputs, targets = tiny_model(example, dev, precision)
    V = m.cfg["vocab"]
    ref = np.fromfile(os.path.join(FIXTURES, "gpt_tiny_expected.bin"), np.float64)
    assert ref.size == 1 + B * T * V + m.nparams + STEPS
    loss = m.step_loss(inputs, targets)
    assert abs(loss - ref[0]) / abs(ref[0]) <= tol_forward, (loss, ref[0])
    e = normwise(m.logits.numpy().reshape(-1), ref[1:1 + B * T * V])
    assert e <= tol_forward, e
    grads = m.grads.numpy()
    gref = ref[1 + B * T * V:1 + B * T * V + m.nparams]
    for name in example.TENSORS:
        o, n = m.offsets[name], m.sizes[name]
        e = normwise(grads[o:o + n], gref[o:o + n])
        assert e <= tol_grad, "gradient of %s: normwise %.2e" % (name, e)
    lref = ref[-STEPS:]
    for s in range(STEPS):
        loss = m.step_loss(inputs, targets) if s else loss
        m.update(1e-4, 0.9, 0.999, 1e-8, 0.01, 0.0)
        assert abs(loss - lref[s]) / abs(lref[s]) <= tol_loss, (s, loss, lref[s])


def test_checkpoints(dev, example, tmp_path):
    m, _, _ = tiny_model(example, dev)
    src = os.path.join(FIXTURES, "gpt_tiny.ckpt")
    path = str(tmp_path / "saved.ckpt")
    m.save(path)
    with open(src, "rb") as a, open(path, "rb") as b:
        assert a.read() == b.read()
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 4)
    with pytest.raises(example.GPTError, match="truncated"):
        m.load(path)
    with pytest.raises(example.GPTError, match="not an llm.c GPT-2 checkpoint"):
        m.load(os.path.join(FIXTURES, "gpt_tiny_tokens.bin"))
    other = dict(m.cfg, layers=3)
    m3 = example.GPT(other, B, T, dev)
    with pytest.raises(example.GPTError, match="is not the one asked for"):
        m3.load(src)
    with pytest.raises(example.GPTError, match="cannot open"):
        example.read_header(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="longer than the model's context"):
        example.GPT(m.cfg, 1, m.cfg["max_seq"] + 1, dev)


def test_tokens_and_schedule(example, tmp_path):
    path = tmp_path / "t.bin"
    header = np.zeros(256, np.int32)
    header[:3] = [example.TOKENS_MAGIC, 1, 3]
    path.write_bytes(header.tobytes() + np.array([7, 300, 65535], np.uint16).tobytes())
    assert list(example.load_tokens(str(path))) == [7, 300, 65535]
    path.write_bytes(header.tobytes() + np.array([7, 300], np.uint16).tobytes())
    with pytest.raises(example.GPTError, match="promises 3 tokens"):
        example.load_tokens(str(path))
    path.write_bytes(b"abc")
    assert list(example.load_tokens(str(path))) == [97, 98, 99]
    b = example.Batches(np.arange(10, dtype=np.uint32), 2, 2)
    x, y = b.next()
    assert list(x) == [0, 1, 2, 3] and list(y) == [1, 2, 3, 4]
    b.next()
    x, _ = b.next()  # 8 + 4 + 1 > 10: wraps
    assert list(x) == [0, 1, 2, 3]
    o = example.parse_args(["--data", "x", "--steps", "100", "--warmup", "10", "--lr", "3e-4"])
    assert example.lr_at(o, 0) == pytest.approx(3e-5)
    assert example.lr_at(o, 10) == pytest.approx(3e-4)
    assert example.lr_at(o, 100) == pytest.approx(3e-5, rel=1e-6)


@pytest.mark.parametrize("precision", ["f32", "bf16"])
def test_python_gpt_matches_c_trainer(dev, example, capsys, precision):
    trainer = os.environ.get("KILN_GPT_TRAINER")
    if not trainer or not os.path.exists(trainer):
        pytest.skip("KILN_GPT_TRAINER (build/examples/train_gpt) not given")
    args = ["--data", os.path.join(ROOT, "README.md"), "--steps", "3", "--print-losses",
            "--layers", "2", "--heads", "4", "--channels", "32", "--context", "16",
            "--batch", "2", "--val-every", "2", "--val-batches", "2", "--seed", "5",
            "--device", dev.info["selector"], "--precision", precision]
    c = subprocess.run([trainer] + args, capture_output=True, text=True)
    assert c.returncode == 0, c.stderr
    assert example.main(args) == 0
    py = capsys.readouterr().out
    assert len(py.splitlines()) == 4, py
    assert py == c.stdout, "Python:\n%s\nC:\n%s" % (py, c.stdout)
