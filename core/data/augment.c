/* core/data/augment.c: the training augmentation and the validation resize (see
 * augment.h).
 *
 * Cost is kept to the output's pixels: scale, crop and flip are one resampling pass whose
 * per-column source positions and weights are computed once per call; bilinear
 * interpolation is fixed point (8-bit weights, exact where a weight is 0, so the identity
 * is a copy). The colour jitter (jitter.c) works on the 8-bit result. The blur is separable over a ring of float rows
 * in the caller's scratch, writing the image in place. Inner loops run over whole blocks of BLOCK elements, which the
 * compiler vectorises even at -O2. */
#include "config.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/random.h>

#include "core/data/augment.h"
#include "core/data/hot_internal.h"

/* round(255 * ImageNet mean) */
const uint8_t tb_augment_pad_rgb[3] = { 124, 116, 104 };

enum {
    PAD_LABEL = 255,
    WBITS = 8,                     /* bilinear weights in 1/256: a row along x fits 16 bits */
    WONE = 1 << WBITS,             /* weight 1 */
    WROUND = 1 << (2 * WBITS - 1), /* half of the product of two weights */
};

/* ------------------------------------------------------------------ random draws */

/* Uniform in [0, 1). */
static double rng_unit(uint64_t *state)
{
    return (double)(tb_splitmix64(state) >> 11) * 0x1.0p-53;
}

/* Uniform in [lo, hi] (lo when they are equal). */
static float rng_range(uint64_t *state, float lo, float hi)
{
    return (float)(lo + (double)(hi - lo) * rng_unit(state));
}

/* Uniform in [0, n), n >= 1 (the top 32 bits scaled: no modulo bias worth the name). */
static uint32_t rng_below(uint64_t *state, uint64_t n)
{
    return (uint32_t)(((tb_splitmix64(state) >> 32) * n) >> 32);
}

/* The side of the scaled image: round(n * scale), at least 1. */
static uint32_t scaled_size(uint32_t n, float scale)
{
    double v = (double)n * (double)scale;
    if (!(v >= 1.0))
        return 1;
    if (v > (double)INT32_MAX)
        return INT32_MAX;
    return (uint32_t)lround(v);
}

/* A crop offset on one side: the window inside the scaled image when it fits, otherwise
 * the image inside the window (a negative offset). One draw either way. */
static int32_t draw_offset(uint64_t *state, uint32_t scaled, uint32_t crop)
{
    int64_t lo = scaled >= crop ? 0 : (int64_t)scaled - (int64_t)crop;
    uint64_t span = (uint64_t)llabs((int64_t)scaled - (int64_t)crop) + 1;
    return (int32_t)(lo + rng_below(state, span));
}

void tb_augment_draw(const struct tb_augment *a, uint64_t seed, uint32_t in_w, uint32_t in_h, struct tb_augment_draw *d)
{
    /* Mix the seed first, so that seeds a multiple of the increment apart do not give
     * shifted copies of one stream. */
    uint64_t state = seed ^ 0x6A09E667F3BCC908ull;
    state = tb_splitmix64(&state);

    /* Every value is drawn whatever the settings, in this order, so that changing one
     * setting leaves the others' draws alone. */
    d->scale = rng_range(&state, a->scale_min, a->scale_max);
    uint32_t sw = scaled_size(in_w, d->scale), sh = scaled_size(in_h, d->scale);
    d->off_x = draw_offset(&state, sw, a->crop_w);
    d->off_y = draw_offset(&state, sh, a->crop_h);
    d->flip = (tb_splitmix64(&state) >> 63) != 0 && a->flip;

    const float j = a->jitter > 0 ? a->jitter : 0;
    const float lo = j < 1 ? 1 - j : 0;
    float b = rng_range(&state, lo, 1 + j);
    float c = rng_range(&state, lo, 1 + j);
    float s = rng_range(&state, lo, 1 + j);
    float h = rng_range(&state, -j, j);
    if (j > 0) {
        d->brightness = b, d->contrast = c, d->saturation = s, d->hue = h;
    } else {
        d->brightness = 1, d->contrast = 1, d->saturation = 1, d->hue = 0;
    }
    for (int i = 0; i < 4; i++)
        d->order[i] = (uint8_t)i;
    for (int i = 3; i > 0; i--) {
        uint32_t k = rng_below(&state, (uint64_t)i + 1);
        uint8_t t = d->order[i];
        d->order[i] = d->order[k];
        d->order[k] = t;
    }

    d->blur = rng_unit(&state) < (double)a->blur_prob;
    d->sigma = rng_range(&state, a->blur_sigma_min, a->blur_sigma_max);
}

/* ------------------------------------------------------------------ scratch */

void tb_augment_work_free(struct tb_augment_work *w)
{
    free(w->buf);
    w->buf = NULL;
    w->capacity = 0;
}

/* Makes w hold at least `bytes` (contents lost when it grows). */
static int work_reserve(struct tb_augment_work *w, size_t bytes, struct tb_err *err)
{
    const size_t n = bytes / sizeof *w->buf + 1;
    if (n <= w->capacity)
        return TB_OK;
    float *buf = n <= SIZE_MAX / sizeof *buf ? malloc(n * sizeof *buf) : NULL;
    if (!buf)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory for %zu bytes of augmentation scratch", bytes);
    free(w->buf);
    w->buf = buf;
    w->capacity = n;
    return TB_OK;
}

/* Scratch regions start on a cache line. */
static size_t align_bytes(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* The row length in elements that the vector loops work on: whole blocks. */
static size_t block_round(size_t n)
{
    return (n + BLOCK - 1) / BLOCK * BLOCK;
}

/* ------------------------------------------------------------------ resampling */

/* Where output pixel s of one side reads the input: a side of n input pixels scaled to
 * `scaled`, pixel centres lined up, positions clamped to the image. */
struct axis {
    uint32_t i0, i1; /* bilinear neighbours */
    uint32_t w1;     /* weight of i1 in 1/WONE */
    uint32_t nearest;
};

static struct axis axis_at(int64_t s, uint32_t n, uint32_t scaled)
{
    struct axis r;
    const double ratio = (double)n / (double)scaled;
    double f = ((double)s + 0.5) * ratio - 0.5;
    f = f < 0 ? 0 : f > (double)(n - 1) ? (double)(n - 1) : f;
    r.i0 = (uint32_t)f;
    r.i1 = r.i0 + 1 < n ? r.i0 + 1 : n - 1;
    r.w1 = (uint32_t)lround((f - (double)r.i0) * WONE);
    const double g = floor(((double)s + 0.5) * ratio);
    r.nearest = g < (double)n ? (uint32_t)g : n - 1;
    return r;
}

/* The scratch of resample() for an output `ow` pixels wide: four column tables and two
 * rows of horizontally interpolated values. */
static size_t resample_bytes(uint32_t ow)
{
    return 4 * align_bytes((size_t)ow * sizeof(uint32_t)) + 2 * align_bytes(block_round((size_t)ow * 3) * 2);
}

struct resampler {
    const struct tb_sample *in;
    size_t xa, xb;                /* the output columns inside the scaled image */
    const uint32_t *off0, *off1;  /* per output column: byte offsets of the neighbours */
    const uint32_t *w1, *nearest; /* their weights; the label's column */
    uint16_t *rows[2];            /* input rows interpolated along x, times WONE */
    int64_t cached[2];            /* which input row each holds, -1 for none */
};

/* Input row `src` interpolated along x, from the cache or made in the slot not holding
 * `keep`. */
static const uint16_t *row_along_x(struct resampler *r, uint32_t src, int64_t keep)
{
    for (int k = 0; k < 2; k++)
        if (r->cached[k] == (int64_t)src)
            return r->rows[k];
    const int k = r->cached[0] == keep ? 1 : 0;
    uint16_t *restrict h = r->rows[k];
    const uint8_t *restrict row = r->in->image + (size_t)src * r->in->width * 3;
    for (size_t x = r->xa; x < r->xb; x++) {
        const uint32_t a = r->off0[x], b = r->off1[x], w1 = r->w1[x], w0 = WONE - w1;
        h[3 * x] = (uint16_t)(row[a] * w0 + row[b] * w1);
        h[3 * x + 1] = (uint16_t)(row[a + 1] * w0 + row[b + 1] * w1);
        h[3 * x + 2] = (uint16_t)(row[a + 2] * w0 + row[b + 2] * w1);
    }
    r->cached[k] = src;
    return h;
}

/* o[i] = h0[i] (1 - t) + h1[i] t, rounded, for i in [0, n), t = w1 / WONE. */
static void blend_rows(uint8_t *restrict o, const uint16_t *restrict h0, const uint16_t *restrict h1, uint32_t w1,
                       size_t n)
{
    const uint32_t w0 = WONE - w1;
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (size_t j = 0; j < BLOCK; j++)
            o[i + j] = (uint8_t)((h0[i + j] * w0 + h1[i + j] * w1 + WROUND) >> (2 * WBITS));
    for (; i < n; i++)
        o[i] = (uint8_t)((h0[i] * w0 + h1[i] * w1 + WROUND) >> (2 * WBITS));
}

static void pad_pixels(uint8_t *o, uint8_t *ol, size_t n)
{
    for (size_t x = 0; x < n; x++) {
        o[3 * x] = tb_augment_pad_rgb[0];
        o[3 * x + 1] = tb_augment_pad_rgb[1];
        o[3 * x + 2] = tb_augment_pad_rgb[2];
    }
    memset(ol, PAD_LABEL, n);
}

/* out (its size set) = the window at (off_x, off_y) of `in` scaled to sw x sh, flipped
 * horizontally when flip; pixels outside the scaled image are padding. scratch holds
 * resample_bytes(out->width). The columns' source positions and weights are computed
 * once; each input row is interpolated along x once while consecutive output rows use
 * it (upscaling), then output rows are blends of two such rows. */
static void resample(const struct tb_sample *in, uint32_t sw, uint32_t sh, int64_t off_x, int64_t off_y, bool flip,
                     struct tb_sample *out, void *scratch)
{
    const uint32_t iw = in->width, ih = in->height, ow = out->width, oh = out->height;
    char *p = scratch;
    uint32_t *off0 = (uint32_t *)(void *)p;
    uint32_t *off1 = (uint32_t *)(void *)(p += align_bytes((size_t)ow * sizeof(uint32_t)));
    uint32_t *w1 = (uint32_t *)(void *)(p += align_bytes((size_t)ow * sizeof(uint32_t)));
    uint32_t *nearest = (uint32_t *)(void *)(p += align_bytes((size_t)ow * sizeof(uint32_t)));
    uint16_t *row0 = (uint16_t *)(void *)(p += align_bytes((size_t)ow * sizeof(uint32_t)));
    uint16_t *row1 = (uint16_t *)(void *)(p + align_bytes(block_round((size_t)ow * 3) * 2));

    /* The output columns inside the scaled image form one run: the source column moves
     * by one per output column. */
    int64_t xa = flip ? off_x + (int64_t)ow - (int64_t)sw : -off_x;
    int64_t xb = flip ? off_x + (int64_t)ow : (int64_t)sw - off_x;
    xa = xa < 0 ? 0 : xa > (int64_t)ow ? (int64_t)ow : xa;
    xb = xb < xa ? xa : xb > (int64_t)ow ? (int64_t)ow : xb;
    for (int64_t x = xa; x < xb; x++) {
        const struct axis ax = axis_at(off_x + (flip ? (int64_t)ow - 1 - x : x), iw, sw);
        off0[x] = ax.i0 * 3;
        off1[x] = ax.i1 * 3;
        w1[x] = ax.w1;
        nearest[x] = ax.nearest;
    }
    struct resampler r = { in, (size_t)xa, (size_t)xb, off0, off1, w1, nearest, { row0, row1 }, { -1, -1 } };

    for (uint32_t y = 0; y < oh; y++) {
        uint8_t *o = out->image + (size_t)y * ow * 3, *ol = out->label + (size_t)y * ow;
        const int64_t sy = off_y + y;
        if (sy < 0 || sy >= (int64_t)sh || xa == xb) {
            pad_pixels(o, ol, ow);
            continue;
        }
        pad_pixels(o, ol, (size_t)xa);
        pad_pixels(o + 3 * xb, ol + xb, ow - (size_t)xb);
        const struct axis ay = axis_at(sy, ih, sh);
        const uint16_t *h0 = row_along_x(&r, ay.i0, ay.w1 ? (int64_t)ay.i1 : -1);
        const uint16_t *h1 = ay.w1 ? row_along_x(&r, ay.i1, ay.i0) : h0;
        blend_rows(o + 3 * xa, h0 + 3 * xa, h1 + 3 * xa, ay.w1, 3 * (size_t)(xb - xa));
        const uint8_t *restrict lrow = in->label + (size_t)ay.nearest * iw;
        for (int64_t x = xa; x < xb; x++)
            ol[x] = lrow[nearest[x]];
    }
}

/* ------------------------------------------------------------------ blur */

enum { MAX_RADIUS = 255 };

static uint32_t blur_radius(float sigma)
{
    const float r = ceilf(3 * sigma);
    return r < 1 ? 1 : r > MAX_RADIUS ? MAX_RADIUS : (uint32_t)r;
}

/* The scratch of blur(): a padded input row and a ring of 2r + 1 rows. */
static size_t blur_bytes(uint32_t w, uint32_t r)
{
    const size_t row = block_round((size_t)w * 3) * sizeof(float);
    return align_bytes(row + 6 * (size_t)r * sizeof(float)) + (2 * (size_t)r + 1) * row;
}

/* body[0, n) = src, and the `pad` elements either side (n + pad rounded up to whole
 * blocks on the right) the edge pixel's. */
INLINE void blur_load(float *restrict body, const uint8_t *restrict src, size_t n, size_t pad, size_t row)
{
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (size_t j = 0; j < BLOCK; j++)
            body[i + j] = src[i + j];
    for (; i < n; i++)
        body[i] = src[i];
    for (size_t e = 0; e < pad; e++)
        body[(ptrdiff_t)e - (ptrdiff_t)pad] = src[e % 3];
    for (size_t e = n; e < row + pad; e++)
        body[e] = src[n - 3 + (e - n) % 3];
}

/* dst[0, row) = body blurred along x: taps 3 elements (one pixel) apart. */
INLINE void blur_x(float *restrict dst, const float *restrict body, const float *restrict kernel, uint32_t r,
                   size_t row)
{
    for (size_t i = 0; i < row; i += BLOCK) {
        float acc[BLOCK];
        for (size_t j = 0; j < BLOCK; j++)
            acc[j] = kernel[0] * body[i + j];
        for (uint32_t k = 1; k <= r; k++) {
            const float *left = body + i - 3 * (size_t)k, *right = body + i + 3 * (size_t)k;
            for (size_t j = 0; j < BLOCK; j++)
                acc[j] += kernel[k] * (left[j] + right[j]);
        }
        for (size_t j = 0; j < BLOCK; j++)
            dst[i + j] = acc[j];
    }
}

/* o[0, n) = the blend of rows[0] (weight kernel[0]) and the pairs rows[2k - 1], rows[2k]
 * (weight kernel[k]), rounded to 8 bits. */
INLINE void blur_y(uint8_t *restrict o, const float *const *rows, const float *restrict kernel, uint32_t r, size_t n)
{
    for (size_t i = 0; i < n; i += BLOCK) {
        float acc[BLOCK];
        for (size_t j = 0; j < BLOCK; j++)
            acc[j] = kernel[0] * rows[0][i + j];
        for (uint32_t k = 1; k <= r; k++) {
            const float *restrict a = rows[2 * k - 1] + i, *restrict b = rows[2 * k] + i;
            for (size_t j = 0; j < BLOCK; j++)
                acc[j] += kernel[k] * (a[j] + b[j]);
        }
        if (i + BLOCK <= n) {
            for (size_t j = 0; j < BLOCK; j++) {
                const float v = acc[j] + 0.5f;
                o[i + j] = (uint8_t)(int)(v < 255 ? v : 255);
            }
        } else {
            for (size_t j = 0; i + j < n; j++) {
                const float v = acc[j] + 0.5f;
                o[i + j] = (uint8_t)(int)(v < 255 ? v : 255);
            }
        }
    }
}

/* Gaussian blur of rgb (w x h) in place, edges clamped; scratch holds blur_bytes(w, r).
 * Each input row is blurred along x into a ring of 2r + 1 float rows when the output
 * first needs it; output row y blends ring rows y - r .. y + r. Row y is overwritten only
 * after rows up to y + r have been read. The kernel is symmetric: pairs of taps share a
 * multiply. Rows are padded to whole blocks so that every loop vectorises. */
HOT static void blur(uint8_t *rgb, uint32_t w, uint32_t h, float sigma, void *scratch)
{
    const uint32_t r = blur_radius(sigma);
    const size_t n = (size_t)w * 3, row = block_round(n), taps = 2 * (size_t)r + 1, pad = 3 * (size_t)r;
    float kernel[MAX_RADIUS + 1]; /* kernel[k]: the weight at distance k */
    double total = 0;
    for (uint32_t k = 0; k <= r; k++) {
        kernel[k] = (float)exp(-(double)k * k / (2.0 * (double)sigma * sigma));
        total += k ? 2.0 * kernel[k] : kernel[k];
    }
    for (uint32_t k = 0; k <= r; k++)
        kernel[k] = (float)(kernel[k] / total);

    float *body = (float *)scratch + pad;
    float *ring = (float *)(void *)((char *)scratch + align_bytes((row + 2 * pad) * sizeof(float)));
    const float *rows[2 * MAX_RADIUS + 1];
    uint32_t next = 0; /* the next input row to blur along x */
    for (uint32_t y = 0; y < h; y++) {
        for (const uint32_t last = y + r < h ? y + r : h - 1; next <= last; next++) {
            blur_load(body, rgb + (size_t)next * n, n, pad, row);
            blur_x(ring + (next % taps) * row, body, kernel, r, row);
        }
        rows[0] = ring + (y % taps) * row;
        for (uint32_t k = 1; k <= r; k++) {
            const uint32_t up = y >= k ? y - k : 0, down = y + k < h ? y + k : h - 1;
            rows[2 * k - 1] = ring + (up % taps) * row;
            rows[2 * k] = ring + (down % taps) * row;
        }
        blur_y(rgb + (size_t)y * n, rows, kernel, r, n);
    }
}

/* ------------------------------------------------------------------ entry points */

int tb_augment_apply(const struct tb_augment *a, const struct tb_augment_draw *d, const struct tb_sample *in,
                     struct tb_sample *out, struct tb_augment_work *w, struct tb_err *err)
{
    int rc = tb_sample_reserve(out, a->crop_w, a->crop_h, err);
    if (rc)
        return rc;
    const bool blurred = d->blur && d->sigma > 0;
    size_t need = resample_bytes(a->crop_w);
    if (blurred && blur_bytes(a->crop_w, blur_radius(d->sigma)) > need)
        need = blur_bytes(a->crop_w, blur_radius(d->sigma));
    if ((rc = work_reserve(w, need, err)) != TB_OK)
        return rc;

    const uint32_t sw = scaled_size(in->width, d->scale), sh = scaled_size(in->height, d->scale);
    resample(in, sw, sh, d->off_x, d->off_y, d->flip, out, w->buf);
    tb_augment_jitter(d, out->image, (size_t)out->width * out->height);
    if (blurred)
        blur(out->image, out->width, out->height, d->sigma, w->buf);
    return TB_OK;
}

int tb_augment_resize(const struct tb_sample *in, uint32_t w, uint32_t h, struct tb_sample *out, struct tb_err *err)
{
    int rc = tb_sample_reserve(out, w, h, err);
    if (rc)
        return rc;
    if (w == in->width && h == in->height) {
        memcpy(out->image, in->image, (size_t)w * h * 3);
        memcpy(out->label, in->label, (size_t)w * h);
        return TB_OK;
    }
    struct tb_augment_work work = { NULL, 0 };
    if ((rc = work_reserve(&work, resample_bytes(w), err)) != TB_OK)
        return tb_err_prefix(err, "resizing a %ux%u sample to %ux%u", in->width, in->height, w, h);
    resample(in, w, h, 0, 0, false, out, work.buf);
    tb_augment_work_free(&work);
    return TB_OK;
}
