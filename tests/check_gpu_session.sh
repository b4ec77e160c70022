#!/usr/bin/env bash
# tools/gpu-session.sh without a GPU: it parses (bash -n), lists the device
# calls, refuses an unknown part, and runs parts 2 and 3 on PoCL at the
# small scale with the suite's build tree (--pocl --build), leaving in each
# part's folder what the device tool brings back (at most 8 plain files, no
# folders): summary.md, report.json with the part's groups, logs.tar.gz,
# session.log, and from part 2 the tuning file, which part 3 on a fresh
# state (a machine that went back) reads from the kit (KILN_TUNING).
#
# Usage: tests/check_gpu_session.sh SOURCE_ROOT BUILD_ROOT
# Skipped (77) without a device unless KILN_REQUIRE_DEVICE=1.
set -u
src=${1:?usage: $0 SOURCE_ROOT BUILD_ROOT}
build=${2:?usage: $0 SOURCE_ROOT BUILD_ROOT}
script=$src/tools/gpu-session.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

bash -n "$script" || fail "bash -n"
steps=$("$script" steps) || fail "steps exited $?"
for n in 1 2 3; do
  grep -q "tools/gpu-session.sh $n " <<<"$steps" || fail "steps lacks part $n"
done
grep -q 'carry: \[".gpu-kit"\]' <<<"$steps" || fail "steps names no carry"
if "$script" --out "$work/x" 4 2>/dev/null; then fail "part 4 accepted"; fi

export GPU_SESSION_KIT=$work/kit GPU_SESSION_STATE=$work/state
mkdir -p "$GPU_SESSION_KIT"
check_part() { # DIR GROUPS...
  local dir=$1 files
  shift
  [ -d "$dir" ] || fail "no $dir"
  files=$(find "$dir" -mindepth 1 | wc -l)
  [ "$files" -le 8 ] || fail "$dir holds $files entries (the tool brings back 8)"
  [ -z "$(find "$dir" -mindepth 1 ! -type f)" ] || fail "$dir holds a non-file"
  for f in summary.md report.json logs.tar.gz session.log; do
    [ -s "$dir/$f" ] || fail "$dir/$f missing or empty"
  done
  python3 - "$dir/report.json" "$@" <<'PY' || fail "$dir/report.json"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["step_groups"] == sys.argv[2:], doc["step_groups"]
assert doc["device"] is not None, doc["diagnosis"]
bad = [s["name"] for s in doc["steps"] if s["status"] in ("failed", "timeout")]
assert not bad, f"steps failed: {bad}"
PY
  tar tzf "$dir/logs.tar.gz" | grep -q "^logs/info.log$" || fail "no logs/info.log in $dir/logs.tar.gz"
}

"$script" --pocl --build "$build" --out "$work/out" 2 >"$work/part2.log" 2>&1
rc=$?
if python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["device"] is not None)' \
    "$work/out/2-tune-bench/report.json" 2>/dev/null &&
   [ "${KILN_REQUIRE_DEVICE:-0}" != 1 ]; then
  echo "skip: no device"
  exit 77
fi
[ "$rc" = 0 ] || { cat "$work/part2.log"; fail "part 2 exited $rc"; }
check_part "$work/out/2-tune-bench" info tune bench
[ -s "$work/out/2-tune-bench/tuning.txt" ] || fail "part 2 left no tuning.txt"
[ -s "$GPU_SESSION_STATE/tuning.txt" ] || fail "part 2 kept no tuning in its state"

# Part 3 on a machine that went back: a fresh state, part 2's tuning in the kit.
cp "$work/out/2-tune-bench/tuning.txt" "$GPU_SESSION_KIT/tuning.txt"
export GPU_SESSION_STATE=$work/state3
"$script" --pocl --build "$build" --out "$work/out" 3 >"$work/part3.log" 2>&1 ||
  { cat "$work/part3.log"; fail "part 3 exited non-zero"; }
check_part "$work/out/3-cublas-train" info cublas train
grep -q "part 2's tuning from $GPU_SESSION_KIT/tuning.txt" "$work/out/3-cublas-train/session.log" ||
  fail "part 3 did not read part 2's tuning from the kit"
echo ok
