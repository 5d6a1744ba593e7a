/* backends/cpu/cpu_concat.c: concatenation along channels of 2..8 inputs.
 *
 * NHWC makes this a copy per pixel: the output pixel is the inputs' pixels one after the
 * other (C0 values, then C1, ...). Backward copies the slices back out. */
#include <string.h>

#include "cpu_internal.h"

static int concat_prepare(struct tb_cpu *cpu, const struct tb_op *op, void **state, struct tb_err *err)
{
    (void)cpu;
    (void)state;
    if (op->nin < 2 || op->nin > TB_OP_MAX_IN || op->nout != 1)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (concat): takes 2 to %d inputs and 1 output, not %u and %u",
                          op->id, TB_OP_MAX_IN, op->nin, op->nout);
    struct tb_shape y = op->out[0].shape;
    if (op->out[0].dtype != TB_F32)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (concat): y must be f32", op->id);
    int64_t channels = 0;
    for (uint32_t i = 0; i < op->nin; i++) {
        struct tb_shape x = op->in[i].shape;
        if (op->in[i].dtype != TB_F32)
            return tb_err_set(err, TB_ERR_RUNTIME, "op %u (concat): input %u must be f32", op->id, i);
        if (x.n != y.n || x.h != y.h || x.w != y.w)
            return tb_err_set(err, TB_ERR_RUNTIME,
                              "op %u (concat): input %u is (%d,%d,%d,%d); every input needs N, H, W of y (%d,%d,%d,%d)",
                              op->id, i, x.n, x.c, x.h, x.w, y.n, y.c, y.h, y.w);
        channels += x.c;
    }
    if (channels != y.c)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (concat): the inputs have %lld channels in all, y has %d", op->id,
                          (long long)channels, y.c);
    return TB_OK;
}

static int concat_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                          const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)cpu;
    (void)state;
    (void)step;
    (void)err;
    struct tb_shape ys = op->out[0].shape;
    float *y = out[0].data; /* (N, sum Ci, H, W) */
    const size_t pixels = (size_t)ys.n * (size_t)ys.h * (size_t)ys.w, C = (size_t)ys.c;
    const uint32_t k = op->nin;
#pragma omp parallel for schedule(static)
    for (size_t p = 0; p < pixels; p++) {
        float *yp = y + p * C;
        for (uint32_t i = 0; i < k; i++) {
            const size_t ci = (size_t)op->in[i].shape.c;
            const float *x = in[i].data; /* (N,Ci,H,W) */
            memcpy(yp, x + p * ci, ci * sizeof(float));
            yp += ci;
        }
    }
    return TB_OK;
}

static int concat_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                           const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                           struct tb_err *err)
{
    (void)cpu;
    (void)state;
    (void)in;
    (void)out;
    (void)err;
    struct tb_shape ys = op->out[0].shape;
    const float *dy = dout[0].data; /* (N, sum Ci, H, W) */
    const size_t pixels = (size_t)ys.n * (size_t)ys.h * (size_t)ys.w, C = (size_t)ys.c;
    const uint32_t k = op->nin;
#pragma omp parallel for schedule(static)
    for (size_t p = 0; p < pixels; p++) {
        const float *dp = dy + p * C;
        for (uint32_t i = 0; i < k; i++) {
            const size_t ci = (size_t)op->in[i].shape.c;
            float *dx = din[i].data; /* (N,Ci,H,W), or NULL when not wanted */
            if (dx)
                memcpy(dx + p * ci, dp, ci * sizeof(float));
            dp += ci;
        }
    }
    return TB_OK;
}

const struct tb_cpu_kernel tb_cpu_concat_kernel = {
    .prepare = concat_prepare,
    .forward = concat_forward,
    .backward = concat_backward,
};
