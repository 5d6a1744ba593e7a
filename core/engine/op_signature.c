/* core/engine/op_signature.c: an op's signature (trainbig/ops.h, tb_op_signature): what
 * decides its running time on a device, as one line of text. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <trainbig/ops.h>

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
            d[i].dtype == TB_U8 ? "u8" : "");
}

size_t tb_op_signature(const struct tb_op *op, bool backward, char *buf, size_t size)
{
    struct out o = { buf, size, 0 };
    const char *name = tb_op_kind_name(op->kind);
    put(&o, "%s", name ? name : "unknown");
    switch (op->kind) {
    case TB_OP_CONV2D: {
        const struct tb_conv2d_params *p = &op->p.conv;
        put(&o, " k=%dx%d s=%dx%d p=%dx%d d=%dx%d bias=%d", p->kh, p->kw, p->stride_h, p->stride_w, p->pad_h, p->pad_w,
            p->dil_h, p->dil_w, p->has_bias ? 1 : 0);
        break;
    }
    case TB_OP_BATCHNORM:
        put(&o, " training=%d sync=%d", op->p.bn.training ? 1 : 0, op->p.bn.sync ? 1 : 0);
        break;
    case TB_OP_MAXPOOL:
        put(&o, " k=%d s=%d p=%d", op->p.pool.k, op->p.pool.stride, op->p.pool.pad);
        break;
    case TB_OP_RESIZE:
        put(&o, " align=%d", op->p.resize.align_corners ? 1 : 0);
        break;
    case TB_OP_DROPOUT:
        put(&o, " channelwise=%d training=%d", op->p.dropout.channelwise ? 1 : 0, op->p.dropout.training ? 1 : 0);
        break;
    case TB_OP_SOFTMAX_CE:
        put(&o, " weighted=%d per_image=%d", op->p.ce.weighted ? 1 : 0, op->p.ce.per_image ? 1 : 0);
        break;
    default:
        break;
    }
    shapes(&o, "in", op->in, op->nin);
    shapes(&o, "out", op->out, op->nout);
    put(&o, " %s", backward ? "backward" : "forward");
    return o.len;
}
