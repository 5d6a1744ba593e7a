/* lib/canny.c: Canny edges of an 8-bit RGB image, G-SCNN's "image gradients" input.
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

#include "lib/canny_internal.h"

enum { SHIFT = 15, TG22 = 13573 }; /* round(tan(22.5 degrees) * 2^15) */

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

void tb_canny_work_free(struct tb_canny_work *w)
{
    free(w->mag), free(w->dx), free(w->dy), free(w->state), free(w->stack);
    memset(w, 0, sizeof *w);
}

/* Makes w hold an image of width x height (the border of mag included). */
static int work_reserve(struct tb_canny_work *w, int width, int height)
{
    const size_t n = ((size_t)width + 2) * ((size_t)height + 2);
    if (n <= w->pixels)
        return 0;
    tb_canny_work_free(w);
    w->mag = malloc(n * sizeof *w->mag);
    w->dx = malloc(n * sizeof *w->dx);
    w->dy = malloc(n * sizeof *w->dy);
    w->state = malloc(n);
    w->stack = malloc(n * sizeof *w->stack);
    if (!w->mag || !w->dx || !w->dy || !w->state || !w->stack || n > UINT32_MAX) {
        tb_canny_work_free(w);
        return -1;
    }
    w->pixels = n;
    return 0;
}

int tb_canny(const uint8_t *rgb, int width, int height, int low, int high, uint8_t *out, struct tb_canny_work *w)
{
    if (work_reserve(w, width, height) != 0)
        return -1;
    const size_t n = (size_t)width * (size_t)height;
    /* mag has a zero border of one pixel so that neighbours never need a test. */
    const size_t mw = (size_t)width + 2;
    int32_t *mag = w->mag;
    int16_t *dx = w->dx, *dy = w->dy;
    /* state: 0 not an edge, 1 candidate (above low, a local maximum), 2 edge */
    uint8_t *state = w->state;
    uint32_t *stack = w->stack;
    memset(mag, 0, mw * ((size_t)height + 2) * sizeof *mag);
    memset(state, 0, n);
    if (low > high) {
        int t = low;
        low = high;
        high = t;
    }

    for (int y = 0; y < height; y++) {
        const uint8_t *r0 = rgb + (size_t)clampi(y - 1, 0, height - 1) * width * 3;
        const uint8_t *r1 = rgb + (size_t)y * width * 3;
        const uint8_t *r2 = rgb + (size_t)clampi(y + 1, 0, height - 1) * width * 3;
        for (int x = 0; x < width; x++) {
            const int xl = clampi(x - 1, 0, width - 1) * 3, xc = x * 3, xr = clampi(x + 1, 0, width - 1) * 3;
            int best = -1, bdx = 0, bdy = 0;
            for (int c = 0; c < 3; c++) {
                const int gx = (r0[xr + c] - r0[xl + c]) + 2 * (r1[xr + c] - r1[xl + c]) + (r2[xr + c] - r2[xl + c]);
                const int gy = (r2[xl + c] + 2 * r2[xc + c] + r2[xr + c]) - (r0[xl + c] + 2 * r0[xc + c] + r0[xr + c]);
                const int m = abs(gx) + abs(gy);
                if (m > best) {
                    best = m;
                    bdx = gx;
                    bdy = gy;
                }
            }
            const size_t i = (size_t)y * width + x;
            mag[((size_t)y + 1) * mw + (size_t)x + 1] = best;
            dx[i] = (int16_t)bdx;
            dy[i] = (int16_t)bdy;
        }
    }

    size_t top = 0;
    for (int y = 0; y < height; y++)
        for (int x = 0; x < width; x++) {
            const int32_t *m = mag + ((size_t)y + 1) * mw + (size_t)x + 1;
            const size_t i = (size_t)y * width + x;
            if (*m <= low)
                continue;
            const int xs = dx[i], ys = dy[i];
            const int64_t ax = abs(xs), ay = (int64_t)abs(ys) << SHIFT;
            const int64_t tg22x = ax * TG22, tg67x = tg22x + (ax << (SHIFT + 1));
            bool maximum;
            if (ay < tg22x) /* near horizontal gradient: compare left and right */
                maximum = *m > m[-1] && *m >= m[1];
            else if (ay > tg67x) /* near vertical: above and below */
                maximum = *m > m[-(ptrdiff_t)mw] && *m >= m[mw];
            else { /* diagonal: the neighbours along the gradient */
                const int s = (xs ^ ys) < 0 ? -1 : 1;
                maximum = *m > m[-(ptrdiff_t)mw - s] && *m > m[(ptrdiff_t)mw + s];
            }
            if (!maximum)
                continue;
            if (*m > high) {
                state[i] = 2;
                stack[top++] = (uint32_t)i;
            } else
                state[i] = 1;
        }

    while (top) {
        const size_t i = stack[--top];
        const int y = (int)(i / (size_t)width), x = (int)(i % (size_t)width);
        for (int ny = y - 1; ny <= y + 1; ny++)
            for (int nx = x - 1; nx <= x + 1; nx++) {
                if (ny < 0 || ny >= height || nx < 0 || nx >= width)
                    continue;
                const size_t j = (size_t)ny * width + nx;
                if (state[j] == 1) {
                    state[j] = 2;
                    stack[top++] = (uint32_t)j;
                }
            }
    }
    for (size_t i = 0; i < n; i++)
        out[i] = state[i] == 2 ? 255 : 0;
    return 0;
}
