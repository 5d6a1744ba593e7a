/* core/data/batch_internal.h: a training batch as the model's inputs (batch.c): the decoded
 * samples turned into the tensors trainbig/model.h names, in host memory, NCHW. */
#ifndef TB_CORE_BATCH_INTERNAL_H
#define TB_CORE_BATCH_INTERNAL_H

#include <stdint.h>
#include <trainbig/dataset.h>
#include <trainbig/error.h>

#include "core/data/canny_internal.h"

/* Host memory for the batch buffers: pinned memory of the backend, or malloc (alloc
 * NULL). */
struct tb_host_allocator {
    void *(*alloc)(void *ctx, size_t bytes);
    void (*free)(void *ctx, void *ptr);
    void *ctx;
};

struct tb_batch {
    int n, h, w;
    float *image;                  /* "image"  (N,3,H,W): (x/255 - mean) / std per channel */
    float *canny;                  /* "canny"  (N,1,H,W): Canny edges of the 8-bit image, 0 or 255 */
    uint8_t *labels;               /* "labels" (N,1,H,W) */
    uint8_t *edges;                /* "edges"  (N,1,H,W): label boundaries within 2 px, 255 where ignored */
    struct tb_host_allocator host; /* what the four buffers came from */
};

/* What tb_batch_put needs per thread, reused from sample to sample: one image's Canny
 * edges as bytes and Canny's buffers. Zero it before first use; tb_batch_work_free. */
struct tb_batch_work {
    uint8_t *canny8;
    size_t capacity;
    struct tb_canny_work canny;
};
void tb_batch_work_free(struct tb_batch_work *w);

/* The normalisation of the reference (ImageNet statistics of RGB in [0, 1]). */
extern const float tb_image_mean[3], tb_image_std[3];

/* Allocates the buffers, from host (NULL: malloc); 0, or TB_ERR_NOMEM with err filled. */
int tb_batch_init(struct tb_batch *b, int n, int h, int w, const struct tb_host_allocator *host, struct tb_err *err);
void tb_batch_fini(struct tb_batch *b);

/* Fills slot i from sample s, which must be h x w (cropping is the data pipeline's job;
 * another size is TB_ERR_CONFIG), named `name` in messages. Ignore label 255. Threads may
 * fill different slots of one batch at once, each with its own work. */
int tb_batch_put(struct tb_batch *b, int i, const struct tb_sample *s, const char *name, struct tb_batch_work *work,
                 struct tb_err *err);

/* Fills slot i with nothing to learn from: a zero image and no edges, every label and
 * edge target ignored. For a sample skipped where the batch cannot take another. */
void tb_batch_put_ignored(struct tb_batch *b, int i);

#endif
