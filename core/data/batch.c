/* core/data/batch.c: samples into model inputs. The image is normalised as the reference does
 * (ImageNet mean and std on [0, 1]) and the labels copied; the inputs the model computes
 * from each sample (G-SCNN's Canny edges and edge targets) are its prepare()'s, called
 * here in the loader's threads with each thread's own scratch. */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/batch.h"

const float tb_image_mean[3] = { 0.485f, 0.456f, 0.406f };
const float tb_image_std[3] = { 0.229f, 0.224f, 0.225f };

enum { IGNORE = 255 };

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

static int nfeeds(const struct tb_batch *b)
{
    return b->spec ? b->spec->nfeeds : 0;
}

uint64_t tb_batch_bytes(int n, int h, int w, const struct tb_batch_spec *spec)
{
    const uint64_t pix = (uint64_t)n * (uint64_t)h * (uint64_t)w;
    uint64_t bytes = pix * 3 * sizeof(float) + pix;
    for (int i = 0; spec && i < spec->nfeeds; i++)
        bytes += pix * (uint64_t)spec->feeds[i].channels * tb_dtype_size(spec->feeds[i].dtype);
    return bytes;
}

int tb_batch_init(struct tb_batch *b, int n, int h, int w, const struct tb_batch_spec *spec,
                  const struct tb_host_allocator *host, struct tb_err *err)
{
    memset(b, 0, sizeof *b);
    const size_t pix = (size_t)n * (size_t)h * (size_t)w;
    b->n = n;
    b->h = h;
    b->w = w;
    b->spec = spec && spec->nfeeds > 0 ? spec : NULL;
    if (host)
        b->host = *host;
    b->image = host_alloc(&b->host, pix * 3 * sizeof *b->image);
    b->labels = host_alloc(&b->host, pix);
    bool ok = b->image && b->labels;
    if (ok && b->spec) {
        b->feed_data = calloc((size_t)b->spec->nfeeds, sizeof *b->feed_data);
        ok = b->feed_data != NULL;
        for (int i = 0; ok && i < b->spec->nfeeds; i++) {
            const struct tb_model_feed *f = &b->spec->feeds[i];
            b->feed_data[i] = host_alloc(&b->host, pix * (size_t)f->channels * tb_dtype_size(f->dtype));
            ok = b->feed_data[i] != NULL;
        }
    }
    if (!ok) {
        tb_batch_fini(b);
        return tb_err_set(err, TB_ERR_NOMEM, "out of %s memory for a batch of %d images of %dx%d",
                          host && host->alloc ? "pinned host" : "host", n, w, h);
    }
    return TB_OK;
}

void tb_batch_fini(struct tb_batch *b)
{
    host_free(&b->host, b->image);
    host_free(&b->host, b->labels);
    for (int i = 0; b->feed_data && i < nfeeds(b); i++)
        host_free(&b->host, b->feed_data[i]);
    free(b->feed_data);
    memset(b, 0, sizeof *b);
}

void *tb_batch_feed(const struct tb_batch *b, const char *name)
{
    for (int i = 0; i < nfeeds(b); i++)
        if (strcmp(b->spec->feeds[i].name, name) == 0)
            return b->feed_data[i];
    return NULL;
}

void tb_batch_work_free(struct tb_batch_work *w)
{
    if (w->model_work)
        w->spec->free_work(w->spec->model_ctx, w->model_work);
    free(w->slot);
    free(w->blank);
    memset(w, 0, sizeof *w);
}

/* The model's inputs of slot i, from the sample (rgb, labels) of the batch's size. */
static int prepare_slot(struct tb_batch *b, int i, const uint8_t *rgb, const uint8_t *labels, const char *name,
                        struct tb_batch_work *work, struct tb_err *err)
{
    const struct tb_batch_spec *spec = b->spec;
    if (!spec)
        return TB_OK;
    if (work->model_work && work->spec != spec) { /* scratch of another model's batch */
        work->spec->free_work(work->spec->model_ctx, work->model_work);
        work->model_work = NULL;
    }
    work->spec = spec;
    if (work->capacity_feeds < spec->nfeeds) {
        struct tb_model_feed *p = realloc(work->slot, (size_t)spec->nfeeds * sizeof *p);
        if (!p)
            return tb_err_set(err, TB_ERR_NOMEM, "sample %s: out of memory for the model's inputs", name);
        work->slot = p;
        work->capacity_feeds = spec->nfeeds;
    }
    const size_t plane = (size_t)b->h * (size_t)b->w;
    for (int f = 0; f < spec->nfeeds; f++) {
        work->slot[f] = spec->feeds[f];
        const size_t per_image = plane * (size_t)spec->feeds[f].channels * tb_dtype_size(spec->feeds[f].dtype);
        work->slot[f].data = (char *)b->feed_data[f] + (size_t)i * per_image;
    }
    const struct tb_model_sample s = { name, b->w, b->h, rgb, labels, IGNORE };
    return spec->prepare(spec->model_ctx, &s, work->slot, spec->nfeeds, &work->model_work, err);
}

int tb_batch_put(struct tb_batch *b, int i, const struct tb_sample *s, const char *name, struct tb_batch_work *work,
                 struct tb_err *err)
{
    if ((int)s->width != b->w || (int)s->height != b->h)
        return tb_err_set(err, TB_ERR_CONFIG, "sample %s is %ux%u, but the batch takes %dx%d images", name, s->width,
                          s->height, b->w, b->h);
    const size_t plane = (size_t)b->h * (size_t)b->w;
    float *img = b->image + (size_t)i * 3 * plane;
    for (int c = 0; c < 3; c++) {
        const float scale = 1.0f / (255.0f * tb_image_std[c]), shift = tb_image_mean[c] / tb_image_std[c];
        for (size_t p = 0; p < plane; p++)
            img[(size_t)c * plane + p] = s->image[p * 3 + (size_t)c] * scale - shift;
    }
    memcpy(b->labels + (size_t)i * plane, s->label, plane);
    return prepare_slot(b, i, s->image, s->label, name, work, err);
}

int tb_batch_put_ignored(struct tb_batch *b, int i, struct tb_batch_work *work, struct tb_err *err)
{
    const size_t plane = (size_t)b->h * (size_t)b->w;
    memset(b->image + (size_t)i * 3 * plane, 0, 3 * plane * sizeof *b->image);
    memset(b->labels + (size_t)i * plane, IGNORE, plane);
    if (!b->spec)
        return TB_OK;
    if (work->blank_pixels < plane) {
        uint8_t *p = realloc(work->blank, 4 * plane);
        if (!p)
            return tb_err_set(err, TB_ERR_NOMEM, "out of memory for an empty slot of a batch of %dx%d images", b->w,
                              b->h);
        work->blank = p;
        work->blank_pixels = plane;
    }
    memset(work->blank, 0, 3 * plane);
    memset(work->blank + 3 * plane, IGNORE, plane);
    return prepare_slot(b, i, work->blank, work->blank + 3 * plane, "(empty slot)", work, err);
}
