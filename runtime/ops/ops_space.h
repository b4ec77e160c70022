/* Small parameter spaces of the GPU-family kernels other than GEMM's
 * (transpose, the reductions, elementwise): the machinery they share
 * (ops_space.c). GEMM's 18-knob space has its own (ops_gemm_gpu.c).
 *
 * A space is data: its knobs (each a build macro of the op's kernel, with
 * the values a tuner tries), a check of the kernel's rules and the device's
 * limits that gives its reason, the profile's default point and the build
 * options of the program a point runs. The op module that owns the kernel
 * defines its space; this module resolves the point in effect on a
 * context and gives each space its entry in the tuning API's table
 * (kiln__*_tuning_space, ops_tuning.h). */
#ifndef KILN_OPS_SPACE_H
#define KILN_OPS_SPACE_H

#include "ops_internal.h"
#include "ops_tuning.h"

#define KILN__SPACE_KNOBS 4  /* at most, per space */
#define KILN__SPACE_VALUES 8 /* at most, per knob */

struct kiln__space_knob {
  const char *name;   /* the build macro, and the name in text forms */
  const char *what;   /* one line for people */
  unsigned count;     /* values below */
  unsigned values[KILN__SPACE_VALUES]; /* those a tuner tries, ascending */
};

/* A point: the value of each knob, in the space's knob order. */
struct kiln__point {
  unsigned v[KILN__SPACE_KNOBS];
};

struct kiln__space {
  const char *name; /* the op's name in tuning files, kiln tune and the API */
  size_t count;     /* knobs */
  struct kiln__space_knob knob[KILN__SPACE_KNOBS];
  /* The kernel's rules and the device's limits (not the listed values):
   * true, or false with a one-line reason. Knobs are non-zero here. */
  bool (*check)(const struct kiln__point *p, const kiln_device_info *info,
                char *reason, size_t size);
  /* The profile's row as a point that runs on ctx's device (shrunk until
   * it does); it need not hold listed values. */
  void (*defaults)(const kiln_context *ctx, struct kiln__point *p);
  /* The embedded program (cl_kernels/PROGRAM.cl) the GPU family's kernels
   * are in, and the options of its f32 build for p: the build that kiln
   * tune gates and times (f32 only), and that kiln_tuning_build builds. */
  const char *program;
  void (*f32_options)(const struct kiln__point *p, char *buf, size_t size);
};

/* Whether p runs on info's device; in_space also requires every knob to
 * hold one of its listed values (tuned or imported points). false with a
 * one-line reason otherwise. */
bool kiln__space_check(const struct kiln__space *sp,
                       const struct kiln__point *p,
                       const kiln_device_info *info, bool in_space,
                       char *reason, size_t size);
/* true when a value is outside the listed ones (reason says which). */
bool kiln__space_outside(const struct kiln__space *sp,
                         const struct kiln__point *p, char *reason,
                         size_t size);

/* For the spaces' checks: wg is a power of two that info's device takes in
 * one dimension; false with a reason naming it otherwise. */
bool kiln__space_check_wg(unsigned wg, const kiln_device_info *info,
                          char *reason, size_t size);

/* "TILE=32 PAD=1 WPT=4": every knob in order, snprintf's contract. */
int kiln__space_format(const struct kiln__space *sp,
                       const struct kiln__point *p, char *buf, size_t size);
/* The inverse: every knob at least once, NAME=VALUE separated by spaces or
 * commas; unknown names, bad numbers and missing knobs give false with a
 * reason. Values are not checked here (kiln__space_check). */
bool kiln__space_parse(const struct kiln__space *sp, const char *text,
                       struct kiln__point *p, char *reason, size_t size);
/* The parser under kiln__space_parse, shared with GEMM's space: values[i]
 * gets knob names[i]'s value (count knobs, what names the space in
 * messages). */
bool kiln__knobs_parse(const char *text, const char *what,
                       const char *const *names, size_t count,
                       unsigned *values, char *reason, size_t size);
/* "-DTILE=32 -DPAD=1 -DWPT=4", appended to buf after its current text. */
void kiln__space_options(const struct kiln__space *sp,
                         const struct kiln__point *p, char *buf, size_t size);

/* The point in effect on ctx, first that applies: a test's override
 * (kiln__space_set_override); kiln_tuning_set's or the device's tuning
 * file's or the tuning database's row (kiln__tuning_lookup), when it is a
 * point of the space that the device runs (a file's line or a row that is
 * not is dropped, with the reason, through kiln__tuning_reject, and the
 * next source is tried); the profile's default. *source: "test override",
 * "set", "file", "database" or "profile". KILN_ERR_UNSUPPORTED naming the reason when an override does
 * not run on the device: it never reaches the driver. */
kiln_status kiln__space_params(const kiln_context *ctx,
                               const struct kiln__space *sp,
                               struct kiln__point *p, const char **source);

/* Force sp's point in this process (NULL: back to the file or profile).
 * Tests only, set between ops on one thread, like GEMM's override. */
void kiln__space_set_override(const struct kiln__space *sp,
                              const struct kiln__point *p);

/* ---- a small space's entry in the tuning API's table (ops_tuning.h) ------- */

/* The callbacks, on self->small: its knobs; params checked as a point of
 * the space (else KILN_ERR_INVALID_ARGUMENT) that ctx's device runs (else
 * KILN_ERR_UNSUPPORTED); the point in effect (kiln__space_params), params
 * "" and source "profile (CPU family)" when ctx runs the CPU family's
 * kernels, which have no space; build: only the f32 program of the point
 * (self->small->program with f32_options, the one kiln tune gates and
 * times: f16 and bf16 programs are built at their first use). */
void kiln__space_knob(const struct kiln__tuning_space *self, size_t index,
                      kiln_tuning_knob *out);
kiln_status kiln__space_check_params(const struct kiln__tuning_space *self,
                                     const kiln_context *ctx,
                                     const char *params, char *why,
                                     size_t size);
kiln_status kiln__space_in_effect(const struct kiln__tuning_space *self,
                                  const kiln_context *ctx, char *params,
                                  size_t size, const char **source);
kiln_status kiln__space_build(const struct kiln__tuning_space *self,
                              kiln_context *ctx, const char *params);

/* The entry of op_ (a string literal, space_'s name) for space_, which has
 * knobs_ knobs; summary_ says which kernels it is of. */
#define KILN__SMALL_TUNING_SPACE(op_, space_, knobs_, summary_)               \
  {                                                                            \
    .op = op_, .summary = summary_, .knobs = knobs_, .small = &space_,         \
    .knob = kiln__space_knob, .check = kiln__space_check_params,               \
    .in_effect = kiln__space_in_effect, .build = kiln__space_build             \
  }

/* The spaces, defined by the modules of their kernels. */
extern const struct kiln__space kiln__transpose_space; /* ops_transpose.c */
extern const struct kiln__space kiln__reduce_space;    /* ops_reduce.c */
extern const struct kiln__space kiln__elementwise_space; /* ops_elementwise.c */

#endif
