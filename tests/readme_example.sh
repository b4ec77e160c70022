#!/usr/bin/env bash
# The C embedding example of README.md must keep working: extract the first
# ```c block, install kiln into a temporary root with `meson install
# --destdir`, compile the example with pkg-config exactly as the README says
# (`cc example.c $(pkg-config --cflags --libs kiln)`, plus warnings) and run
# it.
#
# usage: readme_example.sh SOURCE_ROOT BUILD_ROOT
# Exit 77 (meson's "skipped") when no OpenCL device is available, unless
# KILN_REQUIRE_DEVICE=1.
set -euo pipefail

src=${1:?usage: readme_example.sh SOURCE_ROOT BUILD_ROOT}
build=${2:?usage: readme_example.sh SOURCE_ROOT BUILD_ROOT}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-readme-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The first ```c block, fences excluded.
awk '/^```c[[:space:]]*$/ {inside = 1; next}
     inside && /^```/ {exit}
     inside {print}' "$src/README.md" > "$tmp/example.c"
if [ ! -s "$tmp/example.c" ]; then
  echo "README.md has no \`\`\`c block" >&2
  exit 1
fi
echo "# example: $(wc -l < "$tmp/example.c") lines"

meson install -C "$build" --no-rebuild --quiet --destdir "$tmp/root" > "$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; exit 1; }

pc=$(find "$tmp/root" -name kiln.pc -print -quit)
if [ -z "$pc" ]; then
  echo "meson install did not install kiln.pc" >&2
  exit 1
fi
# The installed kiln.pc names the real prefix; the sysroot variable makes
# pkg-config point into the temporary root instead.
export PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_SYSROOT_DIR="$tmp/root"
flags=$(pkg-config --cflags --libs kiln)
echo "# pkg-config --cflags --libs kiln: $flags"
# shellcheck disable=SC2086 # the flags are words on purpose
cc -std=c11 -Wall -Wextra -Werror -o "$tmp/example" "$tmp/example.c" $flags

libdir=$(dirname "$(find "$tmp/root" -name 'libkiln.so*' -print -quit)")
status=0
LD_LIBRARY_PATH="$libdir" "$(dirname "$0")/run_example.sh" "$tmp/example" > "$tmp/out" || status=$?
cat "$tmp/out"
if [ "$status" -ne 0 ]; then
  exit "$status"  # 77 when there is no device (run_example.sh)
fi
grep -q "3 squared is 9" "$tmp/out" || { echo "unexpected output" >&2; exit 1; }
