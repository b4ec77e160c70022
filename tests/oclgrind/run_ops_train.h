/* run_ops.c's group "train": the training ops (run_ops_train.c). */
#ifndef KILN_RUN_OPS_TRAIN_H
#define KILN_RUN_OPS_TRAIN_H

#include "run_ops_util.h"

void run_train(void);

#endif
