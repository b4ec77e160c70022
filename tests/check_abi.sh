#!/usr/bin/env bash
# The symbols libkiln.so exports (nm -D --defined-only, names only) must be
# exactly those listed in tests/abi/kiln.symbols, so the ABI changes only on
# purpose: adding a function means adding its name to the list in the same
# commit, removing or changing one means following the soname policy in
# CHANGELOG.md.
#
# usage: check_abi.sh LIBKILN_SO SYMBOL_LIST            check
#        check_abi.sh --update LIBKILN_SO SYMBOL_LIST   rewrite the list
set -euo pipefail

update=0
if [ "${1:-}" = --update ]; then
  update=1
  shift
fi
lib=${1:?usage: check_abi.sh [--update] LIBKILN_SO SYMBOL_LIST}
list=${2:?usage: check_abi.sh [--update] LIBKILN_SO SYMBOL_LIST}

actual=$(mktemp)
trap 'rm -f "$actual"' EXIT
# Version-script nodes (an "A" type with the symbol's own version name) are
# not functions or data; the toolchain's _init/_fini are not kiln's.
nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | sed 's/@.*//' |
  grep -v -x -e _init -e _fini | LC_ALL=C sort -u > "$actual"

if [ "$update" = 1 ]; then
  cp "$actual" "$list"
  echo "check_abi: wrote $(wc -l < "$list") symbols to $list"
  exit 0
fi

if ! diff -u --label "$list (committed)" --label "$lib (built)" "$list" "$actual"; then
  cat >&2 <<MSG

check_abi: the symbols libkiln.so exports differ from $list
('+' lines: exported but not listed; '-' lines: listed but no longer exported).
If the change is on purpose, update the list and commit it with the change:

  tests/check_abi.sh --update $lib $list

A removed or changed symbol breaks programs linked against the current
soname: see "ABI and soname" in CHANGELOG.md before doing that.
MSG
  exit 1
fi
if grep -v -q '^kiln_' "$actual"; then
  echo "check_abi: exported symbols without the kiln_ prefix:" >&2
  grep -v '^kiln_' "$actual" >&2
  exit 1
fi
echo "check_abi: $(wc -l < "$actual") exported symbols, as listed"
