/* tools/probe_internal.h: `trainbig probe` (probe.c). */
#ifndef TB_TOOLS_PROBE_INTERNAL_H
#define TB_TOOLS_PROBE_INTERNAL_H

#include <stddef.h>
#include <stdio.h>
#include <trainbig/error.h>

#include "core/config/setup.h"
#include "core/train/run.h"

/* Opens the backend and platform s configures, times copies of `bytes` between host and
 * device (pinned each way, both ways at once, and pageable each way) and writes them to
 * out beside the platform's link. */
int tb_probe(const struct tb_setup *s, size_t bytes, FILE *out, struct tb_err *err);

/* The link as r's backend's copies have it: r->link with the pinned rates of `bytes`
 * each way alone and both at once (each direction's, at most either alone) and, as the
 * latency, the time each of 16 4 KiB copies queued back to back takes less its bytes at
 * those rates; each the fastest of five. */
int tb_probe_link(const struct tb_run *r, size_t bytes, struct tb_link *measured, struct tb_err *err);

#endif
