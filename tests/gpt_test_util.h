/* The tiny GPT-2 of tests/fixtures/gpt (make_gpt_fixtures.py) for the tests
 * that run examples/gpt.c: the fixture files, the model loaded from its
 * llm.c checkpoint, and the 10 AdamW steps PyTorch took in float64. Include
 * after harness.h and ../examples/gpt.h, with GPT_FIXTURES defined. */
#ifndef KILN_GPT_TEST_UTIL_H
#define KILN_GPT_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#ifndef GPT_FIXTURES
#error "GPT_FIXTURES must name tests/fixtures/gpt"
#endif

/* The fixture's batch and the number of AdamW steps it recorded. */
enum { GPT_B = 2, GPT_T = 11, GPT_STEPS = 10 };

static void gpt_fixture_path(char *path, size_t n, const char *name) {
  snprintf(path, n, "%s/%s", GPT_FIXTURES, name);
}

/* A fixture file of float64 values; *count of them. Free it. */
static double *gpt_read_doubles(const char *name, size_t *count) {
  char path[4096];
  gpt_fixture_path(path, sizeof path, name);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long bytes = ftell(f);
  fseek(f, 0, SEEK_SET);
  double *v = malloc((size_t)bytes);
  assert_non_null(v);
  assert_int_equal(fread(v, 1, (size_t)bytes, f), (size_t)bytes);
  fclose(f);
  *count = (size_t)bytes / sizeof *v;
  return v;
}

/* The batch of the token file: B T inputs and targets. */
static void gpt_read_batch(uint32_t *in, uint32_t *target) {
  char path[4096];
  gpt_fixture_path(path, sizeof path, "gpt_tiny_tokens.bin");
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  int32_t header[256];
  uint16_t tok[GPT_B * GPT_T + 1];
  assert_int_equal(fread(header, sizeof header, 1, f), 1);
  assert_int_equal(header[0], 20240520);
  assert_int_equal(header[2], GPT_B * GPT_T + 1);
  assert_int_equal(fread(tok, sizeof tok[0], GPT_B * GPT_T + 1, f),
                   GPT_B * GPT_T + 1);
  fclose(f);
  for (int i = 0; i < GPT_B * GPT_T; i++) {
    in[i] = tok[i];
    target[i] = tok[i + 1];
  }
}

/* Test device d with the fixture's checkpoint loaded and its batch
 * written, in dtype dt. */
static void gpt_open_model(size_t d, kiln_dtype dt, kiln_context **ctx,
                           kiln_queue **q, gpt **m) {
  char path[4096], err[4400];
  gpt_config cfg;
  gpt_fixture_path(path, sizeof path, "gpt_tiny.ckpt");
  kiln_test_open(d, ctx, q);
  assert_int_equal(gpt_read_header(path, &cfg, err, sizeof err), 0);
  assert_kiln_ok(gpt_create(*ctx, *q, &cfg, GPT_B, GPT_T, dt, m));
  if (gpt_load(*m, path, err, sizeof err) != 0)
    fail_msg("%s", err);
  uint32_t in[GPT_B * GPT_T], target[GPT_B * GPT_T];
  gpt_read_batch(in, target);
  assert_kiln_ok(kiln_buffer_write_sync(
      *q, in, &(kiln_range){(*m)->tokens, 0, GPT_B * GPT_T, KILN_U32}));
  assert_kiln_ok(kiln_buffer_write_sync(
      *q, target, &(kiln_range){(*m)->targets, 0, GPT_B * GPT_T, KILN_U32}));
}

static float gpt_read_scalar(gpt *m, size_t at) {
  float v;
  assert_kiln_ok(kiln_buffer_read_sync(
      m->queue, &(kiln_range){m->scalars, at, 1, KILN_F32}, &v));
  return v;
}

/* The fixture's 10 AdamW steps on its one batch (lr 1e-4, betas 0.9 and
 * 0.999, eps 1e-8, weight decay 0.01, no clipping): the loss before each
 * step, into losses[GPT_STEPS]. */
static void gpt_adamw_losses(gpt *m, double *losses) {
  for (int s = 0; s < GPT_STEPS; s++) {
    assert_kiln_ok(gpt_forward(m, GPT_B, GPT_T, true));
    assert_kiln_ok(gpt_backward(m, GPT_B, GPT_T));
    losses[s] = gpt_read_scalar(m, 0);
    assert_kiln_ok(gpt_update(m, 1e-4f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.0f));
  }
}

#endif
