/* train_options.h: the command line of train_fashion_mnist.c (its options
 * are listed there and by --help), parsed into one struct. */
#ifndef TRAIN_OPTIONS_H
#define TRAIN_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kiln/kiln.h>

#include "model.h"


typedef struct train_options {
  const char *device, *data, *export_dir;
  int epochs;
  kiln_dtype precision;
  const model_kind *kind;
  model_hyper hyper;
  size_t batch, hidden, limit, test_limit, max_steps, bench_runs;
  uint64_t seed;
  bool print_losses;
  bool cosine; /* --schedule cosine */
  double expect_accuracy;
} train_options;

/* Parse argv into *o, every option not given at its default. Returns 0; -1
 * after printing --help on stdout (exit 0); or 2 after a usage error on
 * stderr (the reason, then where to look). */
int train_parse_args(int argc, char **argv, train_options *o);

#endif
