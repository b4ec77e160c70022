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
#   package_consumer.sh SOURCE_ROOT BUILD_ROOT install
#     after `meson install`, with no LD_LIBRARY_PATH and no ldconfig, the
#     installed kiln tool runs (`kiln --version`, from its place and from a
#     moved copy of the tree: its RUNPATH is relative to itself) and so does
#     a program built with `pkg-config --cflags --libs kiln` (kiln.pc's
#     -Wl,-rpath), each loading the libkiln just installed. Exit 77 when the
#     build has no rpath (-Drpath=disabled, or the prefix /usr).
#   package_consumer.sh SOURCE_ROOT BUILD_ROOT mpi
#     kiln-mpi.pc (beside kiln.pc) gives what a libkiln_mpi user needs:
#     kiln's flags, MPI's (through Open MPI's ompi-c.pc) and -lkiln_mpi;
#     tests/consumer/consumer_mpi.c builds with them and runs on 2 ranks.
set -euo pipefail

usage="usage: package_consumer.sh SOURCE_ROOT BUILD_ROOT pkgconfig|cmake|install|mpi"
src=${1:?$usage}
build=${2:?$usage}
mode=${3:?$usage}

if [ "$mode" = cmake ] && ! command -v cmake > /dev/null; then
  echo "# cmake is not installed (apt-get install cmake): skipped"
  exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-package-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
meson install -C "$build" --no-rebuild --quiet --destdir "$root" > "$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; exit 1; }
option() {
  meson introspect "$build" --buildoptions |
    python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == sys.argv[1]))' "$1"
}
prefix=$(option prefix)
rpath=$(option rpath)
if [ "$rpath" = enabled ] || { [ "$rpath" = auto ] && [ "$prefix" != /usr ]; }; then
  rpath=yes
else
  rpath=no
fi
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
  if [ "$rpath" = yes ]; then
    want="-I$root$prefix/include -L$libdir -Wl,-rpath,$libdir -lkiln"
  fi
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
install)
  bin="$root$prefix/$(option bindir)/kiln"
  [ -x "$bin" ] || fail "meson install did not install $bin"
  runpath=$(readelf -d "$bin" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
  if [ "$rpath" = no ]; then
    [ -z "$runpath" ] || fail "-Drpath=disabled or prefix /usr, yet kiln has RUNPATH $runpath"
    echo "# no rpath in this build (prefix $prefix, rpath option $(option rpath)): skipped"
    exit 77
  fi
  echo "# kiln's RUNPATH: $runpath"
  case "$runpath" in '$ORIGIN/'*) ;; *) fail "kiln's RUNPATH is not relative to it: '$runpath'" ;; esac
  # run_alone DIR PROGRAM ARGS: with no LD_LIBRARY_PATH, PROGRAM runs and
  # loads the libkiln under DIR (not one installed elsewhere on the machine).
  run_alone() {
    local where=$1
    shift
    env -u LD_LIBRARY_PATH "$@" > "$tmp/out" 2>&1 || {
      cat "$tmp/out" >&2
      fail "$* does not run without LD_LIBRARY_PATH"
    }
    local loaded
    loaded=$(env -u LD_LIBRARY_PATH ldd "$1" | grep 'libkiln\.so') || true
    case "$loaded" in *" => $where/"*) ;; *) fail "$1 loads a libkiln outside $where: $loaded" ;; esac
    echo "# $*: $(head -1 "$tmp/out")"
  }
  run_alone "$root$prefix" "$bin" --version
  grep -q '^kiln [0-9]' "$tmp/out" || fail "kiln --version printed: $(cat "$tmp/out")"
  # The tree moved elsewhere still runs: nothing absolute in the RUNPATH.
  mkdir "$tmp/moved"
  cp -a "$root$prefix/." "$tmp/moved/"
  run_alone "$tmp/moved" "$tmp/moved/$(option bindir)/kiln" --version
  # A program built with pkg-config against kiln installed to the prefix
  # $root$prefix (kiln.pc as such an install writes it: only its prefix
  # line differs).
  mkdir "$tmp/pc"
  sed "s|^prefix=.*|prefix=$root$prefix|" "$(find "$root" -name kiln.pc -print -quit)" > "$tmp/pc/kiln.pc"
  flags=$(PKG_CONFIG_LIBDIR="$tmp/pc" PKG_CONFIG_PATH= pkg-config --cflags --libs kiln)
  echo "# pkg-config --cflags --libs kiln: $flags"
  # shellcheck disable=SC2086 # the flags are words on purpose
  cc -std=c11 -Wall -Wextra -Werror -o "$tmp/consumer" "$src/tests/consumer/consumer.c" $flags
  run_alone "$root$prefix" "$tmp/consumer"
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
  fail "unknown mode (pkgconfig, cmake, install or mpi)"
  ;;
esac
echo "package_consumer ($mode): OK"
