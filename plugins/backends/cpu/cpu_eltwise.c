/* backends/cpu/cpu_eltwise.c: elementwise ops: relu, sigmoid, add, mul (with g broadcast over
 * channels) and dropout.
 *
 * Tensors are NHWC or channel-blocked (cpu_shared.h); two tensors of one shape share a
 * layout, so where they have the same shape the op is a flat loop over all elements. The
 * broadcast mul and the dropout mask need the pixel/channel structure: they loop over the
 * pixels of the tensor's NHWC view (tb_cpu_view), its channels the contiguous inner loop. No op here reduces across
 * threads: every output element is written by exactly one iteration, so the results do not depend on the thread count.
 * relu and add take bf16 and f16 themselves (the others run widened, cpu_widen.c). */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "cpu_shared.h"

/* Arity, dtypes and shapes are checked by the op contract before any kernel here is
 * prepared (tb_op_check in cpu_ops.c): these ops have nothing of their own to prepare. */

/* ------------------------------------------------------------------ relu */

/* The largest magnitude of a 16-bit dtype that is not NaN: its infinity's bits. */
static inline uint16_t inf_bits(enum tb_dtype d)
{
    return d == TB_BF16 ? 0x7f80u : 0x7c00u;
}

/* Whether a 16-bit value is > 0: sign clear, not zero, not NaN. */
static inline bool positive16(uint16_t h, uint16_t inf)
{
    return !(h & 0x8000u) && h != 0 && h <= inf;
}

/* At 16 bits on the bits (exact: max(x, 0) is x or 0): a negative value that is not -0 or
 * NaN becomes +0, as x < 0 ? 0 : x does in float. */
static void relu16_forward(const uint16_t *x, uint16_t *y, size_t n, uint16_t inf)
{
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        const uint16_t mag = x[i] & 0x7fffu;
        y[i] = (x[i] & 0x8000u) && mag != 0 && mag <= inf ? 0 : x[i];
    }
}

static void relu16_backward(const uint16_t *y, const uint16_t *dy, uint16_t *dx, size_t n, uint16_t inf)
{
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++)
        dx[i] = positive16(y[i], inf) ? dy[i] : 0;
}

static int relu_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                        const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)cpu;
    (void)state;
    (void)step;
    (void)err;
    if (op->in[0].dtype != TB_F32) {
        relu16_forward(in[0].data, out[0].data, tb_shape_elems(op->in[0].shape), inf_bits(op->in[0].dtype));
        return TB_OK;
    }
    const float *x = in[0].data; /* (N,C,H,W) */
    float *y = out[0].data;      /* (N,C,H,W) */
    size_t n = tb_shape_elems(op->in[0].shape);
    /* `x < 0 ? 0 : x` rather than fmaxf: a NaN passes through, as in PyTorch. */
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] < 0.0f ? 0.0f : x[i];
    return TB_OK;
}

static int relu_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                         const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                         struct tb_err *err)
{
    (void)cpu;
    (void)state;
    (void)in;
    (void)err;
    float *dx = din[0].data; /* (N,C,H,W) */
    if (!dx)
        return TB_OK;
    size_t n = tb_shape_elems(op->in[0].shape);
    if (op->in[0].dtype != TB_F32) {
        relu16_backward(out[0].data, dout[0].data, din[0].data, n, inf_bits(op->in[0].dtype));
        return TB_OK;
    }
    const float *y = out[0].data;   /* (N,C,H,W) */
    const float *dy = dout[0].data; /* (N,C,H,W) */
    /* From y, as PyTorch does: y > 0 exactly where x > 0, so x == 0 gets gradient 0. */
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++)
        dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    return TB_OK;
}

const struct tb_cpu_kernel TB_CPU_KERNEL(relu) = {
    .forward = relu_forward,
    .backward = relu_backward,
    .dtypes = 1u << TB_BF16 | 1u << TB_F16,
};

/* ------------------------------------------------------------------ sigmoid */

static int sigmoid_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                           const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)cpu;
    (void)state;
    (void)step;
    (void)err;
    const float *x = in[0].data; /* (N,C,H,W) */
    float *y = out[0].data;      /* (N,C,H,W) */
    size_t n = tb_shape_elems(op->in[0].shape);
    /* exp(-x) overflows to inf for x < -88 and y becomes 0, the correctly rounded value. */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        y[i] = 1.0f / (1.0f + expf(-x[i]));
    return TB_OK;
}

static int sigmoid_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                            const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                            struct tb_err *err)
{
    (void)cpu;
    (void)state;
    (void)in;
    (void)err;
    float *dx = din[0].data; /* (N,C,H,W) */
    if (!dx)
        return TB_OK;
    const float *y = out[0].data;   /* (N,C,H,W) */
    const float *dy = dout[0].data; /* (N,C,H,W) */
    size_t n = tb_shape_elems(op->in[0].shape);
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++)
        dx[i] = dy[i] * y[i] * (1.0f - y[i]);
    return TB_OK;
}

const struct tb_cpu_kernel TB_CPU_KERNEL(sigmoid) = {
    .forward = sigmoid_forward,
    .backward = sigmoid_backward,
};

/* ------------------------------------------------------------------ add */

static int add_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                       const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)cpu;
    (void)state;
    (void)step;
    (void)err;
    size_t n = tb_shape_elems(op->in[0].shape);
    if (op->in[0].dtype != TB_F32) { /* the sum in float, rounded once */
        const uint16_t *a = in[0].data, *b = in[1].data;
        uint16_t *y = out[0].data;
        if (op->in[0].dtype == TB_BF16) {
#pragma omp parallel for simd schedule(static)
            for (size_t i = 0; i < n; i++)
                y[i] = tb_bf16_from_f32(tb_f32_from_bf16(a[i]) + tb_f32_from_bf16(b[i]));
        } else {
#pragma omp parallel for simd schedule(static)
            for (size_t i = 0; i < n; i++)
                y[i] = tb_f16_from_f32(tb_f32_from_f16(a[i]) + tb_f32_from_f16(b[i]));
        }
        return TB_OK;
    }
    const float *a = in[0].data; /* (N,C,H,W) */
    const float *b = in[1].data; /* (N,C,H,W) */
    float *y = out[0].data;      /* (N,C,H,W) */
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
    return TB_OK;
}

static int add_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                        const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                        struct tb_err *err)
{
    (void)cpu;
    (void)state;
    (void)in;
    (void)out;
    (void)err;
    size_t bytes = tb_shape_elems(op->in[0].shape) * tb_dtype_size(op->in[0].dtype);
    /* Both gradients are dy itself. */
    for (int i = 0; i < 2; i++)
        if (din[i].data && din[i].data != dout[0].data) /* (memcpy onto itself is undefined) */
            memcpy(din[i].data, dout[0].data, bytes);
    return TB_OK;
}

const struct tb_cpu_kernel TB_CPU_KERNEL(add) = {
    .forward = add_forward,
    .backward = add_backward,
    .dtypes = 1u << TB_BF16 | 1u << TB_F16,
};

/* ------------------------------------------------------------------ mul */

static int mul_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                       const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)step;
    (void)err;
    struct tb_shape s = op->in[0].shape;
    const float *x = in[0].data; /* (N,C,H,W) */
    const float *g = in[1].data; /* (N,C,H,W) or (N,1,H,W) */
    float *y = out[0].data;      /* (N,C,H,W) */
    if (op->in[1].shape.c == s.c) {
        size_t n = tb_shape_elems(s);
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++)
            y[i] = x[i] * g[i];
        return TB_OK;
    }
    /* Broadcast: g (N,1,H,W) holds one value per pixel; x's view has the channels of a
     * pixel (all of them, or one block) contiguous, and C/B view images per image. */
    const struct tb_shape v = tb_cpu_view(cpu, &op->in[0]);
    const size_t hw = (size_t)s.h * (size_t)s.w, per = (size_t)(s.c / v.c);
    size_t pixels = (size_t)v.n * hw, C = (size_t)v.c;
#pragma omp parallel for schedule(static)
    for (size_t p = 0; p < pixels; p++) {
        float gp = g[p / hw / per * hw + p % hw];
        const float *xp = x + p * C;
        float *yp = y + p * C;
#pragma omp simd
        for (size_t c = 0; c < C; c++)
            yp[c] = xp[c] * gp;
    }
    return TB_OK;
}

static int mul_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                        const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                        struct tb_err *err)
{
    (void)state;
    (void)out;
    (void)err;
    struct tb_shape s = op->in[0].shape;
    const float *x = in[0].data;    /* (N,C,H,W) */
    const float *g = in[1].data;    /* (N,C,H,W) or (N,1,H,W) */
    const float *dy = dout[0].data; /* (N,C,H,W) */
    float *dx = din[0].data;        /* (N,C,H,W), or NULL */
    float *dg = din[1].data;        /* as g, or NULL */
    if (op->in[1].shape.c == s.c) {
        size_t n = tb_shape_elems(s);
        if (dx) {
#pragma omp parallel for simd schedule(static)
            for (size_t i = 0; i < n; i++)
                dx[i] = dy[i] * g[i];
        }
        if (dg) {
#pragma omp parallel for simd schedule(static)
            for (size_t i = 0; i < n; i++)
                dg[i] = dy[i] * x[i];
        }
        return TB_OK;
    }
    const struct tb_shape v = tb_cpu_view(cpu, &op->in[0]);
    const size_t hw = (size_t)s.h * (size_t)s.w, per = (size_t)(s.c / v.c), C = (size_t)v.c;
    if (dx) {
        const size_t pixels = (size_t)v.n * hw;
#pragma omp parallel for schedule(static)
        for (size_t p = 0; p < pixels; p++) {
            const float gp = g[p / hw / per * hw + p % hw];
            const float *dyp = dy + p * C;
            float *dxp = dx + p * C;
#pragma omp simd
            for (size_t c = 0; c < C; c++)
                dxp[c] = dyp[c] * gp;
        }
    }
    if (!dg)
        return TB_OK;
    /* dg of a pixel sums over its own channels only, in channel order (block by block when
     * blocked), inside one iteration: no sum crosses threads. */
    const size_t pixels = (size_t)s.n * hw;
#pragma omp parallel for schedule(static)
    for (size_t q = 0; q < pixels; q++) {
        const size_t n = q / hw, at = q % hw;
        float acc = 0.0f;
        for (size_t k = 0; k < per; k++) {
            const size_t p = (n * per + k) * hw + at;
            const float *xp = x + p * C, *dyp = dy + p * C;
            for (size_t c = 0; c < C; c++)
                acc += dyp[c] * xp[c];
        }
        dg[q] = acc;
    }
    return TB_OK;
}

const struct tb_cpu_kernel TB_CPU_KERNEL(mul) = {
    .forward = mul_forward,
    .backward = mul_backward,
};

/* ------------------------------------------------------------------ dropout
 *
 * The mask element with canonical (NCHW) index i is kept when
 * tb_cpu_uniform(seed, step, op id, i) >= p. The NCHW index, not the device offset, so that
 * the mask is the same whatever the layout a backend stores it in; for a channelwise mask
 * (N,C,1,1) both are n * C + c. A full mask has x's shape and so x's layout. */

static int dropout_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                           const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)err;
    const struct tb_dropout_params *dp = &op->p.dropout;
    struct tb_shape s = op->in[0].shape;
    const float *x = in[0].data; /* (N,C,H,W) */
    float *y = out[0].data;      /* (N,C,H,W) */
    uint8_t *mask = out[1].data; /* (N,C,1,1) channelwise, else (N,C,H,W) */
    if (!dp->training) {
        if (y != x) /* in place is already done, and memcpy onto itself is undefined */
            memcpy(y, x, tb_shape_elems(s) * sizeof(float));
        return TB_OK;
    }
    const float p = dp->p;
    /* y = x * (mask / (1-p)): the kept scale is one float, as PyTorch's scaled noise. */
    const float scale = 1.0f / (1.0f - p);
    const uint64_t seed = dp->seed;
    const uint32_t id = op->id;
    /* The view: C here is the channels of one view image (all, or one block). */
    const struct tb_shape v = tb_cpu_view(cpu, &op->in[0]);
    const size_t C = (size_t)v.c, H = (size_t)s.h, W = (size_t)s.w, hw = H * W;
    if (dp->channelwise) {
        /* Draw the N*C mask first (small), then apply it per pixel, channels inner. View
         * image k's channels are mask entries k * C.. (n * C_all + block * B = k * B). */
        size_t maps = (size_t)s.n * (size_t)s.c;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < maps; i++)
            mask[i] = tb_cpu_uniform(seed, step, id, i) >= p;
        size_t pixels = (size_t)v.n * hw;
#pragma omp parallel for schedule(static)
        for (size_t q = 0; q < pixels; q++) {
            const uint8_t *m = mask + q / hw * C;
            const float *xq = x + q * C;
            float *yq = y + q * C;
#pragma omp simd
            for (size_t c = 0; c < C; c++)
                yq[c] = xq[c] * ((float)m[c] * scale);
        }
        return TB_OK;
    }
    const size_t per = (size_t)(s.c / v.c); /* view images per image */
#pragma omp parallel for collapse(2) schedule(static)
    for (int k = 0; k < v.n; k++)
        for (int r = 0; r < s.h; r++)
            for (int col = 0; col < s.w; col++) {
                size_t at = tb_cpu_at(v, k, 0, r, col);
                /* canonical index of (n, c0 + c, r, col) = base + c * H * W, with view image
                 * k = image n's block c0 / C */
                const uint64_t n = (uint64_t)k / per, c0 = (uint64_t)k % per * C;
                uint64_t base = ((n * (uint64_t)s.c + c0) * H + (uint64_t)r) * W + (uint64_t)col;
                for (size_t c = 0; c < C; c++) {
                    uint8_t keep = tb_cpu_uniform(seed, step, id, base + c * hw) >= p;
                    mask[at + c] = keep;
                    y[at + c] = x[at + c] * ((float)keep * scale);
                }
            }
    return TB_OK;
}

static int dropout_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                            const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                            struct tb_err *err)
{
    (void)state;
    (void)in;
    (void)err;
    const struct tb_dropout_params *dp = &op->p.dropout;
    struct tb_shape s = op->in[0].shape;
    float *dx = din[0].data; /* (N,C,H,W) */
    if (!dx)
        return TB_OK;
    const float *dy = dout[0].data;    /* (N,C,H,W) */
    const uint8_t *mask = out[1].data; /* (N,C,1,1) channelwise, else (N,C,H,W) */
    size_t n = tb_shape_elems(s);
    if (!dp->training) { /* inference is the identity (its mask was never written) */
        if (dx != dy)
            memcpy(dx, dy, n * sizeof(float));
        return TB_OK;
    }
    const float scale = 1.0f / (1.0f - dp->p);
    if (dp->channelwise) {
        const struct tb_shape v = tb_cpu_view(cpu, &op->in[0]);
        const size_t C = (size_t)v.c, hw = (size_t)s.h * (size_t)s.w, pixels = (size_t)v.n * hw;
#pragma omp parallel for schedule(static)
        for (size_t q = 0; q < pixels; q++) {
            const uint8_t *m = mask + q / hw * C;
#pragma omp simd
            for (size_t c = 0; c < C; c++)
                dx[q * C + c] = dy[q * C + c] * ((float)m[c] * scale);
        }
        return TB_OK;
    }
    /* The mask is stored in the same layout as dy. */
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++)
        dx[i] = dy[i] * ((float)mask[i] * scale);
    return TB_OK;
}

const struct tb_cpu_kernel TB_CPU_KERNEL(dropout) = {
    .forward = dropout_forward,
    .backward = dropout_backward,
};
