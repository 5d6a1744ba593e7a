/* tools/fit_internal.h: `trainbig fit` (fit.c). */
#ifndef TB_TOOLS_FIT_INTERNAL_H
#define TB_TOOLS_FIT_INTERNAL_H

#include <stdio.h>
#include <trainbig/error.h>

/* For the configuration at `path` with the `nsets` overrides, and vary = "batch" or
 * "crop": finds under each swap policy (none, lru, prefetch) the largest value whose
 * training step completes with the configured device memory, and writes a table to out:
 * policy, largest value, step time, the same step with unlimited memory and no swapping,
 * the overhead, the share stalled on copies, and the batch x pixels against none's. A
 * configuration or plugin error ends it (err). `policy` is the configuration's own [swap]
 * plugin: its [swap] keys apply to it; the other policies run with their defaults. */
int tb_fit(const char *path, const char *policy, const char *const *sets, int nsets, const char *vary, FILE *out,
           struct tb_err *err);

/* One training step (after the warm-ups: tb_time_steps) of the configuration at `path`
 * with `sets`, then `extra`, under swap `policy` (NULL: none, with unlimited device
 * memory); `own_policy` is the file's [swap] plugin, whose keys apply only to it. 1 = it
 * fits, 0 = out of device memory or a batch larger than the data, -1 = another error
 * (err). */
struct tb_step_timing;
int tb_fit_probe(const char *path, const char *own_policy, const char *const *sets, int nsets, const char *const *extra,
                 int nextra, const char *policy, int steps, struct tb_step_timing *t, struct tb_err *err);

#endif
