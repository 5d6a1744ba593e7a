/* backends/sim/sim_model.h: the time a modelled device takes for an op (sim_model.c).
 *
 * An op takes max(FLOPs / (peak x compute efficiency), bytes / (bandwidth x memory
 * efficiency)) plus a launch cost: the roofline of its work (tb_op_cost, from its shapes)
 * on the platform's accelerator, each kind (and each class of convolution) with the
 * efficiencies of the table in sim_model.c. */
#ifndef TB_SIM_MODEL_H
#define TB_SIM_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <trainbig/ops.h>
#include <trainbig/platform.h>

/* The device an op runs on: rates from the platform (tb_link's fp32 rate and its
 * accel_efficiency, tb_accel's bandwidth and 16-bit rates) and a kernel's launch cost. */
struct sim_device {
    double fp32_flops, fp16_flops, bf16_flops; /* peaks; 0 = no such units */
    double conv_efficiency;                    /* of fp32_flops on large 3x3 convolutions */
    double mem_bytes_per_s;
    double launch_s; /* the device's own cost of one kernel, beside the host's */
};

/* From the platform's link and accelerator; a figure they do not give is a stated default
 * (sim_model.c), so a model always runs. */
void sim_device_from(struct sim_device *d, const struct tb_link *link, const struct tb_accel *accel);

/* What the model says of one op: its seconds and why (the table row's name, the bound). */
struct sim_estimate {
    double seconds;
    double compute_s, memory_s;
    const char *row;   /* "conv2d 3x3", "eltwise", ... */
    bool memory_bound; /* memory_s > compute_s */
};

/* Op forward (backward = false) or backward with input gradients `grads` (bit i: input
 * i's), on device d. */
void sim_op_estimate(const struct sim_device *d, const struct tb_op *op, bool backward, uint32_t grads,
                     struct sim_estimate *e);

#endif
