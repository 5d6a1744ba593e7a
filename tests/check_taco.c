/* check_taco: the `taco` dataset plugin on a tiny TACO tree written here with the JPEG
 * writer of tests/fixtures.c: JPEG files (.jpg and .JPG, one with an EXIF orientation),
 * a COCO-style annotations.json. Checks rasterisation against masks computed by hand,
 * both class modes, painting order, the seeded splits and user-provided split files,
 * loads from several threads, and that every bad input is an error naming the file.
 * Then the larger tree tests/make_fixtures writes (fixture_taco()), image by image
 * against its description, with and without its corrupt and missing files. */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <trainbig/image.h>
#include <trainbig/trainbig.h>
#include <unistd.h>

#include "core/config/setup_internal.h"
#include "tests/fixtures.h"
#include "tests/testutil.h"

/* ------------------------------------------------------------------ the fixture */

static char *root; /* <test_tmpdir>/taco */

static char *rootf(const char *fmt, ...)
{
    char rel[512], *path;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    ck_assert_int_ge(asprintf(&path, "%s/%s", root, rel), 0);
    return path;
}

static void write_text(const char *rel, const char *text)
{
    char *path = rootf("%s", rel);
    ck_assert_int_eq(fixture_write_text(path, text), 0);
    free(path);
}

/* Writes a w x h JPEG (fixtures.c): grey, with an 8x8 red block at the top left when
 * red_corner; the EXIF orientation 6 segment when exif; cut in the middle of the image
 * data when truncate. */
static void write_jpeg(const char *rel, int w, int h, bool red_corner, bool exif, bool truncate)
{
    unsigned char *rgb = malloc((size_t)w * h * 3);
    ck_assert_ptr_nonnull(rgb);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            unsigned char *p = rgb + ((size_t)y * w + x) * 3;
            const bool red = red_corner && x < 8 && y < 8;
            p[0] = red ? 255 : 128;
            p[1] = red ? 0 : 128;
            p[2] = red ? 0 : 128;
        }
    char *path = rootf("%s", rel);
    ck_assert_int_eq(
        fixture_jpeg(path, rgb, w, h, (exif ? FIXTURE_JPEG_EXIF6 : 0) | (truncate ? FIXTURE_JPEG_TRUNCATED : 0)), 0);
    free(path);
    free(rgb);
}

/* Categories listed out of id order: sorted by id, the supercategories first appear as
 * Bottle, Can, Plastic bag & wrapper (in file order it would be Bottle, Plastic..., Can). */
static const char *const categories =
    "\"categories\": ["
    "{\"supercategory\": \"Bottle\", \"id\": 2, \"name\": \"Glass bottle\"},"
    "{\"supercategory\": \"Bottle\", \"id\": 0, \"name\": \"Aluminium foil\"},"
    "{\"supercategory\": \"Plastic bag & wrapper\", \"id\": 3, \"name\": \"Plastic film\"},"
    "{\"supercategory\": \"Can\", \"id\": 1, \"name\": \"Drink can\"}]";

static const char *const images = "\"images\": ["
                                  "{\"id\": 2, \"width\": 12, \"height\": 12, \"file_name\": \"batch_1/000002.JPG\"},"
                                  "{\"id\": 1, \"width\": 10, \"height\": 8, \"file_name\": \"batch_1/000001.jpg\"},"
                                  "{\"id\": 3, \"width\": 16, \"height\": 32, \"file_name\": \"batch_2/000003.jpg\"},"
                                  "{\"id\": 4, \"width\": 8, \"height\": 8, \"file_name\": \"batch_2/000004.JPG\"}]";

/* Image 1: a rectangle and a triangle; image 2: a small two-polygon object listed (and
 * numbered) before the big one it lies on; image 3: an object in the top right corner of
 * the picture as viewed (after EXIF rotation). */
static const char *const annotations =
    "\"annotations\": ["
    "{\"id\": 1, \"image_id\": 1, \"category_id\": 1, \"segmentation\": [[1, 1, 5, 1, 5, 4, 1, 4]],"
    " \"bbox\": [1, 1, 4, 3], \"area\": 12, \"iscrowd\": 0},"
    "{\"id\": 2, \"image_id\": 1, \"category_id\": 3, \"segmentation\": [[6.2, 0.1, 9.7, 0.1, 6.2, 3.6]],"
    " \"bbox\": [6.2, 0.1, 3.5, 3.5], \"area\": 6.125, \"iscrowd\": 0},"
    "{\"id\": 3, \"image_id\": 2, \"category_id\": 2,"
    " \"segmentation\": [[2, 2, 4, 2, 4, 4, 2, 4], [7, 7, 9, 7, 9, 9, 7, 9]],"
    " \"bbox\": [2, 2, 7, 7], \"area\": 8, \"iscrowd\": 0},"
    "{\"id\": 4, \"image_id\": 2, \"category_id\": 0, \"segmentation\": [[1, 1, 11, 1, 11, 11, 1, 11]],"
    " \"bbox\": [1, 1, 10, 10], \"area\": 100, \"iscrowd\": 0},"
    "{\"id\": 5, \"image_id\": 3, \"category_id\": 1, \"segmentation\": [[12, 0, 16, 0, 16, 4, 12, 4]],"
    " \"bbox\": [12, 0, 4, 4], \"area\": 16, \"iscrowd\": 0}]";

static void write_json(const char *rel, const char *cats, const char *imgs, const char *anns)
{
    char *text;
    ck_assert_int_ge(asprintf(&text, "{\"info\": {}, %s,\n%s,\n%s}\n", imgs, anns, cats), 0);
    write_text(rel, text);
    free(text);
}

static void make_fixture(void)
{
    if (root)
        return;
    root = test_path("taco");
    ck_assert_int_eq(mkdir(root, 0755), 0);
    char *dir = rootf("batch_1");
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    free(dir);
    dir = rootf("batch_2");
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    free(dir);
    write_jpeg("batch_1/000001.jpg", 10, 8, false, false, false);
    write_jpeg("batch_1/000002.JPG", 12, 12, false, false, false);
    write_jpeg("batch_2/000003.jpg", 32, 16, true, true, false); /* viewed as 16x32 */
    write_jpeg("batch_2/000004.JPG", 8, 8, false, false, false);
    write_jpeg("batch_2/truncated.jpg", 16, 16, true, false, true);
    write_json("annotations.json", categories, images, annotations);
}

static void setup(void)
{
    ck_assert_msg(getenv("TB_BUILDDIR"), "run through make check (TB_BUILDDIR unset)");
    unsetenv("TRAINBIG_PLUGIN_PATH");
    setenv("TRAINBIG_LOG", "error", 1);
    make_fixture();
}

/* ------------------------------------------------------------------ helpers */

static int try_open(const char *split, const char *dir, const char *extra, struct tb_instance *d, struct tb_err *err)
{
    char *settings;
    ck_assert_int_ge(asprintf(&settings, "root = %s\n%s", dir, extra), 0);
    const int rc = tb_instance_open(TB_KIND_DATASET, "taco", split, settings, d, err);
    free(settings);
    return rc;
}

static void open_split(struct tb_instance *d, const char *split, const char *extra)
{
    struct tb_err err;
    ck_assert_msg(try_open(split, root, extra, d, &err) == TB_OK, "%s", err.msg);
}

static void load(struct tb_instance *d, size_t i, struct tb_sample *s)
{
    struct tb_err err;
    ck_assert_msg(d->ops.dataset->load(d->ctx, i, s, &err) == TB_OK, "%s", err.msg);
}

/* Compares a label map with rows of digits ('0' + label). */
static void assert_mask(const struct tb_sample *s, const char *const *rows)
{
    for (uint32_t y = 0; y < s->height; y++)
        for (uint32_t x = 0; x < s->width; x++)
            ck_assert_msg(s->label[y * s->width + x] == rows[y][x] - '0', "pixel (%u, %u): label %d, expected %c", x, y,
                          s->label[y * s->width + x], rows[y][x]);
}

/* ------------------------------------------------------------------ the tests */

START_TEST(category_classes_and_masks)
{
    struct tb_instance d;
    open_split(&d, "train", "classes = category\nsplit_ratios = 100,0,0\n");
    const struct tb_class *cl;
    ck_assert_uint_eq(d.ops.dataset->classes(d.ctx, &cl), 5);
    static const char *const names[5] = { "background", "Aluminium foil", "Drink can", "Glass bottle", "Plastic film" };
    for (int k = 0; k < 5; k++)
        ck_assert_str_eq(cl[k].name, names[k]);
    ck_assert(cl[0].color[0] == 0 && cl[0].color[1] == 0 && cl[0].color[2] == 0);
    ck_assert_uint_eq(d.ops.dataset->count(d.ctx), 4);
    ck_assert_str_eq(d.ops.dataset->sample_name(d.ctx, 0), "batch_1/000001.jpg");
    ck_assert_str_eq(d.ops.dataset->sample_name(d.ctx, 1), "batch_1/000002.JPG");
    ck_assert_str_eq(d.ops.dataset->sample_name(d.ctx, 3), "batch_2/000004.JPG");

    /* The rectangle (1,1)-(5,4): centres x + 0.5 in [1, 5), y + 0.5 in [1, 4). The
     * triangle (6.2,0.1) (9.7,0.1) (6.2,3.6): at row centre yc, x from 6.2 to 9.8 - yc. */
    struct tb_sample s = { 0 };
    load(&d, 0, &s);
    ck_assert_uint_eq(s.width, 10);
    ck_assert_uint_eq(s.height, 8);
    static const char *const mask1[8] = {
        "0000004440", "0222204400", "0222204000", "0222200000", "0000000000", "0000000000", "0000000000", "0000000000",
    };
    assert_mask(&s, mask1);
    ck_assert(abs(s.image[0] - 128) < 8); /* grey */

    /* The small object (two squares) stays visible on the big one. */
    load(&d, 1, &s);
    static const char *const mask2[12] = {
        "000000000000", "011111111110", "013311111110", "013311111110", "011111111110", "011111111110",
        "011111111110", "011111133110", "011111133110", "011111111110", "011111111110", "000000000000",
    };
    assert_mask(&s, mask2);

    /* No annotations: background everywhere. */
    load(&d, 3, &s);
    for (size_t p = 0; p < 64; p++)
        ck_assert_int_eq(s.label[p], 0);
    tb_sample_release(&s);
    tb_instance_close(&d);
}
END_TEST

START_TEST(supercategory_classes)
{
    struct tb_instance d;
    open_split(&d, "train", "split_ratios = 100,0,0\n"); /* classes = supercategory by default */
    const struct tb_class *cl;
    ck_assert_uint_eq(d.ops.dataset->classes(d.ctx, &cl), 4);
    static const char *const names[4] = { "background", "Bottle", "Can", "Plastic bag & wrapper" };
    for (int k = 0; k < 4; k++)
        ck_assert_str_eq(cl[k].name, names[k]);
    struct tb_sample s = { 0 };
    load(&d, 0, &s);
    static const char *const mask1[8] = {
        "0000003330", "0222203300", "0222203000", "0222200000", "0000000000", "0000000000", "0000000000", "0000000000",
    };
    assert_mask(&s, mask1);
    load(&d, 1, &s); /* both objects are Bottle */
    for (uint32_t y = 0; y < 12; y++)
        for (uint32_t x = 0; x < 12; x++)
            ck_assert_int_eq(s.label[y * 12 + x], x >= 1 && x <= 10 && y >= 1 && y <= 10 ? 1 : 0);
    tb_sample_release(&s);
    tb_instance_close(&d);
}
END_TEST

/* Stored 32x16 with a red block at the top left; EXIF 6 turns it to 16x32 with the block
 * at the top right, where the annotation is. */
START_TEST(exif_orientation)
{
    struct tb_instance d;
    open_split(&d, "train", "classes = category\nsplit_ratios = 100,0,0\n");
    struct tb_sample s = { 0 };
    ck_assert_str_eq(d.ops.dataset->sample_name(d.ctx, 2), "batch_2/000003.jpg");
    load(&d, 2, &s);
    ck_assert_uint_eq(s.width, 16);
    ck_assert_uint_eq(s.height, 32);
    const uint8_t *tr = s.image + (2 * 16 + 13) * 3, *tl = s.image + (2 * 16 + 2) * 3,
                  *bl = s.image + (29 * 16 + 2) * 3;
    ck_assert_msg(tr[0] > 200 && tr[1] < 60 && tr[2] < 60, "top right is %d,%d,%d", tr[0], tr[1], tr[2]);
    ck_assert_msg(abs(tl[0] - 128) < 20 && abs(tl[1] - 128) < 20, "top left is %d,%d,%d", tl[0], tl[1], tl[2]);
    ck_assert_msg(abs(bl[0] - 128) < 20 && abs(bl[1] - 128) < 20, "bottom left is %d,%d,%d", bl[0], bl[1], bl[2]);
    for (uint32_t y = 0; y < 32; y++)
        for (uint32_t x = 0; x < 16; x++)
            ck_assert_int_eq(s.label[y * 16 + x], x >= 12 && y < 4 ? 2 : 0);
    tb_sample_release(&s);
    tb_instance_close(&d);
}
END_TEST

/* 50 images (no files needed to open), 60 categories in 28 supercategories. */
static void write_many(const char *rel, int first_image, int nimages)
{
    char *cats = NULL, *imgs = NULL;
    size_t nc = 0, ni = 0;
    FILE *f = open_memstream(&cats, &nc);
    fputs("\"categories\": [", f);
    for (int c = 0; c < 60; c++)
        fprintf(f, "%s{\"id\": %d, \"name\": \"cat%02d\", \"supercategory\": \"super%02d\"}", c ? "," : "", c, c,
                (c * 3) % 28);
    fputs("]", f);
    fclose(f);
    f = open_memstream(&imgs, &ni);
    fputs("\"images\": [", f);
    for (int i = 0; i < nimages; i++)
        fprintf(f, "%s{\"id\": %d, \"width\": 8, \"height\": 8, \"file_name\": \"batch_9/%06d.jpg\"}", i ? "," : "",
                first_image + i, first_image + i);
    fputs("]", f);
    fclose(f);
    write_json(rel, cats, imgs, "\"annotations\": []");
    free(cats);
    free(imgs);
}

START_TEST(many_classes_palette)
{
    write_many("many.json", 0, 3);
    struct tb_instance d;
    open_split(&d, "train", "annotations = many.json\nclasses = category\n");
    const struct tb_class *cl;
    ck_assert_uint_eq(d.ops.dataset->classes(d.ctx, &cl), 61);
    ck_assert_str_eq(cl[1].name, "cat00");
    ck_assert_str_eq(cl[60].name, "cat59");
    for (int a = 0; a < 61; a++)
        for (int b = a + 1; b < 61; b++)
            ck_assert_msg(memcmp(cl[a].color, cl[b].color, 3) != 0, "classes %d and %d share a colour", a, b);
    tb_instance_close(&d);
    open_split(&d, "train", "annotations = many.json\n");
    ck_assert_uint_eq(d.ops.dataset->classes(d.ctx, &cl), 29);
    ck_assert_str_eq(cl[1].name, "super00");
    ck_assert_str_eq(cl[2].name, "super03"); /* category 1 */
    ck_assert(cl[0].color[0] == 0 && cl[0].color[1] == 0 && cl[0].color[2] == 0);
    tb_instance_close(&d);
}
END_TEST

/* The names of a split, joined with newlines (caller frees). */
static char *split_names(const char *split, const char *extra, size_t *count)
{
    struct tb_instance d;
    open_split(&d, split, extra);
    *count = d.ops.dataset->count(d.ctx);
    char *all = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&all, &n);
    for (size_t i = 0; i < *count; i++)
        fprintf(f, "%s\n", d.ops.dataset->sample_name(d.ctx, i));
    fclose(f);
    tb_instance_close(&d);
    return all;
}

START_TEST(seeded_splits)
{
    write_many("split50.json", 100, 50);
    static const char *const splits[3] = { "train", "val", "test" };
    char *names[3], *again[3], *other[3];
    size_t count[3], c2;
    for (int k = 0; k < 3; k++) {
        names[k] = split_names(splits[k], "annotations = split50.json\n", &count[k]);
        again[k] = split_names(splits[k], "annotations = split50.json\nsplit_seed = 0\n", &c2);
        ck_assert_str_eq(names[k], again[k]);
        other[k] = split_names(splits[k], "annotations = split50.json\nsplit_seed = 1\n", &c2);
        ck_assert_uint_eq(c2, count[k]);
    }
    ck_assert_uint_eq(count[0], 40);
    ck_assert_uint_eq(count[1], 5);
    ck_assert_uint_eq(count[2], 5);
    ck_assert_str_ne(names[0], other[0]);
    /* Every image in exactly one split. */
    for (int i = 100; i < 150; i++) {
        char name[64];
        snprintf(name, sizeof name, "batch_9/%06d.jpg\n", i);
        int found = 0;
        for (int k = 0; k < 3; k++)
            found += strstr(names[k], name) != NULL;
        ck_assert_msg(found == 1, "%s is in %d splits", name, found);
    }
    for (int k = 0; k < 3; k++) {
        free(names[k]);
        free(again[k]);
        free(other[k]);
    }
    /* Other ratios. */
    char *v = split_names("val", "annotations = split50.json\nsplit_ratios = 1, 1, 0\n", &c2);
    ck_assert_uint_eq(c2, 25);
    free(v);
    v = split_names("test", "annotations = split50.json\nsplit_ratios = 1, 1, 0\n", &c2);
    ck_assert_uint_eq(c2, 0);
    free(v);
    struct tb_instance d;
    struct tb_err err;
    ck_assert_int_eq(try_open("train", root, "split_ratios = 1,2\n", &d, &err), TB_ERR_CONFIG);
    ck_assert_contains(err.msg, "split_ratios");
    ck_assert_int_eq(try_open("train", root, "split_ratios = 0,0,0\n", &d, &err), TB_ERR_CONFIG);
    ck_assert_int_eq(try_open("train", root, "split_ratios = 8,x,1\n", &d, &err), TB_ERR_CONFIG);
    ck_assert_contains(err.msg, "'x'");
    ck_assert_int_ne(try_open("extra", root, "", &d, &err), TB_OK);
    ck_assert_contains(err.msg, "no split 'extra'");
}
END_TEST

START_TEST(user_split_files)
{
    char *dir = test_path("taco-split");
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    static const char *const splits[3] = { "train", "val", "test" };
    char *paths[3];
    for (int k = 0; k < 3; k++) {
        char *text;
        ck_assert_int_ge(asprintf(&text,
                                  "{%s, \"images\": [{\"id\": %d, \"width\": 8, \"height\": 8, \"file_name\": "
                                  "\"%s.jpg\"}], \"annotations\": []}",
                                  categories, k, splits[k]),
                         0);
        ck_assert_int_ge(asprintf(&paths[k], "%s/annotations_%s.json", dir, splits[k]), 0);
        ck_assert_int_eq(fixture_write_text(paths[k], text), 0);
        free(text);
    }
    struct tb_instance d;
    struct tb_err err;
    for (int k = 0; k < 3; k++) {
        ck_assert_msg(try_open(splits[k], dir, "split_seed = 3\n", &d, &err) == TB_OK, "%s", err.msg);
        ck_assert_uint_eq(d.ops.dataset->count(d.ctx), 1);
        char want[16];
        snprintf(want, sizeof want, "%s.jpg", splits[k]);
        ck_assert_str_eq(d.ops.dataset->sample_name(d.ctx, 0), want);
        tb_instance_close(&d);
    }
    ck_assert_int_eq(unlink(paths[2]), 0);
    ck_assert_int_eq(try_open("train", dir, "", &d, &err), TB_ERR_CONFIG);
    ck_assert_contains(err.msg, "annotations_test.json is missing");
    for (int k = 0; k < 3; k++)
        free(paths[k]);
    free(dir);
}
END_TEST

struct job {
    struct tb_instance *d;
    uint8_t *ref; /* samples 0..3, labels then images, as one thread read them */
    size_t ref_size;
};

static void *load_all(void *arg)
{
    struct job *j = arg;
    struct tb_sample s = { 0 };
    struct tb_err err;
    for (int round = 0; round < 10; round++) {
        size_t off = 0;
        for (size_t i = 0; i < 4; i++) {
            if (j->d->ops.dataset->load(j->d->ctx, i, &s, &err) != TB_OK)
                return "load failed";
            const size_t n = (size_t)s.width * s.height;
            if (memcmp(j->ref + off, s.label, n) || memcmp(j->ref + off + n, s.image, 3 * n))
                return "different bytes";
            off += 4 * n;
        }
    }
    tb_sample_release(&s);
    return NULL;
}

START_TEST(thread_safe_loads)
{
    struct tb_instance d;
    open_split(&d, "train", "classes = category\nsplit_ratios = 100,0,0\n");
    uint8_t *ref = malloc(4 * (10 * 8 + 12 * 12 + 16 * 32 + 8 * 8));
    size_t off = 0;
    struct tb_sample s = { 0 };
    for (size_t i = 0; i < 4; i++) {
        load(&d, i, &s);
        const size_t n = (size_t)s.width * s.height;
        memcpy(ref + off, s.label, n);
        memcpy(ref + off + n, s.image, 3 * n);
        off += 4 * n;
    }
    tb_sample_release(&s);
    struct job j = { &d, ref, off };
    pthread_t t[3];
    for (int k = 0; k < 3; k++)
        ck_assert_int_eq(pthread_create(&t[k], NULL, load_all, &j), 0);
    for (int k = 0; k < 3; k++) {
        void *r;
        pthread_join(t[k], &r);
        ck_assert_msg(r == NULL, "%s", (const char *)r);
    }
    free(ref);
    tb_instance_close(&d);
}
END_TEST

/* Missing, truncated and wrongly sized images are errors of load() naming the file. */
START_TEST(bad_images)
{
    write_json("badload.json", categories,
               "\"images\": ["
               "{\"id\": 1, \"width\": 11, \"height\": 8, \"file_name\": \"batch_1/000001.jpg\"},"
               "{\"id\": 2, \"width\": 16, \"height\": 16, \"file_name\": \"batch_2/truncated.jpg\"},"
               "{\"id\": 3, \"width\": 8, \"height\": 8, \"file_name\": \"batch_2/missing.jpg\"},"
               "{\"id\": 4, \"width\": 8, \"height\": 16, \"file_name\": \"batch_2/000004.JPG\"}]",
               "\"annotations\": []");
    struct tb_instance d;
    open_split(&d, "train", "annotations = badload.json\nsplit_ratios = 100,0,0\n");
    struct tb_sample s = { 0 };
    struct tb_err err;
    static const char *const want[4][3] = {
        { "batch_1/000001.jpg", "10x8", "11x8" },
        { "batch_2/truncated.jpg", "truncated or corrupt JPEG", "" },
        { "batch_2/missing.jpg", "cannot open", "" },
        { "batch_2/000004.JPG", "8x8", "8x16" },
    };
    for (size_t i = 0; i < 4; i++) {
        ck_assert_int_eq(d.ops.dataset->load(d.ctx, i, &s, &err), TB_ERR_RUNTIME);
        for (int k = 0; k < 3; k++)
            ck_assert_contains(err.msg, want[i][k]);
    }
    tb_sample_release(&s);
    tb_instance_close(&d);
}
END_TEST

/* A file_name that leaves root by its text (absolute, "..") is refused at open naming the
 * image; a symbolic link inside root that leads out is a bad sample at load; both are
 * read with allow_outside_root = yes. (Before, both read the file outside root.) */
START_TEST(paths_stay_inside_root)
{
    char *outside = test_path("taco-outside");
    mkdir(outside, 0755);
    char *img = NULL, *abs = NULL, *link = NULL, *json = NULL;
    ck_assert_int_ge(asprintf(&img, "%s/x.jpg", outside), 0);
    char *src = rootf("batch_1/000001.jpg");
    FILE *in = fopen(src, "rb"), *out = fopen(img, "wb");
    ck_assert_ptr_nonnull(in);
    ck_assert_ptr_nonnull(out);
    for (int c; (c = fgetc(in)) != EOF;)
        fputc(c, out);
    fclose(in);
    fclose(out);
    free(src);
    static const char *const names[] = { "../taco-outside/x.jpg", NULL };
    ck_assert_int_ge(asprintf(&abs, "%s", img), 0);
    const char *const tries[] = { names[0], abs };
    for (size_t k = 0; k < 2; k++) {
        ck_assert_int_ge(asprintf(&json, "\"images\": [{\"id\": 7, \"width\": 10, \"height\": 8, "
                                         "\"file_name\": \"%s\"}]",
                                  tries[k]),
                         0);
        write_json("outside.json", categories, json, "\"annotations\": []");
        free(json);
        struct tb_instance d;
        struct tb_err err;
        ck_assert_int_eq(try_open("train", root, "annotations = outside.json\nsplit_ratios = 100,0,0\n", &d, &err),
                         TB_ERR_CONFIG);
        ck_assert_contains(err.msg, "outside.json: image 7: file_name '");
        ck_assert_contains(err.msg, "leaves root");
        ck_assert_contains(err.msg, "allow_outside_root = yes");
        open_split(&d, "train", "annotations = outside.json\nsplit_ratios = 100,0,0\nallow_outside_root = yes\n");
        struct tb_sample s = { 0 };
        load(&d, 0, &s);
        ck_assert_int_eq((int)s.width, 10);
        tb_sample_release(&s);
        tb_instance_close(&d);
    }
    /* a link inside root that leads out */
    link = rootf("batch_1/link.jpg");
    unlink(link);
    ck_assert_int_eq(symlink(img, link), 0);
    write_json("outside.json", categories,
               "\"images\": [{\"id\": 8, \"width\": 10, \"height\": 8, \"file_name\": \"batch_1/link.jpg\"}]",
               "\"annotations\": []");
    struct tb_instance d;
    open_split(&d, "train", "annotations = outside.json\nsplit_ratios = 100,0,0\n");
    struct tb_sample s = { 0 };
    struct tb_err err;
    ck_assert_int_eq(d.ops.dataset->load(d.ctx, 0, &s, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "link.jpg: a symbolic link leads outside root");
    tb_instance_close(&d);
    open_split(&d, "train", "annotations = outside.json\nsplit_ratios = 100,0,0\nallow_outside_root = yes\n");
    load(&d, 0, &s);
    tb_sample_release(&s);
    tb_instance_close(&d);
    unlink(link);
    unlink(img);
    rmdir(outside);
    free(link);
    free(abs);
    free(img);
    free(outside);
}
END_TEST

/* Each bad annotation file is refused by open() with the file and the element named. */
START_TEST(bad_annotations)
{
    static const char *const img1 =
        "\"images\": [{\"id\": 1, \"width\": 10, \"height\": 8, \"file_name\": \"batch_1/000001.jpg\"}]";
    static const char *const noanns = "\"annotations\": []";
    static const struct {
        const char *cats, *imgs, *anns; /* NULL = the default part */
        const char *text;               /* the whole file instead, when set */
        const char *want;
    } cases[] = {
        { NULL, NULL, NULL, "{\"images\": [", "not valid JSON" },
        { NULL, NULL, NULL, "[1, 2]", "the top level is not an object" },
        { NULL, NULL, NULL, "{\"images\": [], \"annotations\": []}", "top level: no \"categories\"" },
        { NULL, "\"imagez\": []", NULL, NULL, "top level: no \"images\"" },
        { NULL, "\"images\": {}", NULL, NULL, "\"images\" is not a list" },
        { NULL, "\"images\": [7]", NULL, NULL, "images[0] is not an object" },
        { NULL, "\"images\": [{\"id\": \"1\", \"width\": 1, \"height\": 1, \"file_name\": \"a.jpg\"}]", NULL, NULL,
          "images[0]: \"id\" is not an integer" },
        { NULL, "\"images\": [{\"id\": 1, \"width\": \"10\", \"height\": 8, \"file_name\": \"a.jpg\"}]", NULL, NULL,
          "image 1: \"width\" is not an integer" },
        { NULL, "\"images\": [{\"id\": 1, \"width\": 10, \"height\": 0, \"file_name\": \"a.jpg\"}]", NULL, NULL,
          "image 1: height 0 is not in 1..65536" },
        { NULL, "\"images\": [{\"id\": 1, \"width\": 10, \"height\": 8}]", NULL, NULL, "image 1: no \"file_name\"" },
        { NULL, "\"images\": [{\"id\": 1, \"width\": 10, \"height\": 8, \"file_name\": 5}]", NULL, NULL,
          "image 1: \"file_name\" is not a string" },
        { NULL,
          "\"images\": [{\"id\": 1, \"width\": 1, \"height\": 1, \"file_name\": \"a.jpg\"},"
          "{\"id\": 1, \"width\": 1, \"height\": 1, \"file_name\": \"b.jpg\"}]",
          NULL, NULL, "image 1 is defined twice" },
        { "\"categories\": [{\"id\": 0, \"supercategory\": \"x\"}]", img1, noanns, NULL, "category 0: no \"name\"" },
        { "\"categories\": [{\"id\": 0, \"name\": \"x\"}]", img1, noanns, NULL, "category 0: no \"supercategory\"" },
        { "\"categories\": [{\"id\": 300, \"name\": \"x\", \"supercategory\": \"y\"}]", img1, noanns, NULL,
          "categories[0]: id 300 is not in 0..253" },
        { NULL, img1,
          "\"annotations\": [{\"id\": 17, \"image_id\": 1, \"category_id\": 99, \"area\": 1,"
          " \"segmentation\": [[0, 0, 1, 0, 1, 1]]}]",
          NULL, "annotation 17: category_id 99 is not a category" },
        { NULL, img1,
          "\"annotations\": [{\"id\": 17, \"image_id\": 42, \"category_id\": 1, \"area\": 1,"
          " \"segmentation\": [[0, 0, 1, 0, 1, 1]]}]",
          NULL, "annotation 17: image_id 42 is not an image" },
        { NULL, img1, "\"annotations\": [{\"id\": 17, \"category_id\": 1, \"area\": 1, \"segmentation\": []}]", NULL,
          "annotation 17: no \"image_id\"" },
        { NULL, img1,
          "\"annotations\": [{\"id\": 17, \"image_id\": 1, \"category_id\": 1, \"area\": 1,"
          " \"segmentation\": [[0, 0, 1, 0, 1, 1], [0, 0, 1, 0, 1]]}]",
          NULL, "annotation 17: polygon 1 has an odd number of coordinates (5)" },
        { NULL, img1,
          "\"annotations\": [{\"id\": 17, \"image_id\": 1, \"category_id\": 1, \"area\": 1,"
          " \"segmentation\": [[0, 0, 1, 0]]}]",
          NULL, "annotation 17: polygon 0 has 2 points, at least 3 are needed" },
        { NULL, img1,
          "\"annotations\": [{\"id\": 17, \"image_id\": 1, \"category_id\": 1, \"area\": 1,"
          " \"segmentation\": [[0, 0, \"1\", 0, 1, 1]]}]",
          NULL, "annotation 17: polygon 0: coordinate 2 is not a number" },
        { NULL, img1,
          "\"annotations\": [{\"id\": 17, \"image_id\": 1, \"category_id\": 1, \"area\": 1,"
          " \"segmentation\": [[0, 0, 1e300, 0, 1, 1]]}]",
          NULL, "annotation 17: polygon 0: coordinate 2 (1e+300) is out of range" },
        { NULL, img1,
          "\"annotations\": [{\"id\": 17, \"image_id\": 1, \"category_id\": 1, \"area\": 1,"
          " \"segmentation\": {\"counts\": [1], \"size\": [8, 10]}}]",
          NULL, "annotation 17: \"segmentation\" is not a list of polygons (RLE is not supported)" },
        { NULL, img1,
          "\"annotations\": [{\"id\": 17, \"image_id\": 1, \"category_id\": 1, \"segmentation\": [[0, 0, 1, 0, 1, "
          "1]]}]",
          NULL, "annotation 17: no \"area\"" },
        { NULL, img1,
          "\"annotations\": [{\"id\": 17, \"image_id\": 1, \"category_id\": 1, \"area\": \"big\", \"segmentation\": "
          "[]}]",
          NULL, "annotation 17: \"area\" is not a number" },
        { NULL, img1, "\"annotations\": [[]]", NULL, "annotations[0] is not an object" },
    };
    struct tb_instance d;
    struct tb_err err;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32], extra[64];
        snprintf(name, sizeof name, "bad%02zu.json", i);
        if (cases[i].text)
            write_text(name, cases[i].text);
        else
            write_json(name, cases[i].cats ? cases[i].cats : categories, cases[i].imgs ? cases[i].imgs : images,
                       cases[i].anns ? cases[i].anns : annotations);
        snprintf(extra, sizeof extra, "annotations = %s\n", name);
        ck_assert_msg(try_open("train", root, extra, &d, &err) != TB_OK, "case %zu: opened", i);
        ck_assert_contains(err.msg, name);
        ck_assert_contains(err.msg, cases[i].want);
    }
    /* A missing file and a missing root. */
    ck_assert_int_eq(try_open("train", root, "annotations = nothere.json\n", &d, &err), TB_ERR_CONFIG);
    ck_assert_contains(err.msg, "nothere.json");
    ck_assert_contains(err.msg, "cannot open the annotations: No such file or directory");
    /* Not regular files: refused by what they are, not read (a FIFO blocked jansson). */
    char *fifo, *dirjson;
    ck_assert_int_ge(asprintf(&fifo, "%s/fifo.json", root), 0);
    ck_assert_int_ge(asprintf(&dirjson, "%s/dir.json", root), 0);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(mkdir(dirjson, 0700), 0);
    ck_assert_int_eq(try_open("train", root, "annotations = fifo.json\n", &d, &err), TB_ERR_CONFIG);
    ck_assert_contains(err.msg, "fifo.json: cannot open the annotations: it is a FIFO, not a regular file");
    ck_assert_int_eq(try_open("train", root, "annotations = dir.json\n", &d, &err), TB_ERR_CONFIG);
    ck_assert_contains(err.msg, "dir.json: cannot open the annotations: it is a directory, not a regular file");
    free(fifo);
    free(dirjson);
    char *nodir = test_path("no-such-dir");
    ck_assert_int_eq(try_open("train", nodir, "", &d, &err), TB_ERR_CONFIG);
    ck_assert_contains(err.msg, "no-such-dir");
    free(nodir);
}
END_TEST

/* ------------------------------------------------------------------ the generated tree */

/* The tree tests/make_fixtures writes (fixtures.c), checked image by image against its
 * description. Returns its root (the caller frees it). */
static char *generated_tree(const char *name, bool clean)
{
    char *dir = test_path(name);
    ck_assert_int_eq(fixture_taco(dir, clean), 0);
    return dir;
}

static const struct fixture_taco_image *fixture_image(const char *file)
{
    for (size_t i = 0; i < fixture_taco_nimages; i++)
        if (strcmp(fixture_taco_images[i].file, file) == 0)
            return &fixture_taco_images[i];
    ck_abort_msg("sample %s is not an image of the fixture", file);
    return NULL;
}

/* A good sample: its size, each pixel's class (by name: the supercategory of the object
 * on top, or background) and, away from the objects' edges, its colour. */
static void check_generated_sample(const struct tb_sample *s, const struct fixture_taco_image *im,
                                   const struct tb_class *cl, size_t ncl)
{
    ck_assert_uint_eq(s->width, im->width);
    ck_assert_uint_eq(s->height, im->height);
    for (int y = 0; y < im->height; y++)
        for (int x = 0; x < im->width; x++) {
            const size_t p = (size_t)y * im->width + x;
            const int top = fixture_taco_top(im, x, y);
            const char *want = top < 0 ? "background" : fixture_taco_categories[im->obj[top].category].supercategory;
            ck_assert_uint_lt(s->label[p], ncl);
            ck_assert_msg(strcmp(cl[s->label[p]].name, want) == 0, "%s (%d, %d): %s, expected %s", im->file, x, y,
                          cl[s->label[p]].name, want);
            /* JPEG rings within its 8x8 blocks (of the stored picture: the rotated one is
             * 96 wide, so they line up here too): only blocks of one object are compared */
            bool flat = true;
            for (int v = y / 8 * 8; v < y / 8 * 8 + 8 && v < im->height && flat; v++)
                for (int u = x / 8 * 8; u < x / 8 * 8 + 8 && u < im->width && flat; u++)
                    flat = fixture_taco_top(im, u, v) == top;
            if (!flat)
                continue;
            uint8_t rgb[3];
            fixture_taco_pixel(im, x, y, rgb);
            for (int c = 0; c < 3; c++)
                if (abs(s->image[p * 3 + c] - rgb[c]) > 24)
                    ck_abort_msg("%s (%d, %d) channel %d: %d, written %d", im->file, x, y, c, s->image[p * 3 + c],
                                 rgb[c]);
        }
}

/* What the issue asks of the tree: .jpg and .JPG, a multi-polygon annotation, overlapping
 * objects, an EXIF-rotated image, a corrupt JPEG and a missing file. */
START_TEST(generated_tree_contents)
{
    int jpg = 0, JPG = 0, multi = 0, overlaps = 0, exif = 0, corrupt = 0, missing = 0;
    for (size_t i = 0; i < fixture_taco_nimages; i++) {
        const struct fixture_taco_image *im = &fixture_taco_images[i];
        jpg += strstr(im->file, ".jpg") != NULL;
        JPG += strstr(im->file, ".JPG") != NULL;
        exif += (im->flags & FIXTURE_TACO_EXIF6) != 0;
        corrupt += (im->flags & FIXTURE_TACO_CORRUPT) != 0;
        missing += (im->flags & FIXTURE_TACO_MISSING) != 0;
        ck_assert(im->width >= 64 && im->width <= 160 && im->height >= 64 && im->height <= 160);
        for (int k = 0; k < im->nobj; k++)
            multi += im->obj[k].nrect > 1;
        bool overlap = false;
        for (int y = 0; y < im->height && !overlap; y++)
            for (int x = 0; x < im->width && !overlap; x++) {
                int covering = 0;
                for (int k = 0; k < im->nobj; k++)
                    for (int r = 0; r < im->obj[k].nrect; r++) {
                        const struct fixture_taco_rect *q = &im->obj[k].rect[r];
                        covering += x >= q->x0 && x < q->x1 && y >= q->y0 && y < q->y1;
                    }
                overlap = covering > 1;
            }
        overlaps += overlap;
    }
    ck_assert_int_ge(jpg, 2);
    ck_assert_int_ge(JPG, 2);
    ck_assert_int_ge(multi, 2);
    ck_assert_int_ge(overlaps, 2);
    ck_assert_int_eq(exif, 1);
    ck_assert_int_eq(corrupt, 1);
    ck_assert_int_eq(missing, 1);
}
END_TEST

/* The seeded 80/10/10 split of its 20 images; every good one loads as described, the
 * corrupt and the missing one are errors naming their file. Also by category. */
START_TEST(generated_tree_loads)
{
    char *dir = generated_tree("taco-generated", false);
    char *settings;
    ck_assert_int_ge(asprintf(&settings, "root = %s\n", dir), 0);
    static const char *const splits[3] = { "train", "val", "test" };
    static const size_t want_count[3] = { 16, 2, 2 };
    size_t seen = 0, bad = 0;
    struct tb_sample s = { 0 };
    for (int k = 0; k < 3; k++) {
        struct tb_instance d;
        struct tb_err err;
        ck_assert_msg(tb_instance_open(TB_KIND_DATASET, "taco", splits[k], settings, &d, &err) == TB_OK, "%s", err.msg);
        ck_assert_uint_eq(d.ops.dataset->count(d.ctx), want_count[k]);
        const struct tb_class *cl;
        const size_t ncl = d.ops.dataset->classes(d.ctx, &cl);
        ck_assert_uint_eq(ncl, 6); /* background and 5 supercategories */
        for (size_t i = 0; i < d.ops.dataset->count(d.ctx); i++) {
            const struct fixture_taco_image *im = fixture_image(d.ops.dataset->sample_name(d.ctx, i));
            seen++;
            if (im->flags & (FIXTURE_TACO_CORRUPT | FIXTURE_TACO_MISSING)) {
                bad++;
                ck_assert_int_eq(d.ops.dataset->load(d.ctx, i, &s, &err), TB_ERR_RUNTIME);
                ck_assert_contains(err.msg, im->file);
                ck_assert_contains(err.msg,
                                   im->flags & FIXTURE_TACO_CORRUPT ? "truncated or corrupt JPEG" : "cannot open");
                continue;
            }
            load(&d, i, &s);
            check_generated_sample(&s, im, cl, ncl);
        }
        tb_instance_close(&d);
    }
    ck_assert_uint_eq(seen, fixture_taco_nimages);
    ck_assert_uint_eq(bad, 2);
    free(settings);

    /* classes = category: label id + 1, named after the category */
    ck_assert_int_ge(asprintf(&settings, "root = %s\nclasses = category\nsplit_ratios = 1,0,0\n", dir), 0);
    struct tb_instance d;
    struct tb_err err;
    ck_assert_msg(tb_instance_open(TB_KIND_DATASET, "taco", "train", settings, &d, &err) == TB_OK, "%s", err.msg);
    const struct tb_class *cl;
    ck_assert_uint_eq(d.ops.dataset->classes(d.ctx, &cl), 61); /* the largest id is 59 */
    for (size_t c = 0; c < fixture_taco_ncategories; c++)
        ck_assert_str_eq(cl[fixture_taco_categories[c].id + 1].name, fixture_taco_categories[c].name);
    tb_instance_close(&d);
    tb_sample_release(&s);
    free(settings);
    free(dir);
}
END_TEST

/* Without the bad files: 18 images, 14/2/2, all load. */
START_TEST(generated_clean_tree)
{
    char *dir = generated_tree("taco-clean", true);
    char *settings;
    ck_assert_int_ge(asprintf(&settings, "root = %s\n", dir), 0);
    char *corrupt;
    ck_assert_int_ge(asprintf(&corrupt, "%s/%s", dir, FIXTURE_TACO_CORRUPT_FILE), 0);
    ck_assert_int_ne(access(corrupt, F_OK), 0);
    free(corrupt);
    static const char *const splits[3] = { "train", "val", "test" };
    static const size_t want_count[3] = { 14, 2, 2 };
    struct tb_sample s = { 0 };
    for (int k = 0; k < 3; k++) {
        struct tb_instance d;
        struct tb_err err;
        ck_assert_msg(tb_instance_open(TB_KIND_DATASET, "taco", splits[k], settings, &d, &err) == TB_OK, "%s", err.msg);
        ck_assert_uint_eq(d.ops.dataset->count(d.ctx), want_count[k]);
        const struct tb_class *cl;
        const size_t ncl = d.ops.dataset->classes(d.ctx, &cl);
        for (size_t i = 0; i < d.ops.dataset->count(d.ctx); i++) {
            load(&d, i, &s);
            check_generated_sample(&s, fixture_image(d.ops.dataset->sample_name(d.ctx, i)), cl, ncl);
        }
        tb_instance_close(&d);
    }
    tb_sample_release(&s);
    free(settings);
    free(dir);
}
END_TEST

static Suite *taco_suite(void)
{
    Suite *s = suite_create("taco");
    TCase *tc = tcase_create("taco");
    /* The generated trees are written and decoded image by image: seconds on a loaded
     * machine or under the sanitizers, past Check's 4 s default. */
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, category_classes_and_masks);
    tcase_add_test(tc, supercategory_classes);
    tcase_add_test(tc, exif_orientation);
    tcase_add_test(tc, many_classes_palette);
    tcase_add_test(tc, seeded_splits);
    tcase_add_test(tc, user_split_files);
    tcase_add_test(tc, thread_safe_loads);
    tcase_add_test(tc, bad_images);
    tcase_add_test(tc, paths_stay_inside_root);
    tcase_add_test(tc, bad_annotations);
    tcase_add_test(tc, generated_tree_contents);
    tcase_add_test(tc, generated_tree_loads);
    tcase_add_test(tc, generated_clean_tree);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return test_run_suite(taco_suite());
}
