/* backends/sim/sim_shared.h: the sim backend, which plays the platform's accelerator on
 * a virtual clock instead of running one (sim.c: the instance, memory, streams, events
 * and copies; sim_ops.c: tensors and ops).
 *
 * Every submission advances a stream of sim_clock.h by its modelled seconds: an op by
 * sim_model.h's estimate, a copy by the platform's link. Device memory is sim_memory.h's
 * arena over addresses with no bytes behind them; pinned host memory is address space
 * the kernel commits only where something writes it (a loader's batches), so swapped
 * tensors take none. Nothing computes a value: tensor_read gives zeros. */
#ifndef TB_SIM_SHARED_H
#define TB_SIM_SHARED_H

#include <stdbool.h>
#include <stdint.h>
#include <trainbig/trainbig.h>

#include "sim_clock.h"
#include "sim_comm.h"
#include "sim_memory.h"
#include "sim_model.h"
#include "sim_profile.h"

struct tb_event {
    struct sim_event e;
};

/* Counted for the log and for tests: what the modelled device did. */
struct sim_counts {
    uint64_t kernels, copies;
    double copy_bytes;
    uint64_t measured, modelled; /* op passes prepared: timed by the profile, by the model */
};

struct tb_sim {
    struct sim_clock clock;
    struct sim_memory memory; /* made on first use (memory_ready), once its size is known */
    bool memory_ready;
    uint64_t capacity;        /* [backend] device_memory, else the accelerator's, else the default */
    bool capacity_set;        /* by the key: the accelerator's does not replace it */
    struct tb_link link;      /* the platform's (set_platform); zero rates: instantaneous copies */
    struct sim_device device; /* from the link and the accelerator (set_accel) */
    struct tb_accel accel;    /* the platform's (set_accel); its GPUs' links time the all-reduces */
    struct sim_comm comm;     /* [backend] sim_ranks */
    struct sim_profile profile; /* [backend] sim_profile; n = 0: none */
    char profile_path[4096];
    char accel_name[64];
    char name[128];
    struct sim_counts counts;
    /* Op scratch, as a real backend keeps it: one block of device memory grown on demand
     * to what a profile says an op pass took for itself, freed by release_scratch. */
    void *scratch;
    uint64_t scratch_bytes;
    uint64_t failed_bytes; /* the last scratch that did not fit (alloc_failed_bytes) */
};

/* The device's memory, made now if it was not yet; false when the host has no memory for
 * the arena's bookkeeping. */
bool tb_sim_memory(struct tb_sim *sim);
/* Queues `seconds` of device work on the compute stream, one kernel. */
void tb_sim_kernel(struct tb_sim *sim, double seconds);
/* An op pass's seconds: the profile's where it has the op's signature, else the
 * model's estimate e (filled either way, for op_describe); *scratch: the device memory
 * the profile says the pass took for itself (0 where the model times it). */
double tb_sim_op_seconds(struct tb_sim *sim, const struct tb_op *op, bool backward, uint32_t grads,
                         struct sim_estimate *e, bool *measured, uint64_t *scratch);
/* The op scratch block holds at least `bytes`; false, with *err and failed_bytes set,
 * when the device memory has no room for it. */
bool tb_sim_scratch(struct tb_sim *sim, uint64_t bytes, const struct tb_op *op, struct tb_err *err);
uint64_t tb_sim_op_scratch_bytes(void *ctx, const void *state, bool backward);
/* The seconds a memory-bound kernel streaming `bytes` takes on the device. */
double tb_sim_stream_seconds(const struct tb_sim *sim, double bytes);

size_t tb_sim_tensor_bytes(void *ctx, const struct tb_tensor_desc *d);
int tb_sim_tensor_write(void *ctx, const struct tb_tensor *t, const void *host, struct tb_err *err);
int tb_sim_tensor_read(void *ctx, const struct tb_tensor *t, void *host, struct tb_err *err);
int tb_sim_tensor_fill(void *ctx, const struct tb_tensor *t, float value, struct tb_err *err);
int tb_sim_tensor_accumulate(void *ctx, const struct tb_tensor *dst, const struct tb_tensor *src, float alpha,
                             struct tb_err *err);
int tb_sim_op_prepare(void *ctx, int device, const struct tb_op *op, void **state, struct tb_err *err);
void tb_sim_op_release(void *ctx, void *state);
int tb_sim_op_forward(void *ctx, const struct tb_op *op, void *state, uint64_t step, const struct tb_tensor *in,
                      const struct tb_tensor *out, struct tb_err *err);
/* A rerun takes what the forward took, less a synchronised batch norm's collectives (the
 * contract's op_recompute runs none). */
int tb_sim_op_recompute(void *ctx, const struct tb_op *op, void *state, uint64_t step, const struct tb_tensor *in,
                        const struct tb_tensor *out, struct tb_err *err);
int tb_sim_op_backward(void *ctx, const struct tb_op *op, void *state, const struct tb_tensor *in,
                       const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                       struct tb_err *err);
int tb_sim_sgd_update(void *ctx, const struct tb_tensor *param, const struct tb_tensor *grad,
                      const struct tb_tensor *momentum_buf, float lr, float momentum, float weight_decay,
                      struct tb_err *err);
void tb_sim_op_describe(void *ctx, const void *state, char *buf, size_t size);

#endif
