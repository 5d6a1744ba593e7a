/* exec.c: runs a graph on an engine: forward, the losses, backward in reverse.
 *
 * Memory follows the schedule: an activation is allocated by the step that produces it
 * and freed right after its last use (forward or backward); a gradient is allocated by
 * the first backward step that writes it, accumulated into by later ones, and freed after
 * its producer's backward has read it. Parameters and buffers belong to the engine, inputs
 * to the executor. Every step is timed.
 *
 * Before a step runs, every tensor it touches is pinned (not to be moved) and made
 * resident; after, unpinned. Device memory goes through exec_memory.c to the memory
 * manager (swapmem.c), which moves unpinned activations and gradients to host memory
 * when the swap policy says so, and brings them back before a step needs them. */
#include "config.h"

#include "core/engine/engine_internal.h"

#include "core/engine/exec_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <trainbig/clock.h>
#include <trainbig/random.h>

static size_t bytes_of(void *arg, const struct tb_tensor_desc *d)
{
    struct tb_engine *e = arg;
    return e->ops->tensor_bytes(e->ctx, d);
}

const struct tb_schedule *tb_exec_schedule(const struct tb_exec *x)
{
    return x->s;
}

/* The most bytes of activations and their gradients live at once in a step of s. */
static uint64_t step_peak(const struct tb_schedule *s)
{
    /* delta[k]: bytes that become live at step k, less those freed after step k-1. */
    int64_t *delta = calloc(s->nsteps + 2, sizeof *delta);
    if (!delta)
        return 0;
    for (size_t i = 0; i < s->ntensors; i++) {
        const struct tb_sched_tensor *t = &s->tensors[i];
        if ((t->kind != TB_SCHED_ACTIVATION && t->kind != TB_SCHED_GRADIENT) || t->first_use < 0)
            continue;
        size_t first = (size_t)t->first_use, last = t->last_use < 0 ? s->nsteps : (size_t)t->last_use;
        if (last > s->nsteps)
            last = s->nsteps;
        delta[first] += (int64_t)t->bytes;
        delta[last + 1] -= (int64_t)t->bytes;
    }
    int64_t live = 0, peak = 0;
    for (size_t k = 0; k <= s->nsteps; k++) {
        live += delta[k];
        if (live > peak)
            peak = live;
    }
    free(delta);
    return (uint64_t)peak;
}

int tb_exec_estimate(struct tb_engine *e, struct tb_graph *const *gs, size_t ng, struct tb_exec_estimate *out,
                     struct tb_err *err)
{
    memset(out, 0, sizeof *out);
    const char **seen = NULL; /* parameter names already counted (the graphs' own strings) */
    size_t nseen = 0, cap = 0;
    int rc = TB_OK;
    for (size_t k = 0; k < ng && !rc; k++) {
        if (!gs[k])
            continue;
        struct tb_schedule *s = tb_schedule_build(gs[k], bytes_of, e);
        if (!s) {
            rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory scheduling the graph");
            break;
        }
        const uint64_t peak = step_peak(s);
        out->step = peak > out->step ? peak : out->step;
        for (size_t i = 0; i < s->ntensors && !rc; i++) {
            const struct tb_sched_tensor *t = &s->tensors[i];
            if (t->kind == TB_SCHED_INPUT)
                out->made += t->bytes;
            if (t->kind != TB_SCHED_PARAM && t->kind != TB_SCHED_BUFFER)
                continue;
            bool counted = false;
            for (size_t j = 0; j < nseen && !counted; j++)
                counted = strcmp(seen[j], t->name) == 0;
            if (counted)
                continue;
            if (nseen == cap) {
                const char **more = realloc(seen, (cap = cap ? 2 * cap : 64) * sizeof *seen);
                if (!more) {
                    rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
                    break;
                }
                seen = more;
            }
            seen[nseen++] = t->name;
            /* A training graph's parameter has a gradient and, with it, a momentum buffer. */
            const bool trained = s->grad_of[i] != UINT32_MAX;
            const uint64_t f32 = (uint64_t)tb_shape_elems(t->desc.shape) * sizeof(float);
            out->saved += trained ? 2 * f32 : f32;
            const struct tb_param *p = tb_engine_find_param(e, t->name);
            if (!p)
                out->made += t->bytes;
            if (trained && (!p || !p->grad.data))
                out->made += t->bytes;
            if (trained && (!p || !p->momentum.data))
                out->made += t->bytes;
        }
        tb_schedule_free(s);
    }
    free(seen);
    return rc;
}

const struct tb_op *tb_exec_step_op(const struct tb_exec *x, size_t step, bool *backward, char *how, size_t how_size)
{
    const struct tb_sched_step *st = &x->s->steps[step];
    if (backward)
        *backward = st->backward;
    if (how && how_size) {
        how[0] = '\0';
        if (x->e->op_describe)
            x->e->op_describe(x->e->ctx, x->state[st->op], how, how_size);
    }
    return &x->g->ops[st->op].op;
}

const struct tb_swap_stats *tb_exec_swap_stats(const struct tb_exec *x)
{
    return &x->mem.stats;
}

const double *tb_exec_step_seconds(const struct tb_exec *x)
{
    return x->seconds;
}

uint64_t tb_exec_allocations(const struct tb_exec *x, size_t i)
{
    return i < x->s->ntensors ? x->allocs[i] : 0;
}

bool tb_exec_resident(const struct tb_exec *x, size_t i)
{
    return i < x->s->ntensors && x->t[i].data != NULL;
}

uint32_t tb_exec_pins(const struct tb_exec *x, size_t i)
{
    return i < x->s->ntensors ? x->pins[i] : 0;
}

void tb_exec_free(struct tb_exec *x)
{
    if (!x)
        return;
    if (x->s) {
        tb_exec_release(x);
        if (x->mem_ready)
            tb_swapmem_fini(&x->mem);
        tb_grad_sync_free(&x->sync);
        for (size_t k = 0; x->state && k < x->g->nops; k++)
            if (x->state[k])
                x->e->ops->op_release(x->e->ctx, x->state[k]);
    }
    tb_schedule_free(x->s);
    free(x->state);
    free(x->t);
    free(x->param);
    free(x->written);
    free(x->allocs);
    free(x->pins);
    free(x->seconds);
    free(x->starts);
    tb_exec_recompute_free(x);
    tb_exec_trace_free(x);
    free(x);
}

/* The gradient of every parameter backward will write (the inputs backward's grad_target
 * reaches, the same test), allocated now rather than at the first backward: they live
 * for the whole run, and made now they sit beside the parameters instead of in holes
 * between the first step's activations, where they would split the free memory for good.
 * Owned by the engine (tb_param.grad), like the lazily made ones were. */
static int alloc_param_grads(struct tb_exec *x, struct tb_err *err)
{
    if (!x->g->training)
        return TB_OK;
    for (size_t step = x->s->nforward; step < x->s->nsteps; step++) {
        const struct tb_gop *o = &x->g->ops[x->s->steps[step].op];
        const uint32_t gin = tb_op_grad_inputs(&o->op);
        for (uint32_t i = 0; i < o->op.nin; i++) {
            const uint32_t gi = x->s->grad_of[o->in[i]->id];
            struct tb_param *p = gi != UINT32_MAX && (gin >> i & 1) ? x->param[gi] : NULL;
            if (!p || p->grad.data)
                continue;
            int rc;
            p->grad = p->value;
            p->grad.data = tb_exec_device_alloc(x, SIZE_MAX, gi, (size_t)x->s->tensors[gi].bytes, &rc, err);
            if (!p->grad.data)
                return rc;
        }
    }
    return TB_OK;
}

/* Every tensor's description and device; the leaves: parameters and buffers from the
 * engine (a parameter's gradient slot pointing to it too), inputs of the executor's own. */
static int bind_leaves(struct tb_exec *x, struct tb_err *err)
{
    struct tb_engine *e = x->e;
    const struct tb_graph *g = x->g;
    for (size_t i = 0; i < x->s->ntensors; i++) {
        x->t[i].desc = x->s->tensors[i].desc;
        x->t[i].device = e->device;
    }
    for (size_t i = 0; i < g->nnodes; i++) {
        const struct tb_node *n = g->nodes[i];
        if (n->kind == TB_NODE_PARAM || n->kind == TB_NODE_BUFFER) {
            int rc = tb_engine_param(e, n->name, n->kind == TB_NODE_PARAM, n->desc, n->init, &x->param[i], err);
            if (rc)
                return rc;
            x->t[i] = x->param[i]->value;
            uint32_t gi = x->s->grad_of[i];
            if (gi != UINT32_MAX)
                x->param[gi] = x->param[i];
        } else if (n->kind == TB_NODE_INPUT) {
            int rc = tb_exec_alloc_tensor(x, SIZE_MAX, i, err);
            if (rc)
                return rc;
        }
    }
    return TB_OK;
}


/* Every float tensor of the graph in a dtype the backend's ops take (backend dtypes):
 * refused before any op is prepared, naming the op, the dtype and the backend. */
static int check_dtypes(const struct tb_engine *e, const struct tb_graph *g, struct tb_err *err)
{
    for (size_t k = 0; k < g->nops; k++) {
        const struct tb_op *op = &g->ops[k].op;
        for (uint32_t t = 0; t < op->nin + op->nout; t++) {
            const enum tb_dtype d = t < op->nin ? op->in[t].dtype : op->out[t - op->nin].dtype;
            if (tb_dtype_is_float(d) && !(e->dtypes >> d & 1u))
                return tb_err_set(err, TB_ERR_CONFIG,
                                  "%s (%s) has a %s tensor, and backend '%s' runs its ops in f32%s%s only "
                                  "(its dtypes member)",
                                  g->ops[k].name, tb_op_kind_name(op->kind), tb_dtype_name(d), e->backend_name,
                                  e->dtypes >> TB_BF16 & 1u ? ", bf16" : "", e->dtypes >> TB_F16 & 1u ? ", f16" : "");
        }
    }
    return TB_OK;
}

int tb_exec_create(struct tb_engine *e, struct tb_graph *g, struct tb_exec **out, struct tb_err *err)
{
    *out = NULL;
    if (tb_graph_error(g))
        return tb_err_set(err, TB_ERR_RUNTIME, "the graph is broken: %s", tb_graph_error(g));
    struct tb_exec *x = calloc(1, sizeof *x);
    if (!x)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    x->e = e;
    x->g = g;
    x->s = tb_schedule_build(g, bytes_of, e);
    if (!x->s) {
        free(x);
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory scheduling the graph");
    }
    size_t nt = x->s->ntensors ? x->s->ntensors : 1;
    x->state = calloc(g->nops ? g->nops : 1, sizeof *x->state);
    x->t = calloc(nt, sizeof *x->t);
    x->param = calloc(nt, sizeof *x->param);
    x->written = calloc(nt, sizeof *x->written);
    x->allocs = calloc(nt, sizeof *x->allocs);
    x->pins = calloc(nt, sizeof *x->pins);
    x->seconds = calloc(x->s->nsteps ? x->s->nsteps : 1, sizeof *x->seconds);
    x->starts = calloc(x->s->nsteps ? x->s->nsteps : 1, sizeof *x->starts);
    int rc = TB_OK;
    if (!x->state || !x->t || !x->param || !x->written || !x->allocs || !x->pins || !x->seconds || !x->starts) {
        rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        goto fail;
    }
    rc = bind_leaves(x, err);
    if (!rc)
        rc = alloc_param_grads(x, err);
    if (rc)
        goto fail;
    rc = check_dtypes(e, g, err);
    if (rc)
        goto fail;
    for (size_t k = 0; k < g->nops; k++) {
        rc = e->ops->op_prepare(e->ctx, e->device, &g->ops[k].op, &x->state[k], err);
        if (rc) {
            tb_err_prefix(err, "preparing %s", g->ops[k].name);
            goto fail;
        }
    }
    struct tb_swap_rebuild rb;
    rc = tb_exec_recompute_init(x, &rb, err);
    if (rc)
        goto fail;
    rc = tb_swapmem_init(&x->mem, e->ops, e->ctx, e->device, x->s, x->t, x->pins, &e->swap, &rb, err);
    x->mem.space_used = &e->swap_space_used;
    x->mem.space_limit = &e->swap_space_limit;
    x->mem.space_why = e->swap_space_why;
    if (rc)
        goto fail;
    x->mem.release_scratch = e->release_scratch;
    x->mem.op_seconds = x->seconds;
    x->mem_ready = true;
    rc = tb_grad_sync_plan(&x->sync, e, g, x->s, x->param, err);
    if (rc)
        goto fail;
    *out = x;
    return TB_OK;
fail:
    tb_exec_free(x);
    return rc;
}

static struct tb_node *find_named(const struct tb_named_node *list, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i].name, name) == 0)
            return list[i].x;
    return NULL;
}

int tb_exec_set_input(struct tb_exec *x, const char *name, const void *host, struct tb_err *err)
{
    struct tb_node *n = tb_graph_find(x->g, name);
    if (!n || n->kind != TB_NODE_INPUT)
        return tb_err_set(err, TB_ERR_RUNTIME, "the graph has no input named '%s'", name);
    int rc = tb_exec_alloc_tensor(x, SIZE_MAX, n->id, err);
    if (rc)
        return tb_err_prefix(err, "input '%s'", name);
    return x->e->ops->tensor_write(x->e->ctx, &x->t[n->id], host, err);
}

int tb_exec_read(struct tb_exec *x, const char *name, void *host, struct tb_err *err)
{
    struct tb_node *n = find_named(x->g->outputs, x->g->noutputs, name);
    if (!n)
        n = find_named(x->g->losses, x->g->nlosses, name);
    if (!n)
        return tb_err_set(err, TB_ERR_RUNTIME, "the graph has no output or loss named '%s'", name);
    if (x->mem_ready && tb_swap_residency(&x->mem, n->id) != TB_RES_NONE) {
        int rc = tb_swapmem_fetch(&x->mem, n->id, err); /* a policy may have moved it out */
        if (rc)
            return rc;
    }
    if (!x->t[n->id].data)
        return tb_err_set(err, TB_ERR_RUNTIME, "output '%s' has not been computed (run forward first)", name);
    return x->e->ops->tensor_read(x->e->ctx, &x->t[n->id], host, err);
}

int tb_exec_forward(struct tb_exec *x, uint64_t step, struct tb_err *err)
{
    tb_exec_release_transients(x);
    for (size_t i = 0; i < x->s->ntensors; i++)
        if (x->s->tensors[i].kind == TB_SCHED_INPUT && !x->t[i].data)
            return tb_err_set(err, TB_ERR_RUNTIME,
                              "input '%s' has not been set since the executor's memory was "
                              "given back (tb_exec_release)",
                              x->s->tensors[i].name);
    /* The backend draws dropout masks from (step, op, element): mixing the run seed in
     * makes two seeds drop differently at the same step. */
    step ^= x->e->seed * TB_GOLDEN64;
    /* Data parallel: each rank's images are other images, so they get other masks (the
     * element indices of every rank's share start at 0). Rank 0 keeps one process's. */
    if (x->e->comm)
        step ^= (uint64_t)x->e->comm->rank * 0xD1B54A32D192ED03ull;
    x->fwd_step = step; /* recomputation replays the same draws */
    for (size_t k = 0; k < x->s->nforward; k++) {
        const struct tb_gop *o = &x->g->ops[k];
        struct tb_tensor in[TB_OP_MAX_IN], out[TB_OP_MAX_OUT];
        tb_exec_pin_step(x, k);
        int rc = tb_swapmem_before_step(&x->mem, k, err);
        for (uint32_t j = 0; j < o->op.nout && rc == TB_OK; j++)
            rc = tb_exec_alloc_tensor(x, k, o->out[j]->id, err);
        if (rc) {
            tb_exec_unpin_step(x, k);
            return rc;
        }
        double t0;
        do {
            /* Read each time: making room for the op's scratch may move its tensors. */
            for (uint32_t i = 0; i < o->op.nin; i++)
                in[i] = x->t[o->in[i]->id];
            for (uint32_t j = 0; j < o->op.nout; j++)
                out[j] = x->t[o->out[j]->id];
            t0 = tb_engine_now(x->e);
            tb_exec_trace_mark(x, k, false);
            rc = x->e->ops->op_forward(x->e->ctx, &o->op, x->state[k], step, in, out, err);
        } while (tb_exec_room_for_op(x, k, &rc, err));
        tb_exec_trace_mark(x, k, true);
        x->starts[k] = t0;
        x->seconds[k] = tb_engine_now(x->e) - t0;
        tb_exec_unpin_step(x, k);
        if (rc)
            return tb_err_prefix(err, "%s", o->name);
        tb_exec_retire(x, k);
        rc = tb_swapmem_after_step(&x->mem, k, err);
        if (rc)
            return rc;
    }
    return TB_OK;
}
