/* tools/figure_internal.h: charts written as BASE.png and BASE.svg (figure.c), for the
 * commands that draw (`trainbig plot`). PLplot does the drawing and stays behind this
 * header: a caller fills one of the structs below and gets both files or an error.
 *
 * Each call renders the PNG (1200x800 pixels, antialiased) and the SVG (PLplot's own
 * driver: every label is an SVG <text> element) in memory, then writes each through a
 * temporary file renamed into place, so a failure leaves the old files or none, never a
 * half-written one. Errors (bad input, a PLplot driver that is missing or fails, I/O)
 * come back in err naming the file; nothing here exits. The calls may be made from any
 * thread; they draw one at a time. The structs only point at the caller's arrays: the
 * caller owns them and nothing is kept after the call. */
#ifndef TB_TOOLS_FIGURE_INTERNAL_H
#define TB_TOOLS_FIGURE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <trainbig/error.h>

/* ------------------------------------------------------------------ line charts */

/* One line: n y values, one per x of the chart (NaN: no point; the line breaks there). */
struct tb_fig_series {
    const char *name; /* legend text */
    const double *y;
    size_t n; /* must equal the chart's n */
};

/* A panel: a plot area with its own y axis and legend. */
struct tb_fig_panel {
    const char *ylabel; /* with the unit, e.g. "throughput (images/s)" */
    const struct tb_fig_series *series;
    size_t nseries;   /* 1 to 16 */
    bool from_zero;   /* the y axis includes 0 */
    const char *note; /* NULL, or a line written across the panel (e.g. "no validated epoch");
                       * a panel without any finite value says "no data" by itself */
    bool log_y;       /* a logarithmic y axis (for losses): values <= 0 are left out */
};

struct tb_fig_lines {
    const char *title, *xlabel;
    const double *x; /* n finite values shared by every series */
    size_t n;        /* 0 draws empty axes */
    bool integer_x;  /* ticks at whole numbers only (epochs) */
    const struct tb_fig_panel *panels;
    size_t npanels; /* 1 to 4, stacked top to bottom, sharing the x axis */
};

int tb_fig_lines(const char *base, const struct tb_fig_lines *f, struct tb_err *err);

/* ------------------------------------------------------------------ grouped bars */

/* One bar per category. `published`: a reference number per bar (a paper's), drawn as a
 * black mark across the bar and listed once in the legend as "published". */
struct tb_fig_bar_series {
    const char *name;
    const double *value;     /* n values (NaN: no bar, labelled "n/a" when values are shown) */
    const double *published; /* NULL, or n values (NaN: none for that bar) */
    size_t n;                /* must equal the chart's ncategories */
};

struct tb_fig_bars {
    const char *title, *xlabel, *ylabel;
    const char *const *categories; /* left to right; long or many names are written upright */
    size_t ncategories;            /* 0 draws empty axes */
    const struct tb_fig_bar_series *series;
    size_t nseries;     /* 1 to 16: the bars of a category, side by side */
    int value_decimals; /* < 0: no value labels; else each bar's value with that many decimals (0 to 6) */
    double ymax;        /* 0: from the data; else the top of the y axis (e.g. 1 for a ratio) */
    const char *note;   /* NULL, or a line written across the plot */
};

int tb_fig_bars(const char *base, const struct tb_fig_bars *f, struct tb_err *err);

/* ------------------------------------------------------------------ categorical grids */

/* rows x columns of cells, each coloured by its category and optionally labelled (e.g. a
 * batch x crop grid of "fits / swaps / does not fit"). */
struct tb_fig_grid {
    const char *title, *xlabel, *ylabel;
    const char *const *columns;        /* tick labels, left to right */
    size_t ncolumns;                   /* 1 to 64 */
    const char *const *rows;           /* tick labels, top to bottom */
    size_t nrows;                      /* 1 to 64 */
    const int *cells;                  /* ncells categories, row by row; -1: an empty cell */
    const char *const *text;           /* NULL, or ncells short labels (NULL entries: none) */
    size_t ncells;                     /* must equal nrows * ncolumns */
    const char *const *category_names; /* the legend: category i's name */
    size_t ncategories;                /* 1 to 16 */
    const unsigned *category_rgb;      /* NULL (the default palette), or 0xRRGGBB per category */
};

int tb_fig_grid(const char *base, const struct tb_fig_grid *f, struct tb_err *err);

/* ------------------------------------------------------------------ timelines */

enum tb_fig_span_kind {
    TB_FIG_SPAN_OP,   /* work on the track (a kernel, an op) */
    TB_FIG_SPAN_COPY, /* a copy between host and device */
    TB_FIG_SPAN_GAP,  /* waiting: drawn hatched */
    TB_FIG_SPAN_KINDS
};

/* [start, end) in milliseconds. */
struct tb_fig_span {
    double start, end; /* finite, end >= start */
    enum tb_fig_span_kind kind;
};

/* A named row of spans (e.g. "compute", "h2d", "d2h"). */
struct tb_fig_track {
    const char *name;
    const struct tb_fig_span *spans;
    size_t nspans;
};

struct tb_fig_timeline {
    const char *title;
    const char *xlabel; /* NULL: "time (ms)" */
    const struct tb_fig_track *tracks;
    size_t ntracks;                            /* 1 to 32, top to bottom */
    const char *kind_names[TB_FIG_SPAN_KINDS]; /* legend; NULL entries: "op", "copy", "gap" */
};

int tb_fig_timeline(const char *base, const struct tb_fig_timeline *f, struct tb_err *err);

#endif
