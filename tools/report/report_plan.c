/* kiln report: which device, which steps with which limits, and the tuning
 * file to ship afterwards. The time plan, on a GPU, within the default 540
 * s: info 60, tests 150, tune 200 (on NVIDIA's OpenCL gemm and gemm_mma
 * 0.35 of it each, transpose, reduce and elementwise 0.1 each; elsewhere
 * gemm half, the three others a sixth each), bench 120 and its large GEMMs
 * 120, cuBLAS 150, the MLP and CNN runs 90 each and GPT-2's 150; those
 * are ceilings, and the report's own deadline cuts whatever runs late (a
 * step is skipped when less than 5 s are left). Everything at once does
 * not fit 540 s on a GPU: --steps runs a part (tools/gpu-session.sh runs
 * three, each in its own 10-minute command). */
#define _GNU_SOURCE
#include "report_plan.h"
#include "commands.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "kiln/kiln.h"

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"
#define NVIDIA_VENDOR_ID 0x10deu

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* The path of NVIDIA's OpenCL library as the dynamic linker's cache or the
 * usual directories know it, or "". */
static void find_nvidia_opencl(char *out, size_t size) {
  out[0] = '\0';
  FILE *p = popen("{ ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null", "r");
  char line[1024];
  while (p != NULL && fgets(line, sizeof line, p) != NULL) {
    const char *arrow = strstr(line, "=> ");
    if (strstr(line, "libnvidia-opencl.so.1") != NULL && arrow != NULL &&
        out[0] == '\0')
      snprintf(out, size, "%.*s", (int)strcspn(arrow + 3, "\n"), arrow + 3);
  }
  if (p != NULL)
    pclose(p);
  static const char *const dirs[] = {
      "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
      "/usr/lib", "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib"};
  for (size_t i = 0; out[0] == '\0' && i < sizeof dirs / sizeof dirs[0]; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/libnvidia-opencl.so.1", dirs[i]);
    if (exists(path))
      snprintf(out, size, "%s", path);
  }
}

/* The .icd file in dir that names NVIDIA's OpenCL library, or "". */
static void find_nvidia_icd(const char *dir, char *out, size_t size) {
  out[0] = '\0';
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d != NULL && out[0] == '\0' && (e = readdir(d)) != NULL) {
    const size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".icd") != 0)
      continue;
    char path[1024], text[512] = "";
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "r");
    if (f != NULL) {
      if (fgets(text, sizeof text, f) == NULL)
        text[0] = '\0';
      fclose(f);
    }
    if (strstr(text, "libnvidia-opencl") != NULL)
      snprintf(out, size, "%s", path);
  }
  if (d != NULL)
    closedir(d);
}

/* An NVIDIA driver on the machine (device nodes or the kernel module). */
static bool nvidia_present(void) {
  return exists("/dev/nvidiactl") || exists("/dev/nvidia0") ||
         exists("/proc/driver/nvidia/version");
}

/* No OpenCL GPU but an NVIDIA driver: PLATFORM-FACTS' container case, the
 * library mounted without the .icd file that tells the loader about it. */
static void explain_nvidia(report *r, const char *found) {
  char lib[512], icd[1024];
  find_nvidia_opencl(lib, sizeof lib);
  const char *vendors = getenv("OCL_ICD_VENDORS");
  const char *dir = vendors != NULL && vendors[0] ? vendors : "/etc/OpenCL/vendors";
  find_nvidia_icd(dir, icd, sizeof icd);
  size_t used = (size_t)snprintf(
      r->diagnosis, sizeof r->diagnosis,
      "No OpenCL GPU was found (%s), but this machine has an NVIDIA driver "
      "(/dev/nvidiactl, /dev/nvidia0 or /proc/driver/nvidia). ",
      found);
  if (lib[0] != '\0' && icd[0] == '\0') {
    snprintf(r->diagnosis + used, sizeof r->diagnosis - used,
             "NVIDIA's OpenCL library is here (%s) but no .icd file in %s "
             "names it, so the OpenCL ICD loader never loads it: the NVIDIA "
             "container toolkit mounts the library but, before its mid-2026 "
             "versions, not /etc/OpenCL/vendors/nvidia.icd "
             "(nvidia-container-toolkit issue 682). Fix, as root:\n\n"
             "    mkdir -p /etc/OpenCL/vendors && echo libnvidia-opencl.so.1 "
             "> /etc/OpenCL/vendors/nvidia.icd\n\n"
             "or without root:\n\n"
             "    mkdir -p ~/opencl-vendors && echo libnvidia-opencl.so.1 > "
             "~/opencl-vendors/nvidia.icd && export "
             "OCL_ICD_VENDORS=~/opencl-vendors\n\n"
             "then `kiln info` lists the \"NVIDIA CUDA\" platform; run kiln "
             "report again.",
             lib, dir);
  } else if (lib[0] == '\0') {
    snprintf(r->diagnosis + used, sizeof r->diagnosis - used,
             "NVIDIA's OpenCL library (libnvidia-opencl.so.1) is neither in "
             "the dynamic linker's cache (ldconfig -p) nor in the usual "
             "library directories: the driver's OpenCL part is not installed "
             "or not mounted into this container (start it with "
             "NVIDIA_DRIVER_CAPABILITIES including compute, or install the "
             "driver's OpenCL package, e.g. Debian's nvidia-opencl-icd). "
             "Then make sure an .icd file names it: echo "
             "libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd.");
  } else {
    snprintf(r->diagnosis + used, sizeof r->diagnosis - used,
             "NVIDIA's OpenCL library (%s) and an .icd file naming it (%s) "
             "are both here, yet no NVIDIA platform appeared: `kiln info "
             "--doctor` probes each ICD library and says why it fails to "
             "load.",
             lib, icd);
  }
}

bool report_find_device(report *r, const char *selector) {
  kiln_device_list *devs = NULL;
  const kiln_device *dev = NULL;
  if (kiln_device_list_create(&devs) != KILN_OK ||
      kiln_device_select(devs, selector, &dev) != KILN_OK) {
    char found[1024];
    snprintf(found, sizeof found, "%s", kiln_last_error());
    if (nvidia_present())
      explain_nvidia(r, found);
    else
      snprintf(r->diagnosis, sizeof r->diagnosis,
               "No device for the report: %s. `kiln info --doctor` checks the "
               "OpenCL installation.", found);
    kiln_device_list_destroy(devs);
    return false;
  }
  bool any_gpu = false;
  for (size_t i = 0; i < kiln_device_list_get_count(devs); i++)
    any_gpu = any_gpu || kiln_device_get_info(kiln_device_list_get(devs, i))
                                 ->type == KILN_DEVICE_GPU;
  const kiln_device_info *d = kiln_device_get_info(dev);
  snprintf(r->selector, sizeof r->selector, "%zu:%zu", d->platform_index,
           d->device_index);
  snprintf(r->device_name, sizeof r->device_name, "%s", d->name);
  snprintf(r->device_vendor, sizeof r->device_vendor, "%s", d->vendor);
  snprintf(r->driver, sizeof r->driver, "%s", d->driver_version);
  snprintf(r->platform, sizeof r->platform, "%s", d->platform_name);
  snprintf(r->device_version, sizeof r->device_version, "%s", d->device_version);
  snprintf(r->stable_id, sizeof r->stable_id, "%s", d->stable_id);
  snprintf(r->profile, sizeof r->profile, "%s", d->profile);
  r->device_type = (int)d->type;
  r->vendor_id = d->vendor_id;
  r->device_fp16 = d->fp16;
  kiln_device_list_destroy(devs);
  if (!any_gpu && selector == NULL && nvidia_present()) {
    char found[512];
    snprintf(found, sizeof found, "only %s", r->device_name);
    explain_nvidia(r, found);
    return false;
  }
  return true;
}

static step *add(report *r, const char *name, const char *kind, double limit) {
  step *s = &r->steps[r->nsteps];
  r->kinds[r->nsteps++] = kind;
  snprintf(s->name, sizeof s->name, "%s", name);
  s->limit_s = limit;
  return s;
}

static void args(step *s, const char *const *list) {
  for (size_t i = 0; list[i] != NULL; i++)
    step_arg(s, list[i]);
}

/* The test programs that run kernels on the device (KILN_TEST_DEVICE picks
 * it), from `meson test --list`: the ops, the tuning spaces and the tuner,
 * the runtime objects that launch and copy, the trainer's runs. Not the
 * host-only checks (man pages, ABI, packaging, fake ICDs). */
static bool device_test(const char *name) {
  static const char *const prefixes[] = {"op_", "gemm_space_", "space_",
                                         "tune_", "tuning"};
  static const char *const names[] = {
      "queue", "buffer", "event", "program", "kernel", "pool", "pinned",
      "sequence", "pipeline", "multi", "train_short_run", "train_agreement",
      "train_determinism"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
      return true;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(name, names[i]) == 0)
      return true;
  return false;
}

static void plan_tests(report *r) {
  /* 150 s among the other groups; alone (--steps info,tests, the GPU
   * session's first part) the time left but 10 s. */
  const bool alone = (r->groups & ~(unsigned)(REPORT_INFO | REPORT_TESTS)) == 0;
  const double left = r->deadline - tools_now() - 10;
  step *s = add(r, "tests", "tests",
                r->quick ? 90 : alone && left > 150 ? left : 150);
  if (r->build[0] == '\0') {
    step_skip(s, "no build tree: %s", r->build_why);
    return;
  }
  step list = {0};
  snprintf(list.name, sizeof list.name, "tests-list");
  list.stdout_apart = true;
  list.limit_s = 60;
  args(&list, (const char *const[]){"meson", "test", "-C", r->build,
                                    "--no-rebuild", "--list", NULL});
  step_run(&list, r->logdir, r->deadline);
  FILE *f = list.status == STEP_OK ? fopen(list.out, "r") : NULL;
  if (f == NULL) {
    step_skip(s, "`meson test --list` in %s did not list the tests (%s%s%s): "
                 "see %s", r->build, step_status_name(list.status),
              list.reason[0] ? ", " : "", list.reason, list.log);
    step_free(&list);
    return;
  }
  args(s, (const char *const[]){"meson", "test", "-C", r->build, "--no-rebuild",
                                "--print-errorlogs", "--logbase",
                                "kiln-report-tests", "--num-processes",
                                r->quick ? "2" : "8", NULL});
  /* At the small scale a few op tests only: they prove the step runs. */
  static const char *const quick[] = {"op_elementwise", "op_cast", "op_reduce",
                                      "op_transpose"};
  size_t count = 0;
  char name[256];
  while (fgets(name, sizeof name, f) != NULL) {
    name[strcspn(name, "\r\n")] = '\0';
    bool take = device_test(name);
    if (r->quick) {
      take = false;
      for (size_t i = 0; i < sizeof quick / sizeof quick[0]; i++)
        take = take || strcmp(name, quick[i]) == 0;
    }
    if (take && step_arg(s, name))
      count++;
  }
  fclose(f);
  step_free(&list);
  if (count == 0) {
    step_skip(s, "`meson test --list` in %s names none of the device tests",
              r->build);
    return;
  }
  step_env(s, "KILN_TEST_DEVICE", r->selector);
  step_env(s, "KILN_REQUIRE_DEVICE", "1");
}

/* NVIDIA's OpenCL on a GPU: where gemm_mma's inline PTX may run. */
static bool nvidia_gpu(const report *r) {
  return r->vendor_id == NVIDIA_VENDOR_ID && r->device_type == KILN_DEVICE_GPU;
}

static void plan_tune(report *r) {
  /* GEMM has the largest space and matters most: half the budget, or on
   * NVIDIA's OpenCL 0.35 for the general cores' space and 0.35 for the
   * matrix units' (gemm_mma, timed in bf16). */
  const bool mma = nvidia_gpu(r);
  const struct {
    const char *op, *sizes, *quick_sizes;
    double share;
  } ops[] = {{"gemm", "1024,4096", "128", mma ? 0.35 : 0.5},
             {"gemm_mma", "1024,4096", "256", mma ? 0.35 : 0},
             {"transpose", NULL, "256", mma ? 0.1 : 1.0 / 6},
             {"reduce", NULL, "65536", mma ? 0.1 : 1.0 / 6},
             {"elementwise", NULL, "65536", mma ? 0.1 : 1.0 / 6}};
  snprintf(r->tuning_file, sizeof r->tuning_file, "%s/tuning.txt", r->out);
  unlink(r->tuning_file); /* only this run's results */
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    char name[48], budget[32], limit_text[32];
    snprintf(name, sizeof name, "tune %s", ops[i].op);
    const double budget_s = r->tune_budget * ops[i].share < 1
                                ? 1
                                : r->tune_budget * ops[i].share;
    /* The search stops at its budget but a build or a launch in flight
     * may run up to its own timeout past it. */
    const double timeout = r->quick ? 20 : 60;
    step *s = add(r, name, "tune", budget_s + timeout + 15);
    if (ops[i].share == 0) {
      step_skip(s, "not NVIDIA's OpenCL on a GPU (vendor id 0x%x, %s): "
                   "gemm_mma is inline PTX, which only NVIDIA's compiler "
                   "takes", r->vendor_id,
                kiln_device_type_name((kiln_device_type)r->device_type));
      continue;
    }
    s->stdout_apart = true;
    snprintf(budget, sizeof budget, "%.0f", budget_s);
    snprintf(limit_text, sizeof limit_text, "%.0f", timeout);
    args(s, (const char *const[]){r->kiln, "tune", "--device", r->selector,
                                  "--op", ops[i].op, "--budget", budget,
                                  "--compile-timeout", limit_text,
                                  "--run-timeout", limit_text, "--json",
                                  "--export", r->tuning_file, NULL});
    const char *sizes = r->quick ? ops[i].quick_sizes : ops[i].sizes;
    if (sizes != NULL)
      args(s, (const char *const[]){"--size", sizes, NULL});
  }
  /* What GEMM runs now, the matrix units' verdict included. */
  step *s = add(r, "info after tuning", "verdict", 60);
  s->stdout_apart = true;
  args(s, (const char *const[]){r->kiln, "info", "--device", r->selector,
                                "--wide", NULL});
}

static void plan_bench(report *r) {
  /* f16 GEMM reads its operands with vload_half: it needs no cl_khr_fp16
   * (NVIDIA's OpenCL offers none). */
  const char *ops = "gemm,gemm_f16,gemm_bf16,transpose,sum,dot,nrm2,axpy,"
                    "scale,reduce_rows,softmax,layernorm,launch,pool,h2d,d2h,"
                    "sequence,pipeline";
  step *s = add(r, "bench", "bench", r->quick ? 60 : 120);
  s->stdout_apart = true;
  args(s, (const char *const[]){r->kiln, "bench", "--device", r->selector,
                                "--json", "--op", NULL});
  if (r->quick)
    args(s, (const char *const[]){"gemm,gemm_f16,gemm_bf16,transpose,sum,axpy,"
                                  "softmax",
                                  "--size", "256", "--runs", "5", NULL});
  else
    step_arg(s, ops);
  if (r->quick)
    return;
  /* The sizes the speed targets name. */
  s = add(r, "bench gemm large", "bench", 120);
  s->stdout_apart = true;
  args(s, (const char *const[]){r->kiln, "bench", "--device", r->selector,
                                "--json", "--op",
                                "gemm,gemm_f16,gemm_bf16",
                                "--size", "4096,8192", "--runs", "5", NULL});
}

static void plan_cublas(report *r) {
  step *s = add(r, "compare-cublas", "cublas", r->quick ? 60 : 150);
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/tools/bench/kiln-compare-cublas", r->build);
  if (r->build[0] == '\0')
    step_skip(s, "no build tree (kiln-compare-cublas is not installed): %s",
              r->build_why);
  else if (!exists(path))
    step_skip(s, "kiln-compare-cublas is not built in %s: the CUDA toolkit "
                 "(cudart, cuBLAS, nvcc) was not found when it was configured",
              r->build);
  else if (!nvidia_present())
    step_skip(s, "no NVIDIA driver on this machine (no /dev/nvidiactl)");
  else {
    /* cuBLAS SGEMM uses no TF32 in its default math mode, which the tool
     * sets; the variable makes sure. bf16 and f16 go through cublasGemmEx
     * with CUBLAS_COMPUTE_32F and an f32 C, as kiln computes them. */
    step_env(s, "NVIDIA_TF32_OVERRIDE", "0");
    args(s, (const char *const[]){path, "--device", r->selector, NULL});
    if (r->quick)
      args(s, (const char *const[]){"--size", "256,1024", "--runs", "3",
                                    NULL});
  }
}

/* The GPT-2 trainer's data: --gpt-data, else a text file of pseudo-random
 * words written here (the step times do not depend on the text; the loss
 * does, and is not a figure of merit). "" with the reason in why. */
static bool gpt_data(report *r, char *why, size_t size) {
  if (r->gpt_data[0] != '\0')
    return true;
  char path[] = "/tmp/kiln-report-gpt-XXXXXX";
  const int fd = mkstemp(path);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (f == NULL) {
    snprintf(why, size, "cannot write a text file for the GPT-2 trainer in "
                        "/tmp (give one with --gpt-data)");
    if (fd >= 0)
      close(fd);
    return false;
  }
  static const char *const words[] = {
      "the", "kiln", "fires", "clay", "and", "glaze", "in", "a", "slow",
      "heat", "until", "every", "pot", "rings", "true", "when", "struck"};
  uint64_t x = 0x2545f4914f6cdd1dull;
  /* 2 MiB: many batches of 4 x 1024 bytes, a tenth held out. */
  for (size_t bytes = 0; bytes < (2u << 20);) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const char *w = words[x % (sizeof words / sizeof words[0])];
    bytes += (size_t)fprintf(f, "%s%s", w, (x >> 32) % 11 == 0 ? ".\n" : " ");
  }
  if (fclose(f) != 0) {
    unlink(path);
    snprintf(why, size, "cannot write %s", path);
    return false;
  }
  snprintf(r->gpt_data, sizeof r->gpt_data, "%s", path);
  r->gpt_data_temp = true;
  return true;
}

/* The trainers, f32 then bf16 each: the Fashion-MNIST MLP for one epoch,
 * the CNN for one epoch (a subset at the small scale), and GPT-2 at the
 * 124M shape (12 layers, 12 heads, 768 channels, context 1024, vocabulary
 * 50257; batch 4 x 1024 tokens) for a few steps, its tokens the bytes of a
 * text file; at the small scale the trainer's default small GPT-2. */
static void plan_trainer(report *r) {
  static const char *const precisions[] = {"f32", "bf16"};
  static const char *const models[] = {"mlp", "cnn", "gpt"};
  char fmnist[PATH_MAX + 64], gpt[PATH_MAX + 64], fmnist_train[PATH_MAX + 64];
  snprintf(fmnist, sizeof fmnist, "%s/examples/train_fashion_mnist", r->build);
  snprintf(gpt, sizeof gpt, "%s/examples/train_gpt", r->build);
  const char *data_dir = r->fmnist_data[0] ? r->fmnist_data : FMNIST_DIR;
  snprintf(fmnist_train, sizeof fmnist_train,
           "%s/train-images-idx3-ubyte.gz", data_dir);
  for (size_t m = 0; m < 3; m++)
    for (size_t i = 0; i < 2; i++) {
      char name[48], why[256];
      snprintf(name, sizeof name, "train %s %s", models[m], precisions[i]);
      const bool is_gpt = m == 2;
      step *s = add(r, name, is_gpt ? "gpt" : "trainer",
                    r->quick ? 60 : is_gpt ? 150 : 90);
      const char *path = is_gpt ? gpt : fmnist;
      if (r->build[0] == '\0')
        step_skip(s, "no build tree (the examples are not installed): %s",
                  r->build_why);
      else if (!exists(path))
        step_skip(s, "%s is not built (examples are off in this build, or "
                     "zlib was not found)", path);
      else if (!is_gpt && !exists(fmnist_train))
        step_skip(s, "no Fashion-MNIST data at %s (Debian package "
                     "dataset-fashion-mnist, or --fmnist-data)",
                  fmnist_train);
      else if (is_gpt && !gpt_data(r, why, sizeof why))
        step_skip(s, "%s", why);
      else if (is_gpt) {
        args(s, (const char *const[]){path, "--device", r->selector, "--data",
                                      r->gpt_data, "--precision",
                                      precisions[i], "--val-every", "0",
                                      NULL});
        if (r->quick)
          args(s, (const char *const[]){"--steps", "3", "--batch", "2",
                                        NULL});
        else
          args(s, (const char *const[]){
                      "--layers", "12", "--heads", "12", "--channels", "768",
                      "--context", "1024", "--vocab", "50257", "--batch", "4",
                      "--seq", "1024", "--steps", "6", NULL});
      } else {
        args(s, (const char *const[]){path, "--device", r->selector,
                                      "--model", models[m], "--data",
                                      data_dir, "--epochs", "1",
                                      "--precision", precisions[i], NULL});
        /* The CNN: a quarter of an epoch on a GPU, a few steps on a CPU
         * (the GPU family's convolutions are slow there). */
        if (r->quick && m == 1)
          args(s, (const char *const[]){"--limit", "512", "--test-limit",
                                        "128", "--batch", "32", "--steps",
                                        "2", NULL});
        else if (r->quick || m == 1)
          args(s, (const char *const[]){"--limit", r->quick ? "2048" : "16384",
                                        "--test-limit", "1000", NULL});
      }
    }
}

void report_plan(report *r) {
  if (r->groups & REPORT_INFO) {
    step *s = add(r, "info", "", 60);
    s->stdout_apart = true;
    args(s, (const char *const[]){r->kiln, "info", "--json", NULL});
    if (nvidia_present()) {
      s = add(r, "nvidia-smi", "", 30);
      step_arg(s, "nvidia-smi");
    }
  }
  if (r->groups & REPORT_TESTS)
    plan_tests(r);
  if (r->groups & REPORT_TUNE)
    plan_tune(r);
  if (r->groups & REPORT_BENCH)
    plan_bench(r);
  if (r->groups & REPORT_CUBLAS)
    plan_cublas(r);
  if (r->groups & REPORT_TRAIN)
    plan_trainer(r);
}

unsigned report_parse_groups(const char *text) {
  static const struct {
    const char *name;
    unsigned bit;
  } groups[] = {{"info", REPORT_INFO},     {"tests", REPORT_TESTS},
                {"tune", REPORT_TUNE},     {"bench", REPORT_BENCH},
                {"cublas", REPORT_CUBLAS}, {"train", REPORT_TRAIN},
                {"all", REPORT_ALL}};
  unsigned bits = 0;
  for (const char *p = text;;) {
    const size_t len = strcspn(p, ",");
    bool known = false;
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
      if (len == strlen(groups[i].name) &&
          strncmp(p, groups[i].name, len) == 0) {
        bits |= groups[i].bit;
        known = true;
      }
    if (!known) {
      cli_usage_error("kiln report", "--steps: '%.*s' is none of info, "
                      "tests, tune, bench, cublas, train, all", (int)len, p);
      return 0;
    }
    if (p[len] == '\0')
      return bits;
    p += len + 1;
  }
}

void report_classify(step *s, const char *kind) {
  /* kiln tune on the CPU-family kernels refuses (no parameter space): not
   * a failure of the report, a step that does not apply to the device. */
  if (strcmp(kind, "tune") != 0 || s->status != STEP_FAILED)
    return;
  FILE *f = fopen(s->log, "r");
  char line[1024];
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (strstr(line, "which have no parameter space") != NULL ||
        (strstr(line, "the compile probe") != NULL &&
         strstr(line, "did not build") != NULL)) {
      line[strcspn(line, "\n")] = '\0';
      step_skip(s, "%s", line);
    }
  if (f != NULL)
    fclose(f);
}

void report_read_verdict(report *r, const step *s) {
  FILE *f = s->status == STEP_OK ? fopen(s->out, "r") : NULL;
  char line[1024];
  static const char key[] = "GEMM (matrix units) used";
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    const char *at = strstr(line, key);
    if (at == NULL)
      continue;
    at += strlen(key);
    at += strspn(at, " \t");
    snprintf(r->mma_verdict, sizeof r->mma_verdict, "%.*s",
             (int)strcspn(at, "\r\n"), at);
  }
  if (f != NULL)
    fclose(f);
}

void report_collect_tuning(report *r) {
  if (!(r->groups & REPORT_TUNE)) {
    snprintf(r->tuning_why, sizeof r->tuning_why,
             "kiln tune was not among this run's --steps");
    r->tuning_file[0] = '\0';
    return;
  }
  if (!exists(r->tuning_file)) {
    snprintf(r->tuning_why, sizeof r->tuning_why,
             "kiln tune saved nothing for this device (see the tune steps)");
    r->tuning_file[0] = '\0';
    return;
  }
  snprintf(r->db_rows, sizeof r->db_rows, "%s/tuning_db_rows.txt", r->out);
  r->db_row_count = report_db_rows(r->tuning_file, r->device_name, r->db_rows);
  if (r->db_row_count < 0)
    r->db_rows[0] = '\0';
}
