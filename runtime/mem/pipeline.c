/* The double-buffered pipeline (kiln_pipeline.h).
 *
 * Slots 0 and 1 each hold an input and an output buffer; batch i uses slot
 * i % 2. The transfer queue is in order, so what is enqueued on it is
 * chosen with care: the upload of batch i+1 goes before the download of
 * batch i, otherwise it would wait for batch i's kernels. Its waits:
 *   upload i     after the compute of i-2 (the last reader of its input)
 *   compute i    after upload i and the download of i-2 (its output's
 *                last reader)
 *   download i   after compute i */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mem.h"

struct slot {
  kiln_buffer *in, *out;
  kiln_event *up, *comp, *down; /* the slot's latest of each, or NULL */
};

static void forget(kiln_event **ev) {
  kiln_event_release(*ev);
  *ev = NULL;
}

/* Upload src to the slot's input after the slot's last compute, or, for
 * the first batch, after the caller's wait list. The batches are bytes: the
 * untyped transfer path. */
static kiln_status upload(kiln_queue *transfer, struct slot *s,
                          const unsigned char *src, size_t bytes,
                          size_t num_wait, kiln_event *const *wait_list) {
  kiln_event *after = s->comp;
  kiln_event *ev = NULL;
  if (after != NULL) {
    num_wait = 1;
    wait_list = &after;
  }
  kiln_status st =
      kiln__buffer_transfer(transfer, s->in, 0, bytes, (void *)(uintptr_t)src,
                            true, num_wait, wait_list, &ev);
  if (st == KILN_OK) {
    kiln_event_release(s->up);
    s->up = ev;
  }
  return st;
}

kiln_status kiln_pipeline_run(kiln_queue *compute, kiln_queue *transfer,
                              size_t num_batches, size_t in_bytes,
                              size_t out_bytes, const void *host_in,
                              void *host_out, kiln_pipeline_fn fn, void *user,
                              size_t num_wait, kiln_event *const *wait_list,
                              kiln_event **out_event) {
  static const char fn_name[] = "kiln_pipeline_run";
  if (out_event != NULL)
    *out_event = NULL;
  if (compute == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: compute is NULL", fn_name);
  if (fn == NULL)
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: fn is NULL", fn_name);
  if (transfer != NULL && transfer->ctx != compute->ctx)
    return kiln__fail(KILN_ERR_WRONG_CONTEXT,
                      "%s: transfer belongs to another context than compute",
                      fn_name);
  if (transfer == compute)
    return kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: transfer is the compute queue; pass another queue "
                      "or NULL",
                      fn_name);
  if (in_bytes == 0 || out_bytes == 0)
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: in_bytes %zu and out_bytes %zu must both be > 0",
                      fn_name, in_bytes, out_bytes);
  size_t total_in, total_out;
  if (kiln__mul_overflows(num_batches, in_bytes, &total_in) ||
      kiln__mul_overflows(num_batches, out_bytes, &total_out))
    return kiln__fail(KILN_ERR_INVALID_SIZE,
                      "%s: num_batches %zu times the batch sizes overflows "
                      "size_t",
                      fn_name, num_batches);
  /* The wait list is checked here, so that a bad one fails before any
   * work (the first upload is the command that waits for it). */
  cl_event inline_buf[KILN__WAIT_INLINE], *checked = NULL;
  kiln_status st =
      kiln__wait_list(compute, num_wait, wait_list, inline_buf, &checked);
  kiln__wait_list_free(checked, inline_buf);
  if (st != KILN_OK) {
    char message[1024];
    snprintf(message, sizeof message, "%s", kiln_last_error());
    return kiln__fail(st, "%s: %s", fn_name, message);
  }
  if (num_batches > 0 && (host_in == NULL || host_out == NULL))
    return kiln__fail(KILN_ERR_NULL_POINTER, "%s: %s is NULL", fn_name,
                      host_in == NULL ? "host_in" : "host_out");
  if (num_batches == 0) {
    st = kiln_event_wait_all(num_wait, wait_list);
    return st == KILN_OK ? kiln__done_event(compute, out_event) : st;
  }

  kiln_queue *own = NULL;
  struct slot slots[2] = {{0}};
  if (transfer == NULL) {
    st = kiln_queue_create(compute->ctx, 0, &own);
    transfer = own;
  }
  for (int k = 0; k < 2 && st == KILN_OK; k++) {
    st = kiln_buffer_create(compute->ctx, in_bytes, 0, &slots[k].in);
    if (st == KILN_OK)
      st = kiln_buffer_create(compute->ctx, out_bytes, 0, &slots[k].out);
  }
  const unsigned char *in = host_in;
  unsigned char *out = host_out;
  if (st == KILN_OK)
    st = upload(transfer, &slots[0], in, in_bytes, num_wait, wait_list);
  for (size_t i = 0; i < num_batches && st == KILN_OK; i++) {
    struct slot *s = &slots[i % 2];
    if (i + 1 < num_batches) {
      st = upload(transfer, &slots[(i + 1) % 2], in + (i + 1) * in_bytes,
                  in_bytes, 0, NULL);
      if (st != KILN_OK)
        break;
    }
    kiln_event *waits[2] = {s->up, s->down};
    kiln_event *comp = NULL;
    st = fn(user, compute, i, s->in, s->out, s->down != NULL ? 2 : 1, waits,
            &comp);
    if (st == KILN_OK && comp == NULL)
      st = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                      "%s: fn returned KILN_OK for batch %zu without an "
                      "out_event",
                      fn_name, i);
    if (st != KILN_OK) {
      kiln_event_release(comp);
      break;
    }
    kiln_event_release(s->comp);
    s->comp = comp;
    /* A queue waiting on another queue's event needs that queue flushed
     * (rusticl deadlocks otherwise): both are, every batch. */
    st = kiln_queue_flush(transfer);
    if (st == KILN_OK)
      st = kiln_queue_flush(compute);
    if (st != KILN_OK)
      break;
    kiln_event *ev = NULL;
    st = kiln__buffer_transfer(transfer, s->out, 0, out_bytes,
                               out + i * out_bytes, false, 1, &s->comp, &ev);
    if (st == KILN_OK) {
      kiln_event_release(s->down);
      s->down = ev;
    }
  }
  kiln_queue_flush(compute);
  /* Everything enqueued ends before the buffers and host memory go, also
   * on failure (keeping the first error's message). */
  kiln_status fin = kiln_queue_finish(transfer);
  kiln_status fin2 = kiln_queue_finish(compute);
  if (st == KILN_OK)
    st = fin != KILN_OK ? fin : fin2;
  for (int k = 0; k < 2; k++) {
    forget(&slots[k].up);
    forget(&slots[k].comp);
    forget(&slots[k].down);
    kiln_buffer_destroy(slots[k].in);
    kiln_buffer_destroy(slots[k].out);
  }
  kiln_queue_destroy(own);
  return st == KILN_OK ? kiln__done_event(compute, out_event) : st;
}
