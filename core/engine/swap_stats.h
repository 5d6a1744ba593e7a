/* core/engine/swap_stats.h: what the memory manager (swapmem.c) counts, and the [swap]
 * policy instance it runs: shared by the engine, its executors and the reports. */
#ifndef TB_CORE_SWAP_STATS_H
#define TB_CORE_SWAP_STATS_H

#include <stdint.h>
#include <trainbig/platform.h>
#include <trainbig/swap.h>

/* Counters, cumulative since the manager was made. */
struct tb_swap_stats {
    uint64_t bytes_out, bytes_in; /* copied device to host, host to device */
    uint64_t swaps_out, swaps_in;
    uint64_t demand_ins;      /* swap-ins a step had to wait for from the start */
    double stall_seconds;     /* the training thread waiting for swap copies */
    uint64_t evicting_allocs; /* allocations that fitted only after moving tensors out */
    uint64_t host_bytes;      /* pinned host memory held for copies */
    uint64_t relocated_bytes; /* moved inside the device to join free blocks (compaction) */
    /* Recomputation (tb_swap_drop): tensors dropped and their bytes; forward ops run again
     * to rebuild them, the bytes those runs rebuilt (dropped tensors, and what they needed
     * that was gone) and the time they took on the training thread. */
    uint64_t drops, drop_bytes;
    uint64_t recomputes, recompute_bytes;
    double recompute_seconds;
    /* The most dropped tensors rebuilt one inside another: 1, a rebuild that read none
     * dropped; 2, one that rebuilt a dropped tensor it read first; and so on. */
    uint64_t rebuild_nesting;
};

/* A policy instance, shared by the executors of a run (not owned). */
struct tb_swap_policy {
    const char *name;
    const struct tb_swap_ops *ops; /* NULL: none */
    void *ctx;
    const struct tb_link *link; /* NULL when no platform describes the link */
};

#endif
