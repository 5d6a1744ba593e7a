/* backends/arena.h: a suballocator over address ranges, shared by the cpu and cuda backends.
 *
 * It manages addresses only and never touches the memory it hands out: each backend
 * reserves its device memory itself (mmap, cudaMalloc) and gives the ranges to the arena
 * as segments; the arena's own bookkeeping (block descriptors, the live-block table) is
 * ordinary host memory it mallocs and frees. The segments are the backend's to release,
 * through the callback of tb_arena_fini. Both plugins compile arena.c in (plugins do not
 * link to each other), so both backends split, fit and fragment alike.
 *
 * Not thread safe: the backends call it under their allocator's lock. */
#ifndef TB_ARENA_H
#define TB_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <trainbig/backend.h>

#define TB_ARENA_BINS 64

struct tb_arena_block; /* one block of a segment, free or handed out (arena.c) */

struct tb_arena_segment {
    uintptr_t base; /* as given to tb_arena_add, for the release callback */
    size_t bytes;
    uintptr_t start; /* the part blocks tile: base aligned up, bytes down to the quantum */
    size_t size;
    struct tb_arena_block *first; /* the lowest block (it stays the lowest: it never merges down) */
};

struct tb_arena {
    size_t quantum;                                   /* sizes and addresses are multiples of it */
    size_t small_limit;                               /* requests up to this size go high (0: none) */
    unsigned shift;                                   /* log2(quantum) */
    uint64_t nonempty;                                /* bit b: bins[b] has blocks */
    struct tb_arena_block *bins[TB_ARENA_BINS];       /* free blocks by size class, smallest first */
    struct tb_arena_block *bin_tails[TB_ARENA_BINS];  /* the largest of each bin */
    struct tb_arena_block **live;                     /* handed-out blocks by address (hash chains) */
    size_t nbuckets, nlive, nfree;
    struct tb_arena_block *spare;                     /* unused descriptors, kept for reuse */
    struct tb_arena_segment *segs;
    size_t nsegs, segs_cap;
    uint64_t reserved; /* bytes of all segments (after alignment) */
    uint64_t in_use;   /* bytes of handed-out blocks */
};

struct tb_arena_stats {
    uint64_t reserved;     /* bytes of all segments */
    uint64_t in_use;       /* bytes handed out (rounded sizes) */
    uint64_t free;         /* reserved - in_use */
    uint64_t largest_free; /* the largest block one allocation could get now, without a new segment */
    size_t live_blocks, free_blocks, segments;
};

/* quantum: a power of two, at least 64. Returns 0, or -1 when out of host memory. */
int tb_arena_init(struct tb_arena *a, size_t quantum);
/* Calls release(base, bytes, arg) for every segment (release may be NULL), then frees the
 * bookkeeping. Blocks still handed out are forgotten: their owner has stopped using them. */
void tb_arena_fini(struct tb_arena *a, void (*release)(uintptr_t base, size_t bytes, void *arg), void *arg);
/* Hands [base, base + bytes) to the arena as a new segment: its start is aligned up and its
 * size down to the quantum. Blocks never span two segments. Returns 0, or -1 when the
 * aligned range is empty or the bookkeeping is out of host memory (the range is not kept). */
int tb_arena_add(struct tb_arena *a, uintptr_t base, size_t bytes);
/* bytes rounded up to the quantum; 0 when bytes is 0 or that overflows. */
size_t tb_arena_round(const struct tb_arena *a, size_t bytes);
/* The best-fitting free block for bytes (the smallest that holds the rounded size, the
 * lowest address among equals), split so that the rest stays free. A small request (up to
 * small_limit, which the caller may set after init) takes instead the top end of the
 * highest free block that holds it. 0 when no free block holds it (or bytes is 0): the
 * caller may add a segment and ask again. */
uintptr_t tb_arena_alloc(struct tb_arena *a, size_t bytes);
/* Frees a block tb_arena_alloc handed out, merging it with free neighbours on both sides.
 * Returns its size, or 0 when addr is not a handed-out block (nothing changes). */
size_t tb_arena_free(struct tb_arena *a, uintptr_t addr);
/* The size of the handed-out block at addr, or 0 when there is none. */
size_t tb_arena_live_size(const struct tb_arena *a, uintptr_t addr);
void tb_arena_stats(const struct tb_arena *a, struct tb_arena_stats *out);
/* Every block, free and handed out, in address order segment by segment, into
 * out[0..max-1] (the backend's mem_blocks; a segment's first block is marked
 * TB_MEM_BLOCK_FIRST); returns the number of blocks, which may be more than max. */
size_t tb_arena_blocks(const struct tb_arena *a, struct tb_mem_block *out, size_t max);
/* Checks every invariant (blocks tile each segment, no two free neighbours, the bins are
 * sorted and hold exactly the free blocks, the byte counts add up): for tests. */
bool tb_arena_check(const struct tb_arena *a);

#endif
