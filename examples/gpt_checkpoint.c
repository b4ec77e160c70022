/* gpt_checkpoint.c: llm.c's GPT-2 checkpoint files for gpt.h's model:
 * a 256-int header (magic, version 3, maxT, V, L, NH, C, Vp), then the
 * parameters in f32, in gpt.c's layout. */
#include "gpt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int32_t MAGIC = 20240326, VERSION = 3;
enum { HEADER_INTS = 256 };

static int fail_io(char *err, size_t n, const char *path, const char *what) {
  snprintf(err, n, "%s: %s", path, what);
  return -1;
}

int gpt_read_header(const char *path, gpt_config *cfg, char *err,
                    size_t err_size) {
  int32_t h[HEADER_INTS];
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, err_size, "%s: cannot open: %s", path, strerror(errno));
    return -1;
  }
  size_t got = fread(h, sizeof h[0], HEADER_INTS, f);
  fclose(f);
  if (got != HEADER_INTS)
    return fail_io(err, err_size, path,
                   "truncated: shorter than llm.c's 1024-byte header");
  if (h[0] != MAGIC) {
    snprintf(err, err_size, "%s: not an llm.c GPT-2 checkpoint (magic %d, "
             "expected %d)", path, (int)h[0], (int)MAGIC);
    return -1;
  }
  if (h[1] != VERSION) {
    snprintf(err, err_size, "%s: llm.c checkpoint version %d; this program "
             "reads version %d (f32 parameters, padded vocabulary)", path,
             (int)h[1], (int)VERSION);
    return -1;
  }
  for (int i = 2; i <= 7; i++)
    if (h[i] <= 0)
      return fail_io(err, err_size, path, "a size in the header is not "
                     "positive");
  *cfg = (gpt_config){.max_seq = (size_t)h[2], .vocab = (size_t)h[3],
                      .layers = (size_t)h[4], .heads = (size_t)h[5],
                      .channels = (size_t)h[6], .padded_vocab = (size_t)h[7]};
  if (cfg->padded_vocab < cfg->vocab || cfg->channels % cfg->heads)
    return fail_io(err, err_size, path, "inconsistent header (padded "
                   "vocabulary below the vocabulary, or heads not dividing "
                   "channels)");
  return 0;
}

int gpt_load(gpt *m, const char *path, char *err, size_t err_size) {
  gpt_config cfg;
  if (gpt_read_header(path, &cfg, err, err_size) != 0)
    return -1;
  if (memcmp(&cfg, &m->cfg, sizeof cfg) != 0) {
    snprintf(err, err_size, "%s: its model (maxT %zu, V %zu, L %zu, heads %zu,"
             " C %zu) is not the one asked for (maxT %zu, V %zu, L %zu, heads "
             "%zu, C %zu)", path, cfg.max_seq, cfg.vocab, cfg.layers,
             cfg.heads, cfg.channels, m->cfg.max_seq, m->cfg.vocab,
             m->cfg.layers, m->cfg.heads, m->cfg.channels);
    return -1;
  }
  float *host = malloc(m->nparams * sizeof *host);
  FILE *f = fopen(path, "rb");
  int rc = -1;
  if (!host || !f) {
    snprintf(err, err_size, "%s: %s", path,
             host ? strerror(errno) : "out of host memory");
    goto out;
  }
  if (fseek(f, HEADER_INTS * sizeof(int32_t), SEEK_SET) != 0 ||
      fread(host, sizeof *host, m->nparams, f) != m->nparams) {
    snprintf(err, err_size, "%s: truncated: the header promises %zu "
             "parameters", path, m->nparams);
    goto out;
  }
  if (fgetc(f) != EOF) {
    snprintf(err, err_size, "%s: longer than its header's %zu parameters",
             path, m->nparams);
    goto out;
  }
  if (kiln_buffer_write_sync(m->queue, host,
                             &(kiln_range){m->params, 0, m->nparams,
                                           KILN_F32}) != KILN_OK ||
      gpt_reset_optimizer(m) != KILN_OK) {
    snprintf(err, err_size, "%s: %s", path, kiln_last_error());
    goto out;
  }
  rc = 0;
out:
  if (f)
    fclose(f);
  free(host);
  return rc;
}

int gpt_save(gpt *m, const char *path, char *err, size_t err_size) {
  int32_t h[HEADER_INTS] = {MAGIC,
                            VERSION,
                            (int32_t)m->cfg.max_seq,
                            (int32_t)m->cfg.vocab,
                            (int32_t)m->cfg.layers,
                            (int32_t)m->cfg.heads,
                            (int32_t)m->cfg.channels,
                            (int32_t)m->cfg.padded_vocab};
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  float *host = malloc(m->nparams * sizeof *host);
  FILE *f = NULL;
  int rc = -1;
  if (!host) {
    snprintf(err, err_size, "%s: out of host memory", path);
    goto out;
  }
  if (kiln_buffer_read_sync(m->queue,
                            &(kiln_range){m->params, 0, m->nparams, KILN_F32},
                            host) != KILN_OK) {
    snprintf(err, err_size, "%s: %s", path, kiln_last_error());
    goto out;
  }
  f = fopen(tmp, "wb");
  if (!f || fwrite(h, sizeof h[0], HEADER_INTS, f) != HEADER_INTS ||
      fwrite(host, sizeof *host, m->nparams, f) != m->nparams) {
    snprintf(err, err_size, "%s: cannot write: %s", tmp, strerror(errno));
    goto out;
  }
  int closed = fclose(f);
  f = NULL;
  if (closed != 0 || rename(tmp, path) != 0) {
    snprintf(err, err_size, "%s: cannot write: %s", path, strerror(errno));
    remove(tmp);
    goto out;
  }
  rc = 0;
out:
  if (f) {
    fclose(f);
    remove(tmp);
  }
  free(host);
  return rc;
}
