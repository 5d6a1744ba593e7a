/* data_report.c: `trainbig data`: what a configured dataset holds, and whether every
 * file of it decodes. For each split: the sample count, the image sizes, every sample
 * decoded (a progress bar on a terminal), the bad ones listed with their errors; then
 * the class histogram of the labelled pixels. */
#include "config.h"

#include "tools/data_report_internal.h"

#include "core/config/loader.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/clock.h>
#include <trainbig/dataset.h>
#include <unistd.h>

enum { IGNORE_LABEL = 255, MAX_LISTED = 50 };

static void bar(size_t done, size_t total, const char *split)
{
    const int width = 30;
    int filled = total ? (int)((double)done / (double)total * width) : width;
    fprintf(stderr, "\r\033[K%s [%.*s%*s] %zu/%zu", split, filled, "##############################", width - filled, "",
            done, total);
    fflush(stderr);
}

/* Decodes every sample of one split; adds its pixels to hist ([classes + 1]: the last
 * counts ignore and out-of-range labels). *bad receives the failures. */
static int check_split(const struct tb_dataset_ops *ops, void *ctx, const char *split, int classes, uint64_t *hist,
                       size_t *bad, bool live, FILE *out)
{
    struct tb_sample s = { 0 };
    struct tb_err err;
    const size_t n = ops->count(ctx);
    uint32_t wmin = UINT32_MAX, wmax = 0, hmin = UINT32_MAX, hmax = 0;
    double t0 = tb_now(), last = 0;
    *bad = 0;
    fprintf(out, "split %s: %zu samples\n", split, n);
    for (size_t i = 0; i < n; i++) {
        tb_err_clear(&err);
        if (ops->load(ctx, i, &s, &err) != TB_OK) {
            if (live)
                fputs("\r\033[K", stderr);
            if (++*bad <= MAX_LISTED)
                fprintf(out, "  bad: %s: %s\n", ops->sample_name(ctx, i), err.msg);
            continue;
        }
        wmin = s.width < wmin ? s.width : wmin;
        wmax = s.width > wmax ? s.width : wmax;
        hmin = s.height < hmin ? s.height : hmin;
        hmax = s.height > hmax ? s.height : hmax;
        const size_t pix = (size_t)s.width * s.height;
        for (size_t p = 0; p < pix; p++)
            hist[s.label[p] < classes ? s.label[p] : classes]++;
        if (live && (tb_now() - last > 0.1 || i + 1 == n)) {
            bar(i + 1, n, split);
            last = tb_now();
        }
    }
    if (live)
        fputs("\r\033[K", stderr);
    tb_sample_release(&s);
    if (*bad > MAX_LISTED)
        fprintf(out, "  ... and %zu more bad samples\n", *bad - MAX_LISTED);
    if (n > *bad && wmin == wmax && hmin == hmax)
        fprintf(out, "  decoded %zu in %.1f s; image size %ux%u (all)\n", n - *bad, tb_now() - t0, wmin, hmin);
    else if (n > *bad) /* each axis on its own: the extremes may be of different images */
        fprintf(out, "  decoded %zu in %.1f s; image widths %u..%u, heights %u..%u\n", n - *bad, tb_now() - t0, wmin,
                wmax, hmin, hmax);
    fprintf(out, "  bad samples: %zu\n", *bad);
    return TB_OK;
}

int tb_data_report(const struct tb_setup *s, FILE *out, size_t *bad_total, char *missing, size_t missing_size,
                   struct tb_err *err)
{
    if (missing_size)
        missing[0] = '\0';
    static const char *const splits[] = { "train", "val", "test" };
    const struct tb_plugin *p = s->slot[TB_SEC_DATASET].plugin->p;
    const struct tb_dataset_ops *ops = p->ops.dataset;
    const bool live = isatty(STDERR_FILENO);
    *bad_total = 0;
    int rc = TB_OK, opened = 0;
    for (size_t k = 0; k < sizeof splits / sizeof *splits; k++) {
        void *ctx;
        struct tb_err oerr;
        tb_err_clear(&oerr);
        if (tb_dataset_open(p, s->slot[TB_SEC_DATASET].section, splits[k], &ctx, &oerr) != TB_OK) {
            fprintf(out, "split %s: not available: %s\n", splits[k], oerr.msg);
            /* train always; val when training validates; test is never read by training */
            const struct tb_train_settings *tr = &s->settings.train;
            if (k == 0 || (k == 1 && (tr->val_every > 0 || tr->val_at_start))) {
                size_t used = strlen(missing);
                snprintf(missing + used, missing_size - used, "%s%s", used ? ", " : "", splits[k]);
            }
            continue;
        }
        /* A split that opens empty is one train refuses ("has no samples"): data says so
         * and counts it with the missing ones. */
        const struct tb_train_settings *tr = &s->settings.train;
        const bool needed = k == 0 || (k == 1 && (tr->val_every > 0 || tr->val_at_start));
        if (ops->count(ctx) == 0) {
            fprintf(out, "split %s: no samples\n", splits[k]);
            if (needed) {
                size_t used = strlen(missing);
                snprintf(missing + used, missing_size - used, "%s%s", used ? ", " : "", splits[k]);
            }
            tb_plugin_destroy(p, ctx);
            continue;
        }
        opened++;
        const struct tb_class *classes;
        const int nc = (int)ops->classes(ctx, &classes);
        uint64_t *hist = calloc((size_t)nc + 1, sizeof *hist);
        if (!hist) {
            tb_plugin_destroy(p, ctx);
            return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        }
        size_t bad;
        check_split(ops, ctx, splits[k], nc, hist, &bad, live, out);
        *bad_total += bad;
        uint64_t total = 0;
        for (int c = 0; c <= nc; c++)
            total += hist[c];
        fprintf(out, "  classes (share of pixels):\n");
        for (int c = 0; c < nc; c++)
            fprintf(out, "    %3d %-20s %7.3f%%\n", c, classes[c].name,
                    total ? 100.0 * (double)hist[c] / (double)total : 0.0);
        fprintf(out, "    %3d %-20s %7.3f%%\n", IGNORE_LABEL, "(ignore)",
                total ? 100.0 * (double)hist[nc] / (double)total : 0.0);
        free(hist);
        tb_plugin_destroy(p, ctx);
    }
    if (!opened)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "dataset '%s': no split could be opened or has samples (see above)",
                        p->name);
    return rc;
}
