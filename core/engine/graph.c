/* graph.c: the graph builder's graph: its nodes (inputs, parameters, buffers and op
 * outputs), scopes and the names they give, its losses and outputs, and the first error,
 * recorded for tb_graph_error. Each op kind's builder call is graph_ops.c's. */
#include "config.h"

#include "core/engine/graph_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tb_graph *tb_graph_new(bool training)
{
    struct tb_graph *g = calloc(1, sizeof *g);
    if (g) {
        g->training = training;
        g->precision = TB_F32;
    }
    return g;
}

void tb_graph_set_precision(struct tb_graph *g, enum tb_dtype precision)
{
    g->precision = precision;
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

bool tb_graph_failed(const struct tb_graph *g)
{
    return g->error[0] != '\0';
}

/* Records the first error; later ones are consequences and are dropped. */
struct tb_node *tb_graph_fail(struct tb_graph *g, const char *fmt, ...)
{
    if (tb_graph_failed(g))
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
        tb_graph_fail(g, "scopes nested deeper than 64");
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
        tb_graph_fail(g, "tb_graph_pop_scope without a matching push");
        return;
    }
    g->scope[g->scope_len[--g->depth]] = '\0';
}

/* scope + "." + name, allocated. */
char *tb_graph_scoped(const struct tb_graph *g, const char *name)
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

struct tb_node *tb_graph_new_node(struct tb_graph *g, enum tb_node_kind kind, struct tb_tensor_desc d, char *name)
{
    if (!name)
        return tb_graph_fail(g, "out of memory");
    if (g->nnodes == g->nodes_cap) {
        size_t cap = g->nodes_cap ? 2 * g->nodes_cap : 64;
        void *p = realloc(g->nodes, cap * sizeof *g->nodes);
        if (!p) {
            free(name);
            return tb_graph_fail(g, "out of memory");
        }
        g->nodes = p;
        g->nodes_cap = cap;
    }
    struct tb_node *x = calloc(1, sizeof *x);
    if (!x) {
        free(name);
        return tb_graph_fail(g, "out of memory");
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

struct tb_node *tb_graph_leaf(struct tb_graph *g, enum tb_node_kind kind, const char *name, enum tb_dtype dtype,
                              struct tb_shape shape, enum tb_init init)
{
    if (tb_graph_failed(g))
        return NULL;
    if (!name || !*name)
        return tb_graph_fail(g, "a graph %s needs a name", kind == TB_NODE_INPUT ? "input" : "parameter");
    char *full = kind == TB_NODE_INPUT ? strdup(name) : tb_graph_scoped(g, name);
    if (!full)
        return tb_graph_fail(g, "out of memory");
    if (!valid_shape(shape)) {
        tb_graph_fail(g, "%s: shape %s has a side < 1", full, shape_text(shape, 0));
        free(full);
        return NULL;
    }
    if (tb_graph_find(g, full)) {
        tb_graph_fail(g, "%s: the name is used twice in the graph", full);
        free(full);
        return NULL;
    }
    struct tb_tensor_desc d = { dtype, shape };
    struct tb_node *x = tb_graph_new_node(g, kind, d, full);
    if (x) {
        x->init = init;
        x->requires_grad = kind == TB_NODE_PARAM;
    }
    return x;
}

struct tb_node *tb_input(struct tb_graph *g, const char *name, enum tb_dtype dtype, struct tb_shape shape)
{
    if (!tb_graph_failed(g) && dtype != TB_F32 && dtype != TB_U8)
        return tb_graph_fail(g, "input %s is %s (dtype %d); a graph's inputs are f32 or u8", name ? name : "?",
                             tb_dtype_name(dtype), (int)dtype);
    return tb_graph_leaf(g, TB_NODE_INPUT, name, dtype, shape, TB_INIT_ZEROS);
}

struct tb_node *tb_parameter(struct tb_graph *g, const char *name, struct tb_shape shape, enum tb_init init)
{
    return tb_graph_leaf(g, TB_NODE_PARAM, name, TB_F32, shape, init);
}

struct tb_node *tb_buffer(struct tb_graph *g, const char *name, struct tb_shape shape, enum tb_init init)
{
    return tb_graph_leaf(g, TB_NODE_BUFFER, name, TB_F32, shape, init);
}

static void add_named(struct tb_graph *g, struct tb_named_node **list, size_t *n, const char *what, const char *name,
                      struct tb_node *x, float weight)
{
    if (tb_graph_failed(g))
        return;
    if (!x || !name) {
        tb_graph_fail(g, "%s %s: %s", what, name ? name : "(unnamed)", x ? "needs a name" : "the node is NULL");
        return;
    }
    void *p = realloc(*list, (*n + 1) * sizeof **list);
    if (!p) {
        tb_graph_fail(g, "out of memory");
        return;
    }
    *list = p;
    (*list)[*n].name = strdup(name);
    (*list)[*n].x = x;
    (*list)[*n].weight = weight;
    if (!(*list)[*n].name) {
        tb_graph_fail(g, "out of memory");
        return;
    }
    (*n)++;
}

void tb_graph_loss(struct tb_graph *g, const char *name, struct tb_node *x, float weight)
{
    if (!tb_graph_failed(g) && x && !tb_shape_eq(x->desc.shape, (struct tb_shape){ 1, 1, 1, 1 })) {
        tb_graph_fail(g, "loss %s: %s is %s; a loss is 1x1x1x1", name ? name : "?", x->name,
                      shape_text(x->desc.shape, 0));
        return;
    }
    add_named(g, &g->losses, &g->nlosses, "loss", name, x, weight);
}

void tb_graph_output(struct tb_graph *g, const char *name, struct tb_node *x)
{
    /* the core reads outputs as f32 (predictions, loss terms) */
    if (x && tb_dtype_is_float(x->desc.dtype))
        x = tb_cast(g, x, TB_F32);
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
