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

#include <stdint.h>
#include <trainbig/keys.h>
#include <trainbig/log.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What each minor added (each one keeps every plugin of an older minor loading):
 *   1.1  backend: devices, memory, streams, events, copies, tensors, ops (backend.h)
 *   1.2  model: build (model.h); the class-weight and label-mask ops (ops.h, graph.h)
 *   1.3  SDK functions: image decoding for dataset plugins (image.h)
 *   1.4  platform: tb_link duplex_bytes_per_s, latency_s, numa_node; tb_platform_ops
 *        env_defaults (platform.h); swap: the hooks and the memory manager's functions
 *        (swap.h); backend: alloc_failed_bytes, release_scratch, set_platform, event_time
 *        (backend.h)
 *   1.5  platform: tb_platform_ops swap_defaults (platform.h)
 *   1.6  backend: comm_attach, allreduce_start, allreduce_wait (backend.h, comm.h);
 *        batch norm's sync (ops.h)
 *   1.7  backend: struct tb_mem_stats largest_free, op_describe, reorder_stats
 *        (backend.h); platform: tb_link accel_efficiency (platform.h)
 *   1.8  model: prepare, free_work (model.h); SDK functions: edge maps for models'
 *        inputs (edges.h)
 *   1.9  SDK functions: opening user-named files as regular files only (file.h)
 *   1.10 ops: the dual-task regulariser, TB_OP_DUAL_TASK and its parameters (ops.h)
 *   1.11 backend: op_recompute (backend.h); swap: dropping and rebuilding tensors,
 *        tb_swap_drop and tb_swap_recompute_steps (swap.h)
 *   1.12 backend: mem_blocks, struct tb_mem_block (backend.h); swap: tb_swap_out_range
 *        (swap.h)
 *   1.13 platform: struct tb_accel and tb_platform_ops accel, the accelerator's memory,
 *        bandwidth and 16-bit rates (platform.h); SDK functions: an op's FLOPs and
 *        bytes from its shapes, tb_op_cost (ops.h)
 *   1.14 backend: now, set_accel, struct tb_device_info flags and TB_DEVICE_MODELLED
 *        (backend.h); swap: the backend's clock, tb_swap_now (swap.h)
 *   1.15 platform: struct tb_accel per_node, peer_bytes_per_s, peer_latency_s,
 *        net_bytes_per_s, net_latency_s: the GPUs together, for data parallelism
 *        (platform.h); backend: struct tb_device_info ranks, the GPUs a modelled
 *        device stands for (backend.h)
 *   1.16 backend: op_scratch_bytes, the device memory an op's pass took for itself,
 *        for traces and a modelled device's calibration (backend.h) */
#define TB_ABI_MAJOR 1
#define TB_ABI_MINOR 16

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

/* score() of backends and platforms, optional (NULL = only chosen by name):
 * 0 = not usable on this machine, higher = better fit; `plugin = auto` picks the highest
 * non-zero score. Always writes a short reason into why (why_size > 0), which the core
 * logs: "x86_64 CPU, GPUs attach over PCIe". */
typedef int (*tb_score_fn)(char *why, size_t why_size);

#ifdef __cplusplus
}
#endif
#endif
