/* Device enumeration: every platform and device the ICD loader offers, with
 * the facts kiln needs about each, and a problem list for whatever failed.
 *
 * Drivers are not trusted: a query that fails skips that platform or device
 * and records why; the queries themselves (device_query.c) cap absurd sizes,
 * so an empty, over-long or inconsistent answer never crashes enumeration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "device_query.h"
#include "internal.h"

/* More work-item dimensions than any device has; guards the array query. */
#define MAX_DIMS 64

struct kiln_device_list {
  struct kiln_device *devices;
  size_t count, capacity;
  kiln_device_problem *problems;
  size_t problem_count, problem_capacity;
  size_t explaining; /* 1 + the index of the problem that explains why a
                        platform has no device (PoCL's cache), or 0 */
};

/* ---- names --------------------------------------------------------------- */

const char *kiln_device_type_name(kiln_device_type type) {
  switch (type) {
  case KILN_DEVICE_CPU:
    return "CPU";
  case KILN_DEVICE_GPU:
    return "GPU";
  case KILN_DEVICE_ACCELERATOR:
    return "accelerator";
  case KILN_DEVICE_OTHER:
    break;
  }
  return "other";
}

const char *kiln_quirk_name(unsigned quirk_bit) {
  switch (quirk_bit) {
  case KILN_QUIRK_LOCAL_MEM_EMULATED:
    return "local-mem-emulated";
  case KILN_QUIRK_NO_MAD_FUSION:
    return "no-mad-fusion";
  case KILN_QUIRK_SERIAL_DEFAULT_LOCAL_SIZE:
    return "serial-default-local-size";
  case KILN_QUIRK_LEGACY_QUEUE_CREATE:
    return "legacy-queue-create";
  case KILN_QUIRK_COARSE_PROFILING:
    return "coarse-profiling";
  case KILN_QUIRK_LAZY_PROGRAM_BINARY:
    return "lazy-program-binary";
  case KILN_QUIRK_FINISH_SKIPS_FLUSHED:
    return "finish-skips-flushed";
  case KILN_QUIRK_LOOP_LIMIT_65535:
    return "loop-limit-65535";
  case KILN_QUIRK_SPURIOUS_BUILD_FAILURE:
    return "spurious-build-failure";
  case KILN_QUIRK_SLOW_COMMAND_BUFFER:
    return "slow-command-buffer";
  default:
    return NULL;
  }
}

/* ---- the list's growable arrays ----------------------------------------- */

static bool grow(void **array, size_t *capacity, size_t count, size_t elem) {
  if (count < *capacity)
    return true;
  size_t cap = *capacity ? *capacity * 2 : 8, bytes;
  if (kiln__mul_overflows(cap, elem, &bytes))
    return false;
  void *p = realloc(*array, bytes);
  if (p == NULL)
    return false;
  *array = p;
  *capacity = cap;
  return true;
}

/* Record a problem; false only when host memory ran out. */
static bool add_problem(kiln_device_list *list, size_t platform_index,
                        const char *platform_name, size_t device_index,
                        const char *call, cl_int err, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

static bool add_problem(kiln_device_list *list, size_t platform_index,
                        const char *platform_name, size_t device_index,
                        const char *call, cl_int err, const char *fmt, ...) {
  if (!grow((void **)&list->problems, &list->problem_capacity,
            list->problem_count, sizeof *list->problems))
    return false;
  char message[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(message, sizeof message, fmt, args);
  va_end(args);
  /* Platform names may be absurdly long (a broken driver); keep a prefix. */
  const char *pname = platform_name ? platform_name : "";
  size_t plen = strnlen(pname, 256), mlen = strlen(message);
  char *storage = malloc(plen + 1 + mlen + 1);
  if (storage == NULL)
    return false;
  memcpy(storage, pname, plen);
  storage[plen] = '\0';
  memcpy(storage + plen + 1, message, mlen + 1);
  kiln__log(KILN__LOG_INFO, "device list: %s", message);
  list->problems[list->problem_count++] = (kiln_device_problem){
      .platform_index = platform_index,
      .platform_name = storage,
      .device_index = device_index,
      .call = call,
      .cl_error = err,
      .message = storage + plen + 1,
  };
  return true;
}

/* ---- device records ------------------------------------------------------ */

/* The string fields of an info record, in storage order. */
enum { STRING_FIELDS = 11 };

static void string_fields(kiln_device_info *info,
                          const char **fields[STRING_FIELDS]) {
  const char **f[STRING_FIELDS] = {
      &info->name,           &info->vendor,           &info->driver_version,
      &info->device_version, &info->opencl_c_version, &info->extensions,
      &info->platform_name,  &info->platform_vendor,  &info->platform_version,
      &info->stable_id,      &info->profile,
  };
  memcpy(fields, f, sizeof f);
}

/* Copy strings[] into one allocation and point the info fields at it. */
static bool pack_strings(struct kiln_device *dev,
                         const char *strings[STRING_FIELDS]) {
  size_t total = 0;
  for (int i = 0; i < STRING_FIELDS; i++)
    total += strlen(strings[i]) + 1;
  dev->storage = malloc(total);
  if (dev->storage == NULL)
    return false;
  const char **fields[STRING_FIELDS];
  string_fields(&dev->info, fields);
  char *p = dev->storage;
  for (int i = 0; i < STRING_FIELDS; i++) {
    size_t n = strlen(strings[i]) + 1;
    memcpy(p, strings[i], n);
    *fields[i] = p;
    p += n;
  }
  return true;
}

kiln_status kiln__device_clone(const struct kiln_device *device,
                               struct kiln_device **out) {
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "kiln__device_clone: out is NULL");
  *out = NULL;
  if (device == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln__device_clone: device is NULL");
  struct kiln_device *copy = malloc(sizeof *copy);
  if (copy == NULL)
    goto fail;
  *copy = *device;
  kiln_device_info info = device->info;
  const char **src[STRING_FIELDS];
  string_fields(&info, src);
  const char *strings[STRING_FIELDS];
  for (int i = 0; i < STRING_FIELDS; i++)
    strings[i] = *src[i];
  if (!pack_strings(copy, strings))
    goto fail;
  *out = copy;
  return KILN_OK;
fail:
  free(copy);
  return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                    "kiln__device_clone: out of host memory copying device "
                    "'%s'",
                    device->info.name);
}

void kiln__device_free(struct kiln_device *device) {
  if (device == NULL)
    return;
  free(device->storage);
  free(device);
}

/* The stable id: uuid, else PCI address, else a hash whose ordinal tells
 * apart identical devices (same platform, name and driver version). */
static void make_stable_id(const struct kiln__query_target *t,
                           const kiln_device_list *list,
                           const char *platform_name, const char *name,
                           const char *driver, const char *extensions,
                           char out[48]) {
  if (kiln__has_extension(extensions, "cl_khr_device_uuid")) {
    cl_uchar uuid[CL_UUID_SIZE_KHR];
    if (kiln__query_scalar(t, CL_DEVICE_UUID_KHR, uuid, sizeof uuid) ==
        CL_SUCCESS) {
      bool nonzero = false;
      for (size_t i = 0; i < sizeof uuid; i++)
        nonzero |= uuid[i] != 0;
      if (nonzero) {
        char *p = out + sprintf(out, "uuid-");
        for (size_t i = 0; i < sizeof uuid; i++)
          p += sprintf(p, "%02x", uuid[i]);
        return;
      }
    }
  }
  if (kiln__has_extension(extensions, "cl_khr_pci_bus_info")) {
    cl_device_pci_bus_info_khr pci;
    if (kiln__query_scalar(t, CL_DEVICE_PCI_BUS_INFO_KHR, &pci, sizeof pci) ==
        CL_SUCCESS) {
      snprintf(out, 48, "pci-%04x:%02x:%02x.%x", pci.pci_domain & 0xffffu,
               pci.pci_bus & 0xffu, pci.pci_device & 0x1fu,
               pci.pci_function & 0x7u);
      return;
    }
  }
  uint64_t ordinal = 0;
  for (size_t i = 0; i < list->count; i++) {
    const kiln_device_info *o = &list->devices[i].info;
    ordinal += strcmp(o->platform_name, platform_name) == 0 &&
               strcmp(o->name, name) == 0 &&
               strcmp(o->driver_version, driver) == 0;
  }
  XXH3_state_t *state = XXH3_createState();
  uint64_t h = 0;
  if (state != NULL) {
    /* Each string with its NUL, so ("ab","c") and ("a","bc") differ; the
     * ordinal little-endian, so the id is the same on every host. */
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
      le[i] = (unsigned char)(ordinal >> (8 * i));
    XXH3_64bits_reset(state);
    XXH3_64bits_update(state, platform_name, strlen(platform_name) + 1);
    XXH3_64bits_update(state, name, strlen(name) + 1);
    XXH3_64bits_update(state, driver, strlen(driver) + 1);
    XXH3_64bits_update(state, le, sizeof le);
    h = XXH3_64bits_digest(state);
    XXH3_freeState(state);
  }
  snprintf(out, 48, "hash-%016llx", (unsigned long long)h);
}

/* The platform's strings, queried once for all its devices. */
struct platform_facts {
  char *name, *vendor, *version;
  uint32_t cl_version;
};

/* Scalar queries every OpenCL 1.2 device must answer. */
struct scalar_query {
  cl_uint param;
  const char *param_name;
  size_t offset, size;
};

#define SCALAR(param, field)                                                 \
  {param, #param, offsetof(kiln_device_info, field),                         \
   sizeof(((kiln_device_info *)0)->field)}

static const struct scalar_query required_scalars[] = {
    SCALAR(CL_DEVICE_VENDOR_ID, vendor_id),
    SCALAR(CL_DEVICE_MAX_COMPUTE_UNITS, compute_units),
    SCALAR(CL_DEVICE_MAX_CLOCK_FREQUENCY, clock_mhz),
    SCALAR(CL_DEVICE_GLOBAL_MEM_SIZE, global_mem_bytes),
    SCALAR(CL_DEVICE_LOCAL_MEM_SIZE, local_mem_bytes),
    SCALAR(CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE, constant_mem_bytes),
    SCALAR(CL_DEVICE_MAX_MEM_ALLOC_SIZE, max_alloc_bytes),
    SCALAR(CL_DEVICE_MEM_BASE_ADDR_ALIGN, mem_base_addr_align_bits),
    SCALAR(CL_DEVICE_MAX_WORK_GROUP_SIZE, max_work_group_size),
    SCALAR(CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, max_work_item_dims),
    SCALAR(CL_DEVICE_PREFERRED_VECTOR_WIDTH_CHAR, vector_width_char),
    SCALAR(CL_DEVICE_PREFERRED_VECTOR_WIDTH_SHORT, vector_width_short),
    SCALAR(CL_DEVICE_PREFERRED_VECTOR_WIDTH_INT, vector_width_int),
    SCALAR(CL_DEVICE_PREFERRED_VECTOR_WIDTH_LONG, vector_width_long),
    SCALAR(CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, vector_width_float),
    SCALAR(CL_DEVICE_PREFERRED_VECTOR_WIDTH_DOUBLE, vector_width_double),
};

static const struct {
  cl_uint param;
  const char *param_name;
} required_strings[] = {
    {CL_DEVICE_NAME, "CL_DEVICE_NAME"},
    {CL_DEVICE_VENDOR, "CL_DEVICE_VENDOR"},
    {CL_DRIVER_VERSION, "CL_DRIVER_VERSION"},
    {CL_DEVICE_VERSION, "CL_DEVICE_VERSION"},
    {CL_DEVICE_OPENCL_C_VERSION, "CL_DEVICE_OPENCL_C_VERSION"},
    {CL_DEVICE_EXTENSIONS, "CL_DEVICE_EXTENSIONS"},
};
enum { REQUIRED_STRINGS = sizeof required_strings / sizeof required_strings[0] };

/* Outcome of reading one device. */
enum read_result { READ_OK, READ_SKIPPED, READ_NO_MEMORY };

/* Query everything about device d (index di of platform pi) and append it to
 * the list, or record why it was skipped. */
static enum read_result read_device(kiln_device_list *list, cl_platform_id pl,
                                    cl_device_id d, size_t pi, size_t di,
                                    const struct platform_facts *pf) {
  const struct kiln__query_target t = {pl, d};
  struct kiln_device dev = {.platform = pl, .id = d};
  kiln_device_info *info = &dev.info;
  char *strings[REQUIRED_STRINGS] = {0};
  enum read_result result = READ_SKIPPED;
  const char *failed = NULL;
  cl_int err = CL_SUCCESS;

  for (size_t i = 0; i < REQUIRED_STRINGS && failed == NULL; i++) {
    err = kiln__query_string(&t, required_strings[i].param, &strings[i]);
    if (err != CL_SUCCESS)
      failed = required_strings[i].param_name;
  }
  cl_device_type type = 0;
  if (failed == NULL) {
    err = kiln__query_scalar(&t, CL_DEVICE_TYPE, &type, sizeof type);
    if (err != CL_SUCCESS)
      failed = "CL_DEVICE_TYPE";
  }
  for (size_t i = 0; failed == NULL && i < sizeof required_scalars /
                                               sizeof required_scalars[0];
       i++) {
    const struct scalar_query *q = &required_scalars[i];
    err = kiln__query_scalar(&t, q->param, (char *)info + q->offset, q->size);
    if (err != CL_SUCCESS)
      failed = q->param_name;
  }
  size_t sizes[MAX_DIMS] = {0};
  if (failed == NULL) {
    cl_uint dims = info->max_work_item_dims;
    if (dims == 0 || dims > MAX_DIMS) {
      err = CL_INVALID_VALUE;
      failed = "CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS";
    } else {
      err = kiln__query_scalar(&t, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizes,
                         dims * sizeof sizes[0]);
      if (err != CL_SUCCESS)
        failed = "CL_DEVICE_MAX_WORK_ITEM_SIZES";
    }
  }
  if (err == CL_OUT_OF_HOST_MEMORY && failed != NULL) {
    result = READ_NO_MEMORY;
    goto done;
  }
  if (failed != NULL) {
    const char *name = strings[0] != NULL ? strings[0] : "";
    if (!add_problem(list, pi, pf->name, di, "clGetDeviceInfo", err,
                     "device %zu ('%.200s') of platform %zu ('%.200s'): "
                     "clGetDeviceInfo(%s) failed with %s (%d); the device "
                     "is skipped",
                     di, name, pi, pf->name, failed, kiln_cl_error_name(err),
                     (int)err))
      result = READ_NO_MEMORY;
    goto done;
  }

  kiln__normalise_spaces(strings[5]);
  for (size_t i = 0; i < 3; i++)
    info->max_work_item_sizes[i] = i < info->max_work_item_dims ? sizes[i] : 1;
  info->type = (type & CL_DEVICE_TYPE_GPU)           ? KILN_DEVICE_GPU
               : (type & CL_DEVICE_TYPE_CPU)         ? KILN_DEVICE_CPU
               : (type & CL_DEVICE_TYPE_ACCELERATOR) ? KILN_DEVICE_ACCELERATOR
                                                     : KILN_DEVICE_OTHER;
  info->cl_version = kiln__parse_cl_version(strings[3]);
  info->platform_cl_version = pf->cl_version;
  /* Optional facts: a failing query means "no". */
  if (kiln__query_scalar(&t, CL_DEVICE_PREFERRED_VECTOR_WIDTH_HALF,
                   &info->vector_width_half,
                   sizeof info->vector_width_half) != CL_SUCCESS)
    info->vector_width_half = 0;
  cl_device_fp_config half = 0, dbl = 0;
  /* Before OpenCL 3.0 the half query is only valid with cl_khr_fp16; asking
   * anyway is an API error that checking tools (Oclgrind --check-api)
   * report. */
  if ((kiln__has_extension(strings[5], "cl_khr_fp16") ||
       info->cl_version >= 300) &&
      kiln__query_scalar(&t, CL_DEVICE_HALF_FP_CONFIG, &half, sizeof half) !=
          CL_SUCCESS)
    half = 0;
  if (kiln__query_scalar(&t, CL_DEVICE_DOUBLE_FP_CONFIG, &dbl, sizeof dbl) !=
      CL_SUCCESS)
    dbl = 0;
  info->fp16 = kiln__has_extension(strings[5], "cl_khr_fp16") && half != 0;
  info->fp64 = dbl != 0;
  cl_uint subgroups = 0;
  if (info->cl_version >= 210 &&
      kiln__query_scalar(&t, CL_DEVICE_MAX_NUM_SUB_GROUPS, &subgroups,
                   sizeof subgroups) != CL_SUCCESS)
    subgroups = 0;
  info->subgroups =
      kiln__has_extension(strings[5], "cl_khr_subgroups") || subgroups > 0;
  info->platform_index = pi;
  info->device_index = di;

  struct kiln_backend_probe probe = {
      .vendor_id = info->vendor_id,
      .vendor = strings[1],
      .platform_name = pf->name,
      .device_name = strings[0],
      .type = (int)info->type,
  };
  dev.backend = kiln__backend_match(&probe);
  /* The profile's quirks, plus one that follows from the platform version:
   * 1.x platforms lack clCreateCommandQueueWithProperties (Oclgrind's hangs). */
  info->quirks = dev.backend->quirks;
  if (pf->cl_version != 0 && pf->cl_version < 200)
    info->quirks |= KILN_QUIRK_LEGACY_QUEUE_CREATE;

  char stable_id[48];
  make_stable_id(&t, list, pf->name, strings[0], strings[2], strings[5],
                 stable_id);
  const char *all[STRING_FIELDS] = {
      strings[0], strings[1], strings[2], strings[3], strings[4], strings[5],
      pf->name,   pf->vendor, pf->version, stable_id, dev.backend->name,
  };
  if (!grow((void **)&list->devices, &list->capacity, list->count,
            sizeof *list->devices) ||
      !pack_strings(&dev, all)) {
    result = READ_NO_MEMORY;
    goto done;
  }
  list->devices[list->count++] = dev;
  result = READ_OK;
done:
  for (size_t i = 0; i < REQUIRED_STRINGS; i++)
    free(strings[i]);
  return result;
}

/* Enumerate platform pi. Returns false only when host memory ran out. */
static bool read_platform(kiln_device_list *list, cl_platform_id pl,
                          size_t pi) {
  const struct kiln__query_target t = {pl, NULL};
  struct platform_facts pf = {0};
  cl_device_id *ids = NULL;
  bool ok = false;
  const char *failed = NULL;
  cl_int err = kiln__query_string(&t, CL_PLATFORM_NAME, &pf.name);
  if (err != CL_SUCCESS)
    failed = "CL_PLATFORM_NAME";
  if (failed == NULL && (err = kiln__query_string(&t, CL_PLATFORM_VENDOR,
                                            &pf.vendor)) != CL_SUCCESS)
    failed = "CL_PLATFORM_VENDOR";
  if (failed == NULL && (err = kiln__query_string(&t, CL_PLATFORM_VERSION,
                                            &pf.version)) != CL_SUCCESS)
    failed = "CL_PLATFORM_VERSION";
  if (failed != NULL) {
    if (err == CL_OUT_OF_HOST_MEMORY)
      goto done;
    ok = add_problem(list, pi, pf.name ? pf.name : "", SIZE_MAX,
                     "clGetPlatformInfo", err,
                     "platform %zu: clGetPlatformInfo(%s) failed with %s "
                     "(%d); the platform is skipped",
                     pi, failed, kiln_cl_error_name(err), (int)err);
    goto done;
  }
  pf.cl_version = kiln__parse_cl_version(pf.version);

  cl_uint n = 0;
  err = clGetDeviceIDs(pl, CL_DEVICE_TYPE_ALL, 0, NULL, &n);
  if (err == CL_SUCCESS && n == 0)
    err = CL_DEVICE_NOT_FOUND;
  if (err == CL_SUCCESS) {
    ids = calloc(n, sizeof *ids);
    if (ids == NULL)
      goto done;
    err = clGetDeviceIDs(pl, CL_DEVICE_TYPE_ALL, n, ids, NULL);
  }
  /* PoCL lists no device when it cannot create its kernel cache: say so,
   * and what to set, rather than leave the user to reinstall drivers. */
  char pocl_why[1400];
  if (err == CL_DEVICE_NOT_FOUND &&
      strcmp(pf.name, "Portable Computing Language") == 0 &&
      kiln__pocl_cache_problem(pocl_why, sizeof pocl_why)) {
    ok = add_problem(list, pi, pf.name, SIZE_MAX, "clGetDeviceIDs", err,
                     "platform %zu ('%.200s') offers no device: %s", pi,
                     pf.name, pocl_why);
    if (ok && list->explaining == 0)
      list->explaining = list->problem_count;
    goto done;
  }
  if (err != CL_SUCCESS) {
    ok = add_problem(
        list, pi, pf.name, SIZE_MAX, "clGetDeviceIDs", err,
        "platform %zu ('%.200s') offers no device: clGetDeviceIDs failed with "
        "%s (%d)%s",
        pi, pf.name, kiln_cl_error_name(err), (int)err,
        err == CL_DEVICE_NOT_FOUND && (strcmp(pf.name, "Clover") == 0 ||
                                       strcmp(pf.name, "rusticl") == 0)
            ? " (normal for Mesa's Clover and rusticl without a supported "
              "GPU; RUSTICL_ENABLE=llvmpipe gives rusticl a CPU device)"
            : "");
    goto done;
  }
  for (cl_uint i = 0; i < n; i++) {
    if (ids[i] == NULL) {
      if (!add_problem(list, pi, pf.name, i, "clGetDeviceIDs",
                       CL_INVALID_DEVICE,
                       "platform %zu ('%.200s') returned a NULL device %u; "
                       "it is skipped",
                       pi, pf.name, (unsigned)i))
        goto done;
      continue;
    }
    if (read_device(list, pl, ids[i], pi, i, &pf) == READ_NO_MEMORY)
      goto done;
  }
  ok = true;
done:
  free(ids);
  free(pf.name);
  free(pf.vendor);
  free(pf.version);
  return ok;
}

kiln_status kiln_device_list_create(kiln_device_list **out) {
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln_device_list_create: out is NULL");
  *out = NULL;
  cl_platform_id *platforms = NULL;
  kiln_device_list *list = calloc(1, sizeof *list);
  if (list == NULL)
    goto fail;
  cl_uint n = 0;
  cl_int err = clGetPlatformIDs(0, NULL, &n);
  if (err == CL_SUCCESS && n > 0) {
    platforms = calloc(n, sizeof *platforms);
    if (platforms == NULL)
      goto fail;
    err = clGetPlatformIDs(n, platforms, NULL);
  }
  if (err != CL_SUCCESS || n == 0) {
    /* Name the vendors directory the loader actually read: with
     * OCL_ICD_VENDORS set, ocl-icd reads only that. */
    const char *vendors = getenv("OCL_ICD_VENDORS");
    bool from_env = vendors != NULL && vendors[0] != '\0';
    if (!add_problem(list, SIZE_MAX, "", SIZE_MAX, "clGetPlatformIDs",
                     err != CL_SUCCESS ? err : CL_PLATFORM_NOT_FOUND_KHR,
                     "the OpenCL ICD loader found no platform (%s): check "
                     "%s%s%s and that the library each .icd file there "
                     "names exists",
                     err != CL_SUCCESS ? kiln_cl_error_name(err)
                                       : "0 platforms",
                     from_env ? "OCL_ICD_VENDORS=" : "/etc/OpenCL/vendors",
                     from_env ? vendors : "",
                     from_env ? " (the loader reads only that)" : ""))
      goto fail;
  } else {
    for (cl_uint i = 0; i < n; i++)
      if (!read_platform(list, platforms[i], i))
        goto fail;
  }
  free(platforms);
  *out = list;
  return KILN_OK;
fail:
  free(platforms);
  kiln_device_list_destroy(list);
  return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                    "kiln_device_list_create: out of host memory while "
                    "enumerating devices");
}

void kiln_device_list_destroy(kiln_device_list *list) {
  if (list == NULL)
    return;
  for (size_t i = 0; i < list->count; i++)
    free(list->devices[i].storage);
  for (size_t i = 0; i < list->problem_count; i++)
    free((char *)list->problems[i].platform_name);
  free(list->devices);
  free(list->problems);
  free(list);
}

size_t kiln_device_list_get_count(const kiln_device_list *list) {
  return list != NULL ? list->count : 0;
}

const kiln_device *kiln_device_list_get(const kiln_device_list *list,
                                        size_t index) {
  if (list == NULL || index >= list->count)
    return NULL;
  return &list->devices[index];
}

size_t kiln_device_list_get_problem_count(const kiln_device_list *list) {
  return list != NULL ? list->problem_count : 0;
}

const kiln_device_problem *
kiln_device_list_get_problem(const kiln_device_list *list, size_t index) {
  if (list == NULL || index >= list->problem_count)
    return NULL;
  return &list->problems[index];
}

const kiln_device_problem *
kiln__device_list_explaining_problem(const kiln_device_list *list) {
  return list != NULL && list->explaining != 0
             ? &list->problems[list->explaining - 1]
             : NULL;
}

const kiln_device_info *kiln_device_get_info(const kiln_device *device) {
  return device != NULL ? &device->info : NULL;
}

kiln_status kiln__device_list_synthetic(const struct kiln_device *devices,
                                        size_t count, kiln_device_list **out) {
  if (out == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln__device_list_synthetic: out is NULL");
  *out = NULL;
  if (devices == NULL && count > 0)
    return kiln__fail(KILN_ERR_NULL_POINTER,
                      "kiln__device_list_synthetic: devices is NULL");
  kiln_device_list *list = calloc(1, sizeof *list);
  if (list == NULL)
    goto fail;
  for (size_t i = 0; i < count; i++) {
    struct kiln_device dev = devices[i];
    kiln_device_info *info = &dev.info;
    const char **fields[STRING_FIELDS];
    string_fields(info, fields);
    const char *strings[STRING_FIELDS];
    for (int f = 0; f < STRING_FIELDS; f++)
      strings[f] = *fields[f] != NULL ? *fields[f] : "";
    if (dev.backend == NULL) {
      struct kiln_backend_probe probe = {
          .vendor_id = info->vendor_id,
          .vendor = strings[1],
          .platform_name = strings[6],
          .device_name = strings[0],
          .type = (int)info->type,
      };
      dev.backend = kiln__backend_match(&probe);
      info->quirks = dev.backend->quirks;
      strings[10] = dev.backend->name;
    }
    if (!grow((void **)&list->devices, &list->capacity, list->count,
              sizeof *list->devices) ||
        !pack_strings(&dev, strings))
      goto fail;
    list->devices[list->count++] = dev;
  }
  *out = list;
  return KILN_OK;
fail:
  kiln_device_list_destroy(list);
  return kiln__fail(KILN_ERR_OUT_OF_HOST_MEMORY,
                    "kiln__device_list_synthetic: out of host memory");
}
