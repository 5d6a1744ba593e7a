/* keys.c: the value syntax of each key type, ranges and names, key-table checks, and the
 * "did you mean" suggestion for typos. */
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

/* ------------------------------------------------------------------ scalars */

static char *trim_dup(const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    char *r = malloc(n + 1);
    if (r) {
        memcpy(r, s, n);
        r[n] = '\0';
    }
    return r;
}

static int parse_int(const char *s, int64_t *out)
{
    if (!*s)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s)
        return -1;
    *out = v;
    return 0;
}

static int parse_float(const char *s, double *out)
{
    if (!*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int tb_parse_size(const char *s, uint64_t *bytes)
{
    if (!*s || *s == '-' || *s == '+')
        return -1;
    char *end;
    errno = 0;
    if (isdigit((unsigned char)*s)) {
        unsigned long long whole = strtoull(s, &end, 10);
        if (!errno && (!*end || ((*end == 'b' || *end == 'B') && !end[1]))) {
            *bytes = whole;
            return 0;
        }
        errno = 0;
    }
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0)
        return -1;
    double mul = 1;
    if (*end) {
        switch (toupper((unsigned char)*end)) {
        case 'K':
            mul = 1024.0;
            break;
        case 'M':
            mul = 1024.0 * 1024;
            break;
        case 'G':
            mul = 1024.0 * 1024 * 1024;
            break;
        case 'T':
            mul = 1024.0 * 1024 * 1024 * 1024;
            break;
        case 'B':
            mul = 1;
            end--; /* "B" alone: plain bytes */
            break;
        default:
            return -1;
        }
        end++;
        if (strcasecmp(end, "") != 0 && strcasecmp(end, "B") != 0 && strcasecmp(end, "iB") != 0)
            return -1;
    }
    double b = v * mul;
    if (b >= 18446744073709551616.0) /* 2^64 */
        return -1;
    *bytes = (uint64_t)llround(b);
    return 0;
}

void tb_format_size(uint64_t bytes, char *buf, size_t size)
{
    static const char suffix[] = "KMGT";
    int s = -1;
    while (s < 3 && bytes && bytes % 1024 == 0) {
        bytes /= 1024;
        s++;
    }
    if (s < 0)
        snprintf(buf, size, "%llu", (unsigned long long)bytes);
    else
        snprintf(buf, size, "%llu%c", (unsigned long long)bytes, suffix[s]);
}

static int parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = { "yes", "true", "on", "1" };
    static const char *const no[] = { "no", "false", "off", "0" };
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -1;
}

/* Index of name in "a|b|c" (case-insensitive), or -1. */
static int name_index(const char *allowed, const char *name)
{
    if (!allowed)
        return -1;
    size_t len = strlen(name);
    int idx = 0;
    for (const char *p = allowed;; idx++) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && strncasecmp(p, name, n) == 0)
            return idx;
        if (!bar)
            return -1;
        p = bar + 1;
    }
}

/* The idx-th name of "a|b|c", copied into buf. */
static void name_at(const char *allowed, int idx, char *buf, size_t size)
{
    const char *p = allowed;
    for (int i = 0; i < idx && p; i++) {
        p = strchr(p, '|');
        if (p)
            p++;
    }
    if (!p) {
        buf[0] = '\0';
        return;
    }
    const char *bar = strchr(p, '|');
    size_t n = bar ? (size_t)(bar - p) : strlen(p);
    if (n >= size)
        n = size - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
}

/* "a|b|c" -> "a, b, c" */
static void names_list(const char *allowed, char *buf, size_t size)
{
    size_t o = 0;
    for (const char *p = allowed; *p && o + 3 < size; p++) {
        if (*p == '|') {
            buf[o++] = ',';
            buf[o++] = ' ';
        } else {
            buf[o++] = *p;
        }
    }
    buf[o] = '\0';
}

/* Splits "lo..hi" into its two sides (either may be empty). -1 when there is no "..". */
static int split_range(const char *range, char *lo, char *hi, size_t size)
{
    const char *dots = strstr(range, "..");
    if (!dots)
        return -1;
    size_t n = (size_t)(dots - range);
    if (n >= size || strlen(dots + 2) >= size)
        return -1;
    memcpy(lo, range, n);
    lo[n] = '\0';
    strcpy(hi, dots + 2);
    return 0;
}

/* Parses one side of a range as the key's scalar type into a double, for comparison.
 * Empty side: *present = false. */
static int range_side(enum tb_key_type t, const char *text, double *out, bool *present)
{
    *present = *text != '\0';
    if (!*present)
        return 0;
    if (t == TB_KEY_INT) {
        int64_t v;
        if (parse_int(text, &v))
            return -1;
        *out = (double)v;
    } else if (t == TB_KEY_FLOAT) {
        if (parse_float(text, out))
            return -1;
    } else {
        uint64_t v;
        if (tb_parse_size(text, &v))
            return -1;
        *out = (double)v;
    }
    return 0;
}

static bool is_ranged(enum tb_key_type t)
{
    return t == TB_KEY_INT || t == TB_KEY_FLOAT || t == TB_KEY_SIZE;
}

void tb_key_describe(const struct tb_key *k, char *buf, size_t size)
{
    char names[512];
    char lo[64], hi[64];
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
        names_list(k->allowed ? k->allowed : "", names, sizeof names);
        snprintf(buf, size, "one of: %s", names);
        return;
    case TB_KEY_LIST:
        if (k->allowed) {
            names_list(k->allowed, names, sizeof names);
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
    }
    if (k->allowed && split_range(k->allowed, lo, hi, sizeof lo) == 0) {
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

void tb_value_free(struct tb_value *v)
{
    if (!v)
        return;
    free(v->text);
    for (size_t i = 0; i < v->nitems; i++)
        free(v->items[i]);
    free(v->items);
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
    if (!k->allowed || split_range(k->allowed, lo, hi, sizeof lo))
        return 0;
    double a, b;
    bool has_a, has_b;
    if (range_side(k->type, lo, &a, &has_a) || range_side(k->type, hi, &b, &has_b))
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
        char *item = trim_dup(raw);
        free(raw);
        if (!item)
            return TB_ERR_NOMEM;
        out->items[out->nitems++] = item;
        if (!*item) {
            return fail(why, why_size, k, "empty list item");
        }
        if (k->allowed) {
            int idx = name_index(k->allowed, item);
            if (idx < 0) {
                char problem[256];
                snprintf(problem, sizeof problem, "unknown item '%s'", item);
                return fail(why, why_size, k, problem);
            }
            /* The table's spelling, as for ENUM values. */
            name_at(k->allowed, idx, item, strlen(item) + 1);
        }
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

int tb_key_parse(const struct tb_key *k, const char *text, const char *base_dir, struct tb_value *out, char *why,
                 size_t why_size)
{
    memset(out, 0, sizeof *out);
    why[0] = '\0';
    char *t = trim_dup(text ? text : "");
    if (!t) {
        snprintf(why, why_size, "out of memory");
        return TB_ERR_NOMEM;
    }
    int rc = 0;
    switch (k->type) {
    case TB_KEY_INT:
        if (parse_int(t, &out->v.i))
            rc = fail(why, why_size, k, *t ? "not an integer" : "empty value");
        else {
            char lo[64], hi[64];
            int64_t a, b;
            if (k->allowed && split_range(k->allowed, lo, hi, sizeof lo) == 0 &&
                ((*lo && parse_int(lo, &a) == 0 && out->v.i < a) || (*hi && parse_int(hi, &b) == 0 && out->v.i > b)))
                rc = fail(why, why_size, k, "out of range");
        }
        break;
    case TB_KEY_FLOAT:
        if (parse_float(t, &out->v.f))
            rc = fail(why, why_size, k, *t ? "not a number" : "empty value");
        else
            rc = check_range(k, out->v.f, why, why_size);
        break;
    case TB_KEY_SIZE:
        if (tb_parse_size(t, &out->v.u))
            rc = fail(why, why_size, k, *t ? "not a size" : "empty value");
        else
            rc = check_range(k, (double)out->v.u, why, why_size);
        break;
    case TB_KEY_BOOL:
        if (parse_bool(t, &out->v.b))
            rc = fail(why, why_size, k, *t ? "not a yes/no value" : "empty value");
        break;
    case TB_KEY_ENUM: {
        int idx = name_index(k->allowed, t);
        if (idx < 0) {
            rc = fail(why, why_size, k, *t ? "not an allowed value" : "empty value");
        } else {
            char canon[256];
            name_at(k->allowed, idx, canon, sizeof canon);
            free(t);
            t = strdup(canon);
            out->v.e = idx;
            if (!t)
                rc = TB_ERR_NOMEM;
        }
        break;
    }
    case TB_KEY_STRING:
        break;
    case TB_KEY_PATH:
        if (*t && t[0] != '/' && base_dir && *base_dir && strcmp(base_dir, ".") != 0) {
            size_t n = strlen(base_dir) + strlen(t) + 2;
            char *joined = malloc(n);
            if (!joined) {
                rc = TB_ERR_NOMEM;
                break;
            }
            snprintf(joined, n, "%s/%s", base_dir, t[0] == '.' && t[1] == '/' ? t + 2 : t);
            free(t);
            t = joined;
        }
        break;
    case TB_KEY_LIST:
        rc = parse_list(k, t, out, why, why_size);
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
            if (split_range(k->allowed, lo, hi, sizeof lo) || range_side(k->type, lo, &a, &has_a) ||
                range_side(k->type, hi, &b, &has_b) || (has_a && has_b && a > b))
                rc = tb_err_add(err, TB_ERR_PLUGIN, "%s: key '%s' has a bad range '%s' (want lo..hi of its type)", who,
                                k->name, k->allowed);
        }
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
