/* figure.c: line charts, grouped bars, categorical grids and timelines as PNG and SVG
 * (figure_internal.h), drawn with PLplot.
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

enum {
    PAGE_W = 1200, /* pixels of the PNG; points of the SVG */
    PAGE_H = 800,
    MAX_SERIES = 16,
    MAX_PANELS = 4,
    MAX_GRID = 64,
    MAX_CATEGORIES = 16,
    MAX_TRACKS = 32,
    TEXT_MAX = 256, /* a label, escaped for PLplot, is cut here */
};

/* The largest magnitude of an x value or span end (so that every length on an axis is
 * finite); a value axis stops there too, and what lies beyond is clipped. */
#define LIMIT 1e300

/* cmap0: fixed entries, then the figure's series or categories. */
enum { C_BG, C_FG, C_GRID, C_MUTED, C_REF, C_PALETTE };

/* A palette that stays apart for the common kinds of colour blindness in its first
 * entries (blue, orange, green, vermillion ...). */
static const unsigned palette[MAX_SERIES] = {
    0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd, 0x8c564b, 0xe377c2, 0x7f7f7f,
    0xbcbd22, 0x17becf, 0x393b79, 0xad494a, 0x637939, 0x8c6d31, 0x7b4173, 0x3182bd,
};

/* Text sizes, times PLplot's default character height. */
#define SIZE_TICKS 0.8
#define SIZE_LABEL 0.9
#define SIZE_TITLE 1.1
#define SIZE_SMALL 0.65

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

/* ------------------------------------------------------------------ text and numbers */

/* src for PLplot, whose escape character is '#': "##" is a literal one. Cut at cap. */
static const char *esc(char *dst, size_t cap, const char *src)
{
    size_t o = 0;
    const char *p = src ? src : "";
    for (; *p && o + 2 < cap; p++) {
        if (*p == '#')
            dst[o++] = '#';
        dst[o++] = *p;
    }
    if (*p) /* cut: not inside a UTF-8 sequence */
        while (o > 0 && ((unsigned char)dst[o - 1] & 0xc0) == 0x80)
            o--;
    if (*p && o > 0 && (unsigned char)dst[o - 1] >= 0xc0)
        o--;
    dst[o] = '\0';
    return dst;
}

/* plmtex and plptex with the text escaped. */
static void mtex(const char *side, double disp, double pos, double just, const char *text)
{
    char buf[TEXT_MAX];
    plmtex(side, disp, pos, just, esc(buf, sizeof buf, text));
}

static void ptex(double x, double y, double dx, double dy, double just, const char *text)
{
    char buf[TEXT_MAX];
    plptex(x, y, dx, dy, just, esc(buf, sizeof buf, text));
}

static void color(int icol)
{
    plcol0(icol);
}

/* An axis: its window, the step between ticks and the decimals its labels need. */
struct axis {
    double lo, hi, step;
    int decimals;
};

/* 1, 2, 2.5 or 5 times a power of ten near span / target (whole numbers when integer). */
static double nice_step(double span, int target, bool integer)
{
    double raw = span / target;
    if (!(raw > 0) || !isfinite(raw))
        return 1;
    double mag = pow(10, floor(log10(raw))), r = raw / mag;
    double m = r <= 1 ? 1 : r <= 2 ? 2 : r <= 2.5 && !(integer && mag < 10) ? 2.5 : r <= 5 ? 5 : 10;
    double step = m * mag;
    return integer && step < 1 ? 1 : step;
}

static int decimals_of(double step)
{
    for (int d = 0; d < 6; d++) {
        double s = step * pow(10, d);
        if (fabs(s - round(s)) < 1e-6 * s)
            return d;
    }
    return 6;
}

/* An axis over [lo, hi] (no finite value: lo > hi, then 0..1), its ends on ticks. */
static struct axis value_axis(double lo, double hi, bool from_zero, int target)
{
    if (!(lo <= hi))
        lo = 0, hi = 1;
    lo = fmax(lo, -LIMIT), hi = fmin(hi, LIMIT); /* hi - lo stays finite */
    if (from_zero)
        lo = lo > 0 ? 0 : lo, hi = hi < 0 ? 0 : hi;
    if (hi == lo) {
        double d = lo != 0 ? fabs(lo) * 0.1 : 1;
        lo = from_zero && lo >= 0 ? lo : lo - d;
        hi += d;
    }
    struct axis a = { 0 };
    a.step = nice_step(hi - lo, target, false);
    a.lo = floor(lo / a.step + 1e-9) * a.step;
    a.hi = ceil(hi / a.step - 1e-9) * a.step;
    a.decimals = decimals_of(a.step);
    return a;
}

/* PLplot's tick label callback: the axis's decimals, and no "-0". */
static void tick_label(PLINT axis, PLFLT value, char *label, PLINT length, PLPointer data)
{
    const struct axis *ax = (const struct axis *)data + (axis == PL_Y_AXIS ? 1 : 0);
    if (fabs(value) < ax->step * 1e-6)
        value = 0;
    if (fabs(value) >= 1e7)
        snprintf(label, (size_t)length, "%.3g", value);
    else
        snprintf(label, (size_t)length, "%.*f", ax->decimals, value);
}

/* Width of a tick label of `a`, in characters. */
static int tick_chars(const struct axis *a)
{
    char s[64];
    int w = 1;
    int count = 0;
    for (double v = a->lo; v <= a->hi + a->step * 0.5 && count++ < 100; v += a->step) {
        int n = snprintf(s, sizeof s, "%.*f", a->decimals, fabs(v) < a->step * 1e-6 ? 0.0 : v);
        w = n > w ? n : w;
    }
    return w;
}

/* ------------------------------------------------------------------ page geometry */

/* Sizes on the page, for laying out in normalised coordinates (0..1 of the page). */
struct page {
    double w_mm, h_mm; /* the page */
    double ch_mm;      /* PLplot's default character height */
};

/* Starts the figure's one page (PLplot knows the page's size from then on). */
static struct page page_start(void)
{
    struct page p;
    double x0, x1, y0, y1, def, ht;
    pladv(0);
    plgspa(&x0, &x1, &y0, &y1);
    plgchr(&def, &ht);
    p.w_mm = x1 - x0;
    p.h_mm = y1 - y0;
    p.ch_mm = def;
    return p;
}

/* n characters at `size`: widths (a digit or an average glyph of DejaVu Sans is ~0.8 of
 * PLplot's character height) and heights, as page fractions. */
static double text_w(const struct page *p, double n, double size)
{
    return n * 0.8 * size * p->ch_mm / p->w_mm;
}

static double text_h(const struct page *p, double n, double size)
{
    return n * size * p->ch_mm / p->h_mm;
}

static double longest(const char *const *s, size_t n)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l = s[i] ? strlen(s[i]) : 0;
        m = l > m ? l : m;
    }
    return (double)m;
}

/* The y axis title's distance from the frame, in its character heights (PLplot measures
 * to the middle of the text), past tick labels `chars` wide and the gap before them. */
static double ylabel_disp(double chars)
{
    return (0.6 + chars * 0.85) * SIZE_TICKS / SIZE_LABEL + 1.0;
}

/* The page's left margin for that title and those tick labels. */
static double left_margin(const struct page *p, double chars)
{
    return (ylabel_disp(chars) + 1.4) * SIZE_LABEL * p->ch_mm / p->w_mm;
}

/* Category labels of at most chars characters under n columns between left and right:
 * across when they fit, else upright (*upright); returns the page height they take. */
static double category_room(const struct page *p, double chars, double n, double left, double right, bool *upright)
{
    *upright = text_w(p, chars * 0.75 + 1, SIZE_TICKS) > (right - left) / n;
    return *upright ? text_w(p, chars, SIZE_TICKS) * p->w_mm / p->h_mm + text_h(p, 1.0, 1.0)
                    : text_h(p, 1.8, SIZE_TICKS);
}

/* Millimetres in world units of the current viewport, along x and y. */
static void world_per_mm(const struct page *p, double *wx, double *wy)
{
    double dx0, dx1, dy0, dy1, x0, x1, y0, y1;
    plgvpd(&dx0, &dx1, &dy0, &dy1);
    plgvpw(&x0, &x1, &y0, &y1);
    *wx = (x1 - x0) / ((dx1 - dx0) * p->w_mm);
    *wy = (y1 - y0) / ((dy1 - dy0) * p->h_mm);
}

static void rect(double x0, double y0, double x1, double y1)
{
    PLFLT x[4] = { x0, x1, x1, x0 }, y[4] = { y0, y0, y1, y1 };
    plfill(4, x, y);
}

static void rect_outline(double x0, double y0, double x1, double y1)
{
    PLFLT x[5] = { x0, x1, x1, x0, x0 }, y[5] = { y0, y0, y1, y1, y0 };
    plline(5, x, y);
}

/* A marker of series i (circle, square, triangle, diamond, ...) at (x, y), r mm across. */
static void marker(const struct page *p, int i, double x, double y, double r)
{
    double wx, wy;
    world_per_mm(p, &wx, &wy);
    static const int sides[5] = { 16, 4, 3, 4, 3 };
    static const double turn[5] = { 0, 0.125, 0.25, 0, 0.75 };
    const int k = i % 5, n = sides[k];
    PLFLT px[16], py[16];
    double rr = k == 1 ? r * 0.6 : r * 0.55;
    for (int j = 0; j < n; j++) {
        double a = 2 * M_PI * ((double)j / n + turn[k]);
        px[j] = x + rr * cos(a) * wx;
        py[j] = y + rr * sin(a) * wy;
    }
    plfill(n, px, py);
}

/* The title above the top panel (viewport set), centred over the page rather than the
 * plot area (a legend may take the right), and smaller where it would not fit the page. */
static void title(const char *t)
{
    PLFLT vx0, vx1, vy0, vy1, px0, px1, py0, py1;
    plgvpd(&vx0, &vx1, &vy0, &vy1);
    plgspa(&px0, &px1, &py0, &py1);
    double size = SIZE_TITLE;
    plschr(0, size);
    /* PLplot has no public string width: estimate it from the character height (mm)
     * and a proportional font's average advance, measured on the pngcairo figures at a
     * little under 0.7 of it (0.72: the margin errs on the side of fitting). */
    PLFLT def_ht, ht;
    plgchr(&def_ht, &ht);
    const double len = (double)strlen(t) * ht * 0.72, page = px1 - px0;
    if (len > 0.96 * page && len > 0) {
        size *= 0.96 * page / len;
        plschr(0, size);
    }
    color(C_FG);
    mtex("t", 1.2, vx1 > vx0 ? (0.5 - vx0) / (vx1 - vx0) : 0.5, 0.5, t);
    plschr(0, 1.0);
}

/* A note written across the middle of the current viewport. */
static void note(const char *t)
{
    plschr(0, SIZE_LABEL);
    color(C_MUTED);
    mtex("t", -3.0, 0.5, 0.5, t);
    plschr(0, 1.0);
}

/* ------------------------------------------------------------------ legends */

enum legend_kind { LEG_LINE, LEG_BOX, LEG_HATCH, LEG_MARK };

struct legend {
    int n;
    bool always; /* drawn even with one entry (categories, kinds of span) */
    char text[MAX_SERIES + 2][TEXT_MAX];
    const char *texts[MAX_SERIES + 2];
    PLINT opt[MAX_SERIES + 2], col[MAX_SERIES + 2], pattern[MAX_SERIES + 2], style[MAX_SERIES + 2];
    PLINT fg[MAX_SERIES + 2], symbol_n[MAX_SERIES + 2];
    PLFLT scale[MAX_SERIES + 2], width[MAX_SERIES + 2], symbol_scale[MAX_SERIES + 2];
    const char *symbol[MAX_SERIES + 2];
};

/* Series i's PLplot line style: solid, then dashes, so that a line hidden under the
 * next one shows through its gaps. */
static int line_style(int i)
{
    static const int styles[4] = { 1, 2, 3, 4 };
    return styles[i % 4];
}

static const char *const marker_glyph[5] = { "●", "■", "▲", "◆", "▼" };

static void legend_add(struct legend *l, enum legend_kind kind, int icol, int mark, const char *text)
{
    int i = l->n++;
    esc(l->text[i], sizeof l->text[i], text);
    l->texts[i] = l->text[i];
    l->opt[i] = kind == LEG_LINE   ? PL_LEGEND_LINE | PL_LEGEND_SYMBOL
                : kind == LEG_MARK ? PL_LEGEND_LINE
                                   : PL_LEGEND_COLOR_BOX;
    l->col[i] = icol;
    l->fg[i] = C_FG;
    l->pattern[i] = kind == LEG_HATCH ? 3 : 0;
    l->scale[i] = 0.8;
    l->width[i] = kind == LEG_MARK ? 4.0 : 2.5;
    l->style[i] = line_style(mark);
    l->symbol[i] = marker_glyph[mark % 5];
    l->symbol_scale[i] = 0.75; /* about the size of the markers on the lines */
    l->symbol_n[i] = 1;
}

/* Characters of the widest entry, for the room the legend needs; 0 when a legend would
 * say nothing the axis titles do not (a single line or set of bars). */
static double legend_chars(const struct legend *l)
{
    if (!l->always && l->n < 2)
        return 0;
    double m = 0;
    for (int i = 0; i < l->n; i++) {
        double c = (double)strlen(l->text[i]);
        m = c > m ? c : m;
    }
    return m;
}

/* The width (page fraction) right of the plot for a legend of `chars` characters (the
 * entries' samples, their text, the frame and a gap each side); a margin without one. */
static double legend_room(const struct page *p, double chars)
{
    if (chars == 0)
        return text_w(p, 2, SIZE_TICKS);
    return text_w(p, chars + 6.5, SIZE_LABEL) + 0.045;
}

/* Draws l in the page's right margin, left of the plot's right edge `right`, its top at
 * `top` (page fractions) -- unless legend_chars() said none is needed. */
static void legend_draw(struct legend *l, double right, double top)
{
    if (legend_chars(l) == 0)
        return;
    PLFLT w, h;
    plschr(0, SIZE_LABEL);
    pllegend(&w, &h, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX,
             PL_POSITION_LEFT | PL_POSITION_TOP | PL_POSITION_INSIDE | PL_POSITION_SUBPAGE, right + 0.015, 1.0 - top,
             0.06, C_BG, C_GRID, 1, 0, 1, l->n, l->opt, 0.8, 0.9, 2.0, 0.0, l->fg, l->texts, l->col, l->pattern,
             l->scale, l->width, l->col, l->style, l->width, l->col, l->symbol_scale, l->symbol_n, l->symbol);
    plschr(0, 1.0);
}

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
        color(C_GRID);
        plline(2, x, y);
        snprintf(s, sizeof s, "%g", a->tick[i]);
        color(C_FG);
        plschr(0, SIZE_TICKS);
        mtex("lv", 0.6, (lt - a->lo) / (a->hi - a->lo), 1.0, s);
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

static void draw_lines(const void *arg)
{
    const struct tb_fig_lines *f = arg;
    const struct page pg = page_start();
    /* The x axis, shared: whole numbers for epochs, a margin so no marker sits on the frame. */
    double xlo = INFINITY, xhi = -INFINITY;
    for (size_t i = 0; i < f->n; i++)
        xlo = fmin(xlo, f->x[i]), xhi = fmax(xhi, f->x[i]);
    struct axis ax = { 0 };
    if (!(xlo <= xhi))
        xlo = 0, xhi = 1;
    double span = xhi - xlo;
    ax.step = nice_step(span > 0 ? span : 1, 8, f->integer_x);
    ax.decimals = decimals_of(ax.step);
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
        keep_message("out of memory");
        return;
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
            legend_add(&leg[p], LEG_LINE, C_PALETTE + (int)s, (int)s, pn->series[s].name);
        }
        k += pn->nseries;
        int c;
        if (pn->log_y) {
            lax[p] = log_axis(lo <= hi ? pow(10, lo) : NAN, lo <= hi ? pow(10, hi) : NAN);
            ay[p] = (struct axis){ lax[p].lo, lax[p].hi, 1, 0 };
            c = log_tick_chars(&lax[p]);
        } else {
            ay[p] = value_axis(lo, hi, pn->from_zero, 5);
            c = tick_chars(&ay[p]);
        }
        ychars = c > ychars ? c : ychars;
        double lc = legend_chars(&leg[p]);
        lchars = lc > lchars ? lc : lchars;
    }

    const double left = left_margin(&pg, ychars);
    const double right = 1.0 - legend_room(&pg, lchars);
    const double bottom = text_h(&pg, 4.2, SIZE_LABEL), top = 1.0 - text_h(&pg, 3.0, SIZE_TITLE);
    const double gap = text_h(&pg, 1.5, SIZE_LABEL);
    const double ph = (top - bottom - gap * (double)(f->npanels - 1)) / (double)f->npanels;
    for (size_t p = 0, k = 0; p < f->npanels; p++) {
        const struct tb_fig_panel *pn = &f->panels[p];
        const double y1 = top - (double)p * (ph + gap), y0 = y1 - ph;
        const bool last = p + 1 == f->npanels;
        struct axis axes[2] = { ax, ay[p] };
        plvpor(left, right, y0, y1);
        plwind(ax.lo, ax.hi, ay[p].lo, ay[p].hi);
        plslabelfunc(tick_label, axes);
        plschr(0, SIZE_TICKS);
        plwidth(1.0);
        color(C_GRID);
        plbox("g", ax.step, 0, pn->log_y ? "" : "g", ay[p].step, 0);
        if (pn->log_y)
            log_axis_draw(&lax[p], ax.lo, ax.hi);
        color(C_FG);
        plschr(0, SIZE_TICKS);
        plbox(last ? "bcnto" : "bct", ax.step, 0, pn->log_y ? "bc" : "bcntvo", ay[p].step, 0);
        plschr(0, SIZE_LABEL);
        mtex("l", ylabel_disp(ychars), 0.5, 0.5, pn->ylabel);
        if (last)
            mtex("b", 3.0, 0.5, 0.5, f->xlabel);
        if (p == 0)
            title(f->title);
        bool any = false;
        for (size_t s = 0; s < pn->nseries; s++) {
            const double *y = ys[k + s];
            color(C_PALETTE + (int)s);
            plwidth(2.5);
            pllsty(line_style((int)s));
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
                    marker(&pg, (int)s, f->x[q], y[q], 3.2);
                any = any || j > i;
                i = j;
            }
        }
        k += pn->nseries;
        plwidth(1.0);
        pllsty(1);
        if (pn->note)
            note(pn->note);
        else if (!any)
            note("no data");
        legend_draw(&leg[p], right, y1);
        plslabelfunc(NULL, NULL);
    }
    free(ys);
    free(block);
    free(leg);
    free(lax);
}

/* ------------------------------------------------------------------ bars */

static void draw_bars(const void *arg)
{
    const struct tb_fig_bars *f = arg;
    const struct page pg = page_start();
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
        legend_add(&leg, LEG_BOX, C_PALETTE + (int)s, 0, b->name);
    }
    if (published)
        legend_add(&leg, LEG_MARK, C_REF, 0, "published");
    if (f->ymax > 0)
        hi = f->ymax, lo = fmin(lo, 0);
    struct axis ay = value_axis(lo, hi, true, 5);
    if (f->ymax > 0)
        ay.hi = f->ymax;
    else if (f->value_decimals >= 0 && hi > 0)
        ay.hi = fmax(ay.hi, hi * (f->note ? 1.4 : 1.08)); /* room for the labels over the tallest bar,
                                                           * and for the note above them */
    const int ychars = tick_chars(&ay);
    const double right = 1.0 - legend_room(&pg, legend_chars(&leg));
    const double left = left_margin(&pg, ychars);

    /* Category names: across when they fit under their bars, else upright. */
    const double ncat = f->ncategories ? (double)f->ncategories : 1;
    const double cat_chars = longest(f->categories, f->ncategories);
    bool upright;
    const double cat_room = category_room(&pg, cat_chars, ncat, left, right, &upright);
    const double bottom = cat_room + text_h(&pg, 2.6, SIZE_LABEL), top = 1.0 - text_h(&pg, 3.0, SIZE_TITLE);

    plvpor(left, right, bottom, top);
    plwind(-0.5, ncat - 0.5, ay.lo, ay.hi);
    struct axis axes[2] = { ay, ay };
    plslabelfunc(tick_label, axes);
    plschr(0, SIZE_TICKS);
    color(C_GRID);
    plbox("", 0, 0, "g", ay.step, 0);
    const double group = 0.8, bw = group / (double)f->nseries;
    double wx, wy;
    world_per_mm(&pg, &wx, &wy);
    /* Value labels upright when they are wider than a bar. */
    const int vdec = f->value_decimals > 6 ? 6 : f->value_decimals;
    const bool value_upright = vdec >= 0 && (0.75 * SIZE_SMALL * pg.ch_mm * (double)(vdec + 3)) * wx > bw * 0.95;
    for (size_t c = 0; c < f->ncategories; c++) {
        for (size_t s = 0; s < f->nseries; s++) {
            const struct tb_fig_bar_series *b = &f->series[s];
            const double x0 = (double)c - group / 2 + bw * (double)s, x1 = x0 + bw, xm = (x0 + x1) / 2;
            const double v = b->value[c], base = fmax(ay.lo, 0), r = b->published ? b->published[c] : NAN;
            if (isfinite(v)) {
                color(C_PALETTE + (int)s);
                rect(x0 + bw * 0.05, base, x1 - bw * 0.05, v);
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
                color(C_FG);
                if (value_upright)
                    ptex(xm, y, 0, 1, 0.0, t);
                else
                    ptex(xm, y + 0.5 * SIZE_SMALL * pg.ch_mm * wy, 1, 0, 0.5, t);
            }
            if (isfinite(r)) {
                color(C_REF);
                plwidth(4.0);
                PLFLT lx[2] = { x0 - bw * 0.08, x1 + bw * 0.08 }, ly[2] = { r, r };
                plline(2, lx, ly);
                plwidth(1.0);
            }
        }
    }
    plschr(0, SIZE_TICKS);
    color(C_FG);
    plbox("bc", 0, 0, "bcntvo", ay.step, 0);
    for (size_t c = 0; c < f->ncategories; c++) {
        const double pos = ((double)c + 0.5) / ncat;
        if (upright)
            mtex("bv", 0.6, pos, 1.0, f->categories[c]);
        else
            mtex("b", 1.4, pos, 0.5, f->categories[c]);
    }
    plschr(0, SIZE_LABEL);
    mtex("l", ylabel_disp(ychars), 0.5, 0.5, f->ylabel);
    const double xlabel_disp = (cat_room / text_h(&pg, 1.0, SIZE_LABEL)) + 1.2;
    mtex("b", xlabel_disp, 0.5, 0.5, f->xlabel);
    title(f->title);
    if (f->note)
        note(f->note);
    else if (!f->ncategories)
        note("no data");
    legend_draw(&leg, right, top);
    plslabelfunc(NULL, NULL);
}

/* ------------------------------------------------------------------ grids */

/* Black or white, whichever reads better on 0xRRGGBB. */
static int text_on(unsigned rgb)
{
    double r = (rgb >> 16 & 255) / 255.0, g = (rgb >> 8 & 255) / 255.0, b = (rgb & 255) / 255.0;
    return 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.55 ? C_FG : C_BG;
}

static unsigned category_rgb(const struct tb_fig_grid *f, size_t i)
{
    return f->category_rgb ? f->category_rgb[i] & 0xffffff : palette[i % MAX_SERIES];
}

static void draw_grid(const void *arg)
{
    const struct tb_fig_grid *f = arg;
    const struct page pg = page_start();
    struct legend leg = { .always = true };
    for (size_t k = 0; k < f->ncategories; k++)
        legend_add(&leg, LEG_BOX, C_PALETTE + (int)k, 0, f->category_names[k]);
    const double nc = (double)f->ncolumns, nr = (double)f->nrows;
    const double row_chars = longest(f->rows, f->nrows), col_chars = longest(f->columns, f->ncolumns);
    const double left = left_margin(&pg, row_chars);
    const double right = 1.0 - legend_room(&pg, legend_chars(&leg));
    bool upright;
    const double col_room = category_room(&pg, col_chars, nc, left, right, &upright);
    const double bottom = col_room + text_h(&pg, 2.6, SIZE_LABEL), top = 1.0 - text_h(&pg, 3.0, SIZE_TITLE);
    plvpor(left, right, bottom, top);
    plwind(0, nc, 0, nr);
    double wx, wy;
    world_per_mm(&pg, &wx, &wy);
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
                color(C_PALETTE + k);
                rect(x0, y0, x0 + 1, y0 + 1);
            }
            color(C_BG);
            plwidth(2.0);
            rect_outline(x0, y0, x0 + 1, y0 + 1);
            plwidth(1.0);
            if (f->text && f->text[i] && tsize > 0.2) {
                plschr(0, tsize);
                color(k >= 0 ? text_on(category_rgb(f, (size_t)k)) : C_FG);
                ptex(x0 + 0.5, y0 + 0.5, 1, 0, 0.5, f->text[i]);
            }
        }
    }
    plschr(0, SIZE_TICKS);
    color(C_FG);
    plbox("bc", 0, 0, "bc", 0, 0);
    for (size_t c = 0; c < f->ncolumns; c++) {
        const double pos = ((double)c + 0.5) / nc;
        if (upright)
            mtex("bv", 0.6, pos, 1.0, f->columns[c]);
        else
            mtex("b", 1.4, pos, 0.5, f->columns[c]);
    }
    for (size_t r = 0; r < f->nrows; r++)
        mtex("lv", 0.6, (nr - 0.5 - (double)r) / nr, 1.0, f->rows[r]);
    plschr(0, SIZE_LABEL);
    mtex("l", ylabel_disp(row_chars), 0.5, 0.5, f->ylabel);
    mtex("b", col_room / text_h(&pg, 1.0, SIZE_LABEL) + 1.2, 0.5, 0.5, f->xlabel);
    title(f->title);
    legend_draw(&leg, right, top);
}

/* ------------------------------------------------------------------ timelines */

static const char *const span_names[TB_FIG_SPAN_KINDS] = { "op", "copy", "gap" };

static void draw_timeline(const void *arg)
{
    const struct tb_fig_timeline *f = arg;
    const struct page pg = page_start();
    struct legend leg = { .always = true };
    for (int k = 0; k < TB_FIG_SPAN_KINDS; k++)
        legend_add(&leg, k == TB_FIG_SPAN_GAP ? LEG_HATCH : LEG_BOX, C_PALETTE + k, 0,
                   f->kind_names[k] ? f->kind_names[k] : span_names[k]);
    double lo = INFINITY, hi = -INFINITY;
    const char *names[MAX_TRACKS];
    for (size_t t = 0; t < f->ntracks; t++) {
        names[t] = f->tracks[t].name;
        for (size_t i = 0; i < f->tracks[t].nspans; i++)
            lo = fmin(lo, f->tracks[t].spans[i].start), hi = fmax(hi, f->tracks[t].spans[i].end);
    }
    const bool any = lo <= hi;
    struct axis ax = value_axis(any ? lo : 0, any ? hi : 1, false, 8);
    if (any && lo >= 0 && ax.lo < 0)
        ax.lo = 0;
    const double nt = (double)f->ntracks;
    const double left = text_w(&pg, longest(names, f->ntracks) * 1.1 + 2.5, SIZE_TICKS);
    const double right = 1.0 - legend_room(&pg, legend_chars(&leg));
    const double bottom = text_h(&pg, 4.2, SIZE_LABEL), top = 1.0 - text_h(&pg, 3.0, SIZE_TITLE);
    plvpor(left, right, bottom, top);
    plwind(ax.lo, ax.hi, 0, nt);
    struct axis axes[2] = { ax, ax };
    plslabelfunc(tick_label, axes);
    plschr(0, SIZE_TICKS);
    color(C_GRID);
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
                color(C_GRID);
                rect(s->start, y0, s->end, y1);
                color(C_PALETTE + TB_FIG_SPAN_GAP);
                plpsty(3);
                rect(s->start, y0, s->end, y1);
                plpsty(0);
            } else {
                /* every other span of a kind lighter, so that spans end to end stay apart */
                color(C_PALETTE + (int)s->kind + (odd ? TB_FIG_SPAN_KINDS : 0));
                rect(s->start, y0, s->end, y1);
            }
        }
    }
    color(C_FG);
    plbox("bcnto", ax.step, 0, "bc", 0, 0);
    for (size_t t = 0; t < f->ntracks; t++)
        mtex("lv", 0.6, (nt - 0.5 - (double)t) / nt, 1.0, f->tracks[t].name);
    plschr(0, SIZE_LABEL);
    mtex("b", 3.0, 0.5, 0.5, f->xlabel ? f->xlabel : "time (ms)");
    title(f->title);
    if (!any)
        note("no data");
    legend_draw(&leg, right, top);
    plslabelfunc(NULL, NULL);
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

typedef void draw_fn(const void *fig);

/* Sets the stream's colours: cmap0's fixed entries, then ncol palette colours (rgb, or
 * the default palette when NULL). */
static void set_colors(const unsigned *rgb, int ncol)
{
    plscmap0n(C_PALETTE + ncol);
    plscol0(C_BG, 255, 255, 255);
    plscol0(C_FG, 0, 0, 0);
    plscol0(C_GRID, 0xdd, 0xdd, 0xdd);
    plscol0(C_MUTED, 0x66, 0x66, 0x66);
    plscol0(C_REF, 0, 0, 0);
    for (int i = 0; i < ncol; i++) {
        unsigned c = rgb ? rgb[i] : palette[i % MAX_SERIES];
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
            draw(fig);
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
    return render(base, draw_lines, f, NULL, MAX_SERIES, err);
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
    return render(base, draw_bars, f, NULL, MAX_SERIES, err);
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
        rgb[k] = category_rgb(f, k);
    return render(base, draw_grid, f, rgb, (int)f->ncategories, err);
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
    return render(base, draw_timeline, f, rgb, 2 * TB_FIG_SPAN_KINDS, err);
}
