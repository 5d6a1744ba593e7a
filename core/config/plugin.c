/* core/config/plugin.c: one plugin file: its descriptor checked, its vtable completed to
 * this core's size (loader.h), dlopened, closed; and instances of any kind
 * created and destroyed. Finding plugins by name or score is loader.c's. */
#include "config.h"
#include "core/config/loader.h"

#include "core/config/keys_internal.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/trainbig.h>
#include <unistd.h>

/* ------------------------------------------------------------------ the descriptor */

static bool valid_plugin_name(const char *s)
{
    if (!s || !*s)
        return false;
    for (; *s; s++)
        if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '_' || *s == '-' || *s == '.'))
            return false;
    return true;
}

/* What the core knows of each kind's vtable: its size at this core's ABI minor and the
 * members after the head it cannot do without (by offset; the head's create and destroy
 * are required of every kind). Required members are all of 2.0, so they lie within the
 * vtable of every plugin of this major; a member added by a later minor is optional. */
struct required_member {
    size_t offset;
    const char *name;
};
#define REQUIRED(type, member)          \
    {                                   \
        offsetof(type, member), #member \
    }
static const struct kind_vtable {
    size_t size;
    struct required_member required[6]; /* ended by a NULL name */
} kind_vtables[TB_KIND_LAST + 1] = {
    [TB_KIND_BACKEND] = { sizeof(struct tb_backend_ops), { { 0, NULL } } },
    [TB_KIND_PLATFORM] = { sizeof(struct tb_platform_ops), { REQUIRED(struct tb_platform_ops, link) } },
    [TB_KIND_MODEL] = { sizeof(struct tb_model_ops), { REQUIRED(struct tb_model_ops, build) } },
    [TB_KIND_DATASET] = { sizeof(struct tb_dataset_ops),
                          { REQUIRED(struct tb_dataset_ops, open_split), REQUIRED(struct tb_dataset_ops, count),
                            REQUIRED(struct tb_dataset_ops, sample_name), REQUIRED(struct tb_dataset_ops, load),
                            REQUIRED(struct tb_dataset_ops, classes) } },
    [TB_KIND_SWAP] = { sizeof(struct tb_swap_ops), { { 0, NULL } } },
};

/* A function pointer member of a vtable, read as bytes: the vtable's type is the kind's. */
static bool member_set(const void *vtable, size_t offset)
{
    void (*fn)(void);
    memcpy(&fn, (const char *)vtable + offset, sizeof fn);
    return fn != NULL;
}

static int check_ops(const struct tb_plugin *p, const char *path, struct tb_err *err)
{
    const char *missing = NULL;
    if (!p->ops.head->create || !p->ops.head->destroy)
        missing = "head.create/head.destroy";
    for (const struct required_member *m = kind_vtables[p->kind].required; !missing && m->name; m++)
        if (!member_set(p->ops.any, m->offset))
            missing = m->name;
    if (missing)
        return tb_err_set(err, TB_ERR_PLUGIN, "%s: %s plugin '%s' lacks a required member of its vtable (%s)", path,
                          tb_kind_name(p->kind), p->name, missing);
    return TB_OK;
}

static int check_descriptor(const struct tb_plugin *p, const char *path, int want_kind, struct tb_err *err)
{
    if (p->abi_major != TB_ABI_MAJOR || p->abi_minor > TB_ABI_MINOR)
        return tb_err_set(err, TB_ERR_PLUGIN,
                          "%s: built for plugin ABI %u.%u, but this trainbig has ABI %d.%d (it loads plugins of ABI "
                          "%d.0 to %d.%d): rebuild the plugin against this trainbig's SDK",
                          path, p->abi_major, p->abi_minor, TB_ABI_MAJOR, TB_ABI_MINOR, TB_ABI_MAJOR, TB_ABI_MAJOR,
                          TB_ABI_MINOR);
    if (!tb_kind_name(p->kind))
        return tb_err_set(err, TB_ERR_PLUGIN,
                          "%s: unknown plugin kind %d (known: backend, platform, model, dataset, swap)", path,
                          (int)p->kind);
    if (!valid_plugin_name(p->name))
        return tb_err_set(err, TB_ERR_PLUGIN, "%s: plugin name '%s' is not lower case [a-z0-9_.-]", path,
                          p->name ? p->name : "(null)");
    if (want_kind && p->kind != want_kind)
        return tb_err_set(err, TB_ERR_PLUGIN, "%s: is a %s plugin ('%s'), but [%s] needs a %s plugin", path,
                          tb_kind_name(p->kind), p->name, tb_kind_name(want_kind), tb_kind_name(want_kind));
    if (!p->version || !p->description || !p->ops.any)
        return tb_err_set(err, TB_ERR_PLUGIN, "%s: plugin '%s' has no %s", path, p->name,
                          !p->version       ? "version"
                          : !p->description ? "description"
                                            : "vtable");
    char who[PATH_MAX + 64];
    snprintf(who, sizeof who, "%s: plugin '%s'", path, p->name);
    struct tb_err table;
    tb_err_clear(&table);
    if (tb_keys_check_table(p->keys, who, &table)) {
        if (err)
            *err = table; /* every line of it, not one formatted line */
        return TB_ERR_PLUGIN;
    }
    return check_ops(p, path, err);
}

/* Where a kind's vtable grew within this major: a plugin built for an ABI minor below
 * `minor` has a vtable that ends at `end`. In order of minor within a kind; ended by kind 0. */
static const struct {
    int kind;
    uint32_t minor;
    size_t end;
} vtable_growth[] = {
    { TB_KIND_BACKEND, 2, offsetof(struct tb_backend_ops, dtypes) },
    { 0, 0, 0 },
};

size_t tb_vtable_size(int kind, uint32_t minor)
{
    if (kind < TB_KIND_FIRST || kind > TB_KIND_LAST)
        return 0;
    for (size_t i = 0; vtable_growth[i].kind; i++)
        if (vtable_growth[i].kind == kind && minor < vtable_growth[i].minor)
            return vtable_growth[i].end;
    return kind_vtables[kind].size;
}

int tb_plugin_adopt(const struct tb_plugin *p, const char *path, int want_kind, struct tb_plugin_handle **out,
                    struct tb_err *err)
{
    *out = NULL;
    int rc = check_descriptor(p, path, want_kind, err);
    if (rc)
        return rc;
    struct tb_plugin_handle *h = calloc(1, sizeof *h);
    if (!h || !(h->path = strdup(path))) {
        free(h);
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    }
    /* Only what the plugin's minor had is read from it: the rest of its struct is not its. */
    memcpy(&h->vtable, p->ops.any, tb_vtable_size(p->kind, p->abi_minor));
    h->desc = *p;
    h->desc.ops.any = &h->vtable;
    h->p = &h->desc;
    *out = h;
    return TB_OK;
}

int tb_plugin_open(const char *path, int want_kind, struct tb_plugin_handle **out, struct tb_err *err)
{
    *out = NULL;
    /* dlopen searches the library path for a bare name: make the path explicit. */
    char file[PATH_MAX];
    snprintf(file, sizeof file, "%s%s", strchr(path, '/') ? "" : "./", path);
    if (access(file, F_OK) != 0)
        return tb_err_set(err, TB_ERR_PLUGIN, "%s: no such plugin file (%s)", file, strerror(errno));
    /* dlopen would block on a FIFO and read a device without end. */
    if (tb_check_regular(file, "the plugin", TB_ERR_PLUGIN, err))
        return err->status;
    dlerror();
    /* Never unmapped (RTLD_NODELETE): closing a handle only drops it. Libraries a plugin
     * links, such as the CUDA runtime, cuDNN and cuBLAS, keep process-wide state that does
     * not survive being unloaded and loaded again (`auto` loads a backend to score it, then
     * again to use it). */
#ifdef RTLD_NODELETE
    void *dl = dlopen(file, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
#else
    void *dl = dlopen(file, RTLD_NOW | RTLD_LOCAL);
#endif
    if (!dl) {
        const char *why = dlerror();
        return tb_err_set(err, TB_ERR_PLUGIN, "%s: cannot load the plugin: %s", file, why ? why : "dlopen failed");
    }
    const struct tb_plugin *p = dlsym(dl, TB_PLUGIN_ENTRY);
    if (!p) {
        dlclose(dl);
        return tb_err_set(err, TB_ERR_PLUGIN, "%s: not a trainbig plugin: it does not export the symbol '%s'", file,
                          TB_PLUGIN_ENTRY);
    }
    int rc = tb_plugin_adopt(p, file, want_kind, out, err);
    if (rc) {
        dlclose(dl);
        return rc;
    }
    (*out)->dl = dl;
    return TB_OK;
}

int tb_plugin_create(const struct tb_plugin *p, const struct tb_section *sec, void **ctx, struct tb_err *err)
{
    *ctx = NULL;
    int rc = p->ops.head->create(sec, ctx, err);
    if (rc)
        *ctx = NULL; /* a failed create frees what it made */
    return rc;
}

int tb_dataset_open(const struct tb_plugin *p, const struct tb_section *sec, const char *split, void **ctx,
                    struct tb_err *err)
{
    int rc = tb_plugin_create(p, sec, ctx, err);
    if (rc)
        return rc;
    rc = p->ops.dataset->open_split(*ctx, split, err);
    if (rc) {
        tb_plugin_destroy(p, *ctx);
        *ctx = NULL;
    }
    return rc;
}

void tb_plugin_destroy(const struct tb_plugin *p, void *ctx)
{
    if (ctx)
        p->ops.head->destroy(ctx);
}

void tb_plugin_close(struct tb_plugin_handle *h)
{
    if (!h)
        return;
    if (h->dl)
        dlclose(h->dl);
    free(h->path);
    free(h);
}
