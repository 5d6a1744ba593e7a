/* tests: dataset "testdata": `samples` generated images with a diagonal label split, so
 * test configurations have a [dataset] to name and the dataset vtable has a user. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/trainbig.h>

struct testdata {
    const struct tb_section *cfg; /* the core's, valid until the run ends */
    size_t n;
    uint32_t size;
    long bad; /* the train split's unreadable sample, or -1 */
    char names[8][32];
};

static const struct tb_key testdata_keys[] = {
    { "root", TB_KEY_PATH, NULL, NULL, "where the data would be (required, to test required keys)" },
    { "samples", TB_KEY_INT, "4", "1..8", "number of samples" },
    { "size", TB_KEY_INT, "8", "1..64", "image side, pixels" },
    { "bad", TB_KEY_INT, "-1", "-1..7", "a train sample that cannot be read (to test bad-sample handling); -1 = none" },
    TB_KEYS_END,
};

static const struct tb_class testdata_classes[] = {
    { "below", { 0, 0, 255 } },
    { "above", { 255, 0, 0 } },
};

static int testdata_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    struct testdata *d = calloc(1, sizeof *d);
    if (!d)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    d->cfg = cfg;
    *ctx = d;
    return TB_OK;
}

static int testdata_open_split(void *ctx, const char *split, struct tb_err *err)
{
    (void)err;
    struct testdata *d = ctx;
    d->n = (size_t)tb_section_int(d->cfg, "samples");
    d->size = (uint32_t)tb_section_int(d->cfg, "size");
    d->bad = strcmp(split, "train") == 0 ? (long)tb_section_int(d->cfg, "bad") : -1;
    for (size_t i = 0; i < d->n; i++)
        snprintf(d->names[i], sizeof d->names[i], "%s/%zu", split, i);
    return TB_OK;
}

static void testdata_close(void *ctx)
{
    free(ctx);
}

static size_t testdata_count(void *ctx)
{
    return ((struct testdata *)ctx)->n;
}

static const char *testdata_name(void *ctx, size_t i)
{
    return ((struct testdata *)ctx)->names[i];
}

static int testdata_load(void *ctx, size_t i, struct tb_sample *s, struct tb_err *err)
{
    struct testdata *d = ctx;
    if ((long)i == d->bad)
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: unreadable (the dataset's [dataset] bad = %ld)", d->names[i],
                          d->bad);
    int rc = tb_sample_reserve(s, d->size, d->size, err);
    if (rc)
        return rc;
    for (uint32_t y = 0; y < d->size; y++)
        for (uint32_t x = 0; x < d->size; x++) {
            uint8_t *px = &s->image[3 * ((size_t)y * d->size + x)];
            px[0] = (uint8_t)(x * 16 + i);
            px[1] = (uint8_t)(y * 16);
            px[2] = 128;
            s->label[(size_t)y * d->size + x] = x > y;
        }
    return TB_OK;
}

static size_t testdata_classes_of(void *ctx, const struct tb_class **classes)
{
    (void)ctx;
    *classes = testdata_classes;
    return 2;
}

static const struct tb_dataset_ops testdata_ops = {
    .head = { .create = testdata_create, .destroy = testdata_close },
    .open_split = testdata_open_split,
    .count = testdata_count,
    .sample_name = testdata_name,
    .load = testdata_load,
    .classes = testdata_classes_of,
};

TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
    .abi_major = TB_ABI_MAJOR,
    .abi_minor = TB_ABI_MINOR,
    .kind = TB_KIND_DATASET,
    .name = "testdata",
    .version = "0.0.1",
    .description = "test dataset of generated images",
    .keys = testdata_keys,
    .ops.dataset = &testdata_ops,
};
