#!/usr/bin/env bash
# kiln as a consumer sees it after `meson install`: install into a temporary
# root with --destdir, then build tests/consumer/consumer.c against it.
#
#   package_consumer.sh SOURCE_ROOT BUILD_ROOT pkgconfig
#     kiln.pc asks for nothing but kiln: with pkg-config allowed to see only
#     kiln.pc, `pkg-config --cflags --libs kiln` works and prints only kiln's
#     include and library flags; `--static` adds what libkiln.a needs
#     (OpenCL, jansson, xxhash, threads, libm), and the consumer links
#     statically against libkiln.a with exactly those flags and runs.
#   package_consumer.sh SOURCE_ROOT BUILD_ROOT cmake
#     find_package(kiln CONFIG) in a CMake project finds the installed
#     package through CMAKE_PREFIX_PATH and kiln::kiln builds and runs the
#     consumer. Exit 77 (meson's "skipped") when cmake is not installed.
#   package_consumer.sh SOURCE_ROOT BUILD_ROOT mpi
#     kiln-mpi.pc (beside kiln.pc) gives what a libkiln_mpi user needs:
#     kiln's flags, MPI's (through Open MPI's ompi-c.pc) and -lkiln_mpi;
#     tests/consumer/consumer_mpi.c builds with them and runs on 2 ranks.
set -euo pipefail

src=${1:?usage: package_consumer.sh SOURCE_ROOT BUILD_ROOT pkgconfig|cmake|mpi}
build=${2:?usage: package_consumer.sh SOURCE_ROOT BUILD_ROOT pkgconfig|cmake|mpi}
mode=${3:?usage: package_consumer.sh SOURCE_ROOT BUILD_ROOT pkgconfig|cmake|mpi}

if [ "$mode" = cmake ] && ! command -v cmake > /dev/null; then
  echo "# cmake is not installed (apt-get install cmake): skipped"
  exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-package-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
meson install -C "$build" --no-rebuild --quiet --destdir "$root" > "$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; exit 1; }
prefix=$(meson introspect "$build" --buildoptions |
         python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
lib=$(find "$root" -name 'libkiln.so.*.*' -print -quit)
libdir=$(dirname "$lib")
fail() { echo "package_consumer ($mode): $*" >&2; exit 1; }

case "$mode" in
pkgconfig)
  pc=$(find "$root" -name kiln.pc -print -quit)
  [ -n "$pc" ] || fail "meson install did not install kiln.pc"
  # Only kiln.pc is visible: a Requires on any other package would fail here,
  # as it fails for a user without that package's -dev files.
  mkdir "$tmp/pc" && cp "$pc" "$tmp/pc/"
  export PKG_CONFIG_LIBDIR="$tmp/pc" PKG_CONFIG_PATH= PKG_CONFIG_SYSROOT_DIR="$root"
  flags=$(pkg-config --cflags --libs kiln) ||
    fail "pkg-config --cflags --libs kiln needs more than kiln.pc (see kiln.pc's Requires)"
  echo "# pkg-config --cflags --libs kiln: $flags"
  want="-I$root$prefix/include -L$libdir -lkiln"
  [ "$(echo $flags)" = "$want" ] || fail "expected '$want', got '$flags'"
  static=$(pkg-config --static --libs kiln) || fail "pkg-config --static --libs kiln failed"
  echo "# pkg-config --static --libs kiln: $static"
  for l in -lkiln -lOpenCL -ljansson -lxxhash -lm; do
    case " $static " in *" $l "*) ;; *) fail "--static lacks $l: $static" ;; esac
  done
  # Shared: compiled with the flags as printed, run against the install.
  # shellcheck disable=SC2086 # the flags are words on purpose
  cc -std=c11 -Wall -Wextra -Werror -o "$tmp/shared" "$src/tests/consumer/consumer.c" $flags
  LD_LIBRARY_PATH="$libdir" "$tmp/shared"
  # Static: a copy of the tree without the shared library, so -lkiln can
  # only mean libkiln.a, and nothing but --static's flags to link it.
  unset PKG_CONFIG_SYSROOT_DIR
  cp -a "$root" "$tmp/static-root"
  rm -f "$tmp"/static-root/"$prefix"/lib*/libkiln.so* "$tmp"/static-root/"$prefix"/lib/*/libkiln.so*
  export PKG_CONFIG_SYSROOT_DIR="$tmp/static-root"
  static=$(pkg-config --cflags --static --libs kiln)
  # shellcheck disable=SC2086
  cc -std=c11 -Wall -Wextra -Werror -o "$tmp/static" "$src/tests/consumer/consumer.c" $static
  if readelf -d "$tmp/static" | grep -q 'libkiln\.so'; then
    fail "the static consumer still needs libkiln.so"
  fi
  "$tmp/static"
  ;;
mpi)
  pc=$(find "$root" -name kiln-mpi.pc -print -quit)
  [ -n "$pc" ] || fail "meson install did not install kiln-mpi.pc"
  [ -f "$(dirname "$pc")/kiln.pc" ] || fail "kiln-mpi.pc is not beside kiln.pc"
  # The installed .pc files with their prefix moved into the destdir (a
  # sysroot would move MPI's system paths too); MPI's own .pc from the
  # system.
  mkdir "$tmp/pc"
  for f in kiln.pc kiln-mpi.pc; do
    sed "s|^prefix=.*|prefix=$root$prefix|" "$(dirname "$pc")/$f" > "$tmp/pc/$f"
  done
  flags=$(PKG_CONFIG_PATH="$tmp/pc" pkg-config --cflags --libs kiln-mpi) ||
    fail "pkg-config --cflags --libs kiln-mpi failed"
  echo "# pkg-config --cflags --libs kiln-mpi: $flags"
  case " $flags " in *" -lkiln_mpi "*) ;; *) fail "no -lkiln_mpi in: $flags" ;; esac
  case " $flags " in *" -lkiln "*) ;; *) fail "no -lkiln in: $flags" ;; esac
  # shellcheck disable=SC2086
  cc -std=c11 -Wall -Wextra -Werror -o "$tmp/mpi" "$src/tests/consumer/consumer_mpi.c" $flags
  LD_LIBRARY_PATH="$libdir" "$src/tests/mpi_run.sh" 2 "$tmp/mpi"
  ;;
cmake)
  cmake -S "$src/tests/consumer" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$root$prefix" \
    > "$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log" >&2; fail "cmake could not configure the consumer"; }
  grep -q "kiln_DIR:PATH=$libdir/cmake/kiln" "$tmp/cmake-build/CMakeCache.txt" ||
    fail "CMake found a kiln package other than the one just installed: $(grep kiln_DIR "$tmp/cmake-build/CMakeCache.txt")"
  cmake --build "$tmp/cmake-build" > "$tmp/build.log" 2>&1 || { cat "$tmp/build.log" >&2; fail "the consumer did not build"; }
  LD_LIBRARY_PATH="$libdir" "$tmp/cmake-build/consumer"
  # A version kiln does not satisfy is refused.
  sed 's/find_package(kiln 0.2 /find_package(kiln 0.3 /' "$src/tests/consumer/CMakeLists.txt" > "$tmp/CMakeLists.txt"
  mkdir "$tmp/newer" && cp "$tmp/CMakeLists.txt" "$src/tests/consumer/consumer.c" "$tmp/newer/"
  if cmake -S "$tmp/newer" -B "$tmp/newer-build" -DCMAKE_PREFIX_PATH="$root$prefix" > "$tmp/newer.log" 2>&1; then
    fail "find_package(kiln 0.3) accepted kiln $(grep -o 'PACKAGE_VERSION "[^"]*' "$libdir/cmake/kiln/kilnConfigVersion.cmake")"
  fi
  ;;
*)
  fail "unknown mode (pkgconfig or cmake)"
  ;;
esac
echo "package_consumer ($mode): OK"
