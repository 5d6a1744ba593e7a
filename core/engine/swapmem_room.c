/* core/engine/swapmem_room.c: placing tensors on the device (swapmem_internal.h): a block
 * allocated where it fits, else the policy asked to evict, else the step's own tensors
 * relocated to close the holes between them, else, as a last resort, everything movable
 * swapped out; and before a step, its tensors brought in (or waited for). swapmem.c keeps
 * the residency states and the copies. */
#include "config.h"

#include "core/engine/swapmem_internal.h"

#include <stdlib.h>
#include <string.h>
#include <trainbig/clock.h>

/* An allocation of `bytes`: with keep, the block (the caller's); without, only whether
 * one fits now (an op's scratch, which the backend allocates itself: the block is freed
 * again at once, and its place is there when the op asks). */
static void *try_alloc(struct tb_swap_mem *m, size_t bytes, bool keep)
{
    void *p = m->be->mem_alloc(m->be_ctx, m->device, bytes);
    if (p && !keep) {
        m->be->mem_free(m->be_ctx, m->device, p);
        return m; /* any non-NULL pointer: it fits */
    }
    return p;
}

/* Free device bytes by the backend's accounts: the cap (or, without one, what it has
 * reserved) less what is in use. They need not be one block. */
static uint64_t free_bytes(const struct tb_swap_mem *m)
{
    struct tb_mem_stats st = { 0 };
    m->be->mem_stats(m->be_ctx, m->device, &st);
    const uint64_t total = st.capacity && st.capacity != UINT64_MAX ? st.capacity : st.reserved;
    return total > st.in_use ? total - st.in_use : 0;
}

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
        const uint64_t ask = more ? bytes + free_bytes(m) : bytes;
        int rc = m->policy.ops->make_room(m->policy.ctx, m, step, ask, err);
        if (rc) {
            *policy_err = rc;
            tb_err_prefix(err, "swap policy '%s'", m->policy.name);
            return NULL;
        }
        tb_swapmem_settle_outs(m, true);
        void *p = try_alloc(m, bytes, keep);
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
    bool moved = false;
    for (size_t i = 0; i < m->s->ntensors; i++)
        if (tb_swap_movable(m, i)) {
            if (tb_swapmem_move_out(m, i, true, err) != TB_OK)
                return NULL;
            moved = true;
        }
    void *p = moved ? try_alloc(m, bytes, keep) : NULL;
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
    if (tb_swap_in_use(m) < before && try_alloc(m, (size_t)bytes, false))
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
        double t0 = tb_now();
        int rc = m->be->stream_wait(m->be_ctx, m->device, TB_STREAM_COMPUTE, m->ev[i]);
        m->stats.stall_seconds += tb_now() - t0;
        if (rc)
            return tb_err_set(err, rc, "waiting for the swap-in of %s failed", m->s->tensors[i].name);
        m->res[i] = TB_RES_BOTH;
        break;
    }
    case TB_RES_MOVING_OUT: {
        /* Needed again before its copy finished: keep the block, and the copy. */
        double t0 = tb_now();
        m->be->event_sync(m->be_ctx, m->ev[i]);
        m->stats.stall_seconds += tb_now() - t0;
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

/* ------------------------------------------------------------------ ranges */

/* A movable tensor's device block. */
struct placed {
    uintptr_t addr;
    uint32_t i;
};

static int by_addr(const void *a, const void *b)
{
    const uintptr_t x = ((const struct placed *)a)->addr, y = ((const struct placed *)b)->addr;
    return (x > y) - (x < y);
}

/* The movable tensor whose block starts at addr (tensors[0..n-1] sorted), or UINT32_MAX. */
static uint32_t tensor_at(const struct placed *tensors, size_t n, uintptr_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (tensors[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && tensors[lo].addr == addr ? tensors[lo].i : UINT32_MAX;
}

/* The backend's blocks into m->blocks; their number, or SIZE_MAX when out of memory. */
static size_t read_blocks(struct tb_swap_mem *m)
{
    for (;;) {
        const size_t n = m->be->mem_blocks(m->be_ctx, m->device, m->blocks, m->blocks_cap);
        if (n <= m->blocks_cap)
            return n;
        const size_t cap = n + n / 4 + 16; /* room for a few more by the next call */
        struct tb_mem_block *b = realloc(m->blocks, cap * sizeof *b);
        if (!b)
            return SIZE_MAX;
        m->blocks = b;
        m->blocks_cap = cap;
    }
}

int tb_swap_out_range(struct tb_swap_mem *m, uint64_t bytes, const double *cost, bool wait, uint64_t *moved,
                      struct tb_err *err)
{
    if (moved)
        *moved = 0;
    if (!m->be->mem_blocks || !bytes)
        return TB_OK;
    const size_t n = read_blocks(m);
    struct placed *tensors = malloc((m->s->ntensors + 1) * sizeof *tensors);
    uint32_t *who = malloc((n + 1) * sizeof *who); /* block k's tensor; UINT32_MAX: free, or not one to move */
    double *price = malloc((n + 1) * sizeof *price);
    if (n == SIZE_MAX || !tensors || !who || !price) {
        free(tensors);
        free(who);
        free(price);
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    }
    size_t nt = 0;
    for (size_t i = 0; i < m->s->ntensors; i++)
        if (tb_swap_movable(m, i) && m->t[i].data)
            tensors[nt++] = (struct placed){ (uintptr_t)m->t[i].data, (uint32_t)i };
    qsort(tensors, nt, sizeof *tensors, by_addr);
    /* The cheapest run [l, r] of free and movable blocks holding `bytes`: costs are never
     * negative, so for each end r the shortest run that holds them is the cheapest. */
    size_t l = 0, best_l = SIZE_MAX, best_r = 0;
    uint64_t run = 0;
    double run_cost = 0, best = 0;
    for (size_t r = 0; r < n; r++) {
        const struct tb_mem_block *b = &m->blocks[r];
        if (b->flags & TB_MEM_BLOCK_FIRST) {
            l = r;
            run = 0;
            run_cost = 0;
        }
        who[r] = UINT32_MAX;
        price[r] = 0;
        if (!(b->flags & TB_MEM_BLOCK_FREE)) {
            const uint32_t i = tensor_at(tensors, nt, b->addr);
            if (i == UINT32_MAX) {
                /* Held by what cannot move: no run goes through it. */
                l = r + 1;
                run = 0;
                run_cost = 0;
                continue;
            }
            who[r] = i;
            price[r] = cost ? cost[i] : (double)b->bytes * (tb_swap_residency(m, i) == TB_RES_BOTH ? 0.5 : 1.0);
        }
        run += b->bytes;
        run_cost += price[r];
        while (l < r && run - m->blocks[l].bytes >= bytes) {
            run -= m->blocks[l].bytes;
            run_cost -= price[l];
            l++;
        }
        if (run >= bytes && (best_l == SIZE_MAX || run_cost < best)) {
            best_l = l;
            best_r = r;
            best = run_cost;
        }
    }
    int rc = TB_OK;
    for (size_t k = best_l; best_l != SIZE_MAX && k <= best_r && rc == TB_OK; k++) {
        if (who[k] == UINT32_MAX)
            continue;
        rc = tb_swap_out(m, who[k], wait, err);
        if (rc == TB_OK && moved)
            *moved += tb_swap_tensor_bytes(m, who[k]);
    }
    free(tensors);
    free(who);
    free(price);
    return rc;
}
