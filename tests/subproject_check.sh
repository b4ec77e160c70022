#!/usr/bin/env bash
# kiln as a Meson subproject with its default options, as a parent project
# embeds it (the parent is tests/subproject/). Checks that:
# - the parent configures and builds without kiln's test or tool
#   dependencies (no cmocka needed, no kiln tool or tests built);
# - its program runs one kiln op correctly;
# - `meson install` puts nothing of kiln's there but the library, its
#   headers and pkg-config/CMake package files.
# Usage: tests/subproject_check.sh [KILN_SOURCE_ROOT]   (CI: tests/build_matrix.sh)
set -euo pipefail

src=$(cd "${1:-$(dirname "$0")/..}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cp "$src/tests/subproject/meson.build" "$src/tests/subproject/parent.c" "$tmp/"
mkdir "$tmp/subprojects"
# A copy of the checkout without build directories, as a wrap would fetch.
git -C "$src" ls-files -z --cached --others --exclude-standard |
  (cd "$src" && xargs -0 cp --parents -t "$tmp/subprojects/" 2>/dev/null) || true
mv "$tmp/subprojects" "$tmp/kiln-src" && mkdir "$tmp/subprojects" &&
  mv "$tmp/kiln-src" "$tmp/subprojects/kiln"

cd "$tmp"
meson setup build --prefix=/usr > setup.log 2>&1 || { cat setup.log; exit 1; }
targets=$(meson introspect build --targets | python3 -c '
import json, sys
print("\n".join(t["type"] + ":" + t["name"] for t in json.load(sys.stdin)))')
if echo "$targets" | grep -qE '^executable:(kiln|test_.*)$|kiln_test_harness'; then
  echo "subproject: kiln built more than its library by default:" $targets >&2
  exit 1
fi
ninja -C build > build.log 2>&1 || { cat build.log; exit 1; }
./build/parent

DESTDIR="$tmp/root" meson install -C build --no-rebuild > install.log 2>&1 ||
  { cat install.log; exit 1; }
unexpected=$(cd "$tmp/root" && find . -type f -o -type l | sort | grep -vE \
  '^\./usr/bin/parent$|/libkiln\.(so[.0-9]*|a)$|^\./usr/include/kiln/[a-z_]+\.h$|/pkgconfig/kiln\.pc$|/cmake/kiln/[A-Za-z-]+\.cmake$|/man/man3/kiln\.3$' || true)
if [ -n "$unexpected" ]; then
  echo "subproject: the parent's install holds more of kiln than its library," \
       "headers and package files:" >&2
  echo "$unexpected" >&2
  exit 1
fi
echo "subproject: OK ($(cd "$tmp/root" && find . -type f | wc -l) files installed)"
