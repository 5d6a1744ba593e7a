/* ops.c: names of op kinds, for messages. */
#include "config.h"

#include <trainbig/ops.h>

const char *tb_op_kind_name(enum tb_op_kind kind)
{
    static const char *const names[TB_OP_KIND_COUNT] = {
        [TB_OP_CONV2D] = "conv2d",
        [TB_OP_BATCHNORM] = "batchnorm",
        [TB_OP_RELU] = "relu",
        [TB_OP_SIGMOID] = "sigmoid",
        [TB_OP_MAXPOOL] = "maxpool",
        [TB_OP_GLOBAL_AVGPOOL] = "global_avgpool",
        [TB_OP_RESIZE] = "resize",
        [TB_OP_CONCAT] = "concat",
        [TB_OP_ADD] = "add",
        [TB_OP_MUL] = "mul",
        [TB_OP_DROPOUT] = "dropout",
        [TB_OP_SOFTMAX_CE] = "softmax_ce",
        [TB_OP_BCE_LOGITS] = "bce_logits",
    };
    return (int)kind > 0 && kind < TB_OP_KIND_COUNT ? names[kind] : NULL;
}
