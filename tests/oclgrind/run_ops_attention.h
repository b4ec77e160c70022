/* run_ops.c's group "attention": the attention ops (run_ops_attention.c). */
#ifndef KILN_RUN_OPS_ATTENTION_H
#define KILN_RUN_OPS_ATTENTION_H

#include "run_ops_util.h"

void run_attention(void);

#endif
