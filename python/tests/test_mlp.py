"""The Fashion-MNIST MLP step in Python (examples/train_fashion_mnist.py)
gives the C trainer's losses: the same ops in the same order on the same
device, so the same bits (the C trainer is deterministic run to run, test
train_determinism). Compared as the 9 significant digits both print."""

import os
import subprocess
import sys

import pytest

import kiln

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples")
DATA = "/usr/share/datasets/fashion-mnist"
ARGS = ["--steps", "3", "--limit", "768", "--test-limit", "512", "--seed", "7",
        "--hidden", "64", "--print-losses"]


def lines(text):
    return [l for l in text.splitlines() if l.startswith(("step ", "epoch "))]


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
def test_python_mlp_matches_c_trainer(dev, capsys, optimizer):
    trainer = os.environ.get("KILN_TRAINER")
    if not trainer or not os.path.exists(trainer):
        pytest.skip("KILN_TRAINER (build/examples/train_fashion_mnist) not built (needs zlib)")
    if not os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte.gz")):
        pytest.skip("dataset-fashion-mnist is not installed")
    args = ARGS + ["--device", dev.info["selector"], "--optimizer", optimizer]
    c = subprocess.run([trainer] + args, capture_output=True, text=True)
    assert c.returncode == 0, c.stderr
    sys.path.insert(0, EXAMPLES)
    try:
        import train_fashion_mnist as example
    finally:
        sys.path.pop(0)
    assert example.main(args) == 0
    py = capsys.readouterr().out
    want = [l.split(", ")[:2] for l in lines(c.stdout)]  # drop the epoch's time
    got = [l.split(", ")[:2] for l in lines(py)]
    assert len(got) == 4, py
    assert got == want, "Python:\n%s\nC:\n%s" % (py, c.stdout)


def test_shuffle_is_the_c_trainers():
    sys.path.insert(0, EXAMPLES)
    try:
        import train_fashion_mnist as example
    finally:
        sys.path.pop(0)
    order = example.shuffle(10, 42, 0)
    assert sorted(order) == list(range(10))
    assert list(order) != list(example.shuffle(10, 43, 0))
    assert list(order) == list(example.shuffle(10, 42, 0))
    assert kiln.version()
