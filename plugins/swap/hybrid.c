/* swap/hybrid: per tensor, keep, swap or recompute, planned from the schedule, the
 * measured op times and the platform's link.
 *
 * Where the device's budget is exceeded, an activation goes off the device between two
 * uses either by a swap whose copies the compute hides (as prefetch), or by being dropped
 * and rebuilt before its next use by re-running the ops that made it (trainbig/swap.h),
 * whichever is expected to cost the step less per byte freed, given what the link already
 * carries: a greedy choice in the manner of Capuchin; planner.c says how and why. It
 * plans again when a training step's measured time drifts by more than a quarter.
 * recompute = no makes it prefetch. */
#include <trainbig/trainbig.h>

#include "planner.h"

static const struct tb_key hybrid_keys[] = {
    { "recompute", TB_KEY_BOOL, "yes", NULL,
      "drop activations and recompute them where that costs less than swapping them; no = swap only (prefetch)" },
    PLANNER_KEYS("swapped or dropped"),
    TB_KEYS_END,
};

static int hybrid_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    const bool recompute = tb_section_bool(cfg, "recompute");
    return planner_create(cfg, "hybrid", recompute, recompute, ctx, err);
}

static const struct tb_swap_ops hybrid_ops = PLANNER_OPS(hybrid_create);

TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
    .abi_major = TB_ABI_MAJOR,
    .abi_minor = TB_ABI_MINOR,
    .kind = TB_KIND_SWAP,
    .name = "hybrid",
    .version = TB_VERSION,
    .description = "keeps, swaps or recomputes each activation, whichever costs the step least (planned)",
    .keys = hybrid_keys,
    .ops.swap = &hybrid_ops,
};
