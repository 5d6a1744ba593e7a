/* lib/batch_internal.h: a training batch as the model's inputs (batch.c): the decoded
 * samples turned into the tensors trainbig/model.h names, in host memory, NCHW. */
#ifndef TB_LIB_BATCH_INTERNAL_H
#define TB_LIB_BATCH_INTERNAL_H

#include <stdint.h>
#include <trainbig/dataset.h>
#include <trainbig/error.h>

#include "lib/canny_internal.h"

struct tb_batch {
    int n, h, w;
    float *image;    /* "image"  (N,3,H,W): (x/255 - mean) / std per channel */
    float *canny;    /* "canny"  (N,1,H,W): Canny edges of the 8-bit image, 0 or 255 */
    uint8_t *labels; /* "labels" (N,1,H,W) */
    uint8_t *edges;  /* "edges"  (N,1,H,W): label boundaries within 2 px, 255 where ignored */
    /* Reused from sample to sample: one image's Canny edges as bytes, Canny's buffers. */
    uint8_t *canny8;
    struct tb_canny_work canny_work;
};

/* The normalisation of the reference (ImageNet statistics of RGB in [0, 1]). */
extern const float tb_image_mean[3], tb_image_std[3];

/* Allocates the buffers; 0, or TB_ERR_NOMEM with err filled. */
int tb_batch_init(struct tb_batch *b, int n, int h, int w, struct tb_err *err);
void tb_batch_fini(struct tb_batch *b);

/* Fills slot i from sample s, which must be h x w (cropping is the data pipeline's job),
 * named `name` in messages. Ignore label 255. Not for two threads on one batch at once:
 * the Canny buffers are the batch's. */
int tb_batch_put(struct tb_batch *b, int i, const struct tb_sample *s, const char *name, struct tb_err *err);

#endif
