#!/usr/bin/env bash
# kiln's reliability stages, run by .ci/run after the PoCL suite (README
# command (b)) and runnable by hand:
#
#   rusticl   the suite again on Mesa rusticl (a second, independent
#             OpenCL compiler): RUSTICL_ENABLE=llvmpipe KILN_TEST_DEVICE=rusticl,
#             less the tuner's own tests and what never reaches rusticl
#             (rusticl_skip says why), quiet_kernels with rusticl alone
#   asan      an ASan + UBSan build; the suite with any finding fatal and
#             leaks checked (driver leaks: tests/sanitizers/lsan.supp),
#             PoCL's kernel cache on (pocl_cache_on says why)
#   tsan      a ThreadSanitizer build of the multi-threaded tests; the
#             thread stress test on PoCL and rusticl, the others on PoCL
#             (driver internals: tests/sanitizers/tsan.supp)
#   oclgrind  every op kernel under Oclgrind (tests/oclgrind/run.sh)
#   fuzz      the libFuzzer targets of tests/fuzz, each for FUZZ_SECONDS
#             (default 15) from its checked-in seed corpus, KILN_JOBS at once
#
# Usage: tests/reliability.sh [STAGE...]     (default: all, in that order)
# Environment:
#   KILN_BUILD_DIR       the ordinary build, made if missing (default build)
#   KILN_RELIABILITY_DIR where the sanitizer and fuzz builds go (default
#                        build-reliability: asan/, tsan/, fuzz/ under it)
#   FUZZ_SECONDS         seconds per fuzz target (default 15); run longer by
#                        hand, e.g. FUZZ_SECONDS=3600 tests/reliability.sh fuzz
#   KILN_JOBS            tests (and fuzzers) run at once (default 2)
# Packages beyond README's: mesa-opencl-icd (rusticl), oclgrind, clang and
# libclang-rt-14-dev (libFuzzer). Every stage runs even if an earlier one
# failed; the exit status is 1 if any failed, and a table of stage times
# and results is printed last.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
root=$(pwd)
build=${KILN_BUILD_DIR:-build}
rel=${KILN_RELIABILITY_DIR:-build-reliability}
fuzz_seconds=${FUZZ_SECONDS:-15}
jobs=${KILN_JOBS:-2}
export KILN_REQUIRE_DEVICE=1

stages=${*:-rusticl asan tsan oclgrind fuzz}
summary=()
failed=0

# Tests that compile many programs with PoCL's own cache off: under ASan with
# full allocation stacks (which the LSan suppressions need, see lsan.supp)
# every LLVM allocation is unwound, so these take 4 to 13 minutes each
# there. They run in a second pass with ASan's fast unwinder and no leak
# check: memory errors and undefined behaviour are still fatal, and the
# code they exercise (the cache, GEMM's host side) also runs, leak-checked,
# in program, kernel, memo, resources and threads.
# The MPI tests (mpi_*, train_dp_*) are here too: Open MPI's own allocations
# at MPI_Init are not ours to leak-check.
asan_heavy="cache cache_warm op_gemm mpi_np1 mpi_np2 mpi_np3 mpi_killed_rank"
asan_heavy+=" train_dp_np2 train_dp_np3 gpt_dp"
# The parameter-space tests and the tuner's build cold programs by the dozen.
asan_heavy+=" tune_gate tune_spaces space_transpose_0 space_reduce_0 space_reduce_1"
asan_heavy+=" space_reduce_2 space_reduce_3 space_reduce_4 space_elementwise_0"
asan_heavy+=" space_elementwise_1 space_elementwise_2 space_elementwise_3"
# kiln report runs the kiln tool as child processes (kiln tune over dozens
# of candidate programs, kiln bench, the trainer): the drivers' JIT
# allocations in those children (rusticl's, PoCL's) are not kiln's to
# leak-check, and the ones LSan saw vary from run to run.
asan_heavy+=" report_quick"
# Not meaningful under a sanitizer build: readme_example and the package
# tests (package_pkgconfig, package_cmake, package_mpi, package_install) compile a consumer
# with plain cc against the installed (here: instrumented) library, which
# ASan refuses to run ("ASan runtime does not come first"); the bad-input
# checks are Python scripts reading the sources.
asan_skip="readme_example bad_input_coverage bad_input_coverage_selftest"
asan_skip+=" package_pkgconfig package_cmake package_mpi package_install"
# quiet_kernels and parallel_builds check the driver's compiler (what it
# prints, PoCL's cache race) by compiling every op kernel cold on purpose:
# under ASan every LLVM allocation of those compiles is intercepted, and one
# cold `kiln cache warm` ran past 4 minutes of CPU without finishing. The
# kiln code they drive (the build path and the cache) runs under ASan in
# program, kernel, memo, cache and cache_warm.
asan_skip+=" quiet_kernels parallel_builds"
# gemm_mma_ptxas runs clang-15 and ptxas on PTX: no kiln code to instrument.
asan_skip+=" gemm_mma_ptxas"
# gpu_session is bash driving `kiln report` (tools/gpu-session.sh): the
# kiln code it reaches is the report tool's, which report_quick runs in the
# second pass; alone here it took 92 s of the stage.
asan_skip+=" gpu_session"

# PoCL's own kernel cache for the sanitizer stages. The tests of kiln's
# cache (program, kernel, cache, cache_warm, memo) turn PoCL's cache off so
# that every build reaches the driver's compiler; under ASan or TSan that
# compiler (PoCL's LLVM, not instrumented but every allocation intercepted)
# is what takes the time: cache_warm took 118 s under ASan and 131 s under
# TSan (CI on a quiet machine), 9 s under TSan with PoCL's cache even on a
# loaded one. What these stages test is
# kiln's host code, which runs the same either way (kiln's cache, its build
# counts and its binaries are kiln's; PoCL's cache only answers the
# clBuildProgram that kiln makes), and cold builds through PoCL's compiler
# are tested by README command (b). So here the tests run with PoCL's cache
# on (meson's --wrapper, since a test's own environment overrides the
# caller's), in its usual place (~/.cache/pocl: README command (b) warmed it
# with every op kernel). The tests that need a cold compiler set their own
# cache directories (quiet_kernels, parallel_builds) and do not run here.
pocl_cache_on=(--wrapper "env POCL_KERNEL_CACHE=1")

configure() { # dir, meson options...
  local dir=$1
  shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" > "$dir.setup.log" 2>&1 ||
      { cat "$dir.setup.log"; return 1; }
  fi
}

setup() { # dir, meson options...: configured and built whole
  configure "$@" || return 1
  ninja -C "$1" -j "$jobs" > /dev/null || ninja -C "$1" -j 1
}

need() { # command, package
  if ! command -v "$1" > /dev/null; then
    echo "reliability: '$1' is missing (apt-get install $2)"
    return 1
  fi
}

# Each meson test run here writes its own log (--logbase): meson-logs/
# testlog-rusticl.json beside README command (b)'s testlog.json, the ASan
# passes' testlog-pass1-env.json and testlog-pass2-env.json (meson adds the
# wrapper's name), so every stage's durations stay.
test_names() { # dir: every registered test's name, one a line
  # meson lists "kiln / name" or "kiln:slow / name" once the project has
  # more than one suite, and a bare name for a test in none: keep the name.
  # It lists them in the order it runs them (by priority, tests/meson.build)
  # and runs tests named on its command line in the order given.
  meson test -C "$1" --no-rebuild --list 2>/dev/null | sed 's/^.* \/ //; s/^ *//'
}

# kiln tune's own tests (tune_gate, tune_spaces) search dozens of candidates
# each, and llvmpipe generates code for every one at its first launch: on
# rusticl each ran past 300 s (a 20 s run timeout tripped on one GEMM
# candidate under CI's load). What they test is the tuner's logic, not the
# device, and the kernels they search are checked on rusticl point by point
# by gemm_space_* and space_* here.
rusticl_skip="tune_gate tune_spaces"
# What never reaches rusticl, so this stage would only repeat README command
# (b): parallel_builds runs `kiln demo`, which takes the first device (PoCL)
# and tests PoCL's kernel-cache race; gemm_mma_ptxas is clang-15 and ptxas
# on PTX, no OpenCL; the fake-ICD tests load only the fake driver
# (OCL_ICD_VENDORS); train_data_errors feeds the trainer bad files (no
# device); the rest read sources, symbols or documents.
rusticl_skip+=" parallel_builds gemm_mma_ptxas abi_symbols abi_symbols_mpi"
rusticl_skip+=" bad_input_coverage bad_input_coverage_selftest conventions"
rusticl_skip+=" conventions_selftest layers layers_selftest docs_links"
rusticl_skip+=" docs_selftest train_data_errors"
# report_quick and gpu_session run `kiln report` on the first device, and
# gpu_session's parts on PoCL by name (--pocl): both only repeat README
# command (b) here, each alone (64 s of the stage).
rusticl_skip+=" report_quick gpu_session"
# quiet_kernels runs `kiln cache warm` on the default devices, which with
# rusticl enabled are both CPUs: here it runs by itself with KILN_DEVICE
# selecting rusticl, so that rusticl's compiler gets every kernel variant
# of both profiles (and must stay quiet) while PoCL's, which README command
# (b) checked, is not compiled again.
rusticl_alone="quiet_kernels"

stage_rusticl() {
  setup "$build" || return 1
  local names=() name
  while read -r name; do
    case " $rusticl_skip $rusticl_alone " in *" $name "*) continue ;; esac
    case $name in fake_icd_*) continue ;; esac
    names+=("$name")
  done < <(test_names "$build")
  RUSTICL_ENABLE=llvmpipe KILN_TEST_DEVICE=rusticl \
    meson test -C "$build" --no-rebuild --print-errorlogs \
    --logbase testlog-rusticl --num-processes "$jobs" "${names[@]}"
  local status=$?
  echo "rusticl: $rusticl_alone with KILN_DEVICE=rusticl"
  RUSTICL_ENABLE=llvmpipe KILN_TEST_DEVICE=rusticl KILN_DEVICE=rusticl \
    meson test -C "$build" --no-rebuild --print-errorlogs \
    --logbase testlog-rusticl-alone $rusticl_alone || status=1
  return $status
}

stage_asan() {
  mkdir -p "$rel"
  setup "$rel/asan" -Db_sanitize=address,undefined -Db_lundef=false || return 1
  local supp=$root/tests/sanitizers/lsan.supp
  local light=() heavy=() name
  while read -r name; do
    case " $asan_skip " in *" $name "*) continue ;; esac
    case " $asan_heavy " in
      *" $name "*) heavy+=("$name") ;;
      *)
        # Every parameter-space shard, named or added later (space_gemm_cpu_*,
        # gemm_space_*): LSan's tracer has crashed (signal 11) in one of
        # them under PoCL's thread pool at exit, a fault of the leak checker,
        # not of the test.
        case $name in
          space_* | gemm_space_* | gemm_mma_*) heavy+=("$name") ;;
          *) light+=("$name") ;;
        esac ;;
    esac
  done < <(test_names "$rel/asan")
  # Resources: 1,000 cycles (the RSS bound is off under ASan, and LSan
  # catches a leak in one cycle as surely as in 10,000).
  echo "asan pass 1 (leaks checked, full stacks): ${light[*]}"
  ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:print_stacktrace=1:fast_unwind_on_malloc=0:malloc_context_size=16 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  LSAN_OPTIONS=suppressions=$supp:print_suppressions=0 \
  KILN_RESOURCE_CYCLES=1000 \
    meson test -C "$rel/asan" --no-rebuild --print-errorlogs "${pocl_cache_on[@]}" \
    --logbase testlog-pass1 --num-processes "$jobs" --timeout-multiplier 4 \
    "${light[@]}"
  local status=$?
  echo "asan pass 2 (memory errors and UB, fast unwinder): ${heavy[*]}"
  ASAN_OPTIONS=halt_on_error=1:detect_leaks=0:print_stacktrace=1 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C "$rel/asan" --no-rebuild --print-errorlogs "${pocl_cache_on[@]}" \
    --logbase testlog-pass2 --num-processes "$jobs" --timeout-multiplier 4 \
    "${heavy[@]}" || status=1
  return $status
}

# The multi-threaded tests TSan runs (on PoCL; threads also on rusticl),
# the longest first: meson runs tests named on its command line in that order.
tsan_tests="cache_warm cache program threads memo event queue pool pipeline"

stage_tsan() {
  mkdir -p "$rel"
  configure "$rel/tsan" -Db_sanitize=thread -Db_lundef=false || return 1
  # Only what these tests need is built (libkiln and their programs), not
  # the tools, examples and Python module that no TSan test runs.
  local targets=() name
  for name in $tsan_tests; do targets+=("tests/test_$name"); done
  ninja -C "$rel/tsan" -j "$jobs" "${targets[@]}" > /dev/null ||
    ninja -C "$rel/tsan" -j 1 "${targets[@]}" || return 1
  local opts="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/sanitizers/tsan.supp"
  # shellcheck disable=SC2086
  TSAN_OPTIONS=$opts \
    meson test -C "$rel/tsan" --no-rebuild --print-errorlogs "${pocl_cache_on[@]}" \
    --num-processes "$jobs" --timeout-multiplier 4 $tsan_tests
  local status=$?
  echo "tsan: the thread stress test on rusticl"
  TSAN_OPTIONS=$opts RUSTICL_ENABLE=llvmpipe KILN_TEST_DEVICE=rusticl \
    meson test -C "$rel/tsan" --no-rebuild --print-errorlogs \
    --logbase testlog-rusticl --timeout-multiplier 4 threads || status=1
  return $status
}

stage_oclgrind() {
  need oclgrind oclgrind || return 1
  setup "$build" || return 1
  tests/oclgrind/run.sh "$build"
}

fuzz_one() { # target, scratch dir: one libFuzzer run, its log in the dir
  local target=$1 work=$2
  mkdir "$work/corpus"
  # New inputs go to the scratch directory, the seeds stay as checked in.
  "$rel/fuzz/tests/fuzz/fuzz_$target" -max_total_time="$fuzz_seconds" \
    -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$rel/fuzz/crash-$target-" \
    "$work/corpus" "tests/fuzz/corpus/$target" > "$work/log" 2>&1 < /dev/null
  echo $? > "$work/rc"
}

stage_fuzz() {
  need clang "clang libclang-rt-14-dev" || return 1
  mkdir -p "$rel"
  CC=clang setup "$rel/fuzz" -Dfuzz=true -Dtools=disabled -Db_lundef=false \
    -Db_sanitize=address,undefined -Dc_args=-fsanitize=fuzzer-no-link ||
    return 1
  # Each target is one process on one core: $jobs of them run side by side,
  # each for its full FUZZ_SECONDS.
  local targets=(selector cache_entry cache_dir peaks)
  local status=0 target work rc runs n=0
  local -A works
  for target in "${targets[@]}"; do
    works[$target]=$(mktemp -d)
    fuzz_one "$target" "${works[$target]}" &
    n=$((n + 1))
    [ $((n % jobs)) -eq 0 ] && wait
  done
  wait
  for target in "${targets[@]}"; do
    work=${works[$target]}
    rc=$(cat "$work/rc" 2>/dev/null || echo 1)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
    if [ "$rc" -ne 0 ]; then
      status=1
      echo "FAIL fuzz_$target (exit $rc after ${runs:-?} executions):"
      grep -v '^#' "$work/log" | tail -40
    else
      echo "ok   fuzz_$target: ${runs:-?} executions in ${fuzz_seconds}s," \
           "corpus $(ls "$work/corpus" | wc -l) new inputs"
    fi
    rm -rf "$work"
  done
  return $status
}

for stage in $stages; do
  case $stage in
    rusticl|asan|tsan|oclgrind|fuzz) ;;
    *) echo "reliability: unknown stage '$stage'" >&2; exit 2 ;;
  esac
  echo "=== reliability: $stage"
  start=$(date +%s)
  "stage_$stage"
  rc=$?
  secs=$(( $(date +%s) - start ))
  if [ $rc -eq 0 ]; then
    summary+=("$(printf '%-9s ok    %5ds' "$stage" "$secs")")
  else
    summary+=("$(printf '%-9s FAIL  %5ds' "$stage" "$secs")")
    failed=1
  fi
done
echo "=== reliability summary"
printf '%s\n' "${summary[@]}"
exit $failed
