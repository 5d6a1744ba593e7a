/* figure_charts.c: the four charts of figure_internal.h, line charts (with log axes),
 * grouped bars, categorical grids and timelines, each drawn on the current PLplot stream
 * with figure_draw.h's primitives. */
#include "config.h"

#include "tools/figure_draw.h"
#include "tools/figure_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ line charts */

enum { MAX_LOG_TICKS = 40 };

/* A logarithmic y axis: the window in log10 units and its ticks (values, not logs). */
struct log_axis {
    double lo, hi;
    double tick[MAX_LOG_TICKS];
    int nticks;
};

/* Ticks at 1, 2 and 5 times the powers of ten over few decades, at the powers alone
 * (every other one past 8 decades) over more; the window runs from the last tick at or
 * below min to the first at or above max. */
static struct log_axis log_axis(double min, double max)
{
    struct log_axis a = { 0 };
    if (!(min <= max) || !(min > 0))
        min = 1, max = 10;
    if (min == max)
        min /= 2, max *= 2;
    const double lmin = log10(min), lmax = log10(max), decades = lmax - lmin;
    static const double m125[3] = { 1, 2, 5 };
    const int nm = decades <= 2.5 ? 3 : 1, every = decades > 8 ? (int)ceil(decades / 8) : 1;
    a.lo = -INFINITY;
    a.hi = INFINITY;
    for (int pass = 0; pass < 2; pass++) {
        for (int k = (int)floor(lmin) - 2; k <= (int)ceil(lmax) + 2; k++) {
            if (k % every)
                continue;
            for (int j = 0; j < nm; j++) {
                const double t = m125[j] * pow(10, k), lt = log10(t);
                if (pass == 0) { /* the window */
                    if (lt <= lmin + 1e-9 && lt > a.lo)
                        a.lo = lt;
                    if (lt >= lmax - 1e-9 && lt < a.hi)
                        a.hi = lt;
                } else if (lt >= a.lo - 1e-9 && lt <= a.hi + 1e-9 && a.nticks < MAX_LOG_TICKS) {
                    a.tick[a.nticks++] = t;
                }
            }
        }
    }
    if (!isfinite(a.lo) || !isfinite(a.hi) || a.hi <= a.lo)
        a.lo = floor(lmin), a.hi = ceil(lmax) > a.lo ? ceil(lmax) : a.lo + 1;
    return a;
}

static int log_tick_chars(const struct log_axis *a)
{
    char s[64];
    int w = 1;
    for (int i = 0; i < a->nticks; i++) {
        int n = snprintf(s, sizeof s, "%g", a->tick[i]);
        w = n > w ? n : w;
    }
    return w;
}

/* The grid lines and labels of a log axis over the current window (x from xlo to xhi). */
static void log_axis_draw(const struct log_axis *a, double xlo, double xhi)
{
    char s[64];
    for (int i = 0; i < a->nticks; i++) {
        const double lt = log10(a->tick[i]);
        PLFLT x[2] = { xlo, xhi }, y[2] = { lt, lt };
        fig_color(C_GRID);
        plline(2, x, y);
        snprintf(s, sizeof s, "%g", a->tick[i]);
        fig_color(C_FG);
        plschr(0, SIZE_TICKS);
        fig_mtex("lv", 0.6, (lt - a->lo) / (a->hi - a->lo), 1.0, s);
    }
}

/* The panels' y values to draw: log10 of each for a log axis (NaN where <= 0), else the
 * caller's own. One block holds the copies; the caller frees *block. */
static const double **panel_values(const struct tb_fig_lines *f, double **block)
{
    size_t total = 0, ptrs = 0;
    for (size_t p = 0; p < f->npanels; p++) {
        ptrs += f->panels[p].nseries;
        if (f->panels[p].log_y)
            total += f->panels[p].nseries * f->n;
    }
    const double **ys = malloc((ptrs ? ptrs : 1) * sizeof *ys);
    *block = malloc((total ? total : 1) * sizeof **block);
    if (!ys || !*block) {
        free(ys);
        free(*block);
        *block = NULL;
        return NULL;
    }
    double *b = *block;
    size_t k = 0;
    for (size_t p = 0; p < f->npanels; p++)
        for (size_t s = 0; s < f->panels[p].nseries; s++) {
            const double *y = f->panels[p].series[s].y;
            if (f->panels[p].log_y) {
                for (size_t i = 0; i < f->n; i++)
                    b[i] = y[i] > 0 && isfinite(y[i]) ? log10(y[i]) : NAN;
                ys[k++] = b;
                b += f->n;
            } else {
                ys[k++] = y;
            }
        }
    return ys;
}

const char *fig_draw_lines(const void *arg)
{
    const struct tb_fig_lines *f = arg;
    const struct page pg = fig_page_start();
    /* The x axis, shared: whole numbers for epochs, a margin so no marker sits on the frame. */
    double xlo = INFINITY, xhi = -INFINITY;
    for (size_t i = 0; i < f->n; i++)
        xlo = fmin(xlo, f->x[i]), xhi = fmax(xhi, f->x[i]);
    struct axis ax = { 0 };
    if (!(xlo <= xhi))
        xlo = 0, xhi = 1;
    double span = xhi - xlo;
    ax.step = fig_nice_step(span > 0 ? span : 1, 8, f->integer_x);
    ax.decimals = fig_decimals_of(ax.step);
    double pad = span > 0 ? span * 0.04 : f->integer_x ? 1 : 0.5;
    ax.lo = xlo - pad;
    ax.hi = xhi + pad;

    double *block = NULL;
    const double **ys = panel_values(f, &block);
    struct legend *leg = calloc(f->npanels, sizeof *leg);
    struct log_axis *lax = calloc(f->npanels, sizeof *lax);
    if (!ys || !leg || !lax) {
        free(ys);
        free(block);
        free(leg);
        free(lax);
        return "out of memory";
    }
    /* The y axes first: the widest tick label sets the left margin of every panel. */
    struct axis ay[MAX_PANELS];
    int ychars = 1;
    double lchars = 0;
    for (size_t p = 0, k = 0; p < f->npanels; p++) {
        const struct tb_fig_panel *pn = &f->panels[p];
        double lo = INFINITY, hi = -INFINITY;
        for (size_t s = 0; s < pn->nseries; s++) {
            for (size_t i = 0; i < f->n; i++) {
                double v = ys[k + s][i];
                if (isfinite(v))
                    lo = fmin(lo, v), hi = fmax(hi, v);
            }
            fig_legend_add(&leg[p], LEG_LINE, C_PALETTE + (int)s, (int)s, pn->series[s].name);
        }
        k += pn->nseries;
        int c;
        if (pn->log_y) {
            lax[p] = log_axis(lo <= hi ? pow(10, lo) : NAN, lo <= hi ? pow(10, hi) : NAN);
            ay[p] = (struct axis){ lax[p].lo, lax[p].hi, 1, 0 };
            c = log_tick_chars(&lax[p]);
        } else {
            ay[p] = fig_value_axis(lo, hi, pn->from_zero, 5);
            c = fig_tick_chars(&ay[p]);
        }
        ychars = c > ychars ? c : ychars;
        double lc = fig_legend_chars(&leg[p]);
        lchars = lc > lchars ? lc : lchars;
    }

    const double left = fig_left_margin(&pg, ychars);
    const double right = 1.0 - fig_legend_room(&pg, lchars);
    const double bottom = fig_text_h(&pg, 4.2, SIZE_LABEL), top = 1.0 - fig_text_h(&pg, 3.0, SIZE_TITLE);
    const double gap = fig_text_h(&pg, 1.5, SIZE_LABEL);
    const double ph = (top - bottom - gap * (double)(f->npanels - 1)) / (double)f->npanels;
    for (size_t p = 0, k = 0; p < f->npanels; p++) {
        const struct tb_fig_panel *pn = &f->panels[p];
        const double y1 = top - (double)p * (ph + gap), y0 = y1 - ph;
        const bool last = p + 1 == f->npanels;
        struct axis axes[2] = { ax, ay[p] };
        plvpor(left, right, y0, y1);
        plwind(ax.lo, ax.hi, ay[p].lo, ay[p].hi);
        plslabelfunc(fig_tick_label, axes);
        plschr(0, SIZE_TICKS);
        plwidth(1.0);
        fig_color(C_GRID);
        plbox("g", ax.step, 0, pn->log_y ? "" : "g", ay[p].step, 0);
        if (pn->log_y)
            log_axis_draw(&lax[p], ax.lo, ax.hi);
        fig_color(C_FG);
        plschr(0, SIZE_TICKS);
        plbox(last ? "bcnto" : "bct", ax.step, 0, pn->log_y ? "bc" : "bcntvo", ay[p].step, 0);
        plschr(0, SIZE_LABEL);
        fig_mtex("l", fig_ylabel_disp(ychars), 0.5, 0.5, pn->ylabel);
        if (last)
            fig_mtex("b", 3.0, 0.5, 0.5, f->xlabel);
        if (p == 0)
            fig_title(f->title);
        bool any = false;
        for (size_t s = 0; s < pn->nseries; s++) {
            const double *y = ys[k + s];
            fig_color(C_PALETTE + (int)s);
            plwidth(2.5);
            pllsty(fig_line_style((int)s));
            /* Runs of finite points, each one line. */
            for (size_t i = 0; i < f->n;) {
                while (i < f->n && !isfinite(y[i]))
                    i++;
                size_t j = i;
                while (j < f->n && isfinite(y[j]))
                    j++;
                if (j - i >= 2)
                    plline((PLINT)(j - i), f->x + i, y + i);
                for (size_t q = i; q < j; q++)
                    fig_marker(&pg, (int)s, f->x[q], y[q], 3.2);
                any = any || j > i;
                i = j;
            }
        }
        k += pn->nseries;
        plwidth(1.0);
        pllsty(1);
        if (pn->note)
            fig_note(pn->note);
        else if (!any)
            fig_note("no data");
        fig_legend_draw(&leg[p], right, y1);
        plslabelfunc(NULL, NULL);
    }
    free(ys);
    free(block);
    free(leg);
    free(lax);
    return NULL;
}

/* ------------------------------------------------------------------ bars */

const char *fig_draw_bars(const void *arg)
{
    const struct tb_fig_bars *f = arg;
    const struct page pg = fig_page_start();
    double lo = INFINITY, hi = -INFINITY;
    bool published = false;
    struct legend leg = { 0 };
    for (size_t s = 0; s < f->nseries; s++) {
        const struct tb_fig_bar_series *b = &f->series[s];
        for (size_t c = 0; c < f->ncategories; c++) {
            double v = b->value[c], r = b->published ? b->published[c] : NAN;
            if (isfinite(v))
                lo = fmin(lo, v), hi = fmax(hi, v);
            if (isfinite(r))
                lo = fmin(lo, r), hi = fmax(hi, r), published = true;
        }
        fig_legend_add(&leg, LEG_BOX, C_PALETTE + (int)s, 0, b->name);
    }
    if (published)
        fig_legend_add(&leg, LEG_MARK, C_REF, 0, "published");
    if (f->ymax > 0)
        hi = f->ymax, lo = fmin(lo, 0);
    struct axis ay = fig_value_axis(lo, hi, true, 5);
    if (f->ymax > 0)
        ay.hi = f->ymax;
    else if (f->value_decimals >= 0 && hi > 0)
        ay.hi = fmax(ay.hi, hi * (f->note ? 1.4 : 1.08)); /* room for the labels over the tallest bar,
                                                           * and for the note above them */
    const int ychars = fig_tick_chars(&ay);
    const double right = 1.0 - fig_legend_room(&pg, fig_legend_chars(&leg));
    const double left = fig_left_margin(&pg, ychars);

    /* Category names: across when they fit under their bars, else upright. */
    const double ncat = f->ncategories ? (double)f->ncategories : 1;
    const double cat_chars = fig_longest(f->categories, f->ncategories);
    bool upright;
    const double cat_room = fig_category_room(&pg, cat_chars, ncat, left, right, &upright);
    const double bottom = cat_room + fig_text_h(&pg, 2.6, SIZE_LABEL), top = 1.0 - fig_text_h(&pg, 3.0, SIZE_TITLE);

    plvpor(left, right, bottom, top);
    plwind(-0.5, ncat - 0.5, ay.lo, ay.hi);
    struct axis axes[2] = { ay, ay };
    plslabelfunc(fig_tick_label, axes);
    plschr(0, SIZE_TICKS);
    fig_color(C_GRID);
    plbox("", 0, 0, "g", ay.step, 0);
    const double group = 0.8, bw = group / (double)f->nseries;
    double wx, wy;
    fig_world_per_mm(&pg, &wx, &wy);
    /* Value labels upright when they are wider than a bar. */
    const int vdec = f->value_decimals > 6 ? 6 : f->value_decimals;
    const bool value_upright = vdec >= 0 && (0.75 * SIZE_SMALL * pg.ch_mm * (double)(vdec + 3)) * wx > bw * 0.95;
    for (size_t c = 0; c < f->ncategories; c++) {
        for (size_t s = 0; s < f->nseries; s++) {
            const struct tb_fig_bar_series *b = &f->series[s];
            const double x0 = (double)c - group / 2 + bw * (double)s, x1 = x0 + bw, xm = (x0 + x1) / 2;
            const double v = b->value[c], base = fmax(ay.lo, 0), r = b->published ? b->published[c] : NAN;
            if (isfinite(v)) {
                fig_color(C_PALETTE + (int)s);
                fig_rect(x0 + bw * 0.05, base, x1 - bw * 0.05, v);
            }
            if (vdec >= 0) {
                char t[64];
                if (isfinite(v))
                    snprintf(t, sizeof t, "%.*f", vdec, v);
                else
                    snprintf(t, sizeof t, "n/a");
                /* over the bar; over its published mark too where the mark would cross the label */
                const double bar_top = isfinite(v) ? v : base;
                const double label_h =
                    (value_upright ? 0.75 * (double)(vdec + 3) : 1.6) * SIZE_SMALL * pg.ch_mm * wy + 1.2 * wy;
                const bool crossed = isfinite(r) && r >= bar_top && r <= bar_top + label_h;
                const double y = crossed ? r + 2.4 * wy : bar_top + 1.2 * wy;
                plschr(0, SIZE_SMALL);
                fig_color(C_FG);
                if (value_upright)
                    fig_ptex(xm, y, 0, 1, 0.0, t);
                else
                    fig_ptex(xm, y + 0.5 * SIZE_SMALL * pg.ch_mm * wy, 1, 0, 0.5, t);
            }
            if (isfinite(r)) {
                fig_color(C_REF);
                plwidth(4.0);
                PLFLT lx[2] = { x0 - bw * 0.08, x1 + bw * 0.08 }, ly[2] = { r, r };
                plline(2, lx, ly);
                plwidth(1.0);
            }
        }
    }
    plschr(0, SIZE_TICKS);
    fig_color(C_FG);
    plbox("bc", 0, 0, "bcntvo", ay.step, 0);
    for (size_t c = 0; c < f->ncategories; c++) {
        const double pos = ((double)c + 0.5) / ncat;
        if (upright)
            fig_mtex("bv", 0.6, pos, 1.0, f->categories[c]);
        else
            fig_mtex("b", 1.4, pos, 0.5, f->categories[c]);
    }
    plschr(0, SIZE_LABEL);
    fig_mtex("l", fig_ylabel_disp(ychars), 0.5, 0.5, f->ylabel);
    const double xlabel_disp = (cat_room / fig_text_h(&pg, 1.0, SIZE_LABEL)) + 1.2;
    fig_mtex("b", xlabel_disp, 0.5, 0.5, f->xlabel);
    fig_title(f->title);
    if (f->note)
        fig_note(f->note);
    else if (!f->ncategories)
        fig_note("no data");
    fig_legend_draw(&leg, right, top);
    plslabelfunc(NULL, NULL);
    return NULL;
}

/* ------------------------------------------------------------------ grids */

/* Black or white, whichever reads better on 0xRRGGBB. */
static int text_on(unsigned rgb)
{
    double r = (rgb >> 16 & 255) / 255.0, g = (rgb >> 8 & 255) / 255.0, b = (rgb & 255) / 255.0;
    return 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.55 ? C_FG : C_BG;
}

unsigned fig_category_rgb(const struct tb_fig_grid *f, size_t i)
{
    return f->category_rgb ? f->category_rgb[i] & 0xffffff : fig_palette[i % MAX_SERIES];
}

const char *fig_draw_grid(const void *arg)
{
    const struct tb_fig_grid *f = arg;
    const struct page pg = fig_page_start();
    struct legend leg = { .always = true };
    for (size_t k = 0; k < f->ncategories; k++)
        fig_legend_add(&leg, LEG_BOX, C_PALETTE + (int)k, 0, f->category_names[k]);
    const double nc = (double)f->ncolumns, nr = (double)f->nrows;
    const double row_chars = fig_longest(f->rows, f->nrows), col_chars = fig_longest(f->columns, f->ncolumns);
    const double left = fig_left_margin(&pg, row_chars);
    const double right = 1.0 - fig_legend_room(&pg, fig_legend_chars(&leg));
    bool upright;
    const double col_room = fig_category_room(&pg, col_chars, nc, left, right, &upright);
    const double bottom = col_room + fig_text_h(&pg, 2.6, SIZE_LABEL), top = 1.0 - fig_text_h(&pg, 3.0, SIZE_TITLE);
    plvpor(left, right, bottom, top);
    plwind(0, nc, 0, nr);
    double wx, wy;
    fig_world_per_mm(&pg, &wx, &wy);
    /* Cell labels at a size that fits the cell's width and height. */
    double cell_chars = 1;
    for (size_t i = 0; f->text && i < f->ncells; i++)
        cell_chars = f->text[i] && strlen(f->text[i]) > cell_chars ? (double)strlen(f->text[i]) : cell_chars;
    const double cell_w_mm = 1.0 / wx, cell_h_mm = 1.0 / wy;
    double tsize = fmin(SIZE_LABEL, 0.9 * cell_w_mm / (0.75 * pg.ch_mm * cell_chars));
    tsize = fmin(tsize, 0.6 * cell_h_mm / pg.ch_mm);
    for (size_t r = 0; r < f->nrows; r++) {
        for (size_t c = 0; c < f->ncolumns; c++) {
            const size_t i = r * f->ncolumns + c;
            const double x0 = (double)c, y0 = nr - 1 - (double)r;
            const int k = f->cells[i];
            if (k >= 0) {
                fig_color(C_PALETTE + k);
                fig_rect(x0, y0, x0 + 1, y0 + 1);
            }
            fig_color(C_BG);
            plwidth(2.0);
            fig_rect_outline(x0, y0, x0 + 1, y0 + 1);
            plwidth(1.0);
            if (f->text && f->text[i] && tsize > 0.2) {
                plschr(0, tsize);
                fig_color(k >= 0 ? text_on(fig_category_rgb(f, (size_t)k)) : C_FG);
                fig_ptex(x0 + 0.5, y0 + 0.5, 1, 0, 0.5, f->text[i]);
            }
        }
    }
    plschr(0, SIZE_TICKS);
    fig_color(C_FG);
    plbox("bc", 0, 0, "bc", 0, 0);
    for (size_t c = 0; c < f->ncolumns; c++) {
        const double pos = ((double)c + 0.5) / nc;
        if (upright)
            fig_mtex("bv", 0.6, pos, 1.0, f->columns[c]);
        else
            fig_mtex("b", 1.4, pos, 0.5, f->columns[c]);
    }
    for (size_t r = 0; r < f->nrows; r++)
        fig_mtex("lv", 0.6, (nr - 0.5 - (double)r) / nr, 1.0, f->rows[r]);
    plschr(0, SIZE_LABEL);
    fig_mtex("l", fig_ylabel_disp(row_chars), 0.5, 0.5, f->ylabel);
    fig_mtex("b", col_room / fig_text_h(&pg, 1.0, SIZE_LABEL) + 1.2, 0.5, 0.5, f->xlabel);
    fig_title(f->title);
    fig_legend_draw(&leg, right, top);
    return NULL;
}

/* ------------------------------------------------------------------ timelines */

static const char *const span_names[TB_FIG_SPAN_KINDS] = { "op", "copy", "gap" };

const char *fig_draw_timeline(const void *arg)
{
    const struct tb_fig_timeline *f = arg;
    const struct page pg = fig_page_start();
    struct legend leg = { .always = true };
    for (int k = 0; k < TB_FIG_SPAN_KINDS; k++)
        fig_legend_add(&leg, k == TB_FIG_SPAN_GAP ? LEG_HATCH : LEG_BOX, C_PALETTE + k, 0,
                       f->kind_names[k] ? f->kind_names[k] : span_names[k]);
    double lo = INFINITY, hi = -INFINITY;
    const char *names[MAX_TRACKS];
    for (size_t t = 0; t < f->ntracks; t++) {
        names[t] = f->tracks[t].name;
        for (size_t i = 0; i < f->tracks[t].nspans; i++)
            lo = fmin(lo, f->tracks[t].spans[i].start), hi = fmax(hi, f->tracks[t].spans[i].end);
    }
    const bool any = lo <= hi;
    struct axis ax = fig_value_axis(any ? lo : 0, any ? hi : 1, false, 8);
    if (any && lo >= 0 && ax.lo < 0)
        ax.lo = 0;
    const double nt = (double)f->ntracks;
    const double left = fig_text_w(&pg, fig_longest(names, f->ntracks) * 1.1 + 2.5, SIZE_TICKS);
    const double right = 1.0 - fig_legend_room(&pg, fig_legend_chars(&leg));
    const double bottom = fig_text_h(&pg, 4.2, SIZE_LABEL), top = 1.0 - fig_text_h(&pg, 3.0, SIZE_TITLE);
    plvpor(left, right, bottom, top);
    plwind(ax.lo, ax.hi, 0, nt);
    struct axis axes[2] = { ax, ax };
    plslabelfunc(fig_tick_label, axes);
    plschr(0, SIZE_TICKS);
    fig_color(C_GRID);
    plbox("g", ax.step, 0, "", 0, 0);
    for (size_t t = 0; t < f->ntracks; t++) {
        const double y0 = nt - 1 - (double)t + 0.15, y1 = y0 + 0.7;
        size_t nth[TB_FIG_SPAN_KINDS] = { 0 };
        for (size_t i = 0; i < f->tracks[t].nspans; i++) {
            const struct tb_fig_span *s = &f->tracks[t].spans[i];
            const size_t odd = nth[s->kind]++ % 2;
            if (s->end <= s->start)
                continue;
            if (s->kind == TB_FIG_SPAN_GAP) {
                fig_color(C_GRID);
                fig_rect(s->start, y0, s->end, y1);
                fig_color(C_PALETTE + TB_FIG_SPAN_GAP);
                plpsty(3);
                fig_rect(s->start, y0, s->end, y1);
                plpsty(0);
            } else {
                /* every other span of a kind lighter, so that spans end to end stay apart */
                fig_color(C_PALETTE + (int)s->kind + (odd ? TB_FIG_SPAN_KINDS : 0));
                fig_rect(s->start, y0, s->end, y1);
            }
        }
    }
    fig_color(C_FG);
    plbox("bcnto", ax.step, 0, "bc", 0, 0);
    for (size_t t = 0; t < f->ntracks; t++)
        fig_mtex("lv", 0.6, (nt - 0.5 - (double)t) / nt, 1.0, f->tracks[t].name);
    plschr(0, SIZE_LABEL);
    fig_mtex("b", 3.0, 0.5, 0.5, f->xlabel ? f->xlabel : "time (ms)");
    fig_title(f->title);
    if (!any)
        fig_note("no data");
    fig_legend_draw(&leg, right, top);
    plslabelfunc(NULL, NULL);
    return NULL;
}
