/* The unfused float64 attention the attention tests compare with
 * (tests/test_op_attention.c, tests/oclgrind/run_ops_attention.c): the
 * forward pass, its gradient, and the error bounds of the f32 kernels
 * (derived in test_op_attention.c's header comment). Header-only, no test
 * framework needed. */
#ifndef KILN_ATTENTION_REF_H
#define KILN_ATTENTION_REF_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AREF_U 0x1p-24

/* n zeroed doubles; a test cannot go on without them. */
static inline double *aref_doubles(size_t n) {
  double *p = calloc(n ? n : 1, sizeof *p);
  if (p == NULL) {
    fprintf(stderr, "attention_ref: out of memory\n");
    exit(1);
  }
  return p;
}

/* One problem: q, k, v of every (b, h) as doubles, [b][h][t][c]. */
struct aref_prob {
  size_t B, H, T, d;
  bool causal;
  double scale;
  double *q, *k, *v, *dout;
};
#define AREF_IX(p, b, h, t, c)                                                 \
  ((((b) * (p)->H + (h)) * (p)->T + (t)) * (p)->d + (c))

static inline size_t aref_nkeys(const struct aref_prob *p, size_t i) {
  return p->causal ? i + 1 : p->T;
}

/* out, lse exactly; tol_o, tol_l their bounds. Any output may be NULL. */
static inline void aref_forward(const struct aref_prob *p, double *out,
                                double *lse, double *tol_o, double *tol_l) {
  double *s = aref_doubles(p->T);
  for (size_t b = 0; b < p->B; b++)
    for (size_t h = 0; h < p->H; h++)
      for (size_t i = 0; i < p->T; i++) {
        size_t n = aref_nkeys(p, i);
        double m = -INFINITY, sabs = 0, l = 0;
        for (size_t j = 0; j < n; j++) {
          double acc = 0, aa = 0;
          for (size_t c = 0; c < p->d; c++) {
            acc += p->q[AREF_IX(p, b, h, i, c)] * p->k[AREF_IX(p, b, h, j, c)];
            aa += fabs(p->q[AREF_IX(p, b, h, i, c)] *
                       p->k[AREF_IX(p, b, h, j, c)]);
          }
          s[j] = acc * p->scale;
          sabs = fmax(sabs, aa * p->scale);
          m = fmax(m, s[j]);
        }
        for (size_t j = 0; j < n; j++)
          l += exp(s[j] - m);
        double rel = 2 * ((double)p->d + 2) * AREF_U * sabs +
                     (2 * (double)n + 16) * AREF_U;
        size_t row = (b * p->H + h) * p->T + i;
        if (lse)
          lse[row] = m + log(l);
        if (tol_l)
          tol_l[row] =
              2 * (((double)p->d + 2) * AREF_U * sabs +
                   ((double)n + 8) * AREF_U + AREF_U * fabs(m + log(l)));
        for (size_t c = 0; c < p->d; c++) {
          double o = 0, a = 0;
          for (size_t j = 0; j < n; j++) {
            double pj = exp(s[j] - m) / l;
            o += pj * p->v[AREF_IX(p, b, h, j, c)];
            a += pj * fabs(p->v[AREF_IX(p, b, h, j, c)]);
          }
          if (out)
            out[AREF_IX(p, b, h, i, c)] = o;
          if (tol_o)
            tol_o[AREF_IX(p, b, h, i, c)] = 2 * rel * a;
        }
      }
  free(s);
}

/* Gradients dq, dk, dv of L = sum dout . out, exactly, and their bounds
 * (tol_o: the forward's bound on out as stored, storage rounding included;
 * tol_l on lse). */
static inline void aref_backward(const struct aref_prob *p, const double *tol_o,
                                 const double *tol_l, double *dq, double *dk,
                                 double *dv, double *tq, double *tk,
                                 double *tv) {
  size_t T = p->T, d = p->d;
  double *out = aref_doubles(p->B * p->H * T * d),
         *lse = aref_doubles(p->B * p->H * T);
  aref_forward(p, out, lse, NULL, NULL);
  size_t n4 = p->B * p->H * T * d;
  memset(dq, 0, n4 * sizeof *dq);
  memset(dk, 0, n4 * sizeof *dk);
  memset(dv, 0, n4 * sizeof *dv);
  memset(tq, 0, n4 * sizeof *tq);
  memset(tk, 0, n4 * sizeof *tk);
  memset(tv, 0, n4 * sizeof *tv);
  for (size_t b = 0; b < p->B; b++)
    for (size_t h = 0; h < p->H; h++)
      for (size_t i = 0; i < T; i++) {
        size_t row = (b * p->H + h) * T + i, n = aref_nkeys(p, i);
        double D = 0, dD = 0;
        for (size_t c = 0; c < d; c++) {
          double g = p->dout[AREF_IX(p, b, h, i, c)],
                 o = out[AREF_IX(p, b, h, i, c)];
          D += g * o;
          dD += fabs(g) * tol_o[AREF_IX(p, b, h, i, c)] +
                ((double)d + 2) * AREF_U * fabs(g * o);
        }
        double sabs = 0;
        for (size_t j = 0; j < n; j++) {
          double aa = 0;
          for (size_t c = 0; c < d; c++)
            aa += fabs(p->q[AREF_IX(p, b, h, i, c)] *
                       p->k[AREF_IX(p, b, h, j, c)]);
          sabs = fmax(sabs, aa * p->scale);
        }
        double prel =
            2 * ((double)d + 2) * AREF_U * sabs + tol_l[row] + 4 * AREF_U;
        for (size_t j = 0; j < n; j++) {
          double s = 0, dp = 0, adp = 0;
          for (size_t c = 0; c < d; c++) {
            s += p->q[AREF_IX(p, b, h, i, c)] * p->k[AREF_IX(p, b, h, j, c)];
            dp +=
                p->dout[AREF_IX(p, b, h, i, c)] * p->v[AREF_IX(p, b, h, j, c)];
            adp += fabs(p->dout[AREF_IX(p, b, h, i, c)] *
                        p->v[AREF_IX(p, b, h, j, c)]);
          }
          double pj = exp(s * p->scale - lse[row]);
          double ds = pj * (dp - D);
          double eds = pj * (prel * (fabs(dp) + fabs(D)) +
                             ((double)d + 2) * AREF_U * adp + dD);
          double cn = ((double)n + 2) * AREF_U, cm = ((double)T + 2) * AREF_U;
          for (size_t c = 0; c < d; c++) {
            double qc = p->q[AREF_IX(p, b, h, i, c)],
                   kc = p->k[AREF_IX(p, b, h, j, c)];
            double gc = p->dout[AREF_IX(p, b, h, i, c)];
            dq[AREF_IX(p, b, h, i, c)] += p->scale * ds * kc;
            tq[AREF_IX(p, b, h, i, c)] +=
                p->scale * fabs(kc) * (eds + cn * fabs(ds));
            dk[AREF_IX(p, b, h, j, c)] += p->scale * ds * qc;
            tk[AREF_IX(p, b, h, j, c)] +=
                p->scale * fabs(qc) * (eds + cm * fabs(ds));
            dv[AREF_IX(p, b, h, j, c)] += pj * gc;
            tv[AREF_IX(p, b, h, j, c)] += fabs(gc) * pj * (prel + cm);
          }
        }
      }
  for (size_t e = 0; e < n4; e++) {
    tq[e] *= 2;
    tk[e] *= 2;
    tv[e] *= 2;
  }
  free(out);
  free(lse);
}

#endif
