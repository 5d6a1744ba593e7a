/* lib/label_edges.c: the edge targets of G-SCNN's edge loss, computed from the label map.
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

#include <stddef.h>
#include <stdint.h>

#include "lib/canny_internal.h"

void tb_label_edges(const uint8_t *labels, int width, int height, int radius, uint8_t ignore, uint8_t *out)
{
    for (int y = 0; y < height; y++)
        for (int x = 0; x < width; x++) {
            const size_t i = (size_t)y * width + x;
            const uint8_t l = labels[i];
            if (l == ignore) {
                out[i] = ignore;
                continue;
            }
            uint8_t edge = 0;
            for (int dy = -radius; dy <= radius && !edge; dy++) {
                const int ny = y + dy;
                if (ny < 0 || ny >= height)
                    continue;
                for (int dx = -radius; dx <= radius; dx++) {
                    const int nx = x + dx;
                    if (nx < 0 || nx >= width || dx * dx + dy * dy > radius * radius)
                        continue;
                    const uint8_t m = labels[(size_t)ny * width + nx];
                    if (m != l && m != ignore) {
                        edge = 1;
                        break;
                    }
                }
            }
            out[i] = edge;
        }
}
