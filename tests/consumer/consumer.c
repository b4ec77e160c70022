/* A tiny program that uses kiln the way a consumer does, built by
 * tests/package_consumer.sh against an installed kiln through pkg-config and
 * through CMake. It needs no device: it checks that the headers and the
 * library it links agree on the version and that a status has a name. */
#include <stdio.h>
#include <string.h>

#include <kiln/kiln.h>

int main(void) {
  if (strcmp(kiln_version(), KILN_VERSION_STRING) != 0) {
    fprintf(stderr, "headers say %s, library says %s\n", KILN_VERSION_STRING,
            kiln_version());
    return 1;
  }
  if (strcmp(kiln_status_name(KILN_ERR_BUSY), "KILN_ERR_BUSY") != 0) {
    fprintf(stderr, "kiln_status_name(KILN_ERR_BUSY) is wrong\n");
    return 1;
  }
  printf("consumer: kiln %s\n", kiln_version());
  return 0;
}
