#!/usr/bin/env bash
# gpu-session.sh: everything a session with a lent NVIDIA GPU measures, in
# three commands of under 10 minutes each (docs/matrix-units.md, "A GPU
# session"), plus the preparation on the machine without a GPU.
#
#   tools/gpu-session.sh pack     here, before the first call: .gpu-kit/ (the
#                                 build's libraries from this machine's
#                                 Debian packages, Fashion-MNIST)
#   tools/gpu-session.sh steps    print the device calls, in order
#   tools/gpu-session.sh 1|2|3    on the GPU machine: set up (NVIDIA's ICD,
#                                 the kit), build, then one part of
#                                 kiln report into $OUT/N-NAME/:
#                                 1 tests, 2 tune + bench, 3 cuBLAS + trainers
#
# Options (before the part): --pocl runs a part here on the CPU device at
# kiln report's small scale, to try the script without a GPU; --build DIR
# uses that configured build tree instead of building one; --out DIR writes
# there instead of $OUT. Each part checks and prints what it set up, never
# needs the network, and fits its command: kiln report gets the time left
# of 600 s less a margin. The files each part leaves (at most 8, 2 folders
# deep: what the device tool brings back) are summary.md, report.json,
# tuning.txt and tuning_db_rows.txt where tuned, logs.tar.gz and session.log.
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# GPU_SESSION_KIT and GPU_SESSION_STATE move the two folders (the tests
# keep them out of the checkout).
KIT_SRC=${GPU_SESSION_KIT:-$ROOT/.gpu-kit}
STATE=${GPU_SESSION_STATE:-$ROOT/.gpu-session}
START=$(date +%s)
LIMIT=${GPU_SESSION_LIMIT:-600}
POCL=0
BUILD=
OUTDIR=${OUT:-}

say() { printf 'gpu-session: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# The Debian packages the build needs beyond a compiler, meson and ninja:
# the OpenCL ICD loader and headers, jansson, xxhash, cmocka, zlib and
# pkgconf (a CUDA image may have none of them, and nothing can be fetched
# on the GPU machine).
KIT_PACKAGES="ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-c-headers
  libjansson4 libjansson-dev libxxhash0 libxxhash-dev libcmocka0
  libcmocka-dev zlib1g zlib1g-dev pkgconf pkgconf-bin libpkgconf3"
FMNIST=/usr/share/datasets/fashion-mnist

cmd_pack() {
  command -v dpkg-query >/dev/null || die "pack needs dpkg (a Debian machine)"
  rm -rf "$KIT_SRC" && mkdir -p "$KIT_SRC" || exit 1
  local files="$KIT_SRC/files.txt" p
  : >"$files"
  for p in $KIT_PACKAGES; do
    dpkg-query -W -f='${Package} ${Version}\n' "$p" >>"$KIT_SRC/MANIFEST" ||
      die "package $p is not installed here (the CI image has it)"
    dpkg -L "$p" | while read -r f; do
      [ -f "$f" ] || [ -L "$f" ] || continue
      case $f in /usr/share/doc/* | /usr/share/man/* | /usr/share/lintian/*) continue ;; esac
      printf '%s\n' "${f#/}" >>"$files"
    done
  done
  tar -C / -czf "$KIT_SRC/root.tar.gz" -T "$files" || die "cannot pack the kit"
  rm -f "$files"
  if [ -f "$FMNIST/train-images-idx3-ubyte.gz" ]; then
    mkdir -p "$KIT_SRC/fashion-mnist" && cp "$FMNIST"/*.gz "$KIT_SRC/fashion-mnist/"
  else
    say "no Fashion-MNIST in $FMNIST: the MLP and CNN runs will be skipped"
  fi
  say "wrote $KIT_SRC ($(du -sh "$KIT_SRC" | cut -f1)); name .gpu-kit in the device tool's carry"
}

cmd_steps() {
  cat <<'EOF'
A GPU session, step by step (device tool: run; each call at most 600 s):

0. Here, once:       tools/gpu-session.sh pack
   (.gpu-kit/ is in .gitignore; it travels only when named in carry)
1. run  command: tools/gpu-session.sh 1     carry: [".gpu-kit"]  timeout_s: 600
   set-up, build, kiln info, the device tests (about 4 minutes)
2. run  command: tools/gpu-session.sh 2     carry: [".gpu-kit"]  timeout_s: 600
   kiln tune (gemm, gemm_mma, transpose, reduce, elementwise) and kiln bench
   (f32, f16, bf16 GEMM to 8192): about 9 minutes
   If the machine went back between calls, copy 2-tune-bench/tuning.txt
   from this call's files to .gpu-kit/tuning.txt before call 3: part 3
   then reads it (KILN_TUNING), so that bf16 runs on what part 2 tuned.
3. run  command: tools/gpu-session.sh 3     carry: [".gpu-kit"]  timeout_s: 600
   kiln-compare-cublas (SGEMM with TF32 off, bf16 and f16 GEMM, 1024-8192),
   the MLP, CNN and GPT-2 124M trainers in f32 and bf16 (about 6 minutes)

Each call's files come back under files_at/N-NAME/: summary.md, report.json,
logs.tar.gz, session.log (and tuning.txt, tuning_db_rows.txt from call 2).
Commit them (reports/gpu/DEVICE-DATE/N-NAME/), paste tuning_db_rows.txt's
rows into backends/tuning_db.c, and copy the figures into
docs/performance.md's GPU section.
EOF
}

# ---- on the GPU machine (or here with --pocl) ------------------------------

# The kit (pack's tarball) unpacked under $STATE/kit: its .pc files and
# absolute symlinks pointed into it, its libraries first on the library
# path, its pkg-config the only one meson asks.
use_kit() {
  local kit=$STATE/kit
  if [ ! -f "$KIT_SRC/root.tar.gz" ]; then
    say "no .gpu-kit/root.tar.gz (tools/gpu-session.sh pack here, then carry .gpu-kit): using this machine's own libraries"
    return 0
  fi
  if [ ! -f "$kit/.unpacked" ] || [ "$KIT_SRC/root.tar.gz" -nt "$kit/.unpacked" ]; then
    rm -rf "$kit" && mkdir -p "$kit" && tar -C "$kit" -xzf "$KIT_SRC/root.tar.gz" ||
      die "cannot unpack the kit into $kit"
    local pc link target
    find "$kit" -name '*.pc' | while read -r pc; do
      sed -i -e "s#=/usr#=$kit/usr#g" -e "s# -I/usr# -I$kit/usr#g" \
        -e "s# -L/usr# -L$kit/usr#g" "$pc"
    done
    find "$kit" -type l | while read -r link; do
      target=$(readlink "$link")
      case $target in /*) [ -e "$kit$target" ] && ln -sfn "$kit$target" "$link" ;; esac
    done
    touch "$kit/.unpacked"
  fi
  export PKG_CONFIG_LIBDIR="$kit/usr/lib/x86_64-linux-gnu/pkgconfig:$kit/usr/share/pkgconfig"
  # Not the kit's /lib (zlib): the machine's own newer zlib serves at run
  # time, the kit's libz.so only links.
  export LD_LIBRARY_PATH="$kit/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$PATH:$kit/usr/bin"
  command -v pkg-config >/dev/null || export PKG_CONFIG="$kit/usr/bin/pkgconf"
  say "kit: $(tr '\n' ' ' <"$KIT_SRC/MANIFEST" | cut -c1-300)"
}

# NVIDIA's OpenCL library, which a container may hold without the .icd
# file that names it (PLATFORM-FACTS.md): an .icd of our own in
# $STATE/vendors, through OCL_ICD_VENDORS (nothing outside the checkout is
# changed).
nvidia_icd() {
  local lib d
  lib=$( { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } |
    awk '/libnvidia-opencl\.so\.1/ { print $NF; exit }')
  for d in /usr/lib/x86_64-linux-gnu /usr/local/nvidia/lib64 /usr/lib64 /usr/lib; do
    [ -n "$lib" ] && break
    [ -e "$d/libnvidia-opencl.so.1" ] && lib=$d/libnvidia-opencl.so.1
  done
  if [ -z "$lib" ]; then
    say "NVIDIA's OpenCL library (libnvidia-opencl.so.1) is not on this machine: the driver's OpenCL part is not mounted (NVIDIA_DRIVER_CAPABILITIES without compute?); kiln report will say no GPU"
    return 0
  fi
  mkdir -p "$STATE/vendors" && echo "$lib" >"$STATE/vendors/nvidia.icd"
  export OCL_ICD_VENDORS=$STATE/vendors
  say "NVIDIA OpenCL: $lib, named by $STATE/vendors/nvidia.icd (OCL_ICD_VENDORS)"
}


build() {
  if [ -n "$BUILD" ]; then
    [ -x "$BUILD/tools/kiln" ] || die "--build $BUILD: no tools/kiln in it"
    return 0
  fi
  BUILD=$ROOT/build-gpu-session
  command -v cc >/dev/null || command -v gcc >/dev/null ||
    die "no C compiler (cc, gcc) on this machine"
  # pip's ninja and meson (a CUDA image's Python has them) where their
  # scripts are not on PATH.
  if ! command -v ninja >/dev/null; then
    local bin
    bin=$(python3 -c 'import ninja; print(ninja.BIN_DIR)' 2>/dev/null) &&
      export PATH="$PATH:$bin"
    command -v ninja >/dev/null || die "no ninja on this machine (nor Python's ninja package)"
  fi
  # Python's meson where its script is not on PATH: kiln report's test
  # step runs `meson test` too.
  if ! command -v meson >/dev/null; then
    python3 -c 'import mesonbuild' 2>/dev/null || die "no meson on this machine"
    mkdir -p "$STATE/bin" &&
      printf '#!/bin/sh\nexec python3 -m mesonbuild.mesonmain "$@"\n' >"$STATE/bin/meson" &&
      chmod +x "$STATE/bin/meson" && export PATH="$STATE/bin:$PATH"
  fi
  # meson finds CUDA (for kiln-compare-cublas) through CUDA_PATH or nvcc.
  if [ -z "${CUDA_PATH:-}" ] && command -v nvcc >/dev/null; then
    CUDA_PATH=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
    export CUDA_PATH
  fi
  # A tree configured from another path (a new copy of the checkout) is
  # configured again from scratch.
  if [ -f "$BUILD/build.ninja" ] &&
    ! grep -q "\"source\": \"$ROOT\"" "$BUILD/meson-info/meson-info.json" 2>/dev/null; then
    rm -rf "$BUILD"
  fi
  if [ ! -f "$BUILD/build.ninja" ]; then
    # release: the figures are what a user's build gets; no werror: a newer
    # compiler's new warnings must not stop a measurement; no Python
    # package and no MPI: neither is measured.
    meson setup "$BUILD" "$ROOT" --buildtype=release -Dwerror=false \
      -Dpython=disabled -Dmpi=disabled >"$STATE/meson-setup.log" 2>&1 ||
      { tail -30 "$STATE/meson-setup.log" >&2; die "meson setup failed (log above)"; }
    grep -E "^ *(Run-time dependency|Program nvcc|Message)" "$STATE/meson-setup.log" >&2
  fi
  ninja -C "$BUILD" >"$STATE/ninja.log" 2>&1 ||
    { tail -30 "$STATE/ninja.log" >&2; die "the build failed (log above)"; }
  say "built $BUILD in $(($(date +%s) - START)) s"
}

# Part N: kiln report's groups into $OUTDIR/N-NAME.
part() {
  local n=$1 name steps out left
  case $n in
    1) name=tests steps=info,tests ;;
    2) name=tune-bench steps=info,tune,bench ;;
    3) name=cublas-train steps=info,cublas,train ;;
    *) die "no part '$n' (1, 2 or 3; or pack, steps)" ;;
  esac
  [ -n "$OUTDIR" ] || die "no \$OUT and no --out DIR"
  mkdir -p "$STATE" "$OUTDIR" || exit 1
  out=$OUTDIR/$n-$name
  rm -rf "$out" && mkdir -p "$out" || exit 1
  exec 2> >(tee -a "$out/session.log" >&2)
  say "part $n ($name) at $(date -u +%FT%TZ) in $ROOT"
  use_kit
  [ "$POCL" = 1 ] || nvidia_icd
  build
  export KILN_CACHE_DIR=$STATE/cache
  # Here, the GPU family's kernels on PoCL, so that kiln tune has spaces to
  # search (as the report_quick test does).
  [ "$POCL" = 1 ] && export KILN_PROFILE=${KILN_PROFILE:-nvidia}
  # Part 3 after a machine that went back: part 2's tuning, carried.
  if [ "$n" = 3 ] && [ ! -f "$STATE/tuning.txt" ] && [ -f "$KIT_SRC/tuning.txt" ]; then
    export KILN_TUNING=$KIT_SRC/tuning.txt
    say "part 2's tuning from $KILN_TUNING (KILN_TUNING)"
  fi
  "$BUILD/tools/kiln" info --wide 2>&1 |
    grep -E "^Platform|^  Device|^ *Devices:|Driver version|GEMM \(matrix units\)" | head -30 >&2
  left=$((LIMIT - ($(date +%s) - START) - 40))
  [ "$left" -ge 60 ] || die "only $left s left for kiln report after the set-up"
  local args=(report --steps "$steps" --out "$out" --time-limit "$left" --wide)
  [ "$POCL" = 1 ] && args+=(--quick)
  [ -d "$KIT_SRC/fashion-mnist" ] && args+=(--fmnist-data "$KIT_SRC/fashion-mnist")
  say "kiln ${args[*]}"
  "$BUILD/tools/kiln" "${args[@]}"
  local rc=$?
  [ -f "$out/tuning.txt" ] && cp "$out/tuning.txt" "$STATE/tuning.txt"
  if [ -d "$out/logs" ]; then
    tar -C "$out" -czf "$out/logs.tar.gz" logs && rm -rf "$out/logs"
  fi
  say "part $n: kiln report exit $rc after $(($(date +%s) - START)) s; files in $out:"
  ls -l "$out" >&2
  [ -f "$out/summary.md" ] && awk '/^\| step \|/ { on = 1 } on && /^$/ { exit } on' "$out/summary.md"
  return "$rc"
}

while [ $# -gt 0 ]; do
  case $1 in
    --pocl) POCL=1; shift ;;
    --build) BUILD=$(cd "$2" && pwd) || die "--build $2: no such directory"; shift 2 ;;
    --out) OUTDIR=$2; shift 2 ;;
    -h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    pack) cmd_pack; exit ;;
    steps) cmd_steps; exit 0 ;;
    1 | 2 | 3) part "$1"; exit ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
die "no part given (see --help)"
