/* swap/none: the policy that never swaps. Everything stays in device memory; an
 * allocation that does not fit is an out-of-memory error (reported by the core's memory
 * manager with what would make it fit). */
#include <trainbig/trainbig.h>

static int none_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    (void)cfg;
    (void)err;
    *ctx = NULL; /* no state: the policy is to do nothing */
    return TB_OK;
}

static void none_destroy(void *ctx)
{
    (void)ctx;
}

static const struct tb_swap_ops none_ops = {
    .head = { .create = none_create, .destroy = none_destroy },
};

TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
    .abi_major = TB_ABI_MAJOR,
    .abi_minor = TB_ABI_MINOR,
    .kind = TB_KIND_SWAP,
    .name = "none",
    .version = TB_VERSION,
    .description = "never swaps: every tensor stays in device memory, a model that does not fit fails cleanly",
    .keys = NULL,
    .ops.swap = &none_ops,
};
