/* Vendor profiles: how kiln recognises a device and what it needs to know to
 * build and tune for it. Data and small pure functions only, no control flow:
 * adding a vendor means one file here and one row in registry.c.
 * Internal; runtime/ includes it through core/internal.h. */
#ifndef KILN_BACKEND_H
#define KILN_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a profile may look at to decide whether it matches a device. */
struct kiln_backend_probe {
  uint32_t vendor_id;
  const char *vendor;        /* CL_DEVICE_VENDOR */
  const char *platform_name; /* CL_PLATFORM_NAME */
  const char *device_name;
  int type;                  /* kiln_device_type */
};

/* Which shape of kernel suits the device. GPUs want many work-items sharing
 * __local tiles; CPU OpenCL (PoCL) wants few work-items each owning a long
 * contiguous chunk or a register tile, because its "local memory" is just
 * global memory plus barrier cost. */
enum kiln_kernel_family {
  KILN_FAMILY_GPU = 0,
  KILN_FAMILY_CPU = 1,
};

/* Per-op tuning parameters. The op library reads these, never vendor names.
 * Rows are written with designated initializers; a field left 0 means "use
 * the generic default" (generic.c), so adding a field never breaks a row. */
struct kiln_tuning {
  enum kiln_kernel_family family;
  unsigned elementwise_wg;     /* work-group size for elementwise kernels */
  unsigned reduce_wg;          /* work-group size for reductions */
  /* Reductions: the fewest elements worth a worker of their own (CPU family:
   * a work-item's contiguous chunk; GPU: a work-group's segment), 0: 4096;
   * and how many workers to aim for, 0: 4 x compute units x reduce_wg on
   * the CPU family, 4 x compute units on the GPU family. */
  unsigned reduce_chunk;
  unsigned reduce_workers;
  /* Scan: elements per chunk of the three-phase scan, 0: 8192 (CPU family,
   * one work-item per chunk) or 4 x reduce_wg (GPU family). */
  unsigned scan_chunk;
  /* GEMM, GPU family: the work-group is gemm_tile x gemm_tile work-items,
   * each computing gemm_block x gemm_block outputs, so a group covers a
   * (gemm_tile * gemm_block)^2 tile of C through __local tiles of A and B:
   * the default point of the kernel's space (runtime/tune/space_gemm.c),
   * which a tuning file replaces. */
  unsigned gemm_tile;
  unsigned gemm_block;
  /* GEMM, CPU family: each work-item keeps a gemm_mr x gemm_nr register tile
   * of C (gemm_nr is 1 or 2 times the device's preferred float vector
   * width) and passes over k gemm_kc steps at a time. 0: derived from the
   * preferred float vector width w, 6 x 2w for w <= 8 (12 accumulators of
   * 16 registers), 8 x 2w for w = 16 (16 of 32). */
  unsigned gemm_mr, gemm_nr, gemm_kc;
  /* Transpose: GPU family, the edge of the __local tile (one work-item per
   * element); CPU family, the edge of the square tile each work-item moves
   * in 8 x 8 register blocks. */
  unsigned transpose_tile;
  /* No switch for half arithmetic: every op computes f16 and bf16 in f32.
   * For +, -, *, / and sqrt that is the correctly rounded half result
   * anyway (f32's 24 bits >= 2 x 11 + 2, so rounding twice is harmless),
   * kiln's f16 ops are memory-bound, and NVIDIA's driver does not even
   * report cl_khr_fp16 (H100). A switch returns with a measured case. */
};

struct kiln_backend {
  const char *name;        /* "nvidia", ... the KILN_PROFILE spelling */
  const char *description;
  bool (*match)(const struct kiln_backend_probe *probe);
  /* Appended before the user's options on every build; each flag is
   * justified by a comment in the profile's file. */
  const char *build_options;
  unsigned wg_multiple;    /* preferred work-group size multiple */
  unsigned quirks;         /* kiln_quirk bits */
  const struct kiln_tuning *tuning;
};

/* The registry (registry.c): profiles in matching order, generic last. */
extern const struct kiln_backend *const kiln__backends[];
extern const size_t kiln__backend_count;

/* The first profile whose match() accepts probe; generic if none does. */
const struct kiln_backend *kiln__backend_match(const struct kiln_backend_probe *probe);
/* The profile called name (case-insensitive), or NULL. */
const struct kiln_backend *kiln__backend_find(const char *name);

/* kiln's tuning database (tuning_db.c, which gives the format): text,
 * read by the tune room (runtime/tune/tuning_db.c). */
extern const char kiln__tuning_database[];

/* ---- shared facts for match() and the selector (recognise.c) ----------- */

/* Who made the hardware. The vendor string wins over the vendor id because
 * CPU implementations lie about the id (PoCL 3.1 reports Intel's 0x8086 on
 * an AMD EPYC while its vendor string says "AuthenticAMD"); the id decides
 * only when the string names no known vendor. */
enum kiln_vendor {
  KILN_VENDOR_UNKNOWN = 0,
  KILN_VENDOR_NVIDIA,
  KILN_VENDOR_AMD,
  KILN_VENDOR_INTEL,
};
enum kiln_vendor kiln__backend_vendor(uint32_t vendor_id, const char *vendor);
/* The OpenCL implementation, recognised by its platform name. */
bool kiln__backend_is_pocl(const char *platform_name);
bool kiln__backend_is_rusticl(const char *platform_name);
/* Case-insensitive substring test; NULL haystack or needle is no match. */
bool kiln__contains_nocase(const char *haystack, const char *needle);

#endif
