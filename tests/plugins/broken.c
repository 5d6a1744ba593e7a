/* tests: plugins the loader must refuse, one per build of this file (BROKEN_* from the
 * Makefile). All claim to be backends so they are candidates for [backend]. */
#include <stdio.h>
#include <trainbig/trainbig.h>

static int broken_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    (void)cfg;
    (void)err;
    *ctx = NULL;
    return TB_OK;
}

static void broken_destroy(void *ctx)
{
    (void)ctx;
}

#if defined(BROKEN_UNLOADABLE)
/* Defined nowhere: dlopen with RTLD_NOW fails on it. */
extern int tb_test_symbol_that_does_not_exist(void);
static int broken_score_unloadable(char *why, size_t why_size)
{
    (void)why;
    (void)why_size;
    return tb_test_symbol_that_does_not_exist();
}
#define SCORE broken_score_unloadable
#elif !defined(BROKEN_WRONG_KIND)
static int broken_score(char *why, size_t why_size)
{
    snprintf(why, why_size, "a broken plugin must never be chosen");
    return 1000;
}
#define SCORE broken_score
#endif

#if defined(BROKEN_WRONG_KIND)
static const struct tb_swap_ops broken_swap_ops = { .head = { .create = broken_create, .destroy = broken_destroy } };
#else
static const struct tb_backend_ops broken_ops = {
    .head = { .score = SCORE, .create = broken_create, .destroy = broken_destroy }
};
#endif

#if defined(BROKEN_BAD_KEYS)
static const struct tb_key broken_keys[] = {
    { "threads", TB_KEY_INT, "zero", "1..8", "a default that is not an integer" },
    TB_KEYS_END,
};
#else
#define broken_keys NULL
#endif

#if defined(BROKEN_NO_ENTRY)
/* Exports something, but not trainbig_plugin. */
TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin_misspelt = {
#else
TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
#endif
#if defined(BROKEN_ABI_MAJOR)
    .abi_major = TB_ABI_MAJOR + 1,
#else
    .abi_major = TB_ABI_MAJOR,
#endif
#if defined(BROKEN_ABI_MINOR)
    .abi_minor = TB_ABI_MINOR + 1,
#else
    .abi_minor = TB_ABI_MINOR,
#endif
#if defined(BROKEN_WRONG_KIND)
    .kind = TB_KIND_SWAP,
    .ops.swap = &broken_swap_ops,
#else
    .kind = TB_KIND_BACKEND,
    .ops.backend = &broken_ops,
#endif
    .name = TEST_NAME,
    .version = "6.6.6",
    .description = "a plugin the loader must refuse",
    .keys = broken_keys,
};
