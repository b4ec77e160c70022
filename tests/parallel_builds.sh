#!/usr/bin/env bash
# Eight processes building kiln programs at once on one cold kernel cache:
# each round starts 8 `kiln demo` processes (a user program, the sum op and
# GEMM) on a fresh PoCL cache directory shared by all, with kiln's own cache
# off in half the rounds and a fresh shared kiln cache in the others. Every
# process must pass. PoCL 3.1 fails such builds now and then with
# CL_BUILD_PROGRAM_FAILURE and no error in the log (3 in 64 processes before
# kiln retried them: KILN_QUIRK_SPURIOUS_BUILD_FAILURE).
# Usage: tests/parallel_builds.sh KILN_BINARY [ROUNDS]   (default 2: one round
# with kiln's cache off, one with it on; CI runs the suite about eight times)
set -uo pipefail

kiln=$1
rounds=${2:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
for round in $(seq 1 "$rounds"); do
  rm -rf "$tmp/pocl" "$tmp/kiln"
  mkdir -p "$tmp/pocl" "$tmp/kiln"
  if [ $((round % 2)) -eq 1 ]; then kiln_cache=0; else kiln_cache=1; fi
  for i in 1 2 3 4 5 6 7 8; do
    (POCL_CACHE_DIR="$tmp/pocl" KILN_CACHE=$kiln_cache KILN_CACHE_DIR="$tmp/kiln" \
       "$kiln" demo > "$tmp/out.$i" 2>&1
     echo $? > "$tmp/rc.$i") &
  done
  wait
  for i in 1 2 3 4 5 6 7 8; do
    if [ "$(cat "$tmp/rc.$i")" != 0 ]; then
      echo "not ok: round $round (kiln cache $kiln_cache), process $i:"
      cat "$tmp/out.$i"
      failed=$((failed + 1))
    fi
  done
  echo "round $round (kiln cache $kiln_cache): 8 processes done"
done
if [ "$failed" -gt 0 ]; then
  echo "$failed of $((rounds * 8)) processes failed"
  exit 1
fi
echo "ok: $((rounds * 8)) processes passed"
