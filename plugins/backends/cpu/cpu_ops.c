/* backends/cpu/cpu_ops.c: routes each op kind to its kernel row. */
#include <stdio.h>
#include <stdlib.h>

#include "cpu_internal.h"

static const struct tb_cpu_kernel *kernel_of(enum tb_op_kind kind)
{
    switch (kind) {
    case TB_OP_CONV2D:
        return &tb_cpu_conv2d_kernel;
    case TB_OP_BATCHNORM:
        return &tb_cpu_batchnorm_kernel;
    case TB_OP_RELU:
        return &tb_cpu_relu_kernel;
    case TB_OP_SIGMOID:
        return &tb_cpu_sigmoid_kernel;
    case TB_OP_MAXPOOL:
        return &tb_cpu_maxpool_kernel;
    case TB_OP_GLOBAL_AVGPOOL:
        return &tb_cpu_avgpool_kernel;
    case TB_OP_RESIZE:
        return &tb_cpu_resize_kernel;
    case TB_OP_CONCAT:
        return &tb_cpu_concat_kernel;
    case TB_OP_ADD:
        return &tb_cpu_add_kernel;
    case TB_OP_MUL:
        return &tb_cpu_mul_kernel;
    case TB_OP_DROPOUT:
        return &tb_cpu_dropout_kernel;
    case TB_OP_SOFTMAX_CE:
        return &tb_cpu_softmax_ce_kernel;
    case TB_OP_BCE_LOGITS:
        return &tb_cpu_bce_logits_kernel;
    case TB_OP_CLASS_WEIGHTS:
        return &tb_cpu_class_weights_kernel;
    case TB_OP_MASK_LABELS:
        return &tb_cpu_mask_labels_kernel;
    case TB_OP_KIND_COUNT:
        break;
    }
    return NULL;
}

/* The state the core holds: which kernel made it, and the kernel's own. */
struct op_state {
    const struct tb_cpu_kernel *k;
    void *inner;
};

int tb_cpu_op_prepare(struct tb_cpu *cpu, const struct tb_op *op, void **state, struct tb_err *err)
{
    *state = NULL;
    const struct tb_cpu_kernel *k = kernel_of(op->kind);
    if (!k || !k->forward)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u: the cpu backend has no %s kernel", op->id,
                          tb_op_kind_name(op->kind) ? tb_op_kind_name(op->kind) : "such");
    struct op_state *s = calloc(1, sizeof *s);
    if (!s)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    s->k = k;
    if (k->prepare) {
        int rc = k->prepare(cpu, op, &s->inner, err);
        if (rc) {
            free(s);
            return rc;
        }
    }
    *state = s;
    return TB_OK;
}

void tb_cpu_op_release(void *state)
{
    struct op_state *s = state;
    if (!s)
        return;
    if (s->k->release)
        s->k->release(s->inner);
    free(s);
}

void tb_cpu_op_describe(const struct tb_cpu *cpu, const void *state, char *buf, size_t size)
{
    const struct op_state *s = state;
    if (!size)
        return;
    buf[0] = '\0';
    if (s && s->k == &tb_cpu_conv2d_kernel)
        tb_cpu_conv_describe(cpu, s->inner, buf, size);
    else
        snprintf(buf, size, "%s", tb_cpu_isa_name(cpu->isa));
}

int tb_cpu_op_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                      const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    struct op_state *s = state;
    return s->k->forward(cpu, op, s->inner, step, in, out, err);
}

int tb_cpu_op_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                       const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                       struct tb_err *err)
{
    struct op_state *s = state;
    if (!s->k->backward)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u: the cpu backend has no backward for %s", op->id,
                          tb_op_kind_name(op->kind));
    return s->k->backward(cpu, op, s->inner, in, out, dout, din, err);
}
