#!/bin/sh
# The `python_pip` test: what `pip install --no-build-isolation ./python`
# does for a user. libkiln is installed from the build into a temporary
# tree (meson install --destdir), kiln.pc is pointed at it, pip builds the
# package with meson-python against it into a temporary folder, and the
# installed package imports, reports the library's version and, when a
# device is there, runs an op. No network (--no-index). Exit 77 (skip)
# when this Python lacks pip, meson-python or numpy (Debian: python3-pip
# python3-mesonpy python3-numpy).
# Usage: pip_install.sh PYTHON SOURCE_ROOT BUILD_ROOT
set -eu

py=${1:?usage: pip_install.sh PYTHON SOURCE_ROOT BUILD_ROOT}
src=${2:?usage: pip_install.sh PYTHON SOURCE_ROOT BUILD_ROOT}
build=${3:?usage: pip_install.sh PYTHON SOURCE_ROOT BUILD_ROOT}

if ! "$py" -c 'import pip, mesonpy, numpy' 2> /dev/null; then
  echo "# $py lacks pip, mesonpy or numpy (python3-pip python3-mesonpy python3-numpy): skipped"
  exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-pip-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
meson install -C "$build" --no-rebuild --quiet --destdir "$root" > "$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; exit 1; }
pc=$(find "$root" -name kiln.pc -print -quit)
lib=$(find "$root" -name 'libkiln.so.*.*' -print -quit)
[ -n "$pc" ] && [ -n "$lib" ] || { echo "meson install gave no kiln.pc or libkiln" >&2; exit 1; }
mkdir "$tmp/pc"
prefix=$(sed -n 's/^prefix=//p' "$pc")
sed "s|^prefix=.*|prefix=$root$prefix|" "$pc" > "$tmp/pc/kiln.pc"

PKG_CONFIG_PATH="$tmp/pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
  "$py" -m pip install --no-build-isolation --no-deps --no-index --no-cache-dir \
  --disable-pip-version-check --target "$tmp/site" "$src/python" > "$tmp/pip.log" 2>&1 ||
  { cat "$tmp/pip.log" >&2; echo "pip install ./python failed" >&2; exit 1; }
ls "$tmp"/site/kiln/_kiln.*.so "$tmp/site/kiln/__init__.pyi" "$tmp/site/kiln/py.typed" > /dev/null
# Every module of the package is installed (python/kiln/meson.build lists them).
for f in "$src"/python/kiln/*.py; do
  [ -f "$tmp/site/kiln/${f##*/}" ] ||
    { echo "pip install ./python left out kiln/${f##*/} (kiln_py_files in python/kiln/meson.build)" >&2; exit 1; }
done

cd "$tmp"
LD_LIBRARY_PATH=$(dirname "$lib") PYTHONPATH="$tmp/site" "$py" - "$tmp/site" << 'PYEOF'
import os, sys
import numpy as np
import kiln
assert kiln.__file__.startswith(sys.argv[1]), kiln.__file__
assert kiln.version() == kiln.__version__, (kiln.version(), kiln.__version__)
ds = kiln.devices()
print("# installed kiln %s from %s; %d device(s)" % (kiln.version(), kiln.__file__, len(ds)))
if ds:
    x = kiln.asarray(np.arange(16, dtype=np.float32))
    assert kiln.sum(x).numpy()[0] == 120.0
elif os.environ.get("KILN_REQUIRE_DEVICE") == "1":
    sys.exit("no device (KILN_REQUIRE_DEVICE=1)")
PYEOF
