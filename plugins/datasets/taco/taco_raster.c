/* datasets/taco: polygon scanline filling and the class palette. */
#include <math.h>
#include <stdlib.h>

#include "taco.h"

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* v clamped to [lo, hi]. */
static double clamp(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

void taco_fill_polygon(uint8_t *label, uint32_t w, uint32_t h, const double *xy, size_t npoints, uint8_t value,
                       double *xs)
{
    if (npoints < 3 || w == 0 || h == 0)
        return;
    double ymin = xy[1], ymax = xy[1];
    for (size_t i = 1; i < npoints; i++) {
        ymin = fmin(ymin, xy[2 * i + 1]);
        ymax = fmax(ymax, xy[2 * i + 1]);
    }
    /* Rows whose centre lies in [ymin, ymax): y >= ymin - 0.5 and y < ymax - 0.5. */
    const long y0 = (long)clamp(ceil(ymin - 0.5), 0, h), y1 = (long)clamp(ceil(ymax - 0.5), 0, h);
    for (long y = y0; y < y1; y++) {
        const double yc = y + 0.5;
        size_t k = 0;
        /* Edges crossing the line through the centres, each counted once: a vertex on
         * the line belongs to the edges that leave it upwards (half-open in y). */
        for (size_t i = 0, j = npoints - 1; i < npoints; j = i++) {
            const double xi = xy[2 * i], yi = xy[2 * i + 1], xj = xy[2 * j], yj = xy[2 * j + 1];
            if ((yi <= yc) != (yj <= yc))
                xs[k++] = xi + (yc - yi) * (xj - xi) / (yj - yi);
        }
        qsort(xs, k, sizeof *xs, cmp_double);
        /* Even-odd: inside between crossings 0-1, 2-3, ...; the centre x + 0.5 must lie
         * in [a, b), that is x in [ceil(a - 0.5), ceil(b - 0.5)). */
        uint8_t *row = label + (size_t)y * w;
        for (size_t m = 0; m + 1 < k; m += 2) {
            const long a = (long)clamp(ceil(xs[m] - 0.5), 0, w), b = (long)clamp(ceil(xs[m + 1] - 0.5), 0, w);
            for (long x = a; x < b; x++)
                row[x] = value;
        }
    }
}

void taco_palette(size_t k, uint8_t rgb[3])
{
    if (k == 0) {
        rgb[0] = rgb[1] = rgb[2] = 0;
        return;
    }
    /* Hues a golden angle apart, three saturation and two value levels in turn. */
    const double hue = fmod((double)(k - 1) * 0.6180339887498949, 1.0) * 6.0;
    const double sat = 0.95 - 0.25 * (double)((k - 1) % 3), val = 0.95 - 0.3 * (double)(((k - 1) / 3) % 2);
    const int sector = (int)hue;
    const double f = hue - sector;
    const double p = val * (1 - sat), q = val * (1 - sat * f), t = val * (1 - sat * (1 - f));
    double r, g, b;
    switch (sector) {
    case 0:
        r = val, g = t, b = p;
        break;
    case 1:
        r = q, g = val, b = p;
        break;
    case 2:
        r = p, g = val, b = t;
        break;
    case 3:
        r = p, g = q, b = val;
        break;
    case 4:
        r = t, g = p, b = val;
        break;
    default:
        r = val, g = p, b = q;
        break;
    }
    rgb[0] = (uint8_t)lround(r * 255);
    rgb[1] = (uint8_t)lround(g * 255);
    rgb[2] = (uint8_t)lround(b * 255);
}
