#!/usr/bin/env bash
# Every op kernel under Oclgrind: out-of-bounds accesses (always checked),
# data races (--data-races), uninitialised values (--uninitialized) and API
# misuse (--check-api), for both kernel families:
#   KILN_PROFILE=generic  the GPU family (what NVIDIA, AMD, Intel run)
#   KILN_PROFILE=pocl     the CPU family (what PoCL runs)
# Each op group runs in its own Oclgrind process (run_ops.c, RUN_OPS_ONLY),
# with a timeout, and fails the run when:
#   - the process fails or times out (run_ops checks every result), or
#   - the --log file is not empty (kernel diagnostics go there), or
#   - stderr has a line beginning "Oclgrind - " (API errors go there).
# Oclgrind itself never changes the exit status, hence these checks.
#
# Usage: tests/oclgrind/run.sh BUILD_DIR [GROUP...]
#
# Oclgrind 21.10 workarounds, each for a limitation of the tool, not of kiln:
#   --build-options -cl-opt-disable: at -O2 its clang emits the LLVM
#     `freeze` instruction for some kernels (the reductions), which its
#     interpreter does not implement ("Unsupported instruction: freeze"),
#     leaving results unwritten. Unoptimised code performs every memory
#     access the source does, so the checks are at least as strict.
#   one process per group: its uninitialised-value tracking reports false
#     uninitialised values when certain kernels ran earlier in the same
#     process, though each alone is clean and every result is right:
#     operands of gemm_cpu after the rows kernels, and the partial results
#     read by the CPU-family final_* reduction kernels at n = 40000 after
#     the smaller reductions (hence the group reduce_large).
#   no --uninitialized for the CPU-family scan and transpose: that plugin
#     crashes (SIGSEGV in Uninitialized::instructionExecuted) on scan_apply's
#     16-lane vector shuffles, and reports every vstore8 of transpose_cpu's
#     __builtin_shufflevector results as an uninitialised write though the
#     values are right and every element is checked. They still run with
#     the other checks, and their GPU-family kernels with all of them.
# Needs the package oclgrind. Takes under a minute on 2 cores.
set -u

build=${1:?usage: $0 BUILD_DIR [GROUP...]}
shift
exe=$build/tests/oclgrind/oclgrind_run_ops
if [ ! -x "$exe" ]; then
  echo "oclgrind: $exe not built" >&2
  exit 1
fi
if ! command -v oclgrind > /dev/null; then
  echo "oclgrind: the oclgrind command is missing (apt-get install oclgrind)" >&2
  exit 1
fi
groups=${*:-probe unary binary axpy cast reduce reduce_large scan rows transpose gemm gemm_space gemm_mma spaces train conv image attention}
timeout_s=${OCLGRIND_TIMEOUT:-600}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

failed=0
runs=0
checks=0
for profile in generic pocl; do
  for group in $groups; do
    flags="--data-races --uninitialized --check-api"
    if [ "$profile" = pocl ] && { [ "$group" = scan ] || [ "$group" = transpose ]; }; then
      flags="--data-races --check-api"
    fi
    log=$work/$profile-$group.log
    out=$work/$profile-$group.out
    err=$work/$profile-$group.err
    : > "$log"
    start=$(date +%s)
    # shellcheck disable=SC2086 # flags is a word list
    KILN_PROFILE=$profile KILN_CACHE=0 RUN_OPS_ONLY=$group \
      timeout "$timeout_s" oclgrind --build-options "-cl-opt-disable" $flags \
      --log "$log" "$exe" > "$out" 2> "$err"
    rc=$?
    secs=$(( $(date +%s) - start ))
    runs=$((runs + 1))
    problems=""
    if [ $rc -eq 124 ]; then
      problems="timed out after ${timeout_s}s"
    elif [ $rc -ne 0 ]; then
      problems="exit status $rc"
    fi
    if [ -s "$log" ]; then
      problems="$problems${problems:+; }Oclgrind reported kernel errors"
    fi
    if grep -q '^Oclgrind - ' "$err"; then
      problems="$problems${problems:+; }Oclgrind reported API errors"
    fi
    n=$(sed -n 's/^# \([0-9]*\) checks, 0 failures$/\1/p' "$out")
    if [ -z "$n" ]; then
      problems="$problems${problems:+; }run_ops did not report all checks passed"
    else
      checks=$((checks + n))
    fi
    if [ -n "$problems" ]; then
      failed=$((failed + 1))
      echo "FAIL oclgrind $profile $group ($flags, ${secs}s): $problems"
      grep -E '^(FAIL|skip)' "$out" | head -20
      grep -v '^ok' "$err" | head -40
      # The first reports, with their kernel and source line.
      head -60 "$log"
    else
      echo "ok   oclgrind $profile $group ($flags, ${secs}s, $n checks)"
      sed -n 's/^# kernels:/     kernels:/p' "$out"
    fi
  done
done
echo "# oclgrind: $runs runs, $failed failed, $checks results checked"
[ $failed -eq 0 ]
