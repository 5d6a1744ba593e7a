/* lib/png_internal.h: PNG files in and out (png.c, with libspng): the images `trainbig
 * predict` reads and the pictures it writes. Without libspng at build time every call
 * fails with a message saying so. */
#ifndef TB_LIB_PNG_INTERNAL_H
#define TB_LIB_PNG_INTERNAL_H

#include <stdint.h>
#include <trainbig/dataset.h>
#include <trainbig/error.h>

/* Decodes any PNG (grey, palette, 16-bit, alpha: converted, alpha dropped) into s->image
 * as 8-bit RGB, sizing s with tb_sample_reserve(). A missing, truncated or corrupt file is
 * an error naming it. */
int tb_png_read_rgb(const char *path, struct tb_sample *s, struct tb_err *err);

/* Writes w x h 8-bit RGB pixels to path, through a temporary file renamed into place, so
 * a failure never leaves a partial picture. */
int tb_png_write_rgb(const char *path, const uint8_t *rgb, uint32_t w, uint32_t h, struct tb_err *err);

#endif
