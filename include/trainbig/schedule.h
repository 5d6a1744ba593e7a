/* trainbig/schedule.h: the order a graph runs in, and when each tensor is used.
 *
 * A training step runs the forward steps 0 .. forward_steps-1 (one per op, in build
 * order), then the backward steps forward_steps .. steps-1 (one per op that passes a
 * gradient back, in reverse). Every tensor of the step — inputs, parameters, buffers,
 * activations and gradients — has its size and the steps that touch it, so a swap policy
 * knows, before anything runs, when each tensor is needed and for how long it idles.
 * The schedule belongs to the executor that made it; it does not change between steps. */
#ifndef TRAINBIG_SCHEDULE_H
#define TRAINBIG_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>
#include <trainbig/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tb_sched_kind {
    TB_SCHED_INPUT = 1,  /* data fed each step */
    TB_SCHED_PARAM,      /* a trainable parameter: lives across steps */
    TB_SCHED_BUFFER,     /* persistent state (running statistics) */
    TB_SCHED_ACTIVATION, /* an op's output: lives from its op to its last use */
    TB_SCHED_GRADIENT,   /* the gradient of an activation or input, backward only */
    TB_SCHED_PARAM_GRAD, /* the gradient of a parameter: lives until the optimizer step */
};

struct tb_sched_tensor {
    const char *name;
    enum tb_sched_kind kind;
    struct tb_tensor_desc desc;
    uint64_t bytes;    /* in the backend's layout */
    int32_t first_use; /* first step that touches it; -1 if none */
    int32_t last_use;  /* last step that touches it; steps() for outputs and losses, which
                        * stay readable after the step */
};

struct tb_schedule;

size_t tb_schedule_steps(const struct tb_schedule *s);
size_t tb_schedule_forward_steps(const struct tb_schedule *s);
/* The op a step runs ("trunk.mod2.conv1", backward steps as "trunk.mod2.conv1 (backward)"),
 * and its kind. Owned by the schedule. */
const char *tb_schedule_step_name(const struct tb_schedule *s, size_t step);
size_t tb_schedule_tensors(const struct tb_schedule *s);
const struct tb_sched_tensor *tb_schedule_tensor(const struct tb_schedule *s, size_t i);
/* The tensors a step reads or writes (indices for tb_schedule_tensor); *ids owned by s. */
size_t tb_schedule_step_tensors(const struct tb_schedule *s, size_t step, const uint32_t **ids);

#ifdef __cplusplus
}
#endif
#endif
