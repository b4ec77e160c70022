/* fmnist_data.c: read Fashion-MNIST's gzip'd IDX files with zlib (see
 * fmnist_data.h). The IDX format is a big-endian header, a magic number whose
 * low byte is the number of dimensions (0x00000801 for a vector of labels,
 * 0x00000803 for images), one 32-bit size per dimension, then the bytes. */
#include "fmnist_data.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

enum { MAGIC_LABELS = 0x00000801, MAGIC_IMAGES = 0x00000803 };
/* The real files hold 60000 and 10000 examples; a header that claims far
 * more is damaged, and is refused before a huge allocation. */
enum { MAX_COUNT = 1000000 };

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void say(char *err, size_t err_size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, err_size, fmt, ap);
  va_end(ap);
}

/* Read exactly n bytes; 0 on success, else -1 with the reason in err. A
 * gzip stream cut short shows up either as an early end or as zlib's
 * "unexpected end of file": both are reported as a truncated file. */
static int read_exact(gzFile f, const char *path, void *dst, size_t n,
                      const char *what, char *err, size_t err_size) {
  unsigned char *p = dst;
  while (n > 0) {
    unsigned chunk = n > (1u << 30) ? (1u << 30) : (unsigned)n;
    int got = gzread(f, p, chunk);
    if (got <= 0) {
      int zerr = Z_OK;
      const char *msg = gzerror(f, &zerr);
      if (got == 0 || zerr == Z_BUF_ERROR)
        say(err, err_size, "%s: truncated file: it ends inside the %s", path,
            what);
      else
        say(err, err_size, "%s: cannot decompress the %s: %s", path, what,
            zerr == Z_ERRNO ? strerror(errno) : msg);
      return -1;
    }
    p += got;
    n -= (size_t)got;
  }
  return 0;
}

static uint32_t be32(const unsigned char *b) {
  return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 |
         (uint32_t)b[3];
}

/* Open dir/name, read its header (magic, then ndims sizes), check the magic
 * and return the open file with the sizes in dims. */
static gzFile open_idx(const char *dir, const char *name, uint32_t magic,
                       uint32_t *dims, size_t ndims, char *path,
                       size_t path_size, char *err, size_t err_size) {
  snprintf(path, path_size, "%s/%s", dir, name);
  /* O_NONBLOCK: a FIFO at the path must not hang the program in open. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    say(err, err_size, "%s: not a regular file", path);
    close(fd);
    return NULL;
  }
  if (fd >= 0)
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT)
      say(err, err_size,
          "%s: no such file; Fashion-MNIST comes from the Debian package %s "
          "(apt-get install %s), or pass --data DIR",
          path, FMNIST_PACKAGE, FMNIST_PACKAGE);
    else
      say(err, err_size, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  gzFile f = gzdopen(fd, "rb");
  if (!f) {
    say(err, err_size, "%s: cannot open: %s", path, strerror(errno));
    close(fd);
    return NULL;
  }
  unsigned char head[16];
  if (read_exact(f, path, head, 4 * (1 + ndims), "header", err, err_size) != 0)
    goto fail;
  uint32_t got = be32(head);
  if (got != magic) {
    say(err, err_size,
        "%s: wrong magic number 0x%08x, expected 0x%08x (an IDX %s file)", path,
        got, magic, magic == MAGIC_IMAGES ? "image" : "label");
    goto fail;
  }
  for (size_t i = 0; i < ndims; i++)
    dims[i] = be32(head + 4 * (i + 1));
  return f;
fail:
  gzclose(f);
  return NULL;
}

int fmnist_load(const char *dir, const char *split, size_t limit,
                fmnist_set *out, char *err, size_t err_size) {
  char name[64], ipath[4096], lpath[4096];
  uint32_t idims[3] = {0}, ldims[1] = {0};
  gzFile fi = NULL, fl = NULL;
  memset(out, 0, sizeof *out);

  snprintf(name, sizeof name, "%s-images-idx3-ubyte.gz", split);
  fi = open_idx(dir, name, MAGIC_IMAGES, idims, 3, ipath, sizeof ipath, err,
                err_size);
  if (!fi)
    goto fail;
  snprintf(name, sizeof name, "%s-labels-idx1-ubyte.gz", split);
  fl = open_idx(dir, name, MAGIC_LABELS, ldims, 1, lpath, sizeof lpath, err,
                err_size);
  if (!fl)
    goto fail;
  if (idims[1] != FMNIST_ROWS || idims[2] != FMNIST_COLS) {
    say(err, err_size, "%s: images are %ux%u, expected %dx%d", ipath, idims[1],
        idims[2], FMNIST_ROWS, FMNIST_COLS);
    goto fail;
  }
  /* Each check its own message: a header that claims 2^31 - 1 images is
   * damaged, not a count mismatch. */
  if (idims[0] == 0 || idims[0] > MAX_COUNT || ldims[0] > MAX_COUNT) {
    const bool images = idims[0] == 0 || idims[0] > MAX_COUNT;
    say(err, err_size,
        "%s: its header says %u %s; a Fashion-MNIST file holds 1 to %d "
        "(a damaged or foreign file?)",
        images ? ipath : lpath, images ? idims[0] : ldims[0],
        images ? "images" : "labels", MAX_COUNT);
    goto fail;
  }
  if (idims[0] != ldims[0]) {
    say(err, err_size, "%s holds %u images but %s holds %u labels", ipath,
        idims[0], lpath, ldims[0]);
    goto fail;
  }
  size_t count = idims[0];
  if (limit > 0 && limit < count)
    count = limit;
  out->images = malloc(count * FMNIST_PIXELS);
  out->labels = malloc(count);
  if (!out->images || !out->labels) {
    say(err, err_size, "out of host memory for %zu examples", count);
    goto fail;
  }
  if (read_exact(fi, ipath, out->images, count * FMNIST_PIXELS, "images", err,
                 err_size) != 0 ||
      read_exact(fl, lpath, out->labels, count, "labels", err, err_size) != 0)
    goto fail;
  for (size_t i = 0; i < count; i++)
    if (out->labels[i] >= FMNIST_CLASSES) {
      say(err, err_size, "%s: label %zu is %u, outside 0..%d", lpath, i,
          out->labels[i], FMNIST_CLASSES - 1);
      goto fail;
    }
  out->count = count;
  gzclose(fi);
  gzclose(fl);
  return 0;
fail:
  if (fi)
    gzclose(fi);
  if (fl)
    gzclose(fl);
  fmnist_free(out);
  return -1;
}

void fmnist_free(fmnist_set *set) {
  free(set->images);
  free(set->labels);
  set->images = NULL;
  set->labels = NULL;
  set->count = 0;
}

/* splitmix64: the host's generator for the batch order (the weights come
 * from kiln's Philox op). */
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Fisher-Yates shuffle of 0..n-1 for one epoch, from the seed and the
 * epoch's number alone. */
void fmnist_shuffle(uint32_t *order, size_t n, uint64_t seed, int epoch) {
  uint64_t state = seed * 0x100000001b3ull + (uint64_t)epoch;
  for (size_t i = 0; i < n; i++)
    order[i] = (uint32_t)i;
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)(next_random(&state) % i);
    uint32_t t = order[i - 1];
    order[i - 1] = order[j];
    order[j] = t;
  }
}

/* Pixels as f32 in [0, 1] and labels as u32, for examples idx[0..rows). */
void fmnist_stage(const fmnist_set *set, const uint32_t *idx, size_t rows,
                  float *x, uint32_t *labels) {
  for (size_t r = 0; r < rows; r++) {
    const uint8_t *img = set->images + (size_t)idx[r] * FMNIST_PIXELS;
    for (size_t p = 0; p < FMNIST_PIXELS; p++)
      x[r * FMNIST_PIXELS + p] = (float)img[p] * (1.0f / 255.0f);
    labels[r] = set->labels[idx[r]];
  }
}
