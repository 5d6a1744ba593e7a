/* core/data/dataloader.h: the data loader (dataloader.c). Worker threads decode the
 * samples of one split through its dataset plugin, augment them (augment.c) and assemble
 * batches (batch.c) in a bounded ring, ahead of the training loop that takes them in
 * order.
 *
 * Batches are numbered. What batch k holds depends only on (seed, k, rank, world): the
 * samples, their augmentation and any replacement of a bad one are pure functions of
 * them, never of which worker got there first. So a run gives the same batches with 0, 1
 * or 8 workers, and a resumed run the same as one that never stopped. */
#ifndef TB_CORE_DATALOADER_H
#define TB_CORE_DATALOADER_H

#include <stdbool.h>
#include <stdint.h>
#include <trainbig/dataset.h>
#include <trainbig/error.h>

#include "core/data/augment.h"
#include "core/data/batch.h"

/* The [dataset] keys of the loader (core_keys.c), read and checked. */
struct tb_data_settings {
    int workers, prefetch;
    int on_bad_sample; /* 0 fail, 1 skip */
    bool skip_bad;     /* on_bad_sample = skip */
    uint32_t crop;     /* 0: the first training image's size */
    bool augment;
    struct tb_augment aug; /* crop_w, crop_h left 0: the loader sets them */
    const char *val_size;  /* as written; the section's */
    uint32_t val_w, val_h; /* 0: validation images as decoded */
};

/* Samples mixed into each (epoch, sample) seed: tests and tools that want to reproduce
 * one augmentation use this. */
uint64_t tb_data_sample_seed(uint64_t seed, uint64_t epoch, size_t index);

/* The order of epoch `epoch` (0-based) of n samples: a Fisher-Yates shuffle from (seed,
 * epoch). */
void tb_data_shuffle(size_t *order, size_t n, uint64_t seed, uint64_t epoch);

/* The size of a split's batch images: the training crop or the validation size where
 * set, else the first sample's (the first that reads, with on_bad_sample = skip). */
int tb_data_image_size(const struct tb_dataset_ops *ops, void *ctx, const struct tb_data_settings *set, bool train,
                       uint32_t *w, uint32_t *h, struct tb_err *err);

struct tb_data_loader_config {
    const struct tb_dataset_ops *ops; /* the split: not owned, outlives the loader */
    void *ctx;
    const char *what; /* "dataset 'taco', train split", for messages; copied */
    /* Training: each epoch shuffled from (seed, epoch), samples augmented to the batch
     * size, the last partial batch of an epoch dropped. Otherwise: in order, resized to
     * the batch size when val_w is set, the last batch short. */
    bool train;
    int batch;       /* images per batch of this rank */
    int rank, world; /* this rank's disjoint share: world x batch images per step */
    uint64_t seed;
    uint32_t width, height;               /* of every image of a batch */
    const struct tb_data_settings *set;   /* copied */
    const struct tb_host_allocator *host; /* pinned memory for batches, or NULL */
    const struct tb_batch_spec *spec;     /* the model's inputs (NULL: none); outlives the loader */
};

/* One batch, as tb_data_loader_next() hands it over: valid until the next call of
 * next(), start() or close(). */
struct tb_loaded {
    uint64_t k; /* its number */
    const struct tb_batch *b;
    int count;                  /* images that count: the first `count` (validation's last
                                 * batch is short; the rest repeat or are ignored) */
    int nskipped;               /* bad samples skipped for this batch */
    const char *const *skipped; /* [nskipped]: "NAME: why" */
    const size_t *index;        /* [batch]: the sample in each place (after any
                                 * replacement), SIZE_MAX where none */
};

struct tb_data_loader;

/* Creates the loader and its worker threads (none yet busy). On failure *out is NULL
 * and err says why. */
int tb_data_loader_open(const struct tb_data_loader_config *cfg, struct tb_data_loader **out, struct tb_err *err);

/* Batches per epoch of this loader: for training the full global batches of the split,
 * for validation ceil(samples / (world x batch)). */
uint64_t tb_data_loader_batches(const struct tb_data_loader *l);

/* Makes batches begin..end-1 (for training, batch k is step k % batches of epoch
 * k / batches) the ones next() returns, and sets the workers on them. Drops whatever was
 * prepared before. */
void tb_data_loader_start(struct tb_data_loader *l, uint64_t begin, uint64_t end);

/* The next batch in order, waiting for it when it is not ready. A sample that fails
 * (with on_bad_sample = fail, or a failure that skipping cannot help: out of memory, a
 * sample of the wrong size) makes this return its error, naming the sample. Past end:
 * TB_ERR_RUNTIME. */
int tb_data_loader_next(struct tb_data_loader *l, struct tb_loaded *out, struct tb_err *err);

/* Stops and joins the workers and frees everything. NULL is fine. */
void tb_data_loader_close(struct tb_data_loader *l);

#endif
