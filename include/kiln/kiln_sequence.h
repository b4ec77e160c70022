/* Recorded command sequences: record kernel launches and ops once, replay
 * them with one call.
 *
 * Between kiln_sequence_begin and kiln_sequence_end, kiln_kernel_launch and
 * every op (kiln/kiln_ops.h) on the recording queue are captured, not run: each
 * launch with its arguments as they are at that moment (buffers, scalars,
 * sizes). kiln_sequence_replay then enqueues them all, in order, on that
 * queue, from a prepared list of kernels whose arguments are already set:
 * one kiln call instead of one per op, with no argument checks and no
 * kernel lookups. Where the device offers cl_khr_command_buffer with
 * simultaneous use, the launches go into one command buffer instead,
 * unless the device's profile has KILN_QUIRK_SLOW_COMMAND_BUFFER (PoCL 3.1,
 * whose command buffers replayed in 1.2-2x the time of the prepared list:
 * README, "Moving data"); the flags below override the profile.
 *
 * Arguments that change from one replay to the next: kiln_sequence_set_arg_*
 * replace an argument of one recorded kiln_kernel_launch (launch numbers
 * count launches in recording order; kiln_sequence_get_launch_count before a
 * launch gives its number). Op launches keep their recorded arguments.
 *
 * While recording, the queue refuses buffer transfers, and recorded launches
 * take no wait list and give no event (the replay takes and gives them).
 * Every buffer a recording uses stays alive: kiln_buffer_destroy returns
 * KILN_ERR_BUSY for it until the sequence is destroyed. A sequence counts
 * as a child of the context; its queue cannot be destroyed while it
 * records. One thread at a time may use a sequence (and its queue). */
#ifndef KILN_SEQUENCE_H
#define KILN_SEQUENCE_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"

KILN_BEGIN_DECLS

typedef struct kiln_sequence kiln_sequence;

enum {
  /* Replay through a cl_khr_command_buffer where the device offers one
   * that may be enqueued again while pending, whatever its profile says;
   * else the prepared list. */
  KILN_SEQUENCE_COMMAND_BUFFER = 1u << 0,
  /* Always replay the prepared list. */
  KILN_SEQUENCE_PREPARED_LIST = 1u << 1,
};

/* Start recording on queue. flags: 0 (the device's default, see above),
 * KILN_SEQUENCE_COMMAND_BUFFER or KILN_SEQUENCE_PREPARED_LIST;
 * KILN_ERR_INVALID_ARGUMENT for both or unknown bits.
 * KILN_ERR_INVALID_STATE when the queue already records. */
KILN_API kiln_status kiln_sequence_begin(kiln_queue *queue, unsigned flags,
                                         kiln_sequence **out);

/* Stop recording; the sequence can then be replayed. KILN_ERR_INVALID_STATE
 * when it is not recording. */
KILN_API kiln_status kiln_sequence_end(kiln_sequence *seq);

/* Destroy (ending the recording if it still runs). Replays already
 * enqueued complete normally. NULL is a no-op. */
KILN_API kiln_status kiln_sequence_destroy(kiln_sequence *seq);

/* Launches recorded so far (ops may record several each). 0 for NULL. */
KILN_API size_t kiln_sequence_get_launch_count(const kiln_sequence *seq);

/* Whether replays go through a cl_khr_command_buffer (known after
 * kiln_sequence_end; false for NULL). */
KILN_API bool kiln_sequence_uses_command_buffer(const kiln_sequence *seq);

/* Replace argument arg of recorded launch number launch, which must be a
 * kiln_kernel_launch, for every later replay; checked like the
 * kiln_kernel_set_arg_* functions (a buffer of the context for a pointer
 * argument, a value of the declared size for a by-value one). Only after
 * kiln_sequence_end. Replays already enqueued keep the old arguments. */
KILN_API kiln_status kiln_sequence_set_arg_buffer(kiln_sequence *seq,
                                                  size_t launch, uint32_t arg,
                                                  kiln_buffer *buffer);
KILN_API kiln_status kiln_sequence_set_arg_scalar(kiln_sequence *seq,
                                                  size_t launch, uint32_t arg,
                                                  const void *value,
                                                  size_t size_bytes);

/* Enqueue the recorded launches on the queue they were recorded on (the
 * sequence keeps it: the kiln_queue handle may be destroyed meanwhile),
 * after the wait list (events of the sequence's context); *out_event
 * completes when the last of them has. A sequence may be replayed any
 * number of times, also while earlier replays are still pending. Replays
 * and other work on that queue must come from one thread at a time. */
KILN_API kiln_status kiln_sequence_replay(kiln_sequence *seq, size_t num_wait,
                                          kiln_event *const *wait_list,
                                          kiln_event **out_event);

KILN_END_DECLS

#endif
