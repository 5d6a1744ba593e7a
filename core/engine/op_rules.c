/* core/engine/op_rules.c: the op contract of trainbig/ops.h as one table: for each kind its
 * arity, the dtype of each input and the rule that gives its outputs' shapes from its
 * inputs and parameters. The graph builder makes every op's outputs with it and the
 * backends check every op with it before preparing it, so a rule is written once. */
#include "config.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <trainbig/ops.h>

/* Writes "kind: message" into why; returns -1. */
static int bad(const struct tb_op *op, char *why, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(const struct tb_op *op, char *why, size_t size, const char *fmt, ...)
{
    int n = snprintf(why, size, "%s: ", tb_op_kind_name(op->kind));
    if (n >= 0 && (size_t)n < size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why + n, size - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* "2x3x5x7" in one of four rotating buffers, so a message may hold several. */
static const char *dims(struct tb_shape s)
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

static bool all_positive(struct tb_shape s)
{
    return s.n > 0 && s.c > 0 && s.h > 0 && s.w > 0;
}

typedef int (*shape_rule)(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size);

/* ------------------------------------------------------------------ rules */

static int conv2d(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
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
        return bad(op, why, size, "weight %s must be Ox%dx%dx%d for x %s", dims(w), x.c, p->kh, p->kw, dims(x));
    if (p->has_bias && !tb_shape_eq(op->in[2].shape, (struct tb_shape){ 1, w.n, 1, 1 }))
        return bad(op, why, size, "bias %s must be 1x%dx1x1", dims(op->in[2].shape), w.n);
    /* In 64 bits: a huge dilation or padding must be refused, not wrap around. */
    const int64_t eh = (int64_t)p->dil_h * (p->kh - 1) + 1, ew = (int64_t)p->dil_w * (p->kw - 1) + 1;
    const int64_t ph = (int64_t)x.h + 2 * (int64_t)p->pad_h, pw = (int64_t)x.w + 2 * (int64_t)p->pad_w;
    if (ph < eh || pw < ew || ph > INT32_MAX || pw > INT32_MAX)
        return bad(op, why, size,
                   "x %s with kernel %dx%d, stride %d, padding %d, dilation %d: the kernel does not fit the padded "
                   "input",
                   dims(x), p->kh, p->kw, p->stride_h, p->pad_h, p->dil_h);
    out[0] = f32(x.n, w.n, (int)((ph - eh) / p->stride_h + 1), (int)((pw - ew) / p->stride_w + 1));
    return 1;
}

static int batchnorm(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_shape x = op->in[0].shape, v = { 1, x.c, 1, 1 };
    static const char *const name[5] = { "x", "gamma", "beta", "running_mean", "running_var" };
    for (int i = 1; i < 5; i++)
        if (!tb_shape_eq(op->in[i].shape, v))
            return bad(op, why, size, "%s %s must be 1x%dx1x1 for x %s", name[i], dims(op->in[i].shape), x.c, dims(x));
    if (!(op->p.bn.eps > 0) || !(op->p.bn.momentum >= 0 && op->p.bn.momentum <= 1))
        return bad(op, why, size, "eps = %g must be > 0 and momentum = %g in [0, 1]", (double)op->p.bn.eps,
                   (double)op->p.bn.momentum);
    out[0] = op->in[0];
    out[1] = out[2] = (struct tb_tensor_desc){ TB_F32, v };
    return 3;
}

static int same_as_x(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    (void)why, (void)size;
    out[0] = op->in[0];
    return 1;
}

static int maxpool(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_pool_params *p = &op->p.pool;
    const struct tb_shape x = op->in[0].shape;
    /* PyTorch's limits: a window always holds at least one real element when pad <= k/2. */
    if (p->k < 1 || p->stride < 1 || p->pad < 0 || p->pad > p->k / 2 || (int64_t)x.h + 2 * p->pad < p->k ||
        (int64_t)x.w + 2 * p->pad < p->k)
        return bad(op, why, size, "x %s, kernel %d, stride %d, padding %d: the window does not fit", dims(x), p->k,
                   p->stride, p->pad);
    out[0] = f32(x.n, x.c, (x.h + 2 * p->pad - p->k) / p->stride + 1, (x.w + 2 * p->pad - p->k) / p->stride + 1);
    return 1;
}

static int global_avgpool(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    (void)why, (void)size;
    out[0] = f32(op->in[0].shape.n, op->in[0].shape.c, 1, 1);
    return 1;
}

static int resize(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_shape x = op->in[0].shape;
    if (op->p.resize.out_h < 1 || op->p.resize.out_w < 1)
        return bad(op, why, size, "x %s to %dx%d: the output needs a side >= 1", dims(x), op->p.resize.out_h,
                   op->p.resize.out_w);
    out[0] = f32(x.n, x.c, op->p.resize.out_h, op->p.resize.out_w);
    return 1;
}

static int concat(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_shape a = op->in[0].shape;
    int c = 0;
    for (uint32_t i = 0; i < op->nin; i++) {
        const struct tb_shape b = op->in[i].shape;
        if (b.n != a.n || b.h != a.h || b.w != a.w)
            return bad(op, why, size, "input %u %s differs from input 0 %s in N, H or W", i, dims(b), dims(a));
        c += b.c;
    }
    out[0] = f32(a.n, c, a.h, a.w);
    return 1;
}

static int add(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    if (!tb_shape_eq(op->in[0].shape, op->in[1].shape))
        return bad(op, why, size, "a %s and b %s differ in shape", dims(op->in[0].shape), dims(op->in[1].shape));
    out[0] = op->in[0];
    return 1;
}

static int mul(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_shape x = op->in[0].shape, g = op->in[1].shape;
    if (g.n != x.n || g.h != x.h || g.w != x.w || (g.c != x.c && g.c != 1))
        return bad(op, why, size, "g %s must be %dx%dx%dx%d or %dx1x%dx%d to multiply x %s", dims(g), x.n, x.c, x.h,
                   x.w, x.n, x.h, x.w, dims(x));
    out[0] = op->in[0];
    return 1;
}

static int dropout(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_dropout_params *p = &op->p.dropout;
    const struct tb_shape x = op->in[0].shape;
    if (!(p->p >= 0 && p->p < 1))
        return bad(op, why, size, "p = %g; allowed: 0 <= p < 1", (double)p->p);
    out[0] = op->in[0];
    out[1] = (struct tb_tensor_desc){ TB_U8, { x.n, x.c, p->channelwise ? 1 : x.h, p->channelwise ? 1 : x.w } };
    return 2;
}

static int softmax_ce(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_shape l = op->in[0].shape, y = op->in[1].shape;
    if ((uint32_t)(op->p.ce.weighted ? 3 : 2) != op->nin)
        return bad(op, why, size, "weighted = %d with %u inputs: logits, labels and weights only when weighted",
                   op->p.ce.weighted, op->nin);
    if (y.n != l.n || y.c != 1 || y.h != l.h || y.w != l.w)
        return bad(op, why, size, "labels %s must be %dx1x%dx%d to match logits %s", dims(y), l.n, l.h, l.w, dims(l));
    if (op->p.ce.weighted && !tb_shape_eq(op->in[2].shape, (struct tb_shape){ l.n, l.c, 1, 1 }))
        return bad(op, why, size, "class weights %s must be %dx%dx1x1", dims(op->in[2].shape), l.n, l.c);
    out[0] = f32(1, 1, 1, 1);
    return 1;
}

static int bce_logits(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_shape l = op->in[0].shape, t = op->in[1].shape;
    if (l.c != 1 || !tb_shape_eq(l, t))
        return bad(op, why, size, "logits %s and targets %s must both be Nx1xHxW", dims(l), dims(t));
    out[0] = f32(1, 1, 1, 1);
    return 1;
}

static int class_weights(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_shape l = op->in[0].shape;
    if (l.c != 1 || op->p.label.classes < 1)
        return bad(op, why, size, "labels %s must be Nx1xHxW and classes (%d) at least 1", dims(l),
                   op->p.label.classes);
    out[0] = f32(l.n, op->p.label.classes, 1, 1);
    return 1;
}

static int mask_labels(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_shape l = op->in[0].shape, x = op->in[1].shape;
    if (l.c != 1 || !tb_shape_eq(l, x))
        return bad(op, why, size, "labels %s and x %s must both be Nx1xHxW", dims(l), dims(x));
    out[0] = op->in[0];
    return 1;
}

static int dual_task(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size)
{
    const struct tb_shape l = op->in[0].shape, y = op->in[1].shape;
    if (y.n != l.n || y.c != 1 || y.h != l.h || y.w != l.w)
        return bad(op, why, size, "labels %s must be %dx1x%dx%d to match logits %s", dims(y), l.n, l.h, l.w, dims(l));
    if (l.h < 3 || l.w < 3)
        return bad(op, why, size, "logits %s: H and W must be at least 3 (the smoothing pads by reflection)", dims(l));
    if (!(op->p.dual.tau > 0))
        return bad(op, why, size, "tau = %g; allowed: tau > 0", (double)op->p.dual.tau);
    out[0] = f32(1, 1, 1, 1);
    out[1] = op->in[0];
    return 2;
}

/* ------------------------------------------------------------------ the table */

#define U8 TB_U8
#define F32 TB_F32

/* Inputs min_in..max_in; the dtype of input i is dtype[i], and of inputs past the list
 * the last one listed (concat's). */
static const struct {
    uint32_t min_in, max_in;
    enum tb_dtype dtype[5];
    shape_rule rule;
} rules[TB_OP_KIND_COUNT] = {
    [TB_OP_CONV2D] = { 2, 3, { F32, F32, F32 }, conv2d },
    [TB_OP_BATCHNORM] = { 5, 5, { F32, F32, F32, F32, F32 }, batchnorm },
    [TB_OP_RELU] = { 1, 1, { F32 }, same_as_x },
    [TB_OP_SIGMOID] = { 1, 1, { F32 }, same_as_x },
    [TB_OP_MAXPOOL] = { 1, 1, { F32 }, maxpool },
    [TB_OP_GLOBAL_AVGPOOL] = { 1, 1, { F32 }, global_avgpool },
    [TB_OP_RESIZE] = { 1, 1, { F32 }, resize },
    [TB_OP_CONCAT] = { 2, TB_OP_MAX_IN, { F32 }, concat },
    [TB_OP_ADD] = { 2, 2, { F32, F32 }, add },
    [TB_OP_MUL] = { 2, 2, { F32, F32 }, mul },
    [TB_OP_DROPOUT] = { 1, 1, { F32 }, dropout },
    [TB_OP_SOFTMAX_CE] = { 2, 3, { F32, U8, F32 }, softmax_ce },
    [TB_OP_BCE_LOGITS] = { 2, 2, { F32, U8 }, bce_logits },
    [TB_OP_CLASS_WEIGHTS] = { 1, 1, { U8 }, class_weights },
    [TB_OP_MASK_LABELS] = { 2, 2, { U8, F32 }, mask_labels },
    [TB_OP_DUAL_TASK] = { 2, 2, { F32, U8 }, dual_task },
};

static enum tb_dtype dtype_of(int kind, uint32_t i)
{
    uint32_t listed = 0;
    while (listed < 5 && rules[kind].dtype[listed])
        listed++;
    return rules[kind].dtype[i < listed ? i : listed - 1];
}

static const char *dtype_name(enum tb_dtype t)
{
    return t == TB_F32 ? "f32" : t == TB_U8 ? "u8" : "?";
}

int tb_op_outputs(const struct tb_op *op, struct tb_tensor_desc out[TB_OP_MAX_OUT], uint32_t *nout, char *why,
                  size_t why_size)
{
    *nout = 0;
    if ((int)op->kind <= 0 || op->kind >= TB_OP_KIND_COUNT || !rules[op->kind].rule) {
        snprintf(why, why_size, "op kind %d: no such op", (int)op->kind);
        return -1;
    }
    if (op->nin < rules[op->kind].min_in || op->nin > rules[op->kind].max_in)
        return bad(op, why, why_size, "%u inputs; it takes %u to %u", op->nin, rules[op->kind].min_in,
                   rules[op->kind].max_in);
    for (uint32_t i = 0; i < op->nin; i++) {
        if (op->in[i].dtype != dtype_of(op->kind, i))
            return bad(op, why, why_size, "input %u is %s, expected %s", i, dtype_name(op->in[i].dtype),
                       dtype_name(dtype_of(op->kind, i)));
        if (!all_positive(op->in[i].shape))
            return bad(op, why, why_size, "input %u has shape %s: every dimension must be >= 1", i,
                       dims(op->in[i].shape));
    }
    int n = rules[op->kind].rule(op, out, why, why_size);
    if (n < 0)
        return -1;
    for (int j = 0; j < n; j++)
        if (!all_positive(out[j].shape))
            return bad(op, why, why_size, "output %d would be %s: every dimension must be >= 1", j, dims(out[j].shape));
    *nout = (uint32_t)n;
    return 0;
}

int tb_op_check(const struct tb_op *op, char *why, size_t why_size)
{
    struct tb_tensor_desc want[TB_OP_MAX_OUT];
    uint32_t n;
    if (tb_op_outputs(op, want, &n, why, why_size))
        return -1;
    if (op->nout != n)
        return bad(op, why, why_size, "%u outputs; it makes %u", op->nout, n);
    for (uint32_t j = 0; j < n; j++)
        if (op->out[j].dtype != want[j].dtype || !tb_shape_eq(op->out[j].shape, want[j].shape))
            return bad(op, why, why_size, "output %u is %s %s; its inputs and parameters make %s %s", j,
                       dtype_name(op->out[j].dtype), dims(op->out[j].shape), dtype_name(want[j].dtype),
                       dims(want[j].shape));
    return 0;
}
