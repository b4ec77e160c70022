/* The op library's room header (runtime/ops/), the top room of the runtime:
 * plumbing shared by the op library's entry points (ops_*.c): argument
 * checks, the per-queue workspace, and one launch path that handles the wait
 * list, the out event, zero-size no-ops and tracing. It includes the tune
 * room below (which includes the program, mem and core rooms); nothing below
 * includes it. Not installed.
 *
 * An op entry point follows this shape:
 *
 *   kiln_status kiln_foo(kiln_queue *queue, const kiln_range *xr, ...,
 *                        num_wait, wait_list, out_event)
 *   {
 *     static const char fn[] = "kiln_foo";
 *     kiln_status s = kiln__ops_check_queue(fn, queue);   // then every arg:
 *     if (s == KILN_OK) s = kiln__ops_check_agree(fn, "x", xr, "y", yr);
 *     if (s != KILN_OK) return s;          // descriptors are non-NULL now
 *     const size_t n = xr->count;          // unpack them ...
 *     if (s == KILN_OK) s = kiln__ops_check_dtype(fn, "x.dtype", xr->dtype, mask);
 *     if (s == KILN_OK) s = kiln__ops_check_range(fn, queue, "x", xr->buffer, xr->offset, n, xr->dtype);
 *     if (s != KILN_OK) return s;
 *     struct kiln__op op;
 *     s = kiln__op_begin(&op, queue, fn, num_wait, wait_list, out_event);
 *     if (s != KILN_OK) return s;
 *     kiln__op_describe(&op, "foo", dtype, 1, (size_t[]){n}, bytes, flops);
 *     if (n > 0) {
 *       cl_kernel k;
 *       s = kiln__op_kernel(&op, "foo", options, "foo_f32", &k,
 *                           2, KILN__ARG(x->cl), KILN__ARG(n64));
 *       if (s == KILN_OK) s = kiln__op_launch_1d(&op, k, n, local);
 *     }
 *     return kiln__op_end(&op, s, out_event);  // also on failure: frees state
 *   }
 *
 * The queue is in order (kiln only creates in-order queues), so the second
 * and later launches of an op need no events between them. */
#ifndef KILN_OPS_INTERNAL_H
#define KILN_OPS_INTERNAL_H

#include "tune/tune.h"
#include "kiln/kiln_ops.h"

/* ---- dtypes -------------------------------------------------------------- */

/* Bit masks of allowed dtypes for kiln__ops_check_dtype. */
#define KILN__DT(d) (1u << (unsigned)(d))
#define KILN__DT_FLOATS (KILN__DT(KILN_F32) | KILN__DT(KILN_F16) | KILN__DT(KILN_BF16))
#define KILN__DT_SCAN (KILN__DT(KILN_F32) | KILN__DT(KILN_I32) | KILN__DT(KILN_U32))

/* ---- argument checks ----------------------------------------------------- */
/* Each returns KILN_OK or records a message "<fn>: <what> ..." naming the
 * argument, and returns its status. */

/* queue is non-NULL. */
kiln_status kiln__ops_check_queue(const char *fn, const kiln_queue *queue);

/* dtype is one of the bits in allowed (KILN__DT masks); what names the
 * argument ("dtype", "y_dtype"). */
kiln_status kiln__ops_check_dtype(const char *fn, const char *what,
                                  kiln_dtype dtype, unsigned allowed);

/* buffer is non-NULL, belongs to the queue's context (else
 * KILN_ERR_WRONG_CONTEXT), and holds the count
 * elements of dtype starting at element offset (offset + count must not
 * overflow; count 0 still requires offset <= the buffer's element count).
 * what names the buffer ("x"); the offset is named "<what>_offset". */
kiln_status kiln__ops_check_range(const char *fn, const kiln_queue *queue,
                                  const char *what, const kiln_buffer *buffer,
                                  size_t offset, size_t count,
                                  kiln_dtype dtype);

/* When queue is recording a sequence, count buffer as used by it, so that
 * it outlives the recording (kiln__ops_check_range does it for every
 * buffer it checks; an op calls it for buffers it uses unchecked). */
kiln_status kiln__ops_record_buffer(const kiln_queue *queue,
                                    const kiln_buffer *buffer);

/* kiln__ops_check_range plus the buffer's access: an input (read by the
 * op) must not be KILN_MEM_WRITE_ONLY, an output (written) not
 * KILN_MEM_READ_ONLY. An in-out buffer (axpy's y) is checked with both. */
kiln_status kiln__ops_check_in(const char *fn, const kiln_queue *queue,
                               const char *what, const kiln_buffer *buffer,
                               size_t offset, size_t count, kiln_dtype dtype);
kiln_status kiln__ops_check_out(const char *fn, const kiln_queue *queue,
                                const char *what, const kiln_buffer *buffer,
                                size_t offset, size_t count, kiln_dtype dtype);

/* The element ranges (a, a_offset, a_count of a_dtype) and (b, b_offset,
 * b_count of b_dtype), already range-checked, are disjoint, or the same
 * range with the same element size when same_ok (an elementwise op in
 * place). Views of one buffer are compared in the parent's bytes. */
kiln_status kiln__ops_check_overlap(const char *fn, const char *a_what,
                                    const kiln_buffer *a, size_t a_offset,
                                    size_t a_count, kiln_dtype a_dtype,
                                    const char *b_what, const kiln_buffer *b,
                                    size_t b_offset, size_t b_count,
                                    kiln_dtype b_dtype, bool same_ok);

/* The buffers of a map from x to y, count elements of dtype each: x (named
 * x_what) is an input, y an output, and the two are disjoint or the very
 * same range (the op in place). The checks above, in that order. */
kiln_status kiln__ops_check_map(const char *fn, const kiln_queue *queue,
                                const char *x_what, const kiln_buffer *x,
                                size_t x_offset, const kiln_buffer *y,
                                size_t y_offset, size_t count,
                                kiln_dtype dtype);

/* ---- descriptors (kiln/kiln_tensor.h) ----------------------------------- */

/* desc (a kiln_range or kiln_matrix, named what) is non-NULL. */
kiln_status kiln__ops_check_desc(const char *fn, const char *what,
                                 const void *desc);

/* a and b are non-NULL ranges of one count and one dtype (operands of an
 * elementwise op); KILN_ERR_SHAPE_MISMATCH naming both when not. */
kiln_status kiln__ops_check_agree(const char *fn, const char *a_what,
                                  const kiln_range *a, const char *b_what,
                                  const kiln_range *b);

/* The operands of an elementwise map from x to y, as descriptors: both
 * non-NULL, one count and one dtype (kiln__ops_check_agree), that dtype in
 * dtypes (named "<x_what>.dtype"), and the buffers a map may take
 * (kiln__ops_check_map: y disjoint from x or the very same range). */
kiln_status kiln__ops_check_map_ranges(const char *fn, const kiln_queue *queue,
                                       const char *x_what, const kiln_range *x,
                                       const char *y_what, const kiln_range *y,
                                       unsigned dtypes);

/* r is a non-NULL range of exactly count elements of dtype, which because
 * ("x's rows", "ARGMAX") requires; KILN_ERR_SHAPE_MISMATCH when not. */
kiln_status kiln__ops_check_result(const char *fn, const char *what,
                                   const kiln_range *r, size_t count,
                                   kiln_dtype dtype, const char *because);

/* x (non-NULL) names no packed operand (x->packed NULL): every op but
 * kiln_matmul's A and B refuses one, by name ("x.packed"). */
kiln_status kiln__ops_check_unpacked(const char *fn, const char *what,
                                     const kiln_matrix *x);

/* x is non-NULL with a valid layout and trans and an ld (0: packed) of at
 * least its stored row (row-major) or column (column-major) length and 1;
 * *ld receives the ld in force. Messages name "<what>.ld" and so on. */
kiln_status kiln__ops_check_matrix(const char *fn, const char *what,
                                   const kiln_matrix *x, size_t *ld);

/* kiln__ops_check_matrix, and x is what a row op takes: row-major, not
 * transposed, contiguous rows (ld 0 or cols), batch_stride 0. */
kiln_status kiln__ops_check_rows_matrix(const char *fn, const char *what,
                                        const kiln_matrix *x);

/* a and b (non-NULL) have one shape (rows, cols) and one dtype. */
kiln_status kiln__ops_check_same_matrix(const char *fn, const char *a_what,
                                        const kiln_matrix *a,
                                        const char *b_what,
                                        const kiln_matrix *b);

/* rows * cols does not overflow; *count receives it. */
kiln_status kiln__ops_check_shape(const char *fn, size_t rows, size_t cols,
                                  size_t *count);

/* The tuning row of ctx (kiln__ops_tuning) and the parameters in effect:
 * tune/tune.h. */

/* Round items up to a multiple of local (> 0) into *global; false when that
 * overflows. */
static inline bool kiln__ops_round_up(size_t items, size_t local,
                                      size_t *global) {
  size_t rem = items % local;
  if (rem == 0) {
    *global = items;
    return true;
  }
  return !kiln__add_overflows(items, local - rem, global);
}

/* ---- helpers ------------------------------------------------------------- */

/* Run expr only while s is still KILN_OK (a chain of checks). */
#define KILN__CHECK(s, expr)                                                   \
  do {                                                                         \
    if ((s) == KILN_OK)                                                        \
      (s) = (expr);                                                            \
  } while (0)

/* a / b rounded up (b > 0), without the overflow of (a + b - 1) / b. */
static inline size_t kiln__div_up(size_t a, size_t b) {
  return a / b + (a % b != 0);
}

/* ---- the op being enqueued ----------------------------------------------- */

struct kiln__op {
  kiln_queue *queue;
  const char *fn; /* public entry point, for messages */
  /* What tracing reports (kiln__op_describe). */
  const char *name;  /* "unary.exp", static storage */
  kiln_dtype dtype;
  unsigned ndim;
  size_t shape[3];
  double bytes; /* bytes moved to and from memory, at least once each */
  double flops;
  /* Launch state. */
  cl_event wait_inline[KILN__WAIT_INLINE];
  cl_event *wait;    /* converted wait list, consumed by the first launch */
  cl_uint num_wait;
  cl_event first;    /* first launch's event, kept only when traced */
  cl_event last;     /* last launch's event, when wanted */
  bool want_event;   /* out_event != NULL or traced */
  bool traced;
  unsigned launches;
  uint64_t host_ns;  /* host clock at begin, for traces without profiling */
};

/* Start an op after its arguments were checked: validate and convert the
 * wait list, note whether the op is traced. On failure nothing needs
 * cleaning up. */
kiln_status kiln__op_begin(struct kiln__op *op, kiln_queue *queue,
                           const char *fn, size_t num_wait,
                           kiln_event *const *wait_list,
                           kiln_event **out_event);

/* Record what the trace event will say. name must have static storage. */
void kiln__op_describe(struct kiln__op *op, const char *name, kiln_dtype dtype,
                       unsigned ndim, const size_t *shape, double bytes,
                       double flops);

/* One kernel argument: its size and a pointer to its value. */
struct kiln__arg {
  size_t size;
  const void *value;
};
#define KILN__ARG(v) ((struct kiln__arg){sizeof(v), &(v)})
/* A __local array of bytes. */
#define KILN__ARG_LOCAL(bytes) ((struct kiln__arg){(bytes), NULL})

/* Set arguments 0..count-1 of kernel. */
kiln_status kiln__op_args(struct kiln__op *op, cl_kernel kernel, cl_uint count,
                          ...);

/* kiln__queue_kernel(op's queue, source, options, name, out), then
 * kiln__op_args on it: the kernel of an op, ready to launch. */
kiln_status kiln__op_kernel(struct kiln__op *op, const char *source,
                            const char *options, const char *name,
                            cl_kernel *out, cl_uint count, ...);

/* Enqueue kernel over global (a multiple of local, which is never NULL: PoCL
 * runs a range without a local size on one thread). The first launch waits
 * for the op's wait list. */
kiln_status kiln__op_launch(struct kiln__op *op, cl_kernel kernel,
                            cl_uint dims, const size_t *global,
                            const size_t *local);

/* kiln__op_launch over items work-items (global rounded up to a multiple of
 * local), failing with "<fn>: too many work-items" when that overflows. */
kiln_status kiln__op_launch_1d(struct kiln__op *op, cl_kernel kernel,
                               size_t items, size_t local);

/* Finish the op. With status KILN_OK: when nothing was launched (a zero-size
 * op) and there is a wait list or an out event, a marker stands in for it so
 * the out event completes after the wait list; the op is traced; *out_event
 * receives the last command's event. With any other status everything is
 * released and the status returned unchanged. Always call it once after a
 * successful kiln__op_begin. */
kiln_status kiln__op_end(struct kiln__op *op, kiln_status status,
                         kiln_event **out_event);

/* ---- workspace ----------------------------------------------------------- */

/* A device buffer of at least bytes for op scratch, owned by op's queue and
 * reused by later ops on it: allocated at first use, replaced by a larger
 * one when an op needs more (the old one is released; OpenCL frees it once
 * the commands using it have completed). Do not release it. */
kiln_status kiln__op_workspace(struct kiln__op *op, size_t bytes,
                               cl_mem *out);
/* The queue's op scratch now (NULL before the first op that needs one) and
 * its size in *bytes: for tests. */
cl_mem kiln__op_workspace_held(const kiln_queue *queue, size_t *bytes);

/* ---- cache warming ------------------------------------------------------- */

/* Each module lists the (embedded source, build options) pairs it builds on
 * ctx: add(user, source, options) once per pair, with options exactly as it
 * passes them to kiln__queue_kernel (they depend on the profile's tuning and
 * the device's dtypes). ops_warm.c's table gathers them for
 * kiln_cache_warm. */
typedef void (*kiln__warm_add_fn)(void *user, const char *source,
                                  const char *options);
void kiln__ops_warm_elementwise(const kiln_context *ctx, kiln__warm_add_fn add,
                                void *user);
void kiln__ops_warm_reduce(const kiln_context *ctx, kiln__warm_add_fn add,
                           void *user);
void kiln__ops_warm_scan(const kiln_context *ctx, kiln__warm_add_fn add,
                         void *user);
void kiln__ops_warm_rows(const kiln_context *ctx, kiln__warm_add_fn add,
                         void *user);
void kiln__ops_warm_transpose(const kiln_context *ctx, kiln__warm_add_fn add,
                              void *user);
void kiln__ops_warm_gemm(const kiln_context *ctx, kiln__warm_add_fn add,
                         void *user);
/* The training ops (ops_train_*.c). */
void kiln__ops_warm_train_elementwise(const kiln_context *ctx,
                                      kiln__warm_add_fn add, void *user);
void kiln__ops_warm_train_loss(const kiln_context *ctx, kiln__warm_add_fn add,
                               void *user);
void kiln__ops_warm_train_optim(const kiln_context *ctx, kiln__warm_add_fn add,
                                void *user);
void kiln__ops_warm_train_random(const kiln_context *ctx,
                                 kiln__warm_add_fn add, void *user);
void kiln__ops_warm_train_index(const kiln_context *ctx, kiln__warm_add_fn add,
                                void *user);
/* The convolution (ops_conv.c). */
void kiln__ops_warm_conv(const kiln_context *ctx, kiln__warm_add_fn add,
                         void *user);
/* The image ops (ops_image.c). */
void kiln__ops_warm_image(const kiln_context *ctx, kiln__warm_add_fn add,
                          void *user);
/* The attention ops (ops_attention.c). */
void kiln__ops_warm_attention(const kiln_context *ctx, kiln__warm_add_fn add,
                              void *user);

#endif
