/* core/data/augment.h: the reference's training augmentation and the validation
 * resize, on decoded 8-bit samples (augment.c). Normalisation, Canny edges and edge
 * targets come after, in batch.c, from the augmented 8-bit image.
 *
 * Training: random scale, then a crop window placed at random in the scaled image (the
 * image padded with the mean colour and the labels with 255 where the window leaves it),
 * horizontal flip, colour jitter, Gaussian blur. Scale, crop and flip are one resampling
 * pass over the output pixels only: the cost does not grow with the scale. */
#ifndef TB_CORE_AUGMENT_H
#define TB_CORE_AUGMENT_H

#include <stdbool.h>
#include <stdint.h>
#include <trainbig/dataset.h>
#include <trainbig/error.h>

/* The settings ([dataset] keys; see core_keys.c). */
struct tb_augment {
    uint32_t crop_w, crop_h;              /* output size of every training sample */
    float scale_min, scale_max;           /* scale uniform in [min, max]; 1, 1 = none */
    bool flip;                            /* horizontal flip with probability 1/2 */
    float jitter;                         /* brightness, contrast, saturation factors uniform in
                                           * [max(0, 1 - j), 1 + j], hue shift uniform in [-j, j]
                                           * turns (torchvision ColorJitter(j, j, j, j)); 0 = none */
    float blur_prob;                      /* Gaussian blur with this probability */
    float blur_sigma_min, blur_sigma_max; /* its sigma, uniform (pixels of the output) */
};

/* The random choices for one sample. Drawn by tb_augment_draw() from a seed; tests may
 * fill one by hand. */
struct tb_augment_draw {
    float scale;          /* output pixels per input pixel */
    int32_t off_x, off_y; /* top-left of the crop window in the scaled image; negative or
                           * past the edge where the window is larger: padding there */
    bool flip;
    float brightness, contrast, saturation, hue; /* factors 1 and hue 0 = unchanged */
    uint8_t order[4];                            /* jitter order: 0 brightness, 1 contrast, 2 saturation, 3 hue */
    bool blur;
    float sigma;
};

/* Draws the choices for an in_w x in_h sample from seed, in a fixed order, so the same
 * seed gives the same draw on any thread. The crop offset is uniform over the positions
 * that keep the window inside the scaled image, or (where the scaled image is smaller
 * than the window on a side) that keep the image inside the window. */
void tb_augment_draw(const struct tb_augment *a, uint64_t seed, uint32_t in_w, uint32_t in_h,
                     struct tb_augment_draw *d);

/* Per-thread scratch (the blur's float planes), reused from sample to sample; zero it
 * before first use, free with tb_augment_work_free(). */
struct tb_augment_work {
    float *buf;
    size_t capacity; /* floats */
};
void tb_augment_work_free(struct tb_augment_work *w);

/* out = in scaled by d->scale (bilinear with pixel centres for the image, nearest for
 * the labels), cropped to a->crop_w x a->crop_h at (off_x, off_y), flipped, jittered and
 * blurred as d says. Pixels outside the scaled image are tb_augment_pad_rgb / 255.
 * out's buffers are reused (tb_sample_reserve); in and out must differ. TB_ERR_NOMEM
 * (err filled) is the only failure. */
int tb_augment_apply(const struct tb_augment *a, const struct tb_augment_draw *d, const struct tb_sample *in,
                     struct tb_sample *out, struct tb_augment_work *w, struct tb_err *err);

/* out = in resized to w x h (bilinear image, nearest labels); a copy when the sizes are
 * equal. For validation at a fixed size. */
int tb_augment_resize(const struct tb_sample *in, uint32_t w, uint32_t h, struct tb_sample *out, struct tb_err *err);

/* The padding colour: the ImageNet mean as 8-bit RGB. */
extern const uint8_t tb_augment_pad_rgb[3];

/* Applies the draw's colour jitter to rgb ([pixels][3]) in place (jitter.c). */
void tb_augment_jitter(const struct tb_augment_draw *d, uint8_t *rgb, size_t pixels);

#endif
