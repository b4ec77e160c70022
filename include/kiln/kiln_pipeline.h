/* The double-buffered upload / compute / download pipeline.
 *
 * kiln_pipeline_run processes num_batches batches: batch i is uploaded
 * from host_in, computed by the caller's function on the compute queue,
 * and downloaded to host_out. Uploads and downloads run on a transfer
 * queue beside the compute queue, with two device buffers for inputs and
 * two for outputs, so the upload of batch i+1 and the download of batch
 * i-1 can overlap the kernels of batch i on devices that run two queues
 * at once. Events order everything: the result is the same on drivers with
 * in-order queues only (rusticl) or no concurrency at all (it is then just
 * no faster than one queue). */
#ifndef KILN_PIPELINE_H
#define KILN_PIPELINE_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"

KILN_BEGIN_DECLS

/* Enqueue the work of batch number batch on queue: read in (the batch's
 * in_bytes), write out (out_bytes), after the num_wait events, and return
 * the event of its last command in *out_event (required: the download
 * waits for it). Return KILN_OK or the failing status. */
typedef kiln_status (*kiln_pipeline_fn)(void *user, kiln_queue *queue,
                                        size_t batch, kiln_buffer *in,
                                        kiln_buffer *out, size_t num_wait,
                                        kiln_event *const *wait_list,
                                        kiln_event **out_event);

/* Run the pipeline and wait for it to finish. host_in holds num_batches *
 * in_bytes bytes (batch i at i * in_bytes), host_out receives num_batches *
 * out_bytes: batches are untyped memory, so they are sized in bytes.
 * transfer may be NULL (a transfer queue is made for the call) or a queue
 * of the same context other than compute. in_bytes and out_bytes must be
 * > 0; num_batches 0 does nothing but wait. The first upload waits for the
 * wait list (events of compute's context); *out_event (out_event may be
 * NULL) is an event of compute, complete on return like the whole blocking
 * call. On failure, the work already enqueued is finished before this
 * returns. Uses the queues from the calling thread only. */
KILN_API kiln_status kiln_pipeline_run(
    kiln_queue *compute, kiln_queue *transfer, size_t num_batches,
    size_t in_bytes, size_t out_bytes, const void *host_in, void *host_out,
    kiln_pipeline_fn fn, void *user, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event);

KILN_END_DECLS

#endif
