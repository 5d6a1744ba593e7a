/* loader.c: finds plugins: the directories searched, a plugin by name, the best scored
 * for `auto`, and every plugin for `trainbig plugins` (one file is plugin.c's). */
#include "config.h"
#include "core/config/loader.h"

#include "core/config/keys.h"

#include <stddef.h>
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/trainbig.h>
#include <unistd.h>

#ifndef TB_BUILD_LIBDIR
#error "TB_BUILD_LIBDIR (the build tree's core/.libs) must be defined by the build"
#endif
#ifndef TB_BUILD_PLUGIN_DIRS
#error "TB_BUILD_PLUGIN_DIRS must be defined by the build"
#endif
#ifndef TB_PLUGINSDIR
#error "TB_PLUGINSDIR must be defined by the build"
#endif

/* ------------------------------------------------------------------ directories */

static int push_dir(struct tb_dirs *d, const char *dir, size_t n)
{
    if (n == 0)
        return 0;
    char *s = strndup(dir, n);
    if (!s)
        return TB_ERR_NOMEM;
    for (size_t i = 0; i < d->n; i++) {
        if (strcmp(d->dir[i], s) == 0) {
            free(s);
            return 0;
        }
    }
    char **p = realloc(d->dir, (d->n + 1) * sizeof *p);
    if (!p) {
        free(s);
        return TB_ERR_NOMEM;
    }
    d->dir = p;
    d->dir[d->n++] = s;
    return 0;
}

static int push_dir_list(struct tb_dirs *d, const char *list)
{
    for (const char *p = list; p && *p;) {
        const char *colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        if (push_dir(d, p, n))
            return TB_ERR_NOMEM;
        p = colon ? colon + 1 : NULL;
    }
    return 0;
}

/* The directory libtrainbig was loaded from, resolved, or "" when unknown. */
static void library_dir(char *buf, size_t size)
{
    Dl_info info;
    char real[PATH_MAX];
    buf[0] = '\0';
    if (!dladdr((void *)&tb_plugin_dirs, &info) || !info.dli_fname || !realpath(info.dli_fname, real))
        return;
    char *slash = strrchr(real, '/');
    if (slash)
        *slash = '\0';
    snprintf(buf, size, "%s", real);
}

int tb_plugin_dirs(struct tb_dirs *out)
{
    out->dir = NULL;
    out->n = 0;
    if (push_dir_list(out, getenv("TRAINBIG_PLUGIN_PATH")))
        goto nomem;
    char libdir[PATH_MAX], build[PATH_MAX];
    library_dir(libdir, sizeof libdir);
    if (*libdir && realpath(TB_BUILD_LIBDIR, build) && strcmp(libdir, build) == 0) {
        if (push_dir_list(out, TB_BUILD_PLUGIN_DIRS) || push_dir_list(out, TB_PLUGINSDIR))
            goto nomem;
    } else if (*libdir) {
        char dir[PATH_MAX + 32];
        snprintf(dir, sizeof dir, "%s/trainbig/plugins", libdir);
        if (push_dir(out, dir, strlen(dir)))
            goto nomem;
    } else if (push_dir_list(out, TB_PLUGINSDIR)) {
        goto nomem;
    }
    return 0;
nomem:
    tb_dirs_free(out);
    return TB_ERR_NOMEM;
}

void tb_dirs_free(struct tb_dirs *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->dir[i]);
    free(d->dir);
    d->dir = NULL;
    d->n = 0;
}

const char *tb_dirs_text(const struct tb_dirs *d)
{
    static _Thread_local char buf[4096];
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < d->n && o < sizeof buf; i++)
        o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", i ? ":" : "", d->dir[i]);
    if (d->n == 0)
        snprintf(buf, sizeof buf, "(no directories)");
    return buf;
}

/* ------------------------------------------------------------------ by name */

/* Calls fn(dir, file name, plugin name) for every "<kind>-<name>.so" in dir (any
 * "*.so" when kind is 0, with plugin name NULL), in name order. */
typedef int (*visit_fn)(const char *dir, const char *file, const char *name, void *arg);

static int visit_dir(const char *dir, int kind, visit_fn fn, void *arg)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0)
        return 0; /* a missing directory is not an error: the search goes on */
    char prefix[32] = "";
    if (kind)
        snprintf(prefix, sizeof prefix, "%s-", tb_kind_name(kind));
    int rc = 0;
    for (int i = 0; i < n; i++) {
        const char *f = names[i]->d_name;
        size_t len = strlen(f);
        if (rc == 0 && len > 3 && strcmp(f + len - 3, ".so") == 0 && strncmp(f, prefix, strlen(prefix)) == 0) {
            char name[256];
            size_t nl = len - 3 - strlen(prefix);
            if (nl < sizeof name) {
                memcpy(name, f + strlen(prefix), nl);
                name[nl] = '\0';
                rc = fn(dir, f, kind ? name : NULL, arg);
            }
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

struct names {
    char **v;
    size_t n;
};

static int collect_name(const char *dir, const char *file, const char *name, void *arg)
{
    (void)dir;
    (void)file;
    struct names *ns = arg;
    for (size_t i = 0; i < ns->n; i++)
        if (strcmp(ns->v[i], name) == 0)
            return 0;
    char **p = realloc(ns->v, (ns->n + 1) * sizeof *p);
    if (!p)
        return TB_ERR_NOMEM;
    ns->v = p;
    if (!(ns->v[ns->n] = strdup(name)))
        return TB_ERR_NOMEM;
    ns->n++;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int tb_plugin_find(int kind, const char *name, struct tb_plugin_handle **out, struct tb_err *err)
{
    *out = NULL;
    struct tb_dirs dirs;
    if (tb_plugin_dirs(&dirs))
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    int rc = TB_OK;
    for (size_t i = 0; i < dirs.n; i++) {
        char file[PATH_MAX];
        snprintf(file, sizeof file, "%s/%s-%s.so", dirs.dir[i], tb_kind_name(kind), name);
        if (access(file, F_OK) != 0)
            continue;
        rc = tb_plugin_open(file, kind, out, err);
        if (rc == TB_OK && strcmp((*out)->p->name, name) != 0) {
            rc = tb_err_set(err, TB_ERR_PLUGIN, "%s: the file is named for '%s' but the plugin calls itself '%s'", file,
                            name, (*out)->p->name);
            tb_plugin_close(*out);
            *out = NULL;
        }
        tb_dirs_free(&dirs);
        return rc;
    }
    struct names avail = { 0 };
    for (size_t i = 0; i < dirs.n; i++)
        visit_dir(dirs.dir[i], kind, collect_name, &avail);
    qsort(avail.v, avail.n, sizeof *avail.v, cmp_str);
    char list[1024] = "";
    size_t o = 0;
    for (size_t i = 0; i < avail.n && o < sizeof list; i++)
        o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", i ? ", " : "", avail.v[i]);
    const char *near = tb_nearest(name, (const char *const *)avail.v, avail.n);
    char hint[300] = "";
    if (near && strcmp(near, name) != 0)
        snprintf(hint, sizeof hint, "did you mean '%s'? ", near);
    rc = tb_err_set(err, TB_ERR_PLUGIN, "no %s plugin named '%s'; %savailable %s plugins: %s (searched %s)",
                    tb_kind_name(kind), name, hint, tb_kind_name(kind), avail.n ? list : "none", tb_dirs_text(&dirs));
    for (size_t i = 0; i < avail.n; i++)
        free(avail.v[i]);
    free(avail.v);
    tb_dirs_free(&dirs);
    return rc;
}

/* ------------------------------------------------------------------ auto */

static tb_score_fn score_of(const struct tb_plugin *p)
{
    return p->ops.head->score;
}

struct auto_state {
    int kind;
    struct names seen;
    struct tb_plugin_handle *best;
    int best_score;
    char *why;
    size_t why_size;
    char others[2048];
    int unlisted; /* candidates others had no room for: counted, never dropped unsaid */
    char chosen[512];
};

/* Appends one candidate's line to st->others, or counts it where it does not fit. */
static void add_other(struct auto_state *st, const char *line)
{
    size_t o = strlen(st->others);
    if (o + 2 + strlen(line) + sizeof ", and 2147483647 more" >= sizeof st->others)
        st->unlisted++;
    else
        snprintf(st->others + o, sizeof st->others - o, "%s%s", o ? ", " : "", line);
}

/* st->others, with the count of those it had no room for. */
static const char *others_text(struct auto_state *st)
{
    if (st->unlisted) {
        size_t o = strlen(st->others);
        snprintf(st->others + o, sizeof st->others - o, ", and %d more", st->unlisted);
        st->unlisted = 0;
    }
    return st->others;
}

static int consider(const char *dir, const char *file, const char *name, void *arg)
{
    struct auto_state *st = arg;
    for (size_t i = 0; i < st->seen.n; i++)
        if (strcmp(st->seen.v[i], name) == 0)
            return 0; /* shadowed by an earlier directory */
    if (collect_name(dir, file, name, &st->seen))
        return TB_ERR_NOMEM;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    struct tb_plugin_handle *h;
    struct tb_err err;
    tb_err_clear(&err);
    char line[600];
    if (tb_plugin_open(path, st->kind, &h, &err)) {
        tb_log(TB_LOG_WARN, "skipping %s plugin candidate: %s", tb_kind_name(st->kind), err.msg);
        snprintf(line, sizeof line, "%s (refused)", name);
    } else if (!score_of(h->p)) {
        snprintf(line, sizeof line, "%s (no score(): chosen only by name)", name);
        tb_plugin_close(h);
    } else {
        char why[256] = "";
        int s = score_of(h->p)(why, sizeof why);
        if (s < 0)
            s = 0;
        if (s > st->best_score) {
            if (st->best) {
                add_other(st, st->chosen);
                tb_plugin_close(st->best);
            }
            st->best = h;
            st->best_score = s;
            snprintf(st->chosen, sizeof st->chosen, "%s %d (%s)", name, s, why);
            return 0;
        }
        snprintf(line, sizeof line, "%s %d (%s)", name, s, why);
        tb_plugin_close(h);
    }
    add_other(st, line);
    return 0;
}

int tb_plugin_auto(int kind, struct tb_plugin_handle **out, char *why, size_t why_size, struct tb_err *err)
{
    *out = NULL;
    struct tb_dirs dirs;
    if (tb_plugin_dirs(&dirs))
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    struct auto_state st = { .kind = kind };
    int rc = TB_OK;
    for (size_t i = 0; i < dirs.n && rc == TB_OK; i++)
        rc = visit_dir(dirs.dir[i], kind, consider, &st);
    if (rc == TB_OK && st.best) {
        const char *others = others_text(&st);
        snprintf(why, why_size, "chose '%s' with score %s%s%s", st.best->p->name, strchr(st.chosen, ' ') + 1,
                 *others ? "; other candidates: " : "", others);
        *out = st.best;
    } else if (rc == TB_OK) {
        rc = tb_err_set(err, TB_ERR_PLUGIN,
                        "no usable %s plugin for 'auto': name one with plugin = NAME (candidates: %s; searched %s)",
                        tb_kind_name(kind), *st.others ? others_text(&st) : "none", tb_dirs_text(&dirs));
    } else {
        tb_plugin_close(st.best);
        rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < st.seen.n; i++)
        free(st.seen.v[i]);
    free(st.seen.v);
    tb_dirs_free(&dirs);
    return rc;
}

/* ------------------------------------------------------------------ listing */

struct list_state {
    struct tb_plugin_list *l;
    struct names files; /* file names seen: the first of a name is what lookup finds */
};

static int add_note(struct tb_plugin_list *l, const char *fmt, const char *a, const char *b)
{
    char buf[TB_ERR_MSG_MAX + 256];
    snprintf(buf, sizeof buf, fmt, a, b);
    char **p = realloc(l->notes, (l->nnotes + 1) * sizeof *p);
    if (!p)
        return TB_ERR_NOMEM;
    l->notes = p;
    if (!(l->notes[l->nnotes] = strdup(buf)))
        return TB_ERR_NOMEM;
    l->nnotes++;
    return 0;
}

static int list_one(const char *dir, const char *file, const char *unused, void *arg)
{
    (void)unused;
    struct list_state *st = arg;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    /* Lookup by name takes the first file of a name, refused or not: so does the list. */
    for (size_t i = 0; i < st->files.n; i++)
        if (strcmp(strrchr(st->files.v[i], '/') + 1, file) == 0)
            return add_note(st->l, "shadowed: %s (by %s)", path, st->files.v[i]);
    if (collect_name(dir, file, path, &st->files))
        return TB_ERR_NOMEM;
    struct tb_plugin_handle *h;
    struct tb_err err;
    tb_err_clear(&err);
    if (tb_plugin_open(path, 0, &h, &err))
        return add_note(st->l, "refused: %s%s", err.msg, "");
    char expect[300];
    snprintf(expect, sizeof expect, "%s-%s.so", tb_kind_name(h->p->kind), h->p->name);
    if (strcmp(file, expect) != 0) {
        char why[PATH_MAX + 400];
        snprintf(why, sizeof why, "%s: not found by name: rename it to %s", path, expect);
        tb_plugin_close(h);
        return add_note(st->l, "%s%s", why, "");
    }
    struct tb_plugin_handle **p = realloc(st->l->items, (st->l->n + 1) * sizeof *p);
    if (!p) {
        tb_plugin_close(h);
        return TB_ERR_NOMEM;
    }
    st->l->items = p;
    st->l->items[st->l->n++] = h;
    return 0;
}

int tb_plugin_list(int kind, struct tb_plugin_list *out)
{
    memset(out, 0, sizeof *out);
    struct tb_dirs dirs;
    if (tb_plugin_dirs(&dirs))
        return TB_ERR_NOMEM;
    struct list_state st = { out, { 0 } };
    int rc = 0;
    /* With a kind, only the files named for it: lookup by name finds no other, and opening
     * every plugin would load each backend's libraries (CUDA's take tens of ms) for a
     * listing that setup asks for on every resolve. */
    for (size_t i = 0; i < dirs.n && rc == 0; i++)
        rc = visit_dir(dirs.dir[i], kind, list_one, &st);
    tb_dirs_free(&dirs);
    for (size_t i = 0; i < st.files.n; i++)
        free(st.files.v[i]);
    free(st.files.v);
    if (rc) {
        tb_plugin_list_free(out);
        return TB_ERR_NOMEM;
    }
    return 0;
}

void tb_plugin_list_free(struct tb_plugin_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        tb_plugin_close(l->items[i]);
    for (size_t i = 0; i < l->nnotes; i++)
        free(l->notes[i]);
    free(l->items);
    free(l->notes);
    memset(l, 0, sizeof *l);
}
