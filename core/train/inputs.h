/* core/train/inputs.h: a graph's inputs and where each comes from (inputs.c): the
 * core feeds "image" and "labels"; every other input is the model's, made by its
 * prepare() (trainbig/model.h) into the batch's buffers. */
#ifndef TB_CORE_INPUTS_H
#define TB_CORE_INPUTS_H

#include <trainbig/error.h>
#include <trainbig/plugin.h>

#include "core/data/batch.h"
#include "core/engine/engine.h"

/* The model inputs of graph g, for batches of n images of w x h, filled by model plugin
 * `model` (its context model_ctx) into spec. Refuses, naming the model and the input, an
 * input the core does not feed when the model has no prepare(), one whose shape is not
 * (n, C, h, w), and "image" or "labels" of another dtype or shape than the core feeds.
 * spec's memory, the feeds' names included, is its own (it may outlive g):
 * tb_inputs_spec_free. */
int tb_inputs_spec(struct tb_batch_spec *spec, const struct tb_graph *g, const struct tb_plugin *model, void *model_ctx,
                   int n, int h, int w, struct tb_err *err);
void tb_inputs_spec_free(struct tb_batch_spec *spec);

/* Sets every input of g from batch b on executor x. */
int tb_inputs_set(struct tb_exec *x, const struct tb_graph *g, const struct tb_batch *b, struct tb_err *err);

#endif
