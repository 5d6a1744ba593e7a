/* backends/cpu/cpu_pool.c: max pooling (k, stride, pad) and global average pooling.
 *
 * Each kernel runs on the tensors' NHWC views (tb_cpu_view: a blocked tensor is an NHWC
 * one of C/B times the images with B channels each; x and y have the same C, so the same
 * layout): a pixel's channels are contiguous, so every window loop runs over pixels with a
 * vectorisable channel loop inside. Backward passes are gathers (each input element sums the
 * contributions of the outputs that read it, in a fixed order) so that no two threads write
 * one element and the result does not depend on the thread count. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_shared.h"

/* ------------------------------------------------------------------ max pooling */

/* The rows (or columns) [*lo, *hi) of an input of size `in` that output `o` reads; the
 * padding is left out, which is what "never wins" means. */
static inline void window(int o, const struct tb_pool_params *pp, int in, int *lo, int *hi)
{
    int start = o * pp->stride - pp->pad, end = start + pp->k;
    *lo = start < 0 ? 0 : start;
    *hi = end > in ? in : end;
}

/* Max of one window, channels vectorised, in PyTorch's order and comparison: row-major, a
 * value replaces the running maximum when it is greater or NaN, so the first maximum is kept.
 * best[C] gets the maxima and, when arg is not NULL, arg[C] their row-major input position
 * (row * W + column; the first real element when nothing beats -inf). */
static inline void window_max(const float *x, struct tb_shape s, int n, int ylo, int yhi, int xlo, int xhi, float *best,
                              int32_t *arg)
{
    const int C = s.c;
#pragma omp simd
    for (int c = 0; c < C; c++)
        best[c] = -INFINITY;
    if (arg) {
#pragma omp simd
        for (int c = 0; c < C; c++)
            arg[c] = ylo * s.w + xlo;
    }
    for (int iy = ylo; iy < yhi; iy++)
        for (int ix = xlo; ix < xhi; ix++) {
            const float *xp = x + tb_cpu_at(s, n, 0, iy, ix);
            if (arg) {
                int32_t pos = iy * s.w + ix;
#pragma omp simd
                for (int c = 0; c < C; c++) {
                    /* selects rather than branches, so that the loop vectorises */
                    const float v = xp[c];
                    const int take = (v > best[c]) | isnan(v);
                    best[c] = take ? v : best[c];
                    arg[c] = take ? pos : arg[c];
                }
            } else {
#pragma omp simd
                for (int c = 0; c < C; c++) {
                    const float v = xp[c];
                    best[c] = (v > best[c]) | isnan(v) ? v : best[c];
                }
            }
        }
}

static int maxpool_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                           const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)step;
    (void)err;
    const struct tb_pool_params *pp = &op->p.pool;
    struct tb_shape xs = tb_cpu_view(cpu, &op->in[0]), ys = tb_cpu_view(cpu, &op->out[0]);
    const float *x = in[0].data; /* (N,C,H,W) */
    float *y = out[0].data;      /* (N,C,OH,OW) */
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < ys.n; n++)
        for (int oy = 0; oy < ys.h; oy++) {
            int ylo, yhi;
            window(oy, pp, xs.h, &ylo, &yhi);
            for (int ox = 0; ox < ys.w; ox++) {
                int xlo, xhi;
                window(ox, pp, xs.w, &xlo, &xhi);
                window_max(x, xs, n, ylo, yhi, xlo, xhi, y + tb_cpu_at(ys, n, 0, oy, ox), NULL);
            }
        }
    return TB_OK;
}

static int maxpool_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                            const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                            struct tb_err *err)
{
    (void)state;
    (void)out;
    const struct tb_pool_params *pp = &op->p.pool;
    struct tb_shape xs = tb_cpu_view(cpu, &op->in[0]), ys = tb_cpu_view(cpu, &op->out[0]);
    const float *x = in[0].data;    /* (N,C,H,W) */
    const float *dy = dout[0].data; /* (N,C,OH,OW) */
    float *dx = din[0].data;        /* (N,C,H,W) */
    if (!dx)
        return TB_OK;
    /* Pass 1: the position of each output's maximum, recomputed from x with the forward's
     * own comparison (so it is the forward's winner, NaN included). Scratch: the positions
     * (int32, NHWC like y) followed by the maxima (float, needed only while searching). */
    size_t ny = tb_shape_elems(ys);
    int32_t *arg = tb_cpu_scratch(cpu, ny * (sizeof(int32_t) + sizeof(float)), err);
    if (!arg)
        return err->status;
    float *best = (float *)(arg + ny);
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < ys.n; n++)
        for (int oy = 0; oy < ys.h; oy++) {
            int ylo, yhi;
            window(oy, pp, xs.h, &ylo, &yhi);
            for (int ox = 0; ox < ys.w; ox++) {
                int xlo, xhi;
                window(ox, pp, xs.w, &xlo, &xhi);
                size_t at = tb_cpu_at(ys, n, 0, oy, ox);
                window_max(x, xs, n, ylo, yhi, xlo, xhi, best + at, arg + at);
            }
        }
    /* Pass 2: each input pixel gathers dy from the outputs whose window holds it and whose
     * maximum it is, in ascending (oy, ox) order. Output oy reads rows
     * [oy*stride - pad, oy*stride - pad + k), so row iy is read by
     * oy in [ceil((iy + pad - k + 1) / stride), floor((iy + pad) / stride)]. */
    const int C = xs.c, s = pp->stride;
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < xs.n; n++)
        for (int iy = 0; iy < xs.h; iy++) {
            int ty = iy + pp->pad - pp->k + 1;
            int oylo = ty <= 0 ? 0 : (ty + s - 1) / s;
            int oyhi = (iy + pp->pad) / s;
            if (oyhi > ys.h - 1)
                oyhi = ys.h - 1;
            for (int ix = 0; ix < xs.w; ix++) {
                int tx = ix + pp->pad - pp->k + 1;
                int oxlo = tx <= 0 ? 0 : (tx + s - 1) / s;
                int oxhi = (ix + pp->pad) / s;
                if (oxhi > ys.w - 1)
                    oxhi = ys.w - 1;
                float *g = dx + tb_cpu_at(xs, n, 0, iy, ix);
                const int32_t self = iy * xs.w + ix;
#pragma omp simd
                for (int c = 0; c < C; c++)
                    g[c] = 0.0f;
                for (int oy = oylo; oy <= oyhi; oy++)
                    for (int ox = oxlo; ox <= oxhi; ox++) {
                        size_t at = tb_cpu_at(ys, n, 0, oy, ox);
                        const int32_t *a = arg + at;
                        const float *d = dy + at;
#pragma omp simd
                        for (int c = 0; c < C; c++) {
                            const float v = d[c];
                            g[c] += a[c] == self ? v : 0.0f;
                        }
                    }
            }
        }
    return TB_OK;
}

const struct tb_cpu_kernel TB_CPU_KERNEL(maxpool) = {
    .forward = maxpool_forward,
    .backward = maxpool_backward,
};

/* ------------------------------------------------------------------ global average pooling */

/* Channels per block of the forward's parallel loop: a batch of 1 still splits over threads,
 * and each output is summed by one thread, in pixel order. */
#define AVGPOOL_CBLOCK 64

static int avgpool_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                           const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)step;
    (void)err;
    struct tb_shape s = tb_cpu_view(cpu, &op->in[0]);
    const float *x = in[0].data; /* (N,C,H,W) */
    float *y = out[0].data;      /* (N,C,1,1): C values per (view) image */
    const int C = s.c, blocks = (C + AVGPOOL_CBLOCK - 1) / AVGPOOL_CBLOCK;
    const size_t hw = (size_t)s.h * (size_t)s.w;
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < s.n; n++)
        for (int b = 0; b < blocks; b++) {
            int c0 = b * AVGPOOL_CBLOCK, c1 = c0 + AVGPOOL_CBLOCK < C ? c0 + AVGPOOL_CBLOCK : C;
            /* double sums: the mean of a large map stays exact to float precision */
            double acc[AVGPOOL_CBLOCK] = { 0 };
            const float *xn = x + (size_t)n * hw * (size_t)C;
            for (size_t p = 0; p < hw; p++) {
                const float *xp = xn + p * (size_t)C;
#pragma omp simd
                for (int c = c0; c < c1; c++)
                    acc[c - c0] += (double)xp[c];
            }
            for (int c = c0; c < c1; c++)
                y[(size_t)n * (size_t)C + (size_t)c] = (float)(acc[c - c0] / (double)hw);
        }
    return TB_OK;
}

static int avgpool_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                            const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                            struct tb_err *err)
{
    (void)state;
    (void)in;
    (void)out;
    (void)err;
    struct tb_shape s = tb_cpu_view(cpu, &op->in[0]);
    const float *dy = dout[0].data; /* (N,C,1,1) */
    float *dx = din[0].data;        /* (N,C,H,W) */
    if (!dx)
        return TB_OK;
    const size_t C = (size_t)s.c, hw = (size_t)s.h * (size_t)s.w, pixels = (size_t)s.n * hw;
    /* divided, not multiplied by a rounded 1/(H*W): PyTorch's grad / (H*W) */
    const float area = (float)hw;
#pragma omp parallel for schedule(static)
    for (size_t q = 0; q < pixels; q++) {
        const float *d = dy + q / hw * C;
        float *g = dx + q * C;
#pragma omp simd
        for (size_t c = 0; c < C; c++)
            g[c] = d[c] / area;
    }
    return TB_OK;
}

const struct tb_cpu_kernel TB_CPU_KERNEL(avgpool) = {
    .forward = avgpool_forward,
    .backward = avgpool_backward,
};
