/* backends/sim/sim_profile.c: measured per-op times for the sim backend (sim_profile.h). */
#include "config.h"

#include "sim_profile.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/file.h>
#ifdef HAVE_JANSSON
#include <jansson.h>
#endif

/* A profile larger than this is not one step's ops: refused before it is read. */
#define MAX_BYTES ((long)256 << 20)

static int add(struct sim_profile *p, const char *op, size_t len, double seconds, uint64_t scratch,
               struct tb_err *err)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 256;
        struct sim_timing *t = realloc(p->t, cap * sizeof *t);
        if (!t)
            return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        p->t = t;
        p->cap = cap;
    }
    char *s = malloc(len + 1);
    if (!s)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    memcpy(s, op, len);
    s[len] = '\0';
    p->t[p->n++] = (struct sim_timing){ s, seconds, scratch };
    return TB_OK;
}

static int by_op_then_seconds(const void *a, const void *b)
{
    const struct sim_timing *x = a, *y = b;
    int c = strcmp(x->op, y->op);
    return c ? c : (x->seconds > y->seconds) - (x->seconds < y->seconds);
}

/* Sorted, then each run of one signature collapsed to its median time and most scratch. */
static void medians(struct sim_profile *p)
{
    qsort(p->t, p->n, sizeof *p->t, by_op_then_seconds);
    size_t out = 0;
    for (size_t i = 0; i < p->n;) {
        size_t j = i;
        while (j < p->n && strcmp(p->t[j].op, p->t[i].op) == 0)
            j++;
        const size_t mid = i + (j - i - 1) / 2;
        double median = (j - i) % 2 ? p->t[mid].seconds : 0.5 * (p->t[mid].seconds + p->t[mid + 1].seconds);
        char *keep = p->t[i].op;
        uint64_t scratch = p->t[i].scratch;
        for (size_t k = i + 1; k < j; k++) {
            scratch = p->t[k].scratch > scratch ? p->t[k].scratch : scratch;
            free(p->t[k].op);
        }
        p->t[out++] = (struct sim_timing){ keep, median, scratch };
        i = j;
    }
    p->n = out;
}

static bool valid_seconds(double s)
{
    return isfinite(s) && s >= 0 && s < 3600;
}

/* More than any device holds: not an op's scratch. */
#define MAX_SCRATCH ((uint64_t)1 << 44)

/* A whole decimal number of bytes in 0..MAX_SCRATCH, spaces around allowed. */
static bool parse_bytes(const char *s, uint64_t *out)
{
    while (isspace((unsigned char)*s))
        s++;
    if (!isdigit((unsigned char)*s))
        return false;
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(s, &end, 10);
    while (isspace((unsigned char)*end))
        end++;
    if (errno || *end || v > MAX_SCRATCH)
        return false;
    *out = v;
    return true;
}

static int load_csv(struct sim_profile *p, FILE *f, const char *path, struct tb_err *err)
{
    char line[2048];
    long no = 0;
    bool header = false, with_scratch = false;
    while (fgets(line, sizeof line, f)) {
        no++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n')
            return tb_err_set(err, TB_ERR_CONFIG, "%s:%ld: line longer than %zu bytes", path, no, sizeof line - 2);
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0 || line[0] == '#')
            continue;
        if (!header) {
            with_scratch = strcmp(line, "op,seconds,scratch_bytes") == 0;
            if (!with_scratch && strcmp(line, "op,seconds") != 0)
                return tb_err_set(err, TB_ERR_CONFIG,
                                  "%s:%ld: the header is neither 'op,seconds' nor 'op,seconds,scratch_bytes' (a "
                                  "profile CSV: one op's signature and its measured seconds per line, or a Chrome "
                                  "trace)",
                                  path, no);
            header = true;
            continue;
        }
        uint64_t scratch = 0;
        if (with_scratch) {
            char *last = strrchr(line, ',');
            if (!last || !parse_bytes(last + 1, &scratch))
                return tb_err_set(err, TB_ERR_CONFIG,
                                  "%s:%ld: scratch_bytes '%.40s' is not a whole number of bytes in 0..2^44", path, no,
                                  last ? last + 1 : line);
            *last = '\0';
        }
        char *comma = strrchr(line, ',');
        if (!comma || comma == line)
            return tb_err_set(err, TB_ERR_CONFIG, "%s:%ld: not 'signature,seconds'", path, no);
        char *end;
        errno = 0;
        const double s = strtod(comma + 1, &end);
        while (isspace((unsigned char)*end))
            end++;
        if (errno || end == comma + 1 || *end || !valid_seconds(s))
            return tb_err_set(err, TB_ERR_CONFIG, "%s:%ld: seconds '%.40s' is not a number in 0..3600", path, no,
                              comma + 1);
        int rc = add(p, line, (size_t)(comma - line), s, scratch, err);
        if (rc)
            return rc;
    }
    if (ferror(f))
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: read failed: %s", path, strerror(errno));
    if (!header)
        return tb_err_set(err, TB_ERR_CONFIG, "%s: empty: no 'op,seconds' header", path);
    return TB_OK;
}

#ifdef HAVE_JANSSON
static int load_trace(struct sim_profile *p, FILE *f, const char *path, struct tb_err *err)
{
    json_error_t je;
    json_t *root = json_loadf(f, 0, &je);
    if (!root)
        return tb_err_set(err, TB_ERR_CONFIG, "%s:%d: not a Chrome trace: %s", path, je.line, je.text);
    json_t *events = json_object_get(root, "traceEvents");
    int rc = TB_OK;
    if (!json_is_array(events))
        rc = tb_err_set(err, TB_ERR_CONFIG, "%s: not a Chrome trace: no traceEvents array", path);
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev)
    {
        if (rc)
            break;
        const char *cat = json_string_value(json_object_get(ev, "cat"));
        if (!cat || strcmp(cat, "op") != 0)
            continue; /* copies, recomputations, moves, names */
        json_t *args = json_object_get(ev, "args");
        const char *op = json_string_value(json_object_get(args, "op"));
        json_t *dur = json_object_get(ev, "dur"), *scratch = json_object_get(args, "scratch");
        if (!op || !*op)
            rc = tb_err_set(err, TB_ERR_CONFIG,
                            "%s: event %zu: an op without its signature (args.op): a trace from a trainbig older "
                            "than the sim backend, which cannot calibrate it",
                            path, i);
        else if (!json_is_number(dur) || !valid_seconds(json_number_value(dur) * 1e-6))
            rc = tb_err_set(err, TB_ERR_CONFIG, "%s: event %zu (%.60s): dur is not microseconds in 0..3.6e9", path, i,
                            op);
        else if (scratch && (!json_is_integer(scratch) || json_integer_value(scratch) < 0 ||
                             (uint64_t)json_integer_value(scratch) > MAX_SCRATCH))
            rc = tb_err_set(err, TB_ERR_CONFIG, "%s: event %zu (%.60s): args.scratch is not bytes in 0..2^44", path,
                            i, op);
        else
            rc = add(p, op, strlen(op), json_number_value(dur) * 1e-6,
                     scratch ? (uint64_t)json_integer_value(scratch) : 0, err);
    }
    json_decref(root);
    return rc;
}
#endif

int sim_profile_load(struct sim_profile *p, const char *path, struct tb_err *err)
{
    memset(p, 0, sizeof *p);
    FILE *f = tb_fopen_regular(path, "[backend] sim_profile", TB_ERR_CONFIG, err);
    if (!f)
        return err->status ? err->status : TB_ERR_CONFIG;
    int rc = TB_OK;
    if (fseek(f, 0, SEEK_END) == 0 && ftell(f) > MAX_BYTES)
        rc = tb_err_set(err, TB_ERR_CONFIG, "%s: larger than %ld MiB: not one step's profile", path, MAX_BYTES >> 20);
    rewind(f);
    int c;
    while (rc == TB_OK && (c = getc(f)) != EOF && isspace(c))
        ;
    if (rc == TB_OK) {
        if (c != EOF)
            ungetc(c, f);
        if (c == '{') {
#ifdef HAVE_JANSSON
            rc = load_trace(p, f, path, err);
#else
            rc = tb_err_set(err, TB_ERR_CONFIG,
                            "%s: a Chrome trace, and this build reads none (built without jansson): give the CSV "
                            "form, 'op,seconds'",
                            path);
#endif
        } else {
            rc = load_csv(p, f, path, err);
        }
    }
    fclose(f);
    if (rc == TB_OK && p->n == 0)
        rc = tb_err_set(err, TB_ERR_CONFIG, "%s: no op timings in it", path);
    if (rc) {
        sim_profile_free(p);
        return rc;
    }
    p->read = p->n;
    medians(p);
    return TB_OK;
}

void sim_profile_free(struct sim_profile *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->t[i].op);
    free(p->t);
    memset(p, 0, sizeof *p);
}

static int by_op(const void *key, const void *elem)
{
    return strcmp(key, ((const struct sim_timing *)elem)->op);
}

const struct sim_timing *sim_profile_lookup(const struct sim_profile *p, const char *op)
{
    return p->n ? bsearch(op, p->t, p->n, sizeof *p->t, by_op) : NULL;
}

double sim_profile_find(const struct sim_profile *p, const char *op)
{
    const struct sim_timing *t = sim_profile_lookup(p, op);
    return t ? t->seconds : -1;
}
