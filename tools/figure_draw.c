/* figure_draw.c: the primitives figure_charts.c draws with (figure_draw.h): PLplot text
 * escaped, axes and their ticks, the page's geometry, markers, titles and legends. */
#include "config.h"

#include "tools/figure_draw.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A palette that stays apart for the common kinds of colour blindness in its first
 * entries (blue, orange, green, vermillion ...). */
const unsigned fig_palette[MAX_SERIES] = {
    0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd, 0x8c564b, 0xe377c2, 0x7f7f7f,
    0xbcbd22, 0x17becf, 0x393b79, 0xad494a, 0x637939, 0x8c6d31, 0x7b4173, 0x3182bd,
};

/* ------------------------------------------------------------------ text and numbers */

/* src for PLplot, whose escape character is '#': "##" is a literal one. Cut at cap. */
const char *fig_esc(char *dst, size_t cap, const char *src)
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
void fig_mtex(const char *side, double disp, double pos, double just, const char *text)
{
    char buf[TEXT_MAX];
    plmtex(side, disp, pos, just, fig_esc(buf, sizeof buf, text));
}

void fig_ptex(double x, double y, double dx, double dy, double just, const char *text)
{
    char buf[TEXT_MAX];
    plptex(x, y, dx, dy, just, fig_esc(buf, sizeof buf, text));
}

void fig_color(int icol)
{
    plcol0(icol);
}

/* 1, 2, 2.5 or 5 times a power of ten near span / target (whole numbers when integer). */
double fig_nice_step(double span, int target, bool integer)
{
    double raw = span / target;
    if (!(raw > 0) || !isfinite(raw))
        return 1;
    double mag = pow(10, floor(log10(raw))), r = raw / mag;
    double m = r <= 1 ? 1 : r <= 2 ? 2 : r <= 2.5 && !(integer && mag < 10) ? 2.5 : r <= 5 ? 5 : 10;
    double step = m * mag;
    return integer && step < 1 ? 1 : step;
}

int fig_decimals_of(double step)
{
    for (int d = 0; d < 6; d++) {
        double s = step * pow(10, d);
        if (fabs(s - round(s)) < 1e-6 * s)
            return d;
    }
    return 6;
}

/* An axis over [lo, hi] (no finite value: lo > hi, then 0..1), its ends on ticks. */
struct axis fig_value_axis(double lo, double hi, bool from_zero, int target)
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
    a.step = fig_nice_step(hi - lo, target, false);
    a.lo = floor(lo / a.step + 1e-9) * a.step;
    a.hi = ceil(hi / a.step - 1e-9) * a.step;
    a.decimals = fig_decimals_of(a.step);
    return a;
}

/* PLplot's tick label callback: the axis's decimals, and no "-0". */
void fig_tick_label(PLINT axis, PLFLT value, char *label, PLINT length, PLPointer data)
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
int fig_tick_chars(const struct axis *a)
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

/* Starts the figure's one page (PLplot knows the page's size from then on). */
struct page fig_page_start(void)
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
double fig_text_w(const struct page *p, double n, double size)
{
    return n * 0.8 * size * p->ch_mm / p->w_mm;
}

double fig_text_h(const struct page *p, double n, double size)
{
    return n * size * p->ch_mm / p->h_mm;
}

double fig_longest(const char *const *s, size_t n)
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
double fig_ylabel_disp(double chars)
{
    return (0.6 + chars * 0.85) * SIZE_TICKS / SIZE_LABEL + 1.0;
}

/* The page's left margin for that title and those tick labels. */
double fig_left_margin(const struct page *p, double chars)
{
    return (fig_ylabel_disp(chars) + 1.4) * SIZE_LABEL * p->ch_mm / p->w_mm;
}

/* Category labels of at most chars characters under n columns between left and right:
 * across when they fit, else upright (*upright); returns the page height they take. */
double fig_category_room(const struct page *p, double chars, double n, double left, double right, bool *upright)
{
    *upright = fig_text_w(p, chars * 0.75 + 1, SIZE_TICKS) > (right - left) / n;
    return *upright ? fig_text_w(p, chars, SIZE_TICKS) * p->w_mm / p->h_mm + fig_text_h(p, 1.0, 1.0)
                    : fig_text_h(p, 1.8, SIZE_TICKS);
}

/* Millimetres in world units of the current viewport, along x and y. */
void fig_world_per_mm(const struct page *p, double *wx, double *wy)
{
    double dx0, dx1, dy0, dy1, x0, x1, y0, y1;
    plgvpd(&dx0, &dx1, &dy0, &dy1);
    plgvpw(&x0, &x1, &y0, &y1);
    *wx = (x1 - x0) / ((dx1 - dx0) * p->w_mm);
    *wy = (y1 - y0) / ((dy1 - dy0) * p->h_mm);
}

void fig_rect(double x0, double y0, double x1, double y1)
{
    PLFLT x[4] = { x0, x1, x1, x0 }, y[4] = { y0, y0, y1, y1 };
    plfill(4, x, y);
}

void fig_rect_outline(double x0, double y0, double x1, double y1)
{
    PLFLT x[5] = { x0, x1, x1, x0, x0 }, y[5] = { y0, y0, y1, y1, y0 };
    plline(5, x, y);
}

/* A marker of series i (circle, square, triangle, diamond, ...) at (x, y), r mm across. */
void fig_marker(const struct page *p, int i, double x, double y, double r)
{
    double wx, wy;
    fig_world_per_mm(p, &wx, &wy);
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
void fig_title(const char *t)
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
    fig_color(C_FG);
    fig_mtex("t", 1.2, vx1 > vx0 ? (0.5 - vx0) / (vx1 - vx0) : 0.5, 0.5, t);
    plschr(0, 1.0);
}

/* A note written across the middle of the current viewport. */
void fig_note(const char *t)
{
    plschr(0, SIZE_LABEL);
    fig_color(C_MUTED);
    fig_mtex("t", -3.0, 0.5, 0.5, t);
    plschr(0, 1.0);
}

/* ------------------------------------------------------------------ legends */

/* Series i's PLplot line style: solid, then dashes, so that a line hidden under the
 * next one shows through its gaps. */
int fig_line_style(int i)
{
    static const int styles[4] = { 1, 2, 3, 4 };
    return styles[i % 4];
}

static const char *const marker_glyph[5] = { "●", "■", "▲", "◆", "▼" };

void fig_legend_add(struct legend *l, enum legend_kind kind, int icol, int mark, const char *text)
{
    int i = l->n++;
    fig_esc(l->text[i], sizeof l->text[i], text);
    l->texts[i] = l->text[i];
    l->opt[i] = kind == LEG_LINE   ? PL_LEGEND_LINE | PL_LEGEND_SYMBOL
                : kind == LEG_MARK ? PL_LEGEND_LINE
                                   : PL_LEGEND_COLOR_BOX;
    l->col[i] = icol;
    l->fg[i] = C_FG;
    l->pattern[i] = kind == LEG_HATCH ? 3 : 0;
    l->scale[i] = 0.8;
    l->width[i] = kind == LEG_MARK ? 4.0 : 2.5;
    l->style[i] = fig_line_style(mark);
    l->symbol[i] = marker_glyph[mark % 5];
    l->symbol_scale[i] = 0.75; /* about the size of the markers on the lines */
    l->symbol_n[i] = 1;
}

/* Characters of the widest entry, for the room the legend needs; 0 when a legend would
 * say nothing the axis titles do not (a single line or set of bars). */
double fig_legend_chars(const struct legend *l)
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
double fig_legend_room(const struct page *p, double chars)
{
    if (chars == 0)
        return fig_text_w(p, 2, SIZE_TICKS);
    return fig_text_w(p, chars + 6.5, SIZE_LABEL) + 0.045;
}

/* Draws l in the page's right margin, left of the plot's right edge `right`, its top at
 * `top` (page fractions) -- unless fig_legend_chars() said none is needed. */
void fig_legend_draw(struct legend *l, double right, double top)
{
    if (fig_legend_chars(l) == 0)
        return;
    PLFLT w, h;
    plschr(0, SIZE_LABEL);
    pllegend(&w, &h, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX,
             PL_POSITION_LEFT | PL_POSITION_TOP | PL_POSITION_INSIDE | PL_POSITION_SUBPAGE, right + 0.015, 1.0 - top,
             0.06, C_BG, C_GRID, 1, 0, 1, l->n, l->opt, 0.8, 0.9, 2.0, 0.0, l->fg, l->texts, l->col, l->pattern,
             l->scale, l->width, l->col, l->style, l->width, l->col, l->symbol_scale, l->symbol_n, l->symbol);
    plschr(0, 1.0);
}
