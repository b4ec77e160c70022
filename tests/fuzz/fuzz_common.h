/* Shared by the libFuzzer targets: a private scratch directory and a way to
 * put the input in a file there. */
#ifndef KILN_FUZZ_COMMON_H
#define KILN_FUZZ_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The entry points libFuzzer calls. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Invariant checks: a violated one is a bug the fuzzer must report, so it
 * crashes (libFuzzer saves the input). */
#define FUZZ_ASSERT(cond)                                                     \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "invariant failed at %s:%d: %s\n", __FILE__, __LINE__,  \
              #cond);                                                         \
      abort();                                                                \
    }                                                                         \
  } while (0)

/* A directory under TMPDIR made once per process and kept for its life;
 * libFuzzer's forked workers each get their own. */
static inline const char *fuzz_dir(void) {
  static char dir[256];
  if (dir[0] == '\0') {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/kiln-fuzz-XXXXXX",
             tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
      perror("mkdtemp");
      abort();
    }
  }
  return dir;
}

/* Whether data holds needle (memmem is a GNU extension). */
static inline bool fuzz_contains(const uint8_t *data, size_t size,
                                 const char *needle) {
  size_t n = strlen(needle);
  for (size_t i = 0; n <= size && i <= size - n; i++)
    if (memcmp(data + i, needle, n) == 0)
      return true;
  return false;
}

/* Write size bytes to path, replacing it. */
static inline void fuzz_write_file(const char *path, const uint8_t *data,
                            size_t size) {
  FILE *f = fopen(path, "wb");
  FUZZ_ASSERT(f != NULL);
  FUZZ_ASSERT(size == 0 || fwrite(data, 1, size, f) == size);
  FUZZ_ASSERT(fclose(f) == 0);
}

#endif
