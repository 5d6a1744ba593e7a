/* core/engine/engine_internal.h: what the core's rooms use of the engine besides
 * core/engine/engine.h: data parallelism's hook, the optimizer's momentum buffers, and
 * the executor's per-tensor counters (tests). */
#ifndef TB_CORE_ENGINE_INTERNAL_H
#define TB_CORE_ENGINE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/engine/engine.h"
#include "core/engine/graph_internal.h"
#include "core/engine/schedule_internal.h"
#include "core/engine/swapmem_internal.h"

/* Joins the engine's backend to the ranks of comm (size > 1): its comm_attach, and the
 * all-reduce members training graphs then use. A backend without them (ABI < 1.6, or
 * NULL members) is refused by name: it can train single-process only. */
int tb_engine_attach_comm(struct tb_engine *e, const char *backend_name, const struct tb_comm *comm,
                          size_t bucket_bytes, struct tb_err *err);

/* How many times tensor i was allocated, and whether it holds memory now (tests). */
uint64_t tb_exec_allocations(const struct tb_exec *x, size_t tensor);
bool tb_exec_resident(const struct tb_exec *x, size_t tensor);
/* How many running steps hold tensor i pinned: 0 between steps. */
uint32_t tb_exec_pins(const struct tb_exec *x, size_t tensor);

/* Makes sure p (trainable) has a momentum buffer, created zeroed (checkpoints load into it). */
int tb_param_momentum(struct tb_engine *e, struct tb_param *p, struct tb_err *err);

#endif
