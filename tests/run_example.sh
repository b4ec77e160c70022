#!/usr/bin/env bash
# Run a program that uses kiln (an example, the README's) and pass on its
# exit status, except that a run that failed only because there is no OpenCL
# device exits 77 (meson's "skipped") unless KILN_REQUIRE_DEVICE=1.
#
# usage: run_example.sh PROGRAM [ARGS...]   (its output goes to stdout)
set -uo pipefail

out=$(mktemp "${TMPDIR:-/tmp}/kiln-example-XXXXXX")
trap 'rm -f "$out"' EXIT
"$@" > "$out" 2>&1
status=$?
cat "$out"
if [ "$status" -ne 0 ] && [ "${KILN_REQUIRE_DEVICE:-}" != 1 ] &&
   grep -q -e KILN_ERR_NO_DEVICE -e 'no OpenCL device' -e 'no OpenCL platform' "$out"; then
  echo "# no OpenCL device: skipped"
  exit 77
fi
if [ "$status" -ne 0 ]; then
  echo "$(basename "$1") failed with status $status" >&2
fi
exit "$status"
