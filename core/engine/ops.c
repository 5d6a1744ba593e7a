/* ops.c: facts about each op kind besides its shape rule (op_rules.c): its name, which
 * inputs and outputs carry a gradient, and what its backward reads. */
#include "config.h"

#include <trainbig/ops.h>

#include "core/engine/graph_internal.h"

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
        [TB_OP_CLASS_WEIGHTS] = "class_weights",
        [TB_OP_MASK_LABELS] = "mask_labels",
        [TB_OP_DUAL_TASK] = "dual_task",
    };
    return (int)kind > 0 && kind < TB_OP_KIND_COUNT ? names[kind] : NULL;
}

void tb_op_backward_reads(const struct tb_op *op, uint32_t *inputs, uint32_t *outputs)
{
    uint32_t in = 0, out = 0;
    switch (op->kind) {
    case TB_OP_CONV2D:
        in = 0x3; /* x, weight */
        break;
    case TB_OP_BATCHNORM:
        in = 0x3;  /* x, gamma */
        out = 0x6; /* save_mean, save_invstd */
        break;
    case TB_OP_RELU:
    case TB_OP_SIGMOID:
        out = 0x1;
        break;
    case TB_OP_MAXPOOL:
        in = 0x1;
        out = 0x1;
        break;
    case TB_OP_MUL:
        in = 0x3;
        break;
    case TB_OP_DROPOUT:
        out = 0x2; /* the mask */
        break;
    case TB_OP_SOFTMAX_CE:
        in = (1u << op->nin) - 1; /* logits, labels, weights */
        break;
    case TB_OP_BCE_LOGITS:
        in = 0x3;
        break;
    case TB_OP_DUAL_TASK:
        in = 0x2;  /* labels */
        out = 0x2; /* the sample */
        break;
    default: /* global_avgpool, resize, concat, add: shapes only; class_weights,
              * mask_labels: no backward */
        break;
    }
    *inputs = in;
    *outputs = out;
}

uint32_t tb_op_grad_inputs(const struct tb_op *op)
{
    switch (op->kind) {
    case TB_OP_BATCHNORM:
        return 0x7; /* x, gamma, beta: not the running statistics */
    case TB_OP_CONV2D:
    case TB_OP_CONCAT:
    case TB_OP_ADD:
    case TB_OP_MUL:
        return (1u << op->nin) - 1;
    case TB_OP_CLASS_WEIGHTS:
    case TB_OP_MASK_LABELS:
        return 0; /* not differentiable */
    default:
        return 0x1; /* x or logits only: labels, targets, weights carry no gradient */
    }
}

uint32_t tb_op_grad_outputs(const struct tb_op *op)
{
    (void)op;
    return 0x1; /* only the first output: saved statistics and masks carry none */
}
