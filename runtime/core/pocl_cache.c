/* Why PoCL may list no device: it cannot create its kernel cache.
 *
 * PoCL (3.x, lib/CL/pocl_cache.c) keeps compiled kernels in POCL_CACHE_DIR,
 * else $XDG_CACHE_HOME/pocl/kcache (XDG_CACHE_HOME set and not empty), else
 * $HOME/.cache/pocl/kcache (HOME set), else /tmp/pocl/kcache, and creates
 * that directory when its platform is first used: when it cannot (HOME not
 * writable, as for service accounts, `docker --user` and many CI runners),
 * the platform reports no device at all. kiln reads the same variables and
 * tries the first missing component of the path the way PoCL would
 * (created, then removed again), so that root, whom permissions do not
 * stop, gets the same answer as PoCL. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

/* Why dir cannot be created (or written), in why; false when it can. */
static bool cannot_create(const char *dir, char *why, size_t cap) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
    snprintf(why, cap, "the path is too long");
    return true;
  }
  /* Each prefix in turn, as mkdir -p goes. */
  for (char *p = path + (path[0] == '/');; p++) {
    if (*p != '/' && *p != '\0')
      continue;
    const char saved = *p;
    *p = '\0';
    struct stat st;
    if (stat(path, &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        snprintf(why, cap, "'%.300s' is %s, not a directory", path,
                 S_ISREG(st.st_mode) ? "a file" : kiln__file_kind(st.st_mode));
        return true;
      }
    } else if (errno != ENOENT) {
      snprintf(why, cap, "'%.300s': %s", path, strerror(errno));
      return true;
    } else {
      /* The first missing component: what PoCL's mkdir would meet. */
      if (mkdir(path, 0700) != 0) {
        snprintf(why, cap, "cannot create '%.300s': %s", path,
                 strerror(errno));
        return true;
      }
      rmdir(path);
      return false;
    }
    if (saved == '\0')
      break;
    *p = saved;
  }
  if (access(path, W_OK | X_OK) != 0) {
    snprintf(why, cap, "'%.300s' is not writable: %s", path, strerror(errno));
    return true;
  }
  return false;
}

bool kiln__pocl_cache_problem(char *out, size_t cap) {
  const char *pocl = getenv("POCL_CACHE_DIR");
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  const char *other = ""; /* the other variable a user may set */
  char dir[4096], from[200];
  if (pocl != NULL) {
    snprintf(dir, sizeof dir, "%s", pocl);
    snprintf(from, sizeof from, "POCL_CACHE_DIR=%.180s", pocl);
  } else if (xdg != NULL && xdg[0] != '\0') {
    snprintf(dir, sizeof dir, "%.4000s/pocl/kcache", xdg);
    snprintf(from, sizeof from, "XDG_CACHE_HOME=%.180s", xdg);
    other = ", or XDG_CACHE_HOME to a writable one";
  } else if (home != NULL) {
    snprintf(dir, sizeof dir, "%.4000s/.cache/pocl/kcache", home);
    snprintf(from, sizeof from, "HOME=%.180s", home);
    other = ", or HOME to a writable one";
  } else {
    snprintf(dir, sizeof dir, "/tmp/pocl/kcache");
    snprintf(from, sizeof from, "HOME unset");
  }
  char why[400];
  if (!cannot_create(dir, why, sizeof why))
    return false;
  snprintf(out, cap,
           "PoCL cannot create its kernel cache %.300s (%s: %s) and so lists "
           "no device; set POCL_CACHE_DIR to a writable directory (e.g. "
           "POCL_CACHE_DIR=/tmp/pocl-cache-%ld)%s",
           dir, from, why, (long)getuid(), other);
  return true;
}
