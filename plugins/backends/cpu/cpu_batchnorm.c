/* backends/cpu/cpu_batchnorm.c: TB_OP_BATCHNORM, training and inference, forward and
 * backward, in plain C with OpenMP over NHWC or channel-blocked tensors: both are walked as
 * their NHWC view (tb_cpu_view), pixels of Cv contiguous channels, where view image k
 * holds channels (k % per) * Cv.. of image k / per (per = C / Cv: 1 for NHWC).
 *
 * Not oneDNN: its batch normalization outputs the variance (not 1/sqrt(var + eps)), leaves
 * the running statistics alone, and reduces in an order that depends on the thread count.
 * The statistics here are a few passes over memory, next to a convolution that does
 * hundreds of flops per element, so plain loops cost little.
 *
 * Determinism. Every per-channel sum is split into a fixed set of pixel blocks (the split
 * depends only on the shape, never on the thread count); each block sums its pixels in
 * order, in double, into its own row of partial sums, and the rows are then added in block
 * order. So the results are bit-identical run to run, for any thread count. The partial
 * sums live in the backend's scratch memory (tb_cpu_scratch).
 *
 * Numerics follow PyTorch: the batch variance is the biased one (mean of squared
 * deviations) for normalising and save_invstd = 1/sqrt(var + eps); running_var takes the
 * unbiased one (times P/(P-1), P = N*H*W). The sums are shifted by one sample per channel
 * (the first pixel's value), which keeps sum(x^2) - sum(x)^2/P from cancelling when the
 * mean is large against the spread.
 *
 * 16 bits (bf16, f16: x, y and their gradients; the statistics, gamma and beta are f32):
 * the loops walk spans of whole pixels (or of one pixel's channels where a pixel has more
 * than SPAN), converted to float SPAN elements at a time, computed as at f32, and y or dx
 * rounded once: ops.h's rule, the sums in the same order as at f32.
 *
 * Synchronised (op->p.bn.sync, more than one rank): the statistics are over every rank's
 * batch, reduced through the attached comm (cpu_comm.c) in double: first the sums of x
 * (the global mean), then the sums of deviations from that mean; backward reduces its two
 * sums the same way. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_shared.h"

/* About BLOCK_ELEMS elements (64 KiB of floats) per block, and at most MAX_BLOCKS blocks:
 * enough work in a block to make its partial-sum row (2 * C doubles) worth a row, enough
 * blocks to share among threads, and the cap bounds the partial-sum scratch at
 * MAX_BLOCKS * C * 16 bytes. */
#define BLOCK_ELEMS 16384
#define MAX_BLOCKS 128
/* Elements converted at a time at 16 bits: whole pixels, or runs of a wider pixel. */
#define SPAN 1024

/* The pixels of a span starting at pixel px of [.., end): as many whole pixels as SPAN
 * holds, or one pixel (walked in runs of SPAN channels) when cv is wider. */
static inline size_t span_pixels(size_t cv, size_t px, size_t end)
{
    const size_t fit = cv <= SPAN ? SPAN / cv : 1;
    return end - px < fit ? end - px : fit;
}

/* Elements [off, off + n) of a float tensor of dtype d as floats, n <= SPAN: its own memory
 * at f32, else converted into buf. */
static inline const float *row_in(const void *base, enum tb_dtype d, size_t off, size_t n, float *buf)
{
    if (d == TB_F32)
        return (const float *)base + off;
    const uint16_t *h = (const uint16_t *)base + off;
    if (d == TB_BF16) {
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            buf[i] = tb_f32_from_bf16(h[i]);
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            buf[i] = tb_f32_from_f16(h[i]);
    }
    return buf;
}

/* Where a row of results goes: the tensor itself at f32, else buf (row_out rounds it in). */
static inline float *row_at(void *base, enum tb_dtype d, size_t off, float *buf)
{
    return d == TB_F32 ? (float *)base + off : buf;
}

static inline void row_out(void *base, enum tb_dtype d, size_t off, size_t n, const float *v)
{
    if (d == TB_F32)
        return;
    uint16_t *h = (uint16_t *)base + off;
    if (d == TB_BF16) {
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            h[i] = tb_bf16_from_f32(v[i]);
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            h[i] = tb_f16_from_f32(v[i]);
    }
}

/* Element i of a float tensor of dtype d. */
static inline float value_at(const void *base, enum tb_dtype d, size_t i)
{
    return d == TB_F32 ? ((const float *)base)[i]
           : d == TB_BF16 ? tb_f32_from_bf16(((const uint16_t *)base)[i])
                          : tb_f32_from_f16(((const uint16_t *)base)[i]);
}

/* The split of P pixels into blocks: block b covers pixels [b * per, min(P, (b+1) * per)). */
struct blocks {
    size_t count, per;
};

static struct blocks split(size_t pixels, size_t channels)
{
    size_t want = pixels * channels / BLOCK_ELEMS;
    if (want < 1)
        want = 1;
    if (want > MAX_BLOCKS)
        want = MAX_BLOCKS;
    if (want > pixels)
        want = pixels;
    struct blocks b;
    b.per = (pixels + want - 1) / want;
    b.count = (pixels + b.per - 1) / b.per;
    return b;
}

/* Synchronised batch norm: training, asked for, and more than one rank attached. */
static bool synced(const struct tb_cpu *cpu, const struct tb_op *op)
{
    return op->p.bn.training && op->p.bn.sync && cpu->world && cpu->world->size > 1;
}

static int bn_prepare(struct tb_cpu *cpu, const struct tb_op *op, void **state, struct tb_err *err)
{
    *state = NULL;
    const struct tb_shape x = op->in[0].shape; /* the rest is the op contract's (tb_op_check) */
    /* As PyTorch: batch statistics of a single value per channel are meaningless. */
    const int64_t ranks = synced(cpu, op) ? cpu->world->size : 1; /* synchronised: over all ranks' values */
    if (op->p.bn.training && (int64_t)x.n * x.h * x.w * ranks < 2)
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "op %u (batchnorm): training needs more than 1 value per channel, input is (%d,%d,%d,%d)",
                          op->id, x.n, x.c, x.h, x.w);
    return TB_OK;
}

/* The walk over a tensor's view: P pixels of cv channels each, hw pixels per view image,
 * per view images per image. Pixel q's channels start at channel base(q). */
struct walk {
    size_t P, cv, hw, per;
};

static struct walk walk_of(const struct tb_cpu *cpu, const struct tb_op *op)
{
    const struct tb_shape v = tb_cpu_view(cpu, &op->in[0]);
    const size_t hw = (size_t)v.h * (size_t)v.w;
    return (struct walk){ (size_t)v.n * hw, (size_t)v.c, hw, (size_t)op->in[0].shape.c / (size_t)v.c };
}

static inline size_t base_of(const struct walk *wk, size_t q)
{
    return q / wk->hw % wk->per * wk->cv;
}

/* Per-channel sums of a and b over the walk's pixels (C channels in all):
 *   s1[c] = sum_p (a[p,c] - ka[c]),  s2[c] = sum_p (a[p,c] - ka[c]) * (b[p,c] - kb[c])
 * with b == NULL meaning s2 = sum (a - ka)^2. Sums in double, in the fixed block order;
 * `part` holds blocks.count * 2 * C doubles of partial sums (scratch). */
static void channel_sums(const void *a, const double *ka, const void *b, const double *kb, enum tb_dtype dt,
                         const struct walk *wk, size_t C, double *part, double *s1, double *s2)
{
    const size_t P = wk->P, cv = wk->cv;
    const struct blocks bl = split(P, cv);
#pragma omp parallel for schedule(static)
    for (size_t blk = 0; blk < bl.count; blk++) {
        double *p1 = part + blk * 2 * C, *p2 = p1 + C;
        memset(p1, 0, 2 * C * sizeof *p1);
        float abuf[SPAN], bbuf[SPAN];
        size_t end = (blk + 1) * bl.per < P ? (blk + 1) * bl.per : P;
        for (size_t px = blk * bl.per; px < end;) {
            const size_t np = span_pixels(cv, px, end);
            for (size_t r0 = 0; r0 < cv; r0 += SPAN) {
                const size_t w = cv - r0 < SPAN ? cv - r0 : SPAN, off = px * cv + r0, len = np > 1 ? np * cv : w;
                const float *A = row_in(a, dt, off, len, abuf), *B = b ? row_in(b, dt, off, len, bbuf) : NULL;
                for (size_t q = 0; q < np; q++) {
                    const float *ar = A + q * cv;
                    const size_t c0 = base_of(wk, px + q) + r0;
                    const double *kac = ka + c0;
                    double *q1 = p1 + c0, *q2 = p2 + c0;
                    if (B) {
                        const float *br = B + q * cv;
                        const double *kbc = kb + c0;
#pragma omp simd
                        for (size_t c = 0; c < w; c++) {
                            double da = (double)ar[c] - kac[c];
                            q1[c] += da;
                            q2[c] += da * ((double)br[c] - kbc[c]);
                        }
                    } else {
#pragma omp simd
                        for (size_t c = 0; c < w; c++) {
                            double da = (double)ar[c] - kac[c];
                            q1[c] += da;
                            q2[c] += da * da;
                        }
                    }
                }
            }
            px += np;
        }
    }
    /* Each channel adds its blocks' partial sums in block order. */
    for (size_t c = 0; c < C; c++) {
        double t1 = 0, t2 = 0;
        for (size_t blk = 0; blk < bl.count; blk++) {
            t1 += part[blk * 2 * C + c];
            t2 += part[blk * 2 * C + C + c];
        }
        s1[c] = t1;
        s2[c] = t2;
    }
}

/* y = (x - center[c]) * scale[c] + shift[c] over the walk. Centering first (rather than
 * folding the mean into the shift, x * scale + (beta - mean * scale)) avoids cancellation
 * when |mean| is large against the spread. */
static void affine(const void *x, void *y, enum tb_dtype dt, const float *center, const float *scale,
                   const float *shift, const struct walk *wk)
{
    const size_t cv = wk->cv;
#pragma omp parallel for schedule(static)
    for (size_t blk = 0; blk < (wk->P + SPAN - 1) / SPAN; blk++) { /* SPAN pixels a task */
        float xbuf[SPAN], ybuf[SPAN];
        const size_t end = (blk + 1) * SPAN < wk->P ? (blk + 1) * SPAN : wk->P;
        for (size_t px = blk * SPAN; px < end;) {
            const size_t np = span_pixels(cv, px, end);
            for (size_t r0 = 0; r0 < cv; r0 += SPAN) {
                const size_t w = cv - r0 < SPAN ? cv - r0 : SPAN, off = px * cv + r0, len = np > 1 ? np * cv : w;
                const float *X = row_in(x, dt, off, len, xbuf);
                float *Y = row_at(y, dt, off, ybuf);
                for (size_t q = 0; q < np; q++) {
                    const float *xr = X + q * cv;
                    float *yr = Y + q * cv;
                    const size_t c0 = base_of(wk, px + q) + r0;
                    const float *ce = center + c0, *sc = scale + c0, *sh = shift + c0;
#pragma omp simd
                    for (size_t c = 0; c < w; c++)
                        yr[c] = (xr[c] - ce[c]) * sc[c] + sh[c];
                }
                row_out(y, dt, off, len, Y);
            }
            px += np;
        }
    }
}

/* Scratch for the statistics: partial sums, then per-channel doubles and floats. Layout
 * (all 8-byte aligned): part[blocks * 2C] | d[5C] doubles | f[3C] floats. */
struct work {
    double *part, *d;
    float *f;
};

static int get_work(struct tb_cpu *cpu, const struct tb_op *op, const struct walk *wk, size_t C, struct work *w,
                    struct tb_err *err)
{
    const struct blocks bl = split(wk->P, wk->cv);
    size_t nd = bl.count * 2 * C + 5 * C;
    char *mem = tb_cpu_scratch(cpu, nd * sizeof(double) + 3 * C * sizeof(float), err);
    if (!mem)
        return tb_err_prefix(err, "op %u (batchnorm)", op->id);
    w->part = (double *)mem;
    w->d = w->part + bl.count * 2 * C;
    w->f = (float *)(w->d + 5 * C);
    return TB_OK;
}

static int bn_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                      const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)step;
    const struct tb_shape s = op->in[0].shape;
    const size_t C = (size_t)s.c, P = (size_t)s.n * (size_t)s.h * (size_t)s.w;
    const double eps = op->p.bn.eps, mom = op->p.bn.momentum;
    const enum tb_dtype dt = op->in[0].dtype;
    const void *x = in[0].data;
    const float *gamma = in[1].data, *beta = in[2].data;
    float *rmean = in[3].data, *rvar = in[4].data;
    void *y = out[0].data;
    if (C == 0 || P == 0)
        return TB_OK;
    const struct walk wk = walk_of(cpu, op);
    struct work w;
    int rc = get_work(cpu, op, &wk, C, &w, err);
    if (rc)
        return rc;
    float *scale = w.f;

    if (!op->p.bn.training) {
        for (size_t c = 0; c < C; c++)
            scale[c] = (float)(gamma[c] / sqrt((double)rvar[c] + eps));
        affine(x, y, dt, rmean, scale, beta, &wk);
        return TB_OK;
    }

    double *k = w.d, *s1 = w.d + C, *s2 = w.d + 2 * C;
    double count = (double)P; /* pixels the statistics are over: every rank's when synchronised */
    if (synced(cpu, op)) {
        /* Over all ranks: the global mean first (sum of x, reduced), then the sums of
         * deviations from it (reduced): two small collectives, and no shift that differs
         * between ranks. */
        double *zero = w.d + 3 * C;
        for (size_t c = 0; c < C; c++)
            zero[c] = 0;
        count *= (double)cpu->world->size;
        channel_sums(x, zero, NULL, NULL, dt, &wk, C, w.part, s1, s2);
        rc = cpu->world->allreduce(cpu->world, TB_CHANNEL_MAIN, s1, C, TB_COMM_F64, TB_COMM_SUM, err);
        for (size_t c = 0; c < C && !rc; c++)
            k[c] = s1[c] / count;
        if (!rc)
            channel_sums(x, k, NULL, NULL, dt, &wk, C, w.part, s1, s2);
        if (!rc) /* s1 and s2 are adjacent */
            rc = cpu->world->allreduce(cpu->world, TB_CHANNEL_MAIN, s1, 2 * C, TB_COMM_F64, TB_COMM_SUM, err);
        if (rc)
            return tb_err_prefix(err, "op %u (batchnorm, synchronised)", op->id);
    } else {
        /* Shift by the first pixel's values (see the top of the file). */
        const int blk = tb_cpu_blk(cpu, &op->in[0]);
        for (size_t c = 0; c < C; c++)
            k[c] = value_at(x, dt, tb_cpu_offset(s, blk, 0, (int)c, 0, 0));
        channel_sums(x, k, NULL, NULL, dt, &wk, C, w.part, s1, s2);
    }
    float *save_mean = out[1].data, *save_invstd = out[2].data;
    for (size_t c = 0; c < C; c++) {
        double d = s1[c] / count;
        double mean = k[c] + d;
        double var = s2[c] / count - d * d; /* biased */
        if (var < 0)
            var = 0;
        double inv = 1.0 / sqrt(var + eps);
        save_mean[c] = (float)mean;
        save_invstd[c] = (float)inv;
        /* From the saved float, so that bn_recompute, which has only it, gets these bits. */
        scale[c] = (float)(gamma[c] * (double)save_invstd[c]);
        rmean[c] = (float)((1.0 - mom) * rmean[c] + mom * mean);
        rvar[c] = (float)((1.0 - mom) * rvar[c] + mom * var * count / (count - 1));
    }
    /* save_mean is the float mean: y is centred on exactly what backward will see. */
    affine(x, y, dt, save_mean, scale, beta, &wk);
    return TB_OK;
}

/* The backend's op_recompute for a batch norm in training: y again, from the statistics
 * forward saved in out[1] and out[2] (read), exactly as forward computed it; the running
 * statistics are left alone and no collective runs. */
static int bn_recompute(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                        const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    if (!op->p.bn.training)
        return bn_forward(cpu, op, state, step, in, out, err); /* touches nothing but y */
    const struct tb_shape s = op->in[0].shape;
    const size_t C = (size_t)s.c, P = (size_t)s.n * (size_t)s.h * (size_t)s.w;
    if (C == 0 || P == 0)
        return TB_OK;
    const float *gamma = in[1].data, *save_mean = out[1].data, *save_invstd = out[2].data;
    const struct walk wk = walk_of(cpu, op);
    struct work w;
    int rc = get_work(cpu, op, &wk, C, &w, err);
    if (rc)
        return rc;
    for (size_t c = 0; c < C; c++)
        w.f[c] = (float)(gamma[c] * (double)save_invstd[c]);
    affine(in[0].data, out[0].data, op->in[0].dtype, save_mean, w.f, in[2].data, &wk);
    return TB_OK;
}

static int bn_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                       const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                       struct tb_err *err)
{
    (void)state;
    const struct tb_shape s = op->in[0].shape;
    const size_t C = (size_t)s.c, P = (size_t)s.n * (size_t)s.h * (size_t)s.w;
    void *dx = din[0].data;
    float *dgamma = din[1].data, *dbeta = din[2].data;
    const enum tb_dtype dt = op->in[0].dtype;
    /* running_mean and running_var carry no gradient: zero whatever buffer was passed, so
     * that it is written rather than left stale. */
    for (uint32_t i = 3; i < 5; i++)
        if (din[i].data)
            memset(din[i].data, 0, C * sizeof(float));
    if (!dx && !dgamma && !dbeta)
        return TB_OK;
    if (!dout[0].data)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (batchnorm): backward without an output gradient", op->id);
    if (C == 0 || P == 0)
        return TB_OK;
    const void *x = in[0].data, *dy = dout[0].data;
    const float *gamma = in[1].data;
    /* The statistics the forward normalised with: the saved batch ones in training, the
     * running ones in inference (then y is affine in x: dx = dy * gamma * invstd). */
    const float *mean_f, *invstd_f = NULL, *rvar = NULL;
    if (op->p.bn.training) {
        mean_f = out[1].data;
        invstd_f = out[2].data;
    } else {
        mean_f = in[3].data;
        rvar = in[4].data;
    }
    if (!x || !gamma || !mean_f || (!invstd_f && !rvar))
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (batchnorm): backward needs x, gamma and the %s statistics",
                          op->id, op->p.bn.training ? "saved" : "running");
    const struct walk wk = walk_of(cpu, op);
    struct work w;
    int rc = get_work(cpu, op, &wk, C, &w, err);
    if (rc)
        return rc;
    double *mean = w.d, *inv = w.d + C, *sdy = w.d + 2 * C, *sdyx = w.d + 3 * C, *zero = w.d + 4 * C;
    for (size_t c = 0; c < C; c++) {
        mean[c] = mean_f[c];
        inv[c] = invstd_f ? (double)invstd_f[c] : 1.0 / sqrt((double)rvar[c] + (double)op->p.bn.eps);
        zero[c] = 0;
    }
    /* sdy = sum dy, sdyx = sum dy * (x - mean). */
    channel_sums(dy, zero, x, mean, dt, &wk, C, w.part, sdy, sdyx);
    if (dbeta)
        for (size_t c = 0; c < C; c++)
            dbeta[c] = (float)sdy[c];
    if (dgamma)
        for (size_t c = 0; c < C; c++)
            dgamma[c] = (float)(sdyx[c] * inv[c]);
    if (!dx)
        return TB_OK;
    /* Synchronised: dx needs the sums over every rank's pixels (gamma's and beta's
     * gradients above stay this rank's share, reduced with the other gradients). */
    double count = (double)P;
    if (op->p.bn.training && synced(cpu, op)) {
        count *= (double)cpu->world->size;
        rc = cpu->world->allreduce(cpu->world, TB_CHANNEL_MAIN, sdy, 2 * C, TB_COMM_F64, TB_COMM_SUM, err);
        if (rc)
            return tb_err_prefix(err, "op %u (batchnorm backward, synchronised)", op->id);
    }
    /* Training: dx = gamma * invstd * (dy - mean(dy) - (x - mean) * invstd^2 * mean(dy * (x - mean))),
     * as a1 * dy + a2 * (x - mean) + a3 per channel. Inference: dx = gamma * invstd * dy. */
    float *a1 = w.f, *a2 = w.f + C, *a3 = w.f + 2 * C;
    for (size_t c = 0; c < C; c++) {
        double g = (double)gamma[c] * inv[c];
        a1[c] = (float)g;
        a2[c] = op->p.bn.training ? (float)(-g * inv[c] * inv[c] * sdyx[c] / count) : 0.0f;
        a3[c] = op->p.bn.training ? (float)(-g * sdy[c] / count) : 0.0f;
    }
    const size_t cv = wk.cv;
#pragma omp parallel for schedule(static)
    for (size_t blk = 0; blk < (wk.P + SPAN - 1) / SPAN; blk++) { /* SPAN pixels a task */
        float dybuf[SPAN], xbuf[SPAN], dxbuf[SPAN];
        const size_t end = (blk + 1) * SPAN < wk.P ? (blk + 1) * SPAN : wk.P;
        for (size_t px = blk * SPAN; px < end;) {
            const size_t np = span_pixels(cv, px, end);
            for (size_t r0 = 0; r0 < cv; r0 += SPAN) {
                const size_t run = cv - r0 < SPAN ? cv - r0 : SPAN, off = px * cv + r0, len = np > 1 ? np * cv : run;
                const float *DY = row_in(dy, dt, off, len, dybuf), *X = row_in(x, dt, off, len, xbuf);
                float *DX = row_at(dx, dt, off, dxbuf);
                for (size_t q = 0; q < np; q++) {
                    const float *dyr = DY + q * cv, *xr = X + q * cv;
                    float *dxr = DX + q * cv;
                    const size_t c0 = base_of(&wk, px + q) + r0;
                    const float *b1 = a1 + c0, *b2 = a2 + c0, *b3 = a3 + c0, *mf = mean_f + c0;
#pragma omp simd
                    for (size_t c = 0; c < run; c++)
                        dxr[c] = b1[c] * dyr[c] + b2[c] * (xr[c] - mf[c]) + b3[c];
                }
                row_out(dx, dt, off, len, DX);
            }
            px += np;
        }
    }
    return TB_OK;
}

const struct tb_cpu_kernel TB_CPU_KERNEL(batchnorm) = {
    .prepare = bn_prepare,
    .release = NULL,
    .forward = bn_forward,
    .backward = bn_backward,
    .recompute = bn_recompute,
    .dtypes = 1u << TB_BF16 | 1u << TB_F16,
};
