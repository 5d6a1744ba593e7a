/* backends/cpu/cpu_resize.c: bilinear resize to a given size, PyTorch's
 * F.interpolate(mode='bilinear', align_corners=...) with `size` given.
 *
 * Each axis is independent: output index o reads input indices i0[o] and i1[o] with weights
 * l0[o] and l1[o]. These tables depend only on the shapes and align_corners, so prepare
 * builds them once (in float, as PyTorch computes them for float tensors), together with
 * their transpose (which outputs read input i, with which weight) for the backward pass:
 * that pass is a gather, each input element summing its outputs in a fixed order, so it
 * needs no atomics and its result does not depend on the thread count. Both run on the
 * tensors' NHWC views (tb_cpu_view): x and y have the same C and so the same layout. */
#include <stdlib.h>

#include "cpu_shared.h"

struct axis {
    int in, out;
    int *i0, *i1;   /* [out]: the two input indices output o reads */
    float *l0, *l1; /* [out]: their weights */
    /* The transpose: input i is read by outputs src[first[i] .. first[i+1]) with weights
     * wt[...], in ascending output order (an output whose two indices coincide, at the
     * border, appears twice, once per weight). */
    int *first; /* [in + 1] */
    int *src;   /* [2 * out] */
    float *wt;  /* [2 * out] */
};

struct resize_state {
    struct axis h, w;
};

static void axis_free(struct axis *a)
{
    free(a->i0);
    free(a->i1);
    free(a->l0);
    free(a->l1);
    free(a->first);
    free(a->src);
    free(a->wt);
}

/* PyTorch's compute_source_index_and_lambda for linear modes, in float. */
static int axis_build(struct axis *a, int in, int out, int align_corners)
{
    a->in = in;
    a->out = out;
    size_t o = (size_t)out;
    a->i0 = malloc(o * sizeof *a->i0);
    a->i1 = malloc(o * sizeof *a->i1);
    a->l0 = malloc(o * sizeof *a->l0);
    a->l1 = malloc(o * sizeof *a->l1);
    a->first = calloc((size_t)in + 1, sizeof *a->first);
    a->src = malloc(2 * o * sizeof *a->src);
    a->wt = malloc(2 * o * sizeof *a->wt);
    if (!a->i0 || !a->i1 || !a->l0 || !a->l1 || !a->first || !a->src || !a->wt)
        return TB_ERR_NOMEM;
    /* area_pixel_compute_scale: (in-1)/(out-1) with align_corners (0 for one output),
     * else in/out. */
    float scale;
    if (align_corners)
        scale = out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f;
    else
        scale = (float)in / (float)out;
    for (int d = 0; d < out; d++) {
        if (in == out) { /* PyTorch copies a same-size axis exactly */
            a->i0[d] = a->i1[d] = d;
            a->l0[d] = 1.0f;
            a->l1[d] = 0.0f;
            continue;
        }
        /* area_pixel_compute_source_index: dst * scale with align_corners, else
         * (dst + 0.5) * scale - 0.5 clamped at 0. */
        float real;
        if (align_corners) {
            real = scale * (float)d;
        } else {
            real = scale * ((float)d + 0.5f) - 0.5f;
            if (real < 0.0f)
                real = 0.0f;
        }
        /* guard_index_and_lambda: the index is floor(real) but at most in-1, the weight of
         * the next one is what remains, in [0, 1]. */
        int i = (int)real; /* real >= 0: truncation is floor */
        if (i > in - 1)
            i = in - 1;
        float l1 = real - (float)i;
        l1 = l1 < 0.0f ? 0.0f : l1 > 1.0f ? 1.0f : l1;
        a->i0[d] = i;
        a->i1[d] = i < in - 1 ? i + 1 : i;
        a->l1[d] = l1;
        a->l0[d] = 1.0f - l1;
    }
    /* The transpose, by counting: entries go in ascending output order. */
    for (int d = 0; d < out; d++) {
        a->first[a->i0[d] + 1]++;
        a->first[a->i1[d] + 1]++;
    }
    for (int i = 0; i < in; i++)
        a->first[i + 1] += a->first[i];
    int *fill = malloc((size_t)in * sizeof *fill);
    if (!fill)
        return TB_ERR_NOMEM;
    for (int i = 0; i < in; i++)
        fill[i] = a->first[i];
    for (int d = 0; d < out; d++) {
        int k = fill[a->i0[d]]++;
        a->src[k] = d;
        a->wt[k] = a->l0[d];
        k = fill[a->i1[d]]++;
        a->src[k] = d;
        a->wt[k] = a->l1[d];
    }
    free(fill);
    return TB_OK;
}

static void resize_release(void *state)
{
    struct resize_state *st = state;
    if (!st)
        return;
    axis_free(&st->h);
    axis_free(&st->w);
    free(st);
}

static int resize_prepare(struct tb_cpu *cpu, const struct tb_op *op, void **state, struct tb_err *err)
{
    (void)cpu;
    const struct tb_resize_params *rp = &op->p.resize;
    struct tb_shape x = op->in[0].shape, y = op->out[0].shape; /* checked by the op contract */
    struct resize_state *st = calloc(1, sizeof *st);
    if (!st || axis_build(&st->h, x.h, y.h, rp->align_corners) || axis_build(&st->w, x.w, y.w, rp->align_corners)) {
        resize_release(st);
        return tb_err_set(err, TB_ERR_NOMEM, "op %u (resize): out of memory", op->id);
    }
    *state = st;
    return TB_OK;
}

static int resize_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                          const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)step;
    (void)err;
    const struct resize_state *st = state;
    const struct axis *ah = &st->h, *aw = &st->w;
    struct tb_shape xs = tb_cpu_view(cpu, &op->in[0]), ys = tb_cpu_view(cpu, &op->out[0]);
    const float *x = in[0].data; /* (N,C,H,W) */
    float *y = out[0].data;      /* (N,C,OH,OW) */
    const int C = xs.c;
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < ys.n; n++)
        for (int oy = 0; oy < ys.h; oy++) {
            const int h0 = ah->i0[oy], h1 = ah->i1[oy];
            const float hl0 = ah->l0[oy], hl1 = ah->l1[oy];
            for (int ox = 0; ox < ys.w; ox++) {
                const int w0 = aw->i0[ox], w1 = aw->i1[ox];
                const float wl0 = aw->l0[ox], wl1 = aw->l1[ox];
                const float *x00 = x + tb_cpu_at(xs, n, 0, h0, w0), *x01 = x + tb_cpu_at(xs, n, 0, h0, w1);
                const float *x10 = x + tb_cpu_at(xs, n, 0, h1, w0), *x11 = x + tb_cpu_at(xs, n, 0, h1, w1);
                float *yp = y + tb_cpu_at(ys, n, 0, oy, ox);
#pragma omp simd
                for (int c = 0; c < C; c++)
                    yp[c] = hl0 * (wl0 * x00[c] + wl1 * x01[c]) + hl1 * (wl0 * x10[c] + wl1 * x11[c]);
            }
        }
    return TB_OK;
}

static int resize_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                           const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                           struct tb_err *err)
{
    (void)in;
    (void)out;
    (void)err;
    const struct resize_state *st = state;
    const struct axis *ah = &st->h, *aw = &st->w;
    struct tb_shape xs = tb_cpu_view(cpu, &op->in[0]), ys = tb_cpu_view(cpu, &op->out[0]);
    const float *dy = dout[0].data; /* (N,C,OH,OW) */
    float *dx = din[0].data;        /* (N,C,H,W) */
    if (!dx)
        return TB_OK;
    const int C = xs.c;
    /* dx[iy, ix] = sum over (oy, wy) reading row iy, then (ox, wx) reading column ix, of
     * wy * wx * dy[oy, ox]: the forward's weights, summed in ascending (oy, ox) order. */
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < xs.n; n++)
        for (int iy = 0; iy < xs.h; iy++)
            for (int ix = 0; ix < xs.w; ix++) {
                float *g = dx + tb_cpu_at(xs, n, 0, iy, ix);
#pragma omp simd
                for (int c = 0; c < C; c++)
                    g[c] = 0.0f;
                for (int ky = ah->first[iy]; ky < ah->first[iy + 1]; ky++) {
                    const int oy = ah->src[ky];
                    const float wy = ah->wt[ky];
                    for (int kx = aw->first[ix]; kx < aw->first[ix + 1]; kx++) {
                        const float wgt = wy * aw->wt[kx];
                        const float *d = dy + tb_cpu_at(ys, n, 0, oy, aw->src[kx]);
#pragma omp simd
                        for (int c = 0; c < C; c++)
                            g[c] += wgt * d[c];
                    }
                }
            }
    return TB_OK;
}

const struct tb_cpu_kernel TB_CPU_KERNEL(resize) = {
    .prepare = resize_prepare,
    .release = resize_release,
    .forward = resize_forward,
    .backward = resize_backward,
};
