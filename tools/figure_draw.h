/* tools/figure_draw.h: what figure.c's renderer and the charts share: the page, its sizes
 * and colours, PLplot text, axes, markers and legends (figure_draw.c), the four charts
 * (figure_charts.c). All of it draws on the current PLplot stream, under figure.c's lock;
 * callers outside figure*.c use figure_internal.h. */
#ifndef TB_TOOLS_FIGURE_DRAW_H
#define TB_TOOLS_FIGURE_DRAW_H

#include <plplot.h>
#include <stdbool.h>
#include <stddef.h>

struct tb_fig_grid;

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

/* The default series colours (figure_draw.c). */
extern const unsigned fig_palette[MAX_SERIES];

/* Text sizes, times PLplot's default character height. */
#define SIZE_TICKS 0.8
#define SIZE_LABEL 0.9
#define SIZE_TITLE 1.1
#define SIZE_SMALL 0.65

/* An axis: its window, the step between ticks and the decimals its labels need. */
struct axis {
    double lo, hi, step;
    int decimals;
};

/* Sizes on the page, for laying out in normalised coordinates (0..1 of the page). */
struct page {
    double w_mm, h_mm; /* the page */
    double ch_mm;      /* PLplot's default character height */
};

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

/* ------------------------------------------------------------------ figure_draw.c */

/* src for PLplot, whose escape character is '#': "##" is a literal one. Cut at cap. */
const char *fig_esc(char *dst, size_t cap, const char *src);
/* plmtex and plptex with the text escaped. */
void fig_mtex(const char *side, double disp, double pos, double just, const char *text);
void fig_ptex(double x, double y, double dx, double dy, double just, const char *text);
void fig_color(int icol);
/* 1, 2, 2.5 or 5 times a power of ten near span / target (whole numbers when integer). */
double fig_nice_step(double span, int target, bool integer);
int fig_decimals_of(double step);
/* An axis over [lo, hi] (no finite value: lo > hi, then 0..1), its ends on ticks. */
struct axis fig_value_axis(double lo, double hi, bool from_zero, int target);
/* Width of a tick label of `a`, in characters. */
int fig_tick_chars(const struct axis *a);
/* Starts the figure's one page (PLplot knows the page's size from then on). */
struct page fig_page_start(void);
/* n characters at `size`: widths (a digit or an average glyph of DejaVu Sans is ~0.8 of
 * PLplot's character height) and heights, as page fractions. */
double fig_text_w(const struct page *p, double n, double size);
double fig_text_h(const struct page *p, double n, double size);
double fig_longest(const char *const *s, size_t n);
/* The y axis title's distance from the frame, in its character heights (PLplot measures
 * to the middle of the text), past tick labels `chars` wide and the gap before them. */
double fig_ylabel_disp(double chars);
/* The page's left margin for that title and those tick labels. */
double fig_left_margin(const struct page *p, double chars);
/* Category labels of at most chars characters under n columns between left and right:
 * across when they fit, else upright (*upright); returns the page height they take. */
double fig_category_room(const struct page *p, double chars, double n, double left, double right, bool *upright);
/* Millimetres in world units of the current viewport, along x and y. */
void fig_world_per_mm(const struct page *p, double *wx, double *wy);
void fig_rect(double x0, double y0, double x1, double y1);
void fig_rect_outline(double x0, double y0, double x1, double y1);
/* A marker of series i (circle, square, triangle, diamond, ...) at (x, y), r mm across. */
void fig_marker(const struct page *p, int i, double x, double y, double r);
/* The title above the top panel (viewport set), centred over the page rather than the
 * plot area (a legend may take the right), and smaller where it would not fit the page. */
void fig_title(const char *t);
/* A note written across the middle of the current viewport. */
void fig_note(const char *t);
/* Series i's PLplot line style: solid, then dashes, so that a line hidden under the
 * next one shows through its gaps. */
int fig_line_style(int i);
void fig_legend_add(struct legend *l, enum legend_kind kind, int icol, int mark, const char *text);
/* Characters of the widest entry, for the room the legend needs; 0 when a legend would
 * say nothing the axis titles do not (a single line or set of bars). */
double fig_legend_chars(const struct legend *l);
/* The width (page fraction) right of the plot for a legend of `chars` characters (the
 * entries' samples, their text, the frame and a gap each side); a margin without one. */
double fig_legend_room(const struct page *p, double chars);
/* Draws l in the page's right margin, left of the plot's right edge `right`, its top at
 * `top` (page fractions) -- unless fig_legend_chars() said none is needed. */
void fig_legend_draw(struct legend *l, double right, double top);
/* PLplot's tick label callback: the axis's decimals, and no "-0". */
void fig_tick_label(PLINT axis, PLFLT value, char *label, PLINT length, PLPointer data);

/* ------------------------------------------------------------------ figure_charts.c */

/* Each draws its struct tb_fig_* (figure_internal.h) on the current stream; returns NULL,
 * or why it could not (out of memory), which the render reports. */
const char *fig_draw_lines(const void *arg);
const char *fig_draw_bars(const void *arg);
const char *fig_draw_grid(const void *arg);
const char *fig_draw_timeline(const void *arg);
/* The colour of a grid's category i. */
unsigned fig_category_rgb(const struct tb_fig_grid *f, size_t i);

#endif
