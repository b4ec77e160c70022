/* The parent project's program: one kiln op on the default device, checked. */
#include <kiln/kiln.h>
#include <stdio.h>

int main(void) {
  kiln_context *ctx = NULL;
  kiln_queue *queue = NULL;
  kiln_buffer *x = NULL, *result = NULL;
  float sum = 0.0f, ones[100];
  for (int i = 0; i < 100; i++)
    ones[i] = 1.0f;
  kiln_status s = kiln_context_create_default(NULL, &ctx);
  if (s == KILN_OK)
    s = kiln_queue_create(ctx, 0, &queue);
  if (s == KILN_OK)
    s = kiln_buffer_create(ctx, sizeof ones, 0, &x);
  if (s == KILN_OK)
    s = kiln_buffer_write_sync(queue, ones, &(kiln_range){x, 0, 100, KILN_F32});
  if (s == KILN_OK)
    s = kiln_buffer_create(ctx, sizeof sum, 0, &result);
  if (s == KILN_OK)
    s = kiln_reduce(queue, KILN_REDUCE_SUM, &(kiln_range){x, 0, 100, KILN_F32},
                    &(kiln_range){result, 0, 1, KILN_F32}, 0, NULL, NULL);
  if (s == KILN_OK)
    s = kiln_buffer_read_sync(queue, &(kiln_range){result, 0, 1, KILN_F32},
                              &sum);
  if (s != KILN_OK)
    fprintf(stderr, "parent: %s\n", kiln_last_error());
  kiln_buffer_destroy(result);
  kiln_buffer_destroy(x);
  kiln_queue_destroy(queue);
  kiln_context_destroy(ctx);
  if (s != KILN_OK || sum != 100.0f) {
    fprintf(stderr, "parent: FAIL (sum %g)\n", (double)sum);
    return 1;
  }
  puts("parent: kiln as a subproject works (sum of 100 ones = 100)");
  return 0;
}
