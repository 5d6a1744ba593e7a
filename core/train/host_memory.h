/* core/train/host_memory.h: what a run will still take from the host's memory, against
 * what the host has, checked before the first step (host_memory.c).
 *
 * A run too big for the machine otherwise grows until the kernel's OOM killer ends it,
 * with nothing said: the cpu backend's device memory is host memory, swapped-out tensors
 * live in pinned host memory, and a checkpoint is gathered in one host buffer. The check
 * adds those up from the schedule before anything runs and refuses with the figures and
 * the keys to change; it then caps the swap space at what is left, so that a policy that
 * moves out more than the least it must fails with the same kind of message. */
#ifndef TB_CORE_HOST_MEMORY_H
#define TB_CORE_HOST_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <trainbig/error.h>

#include "core/engine/engine.h"

/* Bytes this process may still take from the host: the least of /proc/meminfo's
 * MemAvailable, its cgroup's memory.max less memory.current, `ulimit -v` less the
 * process's size, and TRAINBIG_HOST_MEMORY where set (a size, as [backend] device_memory).
 * source (may be NULL) gets which bound that is. UINT64_MAX when none is
 * known (not Linux). */
uint64_t tb_host_available(char *source, size_t source_size);

/* What executors for graphs gs[0..ng-1] (NULL entries skipped; none made yet) on engine
 * e will take from host memory, beyond what is already held: the growth of device memory that is host memory (a backend
 * reporting no bound on its capacity: the cpu backend without [backend] device_memory), the least swap space when a
 * step needs more than the device has and a [swap] policy moves the rest out, `buffers` bytes of the caller's still to
 * allocate (a loader's batches), and a checkpoint's buffer when `checkpoints`. More than the host has is a TB_ERR_NOMEM
 * naming `what` ("training", "predicting IMAGE"), the figures and `fix` (the keys to change, said by the caller).
 * Otherwise e's swap space limit is set to what is left for it, and *need (may be NULL) gets the estimate. On a
 * modelled device (TB_DEVICE_MODELLED) only the buffers count: its memory and swap space hold no bytes, and it
 * writes no checkpoint; its swap space gets no limit. */
/* Words every refusal of tb_host_memory_check holds, by which a caller tells it from a
 * device's out of memory (both are TB_ERR_NOMEM). */
#define TB_HOST_MEMORY_REFUSAL "more host memory than it holds"

int tb_host_memory_check(struct tb_engine *e, struct tb_graph *const *gs, size_t ng, uint64_t buffers, bool checkpoints,
                         const char *what, const char *fix, uint64_t *need, struct tb_err *err);

#endif
