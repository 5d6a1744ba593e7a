/* schedule.c: forward and backward order, and each tensor's first and last use. */
#include "config.h"

#include "core/engine/schedule_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t tb_schedule_steps(const struct tb_schedule *s)
{
    return s->nsteps;
}

size_t tb_schedule_forward_steps(const struct tb_schedule *s)
{
    return s->nforward;
}

const char *tb_schedule_step_name(const struct tb_schedule *s, size_t step)
{
    return step < s->nsteps ? s->steps[step].name : NULL;
}

size_t tb_schedule_tensors(const struct tb_schedule *s)
{
    return s->ntensors;
}

const struct tb_sched_tensor *tb_schedule_tensor(const struct tb_schedule *s, size_t i)
{
    return i < s->ntensors ? &s->tensors[i] : NULL;
}

size_t tb_schedule_step_tensors(const struct tb_schedule *s, size_t step, const uint32_t **ids)
{
    if (step >= s->nsteps) {
        *ids = NULL;
        return 0;
    }
    *ids = s->steps[step].tensors;
    return s->steps[step].ntensors;
}

void tb_schedule_free(struct tb_schedule *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nsteps; i++) {
        free(s->steps[i].name);
        free(s->steps[i].tensors);
    }
    for (size_t i = 0; i < s->ntensors; i++)
        if (s->tensors[i].kind == TB_SCHED_GRADIENT || s->tensors[i].kind == TB_SCHED_PARAM_GRAD)
            free((char *)s->tensors[i].name);
    free(s->steps);
    free(s->tensors);
    free(s->grad_of);
    free(s);
}

static enum tb_sched_kind kind_of(const struct tb_node *x)
{
    switch (x->kind) {
    case TB_NODE_INPUT:
        return TB_SCHED_INPUT;
    case TB_NODE_PARAM:
        return TB_SCHED_PARAM;
    case TB_NODE_BUFFER:
        return TB_SCHED_BUFFER;
    default:
        return TB_SCHED_ACTIVATION;
    }
}

/* Records that `step` touches tensor t. */
static int touch(struct tb_schedule *s, struct tb_sched_step *st, uint32_t t, int32_t step)
{
    for (uint32_t i = 0; i < st->ntensors; i++)
        if (st->tensors[i] == t)
            return 0;
    uint32_t *p = realloc(st->tensors, (st->ntensors + 1) * sizeof *p);
    if (!p)
        return -1;
    st->tensors = p;
    st->tensors[st->ntensors++] = t;
    struct tb_sched_tensor *x = &s->tensors[t];
    if (x->first_use < 0 || step < x->first_use)
        x->first_use = step;
    if (step > x->last_use)
        x->last_use = step;
    return 0;
}

/* Which nodes a loss depends on through gradient-carrying edges (reaches[node]), and which
 * ops therefore have a backward step (has_backward[op]). */
static void mark_reaches(const struct tb_graph *g, bool *reaches, bool *has_backward)
{
    if (!g->training)
        return;
    for (size_t i = 0; i < g->nlosses; i++)
        reaches[g->losses[i].x->id] = g->losses[i].x->requires_grad;
    for (size_t k = g->nops; k-- > 0;) {
        const struct tb_gop *o = &g->ops[k];
        uint32_t gout = tb_op_grad_outputs(&o->op), gin = tb_op_grad_inputs(&o->op);
        bool out_reaches = false;
        for (uint32_t j = 0; j < o->op.nout; j++)
            out_reaches |= (gout >> j & 1) && reaches[o->out[j]->id];
        if (!out_reaches)
            continue;
        for (uint32_t i = 0; i < o->op.nin; i++)
            if ((gin >> i & 1) && o->in[i]->requires_grad) {
                reaches[o->in[i]->id] = true;
                has_backward[k] = true;
            }
    }
}

/* The tensors: every node, then a gradient for every node a loss reaches. -1: out of
 * memory. */
static int make_tensors(struct tb_schedule *s, const struct tb_graph *g, const bool *reaches,
                        size_t (*bytes_of)(void *arg, const struct tb_tensor_desc *d), void *arg)
{
    size_t ngrads = 0;
    for (size_t i = 0; i < g->nnodes; i++)
        ngrads += reaches[i];
    s->ntensors = g->nnodes + ngrads;
    s->tensors = calloc(s->ntensors ? s->ntensors : 1, sizeof *s->tensors);
    s->grad_of = malloc((g->nnodes + 1) * sizeof *s->grad_of);
    if (!s->tensors || !s->grad_of) {
        s->ntensors = 0; /* what tb_schedule_free walks */
        return -1;
    }
    uint32_t next = (uint32_t)g->nnodes;
    for (size_t i = 0; i < g->nnodes; i++) {
        const struct tb_node *x = g->nodes[i];
        struct tb_sched_tensor *t = &s->tensors[i];
        t->name = x->name;
        t->kind = kind_of(x);
        t->desc = x->desc;
        t->bytes = bytes_of(arg, &x->desc);
        t->first_use = t->last_use = -1;
        s->grad_of[i] = UINT32_MAX;
        if (!reaches[i])
            continue;
        struct tb_sched_tensor *gt = &s->tensors[next];
        size_t n = strlen(x->name) + 8;
        char *name = malloc(n);
        if (!name)
            return -1;
        snprintf(name, n, "%s.grad", x->name);
        gt->name = name;
        gt->kind = x->kind == TB_NODE_PARAM ? TB_SCHED_PARAM_GRAD : TB_SCHED_GRADIENT;
        gt->desc = x->desc;
        gt->bytes = t->bytes;
        gt->first_use = gt->last_use = -1;
        s->grad_of[i] = next++;
    }
    return 0;
}

/* Forward step k: the op reads its inputs and writes its outputs. */
static int forward_step(struct tb_schedule *s, const struct tb_graph *g, size_t k)
{
    const struct tb_gop *o = &g->ops[k];
    struct tb_sched_step *st = &s->steps[k];
    st->op = (uint32_t)k;
    st->name = strdup(o->name);
    if (!st->name)
        return -1;
    for (uint32_t i = 0; i < o->op.nin; i++)
        if (touch(s, st, o->in[i]->id, (int32_t)k))
            return -1;
    for (uint32_t j = 0; j < o->op.nout; j++)
        if (touch(s, st, o->out[j]->id, (int32_t)k))
            return -1;
    return 0;
}

/* The backward step `step` of op k: what the op's backward reads, its outputs' gradients,
 * and the gradients of its inputs. */
static int backward_step(struct tb_schedule *s, const struct tb_graph *g, size_t k, size_t step)
{
    const struct tb_gop *o = &g->ops[k];
    struct tb_sched_step *st = &s->steps[step];
    st->op = (uint32_t)k;
    st->backward = true;
    size_t n = strlen(o->name) + 16;
    st->name = malloc(n);
    if (!st->name)
        return -1;
    snprintf(st->name, n, "%s (backward)", o->name);
    uint32_t rin, rout;
    tb_op_backward_reads(&o->op, &rin, &rout);
    for (uint32_t i = 0; i < o->op.nin; i++) {
        if ((rin >> i & 1) && touch(s, st, o->in[i]->id, (int32_t)step))
            return -1;
        uint32_t gi = s->grad_of[o->in[i]->id];
        if ((tb_op_grad_inputs(&o->op) >> i & 1) && gi != UINT32_MAX && touch(s, st, gi, (int32_t)step))
            return -1;
    }
    for (uint32_t j = 0; j < o->op.nout; j++) {
        if ((rout >> j & 1) && touch(s, st, o->out[j]->id, (int32_t)step))
            return -1;
        uint32_t gj = s->grad_of[o->out[j]->id];
        if (gj != UINT32_MAX && touch(s, st, gj, (int32_t)step))
            return -1;
    }
    return 0;
}

/* The steps: every op forward, then the backward of those a loss reaches, in reverse. */
static int make_steps(struct tb_schedule *s, const struct tb_graph *g, const bool *has_backward)
{
    size_t nback = 0;
    for (size_t k = 0; k < g->nops; k++)
        nback += has_backward[k];
    s->nforward = g->nops;
    s->nsteps = g->nops + nback;
    s->steps = calloc(s->nsteps ? s->nsteps : 1, sizeof *s->steps);
    if (!s->steps) {
        s->nsteps = 0;
        return -1;
    }
    for (size_t k = 0; k < g->nops; k++)
        if (forward_step(s, g, k))
            return -1;
    size_t step = g->nops;
    for (size_t k = g->nops; k-- > 0;)
        if (has_backward[k] && backward_step(s, g, k, step++))
            return -1;
    return 0;
}

struct tb_schedule *tb_schedule_build(const struct tb_graph *g,
                                      size_t (*bytes_of)(void *arg, const struct tb_tensor_desc *d), void *arg)
{
    struct tb_schedule *s = calloc(1, sizeof *s);
    bool *reaches = calloc(g->nnodes + 1, sizeof *reaches);
    bool *has_backward = calloc(g->nops + 1, sizeof *has_backward);
    bool ok = s && reaches && has_backward;
    if (ok) {
        mark_reaches(g, reaches, has_backward);
        ok = make_tensors(s, g, reaches, bytes_of, arg) == 0 && make_steps(s, g, has_backward) == 0;
    }
    free(reaches);
    free(has_backward);
    if (!ok) {
        tb_schedule_free(s);
        return NULL;
    }
    /* Outputs and losses stay readable after the last step: "used" one past it. */
    int32_t end = (int32_t)s->nsteps;
    for (size_t i = 0; i < g->noutputs; i++)
        s->tensors[g->outputs[i].x->id].last_use = end;
    for (size_t i = 0; i < g->nlosses; i++)
        s->tensors[g->losses[i].x->id].last_use = end;
    return s;
}
