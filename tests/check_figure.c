/* check_figure: the figure module of trainbig plot (tools/figure.c). Each kind of figure
 * is written as a PNG (its signature, a few KB at least) and an SVG whose <text>
 * elements, read back, hold the title, the axis labels, the legend and the values drawn
 * (tick labels, category and track names, cell labels); '#' in a label comes out as
 * written. Bad input (no series, lengths that disagree, a span ending before it starts,
 * an unknown category, a non-finite x) is an error naming the file, and writes nothing;
 * an unwritable directory is an error too, and nothing is left behind. Figures drawn
 * again, or from two threads at once, come out the same. */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/testutil.h"
#include "tools/figure_internal.h"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s was not written", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return s;
}

/* Appends the UTF-8 of code point c. */
static size_t put_utf8(char *o, unsigned long c)
{
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xc0 | c >> 6);
        o[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    }
    o[0] = (char)(0xe0 | c >> 12);
    o[1] = (char)(0x80 | (c >> 6 & 0x3f));
    o[2] = (char)(0x80 | (c & 0x3f));
    return 3;
}

/* The text of every <text> element of the SVG at path, entities decoded, one a line,
 * with a newline before the first: "\nA\nB\n" (so "\nA\n" finds a whole label). */
static char *svg_texts(const char *path)
{
    char *svg = slurp(path, NULL);
    char *out = malloc(strlen(svg) + 2), *o = out;
    ck_assert_ptr_nonnull(out);
    *o++ = '\n';
    for (char *p = strstr(svg, "<text"); p; p = strstr(p, "<text")) {
        char *end = strstr(p, "</text>");
        ck_assert_ptr_nonnull(end);
        p = strchr(p, '>') + 1;
        int depth = 0;
        while (p < end) {
            if (*p == '<')
                depth++;
            else if (*p == '>')
                depth--;
            else if (depth == 0 && strncmp(p, "&#x", 3) == 0) {
                char *e;
                unsigned long c = strtoul(p + 3, &e, 16);
                o += put_utf8(o, c);
                p = e;
            } else if (depth == 0 && strncmp(p, "&amp;", 5) == 0) {
                *o++ = '&';
                p += 4;
            } else if (depth == 0 && strncmp(p, "&lt;", 4) == 0) {
                *o++ = '<';
                p += 3;
            } else if (depth == 0 && strncmp(p, "&gt;", 4) == 0) {
                *o++ = '>';
                p += 3;
            } else if (depth == 0) {
                *o++ = *p;
            }
            p++;
        }
        *o++ = '\n';
        p = end;
    }
    *o = '\0';
    free(svg);
    return out;
}

/* Asserts base.png is a PNG of some size and base.svg an SVG; returns the SVG's texts. */
static char *check_written(const char *base)
{
    char path[512];
    size_t len;
    snprintf(path, sizeof path, "%s.png", base);
    char *png = slurp(path, &len);
    ck_assert_msg(len > 5000, "%s has %zu bytes", path, len);
    ck_assert_int_eq(memcmp(png, "\x89PNG\r\n\x1a\n", 8), 0);
    free(png);
    snprintf(path, sizeof path, "%s.svg", base);
    char *svg = slurp(path, NULL);
    ck_assert_msg(strncmp(svg, "<?xml", 5) == 0, "%s is not XML", path);
    ck_assert_contains(svg, "</svg>");
    free(svg);
    return svg_texts(path);
}

/* Asserts that dir holds no file but those named (NULL-terminated): no temporaries. */
static void only_files(const char *dir, const char *const *names)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        bool known = false;
        for (const char *const *n = names; *n; n++)
            known = known || strcmp(*n, e->d_name) == 0;
        ck_assert_msg(known, "unexpected file %s in %s", e->d_name, dir);
    }
    closedir(d);
}

/* A new directory for one test (each test may run in a process of its own, or not). */
static char *fresh_dir(const char *name)
{
    char *dir;
    const char *t = getenv("TMPDIR");
    ck_assert_int_ge(asprintf(&dir, "%s/trainbig-figure-%s-XXXXXX", t ? t : "/tmp", name), 0);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    return dir;
}

/* Removes dir's files and dir. */
static void cleanup(char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            char p[1024];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            if (e->d_name[0] != '.')
                unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
    free(dir);
}

static char *join(const char *dir, const char *name)
{
    char *p;
    ck_assert_int_ge(asprintf(&p, "%s/%s", dir, name), 0);
    return p;
}

/* ------------------------------------------------------------------ line charts */

static const double epochs[5] = { 1, 2, 3, 4, 5 };
static const double loss[5] = { 30, 14, 9, NAN, 4.5 };
static const double aux[5] = { 0.6, 0.5, 0.41, 0.33, 0.28 };

START_TEST(lines_written)
{
    char *dir = fresh_dir("lines");
    char *base = join(dir, "loss");
    const struct tb_fig_series s[2] = { { "loss (total)", loss, 5 }, { "loss_edge", aux, 5 } };
    const struct tb_fig_panel panel = { .ylabel = "loss (per step)", .series = s, .nseries = 2, .from_zero = true };
    const struct tb_fig_lines f = { .title = "run #7: training loss",
                                    .xlabel = "epoch",
                                    .x = epochs,
                                    .n = 5,
                                    .integer_x = true,
                                    .panels = &panel,
                                    .npanels = 1 };
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_fig_lines(base, &f, &err) == TB_OK, "%s", err.msg);
    char *t = check_written(base);
    ck_assert_contains(t, "\nrun #7: training loss\n");
    ck_assert_contains(t, "\nepoch\n");
    ck_assert_contains(t, "\nloss (per step)\n");
    ck_assert_contains(t, "\nloss (total)\n");
    ck_assert_contains(t, "\nloss_edge\n");
    for (int e = 1; e <= 5; e++) { /* whole-number ticks on x */
        char tick[8];
        snprintf(tick, sizeof tick, "\n%d\n", e);
        ck_assert_contains(t, tick);
    }
    ck_assert_not_contains(t, "\n1.5\n");
    ck_assert_contains(t, "\n30\n"); /* the top of the y axis */
    free(t);
    static const char *const names[] = { "loss.png", "loss.svg", NULL };
    only_files(dir, names);
    free(base);
    cleanup(dir);
}
END_TEST

START_TEST(lines_log_panels)
{
    char *dir = fresh_dir("panels");
    char *base = join(dir, "two");
    const struct tb_fig_series top = { "loss", loss, 5 }, bottom = { "stall", aux, 5 };
    const struct tb_fig_panel panels[2] = {
        { .ylabel = "loss (log scale)", .series = &top, .nseries = 1, .log_y = true },
        { .ylabel = "stalled (s)", .series = &bottom, .nseries = 1, .from_zero = true, .note = "a note" },
    };
    const struct tb_fig_lines f = {
        .title = "two panels", .xlabel = "epoch", .x = epochs, .n = 5, .integer_x = true, .panels = panels, .npanels = 2
    };
    struct tb_err err;
    ck_assert_msg(tb_fig_lines(base, &f, &err) == TB_OK, "%s", err.msg);
    char *t = check_written(base);
    /* 4.5 to 30 on a log axis: ticks at 2, 5, 10, 20 and 50 */
    ck_assert_contains(t, "\n2\n");
    ck_assert_contains(t, "\n10\n");
    ck_assert_contains(t, "\n50\n");
    ck_assert_contains(t, "\nstalled (s)\n");
    ck_assert_contains(t, "\na note\n");
    free(t);
    free(base);
    cleanup(dir);
}
END_TEST

/* ------------------------------------------------------------------ bars */

START_TEST(bars_written)
{
    char *dir = fresh_dir("bars");
    char *base = join(dir, "iou");
    const char *const cats[4] = { "road", "class #2", "traffic light", "sky" };
    const double ours[4] = { 0.91, 0.5, NAN, 0.75 }, paper[4] = { 0.98, NAN, 0.6, 0.8 };
    const double other[4] = { 0.8, 0.4, 0.2, 0.7 };
    const struct tb_fig_bar_series s[2] = { { "measured", ours, paper, 4 }, { "baseline", other, NULL, 4 } };
    const struct tb_fig_bars f = { .title = "IoU per class",
                                   .xlabel = "class",
                                   .ylabel = "IoU",
                                   .categories = cats,
                                   .ncategories = 4,
                                   .series = s,
                                   .nseries = 2,
                                   .value_decimals = 2,
                                   .ymax = 1 };
    struct tb_err err;
    ck_assert_msg(tb_fig_bars(base, &f, &err) == TB_OK, "%s", err.msg);
    char *t = check_written(base);
    ck_assert_contains(t, "\nIoU per class\n");
    ck_assert_contains(t, "\nclass #2\n");
    ck_assert_contains(t, "\ntraffic light\n");
    ck_assert_contains(t, "\n0.91\n");
    ck_assert_contains(t, "\nn/a\n");
    ck_assert_contains(t, "\npublished\n");
    ck_assert_contains(t, "\nbaseline\n");
    free(t);
    free(base);
    cleanup(dir);
}
END_TEST

/* ------------------------------------------------------------------ grids */

START_TEST(grid_written)
{
    char *dir = fresh_dir("grid");
    char *base = join(dir, "fit");
    const char *const rows[3] = { "batch 16", "batch 8", "batch 4" }, *const cols[4] = { "256", "512", "768", "1024" };
    const int cells[12] = { 0, 1, 2, 2, 0, 1, 1, 2, 0, 0, 1, -1 };
    const char *const text[12] = { "1.0x", "1.3x", "oom",  "oom",  "1.0x", "1.2x",
                                   "1.4x", "oom",  "1.0x", "1.0x", "1.1x", NULL };
    const char *const names[3] = { "fits", "swaps", "does not fit" };
    const unsigned rgb[3] = { 0x4daf4a, 0xffbf00, 0xe41a1c };
    const struct tb_fig_grid f = { .title = "what fits",
                                   .xlabel = "crop (pixels)",
                                   .ylabel = "batch",
                                   .columns = cols,
                                   .ncolumns = 4,
                                   .rows = rows,
                                   .nrows = 3,
                                   .cells = cells,
                                   .text = text,
                                   .ncells = 12,
                                   .category_names = names,
                                   .ncategories = 3,
                                   .category_rgb = rgb };
    struct tb_err err;
    ck_assert_msg(tb_fig_grid(base, &f, &err) == TB_OK, "%s", err.msg);
    char *t = check_written(base);
    ck_assert_contains(t, "\nwhat fits\n");
    ck_assert_contains(t, "\ncrop (pixels)\n");
    ck_assert_contains(t, "\nbatch 16\n");
    ck_assert_contains(t, "\n1024\n");
    ck_assert_contains(t, "\n1.3x\n");
    ck_assert_contains(t, "\noom\n");
    ck_assert_contains(t, "\ndoes not fit\n");
    free(t);
    free(base);
    cleanup(dir);
}
END_TEST

/* ------------------------------------------------------------------ timelines */

static const struct tb_fig_span compute[4] = {
    { 0, 4, TB_FIG_SPAN_OP }, { 4, 6, TB_FIG_SPAN_GAP }, { 6, 11, TB_FIG_SPAN_OP }, { 11, 12.5, TB_FIG_SPAN_OP }
};
static const struct tb_fig_span h2d[2] = { { 1, 5.5, TB_FIG_SPAN_COPY }, { 9, 10, TB_FIG_SPAN_COPY } };
static const struct tb_fig_span d2h[1] = { { 2, 3, TB_FIG_SPAN_COPY } };

static int timeline(const char *base, struct tb_err *err)
{
    const struct tb_fig_track tracks[3] = { { "compute", compute, 4 }, { "h2d", h2d, 2 }, { "d2h", d2h, 1 } };
    const struct tb_fig_timeline f = {
        .title = "one step", .tracks = tracks, .ntracks = 3, .kind_names = { "op", "copy", "stall" }
    };
    return tb_fig_timeline(base, &f, err);
}

START_TEST(timeline_written)
{
    char *dir = fresh_dir("timeline");
    char *base = join(dir, "step");
    struct tb_err err;
    ck_assert_msg(timeline(base, &err) == TB_OK, "%s", err.msg);
    char *t = check_written(base);
    ck_assert_contains(t, "\none step\n");
    ck_assert_contains(t, "\ntime (ms)\n");
    ck_assert_contains(t, "\ncompute\n");
    ck_assert_contains(t, "\nh2d\n");
    ck_assert_contains(t, "\nd2h\n");
    ck_assert_contains(t, "\nstall\n");
    ck_assert_contains(t, "\ncopy\n");
    ck_assert_contains(t, "\n10\n"); /* a tick of the ms axis */
    free(t);
    free(base);
    cleanup(dir);
}
END_TEST

/* ------------------------------------------------------------------ the same twice, and threads */

static void *draw_timeline_thread(void *arg)
{
    struct tb_err err;
    return (void *)(intptr_t)timeline(arg, &err);
}

START_TEST(drawn_again_the_same)
{
    char *dir = fresh_dir("again");
    char *a = join(dir, "a"), *b = join(dir, "b");
    pthread_t ta, tb;
    ck_assert_int_eq(pthread_create(&ta, NULL, draw_timeline_thread, a), 0);
    ck_assert_int_eq(pthread_create(&tb, NULL, draw_timeline_thread, b), 0);
    void *ra, *rb;
    pthread_join(ta, &ra);
    pthread_join(tb, &rb);
    ck_assert_int_eq((int)(intptr_t)ra, TB_OK);
    ck_assert_int_eq((int)(intptr_t)rb, TB_OK);
    char *pa = join(dir, "a.svg"), *pb = join(dir, "b.svg");
    char *sa = slurp(pa, NULL), *sb = slurp(pb, NULL);
    ck_assert_str_eq(sa, sb);
    free(sa);
    free(sb);
    /* and once more after a different figure: nothing of the other stays behind */
    const struct tb_fig_series s = { "y", aux, 5 };
    const struct tb_fig_panel panel = { .ylabel = "y", .series = &s, .nseries = 1 };
    const struct tb_fig_lines f = {
        .title = "other", .xlabel = "x", .x = epochs, .n = 5, .panels = &panel, .npanels = 1
    };
    struct tb_err err;
    char *c = join(dir, "c");
    ck_assert_msg(tb_fig_lines(c, &f, &err) == TB_OK, "%s", err.msg);
    ck_assert_int_eq(timeline(a, &err), TB_OK);
    sa = slurp(pa, NULL);
    sb = slurp(pb, NULL);
    ck_assert_str_eq(sa, sb);
    free(sa);
    free(sb);
    free(pa);
    free(pb);
    free(a);
    free(b);
    free(c);
    cleanup(dir);
}
END_TEST

/* ------------------------------------------------------------------ bad input */

/* Asserts err is a configuration error naming base, saying what; and nothing in dir. */
static void refused(int rc, const struct tb_err *err, const char *base, const char *what, const char *dir)
{
    ck_assert_int_eq(rc, TB_ERR_CONFIG);
    ck_assert_contains(err->msg, base);
    ck_assert_contains(err->msg, what);
    static const char *const none[] = { NULL };
    only_files(dir, none);
}

START_TEST(bad_input_refused)
{
    char *dir = fresh_dir("bad");
    char *base = join(dir, "bad");
    struct tb_err err;
    const struct tb_fig_series s = { "y", aux, 5 }, short_s = { "short", aux, 4 };
    struct tb_fig_panel panel = { .ylabel = "y", .series = &s, .nseries = 0 };
    struct tb_fig_lines f = { .title = "t", .xlabel = "x", .x = epochs, .n = 5, .panels = &panel, .npanels = 1 };
    refused(tb_fig_lines(base, &f, &err), &err, base, "panel 1 has 0 series", dir);
    panel.series = &short_s;
    panel.nseries = 1;
    refused(tb_fig_lines(base, &f, &err), &err, base, "series 'short' has 4 values for 5 x values", dir);
    const double bad_x[5] = { 1, 2, NAN, 4, 5 };
    panel.series = &s;
    f.x = bad_x;
    refused(tb_fig_lines(base, &f, &err), &err, base, "x value 3 is not a finite number", dir);
    f.x = epochs;
    f.npanels = 0;
    refused(tb_fig_lines(base, &f, &err), &err, base, "1 to 4 panels", dir);

    const char *const cats[2] = { "a", "b" };
    const double v[3] = { 1, 2, 3 };
    const struct tb_fig_bar_series bs = { "v", v, NULL, 3 };
    struct tb_fig_bars b = { .title = "t", .categories = cats, .ncategories = 2, .series = &bs, .nseries = 1 };
    refused(tb_fig_bars(base, &b, &err), &err, base, "series 'v' has 3 values for 2 categories", dir);
    b.nseries = 0;
    refused(tb_fig_bars(base, &b, &err), &err, base, "1 to 16 series, not 0", dir);

    const char *const rows[1] = { "r" }, *const cols[2] = { "c1", "c2" }, *const names[2] = { "x", "y" };
    const int cells[2] = { 0, 2 };
    struct tb_fig_grid g = { .columns = cols,
                             .ncolumns = 2,
                             .rows = rows,
                             .nrows = 1,
                             .cells = cells,
                             .ncells = 2,
                             .category_names = names,
                             .ncategories = 2 };
    refused(tb_fig_grid(base, &g, &err), &err, base, "cell 2 (row 1, column 2) has category 2 (-1 to 1 allowed)", dir);
    g.ncells = 3;
    refused(tb_fig_grid(base, &g, &err), &err, base, "3 cells for 1 rows x 2 columns", dir);

    const struct tb_fig_span backwards[2] = { { 0, 1, TB_FIG_SPAN_OP }, { 5, 4, TB_FIG_SPAN_COPY } };
    const struct tb_fig_track tr = { "h2d", backwards, 2 };
    struct tb_fig_timeline tl = { .title = "t", .tracks = &tr, .ntracks = 1 };
    refused(tb_fig_timeline(base, &tl, &err), &err, base, "span 2 of track 'h2d' is [5, 4)", dir);
    tl.ntracks = 0;
    refused(tb_fig_timeline(base, &tl, &err), &err, base, "1 to 32 tracks, not 0", dir);
    free(base);
    cleanup(dir);
}
END_TEST

START_TEST(unwritable_refused)
{
    char *dir = fresh_dir("ro");
    char *base = join(dir, "missing/sub/fig");
    struct tb_err err;
    ck_assert_int_eq(timeline(base, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "missing/sub/fig.png");
    ck_assert_contains(err.msg, "No such file or directory");
    static const char *const none[] = { NULL };
    only_files(dir, none);
    free(base);
    cleanup(dir);
}
END_TEST

static Suite *figure_suite(void)
{
    Suite *s = suite_create("figure");
    TCase *tc = tcase_create("figure");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, lines_written);
    tcase_add_test(tc, lines_log_panels);
    tcase_add_test(tc, bars_written);
    tcase_add_test(tc, grid_written);
    tcase_add_test(tc, timeline_written);
    tcase_add_test(tc, drawn_again_the_same);
    tcase_add_test(tc, bad_input_refused);
    tcase_add_test(tc, unwritable_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(figure_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
