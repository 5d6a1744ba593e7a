/* backends/cpu/cpu_dual.c: G-SCNN's dual-task regulariser (TB_OP_DUAL_TASK, trainbig/ops.h).
 *
 * Forward: a Gumbel-softmax sample of the logits (the op's second output, which backward
 * reads), the boundary maps of that sample and of the one-hot labels (each plane smoothed
 * by the triangle filter, then the magnitude of its central differences, divided by the
 * largest over the whole tensor), and the masked L1 between them. Backward needs the
 * sample's smoothed map and the labels' magnitudes again, then runs each step's adjoint.
 *
 * The logits' layout is worked in as it is: a tensor is G = N * K / L groups of H rows of
 * W pixels of L lanes (NHWC: L = K, a group per image; channel-blocked: L = the block),
 * lane c of group g being class (g % (K / L)) * L + c of image g / (K / L). Every plane of
 * a group is smoothed at once, row by row: a row is W * L contiguous floats, and the
 * filter's taps along W are L floats apart, so each pass is one vector loop over a row.
 * Rows stream through rings (the 9 rows a smoothed row reads, the 3 a difference reads),
 * so a group's planes are not gathered into planes nor held whole.
 *
 * The scratch keeps two maps of the logits' size: the sample smoothed (sp; its magnitudes
 * are made from it where needed, two differences and a root) and the labels' magnitudes
 * (mg). Forward leaves them there with their extremes and sums (struct dt_memo, the op's
 * state); backward takes them while no op has asked for the scratch since
 * (tb_cpu::scratch_handed unchanged) and the sample and labels are where they were, and
 * makes them again otherwise: the same bits either way, and no tensor kept alive between
 * the two passes.
 *
 * Every element is computed the same way whatever the threads (a group's rows may be cut
 * into strips, each recomputing the rows around it), and every sum goes into a slot per
 * row in a fixed order, the slots added in order: the bits depend neither on the thread
 * count nor on the ISA. Per-element terms are float, as PyTorch computes them; sums are
 * double. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_shared.h"
#include "cpu_vmath.h"

#define DT_RADIUS 4 /* the triangle filter's radius (the reference's convTri(E, 4)) */
#define DT_TAPS (2 * DT_RADIUS + 1)
#define DT_EPS 1e-10f      /* the Gumbel noise's and the masked means' epsilon */
#define DT_THRESHOLD 1e-8f /* an element counts in a mask when its map is at least this */
#define DT_FLOOR 1e-6f     /* under the square root of the gradient magnitude */
#define DT_LINES 36        /* rows of a thread's rings (dt_lines) */
#define DT_MAX_SOURCES (DT_TAPS * (4 * DT_RADIUS + 1)) /* (source, tap) pairs of one target */

/* The op's tensor seen as groups of rows of pixels of lanes. */
struct dt_geom {
    int N, K, H, W;
    int L;      /* lanes: classes side by side at a pixel */
    int B;      /* groups per image: K / L */
    int G;      /* groups: N * B */
    size_t row; /* floats of a group's row: W * L */
};

static struct dt_geom dt_geom(const struct tb_cpu *cpu, const struct tb_op *op)
{
    const struct tb_shape s = op->in[0].shape;
    const int blk = tb_cpu_blk(cpu, &op->in[0]);
    struct dt_geom g = { s.n, s.c, s.h, s.w, blk ? blk : s.c, 0, 0, 0 };
    g.B = g.K / g.L;
    g.G = g.N * g.B;
    g.row = (size_t)g.W * (size_t)g.L;
    return g;
}

/* Row y of group gi, in a tensor of the op's layout. */
static inline size_t dt_at(const struct dt_geom *g, int gi, int y)
{
    return ((size_t)gi * (size_t)g->H + (size_t)y) * g->row;
}

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

static inline int dt_min(int a, int b)
{
    return a < b ? a : b;
}

static inline int dt_max(int a, int b)
{
    return a > b ? a : b;
}

/* Targets of the filter whose taps reach past an end: fewer than DT_RADIUS from either. */
static inline bool dt_border(int j, int n)
{
    return j < DT_RADIUS || j >= n - DT_RADIUS;
}

/* The filter's adjoint at target j of n: the (source, tap) pairs with
 * dt_reflect(source + tap - DT_RADIUS, n) == j, sources ascending, taps ascending within
 * one (the order the filter's transpose adds them in). Returns their count. */
static int dt_sources(int j, int n, int src[DT_MAX_SOURCES], int tap[DT_MAX_SOURCES])
{
    int count = 0;
    for (int x = dt_max(0, j - 2 * DT_RADIUS); x <= dt_min(n - 1, j + 2 * DT_RADIUS); x++)
        for (int d = 0; d < DT_TAPS; d++)
            if (dt_reflect(x + d - DT_RADIUS, n) == j)
                src[count] = x, tap[count] = d, count++;
    return count;
}

/* ------------------------------------------------------------------ a row's passes */

/* t over pixels [x0, x1) = e smoothed along W there, each element the sum of its nine taps
 * in order, from 0: pad holds pixels x0 - 4 .. x1 + 3 of e, reflected past the ends, so
 * the taps of every pixel are a vector loop (the row's ends, and rows under 9 pixels). */
static void dt_smooth_w_padded(const struct dt_geom *g, const float *f, const float *e, int x0, int x1, float *pad,
                               float *t)
{
    const size_t L = (size_t)g->L;
    for (int j = 0; j < x1 - x0 + 2 * DT_RADIUS; j++)
        memcpy(pad + (size_t)j * L, e + (size_t)dt_reflect(x0 - DT_RADIUS + j, g->W) * L, L * sizeof(float));
    float *out = t + (size_t)x0 * L;
#pragma omp simd
    for (size_t i = 0; i < (size_t)(x1 - x0) * L; i++) {
        float acc = 0.0f;
#pragma GCC unroll 9
        for (int d = 0; d < DT_TAPS; d++)
            acc += f[d] * pad[i + (size_t)d * L];
        out[i] = acc;
    }
}

/* t = e smoothed along W (pad: scratch of (W + 8) L floats, at least 12 L). */
static void dt_smooth_w(const struct dt_geom *g, const float *f, const float *e, float *pad, float *t)
{
    const size_t L = (size_t)g->L;
    const int W = g->W;
    if (W <= 2 * DT_RADIUS) {
        dt_smooth_w_padded(g, f, e, 0, W, pad, t);
        return;
    }
#pragma omp simd
    for (size_t i = DT_RADIUS * L; i < (size_t)(W - DT_RADIUS) * L; i++) {
        float acc = 0.0f;
#pragma GCC unroll 9
        for (int d = 0; d < DT_TAPS; d++)
            acc += f[d] * e[i + (size_t)d * L - DT_RADIUS * L];
        t[i] = acc;
    }
    dt_smooth_w_padded(g, f, e, 0, DT_RADIUS, pad, t);
    dt_smooth_w_padded(g, f, e, W - DT_RADIUS, W, pad, t);
}

static void dt_smooth_h(const struct dt_geom *g, const float *f, const float *const rows[DT_TAPS], float *s)
{
#pragma omp simd
    for (size_t i = 0; i < g->row; i++) {
        float acc = 0.0f;
#pragma GCC unroll 9
        for (int d = 0; d < DT_TAPS; d++)
            acc += f[d] * rows[d][i];
        s[i] = acc;
    }
}

/* The central differences of the smoothed row s (up, dn: the rows above and below, zeros
 * beyond the border): ox = 0.5 s[x+1] - 0.5 s[x-1], oy = 0.5 dn - 0.5 up. */
static void dt_diffs(const struct dt_geom *g, const float *s, const float *up, const float *dn, float *ox, float *oy)
{
    const size_t L = (size_t)g->L, n = g->row;
#pragma omp simd
    for (size_t i = L; i < n - L; i++)
        ox[i] = 0.5f * s[i + L] - 0.5f * s[i - L];
#pragma omp simd
    for (size_t c = 0; c < L; c++) {
        ox[c] = 0.5f * s[c + L] - 0.5f * 0.0f;
        ox[n - L + c] = 0.5f * 0.0f - 0.5f * s[n - 2 * L + c];
    }
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        oy[i] = 0.5f * dn[i] - 0.5f * up[i];
}

/* ------------------------------------------------------------------ the rings */

/* A thread's rows (each g->row floats): t the 9 rows smoothed along W, s the 3 smoothed
 * both ways, a and b the 3 rows of the magnitude's adjoint, e the 9 rows of the
 * differences' adjoint, single rows, and pad (4 rows) for dt_smooth_w. */
struct dt_lines {
    float *t, *s, *a, *b, *e;
    float *in, *ox, *oy, *tt, *zero, *pad;
};

static struct dt_lines dt_lines(float *base, size_t row)
{
    struct dt_lines l;
    l.t = base;
    l.s = l.t + 9 * row;
    l.a = l.s + 3 * row;
    l.b = l.a + 3 * row;
    l.e = l.b + 3 * row;
    l.in = l.e + 9 * row;
    l.ox = l.in + row;
    l.oy = l.ox + row;
    l.tt = l.oy + row;
    l.zero = l.tt + row;
    l.pad = l.zero + row; /* 4 rows: (W + 8) L <= 4 W L floats, W >= 3 */
    memset(l.zero, 0, row * sizeof(float));
    return l;
}

/* Where the rows a map is made of come from: the sample (a tensor of the op's layout) or
 * the one-hot labels (an ignored pixel is class 0). */
struct dt_source {
    const float *map;
    const uint8_t *labels;
    int ignore;
};

/* A group's rows flowing through the rings: rows below next_* are done. */
struct dt_pipe {
    const struct dt_geom *g;
    const float *f;
    struct dt_lines l;
    struct dt_source src;
    int gi;
    int next_t, next_s;
};

static inline float *dt_ring(float *ring, int slots, int y, size_t row)
{
    return ring + (size_t)(y % slots) * row;
}

/* Row y of group gi of the source, as W * L floats. */
static const float *dt_source_row(struct dt_pipe *p, int y)
{
    const struct dt_geom *g = p->g;
    if (p->src.map)
        return p->src.map + dt_at(g, p->gi, y);
    const int n = p->gi / g->B, k0 = p->gi % g->B * g->L;
    const uint8_t *lab = p->src.labels + ((size_t)n * (size_t)g->H + (size_t)y) * (size_t)g->W;
    const size_t L = (size_t)g->L;
    memset(p->l.in, 0, g->row * sizeof(float));
    for (int x = 0; x < g->W; x++) {
        const int t = lab[x] == p->src.ignore ? 0 : lab[x];
        if (t >= k0 && t < k0 + g->L)
            p->l.in[(size_t)x * L + (size_t)(t - k0)] = 1.0f;
    }
    return p->l.in;
}

static void dt_pipe_start(struct dt_pipe *p, const struct dt_geom *g, const float *f, struct dt_lines l,
                          struct dt_source src, int gi, int first_s)
{
    *p = (struct dt_pipe){ g, f, l, src, gi, 0, 0 };
    p->next_s = dt_max(0, first_s);
    p->next_t = dt_max(0, p->next_s - DT_RADIUS);
}

/* Smoothed rows done through y (< H): each needs the rows 4 either side smoothed along W. */
static void dt_pipe_smooth_to(struct dt_pipe *p, int y)
{
    const struct dt_geom *g = p->g;
    for (; p->next_s <= y; p->next_s++) {
        const int ys = p->next_s, need = dt_min(g->H - 1, ys + DT_RADIUS);
        for (; p->next_t <= need; p->next_t++)
            dt_smooth_w(g, p->f, dt_source_row(p, p->next_t), p->l.pad, dt_ring(p->l.t, 9, p->next_t, g->row));
        const float *rows[DT_TAPS];
        for (int d = 0; d < DT_TAPS; d++)
            rows[d] = dt_ring(p->l.t, 9, dt_reflect(ys + d - DT_RADIUS, g->H), g->row);
        dt_smooth_h(g, p->f, rows, dt_ring(p->l.s, 3, ys, g->row));
    }
}

/* The differences at row y into l.ox and l.oy (the smoothed rows y - 1 .. y + 1 done). */
static void dt_pipe_diffs(struct dt_pipe *p, int y)
{
    const struct dt_geom *g = p->g;
    dt_pipe_smooth_to(p, dt_min(g->H - 1, y + 1));
    const float *up = y > 0 ? dt_ring(p->l.s, 3, y - 1, g->row) : p->l.zero;
    const float *dn = y + 1 < g->H ? dt_ring(p->l.s, 3, y + 1, g->row) : p->l.zero;
    dt_diffs(g, dt_ring(p->l.s, 3, y, g->row), up, dn, p->l.ox, p->l.oy);
}

/* The differences at row y of group gi of a stored smoothed map (the sample's, sp) into
 * l.ox and l.oy: the same as dt_pipe_diffs gave when it was made. */
static void dt_stored_diffs(const struct dt_geom *g, const float *sp, struct dt_lines *l, int gi, int y)
{
    const float *up = y > 0 ? sp + dt_at(g, gi, y - 1) : l->zero;
    const float *dn = y + 1 < g->H ? sp + dt_at(g, gi, y + 1) : l->zero;
    dt_diffs(g, sp + dt_at(g, gi, y), up, dn, l->ox, l->oy);
}

/* The magnitude from the differences in l.ox, l.oy: mag before its division by the largest. */
static inline float dt_mag(const struct dt_lines *l, size_t i)
{
    return sqrtf(l->ox[i] * l->ox[i] + l->oy[i] * l->oy[i] + DT_FLOOR);
}

/* ------------------------------------------------------------------ units of work */

/* A group's rows cut into strips so that there are a few units per thread: each strip
 * recomputes the few rows around it, the same values, so the cut changes no bits. */
struct dt_units {
    int strips, rows_per_strip, count;
};

static struct dt_units dt_units(const struct dt_geom *g, int threads)
{
    struct dt_units u;
    const int want = 2 * (threads > 0 ? threads : 1);
    u.strips = g->G >= want ? 1 : (want + g->G - 1) / g->G;
    u.strips = dt_max(1, dt_min(u.strips, g->H / (4 * DT_RADIUS)));
    u.rows_per_strip = (g->H + u.strips - 1) / u.strips;
    u.strips = (g->H + u.rows_per_strip - 1) / u.rows_per_strip;
    u.count = g->G * u.strips;
    return u;
}

static void dt_unit_rows(const struct dt_geom *g, const struct dt_units *u, int unit, int *gi, int *y0, int *y1)
{
    *gi = unit / u->strips;
    *y0 = unit % u->strips * u->rows_per_strip;
    *y1 = dt_min(g->H, *y0 + u->rows_per_strip);
}

/* ------------------------------------------------------------------ scratch */

struct dt_scratch {
    float *sp;          /* the sample smoothed (its magnitudes are made from it as needed) */
    float *mg;          /* the labels' magnitude map; both in the op's layout */
    float *lines;       /* a thread's rows (DT_LINES, or dt_sample's) */
    uint32_t *extent;   /* each group row's largest and least magnitude's bits: mp's, then mg's */
    double *rows;       /* three doubles per group row (dt_sums) */
    size_t per_thread;  /* floats of a thread's lines */
};

static int dt_scratch(struct tb_cpu *cpu, const struct dt_geom *g, struct dt_scratch *sc, struct tb_err *err)
{
    const size_t all = (size_t)g->G * (size_t)g->H * g->row, threads = (size_t)(cpu->threads > 0 ? cpu->threads : 1);
    const size_t softmax = ((size_t)g->K + 2) * (size_t)g->W; /* dt_sample's */
    sc->per_thread = (DT_LINES * g->row > softmax ? DT_LINES * g->row : softmax) + 16; /* + 64 bytes apart */
    const size_t slots = (size_t)g->G * (size_t)g->H;
    const size_t words = 2 * all + threads * sc->per_thread + 4 * (size_t)g->G * (size_t)g->H;
    char *base = tb_cpu_scratch(cpu, words * sizeof(float) + 3 * slots * sizeof(double) + 64, err);
    if (!base)
        return err->status;
    float *fl = (float *)base;
    sc->sp = fl;
    sc->mg = fl + all;
    sc->lines = sc->mg + all;
    sc->extent = (uint32_t *)(sc->lines + threads * sc->per_thread);
    const size_t off = (words * sizeof(float) + 7) & ~(size_t)7; /* doubles 8-byte aligned */
    sc->rows = (double *)(base + off);
    return TB_OK;
}

static struct dt_lines dt_my_lines(const struct dt_scratch *sc, const struct dt_geom *g)
{
    return dt_lines(sc->lines + (size_t)omp_get_thread_num() * sc->per_thread, g->row);
}

/* ------------------------------------------------------------------ forward */

/* The Gumbel noise of the element with NCHW index `index`. */
static inline float dt_noise(uint64_t seed, uint64_t step, uint32_t op, uint64_t index)
{
    const float u = tb_cpu_uniform(seed, step, op, index);
    return -tb_vm_logf_normal(DT_EPS - tb_vm_logf_normal(u + DT_EPS)); /* both positive normal */
}

/* The sample, row by row of each image: softmax over K of (z + noise) / tau (times 1 / tau,
 * and each divided by the sum as times its reciprocal), z = 0 where the label is ignored. A row is worked class-major (K rows of W, each a vector loop), so
 * each pixel's maximum and sum run over the classes in order without a loop across lanes. */
static void dt_sample(const struct tb_cpu *cpu, const struct tb_op *op, const struct dt_geom *g,
                      const struct dt_scratch *sc, uint64_t step, const float *logits, const uint8_t *labels,
                      float *sample)
{
    const size_t L = (size_t)g->L, W = (size_t)g->W;
    const float inv_tau = 1.0f / op->p.dual.tau;
    const int ignore = op->p.dual.ignore_label;
    const uint64_t seed = op->p.dual.seed;
    const uint32_t id = op->id;
#pragma omp parallel for collapse(2) schedule(static) num_threads(cpu->threads)
    for (int n = 0; n < g->N; n++)
        for (int y = 0; y < g->H; y++) {
            float *v = sc->lines + (size_t)omp_get_thread_num() * sc->per_thread;
            float *m = v + (size_t)g->K * W, *sum = m + W;
            const uint8_t *lab = labels + ((size_t)n * (size_t)g->H + (size_t)y) * W;
            for (int k = 0; k < g->K; k++) {
                const float *z = logits + dt_at(g, n * g->B + k / g->L, y) + (size_t)(k % g->L);
                const uint64_t base = (((uint64_t)n * (uint64_t)g->K + (uint64_t)k) * (uint64_t)g->H + (uint64_t)y) * W;
                float *vk = v + (size_t)k * W;
#pragma omp simd
                for (size_t x = 0; x < W; x++) {
                    const float zx = z[x * L];
                    vk[x] = ((lab[x] == ignore ? 0.0f : zx) + dt_noise(seed, step, id, base + x)) * inv_tau;
                }
            }
#pragma omp simd
            for (size_t x = 0; x < W; x++)
                m[x] = -INFINITY, sum[x] = 0.0f;
            for (int k = 0; k < g->K; k++) {
                const float *vk = v + (size_t)k * W;
#pragma omp simd
                for (size_t x = 0; x < W; x++)
                    m[x] = vk[x] > m[x] ? vk[x] : m[x];
            }
            for (int k = 0; k < g->K; k++) {
                float *vk = v + (size_t)k * W;
#pragma omp simd
                for (size_t x = 0; x < W; x++) {
                    vk[x] = tb_vm_expf(vk[x] - m[x]);
                    sum[x] += vk[x];
                }
            }
#pragma omp simd
            for (size_t x = 0; x < W; x++)
                sum[x] = 1.0f / sum[x];
            for (int k = 0; k < g->K; k++) {
                float *q = sample + dt_at(g, n * g->B + k / g->L, y) + (size_t)(k % g->L);
                const float *vk = v + (size_t)k * W;
#pragma omp simd
                for (size_t x = 0; x < W; x++)
                    q[x * L] = vk[x] * sum[x];
            }
        }
}

/* The source's map into out (the op's layout): its rows smoothed when `smoothed`, else its
 * unnormalised magnitudes; and each group row's largest and least magnitude's bits into
 * extent (magnitudes are positive, so their bits order as they do; a NaN's are above
 * every number's). */
static void dt_map(const struct tb_cpu *cpu, const struct dt_geom *g, const struct dt_scratch *sc,
                   struct dt_source src, bool smoothed, float *out, uint32_t *extent)
{
    const struct dt_units u = dt_units(g, cpu->threads);
    float f[DT_TAPS];
    dt_taps(f);
#pragma omp parallel for schedule(dynamic) num_threads(cpu->threads)
    for (int unit = 0; unit < u.count; unit++) {
        int gi, y0, y1;
        dt_unit_rows(g, &u, unit, &gi, &y0, &y1);
        struct dt_pipe p;
        dt_pipe_start(&p, g, f, dt_my_lines(sc, g), src, gi, y0 - 1);
        for (int y = y0; y < y1; y++) {
            dt_pipe_diffs(&p, y);
            float *o = out + dt_at(g, gi, y), *m = smoothed ? p.l.tt : o;
            uint32_t hi = 0, lo = UINT32_MAX;
#pragma omp simd reduction(max : hi) reduction(min : lo)
            for (size_t i = 0; i < g->row; i++) {
                m[i] = dt_mag(&p.l, i);
                const uint32_t b = tb_float_bits(m[i]);
                hi = b > hi ? b : hi;
                lo = b < lo ? b : lo;
            }
            if (smoothed)
                memcpy(o, dt_ring(p.l.s, 3, y, g->row), g->row * sizeof(float));
            uint32_t *e = extent + 2 * ((size_t)gi * (size_t)g->H + (size_t)y);
            e[0] = hi, e[1] = lo;
        }
    }
}

/* Both maps' largest (Mp, Mg) and least values, and whether the masks hold every element:
 * a magnitude is at least sqrt(1e-6) = 1e-3 and, the maps being of values in [0, 1], at
 * most sqrt(0.5 + 1e-6), so every p and q is over 1e-3 and the threshold 1e-8 takes them
 * all; only a NaN (non-finite logits) breaks that. */
struct dt_extent {
    float Mp, Mg;
    float rp, rg; /* 1 / Mp, 1 / Mg: p = mp * rp, q = mg * rg */
    bool whole; /* every p >= threshold and every q >= threshold */
};

static struct dt_extent dt_maps(const struct tb_cpu *cpu, const struct tb_op *op, const struct dt_geom *g,
                                const struct dt_scratch *sc, const float *sample, const uint8_t *labels)
{
    const size_t rows = (size_t)g->G * (size_t)g->H;
    dt_map(cpu, g, sc, (struct dt_source){ sample, NULL, 0 }, true, sc->sp, sc->extent);
    dt_map(cpu, g, sc, (struct dt_source){ NULL, labels, op->p.dual.ignore_label }, false, sc->mg,
           sc->extent + 2 * rows);
    uint32_t hi[2] = { 0, 0 }, lo[2] = { UINT32_MAX, UINT32_MAX };
    for (int j = 0; j < 2; j++)
        for (size_t r = 0; r < rows; r++) {
            const uint32_t *e = sc->extent + 2 * (j * rows + r);
            hi[j] = e[0] > hi[j] ? e[0] : hi[j];
            lo[j] = e[1] < lo[j] ? e[1] : lo[j];
        }
    struct dt_extent x = { tb_float_from_bits(hi[0]), tb_float_from_bits(hi[1]), 0.0f, 0.0f, false };
    x.rp = 1.0f / x.Mp;
    x.rg = 1.0f / x.Mg;
    x.whole = isfinite(x.Mp) && isfinite(x.Mg) && tb_float_from_bits(lo[0]) / x.Mp >= DT_THRESHOLD &&
              tb_float_from_bits(lo[1]) / x.Mg >= DT_THRESHOLD;
    return x;
}

/* sign(p - q), p = mp * rp, q = mg * rg: with w1 + w2, the loss's gradient with respect to
 * p, the masks holding every element. */
static inline float dt_sign(float mp, float mg, float rp, float rg)
{
    const float p = mp * rp, q = mg * rg;
    return p > q ? 1.0f : p < q ? -1.0f : 0.0f;
}

/* What the loss and its gradient sum over every element, the masks holding them all:
 * l1 = sum |p - q|; signed = sum sign(p - q) mp (the gradient's share through the
 * maximum, (w1 + w2) times it); ties = the count of mp == Mp. */
struct dt_sums {
    double l1, signed_mp, ties;
};

/* Sums are taken in DT_PARTS partial sums, term i into partial i % DT_PARTS, then the
 * partials in order: a fixed order (the same on every ISA, whatever its vector width) that
 * vectorises. */
#define DT_PARTS 16

static double dt_parts_total(const double sum[DT_PARTS])
{
    double t = 0.0;
    for (int j = 0; j < DT_PARTS; j++)
        t += sum[j];
    return t;
}

/* The sums per group row (mp made again from sp a row at a time), then the rows in order. */
static struct dt_sums dt_sums(const struct tb_cpu *cpu, const struct dt_geom *g, const struct dt_scratch *sc,
                              const struct dt_extent *x)
{
    const float rp = x->rp, rg = x->rg, Mp = x->Mp;
    const size_t row = g->row;
#pragma omp parallel for collapse(2) schedule(static) num_threads(cpu->threads)
    for (int gi = 0; gi < g->G; gi++)
        for (int y = 0; y < g->H; y++) {
            struct dt_lines ln = dt_my_lines(sc, g);
            dt_stored_diffs(g, sc->sp, &ln, gi, y);
            const float *mg = sc->mg + dt_at(g, gi, y);
            double s0[DT_PARTS] = { 0 }, s1[DT_PARTS] = { 0 }, s2[DT_PARTS] = { 0 };
            for (size_t i0 = 0; i0 < row; i0 += DT_PARTS) {
                const size_t n = row - i0 < DT_PARTS ? row - i0 : DT_PARTS;
#pragma omp simd
                for (size_t j = 0; j < n; j++) {
                    const size_t i = i0 + j;
                    const float mp = dt_mag(&ln, i);
                    s0[j] += (double)fabsf(mp * rp - mg[i] * rg);
                    s1[j] += (double)(dt_sign(mp, mg[i], rp, rg) * mp);
                    s2[j] += mp == Mp ? 1.0 : 0.0;
                }
            }
            double *r = sc->rows + 3 * ((size_t)gi * (size_t)g->H + (size_t)y);
            r[0] = dt_parts_total(s0), r[1] = dt_parts_total(s1), r[2] = dt_parts_total(s2);
        }
    const size_t rows = (size_t)g->G * (size_t)g->H;
    struct dt_sums sum = { 0.0, 0.0, 0.0 };
    for (size_t r = 0; r < rows; r++)
        sum.l1 += sc->rows[3 * r], sum.signed_mp += sc->rows[3 * r + 1], sum.ties += sc->rows[3 * r + 2];
    return sum;
}

/* What forward left in the scratch, for backward (the op's state; dt_backward takes it
 * while scratch, scratch_handed, sample and labels are as recorded). */
struct dt_memo {
    const void *sample, *labels, *scratch;
    uint64_t handed; /* tb_cpu::scratch_handed once the maps were made */
    struct dt_extent ext;
    struct dt_sums sums; /* when ext.whole */
    bool valid;
};

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

/* The labels checked, then the scratch: what forward and backward both start with. */
static int dt_begin(struct tb_cpu *cpu, const struct tb_op *op, const uint8_t *labels, struct dt_geom *g,
                    struct dt_scratch *sc, struct tb_err *err)
{
    *g = dt_geom(cpu, op);
    const int rc = dt_check_labels(op, labels, err);
    return rc ? rc : dt_scratch(cpu, g, sc, err);
}

static int dt_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                      const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    const float *logits = in[0].data;   /* (N,K,H,W) */
    const uint8_t *labels = in[1].data; /* (N,1,H,W) u8 */
    float *loss = out[0].data;          /* (1,1,1,1) */
    float *sample = out[1].data;        /* (N,K,H,W), the logits' layout */
    struct dt_geom g;
    struct dt_scratch sc;
    int rc = dt_begin(cpu, op, labels, &g, &sc, err);
    if (rc)
        return rc;
    dt_sample(cpu, op, &g, &sc, step, logits, labels, sample);
    struct dt_memo *memo = state;
    *memo = (struct dt_memo){ sample, labels, NULL, 0, dt_maps(cpu, op, &g, &sc, sample, labels), { 0, 0, 0 }, true };
    if (!memo->ext.whole) {
        loss[0] = NAN;
    } else {
        /* both masks hold every element: their counts are the element count, their sums one */
        memo->sums = dt_sums(cpu, &g, &sc, &memo->ext);
        const double d = memo->sums.l1, count = (double)tb_shape_elems(op->in[0].shape);
        loss[0] = (float)(0.5 * d / (count + (double)DT_EPS) + 0.5 * d / (count + (double)DT_EPS));
    }
    memo->scratch = cpu->scratch;
    memo->handed = cpu->scratch_handed;
    return TB_OK;
}

/* ------------------------------------------------------------------ backward */

/* What the softmax's adjoint reads besides dz. */
struct dt_softmax {
    const float *sample;
    const uint8_t *labels;
    float inv_tau;
    int ignore;
};

/* Through the softmax at row y of image n: dz_k = q_k (dq_k - sum_j q_j dq_j) / tau, in
 * place (dq is in dz); 0 where the label is ignored. The sums run class-major over the
 * row (dot: W floats), a vector loop each. */
static void dt_softmax_row(const struct dt_geom *g, const struct dt_softmax *sm, int n, int y, float *dz, float *dot)
{
    const size_t L = (size_t)g->L, W = (size_t)g->W;
    const uint8_t *lab = sm->labels + ((size_t)n * (size_t)g->H + (size_t)y) * W;
#pragma omp simd
    for (size_t x = 0; x < W; x++)
        dot[x] = 0.0f;
    for (int k = 0; k < g->K; k++) {
        const size_t at = dt_at(g, n * g->B + k / g->L, y) + (size_t)(k % g->L);
        const float *q = sm->sample + at, *d = dz + at;
#pragma omp simd
        for (size_t x = 0; x < W; x++)
            dot[x] += q[x * L] * d[x * L];
    }
    for (int b = 0; b < g->B; b++) {
        const size_t at = dt_at(g, n * g->B + b, y);
        const float *q = sm->sample + at;
        float *d = dz + at;
        for (size_t x = 0; x < W; x++) {
            const float dx = dot[x];
            float *dp = d + x * L;
            const float *qp = q + x * L;
            if (lab[x] == sm->ignore) {
                for (size_t c = 0; c < L; c++)
                    dp[c] = 0.0f;
                continue;
            }
#pragma omp simd
            for (size_t c = 0; c < L; c++)
                dp[c] = qp[c] * (dp[c] - dx) * sm->inv_tau;
        }
    }
}

/* The softmax's adjoint over every row, when the group passes could not do it as they
 * went (an image's classes in more than one group). */
static void dt_softmax_backward(const struct tb_cpu *cpu, const struct dt_geom *g, const struct dt_scratch *sc,
                                const struct dt_softmax *sm, float *dz)
{
#pragma omp parallel for collapse(2) schedule(static) num_threads(cpu->threads)
    for (int n = 0; n < g->N; n++)
        for (int y = 0; y < g->H; y++)
            dt_softmax_row(g, sm, n, y, dz, sc->lines + (size_t)omp_get_thread_num() * sc->per_thread);
}

/* Back through the magnitude, the differences and the smoothing, for rows [y0, y1) of
 * group gi: the gradient with respect to the sample into dq (the op's layout). dm, the
 * gradient with respect to the magnitude, is made from mp and mg as each row needs it:
 * sign(p - q) (w1 + w2) / Mp (dscale_mp), less at_max where mp is the maximum. Each target of a transpose adds its
 * sources in the order the forward's taps reach it (dt_sources). With sm (a group holding
 * all of an image's classes), each row goes on through the softmax's adjoint at once. */
static void dt_group_backward(const struct dt_geom *g, const float *f, const struct dt_scratch *sc,
                              struct dt_lines l, const struct dt_extent *ext, float dscale_mp,
                              float at_max, const struct dt_softmax *sm, int gi, int y0, int y1, float *dq)
{
    const int H = g->H, W = g->W;
    const size_t L = (size_t)g->L, row = g->row;
    const int first_e = dt_max(0, y0 - DT_RADIUS), first_ab = dt_max(0, first_e - 1);
    int next_ab = first_ab, next_e = first_e;
    for (int r = y0; r < y1; r++) {
        /* e rows through r + 4, each needing a, b one row further */
        for (const int need_e = dt_min(H - 1, r + DT_RADIUS); next_e <= need_e; next_e++) {
            for (const int need_ab = dt_min(H - 1, next_e + 1); next_ab <= need_ab; next_ab++) {
                const int y = next_ab;
                dt_stored_diffs(g, sc->sp, &l, gi, y);
                const float *mg = sc->mg + dt_at(g, gi, y);
                float *a = dt_ring(l.a, 3, y, row), *b = dt_ring(l.b, 3, y, row);
                const float Mp = ext->Mp, rp = ext->rp, rg = ext->rg;
#pragma omp simd
                for (size_t i = 0; i < row; i++) {
                    const float mp = dt_mag(&l, i);
                    const float dm = dt_sign(mp, mg[i], rp, rg) * dscale_mp - (mp == Mp ? at_max : 0.0f);
                    const float rm = dm / mp;
                    a[i] = rm * l.ox[i];
                    b[i] = rm * l.oy[i];
                }
            }
            /* e = the smoothed map's gradient: Ox[x] = 0.5 S[x+1] - 0.5 S[x-1], so S[x] gets
             * 0.5 a[x-1] - 0.5 a[x+1], and the same along y from b */
            const int y = next_e;
            const float *a = dt_ring(l.a, 3, y, row);
            const float *bu = y > 0 ? dt_ring(l.b, 3, y - 1, row) : NULL;
            const float *bd = y + 1 < H ? dt_ring(l.b, 3, y + 1, row) : NULL;
            float *e = dt_ring(l.e, 9, y, row);
#pragma omp simd
            for (size_t i = L; i < row - L; i++) {
                float v = 0.0f;
                v += 0.5f * a[i - L];
                v -= 0.5f * a[i + L];
                e[i] = v;
            }
            for (size_t c = 0; c < L; c++) {
                float v = 0.0f;
                v -= 0.5f * a[c + L];
                e[c] = v;
                v = 0.0f;
                v += 0.5f * a[row - 2 * L + c];
                e[row - L + c] = v;
            }
            if (bu) {
#pragma omp simd
                for (size_t i = 0; i < row; i++)
                    e[i] += 0.5f * bu[i];
            }
            if (bd) {
#pragma omp simd
                for (size_t i = 0; i < row; i++)
                    e[i] -= 0.5f * bd[i];
            }
        }
        /* tt = the column pass's adjoint at row r: the e rows whose taps reach r */
        int src[DT_MAX_SOURCES], tap[DT_MAX_SOURCES];
        float *tt = l.tt;
        if (!dt_border(r, H)) {
            const float *er[DT_TAPS];
            for (int j = 0; j < DT_TAPS; j++) /* sources r - 4 .. r + 4, by taps 8 .. 0 */
                er[j] = dt_ring(l.e, 9, r - DT_RADIUS + j, row);
#pragma omp simd
            for (size_t i = 0; i < row; i++) {
                float acc = 0.0f;
#pragma GCC unroll 9
                for (int j = 0; j < DT_TAPS; j++)
                    acc += f[DT_TAPS - 1 - j] * er[j][i];
                tt[i] = acc;
            }
        } else {
            const int count = dt_sources(r, H, src, tap);
            memset(tt, 0, row * sizeof(float));
            for (int j = 0; j < count; j++) {
                const float *er = dt_ring(l.e, 9, src[j], row), fj = f[tap[j]];
#pragma omp simd
                for (size_t i = 0; i < row; i++)
                    tt[i] += fj * er[i];
            }
        }
        /* the row pass's adjoint: the sample's gradient at row r */
        float *out = dq + dt_at(g, gi, r);
        const size_t lo = DT_RADIUS * L, hi = W > 2 * DT_RADIUS ? (size_t)(W - DT_RADIUS) * L : lo;
#pragma omp simd
        for (size_t i = lo; i < hi; i++) {
            float acc = 0.0f;
#pragma GCC unroll 9
            for (int j = 0; j < DT_TAPS; j++)
                acc += f[DT_TAPS - 1 - j] * tt[i + (size_t)j * L - DT_RADIUS * L];
            out[i] = acc;
        }
        for (int x = 0; x < W; x++) {
            if (!dt_border(x, W))
                continue;
            const int count = dt_sources(x, W, src, tap);
            float *ox = out + (size_t)x * L;
            for (size_t c = 0; c < L; c++)
                ox[c] = 0.0f;
            for (int j = 0; j < count; j++) {
                const float *tx = tt + (size_t)src[j] * L, fj = f[tap[j]];
#pragma omp simd
                for (size_t c = 0; c < L; c++)
                    ox[c] += fj * tx[c];
            }
        }
        if (sm)
            dt_softmax_row(g, sm, gi, r, dq, l.in);
    }
}

static int dt_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                       const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                       struct tb_err *err)
{
    struct dt_memo *memo = state;
    float *dz = din[0].data; /* (N,K,H,W), the logits' layout; labels have no grad */
    if (!dz)
        return TB_OK;
    const uint8_t *labels = in[1].data; /* (N,1,H,W) u8 */
    const float *sample = out[1].data;  /* (N,K,H,W) */
    const float dl = *(const float *)dout[0].data;
    const bool made = memo->valid && memo->sample == sample && memo->labels == labels &&
                      memo->scratch == cpu->scratch && memo->handed == cpu->scratch_handed;
    struct dt_geom g;
    struct dt_scratch sc;
    int rc = dt_begin(cpu, op, labels, &g, &sc, err);
    if (rc)
        return rc;
    if (!made) {
        *memo = (struct dt_memo){ sample, labels, NULL, 0, dt_maps(cpu, op, &g, &sc, sample, labels), { 0, 0, 0 }, true };
        if (memo->ext.whole)
            memo->sums = dt_sums(cpu, &g, &sc, &memo->ext);
    }
    /* the maps stay (backward only reads them): another backward may take them too */
    memo->scratch = cpu->scratch;
    memo->handed = cpu->scratch_handed;
    const struct dt_extent x = memo->ext;
    const size_t all = tb_shape_elems(op->in[0].shape);
    if (!x.whole) { /* a NaN sample: the loss is NaN, and so is its gradient but where ignored */
        for (int gi = 0; gi < g.G; gi++)
            for (int y = 0; y < g.H; y++) {
                const uint8_t *lab = labels + ((size_t)(gi / g.B) * (size_t)g.H + (size_t)y) * (size_t)g.W;
                float *d = dz + dt_at(&g, gi, y);
                for (size_t i = 0; i < g.row; i++)
                    d[i] = lab[i / (size_t)g.L] == op->p.dual.ignore_label ? 0.0f : NAN;
            }
        return TB_OK;
    }
    const double w = 0.5 * (double)dl / ((double)all + (double)DT_EPS); /* w1 = w2: both counts are all */
    const float dscale = (float)(w + w);
    /* p = m / max(m): d/dm_j = dp_j / Mp, minus (sum_i dp_i m_i) / Mp^2 shared by the maxima */
    const double gm = (double)dscale * memo->sums.signed_mp;
    const float at_max = (float)(gm / ((double)x.Mp * (double)x.Mp * memo->sums.ties));
    const struct dt_softmax sm = { sample, labels, 1.0f / op->p.dual.tau, op->p.dual.ignore_label };
    const struct dt_units u = dt_units(&g, cpu->threads);
    float f[DT_TAPS];
    dt_taps(f);
#pragma omp parallel for schedule(dynamic) num_threads(cpu->threads)
    for (int unit = 0; unit < u.count; unit++) {
        int gi, y0, y1;
        dt_unit_rows(&g, &u, unit, &gi, &y0, &y1);
        dt_group_backward(&g, f, &sc, dt_my_lines(&sc, &g), &x, dscale / x.Mp, at_max, g.B == 1 ? &sm : NULL, gi, y0,
                          y1, dz);
    }
    if (g.B > 1)
        dt_softmax_backward(cpu, &g, &sc, &sm, dz);
    return TB_OK;
}

static int dt_prepare(struct tb_cpu *cpu, const struct tb_op *op, void **state, struct tb_err *err)
{
    (void)cpu;
    *state = calloc(1, sizeof(struct dt_memo));
    return *state ? TB_OK : tb_err_set(err, TB_ERR_NOMEM, "op %u (dual_task): out of host memory", op->id);
}

static void dt_release(void *state)
{
    free(state);
}

const struct tb_cpu_kernel TB_CPU_KERNEL(dual_task) = {
    .prepare = dt_prepare,
    .release = dt_release,
    .forward = dt_forward,
    .backward = dt_backward,
};
