/* trainbig/graph.h: building a network as a static graph of ops.
 *
 * A model plugin calls these to describe its network once; the core then schedules it
 * (trainbig/schedule.h), runs it forward and backward on a backend, and updates its
 * parameters. Every call infers the shape of its result; a call whose inputs do not fit
 * (shapes, dtypes, parameters) records an error naming the op and the shapes, returns
 * NULL, and makes every later call return NULL too, so a model can build without checking
 * each step and ask tb_graph_error() once at the end.
 *
 * Nodes are tensors of the graph: inputs, parameters, buffers, or op results. They belong
 * to the graph and live as long as it does.
 *
 * Parameters are named by the scopes open when they are created, dotted:
 * tb_graph_push_scope(g, "trunk"); tb_graph_push_scope(g, "mod%d", 2); then
 * tb_conv2d(g, "conv1", ...) creates "trunk.mod2.conv1.weight". Names are unique in a
 * graph; a graph for training and one for inference built by the same code share their
 * parameters by name. */
#ifndef TRAINBIG_GRAPH_H
#define TRAINBIG_GRAPH_H

#include <stdbool.h>
#include <trainbig/error.h>
#include <trainbig/ops.h>
#include <trainbig/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tb_graph;
struct tb_node;

enum tb_init {
    TB_INIT_ZEROS = 1,
    TB_INIT_ONES,
    /* N(0, 2 / fan_in), fan_in = C * KH * KW: PyTorch's kaiming_normal_ for ReLU nets */
    TB_INIT_KAIMING_NORMAL,
    /* N(0, 2 / (fan_in + fan_out)), fan_out = O * KH * KW: xavier_normal_ */
    TB_INIT_XAVIER_NORMAL,
};

/* The first error recorded, or NULL. Owned by the graph. */
const char *tb_graph_error(const struct tb_graph *g);

/* True for a graph built for training (batch norm uses batch statistics, dropout drops,
 * backward runs); false for inference. */
bool tb_graph_training(const struct tb_graph *g);

/* Scopes prefix the names of parameters created inside them. printf-style. */
void tb_graph_push_scope(struct tb_graph *g, const char *fmt, ...) TB_PRINTF(2, 3);
void tb_graph_pop_scope(struct tb_graph *g);

/* The shape and dtype of a node (zeroes for NULL). */
struct tb_tensor_desc tb_node_desc(const struct tb_node *x);

/* ---- leaves ---- */

/* Data fed each step by the core under this name ("image", "labels", "edges"). */
struct tb_node *tb_input(struct tb_graph *g, const char *name, enum tb_dtype dtype, struct tb_shape shape);
/* A trainable f32 parameter, initialised once from the run seed and its full name. */
struct tb_node *tb_parameter(struct tb_graph *g, const char *name, struct tb_shape shape, enum tb_init init);
/* Non-trainable state kept across steps and in checkpoints (batch norm's running stats). */
struct tb_node *tb_buffer(struct tb_graph *g, const char *name, struct tb_shape shape, enum tb_init init);

/* ---- ops (see trainbig/ops.h for the exact semantics) ---- */

/* A kernel x kernel convolution to out_channels, creating `name`.weight (Kaiming normal)
 * and, with bias, `name`.bias (zeros). padding < 0 means "same": dilation*(kernel-1)/2. */
struct tb_node *tb_conv2d(struct tb_graph *g, const char *name, struct tb_node *x, int out_channels, int kernel,
                          int stride, int padding, int dilation, bool bias);
/* Batch norm over channels with `name`.weight (ones), `name`.bias (zeros) and buffers
 * `name`.running_mean (zeros), `name`.running_var (ones); eps 1e-5, momentum 0.1. */
struct tb_node *tb_batchnorm(struct tb_graph *g, const char *name, struct tb_node *x);
struct tb_node *tb_relu(struct tb_graph *g, struct tb_node *x);
struct tb_node *tb_sigmoid(struct tb_graph *g, struct tb_node *x);
/* x converted to a float dtype (f32, bf16, f16); x itself when it has that dtype. */
struct tb_node *tb_cast(struct tb_graph *g, struct tb_node *x, enum tb_dtype dtype);
struct tb_node *tb_maxpool(struct tb_graph *g, struct tb_node *x, int kernel, int stride, int padding);
struct tb_node *tb_global_avgpool(struct tb_graph *g, struct tb_node *x);
struct tb_node *tb_resize(struct tb_graph *g, struct tb_node *x, int out_h, int out_w, bool align_corners);
struct tb_node *tb_concat(struct tb_graph *g, int n, struct tb_node *const *xs);
struct tb_node *tb_add(struct tb_graph *g, struct tb_node *a, struct tb_node *b);
struct tb_node *tb_mul(struct tb_graph *g, struct tb_node *x, struct tb_node *gate);
/* Drops with probability p in a training graph; the identity in an inference graph. */
struct tb_node *tb_dropout(struct tb_graph *g, struct tb_node *x, float p, bool channelwise);
/* weights may be NULL (unweighted). */
struct tb_node *tb_softmax_ce(struct tb_graph *g, struct tb_node *logits, struct tb_node *labels,
                              struct tb_node *weights, int ignore_label, bool per_image);
struct tb_node *tb_bce_logits(struct tb_graph *g, struct tb_node *logits, struct tb_node *targets);
/* Per-image class weights (N,classes,1,1) from u8 labels, and labels masked to
 * ignore_label where x <= threshold. Neither carries a gradient. */
struct tb_node *tb_class_weights(struct tb_graph *g, struct tb_node *labels, int classes, int ignore_label);
struct tb_node *tb_mask_labels(struct tb_graph *g, struct tb_node *labels, struct tb_node *x, float threshold,
                               int ignore_label);
/* G-SCNN's dual-task regulariser on the logits (N,K,H,W) and their u8 labels, with a
 * Gumbel-softmax of temperature tau (the reference: 0.5); a (1,1,1,1) loss. Its
 * noise is drawn from the run's seed and the step, as dropout's. */
struct tb_node *tb_dual_task(struct tb_graph *g, struct tb_node *logits, struct tb_node *labels, float tau,
                             int ignore_label);

/* ---- what the graph is for ---- */

/* Adds weight * x (a (1,1,1,1) loss) to the objective that backward differentiates. */
void tb_graph_loss(struct tb_graph *g, const char *name, struct tb_node *x, float weight);
/* Keeps x readable after forward under `name` (predictions, loss terms for the log). */
void tb_graph_output(struct tb_graph *g, const char *name, struct tb_node *x);

#ifdef __cplusplus
}
#endif
#endif
