#!/usr/bin/env bash
# examples/train_gpt: two runs with one seed give identical losses on one
# device; a 6-step run stopped after 3 steps (--run-steps), saved and
# resumed gives the losses of 6 steps in one run (parameters and AdamW state both restored);
# and the trainer's refusals (a context longer than the model's, a token
# outside the vocabulary, a foreign checkpoint) exit non-zero with a reason.
# generate_gpt, greedy from the saved model through the key/value cache:
# each of 3 sequences sampled at once continues the prompt as one alone does.
# Usage: tests/gpt_determinism.sh TRAIN_GPT FIXTURES_DIR GENERATE_GPT
set -uo pipefail
trainer=$1
fixtures=$2
generator=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A text of a few thousand bytes: the fixture script's source.
data="$fixtures/make_gpt_fixtures.py"
small=(--data "$data" --layers 2 --heads 2 --channels 32 --context 16
       --batch 2 --val-every 0 --print-losses --warmup 2)
run() { "$trainer" "${small[@]}" "$@"; }
status=0
fail() { echo "not ok: $*"; status=1; }

if ! run --steps 6 --seed 5 > "$tmp/a" 2> "$tmp/a.err"; then
  if grep -q "no device" "$tmp/a.err" && [ "${KILN_REQUIRE_DEVICE:-0}" != 1 ]; then
    echo "skip: no device"; exit 77
  fi
  cat "$tmp/a.err"; exit 1
fi
run --steps 6 --seed 5 > "$tmp/b" 2>&1 || fail "second run failed: $(cat "$tmp/b")"
cmp -s "$tmp/a" "$tmp/b" && echo "ok: two runs, one seed, identical losses" ||
  fail "two runs with one seed differ: $(paste "$tmp/a" "$tmp/b" | head -3)"

run --steps 6 --run-steps 3 --seed 5 --save "$tmp/ck" > "$tmp/c1" 2>&1 ||
  fail "save run: $(cat "$tmp/c1")"
run --steps 6 --resume "$tmp/ck" > "$tmp/c2" 2>&1 || fail "resume run: $(cat "$tmp/c2")"
if cat "$tmp/c1" "$tmp/c2" | cmp -s - "$tmp/a"; then
  echo "ok: 3 steps, save, resume, 3 steps = 6 steps"
else
  fail "save and resume differ from one run: $(cat "$tmp/c1" "$tmp/c2" | paste - "$tmp/a")"
fi
[ -e "$tmp/ck.tmp" ] && fail "a temporary checkpoint was left behind"

greedy=(--load "$tmp/ck" --prompt "In the " --tokens 8 --temperature 0)
if "$generator" "${greedy[@]}" > "$tmp/g1" 2> "$tmp/g1.err" &&
   "$generator" "${greedy[@]}" --batch 3 > "$tmp/g3" 2> "$tmp/g3.err"; then
  for b in 1 2 3; do
    printf -- '--- sample %d\n' "$b"; cat "$tmp/g1"; printf '\n'
  done > "$tmp/g3.expected"
  if [ "$(wc -c < "$tmp/g1")" -ne 15 ]; then
    fail "generate_gpt printed $(wc -c < "$tmp/g1") bytes, not the prompt's 7 and 8 more"
  elif cmp -s "$tmp/g3" "$tmp/g3.expected"; then
    echo "ok: greedy generation, batch 3 = batch 1 three times"
  else
    fail "batch 3 differs from batch 1: $(od -c "$tmp/g3" | head -4) against $(od -c "$tmp/g1")"
  fi
else
  fail "generate_gpt failed: $(cat "$tmp/g1.err" "$tmp/g3.err" 2>/dev/null)"
fi

expect_refusal() {
  local what=$1 pattern=$2
  shift 2
  if "$trainer" "$@" > "$tmp/r" 2>&1; then
    fail "$what: accepted"
  elif ! grep -q -- "$pattern" "$tmp/r"; then
    fail "$what: no '$pattern' in: $(cat "$tmp/r")"
  else
    echo "ok: $what refused: $(head -1 "$tmp/r")"
  fi
}
expect_refusal "context longer than the model's" "longer than the model's context" \
  "${small[@]}" --seq 17 --steps 1
expect_refusal "token outside the vocabulary" "outside the model's vocabulary" \
  "${small[@]}" --vocab 64 --steps 1
expect_refusal "a foreign checkpoint" "not an llm.c GPT-2 checkpoint" \
  --data "$data" --load "$fixtures/gpt_tiny_tokens.bin" --steps 1
head -c 2000 "$fixtures/gpt_tiny.ckpt" > "$tmp/short.ckpt"
expect_refusal "a truncated checkpoint" "truncated" \
  --data "$data" --load "$tmp/short.ckpt" --steps 1
exit $status
