/* op_cost.c: what an op costs, from its shapes (trainbig/ops.h, tb_op_cost): the FLOPs of
 * its arithmetic and the bytes its kernels must move, forward and backward, per kind.
 *
 * FLOPs count a multiply and an add as 2; a comparison, an exp or a division as 1 (a
 * device model prices the kinds apart anyway, with an efficiency each). Bytes are each
 * tensor read or written once in a pass, at its dtype's size: what a kernel cannot avoid,
 * not what caches make of it. Where an op makes more than one pass over a tensor (batch
 * norm's statistics, then its normalisation), each pass counts. */
#include "config.h"

#include <stdbool.h>
#include <string.h>
#include <trainbig/ops.h>

static double elems(const struct tb_tensor_desc *d)
{
    return (double)tb_shape_elems(d->shape);
}

static double bytes(const struct tb_tensor_desc *d)
{
    return elems(d) * (double)tb_dtype_size(d->dtype);
}

/* Every input and output once: the least any kernel of the op moves. */
static double all_bytes(const struct tb_op *op)
{
    double b = 0;
    for (uint32_t i = 0; i < op->nin; i++)
        b += bytes(&op->in[i]);
    for (uint32_t j = 0; j < op->nout; j++)
        b += bytes(&op->out[j]);
    return b;
}

static bool wanted(uint32_t grads, uint32_t i)
{
    return (grads >> i) & 1u;
}

/* The inputs' gradients that are wanted, written once each (f32, as their inputs). */
static double grad_bytes(const struct tb_op *op, uint32_t grads)
{
    double b = 0;
    for (uint32_t i = 0; i < op->nin; i++)
        if (wanted(grads, i))
            b += bytes(&op->in[i]);
    return b;
}

void tb_op_cost(const struct tb_op *op, uint32_t grads, struct tb_op_cost *c)
{
    memset(c, 0, sizeof *c);
    const struct tb_tensor_desc *x = &op->in[0], *y = &op->out[0];
    const double nx = elems(x), ny = op->nout ? elems(y) : 0;
    c->fwd_bytes = all_bytes(op);
    switch (op->kind) {
    case TB_OP_CONV2D: {
        /* each output: C x KH x KW multiply-adds; backward: as many again for the data's
         * gradient and for the weight's */
        const double macs = ny * x->shape.c * op->p.conv.kh * op->p.conv.kw;
        c->fwd_flops = 2 * macs + (op->p.conv.has_bias ? ny : 0);
        c->bwd_flops = (wanted(grads, 0) ? 2 * macs : 0) + (wanted(grads, 1) ? 2 * macs : 0) +
                       (op->p.conv.has_bias && wanted(grads, 2) ? ny : 0);
        /* reads x, the weight and dy; writes the gradients wanted */
        c->bwd_bytes = bytes(x) + bytes(&op->in[1]) + bytes(y) + grad_bytes(op, grads);
        break;
    }
    case TB_OP_BATCHNORM:
        /* training: a pass for the statistics (a sum and a sum of squares), then one to
         * normalise (a multiply-add per element); backward: a pass for its two sums over
         * dy and dy * x-hat, then one to write dx */
        c->fwd_flops = op->p.bn.training ? 6 * nx : 2 * nx;
        c->fwd_bytes += op->p.bn.training ? bytes(x) : 0;
        c->bwd_flops = 8 * nx;
        c->bwd_bytes = 2 * bytes(x) + 2 * bytes(y) + grad_bytes(op, grads);
        break;
    case TB_OP_RELU:
        c->fwd_flops = nx;
        c->bwd_flops = nx;
        c->bwd_bytes = 2 * bytes(y) + grad_bytes(op, grads); /* y, dy; dx */
        break;
    case TB_OP_SIGMOID:
        c->fwd_flops = 3 * nx; /* exp, add, divide */
        c->bwd_flops = 3 * nx; /* dy * y * (1 - y) */
        c->bwd_bytes = 2 * bytes(y) + grad_bytes(op, grads);
        break;
    case TB_OP_MAXPOOL:
        c->fwd_flops = ny * op->p.pool.k * op->p.pool.k; /* comparisons */
        c->bwd_flops = ny * op->p.pool.k * op->p.pool.k;
        c->bwd_bytes = bytes(x) + 2 * bytes(y) + grad_bytes(op, grads); /* x, y, dy; dx */
        break;
    case TB_OP_GLOBAL_AVGPOOL:
        c->fwd_flops = nx;
        c->bwd_flops = nx;
        c->bwd_bytes = bytes(y) + grad_bytes(op, grads);
        break;
    case TB_OP_RESIZE:
        /* bilinear: four taps weighed and summed per output; backward scatters them */
        c->fwd_flops = 8 * ny;
        c->bwd_flops = 8 * ny;
        c->bwd_bytes = bytes(y) + grad_bytes(op, grads);
        break;
    case TB_OP_CONCAT:
        c->bwd_bytes = bytes(y) + grad_bytes(op, grads); /* copies only */
        break;
    case TB_OP_ADD:
        c->fwd_flops = ny;
        c->bwd_bytes = bytes(y) + grad_bytes(op, grads);
        break;
    case TB_OP_MUL:
        c->fwd_flops = ny;
        c->bwd_flops = 2 * ny; /* dy * g, dy * x (summed over C where g broadcasts) */
        c->bwd_bytes = bytes(x) + bytes(&op->in[1]) + bytes(y) + grad_bytes(op, grads);
        break;
    case TB_OP_DROPOUT:
        c->fwd_flops = 3 * nx; /* a draw, a comparison, a multiply */
        c->bwd_flops = nx;
        c->bwd_bytes = bytes(y) + bytes(&op->out[1]) + grad_bytes(op, grads);
        break;
    case TB_OP_SOFTMAX_CE:
    case TB_OP_BCE_LOGITS:
        /* per logit: a max, an exp, a sum, a log at the label; backward: softmax less the
         * one-hot, weighed */
        c->fwd_flops = 4 * nx;
        c->bwd_flops = 4 * nx;
        c->bwd_bytes = c->fwd_bytes + grad_bytes(op, grads);
        break;
    case TB_OP_CLASS_WEIGHTS:
    case TB_OP_MASK_LABELS:
        c->fwd_flops = nx; /* a count or a comparison per label; no backward */
        break;
    case TB_OP_DUAL_TASK:
        /* The Gumbel softmax (a draw, two logs, an exp, a sum, a divide per logit), then per
         * map (the sample's and the labels' one-hot) the 9-tap smoothing along W and H, the
         * central differences and the magnitude: about 40 FLOPs per element each. Each pass
         * reads and writes a map of the logits' size: the softmax, two smoothings, the
         * magnitude, for both maps. Backward runs the chain back for the sample's map. */
        c->fwd_flops = 8 * nx + 2 * 40 * nx;
        c->fwd_bytes += 2 * 4 * 2 * bytes(x);
        c->bwd_flops = 50 * nx;
        c->bwd_bytes = 4 * 2 * bytes(x) + grad_bytes(op, grads);
        break;
    default:
        break;
    }
}
