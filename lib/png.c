/* png.c: PNG reading and writing through libspng. */
#include "config.h"

#include "lib/png_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_SPNG
#include <spng.h>

/* Larger than any image we expect (Cityscapes is 2048x1024); guards against bombs. */
enum { MAX_SIDE = 1 << 15 };

int tb_png_read_rgb(const char *path, struct tb_sample *s, struct tb_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot open: %s", path, strerror(errno));
    spng_ctx *ctx = spng_ctx_new(0);
    if (!ctx) {
        fclose(f);
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    }
    struct spng_ihdr ihdr;
    size_t len = 0;
    int rc = TB_OK, e = spng_set_image_limits(ctx, MAX_SIDE, MAX_SIDE);
    if (!e)
        e = spng_set_png_file(ctx, f);
    if (!e)
        e = spng_get_ihdr(ctx, &ihdr);
    if (!e)
        e = spng_decoded_image_size(ctx, SPNG_FMT_RGB8, &len);
    if (e) {
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: not a readable PNG: %s", path, spng_strerror(e));
        goto out;
    }
    if (len != (size_t)ihdr.width * ihdr.height * 3) {
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: unexpected decoded size", path);
        goto out;
    }
    rc = tb_sample_reserve(s, ihdr.width, ihdr.height, err);
    if (rc) {
        tb_err_prefix(err, "%s", path);
        goto out;
    }
    e = spng_decode_image(ctx, s->image, len, SPNG_FMT_RGB8, 0);
    if (e)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: corrupt or truncated PNG: %s", path, spng_strerror(e));
out:
    spng_ctx_free(ctx);
    fclose(f);
    return rc;
}

int tb_png_write_rgb(const char *path, const uint8_t *rgb, uint32_t w, uint32_t h, struct tb_err *err)
{
    size_t n = strlen(path) + 16;
    char *tmp = malloc(n);
    if (!tmp)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    snprintf(tmp, n, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
    int e = ctx ? spng_set_png_file(ctx, f) : SPNG_EMEM;
    struct spng_ihdr ihdr = { w, h, 8, SPNG_COLOR_TYPE_TRUECOLOR, 0, 0, 0 };
    if (!e)
        e = spng_set_ihdr(ctx, &ihdr);
    if (!e)
        e = spng_encode_image(ctx, rgb, (size_t)w * h * 3, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
    spng_ctx_free(ctx);
    int closed = fclose(f);
    int rc = TB_OK;
    if (e)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot encode PNG: %s", path, spng_strerror(e));
    else if (closed != 0)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: write failed: %s", tmp, strerror(errno));
    else if (rename(tmp, path) != 0)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
    if (rc)
        unlink(tmp);
    free(tmp);
    return rc;
}

#else

int tb_png_read_rgb(const char *path, struct tb_sample *s, struct tb_err *err)
{
    (void)s;
    return tb_err_set(err, TB_ERR_RUNTIME,
                      "%s: this trainbig was built without libspng, so it cannot read PNG files; install "
                      "libspng-dev and run ./configure again",
                      path);
}

int tb_png_write_rgb(const char *path, const uint8_t *rgb, uint32_t w, uint32_t h, struct tb_err *err)
{
    (void)rgb;
    (void)w;
    (void)h;
    return tb_err_set(err, TB_ERR_RUNTIME,
                      "%s: this trainbig was built without libspng, so it cannot write PNG files; install "
                      "libspng-dev and run ./configure again",
                      path);
}

#endif
