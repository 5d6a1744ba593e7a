/* backends/cpu/cpu_memory.c: "device" memory: host memory counted against the
 * device_memory cap, with a caching allocator.
 *
 * Freed blocks are kept and handed out again for requests of the same rounded size: a
 * training step asks for the same sizes every time, and a fresh multi-megabyte block
 * costs milliseconds in page faults. Cached blocks count against the cap, as a GPU's
 * cached memory does; when a request does not fit, the cache is released first, and only
 * then does the allocation fail (NULL). Built with --enable-debug, freed blocks are
 * poisoned. */
#include "config.h" /* TB_DEBUG */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#define HEADER 64 /* bytes before each block's data: keeps the data 64-byte aligned */
#define BLOCK_MAGIC 0x7462626cu

struct tb_cpu_block {
    size_t size; /* data bytes, rounded */
    struct tb_cpu_block *prev, *next;
    uint32_t magic;
    bool cached;
};

_Static_assert(sizeof(struct tb_cpu_block) <= HEADER, "block header must fit in HEADER bytes");

/* Small requests round to 256 bytes, large ones to 64 KiB, so that tensors of nearly
 * equal size share blocks without wasting more than a few percent. */
static size_t round_size(size_t bytes)
{
    size_t g = bytes < (1u << 20) ? 256 : (64u << 10);
    return (bytes + g - 1) / g * g;
}

static void unlink_block(struct tb_cpu_block **list, struct tb_cpu_block *b)
{
    if (b->prev)
        b->prev->next = b->next;
    else
        *list = b->next;
    if (b->next)
        b->next->prev = b->prev;
    b->prev = b->next = NULL;
}

static void push_block(struct tb_cpu_block **list, struct tb_cpu_block *b)
{
    b->prev = NULL;
    b->next = *list;
    if (*list)
        (*list)->prev = b;
    *list = b;
}

void tb_cpu_memory_init(struct tb_cpu_memory *m, uint64_t capacity)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->lock, NULL);
    m->capacity = capacity;
}

static void release_list(struct tb_cpu_block **list)
{
    while (*list) {
        struct tb_cpu_block *b = *list;
        *list = b->next;
        free(b);
    }
}

void tb_cpu_memory_fini(struct tb_cpu_memory *m)
{
    release_list(&m->free_list);
    release_list(&m->live);
    pthread_mutex_destroy(&m->lock);
}

/* Frees cached blocks, largest first, until `need` more bytes fit under the cap. */
static void shrink_cache(struct tb_cpu_memory *m, uint64_t need)
{
    while (m->free_list && m->reserved + need > m->capacity) {
        struct tb_cpu_block *big = m->free_list;
        for (struct tb_cpu_block *b = m->free_list; b; b = b->next)
            if (b->size > big->size)
                big = b;
        unlink_block(&m->free_list, big);
        m->reserved -= big->size;
        free(big);
    }
}

void *tb_cpu_memory_alloc(struct tb_cpu_memory *m, size_t bytes)
{
    if (bytes == 0 || bytes > SIZE_MAX - HEADER - (64u << 10))
        return NULL;
    size_t size = round_size(bytes);
    pthread_mutex_lock(&m->lock);
    struct tb_cpu_block *b = NULL;
    for (struct tb_cpu_block *c = m->free_list; c; c = c->next)
        if (c->size == size) {
            b = c;
            break;
        }
    if (b) {
        unlink_block(&m->free_list, b);
    } else {
        if (m->reserved + size > m->capacity)
            shrink_cache(m, size);
        if (m->reserved + size <= m->capacity)
            b = aligned_alloc(HEADER, HEADER + size);
        if (!b) {
            m->fails++;
            pthread_mutex_unlock(&m->lock);
            return NULL;
        }
        b->size = size;
        b->magic = BLOCK_MAGIC;
        m->reserved += size;
    }
    b->cached = false;
    push_block(&m->live, b);
    m->in_use += size;
    if (m->in_use > m->peak)
        m->peak = m->in_use;
    m->allocs++;
    pthread_mutex_unlock(&m->lock);
    return (char *)b + HEADER;
}

void tb_cpu_memory_free(struct tb_cpu_memory *m, void *ptr)
{
    if (!ptr)
        return;
    struct tb_cpu_block *b = (struct tb_cpu_block *)((char *)ptr - HEADER);
    if (b->magic != BLOCK_MAGIC || b->cached) {
        /* Not a live block of ours: a bug in the caller, and memory is corrupt from here. */
        fprintf(stderr, "trainbig: internal error: cpu backend mem_free(%p) of a pointer it did not hand out%s\n", ptr,
                b->magic == BLOCK_MAGIC ? " (freed twice)" : "");
        abort();
    }
#ifdef TB_DEBUG
    /* All ones: NaN as floats. A read of this block before it is handed out again (a
     * tensor used after a swap freed it, before its copy back) then poisons the results. */
    memset(ptr, 0xff, b->size);
#endif
    pthread_mutex_lock(&m->lock);
    unlink_block(&m->live, b);
    b->cached = true;
    push_block(&m->free_list, b);
    m->in_use -= b->size;
    pthread_mutex_unlock(&m->lock);
}

void tb_cpu_memory_stats(struct tb_cpu_memory *m, struct tb_mem_stats *out)
{
    pthread_mutex_lock(&m->lock);
    out->in_use = m->in_use;
    out->peak = m->peak;
    out->reserved = m->reserved;
    out->capacity = m->capacity;
    out->allocs = m->allocs;
    out->fails = m->fails;
    pthread_mutex_unlock(&m->lock);
}

void tb_cpu_memory_reset_peak(struct tb_cpu_memory *m)
{
    pthread_mutex_lock(&m->lock);
    m->peak = m->in_use;
    pthread_mutex_unlock(&m->lock);
}
