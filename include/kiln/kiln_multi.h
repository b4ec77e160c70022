/* Several devices in one process: a device set (one context and one queue
 * per device taken by a selector), ops split across the set by weight, and
 * copies between devices through pinned host staging.
 *
 * Split ops take and return host arrays (f32): each device receives its part
 * of the input, runs the op from the op library on it, and returns its part;
 * every device works at once (each on its own queue, all flushed before any
 * is waited for). A part goes wholly to one device, so a batched GEMM
 * gives the same bits as on one device of the same kind, and so does a
 * correctly rounded map (add, mul, ...); a transcendental map (exp) may
 * differ in the last bits, as a kernel's vector body and scalar tail may,
 * within the op's documented accuracy. Reductions combine the per-device
 * partial results on the host in device order, so for a fixed split
 * (weights and set) the result is the same bits on every run.
 *
 * Why the split ops take host data and not device buffers: a kiln_buffer
 * belongs to one context, so one device. Data in one device's buffer would
 * first have to travel to every other device through host memory (as
 * kiln_peer_copy does), and the results back, before and after any device
 * works: more bytes through the host than the op itself reads, so running
 * the op on the device that holds the data is faster. Data already spread over
 * the set's devices needs no split op: call the op on each device's queue
 * (kiln_device_set_get_queue) with that device's ranges, and wait for their
 * events; that is exactly the work a split op does after its uploads. Host
 * data is the one case in which splitting pays, because every byte crosses
 * to some device anyway.
 *
 * A device set is used by one thread at a time. */
#ifndef KILN_MULTI_H
#define KILN_MULTI_H

#if !defined(KILN_H_INSIDE) && !defined(KILN_COMPILATION)
#error "Only <kiln/kiln.h> can be included directly."
#endif

#include "kiln/kiln_common.h"
#include "kiln/kiln_context.h"
#include "kiln/kiln_ops.h"
#include "kiln/kiln_tensor.h"

KILN_BEGIN_DECLS

typedef struct kiln_device_set kiln_device_set;

/* Enumerate devices, evaluate selector (NULL: KILN_DEVICE, else the default
 * rule; "all" takes every device, and POCL_DEVICES="pthread pthread" makes
 * PoCL offer two CPU devices) and create one context (with options, which
 * may be NULL) and one in-order queue per device taken, in list order.
 * Weights start equal. KILN_ERR_NO_DEVICE when the selector takes none.
 * Thread-safe. */
KILN_API kiln_status kiln_device_set_create(const char *selector,
                                            const kiln_context_options *options,
                                            kiln_device_set **out);

/* Destroy the queues (after their work completes) and contexts. Buffers the
 * caller made on a set context must be destroyed first, else KILN_ERR_BUSY
 * and nothing is destroyed. NULL is a no-op. */
KILN_API kiln_status kiln_device_set_destroy(kiln_device_set *set);

/* Number of devices; 0 for NULL. */
KILN_API size_t kiln_device_set_get_count(const kiln_device_set *set);
/* The context and queue of device index (borrowed), or NULL when out of
 * range. */
KILN_API kiln_context *kiln_device_set_get_context(const kiln_device_set *set,
                                                   size_t index);
KILN_API kiln_queue *kiln_device_set_get_queue(const kiln_device_set *set,
                                                 size_t index);

/* Set the share of work of each device: count must equal the set's count
 * and every weight be finite and >= 0, with a positive sum. weights NULL
 * (with count 0) restores equal shares. Parts are proportional to weight:
 * give measured throughputs (see kiln_device_set_calibrate) when devices
 * differ. */
KILN_API kiln_status kiln_device_set_weights(kiln_device_set *set,
                                             size_t count,
                                             const double *weights);

/* Measure each device's f32 GEMM throughput with a short run (256^3, a few
 * repetitions, after a warm-up) and set the weights to it. Blocks. */
KILN_API kiln_status kiln_device_set_calibrate(kiln_device_set *set);

/* Split total items by the weights: parts[i] (count entries, the set's
 * count) receives device i's share; the shares sum to total, each the
 * rounded-down proportional share, the remainder going one item each to
 * the devices with the largest fractional parts (ties to the lower index).
 * Deterministic. */
KILN_API kiln_status kiln_device_set_split(const kiln_device_set *set,
                                           size_t total, size_t count,
                                           size_t *parts);

/* Batched GEMM in f32 on host data, as kiln_matmul, with the batch
 * split across the devices: for each of batch entries, c = alpha op(a)
 * op(b) + beta c. a, b and c describe the operands as every GEMM does
 * (kiln_tensor.h: rows, cols, ld, batch_stride, layout, trans, dtype
 * KILN_F32, one layout for all three, c not transposed), with buffer NULL:
 * the elements are host memory, from a_host + a->offset and likewise. A
 * batch_stride of 0 for a or b shares one matrix among every entry (it goes
 * whole to every device). Blocks until c_host holds the result. batch 0 is
 * a no-op. Mismatched dimensions are KILN_ERR_SHAPE_MISMATCH. */
KILN_API kiln_status kiln_multi_gemm_batched(
    kiln_device_set *set, size_t batch, const kiln_matrix *a,
    const float *a_host, const kiln_matrix *b, const float *b_host,
    const kiln_matrix *c, float *c_host, float alpha, float beta);

/* y[i] = op(x[i]) for i < n, in f32, the range split across the devices.
 * x and y may be the same array. Blocks. */
KILN_API kiln_status kiln_multi_unary(kiln_device_set *set, kiln_unary_op op,
                                      size_t n, const float *x, float *y);
/* y[i] = a[i] op b[i], split likewise. */
KILN_API kiln_status kiln_multi_binary(kiln_device_set *set,
                                       kiln_binary_op op, size_t n,
                                       const float *a, const float *b,
                                       float *y);

/* *result = op(x[0 .. n)) for op SUM, MIN, MAX or MEAN, in f32: each device
 * reduces its part with kiln_reduce, and the partial results are combined
 * on the host in device order (sums and the mean's weighted sum in double,
 * rounded to f32 once). n must be > 0. Blocks. */
KILN_API kiln_status kiln_multi_reduce(kiln_device_set *set,
                                       kiln_reduce_op op, size_t n,
                                       const float *x, float *result);

/* Copy the elements of src (a range of a buffer of src_queue's context) to
 * dst (a range of dst_queue's context, another device's or the same; the
 * same count and dtype as src), through a ring of pinned host staging
 * chunks of chunk_bytes (0: 4 MiB): the read of one chunk from src
 * overlaps the write of the previous one to dst. Blocking: the host first
 * waits for wait_list (events of either context, since events of two
 * contexts cannot order each other on a device), the copy runs after the
 * commands enqueued before it on both queues (they are in order), and the
 * call returns when it is complete; *out_event (out_event may be NULL) is
 * then an event of dst_queue, complete already. */
KILN_API kiln_status kiln_peer_copy(
    kiln_queue *src_queue, kiln_queue *dst_queue, const kiln_range *src,
    const kiln_range *dst, size_t chunk_bytes, size_t num_wait,
    kiln_event *const *wait_list, kiln_event **out_event);

KILN_END_DECLS

#endif
