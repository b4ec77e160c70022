#!/usr/bin/env bash
# Run an MPI test program on NP ranks of this machine, each on its own kiln
# device (PoCL in CI), as the meson tests of kiln_mpi do.
#
# usage: mpi_run.sh [--expect-abort] NP PROGRAM [ARGS...]
#
# --expect-abort: the job is meant to fail (a rank is killed): pass when it
# ends unsuccessfully on its own, fail when it succeeds or hangs.
#
# --oversubscribe: CI machines have fewer cores than ranks. As root (CI
# containers) Open MPI refuses to start without the two variables below.
# `timeout` is the last line against a hang: the programs themselves must
# fail on their own (kiln_mpi's timeouts), this only turns a hang into a
# failure that names itself.
set -euo pipefail
expect_abort=0
if [ "${1:-}" = --expect-abort ]; then
  expect_abort=1
  shift
fi
np=${1:?usage: mpi_run.sh NP PROGRAM [ARGS...]}
shift
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Shared memory between ranks of one machine, no network probing (a CI
# container may have no usable interface).
export OMPI_MCA_btl=self,vader
status=0
timeout --kill-after=10 "${MPI_RUN_TIMEOUT:-240}" \
  mpirun --oversubscribe -np "$np" "$@" || status=$?
if [ "$status" = 124 ]; then
  echo "mpi_run.sh: $* on $np ranks did not finish within ${MPI_RUN_TIMEOUT:-240} s" >&2
  exit 1
fi
if [ "$expect_abort" = 1 ]; then
  if [ "$status" = 0 ]; then
    echo "mpi_run.sh: $* on $np ranks succeeded, but it was meant to fail" >&2
    exit 1
  fi
  echo "mpi_run.sh: the job ended on its own, unsuccessfully (status $status), as meant"
  exit 0
fi
exit "$status"
