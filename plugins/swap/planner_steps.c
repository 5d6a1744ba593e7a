/* swap/planner_steps.c: the plan carried out (planner.h): before each step its copies in
 * and drops, after it the copies out, the op times measured and the plan made again when
 * they drift or the memory manager had to make room; and, when memory is short anyway,
 * tensors moved out by next use or the cheapest address range. */
#include <stdlib.h>
#include <string.h>
#include <trainbig/trainbig.h>

#include "planner.h"

int planner_before_step(void *ctx, struct tb_swap_mem *m, size_t step, struct tb_err *err)
{
    struct plan *pl = planner_find_plan(ctx, m);
    if (!pl || step >= pl->nsteps)
        return TB_OK;
    pl->t0 = tb_swap_now(m);
    if (!pl->tuned && pl->capacity) {
        /* What is on the device besides transient tensors, at its largest: parameters,
         * their gradients and momentum, and the scratch the backend keeps between ops
         * (the dual task's). The plans made from timed steps leave it
         * out of the budget. */
        double transient = 0;
        for (size_t i = 0; i < pl->ntensors; i++) {
            const struct tb_sched_tensor *t = tb_schedule_tensor(pl->s, i);
            enum tb_residency r = tb_swap_residency(m, i);
            if ((t->kind == TB_SCHED_ACTIVATION || t->kind == TB_SCHED_GRADIENT) && r != TB_RES_NONE &&
                r != TB_RES_HOST && r != TB_RES_DROPPED)
                transient += (double)t->bytes;
        }
        const double other = (double)tb_swap_in_use(m) - transient;
        if (step == 0 || other > pl->measured)
            pl->measured = other;
    }
    for (const uint32_t *i = pl->in_before[step]; i && *i != UINT32_MAX; i++) {
        struct tb_err e;
        tb_err_clear(&e);
        /* No room now: the step that needs it brings it back. */
        if (tb_swap_in(m, *i, &e) == TB_ERR_NOMEM)
            continue;
    }
    (void)err;
    return TB_OK;
}

int planner_after_step(void *ctx, struct tb_swap_mem *m, size_t step, struct tb_err *err)
{
    struct planner *p = ctx;
    struct plan *pl = planner_find_plan(p, m);
    if (!pl || step >= pl->nsteps)
        return TB_OK;
    /* hybrid: the op's own time, which copies can hide behind and a recomputation costs;
     * prefetch: the step's, waits included. */
    pl->now[step] = p->adaptive ? tb_swap_op_seconds(m, step) : tb_swap_now(m) - pl->t0;
    if (!pl->tuned)
        pl->seconds[step] = pl->now[step];
    for (const uint32_t *i = pl->drop_after[step]; i && *i != UINT32_MAX; i++) {
        int rc = tb_swap_drop(m, *i, err);
        if (rc)
            return rc;
    }
    for (const uint32_t *i = pl->out_after[step]; i && *i != UINT32_MAX; i++) {
        int rc = tb_swap_out(m, *i, false, err);
        if (rc)
            return rc;
    }
    if (step + 1 != pl->nsteps)
        return TB_OK;
    /* One whole training step timed: plan again from the measurements. */
    if (!pl->tuned) {
        pl->tuned = true;
        if (pl->capacity)
            pl->persistent = pl->measured;
    } else {
        double total = 0;
        for (size_t k = 0; k < pl->nsteps; k++)
            total += pl->now[k];
        pl->pass++;
        memcpy(pl->recent + (pl->pass - 1) % HISTORY * pl->nsteps, pl->now, pl->nsteps * sizeof *pl->now);
        if (!p->adaptive || (pl->replans > 1 && !pl->grown && total < 1.25 * pl->planned && total > 0.75 * pl->planned))
            return TB_OK;
        /* Each op's least time over the last few steps: a copy planned to hide behind an op
         * that one step ran slow (another program beside it, a page fault) would be exposed
         * in the next, which runs at the op's usual speed. */
        const size_t n = pl->pass < HISTORY ? pl->pass : HISTORY;
        for (size_t k = 0; k < pl->nsteps; k++) {
            double least = pl->recent[k];
            for (size_t h = 1; h < n; h++)
                least = pl->recent[h * pl->nsteps + k] < least ? pl->recent[h * pl->nsteps + k] : least;
            pl->seconds[k] = least;
        }
    }
    pl->grown = false;
    pl->planned = 0;
    for (size_t k = 0; k < pl->nsteps; k++)
        pl->planned += pl->seconds[k];
    pl->replans++;
    return planner_make_actions(p, pl, err);
}

/* The next step at or after `step` that uses tensor i, or UINT32_MAX. */
static uint32_t next_use(const struct plan *pl, size_t i, size_t step)
{
    for (uint32_t a = 0; a < pl->nuses[i]; a++)
        if (pl->uses[i][a] >= step)
            return pl->uses[i][a];
    return UINT32_MAX;
}

static struct plan *sort_plan;
static size_t sort_step;

static int by_next_use_desc(const void *a, const void *b)
{
    uint32_t x = next_use(sort_plan, *(const size_t *)a, sort_step),
             y = next_use(sort_plan, *(const size_t *)b, sort_step);
    if (x != y)
        return x > y ? -1 : 1;
    return *(const size_t *)a < *(const size_t *)b ? -1 : *(const size_t *)a > *(const size_t *)b;
}

/* Out first: what is needed last. */
int planner_make_room(void *ctx, struct tb_swap_mem *m, size_t step, uint64_t bytes, struct tb_err *err)
{
    struct planner *p = ctx;
    struct plan *pl = planner_find_plan(p, m);
    if (!pl)
        return TB_OK;
    if (p->adaptive && pl->tuned && step < pl->nsteps && pl->room_pass[step] != pl->pass + 1) {
        /* The plan left too little room here: keep that much more free next time. */
        pl->room_pass[step] = pl->pass + 1;
        if (pl->reserve[step] < 2.0 * (double)bytes) {
            /* Bounded: twice the ask at most, so that the memory split in a way no plan
             * foresees does not grow it step after step. */
            pl->reserve[step] += (double)bytes;
            if (pl->reserve[step] > 2.0 * (double)bytes)
                pl->reserve[step] = 2.0 * (double)bytes;
            pl->grown = true;
        }
    }
    /* Enough bytes free, but split: the tensors of the cheapest address range that joins
     * free blocks into one large enough, rather than tensors wherever they lie. */
    const uint64_t cap = tb_swap_capacity(m), use = tb_swap_in_use(m);
    if (cap && use < cap && cap - use >= bytes) {
        uint64_t moved = 0;
        int rc = tb_swap_out_range(m, bytes, NULL, false, &moved, err);
        if (rc || moved)
            return rc;
    }
    size_t *cand = malloc((pl->ntensors + 1) * sizeof *cand), n = 0;
    if (!cand)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < pl->ntensors; i++)
        if (planner_swappable(p, pl, i) && tb_swap_movable(m, i))
            cand[n++] = i;
    sort_plan = pl; /* hooks run one at a time, on the training thread */
    sort_step = step == SIZE_MAX ? 0 : step;
    qsort(cand, n, sizeof *cand, by_next_use_desc);
    int rc = tb_swap_out_until(m, cand, n, bytes, NULL, err);
    free(cand);
    return rc;
}
