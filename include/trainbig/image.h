/* trainbig/image.h: decoding image files, for dataset plugins.
 *
 * PNG through libspng and JPEG through TurboJPEG, recognised by their first bytes, not by
 * the file name (".jpg" and ".JPG" alike). A JPEG's EXIF orientation (tag 274) is applied
 * before anything else, so the pixels come out the way the picture is meant to be seen.
 * A missing, truncated or corrupt file is an error (TB_ERR_RUNTIME) naming the file and
 * what is wrong; nothing here crashes on bad bytes. A build without one of the libraries
 * reports so for files of that kind. Thread-safe: any number of files at once. */
#ifndef TRAINBIG_IMAGE_H
#define TRAINBIG_IMAGE_H

#include <trainbig/dataset.h>
#include <trainbig/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Decodes the image at path into s->image as 8-bit RGB (grey, palette, 16-bit and alpha
 * are converted; alpha is dropped), sizing s with tb_sample_reserve(): s->width and
 * s->height are the image's, after EXIF orientation. s->label is left undefined. */
int tb_image_read_rgb(const char *path, struct tb_sample *s, struct tb_err *err);

/* Decodes the label map at path into s->label: an 8-bit PNG, grey or palette, whose
 * values (or palette indices) are taken as they are, never through colour. It must be
 * s->width x s->height (read the image first): another size is an error naming both. */
int tb_image_read_label(const char *path, struct tb_sample *s, struct tb_err *err);

/* Where an image file's EXIF orientation maps it: 1 (as stored) to 8, as in the EXIF
 * standard; 1 when the file has none or is not a JPEG. For tests and tools. */
int tb_image_exif_orientation(const unsigned char *data, size_t size);

#ifdef __cplusplus
}
#endif
#endif
