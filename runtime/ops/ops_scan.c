/* Prefix sums: kiln_scan (contract in kiln/kiln_ops.h; kernels in
 * cl_kernels/scan.cl).
 *
 * A chunked three-phase scan: chunk totals, an exclusive scan of the totals,
 * then each chunk scanned from its carry. Chunks are scan_chunk elements
 * (profile; default 8192 on the CPU family, where one work-item walks a
 * chunk, and 16 x reduce_wg on the GPU family, where a work-group does), so
 * the partition, and with it every f32 rounding, depends only on n and the
 * profile. A single chunk skips the first two phases.
 *
 * Workspace: one element per chunk (n / 2048 bytes at the CPU default). */
#include "ops_train_internal.h" /* the row-kernel parameters */

/* The row kernels' parameters (ops_train_internal.h) and the chunk. */
static size_t get_params(const kiln_context *ctx, kiln_dtype dtype,
                         struct kiln__train_rows *p) {
  kiln__train_rows_params(ctx, dtype, p);
  return kiln__ops_tune(kiln__ops_tuning(ctx)->scan_chunk,
                        p->cpu ? 8192 : (unsigned)(16 * p->wg));
}

static kiln_status run(struct kiln__op *op, kiln_scan_kind kind,
                       kiln_dtype dtype, size_t n, const kiln_buffer *x,
                       size_t x_offset, kiln_buffer *y, size_t y_offset) {
  struct kiln__train_rows p;
  size_t chunk = get_params(op->queue->ctx, dtype, &p);
  bool cpu = p.cpu;
  size_t wg = p.wg;
  size_t chunks = n / chunk + (n % chunk != 0);
  const char *options = p.options;
  /* CPU: a work-item per chunk; GPU: a work-group per chunk. */
  size_t items = chunks, items_local = wg;
  kiln_status s = KILN_OK;
  if (!cpu)
    KILN__CHECK(s, kiln__mul_overflows(chunks, wg, &items)
              ? kiln__fail(KILN_ERR_INVALID_SIZE, "%s: n %zu is too large",
                           op->fn, n)
              : KILN_OK);
  cl_mem sums = NULL;
  size_t esize = kiln_dtype_size(dtype);
  cl_ulong xo = x_offset, yo = y_offset, nn = n, ch = chunk, nch = chunks;
  if (chunks > 1) {
    KILN__CHECK(s, kiln__op_workspace(op, chunks * esize, &sums));
    cl_kernel k1 = NULL, k2 = NULL;
    KILN__CHECK(s, kiln__op_kernel(op, "scan", options, "scan_sums", &k1, 5,
                          KILN__ARG(x->cl), KILN__ARG(xo), KILN__ARG(nn),
                          KILN__ARG(ch), KILN__ARG(sums)));
    KILN__CHECK(s, kiln__op_launch_1d(op, k1, items, items_local));
    KILN__CHECK(s, kiln__op_kernel(op, "scan", options, "scan_carry", &k2, 2,
                          KILN__ARG(sums), KILN__ARG(nch)));
    KILN__CHECK(s, kiln__op_launch_1d(op, k2, cpu ? 1 : wg, cpu ? 1 : wg));
  } else {
    /* Unused by the kernel, but an argument must be a valid buffer. */
    sums = x->cl;
  }
  cl_kernel k3 = NULL;
  cl_int has_carry = chunks > 1, exclusive = kind == KILN_SCAN_EXCLUSIVE;
  KILN__CHECK(s, kiln__op_kernel(op, "scan", options, "scan_apply", &k3, 9,
                        KILN__ARG(x->cl), KILN__ARG(xo), KILN__ARG(y->cl),
                        KILN__ARG(yo), KILN__ARG(nn), KILN__ARG(ch),
                        KILN__ARG(sums), KILN__ARG(has_carry),
                        KILN__ARG(exclusive)));
  KILN__CHECK(s, kiln__op_launch_1d(op, k3, items, items_local));
  return s;
}

KILN_API kiln_status kiln_scan(kiln_queue *queue, kiln_scan_kind kind,
                               const kiln_range *xr, const kiln_range *yr,
                               size_t num_wait, kiln_event *const *wait_list,
                               kiln_event **out_event) {
  static const char fn[] = "kiln_scan";
  kiln_status s = kiln__ops_check_queue(fn, queue);
  if (s == KILN_OK && (unsigned)kind > KILN_SCAN_EXCLUSIVE)
    s = kiln__fail(KILN_ERR_INVALID_ARGUMENT,
                   "%s: kind %d is not a kiln_scan_kind", fn, (int)kind);
  KILN__CHECK(s, kiln__ops_check_map_ranges(fn, queue, "x", xr, "y", yr,
                                            KILN__DT_SCAN));
  if (s != KILN_OK)
    return s;
  const size_t n = xr->count;
  const kiln_dtype dtype = xr->dtype;
  const kiln_buffer *x = xr->buffer;
  kiln_buffer *y = yr->buffer;
  const size_t x_offset = xr->offset, y_offset = yr->offset;
  struct kiln__op o;
  if ((s = kiln__op_begin(&o, queue, fn, num_wait, wait_list, out_event)))
    return s;
  kiln__op_describe(&o,
                    kind == KILN_SCAN_EXCLUSIVE ? "scan.exclusive"
                                                : "scan.inclusive",
                    dtype, 1, &n, 2.0 * (double)kiln_dtype_size(dtype) * n,
                    (double)n);
  if (n > 0)
    s = run(&o, kind, dtype, n, x, x_offset, y, y_offset);
  return kiln__op_end(&o, s, out_event);
}

void kiln__ops_warm_scan(const kiln_context *ctx, kiln__warm_add_fn add,
                         void *user) {
  const kiln_dtype dts[] = {KILN_F32, KILN_I32, KILN_U32};
  for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
    struct kiln__train_rows p;
    get_params(ctx, dts[i], &p);
    add(user, "scan", p.options);
  }
}
