#!/usr/bin/env bash
# kiln's own kernels compile without a word on the terminal: `kiln cache
# warm` builds every op kernel variant from source (fresh kiln and PoCL
# caches) with the device's profile and with the generic GPU family, and
# must leave stderr empty. A driver's compiler prints its warning count to
# the application's stderr ("1 warning generated." from PoCL's clang), so a
# kernel that warns shows up here.
# Usage: tests/quiet_kernels.sh KILN_BINARY
set -uo pipefail

kiln=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for profile in "" generic; do
  label=${profile:-of the device}
  rm -rf "$tmp/kiln-cache" "$tmp/pocl-cache"
  if ! KILN_PROFILE=$profile KILN_CACHE_DIR="$tmp/kiln-cache" \
      POCL_CACHE_DIR="$tmp/pocl-cache" "$kiln" cache warm \
      > "$tmp/out" 2> "$tmp/err"; then
    echo "not ok: kiln cache warm (profile $label) failed:"
    cat "$tmp/out" "$tmp/err"
    status=1
  elif [ -s "$tmp/err" ]; then
    echo "not ok: building kiln's kernels (profile $label)" \
         "wrote to stderr:"
    head -40 "$tmp/err"
    status=1
  else
    echo "ok: profile $label: $(tail -1 "$tmp/out")"
  fi
done
exit $status
