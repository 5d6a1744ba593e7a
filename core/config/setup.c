/* setup.c: from a parsed INI file to validated sections and loaded plugins. */
#include "config.h"

#include "core/config/setup_internal.h"

#include "core/config/platform_internal.h"
#include "core/data/dataloader.h"
#include "core/dist/world.h"
#include "core/util/log_control.h"
#include "core/util/printable.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/trainbig.h>


static const struct {
    const char *name;
    int kind;
    const char *default_plugin; /* NULL: the user must name one */
    const struct tb_key *keys;  /* core sections */
} sections[TB_SEC_COUNT] = {
    [TB_SEC_RUN] = { "run", 0, NULL, tb_run_keys },
    [TB_SEC_BACKEND] = { "backend", TB_KIND_BACKEND, "auto", NULL },
    [TB_SEC_PLATFORM] = { "platform", TB_KIND_PLATFORM, "auto", NULL },
    [TB_SEC_MODEL] = { "model", TB_KIND_MODEL, NULL, NULL },
    [TB_SEC_DATASET] = { "dataset", TB_KIND_DATASET, NULL, NULL },
    [TB_SEC_SWAP] = { "swap", TB_KIND_SWAP, "none", NULL },
    [TB_SEC_TRAIN] = { "train", 0, NULL, tb_train_keys },
    [TB_SEC_REPORT] = { "report", 0, NULL, tb_report_keys },
};

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void tb_plugin_names(int kind, char *buf, size_t size)
{
    struct tb_plugin_list l;
    size_t o = 0;
    buf[0] = '\0';
    if (tb_plugin_list(kind, &l) == 0) {
        /* Alphabetical, whatever order the directories were searched in. */
        const char **names = l.n ? malloc(l.n * sizeof *names) : NULL;
        for (size_t i = 0; names && i < l.n; i++)
            names[i] = l.items[i]->p->name;
        if (names)
            qsort(names, l.n, sizeof *names, cmp_names);
        for (size_t i = 0; names && i < l.n && o < size; i++)
            o += (size_t)snprintf(buf + o, size - o, "%s%s", i ? ", " : "", names[i]);
        free(names);
        tb_plugin_list_free(&l);
    }
    if (!o)
        snprintf(buf, size, "none");
}

static int check_sections(const struct tb_config *c, struct tb_err *err)
{
    const char *names[TB_SEC_COUNT];
    for (int i = 0; i < TB_SEC_COUNT; i++)
        names[i] = sections[i].name;
    int rc = TB_OK;
    for (size_t i = 0; i < c->nsections; i++) {
        bool known = false;
        for (int j = 0; j < TB_SEC_COUNT; j++)
            known |= strcmp(c->sections[i].name, names[j]) == 0;
        if (known)
            continue;
        char where[1200], hint[200] = "";
        tb_config_section_where(c, &c->sections[i], where, sizeof where);
        const char *near = tb_nearest(c->sections[i].name, names, TB_SEC_COUNT);
        if (near)
            snprintf(hint, sizeof hint, "did you mean [%s]? ", near);
        rc = tb_err_add(err, TB_ERR_CONFIG,
                        "%s: unknown section [%s]; %sknown sections: run, backend, platform, model, dataset, swap, "
                        "train, report",
                        where, c->sections[i].name, hint);
    }
    return rc;
}

static bool is_path(const char *v)
{
    size_t n = strlen(v);
    return strchr(v, '/') || (n > 3 && strcmp(v + n - 3, ".so") == 0);
}

/* The key table of a plugin's section: a dataset's keys follow the data loader's, so
 * [dataset] holds both (one table: an unknown key is reported once, with the nearest name
 * from either). A plugin may not declare a key the loader owns. *out is NULL where the
 * plugin's own table is used as it is; otherwise the caller frees it. */
static int section_keys(int kind, const struct tb_plugin *p, struct tb_key **out, struct tb_err *err)
{
    *out = NULL;
    const struct tb_key *core = kind == TB_KIND_DATASET ? tb_data_keys
                                : kind == TB_KIND_MODEL ? tb_model_core_keys
                                                        : NULL;
    const char *owner = kind == TB_KIND_DATASET ? "the data loader's" : "the core's";
    if (!core)
        return TB_OK;
    const size_t nc = tb_keys_count(core), np = tb_keys_count(p->keys);
    for (size_t i = 0; i < np; i++)
        for (size_t j = 0; j < nc; j++)
            if (strcmp(p->keys[i].name, core[j].name) == 0)
                return tb_err_add(err, TB_ERR_PLUGIN, "%s plugin '%s' declares key '%s', which is %s: rename it",
                                  tb_kind_name(kind), p->name, p->keys[i].name, owner);
    struct tb_key *k = malloc((nc + np + 1) * sizeof *k);
    if (!k)
        return tb_err_add(err, TB_ERR_NOMEM, "out of memory");
    memcpy(k, p->keys, np * sizeof *k);
    memcpy(k + np, core, (nc + 1) * sizeof *k);
    *out = k;
    return TB_OK;
}

/* tb_section_build against the plugin's table (with the loader's keys for a dataset). */
static int build_plugin_section(const struct tb_config *c, const char *sec, int kind, const struct tb_plugin *p,
                                struct tb_section **out, struct tb_err *err)
{
    struct tb_key *keys;
    *out = NULL;
    int rc = section_keys(kind, p, &keys, err);
    if (rc)
        return rc;
    char owner[300];
    snprintf(owner, sizeof owner, "%s plugin '%s'", sec, p->name);
    static const char *const skip[] = { "plugin", NULL };
    rc = tb_section_build(c, sec, keys ? keys : p->keys, owner, skip, out, err);
    if (rc == TB_OK)
        (*out)->owned_keys = keys;
    else
        free(keys);
    return rc;
}

/* `plugin = auto` of [sec]: the plugin of `kind` with the highest score, and why, noted
 * in the slot and logged once per process and choice. */
static int choose_auto(int kind, const char *sec, struct tb_setup_slot *slot, struct tb_err *perr)
{
    char why[4096]; /* the chosen one's line (512) and the others' (2048) fit whole */
    int rc = tb_plugin_auto(kind, &slot->plugin, why, sizeof why, perr);
    if (rc)
        return rc;
    /* Once per process and choice: `trainbig fit` resolves a setup per probe. */
    static char said[2][256];
    char *last = said[kind == TB_KIND_PLATFORM];
    if (strncmp(last, why, sizeof said[0] - 1) != 0) {
        tb_log(TB_LOG_INFO, "[%s] plugin = auto: %s", sec, why);
        memcpy(last, why, sizeof said[0] - 1); /* the start: enough to tell one choice from another */
    }
    size_t n = strlen(why) + 8;
    slot->plugin_note = malloc(n);
    if (slot->plugin_note)
        snprintf(slot->plugin_note, n, "auto: %s", why);
    return TB_OK;
}

/* Finds and loads the plugin a section names, then validates the section's keys. */
static int resolve_plugin(const struct tb_config *c, int id, struct tb_setup_slot *slot, struct tb_err *err)
{
    const char *sec = sections[id].name;
    int kind = sections[id].kind;
    const struct tb_entry *e = tb_config_find(c, sec, "plugin");
    const char *value = e ? e->value : sections[id].default_plugin;
    char where[1200];
    tb_config_where(c, e, where, sizeof where);

    if (!value || !*value) {
        char names[1024];
        tb_plugin_names(kind, names, sizeof names);
        return tb_err_add(err, TB_ERR_CONFIG, "%s: [%s] plugin is required: name a %s plugin (available: %s)", where,
                          sec, sec, names);
    }
    slot->plugin_origin = !e                           ? strdup("default")
                          : e->origin == TB_ORIGIN_SET ? tb_set_origin(e->set_arg)
                                                       : strdup(where);
    if (!slot->plugin_origin)
        return tb_err_add(err, TB_ERR_NOMEM, "out of memory");

    struct tb_err perr;
    tb_err_clear(&perr);
    int rc;
    if (strcmp(value, "auto") == 0) {
        if (kind != TB_KIND_BACKEND && kind != TB_KIND_PLATFORM) {
            char names[1024];
            tb_plugin_names(kind, names, sizeof names);
            return tb_err_add(err, TB_ERR_CONFIG,
                              "%s: [%s] plugin = 'auto': only [backend] and [platform] choose by score; name a %s "
                              "plugin (available: %s)",
                              where, sec, sec, names);
        }
        rc = choose_auto(kind, sec, slot, &perr);
    } else if (is_path(value)) {
        char path[4096];
        if (value[0] != '/' && e && e->origin == TB_ORIGIN_FILE && strcmp(c->dir, ".") != 0)
            snprintf(path, sizeof path, "%s/%s", c->dir, value);
        else
            snprintf(path, sizeof path, "%s", value);
        rc = tb_plugin_open(path, kind, &slot->plugin, &perr);
    } else {
        rc = tb_plugin_find(kind, value, &slot->plugin, &perr);
    }
    if (rc)
        return tb_err_add(err, rc, "%s: [%s] plugin = '%s': %s", where, sec, value, perr.msg);

    rc = build_plugin_section(c, sec, kind, slot->plugin->p, &slot->section, err);
    if (rc == TB_OK && kind == TB_KIND_DATASET) {
        /* What the key table cannot say: val_size's form, ranges that must be ordered. */
        struct tb_data_settings set;
        tb_err_clear(&perr);
        rc = tb_data_settings_read(slot->section, &set, &perr);
        if (rc)
            tb_err_add(err, rc, "%s", perr.msg);
    } else if (rc == TB_OK && kind == TB_KIND_PLATFORM) {
        /* A platform checks what its key table cannot say (duplex_gbps against the
         * one-direction rates, the form of nccl_env) in create(): make one now, so that
         * those mistakes are reported with the rest of the file, and keep it for its swap
         * defaults (apply_implied_defaults). */
        tb_err_clear(&perr);
        rc = tb_plugin_create(slot->plugin->p, slot->section, &slot->platform_ctx, &perr);
        if (rc != TB_OK && !perr.msg[0])
            tb_err_set(&perr, rc, "[platform] plugin '%s': create() failed and said nothing about why",
                       slot->plugin->p->name);
        for (const char *line = perr.msg; rc && *line;) { /* one message per line, as for the keys */
            size_t n = strcspn(line, "\n");
            tb_err_add(err, rc, "%.*s", (int)n, line);
            line += n + (line[n] == '\n');
        }
    }
    return rc;
}

/* What [run] name's key table cannot say: the name becomes a directory under [run]
 * output (and the checkpoints' prefix), so it must be one plain file name. */
static int check_run_name(const struct tb_section *run, struct tb_err *err)
{
    const char *name = tb_section_string(run, "name");
    const char *why = NULL;
    if (!name[0])
        why = "it is empty";
    else if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        why = "'.' and '..' name directories that exist already";
    else if (strchr(name, '/'))
        why = "it holds a '/', which would put the run outside [run] output";
    else if (strlen(name) > 200)
        why = "it is longer than 200 bytes (the run directory adds a suffix such as .2 within the system's 255)";
    for (const char *p = name; !why && *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            why = "it holds a control character";
    if (!why)
        return TB_OK;
    return tb_err_add(err, TB_ERR_CONFIG,
                      "%s: [run] name = '%s': %s; allowed: one file name (no '/', not '.' or '..', no control "
                      "characters), e.g. cityscapes-b8",
                      tb_section_origin(run, "name"), name, why);
}

/* Defaults that depend on other settings, applied once everything is valid: a rank's
 * device under mpirun, and the platform's swap_defaults (its instance is made for them
 * and closed again: the run makes its own). Keys the user set are kept. */
static int apply_implied_defaults(struct tb_setup *s, struct tb_err *err)
{
    const struct tb_comm *world = tb_comm_world();
    if (world->size > 1) {
        /* One process per device: a rank takes the device of its local rank. */
        char value[16], why[256];
        snprintf(value, sizeof value, "%d", world->local_rank);
        if (tb_section_default(s->slot[TB_SEC_BACKEND].section, "device", value, "local rank (mpirun)", why,
                               sizeof why) < 0)
            return tb_err_set(err, TB_ERR_CONFIG, "[backend] device = %s (this rank's local rank): %s", value, why);
    }
    struct tb_setup_slot *ps = &s->slot[TB_SEC_PLATFORM];
    const struct tb_plugin *plat = ps->plugin->p;
    int rc = tb_platform_apply_swap(plat, ps->platform_ctx, s->slot[TB_SEC_SWAP].section, s->swap_note,
                                    sizeof s->swap_note, err);
    /* A swap default the user wrote is theirs to fix: say where it was written. */
    if (rc && tb_section_has(ps->section, "swap_defaults") &&
        strcmp(tb_section_origin(ps->section, "swap_defaults"), "default") != 0)
        tb_err_prefix(err, "%s", tb_section_origin(ps->section, "swap_defaults"));
    tb_plugin_destroy(plat, ps->platform_ctx);
    ps->platform_ctx = NULL;
    return rc;
}

/* The core's keys of every section into s->settings, once the sections hold what runs. */
static int read_settings(struct tb_setup *s, struct tb_err *err)
{
    struct tb_settings *st = &s->settings;
    int rc = tb_section_bind(s->slot[TB_SEC_RUN].section, tb_run_bindings, &st->run, err);
    if (!rc)
        rc = tb_section_bind(s->slot[TB_SEC_TRAIN].section, tb_train_bindings, &st->train, err);
    if (!rc)
        rc = tb_section_bind(s->slot[TB_SEC_REPORT].section, tb_report_bindings, &st->report, err);
    if (!rc)
        rc = tb_section_bind(s->slot[TB_SEC_MODEL].section, tb_model_core_bindings, st, err);
    if (!rc)
        rc = tb_data_settings_read(s->slot[TB_SEC_DATASET].section, &st->data, err);
    return rc;
}

/* tb_config_switch_plugin's filter: "plugin" and the keys of the table in arg. */
static bool declared_in(const char *key, void *arg)
{
    return strcmp(key, "plugin") == 0 || tb_keys_find(arg, key) != NULL;
}

int tb_config_switch_plugin(struct tb_config *cfg, enum tb_section_id sec, const char *name, struct tb_err *err)
{
    static const int kinds[TB_SEC_COUNT] = {
        [TB_SEC_BACKEND] = TB_KIND_BACKEND, [TB_SEC_PLATFORM] = TB_KIND_PLATFORM, [TB_SEC_MODEL] = TB_KIND_MODEL,
        [TB_SEC_DATASET] = TB_KIND_DATASET, [TB_SEC_SWAP] = TB_KIND_SWAP,
    };
    const int kind = sec >= 0 && sec < TB_SEC_COUNT ? kinds[sec] : 0;
    if (!kind)
        return tb_err_set(err, TB_ERR_CONFIG, "section %d has no plugin", (int)sec);
    const char *section = tb_kind_name(kind);
    char set[512];
    snprintf(set, sizeof set, "%s.plugin=%s", section, name);
    int rc = tb_config_set(cfg, set, err);
    if (rc)
        return rc;
    struct tb_plugin_handle *h = NULL;
    rc = tb_plugin_find(kind, name, &h, err);
    if (rc)
        return rc;
    struct tb_key *keys = NULL;
    rc = section_keys(kind, h->p, &keys, err);
    if (!rc)
        tb_config_drop_section(cfg, section, declared_in, (void *)(keys ? keys : h->p->keys));
    free(keys);
    tb_plugin_close(h);
    return rc;
}

int tb_setup_resolve(const struct tb_config *cfg, struct tb_setup **out, struct tb_err *err)
{
    *out = NULL;
    tb_err_clear(err);
    struct tb_setup *s = calloc(1, sizeof *s);
    if (!s)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    s->cfg = cfg;
    int rc = check_sections(cfg, err);
    for (int i = 0; i < TB_SEC_COUNT; i++) {
        struct tb_setup_slot *slot = &s->slot[i];
        slot->name = sections[i].name;
        slot->kind = sections[i].kind;
        int r = slot->kind ? resolve_plugin(cfg, i, slot, err)
                           : tb_section_build(cfg, slot->name, sections[i].keys, "trainbig", NULL, &slot->section, err);
        if (r && !rc)
            rc = r;
        if (i == TB_SEC_RUN && r == TB_OK) {
            tb_log_set_level((enum tb_log_level)tb_section_enum(slot->section, "log_level"), false);
            r = check_run_name(slot->section, err);
            if (r && !rc)
                rc = r;
        }
    }
    if (rc == TB_OK)
        rc = apply_implied_defaults(s, err);
    if (rc == TB_OK)
        rc = read_settings(s, err);
    if (rc) {
        tb_setup_free(s);
        return err->status ? err->status : rc;
    }
    *out = s;
    return TB_OK;
}

/* Finds plugin `name` of `kind`, and validates `settings` as its [section]: the part of
 * opening an instance that does not depend on the kind. On failure nothing is left open. */
static int open_section(int kind, const char *section, const char *name, const char *settings,
                        struct tb_plugin_handle **h, struct tb_config **cfg, struct tb_section **sec,
                        struct tb_err *err)
{
    *h = NULL;
    *cfg = NULL;
    *sec = NULL;
    tb_err_clear(err);
    int rc = tb_plugin_find(kind, name, h, err);
    if (rc)
        return rc;
    char label[300];
    snprintf(label, sizeof label, "%s '%s' settings", section, name);
    *cfg = tb_config_new(label);
    if (!*cfg)
        rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    const size_t prefix = strlen(section) + 1;
    for (const char *p = settings ? settings : ""; !rc && *p;) {
        size_t n = strcspn(p, "\n");
        char line[1100];
        snprintf(line, sizeof line, "%s.%.*s", section, (int)(n < 1000 ? n : 1000), p);
        bool blank = strspn(line + prefix, " \t") == strlen(line + prefix);
        if (!blank)
            rc = tb_config_set(*cfg, line, err);
        p += n + (p[n] == '\n');
    }
    if (!rc)
        rc = build_plugin_section(*cfg, section, kind, (*h)->p, sec, err);
    if (rc) {
        tb_section_free(*sec);
        tb_config_free(*cfg);
        tb_plugin_close(*h);
        *h = NULL;
        *cfg = NULL;
        *sec = NULL;
    }
    return rc;
}

int tb_instance_open(int kind, const char *name, const char *split, const char *settings, struct tb_instance *in,
                     struct tb_err *err)
{
    memset(in, 0, sizeof *in);
    const char *section = tb_kind_name(kind);
    if (!section)
        return tb_err_set(err, TB_ERR_PLUGIN, "internal error: no plugin kind %d", kind);
    int rc = open_section(kind, section, name, settings, &in->h, &in->cfg, &in->sec, err);
    if (rc)
        return rc;
    in->ops.any = in->h->p->ops.any;
    rc = kind == TB_KIND_DATASET ? tb_dataset_open(in->h->p, in->sec, split, &in->ctx, err)
                                 : tb_plugin_create(in->h->p, in->sec, &in->ctx, err);
    if (rc)
        tb_instance_close(in);
    return rc;
}

void tb_instance_close(struct tb_instance *in)
{
    if (in->h)
        tb_plugin_destroy(in->h->p, in->ctx);
    tb_section_free(in->sec);
    tb_config_free(in->cfg);
    tb_plugin_close(in->h);
    memset(in, 0, sizeof *in);
}

void tb_setup_free(struct tb_setup *s)
{
    if (!s)
        return;
    for (int i = 0; i < TB_SEC_COUNT; i++) {
        if (s->slot[i].platform_ctx) /* resolve failed after the platform's create */
            tb_plugin_destroy(s->slot[i].plugin->p, s->slot[i].platform_ctx);
        tb_section_free(s->slot[i].section);
        tb_plugin_close(s->slot[i].plugin);
        free(s->slot[i].plugin_origin);
        free(s->slot[i].plugin_note);
    }
    free(s);
}

/* Writes origin, a comment, and ends the line. Safe to print (a file name or a --set
 * holds the user's bytes), and cut at spaces into lines of at most ORIGIN_WIDTH, each
 * after the first as a comment of its own: the INI reader refuses a line past 1000
 * characters, and `plugin = auto`'s reasons for every candidate run longer. */
enum { ORIGIN_WIDTH = 160 };
static void print_origin(FILE *out, const char *origin)
{
    const size_t n = 4 * strlen(origin) + 1;
    char *safe = malloc(n);
    if (!safe) {
        fputs("(out of memory)\n", out);
        return;
    }
    const char *p = tb_printable(safe, n, origin);
    for (bool first = true; first || *p; first = false) {
        size_t len = strlen(p);
        if (len > ORIGIN_WIDTH) {
            len = ORIGIN_WIDTH;
            while (len > ORIGIN_WIDTH / 2 && p[len] != ' ')
                len--;
        }
        fprintf(out, "%s%.*s\n", first ? "" : ";   ", (int)len, p);
        p += len;
        while (*p == ' ')
            p++;
    }
    free(safe);
}

/* Writes "key = value" so that iniparser reads the same value back. */
static void print_pair(FILE *out, const char *key, const char *value, const char *origin)
{
    char line[4096];
    bool quote = strpbrk(value, ";#") || value[0] == '"' || value[0] == '\'' ||
                 (*value && (value[0] == ' ' || value[strlen(value) - 1] == ' '));
    char q = strchr(value, '"') ? '\'' : '"';
    if (quote)
        snprintf(line, sizeof line, "%s = %c%s%c", key, q, value, q);
    else
        snprintf(line, sizeof line, "%s = %s", key, value);
    fprintf(out, "%-40s ; ", line);
    print_origin(out, origin);
}

void tb_setup_print(const struct tb_setup *s, FILE *out)
{
    fputs("; effective configuration of ", out);
    tb_fputs_printable(s->cfg->path, out);
    fputs("\n; each key: its value ; where it came from\n", out);
    for (int i = 0; i < TB_SEC_COUNT; i++) {
        const struct tb_setup_slot *slot = &s->slot[i];
        fprintf(out, "\n[%s]\n", slot->name);
        if (slot->plugin) {
            const struct tb_plugin *p = slot->plugin->p;
            print_pair(out, "plugin", p->name, slot->plugin_note ? slot->plugin_note : slot->plugin_origin);
            fprintf(out, "; %s %s (ABI %u.%u): %s\n", slot->plugin->path, p->version, p->abi_major, p->abi_minor,
                    p->description);
        }
        const struct tb_section *sec = slot->section;
        for (size_t k = 0; sec && k < sec->nkeys; k++) {
            const struct tb_value *v = &sec->values[k];
            if (sec->keys[k].type == TB_KEY_LIST) {
                char joined[4096];
                size_t o = 0;
                joined[0] = '\0';
                for (size_t j = 0; j < v->nitems && o < sizeof joined; j++)
                    o += (size_t)snprintf(joined + o, sizeof joined - o, "%s%s", j ? ", " : "", v->items[j]);
                print_pair(out, sec->keys[k].name, joined, sec->origins[k]);
            } else {
                print_pair(out, sec->keys[k].name, tb_section_text(sec, k), sec->origins[k]);
            }
        }
    }
}
