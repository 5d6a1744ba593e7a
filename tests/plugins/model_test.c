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

/* A configuration's model only: it describes no network. */
static int testmodel_build(void *ctx, struct tb_graph *g, const struct tb_model_input *in, struct tb_err *err)
{
    (void)ctx;
    (void)g;
    (void)in;
    return tb_err_set(err, TB_ERR_PLUGIN, "model 'testmodel' describes no network: it is for testing configurations");
}

static const struct tb_model_ops testmodel_ops = {
    .head = { .create = testmodel_create, .destroy = testmodel_destroy },
    .build = testmodel_build,
};

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
