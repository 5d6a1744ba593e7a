/* fuzz_ini: a configuration file through the INI reader (core/config/config.c), --set
 * overrides, and the validation `trainbig config` runs on the sections the core owns
 * ([run], [train], [report], the loader's keys of [dataset], [model] sync_bn): key
 * tables, value syntaxes, ranges, the typed settings. A key table of this file's own
 * holds one key of every type, for [backend], where a plugin's keys would be: loading
 * plugins needs the file system, so none is loaded.
 *
 * Input: the file's text; the lines after a line "#--set" (a comment to the INI reader)
 * are also applied as --set arguments, as `trainbig config FILE --set ...` would. */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/ini.h"
#include "core/config/keys.h"
#include "core/config/setup_internal.h"
#include "fuzz_util.h"

static const struct tb_key plugin_keys[] = {
    { "threads", TB_KEY_INT, "0", "0..1024", "an integer in a range" },
    { "ratio", TB_KEY_FLOAT, "0.5", "0..1", "a number in a range" },
    { "pinned", TB_KEY_BOOL, "yes", NULL, "a boolean" },
    { "pool", TB_KEY_SIZE, "1G", "1M..64G", "a size" },
    { "policy", TB_KEY_ENUM, "lru", "none|lru|prefetch", "one of names" },
    { "label", TB_KEY_STRING, "", NULL, "any text" },
    { "root", TB_KEY_PATH, "", NULL, "a path" },
    { "splits", TB_KEY_LIST, "train,val", "train|val|test", "a list of names" },
    { "tags", TB_KEY_LIST, "", NULL, "a free list" },
    { "dilations", TB_KEY_INT_LIST, "1,1,2,4", "[1..8] 1..64", "integers" },
    { "mean", TB_KEY_FLOAT_LIST, "0.485,0.456,0.406", "[3] 0..1", "numbers" },
    { "required", TB_KEY_INT, NULL, "..10", "a required key" },
    TB_KEYS_END,
};

/* Every value of s as text and its origin, as `trainbig config` prints them. */
static void print_section(const struct tb_section *s)
{
    for (size_t i = 0; i < s->nkeys; i++) {
        const char *text = tb_section_text(s, i);
        const char *origin = s->origins[i];
        char desc[512];
        tb_key_describe(&s->keys[i], desc, sizeof desc);
        if (!text || !origin || !desc[0])
            abort(); /* every key has a value, an origin and a description */
    }
}

static struct tb_section *build(const struct tb_config *c, const char *name, const struct tb_key *keys)
{
    static const char *const skip[] = { "plugin", NULL };
    struct tb_section *s = NULL;
    struct tb_err err;
    tb_err_clear(&err);
    if (tb_section_build(c, name, keys, "fuzz", skip, &s, &err) != TB_OK)
        return NULL;
    print_section(s);
    return s;
}

/* The dataset's table: the loader's keys after the plugin's, as setup.c merges them. */
static struct tb_key *dataset_keys(void)
{
    const size_t np = tb_keys_count(plugin_keys), nc = tb_keys_count(tb_data_keys);
    struct tb_key *k = malloc((np + nc + 1) * sizeof *k);
    if (k) {
        memcpy(k, plugin_keys, np * sizeof *k);
        memcpy(k + np, tb_data_keys, (nc + 1) * sizeof *k);
    }
    return k;
}

static void validate(const struct tb_config *c)
{
    static const char *const names[] = { "run", "backend", "platform", "model", "dataset", "swap", "train", "report" };
    for (size_t i = 0; i < c->nsections; i++) {
        char where[1200];
        tb_config_section_where(c, &c->sections[i], where, sizeof where);
        (void)tb_nearest(c->sections[i].name, names, sizeof names / sizeof *names);
    }
    for (size_t i = 0; i < c->nentries; i++) {
        char where[1200];
        tb_config_where(c, &c->entries[i], where, sizeof where);
    }

    struct tb_settings st;
    memset(&st, 0, sizeof st);
    struct tb_err err;
    tb_err_clear(&err);
    struct tb_key *dkeys = dataset_keys();
    struct tb_section *run = build(c, "run", tb_run_keys), *train = build(c, "train", tb_train_keys),
                      *report = build(c, "report", tb_report_keys), *model = build(c, "model", tb_model_core_keys),
                      *backend = build(c, "backend", plugin_keys), *dataset = dkeys ? build(c, "dataset", dkeys) : NULL;
    if (run)
        (void)tb_section_bind(run, tb_run_bindings, &st.run, &err);
    if (train)
        (void)tb_section_bind(train, tb_train_bindings, &st.train, &err);
    if (report)
        (void)tb_section_bind(report, tb_report_bindings, &st.report, &err);
    if (model)
        (void)tb_section_bind(model, tb_model_core_bindings, &st, &err);
    if (dataset)
        (void)tb_data_settings_read(dataset, &st.data, &err);
    if (backend) {
        /* A default other settings imply, as the platform's swap defaults are applied. */
        char why[256];
        (void)tb_section_default(backend, "pool", "2G", "fuzz", why, sizeof why);
        (void)tb_section_default(backend, "threads", "-1", NULL, why, sizeof why);
    }
    tb_section_free(run);
    tb_section_free(train);
    tb_section_free(report);
    tb_section_free(model);
    tb_section_free(backend);
    tb_section_free(dataset);
    free(dkeys);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    static const char marker[] = "\n#--set\n";
    const uint8_t *sets = NULL;
    size_t file_size = size;
    for (size_t i = 0; i + sizeof marker - 1 <= size; i++)
        if (memcmp(data + i, marker, sizeof marker - 1) == 0) {
            file_size = i + 1;
            sets = data + i + sizeof marker - 1;
            break;
        }

    char path[32];
    int fd = fuzz_file(data, file_size, path, sizeof path);
    if (fd < 0)
        return 0;
    struct tb_config *c = NULL;
    struct tb_err err;
    tb_err_clear(&err);
    int rc = tb_config_load(path, &c, &err);
    fuzz_file_close(fd);
    if (rc != TB_OK)
        return 0;

    /* The overrides, one a line; at most 64, as a command line would hold. */
    const uint8_t *end = data + size;
    for (int n = 0; sets && sets < end && n < 64; n++) {
        const uint8_t *nl = memchr(sets, '\n', (size_t)(end - sets));
        size_t len = nl ? (size_t)(nl - sets) : (size_t)(end - sets);
        char *arg = malloc(len + 1);
        if (!arg)
            break;
        memcpy(arg, sets, len);
        arg[len] = '\0';
        tb_err_clear(&err);
        (void)tb_config_set(c, arg, &err); /* stops at a NUL, as a command line would */
        free(arg);
        sets = nl ? nl + 1 : end;
    }
    validate(c);
    tb_config_free(c);
    return 0;
}
