/* kiln_mpi: collectives on kiln buffers across MPI processes (ranks).
 *
 * A separate library, libkiln_mpi (pkg-config: kiln-mpi), built only where
 * MPI is found; libkiln itself never depends on MPI, and <kiln/kiln.h> does
 * not include this header. Include it on its own:
 *
 *   #include <kiln/kiln_mpi.h>   (includes <mpi.h> and <kiln/kiln.h>)
 *
 * The caller initialises MPI (MPI_Init or MPI_Init_thread) and finalises it
 * after kiln_mpi_destroy. kiln_mpi works on a duplicate of the caller's
 * communicator whose error handler is MPI_ERRORS_RETURN, so an MPI failure
 * comes back as KILN_ERR_COMM with kiln_last_error() naming the MPI call,
 * the MPI error string and this rank, never as an abort of the job.
 *
 * Data moves device -> host -> MPI -> host -> device in chunks
 * (kiln_mpi_options.chunk_bytes) through a ring of host slots, so that the
 * device read of one chunk, the MPI exchange of another and the device
 * write of a third overlap.
 *
 * Every collective first agrees, in one small MPI exchange, on which
 * collective, element count, dtype, op and root every rank passed: a rank
 * that passed something else makes every rank fail with
 * KILN_ERR_SHAPE_MISMATCH and a message giving both values, instead of a
 * hang or a wrong result.
 *
 * Dead ranks: Open MPI 4.1 (Debian 12) has no fault tolerance in its default
 * build; when a rank dies, mpirun (its runtime) notices and terminates every
 * other rank of the job. A rank that is alive but never joins a collective
 * is caught by kiln_mpi_options.timeout_s: the waiting ranks fail with
 * KILN_ERR_COMM after that many seconds. After such a timeout the MPI
 * operations still pending cannot be cancelled (MPI has no way to cancel a
 * collective), so the kiln_mpi object is broken: its staging memory is left
 * allocated on purpose (MPI may still write to it), every further
 * collective returns KILN_ERR_COMM, and only kiln_mpi_destroy is useful.
 *
 * Thread-safety: one kiln_mpi object and its requests are used by one thread
 * at a time (collectives on a communicator must be started in the same
 * order on every rank anyway). */
#ifndef KILN_MPI_H
#define KILN_MPI_H

#include <mpi.h>

#include <kiln/kiln.h>

KILN_BEGIN_DECLS

typedef struct kiln_mpi kiln_mpi;
typedef struct kiln_mpi_request kiln_mpi_request;

typedef struct kiln_mpi_options {
  /* Bytes of device data per pipeline chunk. 0: 4 MiB. Rounded down to
   * whole elements. */
  size_t chunk_bytes;
  /* Host staging slots (chunks in flight at once), 2 to 64. 0: 4. */
  size_t slots;
  /* Seconds a collective may wait for the other ranks before failing with
   * KILN_ERR_COMM (and breaking the object, see above). 0: wait forever. */
  double timeout_s;
} kiln_mpi_options;

/* Duplicate comm (collective over comm: every rank must call it), set
 * MPI_ERRORS_RETURN on the duplicate and find this rank's node-local rank
 * (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED). options may be NULL
 * (defaults). KILN_ERR_NULL_POINTER for a NULL out, KILN_ERR_INVALID_STATE
 * when MPI is not initialised, KILN_ERR_INVALID_ARGUMENT for comm
 * MPI_COMM_NULL or options out of range, KILN_ERR_COMM when MPI fails. */
KILN_API kiln_status kiln_mpi_create(MPI_Comm comm,
                                     const kiln_mpi_options *options,
                                     kiln_mpi **out);

/* Free the duplicated communicators and the staging memory (the latter not
 * after a timeout, see above). KILN_ERR_BUSY, freeing nothing, while a
 * request started on it has not been waited for. Not collective. NULL is a
 * no-op returning KILN_OK. */
KILN_API kiln_status kiln_mpi_destroy(kiln_mpi *mpi);

/* Rank and size in the communicator, and on this node (the ranks sharing
 * memory with this one). -1 for a NULL mpi. */
KILN_API int kiln_mpi_get_rank(const kiln_mpi *mpi);
KILN_API int kiln_mpi_get_size(const kiln_mpi *mpi);
KILN_API int kiln_mpi_get_local_rank(const kiln_mpi *mpi);
KILN_API int kiln_mpi_get_local_size(const kiln_mpi *mpi);

/* The device for this rank: evaluate selector on list (NULL: KILN_DEVICE,
 * else the default rule) and take device local_rank modulo the number
 * taken, so that the ranks of one node spread over its devices (one rank
 * per GPU when there are as many ranks as GPUs). KILN_ERR_NO_DEVICE when
 * the selector takes none. Not collective. */
KILN_API kiln_status kiln_mpi_select_device(const kiln_mpi *mpi,
                                            const kiln_device_list *list,
                                            const char *selector,
                                            const kiln_device **out);

/* Every collective names its data with kiln_range descriptors (offsets and
 * counts in elements of the range's dtype, as every kiln call), so the
 * ranges an op wrote go here unchanged. Reductions take a kiln_reduce_op:
 * KILN_REDUCE_SUM, MIN, MAX or MEAN (others are KILN_ERR_INVALID_ARGUMENT);
 * f16 and bf16 data are widened to f32 on the host, reduced in f32 and
 * rounded back (to nearest even) once, at the end; MEAN is the f32 sum
 * divided by size.
 *
 * Arguments come as in every kiln call that enqueues work: mpi, queue, the
 * ranges (inputs, then outputs), the op or root, then the events. The
 * blocking collectives end with num_wait, wait_list, out_event: they
 * enqueue on queue after its earlier commands and wait_list, return once
 * the result is in the buffer, and *out_event (out_event may be NULL) is an
 * event of queue that completes with the last command they enqueued, so it
 * is complete by then. The non-blocking ones (kiln_mpi_i*) end with
 * num_wait, wait_list and `kiln_mpi_request **out` in the out_event slot:
 * their completion is a request, not an event, because it advances only
 * inside kiln_mpi_test and kiln_mpi_wait (MPI makes progress only inside
 * MPI calls), which no OpenCL event could wait for.
 *
 * Errors: KILN_ERR_NULL_POINTER, KILN_ERR_INVALID_ARGUMENT (dtype, op or
 * root), KILN_ERR_OUT_OF_RANGE (a range outside its buffer),
 * KILN_ERR_WRONG_CONTEXT (a buffer or event of another context than
 * queue), KILN_ERR_SHAPE_MISMATCH (ranges of one call that disagree, or
 * ranks that passed different counts, dtypes or ops), KILN_ERR_COMM. */

/* In place: the elements of data (f32, f16 or bf16) become op over every
 * rank's elements, the same bytes on every rank. A count of 0 is valid
 * (still collective). */
KILN_API kiln_status kiln_mpi_allreduce(kiln_mpi *mpi, kiln_queue *queue,
                                        const kiln_range *data,
                                        kiln_reduce_op op, size_t num_wait,
                                        kiln_event *const *wait_list,
                                        kiln_event **out_event);

/* Non-blocking kiln_mpi_allreduce: checks arguments, agrees with the other
 * ranks (one small blocking exchange), starts the pipeline and returns a
 * request to complete with kiln_mpi_test or kiln_mpi_wait. The pipeline
 * advances inside kiln_mpi_test and kiln_mpi_wait only, so call
 * kiln_mpi_test now and then while doing other work. The range must not be
 * used until then. */
KILN_API kiln_status kiln_mpi_iallreduce(kiln_mpi *mpi, kiln_queue *queue,
                                         const kiln_range *data,
                                         kiln_reduce_op op, size_t num_wait,
                                         kiln_event *const *wait_list,
                                         kiln_mpi_request **out);

/* Copy root's data into every other rank's data (the same count and dtype
 * on every rank). Any dtype. KILN_ERR_INVALID_ARGUMENT for a root outside
 * [0, size). */
KILN_API kiln_status kiln_mpi_broadcast(kiln_mpi *mpi, kiln_queue *queue,
                                        const kiln_range *data, int root,
                                        size_t num_wait,
                                        kiln_event *const *wait_list,
                                        kiln_event **out_event);
KILN_API kiln_status kiln_mpi_ibroadcast(kiln_mpi *mpi, kiln_queue *queue,
                                         const kiln_range *data, int root,
                                         size_t num_wait,
                                         kiln_event *const *wait_list,
                                         kiln_mpi_request **out);

/* dst (size * src->count elements, src's dtype) receives every rank's src,
 * in rank order. Any dtype. src and dst must not overlap
 * (KILN_ERR_INVALID_ARGUMENT when they share elements of one buffer). */
KILN_API kiln_status kiln_mpi_allgather(kiln_mpi *mpi, kiln_queue *queue,
                                        const kiln_range *src,
                                        const kiln_range *dst, size_t num_wait,
                                        kiln_event *const *wait_list,
                                        kiln_event **out_event);
KILN_API kiln_status kiln_mpi_iallgather(kiln_mpi *mpi, kiln_queue *queue,
                                         const kiln_range *src,
                                         const kiln_range *dst, size_t num_wait,
                                         kiln_event *const *wait_list,
                                         kiln_mpi_request **out);

/* src holds size blocks of dst->count elements; rank r's dst receives op
 * over every rank's block r. dtype f32, f16 or bf16 (src's and dst's the
 * same), reduced as kiln_mpi_allreduce. src and dst must not overlap
 * (KILN_ERR_INVALID_ARGUMENT when they share elements of one buffer). */
KILN_API kiln_status kiln_mpi_reduce_scatter(kiln_mpi *mpi, kiln_queue *queue,
                                             const kiln_range *src,
                                             const kiln_range *dst,
                                             kiln_reduce_op op, size_t num_wait,
                                             kiln_event *const *wait_list,
                                             kiln_event **out_event);
KILN_API kiln_status kiln_mpi_ireduce_scatter(
    kiln_mpi *mpi, kiln_queue *queue, const kiln_range *src,
    const kiln_range *dst, kiln_reduce_op op, size_t num_wait,
    kiln_event *const *wait_list, kiln_mpi_request **out);

/* Advance a request; *done becomes true once its result is in the device
 * buffer. A failure (KILN_ERR_COMM, KILN_ERR_EXEC_FAILED) finishes the
 * request: kiln_mpi_wait then returns the same status. */
KILN_API kiln_status kiln_mpi_test(kiln_mpi_request *request, bool *done);

/* Complete the request (within the options' timeout) and free it, whatever
 * the result. */
KILN_API kiln_status kiln_mpi_wait(kiln_mpi_request *request);

KILN_END_DECLS

#endif
