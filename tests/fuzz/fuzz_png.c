/* fuzz_png: PNG files as datasets read them (trainbig/image.h, core/data/image.c): a
 * colour image into RGB, then the same bytes as a label map (8-bit grey or palette, raw
 * values) of that size, through the CRC and palette checks. An image that does not
 * decode as colour is still read as a label map, of the size its header claims. Each
 * input is read as it is (the CRC check) and, where a chunk's CRC is wrong, once more
 * with the CRCs made right (the decoder behind the check). */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/image.h>
#ifdef HAVE_SPNG
#include <zlib.h> /* libspng's, for the CRCs */
#endif

#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads the bytes as a colour image, then as a label map (of the image's size, or of the
 * size the IHDR claims when the image was refused). */
static void read_both(const uint8_t *data, size_t size)
{
    char path[32];
    int fd = fuzz_file(data, size, path, sizeof path);
    if (fd < 0)
        return;
    struct tb_sample s;
    memset(&s, 0, sizeof s);
    struct tb_err err;
    tb_err_clear(&err);
    int rc = tb_image_read_rgb(path, &s, &err);
    if (rc != TB_OK && size >= 24) { /* the IHDR's width and height, where a PNG has them */
        uint32_t w = be32(data + 16), h = be32(data + 20);
        tb_err_clear(&err);
        rc = w && h && w <= 4096 && h <= 4096 ? tb_sample_reserve(&s, w, h, &err) : TB_ERR_RUNTIME;
    }
    if (rc == TB_OK) {
        tb_err_clear(&err);
        (void)tb_image_read_label(path, &s, &err);
    }
    tb_sample_release(&s);
    fuzz_file_close(fd);
}

/* A copy of a PNG with every chunk's CRC made right, so that mutations reach the decoder
 * past the CRC check; NULL when there is nothing to fix. The caller frees it. */
static uint8_t *fix_crcs(const uint8_t *data, size_t size)
{
#ifndef HAVE_SPNG
    return NULL; /* every PNG is refused alike */
#endif
    if (size < 8 || memcmp(data, "\x89PNG\r\n\x1a\n", 8) != 0)
        return NULL;
    uint8_t *copy = malloc(size);
    if (!copy)
        return NULL;
    memcpy(copy, data, size);
    bool changed = false;
    for (size_t off = 8; off + 12 <= size;) {
        const uint32_t len = be32(copy + off);
        if (len > size - off - 12)
            break;
#ifdef HAVE_SPNG
        const uint32_t crc = (uint32_t)crc32(0L, copy + off + 4, len + 4);
        uint8_t *at = copy + off + 8 + len;
        if (be32(at) != crc) {
            at[0] = (uint8_t)(crc >> 24), at[1] = (uint8_t)(crc >> 16), at[2] = (uint8_t)(crc >> 8),
            at[3] = (uint8_t)crc;
            changed = true;
        }
#endif
        off += 12 + (size_t)len;
    }
    if (!changed) {
        free(copy);
        return NULL;
    }
    return copy;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    read_both(data, size);
    uint8_t *fixed = fix_crcs(data, size);
    if (fixed) {
        read_both(fixed, size);
        free(fixed);
    }
    return 0;
}
