/* tests: small backends that differ only in score(), for `plugin = auto`. Built three
 * times: TEST_NAME and TEST_SCORE come from the Makefile; TEST_NO_SCORE leaves score NULL. */
#include <stdio.h>
#include <trainbig/trainbig.h>

#ifndef TEST_NO_SCORE
static int scored_score(char *why, size_t why_size)
{
    snprintf(why, why_size, "test score %d", TEST_SCORE);
    return TEST_SCORE;
}
#endif

static int scored_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    (void)cfg;
    (void)err;
    *ctx = NULL;
    return TB_OK;
}

static void scored_destroy(void *ctx)
{
    (void)ctx;
}

#ifdef TEST_NO_SCORE
#define SCORE NULL
#else
#define SCORE scored_score
#endif
static const struct tb_backend_ops scored_ops = {
    .head = { .score = SCORE, .create = scored_create, .destroy = scored_destroy },
};

TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
    .abi_major = TB_ABI_MAJOR,
    .abi_minor = TB_ABI_MINOR,
    .kind = TB_KIND_BACKEND,
    .name = TEST_NAME,
    .version = "0.0.1",
    .description = "test backend for auto selection",
    .keys = NULL,
    .ops.backend = &scored_ops,
};
