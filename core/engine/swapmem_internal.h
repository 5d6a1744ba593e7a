/* core/engine/swapmem_internal.h: the memory manager of an executor (swapmem.c): device memory
 * for its tensors, their residency, the copies that move them between device and pinned
 * host memory, the swap policy's hooks, and the accounting. See trainbig/swap.h. */
#ifndef TB_CORE_SWAPMEM_INTERNAL_H
#define TB_CORE_SWAPMEM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <trainbig/backend.h>
#include <trainbig/swap.h>

#include "core/engine/swap_stats.h"
#include "core/engine/schedule_internal.h"

/* The tracks of a traced step, as tb_trace_span's. */
enum tb_trace_track { TB_TRACK_COMPUTE = 0, TB_TRACK_TO_DEVICE = 1, TB_TRACK_TO_HOST = 2 };

/* One copy of a traced step: events recorded on its stream before and after it. */
struct tb_trace_copy {
    uint32_t tensor;
    enum tb_trace_track track; /* compute: a move inside the device (compaction) */
    struct tb_event *start, *end;
};

/* Recomputation, the executor's (recompute.c; all NULL: nothing is ever dropped): whether
 * tensor i may be dropped while step `now` runs; the steps that would rebuild i before
 * `step` (tb_swap_recompute_steps); rebuilding dropped tensor i before step `step`. */
struct tb_swap_rebuild {
    bool (*droppable)(const void *arg, size_t i, size_t now);
    int (*chain)(const void *arg, size_t i, size_t step, uint32_t *steps, size_t max);
    int (*rebuild)(void *arg, size_t step, size_t i, struct tb_err *err);
    void *arg;
};

struct tb_swap_mem {
    const struct tb_backend_ops *be;
    void *be_ctx;
    int device;
    void (*release_scratch)(void *ctx, int device); /* the backend's, or NULL */
    const struct tb_schedule *s;
    struct tb_tensor *t;  /* the executor's tensors: data is the device block or NULL */
    const uint32_t *pins; /* the executor's: > 0 while a running step uses the tensor */
    struct tb_swap_policy policy;
    uint8_t *res;                /* [ntensors] enum tb_residency */
    void **host;                 /* [ntensors] pinned copy, kept for reuse (sizes do not change) */
    struct tb_event **ev;        /* [ntensors] its latest copy */
    uint64_t *used;              /* [ntensors] clock at its last use */
    bool *recalled;              /* [ntensors] moving out but asked back (tb_swap_in): its block
                                  * stays on the device when the copy is done */
    uint64_t clock;              /* steps run */
    struct tb_event *compute_ev; /* orders copies after the compute that made their data */
    bool tracing;                /* record each copy's start and end (tb_exec_trace_begin) */
    struct tb_trace_copy *trace;
    size_t ntrace, trace_cap;
    struct tb_swap_stats stats;
    /* The swap space, shared by the engine's executors (its swap_space_*): the host bytes
     * all copies hold, the most they may (0: no limit), and where that figure comes from.
     * NULL: not counted. */
    uint64_t *space_used;
    const uint64_t *space_limit;
    const char *space_why;
    /* Blocks the executor holds for the running op outside any tensor (a backward op's
     * gradient temporaries, not yet written): the last resort frees and re-allocates
     * them around the block it makes room for, so they must not split it. Each entry is
     * where the executor keeps the address; it reads it again before the op runs. */
    void **loose[TB_OP_MAX_IN];
    size_t loose_bytes[TB_OP_MAX_IN];
    uint32_t nloose;
    struct tb_swap_rebuild rb;
    const double *op_seconds; /* the executor's [nsteps], or NULL */
    size_t now;               /* the step running, or about to (SIZE_MAX: none yet) */
    /* tb_swap_out_range's: the backend's blocks, kept for reuse (owned; freed by fini). */
    struct tb_mem_block *blocks;
    size_t blocks_cap;
};

/* Sets m up for executor tensors t (and their pins) of schedule s, with a policy (may be
 * NULL: none) and the executor's recomputation (may be NULL: none). Calls the policy's
 * plan(). On failure everything is released. */
int tb_swapmem_init(struct tb_swap_mem *m, const struct tb_backend_ops *be, void *be_ctx, int device,
                    const struct tb_schedule *s, struct tb_tensor *t, const uint32_t *pins,
                    const struct tb_swap_policy *policy, const struct tb_swap_rebuild *rb, struct tb_err *err);
/* Waits for every copy, frees host copies and events (device blocks are the executor's
 * to free, after tb_swapmem_drop). */
void tb_swapmem_fini(struct tb_swap_mem *m);

/* `bytes` of device memory for step `step` (SIZE_MAX: setup): when they do not fit, first
 * the blocks of finished swap-outs are freed, then the backend's scratch, then the policy
 * moves tensors out until the allocation succeeds (free bytes are not enough: they may be
 * split into blocks too small for it); last, resident tensors and the op's loose blocks
 * are moved inside the device to join free blocks (compaction, when free bytes suffice
 * and the backend lists its blocks), else every tensor that may move goes to the host
 * (those the policy passes over for their size too) and what is left is compacted, else
 * the step's own tensors and the op's loose blocks are placed again around it, largest
 * first (through the host). Data pointers of moved tensors change. NULL when nothing is left to move and it still
 * does not fit (the caller reports the out-of-memory); *policy_err is set, with err, when
 * the policy itself failed. */
void *tb_swapmem_alloc(struct tb_swap_mem *m, size_t step, size_t bytes, int *policy_err, struct tb_err *err);
/* Makes room for `bytes` that something other than a tensor needs (an op's scratch, which
 * the backend allocates itself): finished swap-outs first, else through the policy, until
 * an allocation of `bytes` would succeed. True when memory was freed and it would (the op
 * may run again); *policy_err (with err) when the policy failed. */
/* The running op's loose blocks (see struct tb_swap_mem), n <= TB_OP_MAX_IN; n = 0
 * forgets them (the op has run). */
void tb_swapmem_set_loose(struct tb_swap_mem *m, void **const *blocks, const size_t *bytes, uint32_t n);
bool tb_swapmem_make_room(struct tb_swap_mem *m, size_t step, uint64_t bytes, int *policy_err, struct tb_err *err);
/* Tensor i's value is dead: its device block (after any copy reading it) and residency
 * go; the host buffer is kept for the next step. */
void tb_swapmem_drop(struct tb_swap_mem *m, size_t i);

/* Around a step: before_step runs the policy's hook, then makes every tensor the step
 * touches resident (swapping in what is on the host, waiting for copies under way);
 * after_step marks what the step wrote and runs the policy's hook. */
int tb_swapmem_before_step(struct tb_swap_mem *m, size_t step, struct tb_err *err);
int tb_swapmem_after_step(struct tb_swap_mem *m, size_t step, struct tb_err *err);
/* Makes tensor i resident for step `step`: brought back from the host (the step waits:
 * stall), its copy waited for, or rebuilt when dropped. Its last-used clock is set. */
int tb_swapmem_resident(struct tb_swap_mem *m, size_t step, size_t i, struct tb_err *err);
/* Brings tensor i back to the device and waits for it (reading an output a policy moved
 * out). */
int tb_swapmem_fetch(struct tb_swap_mem *m, size_t i, struct tb_err *err);
/* Drops the traced copies and their events. */
void tb_swapmem_trace_clear(struct tb_swap_mem *m);
/* Tracing a copy: an event on `stream` now (NULL: none), before the copy and after it;
 * then the copy of tensor i kept on `track` (tb_trace_copy's), both events owned by the
 * trace from there (a copy that cannot be kept is left out, its events destroyed). */
struct tb_event *tb_swapmem_trace_mark(struct tb_swap_mem *m, enum tb_stream stream);
void tb_swapmem_trace_copy(struct tb_swap_mem *m, size_t i, enum tb_trace_track track, struct tb_event *start,
                           struct tb_event *end);
/* Tensor i now holds a new value on the device (an op wrote it). */
void tb_swapmem_produced(struct tb_swap_mem *m, size_t i);

/* Shared by the copies (swapmem.c) and making room (swapmem_room.c): whether tensor i's
 * kind may leave the device; its size (at least 1); settling finished copies out or in
 * (true when any settled; with wait, once they finish); moving resident tensor i to the
 * host; queueing the copy of host-only tensor i into the device block data. */
bool tb_swapmem_movable_kind(const struct tb_swap_mem *m, size_t i);
size_t tb_swapmem_bytes(const struct tb_swap_mem *m, size_t i);
bool tb_swapmem_settle_outs(struct tb_swap_mem *m, bool wait);
bool tb_swapmem_settle_ins(struct tb_swap_mem *m, bool wait);
int tb_swapmem_move_out(struct tb_swap_mem *m, size_t i, bool wait, struct tb_err *err);
int tb_swapmem_start_in(struct tb_swap_mem *m, size_t i, void *data, struct tb_err *err);
/* An allocation of bytes on the device: with keep, the block (the caller's); without,
 * only whether one fits now (non-NULL; the block is freed again at once: an op's scratch,
 * which the backend allocates itself). The free device bytes by the backend's accounts
 * (the cap, or without one what it reserved, less what is in use), in one block or not. */
void *tb_swapmem_try_alloc(struct tb_swap_mem *m, size_t bytes, bool keep);
uint64_t tb_swapmem_free_bytes(const struct tb_swap_mem *m);

/* Compaction (swapmem_blocks.c), making room (swapmem_room.c)'s first last resort:
 * resident tensors of the cheapest run of blocks that would join free ones into one of
 * `bytes` moved to other free blocks inside the device (copies on the compute stream),
 * then the allocation as tb_swapmem_try_alloc's; NULL when no run can be freed so. */
void *tb_swapmem_compact(struct tb_swap_mem *m, size_t bytes, bool keep, struct tb_err *err);

#endif
