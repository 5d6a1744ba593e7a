/* core/engine/schedule_internal.h: building a schedule from a graph (schedule.c). */
#ifndef TB_CORE_SCHEDULE_INTERNAL_H
#define TB_CORE_SCHEDULE_INTERNAL_H

#include <trainbig/schedule.h>

#include "core/engine/graph_internal.h"

/* What one step does. */
struct tb_sched_step {
    uint32_t op;   /* index of the graph op */
    bool backward; /* false: the op's forward */
    char *name;
    uint32_t *tensors; /* read or written; tensor indices */
    uint32_t ntensors;
};

struct tb_schedule {
    struct tb_sched_step *steps;
    size_t nsteps, nforward;
    struct tb_sched_tensor *tensors;
    size_t ntensors;
    /* tensor index of each graph node's gradient, or UINT32_MAX (nodes[i] itself is
     * tensor i) */
    uint32_t *grad_of;
};

/* Schedules g: every op forward; in a training graph the backward of every op that
 * passes a gradient from a loss back to a parameter. bytes_of gives a tensor's size in
 * the backend's layout. NULL when out of memory. */
struct tb_schedule *tb_schedule_build(const struct tb_graph *g,
                                      size_t (*bytes_of)(void *arg, const struct tb_tensor_desc *d), void *arg);
void tb_schedule_free(struct tb_schedule *s);

#endif
