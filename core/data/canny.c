/* core/data/canny.c: Canny edges of an 8-bit RGB image (trainbig/edges.h), G-SCNN's "image gradients" input.
 *
 * The reference computes cv2.Canny(image, 10, 100) per image. This follows OpenCV's
 * definition (imgproc/canny.cpp, default aperture 3 and L1 gradient) step by step:
 *   1. 3x3 Sobel derivatives dx, dy of each channel, borders replicated;
 *   2. per pixel, the channel with the largest |dx| + |dy| (the first one on ties) gives
 *      the magnitude and the direction;
 *   3. non-maximum suppression along the gradient, quantised to 0, 45, 90 and 135 degrees
 *      with OpenCV's fixed-point tan(22.5) test (a pixel must beat one neighbour strictly
 *      and the other at least equally, both strictly on diagonals); pixels outside the
 *      image have magnitude 0;
 *   4. hysteresis: pixels above `high` are edges, and so is every pixel above `low`
 *      8-connected to an edge through such pixels.
 * The output is 255 on edges and 0 elsewhere. The reference casts its normalised float
 * tensor to uint8 before Canny (a known bug): trainbig runs Canny on the original 8-bit
 * image. */
#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <trainbig/edges.h>

enum { SHIFT = 15, TG22 = 13573 }; /* round(tan(22.5 degrees) * 2^15) */

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

void tb_canny_work_free(struct tb_canny_work *w)
{
    free(w->mag), free(w->dx), free(w->dy), free(w->state), free(w->stack), free(w->row);
    memset(w, 0, sizeof *w);
}

/* Makes w hold an image of width x height (the borders of mag and state included). */
static int work_reserve(struct tb_canny_work *w, int width, int height)
{
    const size_t n = ((size_t)width + 2) * ((size_t)height + 2), row = 6 * (size_t)width;
    if (n <= w->pixels && row <= w->row_elems)
        return 0;
    tb_canny_work_free(w);
    w->mag = malloc(n * sizeof *w->mag);
    w->dx = malloc(n * sizeof *w->dx);
    w->dy = malloc(n * sizeof *w->dy);
    w->state = malloc(n);
    w->stack = malloc(n * sizeof *w->stack);
    w->row = malloc(row * sizeof *w->row);
    if (!w->mag || !w->dx || !w->dy || !w->state || !w->stack || !w->row || n > UINT32_MAX) {
        tb_canny_work_free(w);
        return -1;
    }
    w->pixels = n;
    w->row_elems = row;
    return 0;
}

enum { BLOCK = 16 };

/* The 3x3 Sobel derivatives of every channel of a row, elements [from, to) of the
 * interleaved row (pixels with both horizontal neighbours): r0, r1, r2 are the rows above,
 * at and below it. Whole blocks where it can, which the compiler vectorises. */
static void sobel_span(int16_t *restrict gx, int16_t *restrict gy, const uint8_t *restrict r0,
                       const uint8_t *restrict r1, const uint8_t *restrict r2, size_t from, size_t to)
{
    size_t e = from;
    for (; e + BLOCK <= to; e += BLOCK)
        for (size_t j = 0; j < BLOCK; j++) {
            const size_t k = e + j;
            gx[k] = (int16_t)((r0[k + 3] - r0[k - 3]) + 2 * (r1[k + 3] - r1[k - 3]) + (r2[k + 3] - r2[k - 3]));
            gy[k] = (int16_t)((r2[k - 3] + 2 * r2[k] + r2[k + 3]) - (r0[k - 3] + 2 * r0[k] + r0[k + 3]));
        }
    for (; e < to; e++) {
        gx[e] = (int16_t)((r0[e + 3] - r0[e - 3]) + 2 * (r1[e + 3] - r1[e - 3]) + (r2[e + 3] - r2[e - 3]));
        gy[e] = (int16_t)((r2[e - 3] + 2 * r2[e] + r2[e + 3]) - (r0[e - 3] + 2 * r0[e] + r0[e + 3]));
    }
}

/* The same for one pixel x, its neighbours clamped to the row (the first and last). */
static void sobel_pixel(int16_t *gx, int16_t *gy, const uint8_t *r0, const uint8_t *r1, const uint8_t *r2, int x,
                        int width)
{
    const int xl = clampi(x - 1, 0, width - 1) * 3, xc = x * 3, xr = clampi(x + 1, 0, width - 1) * 3;
    for (int c = 0; c < 3; c++) {
        gx[xc + c] = (int16_t)((r0[xr + c] - r0[xl + c]) + 2 * (r1[xr + c] - r1[xl + c]) + (r2[xr + c] - r2[xl + c]));
        gy[xc + c] = (int16_t)((r2[xl + c] + 2 * r2[xc + c] + r2[xr + c]) - (r0[xl + c] + 2 * r0[xc + c] + r0[xr + c]));
    }
}

struct gradient {
    int32_t m; /* |dx| + |dy| */
    int16_t dx, dy;
};

/* The strongest channel of one pixel, the first on ties, from its channels' derivatives. */
static inline struct gradient strongest(const int16_t ex[3], const int16_t ey[3])
{
    const int m0 = abs(ex[0]) + abs(ey[0]), m1 = abs(ex[1]) + abs(ey[1]), m2 = abs(ex[2]) + abs(ey[2]);
    const bool first = m1 > m0, second = m2 > (first ? m1 : m0);
    const struct gradient g01 = { first ? m1 : m0, first ? ex[1] : ex[0], first ? ey[1] : ey[0] };
    const struct gradient g2 = { m2, ex[2], ey[2] };
    return second ? g2 : g01;
}

/* strongest() over a row of w pixels, in selects rather than branches (on a noisy image
 * the winner is unpredictable). */
static void strongest_row(int32_t *restrict m, int16_t *restrict xs, int16_t *restrict ys, const int16_t *restrict gx,
                          const int16_t *restrict gy, size_t w)
{
    for (size_t x = 0; x < w; x++) {
        const int16_t ex[3] = { gx[3 * x], gx[3 * x + 1], gx[3 * x + 2] };
        const int16_t ey[3] = { gy[3 * x], gy[3 * x + 1], gy[3 * x + 2] };
        const struct gradient g = strongest(ex, ey);
        m[x] = g.m;
        xs[x] = g.dx;
        ys[x] = g.dy;
    }
}

/* One pixel's non-maximum suppression: 0 not an edge, 1 a candidate (above low, a local
 * maximum), 2 an edge (above high too). n holds its magnitude and its 8 neighbours' (row
 * by row: n[4] is its own), xs and ys its gradient. Near horizontal gradients compare the
 * left and right neighbours, near vertical ones those above and below, the rest the
 * diagonal neighbours along the gradient; a pixel must beat the first strictly and the
 * second at least equally, both strictly on diagonals. All in selects between values (no
 * branch, no computed address), so that a row of them vectorises. In 32 bits: |dx| and
 * |dy| are at most 1020, so |dy| << 15 and |dx| (tan 22.5 + 2) << 15 fit. */
static inline uint8_t nms_pixel(const int32_t n[9], int xs, int ys, int low, int high)
{
    const int32_t ax = abs(xs), ay = abs(ys) << SHIFT;
    const int32_t tg22x = ax * TG22, tg67x = tg22x + (ax << (SHIFT + 1));
    const bool horizontal = ay < tg22x;
    const bool vertical = ay > tg67x;
    const bool opposite = (xs ^ ys) < 0; /* the gradient runs up-right or down-left */
    const int32_t v = n[4];
    const int32_t diag_before = opposite ? n[2] : n[0], diag_after = opposite ? n[6] : n[8];
    const int32_t before = horizontal ? n[3] : vertical ? n[1] : diag_before;
    const int32_t after = horizontal ? n[5] : vertical ? n[7] : diag_after;
    const int diagonal = !horizontal & !vertical; /* both comparisons strict */
    const int maximum = (v > low) & (v > before) & ((v > after) | ((v == after) & !diagonal));
    return (uint8_t)(maximum + (maximum & (v > high)));
}

/* nms_pixel over a row of w pixels: up, mid and down point at the magnitudes of the rows
 * above, at and below it (bordered: index -1 and w exist), xr and yr at its gradients.
 * Whole blocks where it can, which the compiler vectorises. */
static void nms_row(uint8_t *restrict state, const int32_t *restrict up, const int32_t *restrict mid,
                    const int32_t *restrict down, const int16_t *restrict xr, const int16_t *restrict yr, size_t w,
                    int low, int high)
{
    size_t x = 0;
    for (; x + BLOCK <= w; x += BLOCK)
        for (size_t j = 0; j < BLOCK; j++) {
            const size_t k = x + j;
            const int32_t n[9] = { up[k - 1],  up[k],       up[k + 1], mid[k - 1], mid[k],
                                   mid[k + 1], down[k - 1], down[k],   down[k + 1] };
            state[k] = nms_pixel(n, xr[k], yr[k], low, high);
        }
    for (; x < w; x++) {
        const int32_t n[9] = { up[x - 1],  up[x],       up[x + 1], mid[x - 1], mid[x],
                               mid[x + 1], down[x - 1], down[x],   down[x + 1] };
        state[x] = nms_pixel(n, xr[x], yr[x], low, high);
    }
}

int tb_canny(const uint8_t *rgb, int width, int height, int low, int high, uint8_t *out, struct tb_canny_work *w)
{
    if (work_reserve(w, width, height) != 0)
        return -1;
    /* mag and state have a border of one pixel (magnitude 0, never an edge) so that
     * neighbours never need a test; dx and dy have none. */
    const size_t mw = (size_t)width + 2, bordered = mw * ((size_t)height + 2);
    int32_t *mag = w->mag;
    int16_t *dx = w->dx, *dy = w->dy, *gx = w->row, *gy = w->row + 3 * (size_t)width;
    /* state: 0 not an edge, 1 candidate (above low, a local maximum), 2 edge */
    uint8_t *state = w->state;
    uint32_t *stack = w->stack;
    memset(mag, 0, mw * sizeof *mag);
    memset(mag + bordered - mw, 0, mw * sizeof *mag);
    memset(state, 0, bordered);
    if (low > high) {
        int t = low;
        low = high;
        high = t;
    }

    for (int y = 0; y < height; y++) {
        const uint8_t *r0 = rgb + (size_t)clampi(y - 1, 0, height - 1) * width * 3;
        const uint8_t *r1 = rgb + (size_t)y * width * 3;
        const uint8_t *r2 = rgb + (size_t)clampi(y + 1, 0, height - 1) * width * 3;
        if (width > 2)
            sobel_span(gx, gy, r0, r1, r2, 3, 3 * (size_t)width - 3);
        sobel_pixel(gx, gy, r0, r1, r2, 0, width);
        if (width > 1)
            sobel_pixel(gx, gy, r0, r1, r2, width - 1, width);
        int32_t *m = mag + ((size_t)y + 1) * mw;
        m[0] = m[mw - 1] = 0;
        strongest_row(m + 1, dx + (size_t)y * width, dy + (size_t)y * width, gx, gy, (size_t)width);
    }

    /* Non-maximum suppression a row at a time, then the row's strong pixels onto the
     * stack (with a select: on a noisy image whether a pixel is strong is unpredictable). */
    size_t top = 0;
    for (int y = 0; y < height; y++) {
        const size_t i0 = ((size_t)y + 1) * mw + 1;
        nms_row(state + i0, mag + i0 - mw, mag + i0, mag + i0 + mw, dx + (size_t)y * width, dy + (size_t)y * width,
                (size_t)width, low, high);
        for (size_t x = 0; x < (size_t)width; x++) {
            stack[top] = (uint32_t)(i0 + x); /* kept only when strong */
            top += state[i0 + x] == 2;
        }
    }

    /* hysteresis: the border is never a candidate, so neighbours need no test */
    const ptrdiff_t around[8] = { -(ptrdiff_t)mw - 1, -(ptrdiff_t)mw, -(ptrdiff_t)mw + 1, -1, 1,
                                  (ptrdiff_t)mw - 1,  (ptrdiff_t)mw,  (ptrdiff_t)mw + 1 };
    while (top) {
        const size_t i = stack[--top];
        for (int k = 0; k < 8; k++) {
            const size_t j = (size_t)((ptrdiff_t)i + around[k]);
            const bool grows = state[j] == 1;
            state[j] = (uint8_t)(state[j] + grows);
            stack[top] = (uint32_t)j; /* kept only when it grows */
            top += grows;
        }
    }
    for (int y = 0; y < height; y++) {
        const uint8_t *s = state + ((size_t)y + 1) * mw + 1;
        uint8_t *o = out + (size_t)y * width;
        for (int x = 0; x < width; x++)
            o[x] = s[x] == 2 ? 255 : 0;
    }
    return 0;
}
