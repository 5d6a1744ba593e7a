/* core/config/loader_internal.h: finding, loading and checking plugins (loader.c). */
#ifndef TB_CORE_LOADER_INTERNAL_H
#define TB_CORE_LOADER_INTERNAL_H

#include <stddef.h>
#include <trainbig/error.h>
#include <trainbig/plugin.h>

/* A loaded, accepted plugin. Owned by whoever opened it; close with tb_plugin_close(). */
struct tb_plugin_handle {
    void *dl;                  /* dlopen handle */
    char *path;                /* the file */
    const struct tb_plugin *p; /* its descriptor, inside the loaded file */
};

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
 * file of the same name are described in notes (with a kind, only files named for that
 * kind). Free with tb_plugin_list_free(). */
struct tb_plugin_list {
    struct tb_plugin_handle **items;
    size_t n;
    char **notes;
    size_t nnotes;
};
int tb_plugin_list(int kind, struct tb_plugin_list *out);
void tb_plugin_list_free(struct tb_plugin_list *l);

void tb_plugin_close(struct tb_plugin_handle *h);

#endif
