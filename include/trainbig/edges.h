/* trainbig/edges.h: edge maps a model may compute from a sample in its prepare()
 * (trainbig/model.h), as G-SCNN does: Canny edges of the image, and the boundary targets
 * of the label map. */
#ifndef TRAINBIG_EDGES_H
#define TRAINBIG_EDGES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Canny's working buffers, kept by the caller from image to image (a fresh multi-megabyte
 * allocation per image costs milliseconds in page faults); zero-initialise, then
 * tb_canny_work_free. One per thread. */
struct tb_canny_work {
    size_t pixels; /* what the buffers hold */
    int32_t *mag;  /* (height + 2) x (width + 2), zero border */
    int16_t *dx, *dy;
    uint8_t *state; /* (height + 2) x (width + 2), zero border */
    uint32_t *stack;
    size_t row_elems; /* what row holds */
    int16_t *row;     /* one row's derivatives of each channel: 2 x 3 x width */
};
void tb_canny_work_free(struct tb_canny_work *w);

/* Canny edges of rgb ([height][width][3]) into out ([height][width]): 255 on edges, 0
 * elsewhere, with hysteresis thresholds low and high on the L1 gradient magnitude of 3x3
 * Sobel derivatives, taken per pixel from the channel with the largest magnitude (OpenCV's
 * definition for colour images). Returns 0, or -1 when out of memory (out untouched). */
int tb_canny(const uint8_t *rgb, int width, int height, int low, int high, uint8_t *out, struct tb_canny_work *w);

/* Boundary targets of labels ([height][width]) into out: ignore where the label is ignore,
 * otherwise 1 when a pixel within Euclidean distance `radius` has another label that is
 * not ignore, 0 when none has. */
void tb_label_edges(const uint8_t *labels, int width, int height, int radius, uint8_t ignore, uint8_t *out);

#ifdef __cplusplus
}
#endif
#endif
