/* core/engine/swapmem_room.c: placing tensors on the device (swapmem_internal.h): a block
 * allocated where it fits, else the policy asked to evict, else the last resorts:
 * resident tensors moved inside the device to join the free blocks (swapmem_blocks.c),
 * everything movable swapped out, the step's own tensors placed again through the host to
 * close the holes between them; and before a step, its tensors brought in (or waited
 * for). swapmem.c keeps the residency states and the copies. */
#include "config.h"

#include "core/engine/swapmem_internal.h"

#include <stdlib.h>
#include <string.h>
#include <trainbig/clock.h>

/* The policy moves tensors out, in its own order, until the allocation of `bytes`
 * succeeds: not merely until that many bytes are free, since free memory can be split
 * into blocks none of which holds it (fragmentation). Each round asks for `bytes`; when a
 * round moves nothing, tensors still coming in are waited for (they become movable), and
 * then the policy is asked once for more than is free now (bytes + free), which any
 * policy counting free bytes must answer by moving something. NULL when nothing is left
 * to move and it still does not fit. */
static void *evict_until_fits(struct tb_swap_mem *m, size_t step, size_t bytes, bool keep, int *policy_err,
                              struct tb_err *err)
{
    tb_swapmem_settle_ins(m, false);
    bool more = false;
    for (;;) {
        const uint64_t before = tb_swap_in_use(m);
        const uint64_t ask = more ? bytes + tb_swapmem_free_bytes(m) : bytes;
        int rc = m->policy.ops->make_room(m->policy.ctx, m, step, ask, err);
        if (rc) {
            *policy_err = rc;
            tb_err_prefix(err, "swap policy '%s'", m->policy.name);
            return NULL;
        }
        tb_swapmem_settle_outs(m, true);
        void *p = tb_swapmem_try_alloc(m, bytes, keep);
        if (p) {
            m->stats.evicting_allocs++;
            return p;
        }
        if (tb_swap_in_use(m) < before) {
            more = false; /* it moved something: the next round asks for `bytes` again */
            continue;
        }
        if (tb_swapmem_settle_ins(m, true))
            continue;
        if (more)
            return NULL; /* asked for more than is free, and nothing moved */
        more = true;
    }
}

/* The last resort, once nothing else can move: the running step's own activations and
 * gradients (pinned, so no policy moves them), those a recomputation under way holds
 * (pinned too) and the executor's loose blocks for the op may split the free memory
 * where they lie. The tensors go to the host and wait there,
 * the loose blocks (nothing written in them yet) are freed, the block is taken, then
 * both come back, to places around it. With keep the block is the caller's; without (an
 * op's scratch) it is freed again for the op to take (best fit finds the same hole).
 * Values travel through exact copies; the executor reads the addresses again before it
 * runs the op. NULL when even that does not make it fit (a loose block that then found
 * no room at all is NULL too: the caller's op fails with it). */
/* One block to place again: the request, a tensor that left, or a loose block. */
struct place {
    size_t bytes;
    uint32_t what; /* 0: the request; 1 + k: moved[k]; 1 + n + l: loose block l */
};

/* Moves tensor i to the host into moved[*n] where it is a resident activation or
 * gradient; false when the copy could not start. */
static bool move_one_out(struct tb_swap_mem *m, uint32_t i, uint32_t *moved, uint32_t *n, struct tb_err *err)
{
    if (!tb_swapmem_movable_kind(m, i) || (m->res[i] != TB_RES_DEVICE && m->res[i] != TB_RES_BOTH))
        return true;
    if (tb_swapmem_move_out(m, i, true, err) != TB_OK)
        return false;
    moved[(*n)++] = i;
    return true;
}

/* Moves the step's resident tensors, and the others pinned (those a recomputation under
 * way holds: the inputs of the ops it re-runs, which read their addresses again too), to
 * the host, into moved[]; their count. */
static uint32_t move_step_out(struct tb_swap_mem *m, const struct tb_sched_step *st, uint32_t *moved,
                              struct tb_err *err)
{
    uint32_t n = 0;
    bool ok = true;
    for (uint32_t k = 0; k < st->ntensors && ok; k++)
        ok = move_one_out(m, st->tensors[k], moved, &n, err);
    for (size_t i = 0; i < m->s->ntensors && ok; i++)
        if (m->pins[i] && (m->res[i] == TB_RES_DEVICE || m->res[i] == TB_RES_BOTH))
            ok = move_one_out(m, (uint32_t)i, moved, &n, err);
    return n;
}

/* Frees the loose blocks; bit l of the result: loose block l was freed and comes back. */
static uint32_t free_loose(struct tb_swap_mem *m)
{
    uint32_t freed = 0;
    for (uint32_t l = 0; l < m->nloose; l++)
        if (*m->loose[l]) {
            m->be->mem_free(m->be_ctx, m->device, *m->loose[l]);
            *m->loose[l] = NULL;
            freed |= 1u << l;
        }
    return freed;
}

/* Places items[0..ni-1] (sorted, largest first) again; the request's block in *hole. When
 * a tensor or loose block finds no room beside the request, the request goes; false when
 * one finds none even then. */
static bool place_all(struct tb_swap_mem *m, const struct place *items, uint32_t ni, const uint32_t *moved, uint32_t n,
                      void **hole, struct tb_err *err)
{
    *hole = NULL;
    for (uint32_t k = 0; k < ni; k++) {
        void *p = m->be->mem_alloc(m->be_ctx, m->device, items[k].bytes);
        if (items[k].what == 0) {
            *hole = p;
            continue;
        }
        if (!p && *hole) {
            m->be->mem_free(m->be_ctx, m->device, *hole);
            *hole = NULL;
            p = m->be->mem_alloc(m->be_ctx, m->device, items[k].bytes);
        }
        if (items[k].what > n) {
            *m->loose[items[k].what - 1 - n] = p;
            if (!p)
                return false;
            continue;
        }
        const uint32_t i = moved[items[k].what - 1];
        if (!p || tb_swapmem_start_in(m, i, p, err) != TB_OK)
            return false;
        m->be->event_sync(m->be_ctx, m->ev[i]);
        m->res[i] = TB_RES_BOTH;
    }
    return true;
}

static void *relocate_step(struct tb_swap_mem *m, size_t step, size_t bytes, bool keep, struct tb_err *err)
{
    if (step >= m->s->nsteps)
        return NULL;
    const struct tb_sched_step *st = &m->s->steps[step];
    const size_t most = st->ntensors + m->s->ntensors; /* the step's, and every pinned one */
    uint32_t *moved = malloc((most ? most : 1) * sizeof *moved);
    struct place *items = malloc((1 + most + m->nloose) * sizeof *items);
    if (!moved || !items) {
        free(moved);
        free(items);
        return NULL;
    }
    const uint32_t n = move_step_out(m, st, moved, err);
    const uint32_t freed = free_loose(m);
    /* Everything placed again, largest first (first fit decreasing packs far better than
     * any fixed order: a small block taken first can split the one hole a large one
     * needed): the block, the tensors that left (a tensor still on the host is one the
     * step is waiting for) and the loose blocks. */
    uint32_t ni = 0;
    if (n || freed)
        items[ni++] = (struct place){ bytes, 0 };
    for (uint32_t k = 0; k < n; k++)
        items[ni++] = (struct place){ tb_swapmem_bytes(m, moved[k]), 1 + k };
    for (uint32_t l = 0; l < m->nloose; l++)
        if (freed >> l & 1)
            items[ni++] = (struct place){ m->loose_bytes[l], 1 + n + l };
    for (uint32_t a = 1; a < ni; a++) /* insertion sort, largest first; ties keep their order */
        for (uint32_t b = a; b > 0 && items[b].bytes > items[b - 1].bytes; b--) {
            struct place t = items[b];
            items[b] = items[b - 1];
            items[b - 1] = t;
        }
    void *hole;
    const bool ok = place_all(m, items, ni, moved, n, &hole, err);
    free(items);
    free(moved);
    if (hole && ok && keep)
        return hole;
    if (hole)
        m->be->mem_free(m->be_ctx, m->device, hole);
    return ok && hole ? m : NULL; /* any non-NULL pointer: it fits */
}

_Static_assert(TB_OP_MAX_IN <= 32, "relocate_step keeps the loose blocks it freed in a 32-bit mask");

void tb_swapmem_set_loose(struct tb_swap_mem *m, void **const *blocks, const size_t *bytes, uint32_t n)
{
    m->nloose = n;
    for (uint32_t k = 0; k < n; k++) {
        m->loose[k] = blocks[k];
        m->loose_bytes[k] = bytes[k];
    }
}

/* The last resorts, once the policy has nothing more to move: first every tensor that
 * may move goes to the host, those the policy passes over included (smaller than its
 * min_size: a preference, and small blocks left between large ones split the free
 * memory), to come back on demand; then the running step's own tensors are placed again
 * around the block (relocate_step). With keep the block is the caller's; without, only
 * whether it fits (non-NULL). */
static void *last_resort(struct tb_swap_mem *m, size_t step, size_t bytes, bool keep, struct tb_err *err)
{
    void *p = tb_swapmem_compact(m, bytes, keep, err);
    if (!p) {
        bool moved = false;
        for (size_t i = 0; i < m->s->ntensors; i++)
            if (tb_swap_movable(m, i)) {
                if (tb_swapmem_move_out(m, i, true, err) != TB_OK)
                    return NULL;
                moved = true;
            }
        if (moved && !(p = tb_swapmem_try_alloc(m, bytes, keep)))
            p = tb_swapmem_compact(m, bytes, keep, err); /* what is left, joined inside the device */
    }
    if (!p)
        p = relocate_step(m, step, bytes, keep, err);
    if (p)
        m->stats.evicting_allocs++;
    return p;
}

bool tb_swapmem_make_room(struct tb_swap_mem *m, size_t step, uint64_t bytes, int *policy_err, struct tb_err *err)
{
    *policy_err = TB_OK;
    if (bytes > SIZE_MAX)
        return false;
    /* True only when something was freed and the op's allocation fits now: the op runs
     * again only when it can get further than it did. */
    const uint64_t before = tb_swap_in_use(m);
    tb_swapmem_settle_outs(m, true);
    if (tb_swap_in_use(m) < before && tb_swapmem_try_alloc(m, (size_t)bytes, false))
        return true;
    if (!m->policy.ops || !m->policy.ops->make_room)
        return false;
    if (evict_until_fits(m, step, (size_t)bytes, false, policy_err, err))
        return true;
    if (*policy_err)
        return false;
    return last_resort(m, step, (size_t)bytes, false, err) != NULL;
}

void *tb_swapmem_alloc(struct tb_swap_mem *m, size_t step, size_t bytes, int *policy_err, struct tb_err *err)
{
    *policy_err = TB_OK;
    bytes = bytes ? bytes : 1;
    void *p = m->be->mem_alloc(m->be_ctx, m->device, bytes);
    if (p)
        return p;
    /* Blocks whose copies are done, then those still copying. */
    if (tb_swapmem_settle_outs(m, false) && (p = m->be->mem_alloc(m->be_ctx, m->device, bytes)))
        return p;
    if (tb_swapmem_settle_outs(m, true) && (p = m->be->mem_alloc(m->be_ctx, m->device, bytes)))
        return p;
    if (m->release_scratch) {
        /* The backend's scratch comes back by the next op that needs it. */
        m->release_scratch(m->be_ctx, m->device);
        if ((p = m->be->mem_alloc(m->be_ctx, m->device, bytes)))
            return p;
    }
    if (!m->policy.ops || !m->policy.ops->make_room)
        return NULL;
    if ((p = evict_until_fits(m, step, bytes, true, policy_err, err)) || *policy_err)
        return p;
    return last_resort(m, step, bytes, true, err);
}

int tb_swapmem_resident(struct tb_swap_mem *m, size_t step, size_t i, struct tb_err *err)
{
    switch (m->res[i]) {
    case TB_RES_DROPPED: {
        int rc = m->rb.rebuild ? m->rb.rebuild(m->rb.arg, step, i, err)
                               : tb_err_set(err, TB_ERR_RUNTIME, "%s was dropped and nothing can rebuild it",
                                            m->s->tensors[i].name);
        if (rc)
            return rc;
        break;
    }
    case TB_RES_HOST: {
        /* Not brought back in time: fetch it now and wait. */
        int perr;
        void *p = tb_swapmem_alloc(m, step, tb_swapmem_bytes(m, i), &perr, err);
        if (!p)
            return perr ? perr : tb_err_set(err, TB_ERR_NOMEM, "no device memory to swap in %s", m->s->tensors[i].name);
        int rc = tb_swapmem_start_in(m, i, p, err);
        if (rc)
            return rc;
        m->stats.demand_ins++;
    }
        /* fall through */
    case TB_RES_MOVING_IN: {
        double t0 = tb_swap_now(m);
        int rc = m->be->stream_wait(m->be_ctx, m->device, TB_STREAM_COMPUTE, m->ev[i]);
        m->stats.stall_seconds += tb_swap_now(m) - t0;
        if (rc)
            return tb_err_set(err, rc, "waiting for the swap-in of %s failed", m->s->tensors[i].name);
        m->res[i] = TB_RES_BOTH;
        break;
    }
    case TB_RES_MOVING_OUT: {
        /* Needed again before its copy finished: keep the block, and the copy. */
        double t0 = tb_swap_now(m);
        m->be->event_sync(m->be_ctx, m->ev[i]);
        m->stats.stall_seconds += tb_swap_now(m) - t0;
        m->res[i] = TB_RES_BOTH;
        break;
    }
    default:
        break;
    }
    m->used[i] = m->clock;
    return TB_OK;
}

int tb_swapmem_before_step(struct tb_swap_mem *m, size_t step, struct tb_err *err)
{
    m->now = step;
    tb_swapmem_settle_outs(m, false);
    if (m->policy.ops && m->policy.ops->before_step) {
        int rc = m->policy.ops->before_step(m->policy.ctx, m, step, err);
        if (rc)
            return tb_err_prefix(err, "swap policy '%s'", m->policy.name);
    }
    const struct tb_sched_step *st = &m->s->steps[step];
    for (uint32_t k = 0; k < st->ntensors; k++) {
        int rc = tb_swapmem_resident(m, step, st->tensors[k], err);
        if (rc)
            return rc;
    }
    return TB_OK;
}

int tb_swapmem_fetch(struct tb_swap_mem *m, size_t i, struct tb_err *err)
{
    if (m->res[i] == TB_RES_DROPPED)
        return tb_swapmem_resident(m, m->s->nsteps, i, err);
    if (m->res[i] == TB_RES_HOST) {
        int perr;
        void *p = tb_swapmem_alloc(m, SIZE_MAX, tb_swapmem_bytes(m, i), &perr, err);
        if (!p)
            return perr ? perr
                        : tb_err_set(err, TB_ERR_NOMEM, "no device memory to bring back %s", m->s->tensors[i].name);
        int rc = tb_swapmem_start_in(m, i, p, err);
        if (rc)
            return rc;
    }
    if (m->res[i] == TB_RES_MOVING_IN || m->res[i] == TB_RES_MOVING_OUT) {
        m->be->event_sync(m->be_ctx, m->ev[i]);
        m->res[i] = TB_RES_BOTH;
    }
    return TB_OK;
}
