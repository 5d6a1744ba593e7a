/* trainbig/model.h: the model vtable ([model] section).
 *
 * A model describes its network once, on a graph the core gives it, through the graph
 * builder (trainbig/graph.h); the core then schedules, runs and trains that graph. The
 * same build call makes the training graph (with its losses) and the inference graph
 * (predictions only): tb_graph_training() tells which. */
#ifndef TRAINBIG_MODEL_H
#define TRAINBIG_MODEL_H

#include <stdint.h>
#include <trainbig/error.h>
#include <trainbig/graph.h>
#include <trainbig/keys.h>
#include <trainbig/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the model will be fed, fixed for the life of a graph. */
struct tb_model_input {
    int batch;         /* images per step in this process */
    int channels;      /* of the image (3) */
    int height, width; /* of every image fed (crops are all one size) */
    int classes;       /* the dataset's classes; labels are 0..classes-1 or ignore_label */
    int ignore_label;  /* 255 */
};

/* The core feeds two inputs, by the name a model gives tb_input():
 *   "image"   f32 (N,3,H,W)  the image normalised with the dataset's mean and std
 *   "labels"  u8  (N,1,H,W)  class ids, ignore_label where unlabelled
 * Every other input a graph declares is the model's: its prepare() computes it from each
 * sample (G-SCNN's Canny edges of the image and its edge targets; trainbig/edges.h has
 * helpers). A model declares only the inputs it reads, and the core computes nothing for
 * an input no graph reads; an inference graph must not read labels, nor an input computed
 * from them. */

/* One sample as prepare() sees it: after augmentation and cropping, before the core
 * normalises the image. Memory is the core's, valid during the call. */
struct tb_model_sample {
    const char *name;      /* the sample, for messages */
    int width, height;     /* those of the graph's inputs */
    const uint8_t *rgb;    /* height x width x 3, interleaved, 0..255 */
    const uint8_t *labels; /* height x width class ids; all ignore_label where the sample has
                              none (predict) or nothing is to be learnt from it (a slot left
                              empty after a bad sample, with an all-zero rgb) */
    int ignore_label;
};

/* One input of the graph for prepare() to fill, for one sample: its (C,H,W) part of the
 * (N,C,H,W) input, channel planes one after another. Memory is the core's. */
struct tb_model_feed {
    const char *name; /* as the model gave tb_input() */
    enum tb_dtype dtype;
    int channels;
    void *data; /* channels x height x width elements of dtype */
};

struct tb_model_ops {
    /* ---- ABI 2.0 ---- */
    struct tb_plugin_head head; /* create from the [model] section: trainbig/plugin.h */
    /* Builds the network on g for inputs `in`: its inputs, its parameters (named
     * by scope, see trainbig/graph.h), the outputs "seg_logits" (N,classes,H,W) and, where
     * the model has one, "edge_prob" (N,1,H,W); in a training graph also its loss terms
     * (tb_graph_loss, or tb_graph_output for a term that is only reported). Returns TB_OK,
     * or an error naming the key or the shape at fault; a graph error (tb_graph_error) is
     * reported by the core. Required. */
    int (*build)(void *ctx, struct tb_graph *g, const struct tb_model_input *in, struct tb_err *err);
    /* Optional: a model whose graphs read only "image" and "labels" has none.
     * Fills feeds[0..nfeeds-1], the graph's inputs besides those two (in the order the
     * graph declared them), for sample s. Called from the data loader's threads, several
     * at once: it must only read ctx. *work is the calling thread's scratch memory, NULL
     * at the first call and the model's to allocate; keep it from sample to sample (a
     * fresh allocation per image costs page faults) and the core releases it with
     * free_work. Returns TB_OK, or an error naming s->name, which stops the run. */
    int (*prepare)(void *ctx, const struct tb_model_sample *s, const struct tb_model_feed *feeds, int nfeeds,
                   void **work, struct tb_err *err);
    /* Releases a thread's *work of prepare(); never called with NULL. */
    void (*free_work)(void *ctx, void *work);
};

#ifdef __cplusplus
}
#endif
#endif
