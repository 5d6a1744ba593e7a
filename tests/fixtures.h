/* tests/fixtures.h: small dataset trees in the real on-disk formats of Cityscapes and
 * TACO, for the Check suites (check_cityscapes, check_taco) and, through
 * tests/make_fixtures, for the shell tests.
 *
 * Every function that writes returns 0, or -1 after one line on stderr saying what
 * failed. Cityscapes needs libspng to write its PNGs and TACO needs TurboJPEG for its
 * JPEGs: in a build without one, fixture_have_*() is false and the writers of that
 * format fail saying so. */
#ifndef TB_TESTS_FIXTURES_H
#define TB_TESTS_FIXTURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ files */

/* mkdir -p path. */
int fixture_mkdirs(const char *path);
/* Writes n bytes (creating or replacing the file). */
int fixture_write(const char *path, const void *data, size_t n);
int fixture_write_text(const char *path, const char *text);
/* Cuts the file to half its size. */
int fixture_truncate_half(const char *path);

/* ------------------------------------------------------------------ Cityscapes
 *
 * <root>/leftImg8bit/<split>/<city>/<city>_<seq>_<frame>_leftImg8bit.png (RGB) and
 * <root>/gtFine/<split>/<city>/..._gtFine_labelIds.png (grey, the label ids of
 * cityscapesScripts' labels.py), next to the files the plugin must never read: a
 * labelTrainIds map of zeros, a colour map and a polygons file. */

bool fixture_have_cityscapes(void);

/* The default size of the frames (the real ones are 2048x1024). */
enum { FIXTURE_CS_WIDTH = 128, FIXTURE_CS_HEIGHT = 64 };

struct fixture_frame {
    const char *city;
    int seq, frame;
};

struct fixture_frames {
    const struct fixture_frame *v;
    size_t n;
};

/* The splits of fixture_cityscapes(), each in the order the plugin gives it (by city,
 * then file name): train has 8 frames in 3 cities, val 3 in 2, test 1. extra is not
 * written by fixture_cityscapes(): frames for a train_extra split (coarse labels). */
extern const struct fixture_frames fixture_cs_train, fixture_cs_val, fixture_cs_test, fixture_cs_extra;

/* The pixels of frame f at w x h: rgb (w * h * 3) and the label ids (w * h). The top
 * quarter of the rows is sky (id 23) and the bottom quarter road (id 7); the band between
 * cycles through every id 0..33 and 255 (the license plate's -1), from an offset that
 * moves with the frame. The image paints each id in its own colour, varied by frame.
 * Needs a band of at least 35 pixels: fixture_cs_fits(). */
bool fixture_cs_fits(uint32_t w, uint32_t h);
void fixture_cs_pixels(const struct fixture_frame *f, uint32_t w, uint32_t h, uint8_t *rgb, uint8_t *ids);

/* An 8-bit PNG: RGB when rgb, else grey. */
int fixture_png(const char *path, const uint8_t *data, uint32_t w, uint32_t h, bool rgb);

/* Writes frame f's image under <root>/<images>/<subset>/<city>/ and, unless labels is
 * NULL, its label ids (and the decoys) under <root>/<labels>/<subset>/<city>/ with kind
 * ("gtFine" or "gtCoarse") in the file names. */
int fixture_cs_frame(const char *root, const char *images, const char *labels, const char *kind, const char *subset,
                     const struct fixture_frame *f, uint32_t w, uint32_t h);

/* The first n frames of fr (all of them when n exceeds their count) as fine-labelled
 * frames of subset, written in reverse so that creation order is not the plugin's. */
int fixture_cs_split(const char *root, const char *images, const char *labels, const char *subset,
                     const struct fixture_frames *fr, size_t n, uint32_t w, uint32_t h);

/* The tree: leftImg8bit/ and gtFine/ with fixture_cs_train, _val and _test at w x h. */
int fixture_cityscapes(const char *root, uint32_t w, uint32_t h);

/* ------------------------------------------------------------------ TACO
 *
 * <root>/annotations.json (COCO style: images, annotations with polygon lists,
 * categories with supercategories) and <root>/batch_<n>/<number>.jpg or .JPG. */

bool fixture_have_taco(void);

enum {
    FIXTURE_JPEG_EXIF6 = 1,    /* an APP1 EXIF segment with orientation 6 after SOI */
    FIXTURE_JPEG_TRUNCATED = 2 /* cut in the middle of the entropy-coded data */
};

/* A JPEG (quality 95, 4:4:4) of the w x h RGB pixels as stored, with flags. */
int fixture_jpeg(const char *path, const uint8_t *rgb, int w, int h, unsigned flags);

/* The categories of fixture_taco(): real TACO names, ids not in file order. */
struct fixture_taco_category {
    int id;
    const char *name, *supercategory;
};
extern const struct fixture_taco_category fixture_taco_categories[];
extern const size_t fixture_taco_ncategories;

/* An object: one annotation of up to two axis-aligned rectangles (a multi-polygon
 * segmentation when two), corners at pixel edges [x0, x1) x [y0, y1), in the picture
 * as viewed (after EXIF orientation). category indexes fixture_taco_categories. Where
 * objects overlap, the one of the smallest area is painted last: the plugin's order. */
struct fixture_taco_rect {
    int x0, y0, x1, y1;
};
struct fixture_taco_object {
    int category, nrect;
    struct fixture_taco_rect rect[2];
};

enum {
    FIXTURE_TACO_EXIF6 = 1,   /* stored rotated, with EXIF orientation 6 */
    FIXTURE_TACO_CORRUPT = 2, /* a truncated JPEG */
    FIXTURE_TACO_MISSING = 4  /* listed in annotations.json, no file */
};

struct fixture_taco_image {
    int id;
    const char *file;  /* file_name, relative to root */
    int width, height; /* as viewed, as annotations.json gives them */
    unsigned flags;
    int nobj;
    struct fixture_taco_object obj[3];
};
extern const struct fixture_taco_image fixture_taco_images[];
extern const size_t fixture_taco_nimages;

/* The bad files of fixture_taco() (not written or listed when clean). */
#define FIXTURE_TACO_CORRUPT_FILE "batch_2/000011.jpg"
#define FIXTURE_TACO_MISSING_FILE "batch_3/000017.JPG"

/* Index of the object painted on top at pixel (x, y) of image im, -1 for background;
 * and the colour written there (before JPEG): a textured ground, each category in its
 * own colour. */
int fixture_taco_top(const struct fixture_taco_image *im, int x, int y);
void fixture_taco_pixel(const struct fixture_taco_image *im, int x, int y, uint8_t rgb[3]);

/* The tree: every image of fixture_taco_images; with clean, the corrupt and the missing
 * one are left out of annotations.json (and the corrupt file is not written). */
int fixture_taco(const char *root, bool clean);

#endif
