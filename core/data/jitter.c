/* core/data/jitter.c: the colour jitter of the training augmentation (augment.h):
 * brightness, contrast, saturation and hue in the drawn order, as torchvision's
 * ColorJitter on the 8-bit image. */
#include "config.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/data/augment.h"
#include "core/data/hot_internal.h"

/* The jitter runs on CHUNK pixels at a time held as three float arrays, each step a loop
 * of CHUNK iterations whose conditionals are selects between computed values, so that
 * the compiler turns it into vector code. Values are clamped to [0, 255] after each step,
 * as torchvision does on [0, 1] images, and rounded to 8 bits at the end. */
enum { CHUNK = 256 };

struct chunk {
    float r[CHUNK], g[CHUNK], b[CHUNK];
};

INLINE float clamp255(float v)
{
    v = v > 0 ? v : 0;
    return v < 255 ? v : 255;
}

INLINE void chunk_load(struct chunk *restrict c, const uint8_t *restrict px)
{
    for (size_t i = 0; i < CHUNK; i++) {
        c->r[i] = px[3 * i];
        c->g[i] = px[3 * i + 1];
        c->b[i] = px[3 * i + 2];
    }
}

INLINE void chunk_store(const struct chunk *restrict c, uint8_t *restrict px)
{
    for (size_t i = 0; i < CHUNK; i++) {
        px[3 * i] = (uint8_t)(int)(c->r[i] + 0.5f);
        px[3 * i + 1] = (uint8_t)(int)(c->g[i] + 0.5f);
        px[3 * i + 2] = (uint8_t)(int)(c->b[i] + 0.5f);
    }
}

/* v * f */
INLINE void chunk_brightness(struct chunk *restrict c, float f)
{
    for (size_t i = 0; i < CHUNK; i++) {
        c->r[i] = clamp255(c->r[i] * f);
        c->g[i] = clamp255(c->g[i] * f);
        c->b[i] = clamp255(c->b[i] * f);
    }
}

/* Blend with the image's mean grey: mean + f (v - mean). */
INLINE void chunk_contrast(struct chunk *restrict c, float f, float mean)
{
    const float k = mean - f * mean;
    for (size_t i = 0; i < CHUNK; i++) {
        c->r[i] = clamp255(k + f * c->r[i]);
        c->g[i] = clamp255(k + f * c->g[i]);
        c->b[i] = clamp255(k + f * c->b[i]);
    }
}

INLINE float luma(float r, float g, float b)
{
    return 0.299f * r + 0.587f * g + 0.114f * b;
}

/* Blend with the pixel's own grey: l + f (v - l). */
INLINE void chunk_saturation(struct chunk *restrict c, float f)
{
    for (size_t i = 0; i < CHUNK; i++) {
        const float l = luma(c->r[i], c->g[i], c->b[i]), k = l - f * l;
        c->r[i] = clamp255(k + f * c->r[i]);
        c->g[i] = clamp255(k + f * c->g[i]);
        c->b[i] = clamp255(k + f * c->b[i]);
    }
}

/* One channel of HSV's inverse (n = 5, 3, 1 for R, G, B) in units of the chroma c:
 * hi - clamp(min(q, 4c - q), 0, c) with q = (nc + p) mod 6c, q < 12c here. */
INLINE float hue_channel(float q, float hi, float c, float six)
{
    q = q + (q >= six ? -six : 0.0f);
    float t = 4 * c - q;
    t = q < t ? q : t;
    t = t > 0 ? t : 0;
    t = t < c ? t : c;
    return hi - t;
}

/* Rotates the HSV hue by shift6 / 6 turns (shift6 in [0, 6)), keeping value (the largest
 * channel) and chroma c (largest minus smallest). The hue is measured along the RGB
 * hexagon in units of c, which needs no division: p in [0, 6c) is G - B, 2c + B - R or
 * 4c + R - G as R, G or B is largest (plus 6c where G - B < 0). Grey pixels (c = 0) come
 * out unchanged. Wrapping adds a selected -6c or 0 rather than subtracting a selected
 * 6c or 0: x - 0 folds to x, which turns the select into a branch and stops the
 * vectoriser. */
INLINE void chunk_hue(struct chunk *restrict c, float shift6)
{
    for (size_t i = 0; i < CHUNK; i++) {
        const float r = c->r[i], g = c->g[i], b = c->b[i];
        float hi = r > g ? r : g, lo = r < g ? r : g;
        hi = hi > b ? hi : b;
        lo = lo < b ? lo : b;
        const float ch = hi - lo, six = 6 * ch;
        /* p = sector * c + u - v: the selects pick values, not expressions */
        const float sector = r == hi ? 0.0f : g == hi ? 2.0f : 4.0f;
        const float u = r == hi ? g : g == hi ? b : r;
        const float v = r == hi ? b : g == hi ? r : g;
        float p = sector * ch + (u - v);
        p = p + (p < 0 ? six : 0.0f);
        float q = p + shift6 * ch; /* [0, 12c) */
        q = q + (q >= six ? -six : 0.0f);
        c->r[i] = hue_channel(q + 5 * ch, hi, ch, six);
        c->g[i] = hue_channel(q + 3 * ch, hi, ch, six);
        c->b[i] = hue_channel(q + ch, hi, ch, six);
    }
}

/* Adds the chunk's grey levels to sums[i % BLOCK] (lane by lane, so the order of the
 * additions does not depend on how the loop is vectorised). */
INLINE void chunk_luma(const struct chunk *restrict c, float *restrict sums)
{
    for (size_t i = 0; i < CHUNK; i += BLOCK)
        for (size_t j = 0; j < BLOCK; j++)
            sums[j] += luma(c->r[i + j], c->g[i + j], c->b[i + j]);
}

enum { BRIGHTNESS, CONTRAST, SATURATION, HUE };

/* Steps steps[0..n) on every pixel (mean: the mean grey, for contrast), in chunks. Where
 * luma_mean is not NULL it receives the mean grey of the result. The last, partial chunk
 * goes through a copy padded with black. */
HOT static void jitter_pass(const struct tb_augment_draw *d, const int *steps, int n, float mean, uint8_t *rgb,
                            size_t pixels, float *luma_mean)
{
    const float shift = d->hue - floorf(d->hue), shift6 = shift < 1 ? 6 * shift : 0;
    float sums[BLOCK] = { 0 };
    struct chunk c;
    uint8_t tail[3 * CHUNK];
    for (size_t start = 0; start < pixels; start += CHUNK) {
        const size_t m = pixels - start < CHUNK ? pixels - start : CHUNK;
        uint8_t *px = rgb + 3 * start;
        if (m < CHUNK) {
            memset(tail, 0, sizeof tail);
            memcpy(tail, px, 3 * m);
            px = tail;
        }
        chunk_load(&c, px);
        for (int s = 0; s < n; s++) {
            switch (steps[s]) {
            case BRIGHTNESS:
                chunk_brightness(&c, d->brightness);
                break;
            case CONTRAST:
                chunk_contrast(&c, d->contrast, mean);
                break;
            case SATURATION:
                chunk_saturation(&c, d->saturation);
                break;
            default:
                chunk_hue(&c, shift6);
                break;
            }
        }
        if (luma_mean) {
            if (m < CHUNK) /* the padding's grey is not the image's */
                for (size_t i = m; i < CHUNK; i++)
                    c.r[i] = c.g[i] = c.b[i] = 0;
            chunk_luma(&c, sums);
        }
        chunk_store(&c, px);
        if (m < CHUNK)
            memcpy(rgb + 3 * start, tail, 3 * m);
    }
    if (luma_mean) {
        double total = 0;
        for (size_t j = 0; j < BLOCK; j++)
            total += sums[j];
        *luma_mean = (float)(total / (double)pixels);
    }
}

/* The mean grey of an 8-bit image (luma is linear: the grey of the channel means). The
 * bytes are summed in 48 lanes (16 pixels), exactly in 32 bits for 2^20 pixels at a time. */
HOT static float mean_grey(const uint8_t *restrict rgb, size_t pixels)
{
    enum { LANES = 3 * BLOCK };
    const size_t bytes = 3 * pixels, step = (size_t)LANES << 16;
    uint64_t sum[3] = { 0, 0, 0 };
    size_t i = 0;
    while (i + LANES <= bytes) {
        uint32_t acc[LANES] = { 0 };
        const size_t end = bytes - i > step ? i + step : bytes;
        for (; i + LANES <= end; i += LANES)
            for (size_t j = 0; j < LANES; j++)
                acc[j] += rgb[i + j];
        for (size_t j = 0; j < LANES; j++)
            sum[j % 3] += acc[j];
    }
    for (; i < bytes; i++)
        sum[i % 3] += rgb[i];
    return (float)((0.299 * (double)sum[0] + 0.587 * (double)sum[1] + 0.114 * (double)sum[2]) / (double)pixels);
}

/* The steps in d->order, skipping neutral ones, in at most two passes over the image:
 * contrast needs the mean grey of the image as the steps before it leave it, so a first
 * pass runs those steps and measures it (its result rounded to 8 bits, as a PIL image
 * between enhancers), and a second runs contrast and the rest. */
void tb_augment_jitter(const struct tb_augment_draw *d, uint8_t *rgb, size_t pixels)
{
    int steps[4], n = 0, split = -1;
    for (int i = 0; i < 4; i++) {
        const int s = d->order[i];
        const bool active = s == BRIGHTNESS   ? d->brightness != 1
                            : s == CONTRAST   ? d->contrast != 1
                            : s == SATURATION ? d->saturation != 1
                            : s == HUE        ? d->hue != 0
                                              : false;
        if (active) {
            if (s == CONTRAST)
                split = n;
            steps[n++] = s;
        }
    }
    if (n == 0)
        return;
    float mean = 0;
    if (split == 0)
        mean = mean_grey(rgb, pixels);
    else if (split > 0)
        jitter_pass(d, steps, split, 0, rgb, pixels, &mean);
    const int first = split > 0 ? split : 0;
    jitter_pass(d, steps + first, n - first, mean, rgb, pixels, NULL);
}
