/* libFuzzer target: the program cache's entry reader
 * (kiln__cache_entry_read, kiln__cache_entry_peek in runtime/cache_entry.c).
 * The input becomes an entry file. It must never crash the reader, and an
 * entry the reader accepts must be exactly right: checked here again,
 * independently, field by field (magic, format, header size, header
 * checksum, full key, payload length against the file size, payload
 * checksum). A driver is never handed a bad entry.
 *
 * Checksums would stop a fuzzer at the header, so the first input byte is a
 * mode: bit 0 set means "repair" the rest before writing it (fill in this
 * run's key and recompute both checksums, bit 1 also setting the payload
 * length to the real one), so that mutations of the other fields, and of
 * lengths, reach the code after the checksum tests. */
#include <xxhash.h>

#include "fuzz_common.h"
#include "program/cache_internal.h"

enum { HEADER = KILN__CACHE_HEADER_SIZE };

static struct kiln__cache_key key;
static char path[512];

static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}
static uint32_t get_u32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}
static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  /* A fixed key: the entry a lookup of this source would want. */
  struct kiln_device dev;
  memset(&dev, 0, sizeof dev);
  dev.info.stable_id = "hash-0123456789abcdef";
  dev.info.name = "fuzz device";
  dev.info.vendor = dev.info.driver_version = dev.info.device_version = "";
  dev.info.platform_name = dev.info.platform_version = "";
  static const char source[] = "__kernel void k(void) {}";
  if (!kiln__cache_key(&dev, source, sizeof source - 1, "-DX", &key))
    abort();
  snprintf(path, sizeof path, "%s/%s%s", fuzz_dir(), key.hex,
           KILN__CACHE_SUFFIX);
  return 0;
}

/* Whether the file bytes form a valid entry for key, checked from scratch. */
static bool entry_valid(const uint8_t *f, size_t size) {
  static const uint8_t magic[8] = {'K', 'I', 'L', 'N', 'B', 'I', 'N', 0};
  if (size < HEADER || memcmp(f, magic, 8) != 0)
    return false;
  if (get_u32(f + 8) != KILN__CACHE_FORMAT || get_u32(f + 12) != HEADER)
    return false;
  if (get_u64(f + 248) != XXH3_64bits(f, 248))
    return false;
  if (memcmp(f + 16, key.bytes, 16) != 0)
    return false;
  uint64_t length = get_u64(f + 32);
  if (length == 0 || length != size - HEADER)
    return false;
  return get_u64(f + 40) == XXH3_64bits(f + HEADER, (size_t)length);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > (1u << 20))
    return 0;
  uint8_t mode = data[0];
  size_t n = size - 1;
  uint8_t *file = malloc(n ? n : 1);
  FUZZ_ASSERT(file != NULL);
  memcpy(file, data + 1, n);
  if ((mode & 1) && n >= HEADER) {
    memcpy(file + 16, key.bytes, 16);
    if (mode & 2)
      put_u64(file + 32, (uint64_t)(n - HEADER));
    size_t claimed = (size_t)get_u64(file + 32);
    if (claimed <= n - HEADER)
      put_u64(file + 40, XXH3_64bits(file + HEADER, claimed));
    put_u64(file + 248, XXH3_64bits(file, 248));
  }
  fuzz_write_file(path, file, n);

  unsigned char *payload = (unsigned char *)&payload;
  size_t length = 12345;
  char why[256] = "";
  enum kiln__entry_result r =
      kiln__cache_entry_read(path, &key, &payload, &length, why, sizeof why);
  bool valid = entry_valid(file, n);
  if (r == KILN__ENTRY_OK) {
    FUZZ_ASSERT(valid);
    FUZZ_ASSERT(payload != NULL && length == n - HEADER);
    FUZZ_ASSERT(memcmp(payload, file + HEADER, length) == 0);
    free(payload);
  } else {
    /* A valid file may only be refused for a host reason, never called
     * corrupt; a refusal says why and hands out nothing. */
    FUZZ_ASSERT(r == KILN__ENTRY_CORRUPT || r == KILN__ENTRY_UNREADABLE);
    FUZZ_ASSERT(!valid || r == KILN__ENTRY_UNREADABLE);
    FUZZ_ASSERT(payload == NULL && length == 0);
    FUZZ_ASSERT(why[0] != '\0');
  }

  struct kiln__cache_meta meta;
  if (kiln__cache_entry_peek(path, &meta)) {
    FUZZ_ASSERT(n >= HEADER);
    FUZZ_ASSERT(memchr(meta.label, '\0', sizeof meta.label) != NULL);
    FUZZ_ASSERT(memchr(meta.device, '\0', sizeof meta.device) != NULL);
    FUZZ_ASSERT(meta.complete == (meta.payload_length == n - HEADER));
  }
  free(file);
  return 0;
}
