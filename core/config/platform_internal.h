/* core/config/platform_internal.h: what the core does with a platform plugin's instance
 * (platform.c): read its link and its accelerator, made safe to plan with, and apply its
 * environment and swap defaults. */
#ifndef TB_CORE_PLATFORM_INTERNAL_H
#define TB_CORE_PLATFORM_INTERNAL_H

#include <stddef.h>
#include <trainbig/error.h>
#include <trainbig/platform.h>
#include <trainbig/plugin.h>

#include "core/config/platform.h"

/* Fills *out from instance ctx of platform plugin p. *out is cleared, numa_node set to -1
 * and accel_efficiency to TB_ACCEL_EFFICIENCY_DEFAULT before link() is called; afterwards
 * a negative or non-finite duplex or latency, or a node below -1, reads as unknown, and an
 * accel_efficiency of 0, less or not a number as the default. */
void tb_platform_link(const struct tb_plugin *p, void *ctx, struct tb_link *out);

/* Fills *out with the accelerator instance ctx of platform plugin p describes (accel):
 * cleared first, and left so for a plugin without accel; the name is cut to its array,
 * and a rate that is negative or not finite reads as 0 (unknown). */
void tb_platform_accel(const struct tb_plugin *p, void *ctx, struct tb_accel *out);

/* Sets each of the plugin's environment defaults (env_defaults) that is not
 * already set in this process's environment: setenv(name, value, 0), so what the user
 * set wins. report (report_size > 0) receives one line for the log, e.g.
 * "set NCCL_P2P_LEVEL=NVL; kept NCCL_DEBUG=INFO (already set)", or "none" when the
 * plugin has no defaults; *nset (may be NULL) the number it set. A plugin without
 * env_defaults has none. An entry that is not NAME=VALUE
 * with a valid name is a TB_ERR_PLUGIN naming the plugin and the entry, and then nothing
 * is set. Changes the process environment: call it before starting threads. */
int tb_platform_apply_env(const struct tb_plugin *p, void *ctx, char *report, size_t report_size, size_t *nset,
                          struct tb_err *err);

/* Applies the plugin's swap defaults (swap_defaults) to the validated [swap]
 * section `swap`: each "key=value" whose key the policy declares and whose value is still
 * the policy's default. report (report_size > 0) receives a line for the log, e.g.
 * "min_size = 256K", or "" when nothing was applied. An entry that is not key=value is
 * TB_ERR_PLUGIN; a value the key refuses is TB_ERR_CONFIG naming the platform, the entry
 * and what is allowed; either way nothing is applied. */
struct tb_section;
int tb_platform_apply_swap(const struct tb_plugin *p, void *ctx, struct tb_section *swap, char *report,
                           size_t report_size, struct tb_err *err);

#endif
