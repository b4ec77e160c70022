/* What the compiled snippets of the documents name without declaring:
 * tests/check_docs.py compiles each one as a function body after this. The
 * names are the documents' own; nothing here is defined or run. */
#include <stdint.h>
#include <stdio.h>
#include <kiln/kiln.h>

extern kiln_context *ctx;
extern kiln_queue *q, *qa, *qb, *queue;
extern kiln_kernel *kernel;
extern kiln_event *done;
extern kiln_buffer *abuf, *bbuf, *cbuf, *gbuf, *hbuf, *ibuf, *sbuf, *wbuf,
    *xbuf, *ybuf, *zbuf, *lbuf, *lossbuf, *params, *grads, *adam_m, *adam_v,
    *grad_buf;
extern size_t n, m, k, M, N, K, lda, ldb, ldc, batch, count, n_params;
extern uint64_t t;
extern float alpha, beta;
extern kiln_trans ta, tb;
extern kiln_layout layout;
extern const float *a, *b, *x;
extern float *c;
extern float *host;
extern kiln_range in, out;
/* docs/tracing.md's log handler, defined in the page's text. */
void to_app_log(kiln_log_level level, const char *message, void *user_data);
