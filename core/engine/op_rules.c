/* core/engine/op_rules.c: each op kind's shape rule (op_kinds_internal.h), which gives its
 * outputs from its inputs and parameters or says what is wrong; the kind's row in
 * op_kinds.c names it beside the kind's arity and dtypes, and tb_op_outputs applies both.
 * The rules call nothing of the table's. */
#include "config.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <trainbig/ops.h>

#include "core/engine/op_kinds_internal.h"

/* Writes the message into why (tb_op_outputs puts the kind's name before it); returns -1. */
static int bad(const struct tb_op *op, char *why, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(const struct tb_op *op, char *why, size_t size, const char *fmt, ...)
{
    (void)op;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
    return -1;
}

const char *tb_op_dims(struct tb_shape s)
{
    static _Thread_local char buf[4][64];
    static _Thread_local int next;
    char *b = buf[next++ & 3];
    snprintf(b, sizeof buf[0], "%dx%dx%dx%d", s.n, s.c, s.h, s.w);
    return b;
}

static struct tb_tensor_desc f32(int n, int c, int h, int w)
{
    return (struct tb_tensor_desc){ TB_F32, { n, c, h, w } };
}

/* An output of x's float dtype (the op's float class: op_kinds_internal.h). */
static struct tb_tensor_desc like_x(const struct tb_op *op, int n, int c, int h, int w)
{
    return (struct tb_tensor_desc){ op->in[0].dtype, { n, c, h, w } };
}

bool tb_op_shape_positive(struct tb_shape s)
{
    return s.n > 0 && s.c > 0 && s.h > 0 && s.w > 0;
}

/* ------------------------------------------------------------------ rules */

int tb_op_shape_conv2d(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_conv2d_params *p = &op->p.conv;
    const struct tb_shape x = op->in[0].shape, w = op->in[1].shape;
    if ((uint32_t)(p->has_bias ? 3 : 2) != op->nin)
        return bad(op, why, size, "has_bias = %d with %u inputs: x, weight and a bias only with has_bias", p->has_bias,
                   op->nin);
    if (p->kh < 1 || p->kw < 1 || p->stride_h < 1 || p->stride_w < 1 || p->dil_h < 1 || p->dil_w < 1 || p->pad_h < 0 ||
        p->pad_w < 0)
        return bad(op, why, size, "kernel %dx%d, stride %dx%d, dilation %dx%d must be >= 1 and padding %dx%d >= 0",
                   p->kh, p->kw, p->stride_h, p->stride_w, p->dil_h, p->dil_w, p->pad_h, p->pad_w);
    if (w.c != x.c || w.h != p->kh || w.w != p->kw || w.n < 1)
        return bad(op, why, size, "weight %s must be Ox%dx%dx%d for x %s", tb_op_dims(w), x.c, p->kh, p->kw,
                   tb_op_dims(x));
    if (p->has_bias && !tb_shape_eq(op->in[2].shape, (struct tb_shape){ 1, w.n, 1, 1 }))
        return bad(op, why, size, "bias %s must be 1x%dx1x1", tb_op_dims(op->in[2].shape), w.n);
    /* In 64 bits: a huge dilation or padding must be refused, not wrap around. */
    const int64_t eh = (int64_t)p->dil_h * (p->kh - 1) + 1, ew = (int64_t)p->dil_w * (p->kw - 1) + 1;
    const int64_t ph = (int64_t)x.h + 2 * (int64_t)p->pad_h, pw = (int64_t)x.w + 2 * (int64_t)p->pad_w;
    if (ph < eh || pw < ew || ph > INT32_MAX || pw > INT32_MAX)
        return bad(op, why, size,
                   "x %s with kernel %dx%d, stride %d, padding %d, dilation %d: the kernel does not fit the padded "
                   "input",
                   tb_op_dims(x), p->kh, p->kw, p->stride_h, p->pad_h, p->dil_h);
    out[0] = like_x(op, x.n, w.n, (int)((ph - eh) / p->stride_h + 1), (int)((pw - ew) / p->stride_w + 1));
    return 1;
}

int tb_op_shape_batchnorm(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_shape x = op->in[0].shape, v = { 1, x.c, 1, 1 };
    static const char *const name[5] = { "x", "gamma", "beta", "running_mean", "running_var" };
    for (int i = 1; i < 5; i++)
        if (!tb_shape_eq(op->in[i].shape, v))
            return bad(op, why, size, "%s %s must be 1x%dx1x1 for x %s", name[i], tb_op_dims(op->in[i].shape), x.c,
                       tb_op_dims(x));
    if (!(op->p.bn.eps > 0) || !(op->p.bn.momentum >= 0 && op->p.bn.momentum <= 1))
        return bad(op, why, size, "eps = %g must be > 0 and momentum = %g in [0, 1]", (double)op->p.bn.eps,
                   (double)op->p.bn.momentum);
    out[0] = op->in[0];
    out[1] = out[2] = (struct tb_tensor_desc){ TB_F32, v };
    return 3;
}

int tb_op_shape_same_as_x(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    (void)why, (void)size;
    out[0] = op->in[0];
    return 1;
}

int tb_op_shape_maxpool(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_pool_params *p = &op->p.pool;
    const struct tb_shape x = op->in[0].shape;
    /* PyTorch's limits: a window always holds at least one real element when pad <= k/2. */
    if (p->k < 1 || p->stride < 1 || p->pad < 0 || p->pad > p->k / 2 || (int64_t)x.h + 2 * p->pad < p->k ||
        (int64_t)x.w + 2 * p->pad < p->k)
        return bad(op, why, size, "x %s, kernel %d, stride %d, padding %d: the window does not fit", tb_op_dims(x),
                   p->k, p->stride, p->pad);
    out[0] = like_x(op, x.n, x.c, (x.h + 2 * p->pad - p->k) / p->stride + 1, (x.w + 2 * p->pad - p->k) / p->stride + 1);
    return 1;
}

int tb_op_shape_global_avgpool(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    (void)why, (void)size;
    out[0] = like_x(op, op->in[0].shape.n, op->in[0].shape.c, 1, 1);
    return 1;
}

int tb_op_shape_resize(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_shape x = op->in[0].shape;
    if (op->p.resize.out_h < 1 || op->p.resize.out_w < 1)
        return bad(op, why, size, "x %s to %dx%d: the output needs a side >= 1", tb_op_dims(x), op->p.resize.out_h,
                   op->p.resize.out_w);
    out[0] = like_x(op, x.n, x.c, op->p.resize.out_h, op->p.resize.out_w);
    return 1;
}

int tb_op_shape_concat(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_shape a = op->in[0].shape;
    int c = 0;
    for (uint32_t i = 0; i < op->nin; i++) {
        const struct tb_shape b = op->in[i].shape;
        if (b.n != a.n || b.h != a.h || b.w != a.w)
            return bad(op, why, size, "input %u %s differs from input 0 %s in N, H or W", i, tb_op_dims(b),
                       tb_op_dims(a));
        c += b.c;
    }
    out[0] = like_x(op, a.n, c, a.h, a.w);
    return 1;
}

int tb_op_shape_add(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    if (!tb_shape_eq(op->in[0].shape, op->in[1].shape))
        return bad(op, why, size, "a %s and b %s differ in shape", tb_op_dims(op->in[0].shape),
                   tb_op_dims(op->in[1].shape));
    out[0] = op->in[0];
    return 1;
}

int tb_op_shape_mul(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_shape x = op->in[0].shape, g = op->in[1].shape;
    if (g.n != x.n || g.h != x.h || g.w != x.w || (g.c != x.c && g.c != 1))
        return bad(op, why, size, "g %s must be %dx%dx%dx%d or %dx1x%dx%d to multiply x %s", tb_op_dims(g), x.n, x.c,
                   x.h, x.w, x.n, x.h, x.w, tb_op_dims(x));
    out[0] = op->in[0];
    return 1;
}

int tb_op_shape_dropout(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_dropout_params *p = &op->p.dropout;
    const struct tb_shape x = op->in[0].shape;
    if (!(p->p >= 0 && p->p < 1))
        return bad(op, why, size, "p = %g; allowed: 0 <= p < 1", (double)p->p);
    out[0] = op->in[0];
    out[1] = (struct tb_tensor_desc){ TB_U8, { x.n, x.c, p->channelwise ? 1 : x.h, p->channelwise ? 1 : x.w } };
    return 2;
}

int tb_op_shape_softmax_ce(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_shape l = op->in[0].shape, y = op->in[1].shape;
    if ((uint32_t)(op->p.ce.weighted ? 3 : 2) != op->nin)
        return bad(op, why, size, "weighted = %d with %u inputs: logits, labels and weights only when weighted",
                   op->p.ce.weighted, op->nin);
    if (y.n != l.n || y.c != 1 || y.h != l.h || y.w != l.w)
        return bad(op, why, size, "labels %s must be %dx1x%dx%d to match logits %s", tb_op_dims(y), l.n, l.h, l.w,
                   tb_op_dims(l));
    if (op->p.ce.weighted && !tb_shape_eq(op->in[2].shape, (struct tb_shape){ l.n, l.c, 1, 1 }))
        return bad(op, why, size, "class weights %s must be %dx%dx1x1", tb_op_dims(op->in[2].shape), l.n, l.c);
    out[0] = f32(1, 1, 1, 1);
    return 1;
}

int tb_op_shape_bce_logits(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_shape l = op->in[0].shape, t = op->in[1].shape;
    if (l.c != 1 || !tb_shape_eq(l, t))
        return bad(op, why, size, "logits %s and targets %s must both be Nx1xHxW", tb_op_dims(l), tb_op_dims(t));
    out[0] = f32(1, 1, 1, 1);
    return 1;
}

int tb_op_shape_class_weights(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_shape l = op->in[0].shape;
    if (l.c != 1 || op->p.label.classes < 1)
        return bad(op, why, size, "labels %s must be Nx1xHxW and classes (%d) at least 1", tb_op_dims(l),
                   op->p.label.classes);
    out[0] = f32(l.n, op->p.label.classes, 1, 1);
    return 1;
}

int tb_op_shape_mask_labels(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_shape l = op->in[0].shape, x = op->in[1].shape;
    if (l.c != 1 || !tb_shape_eq(l, x))
        return bad(op, why, size, "labels %s and x %s must both be Nx1xHxW", tb_op_dims(l), tb_op_dims(x));
    out[0] = op->in[0];
    return 1;
}

int tb_op_shape_dual_task(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_shape l = op->in[0].shape, y = op->in[1].shape;
    if (y.n != l.n || y.c != 1 || y.h != l.h || y.w != l.w)
        return bad(op, why, size, "labels %s must be %dx1x%dx%d to match logits %s", tb_op_dims(y), l.n, l.h, l.w,
                   tb_op_dims(l));
    if (l.h < 3 || l.w < 3)
        return bad(op, why, size, "logits %s: H and W must be at least 3 (the smoothing pads by reflection)",
                   tb_op_dims(l));
    if (!(op->p.dual.tau > 0))
        return bad(op, why, size, "tau = %g; allowed: tau > 0", (double)op->p.dual.tau);
    out[0] = f32(1, 1, 1, 1);
    out[1] = op->in[0];
    return 2;
}

int tb_op_shape_cast(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const enum tb_dtype to = (enum tb_dtype)op->p.cast.dtype;
    if (!tb_dtype_is_float(to))
        return bad(op, why, size, "to dtype %d (%s): allowed f32, bf16, f16", (int)op->p.cast.dtype,
                   tb_dtype_name(to));
    out[0] = (struct tb_tensor_desc){ to, op->in[0].shape };
    return 1;
}
