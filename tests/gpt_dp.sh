#!/usr/bin/env bash
# train_gpt's data-parallel mode (examples/train_gpt.c with train_mpi.c):
# 2 ranks give the losses of 1 rank within the reduction-order tolerance,
# with the final model bit-identical on both ranks (the trainer checks it);
# 1 rank gives the one-process trainer's losses bit for bit; and a wrong
# variant (KILN_TRAIN_DP_FAULT=slice: every rank trains on the first half of
# each batch) must fail the comparison, so the tolerance can catch a real
# mistake. Skipped (77) without a device unless KILN_REQUIRE_DEVICE=1.
#
# Tolerance. One rank's loss and gradients are means over the B T rows of a
# batch; two ranks compute two means over half the rows and average them:
# the same f32 terms summed in another order, so they differ by rounding,
# typically sqrt(B T) 2^-24 relative (random-walk rounding, 7e-7 for the
# 64 rows here), growing over the steps as the weights drift apart. Measured
# on PoCL: 1e-7 over 8 steps. The tolerance, 1e-5, leaves room for that
# growth and another CPU's rounding, and stays far below the wrong slice's
# error (1e-3 and more from step 1).
#
# usage: gpt_dp.sh MPI_RUN TRAIN_GPT_MPI TRAIN_GPT DATA
set -uo pipefail
mpi_run=$1 trainer=$2 single=$3 data=$4
tol=1e-5
dir=$(mktemp -d "${TMPDIR:-/tmp}/kiln-gpt-dp-XXXXXX")
trap 'rm -rf "$dir"' EXIT
export POCL_DEVICES="${POCL_DEVICES:-pthread pthread}"
args=(--data "$data" --layers 2 --heads 2 --channels 32 --context 16
      --batch 4 --val-every 0 --print-losses --warmup 2 --steps 8 --seed 3
      --device pocl)
status=0
fail() { echo "not ok: $*"; status=1; }
max_rel() { # largest relative loss difference, or "count"
  paste <(grep '^step ' "$1") <(grep '^step ' "$2") | awk '
    { n++; if ($2 != $6) bad = 1
      d = $4 - $8; if (d < 0) d = -d; a = $4 < 0 ? -$4 : $4
      r = a > 0 ? d / a : d; if (r > m) m = r }
    END { if (bad || n != 8) print "count"; else printf "%.3g\n", m }'
}
within() { awk -v r="$1" -v t="$tol" 'BEGIN { exit !(r != "count" && r <= t) }'; }

if ! "$mpi_run" 1 "$trainer" "${args[@]}" > "$dir/one" 2>&1; then
  if grep -q "no device\|No device" "$dir/one" && [ "${KILN_REQUIRE_DEVICE:-0}" != 1 ]; then
    echo "skip: no device"; exit 77
  fi
  cat "$dir/one"; exit 1
fi
"$single" "${args[@]}" > "$dir/single" 2>&1 || fail "one-process run: $(cat "$dir/single")"
if cmp -s <(grep '^step ' "$dir/one") <(grep '^step ' "$dir/single"); then
  echo "ok: 1 rank = the one-process trainer, bit for bit"
else
  fail "1 rank differs from the one-process trainer"
fi
if "$mpi_run" 2 "$trainer" "${args[@]}" > "$dir/two" 2>&1; then
  r=$(max_rel "$dir/one" "$dir/two")
  if within "$r"; then
    echo "ok: 2 ranks against 1: max relative loss difference $r (tolerance $tol)"
  else
    fail "2 ranks against 1: $r (tolerance $tol)"
  fi
  grep -q "identical on every rank" "$dir/two" || fail "2 ranks: models differ"
else
  fail "2 ranks: $(tail -5 "$dir/two")"
fi
if KILN_TRAIN_DP_FAULT=slice "$mpi_run" 2 "$trainer" "${args[@]}" > "$dir/bad" 2>&1; then
  r=$(max_rel "$dir/one" "$dir/bad")
  if within "$r"; then
    fail "the wrong slice passes the comparison ($r): the tolerance catches nothing"
  else
    echo "ok: the wrong slice fails the comparison ($r > $tol)"
  fi
else
  fail "the wrong-slice run did not run: $(tail -3 "$dir/bad")"
fi
exit $status
