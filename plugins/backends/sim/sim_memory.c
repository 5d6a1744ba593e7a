/* backends/sim/sim_memory.c: the modelled device's memory (sim_memory.h). */
#include "sim_memory.h"

#include <string.h>

/* As the cuda backend's: sizes round to 512 bytes, and blocks up to 1 MiB go high. */
#define QUANTUM ((size_t)512)
#define SMALL ((size_t)1 << 20)
/* Where the modelled range starts: far above any real mapping of this process, and
 * aligned, so an address of it is never mistaken for host memory in a debugger. */
#define BASE ((uintptr_t)1 << 46)

int sim_memory_init(struct sim_memory *m, uint64_t capacity)
{
    memset(m, 0, sizeof *m);
    if (capacity == 0 || capacity > SIZE_MAX || tb_arena_init(&m->arena, QUANTUM))
        return -1;
    m->arena.small_limit = SMALL;
    if (tb_arena_add(&m->arena, BASE, (size_t)capacity)) {
        tb_arena_fini(&m->arena, NULL, NULL);
        return -1;
    }
    m->capacity = capacity;
    return 0;
}

void sim_memory_fini(struct sim_memory *m)
{
    tb_arena_fini(&m->arena, NULL, NULL); /* nothing was mapped: nothing to release */
}

void *sim_memory_alloc(struct sim_memory *m, size_t bytes)
{
    const uintptr_t p = bytes ? tb_arena_alloc(&m->arena, bytes) : 0;
    if (!p) {
        m->fails += bytes > 0;
        return NULL;
    }
    m->allocs++;
    if (m->arena.in_use > m->peak)
        m->peak = m->arena.in_use;
    return (void *)p;
}

bool sim_memory_free(struct sim_memory *m, void *ptr)
{
    return ptr && tb_arena_free(&m->arena, (uintptr_t)ptr) > 0;
}

void sim_memory_stats(const struct sim_memory *m, struct tb_mem_stats *out)
{
    struct tb_arena_stats st;
    tb_arena_stats(&m->arena, &st);
    *out = (struct tb_mem_stats){ .in_use = st.in_use,
                                  .peak = m->peak,
                                  .reserved = st.reserved, /* the whole range, as a set cap reserves */
                                  .capacity = m->capacity,
                                  .allocs = m->allocs,
                                  .fails = m->fails,
                                  .largest_free = st.largest_free };
}

void sim_memory_reset_peak(struct sim_memory *m)
{
    m->peak = m->arena.in_use;
}
