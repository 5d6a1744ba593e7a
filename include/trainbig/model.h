/* trainbig/model.h: the model vtable ([model] section).
 *
 * A model describes its network once, on a graph the core gives it, through the graph
 * builder (trainbig/graph.h); the core then schedules, runs and trains that graph. The
 * same build call makes the training graph (with its losses) and the inference graph
 * (predictions only): tb_graph_training() tells which.
 *
 * ABI 1.2 added build; a model plugin built for ABI 1.1 loads but cannot be trained. */
#ifndef TRAINBIG_MODEL_H
#define TRAINBIG_MODEL_H

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

/* Inputs the core knows how to feed, by the name a model gives tb_input():
 *   "image"   f32 (N,3,H,W)  the image normalised with the dataset's mean and std
 *   "canny"   f32 (N,1,H,W)  Canny edges of the 8-bit image before normalisation
 *                            (thresholds 10 and 100), 0 or 255
 *   "labels"  u8  (N,1,H,W)  class ids, ignore_label where unlabelled
 *   "edges"   u8  (N,1,H,W)  1 within 2 px of a class boundary, 0 elsewhere,
 *                            ignore_label where the label is ignored
 * A model declares only the inputs it reads; an inference graph must not read labels or
 * edges. */

struct tb_model_ops {
    /* As tb_backend_ops.create, from the validated [model] section. */
    int (*create)(const struct tb_section *cfg, void **ctx, struct tb_err *err);
    void (*destroy)(void *ctx);
    /* ABI 1.2. Builds the network on g for inputs `in`: its inputs, its parameters (named
     * by scope, see trainbig/graph.h), the outputs "seg_logits" (N,classes,H,W) and, where
     * the model has one, "edge_prob" (N,1,H,W); in a training graph also its loss terms
     * (tb_graph_loss, or tb_graph_output for a term that is only reported). Returns TB_OK,
     * or an error naming the key or the shape at fault; a graph error (tb_graph_error) is
     * reported by the core. */
    int (*build)(void *ctx, struct tb_graph *g, const struct tb_model_input *in, struct tb_err *err);
};

#ifdef __cplusplus
}
#endif
#endif
