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

/* The vtable members a kind cannot do without. */
static int check_ops(const struct tb_plugin *p, const char *path, struct tb_err *err)
{
    const char *missing = NULL;
    switch (p->kind) {
    case TB_KIND_BACKEND:
        if (!p->ops.backend->create || !p->ops.backend->destroy)
            missing = "create/destroy";
        break;
    case TB_KIND_PLATFORM:
        if (!p->ops.platform->create || !p->ops.platform->destroy || !p->ops.platform->link)
            missing = "create/destroy/link";
        break;
    case TB_KIND_MODEL:
        if (!p->ops.model->create || !p->ops.model->destroy)
            missing = "create/destroy";
        break;
    case TB_KIND_DATASET: {
        const struct tb_dataset_ops *o = p->ops.dataset;
        if (!o->open || !o->close || !o->count || !o->sample_name || !o->load || !o->classes)
            missing = "open/close/count/sample_name/load/classes";
        break;
    }
    case TB_KIND_SWAP:
        if (!p->ops.swap->create || !p->ops.swap->destroy)
            missing = "create/destroy";
        break;
    }
    if (missing)
        return tb_err_set(err, TB_ERR_PLUGIN, "%s: %s plugin '%s' lacks required members of its vtable (%s)", path,
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

/* Where each kind's vtable grew: a plugin built for an ABI minor below `minor` has a
 * vtable that ends at `end`. In order of minor within a kind. */
static const struct {
    int kind;
    uint32_t minor;
    size_t end;
} vtable_growth[] = {
    { TB_KIND_BACKEND, 1, offsetof(struct tb_backend_ops, device_count) },
    { TB_KIND_BACKEND, 4, offsetof(struct tb_backend_ops, alloc_failed_bytes) },
    { TB_KIND_BACKEND, 6, offsetof(struct tb_backend_ops, comm_attach) },
    { TB_KIND_BACKEND, 7, offsetof(struct tb_backend_ops, op_describe) },
    { TB_KIND_BACKEND, 11, offsetof(struct tb_backend_ops, op_recompute) },
    { TB_KIND_BACKEND, 12, offsetof(struct tb_backend_ops, mem_blocks) },
    { TB_KIND_BACKEND, 14, offsetof(struct tb_backend_ops, now) },
    { TB_KIND_BACKEND, 16, offsetof(struct tb_backend_ops, op_scratch_bytes) },
    { TB_KIND_PLATFORM, 4, offsetof(struct tb_platform_ops, env_defaults) },
    { TB_KIND_PLATFORM, 5, offsetof(struct tb_platform_ops, swap_defaults) },
    { TB_KIND_PLATFORM, 13, offsetof(struct tb_platform_ops, accel) },
    { TB_KIND_MODEL, 2, offsetof(struct tb_model_ops, build) },
    { TB_KIND_MODEL, 8, offsetof(struct tb_model_ops, prepare) },
    { TB_KIND_SWAP, 4, offsetof(struct tb_swap_ops, plan) },
};

static size_t vtable_full_size(int kind)
{
    switch (kind) {
    case TB_KIND_BACKEND:
        return sizeof(struct tb_backend_ops);
    case TB_KIND_PLATFORM:
        return sizeof(struct tb_platform_ops);
    case TB_KIND_MODEL:
        return sizeof(struct tb_model_ops);
    case TB_KIND_DATASET:
        return sizeof(struct tb_dataset_ops);
    case TB_KIND_SWAP:
        return sizeof(struct tb_swap_ops);
    }
    return 0;
}

size_t tb_vtable_size(int kind, uint32_t minor)
{
    for (size_t i = 0; i < sizeof vtable_growth / sizeof vtable_growth[0]; i++)
        if (vtable_growth[i].kind == kind && minor < vtable_growth[i].minor)
            return vtable_growth[i].end;
    return vtable_full_size(kind);
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

int tb_plugin_create(const struct tb_plugin *p, const struct tb_section *sec, const char *split, void **ctx,
                     struct tb_err *err)
{
    *ctx = NULL;
    int rc = TB_ERR_PLUGIN;
    switch (p->kind) {
    case TB_KIND_BACKEND:
        rc = p->ops.backend->create(sec, ctx, err);
        break;
    case TB_KIND_PLATFORM:
        rc = p->ops.platform->create(sec, ctx, err);
        break;
    case TB_KIND_MODEL:
        rc = p->ops.model->create(sec, ctx, err);
        break;
    case TB_KIND_DATASET:
        rc = p->ops.dataset->open(sec, split, ctx, err);
        break;
    case TB_KIND_SWAP:
        rc = p->ops.swap->create(sec, ctx, err);
        break;
    }
    if (rc)
        *ctx = NULL; /* a failed create frees what it made */
    return rc;
}

void tb_plugin_destroy(const struct tb_plugin *p, void *ctx)
{
    if (!ctx)
        return;
    switch (p->kind) {
    case TB_KIND_BACKEND:
        p->ops.backend->destroy(ctx);
        break;
    case TB_KIND_PLATFORM:
        p->ops.platform->destroy(ctx);
        break;
    case TB_KIND_MODEL:
        p->ops.model->destroy(ctx);
        break;
    case TB_KIND_DATASET:
        p->ops.dataset->close(ctx);
        break;
    case TB_KIND_SWAP:
        p->ops.swap->destroy(ctx);
        break;
    }
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
