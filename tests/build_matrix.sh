#!/usr/bin/env bash
# CI's build matrix: kiln built with gcc and with clang, each in the debug,
# debugoptimized and release build types, all with -Dwerror=true (a user's
# build never has it: meson.build leaves werror off). Each leg then runs
# tests with KILN_REQUIRE_DEVICE=1:
#   - SUITE_LEGS (gcc debug and clang release, the two compilers at the two
#     ends of optimisation): the suite less the suite 'slow' (the
#     compile-heavy space, tuner and cold-cache tests, whose results do not
#     depend on the build type; README command (b), rusticl and ASan run
#     them);
#   - the other legs: a smoke set (SMOKE_TESTS) that drives the host code
#     through every layer once, so an -O level that breaks it shows up;
#   - gcc debugoptimized: nothing more, README command (b) ran its suite.
# SUITE_LEGS=all runs the quick suite in every leg; FULL_SUITE=1 also runs
# the slow tests there. Then kiln as a Meson subproject
# (tests/subproject_check.sh).
#
# Usage: tests/build_matrix.sh [DIR]   (build directories under DIR,
#        default build-matrix/; needs clang, which .ci/run installs)
set -uo pipefail

cd "$(dirname "$0")/.."
out=${1:-build-matrix}
mkdir -p "$out"
failed=()
summary=()
suite_legs=${SUITE_LEGS:-"gcc-debug clang-release"}
smoke_tests=${SMOKE_TESTS:-"errors buffer event queue op_elementwise op_gemm op_reduce op_train_loss train_short_run"}
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
