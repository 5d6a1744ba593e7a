/* core/dist/gradsync_internal.h: the gradient all-reduce of a data-parallel training step
 * (gradsync.c), driven by the executor during backward.
 *
 * The parameters' gradients are grouped into buckets of about [train] allreduce_bucket
 * bytes in the order backward finishes them. As soon as the last gradient of a bucket is
 * final, the bucket goes to the backend's allreduce_start, which reduces it while the rest
 * of backward runs; the step waits for all of them before the optimizer. Every rank builds
 * the same plan from the same graph, so all queue the same buckets in the same order. */
#ifndef TB_CORE_GRADSYNC_INTERNAL_H
#define TB_CORE_GRADSYNC_INTERNAL_H

#include <stddef.h>
#include <trainbig/error.h>

#include "core/engine/engine_internal.h"
#include "core/engine/graph_internal.h"
#include "core/engine/schedule_internal.h"

struct tb_grad_bucket {
    size_t first, count; /* members[first .. first+count) */
    size_t ready;        /* the schedule step after which all its gradients are final */
    size_t bytes;
};

struct tb_grad_sync {
    struct tb_engine *e;
    struct tb_param **members; /* parameters in the order backward finishes their gradients */
    size_t nmembers;
    struct tb_grad_bucket *buckets;
    size_t nbuckets, next;   /* next: the first bucket not yet queued this step */
    struct tb_tensor *batch; /* [largest bucket] the tensors handed to allreduce_start */
    float scale;             /* 1 / ranks: the all-reduce averages */
};

/* Plans the buckets of a training graph on an engine with a comm of more than one rank.
 * param_of[i] is the engine parameter behind schedule tensor i (NULL for others). With no
 * comm (or one rank) it plans nothing and the other calls do nothing. */
int tb_grad_sync_plan(struct tb_grad_sync *gs, struct tb_engine *e, const struct tb_graph *g,
                      const struct tb_schedule *s, struct tb_param *const *param_of, struct tb_err *err);
void tb_grad_sync_free(struct tb_grad_sync *gs);
bool tb_grad_sync_active(const struct tb_grad_sync *gs);

/* Backward began: nothing queued yet. */
void tb_grad_sync_begin(struct tb_grad_sync *gs);
/* Schedule step `step` of backward has run: queues the buckets it completed. */
int tb_grad_sync_after_step(struct tb_grad_sync *gs, size_t step, struct tb_err *err);
/* Backward is over: queues what is left and makes the compute stream wait for all of it,
 * adding the seconds to the engine's allreduce counters. */
int tb_grad_sync_finish(struct tb_grad_sync *gs, struct tb_err *err);

#endif
