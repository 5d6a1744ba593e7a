/* core/config/loader.h: finding, loading and checking plugins (loader.c). */
#ifndef TB_CORE_LOADER_H
#define TB_CORE_LOADER_H

#include <stddef.h>
#include <trainbig/backend.h>
#include <trainbig/dataset.h>
#include <trainbig/error.h>
#include <trainbig/model.h>
#include <trainbig/platform.h>
#include <trainbig/plugin.h>
#include <trainbig/swap.h>

/* Every kind's vtable at this core's ABI minor. */
union tb_vtable {
    struct tb_backend_ops backend;
    struct tb_platform_ops platform;
    struct tb_model_ops model;
    struct tb_dataset_ops dataset;
    struct tb_swap_ops swap;
};

/* A loaded, accepted plugin. Owned by whoever opened it; close with tb_plugin_close().
 * The core reads the plugin through p, a copy of its descriptor whose vtable is `vtable`:
 * the plugin's vtable copied as far as its ABI minor had members, the members of later
 * minors NULL. So the core tests an optional member for NULL, never the plugin's minor. */
struct tb_plugin_handle {
    void *dl;                  /* dlopen handle; NULL for a descriptor adopted by tb_plugin_adopt */
    char *path;                /* the file */
    const struct tb_plugin *p; /* &desc */
    struct tb_plugin desc;     /* the plugin's descriptor, but ops points at vtable */
    union tb_vtable vtable;
};

/* The size of a kind's vtable as a plugin built for ABI <this major>.minor has it; 0 for
 * an unknown kind. */
size_t tb_vtable_size(int kind, uint32_t minor);

/* Checks descriptor p (from a file, or a test's) as tb_plugin_open does and makes a handle
 * for it without a file behind it; path names it in messages. */
int tb_plugin_adopt(const struct tb_plugin *p, const char *path, int want_kind, struct tb_plugin_handle **out,
                    struct tb_err *err);

/* The directories searched for plugins by name, in order:
 *   1. each directory of TRAINBIG_PLUGIN_PATH (colon-separated)
 *   2. when libtrainbig itself runs from the build tree: the build tree's plugin
 *      directories, then the configured install directory
 *      otherwise: <directory of libtrainbig>/trainbig/plugins (the install directory,
 *      also after the whole tree was moved or staged with DESTDIR)
 * (A path named in the INI comes before all of these.) */
struct tb_dirs {
    char **dir;
    size_t n;
};
int tb_plugin_dirs(struct tb_dirs *out);
void tb_dirs_free(struct tb_dirs *d);
/* "dir1:dir2:..." for messages; static buffer of the calling thread. */
const char *tb_dirs_text(const struct tb_dirs *d);

/* Opens one file and checks it: loadable (dlerror otherwise), exports trainbig_plugin,
 * ABI major equal and minor not newer, a known kind equal to want_kind (0 = any), a sane
 * descriptor, a valid key table, the vtable members its kind requires. Every refusal is
 * TB_ERR_PLUGIN with a message naming the file. */
int tb_plugin_open(const char *path, int want_kind, struct tb_plugin_handle **out, struct tb_err *err);

/* Finds <kind>-<name>.so in the search directories and opens it. Not found: the message
 * lists the available plugins of that kind, the nearest name and the directories. */
int tb_plugin_find(int kind, const char *name, struct tb_plugin_handle **out, struct tb_err *err);

/* Opens every plugin of `kind` that has a score() and keeps the highest non-zero score.
 * why receives "chose 'x' with score 7 (reason); other candidates: y 5 (reason), ...". */
int tb_plugin_auto(int kind, struct tb_plugin_handle **out, char *why, size_t why_size, struct tb_err *err);

/* Every plugin in the search directories (kind 0 = all kinds). As for lookup by name, the
 * first file of a name wins; files that were refused, misnamed, or shadowed by an earlier
 * file of the same name are described in notes. With a kind, only the files named for it
 * ("<kind>-*.so", the only ones lookup by name finds) are opened and described, so a
 * plugin of that kind in a file named for another kind shows only in the listing of all
 * kinds. Free with tb_plugin_list_free(). */
struct tb_plugin_list {
    struct tb_plugin_handle **items;
    size_t n;
    char **notes;
    size_t nnotes;
};
int tb_plugin_list(int kind, struct tb_plugin_list *out);
void tb_plugin_list_free(struct tb_plugin_list *l);

void tb_plugin_close(struct tb_plugin_handle *h);

/* An instance of any kind from its validated section: head.create(). On failure *ctx is
 * NULL and err says why. */
int tb_plugin_create(const struct tb_plugin *p, const struct tb_section *sec, void **ctx, struct tb_err *err);
/* A dataset instance with `split` opened: head.create(), then open_split(), the instance
 * destroyed again when that fails. On failure *ctx is NULL and err says why. */
int tb_dataset_open(const struct tb_plugin *p, const struct tb_section *sec, const char *split, void **ctx,
                    struct tb_err *err);
/* head.destroy(); nothing for ctx NULL. */
void tb_plugin_destroy(const struct tb_plugin *p, void *ctx);

#endif
