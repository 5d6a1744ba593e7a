/* backends/cpu/cpu_dual.c: G-SCNN's dual-task regulariser (TB_OP_DUAL_TASK, trainbig/ops.h).
 *
 * Forward: a Gumbel-softmax sample of the logits (the op's second output, which backward
 * reads), the boundary maps of that sample and of the one-hot labels (each plane smoothed
 * by the triangle filter, then the magnitude of its central differences, divided by the
 * largest over the whole tensor), and the masked L1 between them. Backward recomputes the
 * maps from the sample and the labels rather than keeping them (two more tensors of the
 * logits' size alive from forward to backward), then runs each step's adjoint.
 *
 * Scratch: the two magnitude maps (N*K*H*W floats each, plane-major), five planes and one
 * double per row. Planes are done one after another, each stage parallel over rows (or
 * columns); every sum goes row by row into its own slot and the slots are added in order,
 * so the bits do not depend on the thread count. Per-element terms are float, as PyTorch
 * computes them; sums are double. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "cpu_shared.h"

#define DT_RADIUS 4 /* the triangle filter's radius (the reference's convTri(E, 4)) */
#define DT_TAPS (2 * DT_RADIUS + 1)
#define DT_EPS 1e-10f      /* the Gumbel noise's and the masked means' epsilon */
#define DT_THRESHOLD 1e-8f /* an element counts in a mask when its map is at least this */
#define DT_FLOOR 1e-6f     /* under the square root of the gradient magnitude */

/* Class k of a pixel, at ZK(k) from the pixel's first (as in cpu_loss.c): contiguous in
 * NHWC (kb == 0), in blocks of kb, kstride apart, when the tensor is channel-blocked. */
#define ZK(k) (kb ? (size_t)(k) / kb * kstride + (size_t)(k) % kb : (size_t)(k))

/* The filter [1 2 3 4 5 4 3 2 1] / 25, each tap a float as PyTorch's tensor holds it. */
static void dt_taps(float f[DT_TAPS])
{
    for (int d = 0; d < DT_TAPS; d++)
        f[d] = (float)(d <= DT_RADIUS ? d + 1 : DT_TAPS - d) / (float)((DT_RADIUS + 1) * (DT_RADIUS + 1));
}

/* Index i of a row of n samples padded symmetrically (the edge sample repeated: -1 -> 0,
 * n -> n-1), as the reference pads (replicate by one, then reflect). */
static inline int dt_reflect(int i, int n)
{
    while (i < 0 || i >= n)
        i = i < 0 ? -i - 1 : 2 * n - 1 - i;
    return i;
}

/* The Gumbel noise of element (n, k, y, x), index its NCHW index. */
static inline float dt_noise(const struct tb_op *op, uint64_t step, uint64_t index)
{
    const float u = tb_cpu_uniform(op->p.dual.seed, step, op->id, index);
    return -logf(DT_EPS - logf(u + DT_EPS));
}

/* One plane's temporaries (H*W floats each): e the plane's values, row-major; t and s the
 * smoothing's passes; a and b the backward's. Each thread has its own. */
struct dt_planes {
    float *e, *t, *s, *a, *b;
};

/* s = e smoothed: along W into t, then along H. Each element sums its nine taps in order,
 * from 0; the loops run tap by tap over a row so that they vectorise (each element's
 * operations and their order stay those of a scalar loop). */
static void dt_smooth(const struct dt_planes *p, int H, int W, const float *f)
{
    for (int y = 0; y < H; y++) {
        const float *e = p->e + (size_t)y * (size_t)W;
        float *t = p->t + (size_t)y * (size_t)W;
        for (int x = 0; x < W; x++)
            t[x] = 0.0f;
        for (int d = 0; d < DT_TAPS; d++) {
            /* x + d - DT_RADIUS lies in the row for lo <= x < hi */
            int lo = DT_RADIUS - d > 0 ? DT_RADIUS - d : 0, hi = W - d + DT_RADIUS < W ? W - d + DT_RADIUS : W;
            lo = lo < W ? lo : W;
            hi = hi > lo ? hi : lo;
            for (int x = 0; x < lo; x++)
                t[x] += f[d] * e[dt_reflect(x + d - DT_RADIUS, W)];
#pragma omp simd
            for (int x = lo; x < hi; x++)
                t[x] += f[d] * e[x + d - DT_RADIUS];
            for (int x = hi; x < W; x++)
                t[x] += f[d] * e[dt_reflect(x + d - DT_RADIUS, W)];
        }
    }
    for (int y = 0; y < H; y++) {
        float *s = p->s + (size_t)y * (size_t)W;
        for (int x = 0; x < W; x++)
            s[x] = 0.0f;
        for (int d = 0; d < DT_TAPS; d++) {
            const float *t = p->t + (size_t)dt_reflect(y + d - DT_RADIUS, H) * (size_t)W;
#pragma omp simd
            for (int x = 0; x < W; x++)
                s[x] += f[d] * t[x];
        }
    }
}

/* The central differences of s at (y, x), zero beyond the border. */
static inline void dt_diffs(const float *s, int H, int W, int y, int x, float *ox, float *oy)
{
    const size_t at = (size_t)y * (size_t)W + (size_t)x;
    const float r = x + 1 < W ? s[at + 1] : 0.0f, l = x > 0 ? s[at - 1] : 0.0f;
    const float dn = y + 1 < H ? s[at + (size_t)W] : 0.0f, up = y > 0 ? s[at - (size_t)W] : 0.0f;
    *ox = 0.5f * r - 0.5f * l;
    *oy = 0.5f * dn - 0.5f * up;
}

/* m (H*W) = the unnormalised gradient magnitude of the plane in p->e. */
static void dt_magnitude(const struct dt_planes *p, int H, int W, const float *f, float *m)
{
    dt_smooth(p, H, W, f);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            float ox, oy;
            dt_diffs(p->s, H, W, y, x, &ox, &oy);
            m[(size_t)y * (size_t)W + (size_t)x] = sqrtf(ox * ox + oy * oy + DT_FLOOR);
        }
}

/* Plane (n, k) of the sample (device layout) into e. */
static void dt_sample_plane(const struct tb_cpu *cpu, const struct tb_op *op, const float *sample, int n, int k,
                            float *e)
{
    const struct tb_shape s = op->in[0].shape;
    const int blk = tb_cpu_blk(cpu, &op->out[1]);
    for (int y = 0; y < s.h; y++)
        for (int x = 0; x < s.w; x++)
            e[(size_t)y * (size_t)s.w + (size_t)x] = sample[tb_cpu_offset(s, blk, n, k, y, x)];
}

/* Plane k of image n of the one-hot labels into e (an ignored pixel is class 0); false
 * when no pixel is of class k (e all zeros). */
static bool dt_label_plane(const struct tb_op *op, const uint8_t *labels, int n, int k, float *e)
{
    const struct tb_shape s = op->in[0].shape;
    const size_t hw = (size_t)s.h * (size_t)s.w;
    const uint8_t *lab = labels + (size_t)n * hw;
    const int ignore = op->p.dual.ignore_label;
    bool any = false;
    for (size_t i = 0; i < hw; i++) {
        const int t = lab[i] == ignore ? 0 : lab[i];
        e[i] = t == k ? 1.0f : 0.0f;
        any |= t == k;
    }
    return any;
}

/* This thread's planes among the scratch's. */
static struct dt_planes dt_mine(const struct dt_planes *all, size_t hw)
{
    const size_t off = (size_t)omp_get_thread_num() * 5 * hw;
    return (struct dt_planes){ all->e + off, all->e + off + hw, all->e + off + 2 * hw, all->e + off + 3 * hw,
                               all->e + off + 4 * hw };
}

/* mp and mg (plane-major N*K*H*W): the magnitudes of the sample's planes and the labels'.
 * A plane per thread at a time: each is computed alone, the same whatever the threads. */
static void dt_magnitudes(const struct tb_cpu *cpu, const struct tb_op *op, const float *sample, const uint8_t *labels,
                          const struct dt_planes *all, float *mp, float *mg)
{
    const struct tb_shape s = op->in[0].shape;
    const size_t hw = (size_t)s.h * (size_t)s.w;
    const int planes = s.n * s.c;
    float f[DT_TAPS];
    dt_taps(f);
#pragma omp parallel for schedule(dynamic) num_threads(cpu->threads)
    for (int pl = 0; pl < planes; pl++) {
        const struct dt_planes p = dt_mine(all, hw);
        const int n = pl / s.c, k = pl % s.c;
        dt_sample_plane(cpu, op, sample, n, k, p.e);
        dt_magnitude(&p, s.h, s.w, f, mp + (size_t)pl * hw);
        float *m = mg + (size_t)pl * hw;
        if (dt_label_plane(op, labels, n, k, p.e))
            dt_magnitude(&p, s.h, s.w, f, m);
        else /* a class absent from the image: smoothing and differences of zeros are exactly
              * 0, so its magnitude is sqrt(DT_FLOOR) everywhere, the same bits, unsmoothed */
            for (size_t i = 0; i < hw; i++)
                m[i] = sqrtf(0.0f + DT_FLOOR);
    }
}

static float dt_max(const float *m, size_t count)
{
    float best = m[0];
    for (size_t i = 1; i < count; i++)
        best = m[i] > best ? m[i] : best;
    return best;
}

/* The first label >= K that is not ignore_label, as an error naming it; TB_OK when none. */
static int dt_check_labels(const struct tb_op *op, const uint8_t *labels, struct tb_err *err)
{
    const struct tb_shape s = op->in[0].shape;
    const size_t hw = (size_t)s.h * (size_t)s.w;
    for (size_t i = 0; i < (size_t)s.n * hw; i++)
        if (labels[i] != op->p.dual.ignore_label && labels[i] >= s.c)
            return tb_err_set(err, TB_ERR_RUNTIME,
                              "op %u (dual_task): image %zu, pixel (row %zu, column %zu): label %d is not a class "
                              "(0..%d) and not the ignore label %d",
                              op->id, i / hw, i % hw / (size_t)s.w, i % (size_t)s.w, labels[i], s.c - 1,
                              op->p.dual.ignore_label);
    return TB_OK;
}

/* The scratch: mp, mg, five planes per thread, four doubles per row of the batch's planes. */
static int dt_scratch(struct tb_cpu *cpu, const struct tb_op *op, float **mp, float **mg, struct dt_planes *p,
                      double **rows, struct tb_err *err)
{
    const struct tb_shape s = op->in[0].shape;
    const size_t hw = (size_t)s.h * (size_t)s.w, all = tb_shape_elems(s);
    const size_t nrows = (size_t)s.n * (size_t)s.c * (size_t)s.h;
    const size_t floats = 2 * all + 5 * hw * (size_t)(cpu->threads > 0 ? cpu->threads : 1);
    char *base = tb_cpu_scratch(cpu, floats * sizeof(float) + 4 * nrows * sizeof(double) + 64, err);
    if (!base)
        return err->status;
    float *fl = (float *)base;
    *mp = fl;
    *mg = fl + all;
    p->e = fl + 2 * all;
    p->t = p->e + hw;
    p->s = p->t + hw;
    p->a = p->s + hw;
    p->b = p->a + hw;
    /* doubles after the floats, 8-byte aligned */
    size_t off = (floats * sizeof(float) + 7) & ~(size_t)7;
    *rows = (double *)(base + off);
    return TB_OK;
}

/* The masks' counts and masked sums: c[0], c[1] the counts of p >= th and q >= th, c[2],
 * c[3] the sums of |p - q| over each, with p = mp / Mp and q = mg / Mg. */
static void dt_sums(const struct tb_op *op, const float *mp, const float *mg, float Mp, float Mg, double *rows,
                    double c[4])
{
    const struct tb_shape s = op->in[0].shape;
    const size_t W = (size_t)s.w, nrows = (size_t)s.n * (size_t)s.c * (size_t)s.h;
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < nrows; r++) {
        double a[4] = { 0, 0, 0, 0 };
        for (size_t i = r * W; i < (r + 1) * W; i++) {
            const float p = mp[i] / Mp, q = mg[i] / Mg, d = fabsf(p - q);
            if (p >= DT_THRESHOLD)
                a[0] += 1.0, a[2] += (double)d;
            if (q >= DT_THRESHOLD)
                a[1] += 1.0, a[3] += (double)d;
        }
        for (int j = 0; j < 4; j++)
            rows[4 * r + (size_t)j] = a[j];
    }
    for (int j = 0; j < 4; j++)
        c[j] = 0.0;
    for (size_t r = 0; r < nrows; r++)
        for (int j = 0; j < 4; j++)
            c[j] += rows[4 * r + (size_t)j];
}

/* The labels checked, then the scratch (as dt_scratch): what forward and backward both
 * start with. */
static int dt_begin(struct tb_cpu *cpu, const struct tb_op *op, const uint8_t *labels, float **mp, float **mg,
                    struct dt_planes *p, double **rows, struct tb_err *err)
{
    const int rc = dt_check_labels(op, labels, err);
    return rc ? rc : dt_scratch(cpu, op, mp, mg, p, rows, err);
}

static int dt_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                      const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    const struct tb_shape s = op->in[0].shape;
    const float *logits = in[0].data;   /* (N,K,H,W) */
    const uint8_t *labels = in[1].data; /* (N,1,H,W) u8 */
    float *loss = out[0].data;          /* (1,1,1,1) */
    float *sample = out[1].data;        /* (N,K,H,W), the logits' layout */
    float *mp, *mg;
    struct dt_planes p;
    double *rows;
    int rc = dt_begin(cpu, op, labels, &mp, &mg, &p, &rows, err);
    if (rc)
        return rc;
    const int K = s.c, blk = tb_cpu_blk(cpu, &op->in[0]);
    const size_t kb = (size_t)blk, kstride = (size_t)s.h * (size_t)s.w * kb;
    const float tau = op->p.dual.tau;
    /* The sample, pixel by pixel: softmax over K of (z + g) / tau, z = 0 where ignored. */
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < s.n; n++)
        for (int y = 0; y < s.h; y++) {
            const uint8_t *lab = labels + ((size_t)n * (size_t)s.h + (size_t)y) * (size_t)s.w;
            for (int x = 0; x < s.w; x++) {
                const size_t at = tb_cpu_offset(s, blk, n, 0, y, x);
                const float *z = logits + at;
                float *q = sample + at;
                const bool ignored = lab[x] == op->p.dual.ignore_label;
                float m = -INFINITY;
                for (int k = 0; k < K; k++) {
                    const uint64_t index =
                        (((uint64_t)n * (uint64_t)K + (uint64_t)k) * (uint64_t)s.h + (uint64_t)y) * (uint64_t)s.w +
                        (uint64_t)x;
                    const float v = ((ignored ? 0.0f : z[ZK(k)]) + dt_noise(op, step, index)) / tau;
                    q[ZK(k)] = v;
                    m = v > m ? v : m;
                }
                float sum = 0.0f;
                for (int k = 0; k < K; k++) {
                    q[ZK(k)] = expf(q[ZK(k)] - m);
                    sum += q[ZK(k)];
                }
                for (int k = 0; k < K; k++)
                    q[ZK(k)] = q[ZK(k)] / sum;
            }
        }
    dt_magnitudes(cpu, op, sample, labels, &p, mp, mg);
    const size_t all = tb_shape_elems(s);
    const float Mp = dt_max(mp, all), Mg = dt_max(mg, all);
    double c[4];
    dt_sums(op, mp, mg, Mp, Mg, rows, c);
    loss[0] = (float)(0.5 * c[2] / (c[0] + (double)DT_EPS) + 0.5 * c[3] / (c[1] + (double)DT_EPS));
    return TB_OK;
}

/* Backward plane pl (image pl / K, class pl % K): back through the magnitude, the
 * differences and the smoothing from dm = mg's plane, the sample's gradient into mp's
 * plane (whose values no plane needs any more), with this thread's planes of p. */
static void dt_plane_backward(struct tb_cpu *cpu, const struct tb_op *op, const float *sample,
                              const struct dt_planes *p, const float *mg, float *mp, const float *f, int pl)
{
    const struct tb_shape s = op->in[0].shape;
    const size_t W = (size_t)s.w, hw = (size_t)s.h * W;
    const int H = s.h, Wi = s.w;
    const struct dt_planes q = dt_mine(p, hw);
    const size_t plane = (size_t)pl * hw;
    const float *dm = mg + plane;
    dt_sample_plane(cpu, op, sample, pl / s.c, pl % s.c, q.e);
    dt_smooth(&q, H, Wi, f);
    /* a, b = d loss / d Ox, d Oy = dm * Ox / m, dm * Oy / m */
    for (int y = 0; y < H; y++)
        for (int x = 0; x < Wi; x++) {
            float ox, oy;
            dt_diffs(q.s, H, Wi, y, x, &ox, &oy);
            const size_t at = (size_t)y * W + (size_t)x;
            const float m = sqrtf(ox * ox + oy * oy + DT_FLOOR);
            q.a[at] = dm[at] * ox / m;
            q.b[at] = dm[at] * oy / m;
        }
    /* e = d loss / d S: Ox[x] = 0.5 S[x+1] - 0.5 S[x-1], so S[x] gets 0.5 dOx[x-1]
     * - 0.5 dOx[x+1] (and the same along y) */
    for (int y = 0; y < H; y++)
        for (int x = 0; x < Wi; x++) {
            const size_t at = (size_t)y * W + (size_t)x;
            float g = 0.0f;
            if (x > 0)
                g += 0.5f * q.a[at - 1];
            if (x + 1 < Wi)
                g -= 0.5f * q.a[at + 1];
            if (y > 0)
                g += 0.5f * q.b[at - W];
            if (y + 1 < H)
                g -= 0.5f * q.b[at + W];
            q.e[at] = g;
        }
    /* t = d loss / d T, the column pass's adjoint: each row of e scattered to the
     * rows its taps read, in the order of the rows and the taps */
    for (size_t i = 0; i < hw; i++)
        q.t[i] = 0.0f;
    for (int y = 0; y < H; y++) {
        const float *g = q.e + (size_t)y * W;
        for (int d = 0; d < DT_TAPS; d++) {
            float *t = q.t + (size_t)dt_reflect(y + d - DT_RADIUS, H) * W;
#pragma omp simd
            for (int x = 0; x < Wi; x++)
                t[x] += f[d] * g[x];
        }
    }
    /* the sample's gradient, the row pass's adjoint, row by row */
    float *dq = mp + plane;
    for (int y = 0; y < H; y++) {
        float *row = dq + (size_t)y * W;
        const float *t = q.t + (size_t)y * W;
        for (int x = 0; x < Wi; x++)
            row[x] = 0.0f;
        for (int x = 0; x < Wi; x++)
            for (int d = 0; d < DT_TAPS; d++) {
                const int j = x + d - DT_RADIUS;
                row[j >= 0 && j < Wi ? j : dt_reflect(j, Wi)] += f[d] * t[x];
            }
    }
}

/* Through the softmax: dz_k = q_k (dq_k - sum_j q_j dq_j) / tau, dq the sample's gradient
 * (mp, plane-major); 0 where the label is ignored. dz in the logits' layout. */
static void dt_softmax_backward(struct tb_cpu *cpu, const struct tb_op *op, const float *sample, const uint8_t *labels,
                                const float *mp, float *dz)
{
    const struct tb_shape s = op->in[0].shape;
    const size_t W = (size_t)s.w, hw = (size_t)s.h * W;
    const int K = s.c, blk = tb_cpu_blk(cpu, &op->in[0]);
    const size_t kb = (size_t)blk, kstride = hw * kb;
    const float tau = op->p.dual.tau;
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < s.n; n++)
        for (int y = 0; y < s.h; y++) {
            const uint8_t *lab = labels + ((size_t)n * (size_t)s.h + (size_t)y) * W;
            for (int x = 0; x < s.w; x++) {
                const size_t at = tb_cpu_offset(s, blk, n, 0, y, x);
                const float *q = sample + at;
                float *g = dz + at;
                const size_t pix = (size_t)n * (size_t)K * hw + (size_t)y * W + (size_t)x;
                if (lab[x] == op->p.dual.ignore_label) {
                    for (int k = 0; k < K; k++)
                        g[ZK(k)] = 0.0f;
                    continue;
                }
                float dot = 0.0f;
                for (int k = 0; k < K; k++)
                    dot += q[ZK(k)] * mp[pix + (size_t)k * hw];
                for (int k = 0; k < K; k++)
                    g[ZK(k)] = q[ZK(k)] * (mp[pix + (size_t)k * hw] - dot) / tau;
            }
        }
}

static int dt_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                       const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                       struct tb_err *err)
{
    (void)state;
    float *dz = din[0].data; /* (N,K,H,W), the logits' layout; labels have no grad */
    if (!dz)
        return TB_OK;
    const struct tb_shape s = op->in[0].shape;
    const uint8_t *labels = in[1].data; /* (N,1,H,W) u8 */
    const float *sample = out[1].data;  /* (N,K,H,W) */
    const float dl = *(const float *)dout[0].data;
    float *mp, *mg;
    struct dt_planes p;
    double *rows;
    int rc = dt_begin(cpu, op, labels, &mp, &mg, &p, &rows, err);
    if (rc)
        return rc;
    dt_magnitudes(cpu, op, sample, labels, &p, mp, mg);
    const size_t all = tb_shape_elems(s), W = (size_t)s.w;
    const size_t nrows = (size_t)s.n * (size_t)s.c * (size_t)s.h;
    const float Mp = dt_max(mp, all), Mg = dt_max(mg, all);
    double c[4];
    dt_sums(op, mp, mg, Mp, Mg, rows, c);
    /* d loss / d p_i = sign(p_i - q_i) * (w1 [p_i >= th] + w2 [q_i >= th]), into mg; and
     * sum_i of that times mp_i (the maximum's share) with the count of tied maxima. */
    const double w1 = 0.5 * (double)dl / (c[0] + (double)DT_EPS), w2 = 0.5 * (double)dl / (c[1] + (double)DT_EPS);
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < nrows; r++) {
        double a[2] = { 0, 0 };
        for (size_t i = r * W; i < (r + 1) * W; i++) {
            const float pi = mp[i] / Mp, qi = mg[i] / Mg;
            const float sg = pi > qi ? 1.0f : pi < qi ? -1.0f : 0.0f;
            const float g = sg * (float)((pi >= DT_THRESHOLD ? w1 : 0.0) + (qi >= DT_THRESHOLD ? w2 : 0.0));
            mg[i] = g;
            a[0] += (double)g * (double)mp[i];
            a[1] += mp[i] == Mp;
        }
        rows[2 * r] = a[0];
        rows[2 * r + 1] = a[1];
    }
    double gm = 0.0, ties = 0.0;
    for (size_t r = 0; r < nrows; r++)
        gm += rows[2 * r], ties += rows[2 * r + 1];
    /* p = m / max(m): d/dm_j = g_j / Mp, minus (sum_i g_i m_i) / Mp^2 shared by the maxima. */
    const float at_max = (float)(gm / ((double)Mp * (double)Mp * ties));
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < all; i++)
        mg[i] = mg[i] / Mp - (mp[i] == Mp ? at_max : 0.0f);
    /* Plane by plane (one per thread at a time), back through the magnitude, the
     * differences and the smoothing: the sample's gradient, plane-major, into mp (whose
     * values no plane needs any more). */
    float f[DT_TAPS];
    dt_taps(f);
    const int planes = s.n * s.c;
#pragma omp parallel for schedule(dynamic) num_threads(cpu->threads)
    for (int pl = 0; pl < planes; pl++)
        dt_plane_backward(cpu, op, sample, &p, mg, mp, f, pl);

    dt_softmax_backward(cpu, op, sample, labels, mp, dz);
    return TB_OK;
}

const struct tb_cpu_kernel TB_CPU_KERNEL(dual_task) = {
    .forward = dt_forward,
    .backward = dt_backward,
};
