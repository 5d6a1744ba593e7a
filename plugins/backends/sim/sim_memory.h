/* backends/sim/sim_memory.h: the modelled device's memory (sim_memory.c).
 *
 * The shared arena (plugins/backends/arena.c) over one range of addresses as large as the
 * accelerator's memory, with no bytes behind them: nothing reads or writes a modelled
 * tensor, so a reference-sized run needs none of the device's memory on this machine,
 * while fragmentation and out-of-memory are exactly the allocator's, with the cuda
 * backend's quantum and small-block rule. Reported as the backend contract's mem_stats
 * and mem_blocks. */
#ifndef TB_SIM_MEMORY_H
#define TB_SIM_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <trainbig/backend.h>

#include "../arena.h"

struct sim_memory {
    struct tb_arena arena;
    uint64_t capacity;
    uint64_t peak, allocs, fails;
};

/* capacity bytes of modelled memory (more than 0). 0, or -1 when out of host memory for
 * the arena's bookkeeping. */
int sim_memory_init(struct sim_memory *m, uint64_t capacity);
void sim_memory_fini(struct sim_memory *m);
/* An address of the range, aligned as the arena aligns; NULL when no free block holds it. */
void *sim_memory_alloc(struct sim_memory *m, size_t bytes);
/* Frees a block sim_memory_alloc handed out; false when ptr is not one (nothing changes). */
bool sim_memory_free(struct sim_memory *m, void *ptr);
void sim_memory_stats(const struct sim_memory *m, struct tb_mem_stats *out);
void sim_memory_reset_peak(struct sim_memory *m);

#endif
