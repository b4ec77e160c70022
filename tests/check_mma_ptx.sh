#!/usr/bin/env bash
# The inline PTX of the matrix-unit GEMM (cl_kernels/gemm_mma.cl) through
# NVIDIA's assembler, without a GPU: the kernel and its compile probe, for f16
# and bf16 (bf16 alone beyond the first point) and five points of its space,
# are compiled by clang-15 for nvptx64 (OpenCL C 1.2, builtins from libclc's
# nvptx64--nvidiacl.bc, so that the PTX is whole: no unresolved calls), and
# ptxas assembles the PTX for sm_80 and for sm_90 (clang 15 knows no sm_90:
# the same PTX, its .target and .version raised, which is what NVIDIA's driver
# does with sm_80 code on Hopper). ptxas then checks every operand of every
# ldmatrix and mma.sync the kernel contains, as NVIDIA's OpenCL compiler would
# hand them on. The PTX must also hold the instructions (an emptied asm()
# would pass ptxas) and declare its __local tiles 16-byte aligned (ldmatrix's
# rule, which ptxas cannot check); a control run checks that ptxas refuses a
# wrong mma.sync. ptxas -v must also report no spills and no stack frame, with
# the work-group size the kernel requires declared to ptxas (.reqntid 32,
# WARPS, 1: clang does not write it, NVIDIA's compiler does), so that a
# 1024-work-item point is held to 64 registers as on the GPU; the points
# include the space's extremes: 128 accumulators per lane with BK 64 (the most
# registers) and 32 warps (the fewest registers allowed).
#
# Usage: tests/check_mma_ptx.sh CL_KERNELS_DIR
# Exit 77 (skipped) without ptxas (PTXAS, else /usr/local/cuda/bin/ptxas or
# PATH), clang-15 or libclc's nvptx64 library.
set -u
src=${1:?usage: $0 CL_KERNELS_DIR}
ptxas=${PTXAS:-/usr/local/cuda/bin/ptxas}
[ -x "$ptxas" ] || ptxas=$(command -v ptxas || true)
clang=$(command -v clang-15 || true)
libclc=/usr/lib/clc/nvptx64--nvidiacl.bc
for need in "$ptxas" "$clang"; do
  if [ -z "$need" ]; then
    echo "skip: ptxas or clang-15 not found"
    exit 77
  fi
done
if [ ! -f "$libclc" ]; then
  echo "skip: $libclc (libclc-15) not found"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

failed=0
# point: BM BN BK WM WN STAGES; "probe": the compile probe alone.
for point in "64 64 32 32 32 2" "32 32 16 16 16 1" "128 128 32 64 64 2" \
    "64 64 64 64 64 2" "64 128 32 16 16 2" probe; do
  # f16 and bf16 differ only in the instruction's type suffix: both for
  # the first point and the probe, bf16 (the training type) for the rest.
  dts="2"
  case "$point" in "64 64 32 32 32 2" | probe) dts="1 2" ;; esac
  for dt in $dts; do
    if [ "$point" = probe ]; then
      defs="-DKILN_MMA_PROBE=1"
      want=2
    else
      set -- $point
      defs="-DBM=$1 -DBN=$2 -DBK=$3 -DWM=$4 -DWN=$5 -DSTAGES=$6"
      want=2 # at least one of each, whatever the unrolling
    fi
    name="dt$dt ${point// /x}"
    ptx=$work/k.ptx
    # -fgnu-keywords: clang's OpenCL mode takes asm() only with it;
    # NVIDIA's compiler takes it as is.
    if ! "$clang" -cc1 -triple nvptx64-unknown-nvidiacl -target-cpu sm_80 \
        -cl-std=CL1.2 -finclude-default-header -fgnu-keywords -O2 \
        -mlink-builtin-bitcode "$libclc" -Wno-linker-warnings \
        -I"$src" -DDT=$dt $defs -S -o "$ptx" "$src/gemm_mma.cl"; then
      echo "FAIL $name: clang did not compile gemm_mma.cl"
      failed=1
      continue
    fi
    if [ "$dt" = 1 ]; then types=f16.f16; else types=bf16.bf16; fi
    mma=$(grep -c "mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.$types\.f32" "$ptx")
    ldsm=$(grep -c "ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16" "$ptx")
    if [ "$mma" -lt 1 ] || [ "$ldsm" -lt 1 ] || [ $((mma + ldsm)) -lt "$want" ]; then
      echo "FAIL $name: the PTX holds $mma mma.sync and $ldsm ldmatrix"
      failed=1
      continue
    fi
    # ldmatrix needs 16-byte aligned rows: every __local tile must be.
    if grep -E "^\s*\.shared \.align" "$ptx" | grep -Evq "\.align (16|32|64|128) "; then
      echo "FAIL $name: a __local array aligned to less than 16 bytes:"
      grep -E "^\s*\.shared \.align" "$ptx"
      failed=1
      continue
    fi
    if grep -q "call" "$ptx"; then
      echo "FAIL $name: the PTX calls functions libclc did not define:"
      grep "call" -A2 "$ptx" | head -5
      failed=1
      continue
    fi
    # The work-group the kernel requires (reqd_work_group_size), for
    # ptxas's register limit.
    if [ "$point" != probe ]; then
      warps=$(( ($1 / $4) * ($2 / $5) ))
      awk -v w="$warps" '/^\.visible \.entry gemm_mma\(/ { e = 1 }
        e && /^\)/ { print ") .reqntid 32, " w ", 1"; e = 0; next } { print }' \
        "$ptx" > "$work/req.ptx" && mv "$work/req.ptx" "$ptx"
      grep -q "^) \.reqntid 32, $warps, 1" "$ptx" ||
        { echo "FAIL $name: no .reqntid written"; failed=1; continue; }
    fi
    for sm in 80 90; do
      in=$ptx
      if [ "$sm" = 90 ]; then
        in=$work/k90.ptx
        sed -e 's/^\.target sm_80/.target sm_90/' \
            -e 's/^\.version [0-9.]*/.version 7.8/' "$ptx" > "$in"
      fi
      if "$ptxas" -v -arch=sm_$sm -o "$work/k.cubin" "$in" 2> "$work/err"; then
        use=$(grep -o "Used [0-9]* registers" "$work/err" | head -1)
        if ! grep -q "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" "$work/err"; then
          echo "FAIL $name sm_$sm: spills or a stack frame ($use):"
          grep -E "stack frame|spill" "$work/err" | head -3
          failed=1
          continue
        fi
        echo "ok   $name sm_$sm ($mma mma.sync, $ldsm ldmatrix; $use, no spills)"
      else
        echo "FAIL $name sm_$sm:"
        head -5 "$work/err"
        failed=1
      fi
    done
  done
done
# The control: a wrong type in the instruction must fail, so a pass above
# means ptxas read the instructions.
sed 's/\.f32\.bf16\.bf16\.f32/.f32.bf16.f16.f32/' "$work/k.ptx" > "$work/bad.ptx"
if "$ptxas" -arch=sm_80 -o "$work/bad.cubin" "$work/bad.ptx" 2> /dev/null; then
  echo "FAIL control: ptxas took mma.sync with mixed bf16 and f16 operands"
  failed=1
else
  echo "ok   control: ptxas refuses a wrong mma.sync"
fi
exit $failed
