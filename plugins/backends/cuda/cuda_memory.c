/* backends/cuda/cuda_memory.c: device memory, a caching allocator over cudaMalloc.
 *
 * Sizes are rounded up (512 bytes below 1 MiB, 128 KiB above) and a freed block goes to a
 * cache, from which a later request takes the smallest block that holds it with at most
 * an eighth to spare. A request that would take reserved memory (handed out + cached)
 * over the capacity first returns cached blocks to the driver; one that would take the
 * handed-out bytes over it, or that cudaMalloc refuses even with an empty cache, is NULL:
 * the core's memory manager then makes room and asks again. Blocks are the caller's to
 * free only once the work using them has completed (the contract), so a cached block is
 * free for any stream. */
#include <stdlib.h>

#include "cuda_internal.h"

struct tb_cuda_block {
    void *ptr;
    size_t bytes; /* rounded */
    struct tb_cuda_block *next;
};

#define SMALL_ROUND ((size_t)512)
#define LARGE_ROUND ((size_t)128 << 10)
#define LARGE_FROM ((size_t)1 << 20)

static size_t round_size(size_t bytes)
{
    const size_t r = bytes < LARGE_FROM ? SMALL_ROUND : LARGE_ROUND;
    return (bytes + r - 1) / r * r;
}

static size_t bucket_of(const struct tb_cuda_memory *m, const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr >> 9; /* blocks are at least 512-byte aligned */
    p ^= p >> 17;
    p *= 0x9E3779B97F4A7C15ull;
    return (size_t)(p >> 20) & (m->nbuckets - 1);
}

int tb_cuda_memory_init(struct tb_cuda_memory *m, uint64_t capacity)
{
    *m = (struct tb_cuda_memory){ .capacity = capacity, .nbuckets = 4096 };
    m->buckets = calloc(m->nbuckets, sizeof *m->buckets);
    if (!m->buckets)
        return TB_ERR_NOMEM;
    pthread_mutex_init(&m->lock, NULL);
    return TB_OK;
}

static void free_list(struct tb_cuda_block *b)
{
    while (b) {
        struct tb_cuda_block *next = b->next;
        cudaFree(b->ptr);
        free(b);
        b = next;
    }
}

void tb_cuda_memory_fini(struct tb_cuda_memory *m)
{
    if (!m->buckets)
        return;
    free_list(m->cache);
    for (size_t i = 0; i < m->nbuckets; i++)
        free_list(m->buckets[i]);
    free(m->buckets);
    pthread_mutex_destroy(&m->lock);
    m->buckets = NULL;
}

/* With the lock held. */
static void trim_locked(struct tb_cuda_memory *m)
{
    free_list(m->cache);
    m->cache = NULL;
    m->reserved -= m->cached;
    m->cached = 0;
}

void tb_cuda_memory_trim(struct tb_cuda_memory *m)
{
    pthread_mutex_lock(&m->lock);
    trim_locked(m);
    pthread_mutex_unlock(&m->lock);
}

/* A cached block for `bytes`, unlinked from the cache, or NULL. */
static struct tb_cuda_block *take_cached(struct tb_cuda_memory *m, size_t bytes)
{
    for (struct tb_cuda_block **p = &m->cache; *p; p = &(*p)->next) {
        struct tb_cuda_block *b = *p;
        if (b->bytes < bytes)
            continue;
        if (b->bytes - bytes > bytes / 8)
            return NULL; /* smallest first: every later block wastes more */
        *p = b->next;
        m->cached -= b->bytes;
        return b;
    }
    return NULL;
}

void *tb_cuda_memory_alloc(struct tb_cuda_memory *m, size_t bytes)
{
    const size_t size = round_size(bytes ? bytes : 1);
    pthread_mutex_lock(&m->lock);
    struct tb_cuda_block *b = NULL;
    if (m->in_use + size > m->capacity)
        goto fail;
    b = take_cached(m, size);
    if (!b) {
        if (m->reserved + size > m->capacity)
            trim_locked(m);
        b = malloc(sizeof *b);
        if (!b)
            goto fail;
        b->bytes = size;
        cudaError_t e = cudaMalloc(&b->ptr, size);
        if (e != cudaSuccess && m->cached) {
            cudaGetLastError(); /* out of memory is not sticky: clear it and retry */
            trim_locked(m);
            e = cudaMalloc(&b->ptr, size);
        }
        if (e != cudaSuccess) {
            cudaGetLastError();
            free(b);
            goto fail;
        }
        m->reserved += size;
    }
    const size_t k = bucket_of(m, b->ptr);
    b->next = m->buckets[k];
    m->buckets[k] = b;
    m->in_use += size;
    m->allocs++;
    if (m->in_use > m->peak)
        m->peak = m->in_use;
    pthread_mutex_unlock(&m->lock);
    return b->ptr;
fail:
    m->fails++;
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

void tb_cuda_memory_free(struct tb_cuda_memory *m, void *ptr)
{
    if (!ptr)
        return;
    pthread_mutex_lock(&m->lock);
    struct tb_cuda_block **p = &m->buckets[bucket_of(m, ptr)];
    while (*p && (*p)->ptr != ptr)
        p = &(*p)->next;
    struct tb_cuda_block *b = *p;
    if (!b) {
        pthread_mutex_unlock(&m->lock);
        tb_plog(TB_LOG_ERROR, "mem_free of %p, which this device did not hand out: ignored", ptr);
        return;
    }
    *p = b->next;
    m->in_use -= b->bytes;
    /* Into the cache, smallest first. */
    struct tb_cuda_block **q = &m->cache;
    while (*q && (*q)->bytes < b->bytes)
        q = &(*q)->next;
    b->next = *q;
    *q = b;
    m->cached += b->bytes;
    pthread_mutex_unlock(&m->lock);
}

void tb_cuda_memory_stats(struct tb_cuda_memory *m, struct tb_mem_stats *out)
{
    pthread_mutex_lock(&m->lock);
    *out = (struct tb_mem_stats){
        .in_use = m->in_use,
        .peak = m->peak,
        .reserved = m->reserved,
        .capacity = m->capacity,
        .allocs = m->allocs,
        .fails = m->fails,
    };
    pthread_mutex_unlock(&m->lock);
}

void tb_cuda_memory_reset_peak(struct tb_cuda_memory *m)
{
    pthread_mutex_lock(&m->lock);
    m->peak = m->in_use;
    pthread_mutex_unlock(&m->lock);
}
