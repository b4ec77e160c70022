/* The doctor's first half: which .icd files the ICD loader reads, and a probe
 * of each library they name.
 *
 * Order matters. The ICD libraries are probed first, each in a forked child
 * with a timeout, before this process loads any driver: a library that
 * crashes or hangs in its initialiser is then reported instead of taking the
 * doctor down, and fork() happens while the process is still single-threaded.
 * Only then does the doctor go through the ICD loader and kiln (doctor.c). */

/* cl_icd.h declares the whole dispatch table, deprecated entries included:
 * without these, newer compilers (GCC 13) warn on every deprecated entry. They
 * must come before the first OpenCL header, which doctor.h pulls in. */
#define CL_USE_DEPRECATED_OPENCL_1_0_APIS
#define CL_USE_DEPRECATED_OPENCL_1_1_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#define CL_USE_DEPRECATED_OPENCL_2_0_APIS
#include "commands.h"
#include "doctor.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CL/cl_icd.h>

void doctor_add(doctor *d, level lvl, const char *subject, const char *hint,
                const char *fmt, ...) {
  if (d->count == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 16;
    finding *items = realloc(d->items, cap * sizeof(*items));
    if (items == NULL)
      return;
    d->items = items;
    d->cap = cap;
  }
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  finding *f = &d->items[d->count++];
  f->lvl = lvl;
  f->subject = strdup(subject ? subject : "");
  f->message = strdup(msg);
  f->hint = hint ? strdup(hint) : NULL;
}

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The library an .icd file names: its first line, trimmed. NULL if the file
 * cannot be read. */
static char *read_icd(const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return NULL;
  char line[4096];
  if (fgets(line, sizeof(line), f) == NULL)
    line[0] = '\0';
  fclose(f);
  char *s = line;
  while (*s == ' ' || *s == '\t')
    s++;
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' ||
                   s[n - 1] == '\t'))
    s[--n] = '\0';
  return strdup(s);
}

static void add_icd(doctor *d, const char *path) {
  if (d->icd_count == MAX_ICDS)
    return;
  d->icd_paths[d->icd_count] = strdup(path);
  d->icd_libs[d->icd_count] = read_icd(path);
  d->icd_count++;
}

/* Collect the .icd files of dir in the order ocl-icd reads them (sorted). */
static size_t scan_dir(doctor *d, const char *dir) {
  DIR *dh = opendir(dir);
  if (dh == NULL)
    return 0;
  char *names[MAX_ICDS];
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(dh)) != NULL && n < MAX_ICDS)
    if (ends_with(e->d_name, ".icd"))
      names[n++] = strdup(e->d_name);
  closedir(dh);
  qsort(names, n, sizeof(names[0]), cmp_str);
  for (size_t i = 0; i < n; i++) {
    char path[2048];
    snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
    add_icd(d, path);
    free(names[i]);
  }
  return n;
}

/* Work out which .icd files the loader reads, as ocl-icd does (libOpenCL(7)),
 * and diagnose the variables that steer it. */
void doctor_check_loader_env(doctor *d) {
  const char *vendors = getenv("OCL_ICD_VENDORS");
  const char *vpath = getenv("OPENCL_VENDOR_PATH");
  bool have_vpath = vpath != NULL && vpath[0] != '\0';
  snprintf(d->vendors_dir, sizeof(d->vendors_dir), "%s",
           have_vpath ? vpath : DEFAULT_VENDORS);
  d->vendors_overridden = have_vpath;
  d->vendors_scanned = true;


  if (vendors != NULL && vendors[0] != '\0') {
    d->vendors_overridden = true;
    if (have_vpath)
      doctor_add(d, L_NOTE, "OPENCL_VENDOR_PATH", NULL,
          "OPENCL_VENDOR_PATH=%s is ignored for the directory scan because "
          "OCL_ICD_VENDORS is set", vpath);
    if (is_dir(vendors)) {
      snprintf(d->vendors_dir, sizeof(d->vendors_dir), "%s", vendors);
      size_t n = scan_dir(d, vendors);
      if (n == 0)
        doctor_add(d, L_PROBLEM, "OCL_ICD_VENDORS",
            "put .icd files there, or unset OCL_ICD_VENDORS to use "
            DEFAULT_VENDORS,
            "OCL_ICD_VENDORS=%s is a directory with no .icd files: the loader "
            "will find no platform", vendors);
      else
        doctor_add(d, L_OK, "OCL_ICD_VENDORS", NULL,
            "OCL_ICD_VENDORS=%s replaces " DEFAULT_VENDORS ": %zu .icd file%s",
            vendors, n, n == 1 ? "" : "s");
      return;
    }
    if (ends_with(vendors, ".icd")) {
      char path[2048];
      snprintf(path, sizeof(path), "%s/%s", d->vendors_dir, vendors);
      if (strchr(vendors, '/') != NULL || access(path, R_OK) != 0)
        snprintf(path, sizeof(path), "%s", vendors);
      if (access(path, R_OK) != 0) {
        doctor_add(d, L_PROBLEM, "OCL_ICD_VENDORS",
            "set OCL_ICD_VENDORS to an existing directory or .icd file, or "
            "unset it",
            "OCL_ICD_VENDORS=%s names an .icd file that does not exist or "
            "cannot be read: the loader will find no platform", vendors);
        return;
      }
      doctor_add(d, L_OK, "OCL_ICD_VENDORS", NULL,
          "OCL_ICD_VENDORS=%s: the loader reads only this .icd file", path);
      add_icd(d, path);
      d->vendors_scanned = false;
      snprintf(d->loader_reads, sizeof(d->loader_reads), "OCL_ICD_VENDORS=%s",
               path);
      return;
    }
    /* Anything else is taken as the ICD library itself. */
    if (d->icd_count < MAX_ICDS) {
      d->icd_paths[d->icd_count] = strdup("OCL_ICD_VENDORS");
      d->icd_libs[d->icd_count] = strdup(vendors);
      d->icd_count++;
    }
    doctor_add(d, L_NOTE, "OCL_ICD_VENDORS", NULL,
        "OCL_ICD_VENDORS=%s is neither a directory nor an .icd file: the "
        "loader loads it as an ICD library directly", vendors);
    d->vendors_scanned = false;
    snprintf(d->loader_reads, sizeof(d->loader_reads), "OCL_ICD_VENDORS=%s",
             vendors);
    return;
  }

  if (!is_dir(d->vendors_dir)) {
    doctor_add(d, L_PROBLEM, have_vpath ? "OPENCL_VENDOR_PATH" : d->vendors_dir,
        have_vpath ? "point OPENCL_VENDOR_PATH at a directory of .icd files, or "
                     "unset it"
                   : "install an OpenCL driver: apt-get install "
                     "pocl-opencl-icd (any CPU), or your GPU vendor's ICD",
        "the ICD vendors directory %s does not exist: no OpenCL driver is "
        "registered", d->vendors_dir);
    return;
  }
  size_t n = scan_dir(d, d->vendors_dir);
  if (n == 0)
    doctor_add(d, L_PROBLEM, d->vendors_dir,
        "install an OpenCL driver: apt-get install pocl-opencl-icd (any CPU), "
        "or your GPU vendor's ICD package",
        "%s holds no .icd files: no OpenCL driver is registered",
        d->vendors_dir);
  else
    doctor_add(d, L_OK, d->vendors_dir, NULL, "%zu .icd file%s in %s", n,
        n == 1 ? "" : "s", d->vendors_dir);
}

/* ---- ICD probes, one forked child each ---- */

typedef cl_int (*icd_get_platforms_fn)(cl_uint, cl_platform_id *, cl_uint *);
typedef void *(*get_ext_fn)(const char *);

/* Every ICD object begins with a pointer to the vendor's dispatch table; the
 * loader calls through it, and so does the probe, because the library's own
 * clGetPlatformInfo symbol need not be exported. */
typedef struct icd_object {
  const cl_icd_dispatch *dispatch;
} icd_object;

/* In the child: write "LEVEL\tMESSAGE\tHINT\n" lines to fd. */
static void probe_say(int fd, level lvl, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void probe_say(int fd, level lvl, const char *hint, const char *fmt, ...) {
  char msg[1536], line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  for (char *p = msg; *p; p++)
    if (*p == '\t' || *p == '\n')
      *p = ' ';
  int n = snprintf(line, sizeof(line), "%d\t%s\t%s\n", (int)lvl, msg,
                   hint ? hint : "");
  if (n > 0 && write(fd, line, (size_t)n) < 0)
    _exit(3);
}

static void probe_child(int fd, const char *lib) {
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    const char *err = dlerror();
    probe_say(fd, L_PROBLEM,
              "install the driver package that provides this library, or "
              "remove the .icd file",
              "cannot load %s: %s", lib, err ? err : "unknown dlopen error");
    return;
  }
  icd_get_platforms_fn get = (icd_get_platforms_fn)(uintptr_t)dlsym(h, "clIcdGetPlatformIDsKHR");
  get_ext_fn ext = (get_ext_fn)(uintptr_t)dlsym(h, "clGetExtensionFunctionAddress");
  if (get == NULL && ext != NULL)
    get = (icd_get_platforms_fn)(uintptr_t)ext("clIcdGetPlatformIDsKHR");
  if (get == NULL) {
    probe_say(fd, L_PROBLEM,
              "the .icd file must name an OpenCL ICD driver library; remove it "
              "or correct the library name",
              "%s is not an OpenCL ICD: it has no clIcdGetPlatformIDsKHR "
              "(neither exported nor through clGetExtensionFunctionAddress)",
              lib);
    return;
  }
  cl_uint n = 0;
  cl_int err = get(0, NULL, &n);
  if (err != CL_SUCCESS || n == 0) {
    probe_say(fd, L_PROBLEM,
              "the driver loads but offers nothing: check that its hardware "
              "and kernel module are present (dmesg), and its own "
              "documentation",
              "%s: clIcdGetPlatformIDsKHR %s%s%s", lib,
              err != CL_SUCCESS ? "fails with " : "reports no platform",
              err != CL_SUCCESS ? kiln_cl_error_name(err) : "", "");
    return;
  }
  cl_platform_id ids[16];
  if (n > 16)
    n = 16;
  err = get(n, ids, NULL);
  if (err != CL_SUCCESS) {
    probe_say(fd, L_PROBLEM, NULL, "%s: clIcdGetPlatformIDsKHR fails with %s",
              lib, kiln_cl_error_name(err));
    return;
  }
  for (cl_uint i = 0; i < n; i++) {
    const icd_object *obj = (const icd_object *)ids[i];
    if (obj == NULL || obj->dispatch == NULL ||
        obj->dispatch->clGetPlatformInfo == NULL ||
        obj->dispatch->clGetDeviceIDs == NULL) {
      probe_say(fd, L_PROBLEM, NULL,
                "%s: platform %u has no usable dispatch table", lib, i);
      continue;
    }
    char name[256] = "";
    size_t got = 0;
    err = obj->dispatch->clGetPlatformInfo(ids[i], CL_PLATFORM_NAME,
                                           sizeof(name) - 1, name, &got);
    if (err != CL_SUCCESS) {
      probe_say(fd, L_PROBLEM,
                "the driver is broken or too old for this loader; reinstall "
                "or update it",
                "%s: platform %u fails clGetPlatformInfo(CL_PLATFORM_NAME) "
                "with %s", lib, i, kiln_cl_error_name(err));
      continue;
    }
    name[sizeof(name) - 1] = '\0';
    info_sanitize_utf8(name);
    cl_uint nd = 0;
    err = obj->dispatch->clGetDeviceIDs(ids[i], CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
    if (err == CL_DEVICE_NOT_FOUND || (err == CL_SUCCESS && nd == 0))
      probe_say(fd, L_NOTE,
                strstr(name, "rusticl")
                    ? "rusticl enables no driver by default: set "
                      "RUSTICL_ENABLE=llvmpipe (CPU) or radeonsi/iris (GPU)"
                    : NULL,
                "%s: platform \"%s\" has no devices", lib, name);
    else if (err != CL_SUCCESS)
      probe_say(fd, L_PROBLEM,
                "check that the device's kernel driver is loaded and its "
                "device nodes are accessible",
                "%s: platform \"%s\" fails clGetDeviceIDs with %s", lib, name,
                kiln_cl_error_name(err));
    else
      probe_say(fd, L_OK, NULL, "%s: platform \"%s\" with %u device%s", lib,
                name, nd, nd == 1 ? "" : "s");
  }
}

/* Parse the child's lines into findings about subject. */
static size_t take_lines(doctor *d, const char *subject, char *text) {
  size_t n = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    char *msg = strchr(line, '\t');
    if (msg == NULL)
      continue;
    *msg++ = '\0';
    char *hint = strchr(msg, '\t');
    if (hint)
      *hint++ = '\0';
    int lvl = atoi(line);
    doctor_add(d, lvl == 2 ? L_PROBLEM : lvl == 1 ? L_NOTE : L_OK, subject,
        hint && hint[0] ? hint : NULL, "%s", msg);
    n++;
  }
  return n;
}

static void probe_icd(doctor *d, const char *subject, const char *lib) {
  if (lib == NULL) {
    doctor_add(d, L_PROBLEM, subject, "check the file's permissions",
        "cannot read the .icd file");
    return;
  }
  if (lib[0] == '\0') {
    doctor_add(d, L_PROBLEM, subject,
        "write the driver library's name (for example libpocl.so.2) on its "
        "first line, or remove the file",
        "the .icd file is empty: it names no library");
    return;
  }
  int fds[2];
  if (pipe(fds) != 0) {
    doctor_add(d, L_NOTE, subject, NULL, "cannot probe %s: pipe: %s", lib,
        strerror(errno));
    return;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    doctor_add(d, L_NOTE, subject, NULL, "cannot probe %s: fork: %s", lib,
        strerror(errno));
    return;
  }
  if (pid == 0) {
    close(fds[0]);
    probe_child(fds[1], lib);
    /* _exit: skip the driver's atexit handlers, they are not our business. */
    _exit(0);
  }
  close(fds[1]);
  char buf[16384];
  size_t len = 0;
  double deadline = (1e3 * tools_now()) + PROBE_TIMEOUT_MS;
  bool timed_out = false;
  for (;;) {
    int left = (int)(deadline - (1e3 * tools_now()));
    if (left <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd pfd = {fds[0], POLLIN, 0};
    int r = poll(&pfd, 1, left);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    ssize_t got = read(fds[0], buf + len, sizeof(buf) - 1 - len);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      break;
    len += (size_t)got;
    if (len == sizeof(buf) - 1)
      break;
  }
  close(fds[0]);
  buf[len] = '\0';
  if (timed_out)
    kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  size_t lines = take_lines(d, subject, buf);
  if (timed_out)
    doctor_add(d, L_PROBLEM, subject,
        "the driver hangs while initialising; check its installation",
        "%s did not answer within %d s (killed)", lib, PROBE_TIMEOUT_MS / 1000);
  else if (WIFSIGNALED(status))
    doctor_add(d, L_PROBLEM, subject,
        "the driver crashes while loading; reinstall or update it, or remove "
        "its .icd file",
        "loading %s crashed the probe with signal %d (%s)", lib,
        WTERMSIG(status), strsignal(WTERMSIG(status)));
  else if (lines == 0)
    doctor_add(d, L_PROBLEM, subject, NULL, "probing %s gave no answer (exit %d)", lib,
        WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

void doctor_check_icds(doctor *d) {
  for (size_t i = 0; i < d->icd_count; i++) {
    const char *path = d->icd_paths[i];
    const char *base = strrchr(path, '/');
    probe_icd(d, base ? base + 1 : path, d->icd_libs[i]);
  }
}

