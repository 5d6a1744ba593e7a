/* swap/prefetch: swaps planned from the schedule, so copies overlap compute.
 *
 * After a use of an activation or gradient, if its next use is far enough away, the
 * tensor goes to host memory right then; it is brought back early enough before that
 * next use that the copy is done when the step needs it. The planning (planner.c) is
 * shared with the hybrid policy, which may also recompute; this one only swaps. */
#include <trainbig/trainbig.h>

#include "planner.h"

static const struct tb_key prefetch_keys[] = {
    PLANNER_KEYS("moved"),
    TB_KEYS_END,
};

static int prefetch_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    return planner_create(cfg, "prefetch", false, false, ctx, err);
}

static const struct tb_swap_ops prefetch_ops = PLANNER_OPS(prefetch_create);

TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
    .abi_major = TB_ABI_MAJOR,
    .abi_minor = TB_ABI_MINOR,
    .kind = TB_KIND_SWAP,
    .name = "prefetch",
    .version = TB_VERSION,
    .description = "swaps planned from the schedule: out after a use when the next is far, back in ahead of it",
    .keys = prefetch_keys,
    .ops.swap = &prefetch_ops,
};
