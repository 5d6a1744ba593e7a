/* core/data/png_write.h: writing PNG files (png.c, with libspng): the pictures `trainbig
 * predict` writes. Without libspng at build time it fails with a message saying so.
 * Reading images is in the SDK: trainbig/image.h. */
#ifndef TB_CORE_PNG_WRITE_H
#define TB_CORE_PNG_WRITE_H

#include <stdint.h>
#include <trainbig/dataset.h>
#include <trainbig/error.h>

/* Writes w x h 8-bit RGB pixels to path, through a temporary file renamed into place, so
 * a failure never leaves a partial picture. */
int tb_png_write_rgb(const char *path, const uint8_t *rgb, uint32_t w, uint32_t h, struct tb_err *err);

/* The same for w x h 8-bit grey pixels (label maps, as trainbig/image.h reads them). */
int tb_png_write_gray(const char *path, const uint8_t *gray, uint32_t w, uint32_t h, struct tb_err *err);

#endif
