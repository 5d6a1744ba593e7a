/* backends/cpu/cpu_loss.c: the two losses, softmax cross-entropy (segmentation) and
 * class-balanced binary cross-entropy with logits (edges), as trainbig/ops.h defines them.
 *
 * Both reduce over every pixel of the batch. To stay deterministic (the same bits for any
 * thread count) each image row is summed by one thread in column order into its own slot
 * of a scratch array, and the rows are then added up serially in row order. Per-pixel terms
 * are float (as PyTorch computes them for float tensors); the sums are double. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_shared.h"

/* ------------------------------------------------------------------ softmax cross-entropy */

/* One image row's sums. */
struct ce_row {
    double loss;   /* sum of w * nll (forward only) */
    double weight; /* sum of w over the counted pixels */
    int32_t bad;   /* the first column with a label >= K that is not ignore_label, or -1 */
};

/* Fills rows[N*H]; with logits NULL only the weights (and the label check). */
/* Logit k of a pixel, at ZK(k) from the pixel's first: the class logits are contiguous in
 * NHWC (kb == 0), and in blocks of kb, hw * kb apart, when the logits are blocked (a class
 * count that is a multiple of the block). */
#define ZK(k) (kb ? (size_t)(k) / kb * kstride + (size_t)(k) % kb : (size_t)(k))

static void ce_rows(const struct tb_op *op, int blk, const float *logits, const uint8_t *labels, const float *weights,
                    struct ce_row *rows)
{
    const size_t kb = (size_t)blk, kstride = (size_t)op->in[0].shape.h * (size_t)op->in[0].shape.w * kb;
    const struct tb_ce_params *cp = &op->p.ce;
    struct tb_shape s = op->in[0].shape;
    const int K = s.c;
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < s.n; n++)
        for (int y = 0; y < s.h; y++) {
            struct ce_row r = { 0.0, 0.0, -1 };
            /* labels are (N,1,H,W): one byte per pixel, row-major */
            const uint8_t *lab = labels + ((size_t)n * (size_t)s.h + (size_t)y) * (size_t)s.w;
            for (int x = 0; x < s.w; x++) {
                int t = lab[x];
                if (t == cp->ignore_label)
                    continue;
                if (t >= K) {
                    if (r.bad < 0)
                        r.bad = x;
                    continue;
                }
                float w = weights ? weights[(size_t)n * (size_t)K + (size_t)t] : 1.0f;
                r.weight += (double)w;
                if (!logits)
                    continue;
                /* -log softmax(z)[t] = log(sum exp(z - m)) - (z[t] - m), m = max z: no
                 * exp overflows, and the sum is at least 1. */
                const float *z = logits + tb_cpu_offset(s, blk, n, 0, y, x);
                float m = z[0];
                for (int k = 1; k < K; k++)
                    m = z[ZK(k)] > m ? z[ZK(k)] : m;
                float sum = 0.0f;
                for (int k = 0; k < K; k++)
                    sum += expf(z[ZK(k)] - m);
                float nll = logf(sum) - (z[ZK(t)] - m);
                r.loss += (double)(w * nll);
            }
            rows[(size_t)n * (size_t)s.h + (size_t)y] = r;
        }
}

/* The first invalid label, in (image, row, column) order, as an error naming it. */
static int ce_check_labels(const struct tb_op *op, const uint8_t *labels, const struct ce_row *rows, struct tb_err *err)
{
    struct tb_shape s = op->in[0].shape;
    for (int n = 0; n < s.n; n++)
        for (int y = 0; y < s.h; y++) {
            const struct ce_row *r = &rows[(size_t)n * (size_t)s.h + (size_t)y];
            if (r->bad < 0)
                continue;
            int t = labels[((size_t)n * (size_t)s.h + (size_t)y) * (size_t)s.w + (size_t)r->bad];
            return tb_err_set(err, TB_ERR_RUNTIME,
                              "op %u (softmax_ce): image %d, pixel (row %d, column %d): label %d is not a class "
                              "(0..%d) and not the ignore label %d",
                              op->id, n, y, r->bad, t, s.c - 1, op->p.ce.ignore_label);
        }
    return TB_OK;
}

/* sums[n] = rows of image n added in order. */
static void ce_image_sums(struct tb_shape s, const struct ce_row *rows, double *loss, double *weight)
{
    for (int n = 0; n < s.n; n++) {
        double l = 0.0, w = 0.0;
        for (int y = 0; y < s.h; y++) {
            l += rows[(size_t)n * (size_t)s.h + (size_t)y].loss;
            w += rows[(size_t)n * (size_t)s.h + (size_t)y].weight;
        }
        if (loss)
            loss[n] = l;
        weight[n] = w;
    }
}

static int ce_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                      const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)step;
    struct tb_shape s = op->in[0].shape;
    const float *logits = in[0].data;                             /* (N,K,H,W) */
    const uint8_t *labels = in[1].data;                           /* (N,1,H,W) u8 */
    const float *weights = op->p.ce.weighted ? in[2].data : NULL; /* (N,K,1,1) */
    float *loss = out[0].data;                                    /* (1,1,1,1) */
    size_t nrows = (size_t)s.n * (size_t)s.h;
    struct ce_row *rows = tb_cpu_scratch(cpu, nrows * sizeof *rows + 2 * (size_t)s.n * sizeof(double), err);
    if (!rows)
        return err->status;
    double *img_loss = (double *)(rows + nrows), *img_weight = img_loss + s.n;
    ce_rows(op, tb_cpu_blk(cpu, &op->in[0]), logits, labels, weights, rows);
    int rc = ce_check_labels(op, labels, rows, err);
    if (rc)
        return rc;
    ce_image_sums(s, rows, img_loss, img_weight);
    /* No counted pixel (or only zero weights): that image, or with the global mean the
     * batch, adds 0 rather than PyTorch's 0/0 = NaN. */
    double total = 0.0;
    if (op->p.ce.per_image) {
        for (int n = 0; n < s.n; n++)
            if (img_weight[n] > 0.0)
                total += img_loss[n] / img_weight[n];
    } else {
        double l = 0.0, w = 0.0;
        for (int n = 0; n < s.n; n++) {
            l += img_loss[n];
            w += img_weight[n];
        }
        total = w > 0.0 ? l / w : 0.0;
    }
    loss[0] = (float)total;
    return TB_OK;
}

static int ce_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                       const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                       struct tb_err *err)
{
    (void)state;
    (void)out;
    const struct tb_ce_params *cp = &op->p.ce;
    struct tb_shape s = op->in[0].shape;
    const float *logits = in[0].data;                        /* (N,K,H,W) */
    const uint8_t *labels = in[1].data;                      /* (N,1,H,W) u8 */
    const float *weights = cp->weighted ? in[2].data : NULL; /* (N,K,1,1) */
    const float *dl = dout[0].data;                          /* (1,1,1,1) */
    float *dz = din[0].data;                                 /* (N,K,H,W); labels and weights have no grad */
    if (!dz)
        return TB_OK;
    /* The denominators again (they depend on labels and weights only): per image, or of
     * the whole batch. */
    size_t nrows = (size_t)s.n * (size_t)s.h;
    struct ce_row *rows = tb_cpu_scratch(cpu, nrows * sizeof *rows + 2 * (size_t)s.n * sizeof(double), err);
    if (!rows)
        return err->status;
    double *img_weight = (double *)(rows + nrows), *scale = img_weight + s.n;
    ce_rows(op, 0, NULL, labels, weights, rows);
    int rc = ce_check_labels(op, labels, rows, err);
    if (rc)
        return rc;
    ce_image_sums(s, rows, NULL, img_weight);
    double all = 0.0;
    for (int n = 0; n < s.n; n++)
        all += img_weight[n];
    for (int n = 0; n < s.n; n++) {
        double denom = cp->per_image ? img_weight[n] : all;
        scale[n] = denom > 0.0 ? (double)dl[0] / denom : 0.0;
    }
    /* d loss / d z[k] = scale * w * (softmax(z)[k] - [k == t]); 0 for ignored pixels. */
    const int K = s.c, blk = tb_cpu_blk(cpu, &op->in[0]);
    const size_t kb = (size_t)blk, kstride = (size_t)s.h * (size_t)s.w * kb;
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < s.n; n++)
        for (int y = 0; y < s.h; y++) {
            const uint8_t *lab = labels + ((size_t)n * (size_t)s.h + (size_t)y) * (size_t)s.w;
            for (int x = 0; x < s.w; x++) {
                size_t at = tb_cpu_offset(s, blk, n, 0, y, x);
                float *g = dz + at;
                int t = lab[x];
                if (t == cp->ignore_label || t >= K) {
                    for (int k = 0; k < K; k++)
                        g[ZK(k)] = 0.0f;
                    continue;
                }
                float w = weights ? weights[(size_t)n * (size_t)K + (size_t)t] : 1.0f;
                float c = (float)(scale[n] * (double)w);
                const float *z = logits + at;
                float m = z[0];
                for (int k = 1; k < K; k++)
                    m = z[ZK(k)] > m ? z[ZK(k)] : m;
                float sum = 0.0f;
                for (int k = 0; k < K; k++) {
                    g[ZK(k)] = expf(z[ZK(k)] - m);
                    sum += g[ZK(k)];
                }
                for (int k = 0; k < K; k++)
                    g[ZK(k)] = c * (g[ZK(k)] / sum - (k == t ? 1.0f : 0.0f));
            }
        }
    return TB_OK;
}

const struct tb_cpu_kernel TB_CPU_KERNEL(softmax_ce) = {
    .forward = ce_forward,
    .backward = ce_backward,
};

/* ------------------------------------------------------------------ class-balanced BCE with logits */

/* The class weights: with P positives and Q negatives in the batch, a positive weighs
 * Q/(P+Q) and a negative P/(P+Q) (both 0 when every pixel is ignored). Integer counts,
 * so the reduction is exact in any order. */
static void bce_weights(const uint8_t *t, size_t pixels, float *wpos, float *wneg)
{
    int64_t P = 0, Q = 0;
#pragma omp parallel for reduction(+ : P, Q) schedule(static)
    for (size_t i = 0; i < pixels; i++) {
        P += t[i] == 1;
        Q += t[i] == 0;
    }
    *wpos = P + Q ? (float)((double)Q / (double)(P + Q)) : 0.0f;
    *wneg = P + Q ? (float)((double)P / (double)(P + Q)) : 0.0f;
}

static int bce_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                       const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)step;
    struct tb_shape s = op->in[0].shape;
    const float *z = in[0].data;   /* (N,1,H,W): with one channel NHWC is NCHW */
    const uint8_t *t = in[1].data; /* (N,1,H,W) u8 */
    float *loss = out[0].data;     /* (1,1,1,1) */
    const size_t W = (size_t)s.w, nrows = (size_t)s.n * (size_t)s.h, pixels = nrows * W;
    double *rows = tb_cpu_scratch(cpu, nrows * sizeof *rows, err);
    if (!rows)
        return err->status;
    float wpos, wneg;
    bce_weights(t, pixels, &wpos, &wneg);
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < nrows; r++) {
        double acc = 0.0;
        for (size_t x = r * W; x < (r + 1) * W; x++) {
            float w = t[x] == 1 ? wpos : t[x] == 0 ? wneg : 0.0f;
            if (w == 0.0f)
                continue;
            /* max(z,0) - z*t + log(1 + exp(-|z|)): no overflow for any z */
            float b = fmaxf(z[x], 0.0f) - z[x] * (float)t[x] + log1pf(expf(-fabsf(z[x])));
            acc += (double)(w * b);
        }
        rows[r] = acc;
    }
    double sum = 0.0;
    for (size_t r = 0; r < nrows; r++)
        sum += rows[r];
    loss[0] = (float)(sum / (double)pixels); /* the mean over all N*H*W pixels */
    return TB_OK;
}

static int bce_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                        const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                        struct tb_err *err)
{
    (void)cpu;
    (void)state;
    (void)out;
    (void)err;
    struct tb_shape s = op->in[0].shape;
    const float *z = in[0].data;    /* (N,1,H,W) */
    const uint8_t *t = in[1].data;  /* (N,1,H,W) u8 */
    const float *dl = dout[0].data; /* (1,1,1,1) */
    float *dz = din[0].data;        /* (N,1,H,W); targets have no grad */
    if (!dz)
        return TB_OK;
    const size_t pixels = tb_shape_elems(s);
    float wpos, wneg;
    bce_weights(t, pixels, &wpos, &wneg);
    /* d/dz of w * BCE is w * (sigmoid(z) - t), and the mean divides by N*H*W. */
    const double base = (double)dl[0] / (double)pixels;
    const float cpos = (float)(base * (double)wpos), cneg = (float)(base * (double)wneg);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < pixels; i++) {
        float zi = z[i];
        /* sigmoid without overflow: exp of a non-positive number only */
        float e = expf(-fabsf(zi));
        float sig = zi >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
        dz[i] = t[i] == 1 ? cpos * (sig - 1.0f) : t[i] == 0 ? cneg * sig : 0.0f;
    }
    return TB_OK;
}

const struct tb_cpu_kernel TB_CPU_KERNEL(bce_logits) = {
    .forward = bce_forward,
    .backward = bce_backward,
};
