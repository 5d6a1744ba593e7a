/* plot.c: `trainbig plot RUN_DIR [--out DIR]` (plot_internal.h): the rows of a run's
 * epochs.jsonl (core/train/report.c writes them) drawn as figures through figure.c.
 *
 * The file is read whole and checked first, so a bad line writes nothing. A run directory
 * holds one run and its resumptions: a resumed run appends the epochs after its
 * checkpoint's (rows past the checkpoint were cut off by then), so epochs only grow. A
 * file that holds several runs ([report] jsonl naming one file for all) starts a run
 * where an epoch is not above the one before; the last run is drawn. */
#include "config.h"

#include "tools/plot_internal.h"

#if defined(HAVE_PLPLOT) && defined(HAVE_JANSSON)

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <trainbig/log.h>

#include "tools/figure_internal.h"

enum { MAX_TERMS = 15 }; /* the loss figure's series besides the total */

/* One row of epochs.jsonl: the figures' numbers (NaN: absent or null). */
struct row {
    size_t line; /* in the file, for messages */
    long long epoch;
    bool trained; /* steps > 0: not the row of a validation before training */
    double loss, images_per_s, miou, pixel_accuracy, out_mib, in_mib, stall_s;
    json_t *losses;    /* the row's "losses" object or NULL: a reference the row owns */
    json_t *class_iou; /* the same for "class_iou" */
};

struct run {
    struct row *rows;
    size_t n, cap;
    size_t runs;       /* runs seen in the file */
    size_t first_line; /* the last run's first row */
};

static void row_free(struct row *r)
{
    json_decref(r->losses);
    json_decref(r->class_iou);
}

static void run_free(struct run *run)
{
    for (size_t i = 0; i < run->n; i++)
        row_free(&run->rows[i]);
    free(run->rows);
    memset(run, 0, sizeof *run);
}

static const char *json_type_name(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "a number";
    }
}

/* obj's member `key` as a number: NaN when absent or null; an error naming the line when
 * it is something else. `where` is the object's name in messages ("" at the top). */
static int number(const char *path, size_t line, const json_t *obj, const char *where, const char *key, double *v,
                  struct tb_err *err)
{
    const json_t *j = json_object_get(obj, key);
    if (!j || json_is_null(j)) {
        *v = NAN;
        return TB_OK;
    }
    if (!json_is_number(j))
        return tb_err_set(err, TB_ERR_RUNTIME, "%s:%zu: \"%s%s\" is %s, expected a number or null", path, line, where,
                          key, json_type_name(j));
    *v = json_number_value(j);
    return TB_OK;
}

/* obj's member `key`: NULL when absent or null, else an object of numbers (or nulls),
 * returned with a new reference. */
static int number_object(const char *path, size_t line, json_t *obj, const char *key, json_t **out, struct tb_err *err)
{
    *out = NULL;
    json_t *j = json_object_get(obj, key);
    if (!j || json_is_null(j))
        return TB_OK;
    if (!json_is_object(j))
        return tb_err_set(err, TB_ERR_RUNTIME, "%s:%zu: \"%s\" is %s, expected an object of numbers", path, line, key,
                          json_type_name(j));
    const char *k;
    json_t *v;
    json_object_foreach(j, k, v)
    {
        if (!json_is_number(v) && !json_is_null(v))
            return tb_err_set(err, TB_ERR_RUNTIME, "%s:%zu: \"%s\".\"%s\" is %s, expected a number or null", path, line,
                              key, k, json_type_name(v));
    }
    *out = json_incref(j);
    return TB_OK;
}

static int parse_row(const char *path, size_t line, const char *text, struct row *r, struct tb_err *err)
{
    memset(r, 0, sizeof *r);
    r->line = line;
    json_error_t je;
    json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!o)
        return tb_err_set(err, TB_ERR_RUNTIME, "%s:%zu: not a JSON row (column %d: %s)", path, line, je.column,
                          je.text);
    int rc = TB_OK;
    const json_t *epoch = json_object_get(o, "epoch"), *steps = json_object_get(o, "steps");
    const json_t *swap = json_object_get(o, "swap");
    if (!json_is_object(o))
        rc =
            tb_err_set(err, TB_ERR_RUNTIME, "%s:%zu: the row is %s, expected an object", path, line, json_type_name(o));
    else if (!json_is_integer(epoch) || json_integer_value(epoch) < 0)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s:%zu: \"epoch\" is %s, expected a whole number from 0", path, line,
                        epoch ? json_is_integer(epoch) ? "negative" : json_type_name(epoch) : "missing");
    else if (steps && !json_is_integer(steps))
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s:%zu: \"steps\" is %s, expected a whole number", path, line,
                        json_type_name(steps));
    else if (swap && !json_is_null(swap) && !json_is_object(swap))
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s:%zu: \"swap\" is %s, expected an object", path, line,
                        json_type_name(swap));
    if (rc) {
        json_decref(o);
        return rc;
    }
    r->epoch = json_integer_value(epoch);
    const bool has_steps = steps != NULL, stepped = has_steps && json_integer_value(steps) > 0;
    double out_bytes = NAN, in_bytes = NAN;
    rc = number(path, line, o, "", "loss", &r->loss, err);
    rc = rc ? rc : number(path, line, o, "", "images_per_s", &r->images_per_s, err);
    rc = rc ? rc : number(path, line, o, "", "miou", &r->miou, err);
    rc = rc ? rc : number(path, line, o, "", "pixel_accuracy", &r->pixel_accuracy, err);
    r->stall_s = NAN;
    if (!rc && json_is_object(swap)) {
        rc = number(path, line, swap, "swap.", "bytes_out", &out_bytes, err);
        rc = rc ? rc : number(path, line, swap, "swap.", "bytes_in", &in_bytes, err);
        rc = rc ? rc : number(path, line, swap, "swap.", "stall_seconds", &r->stall_s, err);
    }
    rc = rc ? rc : number_object(path, line, o, "losses", &r->losses, err);
    rc = rc ? rc : number_object(path, line, o, "class_iou", &r->class_iou, err);
    json_decref(o);
    if (rc) {
        row_free(r);
        return rc;
    }
    r->trained = has_steps ? stepped : isfinite(r->loss);
    r->out_mib = out_bytes / 1048576.0;
    r->in_mib = in_bytes / 1048576.0;
    return TB_OK;
}

static bool blank(const char *s)
{
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\n')
            return false;
    return true;
}

/* The most of epochs.jsonl plot reads (documented in trainbig(1)): a row is about 1 KiB,
 * so some 60,000 epochs; past it the rows of one run could take gigabytes. */
#define MAX_JSONL_BYTES (64ull << 20)

/* Warns about each of r's values the figures cannot draw as they are; those are left out
 * (NaN) rather than drawn wrong. */
static void check_drawable(const char *path, struct row *r)
{
    if (isfinite(r->loss) && r->loss <= 0) {
        tb_log(TB_LOG_WARN, "%s:%zu: epoch %lld: loss %g is not positive: the loss figure's log scale leaves it out",
               path, r->line, r->epoch, r->loss);
        r->loss = NAN;
    }
    double *const frac[2] = { &r->miou, &r->pixel_accuracy };
    static const char *const names[2] = { "miou", "pixel_accuracy" };
    for (int k = 0; k < 2; k++)
        if (isfinite(*frac[k]) && (*frac[k] < 0 || *frac[k] > 1)) {
            tb_log(TB_LOG_WARN,
                   "%s:%zu: epoch %lld: %s %g is not a fraction in 0..1: the accuracy figure leaves it out", path,
                   r->line, r->epoch, names[k], *frac[k]);
            *frac[k] = NAN;
        }
}

/* Reads path's rows into run: those of the last run in it. */
static int read_rows(const char *path, struct run *run, struct tb_err *err)
{
    memset(run, 0, sizeof *run);
    FILE *f = fopen(path, "r");
    if (!f)
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot read it: %s%s", path, strerror(errno),
                          errno == ENOENT ? " (trainbig train writes it into the run directory after each epoch)" : "");
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && (uint64_t)st.st_size > MAX_JSONL_BYTES) {
        fclose(f);
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "%s: %.1f MiB, more than plot reads (%llu MiB): plot a copy of its last rows (tail -n "
                          "N %s > DIR/epochs.jsonl, then trainbig plot DIR)",
                          path, (double)st.st_size / 1048576.0, MAX_JSONL_BYTES >> 20, path);
    }
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    int rc = TB_OK;
    while (!rc && getline(&line, &cap, f) >= 0) {
        lineno++;
        if (blank(line))
            continue;
        struct row r;
        rc = parse_row(path, lineno, line, &r, err);
        if (rc)
            break;
        check_drawable(path, &r);
        /* An epoch not above the last: another run starts here. */
        if (run->n && r.epoch <= run->rows[run->n - 1].epoch) {
            tb_log(TB_LOG_WARN,
                   "%s:%zu: epoch %lld does not follow epoch %lld (line %zu): a new run starts there, and the rows "
                   "before it are not drawn",
                   path, lineno, r.epoch, run->rows[run->n - 1].epoch, run->rows[run->n - 1].line);
            for (size_t i = 0; i < run->n; i++)
                row_free(&run->rows[i]);
            run->n = 0;
        }
        if (!run->n) {
            run->runs++;
            run->first_line = lineno;
        }
        if (run->n == run->cap) {
            size_t nc = run->cap ? run->cap * 2 : 64;
            struct row *nr = realloc(run->rows, nc * sizeof *nr);
            if (!nr) {
                row_free(&r);
                rc = tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory", path);
                break;
            }
            run->rows = nr;
            run->cap = nc;
        }
        run->rows[run->n++] = r;
    }
    if (!rc && ferror(f))
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot read it: %s", path, strerror(errno));
    free(line);
    fclose(f);
    if (!rc && !run->n)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: no rows: the run has not reported an epoch yet", path);
    if (rc)
        run_free(run);
    return rc;
}

/* ------------------------------------------------------------------ figures */

/* What the figures share: where they go, the run's name for titles, the x values. */
struct plot {
    const char *out_dir;
    const char *name; /* the run directory's last component */
    FILE *out;
    const struct run *run;
    double *x;       /* every row's epoch */
    size_t *trained; /* the rows that trained (not the validation before training) */
    size_t ntrained;
    double *x_trained; /* their epochs */
};

/* rc: tb_fig_*()'s for the figure at base; when it wrote the two files, prints their
 * paths. */
static int written(const struct plot *p, const char *base, int rc)
{
    if (!rc)
        fprintf(p->out, "%s.png\n%s.svg\n", base, base);
    return rc;
}

/* A figure of panels over the epochs x, titled "RUN: what", written as base. */
static int epoch_lines(const struct plot *p, const char *base, const char *what, const double *x, size_t n,
                       const struct tb_fig_panel *panels, int npanels, struct tb_err *err)
{
    char title[256];
    snprintf(title, sizeof title, "%s: %s", p->name, what);
    const struct tb_fig_lines f = {
        .title = title, .xlabel = "epoch", .x = x, .n = n, .integer_x = true, .panels = panels, .npanels = npanels
    };
    return written(p, base, tb_fig_lines(base, &f, err));
}

/* out_dir/name, allocated (the caller frees it). */
static char *base_of(const struct plot *p, const char *name)
{
    const size_t dl = strlen(p->out_dir), n = dl + strlen(name) + 2;
    char *b = malloc(n);
    if (b)
        snprintf(b, n, "%s%s%s", p->out_dir, dl && p->out_dir[dl - 1] == '/' ? "" : "/", name);
    return b;
}

/* The loss terms of the run's "losses" objects, in their order (at most MAX_TERMS);
 * the names point into the rows. */
static size_t loss_terms(const struct run *run, const char **terms)
{
    size_t n = 0;
    for (size_t i = 0; i < run->n; i++) {
        const char *k;
        json_t *v;
        json_object_foreach(run->rows[i].losses, k, v)
        {
            size_t j = 0;
            while (j < n && strcmp(terms[j], k) != 0)
                j++;
            if (j == n && n < MAX_TERMS)
                terms[n++] = k;
        }
    }
    return n;
}

static int fig_loss(const struct plot *p, const char *base, struct tb_err *err)
{
    const struct run *run = p->run;
    const char *terms[MAX_TERMS];
    const size_t nt = loss_terms(run, terms), n = p->ntrained;
    double *y = malloc((nt + 1) * (n ? n : 1) * sizeof *y);
    if (!y)
        return tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory", base);
    struct tb_fig_series s[MAX_TERMS + 1];
    char names[MAX_TERMS][64];
    for (size_t k = 0; k <= nt; k++) {
        double *yk = y + k * n;
        for (size_t i = 0; i < n; i++) {
            const struct row *r = &run->rows[p->trained[i]];
            const json_t *j = k ? json_object_get(r->losses, terms[k - 1]) : NULL;
            yk[i] = k == 0 ? r->loss : json_is_number(j) ? json_number_value(j) : NAN;
        }
        if (k)
            snprintf(names[k - 1], sizeof names[k - 1], "loss_%s", terms[k - 1]);
        s[k] = (struct tb_fig_series){ k ? names[k - 1] : "loss (total)", yk, n };
    }
    const struct tb_fig_panel panel = { .ylabel = "loss (mean over the epoch's steps, log scale)",
                                        .series = s,
                                        .nseries = nt + 1,
                                        .log_y = true,
                                        .note = n ? NULL : "no epoch has trained yet" };
    int rc = epoch_lines(p, base, "training loss per epoch", p->x_trained, n, &panel, 1, err);
    free(y);
    return rc;
}

static int fig_accuracy(const struct plot *p, const char *base, struct tb_err *err)
{
    const struct run *run = p->run;
    double *v = malloc(3 * (run->n ? run->n : 1) * sizeof *v);
    if (!v)
        return tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory", base);
    double *x = v, *miou = v + run->n, *acc = v + 2 * run->n;
    size_t n = 0;
    for (size_t i = 0; i < run->n; i++) {
        const struct row *r = &run->rows[i];
        if (!isfinite(r->miou) && !isfinite(r->pixel_accuracy))
            continue;
        x[n] = (double)r->epoch;
        miou[n] = 100.0 * r->miou;
        acc[n++] = 100.0 * r->pixel_accuracy;
    }
    const char *note = NULL;
    if (!n) { /* no validation: the run's epochs, empty */
        for (size_t i = 0; i < run->n; i++)
            x[i] = p->x[i], miou[i] = acc[i] = NAN;
        n = run->n;
        note = "no validated epoch in this run";
    }
    const struct tb_fig_series s[2] = { { "mIoU", miou, n }, { "pixel accuracy", acc, n } };
    const struct tb_fig_panel panel = {
        .ylabel = "mIoU, pixel accuracy (%)", .series = s, .nseries = 2, .from_zero = true, .note = note
    };
    int rc = epoch_lines(p, base, "validation mIoU and pixel accuracy", x, n, &panel, 1, err);
    free(v);
    return rc;
}

static int fig_throughput(const struct plot *p, const char *base, struct tb_err *err)
{
    const size_t n = p->ntrained;
    double *y = malloc((n ? n : 1) * sizeof *y);
    if (!y)
        return tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory", base);
    for (size_t i = 0; i < n; i++)
        y[i] = p->run->rows[p->trained[i]].images_per_s;
    const struct tb_fig_series s = { "images/s", y, n };
    const struct tb_fig_panel panel = { .ylabel = "throughput (images/s)",
                                        .series = &s,
                                        .nseries = 1,
                                        .from_zero = true,
                                        .note = n ? NULL : "no epoch has trained yet" };
    int rc = epoch_lines(p, base, "training throughput per epoch", p->x_trained, n, &panel, 1, err);
    free(y);
    return rc;
}

static int fig_swap(const struct plot *p, const char *base, struct tb_err *err)
{
    const struct run *run = p->run;
    double *v = malloc(3 * (run->n ? run->n : 1) * sizeof *v);
    if (!v)
        return tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory", base);
    double *out = v, *in = v + run->n, *stall = v + 2 * run->n;
    bool swapped = false;
    for (size_t i = 0; i < run->n; i++) {
        const struct row *r = &run->rows[i];
        out[i] = r->out_mib;
        in[i] = r->in_mib;
        stall[i] = r->stall_s;
        swapped = swapped || r->out_mib > 0 || r->in_mib > 0 || r->stall_s > 0;
    }
    const struct tb_fig_series moved[2] = { { "out (device to host)", out, run->n },
                                            { "in (host to device)", in, run->n } };
    const struct tb_fig_series stalled = { "stall", stall, run->n };
    const char *none = swapped ? NULL : "no swapping in this run";
    const struct tb_fig_panel panels[2] = {
        { .ylabel = "swapped (MiB)", .series = moved, .nseries = 2, .from_zero = true, .note = none },
        { .ylabel = "stalled on copies (s)", .series = &stalled, .nseries = 1, .from_zero = true },
    };
    int rc = epoch_lines(p, base, swapped ? "swapping per epoch" : "swapping per epoch (no swapping)", p->x, run->n,
                         panels, 2, err);
    free(v);
    return rc;
}

static int fig_class_iou(const struct plot *p, const char *base, struct tb_err *err)
{
    const struct run *run = p->run;
    const struct row *last = NULL;
    for (size_t i = run->n; i-- > 0 && !last;)
        if (run->rows[i].class_iou)
            last = &run->rows[i];
    const size_t n = last ? json_object_size(last->class_iou) : 0;
    const char **names = malloc((n ? n : 1) * sizeof *names);
    double *iou = malloc((n ? n : 1) * sizeof *iou);
    if (!names || !iou) {
        free(names);
        free(iou);
        return tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory", base);
    }
    size_t k = 0;
    if (last) {
        const char *key;
        json_t *v;
        json_object_foreach(last->class_iou, key, v)
        {
            names[k] = key;
            iou[k++] = json_is_number(v) ? 100.0 * json_number_value(v) : NAN;
        }
    }
    char title[256];
    if (last && isfinite(last->miou))
        snprintf(title, sizeof title, "%s: IoU per class after epoch %lld (mIoU %.1f%%)", p->name, last->epoch,
                 100.0 * last->miou);
    else if (last)
        snprintf(title, sizeof title, "%s: IoU per class after epoch %lld", p->name, last->epoch);
    else
        snprintf(title, sizeof title, "%s: IoU per class", p->name);
    const struct tb_fig_bar_series s = { "IoU", iou, NULL, k };
    const struct tb_fig_bars f = {
        .title = title,
        .xlabel = "class (n/a: not in the validation images nor predicted)",
        .ylabel = "IoU (%)",
        .categories = names,
        .ncategories = k,
        .series = &s,
        .nseries = 1,
        .value_decimals = 0,
        .ymax = 100,
        .note = last ? NULL : "no validated epoch in this run",
    };
    int rc = written(p, base, tb_fig_bars(base, &f, err));
    free(names);
    free(iou);
    return rc;
}

int tb_plot(const char *run_dir, const char *out_dir, FILE *out, struct tb_err *err)
{
    struct stat st;
    if (stat(run_dir, &st) != 0)
        return errno == ENOENT ? tb_err_set(err, TB_ERR_RUNTIME, "%s: no such run directory", run_dir)
                               : tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot read it: %s", run_dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: not a directory: plot takes a run directory of trainbig train",
                          run_dir);
    const size_t dl = strlen(run_dir);
    char *jsonl = malloc(dl + 16), *plots = malloc(dl + 16);
    if (!jsonl || !plots) {
        free(jsonl);
        free(plots);
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    }
    snprintf(jsonl, dl + 16, "%s/epochs.jsonl", run_dir);
    snprintf(plots, dl + 16, "%s/plots", run_dir);
    if (!out_dir)
        out_dir = plots;
    struct run run;
    int rc = read_rows(jsonl, &run, err);
    if (!rc && mkdir(out_dir, 0777) != 0 && errno != EEXIST)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot create the output directory: %s", out_dir, strerror(errno));
    if (!rc && (stat(out_dir, &st) != 0 || !S_ISDIR(st.st_mode)))
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: not a directory, cannot write the figures into it", out_dir);
    if (rc) {
        run_free(&run); /* empty when reading failed */
        free(jsonl);
        free(plots);
        return rc;
    }
    /* The run's name for the titles: its directory's last component ("." resolved). */
    char *name = realpath(run_dir, NULL);
    name = name ? name : strdup(run_dir);
    double *x = malloc(2 * run.n * sizeof *x);
    size_t *trained = malloc(run.n * sizeof *trained), ntrained = 0;
    if (!name || !x || !trained) {
        rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    } else {
        for (size_t l = strlen(name); l > 1 && name[l - 1] == '/';)
            name[--l] = '\0';
        for (size_t i = 0; i < run.n; i++) {
            x[i] = (double)run.rows[i].epoch;
            if (run.rows[i].trained) {
                x[run.n + ntrained] = x[i];
                trained[ntrained++] = i;
            }
        }
        if (run.runs > 1)
            fprintf(out, "%s holds %zu runs: drawing the last, from line %zu\n", jsonl, run.runs, run.first_line);
    }
    const char *slash = name ? strrchr(name, '/') : NULL;
    const struct plot p = {
        out_dir, slash && slash[1] ? slash + 1 : name, out, &run, x, trained, ntrained, x ? x + run.n : NULL
    };
    static const struct {
        const char *name;
        int (*draw)(const struct plot *, const char *, struct tb_err *);
    } figs[] = {
        { "loss", fig_loss }, { "accuracy", fig_accuracy },   { "throughput", fig_throughput },
        { "swap", fig_swap }, { "class_iou", fig_class_iou },
    };
    for (size_t i = 0; !rc && i < sizeof figs / sizeof figs[0]; i++) {
        char *base = base_of(&p, figs[i].name);
        rc = base ? figs[i].draw(&p, base, err) : tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        free(base);
    }
    free(x);
    free(trained);
    free(name);
    run_free(&run);
    free(jsonl);
    free(plots);
    return rc;
}

#else /* built without PLplot or jansson */

int tb_plot(const char *run_dir, const char *out_dir, FILE *out, struct tb_err *err)
{
    (void)run_dir;
    (void)out_dir;
    (void)out;
#if !defined(HAVE_PLPLOT) && !defined(HAVE_JANSSON)
    const char *what = "without PLplot (it draws the figures) and without jansson (it reads epochs.jsonl): install "
                       "libplplot-dev, plplot-driver-cairo and libjansson-dev";
#elif !defined(HAVE_PLPLOT)
    const char *what = "without PLplot, which draws the figures: install libplplot-dev and plplot-driver-cairo";
#else
    const char *what = "without jansson, which reads epochs.jsonl: install libjansson-dev";
#endif
    return tb_err_set(err, TB_ERR_RUNTIME,
                      "plot: this trainbig was built %s (Debian packages), then configure and "
                      "build it again",
                      what);
}

#endif
