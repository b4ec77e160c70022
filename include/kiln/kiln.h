/*
 * kiln: a portable, vendor-neutral GPU compute runtime.
 *
 * Include this header only; the per-module headers refuse to be included on
 * their own.
 *
 * Thread-safety default, stated once here: contexts, programs and buffers may
 * be shared between threads; a queue, and a kernel handle whose arguments are
 * being set, must be used by one thread at a time. Distinct queues may be used
 * from distinct threads concurrently. Functions whose contract differs say so
 * at their declaration. Two rules hold everywhere: destroying or releasing
 * the last reference to an object must not race with any other call using
 * that object (the caller ends its other uses first); and functions that read
 * the environment (KILN_DEVICE, KILN_PROFILE, KILN_CACHE*, KILN_TRACE) must
 * not run while another thread calls setenv or unsetenv, as POSIX requires.
 * Borrowed getters (names, infos, sizes, the owning context) only read
 * immutable state and are thread-safe. tests/test_threads.c exercises this
 * contract with eight threads on one context, under ThreadSanitizer too.
 *
 * Errors: every fallible function returns a kiln_status (KILN_OK is 0, errors
 * are negative) and leaves a precise message in kiln_last_error(). kiln never
 * aborts, exits or prints.
 *
 * Conventions (docs/conventions.md states them in full; every header follows
 * them):
 * - Argument order of every call that enqueues work: queue, the op's kind,
 *   sizes the descriptors lack, inputs, outputs, scalars, options, then
 *   `size_t num_wait, kiln_event *const *wait_list, kiln_event **out_event`.
 *   No public function takes more than 12 parameters.
 * - Data is named by descriptors (kiln/kiln_tensor.h): a kiln_range (buffer,
 *   offset, count, dtype) or a kiln_matrix (buffer, offset, rows, cols, ld,
 *   batch_stride, dtype, layout, trans, and packed: a GEMM operand packed
 *   once by kiln_pack); an optional operand is NULL. dtype
 *   and extent come from the descriptors; operands that must agree are
 *   checked (KILN_ERR_SHAPE_MISMATCH, naming both). GEMM's alpha, beta, bias
 *   and activation are a kiln_epilogue.
 * - Units: offsets and counts are elements of the dtype the call names;
 *   bytes only where memory has no element type yet, in parameters ending
 *   in _bytes.
 * - Names: kiln_<object>_create/_destroy, getters
 *   kiln_<object>_get_<property> (yes/no: kiln_<object>_is_/has_/uses_<...>;
 *   OpenCL handles: kiln_<object>_get_cl_<handle>), one enum per concept (a
 *   reduction is a kiln_reduce_op everywhere).
 * - Blocking calls keep the event trio; their out event is complete on
 *   return.
 * - Errors: one mistake, one status: NULL handle KILN_ERR_NULL_POINTER,
 *   object of another context KILN_ERR_WRONG_CONTEXT, sizes that disagree
 *   KILN_ERR_SHAPE_MISMATCH, past a buffer KILN_ERR_OUT_OF_RANGE, zero or
 *   overflowing sizes KILN_ERR_INVALID_SIZE. On an argument error nothing is
 *   enqueued and *out_event is unchanged.
 */
#ifndef KILN_H
#define KILN_H

#define KILN_H_INSIDE

#include "kiln/kiln_version.h"
#include "kiln/kiln_common.h"
#include "kiln/kiln_dtype.h"
#include "kiln/kiln_tensor.h"
#include "kiln/kiln_error.h"
#include "kiln/kiln_device.h"
#include "kiln/kiln_context.h"
#include "kiln/kiln_queue.h"
#include "kiln/kiln_event.h"
#include "kiln/kiln_buffer.h"
#include "kiln/kiln_pool.h"
#include "kiln/kiln_pinned.h"
#include "kiln/kiln_pipeline.h"
#include "kiln/kiln_program.h"
#include "kiln/kiln_cache.h"
#include "kiln/kiln_tune.h"
#include "kiln/kiln_ops.h"
#include "kiln/kiln_multi.h"
#include "kiln/kiln_sequence.h"
#include "kiln/kiln_ops_train.h"
#include "kiln/kiln_ops_conv.h"
#include "kiln/kiln_ops_image.h"
#include "kiln/kiln_ops_attention.h"

#undef KILN_H_INSIDE

#endif
