/* trainbig/backend.h: the compute backend contract ([backend] section).
 *
 * A backend owns devices: their memory, streams, events, copies and the ops of
 * trainbig/ops.h. The core owns tensors and decides where they live. The semantics are
 * CUDA's, so a CUDA backend maps each member 1:1 onto the runtime, and the CPU backend
 * implements the same rules on host memory and threads, so that every swap policy runs
 * identically on both.
 *
 * Streams. Each device has three streams (enum tb_stream): compute, host-to-device and
 * device-to-host. Work submitted to one stream runs in submission order; work on
 * different streams runs concurrently unless ordered by events. Calls that submit work
 * (copy_async, op_forward, op_backward, tensor_fill, tensor_accumulate, sgd_update)
 * return once it is queued; it may already have run.
 *
 * Events. event_record(ev, stream) marks the point in `stream` after all work submitted
 * to it so far; the event completes when that work has. stream_wait(stream, ev) makes
 * work submitted to `stream` afterwards wait until ev completes (without blocking the
 * caller). event_query tells whether ev has completed; event_sync blocks the caller until
 * it has. An event never recorded counts as complete. Recording an event again moves it
 * to the new point.
 *
 * Memory. mem_alloc returns NULL when the device cannot hold the request: it never
 * aborts, so the core's memory manager can make room (swap) and retry. Memory may be
 * freed while work that uses it is queued only after that work is known complete (an
 * event): as with cudaFree, the backend does not track it.
 *
 * Threads. One core thread drives a backend instance; members are not called concurrently
 * for the same instance, except that queued work runs on the backend's own threads. */
#ifndef TRAINBIG_BACKEND_H
#define TRAINBIG_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <trainbig/comm.h>
#include <trainbig/error.h>
#include <trainbig/keys.h>
#include <trainbig/ops.h>
#include <trainbig/platform.h>
#include <trainbig/plugin.h>
#include <trainbig/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tb_stream {
    TB_STREAM_COMPUTE = 0, /* ops, fills, SGD, device-to-device copies */
    TB_STREAM_H2D = 1,     /* copies from pinned host memory to the device */
    TB_STREAM_D2H = 2,     /* copies from the device to pinned host memory */
    TB_STREAMS = 3
};

struct tb_device_info {
    char name[128];    /* "cpu: AMD EPYC 9R14 (2 threads)", "NVIDIA H100 80GB HBM3" */
    uint64_t capacity; /* bytes of device memory trainbig may use (after any cap) */
    uint32_t flags;    /* TB_DEVICE_*; the core zeroes the struct before device_info */
    /* A modelled device that stands for this many data-parallel GPUs, each running what
     * this process runs (the sim backend's sim_ranks): the core then joins them as a
     * world of that many ranks, whose collectives are the device's to model. 0 or 1: one. */
    int ranks;
};
/* The device is modelled, not run (the sim backend): its ops compute no values
 * (tensor_read gives zeros), its memory and pinned host memory are address space with no
 * bytes behind them, and its times are a model's, on the clock of the member `now`. */
#define TB_DEVICE_MODELLED 1u

struct tb_mem_stats {
    uint64_t in_use;   /* bytes handed out by mem_alloc and not freed */
    uint64_t peak;     /* the largest in_use since create (or the last reset) */
    uint64_t reserved; /* bytes the backend holds from the system (its arena), free blocks included */
    uint64_t capacity; /* as in tb_device_info */
    uint64_t allocs;   /* mem_alloc calls that succeeded */
    uint64_t fails;    /* mem_alloc calls that returned NULL */
    /* The largest block one mem_alloc could get right now without the backend reserving
     * more from the system: for a fixed arena, its largest free block. A backend whose
     * arena grows up to a finite capacity (cuda without device_memory) counts the room
     * left under it as one block, since it reports that capacity. With free =
     * (capacity, or reserved when there is no cap) - in_use, fragmentation is
     * 1 - largest_free / free (0 when free is 0). The core zeroes the struct before it
     * calls mem_stats. */
    uint64_t largest_free;
};

/* One block of device memory as the backend's allocator tiles it (mem_blocks). */
struct tb_mem_block {
    uintptr_t addr; /* its first byte: for a handed-out block, the pointer mem_alloc returned */
    uint64_t bytes; /* its size, rounded as the allocator rounds */
    uint32_t flags; /* TB_MEM_BLOCK_* */
};
#define TB_MEM_BLOCK_FREE 1u  /* free; otherwise handed out (a tensor's, a scratch block, anything) */
#define TB_MEM_BLOCK_FIRST 2u /* the first of a region: not contiguous with the block before it */

/* Opaque to the core; created and owned by the backend. */
struct tb_event;

/* Link emulation: makes every copy on the H2D and D2H streams take at least
 * bytes / bytes_per_s + latency_s (one value per direction), as if the host-device link
 * had that bandwidth. NULL link = copies at full speed. The CPU backend implements it;
 * a real device may leave the member NULL. */
struct tb_link_throttle {
    double h2d_bytes_per_s, d2h_bytes_per_s; /* 0 = unthrottled */
    double latency_s;
};

/* Layout conversions a backend's ops made (reorder_stats): tensors converted
 * from the layout they are stored in to the one a kernel takes, or back, and their bytes.
 * A backend whose kernels all take their tensors as stored reports zero activations. */
struct tb_reorder_stats {
    uint64_t activations, activation_bytes; /* activations and their gradients */
    uint64_t weights, weight_bytes;         /* weights, and their gradients back */
};

struct tb_backend_ops {
    /* ---- ABI 2.0 ---- */
    struct tb_plugin_head head; /* trainbig/plugin.h; destroy waits for all queued work */

    /* ---- devices, memory, streams, events, copies, tensors, ops ---- */
    int (*device_count)(void *ctx);
    int (*device_info)(void *ctx, int device, struct tb_device_info *out);

    /* Device memory, aligned to at least 64 bytes; NULL when it does not fit. bytes > 0.
     * The pointer is freed with mem_free on the same device. */
    void *(*mem_alloc)(void *ctx, int device, size_t bytes);
    void (*mem_free)(void *ctx, int device, void *ptr);
    void (*mem_stats)(void *ctx, int device, struct tb_mem_stats *out);
    /* Starts a new peak: peak = in_use. */
    void (*mem_reset_peak)(void *ctx, int device);

    /* Pinned (page-locked) host memory, for copies that overlap compute; NULL on failure.
     * Freed with host_free. */
    void *(*host_alloc)(void *ctx, size_t bytes);
    void (*host_free)(void *ctx, void *ptr);

    /* Events; event_create returns NULL when out of memory. */
    struct tb_event *(*event_create)(void *ctx, int device);
    void (*event_destroy)(void *ctx, struct tb_event *ev);
    int (*event_record)(void *ctx, struct tb_event *ev, enum tb_stream stream);
    int (*stream_wait)(void *ctx, int device, enum tb_stream stream, struct tb_event *ev);
    /* 1 when complete, 0 when not yet. */
    int (*event_query)(void *ctx, struct tb_event *ev);
    int (*event_sync)(void *ctx, struct tb_event *ev);
    /* Blocks until all work submitted to the stream so far has completed. */
    int (*stream_sync)(void *ctx, int device, enum tb_stream stream);

    /* Queues a copy of `bytes` bytes on `stream` of `device`: on TB_STREAM_H2D from
     * pinned host memory to device memory, on TB_STREAM_D2H from device to pinned host
     * memory, on TB_STREAM_COMPUTE from device to device memory. */
    int (*copy_async)(void *ctx, int device, enum tb_stream stream, void *dst, const void *src, size_t bytes,
                      struct tb_err *err);
    /* Optional (NULL when unsupported): see struct tb_link_throttle. */
    int (*set_link_throttle)(void *ctx, int device, const struct tb_link_throttle *link, struct tb_err *err);

    /* Bytes of device memory a tensor of this description takes in this backend's layout. */
    size_t (*tensor_bytes)(void *ctx, const struct tb_tensor_desc *desc);
    /* Synchronous conversions between the canonical NCHW layout in ordinary host memory
     * and the tensor's device memory; they wait for the compute stream first. */
    int (*tensor_write)(void *ctx, const struct tb_tensor *t, const void *host_nchw, struct tb_err *err);
    int (*tensor_read)(void *ctx, const struct tb_tensor *t, void *host_nchw, struct tb_err *err);
    /* Compute stream: every element of t = value (rounded to t's dtype: f32, or a 16-bit
     * dtype the backend lists in dtypes). */
    int (*tensor_fill)(void *ctx, const struct tb_tensor *t, float value, struct tb_err *err);
    /* Compute stream: dst += alpha * src, equal descriptions of a float dtype the backend
     * lists (the sum in f32, rounded once to a 16-bit dtype). For gradients of
     * tensors used more than once. */
    int (*tensor_accumulate)(void *ctx, const struct tb_tensor *dst, const struct tb_tensor *src, float alpha,
                             struct tb_err *err);

    /* Ops (trainbig/ops.h). op_prepare is called once per op of a graph, before any run,
     * with the exact descriptions it will see; *state (may be NULL) belongs to the backend
     * and is released by op_release. An op kind or parameter the backend does not support
     * is TB_ERR_RUNTIME from op_prepare, naming the op. */
    int (*op_prepare)(void *ctx, int device, const struct tb_op *op, void **state, struct tb_err *err);
    void (*op_release)(void *ctx, void *state);
    /* Compute stream. in[nin], out[nout] have op's descriptions; `step` is the training
     * step, which seeds dropout. */
    int (*op_forward)(void *ctx, const struct tb_op *op, void *state, uint64_t step, const struct tb_tensor *in,
                      const struct tb_tensor *out, struct tb_err *err);
    /* Compute stream. in and out as in forward (only the tensors the op's backward reads
     * need to hold data); dout[nout], din[nin] as described in trainbig/ops.h. */
    int (*op_backward)(void *ctx, const struct tb_op *op, void *state, const struct tb_tensor *in,
                       const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                       struct tb_err *err);

    /* Compute stream: SGD with momentum and weight decay, PyTorch's semantics with
     * dampening 0 and no Nesterov, on f32 tensors of equal description:
     *   d = grad + weight_decay * param;  momentum_buf = momentum * momentum_buf + d;
     *   param -= lr * momentum_buf
     * (a zeroed momentum_buf makes the first step PyTorch's first step). */
    int (*sgd_update)(void *ctx, const struct tb_tensor *param, const struct tb_tensor *grad,
                      const struct tb_tensor *momentum_buf, float lr, float momentum, float weight_decay,
                      struct tb_err *err);

    /* ---- memory pressure, the platform, copies' times ---- */
    /* Optional. The size of the latest device allocation an op made for itself (scratch,
     * workspace) that failed, then 0 until the next such failure. An op that fails that way
     * returns TB_ERR_NOMEM before it has changed anything; the core then asks the swap
     * policy to free that much and runs the op again. */
    uint64_t (*alloc_failed_bytes)(void *ctx, int device);
    /* Optional. Frees the device memory the backend keeps for itself between ops (scratch
     * space, workspace), to be taken again by the next op that needs it: the core calls it
     * before it moves tensors out to make room. */
    void (*release_scratch)(void *ctx, int device);
    /* Optional. The configured platform's link (trainbig/platform.h), once after create.
     * A backend that emulates links (the CPU backend with emulate_link) throttles its copies
     * to it, and rewrites *link to what its copies will really see (the scaled rates), which
     * is what swap policies then plan with. A backend places its pinned host memory
     * (host_alloc) on link->numa_node where that is >= 0 and it can. note (note_size > 0)
     * receives a line for the log saying what it does, or "". */
    int (*set_platform)(void *ctx, int device, struct tb_link *link, char *note, size_t note_size, struct tb_err *err);
    /* Optional. When event ev last completed, in seconds of CLOCK_MONOTONIC (0 = never): with
     * an event recorded before and one after a copy, where the copy ran, for traces. */
    double (*event_time)(void *ctx, struct tb_event *ev);

    /* ---- data parallelism (trainbig/comm.h) ---- */
    /* Optional; a backend without them trains single-process only. Joins the ranks of comm
     * (comm->size > 1), once, after set_platform; comm outlives the instance. A backend
     * whose device memory is not host memory bootstraps its own engine here (NCCL's unique
     * id through comm->broadcast). */
    int (*comm_attach)(void *ctx, int device, const struct tb_comm *comm, struct tb_err *err);
    /* Queues the all-reduce of one bucket of f32 tensors (parameter gradients): each
     * element becomes scale * the sum over ranks, in place. It starts after the work
     * submitted to the compute stream so far, and runs concurrently with what is submitted
     * after (the rest of backward); the tensors must not be written until
     * allreduce_wait. t[] may be reused when this returns. Every rank queues the same
     * buckets, with the same descriptions, in the same order. */
    int (*allreduce_start)(void *ctx, const struct tb_tensor *t, size_t n, float scale, struct tb_err *err);
    /* Work submitted to the compute stream afterwards waits for every queued all-reduce.
     * Reports the first failure of one. *busy_s (may be NULL) receives the seconds the
     * all-reduces ran since the last call, and *waited_s the seconds this call blocked. */
    int (*allreduce_wait)(void *ctx, double *busy_s, double *waited_s, struct tb_err *err);

    /* ---- how ops run ---- */
    /* Optional. One line saying how the backend runs a prepared op (its kernels' names,
     * layouts, instruction set), for benchmarks and debug logs; "" when there is nothing to
     * say. state is op_prepare's. */
    void (*op_describe)(void *ctx, const void *state, char *buf, size_t size);
    /* Optional. The layout conversions ops made since create (struct tb_reorder_stats). */
    void (*reorder_stats)(void *ctx, int device, struct tb_reorder_stats *out);

    /* ---- recomputation (trainbig/swap.h, tb_swap_drop) ---- */
    /* Optional. Runs op's forward again, on the compute stream, to rebuild outputs the core
     * dropped: the same op, state, step and input values as a forward that already ran, and
     * the outputs must come out bit for bit as that forward wrote them, with nothing else
     * changed. For a batch norm in training, out[1] and out[2] hold the save_mean and
     * save_invstd that forward wrote and are read, not written: y is rebuilt from them, the
     * running statistics are left alone and no collective runs. For every other kind it may
     * be op_forward itself. NULL: the core re-runs op_forward, and never drops the output
     * of a batch norm in training. */
    int (*op_recompute)(void *ctx, const struct tb_op *op, void *state, uint64_t step, const struct tb_tensor *in,
                        const struct tb_tensor *out, struct tb_err *err);

    /* ---- fragmentation (trainbig/swap.h, tb_swap_out_range) ---- */
    /* Optional. The device memory's blocks, free and handed out, in address order, region
     * by region (a region: memory reserved in one piece, which no block spans), into
     * out[0..max-1]; returns how many there are, which may be more than max (call again
     * with room for them all). The core reads it, when free bytes suffice for an allocation
     * that does not fit, to find the blocks whose freeing would join the free ones around
     * them into one large enough. NULL: the core cannot tell where free memory lies. */
    size_t (*mem_blocks)(void *ctx, int device, struct tb_mem_block *out, size_t max);

    /* ---- modelled devices ---- */
    /* Optional. The backend's clock, seconds: what the core times steps, ops, waits and
     * stalls with, and the clock of event_time. NULL: CLOCK_MONOTONIC (trainbig/clock.h).
     * A backend that models its device (TB_DEVICE_MODELLED) gives the driving thread's
     * virtual time, which its submissions and syncs advance; it knows each event's time
     * once recorded, so event_time gives it before the host's clock reaches it. */
    double (*now)(void *ctx);
    /* Optional. The configured platform's accelerator (trainbig/platform.h), once after
     * set_platform, with the link set_platform was given: a backend that models a device
     * takes its memory, bandwidth and rates from it. */
    int (*set_accel)(void *ctx, int device, const struct tb_accel *accel, struct tb_err *err);

    /* ---- what ops take for themselves ---- */
    /* Optional. The most device memory one pass of the op (its forward, a rerun of it, or
     * with `backward` its backward) asked of the backend for itself (scratch space,
     * workspace, reordered tensors) since op_prepare, in bytes; 0 when it asked none. state
     * is op_prepare's. The core writes it into traces beside the op's time, so a modelled
     * device calibrated from the trace takes that memory too. NULL: not known. */
    uint64_t (*op_scratch_bytes)(void *ctx, const void *state, bool backward);

    /* ---- ABI 2.2: element types ---- */
    /* Optional. The float dtypes the backend's ops take (trainbig/ops.h, "float"), as bits
     * 1u << TB_F32 | 1u << TB_BF16 ...; f32's bit is always set. tensor_fill,
     * tensor_accumulate and copies take every dtype listed; sgd_update is f32 only. NULL:
     * f32 only (a plugin of ABI 2.1 or older). */
    uint32_t (*dtypes)(void *ctx, int device);
};

#ifdef __cplusplus
}
#endif
#endif
