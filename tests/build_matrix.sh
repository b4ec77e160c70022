#!/usr/bin/env bash
# CI's build matrix: kiln built with gcc and with clang, each in the debug,
# debugoptimized and release build types, all with -Dwerror=true (a user's
# build never has it: meson.build leaves werror off). The whole suite runs,
# with KILN_REQUIRE_DEVICE=1, in the legs of SUITE_LEGS: gcc debug and clang
# release, the two compilers at the two ends of optimisation, beside README
# command (b)'s gcc debugoptimized suite that .ci/run has just run. The
# other legs are built only: a suite run costs about four minutes on CI's
# two cores, and what a build type changes (assertions, -O levels) is
# covered by those two ends. Set SUITE_LEGS=all to run it in every leg.
# Then kiln as a Meson subproject (tests/subproject_check.sh).
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
    case " $suite_legs " in
      *" $cc-$type "* | " all ") ;;
      *) summary+=("$cc-$type: built in $((SECONDS - start)) s (suite not run in this leg)")
         continue ;;
    esac
    if KILN_REQUIRE_DEVICE=1 meson test -C "$dir" --no-rebuild \
        --print-errorlogs > "$dir.test.log" 2>&1; then
      summary+=("$cc-$type: $(grep -E '^Ok:' "$dir.test.log" | tr -s ' ') in $((SECONDS - start)) s")
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
