/* image.c: image files into samples (trainbig/image.h): PNG through libspng, JPEG through
 * TurboJPEG with the EXIF orientation applied. Whole files are read into memory first:
 * decoders then never see a short read, and the JPEG's EXIF block is at hand. */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/file.h>
#include <trainbig/image.h>

#ifdef HAVE_SPNG
#include <spng.h>
#include <zlib.h>
#endif
#ifdef HAVE_TURBOJPEG
#include <turbojpeg.h>
#endif

/* Larger than any image we expect (Cityscapes is 2048x1024, TACO's photos 6000x4000);
 * guards against bombs. The side alone let a 3 KB file claim 32768x32768 pixels and have
 * 4 GiB allocated for it before a byte was decoded: the pixels are bounded too (8192x8192:
 * 192 MiB of RGB and 64 MiB of labels). */
enum { MAX_SIDE = 1 << 15 };
static const uint64_t max_pixels = (uint64_t)1 << 26;

/* A w x h image is within the limits, or an error naming the file, its size and the limits. */
static int check_pixels(const char *path, const char *kind, uint64_t w, uint64_t h, struct tb_err *err)
{
    if (w * h <= max_pixels)
        return TB_OK;
    return tb_err_set(err, TB_ERR_RUNTIME,
                      "%s: a %s of %llux%llu pixels is larger than trainbig reads (at most %llu pixels, such as "
                      "8192x8192, and %d a side): scale it down",
                      path, kind, (unsigned long long)w, (unsigned long long)h, (unsigned long long)max_pixels,
                      MAX_SIDE);
}
static const size_t max_file_bytes = (size_t)1 << 30;

static int read_file(const char *path, unsigned char **data, size_t *size, struct tb_err *err)
{
    *data = NULL;
    FILE *f = tb_fopen_regular(path, "the image", TB_ERR_RUNTIME, err);
    if (!f)
        return err->status;
    int rc = TB_OK;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot read: %s", path, strerror(errno));
    } else if (n == 0) {
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: the file is empty", path);
    } else if ((size_t)n > max_file_bytes) {
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: %ld bytes is too large for an image", path, n);
    } else if (!(*data = malloc((size_t)n))) {
        rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory reading %s", path);
    } else if (fread(*data, 1, (size_t)n, f) != (size_t)n) {
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot read: %s", path, ferror(f) ? strerror(errno) : "short read");
        free(*data);
        *data = NULL;
    }
    *size = (size_t)(n > 0 ? n : 0);
    fclose(f);
    return rc;
}

static bool is_png(const unsigned char *d, size_t n)
{
    return n >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0;
}

static bool is_jpeg(const unsigned char *d, size_t n)
{
    return n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF;
}

/* ------------------------------------------------------------------ EXIF */

static unsigned get16(const unsigned char *p, bool le)
{
    return le ? (unsigned)p[0] | (unsigned)p[1] << 8 : (unsigned)p[0] << 8 | (unsigned)p[1];
}

static uint32_t get32(const unsigned char *p, bool le)
{
    return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
              : (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Orientation from a TIFF block (the EXIF payload after "Exif\0\0"): IFD0's tag 274. */
static int tiff_orientation(const unsigned char *t, size_t n)
{
    if (n < 8)
        return 1;
    bool le;
    if (t[0] == 'I' && t[1] == 'I')
        le = true;
    else if (t[0] == 'M' && t[1] == 'M')
        le = false;
    else
        return 1;
    if (get16(t + 2, le) != 42)
        return 1;
    uint32_t ifd = get32(t + 4, le);
    if (ifd > n - 2)
        return 1;
    unsigned count = get16(t + ifd, le);
    for (unsigned i = 0; i < count; i++) {
        size_t e = (size_t)ifd + 2 + (size_t)i * 12;
        if (e + 12 > n)
            return 1;
        if (get16(t + e, le) == 274 && get16(t + e + 2, le) == 3) { /* SHORT */
            unsigned v = get16(t + e + 8, le);
            return v >= 1 && v <= 8 ? (int)v : 1;
        }
    }
    return 1;
}

int tb_image_exif_orientation(const unsigned char *d, size_t n)
{
    if (!is_jpeg(d, n))
        return 1;
    /* Walk the markers before the image data: APP1 "Exif\0\0" holds the TIFF block. */
    size_t p = 2;
    while (p + 4 <= n && d[p] == 0xFF) {
        unsigned marker = d[p + 1];
        if (marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) {
            p += 2;
            continue;
        }
        if (marker == 0xDA || marker == 0xD9)
            break; /* start of scan: no EXIF before it */
        size_t len = get16(d + p + 2, false);
        if (len < 2 || p + 2 + len > n)
            break;
        if (marker == 0xE1 && len >= 8 && memcmp(d + p + 4, "Exif\0\0", 6) == 0)
            return tiff_orientation(d + p + 10, len - 8);
        p += 2 + len;
    }
    return 1;
}

/* Applies orientation o (2..8) to w x h RGB pixels in s->image; s takes the new size. */
static int orient(struct tb_sample *s, int o, const char *path, struct tb_err *err)
{
    const uint32_t w = s->width, h = s->height;
    const bool swap = o >= 5;
    const size_t bytes = (size_t)w * h * 3;
    uint8_t *src = malloc(bytes);
    if (!src)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory orienting %s", path);
    memcpy(src, s->image, bytes);
    const uint32_t ow = swap ? h : w, oh = swap ? w : h;
    s->width = ow;
    s->height = oh;
    for (uint32_t y = 0; y < oh; y++)
        for (uint32_t x = 0; x < ow; x++) {
            uint32_t sx, sy; /* where output pixel (x, y) comes from */
            switch (o) {
            case 2:
                sx = w - 1 - x, sy = y;
                break;
            case 3:
                sx = w - 1 - x, sy = h - 1 - y;
                break;
            case 4:
                sx = x, sy = h - 1 - y;
                break;
            case 5:
                sx = y, sy = x;
                break;
            case 6:
                sx = y, sy = h - 1 - x;
                break;
            case 7:
                sx = w - 1 - y, sy = h - 1 - x;
                break;
            default:
                sx = w - 1 - y, sy = x;
                break; /* 8 */
            }
            memcpy(s->image + ((size_t)y * ow + x) * 3, src + ((size_t)sy * w + sx) * 3, 3);
        }
    free(src);
    return TB_OK;
}

/* ------------------------------------------------------------------ decoders */

#ifdef HAVE_SPNG
static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Every chunk's CRC against its type and data: libspng 0.7 decodes an image whose IDAT
 * CRC is wrong without a word. Truncation is left to the decoder, which says so. */
static int check_crcs(const char *path, const unsigned char *d, size_t n, struct tb_err *err)
{
    for (size_t off = 8; off + 12 <= n;) {
        const uint32_t len = be32(d + off);
        if (len > n - off - 12)
            return TB_OK;
        const uint32_t want = be32(d + off + 8 + len);
        const uint32_t have = (uint32_t)crc32(0L, d + off + 4, len + 4);
        if (have != want)
            return tb_err_set(err, TB_ERR_RUNTIME,
                              "%s: corrupt PNG: chunk %.4s at byte %zu fails its CRC (%08x recorded, %08x computed)",
                              path, (const char *)d + off + 4, off, want, have);
        if (memcmp(d + off + 4, "IEND", 4) == 0)
            return TB_OK;
        off += 12 + (size_t)len;
    }
    return TB_OK;
}

/* A palette image's indices must name palette entries: libspng maps one beyond the
 * palette to black without a word. idx holds w x h raw indices. */
static int check_palette(const char *path, spng_ctx *ctx, const uint8_t *idx, uint32_t w, uint32_t h,
                         struct tb_err *err)
{
    struct spng_plte plte;
    if (spng_get_plte(ctx, &plte) != 0)
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: corrupt PNG: a palette image without a palette", path);
    for (size_t i = 0; i < (size_t)w * h; i++)
        if (idx[i] >= plte.n_entries)
            return tb_err_set(err, TB_ERR_RUNTIME,
                              "%s: corrupt PNG: pixel (x %zu, y %zu) is palette index %u, but the palette has %u "
                              "entries",
                              path, i % w, i / w, idx[i], plte.n_entries);
    return TB_OK;
}

/* The raw indices of a palette PNG checked against its palette, through a decoder of its
 * own (a context decodes once). */
static int check_palette_image(const char *path, const unsigned char *d, size_t n, const struct spng_ihdr *ihdr,
                               struct tb_err *err)
{
    spng_ctx *ctx = spng_ctx_new(0);
    uint8_t *idx = malloc((size_t)ihdr->width * ihdr->height);
    int rc = TB_OK, e = 0;
    if (!ctx || !idx)
        rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory reading %s", path);
    if (!rc && !(e = spng_set_png_buffer(ctx, d, n)))
        e = spng_decode_image(ctx, idx, (size_t)ihdr->width * ihdr->height, SPNG_FMT_PNG, 0);
    if (!rc && e)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: truncated or corrupt PNG: %s", path, spng_strerror(e));
    if (!rc)
        rc = check_palette(path, ctx, idx, ihdr->width, ihdr->height, err);
    free(idx);
    spng_ctx_free(ctx);
    return rc;
}

/* Decodes PNG bytes: RGB8 into s->image (sizing s), or with `label` the raw 8-bit values
 * into s->label (the size must be s's). Every chunk's CRC and every palette index is
 * checked. */
static int decode_png(const char *path, const unsigned char *d, size_t n, struct tb_sample *s, bool label,
                      struct tb_err *err)
{
    spng_ctx *ctx = spng_ctx_new(0);
    if (!ctx)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    struct spng_ihdr ihdr;
    int rc = check_crcs(path, d, n, err);
    if (rc)
        goto out;
    int e = spng_set_image_limits(ctx, MAX_SIDE, MAX_SIDE);
    if (!e)
        e = spng_set_png_buffer(ctx, d, n);
    if (!e)
        e = spng_get_ihdr(ctx, &ihdr);
    if (e) {
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: not a readable PNG: %s", path, spng_strerror(e));
        goto out;
    }
    if ((rc = check_pixels(path, "PNG", ihdr.width, ihdr.height, err)))
        goto out;
    if (label) {
        if (ihdr.bit_depth != 8 ||
            (ihdr.color_type != SPNG_COLOR_TYPE_GRAYSCALE && ihdr.color_type != SPNG_COLOR_TYPE_INDEXED)) {
            rc = tb_err_set(err, TB_ERR_RUNTIME,
                            "%s: a label map must be an 8-bit grey or palette PNG (this one has colour type %d, "
                            "bit depth %d)",
                            path, ihdr.color_type, ihdr.bit_depth);
            goto out;
        }
        if (ihdr.width != s->width || ihdr.height != s->height) {
            rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: the label map is %ux%u but its image is %ux%u", path, ihdr.width,
                            ihdr.height, s->width, s->height);
            goto out;
        }
        e = spng_decode_image(ctx, s->label, (size_t)ihdr.width * ihdr.height, SPNG_FMT_PNG, 0);
        if (!e && ihdr.color_type == SPNG_COLOR_TYPE_INDEXED) {
            rc = check_palette(path, ctx, s->label, ihdr.width, ihdr.height, err);
            goto out;
        }
    } else {
        if (ihdr.color_type == SPNG_COLOR_TYPE_INDEXED && ihdr.bit_depth == 8 &&
            (rc = check_palette_image(path, d, n, &ihdr, err)))
            goto out;
        size_t len = 0;
        e = spng_decoded_image_size(ctx, SPNG_FMT_RGB8, &len);
        if (!e && len != (size_t)ihdr.width * ihdr.height * 3)
            e = SPNG_EINTERNAL;
        if (!e && (rc = tb_sample_reserve(s, ihdr.width, ihdr.height, err))) {
            tb_err_prefix(err, "%s", path);
            goto out;
        }
        if (!e)
            e = spng_decode_image(ctx, s->image, len, SPNG_FMT_RGB8, 0);
    }
    if (e)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: truncated or corrupt PNG: %s", path, spng_strerror(e));
out:
    spng_ctx_free(ctx);
    return rc;
}
#else
static int decode_png(const char *path, const unsigned char *d, size_t n, struct tb_sample *s, bool label,
                      struct tb_err *err)
{
    (void)d, (void)n, (void)s, (void)label;
    return tb_err_set(err, TB_ERR_RUNTIME,
                      "%s: this trainbig was built without libspng and cannot read PNG files; install libspng-dev "
                      "and run ./configure again",
                      path);
}
#endif

#ifdef HAVE_TURBOJPEG
static int decode_jpeg(const char *path, const unsigned char *d, size_t n, struct tb_sample *s, struct tb_err *err)
{
    tjhandle tj = tjInitDecompress();
    if (!tj)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    int w, h, subsamp, colorspace, rc = TB_OK;
    if (tjDecompressHeader3(tj, d, (unsigned long)n, &w, &h, &subsamp, &colorspace) != 0) {
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: not a readable JPEG: %s", path, tjGetErrorStr2(tj));
    } else if (w < 1 || h < 1 || w > MAX_SIDE || h > MAX_SIDE) {
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: a JPEG of %dx%d pixels is not allowed (1..%d a side)", path, w, h,
                        MAX_SIDE);
    } else if ((rc = check_pixels(path, "JPEG", (uint64_t)w, (uint64_t)h, err)) != TB_OK) {
        /* err says it */
    } else if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
        /* TurboJPEG converts no CMYK to RGB, and guessing Adobe's inversion would train on
         * wrong colours: say what it is and how to fix it. */
        rc = tb_err_set(err, TB_ERR_RUNTIME,
                        "%s: a CMYK JPEG (print colours), which trainbig does not read: convert it to RGB, for "
                        "example with ImageMagick: convert IN.jpg -colorspace sRGB OUT.jpg",
                        path);
    } else if ((rc = tb_sample_reserve(s, (uint32_t)w, (uint32_t)h, err)) != TB_OK) {
        tb_err_prefix(err, "%s", path);
    } else if (tjDecompress2(tj, d, (unsigned long)n, s->image, w, 0, h, TJPF_RGB, TJFLAG_STOPONWARNING) != 0) {
        /* A warning too: a truncated file decodes "successfully" into grey otherwise. */
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: truncated or corrupt JPEG: %s", path, tjGetErrorStr2(tj));
    }
    tjDestroy(tj);
    if (rc)
        return rc;
    int o = tb_image_exif_orientation(d, n);
    return o > 1 ? orient(s, o, path, err) : TB_OK;
}
#else
static int decode_jpeg(const char *path, const unsigned char *d, size_t n, struct tb_sample *s, struct tb_err *err)
{
    (void)d, (void)n, (void)s;
    return tb_err_set(err, TB_ERR_RUNTIME,
                      "%s: this trainbig was built without TurboJPEG and cannot read JPEG files; install "
                      "libturbojpeg0-dev and run ./configure again",
                      path);
}
#endif

int tb_image_read_rgb(const char *path, struct tb_sample *s, struct tb_err *err)
{
    unsigned char *d;
    size_t n;
    int rc = read_file(path, &d, &n, err);
    if (rc)
        return rc;
    if (is_png(d, n))
        rc = decode_png(path, d, n, s, false, err);
    else if (is_jpeg(d, n))
        rc = decode_jpeg(path, d, n, s, err);
    else
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: neither a PNG nor a JPEG file (by its first bytes)", path);
    free(d);
    return rc;
}

int tb_image_read_label(const char *path, struct tb_sample *s, struct tb_err *err)
{
    unsigned char *d;
    size_t n;
    int rc = read_file(path, &d, &n, err);
    if (rc)
        return rc;
    if (is_png(d, n))
        rc = decode_png(path, d, n, s, true, err);
    else
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: a label map must be a PNG file", path);
    free(d);
    return rc;
}
