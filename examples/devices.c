/* devices.c: find the OpenCL devices, choose one with a selector, and see
 * why each device was taken or refused.
 *
 *   ./devices               the default device (KILN_DEVICE, else a GPU,
 *                           else the CPU)
 *   ./devices 'gpu|cpu'     a selector of your own (see kiln(1))
 *
 * Build: cc devices.c $(pkg-config --cflags --libs kiln) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/kiln.h>

#include "log_stderr.h"

int main(int argc, char **argv) {
  log_to_stderr(); /* kiln never prints: its log on stderr */
  /* --help; any other option is a usage error (exit 2). An operand is the
   * selector. */
  if (argc > 1 && argv[1][0] == '-') {
    const int help = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h");
    if (!help)
      fprintf(stderr, "devices: unknown argument '%s'\n", argv[1]);
    fprintf(help ? stdout : stderr,
            "usage: devices [SELECTOR]\n"
            "List the devices and why the selector took or refused each.\n"
            "options:\n"
            "  SELECTOR     a device selector instead of KILN_DEVICE (kiln(1))\n"
            "  -h, --help   this help\n"
            "environment: KILN_DEVICE, the device selector (default: a GPU,\n"
            "else the CPU)\n");
    return help ? 0 : 2;
  }
  const char *selector = argc > 1 ? argv[1] : NULL; /* NULL: the default */
  kiln_device_list *list = NULL;
  kiln_selection *selection = NULL;
  kiln_context *ctx = NULL;
  int rc = EXIT_FAILURE;

  /* Every platform and device of the ICD loader. A platform that fails a
   * query does not stop enumeration: it is recorded as a problem. */
  if (kiln_device_list_create(&list) != KILN_OK)
    goto fail;
  size_t count = kiln_device_list_get_count(list);
  printf("%zu device%s:\n", count, count == 1 ? "" : "s");
  for (size_t i = 0; i < count; i++) {
    const kiln_device_info *info = kiln_device_get_info(kiln_device_list_get(list, i));
    printf("  %zu:%zu  %-4s %s (%s), %u compute units, %llu MiB, profile %s, id %s\n",
           info->platform_index, info->device_index,
           kiln_device_type_name(info->type), info->name, info->platform_name,
           info->compute_units,
           (unsigned long long)(info->global_mem_bytes >> 20), info->profile,
           info->stable_id);
  }
  for (size_t i = 0; i < kiln_device_list_get_problem_count(list); i++)
    printf("  skipped: %s\n", kiln_device_list_get_problem(list, i)->message);
  if (count == 0) {
    fprintf(stderr, "devices: no OpenCL device was found\n");
    goto done;
  }

  /* A selection keeps, for every device, whether the selector took it and
   * why: the same text as `kiln info --explain`. A syntax error is
   * KILN_ERR_SELECTOR_SYNTAX, with the column in the message. */
  if (kiln_selection_create(list, selector, &selection) != KILN_OK)
    goto fail;
  printf("selector %s:\n", kiln_selection_get_selector(selection));
  for (size_t i = 0; i < count; i++) {
    bool taken = false;
    const char *why = kiln_selection_get_explanation(selection, i, &taken);
    printf("  device %zu: %s\n", i, why);
  }
  if (kiln_selection_get_count(selection) == 0) {
    fprintf(stderr, "devices: no device matches %s\n",
            kiln_selection_get_selector(selection));
    goto done;
  }

  /* A context on the first device taken. Contexts copy what they need from
   * the device, so the list may go before the context does. */
  const kiln_device *device = kiln_selection_get(selection, 0);
  if (kiln_context_create(device, NULL, &ctx) != KILN_OK)
    goto fail;
  const kiln_device_info *info = kiln_context_get_device_info(ctx);
  printf("using %s, profile %s, OpenCL %u.%u, fp16 %s, fp64 %s\n", info->name,
         kiln_context_get_profile(ctx), info->cl_version / 100,
         info->cl_version / 10 % 10, info->fp16 ? "yes" : "no",
         info->fp64 ? "yes" : "no");

  /* Check what we printed: the selection's first device is the one
   * kiln_device_select() returns, and the context runs on it. */
  const kiln_device *first = NULL;
  if (kiln_device_select(list, selector, &first) != KILN_OK)
    goto fail;
  if (first != device || kiln_device_get_info(first)->stable_id == NULL ||
      info->max_work_group_size == 0) {
    fprintf(stderr, "devices: inconsistent device information\n");
    goto done;
  }
  rc = EXIT_SUCCESS;
  goto done;
fail:
  fprintf(stderr, "devices: %s\n", kiln_last_error());
done:
  if (kiln_context_destroy(ctx) != KILN_OK)
    rc = EXIT_FAILURE;
  kiln_selection_destroy(selection); /* before the list it borrows */
  kiln_device_list_destroy(list);
  return rc;
}
