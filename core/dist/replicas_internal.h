/* core/dist/replicas_internal.h: keeping the ranks' copies of the model (replicas) the same
 * (replicas.c). Data parallelism rests on every rank applying the same averaged gradient
 * to the same weights; these are the checks and the one repair it needs. */
#ifndef TB_CORE_REPLICAS_INTERNAL_H
#define TB_CORE_REPLICAS_INTERNAL_H

#include <stdbool.h>
#include <trainbig/comm.h>

#include "core/engine/engine_internal.h"

/* Compares every trainable parameter (and, with buffers, every buffer: running statistics)
 * of e across the ranks of comm, by a hash of its bytes. All ranks must call it together.
 * Different on any rank: TB_ERR_RUNTIME naming the first parameter that differs and how
 * many do. One rank: TB_OK at once. */
int tb_replicas_check(struct tb_engine *e, const struct tb_comm *comm, bool buffers, struct tb_err *err);

/* Copies rank `root`'s buffers (the running statistics of batch norms that are not
 * synchronised, which each rank otherwise keeps from its own images) to every rank. */
int tb_replicas_broadcast_buffers(struct tb_engine *e, const struct tb_comm *comm, int root, struct tb_err *err);

#endif
