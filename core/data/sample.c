/* sample.c: the reusable image and label buffers of struct tb_sample. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <trainbig/dataset.h>

int tb_sample_reserve(struct tb_sample *s, uint32_t width, uint32_t height, struct tb_err *err)
{
    if (width == 0 || height == 0)
        return tb_err_set(err, TB_ERR_RUNTIME, "sample size %ux%u: both sides must be at least 1", width, height);
    size_t pixels = (size_t)width * height;
    if (pixels / width != height || pixels > SIZE_MAX / 3)
        return tb_err_set(err, TB_ERR_RUNTIME, "sample size %ux%u is too large", width, height);
    if (pixels > s->capacity) {
        uint8_t *image = malloc(pixels * 3);
        uint8_t *label = malloc(pixels);
        if (!image || !label) {
            free(image);
            free(label);
            return tb_err_set(err, TB_ERR_NOMEM, "out of memory for a %ux%u sample", width, height);
        }
        free(s->image);
        free(s->label);
        s->image = image;
        s->label = label;
        s->capacity = pixels;
    }
    s->width = width;
    s->height = height;
    return TB_OK;
}

void tb_sample_release(struct tb_sample *s)
{
    free(s->image);
    free(s->label);
    memset(s, 0, sizeof *s);
}
