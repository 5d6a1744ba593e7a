/* tools/probe_internal.h: `trainbig probe` (probe.c). */
#ifndef TB_TOOLS_PROBE_INTERNAL_H
#define TB_TOOLS_PROBE_INTERNAL_H

#include <stddef.h>
#include <stdio.h>
#include <trainbig/error.h>

#include "core/config/setup.h"

/* Opens the backend and platform s configures, times copies of `bytes` between host and
 * device (pinned each way, both ways at once, and pageable each way) and writes them to
 * out beside the platform's link. */
int tb_probe(const struct tb_setup *s, size_t bytes, FILE *out, struct tb_err *err);

#endif
