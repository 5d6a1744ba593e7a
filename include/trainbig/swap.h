/* trainbig/swap.h: the swap-policy vtable ([swap] section).
 *
 * The core owns the mechanism of large model support (residency, copies, the pinned host
 * pool, accounting); a swap plugin owns the policy. This first ABI carries create and
 * destroy; the hooks plan(schedule, capacity, link), before_op(i), after_op(i) and
 * make_room(bytes) are added at the end of this struct with the memory manager. A policy
 * that has not been given the hooks never evicts, which is what `none` does. */
#ifndef TRAINBIG_SWAP_H
#define TRAINBIG_SWAP_H

#include <trainbig/error.h>
#include <trainbig/keys.h>
#include <trainbig/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tb_swap_ops {
    /* As tb_backend_ops.create, from the validated [swap] section. */
    int (*create)(const struct tb_section *cfg, void **ctx, struct tb_err *err);
    void (*destroy)(void *ctx);
};

#ifdef __cplusplus
}
#endif
#endif
