#!/usr/bin/env bash
# AMD's forms of the matrix-unit GEMM (cl_kernels/gemm_mma.cl with
# KILN_AMD_GPU, which backends/amd.c's build options define: the MFMA
# 16x16x16 f16 and bf16_1k builtins on CDNA2 and CDNA3, the WMMA 16x16x16
# f16 and bf16 wave32 builtins on RDNA3) through clang-15's AMDGPU backend,
# without a GPU: the kernel and its compile probe, for f16 and bf16 (bf16
# alone beyond the first point) and five points of its space, are compiled
# for gfx90a (CDNA2: MI200), gfx940 (CDNA3; clang 15 knows no gfx942) and
# gfx1100 (RDNA3: RX 7900) as OpenCL C 1.2, with libclc's amdgcn--amdhsa.bc
# linked in (so that no call is left to an unknown function, whose stack
# clang would take as 16 KiB of scratch). The assembly must hold the MFMA or
# WMMA instruction of the dtype, and the kernel no scratch (no private
# arrays, no spills), no VGPR or SGPR spills and no calls; the registers
# (VGPRs and AGPRs) are printed. A control checks that a GPU without those
# forms (gfx908, MI100: no bf16_1k; gfx1030, RDNA2) stops at the kernel's
# #error, not in the backend (clang-15 aborts on builtins a target lacks).
#
# Usage: tests/check_mma_amd.sh CL_KERNELS_DIR
# Exit 77 (skipped) without clang-15 or libclc's amdgcn--amdhsa library.
set -u
src=${1:?usage: $0 CL_KERNELS_DIR}
clang=$(command -v clang-15 || true)
libclc=/usr/lib/clc/amdgcn--amdhsa.bc
if [ -z "$clang" ]; then
  echo "skip: clang-15 not found"
  exit 77
fi
if [ ! -f "$libclc" ]; then
  echo "skip: $libclc (libclc-15) not found"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# compile CPU DT DEFS...: gemm_mma.cl to $work/k.s, errors to $work/err.
compile() {
  local cpu=$1 dt=$2
  shift 2
  "$clang" -cc1 -triple amdgcn-amd-amdhsa -target-cpu "$cpu" -cl-std=CL1.2 \
    -finclude-default-header -O2 -mlink-builtin-bitcode "$libclc" \
    -Wno-linker-warnings -I"$src" -DKILN_AMD_GPU=1 -DDT="$dt" "$@" \
    -S -o "$work/k.s" "$src/gemm_mma.cl" 2> "$work/err"
}

failed=0
for cpu in gfx90a gfx940 gfx1100; do
  # point: BM BN BK WM WN STAGES; "probe": the compile probe alone. The
  # default point (WMMA's: 32 x 16 warp tiles); the most accumulators a lane
  # holds (MFMA: 64 x 64 warp tiles, 64 floats, with BK 32 and 64; WMMA, 8
  # floats a fragment: 16 x 64, 32 floats with BK 16, and 16 x 16, 8 with
  # BK 64, one stage: the most its validation allows, accumulators x BK at
  # most 512, as clang 15 gives gfx1100 128 VGPRs); and the most wavefronts
  # (16: 1024 work-items with MFMA's 64 lanes, 512 with WMMA's 32).
  first="64 64 32 32 32 2"
  big="128 128 32 64 64 2"
  deep="64 64 64 64 64 2"
  many="128 128 32 32 32 2"
  case "$cpu" in
    gfx11*) first="64 64 32 32 16 2"; big="64 128 16 16 64 2"
      deep="64 64 64 16 16 1"; many="128 64 32 32 16 2" ;;
  esac
  for point in "$first" "32 32 16 16 16 1" "$big" "$deep" "$many" probe; do
    dts="2"
    case "$point" in "$first" | probe) dts="1 2" ;; esac
    for dt in $dts; do
      if [ "$point" = probe ]; then
        set -- -DKILN_MMA_PROBE=1
        kernel=gemm_mma_probe
      else
        set -- $point
        set -- -DBM="$1" -DBN="$2" -DBK="$3" -DWM="$4" -DWN="$5" -DSTAGES="$6"
        kernel=gemm_mma
      fi
      name="$cpu dt$dt ${point// /x}"
      if ! compile "$cpu" "$dt" "$@"; then
        echo "FAIL $name: clang did not compile gemm_mma.cl:"
        head -5 "$work/err"
        failed=1
        continue
      fi
      # gfx90a's mnemonics; gfx94x writes them v_mfma_f32_16x16x16_f16 and
      # v_mfma_f32_16x16x16_bf16; gfx11's WMMA v_wmma_f32_16x16x16_f16 and
      # _bf16.
      unit=v_mfma
      case "$cpu" in gfx11*) unit=v_wmma ;; esac
      if [ "$dt" = 1 ]; then op="16x16x16_?f16"; else op="16x16x16(bf16_1k|_bf16)"; fi
      mfma=$(grep -cE "${unit}_f32_${op}[[:space:]]" "$work/k.s")
      if [ "$mfma" -lt 1 ]; then
        echo "FAIL $name: the assembly holds no ${unit}_f32_$op"
        failed=1
        continue
      fi
      # The file holds one kernel: its metadata.
      scratch=$(awk '/\.amdhsa_private_segment_fixed_size/ {print $2; exit}' "$work/k.s")
      vgprs=$(awk '/^[[:space:]]*\.vgpr_count:/ {print $2; exit}' "$work/k.s")
      agprs=$(awk '/\.agpr_count:/ {print $NF; exit}' "$work/k.s")
      spills=$(awk '/\.[sv]gpr_spill_count:/ {s += $2; n++} END {if (n) print s}' "$work/k.s")
      if [ -z "$scratch" ] || [ -z "$vgprs" ] || [ -z "$spills" ]; then
        echo "FAIL $name: no metadata for kernel $kernel in the assembly"
        failed=1
        continue
      fi
      if [ "$scratch" != 0 ] || [ "$spills" != 0 ] || grep -q "s_swappc\|s_call" "$work/k.s"; then
        echo "FAIL $name: $scratch bytes of scratch, $spills spilled registers, or a call"
        failed=1
        continue
      fi
      echo "ok   $name ($mfma ${unit#v_}; $vgprs VGPRs, ${agprs:-0} AGPRs, no scratch, no spills)"
    done
  done
done
# The controls: targets without these MFMA forms stop at the kernel's own
# #error, so that a driver for them fails the probe with a reason.
for cpu in gfx908 gfx1030; do
  if compile "$cpu" 2 -DKILN_MMA_PROBE=1; then
    echo "FAIL control $cpu: the probe compiled for a GPU without the forms"
    failed=1
  elif ! grep -q "error: \"AMD's matrix units" "$work/err"; then
    echo "FAIL control $cpu: not the kernel's #error:"
    head -3 "$work/err"
    failed=1
  else
    echo "ok   control: $cpu stops at the kernel's #error"
  fi
done
exit $failed
