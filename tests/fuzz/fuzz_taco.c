/* fuzz_taco: the TACO dataset's COCO-style annotation file (plugins/datasets/taco/
 * taco_json.c) in both class modes, then every annotation's polygons rasterised
 * (taco_raster.c) as the plugin paints a label map. The reader's promises to the painter
 * are checked: indices within their arrays, labels below the class count. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "taco.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Label maps are painted at the image's size up to this many pixels, and on a canvas
 * clipped to 256 a side beyond: the painter clamps coordinates to any size alike. */
enum { FULL_PIXELS = 1 << 16, CLIP = 256, MAX_IMAGES = 32 };

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

static void paint(const struct taco_set *set)
{
    check(set->nclasses >= 1 && set->nclasses <= TACO_LABEL_MAX + 1);
    for (size_t k = 0; k < set->nclasses; k++) {
        uint8_t rgb[3];
        taco_palette(k, rgb);
        check(set->classes[k].name != NULL);
    }
    double *xs = malloc((set->max_points ? set->max_points : 1) * sizeof *xs);
    uint8_t *label = malloc(FULL_PIXELS > CLIP * CLIP ? FULL_PIXELS : CLIP * CLIP);
    for (size_t i = 0; xs && label && i < set->nimages && i < MAX_IMAGES; i++) {
        const struct taco_image *im = &set->images[i];
        check(im->file && im->width >= 1 && im->height >= 1);
        check(im->first_ann <= set->nanns && im->nann <= set->nanns - im->first_ann);
        uint32_t w = im->width, h = im->height;
        if ((uint64_t)w * h > FULL_PIXELS) {
            w = w < CLIP ? w : CLIP;
            h = h < CLIP ? h : CLIP;
        }
        memset(label, 0, (size_t)w * h);
        for (size_t a = im->first_ann; a < im->first_ann + im->nann; a++) {
            const struct taco_ann *ann = &set->anns[a];
            check(ann->image == i && ann->label < set->nclasses);
            check(ann->first_poly <= set->npolys && ann->npoly <= set->npolys - ann->first_poly);
            for (size_t p = ann->first_poly; p < ann->first_poly + ann->npoly; p++) {
                const struct taco_poly *poly = &set->polys[p];
                check(poly->npoints <= set->max_points && poly->first <= set->ncoords / 2 &&
                      poly->npoints <= set->ncoords / 2 - poly->first);
                taco_fill_polygon(label, w, h, set->coords + 2 * poly->first, poly->npoints, ann->label, xs);
            }
        }
    }
    free(label);
    free(xs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    char path[32];
    int fd = fuzz_file(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    for (int mode = TACO_CATEGORY; mode <= TACO_SUPERCATEGORY; mode++) {
        struct taco_set set;
        struct tb_err err;
        tb_err_clear(&err);
        if (taco_read(path, (enum taco_classes)mode, &set, &err) == TB_OK)
            paint(&set);
        taco_set_free(&set);
    }
    fuzz_file_close(fd);
    return 0;
}
