/* trainbig/swap.h: the swap-policy vtable ([swap] section) and what a policy may do.
 *
 * The core owns the mechanism of large model support; a swap plugin owns the policy.
 *
 * Mechanism (the core's memory manager, one per executor): every tensor of a schedule has
 * a residency. Swapping a tensor out copies it to pinned host memory on the device-to-host
 * stream; its device memory is freed once that copy's event has completed. Swapping it in
 * allocates device memory and copies it back on the host-to-device stream; the compute
 * stream waits on that copy's event before the step that needs it. A step never runs
 * before every tensor it touches is on the device: a tensor the policy left on the host is
 * brought back on demand (the compute stream stalls, and the stall is counted). Only
 * activations and their gradients move; parameters, buffers, inputs and the tensors of the
 * running step stay. Swapping never changes a value.
 *
 * Policy: the core calls the hooks below around each step and when an allocation does not
 * fit; the hooks act through tb_swap_out() and tb_swap_in(). A policy without hooks never
 * moves anything (`none`). Hooks run on the training thread, one at a time. */
#ifndef TRAINBIG_SWAP_H
#define TRAINBIG_SWAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <trainbig/error.h>
#include <trainbig/keys.h>
#include <trainbig/platform.h>
#include <trainbig/plugin.h>
#include <trainbig/schedule.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tb_residency {
    TB_RES_NONE = 0,   /* holds no value (not yet produced, or dead) */
    TB_RES_DEVICE,     /* on the device only */
    TB_RES_HOST,       /* on the host only */
    TB_RES_BOTH,       /* on the device, with a current copy on the host */
    TB_RES_MOVING_OUT, /* being copied to the host; device memory freed when done */
    TB_RES_MOVING_IN,  /* being copied to the device */
    TB_RES_DROPPED,    /* freed by tb_swap_drop: rebuilt by recomputation before its next use */
};

/* The memory manager as a policy sees it; valid during a hook call. */
struct tb_swap_mem;

/* Tensor i's residency (i indexes the schedule's tensors). */
enum tb_residency tb_swap_residency(const struct tb_swap_mem *m, size_t i);
/* Whether tb_swap_out(m, i) would act: an activation or gradient on the device, not used
 * by the step running now. */
bool tb_swap_movable(const struct tb_swap_mem *m, size_t i);
/* The number of steps run (this executor, all runs) when tensor i was last used: the
 * least recently used tensor has the smallest. */
uint64_t tb_swap_last_used(const struct tb_swap_mem *m, size_t i);
/* Tensor i's size on the device, bytes. */
uint64_t tb_swap_tensor_bytes(const struct tb_swap_mem *m, size_t i);
/* Device memory: capacity and bytes in use now (freed-but-still-copying blocks included). */
uint64_t tb_swap_capacity(const struct tb_swap_mem *m);
uint64_t tb_swap_in_use(const struct tb_swap_mem *m);

/* Starts moving tensor i to the host. With wait, returns once its device memory is free.
 * A tensor that is not movable is left alone (TB_OK). Fails only when host memory runs
 * out, or the run's swap space would pass the cap the core set from what the host had
 * available at start (TB_ERR_NOMEM, err filled: return it). */
int tb_swap_out(struct tb_swap_mem *m, size_t i, bool wait, struct tb_err *err);
/* The eviction loop every make_room hook needs: moves out order[0], order[1], ... (the
 * policy's choice, most expendable first; tensors not movable are skipped) until at
 * least `bytes` have gone and, under a capacity, `bytes` more would fit by the accounts.
 * *freed (may be NULL) gets the bytes moved. Fails as tb_swap_out does. */
int tb_swap_out_until(struct tb_swap_mem *m, const size_t *order, size_t n, uint64_t bytes, uint64_t *freed,
                      struct tb_err *err);
/* Starts bringing tensor i back to the device ahead of its use (prefetch). Returns
 * TB_ERR_NOMEM without side effects when the device cannot hold it now. A tensor still
 * moving out keeps its device block instead (on both sides once its copy is done; no
 * copy back). Any other tensor not on the host only is left alone (TB_OK). */
int tb_swap_in(struct tb_swap_mem *m, size_t i, struct tb_err *err);

/* ---- recomputation ----
 *
 * Instead of moving an activation to the host, a policy may drop it: its device memory is
 * freed at once, with no copy, and before the next step that uses it the core rebuilds it
 * by running again, on the compute stream, the forward ops that produced it, from tensors
 * still held (on the device, or brought back from the host) and from tensors it rebuilds
 * the same way first (those no later step needs are freed again right after, and those
 * the policy had dropped are dropped again: the step that uses them rebuilds them).
 * Re-run ops see the step's seed, so dropout masks and other random draws are replayed,
 * not drawn again; a batch norm in training is rebuilt from the statistics its forward
 * saved, and its running statistics are not updated twice (the backend's op_recompute).
 * Values are what the forward wrote, bit for bit on the CPU backend.
 *
 * Only activations can be dropped, and only those whose producers the core can re-run
 * before the next use: not a graph's outputs or losses, and not a training batch norm's
 * output on a backend without op_recompute. */

/* The forward steps that would run again to rebuild tensor i, were it dropped, before step
 * `step` (which the schedule says uses it), from what the schedule keeps alive there, in
 * the order they would run, into steps[0..max-1]: their number, or -1 when it cannot be
 * rebuilt there or takes more than max. A policy prices a recomputation with its measured
 * times of these steps. */
int tb_swap_recompute_steps(const struct tb_swap_mem *m, size_t i, size_t step, uint32_t *steps, size_t max);
/* The seconds the op of step `step` itself took the last time it ran (its kernels, not
 * the waits for copies or the recomputations around it); 0 before it has run. */
double tb_swap_op_seconds(const struct tb_swap_mem *m, size_t step);
/* Whether tb_swap_drop(m, i) would act: an activation on the device, not used by the step
 * running now, that can be rebuilt before its next use. */
bool tb_swap_droppable(const struct tb_swap_mem *m, size_t i);
/* Drops tensor i (see above). One that is not droppable is left alone (TB_OK). */
int tb_swap_drop(struct tb_swap_mem *m, size_t i, struct tb_err *err);

/* ---- fragmentation ----
 *
 * Free device memory can add up to an allocation and still be split into blocks none of
 * which holds it. Moving tensors out in any order that ignores where they lie (least
 * recently used, next use farthest away) then frees much more than the allocation needs
 * before two free blocks happen to meet. This moves out instead the tensors of one address
 * range: of the runs of adjacent blocks, each free or a movable tensor's, that would hold
 * `bytes` once freed, the one whose tensors cost least: cost[i] for tensor i (the policy's
 * price: a copy, how soon it is needed again), or, where cost is NULL, its bytes, half
 * that when its host copy is current (its copy out is already done). *moved (may be NULL)
 * gets the bytes of the tensors moved: 0 when there is no such run, or the backend cannot
 * say where its blocks lie (backend mem_blocks); the policy then moves tensors its own
 * way. wait and failures as tb_swap_out. */
int tb_swap_out_range(struct tb_swap_mem *m, uint64_t bytes, const double *cost, bool wait, uint64_t *moved,
                      struct tb_err *err);

/* ---- the clock ----
 *
 * The backend's clock (backend now, trainbig/backend.h), seconds: what a policy that times
 * its steps reads, so that on a modelled device it sees the model's times. */
double tb_swap_now(const struct tb_swap_mem *m);

struct tb_swap_ops {
    /* ---- ABI 2.0 ---- */
    struct tb_plugin_head head; /* create from the [swap] section: trainbig/plugin.h */

    /* ---- the hooks (each optional) ---- */
    /* Once per executor, before it runs: the schedule, the device capacity in bytes (0 =
     * unlimited) and the platform's link (NULL when none is configured). A policy keeps
     * what it needs per schedule; two executors (training and validation) may share one
     * policy instance, told apart by m. */
    int (*plan)(void *ctx, struct tb_swap_mem *m, const struct tb_schedule *s, uint64_t capacity,
                const struct tb_link *link, struct tb_err *err);
    /* Before and after step `step` (forward and backward steps alike). */
    int (*before_step)(void *ctx, struct tb_swap_mem *m, size_t step, struct tb_err *err);
    int (*after_step)(void *ctx, struct tb_swap_mem *m, size_t step, struct tb_err *err);
    /* An allocation of `bytes` for step `step` did not fit: move tensors out (with wait,
     * or the core waits for them) until it may. Returning with nothing moved ends the run
     * with an out-of-memory error. */
    int (*make_room)(void *ctx, struct tb_swap_mem *m, size_t step, uint64_t bytes, struct tb_err *err);
    /* The executor is going away: forget what plan() kept for m. */
    void (*forget)(void *ctx, struct tb_swap_mem *m);
};

#ifdef __cplusplus
}
#endif
#endif
