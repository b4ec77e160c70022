#!/usr/bin/env bash
# CI's build matrix: kiln built with gcc and with clang, each in the debug,
# debugoptimized and release build types, all with -Dwerror=true (a user's
# build never has it: meson.build leaves werror off). Each leg then runs a
# smoke set (SMOKE_TESTS, about 10 s) with KILN_REQUIRE_DEVICE=1: host code
# through every layer once (errors, buffers, events, queues, the selector,
# tuning files, the pool, an elementwise op, GEMM, a reduction, a loss, a
# short training run) and the thread stress test, so that an -O level or a
# compiler that breaks host code or its threading shows up. The whole suite
# runs where a configuration can change its results: README command (b)
# (gcc debugoptimized, PoCL), ASan+UBSan, rusticl, TSan
# (tests/reliability.sh); what the build type alone changes is the code
# generated from the same C, which the smoke set runs.
# SUITE_LEGS="gcc-debug clang-release" (or all) runs the quick suite (the
# suite less the suite 'slow') in those legs; FULL_SUITE=1 also runs the
# slow tests there. Then kiln as a Meson subproject
# (tests/subproject_check.sh).
#
# Usage: tests/build_matrix.sh [DIR]   (build directories under DIR,
#        default build-matrix/; needs clang, which .ci/run installs)
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
out=${1:-build-matrix}
mkdir -p "$out"
failed=()
summary=()
suite_legs=${SUITE_LEGS:-}
smoke_tests=${SMOKE_TESTS:-"errors buffer event queue selector tuning pool threads op_elementwise op_gemm op_reduce op_train_loss train_short_run"}
slow_filter=(--no-suite slow)
[ "${FULL_SUITE:-0}" = 1 ] && slow_filter=()
for cc in gcc clang; do
  for type in debug debugoptimized release; do
    dir="$out/$cc-$type"
    start=$SECONDS
    echo "=== build matrix: $cc $type (werror)"
    if [ ! -d "$dir" ]; then
      CC=$cc meson setup "$dir" --buildtype="$type" -Dwerror=true > /dev/null ||
        { failed+=("$cc-$type: setup"); continue; }
    fi
    if ! ninja -C "$dir" > "$dir.ninja.log" 2>&1; then
      grep -E 'error|warning' "$dir.ninja.log" | head -40
      failed+=("$cc-$type: build")
      continue
    fi
    if [ "$cc-$type" = gcc-debugoptimized ]; then
      summary+=("$cc-$type: built; suite: README command (b)")
      continue
    fi
    local_tests=()
    what="quick suite"
    case " $suite_legs " in
      *" $cc-$type "* | " all ") ;;
      *) read -ra local_tests <<< "$smoke_tests"; what="smoke set" ;;
    esac
    if KILN_REQUIRE_DEVICE=1 meson test -C "$dir" --no-rebuild \
        --print-errorlogs "${slow_filter[@]}" "${local_tests[@]}" \
        > "$dir.test.log" 2>&1; then
      summary+=("$cc-$type: $what $(grep -E '^Ok:' "$dir.test.log" | tr -s ' ') in $((SECONDS - start)) s")
    else
      grep -E '^ *[0-9]+/[0-9]+ .*(FAIL|ERROR|TIMEOUT)' "$dir.test.log"
      sed -n '/Summary of Failures/,$p' "$dir.test.log"
      failed+=("$cc-$type: tests")
    fi
  done
done
echo "=== build matrix: kiln as a subproject"
tests/subproject_check.sh . || failed+=("subproject")

printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "build matrix: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "build matrix: OK"
