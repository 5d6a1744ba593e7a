/* fit.c: `trainbig fit CONFIG --vary batch|crop`: the largest batch (or training crop)
 * whose training step completes with the configured device memory, under each swap
 * policy, and what a step then costs against the same step with unlimited memory and no
 * swapping. This is the study's "use of LMS" measurement.
 *
 * The search doubles the value until a step runs out of device memory, then bisects
 * between the last that fitted and the first that did not. Each probe is a real step
 * (tb_time_steps: the setup `trainbig train` makes, warm-up steps, a timed step).
 *
 * A step that fits may still be slow. So each swapping policy also gets the largest
 * value whose step costs at most 1.25 times the step of the largest value that fits
 * without swapping, scaled per pixel (per image, varying the batch): the size a policy
 * makes worth training at, not merely possible. Found by bisection between none's largest
 * and the policy's, taking the step time as growing with the value. A probe whose step
 * lies within 1.25x of the limit either way runs twice more and the median of the three
 * counts; one farther away decides alone, except at none's largest value, where the
 * search starts: there it is always the median of three. (The faster of two, as before, favoured a
 * policy whose step varies from run to run: prefetch plans once, from its first step's
 * times, so each run draws a plan, and a user training for hours gets one draw, not the
 * better of two. Its within-1.25x crop moved between 144 and 200 in two fits of one
 * hour.) none's step at its largest, the reference, is timed again just before each
 * policy's search, three times, the median counting: side by side in time, since a
 * shared machine can run a third slower for minutes. */
#include "config.h"

#include "tools/fit_internal.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/train/host_memory.h"
#include "tools/steptime_internal.h"

enum { MAX_SETS = 64, TIMED_STEPS = 3, MAX_VALUE = 1 << 16 };

struct probe_ctx {
    const char *path;
    const char *policy; /* the configuration's own [swap] plugin: its keys apply to it */
    const char *const *sets;
    int nsets;
    const char *key; /* "train.batch" or "dataset.crop" */
};

int tb_fit_probe(const char *path, const char *own_policy, const char *const *sets, int nsets, const char *const *extra,
                 int nextra, const char *policy, int steps, struct tb_step_timing *t, struct tb_err *err)
{
    if (nsets + nextra > MAX_SETS)
        return tb_err_set(err, TB_ERR_CONFIG, "at most %d assignments", MAX_SETS);
    const char *all[MAX_SETS + 4];
    char p[64];
    int n = 0;
    for (int i = 0; i < nsets; i++)
        all[n++] = sets[i];
    for (int i = 0; i < nextra; i++)
        all[n++] = extra[i];
    if (policy) {
        snprintf(p, sizeof p, "swap.plugin=%s", policy);
        all[n++] = p;
    } else {
        all[n++] = "swap.plugin=none";
        all[n++] = "backend.device_memory=0";
    }
    tb_err_clear(err);
    /* The file's [swap] keys are for its own policy: the others get those they share. */
    int rc = policy && own_policy && strcmp(policy, own_policy) == 0 ? tb_time_steps(path, all, n, steps, t, err)
                                                                     : tb_time_steps_swap(path, all, n, steps, t, err);
    if (rc == TB_OK)
        return 1;
    if (rc == TB_ERR_NOMEM || (rc == TB_ERR_CONFIG && strstr(err->msg, TB_STEPTIME_DATA_SHORT)))
        return 0;
    return -1;
}

/* One step at `value` under `policy` (NULL: no swapping, unlimited memory). 1 = fits,
 * 0 = out of device memory or more than the data has, -1 = another error (err). */
static int probe(const struct probe_ctx *c, const char *policy, int value, struct tb_step_timing *t, struct tb_err *err)
{
    char v[64];
    snprintf(v, sizeof v, "%s=%d", c->key, value);
    const char *extra[] = { v };
    return tb_fit_probe(c->path, c->policy, c->sets, c->nsets, extra, 1, policy, TIMED_STEPS, t, err);
}

/* Pixels per step at `value`, relative: images for a batch, crop side squared for a crop. */
static double pixels(bool batch, int value)
{
    return batch ? (double)value : (double)value * value;
}

/* Of three runs, the one whose step is the median. */
static struct tb_step_timing median3(const struct tb_step_timing run[3])
{
    int lo = 0, hi = 0; /* the fastest and the slowest: distinct, unless all three are equal */
    for (int i = 1; i < 3; i++) {
        lo = run[i].step_s < run[lo].step_s ? i : lo;
        hi = run[i].step_s >= run[hi].step_s ? i : hi;
    }
    return run[lo == hi ? 0 : 3 - lo - hi];
}

/* Runs probes at `value` into run[from..2]; *t the median of run[0..2]. 0 when one did
 * not fit. */
static int probe_rest(const struct probe_ctx *c, const char *policy, int value, struct tb_step_timing run[3], int from,
                      struct tb_step_timing *t, struct tb_err *err)
{
    for (int i = from; i < 3; i++) {
        const int r = probe(c, policy, value, &run[i], err);
        if (r != 1)
            return r;
    }
    *t = median3(run);
    return 1;
}

#define NEAR 1.25
/* run[0] timed already: *t that run, or the median of three when it lies near `limit`.
 * As probe_rest's, 0 when a repeat did not fit (*t then run[0]). */
static int settle_near(const struct probe_ctx *c, const char *policy, int value, double limit,
                       struct tb_step_timing run[3], struct tb_step_timing *t, struct tb_err *err)
{
    *t = run[0];
    if (t->step_s > NEAR * limit || t->step_s < limit / NEAR)
        return 1;
    return probe_rest(c, policy, value, run, 1, t, err);
}

/* One probe, decided alone where its step is farther than NEAR times from `limit` either
 * way; else the median of three (this one and two more) counts: one run near the limit,
 * slowed by another program or drawing a better or worse plan, would move the bisection
 * by a fair part of the range. */
static int probe_near(const struct probe_ctx *c, const char *policy, int value, double limit, struct tb_step_timing *t,
                      struct tb_err *err)
{
    struct tb_step_timing run[3];
    const int r = probe(c, policy, value, &run[0], err);
    return r == 1 ? settle_near(c, policy, value, limit, run, t, err) : r;
}

/* The largest value in [start, fits] (start: none's largest; `fits` fitted, its step fit_s)
 * whose step under `policy` takes at most WITHIN times per_px x its pixels; 0 when not
 * even start does. */
#define WITHIN 1.25
static int largest_within(const struct probe_ctx *c, bool batch, const char *policy, int start, int fits, double fit_s,
                          double per_px, struct tb_err *err)
{
    /* The largest that fits, timed already (near the limit, two more runs). */
    const double fits_limit = WITHIN * per_px * pixels(batch, fits);
    struct tb_step_timing run[3] = { { .step_s = fit_s } }, tf;
    if (settle_near(c, policy, fits, fits_limit, run, &tf, err) < 0)
        return -1;
    if (tf.step_s <= fits_limit)
        return fits;
    if (fits <= start)
        return 0;
    /* At start, none's largest, the policy has the least to move; the median of three
     * there whatever the first run took: one run slowed by half again on a busy host,
     * decided alone as farther than NEAR from the limit, gave prefetch nothing (0) in a
     * fit where its step at 112x112 matched none's to 1-2% in three runs after. */
    struct tb_step_timing t0 = { 0 }, start_runs[3];
    const double start_limit = WITHIN * per_px * pixels(batch, start);
    const int r0 = probe_rest(c, policy, start, start_runs, 0, &t0, err);
    if (r0 < 0)
        return -1;
    if (!r0 || t0.step_s > start_limit)
        return 0;              /* the smallest is not within: nothing is */
    int lo = start, hi = fits; /* lo is within, hi is not */
    while (hi - lo > (batch ? 1 : 8)) {
        int mid = lo + (hi - lo) / 2;
        if (!batch)
            mid -= mid % 8;
        if (mid <= lo)
            break;
        struct tb_step_timing t = { 0 };
        const double limit = WITHIN * per_px * pixels(batch, mid);
        const int r = probe_near(c, policy, mid, limit, &t, err);
        if (r < 0)
            return -1;
        if (r && t.step_s <= limit)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* A probe did not fit (probe() 0): err says why; host and data (each TB_ERR_MSG_MAX) get
 * it when the host's memory or the data set the bound, else "" (the device did). */
static void bound_by(const struct tb_err *err, char *host, char *data)
{
    const bool by_host = strstr(err->msg, TB_HOST_MEMORY_REFUSAL) != NULL;
    const bool by_data = !by_host && strstr(err->msg, TB_STEPTIME_DATA_SHORT) != NULL;
    snprintf(host, TB_ERR_MSG_MAX, "%s", by_host ? err->msg : "");
    snprintf(data, TB_ERR_MSG_MAX, "%s", by_data ? err->msg : "");
}

int tb_fit(const char *path, const char *policy, const char *const *sets, int nsets, const char *vary, FILE *out,
           struct tb_err *err)
{
    const bool batch = strcmp(vary, "batch") == 0;
    if (!batch && strcmp(vary, "crop") != 0)
        return tb_err_set(err, TB_ERR_CONFIG, "--vary %s: allowed are batch and crop", vary);
    if (nsets >= MAX_SETS)
        return tb_err_set(err, TB_ERR_CONFIG, "at most %d --set options with fit", MAX_SETS - 1);
    const struct probe_ctx c = { path, policy, sets, nsets, batch ? "train.batch" : "dataset.crop" };
    static const char *const policies[] = { "none", "lru", "prefetch", "hybrid" };
    enum { NPOL = sizeof policies / sizeof policies[0] };
    const int start = batch ? 2 : 64; /* batch norm trains on 2 images or more */
    int largest[NPOL] = { 0 };
    double none_per_px = 0; /* none's step per pixel at its largest value */
    fprintf(out,
            "fit: the largest %s whose training step completes with the configured device memory; and the "
            "largest whose step is within %.2fx of none's largest, per pixel\n",
            batch ? "batch" : "training crop", WITHIN);
    fprintf(out, "%-9s %8s %10s %14s %9s %9s %12s %14s %12s\n", "policy", vary, "step ms", "no-swap step", "overhead",
            "stall %", "vs none", "within 1.25x", "vs none");
    for (int k = 0; k < NPOL; k++) {
        struct tb_step_timing best = { 0 }, t;
        int lo = 0, hi = 0; /* lo fits (0: nothing yet), hi does not (0: not found yet) */
        /* why hi did not fit, when the host or the data set the bound (not the device) */
        char host_limit[TB_ERR_MSG_MAX] = "", data_limit[TB_ERR_MSG_MAX] = "";
        for (int v = start; v <= MAX_VALUE; v *= 2) {
            int r = probe(&c, policies[k], v, &t, err);
            if (r < 0)
                return tb_err_prefix(err, "fit, %s = %d, swap %s", c.key, v, policies[k]);
            if (!r) {
                hi = v;
                bound_by(err, host_limit, data_limit);
                break;
            }
            lo = v;
            best = t;
        }
        while (hi && lo && hi - lo > (batch ? 1 : 8)) {
            int mid = lo + (hi - lo) / 2;
            if (!batch)
                mid -= mid % 8;
            int r = probe(&c, policies[k], mid, &t, err);
            if (r < 0)
                return tb_err_prefix(err, "fit, %s = %d, swap %s", c.key, mid, policies[k]);
            if (r) {
                lo = mid;
                best = t;
            } else {
                hi = mid;
                bound_by(err, host_limit, data_limit);
            }
        }
        largest[k] = lo;
        if (!lo) {
            fprintf(out, "%-9s %8s (not even %s = %d fits: %s)\n", policies[k], "-", vary, start, err->msg);
            continue;
        }
        struct tb_step_timing ref;
        int r = probe(&c, NULL, lo, &ref, err);
        if (r < 0)
            return tb_err_prefix(err, "fit, %s = %d without swapping", c.key, lo);
        char ref_ms[32] = "-", over[32] = "-", gain[32] = "-";
        if (r > 0) {
            snprintf(ref_ms, sizeof ref_ms, "%.0f", ref.step_s * 1e3);
            snprintf(over, sizeof over, "%.0f%%", 100.0 * (best.step_s / ref.step_s - 1));
        }
        if (largest[0] > 0) {
            const double px = batch ? (double)lo / largest[0] : ((double)lo * lo) / ((double)largest[0] * largest[0]);
            snprintf(gain, sizeof gain, "%.2fx", px);
        }
        char within[32] = "-", within_gain[32] = "-";
        if (k == 0) {
            /* none's step at its largest was run twice (capped, and unlimited: the same
             * work): the faster counts. (Only whether there is a reference: each policy's
             * search times it again.) */
            const double none_s = r > 0 && ref.step_s < best.step_s ? ref.step_s : best.step_s;
            none_per_px = none_s / pixels(batch, lo);
        } else if (none_per_px > 0) {
            /* Against none's step at its largest timed again now, the median of three runs:
             * a machine that slows for minutes (another tenant) slows the reference and the
             * policy's probes alike, where one timed minutes before would fail every probe
             * (hybrid's own smallest, which swaps nothing, then counted as not within). */
            double per_px = none_per_px;
            struct tb_step_timing runs[3], t0 = { 0 };
            const int r0 = probe_rest(&c, "none", largest[0], runs, 0, &t0, err);
            if (r0 < 0)
                return tb_err_prefix(err, "fit, %s = %d, swap none (the reference, timed again)", c.key, largest[0]);
            if (r0 > 0)
                per_px = t0.step_s / pixels(batch, largest[0]);
            const int w = largest_within(&c, batch, policies[k], largest[0], lo, best.step_s, per_px, err);
            if (w < 0)
                return tb_err_prefix(err, "fit, within %.2fx, swap %s", WITHIN, policies[k]);
            snprintf(within, sizeof within, "%d", w);
            snprintf(within_gain, sizeof within_gain, "%.2fx", pixels(batch, w) / pixels(batch, largest[0]));
        }
        fprintf(out, "%-9s %8d %10.0f %14s %9s %8.1f%% %12s %14s %12s\n", policies[k], lo, best.step_s * 1e3, ref_ms,
                over, 100.0 * best.stall_s / best.step_s, gain, within, within_gain);
        /* Where the search stopped when the device did not: the host, or the search's end. */
        if (host_limit[0])
            fprintf(out, "%-9s search stopped below %s = %d by the host's memory, not the device's: %s\n", "",
                    vary, hi, host_limit);
        else if (data_limit[0])
            fprintf(out, "%-9s search stopped below %s = %d by the data, not the device: %s\n", "", vary, hi,
                    data_limit);
        else if (!hi)
            fprintf(out, "%-9s search stopped at %s = %d, the most it tries: the step still fitted\n", "", vary, lo);
        fflush(out);
    }
    tb_err_clear(err);
    return TB_OK;
}
