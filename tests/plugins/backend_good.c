/* tests: backend "testgood": a well-formed backend whose keys cover every key type, with
 * score 5. create() reads every key back, so a test can see the typed values arrive. */
#include <stdio.h>
#include <trainbig/trainbig.h>

static int good_score(char *why, size_t why_size)
{
    snprintf(why, why_size, "test backend, always usable");
    return 5;
}

static const struct tb_key good_keys[] = {
    { "threads", TB_KEY_INT, "1", "1..64", "worker threads" },
    { "scale", TB_KEY_FLOAT, "0.5", "0..1", "a fraction" },
    { "fast", TB_KEY_BOOL, "no", NULL, "a switch" },
    { "device_memory", TB_KEY_SIZE, "0", "..1T", "memory cap; 0 = none" },
    { "mode", TB_KEY_ENUM, "eager", "eager|lazy|auto", "a choice" },
    { "label", TB_KEY_STRING, "", NULL, "free text" },
    { "cache", TB_KEY_PATH, "", NULL, "a file" },
    { "tags", TB_KEY_LIST, "", NULL, "any words" },
    { "colors", TB_KEY_LIST, "red", "red|green|blue", "some colours" },
    TB_KEYS_END,
};

static int good_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    (void)err;
    tb_plog(TB_LOG_INFO, "threads=%lld scale=%g fast=%d memory=%llu mode=%s label=%s cache=%s tags=%zu colors=%zu",
            (long long)tb_section_int(cfg, "threads"), tb_section_float(cfg, "scale"), tb_section_bool(cfg, "fast"),
            (unsigned long long)tb_section_size(cfg, "device_memory"), tb_section_string(cfg, "mode"),
            tb_section_string(cfg, "label"), tb_section_string(cfg, "cache"), tb_section_list(cfg, "tags", NULL),
            tb_section_list(cfg, "colors", NULL));
    *ctx = NULL;
    return TB_OK;
}

static void good_destroy(void *ctx)
{
    (void)ctx;
}

static const struct tb_backend_ops good_ops = {
    .head = { .score = good_score, .create = good_create, .destroy = good_destroy }
};

TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
    .abi_major = TB_ABI_MAJOR,
    .abi_minor = TB_ABI_MINOR,
    .kind = TB_KIND_BACKEND,
    .name = "testgood",
    .version = "1.2.3",
    .description = "test backend with a key of every type",
    .keys = good_keys,
    .ops.backend = &good_ops,
};
