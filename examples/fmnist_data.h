/* fmnist_data.h: Fashion-MNIST from the gzip'd IDX files that Debian's
 * package dataset-fashion-mnist installs in /usr/share/datasets/fashion-mnist
 * (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz and the t10k-
 * pair), decompressed with zlib, and the batches the trainer makes of them.
 * Used by train_fashion_mnist.c; kept apart so that its error paths can be
 * tested on their own. */
#ifndef FMNIST_DATA_H
#define FMNIST_DATA_H

#include <stddef.h>
#include <stdint.h>

#define FMNIST_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
#define FMNIST_PACKAGE "dataset-fashion-mnist"
enum { FMNIST_ROWS = 28, FMNIST_COLS = 28, FMNIST_PIXELS = 784,
       FMNIST_CLASSES = 10 };

/* One split: count images of FMNIST_PIXELS bytes (row-major, 0..255) and
 * count labels in 0..9. */
typedef struct fmnist_set {
  size_t count;
  uint8_t *images;
  uint8_t *labels;
} fmnist_set;

/* Load split "train" or "t10k" from dir (the two files
 * <split>-images-idx3-ubyte.gz and <split>-labels-idx1-ubyte.gz), keeping the
 * first limit examples (0: all). Returns 0 on success; otherwise -1 with a
 * sentence in err (the file and what is wrong with it: missing, with the
 * package to install; truncated; a wrong magic number; mismatched counts or
 * sizes; a label out of range) and *out left empty. */
int fmnist_load(const char *dir, const char *split, size_t limit,
                fmnist_set *out, char *err, size_t err_size);

void fmnist_free(fmnist_set *set);

/* Fisher-Yates shuffle of 0..n-1 into order for one epoch, from the seed
 * and the epoch's number alone (splitmix64 on the host; the weights come
 * from kiln's Philox op). */
void fmnist_shuffle(uint32_t *order, size_t n, uint64_t seed, int epoch);

/* Pixels as f32 in [0, 1] into x (rows x FMNIST_PIXELS) and labels as u32,
 * for examples idx[0..rows) of set. */
void fmnist_stage(const fmnist_set *set, const uint32_t *idx, size_t rows,
                  float *x, uint32_t *labels);

#endif
