/* datasets/taco: internal interface between the plugin (taco.c), the annotation reader
 * (taco_json.c) and the polygon rasteriser (taco_raster.c). */
#ifndef TB_PLUGIN_TACO_H
#define TB_PLUGIN_TACO_H

#include <stddef.h>
#include <stdint.h>
#include <trainbig/trainbig.h>

/* Coordinates further than this from the origin are refused when reading: they are
 * nonsense in a photograph and would overflow the rasteriser's arithmetic. */
#define TACO_COORD_MAX 1e7

/* The largest label value a class may get (255 means "ignore"). */
#define TACO_LABEL_MAX 254

/* One polygon: npoints (x, y) pairs starting at coords[2 * first]. */
struct taco_poly {
    size_t first, npoints;
};

struct taco_ann {
    int64_t id;
    double area;
    size_t image;             /* index into taco_set.images */
    uint8_t label;            /* class painted */
    size_t first_poly, npoly; /* into taco_set.polys */
};

struct taco_image {
    int64_t id;
    uint32_t width, height;
    char *file;             /* file_name, relative to root */
    size_t first_ann, nann; /* into taco_set.anns, in painting order */
};

/* Everything read from one annotation file. */
struct taco_set {
    struct taco_image *images; /* sorted by id */
    size_t nimages;
    struct taco_ann *anns; /* grouped by image, each group largest area first, ties by id */
    size_t nanns;
    struct taco_poly *polys;
    size_t npolys, max_points;
    double *coords;
    size_t ncoords;
    struct tb_class *classes; /* background first */
    size_t nclasses;
};

enum taco_classes { TACO_CATEGORY = 0, TACO_SUPERCATEGORY = 1 };

/* Reads the COCO-style file at path into *set, with labels of the given class mode.
 * On failure *set is empty and err names the file and the element at fault. */
int taco_read(const char *path, enum taco_classes mode, struct taco_set *set, struct tb_err *err);
void taco_set_free(struct taco_set *set);

/* The colour of class k of n: black for 0, well-separated hues for the others. */
void taco_palette(size_t k, uint8_t rgb[3]);

/* Sets label[y * w + x] = value for every pixel whose centre (x + 0.5, y + 0.5) lies
 * inside the polygon of npoints (x, y) pairs at xy (even-odd rule; a centre on a left or
 * top edge is inside, on a right or bottom edge outside). xs is scratch room for npoints
 * doubles. Polygons with fewer than 3 points paint nothing. */
void taco_fill_polygon(uint8_t *label, uint32_t w, uint32_t h, const double *xy, size_t npoints, uint8_t value,
                       double *xs);

#endif
