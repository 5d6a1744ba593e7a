/* core/data/label_edges.c: boundary targets of a label map (trainbig/edges.h), G-SCNN's edge targets.
 *
 * The reference (GSCNN edge_utils.onehot_to_binary_edges, radius 2) marks, for each class,
 * the pixels within distance 2 of that class's boundary, using a Euclidean distance
 * transform of the one-hot mask. Here the same rule is stated per pixel: a labelled pixel
 * is an edge when some pixel within Euclidean distance `radius` carries another label.
 * Two departures, both deliberate: a change to or from the ignore label is not a class
 * change (ignored pixels are ignored by the loss too, and get the ignore value here), and
 * the image border is not an edge (the reference pads each mask with zeros, so every
 * class touching the border gets a 2-pixel edge frame that is not in the scene). */
#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <trainbig/edges.h>

/* The rule at one pixel, by looking at its whole disc. */
static uint8_t edge_at(const uint8_t *labels, int width, int height, int x, int y, int radius, uint8_t ignore)
{
    const uint8_t l = labels[(size_t)y * width + x];
    for (int dy = -radius; dy <= radius; dy++) {
        const int ny = y + dy;
        if (ny < 0 || ny >= height)
            continue;
        for (int dx = -radius; dx <= radius; dx++) {
            const int nx = x + dx;
            if (nx < 0 || nx >= width || dx * dx + dy * dy > radius * radius)
                continue;
            const uint8_t m = labels[(size_t)ny * width + nx];
            if (m != l && m != ignore)
                return 1;
        }
    }
    return 0;
}

enum { BLOCK = 32 };

/* same[i] &= (row[i] == centre[i]) for i in [0, n), in whole blocks where it can (which
 * the compiler vectorises). */
static void and_equal(uint8_t *restrict same, const uint8_t *restrict row, const uint8_t *restrict centre, size_t n)
{
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (size_t j = 0; j < BLOCK; j++)
            same[i + j] &= row[i + j] == centre[i + j];
    for (; i < n; i++)
        same[i] &= row[i] == centre[i];
}

/* Most pixels lie inside a region: every pixel of the square around them (the image's
 * part of it) has their label, so no pixel of the disc can differ. That test is a few
 * byte compares per pixel over whole rows; the disc is looked at only where it fails
 * and at the left and right borders. Each output row holds the test's result until it
 * is final. */
void tb_label_edges(const uint8_t *labels, int width, int height, int radius, uint8_t ignore, uint8_t *out)
{
    if (radius < 0)
        radius = 0;
    for (int y = 0; y < height; y++) {
        const uint8_t *centre = labels + (size_t)y * width;
        uint8_t *same = out + (size_t)y * width;
        memset(same, 1, (size_t)width);
        if (width > 2 * radius) {
            const size_t n = (size_t)(width - 2 * radius);
            for (int dy = -radius; dy <= radius; dy++) {
                const int ny = y + dy;
                if (ny < 0 || ny >= height)
                    continue;
                for (int dx = -radius; dx <= radius; dx++)
                    and_equal(same + radius, labels + (size_t)ny * width + radius + dx, centre + radius, n);
            }
        }
        for (int x = 0; x < width; x++) {
            const bool border = x < radius || x >= width - radius;
            if (centre[x] == ignore)
                same[x] = ignore;
            else
                same[x] = !border && same[x] ? 0 : edge_at(labels, width, height, x, y, radius, ignore);
        }
    }
}
