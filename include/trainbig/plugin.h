/* trainbig/plugin.h: the plugin ABI.
 *
 * A plugin is a shared object that exports exactly one symbol, `trainbig_plugin`, a
 * const struct tb_plugin. Define it with TB_PLUGIN_EXPORT and build with
 * -fvisibility=hidden so nothing else leaks:
 *
 *     TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
 *         .abi_major = TB_ABI_MAJOR, .abi_minor = TB_ABI_MINOR,
 *         .kind = TB_KIND_DATASET, .name = "ppm", .version = "1.0.0",
 *         .description = "...", .keys = my_keys, .ops.dataset = &my_ops,
 *     };
 *
 * The file is named "<kind>-<name>.so" (dataset-ppm.so) so the core finds it by name
 * without opening every plugin; a file named in the INI by path (plugin = ./x.so) may have
 * any name.
 *
 * ABI rules: the version fields come first because they protect the rest. Growing a
 * kind's vtable at its end, or adding a kind, bumps TB_ABI_MINOR; any other change bumps
 * TB_ABI_MAJOR and resets the minor. The loader accepts a plugin built for the same major
 * and a minor no newer than its own; a newer-minor plugin may use members this core does
 * not have, so it is refused, naming the file and both versions. The core reads an
 * accepted plugin's vtable only as far as its minor had members: later members read as
 * NULL. */
#ifndef TRAINBIG_PLUGIN_H
#define TRAINBIG_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <trainbig/error.h>
#include <trainbig/keys.h>
#include <trainbig/log.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What each version changed. 2.0 breaks every plugin of ABI 1 (the loader refuses
 * them, naming the file): rebuild against this SDK after the changes below; each minor of
 * major 2 keeps every plugin of an older minor of major 2 loading.
 *   2.0  every kind's vtable starts with struct tb_plugin_head (score, create, destroy),
 *        so the core creates and destroys an instance of any kind the same way; a
 *        dataset's split is no longer given to create but to open_split (dataset.h),
 *        and close is destroy; the compatibility rules of ABI 1's minors are gone:
 *        every member of every vtable and struct is read. doc/plugin-guide.md,
 *        "From ABI 1 to 2", says what to change in a plugin.
 *   2.1  struct tb_accel ends with pair_bytes_per_s (a ring over two GPUs joined
 *        directly), which a platform of 2.0 leaves 0 (none); tb_accel_ring_hop gives the
 *        hop a ring over n GPUs runs at.
 *   2.2  ops take bf16 and f16 tensors where trainbig/ops.h says "float", and the op
 *        kind TB_OP_CAST converts between float dtypes; struct tb_backend_ops ends with
 *        dtypes (the float dtypes a backend's ops take), which a backend of 2.1 lacks
 *        (f32 only). */
#define TB_ABI_MAJOR 2
#define TB_ABI_MINOR 2

/* The name of the one exported symbol. */
#define TB_PLUGIN_ENTRY "trainbig_plugin"

#if defined(__GNUC__)
#define TB_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define TB_PLUGIN_EXPORT
#endif

/* A plugin's kind is also the INI section that names it. */
enum tb_plugin_kind {
    TB_KIND_BACKEND = 1,  /* [backend]:  compute devices, memory, streams and ops */
    TB_KIND_PLATFORM = 2, /* [platform]: a machine class: link bandwidths, tunings */
    TB_KIND_MODEL = 3,    /* [model]:    builds a network */
    TB_KIND_DATASET = 4,  /* [dataset]:  enumerates and decodes samples */
    TB_KIND_SWAP = 5,     /* [swap]:     the large-model-support policy */
};
#define TB_KIND_FIRST TB_KIND_BACKEND
#define TB_KIND_LAST TB_KIND_SWAP

struct tb_backend_ops;
struct tb_platform_ops;
struct tb_model_ops;
struct tb_dataset_ops;
struct tb_swap_ops;

/* A plugin's vtable, by its kind. */
union tb_plugin_ops {
    const void *any;
    const struct tb_plugin_head *head; /* every kind's vtable starts with one */
    const struct tb_backend_ops *backend;
    const struct tb_platform_ops *platform;
    const struct tb_model_ops *model;
    const struct tb_dataset_ops *dataset;
    const struct tb_swap_ops *swap;
};

struct tb_plugin {
    uint32_t abi_major;        /* TB_ABI_MAJOR the plugin was built with */
    uint32_t abi_minor;        /* TB_ABI_MINOR the plugin was built with */
    int32_t kind;              /* enum tb_plugin_kind */
    const char *name;          /* [a-z0-9_.-], unique within its kind */
    const char *version;       /* the plugin's own version, free text */
    const char *description;   /* one line */
    const struct tb_key *keys; /* ended by TB_KEYS_END; NULL = no keys */
    union tb_plugin_ops ops;   /* the vtable of `kind` */
};

/* Every plugin defines this; declared here so tb_plog() can name the plugin. */
extern TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin;

/* The section name of a kind ("backend"), or NULL for an unknown kind. Static storage. */
const char *tb_kind_name(int kind);

/* Logs with "kind/name" of plugin p as the tag. */
void tb_log_plugin(const struct tb_plugin *p, enum tb_log_level level, const char *fmt, ...) TB_PRINTF(3, 4);

/* Inside a plugin: log tagged with this plugin's kind and name. */
#define tb_plog(level, ...) tb_log_plugin(&trainbig_plugin, (level), __VA_ARGS__)

/* score(), optional (NULL = only chosen by name; backends and platforms have one):
 * 0 = not usable on this machine, higher = better fit; `plugin = auto` picks the highest
 * non-zero score. Always writes a short reason into why (why_size > 0), which the core
 * logs: "x86_64 CPU, GPUs attach over PCIe". */
typedef int (*tb_score_fn)(char *why, size_t why_size);

/* The head every kind's vtable starts with (its first member, `head`): how the core
 * scores, creates and destroys an instance of any kind. */
struct tb_plugin_head {
    tb_score_fn score; /* optional, see above */
    /* Creates an instance from the validated section of the plugin's kind (`cfg` stays
     * valid until the run ends). On success *ctx is owned by the caller, who releases it
     * with destroy(). On failure returns a tb_status, fills err naming the key, file or
     * directory at fault, and leaves nothing to free. Required. */
    int (*create)(const struct tb_section *cfg, void **ctx, struct tb_err *err);
    /* Releases everything the instance holds; a backend waits for its queued work
     * first. Required. */
    void (*destroy)(void *ctx);
};

#ifdef __cplusplus
}
#endif
#endif
