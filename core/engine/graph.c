/* graph.c: the graph builder: shape inference, parameter naming, error recording. */
#include "config.h"

#include "core/engine/graph_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tb_graph *tb_graph_new(bool training)
{
    struct tb_graph *g = calloc(1, sizeof *g);
    if (g)
        g->training = training;
    return g;
}

void tb_graph_free(struct tb_graph *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->nnodes; i++) {
        free(g->nodes[i]->name);
        free(g->nodes[i]);
    }
    for (size_t i = 0; i < g->nops; i++)
        free(g->ops[i].name);
    for (size_t i = 0; i < g->nlosses; i++)
        free(g->losses[i].name);
    for (size_t i = 0; i < g->noutputs; i++)
        free(g->outputs[i].name);
    free(g->nodes);
    free(g->ops);
    free(g->losses);
    free(g->outputs);
    free(g);
}

const char *tb_graph_error(const struct tb_graph *g)
{
    return g && g->error[0] ? g->error : NULL;
}

bool tb_graph_training(const struct tb_graph *g)
{
    return g->training;
}

static bool failed(const struct tb_graph *g)
{
    return g->error[0] != '\0';
}

/* Records the first error; later ones are consequences and are dropped. */
static struct tb_node *fail(struct tb_graph *g, const char *fmt, ...) TB_PRINTF(2, 3);
static struct tb_node *fail(struct tb_graph *g, const char *fmt, ...)
{
    if (failed(g))
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->error, sizeof g->error, fmt, ap);
    va_end(ap);
    if (!g->error[0])
        snprintf(g->error, sizeof g->error, "graph error");
    return NULL;
}

/* "NxCxHxW" for messages; a static buffer per slot. */
static const char *shape_text(struct tb_shape s, int slot)
{
    static _Thread_local char buf[4][48];
    snprintf(buf[slot & 3], sizeof buf[0], "%dx%dx%dx%d", s.n, s.c, s.h, s.w);
    return buf[slot & 3];
}

void tb_graph_push_scope(struct tb_graph *g, const char *fmt, ...)
{
    if (g->depth >= 64) {
        fail(g, "scopes nested deeper than 64");
        return;
    }
    g->scope_len[g->depth++] = strlen(g->scope);
    size_t len = strlen(g->scope);
    if (len && len + 1 < sizeof g->scope)
        g->scope[len++] = '.';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->scope + len, sizeof g->scope - len, fmt, ap);
    va_end(ap);
}

void tb_graph_pop_scope(struct tb_graph *g)
{
    if (g->depth == 0) {
        fail(g, "tb_graph_pop_scope without a matching push");
        return;
    }
    g->scope[g->scope_len[--g->depth]] = '\0';
}

/* scope + "." + name, allocated. */
static char *scoped(const struct tb_graph *g, const char *name)
{
    size_t n = strlen(g->scope) + strlen(name) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s%s%s", g->scope, *g->scope ? "." : "", name);
    return s;
}

struct tb_tensor_desc tb_node_desc(const struct tb_node *x)
{
    struct tb_tensor_desc none = { 0 };
    return x ? x->desc : none;
}

struct tb_node *tb_graph_find(const struct tb_graph *g, const char *name)
{
    for (size_t i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->kind != TB_NODE_VALUE && strcmp(g->nodes[i]->name, name) == 0)
            return g->nodes[i];
    return NULL;
}

bool tb_graph_has_output(const struct tb_graph *g, const char *name)
{
    for (size_t i = 0; i < g->noutputs; i++)
        if (strcmp(g->outputs[i].name, name) == 0)
            return true;
    return false;
}

static struct tb_node *new_node(struct tb_graph *g, enum tb_node_kind kind, struct tb_tensor_desc d, char *name)
{
    if (!name)
        return fail(g, "out of memory");
    if (g->nnodes == g->nodes_cap) {
        size_t cap = g->nodes_cap ? 2 * g->nodes_cap : 64;
        void *p = realloc(g->nodes, cap * sizeof *g->nodes);
        if (!p) {
            free(name);
            return fail(g, "out of memory");
        }
        g->nodes = p;
        g->nodes_cap = cap;
    }
    struct tb_node *x = calloc(1, sizeof *x);
    if (!x) {
        free(name);
        return fail(g, "out of memory");
    }
    x->id = (uint32_t)g->nnodes;
    x->kind = kind;
    x->desc = d;
    x->name = name;
    x->producer = -1;
    g->nodes[g->nnodes++] = x;
    return x;
}

static bool valid_shape(struct tb_shape s)
{
    return s.n > 0 && s.c > 0 && s.h > 0 && s.w > 0;
}

static struct tb_node *leaf(struct tb_graph *g, enum tb_node_kind kind, const char *name, enum tb_dtype dtype,
                            struct tb_shape shape, enum tb_init init)
{
    if (failed(g))
        return NULL;
    if (!name || !*name)
        return fail(g, "a graph %s needs a name", kind == TB_NODE_INPUT ? "input" : "parameter");
    char *full = kind == TB_NODE_INPUT ? strdup(name) : scoped(g, name);
    if (!full)
        return fail(g, "out of memory");
    if (!valid_shape(shape)) {
        fail(g, "%s: shape %s has a side < 1", full, shape_text(shape, 0));
        free(full);
        return NULL;
    }
    if (tb_graph_find(g, full)) {
        fail(g, "%s: the name is used twice in the graph", full);
        free(full);
        return NULL;
    }
    struct tb_tensor_desc d = { dtype, shape };
    struct tb_node *x = new_node(g, kind, d, full);
    if (x) {
        x->init = init;
        x->requires_grad = kind == TB_NODE_PARAM;
    }
    return x;
}

struct tb_node *tb_input(struct tb_graph *g, const char *name, enum tb_dtype dtype, struct tb_shape shape)
{
    if (!failed(g) && dtype != TB_F32 && dtype != TB_U8)
        return fail(g, "input %s: unknown dtype %d", name ? name : "?", (int)dtype);
    return leaf(g, TB_NODE_INPUT, name, dtype, shape, TB_INIT_ZEROS);
}

struct tb_node *tb_parameter(struct tb_graph *g, const char *name, struct tb_shape shape, enum tb_init init)
{
    return leaf(g, TB_NODE_PARAM, name, TB_F32, shape, init);
}

struct tb_node *tb_buffer(struct tb_graph *g, const char *name, struct tb_shape shape, enum tb_init init)
{
    return leaf(g, TB_NODE_BUFFER, name, TB_F32, shape, init);
}

/* ------------------------------------------------------------------ ops */

/* Starts an op named `name` (scoped) or kind+number; NULL after an earlier error. */
static struct tb_gop *new_op(struct tb_graph *g, enum tb_op_kind kind, const char *name)
{
    if (failed(g))
        return NULL;
    if (g->nops == g->ops_cap) {
        size_t cap = g->ops_cap ? 2 * g->ops_cap : 64;
        void *p = realloc(g->ops, cap * sizeof *g->ops);
        if (!p) {
            fail(g, "out of memory");
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
        o->name = scoped(g, name);
    } else {
        char auto_name[64];
        snprintf(auto_name, sizeof auto_name, "%s%zu", tb_op_kind_name(kind), g->nops);
        o->name = scoped(g, auto_name);
    }
    if (!o->name) {
        fail(g, "out of memory");
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
        struct tb_node *y = new_node(g, TB_NODE_VALUE, outs[j], name);
        if (!y) {
            free(o->name);
            return NULL;
        }
        y->producer = (int32_t)g->nops;
        y->out_index = j;
        y->requires_grad = grad && (gout >> j & 1) && outs[j].dtype == TB_F32;
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
    if (failed(g))
        return false;
    if (!x) {
        fail(g, "%s: an input is NULL (a node from another graph, or a bug in the model)", op);
        return false;
    }
    return true;
}

/* Makes o's outputs by the op contract and commits it; returns output 0. An op the
 * contract refuses fails the graph, naming the op and its inputs. */
static struct tb_node *finish(struct tb_graph *g, struct tb_gop *o)
{
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
    fail(g, "%s (inputs %s): %s", o->name, names, why);
    free(o->name);
    return NULL;
}

static struct tb_node *unary(struct tb_graph *g, enum tb_op_kind kind, struct tb_node *x)
{
    if (!usable(g, tb_op_kind_name(kind), x))
        return NULL;
    struct tb_gop *o = new_op(g, kind, NULL);
    if (!o)
        return NULL;
    add_input(o, x);
    return finish(g, o);
}

struct tb_node *tb_relu(struct tb_graph *g, struct tb_node *x)
{
    return unary(g, TB_OP_RELU, x);
}

struct tb_node *tb_sigmoid(struct tb_graph *g, struct tb_node *x)
{
    return unary(g, TB_OP_SIGMOID, x);
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
    struct tb_node *x = leaf(g, kind, full, TB_F32, shape, init);
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
        char *full = scoped(g, name ? name : "conv2d");
        fail(g, "conv2d %s: out_channels %d and kernel %d must be >= 1", full ? full : "?", out_channels, kernel);
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
    if (failed(g)) {
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
    if (!usable(g, "maxpool", x))
        return NULL;
    struct tb_gop *o = new_op(g, TB_OP_MAXPOOL, NULL);
    if (!o)
        return NULL;
    add_input(o, x);
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
    if (!usable(g, "resize", x))
        return NULL;
    struct tb_gop *o = new_op(g, TB_OP_RESIZE, NULL);
    if (!o)
        return NULL;
    add_input(o, x);
    o->op.p.resize.out_h = out_h;
    o->op.p.resize.out_w = out_w;
    o->op.p.resize.align_corners = align_corners;
    return finish(g, o);
}

struct tb_node *tb_concat(struct tb_graph *g, int n, struct tb_node *const *xs)
{
    if (failed(g))
        return NULL;
    if (n < 2 || n > TB_OP_MAX_IN)
        return fail(g, "concat: %d inputs; between 2 and %d are allowed", n, TB_OP_MAX_IN);
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
    if (!usable(g, "dropout", x))
        return NULL;
    struct tb_gop *o = new_op(g, TB_OP_DROPOUT, NULL);
    if (!o)
        return NULL;
    add_input(o, x);
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
    if (!usable(g, "class_weights", labels))
        return NULL;
    struct tb_gop *o = new_op(g, TB_OP_CLASS_WEIGHTS, NULL);
    if (!o)
        return NULL;
    add_input(o, labels);
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

static void add_named(struct tb_graph *g, struct tb_named_node **list, size_t *n, const char *what, const char *name,
                      struct tb_node *x, float weight)
{
    if (failed(g))
        return;
    if (!x || !name) {
        fail(g, "%s %s: %s", what, name ? name : "(unnamed)", x ? "needs a name" : "the node is NULL");
        return;
    }
    void *p = realloc(*list, (*n + 1) * sizeof **list);
    if (!p) {
        fail(g, "out of memory");
        return;
    }
    *list = p;
    (*list)[*n].name = strdup(name);
    (*list)[*n].x = x;
    (*list)[*n].weight = weight;
    if (!(*list)[*n].name) {
        fail(g, "out of memory");
        return;
    }
    (*n)++;
}

void tb_graph_loss(struct tb_graph *g, const char *name, struct tb_node *x, float weight)
{
    if (!failed(g) && x && !tb_shape_eq(x->desc.shape, (struct tb_shape){ 1, 1, 1, 1 })) {
        fail(g, "loss %s: %s is %s; a loss is 1x1x1x1", name ? name : "?", x->name, shape_text(x->desc.shape, 0));
        return;
    }
    add_named(g, &g->losses, &g->nlosses, "loss", name, x, weight);
}

void tb_graph_output(struct tb_graph *g, const char *name, struct tb_node *x)
{
    add_named(g, &g->outputs, &g->noutputs, "output", name, x, 0);
}

double tb_graph_conv_flops(const struct tb_graph *g)
{
    double flops = 0;
    for (size_t k = 0; k < g->nops; k++) {
        const struct tb_op *op = &g->ops[k].op;
        if (op->kind != TB_OP_CONV2D)
            continue;
        /* the weight's (and bias's) gradient always; the data's where its input wants one */
        const uint32_t grads = 0x6u | (g->ops[k].in[0]->requires_grad ? 1u : 0u);
        struct tb_op_cost c;
        tb_op_cost(op, grads, &c);
        flops += c.fwd_flops + c.bwd_flops;
    }
    return flops;
}

bool tb_graph_loss_sums_images(const struct tb_graph *g, const struct tb_node *n)
{
    if (n->producer < 0 || (size_t)n->producer >= g->nops)
        return false;
    const struct tb_op *op = &g->ops[n->producer].op;
    return op->kind == TB_OP_SOFTMAX_CE && op->p.ce.per_image;
}
