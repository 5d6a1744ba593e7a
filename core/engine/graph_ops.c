/* core/engine/graph_ops.c: the builder's call for each op kind (trainbig/graph.h): its
 * op made from its inputs and parameters, its outputs from the kind's shape rule
 * (op_kinds.c), and the parameters and buffers an op owns (a convolution's weight, a
 * batch norm's statistics) named in the current scope. graph.c holds the graph, its
 * nodes and names; it calls nothing here. */
#include "config.h"

#include "core/engine/graph_internal.h"
#include "core/engine/op_kinds_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Starts an op named `name` (scoped) or kind+number; NULL after an earlier error. */
static struct tb_gop *new_op(struct tb_graph *g, enum tb_op_kind kind, const char *name)
{
    if (tb_graph_failed(g))
        return NULL;
    if (g->nops == g->ops_cap) {
        size_t cap = g->ops_cap ? 2 * g->ops_cap : 64;
        void *p = realloc(g->ops, cap * sizeof *g->ops);
        if (!p) {
            tb_graph_fail(g, "out of memory");
            return NULL;
        }
        g->ops = p;
        g->ops_cap = cap;
    }
    struct tb_gop *o = &g->ops[g->nops];
    memset(o, 0, sizeof *o);
    o->op.kind = kind;
    o->op.id = (uint32_t)g->nops;
    if (name) {
        o->name = tb_graph_scoped(g, name);
    } else {
        char auto_name[64];
        snprintf(auto_name, sizeof auto_name, "%s%zu", tb_op_kind_name(kind), g->nops);
        o->name = tb_graph_scoped(g, auto_name);
    }
    if (!o->name) {
        tb_graph_fail(g, "out of memory");
        return NULL;
    }
    return o;
}

static void add_input(struct tb_gop *o, struct tb_node *x)
{
    o->in[o->op.nin] = x;
    o->op.in[o->op.nin++] = x->desc;
}

/* Adds the outputs to the graph and commits the op; returns output 0. */
static struct tb_node *commit(struct tb_graph *g, struct tb_gop *o, uint32_t nout, const struct tb_tensor_desc *outs)
{
    bool grad = false;
    uint32_t gin = tb_op_grad_inputs(&o->op);
    for (uint32_t i = 0; i < o->op.nin; i++)
        if ((gin >> i & 1) && o->in[i]->requires_grad)
            grad = true;
    uint32_t gout = tb_op_grad_outputs(&o->op);
    for (uint32_t j = 0; j < nout; j++) {
        char *name;
        if (j == 0)
            name = strdup(o->name);
        else {
            size_t n = strlen(o->name) + 16;
            name = malloc(n);
            if (name)
                snprintf(name, n, "%s:%u", o->name, j);
        }
        struct tb_node *y = tb_graph_new_node(g, TB_NODE_VALUE, outs[j], name);
        if (!y) {
            free(o->name);
            return NULL;
        }
        y->producer = (int32_t)g->nops;
        y->out_index = j;
        y->requires_grad = grad && (gout >> j & 1) && tb_dtype_is_float(outs[j].dtype);
        o->out[j] = y;
        o->op.out[j] = outs[j];
    }
    o->op.nout = nout;
    g->nops++;
    return o->out[0];
}

/* Whether x can be an op's input: not NULL, and no earlier error. Dtypes and shapes are
 * the op contract's (op_rules.c). */
static bool usable(struct tb_graph *g, const char *op, struct tb_node *x)
{
    if (tb_graph_failed(g))
        return false;
    if (!x) {
        tb_graph_fail(g, "%s: an input is NULL (a node from another graph, or a bug in the model)", op);
        return false;
    }
    return true;
}

/* The dtype autocast gives input i of o, or o's own dtype when it stays (op_kinds_internal.h,
 * enum tb_autocast): an f32 input stays f32 where the row says F32; float-class inputs go to
 * the graph's precision for a LOW kind, else stay unless they differ (then all go to f32). */
static enum tb_dtype autocast_to(const struct tb_graph *g, const struct tb_gop *o, uint32_t i)
{
    const struct tb_op_row *k = tb_op_row(o->op.kind);
    const enum tb_dtype d = o->in[i]->desc.dtype;
    if (!k || !tb_dtype_is_float(d) || o->op.kind == TB_OP_CAST)
        return d;
    if (tb_op_row_dtype(k, i) != TB_OP_FLOAT)
        return tb_op_row_dtype(k, i) == TB_F32 ? TB_F32 : d;
    if (k->autocast == TB_AUTOCAST_LOW && g->precision != TB_F32)
        return g->precision;
    for (uint32_t j = 0; j < o->op.nin; j++)
        if (tb_op_row_dtype(k, j) == TB_OP_FLOAT && o->in[j]->desc.dtype != d)
            return TB_F32;
    return d;
}

/* Applies autocast to o, which sits in the slot past the graph's last op: the casts it
 * needs are made first (taking that slot), then o goes to the slot after them. Returns o
 * where it now is, or NULL after an error. */
static struct tb_gop *autocast(struct tb_graph *g, struct tb_gop *o)
{
    enum tb_dtype to[TB_OP_MAX_IN];
    bool any = false;
    for (uint32_t i = 0; i < o->op.nin; i++) {
        to[i] = autocast_to(g, o, i);
        any |= to[i] != o->in[i]->desc.dtype;
    }
    if (!any)
        return o;
    struct tb_gop saved = *o;
    for (uint32_t i = 0; i < saved.op.nin; i++) {
        if (to[i] == saved.in[i]->desc.dtype)
            continue;
        struct tb_node *c = tb_cast(g, saved.in[i], to[i]);
        if (!c) {
            free(saved.name);
            return NULL;
        }
        saved.in[i] = c;
        saved.op.in[i] = c->desc;
    }
    struct tb_gop *slot = new_op(g, saved.op.kind, "slot");
    if (!slot) {
        free(saved.name);
        return NULL;
    }
    free(slot->name);
    saved.op.id = slot->op.id;
    *slot = saved;
    return slot;
}

/* Makes o's outputs by the op contract and commits it; returns output 0. An op the
 * contract refuses fails the graph, naming the op and its inputs. */
static struct tb_node *finish(struct tb_graph *g, struct tb_gop *o)
{
    if (!(o = autocast(g, o)))
        return NULL;
    struct tb_tensor_desc outs[TB_OP_MAX_OUT];
    uint32_t n;
    char why[600];
    if (tb_op_outputs(&o->op, outs, &n, why, sizeof why) == 0)
        return commit(g, o, n, outs);
    char names[600];
    size_t len = 0;
    names[0] = '\0';
    for (uint32_t i = 0; i < o->op.nin && len + 1 < sizeof names; i++) {
        int k = snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", o->in[i]->name);
        len = k < 0 ? len : len + (size_t)k < sizeof names ? len + (size_t)k : sizeof names - 1;
    }
    tb_graph_fail(g, "%s (inputs %s): %s", o->name, names, why);
    free(o->name);
    return NULL;
}

/* An op of kind on x alone, its parameters still to set; NULL with the error recorded. */
static struct tb_gop *one_input(struct tb_graph *g, enum tb_op_kind kind, struct tb_node *x)
{
    if (!usable(g, tb_op_kind_name(kind), x))
        return NULL;
    struct tb_gop *o = new_op(g, kind, NULL);
    if (o)
        add_input(o, x);
    return o;
}

static struct tb_node *unary(struct tb_graph *g, enum tb_op_kind kind, struct tb_node *x)
{
    struct tb_gop *o = one_input(g, kind, x);
    return o ? finish(g, o) : NULL;
}

struct tb_node *tb_relu(struct tb_graph *g, struct tb_node *x)
{
    return unary(g, TB_OP_RELU, x);
}

struct tb_node *tb_sigmoid(struct tb_graph *g, struct tb_node *x)
{
    return unary(g, TB_OP_SIGMOID, x);
}

struct tb_node *tb_cast(struct tb_graph *g, struct tb_node *x, enum tb_dtype dtype)
{
    if (!usable(g, "cast", x))
        return NULL;
    if (x->desc.dtype == dtype)
        return x;
    struct tb_gop *o = one_input(g, TB_OP_CAST, x);
    if (!o)
        return NULL;
    o->op.p.cast.dtype = (int32_t)dtype;
    return finish(g, o);
}

/* Makes leaf `suffix` of op o (o's name, then ".suffix"), named in full outside the scope:
 * parameters live in their op's own scope. */
static struct tb_node *op_leaf(struct tb_graph *g, const struct tb_gop *o, enum tb_node_kind kind, const char *suffix,
                               struct tb_shape shape, enum tb_init init)
{
    char full[1100];
    snprintf(full, sizeof full, "%s.%s", o->name, suffix);
    char saved[sizeof g->scope];
    memcpy(saved, g->scope, sizeof saved);
    g->scope[0] = '\0';
    struct tb_node *x = tb_graph_leaf(g, kind, full, TB_F32, shape, init);
    memcpy(g->scope, saved, sizeof saved);
    return x;
}

struct tb_node *tb_conv2d(struct tb_graph *g, const char *name, struct tb_node *x, int out_channels, int kernel,
                          int stride, int padding, int dilation, bool bias)
{
    if (!usable(g, "conv2d", x))
        return NULL;
    if (padding < 0)
        padding = dilation * (kernel - 1) / 2;
    if (out_channels < 1 || kernel < 1) {
        char *full = tb_graph_scoped(g, name ? name : "conv2d");
        tb_graph_fail(g, "conv2d %s: out_channels %d and kernel %d must be >= 1", full ? full : "?", out_channels,
                      kernel);
        free(full);
        return NULL;
    }
    struct tb_gop *o = new_op(g, TB_OP_CONV2D, name ? name : "conv");
    if (!o)
        return NULL;
    const struct tb_shape s = x->desc.shape;
    struct tb_node *w = op_leaf(g, o, TB_NODE_PARAM, "weight", (struct tb_shape){ out_channels, s.c, kernel, kernel },
                                TB_INIT_KAIMING_NORMAL);
    struct tb_node *b =
        bias ? op_leaf(g, o, TB_NODE_PARAM, "bias", (struct tb_shape){ 1, out_channels, 1, 1 }, TB_INIT_ZEROS) : NULL;
    if (!w || (bias && !b)) {
        free(o->name);
        return NULL;
    }
    add_input(o, x);
    add_input(o, w);
    if (b)
        add_input(o, b);
    struct tb_conv2d_params *p = &o->op.p.conv;
    p->kh = p->kw = kernel;
    p->stride_h = p->stride_w = stride;
    p->pad_h = p->pad_w = padding;
    p->dil_h = p->dil_w = dilation;
    p->has_bias = bias;
    return finish(g, o);
}

struct tb_node *tb_batchnorm(struct tb_graph *g, const char *name, struct tb_node *x)
{
    if (!usable(g, "batchnorm", x))
        return NULL;
    struct tb_gop *o = new_op(g, TB_OP_BATCHNORM, name ? name : "bn");
    if (!o)
        return NULL;
    struct tb_shape v = { 1, x->desc.shape.c, 1, 1 };
    static const char *const suffix[4] = { "weight", "bias", "running_mean", "running_var" };
    static const enum tb_init init[4] = { TB_INIT_ONES, TB_INIT_ZEROS, TB_INIT_ZEROS, TB_INIT_ONES };
    struct tb_node *leaves[4];
    for (int i = 0; i < 4; i++)
        leaves[i] = op_leaf(g, o, i < 2 ? TB_NODE_PARAM : TB_NODE_BUFFER, suffix[i], v, init[i]);
    if (tb_graph_failed(g)) {
        free(o->name);
        return NULL;
    }
    add_input(o, x);
    for (int i = 0; i < 4; i++)
        add_input(o, leaves[i]);
    o->op.p.bn.eps = 1e-5f;
    o->op.p.bn.momentum = 0.1f;
    o->op.p.bn.training = g->training;
    o->op.p.bn.sync = g->training && g->sync_bn;
    return finish(g, o);
}

struct tb_node *tb_maxpool(struct tb_graph *g, struct tb_node *x, int kernel, int stride, int padding)
{
    struct tb_gop *o = one_input(g, TB_OP_MAXPOOL, x);
    if (!o)
        return NULL;
    o->op.p.pool.k = kernel;
    o->op.p.pool.stride = stride;
    o->op.p.pool.pad = padding;
    return finish(g, o);
}

struct tb_node *tb_global_avgpool(struct tb_graph *g, struct tb_node *x)
{
    return unary(g, TB_OP_GLOBAL_AVGPOOL, x);
}

struct tb_node *tb_resize(struct tb_graph *g, struct tb_node *x, int out_h, int out_w, bool align_corners)
{
    struct tb_gop *o = one_input(g, TB_OP_RESIZE, x);
    if (!o)
        return NULL;
    o->op.p.resize.out_h = out_h;
    o->op.p.resize.out_w = out_w;
    o->op.p.resize.align_corners = align_corners;
    return finish(g, o);
}

struct tb_node *tb_concat(struct tb_graph *g, int n, struct tb_node *const *xs)
{
    if (tb_graph_failed(g))
        return NULL;
    if (n < 2 || n > TB_OP_MAX_IN)
        return tb_graph_fail(g, "concat: %d inputs; between 2 and %d are allowed", n, TB_OP_MAX_IN);
    for (int i = 0; i < n; i++)
        if (!usable(g, "concat", xs[i]))
            return NULL;
    struct tb_gop *o = new_op(g, TB_OP_CONCAT, NULL);
    if (!o)
        return NULL;
    for (int i = 0; i < n; i++)
        add_input(o, xs[i]);
    return finish(g, o);
}

/* An op of kind with inputs a and b (both must be usable), no parameters. */
static struct tb_gop *binary(struct tb_graph *g, enum tb_op_kind kind, struct tb_node *a, struct tb_node *b)
{
    if (!usable(g, tb_op_kind_name(kind), a) || !usable(g, tb_op_kind_name(kind), b))
        return NULL;
    struct tb_gop *o = new_op(g, kind, NULL);
    if (!o)
        return NULL;
    add_input(o, a);
    add_input(o, b);
    return o;
}

struct tb_node *tb_add(struct tb_graph *g, struct tb_node *a, struct tb_node *b)
{
    struct tb_gop *o = binary(g, TB_OP_ADD, a, b);
    return o ? finish(g, o) : NULL;
}

struct tb_node *tb_mul(struct tb_graph *g, struct tb_node *x, struct tb_node *gate)
{
    struct tb_gop *o = binary(g, TB_OP_MUL, x, gate);
    return o ? finish(g, o) : NULL;
}

struct tb_node *tb_dropout(struct tb_graph *g, struct tb_node *x, float p, bool channelwise)
{
    struct tb_gop *o = one_input(g, TB_OP_DROPOUT, x);
    if (!o)
        return NULL;
    o->op.p.dropout.p = p;
    o->op.p.dropout.channelwise = channelwise;
    o->op.p.dropout.training = g->training;
    return finish(g, o);
}

struct tb_node *tb_softmax_ce(struct tb_graph *g, struct tb_node *logits, struct tb_node *labels,
                              struct tb_node *weights, int ignore_label, bool per_image)
{
    struct tb_gop *o = binary(g, TB_OP_SOFTMAX_CE, logits, labels);
    if (!o)
        return NULL;
    if (weights)
        add_input(o, weights);
    o->op.p.ce.ignore_label = ignore_label;
    o->op.p.ce.weighted = weights != NULL;
    o->op.p.ce.per_image = per_image;
    return finish(g, o);
}

struct tb_node *tb_bce_logits(struct tb_graph *g, struct tb_node *logits, struct tb_node *targets)
{
    struct tb_gop *o = binary(g, TB_OP_BCE_LOGITS, logits, targets);
    return o ? finish(g, o) : NULL;
}

struct tb_node *tb_class_weights(struct tb_graph *g, struct tb_node *labels, int classes, int ignore_label)
{
    struct tb_gop *o = one_input(g, TB_OP_CLASS_WEIGHTS, labels);
    if (!o)
        return NULL;
    o->op.p.label.ignore_label = ignore_label;
    o->op.p.label.classes = classes;
    return finish(g, o);
}

struct tb_node *tb_mask_labels(struct tb_graph *g, struct tb_node *labels, struct tb_node *x, float threshold,
                               int ignore_label)
{
    struct tb_gop *o = binary(g, TB_OP_MASK_LABELS, labels, x);
    if (!o)
        return NULL;
    o->op.p.label.ignore_label = ignore_label;
    o->op.p.label.threshold = threshold;
    return finish(g, o);
}

struct tb_node *tb_dual_task(struct tb_graph *g, struct tb_node *logits, struct tb_node *labels, float tau,
                             int ignore_label)
{
    struct tb_gop *o = binary(g, TB_OP_DUAL_TASK, logits, labels);
    if (!o)
        return NULL;
    o->op.p.dual.tau = tau;
    o->op.p.dual.ignore_label = ignore_label;
    return finish(g, o);
}
