/* core/data/batch.h: a training batch as the model's inputs (batch.c): the decoded
 * samples turned into the tensors the model's graph reads, in host memory, NCHW. The core
 * fills "image" and "labels"; the model's prepare() fills the rest (trainbig/model.h). */
#ifndef TB_CORE_BATCH_H
#define TB_CORE_BATCH_H

#include <stdint.h>
#include <trainbig/dataset.h>
#include <trainbig/error.h>
#include <trainbig/model.h>

/* Host memory for the batch buffers: pinned memory of the backend, or malloc (alloc
 * NULL). */
struct tb_host_allocator {
    void *(*alloc)(void *ctx, size_t bytes);
    void (*free)(void *ctx, void *ptr);
    void *ctx;
};

/* The inputs a batch holds besides the image and the labels, and the model that fills
 * them (core/train/inputs.c makes one from a graph). feeds[i].data is unused here. The
 * spec must outlive every batch and work made with it. */
struct tb_batch_spec {
    int nfeeds;
    const struct tb_model_feed *feeds; /* name, dtype, channels of each */
    int (*prepare)(void *ctx, const struct tb_model_sample *s, const struct tb_model_feed *feeds, int nfeeds,
                   void **work, struct tb_err *err);
    void (*free_work)(void *ctx, void *work);
    void *model_ctx;
};

struct tb_batch {
    int n, h, w;
    float *image;                     /* "image"  (N,3,H,W): (x/255 - mean) / std per channel */
    uint8_t *labels;                  /* "labels" (N,1,H,W), 255 where ignored */
    void **feed_data;                 /* [spec->nfeeds]: (N,C,H,W) of each model input */
    const struct tb_batch_spec *spec; /* NULL: image and labels only */
    struct tb_host_allocator host;    /* what the buffers came from */
};

/* What tb_batch_put needs per thread, reused from sample to sample: the model's scratch
 * for prepare(), one slot's feeds, and a blank sample for slots with nothing to learn.
 * Zero it before first use; tb_batch_work_free. */
struct tb_batch_work {
    const struct tb_batch_spec *spec; /* that model_work belongs to */
    void *model_work;
    struct tb_model_feed *slot; /* [capacity_feeds] */
    int capacity_feeds;
    uint8_t *blank; /* 4 x blank_pixels: zero rgb, then ignored labels */
    size_t blank_pixels;
};
void tb_batch_work_free(struct tb_batch_work *w);

/* The normalisation of the reference (ImageNet statistics of RGB in [0, 1]). */
extern const float tb_image_mean[3], tb_image_std[3];

/* The host memory tb_batch_init takes for such a batch. */
uint64_t tb_batch_bytes(int n, int h, int w, const struct tb_batch_spec *spec);
/* Allocates the buffers of an n x h x w batch with the inputs of spec (NULL: image and
 * labels only), from host (NULL: malloc); 0, or TB_ERR_NOMEM with err filled. */
int tb_batch_init(struct tb_batch *b, int n, int h, int w, const struct tb_batch_spec *spec,
                  const struct tb_host_allocator *host, struct tb_err *err);
void tb_batch_fini(struct tb_batch *b);

/* The data of the model input `name`, or NULL when the batch has none. */
void *tb_batch_feed(const struct tb_batch *b, const char *name);

/* Fills slot i from sample s, which must be h x w (cropping is the data pipeline's job;
 * another size is TB_ERR_CONFIG), named `name` in messages. Ignore label 255. Threads may
 * fill different slots of one batch at once, each with its own work. An error of the
 * model's prepare() is returned as it said it (TB_ERR_RUNTIME: a bad sample). */
int tb_batch_put(struct tb_batch *b, int i, const struct tb_sample *s, const char *name, struct tb_batch_work *work,
                 struct tb_err *err);

/* Fills slot i with nothing to learn from: a zero image, every label ignored, and the
 * model's inputs as its prepare() makes them from such a sample. For a slot left empty
 * where the batch cannot take another sample. */
int tb_batch_put_ignored(struct tb_batch *b, int i, struct tb_batch_work *work, struct tb_err *err);

#endif
