/* section.c: a section validated against its key table, and the typed getters plugins use. */
#include "config.h"

#include "core/config/section_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool skipped(const char *key, const char *const *skip)
{
    for (; skip && *skip; skip++)
        if (strcmp(*skip, key) == 0)
            return true;
    return false;
}

/* "plugin, device_memory, threads" */
static void key_names(const struct tb_key *keys, const char *const *skip, char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = '\0';
    for (const char *const *s = skip; s && *s && o < size; s++)
        o += (size_t)snprintf(buf + o, size - o, "%s%s", o ? ", " : "", *s);
    for (size_t i = 0; keys && keys[i].name && o < size; i++)
        o += (size_t)snprintf(buf + o, size - o, "%s%s", o ? ", " : "", keys[i].name);
    if (!o)
        snprintf(buf, size, "none");
}

/* Every key given in [name] must be in keys or skip: each one that is not becomes a line
 * in err, with the nearest known name. */
static int check_known(const struct tb_config *c, const char *name, const struct tb_key *keys, const char *owner,
                       const char *const *skip, struct tb_err *err)
{
    int rc = TB_OK;
    const char *names[256];
    size_t nnames = 0;
    for (const char *const *sk = skip; sk && *sk && nnames < 256; sk++)
        names[nnames++] = *sk;
    for (size_t i = 0; keys && keys[i].name && nnames < 256; i++)
        names[nnames++] = keys[i].name;
    for (size_t i = 0; i < c->nentries; i++) {
        const struct tb_entry *e = &c->entries[i];
        if (strcmp(e->section, name) != 0 || skipped(e->key, skip) || tb_keys_find(keys, e->key))
            continue;
        char where[1200], all[1024], hint[200] = "";
        tb_config_where(c, e, where, sizeof where);
        key_names(keys, skip, all, sizeof all);
        const char *near = tb_nearest(e->key, names, nnames);
        if (near)
            snprintf(hint, sizeof hint, "did you mean '%s'? ", near);
        rc = tb_err_add(err, TB_ERR_CONFIG, "%s: [%s] unknown key '%s' (= '%s') for %s; %sknown keys: %s", where, name,
                        e->key, e->value, owner, hint, all);
    }
    return rc;
}

int tb_section_build(const struct tb_config *c, const char *name, const struct tb_key *keys, const char *owner,
                     const char *const *skip, struct tb_section **out, struct tb_err *err)
{
    *out = NULL;
    struct tb_section *s = calloc(1, sizeof *s);
    if (!s)
        return tb_err_add(err, TB_ERR_NOMEM, "out of memory");
    s->name = strdup(name);
    s->keys = keys;
    s->nkeys = tb_keys_count(keys);
    s->values = calloc(s->nkeys ? s->nkeys : 1, sizeof *s->values);
    s->origins = calloc(s->nkeys ? s->nkeys : 1, sizeof *s->origins);
    if (!s->name || !s->values || !s->origins) {
        tb_section_free(s);
        return tb_err_add(err, TB_ERR_NOMEM, "out of memory");
    }

    int rc = check_known(c, name, keys, owner, skip, err);
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd))
        snprintf(cwd, sizeof cwd, ".");

    /* Every key declared gets a value: given, or its default. */
    for (size_t i = 0; i < s->nkeys; i++) {
        const struct tb_key *k = &keys[i];
        const struct tb_entry *e = tb_config_find(c, name, k->name);
        char why[1024], where[1200];
        if (!e && !k->def) {
            char allowed[600];
            tb_key_describe(k, allowed, sizeof allowed);
            rc = tb_err_add(err, TB_ERR_CONFIG, "%s: [%s] %s is required by %s (%s): set it to %s", c->path, name,
                            k->name, owner, k->help, allowed);
            continue;
        }
        const char *text = e ? e->value : k->def;
        /* Relative paths are relative to the file they are written in; --set and
         * defaults are relative to the working directory. Both become absolute, so the
         * printed effective configuration means the same wherever it is read. */
        const char *base = e && e->origin == TB_ORIGIN_FILE ? c->dir : cwd;
        int prc = tb_key_parse(k, text, base, &s->values[i], why, sizeof why);
        if (prc) {
            tb_config_where(c, e, where, sizeof where);
            rc = tb_err_add(err, prc, "%s: [%s] %s = '%s': %s%s", where, name, k->name, text, why,
                            e ? "" : " (this is the default: a bug in the key table)");
            continue;
        }
        if (!e)
            s->origins[i] = strdup("default");
        else if (e->origin == TB_ORIGIN_SET)
            s->origins[i] = tb_set_origin(e->set_arg); /* which --set, for messages */
        else {
            tb_config_where(c, e, where, sizeof where);
            s->origins[i] = strdup(where);
        }
        if (!s->origins[i])
            rc = tb_err_add(err, TB_ERR_NOMEM, "out of memory");
    }
    if (rc) {
        tb_section_free(s);
        return rc;
    }
    *out = s;
    return TB_OK;
}

void tb_section_free(struct tb_section *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nkeys; i++) {
        if (s->values)
            tb_value_free(&s->values[i]);
        if (s->origins)
            free(s->origins[i]);
    }
    free(s->values);
    free(s->origins);
    free(s->name);
    free(s->owned_keys);
    free(s);
}

const char *tb_section_text(const struct tb_section *s, size_t i)
{
    return s->values[i].text ? s->values[i].text : "";
}

/* ------------------------------------------------------------------ getters */

/* A getter asked for a key its table does not declare, or with the wrong type: a bug in
 * the calling plugin, not something a user can cause or fix, so it stops here. */
static const struct tb_value *lookup(const struct tb_section *s, const char *key, enum tb_key_type t1,
                                     enum tb_key_type t2, enum tb_key_type t3)
{
    for (size_t i = 0; s && i < s->nkeys; i++) {
        if (strcmp(s->keys[i].name, key) != 0)
            continue;
        enum tb_key_type t = s->keys[i].type;
        if (t == t1 || t == t2 || t == t3)
            return &s->values[i];
        fprintf(stderr, "trainbig: internal error: [%s] %s is a %s key, read with the wrong getter\n", s->name, key,
                tb_key_type_name(t));
        abort();
    }
    fprintf(stderr, "trainbig: internal error: [%s] has no key '%s' in its table\n", s ? s->name : "?", key);
    abort();
}

int64_t tb_section_int(const struct tb_section *s, const char *key)
{
    return lookup(s, key, TB_KEY_INT, TB_KEY_INT, TB_KEY_INT)->v.i;
}

double tb_section_float(const struct tb_section *s, const char *key)
{
    return lookup(s, key, TB_KEY_FLOAT, TB_KEY_FLOAT, TB_KEY_FLOAT)->v.f;
}

bool tb_section_bool(const struct tb_section *s, const char *key)
{
    return lookup(s, key, TB_KEY_BOOL, TB_KEY_BOOL, TB_KEY_BOOL)->v.b;
}

uint64_t tb_section_size(const struct tb_section *s, const char *key)
{
    return lookup(s, key, TB_KEY_SIZE, TB_KEY_SIZE, TB_KEY_SIZE)->v.u;
}

int tb_section_enum(const struct tb_section *s, const char *key)
{
    return lookup(s, key, TB_KEY_ENUM, TB_KEY_ENUM, TB_KEY_ENUM)->v.e;
}

const char *tb_section_string(const struct tb_section *s, const char *key)
{
    return lookup(s, key, TB_KEY_STRING, TB_KEY_PATH, TB_KEY_ENUM)->text;
}

size_t tb_section_list(const struct tb_section *s, const char *key, const char *const **items)
{
    const struct tb_value *v = lookup(s, key, TB_KEY_LIST, TB_KEY_LIST, TB_KEY_LIST);
    if (items)
        *items = (const char *const *)v->items;
    return v->nitems;
}

size_t tb_section_ints(const struct tb_section *s, const char *key, const int64_t **items)
{
    const struct tb_value *v = lookup(s, key, TB_KEY_INT_LIST, TB_KEY_INT_LIST, TB_KEY_INT_LIST);
    if (items)
        *items = v->ints;
    return v->nitems;
}

size_t tb_section_floats(const struct tb_section *s, const char *key, const double **items)
{
    const struct tb_value *v = lookup(s, key, TB_KEY_FLOAT_LIST, TB_KEY_FLOAT_LIST, TB_KEY_FLOAT_LIST);
    if (items)
        *items = v->floats;
    return v->nitems;
}

const char *tb_section_name(const struct tb_section *s)
{
    return s->name;
}

const char *tb_section_origin(const struct tb_section *s, const char *key)
{
    for (size_t i = 0; i < s->nkeys; i++)
        if (strcmp(s->keys[i].name, key) == 0)
            return s->origins[i];
    return "unknown";
}

bool tb_section_has(const struct tb_section *s, const char *key)
{
    for (size_t i = 0; i < s->nkeys; i++)
        if (strcmp(s->keys[i].name, key) == 0)
            return true;
    return false;
}

int tb_section_default(struct tb_section *s, const char *key, const char *text, const char *origin, char *why,
                       size_t why_size)
{
    for (size_t i = 0; i < s->nkeys; i++) {
        if (strcmp(s->keys[i].name, key) != 0)
            continue;
        if (!s->origins[i] || strcmp(s->origins[i], "default") != 0)
            return 0;
        struct tb_value v;
        memset(&v, 0, sizeof v);
        if (tb_key_parse(&s->keys[i], text, NULL, &v, why, why_size))
            return -1;
        char *o = origin ? strdup(origin) : NULL;
        if (!o) {
            tb_value_free(&v);
            if (origin)
                snprintf(why, why_size, "out of memory");
            return origin ? -1 : 1;
        }
        tb_value_free(&s->values[i]);
        s->values[i] = v;
        free(s->origins[i]);
        s->origins[i] = o;
        return 1;
    }
    return 0;
}
