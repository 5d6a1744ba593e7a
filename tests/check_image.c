/* check_image: trainbig/image.h decodes PNG and JPEG files into samples.
 *
 * Files are made here: PNGs with libspng (RGB, grey and palette label maps), JPEGs with
 * TurboJPEG, some with an EXIF orientation block (little- and big-endian). An image of
 * 3x2 coloured blocks must come out in the orientation EXIF says, checked against the
 * transforms the EXIF standard defines (mirrors and quarter turns composed here, not the
 * decoder's formulas). Missing, empty, truncated and unknown files and label maps of
 * another size or kind are refused naming the file. */
#include "config.h"

#include <check.h>
#include <spng.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <trainbig/image.h>
#include <turbojpeg.h>
#include <zlib.h>

#include "testutil.h"

enum { BLOCK = 16, BW = 3, BH = 2 }; /* a 48x32 image of 3x2 blocks */

static const uint8_t block_colour[BH][BW][3] = {
    { { 230, 20, 20 }, { 20, 230, 20 }, { 20, 20, 230 } },
    { { 230, 230, 20 }, { 20, 230, 230 }, { 230, 20, 230 } },
};

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static void write_png(const char *path, const uint8_t *pixels, uint32_t w, uint32_t h, int colour_type,
                      const uint8_t *palette_rgb, int npalette)
{
    spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
    ck_assert_ptr_nonnull(ctx);
    ck_assert_int_eq(spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1), 0);
    struct spng_ihdr ihdr = { w, h, 8, (uint8_t)colour_type, 0, 0, 0 };
    ck_assert_int_eq(spng_set_ihdr(ctx, &ihdr), 0);
    if (palette_rgb) {
        struct spng_plte plte = { 0 };
        plte.n_entries = (uint32_t)npalette;
        for (int i = 0; i < npalette; i++)
            plte.entries[i] =
                (struct spng_plte_entry){ palette_rgb[3 * i], palette_rgb[3 * i + 1], palette_rgb[3 * i + 2], 255 };
        ck_assert_int_eq(spng_set_plte(ctx, &plte), 0);
    }
    const size_t bpp = colour_type == SPNG_COLOR_TYPE_TRUECOLOR ? 3 : 1;
    ck_assert_int_eq(spng_encode_image(ctx, pixels, (size_t)w * h * bpp, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE), 0);
    size_t n;
    int e;
    void *buf = spng_get_png_buffer(ctx, &n, &e);
    ck_assert_ptr_nonnull(buf);
    write_bytes(path, buf, n);
    free(buf);
    spng_ctx_free(ctx);
}

static uint8_t *blocks_image(void)
{
    uint8_t *p = malloc((size_t)BW * BLOCK * BH * BLOCK * 3);
    for (int y = 0; y < BH * BLOCK; y++)
        for (int x = 0; x < BW * BLOCK; x++)
            memcpy(p + ((size_t)y * BW * BLOCK + x) * 3, block_colour[y / BLOCK][x / BLOCK], 3);
    return p;
}

/* A JPEG of the blocks, with an EXIF APP1 block of orientation o after SOI when o > 0. */
static void write_jpeg(const char *path, int o, bool big_endian)
{
    uint8_t *px = blocks_image();
    tjhandle tj = tjInitCompress();
    unsigned char *jpeg = NULL;
    unsigned long n = 0;
    ck_assert_int_eq(tjCompress2(tj, px, BW * BLOCK, 0, BH * BLOCK, TJPF_RGB, &jpeg, &n, TJSAMP_444, 95, 0), 0);
    unsigned char app1[2 + 2 + 6 + 26];
    size_t a = 0;
    if (o > 0) {
        const bool le = !big_endian;
#define P16(v)                                                                           \
    (le ? (app1[a++] = (unsigned char)((v)&0xFF), app1[a++] = (unsigned char)((v) >> 8)) \
        : (app1[a++] = (unsigned char)((v) >> 8), app1[a++] = (unsigned char)((v)&0xFF)))
        app1[a++] = 0xFF;
        app1[a++] = 0xE1;
        app1[a++] = 0;
        app1[a++] = (unsigned char)(sizeof app1 - 2);
        memcpy(app1 + a, "Exif\0\0", 6);
        a += 6;
        app1[a++] = le ? 'I' : 'M';
        app1[a++] = le ? 'I' : 'M';
        P16(42);
        P16(le ? 8 : 0);
        P16(le ? 0 : 8); /* IFD0 at offset 8, written as 32 bits */
        P16(1);          /* one entry */
        P16(0x0112);     /* orientation */
        P16(3);          /* SHORT */
        P16(le ? 1 : 0);
        P16(le ? 0 : 1); /* count 1 */
        P16(o);
        P16(0); /* value, padded */
        P16(0);
        P16(0); /* no next IFD */
#undef P16
        ck_assert_uint_eq(a, sizeof app1);
    }
    unsigned char *out = malloc(n + a);
    memcpy(out, jpeg, 2);
    memcpy(out + 2, app1, a);
    memcpy(out + 2 + a, jpeg + 2, n - 2);
    write_bytes(path, out, n + a);
    free(out);
    tjFree(jpeg);
    tjDestroy(tj);
    free(px);
}

/* The block grid after EXIF orientation o, by the standard's definitions: 2 mirror, 3 half
 * turn, 4 vertical mirror, 5 mirror then quarter turn anticlockwise, 6 quarter turn
 * clockwise, 7 mirror then quarter turn clockwise, 8 quarter turn anticlockwise. grid[y][x]
 * holds a block index by*BW+bx; *gw and *gh receive its size. */
static void turn_cw(int g[3][3], int *w, int *h)
{
    int t[3][3], nw = *h, nh = *w;
    for (int y = 0; y < nh; y++)
        for (int x = 0; x < nw; x++)
            t[y][x] = g[*h - 1 - x][y];
    memcpy(g, t, sizeof t);
    *w = nw;
    *h = nh;
}

static void mirror(int g[3][3], int w, int h)
{
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w / 2; x++) {
            int t = g[y][x];
            g[y][x] = g[y][w - 1 - x];
            g[y][w - 1 - x] = t;
        }
}

static void expected_grid(int o, int g[3][3], int *w, int *h)
{
    *w = BW;
    *h = BH;
    for (int y = 0; y < BH; y++)
        for (int x = 0; x < BW; x++)
            g[y][x] = y * BW + x;
    static const int turns[9] = { 0, 0, 0, 2, 2, 3, 1, 1, 3 }; /* clockwise quarter turns */
    if (o == 2 || o == 4 || o == 5 || o == 7)
        mirror(g, *w, *h);
    for (int i = 0; i < turns[o]; i++)
        turn_cw(g, w, h);
}

static void check_orientation(int o, bool big_endian)
{
    char name[64];
    snprintf(name, sizeof name, "o%d%s.JPG", o, big_endian ? "mm" : "");
    char *path = test_path(name);
    write_jpeg(path, o, big_endian);
    struct tb_sample s = { 0 };
    struct tb_err err;
    ck_assert_msg(tb_image_read_rgb(path, &s, &err) == TB_OK, "%s", err.msg);
    int g[3][3], gw, gh;
    expected_grid(o, g, &gw, &gh);
    ck_assert_uint_eq(s.width, (uint32_t)(gw * BLOCK));
    ck_assert_uint_eq(s.height, (uint32_t)(gh * BLOCK));
    for (int by = 0; by < gh; by++)
        for (int bx = 0; bx < gw; bx++) {
            const uint8_t *want = block_colour[g[by][bx] / BW][g[by][bx] % BW];
            const uint8_t *got = s.image + (((size_t)by * BLOCK + BLOCK / 2) * s.width + bx * BLOCK + BLOCK / 2) * 3;
            for (int c = 0; c < 3; c++)
                ck_assert_msg(abs(got[c] - want[c]) < 30, "orientation %d, block (%d,%d): %d,%d,%d, want %d,%d,%d", o,
                              bx, by, got[0], got[1], got[2], want[0], want[1], want[2]);
        }
    tb_sample_release(&s);
    free(path);
}

START_TEST(jpeg_exif_orientations)
{
    for (int o = 0; o <= 8; o++) /* 0: no EXIF block at all */
        check_orientation(o, false);
    check_orientation(6, true);
    check_orientation(8, true);
}
END_TEST

START_TEST(png_image_and_labels)
{
    uint8_t *px = blocks_image();
    char *img = test_path("img.png"), *grey = test_path("grey.png"), *pal = test_path("pal.png");
    write_png(img, px, BW * BLOCK, BH * BLOCK, SPNG_COLOR_TYPE_TRUECOLOR, NULL, 0);
    const size_t n = (size_t)BW * BLOCK * BH * BLOCK;
    uint8_t *labels = malloc(n);
    for (size_t i = 0; i < n; i++)
        labels[i] = (uint8_t)(i % 37 == 0 ? 255 : i % 34);
    write_png(grey, labels, BW * BLOCK, BH * BLOCK, SPNG_COLOR_TYPE_GRAYSCALE, NULL, 0);
    uint8_t palette[3 * 40];
    for (int i = 0; i < 40; i++)
        palette[3 * i] = palette[3 * i + 1] = palette[3 * i + 2] = (uint8_t)(255 - i); /* colours unlike indices */
    uint8_t *indices = malloc(n);
    for (size_t i = 0; i < n; i++)
        indices[i] = (uint8_t)(i % 40);
    write_png(pal, indices, BW * BLOCK, BH * BLOCK, SPNG_COLOR_TYPE_INDEXED, palette, 40);

    struct tb_sample s = { 0 };
    struct tb_err err;
    ck_assert_msg(tb_image_read_rgb(img, &s, &err) == TB_OK, "%s", err.msg);
    ck_assert_uint_eq(s.width, BW * BLOCK);
    ck_assert_uint_eq(s.height, BH * BLOCK);
    ck_assert(memcmp(s.image, px, n * 3) == 0); /* lossless */
    ck_assert_msg(tb_image_read_label(grey, &s, &err) == TB_OK, "%s", err.msg);
    ck_assert(memcmp(s.label, labels, n) == 0);
    ck_assert_msg(tb_image_read_label(pal, &s, &err) == TB_OK, "%s", err.msg);
    ck_assert(memcmp(s.label, indices, n) == 0); /* indices, not colours */

    /* A label map of another size, or in colour, is refused naming it. */
    char *small = test_path("small.png");
    write_png(small, labels, 8, 8, SPNG_COLOR_TYPE_GRAYSCALE, NULL, 0);
    ck_assert_int_eq(tb_image_read_label(small, &s, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, small);
    ck_assert_contains(err.msg, "8x8 but its image is 48x32");
    ck_assert_int_eq(tb_image_read_label(img, &s, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "8-bit grey or palette");

    /* Palette indices beyond the palette (libspng decodes them as black) are refused, as
     * a label map and as an image: here index 39 with 39 entries. */
    char *short_pal = test_path("short-palette.png");
    write_png(short_pal, indices, BW * BLOCK, BH * BLOCK, SPNG_COLOR_TYPE_INDEXED, palette, 39);
    ck_assert_int_eq(tb_image_read_label(short_pal, &s, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, short_pal);
    ck_assert_contains(err.msg, "corrupt PNG: pixel (x 39, y 0) is palette index 39, but the palette has 39 entries");
    ck_assert_int_eq(tb_image_read_rgb(short_pal, &s, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "is palette index 39, but the palette has 39 entries");
    free(short_pal);
    tb_sample_release(&s);
    free(px);
    free(labels);
    free(indices);
    free(img);
    free(grey);
    free(pal);
    free(small);
}
END_TEST

static void truncate_copy(const char *from, const char *to, double keep)
{
    FILE *f = fopen(from, "rb");
    ck_assert_ptr_nonnull(f);
    unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    write_bytes(to, buf, (size_t)((double)n * keep));
}

static void refused(const char *path, const char *want)
{
    struct tb_sample s = { 0 };
    struct tb_err err;
    ck_assert_int_eq(tb_image_read_rgb(path, &s, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, path);
    ck_assert_contains(err.msg, want);
    tb_sample_release(&s);
}

/* A copy of PNG `from` whose first IDAT chunk's CRC has one bit flipped. */
static void flip_idat_crc(const char *from, const char *to)
{
    FILE *f = fopen(from, "rb");
    ck_assert_ptr_nonnull(f);
    static unsigned char d[1 << 20];
    size_t n = fread(d, 1, sizeof d, f);
    fclose(f);
    unsigned char *p = memmem(d, n, "IDAT", 4);
    ck_assert_ptr_nonnull(p);
    size_t len = (size_t)p[-4] << 24 | (size_t)p[-3] << 16 | (size_t)p[-2] << 8 | p[-1];
    ck_assert_uint_le((size_t)(p - d) + 4 + len + 4, n);
    p[4 + len] ^= 0x01;
    write_bytes(to, d, n);
}

/* A copy of `from` claiming w x h pixels: a PNG's IHDR (its CRC made right), a JPEG's
 * baseline frame header. The pixel data stays as it was. */
static void set_size(const char *from, const char *to, bool png, uint16_t w, uint16_t h)
{
    FILE *f = fopen(from, "rb");
    ck_assert_ptr_nonnull(f);
    static unsigned char d[1 << 20];
    size_t n = fread(d, 1, sizeof d, f);
    fclose(f);
    if (png) {
        unsigned char *p = memmem(d, n, "IHDR", 4);
        ck_assert_ptr_nonnull(p);
        const unsigned char size[8] = { 0, 0, w >> 8, w & 0xff, 0, 0, h >> 8, h & 0xff };
        memcpy(p + 4, size, 8);
        uint32_t crc = (uint32_t)crc32(0L, p, 4 + 13);
        const unsigned char c[4] = { crc >> 24, (crc >> 16) & 0xff, (crc >> 8) & 0xff, crc & 0xff };
        memcpy(p + 4 + 13, c, 4);
    } else {
        unsigned char *p = memmem(d, n, "\xff\xc0", 2);
        ck_assert_ptr_nonnull(p);
        const unsigned char size[4] = { h >> 8, h & 0xff, w >> 8, w & 0xff };
        memcpy(p + 5, size, 4);
    }
    write_bytes(to, d, n);
}

START_TEST(bad_files_refused)
{
    char *jpg = test_path("ok.jpg"), *png = test_path("ok.png");
    write_jpeg(jpg, 0, false);
    uint8_t *px = blocks_image();
    write_png(png, px, BW * BLOCK, BH * BLOCK, SPNG_COLOR_TYPE_TRUECOLOR, NULL, 0);
    char *tj = test_path("trunc.jpg"), *tp = test_path("trunc.png"), *empty = test_path("empty.png"),
         *text = test_path("text.png"), *missing = test_path("missing.png");
    char *tj90 = test_path("trunc90.jpg");
    truncate_copy(jpg, tj, 0.3);   /* inside the headers */
    truncate_copy(jpg, tj90, 0.9); /* inside the scan */
    truncate_copy(png, tp, 0.6);
    write_bytes(empty, "", 0);
    write_bytes(text, "hello, world\n", 13);
    refused(tj, "JPEG");
    refused(tj90, "truncated or corrupt JPEG");
    refused(tp, "PNG");
    refused(empty, "empty");
    refused(text, "neither a PNG nor a JPEG");
    refused(missing, "cannot open the image: No such file or directory");
    /* A CMYK JPEG is named as such (it was "corrupt"), with the way to convert it. */
    char *cmyk_path = test_path("cmyk.jpg");
    {
        const int w = 16, h = 8;
        unsigned char cmyk[16 * 8 * 4];
        for (size_t i = 0; i < sizeof cmyk; i++)
            cmyk[i] = (unsigned char)(i * 7);
        tjhandle enc = tjInitCompress();
        unsigned char *jpeg = NULL;
        unsigned long jn = 0;
        ck_assert_int_eq(tjCompress2(enc, cmyk, w, 0, h, TJPF_CMYK, &jpeg, &jn, TJSAMP_444, 90, 0), 0);
        write_bytes(cmyk_path, jpeg, jn);
        tjFree(jpeg);
        tjDestroy(enc);
    }
    refused(cmyk_path, "a CMYK JPEG (print colours), which trainbig does not read: convert it to RGB");
    free(cmyk_path);
    /* A chunk whose CRC does not match (libspng 0.7 decodes a bad IDAT CRC silently). */
    char *badcrc = test_path("badcrc.png");
    flip_idat_crc(png, badcrc);
    refused(badcrc, "corrupt PNG: chunk IDAT at byte");
    free(badcrc);
    /* A few KB claiming 32768x32768 pixels had 4 GiB allocated for it before decoding (an
     * out-of-memory for fuzz_jpeg); the pixels are bounded, the file named with its size. */
    char *bigj = test_path("big.jpg"), *bigp = test_path("big.png");
    set_size(jpg, bigj, false, 32768, 32768);
    refused(bigj, "a JPEG of 32768x32768 pixels is larger than trainbig reads (at most 67108864 pixels");
    set_size(png, bigp, true, 16384, 8193);
    refused(bigp, "a PNG of 16384x8193 pixels is larger than trainbig reads");
    free(bigj);
    free(bigp);
    /* Not regular files: refused by what they are, without blocking or reading forever. */
    char *fifo = test_path("fifo.png"), *zero = test_path("zero.png"), *dir = test_path("dir.png");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(symlink("/dev/zero", zero), 0);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    refused(fifo, "it is a FIFO, not a regular file");
    refused(zero, "it is a character device, not a regular file");
    refused(dir, "it is a directory, not a regular file");
    free(fifo);
    free(zero);
    free(dir);
    free(px);
    free(jpg);
    free(png);
    free(tj);
    free(tj90);
    free(tp);
    free(empty);
    free(text);
    free(missing);
}
END_TEST

static Suite *image_suite(void)
{
    Suite *s = suite_create("image");
    TCase *tc = tcase_create("decode");
    tcase_add_test(tc, jpeg_exif_orientations);
    tcase_add_test(tc, png_image_and_labels);
    tcase_add_test(tc, bad_files_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return test_run_suite(image_suite());
}
