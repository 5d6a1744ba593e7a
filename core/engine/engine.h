/* core/engine/engine.h: a backend instance with the parameters that live on it
 * (engine.c, params.c), the executor that runs graphs on it (exec.c), and the optimizer
 * (optim.c). What the executor does inside (schedule, memory manager, swapping) is
 * core/engine/engine_internal.h's. */
#ifndef TB_CORE_ENGINE_H
#define TB_CORE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <trainbig/backend.h>
#include <trainbig/comm.h>
#include <trainbig/schedule.h>

#include "core/engine/graph.h"
#include "core/engine/swap_stats.h"

/* One parameter or buffer, shared by every graph that names it. */
struct tb_param {
    char *name;
    bool trainable;            /* a parameter (false: a buffer) */
    struct tb_tensor value;    /* device memory, persistent */
    struct tb_tensor grad;     /* trainable: device memory from the training executor's creation, else NULL */
    struct tb_tensor momentum; /* trainable: from tb_sgd_prepare (or the first optimizer step), zeroed then */
    bool grad_written;         /* during backward: the gradient holds this step's first part */
};

struct tb_engine {
    const struct tb_backend_ops *ops;
    void *ctx;                  /* the backend instance; not owned */
    struct tb_swap_policy swap; /* the [swap] policy every executor uses; zero = none */
    /* Optional backend members (NULL where the backend has none). */
    uint64_t (*alloc_failed_bytes)(void *ctx, int device);
    void (*release_scratch)(void *ctx, int device);
    double (*event_time)(void *ctx, struct tb_event *ev);
    void (*op_describe)(void *ctx, const void *state, char *buf, size_t size);
    void (*reorder_stats)(void *ctx, int device, struct tb_reorder_stats *out);
    /* The backend's clock (NULL: tb_now), and whether it models its device
     * (TB_DEVICE_MODELLED: no values, no bytes behind its memory). */
    double (*now)(void *ctx);
    bool modelled;
    /* An op pass's own device memory, for traces (NULL: not known). */
    uint64_t (*op_scratch_bytes)(void *ctx, const void *state, bool backward);
    /* The float dtypes its ops take (backend dtypes; f32 only without it), and its name for
     * the message that refuses a graph with another. */
    uint32_t dtypes;
    char backend_name[64];
    int device;
    uint64_t seed;            /* initialises parameters */
    struct tb_param **params; /* each allocated on its own: executors keep pointers to them */
    size_t nparams, params_cap;
    /* Data parallelism (tb_engine_attach_comm): the ranks training graphs average their
     * gradients over; NULL for one process. */
    const struct tb_comm *comm;
    int (*allreduce_start)(void *ctx, const struct tb_tensor *t, size_t n, float scale, struct tb_err *err);
    int (*allreduce_wait)(void *ctx, double *busy_s, double *waited_s, struct tb_err *err);
    size_t bucket_bytes;     /* gradients per all-reduce bucket (gradsync.c) */
    double allreduce_busy_s; /* seconds the all-reduces ran, accumulated; readers reset it */
    double allreduce_wait_s; /* of which the training thread waited for, after backward */
    /* Swap space: the pinned host memory every executor's swapped-out copies hold together
     * (used), and the most they may (limit; 0 = no limit), which the host-memory check
     * sets from what the host has (core/train/host_memory.h) with the text naming where
     * that figure comes from. Past it a swap-out fails with an error, not the OOM killer. */
    uint64_t swap_space_used, swap_space_limit;
    char swap_space_why[256];
};

/* An engine over a created backend instance (which it does not own). The backend must
 * have the compute members (trainbig/backend.h); one without them is refused, named. */
int tb_engine_init(struct tb_engine *e, const struct tb_plugin *backend, void *ctx, int device, uint64_t seed,
                   struct tb_err *err);
/* Frees every parameter's memory (the backend instance stays). */
void tb_engine_fini(struct tb_engine *e);

/* Seconds on the backend's clock (backend now; CLOCK_MONOTONIC when it has none): what
 * every step, op, wait and stall is timed with, so a modelled device's times are its
 * model's. */
double tb_engine_now(const struct tb_engine *e);

/* The parameter or buffer `name` of description d, created and initialised on first use
 * (init from the engine's seed and the name, so it does not depend on creation order). A
 * second use with another shape is an error naming both. */
int tb_engine_param(struct tb_engine *e, const char *name, bool trainable, struct tb_tensor_desc d, enum tb_init init,
                    struct tb_param **out, struct tb_err *err);
struct tb_param *tb_engine_find_param(struct tb_engine *e, const char *name);

/* Every parameter and buffer, in creation order, with its value, gradient and momentum
 * buffer (for checkpoints): index 0 .. tb_engine_param_count(e)-1. */
size_t tb_engine_param_count(const struct tb_engine *e);
struct tb_param *tb_engine_param_at(const struct tb_engine *e, size_t i);

/* ------------------------------------------------------------------ executor */

struct tb_exec;

/* Prepares every op of g on the engine's backend and builds the schedule. g must stay
 * alive and unchanged while the executor exists. */
int tb_exec_create(struct tb_engine *e, struct tb_graph *g, struct tb_exec **out, struct tb_err *err);
void tb_exec_free(struct tb_exec *x);

/* Copies host data (canonical NCHW, the input's dtype) into input `name`, allocating it
 * again after tb_exec_release. */
int tb_exec_set_input(struct tb_exec *x, const char *name, const void *host, struct tb_err *err);
/* Gives back the device memory of what the last run left (outputs, losses, activations
 * kept for a backward that will not come) and of the inputs; parameters, gradients and
 * momentum stay with the engine. For an executor that sits idle while another runs on the
 * same device (validation's between validations, training's during one). Every input must
 * be set again before the next forward. */
void tb_exec_release(struct tb_exec *x);
/* Runs every forward step. `step` numbers the training step: with the engine's seed it
 * decides dropout's masks, so a step repeated (a resumed run) drops the same. Memory of
 * activations no later step needs is freed as soon as their last user has run. */
int tb_exec_forward(struct tb_exec *x, uint64_t step, struct tb_err *err);
/* Runs every backward step: the objective is the sum of weight * loss; afterwards every
 * parameter's grad holds d objective / d parameter (zeros for parameters no loss reaches). */
int tb_exec_backward(struct tb_exec *x, struct tb_err *err);
/* Reads an output or loss (by its tb_graph_output / tb_graph_loss name) after forward. */
int tb_exec_read(struct tb_exec *x, const char *name, void *host, struct tb_err *err);

const struct tb_schedule *tb_exec_schedule(const struct tb_exec *x);
/* What executors for graphs gs[0..ng-1] (NULL entries skipped) would take of the
 * engine's device memory, before any is made: to check that a run fits first. */
struct tb_exec_estimate {
    uint64_t made;  /* made with the executors: inputs, and the parameters, buffers,
                     * gradients and momentum the engine does not hold yet */
    uint64_t step;  /* the most activations and their gradients one step holds at once, from the
                     * schedule's lifetimes; op scratch not counted: a lower bound */
    uint64_t saved; /* a checkpoint's tensors: every parameter and buffer, and momentum, in f32 */
};
int tb_exec_estimate(struct tb_engine *e, struct tb_graph *const *gs, size_t ng, struct tb_exec_estimate *out,
                     struct tb_err *err);
/* Seconds each schedule step took in the last run (forward and backward). */
const double *tb_exec_step_seconds(const struct tb_exec *x);
/* The op schedule step `step` runs (*backward: its backward pass), and in how (may be NULL)
 * a line from the backend's op_describe saying how it runs it ("" without one). */
const struct tb_op *tb_exec_step_op(const struct tb_exec *x, size_t step, bool *backward, char *how, size_t how_size);
/* Traces the next forward and backward: each op (start and duration on the host) and each
 * swap copy (start and end on its stream, from the backend's event times). */
void tb_exec_trace_begin(struct tb_exec *x);
/* Writes what was traced since tb_exec_trace_begin as Chrome-trace JSON (opens in Perfetto
 * and chrome://tracing): one track for compute, one per copy direction. Waits for the
 * copies first. The file is written whole or not at all. A backend without event_time
 * cannot time its copies: TB_ERR_RUNTIME saying so. */
int tb_exec_trace_write(struct tb_exec *x, const char *path, struct tb_err *err);
/* What was traced since tb_exec_trace_begin, as spans (waits for the copies first): the
 * ops on track 0 in schedule order, then the copies, host to device on track 1, device to
 * host on track 2, then the forward ops run again to rebuild dropped tensors (track 0,
 * marked recompute). *spans is the caller's to free; the names are the executor's. */
struct tb_trace_span {
    int track;         /* 0 compute (an op, or a move inside the device), 1 host to device, 2 device to host */
    double start, dur; /* seconds, from the traced step's first op */
    uint64_t bytes;    /* a copy's, or what a recomputation rebuilt; 0 for an op */
    const char *name;  /* the op's step or the tensor's; valid while the executor lives */
    bool recompute;    /* track 0: an op run again to rebuild a dropped tensor */
    bool relocate;     /* track 0: a tensor copied to another block of device memory (compaction) */
    const struct tb_op *op; /* track 0, an op's step (not a rerun or move): the op, for its signature */
    bool backward;          /* with op: its backward */
    uint64_t scratch;       /* with op: the device memory the pass took for itself (0: none or not known) */
};
int tb_exec_trace_spans(struct tb_exec *x, struct tb_trace_span **spans, size_t *n, struct tb_err *err);
/* The memory manager's counters: swaps, bytes each way, stall (cumulative). */
const struct tb_swap_stats *tb_exec_swap_stats(const struct tb_exec *x);
/* The bytes of every activation and gradient one run of the graph makes: what the shares
 * kept, swapped and recomputed are of. */
uint64_t tb_exec_transient_bytes(const struct tb_exec *x);
/* ------------------------------------------------------------------ optimizer */

/* One SGD step over every trainable parameter that has a gradient (trainbig/backend.h's
 * sgd_update; momentum buffers are created zeroed on first use). */
int tb_sgd_step(struct tb_engine *e, float lr, float momentum, float weight_decay, struct tb_err *err);

/* Creates now, zeroed, the momentum buffer tb_sgd_step would create at its first step for
 * every trainable parameter that has a gradient: state that lives for the whole run is
 * made at setup, together, before any step's activations (see exec.c's gradients). The
 * values are those the first step would start from, so nothing changes numerically. */
int tb_sgd_prepare(struct tb_engine *e, struct tb_err *err);

/* Learning-rate policies at iteration `it` (0-based) of `total`:
 *   poly: base * (1 - it/total)^power        step: base * gamma^floor(it/step_size) */
double tb_lr_poly(double base, uint64_t it, uint64_t total, double power);
double tb_lr_step(double base, uint64_t it, uint64_t step_size, double gamma);

#endif
