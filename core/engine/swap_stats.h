/* core/engine/swap_stats.h: what the memory manager (swapmem.c) counts, and the [swap]
 * policy instance it runs: shared by the engine, its executors and the reports. */
#ifndef TB_CORE_SWAP_STATS_H
#define TB_CORE_SWAP_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <trainbig/platform.h>
#include <trainbig/swap.h>

/* The counters, one row each: field, type (U64 or F64), how it aggregates, its
 * epochs.csv column and its member of epochs.jsonl's "swap" (0: not in that file),
 * what it counts. Rows in the order epochs.jsonl lists them; epochs.csv lists its
 * columns in the same order. Aggregation: SUM, counted since the manager was made (two
 * executors add; an epoch reports the difference); MAX, the largest so far (two
 * executors: the larger; an epoch reports it as it stands); LEVEL, what is held now
 * (two executors add; an epoch reports it as it stands). */
#define TB_SWAP_COUNTERS(X)                                                                                         \
    X(bytes_out, U64, SUM, "swap_out_bytes", "bytes_out", "bytes copied device to host")                          \
    X(bytes_in, U64, SUM, "swap_in_bytes", "bytes_in", "bytes copied host to device")                             \
    X(swaps_out, U64, SUM, "swaps_out", "swaps_out", "copies device to host")                                     \
    X(swaps_in, U64, SUM, "swaps_in", "swaps_in", "copies host to device")                                        \
    X(demand_ins, U64, SUM, 0, "demand_ins", "swap-ins a step had to wait for from the start")                    \
    X(evicting_allocs, U64, SUM, 0, "evicting_allocs", "allocations that fitted only after moving tensors out")  \
    X(stall_seconds, F64, SUM, "stall_seconds", "stall_seconds", "the training thread waiting for swap copies")   \
    X(drops, U64, SUM, 0, "drops", "tensors dropped for recomputation (tb_swap_drop)")                            \
    X(drop_bytes, U64, SUM, "drop_bytes", "drop_bytes", "their bytes")                                            \
    X(recomputes, U64, SUM, "recomputes", "recomputes", "forward ops run again to rebuild dropped tensors")       \
    X(recompute_bytes, U64, SUM, "recompute_bytes", "recompute_bytes",                                            \
      "the bytes those runs rebuilt: dropped tensors and what they needed that was gone")                         \
    X(recompute_seconds, F64, SUM, "recompute_seconds", "recompute_seconds", "their time on the training thread") \
    X(rebuild_nesting, U64, MAX, 0, "rebuild_nesting",                                                            \
      "dropped tensors rebuilt one inside another: 1, a rebuild that read none dropped; 2, one that rebuilt a "   \
      "dropped tensor it read first; and so on")                                                                   \
    X(relocated_bytes, U64, SUM, 0, "relocated_bytes", "moved inside the device to join free blocks (compaction)") \
    X(host_bytes, U64, LEVEL, 0, 0, "pinned host memory held for copies")

typedef uint64_t tb_swap_counter_U64;
typedef double tb_swap_counter_F64;

struct tb_swap_stats {
#define TB_SWAP_FIELD(field, type, agg, csv, json, what) tb_swap_counter_##type field;
    TB_SWAP_COUNTERS(TB_SWAP_FIELD)
#undef TB_SWAP_FIELD
};

enum tb_swap_counter_type { TB_SWAP_COUNTER_U64, TB_SWAP_COUNTER_F64 };
enum tb_swap_counter_agg { TB_SWAP_COUNTER_SUM, TB_SWAP_COUNTER_MAX, TB_SWAP_COUNTER_LEVEL };

/* A row of TB_SWAP_COUNTERS as data: where the field is and how it is reported. */
struct tb_swap_counter {
    const char *field;
    size_t offset; /* in struct tb_swap_stats */
    enum tb_swap_counter_type type;
    enum tb_swap_counter_agg agg;
    const char *csv, *json; /* NULL: not in that file */
    const char *what;
};

extern const struct tb_swap_counter tb_swap_counters[];
extern const size_t tb_swap_ncounters;

/* Counter c of s as a double (U64 counters are exact below 2^53). */
double tb_swap_counter_get(const struct tb_swap_stats *s, const struct tb_swap_counter *c);

/* Two executors' counters as one: each counter added, or the larger for MAX. */
void tb_swap_stats_add(struct tb_swap_stats *sum, const struct tb_swap_stats *a);

/* The counters of `now` since `mark`: SUM counters' differences, MAX and LEVEL as they
 * stand in `now`. */
struct tb_swap_stats tb_swap_stats_since(const struct tb_swap_stats *now, const struct tb_swap_stats *mark);

/* A policy instance, shared by the executors of a run (not owned). */
struct tb_swap_policy {
    const char *name;
    const struct tb_swap_ops *ops; /* NULL: none */
    void *ctx;
    const struct tb_link *link; /* NULL when no platform describes the link */
};

#endif
