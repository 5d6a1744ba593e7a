/* core/engine/swapmem_blocks.c: what the memory manager does with the device's blocks as
 * the backend lists them (mem_blocks, swapmem_internal.h): compaction, resident tensors
 * moved inside the device to join free blocks into one an allocation needs, and
 * tb_swap_out_range (trainbig/swap.h), the tensors of the cheapest address range whose
 * moving out does the same through the host. Both look for the cheapest run of adjacent
 * blocks. */
#include "config.h"

#include "core/engine/swapmem_internal.h"

#include <stdlib.h>

/* ------------------------------------------------------------------ the blocks */

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

/* ------------------------------------------------------------------ compaction */

/* The cheapest run [l, r] of address-adjacent blocks holding `bytes`, through free blocks
 * and movable ones only (who[k] != UINT32_MAX; others bar it), at price[k] a block (free
 * ones 0). Prices are never negative, so for each end r the shortest run holding the bytes
 * is the cheapest with that end; `accept` (NULL: any) may refuse a run. Its l (SIZE_MAX:
 * none) and *last its r. */
static size_t cheapest_run(const struct tb_mem_block *blocks, size_t n, uint64_t bytes, const uint32_t *who,
                           const double *price, bool (*accept)(void *arg, size_t l, size_t r), void *arg, size_t *last)
{
    size_t l = 0, best_l = SIZE_MAX;
    uint64_t run = 0;
    double cost = 0, best = 0;
    for (size_t r = 0; r < n; r++) {
        if (blocks[r].flags & TB_MEM_BLOCK_FIRST) {
            l = r;
            run = 0;
            cost = 0;
        }
        if (!(blocks[r].flags & TB_MEM_BLOCK_FREE) && who[r] == UINT32_MAX) {
            l = r + 1; /* held by what cannot move */
            run = 0;
            cost = 0;
            continue;
        }
        run += blocks[r].bytes;
        cost += price[r];
        while (l < r && run - blocks[l].bytes >= bytes) {
            run -= blocks[l].bytes;
            cost -= price[l];
            l++;
        }
        if (run < bytes || (best_l != SIZE_MAX && cost >= best) || (accept && !accept(arg, l, r)))
            continue;
        best_l = l;
        *last = r;
        best = cost;
    }
    return best_l;
}

/* A block the compaction may move: a resident activation or gradient (what = tensor) or
 * one of the running op's loose blocks (what = ntensors + l). */
struct mover {
    uintptr_t addr;
    uint64_t bytes; /* the block's, as the allocator rounded it */
    uint32_t what;
};

static int by_mover_addr(const void *a, const void *b)
{
    const uintptr_t x = ((const struct mover *)a)->addr, y = ((const struct mover *)b)->addr;
    return (x > y) - (x < y);
}

static int by_bytes_desc(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x < y) - (x > y);
}

/* Whether the movers of blocks [l, r] (sizes in need[], largest first) go into the free
 * blocks outside [l, r], each into the smallest free block that holds it (as a best-fit
 * allocator places them). hole[] is scratch for n sizes. */
static bool fits_outside(const struct tb_mem_block *blocks, size_t n, size_t l, size_t r, const uint64_t *need,
                         size_t nneed, uint64_t *hole)
{
    size_t nh = 0;
    for (size_t k = 0; k < n; k++)
        if ((k < l || k > r) && (blocks[k].flags & TB_MEM_BLOCK_FREE))
            hole[nh++] = blocks[k].bytes;
    for (size_t j = 0; j < nneed; j++) {
        size_t best = SIZE_MAX;
        for (size_t h = 0; h < nh; h++)
            if (hole[h] >= need[j] && (best == SIZE_MAX || hole[h] < hole[best]))
                best = h;
        if (best == SIZE_MAX)
            return false;
        hole[best] -= need[j];
    }
    return true;
}

/* cheapest_run's test for compaction: the movers of a run fit outside it. need[] and
 * hole[] are scratch for n sizes. */
struct outside {
    const struct tb_mem_block *blocks;
    size_t n;
    const uint32_t *who;
    uint64_t *need, *hole;
};

static bool movers_fit_outside(void *arg, size_t l, size_t r)
{
    struct outside *o = arg;
    size_t nneed = 0;
    for (size_t k = l; k <= r; k++)
        if (o->who[k] != UINT32_MAX)
            o->need[nneed++] = o->blocks[k].bytes;
    qsort(o->need, nneed, sizeof *o->need, by_bytes_desc);
    return fits_outside(o->blocks, o->n, l, r, o->need, nneed, o->hole);
}

/* Moves the movers of [lo, hi) to blocks outside it, on the device: a tensor's value by a
 * copy on the compute stream, a loose block (nothing written in it yet) by taking another.
 * A block the allocator offers inside [lo, hi) is held until the end, so that the next
 * offer lies elsewhere. Every old block is freed once the copies are done; what moved
 * before a failure stays moved (the values are whole either way). 0, or -1 when a block
 * found no place or a copy failed (err set for the latter). */
static int move_movers(struct tb_swap_mem *m, const struct mover *mv, size_t nmv, uintptr_t lo, uintptr_t hi,
                       void **held, size_t cap, size_t *nheld, struct tb_err *err)
{
    int rc = 0;
    for (size_t k = 0; k < nmv && rc == 0; k++) {
        const uint32_t w = mv[k].what;
        const size_t bytes = w < m->s->ntensors ? tb_swapmem_bytes(m, w) : m->loose_bytes[w - m->s->ntensors];
        void *p;
        while ((p = m->be->mem_alloc(m->be_ctx, m->device, bytes)) && (uintptr_t)p >= lo && (uintptr_t)p < hi &&
               *nheld + 1 < cap)
            held[(*nheld)++] = p;
        if (p && (uintptr_t)p >= lo && (uintptr_t)p < hi) { /* no room left to hold it */
            m->be->mem_free(m->be_ctx, m->device, p);
            p = NULL;
        }
        if (!p) {
            rc = -1;
            break;
        }
        void *old = (void *)mv[k].addr;
        if (w < m->s->ntensors) {
            struct tb_event *start = m->tracing ? tb_swapmem_trace_mark(m, TB_STREAM_COMPUTE) : NULL;
            if (m->be->copy_async(m->be_ctx, m->device, TB_STREAM_COMPUTE, p, old, bytes, err) != TB_OK) {
                if (start)
                    m->be->event_destroy(m->be_ctx, start);
                m->be->mem_free(m->be_ctx, m->device, p);
                rc = -1;
                break;
            }
            if (m->tracing)
                tb_swapmem_trace_copy(m, w, TB_TRACK_COMPUTE, start, tb_swapmem_trace_mark(m, TB_STREAM_COMPUTE));
            m->t[w].data = p;
            m->stats.relocated_bytes += bytes;
        } else {
            *m->loose[w - m->s->ntensors] = p;
        }
        held[(*nheld)++] = old;
    }
    /* The old blocks go only once the copies out of them are done. */
    if (m->be->stream_sync(m->be_ctx, m->device, TB_STREAM_COMPUTE) != TB_OK && rc == 0)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "waiting for the device's own copies failed");
    for (size_t k = 0; k < *nheld; k++)
        m->be->mem_free(m->be_ctx, m->device, held[k]);
    *nheld = 0;
    return rc;
}

/* Compaction inside the device: where the free bytes would hold `bytes` but no free
 * block does, the blocks of the cheapest address range that holds them (fewest bytes to
 * move; free blocks and movable ones only) are copied to free blocks elsewhere, on the
 * compute stream, when those can take them all. A copy inside the device runs at its
 * memory's speed, where the host route below crosses the link twice: at 304x304 under a
 * 256 MiB cap on emulated PCIe the dual task's 112 MiB of scratch moved 107 MiB of the
 * step's tensors out and back, 150-300 ms a time, two or three times a step. Moved: every
 * resident activation and gradient (the step's own and those a recomputation holds
 * included: the executor reads their addresses again) and the op's loose blocks; not
 * tensors with a copy under way, parameters, scratch. NULL when it cannot (no block list,
 * no such range, no room elsewhere), else as last_resort. */
void *tb_swapmem_compact(struct tb_swap_mem *m, size_t bytes, bool keep, struct tb_err *err)
{
    if (!m->be->mem_blocks || !m->be->copy_async || !m->be->stream_sync || tb_swapmem_free_bytes(m) < bytes)
        return NULL;
    const size_t n = read_blocks(m);
    if (n == SIZE_MAX)
        return NULL;
    const size_t most = m->s->ntensors + m->nloose;
    struct mover *mv = malloc((most + 1) * sizeof *mv), *sel = malloc((most + 1) * sizeof *sel);
    uint32_t *who = malloc((n + 1) * sizeof *who);
    uint64_t *need = malloc((n + 1) * sizeof *need), *hole = malloc((n + 1) * sizeof *hole);
    double *price = malloc((n + 1) * sizeof *price);
    const size_t cap = 2 * n + 2 * most + 2; /* old blocks, and blocks held in the range */
    void **held = malloc(cap * sizeof *held);
    void *p = NULL;
    if (!mv || !sel || !who || !need || !hole || !price || !held)
        goto out;
    size_t nmv = 0;
    for (size_t i = 0; i < m->s->ntensors; i++)
        if (m->t[i].data && tb_swapmem_movable_kind(m, i) && (m->res[i] == TB_RES_DEVICE || m->res[i] == TB_RES_BOTH))
            mv[nmv++] = (struct mover){ (uintptr_t)m->t[i].data, 0, (uint32_t)i };
    for (uint32_t l = 0; l < m->nloose; l++)
        if (*m->loose[l])
            mv[nmv++] = (struct mover){ (uintptr_t)*m->loose[l], 0, (uint32_t)(m->s->ntensors + l) };
    qsort(mv, nmv, sizeof *mv, by_mover_addr);
    for (size_t j = 1; j < nmv; j++)
        if (mv[j].addr == mv[j - 1].addr)
            goto out; /* two holders of one block: moving it for one would strand the other */
    /* Each block's mover (UINT32_MAX: free, or fixed), and the movers' block sizes. */
    for (size_t r = 0; r < n; r++) {
        who[r] = UINT32_MAX;
        if (m->blocks[r].flags & TB_MEM_BLOCK_FREE)
            continue;
        const struct mover key = { m->blocks[r].addr, 0, 0 };
        struct mover *hit = bsearch(&key, mv, nmv, sizeof *mv, by_mover_addr);
        if (hit) {
            hit->bytes = m->blocks[r].bytes;
            who[r] = (uint32_t)(hit - mv);
        }
    }
    /* Of the cheapest runs (fewest bytes to move), the one whose movers fit outside it. */
    for (size_t r = 0; r < n; r++)
        price[r] = who[r] == UINT32_MAX ? 0 : (double)m->blocks[r].bytes;
    struct outside o = { m->blocks, n, who, need, hole };
    size_t best_r = 0;
    const size_t best_l = cheapest_run(m->blocks, n, bytes, who, price, movers_fit_outside, &o, &best_r);
    if (best_l == SIZE_MAX)
        goto out;
    /* The range's movers, largest first (as the check placed them). */
    size_t nw = 0;
    for (size_t k = best_l; k <= best_r; k++)
        if (who[k] != UINT32_MAX)
            sel[nw++] = mv[who[k]];
    for (size_t a = 1; a < nw; a++)
        for (size_t c = a; c > 0 && sel[c].bytes > sel[c - 1].bytes; c--) {
            const struct mover t = sel[c];
            sel[c] = sel[c - 1];
            sel[c - 1] = t;
        }
    const uintptr_t lo = m->blocks[best_l].addr, hi = m->blocks[best_r].addr + m->blocks[best_r].bytes;
    size_t nheld = 0;
    if (move_movers(m, sel, nw, lo, hi, held, cap, &nheld, err) == 0)
        p = tb_swapmem_try_alloc(m, bytes, keep);
out:
    free(mv);
    free(sel);
    free(who);
    free(need);
    free(hole);
    free(price);
    free(held);
    return p;
}

/* ------------------------------------------------------------------ ranges */

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
    /* Each block's tensor and what moving it out costs. */
    for (size_t r = 0; r < n; r++) {
        const struct tb_mem_block *b = &m->blocks[r];
        who[r] = b->flags & TB_MEM_BLOCK_FREE ? UINT32_MAX : tensor_at(tensors, nt, b->addr);
        price[r] = 0;
        if (who[r] != UINT32_MAX) {
            const uint32_t i = who[r];
            price[r] = cost ? cost[i] : (double)b->bytes * (tb_swap_residency(m, i) == TB_RES_BOTH ? 0.5 : 1.0);
        }
    }
    size_t best_r = 0;
    const size_t best_l = cheapest_run(m->blocks, n, bytes, who, price, NULL, NULL, &best_r);
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
