/* The tune room's interface (runtime/tune/): the parameter spaces of the
 * kernels (the GPU family's GEMM in space_gemm.c, the small spaces'
 * machinery in space.c, the GPU family's small spaces in space_small.c and
 * the CPU family's in space_cpu.c), the tuning files
 * (tuning_file.c) and kiln's tuning database (tuning_db.c), the public
 * tuning API (tune_api.c), and each op's variant resolved once per context
 * (variant.c). Included by the op library above; it includes the program
 * room below. Not installed. */
#ifndef KILN_TUNE_ROOM_H
#define KILN_TUNE_ROOM_H

#include "program/program.h"

struct kiln__tuning_space; /* an op's space, as the tuning API sees it */

/* ---- tuning -------------------------------------------------------------- */

/* The context's tuning row (never NULL: a zeroed row when the profile has
 * none). Fields left 0 mean "generic default": read them through
 * kiln__ops_tune. */
const struct kiln_tuning *kiln__ops_tuning(const kiln_context *ctx);
static inline unsigned kiln__ops_tune(unsigned value, unsigned fallback) {
  return value ? value : fallback;
}

/* A local size for ctx's device: want (0: 64), clamped to the device's
 * maximum work-group size and kept a power of two. */
size_t kiln__ops_local_size(const kiln_context *ctx, size_t want);

/* ---- small spaces (space.c) ----------------------------------------------- */

/* The small parameter spaces: the GPU-family kernels other than GEMM's
 * (transpose, the reductions, elementwise) and the CPU family's GEMM and
 * transpose. A space is data: its knobs
 * (each a build macro of the op's kernel, with the values a tuner tries),
 * a check of the kernel's rules and the device's limits that gives its
 * reason, the profile's default point and the build options of the program
 * a point runs. */

#define KILN__SPACE_KNOBS 6  /* at most, per space */
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
  /* The kernel family whose kernels the space is of: on a device of the
   * other family the op runs other kernels, and the space is not used. */
  enum kiln_kernel_family family;
  size_t count;     /* knobs */
  struct kiln__space_knob knob[KILN__SPACE_KNOBS];
  /* The kernel's rules and the device's limits (not the listed values):
   * true, or false with a one-line reason. Knobs are non-zero here. */
  bool (*check)(const struct kiln__point *p, const kiln_device_info *info,
                char *reason, size_t size);
  /* The profile's row as a point that runs on ctx's device (shrunk until
   * it does); it need not hold listed values. */
  void (*defaults)(const kiln_context *ctx, struct kiln__point *p);
  /* The embedded program (cl_kernels/PROGRAM.cl) the space's kernels
   * are in, and the options of its build for p and dtype (the f32 build is
   * the one kiln tune gates and times, and that kiln_tuning_build builds). */
  const char *program;
  void (*options)(const struct kiln__point *p, kiln_dtype dtype, char *buf,
                  size_t size);
};

/* The knobs of each small space, in order (space_small.c). */
enum { KILN__TRANSPOSE_TILE, KILN__TRANSPOSE_PAD, KILN__TRANSPOSE_WPT };
enum { KILN__REDUCE_WG, KILN__REDUCE_WPT, KILN__REDUCE_VW, KILN__REDUCE_PARTS };
enum { KILN__ELEMENTWISE_WG, KILN__ELEMENTWISE_WPT, KILN__ELEMENTWISE_VW };
/* The CPU family's GEMM (space_cpu.c): the register tile, the k block and
 * the register tiles per work-item's block of C (VW first: NR is one or
 * two vectors of it). */
enum {
  KILN__GEMM_CPU_VW,
  KILN__GEMM_CPU_MR,
  KILN__GEMM_CPU_NR,
  KILN__GEMM_CPU_KC,
  KILN__GEMM_CPU_MB,
  KILN__GEMM_CPU_NB
};
/* The CPU family's transpose (space_cpu.c): its two switches, the tile,
 * then the register transpose's vector width. */
enum {
  KILN__TRANSPOSE_CPU_NT,
  KILN__TRANSPOSE_CPU_ORDER,
  KILN__TRANSPOSE_CPU_TILE,
  KILN__TRANSPOSE_CPU_VW
};

/* The implicit GEMM convolution (space_conv.c): gemm_gpu's tiling knobs. */
enum {
  KILN__CONV_MWG,
  KILN__CONV_NWG,
  KILN__CONV_KWG,
  KILN__CONV_MDIMC,
  KILN__CONV_NDIMC,
  KILN__CONV_VWN
};

/* The matrix units of NVIDIA, AMD and Intel GPUs (space_mma.c): the block tile,
 * the k stage, the warp tile and the stages of cl_kernels/gemm_mma.cl. */
enum {
  KILN__MMA_BM,
  KILN__MMA_BN,
  KILN__MMA_BK,
  KILN__MMA_WM,
  KILN__MMA_WN,
  KILN__MMA_STAGES
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

/* ---- a small space's entry in the tuning API's table ---------------------- */

/* The callbacks, on self->small: its knobs; params checked as a point of
 * the space (else KILN_ERR_INVALID_ARGUMENT) that ctx's device runs (else
 * KILN_ERR_UNSUPPORTED); the point in effect (kiln__space_params), params
 * "" and source "profile (CPU family)" or "profile (GPU family)" when ctx
 * runs the other family's kernels, which are not of this space; build: only the f32 program of the point
 * (self->small->program with options for f32, the one kiln tune gates and
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
extern const struct kiln__space kiln__transpose_space;
extern const struct kiln__space kiln__reduce_space;
extern const struct kiln__space kiln__elementwise_space;
extern const struct kiln__space kiln__gemm_cpu_space;
extern const struct kiln__space kiln__transpose_cpu_space;
extern const struct kiln__space kiln__gemm_mma_space;
extern const struct kiln__space kiln__conv_space;

/* Whether ctx runs gemm_mma for dtype's operands, the point's source being
 * source (kiln__space_params's); false with the reason in why otherwise
 * (space_mma.c lists the conditions: dtype, vendor, the compile probe,
 * built here, and a gated source). */
bool kiln__gemm_mma_usable(kiln_context *ctx, kiln_dtype dtype,
                           const char *source, char *why, size_t size);
/* Tests only: build gemm_mma with KILN_MMA_EMULATE, its matrix
 * instructions emulated in plain OpenCL C, and run it for f16 and bf16 on
 * any device whose GEMM runs the GPU family (forced through the profile on
 * a CPU); false restores the real kernel and its conditions. Not exported
 * by the shared library, so no user can turn it on. Process-wide, set
 * between ops like the other test overrides; pair it with
 * kiln__space_set_override(&kiln__gemm_mma_space, point). */
void kiln__gemm_mma_emulate(bool on);
/* The lanes of ctx's gemm_mma warps: 64 for AMD's MFMA form, Intel's
 * sub-group size (8 or 16; 0 where the device reports neither) for its
 * DPAS form, else 32. */
unsigned kiln__gemm_mma_lanes(const kiln_context *ctx);
/* Appends to buf (holding the point's options, sp->options's) what ctx's
 * form adds: the emulation's form where the tests turned it on, Intel's
 * sub-group size. */
void kiln__gemm_mma_form_options(const kiln_context *ctx, char *buf,
                                 size_t size);
/* Tests only: the emulation on contexts of AMD's profile is of the WMMA
 * form (RDNA3), not the MFMA one. */
void kiln__gemm_mma_emulate_wmma(bool on);
/* Tests only: the emulation on contexts of Intel's profile runs DPAS's
 * layout for sub-groups of sub_group lanes (8 or 16; 16 until set). */
void kiln__gemm_mma_emulate_dpas(unsigned sub_group);

/* The CPU GEMM point of a device whose preferred float vector width is vw
 * (rounded to 4, 8 or 16), with the tile mr x nr and the k block kc where
 * they are not 0 (else derived from vw: backends/backend.h), and 16 x 16
 * register tiles per block: the profile's default and the tests' tiles. */
void kiln__gemm_cpu_point(unsigned vw, unsigned mr, unsigned nr, unsigned kc,
                          struct kiln__point *p);


/* ---- GEMM's space: the GPU family's kernel (space_gemm.c) ---------------- */

/* A point of the space: one field per knob of cl_kernels/gemm_gpu.cl, named
 * after its macro (sw: SWITCH). */
struct kiln__gemm_gpu_params {
  unsigned mwg, nwg, kwg, mdimc, ndimc, vwm, vwn, sa, sb, pada, padb, db, kwi,
      strm, strn, dwg, dwi, sw;
};

#define KILN__GEMM_GPU_KNOBS 18
struct kiln__gemm_knob {
  const char *name;   /* the build macro, and the name in text forms */
  size_t offset;      /* of its field in struct kiln__gemm_gpu_params */
  const char *what;   /* one line for people */
  unsigned count;     /* values below */
  unsigned values[5]; /* those a tuner tries, ascending */
};
extern const struct kiln__gemm_knob kiln__gemm_gpu_knobs[KILN__GEMM_GPU_KNOBS];

unsigned kiln__gemm_gpu_get(const struct kiln__gemm_gpu_params *p,
                            size_t knob);
void kiln__gemm_gpu_put(struct kiln__gemm_gpu_params *p, size_t knob,
                        unsigned value);

/* Whether p can run on a device described by info; in_space also requires
 * every knob to hold one of its listed values (tuned or imported
 * parameters; the profile's defaults need not). false with a one-line
 * reason in reason[size] otherwise. */
bool kiln__gemm_gpu_check(const struct kiln__gemm_gpu_params *p,
                          const kiln_device_info *info, bool in_space,
                          char *reason, size_t size);
/* Bytes of __local memory p's tiled kernel declares. */
size_t kiln__gemm_gpu_local_bytes(const struct kiln__gemm_gpu_params *p);

/* "MWG=64 NWG=64 ..." (every knob, in table order), snprintf's contract. */
int kiln__gemm_gpu_format(const struct kiln__gemm_gpu_params *p, char *buf,
                          size_t size);
/* The inverse: every knob exactly once is not required but every knob at
 * least once is; unknown names, bad numbers and missing knobs give false
 * with a reason. Values are not checked here (kiln__gemm_gpu_check). */
bool kiln__gemm_gpu_parse(const char *text, struct kiln__gemm_gpu_params *p,
                          char *reason, size_t size);

/* The parameters GEMM uses on ctx (see space_gemm.c for the order), from
 * the context's f32 variant (below; variant.c).
 * KILN_ERR_UNSUPPORTED, naming the reason, when an override does not fit
 * ctx's device. */
kiln_status kiln__gemm_gpu_params_for(const kiln_context *ctx,
                                      struct kiln__gemm_gpu_params *p);
/* The same, and where they come from: "test override", "set", "file" or
 * "profile" (static strings). */
kiln_status kiln__gemm_gpu_source(const kiln_context *ctx,
                                  struct kiln__gemm_gpu_params *p,
                                  const char **source);
/* The gemm_gpu program's build options for p and operands of dtype (one
 * program per dtype, -DDT). */
void kiln__gemm_gpu_options(const struct kiln__gemm_gpu_params *p,
                            kiln_dtype dtype, char *buf, size_t size);
/* Force the GPU family's parameters (NULL: back to the profile's); tests
 * only, process-wide, like the CPU tile. */
void kiln__gemm_set_gpu_params(const struct kiln__gemm_gpu_params *p);

/* ---- an op's space, as the tuning API sees it ----------------------------- */

/* What an op module with a parameter space gives the tuning API
 * (kiln/kiln_tune.h). To add an op: define its space here (space_*.c),
 * declare it below and list it in tune_api.c's table and variant.c's. The
 * small spaces share one set of callbacks (space.c), hence the self
 * pointer each callback gets. */
struct kiln__tuning_space {
  const char *op;      /* "gemm" */
  const char *summary; /* one line: which kernel the space is of */
  size_t knobs;
  /* A small space's data (above); NULL for GEMM's own. */
  const struct kiln__space *small;
  /* Knob index (< knobs) into *out. */
  void (*knob)(const struct kiln__tuning_space *self, size_t index,
               kiln_tuning_knob *out);
  /* Whether params is a point of the space (else KILN_ERR_INVALID_ARGUMENT)
   * that ctx's device runs (else KILN_ERR_UNSUPPORTED), with the reason in
   * why (no kiln__fail: the caller words the error). */
  kiln_status (*check)(const struct kiln__tuning_space *self,
                       const kiln_context *ctx, const char *params, char *why,
                       size_t why_size);
  /* The parameters ops use on ctx now, and their source (a static string:
   * "set", "file", "database", "profile" or "test override"); params ""
   * when ctx's kernel family runs a kernel without this space. */
  kiln_status (*in_effect)(const struct kiln__tuning_space *self,
                           const kiln_context *ctx, char *params,
                           size_t size, const char **source);
  /* Build (or find in ctx's memo or the persistent cache) every program
   * that params runs, without running anything. params is checked. */
  kiln_status (*build)(const struct kiln__tuning_space *self,
                       kiln_context *ctx, const char *params);
  /* Whether ops run the space's kernels on ctx, and why not, into text
   * (kiln_tuning_info's used); NULL for spaces whose kernels always run on
   * their family's devices. */
  void (*used)(const struct kiln__tuning_space *self, const kiln_context *ctx,
               char *text, size_t size);
};

extern const struct kiln__tuning_space kiln__gemm_tuning_space;
/* The small spaces (space_small.c) of the transpose, reduction and
 * elementwise kernels. */
extern const struct kiln__tuning_space kiln__transpose_tuning_space;
extern const struct kiln__tuning_space kiln__reduce_tuning_space;
extern const struct kiln__tuning_space kiln__elementwise_tuning_space;
/* The CPU family's (space_cpu.c). */
extern const struct kiln__tuning_space kiln__gemm_cpu_tuning_space;
extern const struct kiln__tuning_space kiln__transpose_cpu_tuning_space;
/* The matrix units of NVIDIA, AMD and Intel GPUs (space_mma.c). */
extern const struct kiln__tuning_space kiln__gemm_mma_tuning_space;
/* The implicit GEMM convolution (space_conv.c). */
extern const struct kiln__tuning_space kiln__conv_tuning_space;

/* ---- tuning files (tuning_file.c) -------------------------------------------- */

/* One op's parameters from a tuning file or a database row. */
struct kiln__tuning_line {
  char name[32];
  char params[KILN_TUNING_TEXT_CAPACITY];
  char figures[KILN_TUNING_TEXT_CAPACITY];
  char origin[200]; /* a database row's "PATTERN (kiln VERSION)" */
};

/* op's parameters for ctx's device, first that applies: kiln_tuning_set's
 * ("set"), the device's tuning file ("file"), the first matching row of
 * kiln's tuning database ("database"); false when none. The text is not
 * validated: the caller checks it against its space and calls
 * kiln__tuning_reject when it fails, which drops that source for the
 * process and records the reason. */
bool kiln__tuning_lookup(const kiln_context *ctx, const char *op,
                         char *params, size_t size, const char **source);
void kiln__tuning_reject(const kiln_context *ctx, const char *op,
                         const char *reason);
/* Record (params) or clear (NULL) kiln_tuning_set's parameters. */
kiln_status kiln__tuning_set(const kiln_context *ctx, const char *op,
                             const char *params);
/* The file's path, why it or a database row is ignored, op's figures and
 * its database row, into info. */
void kiln__tuning_file_info(const kiln_context *ctx, const char *op,
                            kiln_tuning_info *info);
/* Write op's line (keeping the file's other ops) to path, or to the
 * device's file when path is NULL, atomically; then reread the file. fn
 * names the caller in errors. */
kiln_status kiln__tuning_write(const char *fn, const kiln_context *ctx,
                               const char *op, const char *params,
                               const char *figures, const char *path);
/* Remove path, or the device's file; a missing file is not an error. */
kiln_status kiln__tuning_remove(const char *fn, const kiln_context *ctx,
                                const char *path);

/* Forget every device's file and kiln_tuning_set's parameters, so that the
 * next context or use reads the files again (tests, after changing
 * KILN_TUNING or a file behind kiln's back). */
void kiln__tuning_forget(void);

/* ---- kiln's tuning database (tuning_db.c) ---------------------------------- */

/* The rows matching the device called device_name, the first per op, into
 * *rows (an array the caller frees; NULL when none); returns how many.
 * why gets the first malformed row's reason ("" when every row is well
 * formed), or says that memory ran out (then fewer rows come back). */
size_t kiln__tuning_db_match(const char *device_name,
                             struct kiln__tuning_line **rows, char *why,
                             size_t why_size);
/* Tests: read text instead of the shipped database (NULL: the shipped one
 * again); text must outlive its use. Call kiln__tuning_forget after. */
void kiln__tuning_db_use(const char *text);

/* ---- variants: an op's parameters resolved once (variant.c) --------------- */

/* The ops with a space, as the variants index them. */
enum kiln__tuned {
  KILN__TUNED_GEMM,
  KILN__TUNED_TRANSPOSE,
  KILN__TUNED_REDUCE,
  KILN__TUNED_ELEMENTWISE,
  KILN__TUNED_GEMM_CPU,
  KILN__TUNED_TRANSPOSE_CPU,
  KILN__TUNED_GEMM_MMA,
  KILN__TUNED_CONV2D,
  KILN__TUNED_COUNT
};

/* What one op runs on a context for one dtype: its point,
 * the build options of its program and where the point came from. Made
 * once and never changed, and kept as long as the context, so its address
 * stands for (program, options) in the queue's kernel list
 * (kiln__queue_kernel_keyed). */
struct kiln__variant {
  enum kiln__tuned op;
  kiln_dtype dtype;
  const char *source; /* "test override", "set", "file", "database",
                         "profile": static strings */
  struct kiln__gemm_gpu_params gemm; /* KILN__TUNED_GEMM */
  struct kiln__point point;          /* the small spaces */
  char options[320];
  /* KILN__TUNED_GEMM_MMA: why ops do not run it ("" when they do:
   * kiln__gemm_mma_usable), and its warps' lanes (kiln__gemm_mma_lanes,
   * read once here: Intel's query the device). */
  char off[400];
  unsigned lanes;
  /* The tuning generation (kiln__variants_stale) it was last found right
   * at: stale when the process's has moved on. */
  _Atomic unsigned long generation;
  struct kiln__variant *next; /* the context's list (variant.c) */
};

/* op's variant for dtype on ctx. The first call per (context, op, dtype)
 * resolves it (kiln_tuning_set's point, the tuning file's, the database's
 * or the profile's: kiln/kiln_tune.h); later calls cost two atomic loads
 * and take no lock, until something changes what applies
 * (kiln__variants_stale). KILN_ERR_UNSUPPORTED naming the reason when a
 * test's override does not run on the device (not kept: every call says
 * it). Thread-safe. */
kiln_status kiln__variant_get(const kiln_context *ctx, enum kiln__tuned op,
                              kiln_dtype dtype,
                              const struct kiln__variant **out);

/* What applies has changed (kiln_tuning_set, kiln_tuning_save and
 * kiln_tuning_reset, a file reread or forgotten, a rejected line, a test's
 * override): every context resolves its variants again at their next use.
 * Variants already handed out stay valid. */
void kiln__variants_stale(void);
/* The count of those changes (tuning_file.c keeps it, below the spaces
 * and the variants that use it). */
unsigned long kiln__tuning_generation(void);

#endif
