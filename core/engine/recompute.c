/* core/engine/recompute.c: the executor's side of recomputation (trainbig/swap.h,
 * tb_swap_drop): which activations may be dropped, which forward steps would rebuild one,
 * and rebuilding it.
 *
 * A dropped tensor is rebuilt by running its producer's forward again. Its producer's
 * inputs are leaves (parameters, buffers, inputs: always held), tensors the schedule
 * keeps alive at that point (resident, on the host, or dropped themselves: each made
 * resident first), or tensors no later step needs, which were freed: those are rebuilt the
 * same way, recursively, and freed again once the tensor that needed them is back. The ops
 * run with the step value of the forward that first ran them (x->fwd_step), so random
 * draws replay; a training batch norm goes through the backend's op_recompute, which
 * rebuilds y from the statistics forward saved (read from out[1] and out[2]). Outputs of a
 * re-run op other than the ones being rebuilt are written to scratch blocks and thrown
 * away, never over a live copy. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/clock.h>

#include "core/engine/exec_internal.h"

/* Rebuild chains longer than this are refused: recomputing half a network to save one
 * tensor is never worth it, and the walk stays shallow. */
enum { MAX_CHAIN = 64 };

static bool bn_training(const struct tb_gop *o)
{
    return o->op.kind == TB_OP_BATCHNORM && o->op.p.bn.training;
}

/* Whether forward step k's op may run again: anything but a training batch norm, and that
 * too where the backend can rebuild it without touching its running statistics. */
static bool rerunnable(const struct tb_exec *x, size_t k)
{
    return !bn_training(&x->g->ops[k]) || x->e->ops->op_recompute;
}

static bool activation(const struct tb_exec *x, size_t i)
{
    return x->s->tensors[i].kind == TB_SCHED_ACTIVATION;
}

/* Whether the schedule holds tensor i at step `at`: its last use is at or after it (every
 * tensor a rebuild reads was produced before). */
static bool alive_at(const struct tb_exec *x, size_t i, size_t at)
{
    return x->s->tensors[i].last_use >= 0 && (size_t)x->s->tensors[i].last_use >= at;
}

/* Appends to steps[*n] the forward steps that rebuild tensor i at step `at`, producers
 * first, each once (mark[] holds those already in); false when it cannot be rebuilt. */
static bool walk(const struct tb_exec *x, size_t i, size_t at, uint32_t *steps, size_t max, size_t *n)
{
    const uint32_t k = x->producer[i];
    if (k == UINT32_MAX || !rerunnable(x, k))
        return false;
    if (x->mark[k])
        return true;
    const struct tb_gop *o = &x->g->ops[k];
    if (bn_training(o) && o->out[0]->id != i)
        return false; /* the saved statistics: what a rebuild reads, never rebuilt */
    for (uint32_t j = 0; j < o->op.nin; j++) {
        const uint32_t id = o->in[j]->id;
        if (activation(x, id) && !alive_at(x, id, at) && !walk(x, id, at, steps, max, n))
            return false;
    }
    /* A training batch norm is rebuilt from its saved statistics, which must be held. */
    for (uint32_t j = 1; bn_training(o) && j < o->op.nout; j++)
        if (!alive_at(x, o->out[j]->id, at))
            return false;
    if (*n >= max)
        return false;
    x->mark[k] = 1;
    steps[(*n)++] = k;
    return true;
}

static int chain(const void *arg, size_t i, size_t at, uint32_t *steps, size_t max)
{
    const struct tb_exec *x = arg;
    if (!activation(x, i) || x->keep[i] || at >= x->s->nsteps)
        return -1;
    size_t n = 0;
    const bool ok = walk(x, i, at, steps, max < MAX_CHAIN ? max : MAX_CHAIN, &n);
    for (size_t k = 0; k < n; k++)
        x->mark[steps[k]] = 0;
    return ok ? (int)n : -1;
}

/* The first step after `now` (SIZE_MAX: before any) that touches tensor i, or SIZE_MAX. */
static size_t next_use(const struct tb_exec *x, size_t i, size_t now)
{
    for (size_t k = now == SIZE_MAX ? 0 : now + 1; k < x->s->nsteps; k++) {
        const struct tb_sched_step *st = &x->s->steps[k];
        for (uint32_t j = 0; j < st->ntensors; j++)
            if (st->tensors[j] == i)
                return k;
    }
    return SIZE_MAX;
}

static bool droppable(const void *arg, size_t i, size_t now)
{
    const struct tb_exec *x = arg;
    const size_t next = next_use(x, i, now);
    return next != SIZE_MAX && chain(x, i, next, x->chain_buf, MAX_CHAIN) >= 0;
}

/* Makes input or read output tensor id of a re-run op resident and pins it; a transient
 * tensor no step holds any more is rebuilt, and kept in temps[] to be freed after. */
static int hold(struct tb_exec *x, size_t at, uint32_t id, uint32_t *pinned, uint32_t *npinned, struct tb_err *err);

static int rerun_op(struct tb_exec *x, size_t at, size_t k, size_t i, struct tb_err *err);

/* Runs forward step k's op again so that its outputs that are dropped (and tensor i) are
 * resident again. A failure is said once, by the chain's outermost op: "recomputing OP
 * for step STEP" and, when it failed deeper, which op did and how deep (each level once
 * added its own prefix: eight before the cause). */
static int rerun(struct tb_exec *x, size_t at, size_t k, size_t i, struct tb_err *err)
{
    x->rerun_depth++;
    int rc = rerun_op(x, at, k, i, err);
    if (rc && !x->failed_op) { /* the innermost returns first */
        x->failed_op = x->g->ops[k].name;
        x->failed_depth = x->rerun_depth;
    }
    if (--x->rerun_depth > 0 || !rc)
        return rc;
    const char *step = at < x->s->nsteps ? x->s->steps[at].name : "a read";
    if (x->failed_depth > 1)
        rc = tb_err_prefix(err, "recomputing %s for step %s (it failed re-running %s, %u ops deep in the chain)",
                           x->g->ops[k].name, step, x->failed_op, x->failed_depth);
    else
        rc = tb_err_prefix(err, "recomputing %s for step %s", x->g->ops[k].name, step);
    x->failed_op = NULL;
    x->failed_depth = 0;
    return rc;
}

static int rerun_op(struct tb_exec *x, size_t at, size_t k, size_t i, struct tb_err *err)
{
    const struct tb_gop *o = &x->g->ops[k];
    uint32_t pinned[TB_OP_MAX_IN + TB_OP_MAX_OUT], npinned = 0;
    /* Inputs the policy had dropped that a later step uses: rebuilt for this op alone,
     * they are dropped again after it, as the policy left them (a plan counts their memory
     * free until then). One brought back from the host stays: its host copy is current,
     * so a policy frees it for nothing, and it may well be needed soon (an eviction on
     * demand put it there, not a plan). */
    uint32_t away[TB_OP_MAX_IN + TB_OP_MAX_OUT], naway = 0;
    const size_t base = x->ntemps; /* temps[base..]: the inputs rebuilt for this op alone */
    void *scratch[TB_OP_MAX_OUT] = { NULL };
    uint64_t rebuilt = 0;
    int rc = TB_OK;
    for (uint32_t j = 0; j < o->op.nin && rc == TB_OK; j++) {
        const uint32_t id = o->in[j]->id;
        const enum tb_residency r = tb_swap_residency(&x->mem, id);
        rc = hold(x, at, id, pinned, &npinned, err);
        if (rc == TB_OK && r == TB_RES_DROPPED && alive_at(x, id, at))
            away[naway++] = id;
    }
    for (uint32_t j = 0; j < o->op.nout && rc == TB_OK; j++) {
        const uint32_t id = o->out[j]->id;
        if (bn_training(o) && j > 0) {
            rc = hold(x, at, id, pinned, &npinned, err); /* the saved statistics, read */
        } else if (id == i || tb_swap_residency(&x->mem, id) == TB_RES_DROPPED) {
            rc = tb_exec_alloc_tensor(x, at, id, err);
            if (rc == TB_OK) {
                x->pins[id]++;
                pinned[npinned++] = id;
                rebuilt += x->s->tensors[id].bytes;
            }
        } else {
            scratch[j] = tb_exec_device_alloc(x, at, id, (size_t)x->s->tensors[id].bytes, &rc, err);
        }
    }
    const double t0 = tb_engine_now(x->e);
    struct tb_event *ev0 = rc == TB_OK ? tb_exec_trace_event(x) : NULL;
    if (rc == TB_OK) {
        struct tb_tensor in[TB_OP_MAX_IN], out[TB_OP_MAX_OUT];
        do {
            /* Read each time: making room for the op's scratch may move its tensors. */
            for (uint32_t j = 0; j < o->op.nin; j++)
                in[j] = x->t[o->in[j]->id];
            for (uint32_t j = 0; j < o->op.nout; j++) {
                out[j] = x->t[o->out[j]->id];
                if (scratch[j])
                    out[j].data = scratch[j];
            }
            rc = x->e->ops->op_recompute
                     ? x->e->ops->op_recompute(x->e->ctx, &o->op, x->state[k], x->fwd_step, in, out, err)
                     : x->e->ops->op_forward(x->e->ctx, &o->op, x->state[k], x->fwd_step, in, out, err);
        } while (tb_exec_room_for_op(x, at, &rc, err));
    }
    struct tb_swap_stats *st = &x->mem.stats;
    const double t1 = tb_engine_now(x->e);
    st->recompute_seconds += t1 - t0;
    tb_exec_trace_rerun(x, k, rebuilt, t0, t1, ev0, ev0 ? tb_exec_trace_event(x) : NULL);
    for (uint32_t j = 0; j < npinned; j++)
        x->pins[pinned[j]]--;
    for (uint32_t j = 0; j < naway && rc == TB_OK; j++) {
        /* Not if the running step (or an op of this chain) holds it too. */
        if (x->pins[away[j]])
            continue;
        rc = tb_swap_drop(&x->mem, away[j], err);
    }
    for (uint32_t j = 0; j < o->op.nout; j++)
        if (scratch[j])
            x->e->ops->mem_free(x->e->ctx, x->e->device, scratch[j]);
    /* Its rebuilt inputs go at once, so that a chain holds a few tensors at a time, not
     * all of them (one another op of the chain reads too is rebuilt again). */
    while (x->ntemps > base)
        tb_swapmem_drop(&x->mem, x->temps[--x->ntemps]);
    if (rc)
        return rc; /* rerun() says which */
    st->recomputes++;
    st->recompute_bytes += rebuilt;
    return TB_OK;
}

static int hold(struct tb_exec *x, size_t at, uint32_t id, uint32_t *pinned, uint32_t *npinned, struct tb_err *err)
{
    int rc;
    const enum tb_residency r = tb_swap_residency(&x->mem, id);
    /* Freed, or rebuilt for another op of this chain and dropped again: a temp. */
    if (activation(x, id) && (r == TB_RES_NONE || (r == TB_RES_DROPPED && !alive_at(x, id, at)))) {
        if (x->producer[id] == UINT32_MAX)
            return tb_err_set(err, TB_ERR_RUNTIME, "internal error: %s is needed to recompute and has no producer",
                              x->s->tensors[id].name);
        rc = rerun(x, at, x->producer[id], id, err);
        if (rc == TB_OK)
            x->temps[x->ntemps++] = id;
    } else {
        rc = tb_swapmem_resident(&x->mem, at, id, err);
    }
    if (rc == TB_OK) {
        x->pins[id]++;
        pinned[(*npinned)++] = id;
    }
    return rc;
}

static int rebuild(void *arg, size_t at, size_t i, struct tb_err *err)
{
    struct tb_exec *x = arg;
    const uint32_t k = x->producer[i];
    if (k == UINT32_MAX)
        return tb_err_set(err, TB_ERR_RUNTIME, "internal error: dropped %s has no producer", x->s->tensors[i].name);
    /* A dropped tensor read by a rebuild is rebuilt inside it: counted, since each level
     * re-runs its own chain (planner.c keeps it to two). */
    if (++x->rebuilding > x->mem.stats.rebuild_nesting)
        x->mem.stats.rebuild_nesting = x->rebuilding;
    const int rc = rerun(x, at, k, i, err); /* it frees what it rebuilt only for this */
    x->rebuilding--;
    return rc;
}

int tb_exec_recompute_init(struct tb_exec *x, struct tb_swap_rebuild *rb, struct tb_err *err)
{
    const size_t nt = x->s->ntensors ? x->s->ntensors : 1, nops = x->g->nops ? x->g->nops : 1;
    x->producer = malloc(nt * sizeof *x->producer);
    x->keep = calloc(nt, sizeof *x->keep);
    x->temps = malloc(nt * sizeof *x->temps);
    x->mark = calloc(nops, sizeof *x->mark);
    x->chain_buf = malloc(MAX_CHAIN * sizeof *x->chain_buf);
    if (!x->producer || !x->keep || !x->temps || !x->mark || !x->chain_buf)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < x->s->ntensors; i++)
        x->producer[i] = UINT32_MAX;
    for (size_t k = 0; k < x->s->nforward; k++)
        for (uint32_t j = 0; j < x->g->ops[k].op.nout; j++)
            x->producer[x->g->ops[k].out[j]->id] = (uint32_t)k;
    /* What the caller reads after a step stays as it is. */
    for (size_t i = 0; i < x->g->noutputs; i++)
        x->keep[x->g->outputs[i].x->id] = 1;
    for (size_t i = 0; i < x->g->nlosses; i++)
        x->keep[x->g->losses[i].x->id] = 1;
    *rb = (struct tb_swap_rebuild){ droppable, chain, rebuild, x };
    return TB_OK;
}

void tb_exec_recompute_free(struct tb_exec *x)
{
    free(x->producer);
    free(x->keep);
    free(x->temps);
    free(x->mark);
    free(x->chain_buf);
}
