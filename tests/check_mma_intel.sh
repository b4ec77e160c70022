#!/usr/bin/env bash
# Intel's form of the matrix-unit GEMM (cl_kernels/gemm_mma.cl with
# KILN_INTEL_GPU, which backends/intel.c's build options define: DPAS
# through the sub-group builtins of
# cl_intel_subgroup_matrix_multiply_accumulate) through clang-15 for SPIR
# (spir64), without Intel's compiler (IGC) or GPU: the kernel and its
# compile probe, for f16 and bf16, sub-groups of 8 and 16 lanes and four
# points of its space, are compiled to LLVM IR as OpenCL C 2.0 with the
# builtins declared as the extension's specification declares them (the
# Khronos registry, revision 1.0.0: A int8 with 8 lanes, short8 with 16; B
# int8; float8 accumulators), warnings as errors. The IR must call the
# builtin of the dtype with the sub-group size's A type, as often as the
# point's fragments need, never the other overload, and the kernels must
# carry intel_reqd_sub_group_size and reqd_work_group_size (lanes, warps,
# 1). Controls: the 16-lane kernel against the 8-lane declarations alone
# fails (the calls are type-checked), and KILN_INTEL_SG 32 stops at the
# kernel's #error. What this cannot check: that IGC takes the source and
# the hardware computes the layout (the gate on an Intel GPU does).
#
# Usage: tests/check_mma_intel.sh CL_KERNELS_DIR
# Exit 77 (skipped) without clang-15.
set -u
src=${1:?usage: $0 CL_KERNELS_DIR}
clang=$(command -v clang-15 || true)
if [ -z "$clang" ]; then
  echo "skip: clang-15 not found"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The extension's floating-point builtins (M = 8, the form the kernel uses),
# for devices whose sub-group size is 8 (decl8.h) and 16 (decl16.h).
for t in "8 int8" "16 short8"; do
  set -- $t
  {
    echo "float8 __attribute__((overloadable)) intel_sub_group_f16_f16_matrix_mad_k16($2 a, int8 b, float8 acc);"
    echo "float8 __attribute__((overloadable)) intel_sub_group_bf16_bf16_matrix_mad_k16($2 a, int8 b, float8 acc);"
  } > "$work/decl$1.h"
done
cat "$work/decl8.h" "$work/decl16.h" > "$work/decl.h"

# compile DECLS SG DT DEFS...: gemm_mma.cl to $work/k.ll, errors to $work/err.
# (The specification asks for no pragma; the kernel enables the extension
# all the same, which clang 15 does not know and would warn on.)
compile() {
  local decls=$1 sg=$2 dt=$3
  shift 3
  "$clang" -cc1 -triple spir64-unknown-unknown -cl-std=CL2.0 \
    -finclude-default-header -O2 -Werror -Wno-ignored-pragmas \
    -include "$decls" -I"$src" -DKILN_INTEL_GPU=1 -DKILN_INTEL_SG="$sg" \
    -DDT="$dt" "$@" -emit-llvm -o "$work/k.ll" "$src/gemm_mma.cl" \
    2> "$work/err"
}

failed=0
for sg in 8 16; do
  if [ "$sg" = 8 ]; then a=Dv8_iS_; other=Dv8_sDv8_i; else a=Dv8_sDv8_i; other=Dv8_iS_; fi
  # point: BM BN BK WM WN STAGES; "probe": the compile probe alone. The
  # default (32 x 16 warp tiles, eight warps); one warp tile of 16 x 16 and
  # one stage; the most accumulators validation allows (32 x 16) with BK
  # 64; and 32 warps.
  for point in "64 64 32 32 16 2" "32 32 16 16 16 1" "64 64 64 32 16 2" \
    "128 128 32 32 16 2" probe; do
    for dt in 1 2; do
      if [ "$point" = probe ]; then
        set -- -DKILN_MMA_PROBE=1
        kernel=gemm_mma_probe
        calls=1
        warps=1
      else
        set -- $point
        calls=$(( ($4 / 16) * ($5 / sg) * 2 ))
        warps=$(( ($1 / $4) * ($2 / $5) ))
        set -- -DBM="$1" -DBN="$2" -DBK="$3" -DWM="$4" -DWN="$5" -DSTAGES="$6"
        kernel=gemm_mma
      fi
      if [ "$dt" = 1 ]; then fn=38intel_sub_group_f16_f16; else fn=40intel_sub_group_bf16_bf16; fi
      name="x$sg dt$dt ${point// /x}"
      if ! compile "$work/decl.h" "$sg" "$dt" "$@"; then
        echo "FAIL $name: clang did not compile gemm_mma.cl:"
        head -5 "$work/err"
        failed=1
        continue
      fi
      # Calls (the declaration's line aside) of the right overload, and none
      # of the other sub-group size's.
      n=$(grep -v '^declare' "$work/k.ll" | grep -c "call .*@_Z${fn}_matrix_mad_k16${a}Dv8_f")
      wrong=$(grep -c "@_Z[0-9]*intel_sub_group_[a-z0-9]*_[a-z0-9]*_matrix_mad_k16${other}" "$work/k.ll")
      if [ "$n" -lt "$calls" ] || [ "$wrong" != 0 ]; then
        echo "FAIL $name: $n calls of ${fn#[0-9][0-9]} for $sg lanes (at least $calls), $wrong of the other overload"
        failed=1
        continue
      fi
      # The kernel's required sizes: metadata nodes named on its definition.
      def=$(grep "^define .*@$kernel(" "$work/k.ll")
      sgmd=$(sed -n 's/.*!intel_reqd_sub_group_size \(![0-9]*\).*/\1/p' <<< "$def")
      wgmd=$(sed -n 's/.*!reqd_work_group_size \(![0-9]*\).*/\1/p' <<< "$def")
      if [ -z "$sgmd" ] || [ -z "$wgmd" ] ||
        ! grep -q "^$sgmd = !{i32 $sg}$" "$work/k.ll" ||
        ! grep -q "^$wgmd = !{i32 $sg, i32 $warps, i32 1}$" "$work/k.ll"; then
        echo "FAIL $name: $kernel lacks intel_reqd_sub_group_size $sg or reqd_work_group_size ($sg, $warps, 1)"
        failed=1
        continue
      fi
      echo "ok   $name ($n calls of ${fn#[0-9][0-9]}_matrix_mad_k16, sub-groups of $sg, $warps warps)"
    done
  done
done
# Controls: the calls are type-checked against the declarations (the
# 16-lane kernel's short8 A has no 8-lane overload), and a sub-group size
# DPAS does not take stops at the kernel's #error.
if compile "$work/decl8.h" 16 2; then
  echo "FAIL control: the 16-lane kernel compiled against the 8-lane declarations"
  failed=1
elif ! grep -q "intel_sub_group_bf16_bf16_matrix_mad_k16" "$work/err"; then
  echo "FAIL control: not an error about the builtin's call:"
  head -3 "$work/err"
  failed=1
else
  echo "ok   control: the 16-lane kernel does not build against the 8-lane declarations"
fi
if compile "$work/decl.h" 32 2 -DKILN_MMA_PROBE=1; then
  echo "FAIL control: the probe compiled for sub-groups of 32"
  failed=1
elif ! grep -q "error: \"Intel's matrix units: KILN_INTEL_SG" "$work/err"; then
  echo "FAIL control: not the kernel's #error:"
  head -3 "$work/err"
  failed=1
else
  echo "ok   control: sub-groups of 32 stop at the kernel's #error"
fi
exit $failed
