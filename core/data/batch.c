/* core/data/batch.c: samples into model inputs. The image is normalised as the reference does
 * (ImageNet mean and std on [0, 1]); the Canny edges and the edge targets are computed
 * here, on the host, from the 8-bit image and the labels (canny.c, label_edges.c). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "core/data/batch_internal.h"

const float tb_image_mean[3] = { 0.485f, 0.456f, 0.406f };
const float tb_image_std[3] = { 0.229f, 0.224f, 0.225f };

enum { CANNY_LOW = 10, CANNY_HIGH = 100, EDGE_RADIUS = 2, IGNORE = 255 };

static void *host_alloc(const struct tb_host_allocator *h, size_t bytes)
{
    return h->alloc ? h->alloc(h->ctx, bytes) : malloc(bytes);
}

static void host_free(const struct tb_host_allocator *h, void *p)
{
    if (!p)
        return;
    if (h->alloc)
        h->free(h->ctx, p);
    else
        free(p);
}

int tb_batch_init(struct tb_batch *b, int n, int h, int w, const struct tb_host_allocator *host, struct tb_err *err)
{
    memset(b, 0, sizeof *b);
    const size_t pix = (size_t)n * (size_t)h * (size_t)w;
    b->n = n;
    b->h = h;
    b->w = w;
    if (host)
        b->host = *host;
    b->image = host_alloc(&b->host, pix * 3 * sizeof *b->image);
    b->canny = host_alloc(&b->host, pix * sizeof *b->canny);
    b->labels = host_alloc(&b->host, pix);
    b->edges = host_alloc(&b->host, pix);
    if (!b->image || !b->canny || !b->labels || !b->edges) {
        tb_batch_fini(b);
        return tb_err_set(err, TB_ERR_NOMEM, "out of %s memory for a batch of %d images of %dx%d",
                          host && host->alloc ? "pinned host" : "host", n, w, h);
    }
    return TB_OK;
}

void tb_batch_fini(struct tb_batch *b)
{
    host_free(&b->host, b->image);
    host_free(&b->host, b->canny);
    host_free(&b->host, b->labels);
    host_free(&b->host, b->edges);
    memset(b, 0, sizeof *b);
}

void tb_batch_work_free(struct tb_batch_work *w)
{
    free(w->canny8);
    tb_canny_work_free(&w->canny);
    memset(w, 0, sizeof *w);
}

int tb_batch_put(struct tb_batch *b, int i, const struct tb_sample *s, const char *name, struct tb_batch_work *work,
                 struct tb_err *err)
{
    if ((int)s->width != b->w || (int)s->height != b->h)
        return tb_err_set(err, TB_ERR_CONFIG, "sample %s is %ux%u, but the batch takes %dx%d images", name, s->width,
                          s->height, b->w, b->h);
    const size_t plane = (size_t)b->h * (size_t)b->w;
    if (work->capacity < plane) {
        uint8_t *p = realloc(work->canny8, plane);
        if (!p)
            return tb_err_set(err, TB_ERR_NOMEM, "sample %s: out of memory for its Canny edges", name);
        work->canny8 = p;
        work->capacity = plane;
    }
    if (tb_canny(s->image, b->w, b->h, CANNY_LOW, CANNY_HIGH, work->canny8, &work->canny) != 0)
        return tb_err_set(err, TB_ERR_NOMEM, "sample %s: out of memory for its Canny edges", name);
    float *img = b->image + (size_t)i * 3 * plane, *cny = b->canny + (size_t)i * plane;
    for (int c = 0; c < 3; c++) {
        const float scale = 1.0f / (255.0f * tb_image_std[c]), shift = tb_image_mean[c] / tb_image_std[c];
        for (size_t p = 0; p < plane; p++)
            img[(size_t)c * plane + p] = s->image[p * 3 + (size_t)c] * scale - shift;
    }
    for (size_t p = 0; p < plane; p++)
        cny[p] = work->canny8[p];
    memcpy(b->labels + (size_t)i * plane, s->label, plane);
    tb_label_edges(s->label, b->w, b->h, EDGE_RADIUS, IGNORE, b->edges + (size_t)i * plane);
    return TB_OK;
}

void tb_batch_put_ignored(struct tb_batch *b, int i)
{
    const size_t plane = (size_t)b->h * (size_t)b->w;
    memset(b->image + (size_t)i * 3 * plane, 0, 3 * plane * sizeof *b->image);
    memset(b->canny + (size_t)i * plane, 0, plane * sizeof *b->canny);
    memset(b->labels + (size_t)i * plane, IGNORE, plane);
    memset(b->edges + (size_t)i * plane, IGNORE, plane);
}
