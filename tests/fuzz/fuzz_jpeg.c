/* fuzz_jpeg: JPEG files as datasets read them (trainbig/image.h, core/data/image.c):
 * TurboJPEG's decoding into RGB, and the EXIF block's orientation (APP1 markers, the
 * TIFF directory, tag 274) applied to the pixels. */
#include "config.h"

#include <stdint.h>
#include <string.h>
#include <trainbig/image.h>

#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    /* The EXIF walk on its own: tools call it on bytes they hold. */
    int o = tb_image_exif_orientation(data, size);
    if (o < 1 || o > 8)
        __builtin_trap(); /* documented as 1..8 */
    char path[32];
    int fd = fuzz_file(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    struct tb_sample s;
    memset(&s, 0, sizeof s);
    struct tb_err err;
    tb_err_clear(&err);
    (void)tb_image_read_rgb(path, &s, &err);
    tb_sample_release(&s);
    fuzz_file_close(fd);
    return 0;
}
