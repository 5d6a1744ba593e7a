/* lib/batch.c: samples into model inputs. The image is normalised as the reference does
 * (ImageNet mean and std on [0, 1]); the Canny edges and the edge targets are computed
 * here, on the host, from the 8-bit image and the labels (canny.c, label_edges.c). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "lib/batch_internal.h"

const float tb_image_mean[3] = { 0.485f, 0.456f, 0.406f };
const float tb_image_std[3] = { 0.229f, 0.224f, 0.225f };

enum { CANNY_LOW = 10, CANNY_HIGH = 100, EDGE_RADIUS = 2, IGNORE = 255 };

int tb_batch_init(struct tb_batch *b, int n, int h, int w, struct tb_err *err)
{
    memset(b, 0, sizeof *b);
    const size_t pix = (size_t)n * (size_t)h * (size_t)w;
    b->n = n;
    b->h = h;
    b->w = w;
    b->image = malloc(pix * 3 * sizeof *b->image);
    b->canny = malloc(pix * sizeof *b->canny);
    b->labels = malloc(pix);
    b->edges = malloc(pix);
    b->canny8 = malloc((size_t)h * (size_t)w);
    if (!b->image || !b->canny || !b->labels || !b->edges || !b->canny8) {
        tb_batch_fini(b);
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory for a batch of %d images of %dx%d", n, w, h);
    }
    return TB_OK;
}

void tb_batch_fini(struct tb_batch *b)
{
    free(b->image);
    free(b->canny);
    free(b->labels);
    free(b->edges);
    free(b->canny8);
    tb_canny_work_free(&b->canny_work);
    memset(b, 0, sizeof *b);
}

int tb_batch_put(struct tb_batch *b, int i, const struct tb_sample *s, const char *name, struct tb_err *err)
{
    if ((int)s->width != b->w || (int)s->height != b->h)
        return tb_err_set(err, TB_ERR_RUNTIME, "sample %s is %ux%u, but the batch takes %dx%d images", name, s->width,
                          s->height, b->w, b->h);
    const size_t plane = (size_t)b->h * (size_t)b->w;
    if (tb_canny(s->image, b->w, b->h, CANNY_LOW, CANNY_HIGH, b->canny8, &b->canny_work) != 0)
        return tb_err_set(err, TB_ERR_NOMEM, "sample %s: out of memory for its Canny edges", name);
    float *img = b->image + (size_t)i * 3 * plane, *cny = b->canny + (size_t)i * plane;
    for (int c = 0; c < 3; c++) {
        const float scale = 1.0f / (255.0f * tb_image_std[c]), shift = tb_image_mean[c] / tb_image_std[c];
        for (size_t p = 0; p < plane; p++)
            img[(size_t)c * plane + p] = s->image[p * 3 + (size_t)c] * scale - shift;
    }
    for (size_t p = 0; p < plane; p++)
        cny[p] = b->canny8[p];
    memcpy(b->labels + (size_t)i * plane, s->label, plane);
    tb_label_edges(s->label, b->w, b->h, EDGE_RADIUS, IGNORE, b->edges + (size_t)i * plane);
    return TB_OK;
}
