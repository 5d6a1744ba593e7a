/* figure.c: line charts, grouped bars, categorical grids and timelines as PNG and SVG
 * (figure_internal.h): each call's checks, and the rendering with PLplot; the charts
 * themselves are drawn by figure_charts.c.
 *
 * PLplot keeps its state in streams and global handlers, and ends the process on a fatal
 * error (plexit). So each figure is drawn on a stream of its own (plmkstrm ... plend1,
 * the caller's current stream restored after), one figure at a time (a mutex), with
 * handlers installed only while it draws: plexit's handler jumps back here instead of
 * letting PLplot exit, and plabort's records the message. The drivers write into memory
 * (open_memstream, handed over with plsfile), never to a file PLplot opens by name, so
 * every file error is ours and the files are written whole through tb_atomic_open. */
#include "config.h"

#include "tools/figure_internal.h"
#include "tools/figure_draw.h"

#include <errno.h>
#include <math.h>
#include <plplot.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util/atomic_file.h"

/* ------------------------------------------------------------------ PLplot's handlers */

static pthread_mutex_t draw_lock = PTHREAD_MUTEX_INITIALIZER;
static jmp_buf *exit_jump;   /* where plexit's handler goes; under draw_lock */
static char plplot_msg[256]; /* the first plexit or plabort message of this figure */
/* Where plabort writes instead of stderr (plsError): it formats into errmsg unbounded,
 * from messages of PLplot's own, all short. */
static PLINT plplot_errcode;
static char plplot_errmsg[1024];

static void keep_message(const char *msg)
{
    if (!plplot_msg[0])
        snprintf(plplot_msg, sizeof plplot_msg, "%s", msg && *msg ? msg : "unknown error");
}

/* plexit calls this and then exit(): leaving by longjmp is the only way back. */
static int on_plexit(const char *msg)
{
    keep_message(msg);
    if (exit_jump)
        longjmp(*exit_jump, 1);
    return 1;
}

static void on_plabort(const char *msg)
{
    keep_message(msg);
}

/* ------------------------------------------------------------------ rendering */

/* Whether this PLplot has the drivers, by name (plgDevs lists the loadable ones). */
static bool have_driver(const char *name)
{
    const char *menu[128], *devs[128];
    const char **m = menu, **d = devs;
    int n = 128;
    plgDevs(&m, &d, &n);
    for (int i = 0; i < n && i < 128; i++)
        if (strcmp(d[i], name) == 0)
            return true;
    return false;
}

typedef const char *draw_fn(const void *fig);

/* Sets the stream's colours: cmap0's fixed entries, then ncol fig_palette colours (rgb, or
 * the default fig_palette when NULL). */
static void set_colors(const unsigned *rgb, int ncol)
{
    plscmap0n(C_PALETTE + ncol);
    plscol0(C_BG, 255, 255, 255);
    plscol0(C_FG, 0, 0, 0);
    plscol0(C_GRID, 0xdd, 0xdd, 0xdd);
    plscol0(C_MUTED, 0x66, 0x66, 0x66);
    plscol0(C_REF, 0, 0, 0);
    for (int i = 0; i < ncol; i++) {
        unsigned c = rgb ? rgb[i] : fig_palette[i % MAX_SERIES];
        plscol0(C_PALETTE + i, (PLINT)(c >> 16 & 255), (PLINT)(c >> 8 & 255), (PLINT)(c & 255));
    }
}

/* One figure with PLplot's driver `dev` into a buffer (*buf, *len: the caller frees
 * *buf). Under draw_lock. */
static int render_one(const char *dev, const char *path, draw_fn *draw, const void *fig, const unsigned *rgb, int ncol,
                      char **buf, size_t *len, struct tb_err *err)
{
    *buf = NULL;
    *len = 0;
    FILE *mem = open_memstream(buf, len);
    if (!mem)
        return tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory", path);
    PLINT prev, strm = -1;
    plgstrm(&prev);
    plplot_msg[0] = '\0';
    plsexit(on_plexit);
    plsabort(on_plabort);
    jmp_buf jump;
    /* volatile: read after a longjmp back into this frame. */
    volatile bool started = false, closed = false;
    if (setjmp(jump) == 0) {
        exit_jump = &jump;
        plmkstrm(&strm);
        if (strm < 0) {
            keep_message("no PLplot stream is free");
        } else {
            started = true;
            plsError(&plplot_errcode, plplot_errmsg);
            plsdev(dev);
            plsfile(mem);
            plspage(0, 0, PAGE_W, PAGE_H, 0, 0);
            set_colors(rgb, ncol);
            plinit();
            const char *why = draw(fig);
            if (why)
                keep_message(why);
            plend1(); /* the driver's tidy closes mem */
            closed = true;
        }
    } else if (started) {
        /* plexit in the middle of drawing: end the stream as far as it goes. */
        PLINT level = 0;
        plglevel(&level);
        if (level == 0)
            fclose(mem), closed = true;
        jmp_buf again;
        if (setjmp(again) == 0) {
            exit_jump = &again;
            plend1();
            closed = true;
        }
    }
    exit_jump = NULL;
    plsexit(NULL);
    plsabort(NULL);
    plsstrm(prev);
    if (!closed)
        fclose(mem);
    if (plplot_msg[0]) {
        free(*buf);
        *buf = NULL;
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: PLplot (driver %s) failed: %s", path, dev, plplot_msg);
    }
    if (*len == 0) {
        free(*buf);
        *buf = NULL;
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: PLplot's %s driver wrote nothing", path, dev);
    }
    return TB_OK;
}

static int write_whole(const char *path, const char *buf, size_t len, struct tb_err *err)
{
    struct tb_atomic_file a;
    int rc = tb_atomic_open(&a, path, err);
    if (rc)
        return rc;
    if (fwrite(buf, 1, len, a.f) != len)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot write: %s", path, strerror(errno));
    return tb_atomic_close(&a, rc, err);
}

/* Draws fig with both drivers, then writes BASE.png and BASE.svg. */
static int render(const char *base, draw_fn *draw, const void *fig, const unsigned *rgb, int ncol, struct tb_err *err)
{
    static const char *const drivers[2] = { "pngcairo", "svg" }, *const ext[2] = { "png", "svg" };
    const size_t n = strlen(base) + 8;
    char *path[2] = { malloc(n), malloc(n) };
    char *buf[2] = { NULL, NULL };
    size_t len[2] = { 0, 0 };
    int rc = TB_OK;
    if (!path[0] || !path[1])
        rc = tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory", base);
    for (int i = 0; !rc && i < 2; i++)
        snprintf(path[i], n, "%s.%s", base, ext[i]);
    if (!rc) {
        pthread_mutex_lock(&draw_lock);
        for (int i = 0; !rc && i < 2; i++) {
            if (!have_driver(drivers[i]))
                rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: PLplot has no %s driver (Debian: apt-get install %s)",
                                path[i], drivers[i], i == 0 ? "plplot-driver-cairo" : "libplplot17");
            else
                rc = render_one(drivers[i], path[i], draw, fig, rgb, ncol, &buf[i], &len[i], err);
        }
        pthread_mutex_unlock(&draw_lock);
    }
    for (int i = 0; !rc && i < 2; i++)
        rc = write_whole(path[i], buf[i], len[i], err);
    for (int i = 0; i < 2; i++) {
        free(buf[i]);
        free(path[i]);
    }
    return rc;
}

/* ------------------------------------------------------------------ checks */

static int bad(struct tb_err *err, const char *base, const char *what)
{
    return tb_err_set(err, TB_ERR_CONFIG, "%s: cannot draw it: %s", base, what);
}

static int check_names(struct tb_err *err, const char *base, const char *what, const char *const *names, size_t n)
{
    if (n && !names)
        return tb_err_set(err, TB_ERR_CONFIG, "%s: cannot draw it: no %s names", base, what);
    for (size_t i = 0; i < n; i++)
        if (!names[i])
            return tb_err_set(err, TB_ERR_CONFIG, "%s: cannot draw it: %s %zu has no name", base, what, i + 1);
    return TB_OK;
}

int tb_fig_lines(const char *base, const struct tb_fig_lines *f, struct tb_err *err)
{
    if (!f->npanels || f->npanels > MAX_PANELS || !f->panels)
        return bad(err, base, "a line chart has 1 to 4 panels");
    if (f->n && !f->x)
        return bad(err, base, "no x values");
    for (size_t i = 0; i < f->n; i++)
        if (!isfinite(f->x[i]) || fabs(f->x[i]) > LIMIT)
            return tb_err_set(err, TB_ERR_CONFIG, "%s: cannot draw it: x value %zu is not a finite number within 1e300",
                              base, i + 1);
    for (size_t p = 0; p < f->npanels; p++) {
        const struct tb_fig_panel *pn = &f->panels[p];
        if (!pn->nseries || pn->nseries > MAX_SERIES || !pn->series)
            return tb_err_set(err, TB_ERR_CONFIG, "%s: cannot draw it: panel %zu has %zu series (1 to %d allowed)",
                              base, p + 1, pn->nseries, MAX_SERIES);
        for (size_t s = 0; s < pn->nseries; s++) {
            const struct tb_fig_series *sr = &pn->series[s];
            if (!sr->name)
                return tb_err_set(err, TB_ERR_CONFIG, "%s: cannot draw it: series %zu of panel %zu has no name", base,
                                  s + 1, p + 1);
            if (sr->n != f->n || (f->n && !sr->y))
                return tb_err_set(err, TB_ERR_CONFIG, "%s: cannot draw it: series '%s' has %zu values for %zu x values",
                                  base, sr->name, sr->y ? sr->n : 0, f->n);
        }
    }
    return render(base, fig_draw_lines, f, NULL, MAX_SERIES, err);
}

int tb_fig_bars(const char *base, const struct tb_fig_bars *f, struct tb_err *err)
{
    if (!f->nseries || f->nseries > MAX_SERIES || !f->series)
        return tb_err_set(err, TB_ERR_CONFIG, "%s: cannot draw it: a bar chart has 1 to %d series, not %zu", base,
                          MAX_SERIES, f->nseries);
    int rc = check_names(err, base, "category", f->categories, f->ncategories);
    if (rc)
        return rc;
    for (size_t s = 0; s < f->nseries; s++) {
        const struct tb_fig_bar_series *b = &f->series[s];
        if (!b->name)
            return tb_err_set(err, TB_ERR_CONFIG, "%s: cannot draw it: series %zu has no name", base, s + 1);
        if (b->n != f->ncategories || (f->ncategories && !b->value))
            return tb_err_set(err, TB_ERR_CONFIG, "%s: cannot draw it: series '%s' has %zu values for %zu categories",
                              base, b->name, b->value ? b->n : 0, f->ncategories);
    }
    if (!(f->ymax >= 0) || !isfinite(f->ymax))
        return bad(err, base, "ymax must be 0 (from the data) or a positive number");
    return render(base, fig_draw_bars, f, NULL, MAX_SERIES, err);
}

int tb_fig_grid(const char *base, const struct tb_fig_grid *f, struct tb_err *err)
{
    if (!f->nrows || f->nrows > MAX_GRID || !f->ncolumns || f->ncolumns > MAX_GRID)
        return tb_err_set(err, TB_ERR_CONFIG, "%s: cannot draw it: a grid of %zu x %zu cells (1 to %d each way)", base,
                          f->nrows, f->ncolumns, MAX_GRID);
    if (!f->ncategories || f->ncategories > MAX_CATEGORIES)
        return tb_err_set(err, TB_ERR_CONFIG, "%s: cannot draw it: %zu categories (1 to %d allowed)", base,
                          f->ncategories, MAX_CATEGORIES);
    int rc = check_names(err, base, "row", f->rows, f->nrows);
    rc = rc ? rc : check_names(err, base, "column", f->columns, f->ncolumns);
    rc = rc ? rc : check_names(err, base, "category", f->category_names, f->ncategories);
    if (rc)
        return rc;
    if (f->ncells != f->nrows * f->ncolumns || !f->cells)
        return tb_err_set(err, TB_ERR_CONFIG, "%s: cannot draw it: %zu cells for %zu rows x %zu columns", base,
                          f->cells ? f->ncells : 0, f->nrows, f->ncolumns);
    for (size_t i = 0; i < f->ncells; i++)
        if (f->cells[i] < -1 || f->cells[i] >= (int)f->ncategories)
            return tb_err_set(err, TB_ERR_CONFIG,
                              "%s: cannot draw it: cell %zu (row %zu, column %zu) has category %d (-1 to %zu allowed)",
                              base, i + 1, i / f->ncolumns + 1, i % f->ncolumns + 1, f->cells[i], f->ncategories - 1);
    unsigned rgb[MAX_CATEGORIES];
    for (size_t k = 0; k < f->ncategories; k++)
        rgb[k] = fig_category_rgb(f, k);
    return render(base, fig_draw_grid, f, rgb, (int)f->ncategories, err);
}

int tb_fig_timeline(const char *base, const struct tb_fig_timeline *f, struct tb_err *err)
{
    if (!f->ntracks || f->ntracks > MAX_TRACKS || !f->tracks)
        return tb_err_set(err, TB_ERR_CONFIG, "%s: cannot draw it: a timeline has 1 to %d tracks, not %zu", base,
                          MAX_TRACKS, f->ntracks);
    for (size_t t = 0; t < f->ntracks; t++) {
        const struct tb_fig_track *tr = &f->tracks[t];
        if (!tr->name)
            return tb_err_set(err, TB_ERR_CONFIG, "%s: cannot draw it: track %zu has no name", base, t + 1);
        if (tr->nspans && !tr->spans)
            return tb_err_set(err, TB_ERR_CONFIG, "%s: cannot draw it: track '%s' has no spans", base, tr->name);
        for (size_t i = 0; i < tr->nspans; i++) {
            const struct tb_fig_span *s = &tr->spans[i];
            if (!(fabs(s->start) <= LIMIT) || !(fabs(s->end) <= LIMIT) || s->end < s->start)
                return tb_err_set(err, TB_ERR_CONFIG,
                                  "%s: cannot draw it: span %zu of track '%s' is [%g, %g): the start and end must "
                                  "be finite (within 1e300), the end not before the start",
                                  base, i + 1, tr->name, s->start, s->end);
            if ((unsigned)s->kind >= TB_FIG_SPAN_KINDS)
                return tb_err_set(err, TB_ERR_CONFIG,
                                  "%s: cannot draw it: span %zu of track '%s' has kind %d (op, copy or gap allowed)",
                                  base, i + 1, tr->name, (int)s->kind);
        }
    }
    /* op blue, copy orange, gap grey (hatched over a lighter grey); then the lighter
     * shades of every other span. */
    static const unsigned rgb[2 * TB_FIG_SPAN_KINDS] = { 0x1f77b4, 0xff7f0e, 0x7f7f7f, 0x5fa2d4, 0xffad60, 0x7f7f7f };
    return render(base, fig_draw_timeline, f, rgb, 2 * TB_FIG_SPAN_KINDS, err);
}
