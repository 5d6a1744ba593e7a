/* core/engine/graph_internal.h: the graph's layout, as the engine sees it (graph.c and
 * graph_ops.c build it, schedule.c orders it, exec.c runs it). */
#ifndef TB_CORE_GRAPH_INTERNAL_H
#define TB_CORE_GRAPH_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <trainbig/error.h>
#include <trainbig/graph.h>

#include "core/engine/graph.h"

enum tb_node_kind {
    TB_NODE_INPUT = 1, /* fed by the core each step */
    TB_NODE_PARAM,     /* trainable, persistent */
    TB_NODE_BUFFER,    /* persistent state, not trained */
    TB_NODE_VALUE,     /* an op's output */
};

struct tb_node {
    uint32_t id; /* index in graph->nodes */
    enum tb_node_kind kind;
    struct tb_tensor_desc desc;
    char *name;         /* leaves: full dotted name; values: "<op name>" or "<op name>:<out>" */
    int32_t producer;   /* op index, -1 for leaves */
    uint32_t out_index; /* which output of the producer */
    enum tb_init init;  /* params and buffers */
    bool requires_grad; /* a parameter, or computed from one through differentiable inputs */
};

struct tb_gop {
    struct tb_op op; /* descriptions and parameters, as the backend sees them */
    struct tb_node *in[TB_OP_MAX_IN];
    struct tb_node *out[TB_OP_MAX_OUT];
    char *name; /* "trunk.mod2.conv1", "relu12" */
};

struct tb_named_node {
    char *name;
    struct tb_node *x;
    float weight; /* losses */
};

struct tb_graph {
    bool training;
    struct tb_node **nodes;
    size_t nnodes, nodes_cap;
    struct tb_gop *ops;
    size_t nops, ops_cap;
    struct tb_named_node *losses, *outputs;
    size_t nlosses, noutputs;
    char scope[1024];
    size_t scope_len[64]; /* scope length before each push */
    int depth;
    char error[1024]; /* empty while fine */
    bool sync_bn;     /* training batch norms synchronise over ranks ([model] sync_bn) */
    enum tb_dtype precision; /* what autocast casts to (tb_graph_set_precision) */
};

/* For the op builders (graph_ops.c), from graph.c: whether an error is recorded; record
 * the first one (later ones are its consequences) and return NULL; scope + "." + name,
 * allocated (NULL: out of memory); a new node owning name (NULL: the error recorded); a
 * leaf of kind: an input by its name, a parameter or buffer by its scoped name. */
bool tb_graph_failed(const struct tb_graph *g);
struct tb_node *tb_graph_fail(struct tb_graph *g, const char *fmt, ...) TB_PRINTF(2, 3);
char *tb_graph_scoped(const struct tb_graph *g, const char *name);
struct tb_node *tb_graph_new_node(struct tb_graph *g, enum tb_node_kind kind, struct tb_tensor_desc d, char *name);
struct tb_node *tb_graph_leaf(struct tb_graph *g, enum tb_node_kind kind, const char *name, enum tb_dtype dtype,
                              struct tb_shape shape, enum tb_init init);

/* Finds a leaf (input, parameter or buffer) by its full name; NULL when absent. */
struct tb_node *tb_graph_find(const struct tb_graph *g, const char *name);

/* Whether loss node n sums over the batch's images (per-image softmax cross-entropy) rather
 * than averaging over it: how a data-parallel step combines it over ranks (the global
 * batch's value is the ranks' sum, not their mean). */
bool tb_graph_loss_sums_images(const struct tb_graph *g, const struct tb_node *n);

#endif
