/* fuzz_png: PNG files as datasets read them (trainbig/image.h, core/data/image.c): a
 * colour image into RGB, then the same bytes as a label map (8-bit grey or palette, raw
 * values) of that size, through the CRC and palette checks. An image that does not
 * decode as colour is still read as a label map, of the size its header claims. */
#include "config.h"

#include <stdint.h>
#include <string.h>
#include <trainbig/image.h>

#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    char path[32];
    int fd = fuzz_file(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    struct tb_sample s;
    memset(&s, 0, sizeof s);
    struct tb_err err;
    tb_err_clear(&err);
    int rc = tb_image_read_rgb(path, &s, &err);
    if (rc != TB_OK && size >= 24) { /* the IHDR's width and height, where a PNG has them */
        /* Small sizes only: a label map's buffer is the caller's, made before reading. */
        uint32_t w = be32(data + 16), h = be32(data + 20);
        tb_err_clear(&err);
        if (w && h && w <= 4096 && h <= 4096)
            rc = tb_sample_reserve(&s, w, h, &err);
    }
    if (rc == TB_OK) {
        tb_err_clear(&err);
        (void)tb_image_read_label(path, &s, &err);
    }
    tb_sample_release(&s);
    fuzz_file_close(fd);
    return 0;
}
