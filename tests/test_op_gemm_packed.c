/* Operands that stay packed (kiln_packed_create, kiln_pack, kiln_matmul with
 * a descriptor's packed set): on every test device, with its own kernel
 * family and the other one forced, awkward sizes (1, primes, non-multiples
 * of every tile: MR 6 or 8, NR 8 to 32, KC 256, packing steps 64, GPU tiles
 * 16 to 64), every layout and transpose of the packed matrix, f16 and bf16,
 * batches, the epilogue, and chunks of k:
 *
 * - the result is bit for bit the unpacked call's on the same device
 *   (C starts from the same bits), and within test_op_gemm.c's bound
 *   2 (k + 4) u sum |alpha a b| (+ |beta c| + |bias|) of a float64 host
 *   reference; shapes on both sides of the switch point to the unpacked
 *   kernel for few rows (where the packed matrix serves its copy, not
 *   its panels), and again with that kernel turned off (panels
 *   everywhere), row- and column-major C;
 * - packing again after the source changed gives the new product;
 * - every misuse is refused with its status and a message naming it: another
 *   shape, dtype, layout or trans, the other role, buffer or ld set
 *   beside packed, another context, a matrix never packed, a register
 *   tile changed by tuning since the last kiln_pack (which kiln_pack then
 *   repacks), and packed descriptors given to other ops. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "gemm_ref.h"
#include "harness.h"
#include "op_test_util.h"
#include "ops/ops_gemm.h"

struct pcase {
  kiln_layout la, lb; /* layouts of A and B as stored */
  kiln_trans ta, tb;
  size_t m, n, k;
  kiln_dtype dtype;
  bool pack_a, pack_b;
  size_t batch;
  bool epi;   /* alpha -0.75, beta 0.5, bias, ReLU */
  size_t pad; /* added to every leading dimension and offset */
  bool c_col; /* C column-major */
};

#define ROW KILN_ROW_MAJOR
#define COL KILN_COL_MAJOR
#define N KILN_NO_TRANS
#define T KILN_TRANS

static size_t len_of(kiln_layout l, size_t rows, size_t cols) {
  return l == ROW ? cols : rows;
}
static size_t lines_of(kiln_layout l, size_t rows, size_t cols) {
  return l == ROW ? rows : cols;
}

/* Run kiln_matmul on the descriptors and return C (c_count f32). */
static float *run(kiln_queue *q, kiln_context *ctx, size_t batch,
                  const kiln_matrix *a, const kiln_matrix *b, kiln_matrix c,
                  const float *c0, size_t c_count, const kiln_epilogue *e) {
  kiln_buffer *dc = util_upload(ctx, q, KILN_F32, c0, c_count);
  c.buffer = dc;
  assert_kiln_ok(kiln_matmul(q, batch, a, b, &c, e, 0, NULL, NULL));
  float *out = util_download(q, dc, KILN_F32, c_count);
  assert_kiln_ok(kiln_buffer_destroy(dc));
  return out;
}

static void run_pcase(kiln_context *ctx, kiln_queue *q, const struct pcase *pc,
                      const char *tag) {
  const size_t m = pc->m, n = pc->n, k = pc->k;
  const size_t batch = pc->batch ? pc->batch : 1;
  const size_t ar = pc->ta == T ? k : m, ac = pc->ta == T ? m : k;
  const size_t br = pc->tb == T ? n : k, bc = pc->tb == T ? k : n;
  const size_t lda = len_of(pc->la, ar, ac) + pc->pad;
  const size_t ldb = len_of(pc->lb, br, bc) + pc->pad;
  const size_t a_ext =
      (lines_of(pc->la, ar, ac) - 1) * lda + len_of(pc->la, ar, ac);
  const size_t b_ext =
      (lines_of(pc->lb, br, bc) - 1) * ldb + len_of(pc->lb, br, bc);
  /* A packed operand is shared by the batch; the other one is strided. */
  const size_t sa = pc->pack_a ? 0 : a_ext + 1, sb = pc->pack_b ? 0 : b_ext + 2;
  const size_t ao = pc->pad, bo = 2 * pc->pad;
  const size_t a_count = ao + (batch - 1) * sa + a_ext + 1;
  const size_t b_count = bo + (batch - 1) * sb + b_ext + 1;
  const size_t c_stride = m * n + 3, c_count = (batch - 1) * c_stride + m * n;
  void *a = util_random(pc->dtype, a_count, -1.0, 1.0, 3u + (uint32_t)m);
  void *b = util_random(pc->dtype, b_count, -1.0, 1.0, 5u + (uint32_t)n);
  float *c0 = util_random(KILN_F32, c_count, -1.0, 1.0, 7u + (uint32_t)k);
  float *bias = util_random(KILN_F32, n, -1.0, 1.0, 9u);
  kiln_buffer *da = util_upload(ctx, q, pc->dtype, a, a_count);
  kiln_buffer *db = util_upload(ctx, q, pc->dtype, b, b_count);
  kiln_buffer *dbias = util_upload(ctx, q, KILN_F32, bias, n);
  const kiln_matrix ma = {da, ao,        ar,     ac,     lda,
                          sa, pc->dtype, pc->la, pc->ta, NULL};
  const kiln_matrix mb = {db, bo,        br,     bc,     ldb,
                          sb, pc->dtype, pc->lb, pc->tb, NULL};
  const kiln_matrix mc = {
      NULL, 0, m, n, 0, c_stride, KILN_F32, pc->c_col ? COL : ROW, N, NULL};
  const kiln_range br_ = {dbias, 0, n, KILN_F32};
  const kiln_epilogue epi = {-0.75f, 0.5f, &br_, KILN_ACT_RELU};
  const kiln_epilogue *e = pc->epi ? &epi : NULL;

  float *want = run(q, ctx, batch, &ma, &mb, mc, c0, c_count, e);

  kiln_packed *pa = NULL, *pb = NULL;
  kiln_matrix xa = ma, xb = mb;
  if (pc->pack_a) {
    assert_kiln_ok(kiln_packed_create(ctx, KILN_OPERAND_A, &ma, &pa));
    assert_kiln_ok(kiln_pack(q, &ma, pa, 0, NULL, NULL));
    assert_kiln_ok(kiln_packed_get_matrix(pa, &xa));
    assert_ptr_equal(xa.packed, pa);
    assert_null(xa.buffer);
  }
  if (pc->pack_b) {
    assert_kiln_ok(kiln_packed_create(ctx, KILN_OPERAND_B, &mb, &pb));
    kiln_event *ev = NULL;
    assert_kiln_ok(kiln_pack(q, &mb, pb, 0, NULL, &ev));
    assert_non_null(ev);
    assert_kiln_ok(kiln_event_wait(ev));
    kiln_event_release(ev);
    assert_kiln_ok(kiln_packed_get_matrix(pb, &xb));
  }
  float *got = run(q, ctx, batch, &xa, &xb, mc, c0, c_count, e);

  for (size_t i = 0; i < c_count; i++)
    if (memcmp(&got[i], &want[i], 4) != 0)
      fail_msg("%s: C element %zu is %a packed, %a unpacked", tag, i,
               (double)got[i], (double)want[i]);
  {
    const double u = ldexp(1.0, -24);
    double *ref = malloc(n * sizeof *ref), *mag = malloc(n * sizeof *mag);
    assert_non_null(ref);
    assert_non_null(mag);
    for (size_t t = 0; t < batch; t++) {
      const struct gemm_ref_operand ra = {pc->dtype, a,   ao + t * sa,
                                          pc->la,    lda, pc->ta};
      const struct gemm_ref_operand rb = {pc->dtype, b,   bo + t * sb,
                                          pc->lb,    ldb, pc->tb};
      for (size_t i = 0; i < m; i++) {
        gemm_ref_row(&ra, &rb, i, n, k, ref, mag);
        for (size_t j = 0; j < n; j++) {
          const size_t ci = t * c_stride + (pc->c_col ? j * m + i : i * n + j);
          double w = ref[j], bound = mag[j];
          if (pc->epi) {
            w = -0.75 * ref[j] + 0.5 * (double)c0[ci] + (double)bias[j];
            bound = 0.75 * mag[j] + 0.5 * fabs((double)c0[ci]) +
                    fabs((double)bias[j]);
            w = w < 0.0 ? 0.0 : w;
          }
          UTIL_CLOSE(got[ci], w, 2.0 * (double)(k + 4) * u * bound + 1e-30,
                     "%.60s: batch %zu C[%zu][%zu]", tag, t, i, j);
        }
      }
    }
    free(ref);
    free(mag);
  }
  free(got);

  /* New data in the source, packed again into the same objects: the
   * product follows (the unpacked call on the new data, bit for bit). */
  {
    void *a2 = util_random(pc->dtype, a_count, -2.0, 2.0, 13u + (uint32_t)m);
    void *b2 = util_random(pc->dtype, b_count, -2.0, 2.0, 17u + (uint32_t)n);
    assert_kiln_ok(
        kiln_buffer_write_sync(q, a2, range_of(da, 0, a_count, pc->dtype)));
    assert_kiln_ok(
        kiln_buffer_write_sync(q, b2, range_of(db, 0, b_count, pc->dtype)));
    if (pa)
      assert_kiln_ok(kiln_pack(q, &ma, pa, 0, NULL, NULL));
    if (pb)
      assert_kiln_ok(kiln_pack(q, &mb, pb, 0, NULL, NULL));
    float *want2 = run(q, ctx, batch, &ma, &mb, mc, c0, c_count, e);
    float *got2 = run(q, ctx, batch, &xa, &xb, mc, c0, c_count, e);
    if (memcmp(got2, want2, c_count * 4) != 0)
      fail_msg("%s: after packing new data, C differs from the unpacked call",
               tag);
    assert_true(memcmp(want2, want, c_count * 4) != 0);
    free(a2);
    free(b2);
    free(got2);
    free(want2);
  }
  assert_kiln_ok(kiln_packed_destroy(pa));
  assert_kiln_ok(kiln_packed_destroy(pb));
  free(want);
  free(a);
  free(b);
  free(c0);
  free(bias);
  assert_kiln_ok(kiln_buffer_destroy(da));
  assert_kiln_ok(kiln_buffer_destroy(db));
  assert_kiln_ok(kiln_buffer_destroy(dbias));
}

static void run_all(const struct pcase *cases, size_t count) {
  FOR_EACH_TEST_DEVICE(d) {
    for (int pass = 0; pass < 2; pass++) {
      kiln_context *ctx = NULL;
      kiln_queue *q = NULL;
      kiln_test_open_family(d, pass == 1, &ctx, &q);
      for (size_t i = 0; i < count; i++) {
        const struct pcase *p = &cases[i];
        char tag[200];
        snprintf(tag, sizeof tag,
                 "device %zu profile %s case %zu: %c%c %c%c m %zu n %zu k %zu "
                 "%s packed %s%s batch %zu",
                 d, kiln_context_get_profile(ctx), i, p->la == ROW ? 'r' : 'c',
                 p->ta == T ? 'T' : 'N', p->lb == ROW ? 'r' : 'c',
                 p->tb == T ? 'T' : 'N', p->m, p->n, p->k,
                 kiln_dtype_name(p->dtype), p->pack_a ? "A" : "",
                 p->pack_b ? "B" : "", p->batch);
        run_pcase(ctx, q, p, tag);
      }
      kiln_test_close(ctx, q);
    }
  }
}

/* Awkward sizes, every layout and transpose of the packed operand, either
 * operand or both, dtypes, batches and the epilogue. */
static const struct pcase cases[] = {
    {ROW, ROW, N, N, 1, 1, 1, KILN_F32, false, true, 0, false, 0, false},
    {ROW, ROW, N, N, 1, 1, 1, KILN_F32, true, false, 0, false, 0, false},
    {ROW, ROW, N, T, 3, 5, 7, KILN_F32, false, true, 0, true, 1, false},
    {ROW, ROW, N, N, 97, 131, 300, KILN_F32, false, true, 0, false, 0, false},
    {ROW, ROW, N, T, 97, 131, 300, KILN_F32, false, true, 0, true, 3, false},
    {ROW, COL, T, N, 131, 97, 67, KILN_F32, true, false, 0, false, 2, false},
    {COL, COL, T, T, 70, 89, 129, KILN_F32, true, true, 0, true, 0, false},
    {COL, ROW, N, N, 61, 127, 19, KILN_F32, true, true, 2, false, 1, false},
    {ROW, ROW, N, T, 1, 257, 513, KILN_F32, false, true, 0, true, 0, false},
    {ROW, ROW, N, T, 9, 100, 70, KILN_F32, false, true, 0, false, 0, false},
    {ROW, ROW, N, N, 100, 9, 70, KILN_F32, false, true, 0, false, 0, false},
    {ROW, ROW, N, T, 130, 10, 1024, KILN_F32, false, true, 0, true, 0, false},
    {ROW, ROW, N, T, 45, 83, 101, KILN_F16, false, true, 0, true, 1, false},
    {ROW, ROW, T, N, 83, 45, 101, KILN_BF16, true, false, 3, false, 0, false},
    {COL, ROW, N, T, 37, 41, 43, KILN_BF16, true, true, 2, true, 1, false},
    {ROW, ROW, N, T, 97, 131, 300, KILN_F32, true, true, 0, true, 1, true},
    {COL, ROW, T, N, 5, 77, 90, KILN_F32, false, true, 2, false, 0, true},
};

static void test_cases(void **state) {
  (void)state;
  run_all(cases, sizeof cases / sizeof cases[0]);
}

/* With the unpacked kernel for few rows off, every call runs the panels
 * and every case must give the unpacked call's bits. */
static void test_cases_no_skinny(void **state) {
  (void)state;
  kiln__gemm_set_skinny_max(0);
  run_all(cases, sizeof cases / sizeof cases[0]);
  kiln__gemm_set_skinny_max(-1);
}

/* Chunks of k (a small workspace): the packed panels are read from the
 * chunk's first step on, whole passes of KC. */
static void test_k_chunks(void **state) {
  (void)state;
  static const struct pcase chunked[] = {
      {ROW, ROW, N, N, 40, 50, 700, KILN_F32, false, true, 0, true, 1, false},
      {ROW, ROW, T, T, 40, 50, 700, KILN_F16, true, false, 2, false, 0, false},
      {ROW, ROW, N, T, 33, 65, 600, KILN_F32, true, true, 0, true, 1, false},
  };
  kiln__gemm_set_workspace_limit(16384);
  kiln__gemm_set_skinny_max(0);
  run_all(chunked, sizeof chunked / sizeof chunked[0]);
  kiln__gemm_set_skinny_max(-1);
  kiln__gemm_set_workspace_limit(0);
}

/* The f32 product test_errors and test_sequence work on: A (m x k) and B
 * (k x n) random on the device, C (m x n) for the result, described with
 * every optional field zero. */
struct fixture {
  size_t m, n, k;
  kiln_buffer *a, *b, *c;
  kiln_matrix ma, mb, mc;
};

static struct fixture fixture_open(kiln_context *ctx, kiln_queue *q) {
  struct fixture f = {.m = 70, .n = 90, .k = 110};
  float *ha = util_random(KILN_F32, f.m * f.k, -1, 1, 1);
  float *hb = util_random(KILN_F32, f.k * f.n, -1, 1, 2);
  f.a = util_upload(ctx, q, KILN_F32, ha, f.m * f.k);
  f.b = util_upload(ctx, q, KILN_F32, hb, f.k * f.n);
  free(ha);
  free(hb);
  assert_kiln_ok(
      kiln_buffer_create(ctx, f.m * f.n * 4, KILN_MEM_READ_WRITE, &f.c));
  f.ma = (kiln_matrix){
      .buffer = f.a, .rows = f.m, .cols = f.k, .dtype = KILN_F32};
  f.mb = (kiln_matrix){
      .buffer = f.b, .rows = f.k, .cols = f.n, .dtype = KILN_F32};
  f.mc = (kiln_matrix){
      .buffer = f.c, .rows = f.m, .cols = f.n, .dtype = KILN_F32};
  return f;
}

static void fixture_close(const struct fixture *f) {
  assert_kiln_ok(kiln_buffer_destroy(f->a));
  assert_kiln_ok(kiln_buffer_destroy(f->b));
  assert_kiln_ok(kiln_buffer_destroy(f->c));
}

#define MM(a, b, c) kiln_matmul(q, 1, (a), (b), (c), NULL, 0, NULL, NULL)

static void test_errors(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    for (int pass = 0; pass < 2; pass++) {
      kiln_context *ctx = NULL, *ctx2 = NULL;
      kiln_queue *q = NULL, *q2 = NULL;
      kiln_test_open_family(d, pass == 1, &ctx, &q);
      kiln_test_open_family(d, pass == 1, &ctx2, &q2);
      const struct fixture f = fixture_open(ctx, q);
      const size_t m = f.m, n = f.n, k = f.k;
      kiln_buffer *const b = f.b;
      const kiln_matrix ma = f.ma, mb = f.mb, mc = f.mc;
      kiln_packed *p = NULL, *pa = NULL;

      /* kiln_packed_create */
      assert_kiln_status(kiln_packed_create(NULL, KILN_OPERAND_B, &mb, &p),
                         KILN_ERR_NULL_POINTER);
      assert_kiln_status(kiln_packed_create(ctx, KILN_OPERAND_B, &mb, NULL),
                         KILN_ERR_NULL_POINTER);
      assert_kiln_status(kiln_packed_create(ctx, KILN_OPERAND_B, NULL, &p),
                         KILN_ERR_NULL_POINTER);
      assert_kiln_status(kiln_packed_create(ctx, (kiln_operand)2, &mb, &p),
                         KILN_ERR_INVALID_ARGUMENT);
      assert_last_error_contains("role 2");
      kiln_matrix bad = mb;
      bad.batch_stride = 5;
      assert_kiln_status(kiln_packed_create(ctx, KILN_OPERAND_B, &bad, &p),
                         KILN_ERR_INVALID_ARGUMENT);
      assert_last_error_contains("src.batch_stride");
      bad = mb;
      bad.rows = 0;
      assert_kiln_status(kiln_packed_create(ctx, KILN_OPERAND_B, &bad, &p),
                         KILN_ERR_INVALID_SIZE);
      bad = mb;
      bad.dtype = KILN_U32;
      assert_kiln_status(kiln_packed_create(ctx, KILN_OPERAND_B, &bad, &p),
                         KILN_ERR_INVALID_ARGUMENT);
      assert_last_error_contains("src.dtype");
      assert_null(p);

      assert_kiln_ok(kiln_packed_create(ctx, KILN_OPERAND_B, &mb, &p));
      assert_kiln_ok(kiln_packed_create(ctx, KILN_OPERAND_A, &ma, &pa));
      kiln_matrix xb, xa;
      assert_kiln_ok(kiln_packed_get_matrix(p, &xb));
      assert_kiln_ok(kiln_packed_get_matrix(pa, &xa));
      assert_kiln_status(kiln_packed_get_matrix(NULL, &xb),
                         KILN_ERR_NULL_POINTER);
      bad = mb;
      bad.packed = p;
      assert_kiln_status(kiln_packed_create(ctx, KILN_OPERAND_B, &bad, &p),
                         KILN_ERR_INVALID_ARGUMENT);
      assert_last_error_contains("src.packed");

      /* Used before it holds data. */
      assert_kiln_status(MM(&ma, &xb, &mc), KILN_ERR_INVALID_STATE);
      assert_last_error_contains("b.packed holds no data yet");

      /* kiln_pack */
      kiln_event *ev = (kiln_event *)&ev; /* must stay unchanged */
      kiln_event *const keep = ev;
      bad = mb;
      bad.cols = n - 1;
      assert_kiln_status(kiln_pack(q, &bad, p, 0, NULL, &ev),
                         KILN_ERR_SHAPE_MISMATCH);
      assert_last_error_contains("src (110 x 89 f32");
      bad = mb;
      bad.trans = KILN_TRANS;
      bad.rows = n;
      bad.cols = k;
      assert_kiln_status(kiln_pack(q, &bad, p, 0, NULL, &ev),
                         KILN_ERR_SHAPE_MISMATCH);
      bad = mb;
      bad.dtype = KILN_F16;
      assert_kiln_status(kiln_pack(q, &bad, p, 0, NULL, &ev),
                         KILN_ERR_SHAPE_MISMATCH);
      bad = mb;
      bad.offset = 1;
      assert_kiln_status(kiln_pack(q, &bad, p, 0, NULL, &ev),
                         KILN_ERR_OUT_OF_RANGE);
      assert_kiln_status(kiln_pack(q, &mb, NULL, 0, NULL, &ev),
                         KILN_ERR_NULL_POINTER);
      assert_kiln_status(kiln_pack(q2, &mb, p, 0, NULL, &ev),
                         KILN_ERR_WRONG_CONTEXT);
      assert_ptr_equal(ev, keep);
      assert_kiln_ok(kiln_pack(q, &mb, p, 0, NULL, NULL));
      assert_kiln_ok(kiln_pack(q, &ma, pa, 0, NULL, NULL));
      assert_kiln_ok(MM(&ma, &xb, &mc));
      assert_kiln_ok(MM(&xa, &xb, &mc));

      /* kiln_matmul */
      assert_kiln_status(MM(&xb, &mb, &mc), KILN_ERR_INVALID_ARGUMENT);
      assert_last_error_contains("a.packed was created as KILN_OPERAND_B");
      bad = xb;
      bad.cols = n + 1;
      assert_kiln_status(MM(&ma, &bad, &mc), KILN_ERR_SHAPE_MISMATCH);
      assert_last_error_contains("disagree");
      bad = xb;
      bad.trans = KILN_TRANS;
      assert_kiln_status(MM(&ma, &bad, &mc), KILN_ERR_SHAPE_MISMATCH);
      bad = xb;
      bad.buffer = b;
      assert_kiln_status(MM(&ma, &bad, &mc), KILN_ERR_INVALID_ARGUMENT);
      assert_last_error_contains("b.buffer is set beside b.packed");
      bad = xb;
      bad.ld = n + 3;
      assert_kiln_status(MM(&ma, &bad, &mc), KILN_ERR_INVALID_ARGUMENT);
      assert_last_error_contains("b.ld is set");
      {
        kiln_buffer *a2 = NULL, *c2 = NULL;
        assert_kiln_ok(
            kiln_buffer_create(ctx2, m * k * 4, KILN_MEM_READ_WRITE, &a2));
        assert_kiln_ok(
            kiln_buffer_create(ctx2, m * n * 4, KILN_MEM_READ_WRITE, &c2));
        kiln_matrix a2m = ma, c2m = mc;
        a2m.buffer = a2;
        c2m.buffer = c2;
        assert_kiln_status(
            kiln_matmul(q2, 1, &a2m, &xb, &c2m, NULL, 0, NULL, NULL),
            KILN_ERR_WRONG_CONTEXT);
        assert_last_error_contains("b.packed belongs to another context");
        assert_kiln_ok(kiln_buffer_destroy(a2));
        assert_kiln_ok(kiln_buffer_destroy(c2));
      }

      /* Other ops refuse packed descriptors by name. */
      kiln_matrix tx = xa,
                  ty = {.buffer = b, .rows = k, .cols = m, .dtype = KILN_F32};
      assert_kiln_status(kiln_transpose(q, &tx, &ty, 0, NULL, NULL),
                         KILN_ERR_INVALID_ARGUMENT);
      assert_last_error_contains("x.packed is set");
      assert_kiln_status(kiln_matmul(q, 1, &ma, &mb, &xb, NULL, 0, NULL, NULL),
                         KILN_ERR_INVALID_ARGUMENT);
      assert_last_error_contains("c.packed is set");

      /* Tuning that changes the register tile invalidates panels (CPU
       * family only: the GPU family's copies do not depend on it). */
      if (ctx->backend->tuning->family == KILN_FAMILY_CPU) {
        unsigned mr = 0, nr = 0;
        assert_kiln_ok(kiln__gemm_panel_width(ctx, KILN_OPERAND_A, &mr));
        assert_kiln_ok(kiln__gemm_panel_width(ctx, KILN_OPERAND_B, &nr));
        const unsigned other_mr = mr == 3 ? 5 : 3;
        kiln__gemm_set_cpu_tile(other_mr, nr, nr == 4 ? 4 : nr / 2, 0);
        assert_kiln_status(MM(&xa, &mb, &mc), KILN_ERR_INVALID_STATE);
        assert_last_error_contains("tuning now has MR");
        /* B's panels keep NR: still valid. kiln_pack repacks A for the
         * new tile; a fresh A packs for it too. */
        assert_kiln_ok(MM(&ma, &xb, &mc));
        assert_kiln_ok(kiln_pack(q, &ma, pa, 0, NULL, NULL));
        assert_kiln_ok(MM(&xa, &xb, &mc));
        kiln_packed *pa2 = NULL;
        kiln_matrix xa2;
        assert_kiln_ok(kiln_packed_create(ctx, KILN_OPERAND_A, &ma, &pa2));
        assert_kiln_ok(kiln_pack(q, &ma, pa2, 0, NULL, NULL));
        assert_kiln_ok(kiln_packed_get_matrix(pa2, &xa2));
        assert_kiln_ok(MM(&xa2, &xb, &mc));
        kiln__gemm_set_cpu_tile(0, 0, 0, 0);
        assert_kiln_status(MM(&xa2, &mb, &mc), KILN_ERR_INVALID_STATE);
        assert_kiln_status(MM(&xa, &mb, &mc), KILN_ERR_INVALID_STATE);
        assert_kiln_ok(kiln_pack(q, &ma, pa, 0, NULL, NULL));
        assert_kiln_ok(MM(&xa, &mb, &mc));
        assert_kiln_ok(kiln_packed_destroy(pa2));
      }
      assert_kiln_ok(kiln_queue_finish(q));
      assert_kiln_ok(kiln_packed_destroy(p));
      assert_kiln_ok(kiln_packed_destroy(pa));
      assert_kiln_ok(kiln_packed_destroy(NULL));
      fixture_close(&f);
      kiln_test_close(ctx2, q2);
      kiln_test_close(ctx, q);
    }
  }
}

/* A recorded sequence that packs and reads a packed matrix keeps it alive
 * (kiln_packed_destroy is KILN_ERR_BUSY until the sequence is gone) and
 * replays to the same bits as the calls run directly. */
static void test_sequence(void **state) {
  (void)state;
  FOR_EACH_TEST_DEVICE(d) {
    kiln_context *ctx = NULL;
    kiln_queue *q = NULL;
    kiln_test_open(d, &ctx, &q);
    const struct fixture f = fixture_open(ctx, q);
    const size_t m = f.m, n = f.n;
    kiln_buffer *const c = f.c;
    const kiln_matrix ma = f.ma, mb = f.mb, mc = f.mc;
    assert_kiln_ok(kiln_matmul(q, 1, &ma, &mb, &mc, NULL, 0, NULL, NULL));
    float *want = util_download(q, c, KILN_F32, m * n);
    kiln_packed *p = NULL;
    kiln_matrix xb;
    assert_kiln_ok(kiln_packed_create(ctx, KILN_OPERAND_B, &mb, &p));
    assert_kiln_ok(kiln_packed_get_matrix(p, &xb));
    kiln_sequence *seq = NULL;
    assert_kiln_ok(kiln_sequence_begin(q, 0, &seq));
    assert_kiln_ok(kiln_pack(q, &mb, p, 0, NULL, NULL));
    assert_kiln_ok(kiln_matmul(q, 1, &ma, &xb, &mc, NULL, 0, NULL, NULL));
    assert_kiln_ok(kiln_sequence_end(seq));
    assert_kiln_status(kiln_packed_destroy(p), KILN_ERR_BUSY);
    assert_last_error_contains("recorded sequences still use");
    const float nan = NAN;
    assert_kiln_ok(
        kiln_fill(q, range_of(c, 0, m * n, KILN_F32), &nan, 0, NULL, NULL));
    assert_kiln_ok(kiln_sequence_replay(seq, 0, NULL, NULL));
    float *got = util_download(q, c, KILN_F32, m * n);
    assert_memory_equal(got, want, m * n * 4);
    assert_kiln_ok(kiln_sequence_destroy(seq));
    assert_kiln_ok(kiln_packed_destroy(p));
    free(got);
    free(want);
    fixture_close(&f);
    kiln_test_close(ctx, q);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cases),    cmocka_unit_test(test_cases_no_skinny),
      cmocka_unit_test(test_k_chunks), cmocka_unit_test(test_errors),
      cmocka_unit_test(test_sequence),
  };
  return KILN_TEST_RUN("op_gemm_packed", tests, true);
}
