/* backends/cuda/cuda_memory.c: device memory, one arena of cudaMalloc'd segments,
 * suballocated.
 *
 * cudaMalloc and cudaFree synchronise the device, and a training step asks for the same
 * sizes every step, so memory is taken from the driver in few large pieces and carved up
 * here, as the cpu backend does with host memory (the same arena, ../arena.c, so both
 * fragment alike): best fit over the free blocks, a larger block split, a freed block
 * merged with its free neighbours. With [backend] device_memory set, the whole capacity
 * is one cudaMalloc at create; without it (capacity = memory_fraction of the free memory
 * at start), the arena grows by segments of at least 256 MiB up to the capacity. Nothing
 * goes back to the driver until destroy (the only cudaFree). Sizes round up to 512 bytes,
 * which also aligns every block.
 *
 * A request that does not fit is NULL, counted in fails: the core's memory manager then
 * makes room and asks again, and frees coalesce, so the retry can fit. Blocks are the
 * caller's to free only once the work using them has completed (the contract), so a free
 * block is free for any stream. The segments belong to the backend instance. */
#include <stdlib.h>

#include "cuda_shared.h"

#define QUANTUM ((size_t)512)
#define SMALL ((size_t)1 << 20) /* up to this, blocks go high (arena.h) */
#define SEGMENT ((size_t)256 << 20) /* the least a growing arena takes from the driver */
#define SEGMENT_ROUND ((size_t)2 << 20)

static void release(uintptr_t base, size_t bytes, void *arg)
{
    (void)bytes;
    (void)arg;
    cudaFree((void *)base);
}

/* cudaMalloc of `bytes` given to the arena as a segment of `usable` bytes (the driver
 * aligns to 256 bytes, the arena to 512: bytes - usable is the slack for that). With the
 * lock held, or before any other call. Returns 0, or -1 with the driver's error cleared. */
static int add_segment(struct tb_cuda_memory *m, size_t bytes, size_t usable)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError(); /* out of memory is not sticky: clear it */
        return -1;
    }
    const uintptr_t base = (uintptr_t)p, start = (base + QUANTUM - 1) & ~(uintptr_t)(QUANTUM - 1);
    const size_t lead = (size_t)(start - base);
    if (lead + usable > bytes)
        usable = bytes - lead;
    if (tb_arena_add(&m->arena, base, lead + usable)) {
        cudaFree(p);
        return -1;
    }
    return 0;
}

int tb_cuda_memory_init(struct tb_cuda_memory *m, uint64_t capacity, bool reserve_all)
{
    *m = (struct tb_cuda_memory){ .capacity = capacity };
    if (tb_arena_init(&m->arena, QUANTUM))
        return TB_ERR_NOMEM;
    m->arena.small_limit = SMALL;
    pthread_mutex_init(&m->lock, NULL);
    const size_t usable = (size_t)capacity & ~(QUANTUM - 1);
    if (reserve_all && usable && capacity <= SIZE_MAX - QUANTUM) {
        if (add_segment(m, usable + QUANTUM, usable) == 0)
            m->fixed = true;
        else
            tb_plog(TB_LOG_WARN,
                    "device memory: could not reserve %.2f GiB at once; taking it in segments as needed, and "
                    "allocations may fail before the cap",
                    (double)capacity / (1u << 30));
    }
    return TB_OK;
}

void tb_cuda_memory_fini(struct tb_cuda_memory *m)
{
    if (!m->arena.quantum)
        return;
    tb_arena_fini(&m->arena, release, NULL);
    pthread_mutex_destroy(&m->lock);
}

/* A new segment for `size` bytes (rounded), within the capacity. With the lock held. */
static int grow(struct tb_cuda_memory *m, size_t size)
{
    const uint64_t room = m->capacity > m->arena.reserved ? m->capacity - m->arena.reserved : 0;
    if (size > room)
        return -1;
    size_t seg = size < SEGMENT ? SEGMENT : (size + SEGMENT_ROUND - 1) / SEGMENT_ROUND * SEGMENT_ROUND;
    if (seg > room)
        seg = (size_t)room & ~(QUANTUM - 1);
    /* A large segment first; the driver may have only the request's room left. */
    if (add_segment(m, seg, seg) == 0)
        return 0;
    return seg > size ? add_segment(m, size, size) : -1;
}

void *tb_cuda_memory_alloc(struct tb_cuda_memory *m, size_t bytes)
{
    const size_t size = tb_arena_round(&m->arena, bytes ? bytes : 1);
    pthread_mutex_lock(&m->lock);
    uintptr_t p = 0;
    if (size && m->arena.in_use + size <= m->capacity) {
        p = tb_arena_alloc(&m->arena, size);
        if (!p && !m->fixed && grow(m, size) == 0)
            p = tb_arena_alloc(&m->arena, size);
    }
    if (!p) {
        m->fails++;
        pthread_mutex_unlock(&m->lock);
        return NULL;
    }
    m->allocs++;
    if (m->arena.in_use > m->peak)
        m->peak = m->arena.in_use;
    pthread_mutex_unlock(&m->lock);
    return (void *)p;
}

void tb_cuda_memory_free(struct tb_cuda_memory *m, void *ptr)
{
    if (!ptr)
        return;
    pthread_mutex_lock(&m->lock);
    const size_t freed = tb_arena_free(&m->arena, (uintptr_t)ptr);
    pthread_mutex_unlock(&m->lock);
    if (!freed)
        tb_plog(TB_LOG_ERROR, "mem_free of %p, which this device did not hand out: ignored", ptr);
}

size_t tb_cuda_memory_blocks(struct tb_cuda_memory *m, struct tb_mem_block *out, size_t max)
{
    pthread_mutex_lock(&m->lock);
    const size_t n = tb_arena_blocks(&m->arena, out, max);
    pthread_mutex_unlock(&m->lock);
    return n;
}

void tb_cuda_memory_stats(struct tb_cuda_memory *m, struct tb_mem_stats *out)
{
    pthread_mutex_lock(&m->lock);
    struct tb_arena_stats st;
    tb_arena_stats(&m->arena, &st);
    /* The capacity is finite even when the arena grows (memory_fraction), so the core
     * counts free bytes against it: the room for a new segment is free in one piece. */
    const uint64_t room = !m->fixed && m->capacity > st.reserved ? m->capacity - st.reserved : 0;
    *out = (struct tb_mem_stats){
        .in_use = st.in_use,
        .peak = m->peak,
        .reserved = st.reserved,
        .capacity = m->capacity,
        .allocs = m->allocs,
        .fails = m->fails,
        .largest_free = st.largest_free > room ? st.largest_free : room,
    };
    pthread_mutex_unlock(&m->lock);
}

void tb_cuda_memory_reset_peak(struct tb_cuda_memory *m)
{
    pthread_mutex_lock(&m->lock);
    m->peak = m->arena.in_use;
    pthread_mutex_unlock(&m->lock);
}

void tb_cuda_memory_taken_outside(struct tb_cuda_memory *m, uint64_t bytes)
{
    pthread_mutex_lock(&m->lock);
    if (!m->fixed) {
        const uint64_t floor = m->arena.reserved;
        m->capacity = m->capacity > floor + bytes ? m->capacity - bytes : floor;
    }
    pthread_mutex_unlock(&m->lock);
}
