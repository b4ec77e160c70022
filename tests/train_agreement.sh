#!/usr/bin/env bash
# The trainer on PoCL and on rusticl (Mesa llvmpipe: another OpenCL compiler,
# another GEMM kernel family) gives the same loss at each of its first steps,
# within a tolerance derived below, on a small network (--hidden 64: at the
# full 1024 units rusticl takes about a minute a step).
#
# Skipped (77) when rusticl has no device, which is the default: Mesa gives
# it one only with RUSTICL_ENABLE=llvmpipe (CI's rusticl stage,
# tests/reliability.sh, sets it and runs this test there). A missing PoCL
# device skips too, unless KILN_REQUIRE_DEVICE=1, as in run_example.sh.
#
# Tolerance. Both runs start from the same weights (kiln_random_uniform,
# Philox: the same bits on every device) and see the same batches, so they
# differ only by the rounding of f32 sums taken in another order (GEMM
# kernels, row reductions) and of the optimizer's arithmetic. A dot product
# of length k summed in any order is within k u sum|x_i y_i| of the exact
# one (u = 2^-24), so two devices differ by at most 2 k u sum|x_i y_i|. The
# logits are three such products deep, k = 784, H and H (ReLU is
# 1-Lipschitz, so layer errors add): inputs in [0, 1] and weights within
# 1/sqrt(fan-in) keep sum|x_i y_i| below M = 4 for every output (784
# inputs times at most 1/28; H hidden values of order 1 times at most
# 1/sqrt(H)), hence |dz| <= 2 (784 + 2 H) u M. The mean cross-entropy
# moves by at most 2 max|dz| (its gradient in z is softmax - one-hot,
# whose 1-norm is at most 2). Each optimizer step carries the gradients'
# rounding (of the same order: backward products of length batch, 784 and
# H) into the weights, and AdamW normalises each update to at most about
# lr, so each step adds at most one such term again:
#     |loss_pocl - loss_rusticl| at step s <= s * 4 (784 + 2 H) u M
# = s * 8.7e-4 at H = 64. The bound is worst-case (rounding errors add up
# like a random walk, not in a line); an error in an op (a dropped term, a
# wrong gradient, a mis-seeded initialiser) moves the losses by 1e-2 and
# more. Measured: the two devices agreed to all nine printed digits.
#
# usage: train_agreement.sh TRAINER
set -uo pipefail
trainer=${1:?usage: $0 TRAINER}
hidden=64
steps=3
dir=$(mktemp -d "${TMPDIR:-/tmp}/kiln-train-agree-XXXXXX")
trap 'rm -rf "$dir"' EXIT

run() { # run DEVICE
  "$trainer" --device "$1" --steps "$steps" --limit 768 --test-limit 256 \
    --seed 7 --print-losses --hidden "$hidden" > "$dir/$1" 2>&1
}

no_device() { # no_device FILE: the run failed for want of a device
  grep -q -e 'no device matches selector' -e KILN_ERR_NO_DEVICE \
    -e 'no OpenCL device' -e 'no OpenCL platform' "$1"
}

if ! run pocl; then
  cat "$dir/pocl"
  if [ "${KILN_REQUIRE_DEVICE:-}" != 1 ] && no_device "$dir/pocl"; then
    echo "# no PoCL device: skipped"
    exit 77
  fi
  exit 1
fi
if ! run rusticl; then
  cat "$dir/rusticl"
  if no_device "$dir/rusticl" &&
     { [ -z "${RUSTICL_ENABLE:-}" ] || [ "${KILN_REQUIRE_DEVICE:-}" != 1 ]; }; then
    echo "# rusticl has no device (set RUSTICL_ENABLE=llvmpipe to give it" \
      "Mesa's llvmpipe): skipped"
    exit 77
  fi
  exit 1
fi
cat "$dir/pocl" "$dir/rusticl"
grep '^step ' "$dir/pocl" > "$dir/pocl.steps"
grep '^step ' "$dir/rusticl" > "$dir/rusticl.steps"
if [ "$(wc -l < "$dir/pocl.steps")" -ne "$steps" ] ||
   [ "$(wc -l < "$dir/rusticl.steps")" -ne "$steps" ]; then
  echo "FAIL: expected $steps step losses from each device"
  exit 1
fi
paste "$dir/pocl.steps" "$dir/rusticl.steps" | awk -v h="$hidden" '
  {
    s = $2; a = $4; b = $8
    tol = s * 4 * (784 + 2 * h) * 2^-24 * 4
    d = a - b; if (d < 0) d = -d
    printf "step %d: PoCL %s, rusticl %s, |difference| %.3g, tolerance %.3g\n",
           s, a, b, d, tol
    if (!(d <= tol)) bad = 1   # NaN fails too
  }
  END { if (bad) { print "FAIL: PoCL and rusticl disagree"; exit 1 }
        print "ok: PoCL and rusticl agree at every step" }'
