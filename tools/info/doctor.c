/* `kiln info --doctor`: find why OpenCL does not work here, with a hint for
 * each finding. doctor_icd.c looks at the ICD files and libraries first;
 * this file then checks device node permissions, vendor libraries that no
 * .icd file names, the platforms as the ICD loader presents them, the
 * KILN_DEVICE selector, and a kernel build on every device. */
#include "doctor.h"

#include "cli/cli.h"

#include <dirent.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- device nodes ---- */

static void check_node(doctor *d, const char *path, size_t *seen) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISCHR(st.st_mode))
    return;
  (*seen)++;
  if (access(path, R_OK | W_OK) == 0)
    return;
  struct group *g = getgrgid(st.st_gid);
  char hint[512];
  if (g != NULL)
    snprintf(hint, sizeof(hint),
             "add your user to group '%s' (usermod -aG %s $USER, then log in "
             "again); in a container, pass the device through", g->gr_name,
             g->gr_name);
  else
    snprintf(hint, sizeof(hint),
             "give your user read/write access to %s (its group is %u)", path,
             (unsigned)st.st_gid);
  doctor_add(d, L_PROBLEM, path, hint,
             "no read/write permission on %s: GPU drivers cannot open the "
             "device", path);
}

static void check_device_nodes(doctor *d) {
  size_t seen = 0;
  DIR *dh = opendir("/dev/dri");
  if (dh != NULL) {
    struct dirent *e;
    while ((e = readdir(dh)) != NULL) {
      if (strncmp(e->d_name, "card", 4) != 0 &&
          strncmp(e->d_name, "renderD", 7) != 0)
        continue;
      char path[300];
      snprintf(path, sizeof(path), "/dev/dri/%s", e->d_name);
      check_node(d, path, &seen);
    }
    closedir(dh);
  }
  dh = opendir("/dev");
  if (dh != NULL) {
    struct dirent *e;
    while ((e = readdir(dh)) != NULL) {
      if (strncmp(e->d_name, "nvidia", 6) != 0 && strcmp(e->d_name, "kfd") != 0)
        continue;
      char path[300];
      snprintf(path, sizeof(path), "/dev/%s", e->d_name);
      check_node(d, path, &seen);
    }
    closedir(dh);
  }
  if (seen == 0)
    doctor_add(d, L_NOTE, "/dev", NULL,
               "no GPU device nodes (/dev/dri/*, /dev/nvidia*, /dev/kfd): only "
               "CPU OpenCL drivers can work here");
}

/* ---- vendor libraries that no .icd names ---- */

typedef struct vendor_lib {
  const char *soname;
  const char *vendor;
  const char *icd_name; /* suggested .icd file name */
  bool gpu;
} vendor_lib;

static const vendor_lib vendor_libs[] = {
    {"libnvidia-opencl.so.1", "NVIDIA", "nvidia.icd", true},
    {"libamdocl64.so", "AMD ROCm", "amdocl64.icd", true},
    {"libamdocl-orca64.so", "AMD (legacy)", "amdocl-orca64.icd", true},
    {"libigdrcl.so", "Intel GPU (NEO)", "intel.icd", true},
    {"libintelocl.so", "Intel CPU runtime", "intel-cpu.icd", false},
    {"libpocl.so.2", "PoCL", "pocl.icd", false},
    {"libRusticlOpenCL.so.1", "Mesa rusticl", "rusticl.icd", false},
    {"libMesaOpenCL.so.1", "Mesa Clover", "mesa.icd", false},
};

/* "libpocl.so.2.10.0" and "/usr/lib/x/libpocl.so" both give "libpocl". */
static void lib_stem(const char *lib, char *out, size_t size) {
  const char *base = strrchr(lib, '/');
  base = base ? base + 1 : lib;
  const char *so = strstr(base, ".so");
  size_t n = so ? (size_t)(so - base) : strlen(base);
  snprintf(out, size, "%.*s", (int)n, base);
}

/* Where a vendor library is installed, from the dynamic linker's cache or a
 * few well-known directories that are not always in it. */
static bool find_lib(const char *soname, const char *ldcache, char *where,
                     size_t size) {
  const char *hit = ldcache ? strstr(ldcache, soname) : NULL;
  while (hit != NULL) {
    /* An ldconfig -p line: "\tNAME (flags) => PATH". */
    if ((hit == ldcache || hit[-1] == '\t' || hit[-1] == ' ') &&
        hit[strlen(soname)] == ' ') {
      const char *arrow = strstr(hit, "=> ");
      const char *eol = strchr(hit, '\n');
      if (arrow && (!eol || arrow < eol)) {
        arrow += 3;
        size_t n = eol ? (size_t)(eol - arrow) : strlen(arrow);
        snprintf(where, size, "%.*s", (int)n, arrow);
        return true;
      }
    }
    hit = strstr(hit + 1, soname);
  }
  static const char *dirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/lib64",
                               "/usr/lib", "/usr/local/lib", "/opt/rocm/lib",
                               "/usr/lib/x86_64-linux-gnu/intel-opencl",
                               "/usr/lib/aarch64-linux-gnu"};
  for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
    snprintf(where, size, "%s/%s", dirs[i], soname);
    if (access(where, F_OK) == 0)
      return true;
  }
  return false;
}

static char *read_ldcache(void) {
  static const char *cmds[] = {"ldconfig -p 2>/dev/null",
                               "/sbin/ldconfig -p 2>/dev/null",
                               "/usr/sbin/ldconfig -p 2>/dev/null"};
  for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
    FILE *p = popen(cmds[i], "r");
    if (p == NULL)
      continue;
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    size_t got;
    while (text != NULL && (got = fread(text + len, 1, cap - len - 1, p)) > 0) {
      len += got;
      if (len + 1 == cap) {
        char *t = realloc(text, cap * 2);
        if (t == NULL)
          break;
        text = t;
        cap *= 2;
      }
    }
    int rc = pclose(p);
    if (text != NULL) {
      text[len] = '\0';
      if (rc == 0 && len > 0)
        return text;
    }
    free(text);
  }
  return NULL;
}

static void check_unregistered_libs(doctor *d) {
  char *ldcache = read_ldcache();
  for (size_t i = 0; i < sizeof(vendor_libs) / sizeof(vendor_libs[0]); i++) {
    const vendor_lib *v = &vendor_libs[i];
    char where[1024];
    if (!find_lib(v->soname, ldcache, where, sizeof(where)))
      continue;
    char stem[256];
    lib_stem(v->soname, stem, sizeof(stem));
    bool named = false;
    for (size_t k = 0; k < d->icd_count && !named; k++) {
      char other[256];
      if (d->icd_libs[k] == NULL)
        continue;
      lib_stem(d->icd_libs[k], other, sizeof(other));
      named = strcmp(stem, other) == 0;
    }
    if (named)
      continue;
    /* NVIDIA's container toolkit mounts the library without its .icd file
     * (nvidia-container-toolkit issue 682): the GPU is there, unseen. A GPU
     * driver left out is a problem; a CPU one left out of a directory the
     * user chose is probably deliberate. */
    level lvl = (v->gpu || !d->vendors_overridden) ? L_PROBLEM : L_NOTE;
    char hint[2048];
    if (!d->vendors_scanned) {
      /* The loader reads one file the user named: no directory to blame. */
      snprintf(hint, sizeof(hint),
               "to use it as well, put the .icd files you want plus one "
               "naming %s in a directory and point OCL_ICD_VENDORS at it",
               v->soname);
      doctor_add(d, lvl, v->soname, hint,
                 "%s OpenCL driver %s is installed but the ICD loader reads "
                 "only %s: it will not load this driver", v->vendor, where,
                 d->loader_reads);
      continue;
    }
    snprintf(hint, sizeof(hint),
             "register it: echo %s > %s/%s; or, without write access there, put "
             "a copy of the .icd files plus that one in a directory and point "
             "OCL_ICD_VENDORS at it", v->soname, d->vendors_dir, v->icd_name);
    doctor_add(d, lvl, v->soname, hint,
               "%s OpenCL driver %s is installed but no .icd file in %s names "
               "it: the ICD loader will not load it", v->vendor, where,
               d->vendors_dir);
  }
  free(ldcache);
}

/* ---- the platforms through the ICD loader ---- */

/* OCL_ICD_FILENAMES is the Khronos loader's variable; ocl-icd, Debian's
 * loader, ignores it, which surprises people who copied a setting from a
 * CUDA image. Which loader is in use shows only once it is loaded. */
static void check_loader_kind(doctor *d) {
  const char *filenames = getenv("OCL_ICD_FILENAMES");
  if (filenames == NULL || filenames[0] == '\0')
    return;
  /* The loader answers this 1.1 call itself (the ...ForPlatform variant
   * would ask a driver), so the deprecated entry point is the right one. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  bool ocl_icd = clGetExtensionFunctionAddress("clGetICDLoaderInfoOCLICD") != NULL;
#pragma GCC diagnostic pop
  if (ocl_icd)
    doctor_add(d, L_NOTE, "OCL_ICD_FILENAMES",
               "with ocl-icd, point OCL_ICD_VENDORS at a directory (or an .icd "
               "file) instead",
               "OCL_ICD_FILENAMES=%s is set, but the loader in use is ocl-icd, "
               "which ignores it (only the Khronos loader reads it)", filenames);
  else
    doctor_add(d, L_OK, "OCL_ICD_FILENAMES", NULL,
               "OCL_ICD_FILENAMES=%s (read by the Khronos loader in use)",
               filenames);
}

static void check_platforms(doctor *d) {
  check_loader_kind(d);
  cl_uint n = 0;
  cl_int err = clGetPlatformIDs(0, NULL, &n);
  if (err != CL_SUCCESS || n == 0) {
    doctor_add(d, L_PROBLEM, "ICD loader",
               "see the findings about .icd files above; with no driver "
               "installed: apt-get install pocl-opencl-icd",
               "clGetPlatformIDs %s%s: no OpenCL platform is available",
               err != CL_SUCCESS ? "fails with " : "finds nothing",
               err != CL_SUCCESS ? kiln_cl_error_name(err) : "");
    return;
  }
  cl_platform_id ids[64];
  if (n > 64)
    n = 64;
  if (clGetPlatformIDs(n, ids, NULL) != CL_SUCCESS)
    return;
  for (cl_uint p = 0; p < n; p++) {
    char subject[64];
    snprintf(subject, sizeof(subject), "platform %u", p);
    char *name = info_query_string(INFO_PLATFORM, ids[p], CL_PLATFORM_NAME);
    char *version = info_query_string(INFO_PLATFORM, ids[p], CL_PLATFORM_VERSION);
    if (name == NULL || version == NULL) {
      doctor_add(d, L_PROBLEM, subject,
                 "the driver behind it is broken; find it among the .icd "
                 "findings above",
                 "platform %u fails clGetPlatformInfo(%s)", p,
                 name == NULL ? "CL_PLATFORM_NAME" : "CL_PLATFORM_VERSION");
    } else {
      cl_uint nd = 0;
      err = clGetDeviceIDs(ids[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
      if (err != CL_SUCCESS && err != CL_DEVICE_NOT_FOUND)
        doctor_add(d, L_PROBLEM, subject, NULL,
                   "platform %u \"%s\" fails clGetDeviceIDs with %s", p, name,
                   kiln_cl_error_name(err));
      else
        doctor_add(d, nd > 0 ? L_OK : L_NOTE, subject, NULL,
                   "platform %u \"%s\" (%s): %u device%s", p, name, version,
                   err == CL_SUCCESS ? nd : 0, nd == 1 ? "" : "s");
    }
    free(name);
    free(version);
  }
}

/* ---- kiln's view: devices, KILN_DEVICE, a kernel build on each ---- */

static void check_kiln(doctor *d) {
  kiln_device_list *list = NULL;
  if (kiln_device_list_create(&list) != KILN_OK) {
    doctor_add(d, L_PROBLEM, "kiln", NULL, "kiln cannot enumerate devices: %s",
               kiln_last_error());
    return;
  }
  size_t count = kiln_device_list_get_count(list);
  bool pocl_none = false;
  for (size_t i = 0; i < kiln_device_list_get_problem_count(list); i++) {
    const kiln_device_problem *p = kiln_device_list_get_problem(list, i);
    /* PoCL installed yet listing no device: kiln's message says why (its
     * kernel cache directory cannot be created when HOME, XDG_CACHE_HOME
     * or POCL_CACHE_DIR is not writable) and what to set. */
    if (p != NULL && p->device_index == SIZE_MAX &&
        p->cl_error == CL_DEVICE_NOT_FOUND &&
        strcmp(p->platform_name, "Portable Computing Language") == 0) {
      pocl_none = true;
      doctor_add(d, L_PROBLEM, "PoCL", NULL, "%s", p->message);
    }
    /* Other platform-level failures are reported above from the loader's
     * side. */
    if (p == NULL || p->device_index == SIZE_MAX)
      continue;
    char subject[64];
    snprintf(subject, sizeof(subject), "device %zu:%zu", p->platform_index,
             p->device_index);
    doctor_add(d, L_PROBLEM, subject, NULL, "kiln skips it: %s", p->message);
  }
  if (count == 0)
    doctor_add(d, L_PROBLEM, "kiln",
               pocl_none ? "fix PoCL's problem above (PoCL is installed)"
                         : "install an OpenCL driver (apt-get install "
                           "pocl-opencl-icd for any CPU) or fix the problems "
                           "above",
               "no usable OpenCL device");

  const char *env = getenv("KILN_DEVICE");
  if (env != NULL && env[0] != '\0') {
    kiln_selection *sel = NULL;
    if (kiln_selection_create(list, env, &sel) != KILN_OK)
      doctor_add(d, L_PROBLEM, "KILN_DEVICE",
                 "fix the selector (see `kiln info --explain`) or unset it",
                 "KILN_DEVICE=%s does not parse: %s", env, kiln_last_error());
    else if (kiln_selection_get_count(sel) == 0 && count > 0)
      doctor_add(d, L_PROBLEM, "KILN_DEVICE",
                 "run `kiln info --explain` to see why each device is refused",
                 "KILN_DEVICE=%s takes no device: programs using kiln's default "
                 "device will fail", env);
    else if (count > 0)
      doctor_add(d, L_OK, "KILN_DEVICE", NULL, "KILN_DEVICE=%s takes %zu device%s",
                 env, kiln_selection_get_count(sel),
                 kiln_selection_get_count(sel) == 1 ? "" : "s");
    kiln_selection_destroy(sel);
  }

  for (size_t i = 0; i < count; i++) {
    const kiln_device *dev = kiln_device_list_get(list, i);
    const kiln_device_info *info = kiln_device_get_info(dev);
    char subject[64], detail[2048];
    snprintf(subject, sizeof(subject), "device %zu:%zu", info->platform_index,
             info->device_index);
    double ms = 0;
    if (info_check_device(dev, detail, sizeof(detail), &ms))
      doctor_add(d, L_OK, subject, NULL,
                 "%s (%s, profile %s) builds and runs a kernel (%.0f ms)",
                 info->name, info->platform_name, info->profile, ms);
    else
      doctor_add(d, L_PROBLEM, subject,
                 "the driver's compiler fails: update the driver, or choose "
                 "another device with KILN_DEVICE",
                 "%s (%s) cannot build or run a trivial kernel: %s", info->name,
                 info->platform_name, detail);
  }
  kiln_device_list_destroy(list);
}

/* ---- output ---- */

static const char *level_name(level lvl) {
  return lvl == L_PROBLEM ? "PROBLEM" : lvl == L_NOTE ? "note" : "ok";
}

/* "LEVEL    SUBJECT: MESSAGE", wrapped to width, the next lines under
 * the subject; then "hint: HINT" under it, if any. */
static void print_finding(FILE *out, const finding *f, int width) {
  const size_t n = strlen(f->subject) + strlen(f->message) +
                   (f->hint != NULL ? strlen(f->hint) : 0) + 32;
  char *line = malloc(n);
  if (line == NULL)
    return;
  snprintf(line, n, "%-8s %s: %s", level_name(f->lvl), f->subject, f->message);
  cli_wrap(out, line, 0, 9, width);
  if (f->hint != NULL) {
    snprintf(line, n, "%-8s   hint: %s", "", f->hint);
    cli_wrap(out, line, 0, 17, width);
  }
  free(line);
}

int info_doctor(FILE *out, json_t **json_out) {
  doctor d;
  memset(&d, 0, sizeof(d));
  doctor_check_loader_env(&d);
  doctor_check_icds(&d);
  check_device_nodes(&d);
  check_unregistered_libs(&d);
  check_platforms(&d);
  check_kiln(&d);

  size_t problems = 0;
  for (size_t i = 0; i < d.count; i++)
    problems += d.items[i].lvl == L_PROBLEM;
  if (json_out != NULL) {
    json_t *a = json_array();
    for (size_t i = 0; i < d.count; i++) {
      const finding *f = &d.items[i];
      json_t *o = json_object();
      json_object_set_new(o, "level", json_string(level_name(f->lvl)));
      char *subject = strdup(f->subject), *message = strdup(f->message);
      if (subject && message) {
        info_sanitize_utf8(subject);
        info_sanitize_utf8(message);
        json_object_set_new(o, "subject", json_string(subject));
        json_object_set_new(o, "message", json_string(message));
      }
      free(subject);
      free(message);
      if (f->hint)
        json_object_set_new(o, "hint", json_string(f->hint));
      json_array_append_new(a, o);
    }
    *json_out = a;
  } else {
    /* Fitted to the width as the rest of kiln info: a finding goes on
     * under its subject, a hint under its text. */
    const int width = cli_width();
    fprintf(out, "kiln %s doctor\n", kiln_version());
    for (size_t i = 0; i < d.count; i++)
      print_finding(out, &d.items[i], width);
    if (problems == 0)
      fprintf(out, "No problems found.\n");
    else
      fprintf(out, "%zu problem%s found.\n", problems, problems == 1 ? "" : "s");
  }
  for (size_t i = 0; i < d.count; i++) {
    free(d.items[i].subject);
    free(d.items[i].message);
    free(d.items[i].hint);
  }
  free(d.items);
  for (size_t i = 0; i < d.icd_count; i++) {
    free(d.icd_paths[i]);
    free(d.icd_libs[i]);
  }
  return problems > 0 ? 1 : 0;
}
