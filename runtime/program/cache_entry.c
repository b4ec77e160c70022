/* The on-disk format of one program cache entry, and its key.
 *
 * An entry is one file named by the hex key, holding a fixed 256-byte header
 * and the payload (the driver's CL_PROGRAM_BINARIES blob):
 *
 *   offset size
 *        0    8  magic "KILNBIN\0"
 *        8    4  format version (KILN__CACHE_FORMAT), little-endian
 *       12    4  header size (256)
 *       16   16  full key (XXH3-128, canonical big-endian bytes)
 *       32    8  payload length
 *       40    8  payload checksum (XXH3-64)
 *       48    8  creation time, Unix seconds
 *       56   64  label, NUL-padded ("elementwise", "user")
 *      120  128  device name, NUL-padded
 *      248    8  header checksum (XXH3-64 of bytes 0..247)
 *
 * Every field is checked before a payload is handed to the driver: a file
 * that is truncated, has a flipped byte anywhere, comes from another format
 * or holds another key's program (copied or renamed over) is refused. The
 * key is stored in full so that a file under the wrong name is caught even
 * though its checksums are intact. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "cache_internal.h"

static const unsigned char magic[8] = {'K', 'I', 'L', 'N', 'B', 'I', 'N', 0};

enum {
  OFF_MAGIC = 0,
  OFF_FORMAT = 8,
  OFF_HEADER_SIZE = 12,
  OFF_KEY = 16,
  OFF_PAYLOAD_LENGTH = 32,
  OFF_PAYLOAD_SUM = 40,
  OFF_CREATED = 48,
  OFF_LABEL = 56,
  OFF_DEVICE = 120,
  OFF_HEADER_SUM = 248,
};

static void put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}
static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

/* ---- the key ---------------------------------------------------------- */

/* Each field is length-prefixed so that ("ab", "c") and ("a", "bc") differ. */
static void hash_field(XXH3_state_t *state, const void *data, size_t length) {
  unsigned char prefix[8];
  put_u64(prefix, (uint64_t)length);
  XXH3_128bits_update(state, prefix, sizeof prefix);
  if (length > 0)
    XXH3_128bits_update(state, data, length);
}

static void hash_string(XXH3_state_t *state, const char *text) {
  hash_field(state, text, text != NULL ? strlen(text) : 0);
}

bool kiln__cache_key(const struct kiln_device *device, const char *source,
                     size_t source_length, const char *options,
                     struct kiln__cache_key *out) {
  XXH3_state_t *state = XXH3_createState();
  if (state == NULL || XXH3_128bits_reset(state) == XXH_ERROR) {
    XXH3_freeState(state);
    return false;
  }
  static const char domain[] = "kiln program cache key";
  unsigned char format[4];
  put_u32(format, KILN__CACHE_FORMAT);
  hash_field(state, domain, sizeof domain - 1);
  hash_field(state, format, sizeof format);
  hash_string(state, kiln_version());
  hash_field(state, source, source_length);
  hash_string(state, options);
  hash_string(state, device->info.stable_id);
  hash_string(state, device->info.name);
  hash_string(state, device->info.vendor);
  hash_string(state, device->info.driver_version);
  hash_string(state, device->info.device_version);
  hash_string(state, device->info.platform_name);
  hash_string(state, device->info.platform_version);
  XXH128_hash_t hash = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, hash);
  memcpy(out->bytes, canonical.digest, sizeof out->bytes);
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < sizeof out->bytes; i++) {
    out->hex[2 * i] = hex[out->bytes[i] >> 4];
    out->hex[2 * i + 1] = hex[out->bytes[i] & 15];
  }
  out->hex[32] = '\0';
  return true;
}

/* ---- header ------------------------------------------------------------- */

static void put_text(unsigned char *field, size_t size, const char *text) {
  memset(field, 0, size);
  size_t n = text != NULL ? strlen(text) : 0;
  if (n > size - 1)
    n = size - 1;
  if (n > 0)
    memcpy(field, text, n);
}

static void get_text(const unsigned char *field, size_t size, char *out) {
  memcpy(out, field, size);
  out[size - 1] = '\0';
}

/* Check a header's own fields (not the key, not the payload). */
static bool header_valid(const unsigned char *h, char *why, size_t cap) {
  if (memcmp(h + OFF_MAGIC, magic, sizeof magic) != 0) {
    snprintf(why, cap, "not a kiln cache entry (wrong magic)");
    return false;
  }
  if (get_u64(h + OFF_HEADER_SUM) != XXH3_64bits(h, OFF_HEADER_SUM)) {
    snprintf(why, cap, "header checksum mismatch");
    return false;
  }
  if (get_u32(h + OFF_FORMAT) != KILN__CACHE_FORMAT ||
      get_u32(h + OFF_HEADER_SIZE) != KILN__CACHE_HEADER_SIZE) {
    snprintf(why, cap, "format version %u, this kiln reads %u",
             (unsigned)get_u32(h + OFF_FORMAT), (unsigned)KILN__CACHE_FORMAT);
    return false;
  }
  return true;
}

bool kiln__cache_entry_peek(const char *path, struct kiln__cache_meta *meta) {
  memset(meta, 0, sizeof *meta);
  char why[128];
  int fd = kiln__open_regular(path, why, sizeof why);
  if (fd < 0)
    return false;
  unsigned char h[KILN__CACHE_HEADER_SIZE];
  ssize_t n = read(fd, h, sizeof h);
  struct stat st;
  bool ok = n == (ssize_t)sizeof h && fstat(fd, &st) == 0;
  close(fd);
  if (!ok || !header_valid(h, why, sizeof why))
    return false;
  get_text(h + OFF_LABEL, 64, meta->label);
  get_text(h + OFF_DEVICE, 128, meta->device);
  meta->created = (int64_t)get_u64(h + OFF_CREATED);
  meta->payload_length = get_u64(h + OFF_PAYLOAD_LENGTH);
  meta->complete = (uint64_t)st.st_size ==
                   meta->payload_length + KILN__CACHE_HEADER_SIZE;
  return true;
}

/* Read all of fd into a new buffer of exactly size bytes. */
static bool read_all(int fd, unsigned char *buf, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = read(fd, buf + done, size - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += (size_t)n;
  }
  return true;
}

enum kiln__entry_result
kiln__cache_entry_read(const char *path, const struct kiln__cache_key *key,
                       unsigned char **payload, size_t *length, char *why,
                       size_t cap) {
  *payload = NULL;
  *length = 0;
  /* Never blocks: a FIFO planted in the cache is refused, not waited on. */
  char reason[128];
  int fd = kiln__open_regular(path, reason, sizeof reason);
  if (fd < 0) {
    if (errno == ENOENT)
      return KILN__ENTRY_ABSENT;
    snprintf(why, cap, "cannot open: %s", reason);
    return KILN__ENTRY_UNREADABLE;
  }
  enum kiln__entry_result result = KILN__ENTRY_CORRUPT;
  unsigned char *buf = NULL;
  unsigned char h[KILN__CACHE_HEADER_SIZE];
  struct stat st;
  if (fstat(fd, &st) != 0) {
    snprintf(why, cap, "cannot stat: %s", strerror(errno));
    result = KILN__ENTRY_UNREADABLE;
    goto done;
  }
  if ((uint64_t)st.st_size < KILN__CACHE_HEADER_SIZE ||
      !read_all(fd, h, sizeof h)) {
    snprintf(why, cap, "truncated header (%lld bytes)", (long long)st.st_size);
    goto done;
  }
  if (!header_valid(h, why, cap))
    goto done;
  if (memcmp(h + OFF_KEY, key->bytes, sizeof key->bytes) != 0) {
    snprintf(why, cap, "holds another key's program");
    goto done;
  }
  uint64_t want = get_u64(h + OFF_PAYLOAD_LENGTH);
  uint64_t have = (uint64_t)st.st_size - KILN__CACHE_HEADER_SIZE;
  if (want != have || want == 0 || want > SIZE_MAX) {
    snprintf(why, cap, "payload is %llu bytes, header says %llu",
             (unsigned long long)have, (unsigned long long)want);
    goto done;
  }
  buf = malloc((size_t)want);
  if (buf == NULL) {
    snprintf(why, cap, "cannot allocate %llu bytes", (unsigned long long)want);
    result = KILN__ENTRY_UNREADABLE;
    goto done;
  }
  if (!read_all(fd, buf, (size_t)want)) {
    snprintf(why, cap, "short read of the payload");
    goto done;
  }
  if (XXH3_64bits(buf, (size_t)want) != get_u64(h + OFF_PAYLOAD_SUM)) {
    snprintf(why, cap, "payload checksum mismatch");
    goto done;
  }
  *payload = buf;
  *length = (size_t)want;
  buf = NULL;
  result = KILN__ENTRY_OK;
done:
  free(buf);
  close(fd);
  return result;
}

static bool write_all(int fd, const unsigned char *data, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += (size_t)n;
  }
  return true;
}

bool kiln__cache_entry_write(const char *dir, const char *path,
                             const struct kiln__cache_key *key,
                             const char *label, const char *device,
                             const unsigned char *payload, size_t length,
                             char *why, size_t cap) {
  unsigned char h[KILN__CACHE_HEADER_SIZE];
  memset(h, 0, sizeof h);
  memcpy(h + OFF_MAGIC, magic, sizeof magic);
  put_u32(h + OFF_FORMAT, KILN__CACHE_FORMAT);
  put_u32(h + OFF_HEADER_SIZE, KILN__CACHE_HEADER_SIZE);
  memcpy(h + OFF_KEY, key->bytes, sizeof key->bytes);
  put_u64(h + OFF_PAYLOAD_LENGTH, (uint64_t)length);
  put_u64(h + OFF_PAYLOAD_SUM, XXH3_64bits(payload, length));
  put_u64(h + OFF_CREATED, (uint64_t)time(NULL));
  put_text(h + OFF_LABEL, 64, label);
  put_text(h + OFF_DEVICE, 128, device);
  put_u64(h + OFF_HEADER_SUM, XXH3_64bits(h, OFF_HEADER_SUM));

  /* A temporary file in the same directory, renamed into place: readers see
   * either no entry or a complete one, never a partial write, and rename is
   * atomic between processes sharing the directory. No fsync: a crash may
   * leave a torn file only after a power loss, and the checksums catch it. */
  char tmp[KILN__CACHE_PATH_MAX];
  int n = snprintf(tmp, sizeof tmp, "%s/%s%s.XXXXXX", dir, KILN__CACHE_TMP_PREFIX,
                   key->hex);
  if (n < 0 || (size_t)n >= sizeof tmp) {
    snprintf(why, cap, "path too long");
    return false;
  }
  int fd = mkstemp(tmp);
  if (fd < 0) {
    snprintf(why, cap, "cannot create a file in '%s': %s", dir,
             strerror(errno));
    return false;
  }
  bool ok = write_all(fd, h, sizeof h) && write_all(fd, payload, length);
  int saved = errno;
  if (close(fd) != 0 && ok) {
    ok = false;
    saved = errno;
  }
  if (!ok) {
    snprintf(why, cap, "cannot write '%s': %s", tmp, strerror(saved));
    unlink(tmp);
    return false;
  }
  /* mkstemp makes 0600 files; entries are readable like other caches. */
  chmod(tmp, 0644);
  if (rename(tmp, path) != 0) {
    snprintf(why, cap, "cannot rename into '%s': %s", path, strerror(errno));
    unlink(tmp);
    return false;
  }
  return true;
}
