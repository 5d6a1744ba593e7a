/* trainbig/dataset.h: the dataset vtable ([dataset] section).
 *
 * A dataset enumerates the samples of a split and decodes one: an RGB image and its label
 * map. The core does everything after decoding (augmentation, batching, sharding) in its
 * loader threads. */
#ifndef TRAINBIG_DATASET_H
#define TRAINBIG_DATASET_H

#include <stddef.h>
#include <stdint.h>
#include <trainbig/error.h>
#include <trainbig/keys.h>
#include <trainbig/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One decoded sample. The buffers are owned by the core, which reuses them from sample to
 * sample (a fresh multi-megabyte buffer costs milliseconds in page faults): a plugin sizes
 * them with tb_sample_reserve() and writes into them; it never frees them. */
struct tb_sample {
    uint32_t width, height; /* pixels, set by tb_sample_reserve() */
    uint8_t *image;         /* [height][width][3] RGB */
    uint8_t *label;         /* [height][width] class index, 255 = ignore */
    size_t capacity;        /* pixels the buffers can hold; managed by the core */
};

/* Sets s->width and s->height and makes the buffers hold that many pixels, keeping them
 * when they already do. Contents are undefined afterwards. Leaves s as it was and fills
 * err on failure: TB_ERR_NOMEM when memory runs out, TB_ERR_RUNTIME for a zero or
 * unrepresentably large size. */
int tb_sample_reserve(struct tb_sample *s, uint32_t width, uint32_t height, struct tb_err *err);

/* Frees the buffers and zeroes s. For the core and for tools that own samples. */
void tb_sample_release(struct tb_sample *s);

struct tb_class {
    const char *name; /* "road" */
    uint8_t color[3]; /* RGB, for rendered predictions */
};

/* The core creates an instance (head.create, from the validated [dataset] section), opens
 * one split of it (open_split), reads that split through the members after it, and
 * destroys it (head.destroy, which must also release an instance whose split was never
 * opened or failed to open). Every member is required. */
struct tb_dataset_ops {
    /* ---- ABI 2.0 ---- */
    struct tb_plugin_head head; /* trainbig/plugin.h */
    /* Opens `split` ("train", "val", "test"), once per instance, before any member below
     * is called. On failure returns a tb_status with err naming the file or directory at
     * fault; the core then destroys the instance. */
    int (*open_split)(void *ctx, const char *split, struct tb_err *err);
    /* Number of samples in the split. */
    size_t (*count)(void *ctx);
    /* A stable name for sample i (usually its file), owned by ctx; used in messages. */
    const char *(*sample_name)(void *ctx, size_t i);
    /* Decodes sample i into out (see struct tb_sample). May be called from several
     * threads at once for different samples and different out structs. A sample that
     * cannot be read returns TB_ERR_RUNTIME with err naming it and why. */
    int (*load)(void *ctx, size_t i, struct tb_sample *out, struct tb_err *err);
    /* The classes, label values 0..n-1; *classes is owned by ctx. */
    size_t (*classes)(void *ctx, const struct tb_class **classes);
};

#ifdef __cplusplus
}
#endif
#endif
