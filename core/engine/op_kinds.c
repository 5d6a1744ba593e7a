/* core/engine/op_kinds.c: every op kind of trainbig/ops.h, one row each
 * (op_kinds_internal.h): name, arity, input dtypes, gradients, what backward reads, and
 * its shape rule (op_rules.c), cost and signature parameters, which follow here per kind.
 * Adding a kind is its row, its functions, the builder's call and the backends' kernels.
 *
 * Costs: FLOPs count a multiply and an add as 2; a comparison, an exp or a division as 1
 * (a device model prices the kinds apart anyway, with an efficiency each). Bytes are each
 * tensor read or written once in a pass, at its dtype's size: what a kernel cannot avoid,
 * not what caches make of it. Where an op makes more than one pass over a tensor (batch
 * norm's statistics, then its normalisation), each pass counts. */
#include "config.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <trainbig/ops.h>

#include "core/engine/graph.h"
#include "core/engine/op_kinds_internal.h"

/* ------------------------------------------------------------------ costs */

static double elems(const struct tb_tensor_desc *d)
{
    return (double)tb_shape_elems(d->shape);
}

static double bytes(const struct tb_tensor_desc *d)
{
    return elems(d) * (double)tb_dtype_size(d->dtype);
}

static bool wanted(uint32_t grads, uint32_t i)
{
    return (grads >> i) & 1u;
}

/* The inputs' gradients that are wanted, written once each (at their inputs' dtypes). */
static double grad_bytes(const struct tb_op *op, uint32_t grads)
{
    double b = 0;
    for (uint32_t i = 0; i < op->nin; i++)
        if (wanted(grads, i))
            b += bytes(&op->in[i]);
    return b;
}

static double nx_of(const struct tb_op *op)
{
    return elems(&op->in[0]);
}

static double ny_of(const struct tb_op *op)
{
    return op->nout ? elems(&op->out[0]) : 0;
}

static void conv2d_cost(const struct tb_op *op, uint32_t grads, struct tb_op_cost *c)
{
    /* each output: C x KH x KW multiply-adds; backward: as many again for the data's
     * gradient and for the weight's */
    const double ny = ny_of(op), macs = ny * op->in[0].shape.c * op->p.conv.kh * op->p.conv.kw;
    c->fwd_flops = 2 * macs + (op->p.conv.has_bias ? ny : 0);
    c->bwd_flops = (wanted(grads, 0) ? 2 * macs : 0) + (wanted(grads, 1) ? 2 * macs : 0) +
                   (op->p.conv.has_bias && wanted(grads, 2) ? ny : 0);
    /* reads x, the weight and dy; writes the gradients wanted */
    c->bwd_bytes = bytes(&op->in[0]) + bytes(&op->in[1]) + bytes(&op->out[0]) + grad_bytes(op, grads);
}

static void batchnorm_cost(const struct tb_op *op, uint32_t grads, struct tb_op_cost *c)
{
    /* training: a pass for the statistics (a sum and a sum of squares), then one to
     * normalise (a multiply-add per element); backward: a pass for its two sums over dy
     * and dy * x-hat, then one to write dx */
    const double nx = nx_of(op);
    c->fwd_flops = op->p.bn.training ? 6 * nx : 2 * nx;
    c->fwd_bytes += op->p.bn.training ? bytes(&op->in[0]) : 0;
    c->bwd_flops = 8 * nx;
    c->bwd_bytes = 2 * bytes(&op->in[0]) + 2 * bytes(&op->out[0]) + grad_bytes(op, grads);
}

static void relu_cost(const struct tb_op *op, uint32_t grads, struct tb_op_cost *c)
{
    c->fwd_flops = c->bwd_flops = nx_of(op);
    c->bwd_bytes = 2 * bytes(&op->out[0]) + grad_bytes(op, grads); /* y, dy; dx */
}

static void sigmoid_cost(const struct tb_op *op, uint32_t grads, struct tb_op_cost *c)
{
    c->fwd_flops = 3 * nx_of(op); /* exp, add, divide */
    c->bwd_flops = 3 * nx_of(op); /* dy * y * (1 - y) */
    c->bwd_bytes = 2 * bytes(&op->out[0]) + grad_bytes(op, grads);
}

static void maxpool_cost(const struct tb_op *op, uint32_t grads, struct tb_op_cost *c)
{
    c->fwd_flops = c->bwd_flops = ny_of(op) * op->p.pool.k * op->p.pool.k;             /* comparisons */
    c->bwd_bytes = bytes(&op->in[0]) + 2 * bytes(&op->out[0]) + grad_bytes(op, grads); /* x, y, dy; dx */
}

static void global_avgpool_cost(const struct tb_op *op, uint32_t grads, struct tb_op_cost *c)
{
    c->fwd_flops = c->bwd_flops = nx_of(op);
    c->bwd_bytes = bytes(&op->out[0]) + grad_bytes(op, grads);
}

static void resize_cost(const struct tb_op *op, uint32_t grads, struct tb_op_cost *c)
{
    /* bilinear: four taps weighed and summed per output; backward scatters them */
    c->fwd_flops = c->bwd_flops = 8 * ny_of(op);
    c->bwd_bytes = bytes(&op->out[0]) + grad_bytes(op, grads);
}

static void concat_cost(const struct tb_op *op, uint32_t grads, struct tb_op_cost *c)
{
    c->bwd_bytes = bytes(&op->out[0]) + grad_bytes(op, grads); /* copies only */
}

static void add_cost(const struct tb_op *op, uint32_t grads, struct tb_op_cost *c)
{
    c->fwd_flops = ny_of(op);
    c->bwd_bytes = bytes(&op->out[0]) + grad_bytes(op, grads);
}

static void mul_cost(const struct tb_op *op, uint32_t grads, struct tb_op_cost *c)
{
    c->fwd_flops = ny_of(op);
    c->bwd_flops = 2 * ny_of(op); /* dy * g, dy * x (summed over C where g broadcasts) */
    c->bwd_bytes = bytes(&op->in[0]) + bytes(&op->in[1]) + bytes(&op->out[0]) + grad_bytes(op, grads);
}

static void dropout_cost(const struct tb_op *op, uint32_t grads, struct tb_op_cost *c)
{
    c->fwd_flops = 3 * nx_of(op); /* a draw, a comparison, a multiply */
    c->bwd_flops = nx_of(op);
    c->bwd_bytes = bytes(&op->out[0]) + bytes(&op->out[1]) + grad_bytes(op, grads);
}

/* softmax_ce, bce_logits */
static void loss_cost(const struct tb_op *op, uint32_t grads, struct tb_op_cost *c)
{
    /* per logit: a max, an exp, a sum, a log at the label; backward: softmax less the
     * one-hot, weighed */
    c->fwd_flops = c->bwd_flops = 4 * nx_of(op);
    c->bwd_bytes = c->fwd_bytes + grad_bytes(op, grads);
}

/* class_weights, mask_labels */
static void labels_cost(const struct tb_op *op, uint32_t grads, struct tb_op_cost *c)
{
    (void)grads;
    c->fwd_flops = nx_of(op); /* a count or a comparison per label; no backward */
}

static void dual_task_cost(const struct tb_op *op, uint32_t grads, struct tb_op_cost *c)
{
    /* The Gumbel softmax (a draw, two logs, an exp, a sum, a divide per logit), then per
     * map (the sample's and the labels' one-hot) the 9-tap smoothing along W and H, the
     * central differences and the magnitude: about 40 FLOPs per element each. Each pass
     * reads and writes a map of the logits' size: the softmax, two smoothings, the
     * magnitude, for both maps. Backward runs the chain back for the sample's map. */
    const double nx = nx_of(op), bx = bytes(&op->in[0]);
    c->fwd_flops = 8 * nx + 2 * 40 * nx;
    c->fwd_bytes += 2 * 4 * 2 * bx;
    c->bwd_flops = 50 * nx;
    c->bwd_bytes = 4 * 2 * bx + grad_bytes(op, grads);
}

static void cast_cost(const struct tb_op *op, uint32_t grads, struct tb_op_cost *c)
{
    c->fwd_flops = c->bwd_flops = nx_of(op); /* a rounding per element */
    c->bwd_bytes = bytes(&op->out[0]) + grad_bytes(op, grads);
}

/* ------------------------------------------------------------------ signature parameters */

static void conv2d_params(const struct tb_op *op, char *buf, size_t size)
{
    const struct tb_conv2d_params *p = &op->p.conv;
    snprintf(buf, size, " k=%dx%d s=%dx%d p=%dx%d d=%dx%d bias=%d", p->kh, p->kw, p->stride_h, p->stride_w, p->pad_h,
             p->pad_w, p->dil_h, p->dil_w, p->has_bias ? 1 : 0);
}

static void batchnorm_params(const struct tb_op *op, char *buf, size_t size)
{
    snprintf(buf, size, " training=%d sync=%d", op->p.bn.training ? 1 : 0, op->p.bn.sync ? 1 : 0);
}

static void maxpool_params(const struct tb_op *op, char *buf, size_t size)
{
    snprintf(buf, size, " k=%d s=%d p=%d", op->p.pool.k, op->p.pool.stride, op->p.pool.pad);
}

static void resize_params(const struct tb_op *op, char *buf, size_t size)
{
    snprintf(buf, size, " align=%d", op->p.resize.align_corners ? 1 : 0);
}

static void dropout_params(const struct tb_op *op, char *buf, size_t size)
{
    snprintf(buf, size, " channelwise=%d training=%d", op->p.dropout.channelwise ? 1 : 0,
             op->p.dropout.training ? 1 : 0);
}

static void cast_params(const struct tb_op *op, char *buf, size_t size)
{
    snprintf(buf, size, " to=%s", tb_dtype_name((enum tb_dtype)op->p.cast.dtype));
}

static void softmax_ce_params(const struct tb_op *op, char *buf, size_t size)
{
    snprintf(buf, size, " weighted=%d per_image=%d", op->p.ce.weighted ? 1 : 0, op->p.ce.per_image ? 1 : 0);
}

/* ------------------------------------------------------------------ the table */

#define U8 TB_U8
#define F32 TB_F32
#define FL TB_OP_FLOAT
#define ALL TB_OP_ALL
#define AC_LOW TB_AUTOCAST_LOW
#define AC_FOLLOW TB_AUTOCAST_FOLLOW
#define AC_F32 TB_AUTOCAST_F32

/* name, inputs min..max, their dtypes (FL: the op's float dtype), gradients in and out, what backward reads of the
 * inputs and outputs, shape rule, cost, signature parameters, autocast class. */
static const struct tb_op_row kinds[TB_OP_KIND_COUNT] = {
    /* backward reads x and the weight; every input has a gradient */
    [TB_OP_CONV2D] = { "conv2d",
                       2,
                       3,
                       { FL, FL, FL },
                       ALL,
                       0x1,
                       0x3,
                       0,
                       tb_op_shape_conv2d,
                       conv2d_cost,
                       conv2d_params, AC_LOW },
    /* gradients for x, gamma, beta, not the running statistics; backward reads x, gamma
     * and the saved mean and inverse deviation */
    [TB_OP_BATCHNORM] = { "batchnorm",
                          5,
                          5,
                          { FL, F32, F32, F32, F32 },
                          0x7,
                          0x1,
                          0x3,
                          0x6,
                          tb_op_shape_batchnorm,
                          batchnorm_cost,
                          batchnorm_params, AC_FOLLOW },
    [TB_OP_RELU] = { "relu", 1, 1, { FL }, 0x1, 0x1, 0, 0x1, tb_op_shape_same_as_x, relu_cost, NULL, AC_FOLLOW },
    /* f32 only: its backward reads y, and y * (1 - y) from a 16-bit y is coarse where y
     * nears 1 (the autocast policies keep it in f32 too) */
    [TB_OP_SIGMOID] = { "sigmoid", 1, 1, { F32 }, 0x1, 0x1, 0, 0x1, tb_op_shape_same_as_x, sigmoid_cost, NULL, AC_F32 },
    [TB_OP_MAXPOOL] = { "maxpool",
                        1,
                        1,
                        { FL },
                        0x1,
                        0x1,
                        0x1,
                        0x1,
                        tb_op_shape_maxpool,
                        maxpool_cost,
                        maxpool_params, AC_FOLLOW },
    [TB_OP_GLOBAL_AVGPOOL] = { "global_avgpool",
                               1,
                               1,
                               { FL },
                               0x1,
                               0x1,
                               0,
                               0,
                               tb_op_shape_global_avgpool,
                               global_avgpool_cost,
                               NULL, AC_FOLLOW },
    [TB_OP_RESIZE] = { "resize", 1, 1, { FL }, 0x1, 0x1, 0, 0, tb_op_shape_resize, resize_cost, resize_params, AC_FOLLOW },
    [TB_OP_CONCAT] = { "concat", 2, TB_OP_MAX_IN, { FL }, ALL, 0x1, 0, 0, tb_op_shape_concat, concat_cost, NULL, AC_FOLLOW },
    [TB_OP_ADD] = { "add", 2, 2, { FL, FL }, ALL, 0x1, 0, 0, tb_op_shape_add, add_cost, NULL, AC_FOLLOW },
    [TB_OP_MUL] = { "mul", 2, 2, { FL, FL }, ALL, 0x1, 0x3, 0, tb_op_shape_mul, mul_cost, NULL, AC_FOLLOW },
    /* backward reads the mask */
    [TB_OP_DROPOUT] = { "dropout", 1, 1, { FL }, 0x1, 0x1, 0, 0x2, tb_op_shape_dropout, dropout_cost, dropout_params, AC_FOLLOW },
    /* gradient for the logits only; backward reads logits, labels and the weights */
    [TB_OP_SOFTMAX_CE] = { "softmax_ce",
                           2,
                           3,
                           { F32, U8, F32 },
                           0x1,
                           0x1,
                           ALL,
                           0,
                           tb_op_shape_softmax_ce,
                           loss_cost,
                           softmax_ce_params, AC_F32 },
    [TB_OP_BCE_LOGITS] = { "bce_logits", 2, 2, { F32, U8 }, 0x1, 0x1, 0x3, 0, tb_op_shape_bce_logits, loss_cost, NULL, AC_F32 },
    /* not differentiable: no backward */
    [TB_OP_CLASS_WEIGHTS] = { "class_weights",
                              1,
                              1,
                              { U8 },
                              0,
                              0x1,
                              0,
                              0,
                              tb_op_shape_class_weights,
                              labels_cost,
                              NULL, AC_F32 },
    [TB_OP_MASK_LABELS] = { "mask_labels",
                            2,
                            2,
                            { U8, F32 },
                            0,
                            0x1,
                            0,
                            0,
                            tb_op_shape_mask_labels,
                            labels_cost,
                            NULL, AC_F32 },
    /* backward reads the labels and the sample */
    [TB_OP_DUAL_TASK] = { "dual_task",
                          2,
                          2,
                          { F32, U8 },
                          0x1,
                          0x1,
                          0x2,
                          0x2,
                          tb_op_shape_dual_task,
                          dual_task_cost,
                          NULL, AC_F32 },
    /* backward reads nothing: dx is dy converted */
    [TB_OP_CAST] = { "cast", 1, 1, { FL }, 0x1, 0x1, 0, 0, tb_op_shape_cast, cast_cost, cast_params, AC_FOLLOW },
};

const struct tb_op_row *tb_op_row(enum tb_op_kind kind)
{
    return (int)kind > 0 && kind < TB_OP_KIND_COUNT && kinds[kind].name ? &kinds[kind] : NULL;
}

/* ------------------------------------------------------------------ the SDK's questions */

/* m over an op's n inputs or outputs */
static uint32_t over(uint32_t m, uint32_t n)
{
    return m & (n >= 32 ? UINT32_MAX : (1u << n) - 1);
}

const char *tb_op_kind_name(enum tb_op_kind kind)
{
    const struct tb_op_row *k = tb_op_row(kind);
    return k ? k->name : NULL;
}

void tb_op_backward_reads(const struct tb_op *op, uint32_t *inputs, uint32_t *outputs)
{
    const struct tb_op_row *k = tb_op_row(op->kind);
    *inputs = k ? over(k->bwd_in, op->nin) : 0;
    *outputs = k ? over(k->bwd_out, op->nout) : 0;
}

uint32_t tb_op_grad_inputs(const struct tb_op *op)
{
    const struct tb_op_row *k = tb_op_row(op->kind);
    return k ? over(k->grad_in, op->nin) : 0;
}

uint32_t tb_op_grad_outputs(const struct tb_op *op)
{
    const struct tb_op_row *k = tb_op_row(op->kind);
    return k ? k->grad_out : 0;
}

void tb_op_cost(const struct tb_op *op, uint32_t grads, struct tb_op_cost *c)
{
    memset(c, 0, sizeof *c);
    /* every input and output once: the least any kernel of the op moves */
    for (uint32_t i = 0; i < op->nin; i++)
        c->fwd_bytes += bytes(&op->in[i]);
    for (uint32_t j = 0; j < op->nout; j++)
        c->fwd_bytes += bytes(&op->out[j]);
    const struct tb_op_row *k = tb_op_row(op->kind);
    if (k)
        k->cost(op, grads, c);
}

/* ------------------------------------------------------------------ the op contract */

/* Writes "kind: message" into why; returns -1. */
static int bad(const struct tb_op_row *k, char *why, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(const struct tb_op_row *k, char *why, size_t size, const char *fmt, ...)
{
    int n = snprintf(why, size, "%s: ", k->name);
    if (n >= 0 && (size_t)n < size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why + n, size - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

enum tb_dtype tb_op_row_dtype(const struct tb_op_row *k, uint32_t i)
{
    uint32_t listed = 0;
    while (listed < TB_OP_DTYPES && k->dtype[listed])
        listed++;
    return k->dtype[i < listed ? i : listed - 1];
}

int tb_op_outputs(const struct tb_op *op, struct tb_tensor_desc out[TB_OP_MAX_OUT], uint32_t *nout, char *why,
                  size_t why_size)
{
    *nout = 0;
    const struct tb_op_row *k = tb_op_row(op->kind);
    if (!k) {
        snprintf(why, why_size, "op kind %d: no such op", (int)op->kind);
        return -1;
    }
    if (op->nin < k->min_in || op->nin > k->max_in)
        return bad(k, why, why_size, "%u inputs; it takes %u to %u", op->nin, k->min_in, k->max_in);
    uint32_t first_float = UINT32_MAX; /* the input whose dtype is the op's float dtype */
    for (uint32_t i = 0; i < op->nin; i++) {
        const enum tb_dtype want = tb_op_row_dtype(k, i), got = op->in[i].dtype;
        if (want == TB_OP_FLOAT && first_float == UINT32_MAX) {
            if (!tb_dtype_is_float(got))
                return bad(k, why, why_size, "input %u is %s, expected a float (f32, bf16 or f16)", i,
                           tb_dtype_name(got));
            first_float = i;
        } else if (want == TB_OP_FLOAT && got != op->in[first_float].dtype) {
            return bad(k, why, why_size, "input %u is %s, expected %s as input %u (one float dtype per op)", i,
                       tb_dtype_name(got), tb_dtype_name(op->in[first_float].dtype), first_float);
        } else if (want != TB_OP_FLOAT && got != want) {
            return bad(k, why, why_size, "input %u is %s, expected %s", i, tb_dtype_name(got), tb_dtype_name(want));
        }
        if (!tb_op_shape_positive(op->in[i].shape))
            return bad(k, why, why_size, "input %u has shape %s: every dimension must be >= 1", i,
                       tb_op_dims(op->in[i].shape));
    }
    char rule[512];
    int n = k->shape(op, out, rule, sizeof rule);
    if (n < 0)
        return bad(k, why, why_size, "%s", rule);
    for (int j = 0; j < n; j++)
        if (!tb_op_shape_positive(out[j].shape))
            return bad(k, why, why_size, "output %d would be %s: every dimension must be >= 1", j,
                       tb_op_dims(out[j].shape));
    *nout = (uint32_t)n;
    return 0;
}

int tb_op_check(const struct tb_op *op, char *why, size_t why_size)
{
    struct tb_tensor_desc want[TB_OP_MAX_OUT];
    uint32_t n;
    if (tb_op_outputs(op, want, &n, why, why_size))
        return -1;
    const struct tb_op_row *k = tb_op_row(op->kind);
    if (op->nout != n)
        return bad(k, why, why_size, "%u outputs; it makes %u", op->nout, n);
    for (uint32_t j = 0; j < n; j++)
        if (op->out[j].dtype != want[j].dtype || !tb_shape_eq(op->out[j].shape, want[j].shape))
            return bad(k, why, why_size, "output %u is %s %s; its inputs and parameters make %s %s", j,
                       tb_dtype_name(op->out[j].dtype), tb_op_dims(op->out[j].shape), tb_dtype_name(want[j].dtype),
                       tb_op_dims(want[j].shape));
    return 0;
}

/* ------------------------------------------------------------------ signature */

struct out {
    char *buf;
    size_t size, len;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const size_t room = o->len < o->size ? o->size - o->len : 0;
    const int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

static void shapes(struct out *o, const char *tag, const struct tb_tensor_desc *d, uint32_t n)
{
    put(o, " %s=", tag);
    for (uint32_t i = 0; i < n; i++)
        put(o, "%s%dx%dx%dx%d%s", i ? ";" : "", d[i].shape.n, d[i].shape.c, d[i].shape.h, d[i].shape.w,
            d[i].dtype == TB_F32 ? "" : tb_dtype_name(d[i].dtype));
}

size_t tb_op_signature(const struct tb_op *op, bool backward, char *buf, size_t size)
{
    struct out o = { buf, size, 0 };
    const struct tb_op_row *k = tb_op_row(op->kind);
    char params[160] = "";
    if (k && k->params)
        k->params(op, params, sizeof params);
    put(&o, "%s%s", k ? k->name : "unknown", params);
    shapes(&o, "in", op->in, op->nin);
    shapes(&o, "out", op->out, op->nout);
    put(&o, " %s", backward ? "backward" : "forward");
    return o.len;
}
