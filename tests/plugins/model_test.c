/* tests: model "testmodel", so test configurations have a [model] to name. */
#include <trainbig/trainbig.h>

static const struct tb_key testmodel_keys[] = {
    { "width", TB_KEY_INT, "64", "1..4096", "channels of the first layer" },
    TB_KEYS_END,
};

static int testmodel_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    (void)cfg;
    (void)err;
    *ctx = NULL;
    return TB_OK;
}

static void testmodel_destroy(void *ctx)
{
    (void)ctx;
}

static const struct tb_model_ops testmodel_ops = { .create = testmodel_create, .destroy = testmodel_destroy };

TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
    .abi_major = TB_ABI_MAJOR,
    .abi_minor = TB_ABI_MINOR,
    .kind = TB_KIND_MODEL,
    .name = "testmodel",
    .version = "0.0.1",
    .description = "test model",
    .keys = testmodel_keys,
    .ops.model = &testmodel_ops,
};
