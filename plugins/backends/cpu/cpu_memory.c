/* backends/cpu/cpu_memory.c: "device" memory: host memory reserved as a GPU's is, then
 * suballocated.
 *
 * A GPU has a fixed amount of memory and a caching allocator that carves it up. To behave
 * alike, with a cap ([backend] device_memory > 0) the whole capacity is mapped once at
 * create and every page of it touched there, so no step page-faults (a fresh 16 MB block
 * costs milliseconds in faults) and nothing is mapped or unmapped while training. Without
 * a cap, the memory grows by segments of at least 64 MiB (touched the same way), kept
 * until destroy: steady-state steps map nothing either. The arena (../arena.c) hands out
 * blocks from them by best fit, splitting a larger free block and merging a freed block
 * with free neighbours, so fragmentation is real and measured (largest_free); blocks up
 * to 1 MiB come from the top end, so that small long-lived ones (statistics, small
 * parameters) do not split the low memory large activations and op scratch need. Sizes round
 * up to 512 bytes (the cuda backend's quantum too), which also aligns every block.
 *
 * A request that does not fit is NULL (counted in fails), never an abort: the core's
 * memory manager frees tensors and asks again, and since frees coalesce, the retry can
 * find the room. Freeing a pointer that is not a live block is a bug in the caller: an
 * internal error and abort. Copy threads and the compute thread both allocate and free,
 * hence the lock. This memory belongs to the backend instance and is unmapped at destroy;
 * pinned host memory is another thing (cpu_host.c). Built with --enable-debug, freed
 * blocks are poisoned. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_POPULATE */
#include "config.h"     /* TB_DEBUG */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu_shared.h"

#define QUANTUM ((size_t)512)
#define SMALL ((size_t)1 << 20)    /* up to this, blocks go high (arena.h) */
#define SEGMENT ((size_t)64 << 20) /* the least an uncapped arena grows by */

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

/* Maps `bytes` of memory and touches every page of it; NULL when the system refuses. */
static void *reserve(size_t bytes)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#ifdef MAP_POPULATE
    flags |= MAP_POPULATE;
#endif
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    /* MAP_POPULATE is a hint; a write to each page makes sure (cheap once populated). */
    const size_t page = page_size();
    for (size_t o = 0; o < bytes; o += page)
        ((volatile char *)p)[o] = 0;
    return p;
}

static void unreserve(uintptr_t base, size_t bytes, void *arg)
{
    (void)arg;
    munmap((void *)base, bytes);
}

/* MemAvailable of /proc/meminfo in bytes; 0 when unknown. */
static uint64_t available_memory(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    uint64_t kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %" SCNu64 " kB", &kib) == 1)
            break;
    fclose(f);
    return kib * 1024;
}

int tb_cpu_memory_init(struct tb_cpu_memory *m, uint64_t cap, struct tb_err *err)
{
    memset(m, 0, sizeof *m);
    m->capacity = cap ? cap : UINT64_MAX;
    if (tb_arena_init(&m->arena, QUANTUM))
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    m->arena.small_limit = SMALL;
    pthread_mutex_init(&m->lock, NULL);
    if (!cap)
        return TB_OK;
    if (cap < QUANTUM) { /* in bytes: as MiB it would read 0.00 */
        tb_cpu_memory_fini(m);
        return tb_err_set(err, TB_ERR_NOMEM,
                          "cpu backend: [backend] device_memory = %llu byte%s is less than one block (%zu bytes): "
                          "write 0 for no cap, or a size such as 256M",
                          (unsigned long long)cap, cap == 1 ? "" : "s", QUANTUM);
    }
    const uint64_t avail = available_memory();
    const char *fail = NULL;
    void *p = NULL;
    if (cap > SIZE_MAX || (avail && cap > avail))
        fail = "more than this machine's available memory (it is reserved and touched at start)";
    else if (!(p = reserve((size_t)cap)))
        fail = "the system refused to map it";
    else if (tb_arena_add(&m->arena, (uintptr_t)p, (size_t)cap)) {
        munmap(p, (size_t)cap);
        fail = "out of memory for its bookkeeping";
    }
    if (fail) {
        tb_cpu_memory_fini(m);
        return tb_err_set(err, TB_ERR_NOMEM,
                          "cpu backend: cannot reserve [backend] device_memory = %.2f MiB (%.2f MiB available): %s",
                          (double)cap / 1048576.0, (double)avail / 1048576.0, fail);
    }
    return TB_OK;
}

void tb_cpu_memory_fini(struct tb_cpu_memory *m)
{
    tb_arena_fini(&m->arena, unreserve, NULL);
    pthread_mutex_destroy(&m->lock);
}

/* Without a cap: a new segment for at least `bytes`, and the block from it. With the lock. */
static uintptr_t grow(struct tb_cpu_memory *m, size_t bytes)
{
    const size_t need = tb_arena_round(&m->arena, bytes), page = page_size();
    if (!need || need > SIZE_MAX - page)
        return 0;
    const size_t seg = need <= SEGMENT ? SEGMENT : (need + page - 1) / page * page;
    /* Touching more than the host has left would wake the OOM killer rather than fail:
     * refuse first, and the core says the host's memory ran out. */
    const uint64_t avail = available_memory();
    if (avail && seg > avail)
        return 0;
    void *p = reserve(seg);
    if (!p)
        return 0;
    if (tb_arena_add(&m->arena, (uintptr_t)p, seg)) {
        munmap(p, seg);
        return 0;
    }
    return tb_arena_alloc(&m->arena, bytes);
}

void *tb_cpu_memory_alloc(struct tb_cpu_memory *m, size_t bytes)
{
    if (bytes == 0)
        return NULL;
    pthread_mutex_lock(&m->lock);
    uintptr_t p = tb_arena_alloc(&m->arena, bytes);
    if (!p && m->capacity == UINT64_MAX)
        p = grow(m, bytes);
    if (!p) {
        m->fails++;
        pthread_mutex_unlock(&m->lock);
        return NULL;
    }
    if (m->arena.in_use > m->peak)
        m->peak = m->arena.in_use;
    m->allocs++;
    pthread_mutex_unlock(&m->lock);
    return (void *)p;
}

void tb_cpu_memory_free(struct tb_cpu_memory *m, void *ptr)
{
    if (!ptr)
        return;
    pthread_mutex_lock(&m->lock);
    const size_t size = tb_arena_live_size(&m->arena, (uintptr_t)ptr);
    if (!size) {
        /* Not a live block of ours: a bug in the caller, and memory is corrupt from here. */
        pthread_mutex_unlock(&m->lock);
        fprintf(stderr,
                "trainbig: internal error: cpu backend mem_free(%p) of a pointer it did not hand out (or freed "
                "twice)\n",
                ptr);
        abort();
    }
#ifdef TB_DEBUG
    /* All ones: NaN as floats. A read of this block before it is handed out again (a
     * tensor used after a swap freed it, before its copy back) then poisons the results. */
    memset(ptr, 0xff, size);
#endif
    tb_arena_free(&m->arena, (uintptr_t)ptr);
    pthread_mutex_unlock(&m->lock);
}

void tb_cpu_memory_stats(struct tb_cpu_memory *m, struct tb_mem_stats *out)
{
    pthread_mutex_lock(&m->lock);
    struct tb_arena_stats st;
    tb_arena_stats(&m->arena, &st);
    out->in_use = st.in_use;
    out->peak = m->peak;
    out->reserved = st.reserved;
    out->capacity = m->capacity;
    out->allocs = m->allocs;
    out->fails = m->fails;
    out->largest_free = st.largest_free;
    pthread_mutex_unlock(&m->lock);
}

size_t tb_cpu_memory_blocks(struct tb_cpu_memory *m, struct tb_mem_block *out, size_t max)
{
    pthread_mutex_lock(&m->lock);
    const size_t n = tb_arena_blocks(&m->arena, out, max);
    pthread_mutex_unlock(&m->lock);
    return n;
}

void tb_cpu_memory_reset_peak(struct tb_cpu_memory *m)
{
    pthread_mutex_lock(&m->lock);
    m->peak = m->arena.in_use;
    pthread_mutex_unlock(&m->lock);
}

/* The op scratch space of the instance, grown on demand from its device memory; past the
 * prefix a widened op holds there (cpu_widen.c), which a growth would move: then it does
 * not grow, and says so in scratch_short. */
void *tb_cpu_scratch(struct tb_cpu *cpu, size_t bytes, struct tb_err *err)
{
    cpu->scratch_handed++;
    const size_t pre = cpu->scratch_prefix, want = pre + bytes;
    if (want > cpu->scratch_asked)
        cpu->scratch_asked = want;
    if (want <= cpu->scratch_bytes && cpu->scratch)
        return (char *)cpu->scratch + pre;
    if (pre) {
        cpu->scratch_short = true;
        tb_err_set(err, TB_ERR_NOMEM, "cpu backend: op scratch space of %zu bytes is short of %zu", cpu->scratch_bytes,
                   want);
        return NULL;
    }
    if (cpu->scratch)
        tb_cpu_memory_free(&cpu->memory, cpu->scratch);
    cpu->scratch = tb_cpu_memory_alloc(&cpu->memory, bytes ? bytes : 64);
    cpu->scratch_bytes = cpu->scratch ? bytes : 0;
    if (!cpu->scratch) {
        cpu->failed_bytes = bytes ? bytes : 64;
        tb_err_set(err, TB_ERR_NOMEM, "cpu backend: no device memory left for %zu bytes of op scratch space", bytes);
    }
    return cpu->scratch;
}
