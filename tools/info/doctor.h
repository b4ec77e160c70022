/* Internal to the doctor (doctor.c, doctor_icd.c): findings and the ICD
 * files in force. */
#ifndef KILN_TOOLS_DOCTOR_H
#define KILN_TOOLS_DOCTOR_H

#include "info.h"

#define DEFAULT_VENDORS "/etc/OpenCL/vendors"
#define MAX_ICDS 64
#define PROBE_TIMEOUT_MS 20000

typedef enum level { L_OK, L_NOTE, L_PROBLEM } level;

typedef struct finding {
  level lvl;
  char *subject;
  char *message;
  char *hint;
} finding;

typedef struct doctor {
  finding *items;
  size_t count, cap;
  /* The .icd files the loader will read (absolute paths) and the library
   * each names. */
  char *icd_paths[MAX_ICDS];
  char *icd_libs[MAX_ICDS];
  size_t icd_count;
  /* The vendors directory in force, and whether the user chose it. When
   * OCL_ICD_VENDORS names one .icd file or library instead, the loader
   * scans no directory (vendors_scanned false) and loader_reads says what
   * it reads ("OCL_ICD_VENDORS=..."). */
  char vendors_dir[1024];
  bool vendors_overridden;
  bool vendors_scanned;
  char loader_reads[2100];
} doctor;

void doctor_add(doctor *d, level lvl, const char *subject, const char *hint,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Decide which .icd files the loader reads (OCL_ICD_VENDORS,
 * OPENCL_VENDOR_PATH, the default directory) and diagnose those variables. */
void doctor_check_loader_env(doctor *d);
/* Probe each library in a forked child with a timeout. */
void doctor_check_icds(doctor *d);

#endif
