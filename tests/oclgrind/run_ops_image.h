/* run_ops.c's group "image": pooling and batch normalisation
 * (run_ops_image.c). */
#ifndef KILN_RUN_OPS_IMAGE_H
#define KILN_RUN_OPS_IMAGE_H

#include "run_ops_util.h"

void run_image(void);

#endif
