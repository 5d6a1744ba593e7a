/* core/engine/graph.h: the graph as programs see it (graph.c): made by a model's
 * build_graph (trainbig/graph.h), run by an executor (core/engine/engine.h). Its layout
 * is the engine's own: core/engine/graph_internal.h. */
#ifndef TB_CORE_GRAPH_H
#define TB_CORE_GRAPH_H

#include <stdbool.h>
#include <stdint.h>
#include <trainbig/graph.h>

/* A new, empty graph; NULL when out of memory. */
struct tb_graph *tb_graph_new(bool training);
void tb_graph_free(struct tb_graph *g);

/* The precision the builder casts to ([train] precision: TB_F32, TB_BF16 or TB_F16), set
 * before the model builds: where a kind's autocast class says so (core/engine/op_kinds.c),
 * its inputs are cast to it; TB_F32 (the default) casts nothing to 16 bits. */
void tb_graph_set_precision(struct tb_graph *g, enum tb_dtype precision);

/* Whether g has the output `name` (tb_graph_output in trainbig/graph.h). */
bool tb_graph_has_output(const struct tb_graph *g, const char *name);

/* Which inputs of an op get a gradient, and which outputs carry one (bit i = index i). */
uint32_t tb_op_grad_inputs(const struct tb_op *op);
uint32_t tb_op_grad_outputs(const struct tb_op *op);

/* The multiply-adds of the convolutions of one training step, as FLOPs (2 per
 * multiply-add): forward, backward-data and backward-weights; no backward-data for a
 * convolution whose input needs no gradient (the first, on the image). The work that
 * counts, for rates against a machine's peak and for arithmetic intensity: tb_op_cost's
 * (bias adds included). */
double tb_graph_conv_flops(const struct tb_graph *g);

#endif
