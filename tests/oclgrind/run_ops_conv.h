/* run_ops.c's group "conv": the convolution (run_ops_conv.c). */
#ifndef KILN_RUN_OPS_CONV_H
#define KILN_RUN_OPS_CONV_H

#include "run_ops_util.h"

void run_conv(void);

#endif
