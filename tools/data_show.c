/* data_show.c: `trainbig data --show N DIR`: the first N training samples of epoch 1 as
 * the model receives them, each written as one PNG: the augmented image on the left, the
 * same with its labels blended over in the dataset's palette on the right (ignored pixels
 * darkened). They come from the data loader itself, so they are what training sees. */
#include "config.h"

#include "tools/data_report_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/config/loader.h"
#include "core/data/dataloader.h"
#include "core/data/png_write.h"

enum { IGNORE_LABEL = 255 };

/* Normalised float back to the 8-bit value it came from. */
static uint8_t unnormalise(float v, int c)
{
    float x = (v * tb_image_std[c] + tb_image_mean[c]) * 255.0f;
    return (uint8_t)(x < 0 ? 0 : x > 255 ? 255 : lrintf(x));
}

/* Slot 0 of b as image | overlay into rgb ([h][2w][3]). */
static void render(const struct tb_batch *b, const struct tb_class *classes, int nclasses, uint8_t *rgb)
{
    const int w = b->w, h = b->h;
    const size_t plane = (size_t)w * (size_t)h;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const size_t p = (size_t)y * (size_t)w + (size_t)x;
            uint8_t px[3];
            for (int c = 0; c < 3; c++)
                px[c] = unnormalise(b->image[(size_t)c * plane + p], c);
            uint8_t *left = rgb + ((size_t)y * 2 * (size_t)w + (size_t)x) * 3, *right = left + (size_t)w * 3;
            const int label = b->labels[p];
            for (int c = 0; c < 3; c++) {
                left[c] = px[c];
                if (label < nclasses)
                    right[c] = (uint8_t)((px[c] + classes[label].color[c] + 1) / 2);
                else
                    right[c] = (uint8_t)(px[c] / 4); /* ignore and padding */
            }
        }
}

int tb_data_show(const struct tb_setup *s, int n, const char *dir, FILE *out, struct tb_err *err)
{
    const struct tb_plugin *p = s->slot[TB_SEC_DATASET].plugin->p;
    const struct tb_dataset_ops *ops = p->ops.dataset;
    const struct tb_data_settings *set = &s->settings.data;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return tb_err_set(err, TB_ERR_RUNTIME, "--show: cannot create %s: %s", dir, strerror(errno));
    void *ctx = NULL;
    int rc = tb_dataset_open(p, s->slot[TB_SEC_DATASET].section, "train", &ctx, err);
    if (rc)
        return tb_err_prefix(err, "dataset '%s', train split", p->name);
    const struct tb_class *classes;
    const int nclasses = (int)ops->classes(ctx, &classes);
    uint32_t w = 0, h = 0;
    rc = tb_data_image_size(ops, ctx, set, true, &w, &h, err);
    if (rc)
        tb_err_prefix(err, "dataset '%s', train split", p->name);
    char what[256];
    snprintf(what, sizeof what, "dataset '%s', train split", p->name);
    struct tb_data_loader *l = NULL;
    const struct tb_data_loader_config lc = {
        .ops = ops,
        .ctx = ctx,
        .what = what,
        .train = true,
        .batch = 1,
        .rank = 0,
        .world = 1,
        .seed = (uint64_t)s->settings.run.seed,
        .width = w,
        .height = h,
        .set = set,
    };
    if (!rc)
        rc = tb_data_loader_open(&lc, &l, err);
    uint8_t *rgb = rc ? NULL : malloc((size_t)w * h * 6);
    if (!rc && !rgb)
        rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    if (!rc) {
        const uint64_t count = (uint64_t)n < tb_data_loader_batches(l) ? (uint64_t)n : tb_data_loader_batches(l);
        tb_data_loader_start(l, 0, count);
        for (uint64_t k = 0; k < count && !rc; k++) {
            struct tb_loaded lb;
            rc = tb_data_loader_next(l, &lb, err);
            if (rc)
                break;
            for (int i = 0; i < lb.nskipped; i++)
                fprintf(out, "skipped %s\n", lb.skipped[i]);
            render(lb.b, classes, nclasses, rgb);
            char path[4200];
            snprintf(path, sizeof path, "%s/sample-%04u.png", dir, (unsigned)(k + 1));
            rc = tb_png_write_rgb(path, rgb, 2 * w, h, err);
            if (!rc)
                fprintf(out, "%s: %s\n", path, ops->sample_name(ctx, lb.index[0]));
        }
        if (!rc)
            fprintf(out, "wrote %u samples of %ux%u (augmented image | labels over it) to %s\n", (unsigned)count, w, h,
                    dir);
    }
    free(rgb);
    tb_data_loader_close(l);
    tb_plugin_destroy(p, ctx);
    return rc;
}
