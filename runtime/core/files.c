/* Files kiln opens by a path a user gave (tuning files, cache entries, the
 * trace file): opened without blocking, so that a FIFO or a device at the
 * path can never hang the process in open(2), and refused unless they are
 * what kiln expects. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

const char *kiln__file_kind(unsigned mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

/* Back to blocking I/O on fd, which O_NONBLOCK opened. */
static bool make_blocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0;
}

int kiln__open_regular(const char *path, char *why, size_t cap) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    snprintf(why, cap, "%s", strerror(err));
    errno = err;
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !make_blocking(fd)) {
    int err = errno;
    snprintf(why, cap, "%s", strerror(err));
    close(fd);
    errno = err;
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(why, cap, "%s, not a regular file", kiln__file_kind(st.st_mode));
    close(fd);
    errno = EINVAL;
    return -1;
  }
  return fd;
}

int kiln__open_output(const char *path, int flags, char *why, size_t cap) {
  int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | flags, 0644);
  if (fd < 0) {
    int err = errno;
    /* What O_NONBLOCK says of a FIFO that no process reads. */
    snprintf(why, cap, "%s",
             err == ENXIO ? "a FIFO that no process reads" : strerror(err));
    errno = err;
    return -1;
  }
  if (!make_blocking(fd)) {
    int err = errno;
    snprintf(why, cap, "%s", strerror(err));
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

FILE *kiln__fopen_regular(const char *path, char *why, size_t cap) {
  int fd = kiln__open_regular(path, why, cap);
  if (fd < 0)
    return NULL;
  FILE *f = fdopen(fd, "rb");
  if (f == NULL) {
    int err = errno;
    snprintf(why, cap, "%s", strerror(err));
    close(fd);
    errno = err;
  }
  return f;
}
