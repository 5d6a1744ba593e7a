/* config.c: reads an INI file with iniparser, and keeps each value's origin.
 *
 * iniparser gives values but no line numbers, and it silently keeps the last of two
 * assignments to one key. A light scan of the file first finds each key's line and
 * reports what iniparser would let through: stray lines, keys before any section, keys
 * set twice. */
#include "config.h"

#include "core/config/ini.h"
#include "core/config/keys_internal.h"

#include <ctype.h>
#include <errno.h>
#include <iniparser.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <trainbig/file.h>

#define LINE_MAX_CHARS 1000 /* iniparser's own limit is 1024 bytes a line */

static char *xstrdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void lower(char *s)
{
    for (; s && *s; s++)
        *s = (char)tolower((unsigned char)*s);
}

static int add_section(struct tb_config *c, const char *name, int line, const char *set_arg)
{
    for (size_t i = 0; i < c->nsections; i++)
        if (strcmp(c->sections[i].name, name) == 0)
            return 0;
    if (c->nsections == c->seccap) {
        size_t cap = c->seccap ? 2 * c->seccap : 8;
        void *p = realloc(c->sections, cap * sizeof *c->sections);
        if (!p)
            return TB_ERR_NOMEM;
        c->sections = p;
        c->seccap = cap;
    }
    struct tb_config_section *s = &c->sections[c->nsections];
    s->name = strdup(name);
    s->line = line;
    s->set_arg = xstrdup(set_arg);
    if (!s->name || (set_arg && !s->set_arg)) {
        free(s->name);
        free(s->set_arg);
        return TB_ERR_NOMEM;
    }
    c->nsections++;
    return 0;
}

static struct tb_entry *add_entry(struct tb_config *c, const char *section, const char *key)
{
    if (c->nentries == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        void *p = realloc(c->entries, cap * sizeof *c->entries);
        if (!p)
            return NULL;
        c->entries = p;
        c->cap = cap;
    }
    struct tb_entry *e = &c->entries[c->nentries];
    memset(e, 0, sizeof *e);
    e->section = strdup(section);
    e->key = strdup(key);
    if (!e->section || !e->key) {
        free(e->section);
        free(e->key);
        return NULL;
    }
    c->nentries++;
    return e;
}

struct tb_entry *tb_config_find(const struct tb_config *c, const char *section, const char *key)
{
    for (size_t i = 0; i < c->nentries; i++)
        if (strcmp(c->entries[i].section, section) == 0 && strcmp(c->entries[i].key, key) == 0)
            return &c->entries[i];
    return NULL;
}

/* Pass 1: lines of keys and sections, and the syntax iniparser would accept silently. */
/* The key of line `lineno` (s, its '=' at eq) in `section` (NULL: before any header):
 * recorded where it came from, or an error in err (TB_ERR_NOMEM alone stops the reading). */
static int scan_key(struct tb_config *c, const char *section, const char *s, const char *eq, int lineno,
                    struct tb_err *err)
{
    char *key = tb_trim_ndup(s, (size_t)(eq - s));
    if (!key)
        return TB_ERR_NOMEM;
    lower(key);
    int rc = TB_OK;
    if (!*key) {
        rc = tb_err_add(err, TB_ERR_CONFIG, "%s:%d: '%s' has no key before '='", c->path, lineno, s);
    } else if (!section) {
        rc = tb_err_add(err, TB_ERR_CONFIG, "%s:%d: key '%s' comes before any [section] header", c->path, lineno, key);
    } else {
        struct tb_entry *prev = tb_config_find(c, section, key);
        if (prev) {
            rc = tb_err_add(err, TB_ERR_CONFIG, "%s:%d: [%s] %s is set twice (lines %d and %d); keep one", c->path,
                            lineno, section, key, prev->line, lineno);
        } else {
            struct tb_entry *e = add_entry(c, section, key);
            if (!e) {
                rc = TB_ERR_NOMEM;
            } else {
                e->origin = TB_ORIGIN_FILE;
                e->line = lineno;
            }
        }
    }
    free(key);
    return rc;
}

/* A value that opens a quote must close it on its line: the INI reader would take
 * `name = "abc` as if it were closed. A comment may follow the closing quote. */
static int check_quotes(const struct tb_config *c, const char *value, int lineno, struct tb_err *err)
{
    while (isspace((unsigned char)*value))
        value++;
    const char q = *value;
    if ((q != '"' && q != '\'') || strchr(value + 1, q))
        return TB_OK;
    return tb_err_add(err, TB_ERR_CONFIG, "%s:%d: the value %s opens a quote (%c) that is not closed on its line",
                      c->path, lineno, value, q);
}

/* A section header s at lineno: *section becomes its name, lower case (the caller's to
 * free), and the section is added. A header without ']' is an error naming the line that
 * keeps *section; an empty name '[]' is one that leaves it empty; NULL: out of memory. */
static int scan_section(struct tb_config *c, const char *s, int lineno, char **section, struct tb_err *err)
{
    const char *close = strchr(s, ']');
    if (!close)
        return tb_err_add(err, TB_ERR_CONFIG, "%s:%d: section header '%s' has no closing ']'", c->path, lineno, s);
    free(*section);
    *section = tb_trim_ndup(s + 1, (size_t)(close - s - 1));
    if (!*section)
        return TB_ERR_NOMEM;
    lower(*section);
    if (!**section)
        return tb_err_add(err, TB_ERR_CONFIG, "%s:%d: empty section name '[]'", c->path, lineno);
    return add_section(c, *section, lineno, NULL) ? TB_ERR_NOMEM : TB_OK;
}

static int scan_lines(struct tb_config *c, FILE *f, struct tb_err *err)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0, rc = TB_OK;
    char *section = NULL;
    bool continued = false;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (strlen(line) != (size_t)len) {
            rc = tb_err_add(err, TB_ERR_CONFIG, "%s:%d: the line holds a NUL byte: a configuration is a text file",
                            c->path, lineno);
            continue;
        }
        if (lineno == 1 && (unsigned char)line[0] == 0xEF && (unsigned char)line[1] == 0xBB &&
            (unsigned char)line[2] == 0xBF) {
            rc = tb_err_add(err, TB_ERR_CONFIG,
                            "%s:1: the file starts with a UTF-8 byte-order mark (EF BB BF), which the INI reader "
                            "takes for text; save it as UTF-8 without BOM",
                            c->path);
            memmove(line, line + 3, (size_t)len - 2); /* read on, so the rest is checked too */
            len -= 3;
        }
        if (len > LINE_MAX_CHARS) {
            rc = tb_err_add(err, TB_ERR_CONFIG, "%s:%d: line is longer than %d characters", c->path, lineno,
                            LINE_MAX_CHARS);
            continue;
        }
        bool was_continued = continued;
        continued = len && line[len - 1] == '\\';
        if (was_continued)
            continue; /* the rest of a value that ended in a backslash */
        const char *s = line;
        while (isspace((unsigned char)*s))
            s++;
        if (!*s || *s == ';' || *s == '#')
            continue;
        if (*s == '[') {
            const int r = scan_section(c, s, lineno, &section, err);
            if (r)
                rc = r;
            if (r == TB_ERR_NOMEM)
                break;
            continue;
        }
        const char *eq = strchr(s, '=');
        if (!eq) {
            rc = tb_err_add(err, TB_ERR_CONFIG, "%s:%d: '%s' is neither a [section] header nor key = value", c->path,
                            lineno, s);
            continue;
        }
        int r = continued ? TB_OK : check_quotes(c, eq + 1, lineno, err);
        if (!r)
            r = scan_key(c, section, s, eq, lineno, err);
        if (r == TB_ERR_NOMEM) {
            rc = r;
            break;
        }
        if (r)
            rc = r;
    }
    free(section);
    free(line);
    if (rc == TB_ERR_NOMEM)
        return tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory while reading", c->path);
    return rc;
}

/* iniparser reports through a printf-like callback without user data. */
static _Thread_local char iniparser_message[512];

static int capture_iniparser_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t used = strlen(iniparser_message);
    if (used < sizeof iniparser_message - 1)
        vsnprintf(iniparser_message + used, sizeof iniparser_message - used, fmt, ap);
    va_end(ap);
    return 0;
}

/* Pass 2: the values, as iniparser reads them. */
static int read_values(struct tb_config *c, struct tb_err *err)
{
    iniparser_message[0] = '\0';
    iniparser_set_error_callback(capture_iniparser_error);
    dictionary *d = iniparser_load(c->path);
    iniparser_set_error_callback(NULL);
    if (!d) {
        for (char *p = iniparser_message; *p; p++)
            if (*p == '\n')
                *p = ' ';
        return tb_err_set(err, TB_ERR_CONFIG, "%s: cannot parse: %s", c->path,
                          *iniparser_message ? iniparser_message : "iniparser failed");
    }
    int rc = TB_OK;
    for (size_t i = 0; i < c->nentries; i++) {
        struct tb_entry *e = &c->entries[i];
        size_t n = strlen(e->section) + strlen(e->key) + 2;
        char *full = malloc(n);
        if (!full) {
            rc = TB_ERR_NOMEM;
            break;
        }
        snprintf(full, n, "%s:%s", e->section, e->key);
        const char *v = iniparser_getstring(d, full, NULL);
        free(full);
        e->value = strdup(v ? v : "");
        if (!e->value) {
            rc = TB_ERR_NOMEM;
            break;
        }
    }
    iniparser_freedict(d);
    if (rc)
        return tb_err_set(err, rc, "%s: out of memory while reading", c->path);
    return TB_OK;
}

int tb_config_load(const char *path, struct tb_config **out, struct tb_err *err)
{
    *out = NULL;
    FILE *f = tb_fopen_regular(path, "the configuration", TB_ERR_CONFIG, err);
    if (!f)
        return err->status;
    struct tb_config *c = calloc(1, sizeof *c);
    if (!c) {
        fclose(f);
        return tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory", path);
    }
    c->path = strdup(path);
    /* Absolute, so that paths resolved against it stay right whatever the working
     * directory of whoever reads them later (the printed effective configuration). */
    const char *slash = strrchr(path, '/');
    char *dir = slash ? tb_trim_ndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    c->dir = dir ? realpath(dir, NULL) : NULL;
    if (dir && !c->dir)
        c->dir = dir;
    else
        free(dir);
    if (!c->path || !c->dir) {
        fclose(f);
        tb_config_free(c);
        return tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory", path);
    }
    tb_err_clear(err);
    int rc = scan_lines(c, f, err);
    fclose(f);
    if (rc == TB_OK)
        rc = read_values(c, err);
    if (rc) {
        tb_config_free(c);
        return rc;
    }
    *out = c;
    return TB_OK;
}

struct tb_config *tb_config_new(const char *label)
{
    struct tb_config *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->path = strdup(label);
    c->dir = realpath(".", NULL);
    if (!c->path || !c->dir) {
        tb_config_free(c);
        return NULL;
    }
    return c;
}

static bool valid_name(const char *s, bool allow_dash)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_' || (allow_dash && *s == '-')))
            return false;
    return true;
}

int tb_config_set(struct tb_config *c, const char *arg, struct tb_err *err)
{
    const char *dot = strchr(arg, '.');
    const char *eq = strchr(arg, '=');
    if (!dot || !eq || dot > eq)
        return tb_err_set(err, TB_ERR_CONFIG,
                          "%s: --set %s: expected section.key=value (for example --set train.batch=4)", c->path, arg);
    char *section = tb_trim_ndup(arg, (size_t)(dot - arg));
    char *key = tb_trim_ndup(dot + 1, (size_t)(eq - dot - 1));
    char *value = tb_trim_ndup(eq + 1, strlen(eq + 1));
    char *set_arg = strdup(arg);
    int rc = TB_OK;
    if (!section || !key || !value || !set_arg) {
        rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        goto out;
    }
    lower(section);
    lower(key);
    if (!valid_name(section, true) || !valid_name(key, false)) {
        rc = tb_err_set(err, TB_ERR_CONFIG,
                        "%s: --set %s: section and key must be names ([a-z0-9_-]), as in --set train.batch=4", c->path,
                        arg);
        goto out;
    }
    /* iniparser strips one pair of surrounding quotes from file values; do the same. */
    size_t vn = strlen(value);
    if (vn >= 2 && (value[0] == '"' || value[0] == '\'') && value[vn - 1] == value[0]) {
        memmove(value, value + 1, vn - 2);
        value[vn - 2] = '\0';
    }
    if (add_section(c, section, 0, arg)) {
        rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        goto out;
    }
    struct tb_entry *e = tb_config_find(c, section, key);
    if (!e)
        e = add_entry(c, section, key);
    if (!e) {
        rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        goto out;
    }
    free(e->value);
    free(e->set_arg);
    e->value = value;
    e->set_arg = set_arg;
    e->origin = TB_ORIGIN_SET;
    value = set_arg = NULL;
out:
    free(section);
    free(key);
    free(value);
    free(set_arg);
    return rc;
}

void tb_config_where(const struct tb_config *c, const struct tb_entry *e, char *buf, size_t size)
{
    if (e && e->origin == TB_ORIGIN_SET)
        snprintf(buf, size, "%s: --set %s", c->path, e->set_arg);
    else if (e && e->line > 0)
        snprintf(buf, size, "%s:%d", c->path, e->line);
    else
        snprintf(buf, size, "%s", c->path);
}

char *tb_set_origin(const char *set_arg)
{
    size_t n = strlen(set_arg) + sizeof "--set ";
    char *o = malloc(n);
    if (o)
        snprintf(o, n, "--set %s", set_arg);
    return o;
}

void tb_config_section_where(const struct tb_config *c, const struct tb_config_section *s, char *buf, size_t size)
{
    if (s->line > 0)
        snprintf(buf, size, "%s:%d", c->path, s->line);
    else if (s->set_arg)
        snprintf(buf, size, "%s: --set %s", c->path, s->set_arg);
    else
        snprintf(buf, size, "%s", c->path);
}

void tb_config_free(struct tb_config *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nentries; i++) {
        free(c->entries[i].section);
        free(c->entries[i].key);
        free(c->entries[i].value);
        free(c->entries[i].set_arg);
    }
    for (size_t i = 0; i < c->nsections; i++) {
        free(c->sections[i].name);
        free(c->sections[i].set_arg);
    }
    free(c->entries);
    free(c->sections);
    free(c->path);
    free(c->dir);
    free(c);
}

void tb_config_drop_section(struct tb_config *c, const char *section, bool (*keep)(const char *key, void *arg),
                            void *arg)
{
    size_t kept = 0;
    for (size_t i = 0; i < c->nentries; i++) {
        struct tb_entry *e = &c->entries[i];
        if (strcmp(e->section, section) == 0 && !(keep && keep(e->key, arg))) {
            free(e->section);
            free(e->key);
            free(e->value);
            free(e->set_arg);
        } else {
            c->entries[kept++] = *e;
        }
    }
    c->nentries = kept;
}
