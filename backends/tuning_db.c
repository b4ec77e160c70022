/* kiln's tuning database: parameters that `kiln tune` found on devices kiln
 * has been tuned on, shipped with the library the way CLBlast ships its
 * database, so that such a device runs tuned kernels before its user ever
 * runs the tuner. Data only; runtime/tune/tuning_db.c reads it.
 *
 * One row per line ('#' starts a comment line), five fields separated by
 * " | ":
 *
 *     op | device name pattern | kiln version | parameters | figures
 *
 * op names the op's space ("gemm"); the pattern is an fnmatch(3) glob
 * matched against the device's name as OpenCL reports it (CL_DEVICE_NAME,
 * kiln info's "Name"); the kiln version is the one whose `kiln tune`
 * measured the row; the parameters are every knob of the op's space as
 * "NAME=VALUE ..." (what `kiln tune --export` writes on its op line); the
 * figures are that run's measurements (its figures line). For each op the
 * first row whose pattern matches is used, so a specific pattern goes above
 * a general one.
 *
 * A row may only be added with the figures of `kiln tune` on that device:
 * a row is a measurement, not a guess. No device has been tuned yet: the
 * one GPU kiln has met (an NVIDIA H100) predates the tuner, tuning the GPU
 * family's spaces on a PoCL CPU device with a GPU profile forced says
 * nothing about a real GPU, and rows for the CPU family's spaces
 * (gemm_cpu, transpose_cpu) would hold one machine's figures. The loader, its
 * precedence (a user's tuning file, then a row here, then the profile's
 * defaults) and its rejection of bad rows are tested with a test-only
 * database (tests/test_tuning_db.c). */
#include "backend.h"

const char kiln__tuning_database[] =
    "# op | device name pattern | kiln version | parameters | figures\n";
