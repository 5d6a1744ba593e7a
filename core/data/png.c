/* png.c: PNG writing through libspng (reading is trainbig/image.h's, image.c). */
#include "config.h"

#include "core/data/png_write.h"
#include "core/util/atomic_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_SPNG
#include <spng.h>

/* Writes w x h 8-bit pixels of `channels` channels (1 grey, 3 RGB), whole or not at all. */
static int write_png(const char *path, const uint8_t *pixels, uint32_t w, uint32_t h, int channels, struct tb_err *err)
{
    struct tb_atomic_file a;
    int rc = tb_atomic_open(&a, path, err);
    if (rc)
        return rc;
    spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
    int e = ctx ? spng_set_png_file(ctx, a.f) : SPNG_EMEM;
    const uint8_t type = channels == 1 ? SPNG_COLOR_TYPE_GRAYSCALE : SPNG_COLOR_TYPE_TRUECOLOR;
    struct spng_ihdr ihdr = { w, h, 8, type, 0, 0, 0 };
    if (!e)
        e = spng_set_ihdr(ctx, &ihdr);
    if (!e)
        e = spng_encode_image(ctx, pixels, (size_t)w * h * (size_t)channels, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
    spng_ctx_free(ctx);
    if (e)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot encode PNG: %s", path, spng_strerror(e));
    return tb_atomic_close(&a, rc, err);
}

int tb_png_write_rgb(const char *path, const uint8_t *rgb, uint32_t w, uint32_t h, struct tb_err *err)
{
    return write_png(path, rgb, w, h, 3, err);
}

int tb_png_write_gray(const char *path, const uint8_t *gray, uint32_t w, uint32_t h, struct tb_err *err)
{
    return write_png(path, gray, w, h, 1, err);
}

#else

static int no_spng(const char *path, struct tb_err *err)
{
    return tb_err_set(err, TB_ERR_RUNTIME,
                      "%s: this trainbig was built without libspng, so it cannot write PNG files; install "
                      "libspng-dev and run ./configure again",
                      path);
}

int tb_png_write_rgb(const char *path, const uint8_t *rgb, uint32_t w, uint32_t h, struct tb_err *err)
{
    (void)rgb;
    (void)w;
    (void)h;
    return no_spng(path, err);
}

int tb_png_write_gray(const char *path, const uint8_t *gray, uint32_t w, uint32_t h, struct tb_err *err)
{
    (void)gray;
    (void)w;
    (void)h;
    return no_spng(path, err);
}

#endif
