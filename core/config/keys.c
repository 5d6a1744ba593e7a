/* keys.c: parsing a value by its key's type and allowed values (the text forms are in
 * key_syntax.c), describing what a key allows, key-table checks, and the "did you mean"
 * suggestion for typos. */
#include "config.h"

#include "core/config/keys_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *tb_key_type_name(enum tb_key_type t)
{
    switch (t) {
    case TB_KEY_INT:
        return "int";
    case TB_KEY_FLOAT:
        return "float";
    case TB_KEY_BOOL:
        return "bool";
    case TB_KEY_SIZE:
        return "size";
    case TB_KEY_ENUM:
        return "enum";
    case TB_KEY_STRING:
        return "string";
    case TB_KEY_PATH:
        return "path";
    case TB_KEY_LIST:
        return "list";
    case TB_KEY_INT_LIST:
        return "int list";
    case TB_KEY_FLOAT_LIST:
        return "float list";
    }
    return NULL;
}

size_t tb_keys_count(const struct tb_key *keys)
{
    size_t n = 0;
    while (keys && keys[n].name)
        n++;
    return n;
}

const struct tb_key *tb_keys_find(const struct tb_key *keys, const char *name)
{
    for (size_t i = 0; keys && keys[i].name; i++)
        if (strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

/* ------------------------------------------------------------------ typed lists */

static bool is_typed_list(enum tb_key_type t)
{
    return t == TB_KEY_INT_LIST || t == TB_KEY_FLOAT_LIST;
}

static enum tb_key_type item_type(enum tb_key_type t)
{
    return t == TB_KEY_INT_LIST ? TB_KEY_INT : TB_KEY_FLOAT;
}

/* A typed list's allowed, "[COUNT] RANGE" with either part optional, split in two. */
static int split_list_allowed(const char *allowed, char *count, char *range, size_t size)
{
    count[0] = range[0] = '\0';
    const char *p = allowed ? allowed : "";
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '[') {
        const char *close = strchr(p, ']');
        if (!close || (size_t)(close - p - 1) >= size)
            return -1;
        memcpy(count, p + 1, (size_t)(close - p - 1));
        count[close - p - 1] = '\0';
        p = close + 1;
    }
    while (isspace((unsigned char)*p))
        p++;
    if (strlen(p) >= size)
        return -1;
    strcpy(range, p);
    return 0;
}

/* COUNT, "n" or "lo..hi" (either side may be empty), as bounds on the number of items. */
static int count_bounds(const char *count, size_t *lo, size_t *hi)
{
    *lo = 0;
    *hi = SIZE_MAX;
    if (!*count)
        return 0;
    char a[32], b[32];
    int64_t v;
    if (tb_split_range(count, a, b, sizeof a) != 0) {
        if (tb_parse_int(count, &v) || v < 0)
            return -1;
        *lo = *hi = (size_t)v;
        return 0;
    }
    if (*a && (tb_parse_int(a, &v) || v < 0 || (*lo = (size_t)v, false)))
        return -1;
    if (*b && (tb_parse_int(b, &v) || v < 0 || (*hi = (size_t)v, false)))
        return -1;
    return *lo <= *hi ? 0 : -1;
}

/* Whether a typed list's allowed is well formed. */
static bool list_allowed_ok(const struct tb_key *k)
{
    char count[64], range[128], lo[64], hi[64];
    size_t clo, chi;
    double a, b;
    bool has_a, has_b;
    if (split_list_allowed(k->allowed, count, range, sizeof count) || count_bounds(count, &clo, &chi))
        return false;
    return !*range ||
           (tb_split_range(range, lo, hi, sizeof lo) == 0 && !tb_range_side(item_type(k->type), lo, &a, &has_a) &&
            !tb_range_side(item_type(k->type), hi, &b, &has_b) && !(has_a && has_b && a > b));
}

static bool is_ranged(enum tb_key_type t)
{
    return t == TB_KEY_INT || t == TB_KEY_FLOAT || t == TB_KEY_SIZE;
}

/* "WHAT in lo..hi", "WHAT >= lo", ..., or WHAT alone, from range "lo..hi" (or NULL). */
static void describe_range(const char *what, const char *range, char *buf, size_t size)
{
    char lo[64], hi[64];
    if (range && tb_split_range(range, lo, hi, sizeof lo) == 0) {
        if (*lo && *hi)
            snprintf(buf, size, "%s in %s..%s", what, lo, hi);
        else if (*lo)
            snprintf(buf, size, "%s >= %s", what, lo);
        else if (*hi)
            snprintf(buf, size, "%s <= %s", what, hi);
        else
            snprintf(buf, size, "%s", what);
    } else {
        snprintf(buf, size, "%s", what);
    }
}

/* "a comma-separated list of 6 integers in 1..64" */
static void describe_list(const struct tb_key *k, char *buf, size_t size)
{
    char count[64], range[128], what[160];
    size_t lo = 0, hi = SIZE_MAX;
    const char *item = k->type == TB_KEY_INT_LIST ? "integers" : "numbers";
    if (split_list_allowed(k->allowed, count, range, sizeof count) || count_bounds(count, &lo, &hi))
        lo = 0, hi = SIZE_MAX, range[0] = '\0';
    if (lo == hi)
        snprintf(what, sizeof what, "a comma-separated list of %zu %s", lo, item);
    else if (hi != SIZE_MAX)
        snprintf(what, sizeof what, "a comma-separated list of %zu to %zu %s", lo, hi, item);
    else if (lo)
        snprintf(what, sizeof what, "a comma-separated list of at least %zu %s", lo, item);
    else
        snprintf(what, sizeof what, "a comma-separated list of %s", item);
    describe_range(what, *range ? range : NULL, buf, size);
}

void tb_key_describe(const struct tb_key *k, char *buf, size_t size)
{
    char names[512];
    const char *what = "";
    switch (k->type) {
    case TB_KEY_INT:
        what = "an integer";
        break;
    case TB_KEY_FLOAT:
        what = "a number";
        break;
    case TB_KEY_SIZE:
        what = "a size in bytes with an optional K, M, G or T suffix (powers of 1024)";
        break;
    case TB_KEY_BOOL:
        snprintf(buf, size, "yes or no (also true/false, on/off, 1/0)");
        return;
    case TB_KEY_ENUM:
        tb_names_list(k->allowed ? k->allowed : "", names, sizeof names);
        snprintf(buf, size, "one of: %s", names);
        return;
    case TB_KEY_LIST:
        if (k->allowed) {
            tb_names_list(k->allowed, names, sizeof names);
            snprintf(buf, size, "a comma-separated list of: %s", names);
        } else {
            snprintf(buf, size, "a comma-separated list");
        }
        return;
    case TB_KEY_STRING:
        snprintf(buf, size, "any text");
        return;
    case TB_KEY_PATH:
        snprintf(buf, size, "a path (relative to the INI file's directory)");
        return;
    case TB_KEY_INT_LIST:
    case TB_KEY_FLOAT_LIST:
        describe_list(k, buf, size);
        return;
    }
    describe_range(what, k->allowed, buf, size);
}

void tb_value_free(struct tb_value *v)
{
    if (!v)
        return;
    free(v->text);
    for (size_t i = 0; i < v->nitems; i++)
        free(v->items[i]);
    free(v->items);
    free(v->ints);
    free(v->floats);
    memset(v, 0, sizeof *v);
}

static int fail(char *why, size_t why_size, const struct tb_key *k, const char *problem)
{
    char allowed[600];
    tb_key_describe(k, allowed, sizeof allowed);
    snprintf(why, why_size, "%s; allowed: %s", problem, allowed);
    return TB_ERR_CONFIG;
}

static int check_range(const struct tb_key *k, double v, char *why, size_t why_size)
{
    char lo[64], hi[64];
    if (!k->allowed || tb_split_range(k->allowed, lo, hi, sizeof lo))
        return 0;
    double a, b;
    bool has_a, has_b;
    if (tb_range_side(k->type, lo, &a, &has_a) || tb_range_side(k->type, hi, &b, &has_b))
        return 0; /* a bad range is a table bug, reported by tb_keys_check_table */
    if ((has_a && v < a) || (has_b && v > b))
        return fail(why, why_size, k, "out of range");
    return 0;
}

static int parse_list(const struct tb_key *k, const char *text, struct tb_value *out, char *why, size_t why_size)
{
    if (!*text)
        return 0;
    size_t cap = 1;
    for (const char *p = text; *p; p++)
        cap += *p == ',';
    out->items = calloc(cap, sizeof *out->items);
    if (!out->items)
        return TB_ERR_NOMEM;
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char *raw = malloc(n + 1);
        if (!raw)
            return TB_ERR_NOMEM;
        memcpy(raw, p, n);
        raw[n] = '\0';
        char *item = tb_trim_dup(raw);
        free(raw);
        if (!item)
            return TB_ERR_NOMEM;
        out->items[out->nitems++] = item;
        if (!*item) {
            return fail(why, why_size, k, "empty list item");
        }
        if (k->type == TB_KEY_LIST && k->allowed) {
            int idx = tb_name_index(k->allowed, item);
            if (idx < 0) {
                char problem[256];
                snprintf(problem, sizeof problem, "unknown item '%s'", item);
                return fail(why, why_size, k, problem);
            }
            /* The table's spelling, as for ENUM values. */
            tb_name_at(k->allowed, idx, item, strlen(item) + 1);
        }
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

/* A relative path *t made relative to base_dir (NULL, "" or ".": left as it is). */
static int resolve_path(char **t, const char *base_dir)
{
    if (!**t || (*t)[0] == '/' || !base_dir || !*base_dir || strcmp(base_dir, ".") == 0)
        return 0;
    size_t n = strlen(base_dir) + strlen(*t) + 2;
    char *joined = malloc(n);
    if (!joined)
        return TB_ERR_NOMEM;
    snprintf(joined, n, "%s/%s", base_dir, (*t)[0] == '.' && (*t)[1] == '/' ? *t + 2 : *t);
    free(*t);
    *t = joined;
    return 0;
}

/* A typed list: the items, then their count, then each item's type and range. */
static int parse_typed_list(const struct tb_key *k, const char *text, struct tb_value *out, char *why, size_t why_size)
{
    int rc = parse_list(k, text, out, why, why_size);
    if (rc)
        return rc;
    char count[64], range[128], problem[1024];
    size_t lo, hi;
    if (split_list_allowed(k->allowed, count, range, sizeof count) || count_bounds(count, &lo, &hi))
        return 0; /* a bad table, reported by tb_keys_check_table */
    const bool ints = k->type == TB_KEY_INT_LIST;
    if (ints ? !(out->ints = calloc(out->nitems + 1, sizeof *out->ints))
             : !(out->floats = calloc(out->nitems + 1, sizeof *out->floats)))
        return TB_ERR_NOMEM;
    const struct tb_key scalar = { k->name, item_type(k->type), NULL, *range ? range : NULL, k->help };
    for (size_t i = 0; i < out->nitems; i++) {
        struct tb_value v;
        char item_why[600];
        if (tb_key_parse(&scalar, out->items[i], NULL, &v, item_why, sizeof item_why)) {
            /* the item's own problem, without the scalar's "allowed" (the list's follows) */
            char *cut = strstr(item_why, "; allowed: ");
            if (cut)
                *cut = '\0';
            snprintf(problem, sizeof problem, "item %zu '%s' is %s", i + 1, out->items[i], item_why);
            return fail(why, why_size, k, problem);
        }
        if (ints)
            out->ints[i] = v.v.i;
        else
            out->floats[i] = v.v.f;
        tb_value_free(&v);
    }
    /* The count after the items, so that a bad item is named as such, not counted. */
    if (out->nitems < lo || out->nitems > hi) {
        snprintf(problem, sizeof problem, "%zu item%s", out->nitems, out->nitems == 1 ? "" : "s");
        return fail(why, why_size, k, problem);
    }
    return 0;
}

/* An INT key's value t, within the key's range. */
static int parse_int_value(const struct tb_key *k, const char *t, struct tb_value *out, char *why, size_t why_size)
{
    int prc = tb_parse_int(t, &out->v.i);
    if (prc) {
        char problem[200];
        tb_parse_problem(prc, "an integer", problem, sizeof problem);
        return fail(why, why_size, k, *t ? problem : "empty value");
    }
    char lo[64], hi[64];
    int64_t a, b;
    if (k->allowed && tb_split_range(k->allowed, lo, hi, sizeof lo) == 0 &&
        ((*lo && tb_parse_int(lo, &a) == 0 && out->v.i < a) || (*hi && tb_parse_int(hi, &b) == 0 && out->v.i > b)))
        return fail(why, why_size, k, "out of range");
    return 0;
}

/* An ENUM key's value *t, one of its names in any case: its index, and *t replaced by the
 * name as the key writes it (NULL and TB_ERR_NOMEM when out of memory). */
static int parse_enum_value(const struct tb_key *k, char **t, struct tb_value *out, char *why, size_t why_size)
{
    int idx = tb_name_index(k->allowed, *t);
    if (idx < 0)
        return fail(why, why_size, k, **t ? "not an allowed value" : "empty value");
    char canon[256];
    tb_name_at(k->allowed, idx, canon, sizeof canon);
    free(*t);
    *t = strdup(canon);
    out->v.e = idx;
    return *t ? 0 : TB_ERR_NOMEM;
}

int tb_key_parse(const struct tb_key *k, const char *text, const char *base_dir, struct tb_value *out, char *why,
                 size_t why_size)
{
    memset(out, 0, sizeof *out);
    why[0] = '\0';
    char *t = tb_trim_dup(text ? text : "");
    if (!t) {
        snprintf(why, why_size, "out of memory");
        return TB_ERR_NOMEM;
    }
    int rc = 0, prc;
    char problem[200];
    switch (k->type) {
    case TB_KEY_INT:
        rc = parse_int_value(k, t, out, why, why_size);
        break;
    case TB_KEY_FLOAT:
        if ((prc = tb_parse_float(t, &out->v.f))) {
            tb_parse_problem(prc, "a number", problem, sizeof problem);
            rc = fail(why, why_size, k, *t ? problem : "empty value");
        } else
            rc = check_range(k, out->v.f, why, why_size);
        break;
    case TB_KEY_SIZE:
        if ((prc = tb_parse_size(t, &out->v.u))) {
            tb_parse_problem(prc, "a size", problem, sizeof problem);
            rc = fail(why, why_size, k, *t ? problem : "empty value");
        } else
            rc = check_range(k, (double)out->v.u, why, why_size);
        break;
    case TB_KEY_BOOL:
        if (tb_parse_bool(t, &out->v.b))
            rc = fail(why, why_size, k, *t ? "not a yes/no value" : "empty value");
        break;
    case TB_KEY_ENUM:
        rc = parse_enum_value(k, &t, out, why, why_size);
        break;
    case TB_KEY_STRING:
        break;
    case TB_KEY_PATH:
        rc = resolve_path(&t, base_dir);
        break;
    case TB_KEY_LIST:
        rc = parse_list(k, t, out, why, why_size);
        break;
    case TB_KEY_INT_LIST:
    case TB_KEY_FLOAT_LIST:
        rc = parse_typed_list(k, t, out, why, why_size);
        break;
    default:
        snprintf(why, why_size, "key has an unknown type %d", (int)k->type);
        rc = TB_ERR_CONFIG;
    }
    if (rc) {
        free(t);
        tb_value_free(out);
        if (rc == TB_ERR_NOMEM)
            snprintf(why, why_size, "out of memory");
        return rc;
    }
    out->text = t;
    return 0;
}

/* ------------------------------------------------------------------ tables */

static bool valid_key_name(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '_'))
            return false;
    return true;
}

int tb_keys_check_table(const struct tb_key *keys, const char *who, struct tb_err *err)
{
    int rc = TB_OK;
    for (size_t i = 0; keys && keys[i].name; i++) {
        const struct tb_key *k = &keys[i];
        if (!valid_key_name(k->name)) {
            rc = tb_err_add(err, TB_ERR_PLUGIN, "%s: key '%s': names are lower case [a-z0-9_]", who, k->name);
            continue;
        }
        if (strcmp(k->name, "plugin") == 0)
            rc = tb_err_add(err, TB_ERR_PLUGIN, "%s: key 'plugin' is reserved for the core", who);
        for (size_t j = 0; j < i; j++)
            if (strcmp(keys[j].name, k->name) == 0)
                rc = tb_err_add(err, TB_ERR_PLUGIN, "%s: key '%s' is declared twice", who, k->name);
        if (!tb_key_type_name(k->type)) {
            rc = tb_err_add(err, TB_ERR_PLUGIN, "%s: key '%s' has an unknown type %d", who, k->name, (int)k->type);
            continue;
        }
        if (!k->help || !*k->help)
            rc = tb_err_add(err, TB_ERR_PLUGIN, "%s: key '%s' has no help text", who, k->name);
        if (k->type == TB_KEY_ENUM && (!k->allowed || !*k->allowed))
            rc = tb_err_add(err, TB_ERR_PLUGIN, "%s: enum key '%s' lists no allowed values", who, k->name);
        if (is_ranged(k->type) && k->allowed) {
            char lo[64], hi[64];
            double a, b;
            bool has_a, has_b;
            if (tb_split_range(k->allowed, lo, hi, sizeof lo) || tb_range_side(k->type, lo, &a, &has_a) ||
                tb_range_side(k->type, hi, &b, &has_b) || (has_a && has_b && a > b))
                rc = tb_err_add(err, TB_ERR_PLUGIN, "%s: key '%s' has a bad range '%s' (want lo..hi of its type)", who,
                                k->name, k->allowed);
        }
        if (is_typed_list(k->type) && k->allowed && !list_allowed_ok(k))
            rc = tb_err_add(err, TB_ERR_PLUGIN,
                            "%s: key '%s' has a bad allowed '%s' (want \"[COUNT] lo..hi\", either part optional)", who,
                            k->name, k->allowed);
        if ((k->type == TB_KEY_BOOL || k->type == TB_KEY_STRING || k->type == TB_KEY_PATH) && k->allowed)
            rc = tb_err_add(err, TB_ERR_PLUGIN, "%s: %s key '%s' cannot have allowed values", who,
                            tb_key_type_name(k->type), k->name);
        if (k->def) {
            struct tb_value v;
            char why[700];
            if (tb_key_parse(k, k->def, NULL, &v, why, sizeof why))
                rc = tb_err_add(err, TB_ERR_PLUGIN, "%s: key '%s' has a bad default '%s': %s", who, k->name, k->def,
                                why);
            tb_value_free(&v);
        }
    }
    return rc;
}

/* ------------------------------------------------------------------ typos */

/* Optimal string alignment distance: edits, with an adjacent swap counted once. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63)
        return (size_t)-1;
    size_t d[64][64];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            size_t cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            size_t best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best)
                best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[n][m];
}

const char *tb_nearest(const char *word, const char *const *candidates, size_t n)
{
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(word, candidates[i]);
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
    size_t len = strlen(word);
    size_t limit = len / 3 > 2 ? len / 3 : 2;
    if (len <= 3)
        limit = 1;
    return best && best_d <= limit ? best : NULL;
}
