/* The multi-device room's interface (runtime/multi/): the device set shared
 * by device_set.c, multi_ops.c and peer_copy.c. Above the op library: it
 * runs ops, nothing below calls it. Not installed. */
#ifndef KILN_MULTI_INTERNAL_H
#define KILN_MULTI_INTERNAL_H

#include "core/internal.h"

/* Devices a set holds at most (fixed-size scratch in the split ops). */
#define KILN__MULTI_MAX 64

struct kiln_device_set {
  size_t count;
  struct {
    kiln_context *ctx;
    kiln_queue *queue;
    double weight;
  } dev[];
};

#endif
