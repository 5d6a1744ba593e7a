/* tests/fixtures.c: writes the Cityscapes and TACO trees of fixtures.h. */
#include "config.h"

#include "tests/fixtures.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <trainbig/image.h>
#include <unistd.h>

#ifdef HAVE_SPNG
#include <spng.h>
#endif
#ifdef HAVE_TURBOJPEG
#include <turbojpeg.h>
#endif

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

static int fail(const char *what, const char *why)
{
    fprintf(stderr, "fixtures: %s: %s\n", what, why);
    return -1;
}

static int fail_errno(const char *what)
{
    return fail(what, strerror(errno));
}

/* ------------------------------------------------------------------ files */

int fixture_mkdirs(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return fail(path, "path too long");
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return fail_errno(buf);
            *p = '/';
        }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return fail_errno(buf);
    return 0;
}

int fixture_write(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return fail_errno(path);
    const size_t written = fwrite(data, 1, n, f);
    const int closed = fclose(f);
    if (written != n || closed != 0)
        return fail_errno(path);
    return 0;
}

int fixture_write_text(const char *path, const char *text)
{
    return fixture_write(path, text, strlen(text));
}

int fixture_truncate_half(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || truncate(path, st.st_size / 2) != 0)
        return fail_errno(path);
    return 0;
}

/* "<a>/<b>/<c>/...": joins up to 5 parts with '/' into buf. */
static int join(char *buf, size_t size, const char *a, const char *b, const char *c, const char *d, const char *e)
{
    const char *parts[] = { a, b, c, d, e };
    size_t o = 0;
    for (size_t i = 0; i < LEN(parts) && parts[i]; i++) {
        const int n = snprintf(buf + o, size - o, "%s%s", i ? "/" : "", parts[i]);
        if (n < 0 || (size_t)n >= size - o)
            return fail(a, "path too long");
        o += (size_t)n;
    }
    return 0;
}

/* ------------------------------------------------------------------ Cityscapes */

static const struct fixture_frame train_frames[] = {
    { "aachen", 0, 19 }, { "aachen", 1, 5 }, { "aachen", 2, 19 }, { "bremen", 0, 7 },
    { "bremen", 0, 8 },  { "zurich", 3, 1 }, { "zurich", 3, 2 },  { "zurich", 4, 19 },
};
static const struct fixture_frame val_frames[] = { { "frankfurt", 0, 294 },
                                                   { "frankfurt", 1, 3 },
                                                   { "lindau", 0, 19 } };
static const struct fixture_frame test_frames[] = { { "berlin", 0, 19 } };
static const struct fixture_frame extra_frames[] = { { "augsburg", 0, 1 }, { "bremen", 9, 9 } };

const struct fixture_frames fixture_cs_train = { train_frames, LEN(train_frames) };
const struct fixture_frames fixture_cs_val = { val_frames, LEN(val_frames) };
const struct fixture_frames fixture_cs_test = { test_frames, LEN(test_frames) };
const struct fixture_frames fixture_cs_extra = { extra_frames, LEN(extra_frames) };

bool fixture_have_cityscapes(void)
{
#ifdef HAVE_SPNG
    return true;
#else
    return false;
#endif
}

enum { ID_ROAD = 7, ID_SKY = 23, NVALUES = 35 }; /* ids 0..33 and 255 */

static uint32_t frame_key(const struct fixture_frame *f)
{
    uint32_t k = 2166136261u;
    for (const char *c = f->city; *c; c++)
        k = (k ^ (uint8_t)*c) * 16777619u;
    return k ^ (uint32_t)(f->seq * 131 + f->frame * 7);
}

bool fixture_cs_fits(uint32_t w, uint32_t h)
{
    return (uint64_t)w * (h - 2 * (h / 4)) >= NVALUES;
}

void fixture_cs_pixels(const struct fixture_frame *f, uint32_t w, uint32_t h, uint8_t *rgb, uint8_t *ids)
{
    const uint32_t k = frame_key(f), band = h / 4;
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) {
            const size_t p = (size_t)y * w + x;
            uint8_t id;
            if (y < band)
                id = ID_SKY;
            else if (y >= h - band)
                id = ID_ROAD;
            else {
                const uint32_t v = (uint32_t)((p - (size_t)band * w + k) % NVALUES);
                id = (uint8_t)(v == NVALUES - 1 ? 255 : v);
            }
            ids[p] = id;
            /* road and sky in their Cityscapes colours, the other ids spread over the cube */
            uint8_t c[3] = { (uint8_t)(id * 37 + 40), (uint8_t)(id * 91 + 70), (uint8_t)(id * 157 + 20) };
            if (id == ID_ROAD)
                c[0] = 128, c[1] = 64, c[2] = 128;
            else if (id == ID_SKY)
                c[0] = 70, c[1] = 130, c[2] = 180;
            for (int ch = 0; ch < 3; ch++)
                rgb[p * 3 + ch] = (uint8_t)(c[ch] + ((k >> (8 * ch)) & 15) + ((x + 2 * y) & 7));
        }
}

int fixture_png(const char *path, const uint8_t *data, uint32_t w, uint32_t h, bool rgb)
{
#ifdef HAVE_SPNG
    FILE *f = fopen(path, "wb");
    if (!f)
        return fail_errno(path);
    spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
    struct spng_ihdr ihdr = { w, h, 8, rgb ? SPNG_COLOR_TYPE_TRUECOLOR : SPNG_COLOR_TYPE_GRAYSCALE, 0, 0, 0 };
    int e = ctx ? spng_set_png_file(ctx, f) : SPNG_EMEM;
    if (!e)
        e = spng_set_ihdr(ctx, &ihdr);
    if (!e)
        e = spng_encode_image(ctx, data, (size_t)w * h * (rgb ? 3 : 1), SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
    spng_ctx_free(ctx);
    const int closed = fclose(f);
    if (e)
        return fail(path, spng_strerror(e));
    if (closed != 0)
        return fail_errno(path);
    return 0;
#else
    (void)data, (void)w, (void)h, (void)rgb;
    return fail(path, "this build has no libspng to write PNG files");
#endif
}

int fixture_cs_frame(const char *root, const char *images, const char *labels, const char *kind, const char *subset,
                     const struct fixture_frame *f, uint32_t w, uint32_t h)
{
    if (!fixture_cs_fits(w, h))
        return fail(root, "frames this small cannot hold every label id");
    char dir[4096], path[4096], file[512];
    uint8_t *rgb = malloc((size_t)w * h * 3), *ids = malloc((size_t)w * h);
    int rc = rgb && ids ? 0 : fail(root, "out of memory");
    if (!rc)
        fixture_cs_pixels(f, w, h, rgb, ids);
    if (!rc)
        rc = join(dir, sizeof dir, root, images, subset, f->city, NULL);
    if (!rc)
        rc = fixture_mkdirs(dir);
    snprintf(file, sizeof file, "%s_%06d_%06d_leftImg8bit.png", f->city, f->seq, f->frame);
    if (!rc)
        rc = join(path, sizeof path, dir, file, NULL, NULL, NULL);
    if (!rc)
        rc = fixture_png(path, rgb, w, h, true);
    if (!rc && labels) {
        rc = join(dir, sizeof dir, root, labels, subset, f->city, NULL);
        if (!rc)
            rc = fixture_mkdirs(dir);
        static const char *const suffix[] = { "labelIds.png", "labelTrainIds.png", "color.png", "polygons.json" };
        for (size_t s = 0; s < LEN(suffix) && !rc; s++) {
            snprintf(file, sizeof file, "%s_%06d_%06d_%s_%s", f->city, f->seq, f->frame, kind, suffix[s]);
            rc = join(path, sizeof path, dir, file, NULL, NULL, NULL);
            if (rc)
                break;
            if (s == 0)
                rc = fixture_png(path, ids, w, h, false);
            else if (s == 1) {
                memset(ids, 0, (size_t)w * h); /* a decoy: all road */
                rc = fixture_png(path, ids, w, h, false);
            } else if (s == 2)
                rc = fixture_png(path, rgb, w, h, true);
            else
                rc = fixture_write_text(path, "{}\n");
        }
    }
    free(rgb);
    free(ids);
    return rc;
}

int fixture_cs_split(const char *root, const char *images, const char *labels, const char *subset,
                     const struct fixture_frames *fr, size_t n, uint32_t w, uint32_t h)
{
    if (n > fr->n)
        n = fr->n;
    for (size_t i = n; i-- > 0;)
        if (fixture_cs_frame(root, images, labels, "gtFine", subset, &fr->v[i], w, h))
            return -1;
    return 0;
}

int fixture_cityscapes(const char *root, uint32_t w, uint32_t h)
{
    if (!fixture_have_cityscapes())
        return fail(root, "this build has no libspng to write the Cityscapes PNG files");
    const struct {
        const char *subset;
        const struct fixture_frames *frames;
    } splits[] = { { "train", &fixture_cs_train }, { "val", &fixture_cs_val }, { "test", &fixture_cs_test } };
    for (size_t s = 0; s < LEN(splits); s++)
        if (fixture_cs_split(root, "leftImg8bit", "gtFine", splits[s].subset, splits[s].frames, SIZE_MAX, w, h))
            return -1;
    return 0;
}

/* ------------------------------------------------------------------ TACO */

bool fixture_have_taco(void)
{
#ifdef HAVE_TURBOJPEG
    return true;
#else
    return false;
#endif
}

#ifdef HAVE_TURBOJPEG
/* An APP1 segment with EXIF orientation 6 (rotate 90 degrees clockwise to view): marker,
 * length, "Exif\0\0", a big-endian TIFF header and IFD0 with the one tag 0x0112. */
static const unsigned char exif6[] = {
    0xFF, 0xE1, 0x00, 0x22,                         /* APP1, 34 bytes from the length on */
    'E',  'x',  'i',  'f',  0x00, 0x00,             /* */
    'M',  'M',  0x00, 0x2A, 0x00, 0x00, 0x00, 0x08, /* TIFF header, IFD0 at 8 */
    0x00, 0x01,                                     /* one entry */
    0x01, 0x12, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01, /* orientation, SHORT, count 1 */
    0x00, 0x06, 0x00, 0x00,                         /* value 6 */
    0x00, 0x00, 0x00, 0x00,                         /* no next IFD */
};
#endif

int fixture_jpeg(const char *path, const uint8_t *rgb, int w, int h, unsigned flags)
{
#ifdef HAVE_TURBOJPEG
    tjhandle tj = tjInitCompress();
    if (!tj)
        return fail(path, "tjInitCompress failed");
    unsigned char *jpeg = NULL;
    unsigned long size = 0;
    if (tjCompress2(tj, rgb, w, 0, h, TJPF_RGB, &jpeg, &size, TJSAMP_444, 95, 0) != 0) {
        int rc = fail(path, tjGetErrorStr2(tj));
        tjDestroy(tj);
        return rc;
    }
    tjDestroy(tj);
    unsigned char *file = malloc(size + sizeof exif6);
    if (!file) {
        tjFree(jpeg);
        return fail(path, "out of memory");
    }
    memcpy(file, jpeg, 2); /* SOI */
    size_t n = 2;
    if (flags & FIXTURE_JPEG_EXIF6) {
        memcpy(file + n, exif6, sizeof exif6);
        n += sizeof exif6;
    }
    memcpy(file + n, jpeg + 2, size - 2);
    n += size - 2;
    tjFree(jpeg);
    int rc = 0;
    if ((flags & FIXTURE_JPEG_EXIF6) && tb_image_exif_orientation(file, n) != 6)
        rc = fail(path, "the EXIF segment written does not read back as orientation 6");
    if (!rc && (flags & FIXTURE_JPEG_TRUNCATED)) {
        size_t sos = 2;
        while (sos + 1 < n && !(file[sos] == 0xFF && file[sos + 1] == 0xDA))
            sos++;
        if (sos + 1 >= n)
            rc = fail(path, "no start of scan to cut after");
        n = sos + (n - sos) / 2;
    }
    if (!rc)
        rc = fixture_write(path, file, n);
    free(file);
    return rc;
#else
    (void)rgb, (void)w, (void)h, (void)flags;
    return fail(path, "this build has no TurboJPEG to write JPEG files");
#endif
}

enum { CAN, PBOTTLE, GBOTTLE, FILM, CIG, FOIL };

const struct fixture_taco_category fixture_taco_categories[] = {
    [CAN] = { 12, "Drink can", "Can" },          [PBOTTLE] = { 5, "Clear plastic bottle", "Bottle" },
    [GBOTTLE] = { 6, "Glass bottle", "Bottle" }, [FILM] = { 36, "Other plastic wrapper", "Plastic bag & wrapper" },
    [CIG] = { 59, "Cigarette", "Cigarette" },    [FOIL] = { 0, "Aluminium foil", "Aluminium foil" },
};
const size_t fixture_taco_ncategories = LEN(fixture_taco_categories);

static const uint8_t category_rgb[][3] = {
    [CAN] = { 200, 30, 40 },    [PBOTTLE] = { 60, 150, 230 }, [GBOTTLE] = { 30, 150, 50 },
    [FILM] = { 235, 235, 240 }, [CIG] = { 240, 190, 110 },    [FOIL] = { 150, 150, 170 },
};

/* clang-format off */
/* An object of one rectangle, of two. */
#define R1(c, x0, y0, x1, y1) { c, 1, { { x0, y0, x1, y1 }, { 0, 0, 0, 0 } } }
#define R2(c, x0, y0, x1, y1, u0, v0, u1, v1) { c, 2, { { x0, y0, x1, y1 }, { u0, v0, u1, v1 } } }

/* Sizes from 64 to 160 pixels a side; image 3 has a two-polygon object partly under a
 * larger one with a small one on it; image 6 a can lying on a bottle; image 7 is stored
 * 128x96 and viewed 96x128; 12 is corrupt and 18 missing. */
const struct fixture_taco_image fixture_taco_images[] = {
    { 1, "batch_1/000000.jpg", 128, 96, 0, 2, { R1(PBOTTLE, 20, 30, 60, 80), R1(CAN, 80, 10, 110, 40) } },
    { 2, "batch_1/000001.jpg", 96, 64, 0, 1, { R1(FILM, 10, 10, 80, 50) } },
    { 3, "batch_1/000002.JPG", 160, 120, 0, 3,
      { R2(GBOTTLE, 10, 10, 40, 50, 100, 60, 140, 110), R1(FILM, 30, 40, 120, 100), R1(CIG, 60, 60, 80, 70) } },
    { 4, "batch_1/000003.jpg", 64, 64, 0, 1, { R1(CAN, 16, 16, 48, 48) } },
    { 5, "batch_1/000004.JPG", 80, 128, 0, 2, { R1(FOIL, 5, 60, 70, 120), R1(CIG, 30, 10, 36, 40) } },
    { 6, "batch_1/000005.jpg", 144, 96, 0, 2, { R1(PBOTTLE, 40, 20, 120, 50), R1(CAN, 100, 30, 130, 80) } },
    { 7, "batch_2/000006.jpg", 96, 128, FIXTURE_TACO_EXIF6, 2, { R1(CAN, 60, 8, 90, 40), R1(FILM, 10, 70, 60, 120) } },
    { 8, "batch_2/000007.JPG", 112, 80, 0, 1, { R2(FOIL, 8, 8, 30, 30, 70, 40, 100, 70) } },
    { 9, "batch_2/000008.jpg", 64, 96, 0, 1, { R1(GBOTTLE, 20, 10, 44, 80) } },
    { 10, "batch_2/000009.jpg", 128, 64, 0, 2, { R1(CIG, 50, 30, 70, 36), R1(FILM, 0, 0, 128, 20) } },
    { 11, "batch_2/000010.JPG", 160, 96, 0, 2, { R1(CAN, 20, 20, 50, 70), R1(PBOTTLE, 60, 10, 150, 40) } },
    { 12, FIXTURE_TACO_CORRUPT_FILE, 96, 96, FIXTURE_TACO_CORRUPT, 1, { R1(CAN, 10, 10, 40, 40) } },
    { 13, "batch_2/000012.jpg", 80, 64, 0, 1, { R1(FOIL, 10, 10, 70, 54) } },
    { 14, "batch_3/000013.jpg", 144, 112, 0, 2,
      { R1(GBOTTLE, 10, 30, 60, 100), R2(FILM, 70, 10, 130, 50, 80, 60, 140, 100) } },
    { 15, "batch_3/000014.JPG", 64, 128, 0, 2, { R1(PBOTTLE, 16, 20, 48, 110), R1(CIG, 20, 60, 44, 66) } },
    { 16, "batch_3/000015.jpg", 120, 90, 0, 2, { R1(CAN, 30, 20, 60, 70), R1(CAN, 70, 20, 100, 70) } },
    { 17, "batch_3/000016.jpg", 96, 72, 0, 2, { R1(FILM, 0, 36, 96, 72), R1(FOIL, 40, 40, 60, 60) } },
    { 18, FIXTURE_TACO_MISSING_FILE, 128, 96, FIXTURE_TACO_MISSING, 1, { R1(CAN, 10, 10, 40, 40) } },
    { 19, "batch_3/000018.jpg", 100, 100, 0, 2, { R1(GBOTTLE, 30, 10, 70, 90), R1(PBOTTLE, 10, 40, 90, 60) } },
    { 20, "batch_3/000019.JPG", 152, 64, 0, 2, { R1(CIG, 10, 28, 60, 34), R1(CAN, 100, 10, 130, 54) } },
};
/* clang-format on */
const size_t fixture_taco_nimages = LEN(fixture_taco_images);

static int object_area(const struct fixture_taco_object *o)
{
    int a = 0;
    for (int r = 0; r < o->nrect; r++)
        a += (o->rect[r].x1 - o->rect[r].x0) * (o->rect[r].y1 - o->rect[r].y0);
    return a;
}

int fixture_taco_top(const struct fixture_taco_image *im, int x, int y)
{
    int top = -1, top_area = 0;
    for (int k = 0; k < im->nobj; k++) {
        const struct fixture_taco_object *o = &im->obj[k];
        for (int r = 0; r < o->nrect; r++)
            if (x >= o->rect[r].x0 && x < o->rect[r].x1 && y >= o->rect[r].y0 && y < o->rect[r].y1) {
                /* painted largest first, equal areas in annotation order */
                const int a = object_area(o);
                if (top < 0 || a <= top_area)
                    top = k, top_area = a;
                break;
            }
    }
    return top;
}

void fixture_taco_pixel(const struct fixture_taco_image *im, int x, int y, uint8_t rgb[3])
{
    const int top = fixture_taco_top(im, x, y);
    if (top < 0) { /* brownish ground with a little texture */
        rgb[0] = (uint8_t)(110 + (x * 5 + y * 3 + im->id * 17) % 24);
        rgb[1] = (uint8_t)(95 + (x * 2 + y * 7 + im->id * 11) % 24);
        rgb[2] = (uint8_t)(70 + (x * 3 + y * 5) % 16);
        return;
    }
    const uint8_t *c = category_rgb[im->obj[top].category];
    for (int ch = 0; ch < 3; ch++)
        rgb[ch] = (uint8_t)(c[ch] - ((x + y) & 7));
}

/* Writes image im. An EXIF-6 picture, viewed w x h, is stored h x w: viewed pixel (x, y)
 * is stored pixel (y, w - 1 - x), which a quarter turn clockwise brings back. */
static int write_image(const char *root, const struct fixture_taco_image *im)
{
    char path[4096];
    if (join(path, sizeof path, root, im->file, NULL, NULL, NULL))
        return -1;
    const int w = im->width, h = im->height;
    uint8_t *rgb = malloc((size_t)w * h * 3);
    if (!rgb)
        return fail(path, "out of memory");
    const bool rotated = im->flags & FIXTURE_TACO_EXIF6;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const size_t at = rotated ? (size_t)(w - 1 - x) * (size_t)h + (size_t)y : (size_t)y * (size_t)w + (size_t)x;
            fixture_taco_pixel(im, x, y, rgb + at * 3);
        }
    unsigned flags =
        (rotated ? FIXTURE_JPEG_EXIF6 : 0) | (im->flags & FIXTURE_TACO_CORRUPT ? FIXTURE_JPEG_TRUNCATED : 0);
    int rc = fixture_jpeg(path, rgb, rotated ? h : w, rotated ? w : h, flags);
    free(rgb);
    return rc;
}

static void write_json(FILE *f, bool clean)
{
    fputs("{\n\"info\": {\"description\": \"trainbig test fixture in the TACO format\", \"version\": \"1\"},\n", f);
    fputs("\"images\": [", f);
    bool first = true;
    for (size_t i = 0; i < fixture_taco_nimages; i++) {
        const struct fixture_taco_image *im = &fixture_taco_images[i];
        if (clean && (im->flags & (FIXTURE_TACO_CORRUPT | FIXTURE_TACO_MISSING)))
            continue;
        fprintf(f, "%s\n  {\"id\": %d, \"width\": %d, \"height\": %d, \"file_name\": \"%s\", \"license\": null}",
                first ? "" : ",", im->id, im->width, im->height, im->file);
        first = false;
    }
    fputs("\n],\n\"annotations\": [", f);
    first = true;
    int ann = 0;
    for (size_t i = 0; i < fixture_taco_nimages; i++) {
        const struct fixture_taco_image *im = &fixture_taco_images[i];
        for (int k = 0; k < im->nobj; k++) {
            const struct fixture_taco_object *o = &im->obj[k];
            ann++;
            if (clean && (im->flags & (FIXTURE_TACO_CORRUPT | FIXTURE_TACO_MISSING)))
                continue;
            int x0 = o->rect[0].x0, y0 = o->rect[0].y0, x1 = o->rect[0].x1, y1 = o->rect[0].y1;
            fprintf(f, "%s\n  {\"id\": %d, \"image_id\": %d, \"category_id\": %d, \"segmentation\": [",
                    first ? "" : ",", ann, im->id, fixture_taco_categories[o->category].id);
            first = false;
            for (int r = 0; r < o->nrect; r++) {
                const struct fixture_taco_rect *q = &o->rect[r];
                fprintf(f, "%s[%d, %d, %d, %d, %d, %d, %d, %d]", r ? ", " : "", q->x0, q->y0, q->x1, q->y0, q->x1,
                        q->y1, q->x0, q->y1);
                x0 = q->x0 < x0 ? q->x0 : x0;
                y0 = q->y0 < y0 ? q->y0 : y0;
                x1 = q->x1 > x1 ? q->x1 : x1;
                y1 = q->y1 > y1 ? q->y1 : y1;
            }
            fprintf(f, "], \"area\": %d.0, \"bbox\": [%d, %d, %d, %d], \"iscrowd\": 0}", object_area(o), x0, y0,
                    x1 - x0, y1 - y0);
        }
    }
    fputs("\n],\n\"categories\": [", f);
    for (size_t c = 0; c < fixture_taco_ncategories; c++)
        fprintf(f, "%s\n  {\"supercategory\": \"%s\", \"id\": %d, \"name\": \"%s\"}", c ? "," : "",
                fixture_taco_categories[c].supercategory, fixture_taco_categories[c].id,
                fixture_taco_categories[c].name);
    fputs("\n]\n}\n", f);
}

int fixture_taco(const char *root, bool clean)
{
    if (!fixture_have_taco())
        return fail(root, "this build has no TurboJPEG to write the TACO JPEG files");
    char path[4096];
    for (size_t i = 0; i < fixture_taco_nimages; i++) {
        const struct fixture_taco_image *im = &fixture_taco_images[i];
        /* the image's directory: root and file_name up to its last '/' */
        if (join(path, sizeof path, root, im->file, NULL, NULL, NULL))
            return -1;
        *strrchr(path, '/') = '\0';
        if (fixture_mkdirs(path))
            return -1;
        if ((im->flags & FIXTURE_TACO_MISSING) || (clean && (im->flags & FIXTURE_TACO_CORRUPT)))
            continue;
        if (write_image(root, im))
            return -1;
    }
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f)
        return fail_errno("open_memstream");
    write_json(f, clean);
    if (fclose(f) != 0) {
        free(text);
        return fail_errno("open_memstream");
    }
    int rc = join(path, sizeof path, root, "annotations.json", NULL, NULL, NULL);
    if (!rc)
        rc = fixture_write(path, text, size);
    free(text);
    return rc;
}
