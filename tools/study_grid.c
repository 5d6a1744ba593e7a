/* tools/study_grid.c: the study's second benchmark, the use of LMS: for each batch x
 * crop of the scale's grid, does a training step of the configuration's network (on
 * synthetic images of that size) fit in the device memory without swapping, only with
 * lru, prefetch or hybrid, or not at all. The study's finding on a 16 GB V100: G-SCNN at batch 16
 * and 800x800 is out of memory without LMS, batch 8 at 700x700 fits.
 *
 * Each cell is a real step (tb_fit_probe, as `trainbig fit`): none first, then lru, then
 * prefetch, then hybrid. Fitting is monotone in both batch and crop, so a cell is not run where a
 * smaller one in both already did not fit (under that policy), nor under none where a
 * larger one in both already fitted. The device memory is the configuration's [backend]
 * device_memory, or the scale's where it sets none (the cpu backend's memory has no
 * bound of its own). */
#include "config.h"

#include "tools/study_internal.h"

#include <stdlib.h>
#include <string.h>

#include "tools/figure_internal.h"
#include "tools/fit_internal.h"
#include "tools/steptime_internal.h"

enum { NPOL = 4, MAXB = 6, MAXC = 6 };
static const char *const policies[NPOL] = { "none", "lru", "prefetch", "hybrid" };
static const char *const short_names[NPOL] = { "none", "lru", "pf", "hy" };


enum cell_state { UNKNOWN, FITS, NO_FIT, NOT_RUN_FITS, NOT_RUN_NO_FIT };

struct cell {
    enum cell_state st[NPOL];
    double step_s[NPOL];
};

/* Whether some swap policy trained the cell. */
static bool swaps(const struct cell *c)
{
    for (int q = 1; q < NPOL; q++)
        if (c->st[q] == FITS)
            return true;
    return false;
}

/* The grid as a figure: a cell per batch x crop, coloured fits / swaps / does not fit,
 * labelled with its step time. */
static int draw(struct tb_study *s, struct cell grid[MAXB][MAXC], uint64_t memory, struct tb_err *err)
{
    const struct tb_study_sizes *sz = s->sz;
    const int nb = sz->nbatch, nc = sz->ncrop;
    char colname[MAXC][16], rowname[MAXB][16], label[MAXB * MAXC][64];
    const char *cols[MAXC], *rows[MAXB], *text[MAXB * MAXC];
    int cells[MAXB * MAXC];
    for (int ci = 0; ci < nc; ci++) {
        snprintf(colname[ci], sizeof colname[ci], "%d", sz->crops[ci]);
        cols[ci] = colname[ci];
    }
    /* Rows top to bottom: the largest batch on top, as a chart's y axis. */
    for (int r = 0; r < nb; r++) {
        const int bi = nb - 1 - r;
        snprintf(rowname[r], sizeof rowname[r], "%d", sz->batches[bi]);
        rows[r] = rowname[r];
        for (int ci = 0; ci < nc; ci++) {
            const struct cell *c = &grid[bi][ci];
            const int k = r * nc + ci;
            text[k] = label[k];
            if (c->st[0] == FITS || c->st[0] == NOT_RUN_FITS) {
                cells[k] = 0;
                if (c->st[0] == FITS)
                    snprintf(label[k], sizeof label[k], "%.0f ms", c->step_s[0] * 1e3);
                else
                    snprintf(label[k], sizeof label[k], "fits*");
            } else if (swaps(c)) {
                cells[k] = 1;
                size_t o = 0;
                for (int q = 1; q < NPOL; q++)
                    if (c->st[q] == FITS && o < sizeof label[k])
                        o += (size_t)snprintf(label[k] + o, sizeof label[k] - o, "%s%s %.0f", o ? " / " : "",
                                              short_names[q], c->step_s[q] * 1e3);
                if (o < sizeof label[k])
                    snprintf(label[k] + o, sizeof label[k] - o, " ms");
            } else {
                cells[k] = 2;
                snprintf(label[k], sizeof label[k], "no");
            }
        }
    }
    static const char *const names[] = { "fits without swapping", "trains only with swapping", "does not fit" };
    static const unsigned rgb[] = { 0x4caf50, 0xffa726, 0xe53935 };
    char title[160];
    snprintf(title, sizeof title, "Use of LMS: training steps in %.0f MiB of device memory", memory / 1048576.0);
    const struct tb_fig_grid f = {
        .title = title,
        .xlabel = "crop (pixels, square)",
        .ylabel = "batch (images per step)",
        .columns = cols,
        .ncolumns = (size_t)nc,
        .rows = rows,
        .nrows = (size_t)nb,
        .cells = cells,
        .text = text,
        .ncells = (size_t)(nb * nc),
        .category_names = names,
        .ncategories = 3,
        .category_rgb = rgb,
    };
    char *base = tb_study_path(s, "use-of-lms");
    const int rc = base ? tb_fig_grid(base, &f, err) : tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    free(base);
    return tb_study_figure(s, "use-of-lms", "use of LMS", rc);
}

int tb_study_grid(struct tb_study *s, struct tb_err *err)
{
    const struct tb_study_sizes *sz = s->sz;
    const char *own = s->policy;
    uint64_t memory = s->device_memory;
    const bool own_memory = memory > 0;
    const bool sim = strcmp(s->backend, "sim") == 0;
    if (!own_memory) /* on sim at the reference's 16 GB: what a V100 leaves a process (the presets' accel_memory) */
        memory = sim && sz->grid_memory == 16ull << 30 ? 15ull << 30 : sz->grid_memory;

    struct cell grid[MAXB][MAXC];
    memset(grid, 0, sizeof grid);
    const int nb = sz->nbatch, nc = sz->ncrop, total = nb * nc;
    int done = 0;
    for (int bi = 0; bi < nb; bi++)
        for (int ci = 0; ci < nc; ci++, done++) {
            struct cell *c = &grid[bi][ci];
            for (int q = 0; q < NPOL; q++) {
                /* Monotone: a smaller cell that did not fit, or a larger one that did. */
                bool no = false;
                for (int b2 = 0; b2 <= bi; b2++)
                    for (int c2 = 0; c2 <= ci; c2++)
                        no |= (b2 < bi || c2 < ci) &&
                              (grid[b2][c2].st[q] == NO_FIT || grid[b2][c2].st[q] == NOT_RUN_NO_FIT);
                if (no) {
                    c->st[q] = NOT_RUN_NO_FIT;
                    continue;
                }
                /* Swapping is needed only where none did not fit. */
                if (q > 0 && (c->st[0] == FITS || c->st[0] == NOT_RUN_FITS)) {
                    c->st[q] = NOT_RUN_FITS;
                    continue;
                }
                s->frac = (double)done / total;
                tb_study_progress(s, "batch %d x crop %d under %s (cell %d of %d)", sz->batches[bi], sz->crops[ci],
                                  policies[q], done + 1, total);
                char b[64], w[64], h[64], m[64], cnt[64];
                snprintf(b, sizeof b, "train.batch=%d", sz->batches[bi]);
                snprintf(w, sizeof w, "dataset.width=%d", sz->crops[ci]);
                snprintf(h, sizeof h, "dataset.height=%d", sz->crops[ci]);
                snprintf(m, sizeof m, "backend.device_memory=%llu", (unsigned long long)memory);
                snprintf(cnt, sizeof cnt, "dataset.train_count=%d", sz->batches[bi] > 16 ? sz->batches[bi] : 16);
                const char *extra[] = { "dataset.plugin=synthetic", "dataset.crop=0", w, h, cnt, b, m };
                struct tb_step_timing t;
                const int r =
                    tb_fit_probe(s->rq->config, own, s->rq->sets, s->rq->nsets, extra, 7, policies[q], 1, &t, err);
                if (r < 0)
                    return tb_err_prefix(err, "batch %d x crop %d under %s", sz->batches[bi], sz->crops[ci],
                                         policies[q]);
                c->st[q] = r ? FITS : NO_FIT;
                c->step_s[q] = r ? t.step_s : 0;
            }
        }
    tb_err_clear(err);

    /* The report: the grid, then the largest step per policy. */
    FILE *md = s->md;
    fprintf(md, "## 2. Use of LMS: what fits in %.0f MiB of device memory\n\n", memory / 1048576.0);
    fprintf(md,
            "%sEach cell is one training step of the configuration's network on synthetic images of crop x crop "
            "pixels, batch images per step, with %.0f MiB of device memory (%s): **fits** without swapping (none), "
            "**swaps** trains only with a swap policy (which), or **does not fit** under any. Step times are %s. "
            "Cells marked * were not run: a smaller one already did not fit, or none already fitted.\n\n",
            sim ? "**Predicted.** " : "", memory / 1048576.0,
            own_memory ? "the configuration's [backend] device_memory"
            : sim      ? "a 16 GB V100's, after its context"
                       : "the scale's",
            sim ? "the modelled GPU's (on the configuration's platform)" : "this machine's");
    fprintf(md, "| batch \\ crop |");
    for (int ci = 0; ci < nc; ci++)
        fprintf(md, " %d |", sz->crops[ci]);
    fprintf(md, "\n|---|");
    for (int ci = 0; ci < nc; ci++)
        fprintf(md, "---|");
    fprintf(md, "\n");
    double largest[NPOL] = { 0 };
    int largest_b[NPOL] = { 0 }, largest_c[NPOL] = { 0 };
    for (int bi = 0; bi < nb; bi++) {
        fprintf(md, "| %d |", sz->batches[bi]);
        for (int ci = 0; ci < nc; ci++) {
            const struct cell *c = &grid[bi][ci];
            const double px = (double)sz->batches[bi] * sz->crops[ci] * sz->crops[ci];
            for (int q = 0; q < NPOL; q++)
                if ((c->st[q] == FITS || c->st[q] == NOT_RUN_FITS) && px > largest[q]) {
                    largest[q] = px;
                    largest_b[q] = sz->batches[bi];
                    largest_c[q] = sz->crops[ci];
                }
            if (c->st[0] == FITS)
                fprintf(md, " fits (%.0f ms) |", c->step_s[0] * 1e3);
            else if (c->st[0] == NOT_RUN_FITS)
                fprintf(md, " fits* |");
            else if (swaps(c)) {
                fprintf(md, " swaps:");
                for (int q = 1; q < NPOL; q++)
                    if (c->st[q] == FITS)
                        fprintf(md, " %s %.0f ms", policies[q], c->step_s[q] * 1e3);
                fprintf(md, " |");
            } else
            {
                bool skipped = true;
                for (int q = 0; q < NPOL; q++)
                    skipped = skipped && c->st[q] == NOT_RUN_NO_FIT;
                fprintf(md, " does not fit%s |", skipped ? "*" : "");
            }
        }
        fprintf(md, "\n");
    }
    fprintf(md, "\nThe largest step per policy (batch x crop, pixels per step, against none):\n\n");
    fprintf(md, "| policy | batch x crop | pixels per step | vs none |\n|---|---|---|---|\n");
    for (int q = 0; q < NPOL; q++) {
        if (largest[q] == 0) {
            fprintf(md, "| %s | nothing in the grid fits | | |\n", policies[q]);
            continue;
        }
        fprintf(md, "| %s | %d x %d | %.0f | ", policies[q], largest_b[q], largest_c[q], largest[q]);
        if (largest[0] > 0)
            fprintf(md, "%.2fx |\n", largest[q] / largest[0]);
        else
            fprintf(md, "- |\n");
    }
    fprintf(md, "\nThe study (G-SCNN on a 16 GB V100): batch 16 at 800x800 does not fit without LMS; batch 8 at "
                "700x700 fits. A cell at the edge of this grid that swaps is the same finding at this scale.%s\n",
            sim ? " Its batches were over four GPUs: 16 x 800 is the cell 4 x 800 here, 8 x 700 the cell 2 x 700." : "");
    return draw(s, grid, memory, err);
}
