/* backends/arena.c: the suballocator of arena.h: block splitting, coalescing, best fit.
 *
 * Each segment is tiled by blocks in address order (a doubly linked list per segment), free
 * or handed out; two free blocks are never neighbours, because a free merges with both.
 * Free blocks sit in 64 bins by size class (floor(log2(size / quantum))), each sorted by
 * size, then address, so the first block of the request's own bin that holds it, or else
 * the first block of the next non-empty bin, is the best fit: the smallest free block that
 * holds the request. Best fit rather than address-ordered first fit, because a training
 * step asks for the same mix of sizes every step: the smallest hole that fits leaves the
 * large free blocks whole for the large activations, and the lowest address among equal
 * sizes keeps the layout of one step like the last's. Handed-out blocks are found again
 * by address through a hash table. Freed descriptors are kept for reuse, so a steady
 * state of allocations and frees calls malloc for none. */
#include "arena.h"

#include <stdlib.h>
#include <string.h>
#include <trainbig/random.h>

struct tb_arena_block {
    uintptr_t addr;
    size_t size;
    bool free;
    struct tb_arena_block *prev, *next; /* neighbours in the segment, in address order */
    /* A free block: its bin's list. A handed-out one: its hash chain (link_next only). A
     * spare descriptor: the spare list (link_next). */
    struct tb_arena_block *link_prev, *link_next;
};

static unsigned log2_floor(uint64_t v)
{
    return 63u - (unsigned)__builtin_clzll(v);
}

static unsigned bin_of(const struct tb_arena *a, size_t size)
{
    return log2_floor((uint64_t)(size >> a->shift)); /* size >= quantum, so the argument is >= 1 */
}

static size_t bucket_of(const struct tb_arena *a, uintptr_t addr)
{
    uint64_t h = (uint64_t)(addr >> a->shift) * TB_GOLDEN64;
    h ^= h >> 29;
    return (size_t)h & (a->nbuckets - 1);
}

/* ------------------------------------------------------------------ descriptors */

static struct tb_arena_block *take_desc(struct tb_arena *a)
{
    struct tb_arena_block *b = a->spare;
    if (b)
        a->spare = b->link_next;
    else
        b = malloc(sizeof *b);
    if (b)
        memset(b, 0, sizeof *b);
    return b;
}

static void put_desc(struct tb_arena *a, struct tb_arena_block *b)
{
    b->link_next = a->spare;
    a->spare = b;
}

/* ------------------------------------------------------------------ bins */

static void bin_insert(struct tb_arena *a, struct tb_arena_block *b)
{
    const unsigned k = bin_of(a, b->size);
    struct tb_arena_block *at = a->bins[k], *before = NULL;
    while (at && (at->size < b->size || (at->size == b->size && at->addr < b->addr))) {
        before = at;
        at = at->link_next;
    }
    b->link_prev = before;
    b->link_next = at;
    if (before)
        before->link_next = b;
    else
        a->bins[k] = b;
    if (at)
        at->link_prev = b;
    else
        a->bin_tails[k] = b;
    a->nonempty |= 1ull << k;
    a->nfree++;
}

static void bin_remove(struct tb_arena *a, struct tb_arena_block *b)
{
    const unsigned k = bin_of(a, b->size);
    if (b->link_prev)
        b->link_prev->link_next = b->link_next;
    else
        a->bins[k] = b->link_next;
    if (b->link_next)
        b->link_next->link_prev = b->link_prev;
    else
        a->bin_tails[k] = b->link_prev;
    if (!a->bins[k])
        a->nonempty &= ~(1ull << k);
    b->link_prev = b->link_next = NULL;
    a->nfree--;
}

/* ------------------------------------------------------------------ live blocks */

static void grow_table(struct tb_arena *a)
{
    const size_t n = a->nbuckets * 2;
    struct tb_arena_block **t = calloc(n, sizeof *t);
    if (!t)
        return; /* longer chains, still correct */
    struct tb_arena_block **old = a->live;
    const size_t oldn = a->nbuckets;
    a->live = t;
    a->nbuckets = n;
    for (size_t i = 0; i < oldn; i++)
        for (struct tb_arena_block *b = old[i], *next; b; b = next) {
            next = b->link_next;
            const size_t k = bucket_of(a, b->addr);
            b->link_next = t[k];
            t[k] = b;
        }
    free(old);
}

static void live_insert(struct tb_arena *a, struct tb_arena_block *b)
{
    if (a->nlive >= 2 * a->nbuckets)
        grow_table(a);
    const size_t k = bucket_of(a, b->addr);
    b->link_prev = NULL;
    b->link_next = a->live[k];
    a->live[k] = b;
    a->nlive++;
}

static struct tb_arena_block *live_find(const struct tb_arena *a, uintptr_t addr)
{
    struct tb_arena_block *b = a->live[bucket_of(a, addr)];
    while (b && b->addr != addr)
        b = b->link_next;
    return b;
}

static struct tb_arena_block *live_remove(struct tb_arena *a, uintptr_t addr)
{
    struct tb_arena_block **p = &a->live[bucket_of(a, addr)];
    while (*p && (*p)->addr != addr)
        p = &(*p)->link_next;
    struct tb_arena_block *b = *p;
    if (b) {
        *p = b->link_next;
        b->link_next = NULL;
        a->nlive--;
    }
    return b;
}

/* ------------------------------------------------------------------ the arena */

/* The segment whose first block is b (b has no lower neighbour). */
static struct tb_arena_segment *first_of(struct tb_arena *a, const struct tb_arena_block *b)
{
    size_t i = 0;
    while (a->segs[i].first != b)
        i++;
    return &a->segs[i];
}

int tb_arena_init(struct tb_arena *a, size_t quantum)
{
    memset(a, 0, sizeof *a);
    if (quantum < 64 || (quantum & (quantum - 1)))
        return -1;
    a->quantum = quantum;
    a->shift = log2_floor(quantum);
    a->nbuckets = 1024;
    a->live = calloc(a->nbuckets, sizeof *a->live);
    if (!a->live) {
        memset(a, 0, sizeof *a); /* nothing for tb_arena_fini to do */
        return -1;
    }
    return 0;
}

void tb_arena_fini(struct tb_arena *a, void (*release)(uintptr_t base, size_t bytes, void *arg), void *arg)
{
    for (size_t i = 0; i < a->nsegs; i++) {
        for (struct tb_arena_block *b = a->segs[i].first, *next; b; b = next) {
            next = b->next;
            free(b);
        }
        if (release)
            release(a->segs[i].base, a->segs[i].bytes, arg);
    }
    for (struct tb_arena_block *b = a->spare, *next; b; b = next) {
        next = b->link_next;
        free(b);
    }
    free(a->segs);
    free(a->live);
    memset(a, 0, sizeof *a);
}

int tb_arena_add(struct tb_arena *a, uintptr_t base, size_t bytes)
{
    const uintptr_t start = (base + (a->quantum - 1)) & ~(uintptr_t)(a->quantum - 1);
    if (start < base || start - base >= bytes)
        return -1;
    const size_t size = (bytes - (size_t)(start - base)) & ~(a->quantum - 1);
    if (!size)
        return -1;
    if (a->nsegs == a->segs_cap) {
        const size_t cap = a->segs_cap ? 2 * a->segs_cap : 8;
        struct tb_arena_segment *s = realloc(a->segs, cap * sizeof *s);
        if (!s)
            return -1;
        a->segs = s;
        a->segs_cap = cap;
    }
    struct tb_arena_block *b = take_desc(a);
    if (!b)
        return -1;
    b->addr = start;
    b->size = size;
    b->free = true;
    a->segs[a->nsegs++] = (struct tb_arena_segment){ .base = base, .bytes = bytes, .start = start, .size = size,
                                                     .first = b };
    a->reserved += size;
    bin_insert(a, b);
    return 0;
}

size_t tb_arena_round(const struct tb_arena *a, size_t bytes)
{
    if (!bytes || bytes > SIZE_MAX - (a->quantum - 1))
        return 0;
    return (bytes + (a->quantum - 1)) & ~(a->quantum - 1);
}

uintptr_t tb_arena_alloc(struct tb_arena *a, size_t bytes)
{
    const size_t size = tb_arena_round(a, bytes);
    if (!size)
        return 0;
    const unsigned k = bin_of(a, size);
    struct tb_arena_block *b = NULL;
    if (a->nonempty & (1ull << k))
        for (b = a->bins[k]; b && b->size < size; b = b->link_next)
            ;
    if (!b) {
        const uint64_t above = k < 63 ? a->nonempty & (~0ull << (k + 1)) : 0;
        if (!above)
            return 0;
        b = a->bins[__builtin_ctzll(above)];
    }
    if (size <= a->small_limit) {
        /* Small: the highest block that holds it, so small long-lived blocks gather at
         * the top and leave the low free space whole for large ones. */
        for (unsigned j = k; j < TB_ARENA_BINS; j++)
            for (struct tb_arena_block *c = a->bins[j]; c; c = c->link_next)
                if (c->size >= size && c->addr > b->addr)
                    b = c;
    }
    bin_remove(a, b);
    if (b->size > size) {
        struct tb_arena_block *rest = take_desc(a);
        if (rest && size <= a->small_limit) { /* a small block takes the top end */
            rest->addr = b->addr;
            rest->size = b->size - size;
            rest->free = true;
            rest->prev = b->prev;
            rest->next = b;
            if (b->prev)
                b->prev->next = rest;
            else
                first_of(a, b)->first = rest;
            b->prev = rest;
            b->addr += rest->size;
            b->size = size;
            bin_insert(a, rest);
        } else if (rest) { /* without a descriptor the whole block goes out: wasteful, not wrong */
            rest->addr = b->addr + size;
            rest->size = b->size - size;
            rest->free = true;
            rest->prev = b;
            rest->next = b->next;
            if (b->next)
                b->next->prev = rest;
            b->next = rest;
            b->size = size;
            bin_insert(a, rest);
        }
    }
    b->free = false;
    live_insert(a, b);
    a->in_use += b->size;
    return b->addr;
}

size_t tb_arena_live_size(const struct tb_arena *a, uintptr_t addr)
{
    const struct tb_arena_block *b = live_find(a, addr);
    return b ? b->size : 0;
}

size_t tb_arena_free(struct tb_arena *a, uintptr_t addr)
{
    struct tb_arena_block *b = live_remove(a, addr);
    if (!b)
        return 0;
    const size_t size = b->size;
    a->in_use -= size;
    b->free = true;
    struct tb_arena_block *p = b->prev, *n = b->next;
    if (p && p->free) { /* into the free block below */
        bin_remove(a, p);
        p->size += b->size;
        p->next = n;
        if (n)
            n->prev = p;
        put_desc(a, b);
        b = p;
    }
    if (n && n->free) { /* the free block above into this one */
        bin_remove(a, n);
        b->size += n->size;
        b->next = n->next;
        if (n->next)
            n->next->prev = b;
        put_desc(a, n);
    }
    bin_insert(a, b);
    return size;
}

void tb_arena_stats(const struct tb_arena *a, struct tb_arena_stats *out)
{
    *out = (struct tb_arena_stats){
        .reserved = a->reserved,
        .in_use = a->in_use,
        .free = a->reserved - a->in_use,
        .largest_free = a->nonempty ? a->bin_tails[log2_floor(a->nonempty)]->size : 0,
        .live_blocks = a->nlive,
        .free_blocks = a->nfree,
        .segments = a->nsegs,
    };
}

size_t tb_arena_blocks(const struct tb_arena *a, struct tb_mem_block *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < a->nsegs; i++)
        for (const struct tb_arena_block *b = a->segs[i].first; b; b = b->next, n++)
            if (n < max)
                out[n] = (struct tb_mem_block){ b->addr, b->size,
                                                (b->free ? TB_MEM_BLOCK_FREE : 0u) |
                                                    (b == a->segs[i].first ? TB_MEM_BLOCK_FIRST : 0u) };
    return n;
}

bool tb_arena_check(const struct tb_arena *a)
{
    uint64_t reserved = 0, in_use = 0;
    size_t nfree = 0, nlive = 0;
    for (size_t i = 0; i < a->nsegs; i++) {
        const struct tb_arena_segment *s = &a->segs[i];
        uintptr_t at = s->start;
        const struct tb_arena_block *prev = NULL;
        for (const struct tb_arena_block *b = s->first; b; prev = b, b = b->next) {
            if (b->addr != at || b->prev != prev || !b->size || b->size % a->quantum || b->addr % a->quantum)
                return false;
            if (b->free && prev && prev->free)
                return false; /* two free neighbours: a missed coalesce */
            if (b->free) {
                nfree++;
            } else {
                nlive++;
                in_use += b->size;
                if (live_find(a, b->addr) != b)
                    return false;
            }
            at += b->size;
        }
        if (at != s->start + s->size)
            return false;
        reserved += s->size;
    }
    size_t binned = 0;
    for (unsigned k = 0; k < TB_ARENA_BINS; k++) {
        const struct tb_arena_block *prev = NULL;
        for (const struct tb_arena_block *b = a->bins[k]; b; prev = b, b = b->link_next) {
            if (!b->free || bin_of(a, b->size) != k || b->link_prev != prev)
                return false;
            if (prev && (prev->size > b->size || (prev->size == b->size && prev->addr >= b->addr)))
                return false;
            binned++;
        }
        if (a->bin_tails[k] != prev || !!(a->nonempty & (1ull << k)) != (prev != NULL))
            return false;
    }
    return reserved == a->reserved && in_use == a->in_use && nfree == a->nfree && binned == nfree &&
           nlive == a->nlive;
}
