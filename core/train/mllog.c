/* mllog.c: the MLPerf-style event log (core/train/mllog_internal.h). Each event is built
 * whole in memory and written with one call, then flushed, so a line is either all there
 * or, after a failed write, reported by name. The file is opened and flushed through the
 * [report] files' helpers (report_files.c), which name the file and the key on error. */
#include "config.h"

#include "core/train/mllog_internal.h"

#include <fcntl.h>

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/train/report_internal.h"
#include "core/util/text_internal.h"

static const char *const type_names[] = {
    [TB_MLLOG_START] = "INTERVAL_START",
    [TB_MLLOG_END] = "INTERVAL_END",
    [TB_MLLOG_POINT] = "POINT_IN_TIME",
};

int tb_mllog_open(struct tb_mllog *m, const char *path, bool append, struct tb_err *err)
{
    *m = (struct tb_mllog){ 0 };
    if (!(m->path = strdup(path)))
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    return tb_report_file_open(AT_FDCWD, m->path, m->path, "mllog", append, &m->f, err);
}

void tb_mllog_close(struct tb_mllog *m)
{
    if (m->f)
        fclose(m->f);
    free(m->path);
    *m = (struct tb_mllog){ 0 };
}

int64_t tb_mllog_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A number as JSON: the fewest digits that read back as v (up to 17); null when not
 * finite, which JSON cannot hold. */
static void put_number(struct tb_text *t, double v)
{
    if (!isfinite(v)) {
        tb_text_puts(t, "null");
        return;
    }
    char buf[40];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    tb_text_puts(t, buf);
}

static void put_int(struct tb_text *t, int64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    tb_text_puts(t, buf);
}

static void put_value(struct tb_text *t, const struct tb_mllog_value *v)
{
    switch (v->kind) {
    case TB_MLV_BOOL:
        tb_text_puts(t, v->b ? "true" : "false");
        return;
    case TB_MLV_INT:
        put_int(t, v->i);
        return;
    case TB_MLV_NUM:
        put_number(t, v->num);
        return;
    case TB_MLV_STR:
        tb_text_put_json_string(t, v->str ? v->str : "");
        return;
    case TB_MLV_NULL:
        break;
    }
    tb_text_puts(t, "null");
}

/* ", \"name\": value" for a metadata field that is set. */
static void put_meta_int(struct tb_text *t, const char *name, int64_t v)
{
    if (v < 0)
        return;
    tb_text_puts(t, ", \"");
    tb_text_puts(t, name);
    tb_text_puts(t, "\": ");
    put_int(t, v);
}

static void put_meta_text(struct tb_text *t, const char *name, const char *v)
{
    if (!v)
        return;
    tb_text_puts(t, ", \"");
    tb_text_puts(t, name);
    tb_text_puts(t, "\": ");
    tb_text_put_json_string(t, v);
}

int tb_mllog_event_at(struct tb_mllog *m, int64_t time_ms, enum tb_mllog_type type, const char *key,
                      struct tb_mllog_value v, struct tb_mllog_meta meta, struct tb_err *err)
{
    if (!m->f)
        return TB_OK;
    struct tb_text t = { 0 };
    tb_text_puts(&t, ":::MLLOG {\"namespace\": \"\", \"time_ms\": ");
    put_int(&t, time_ms);
    tb_text_puts(&t, ", \"event_type\": \"");
    tb_text_puts(&t, type_names[type]);
    tb_text_puts(&t, "\", \"key\": ");
    tb_text_put_json_string(&t, key);
    tb_text_puts(&t, ", \"value\": ");
    put_value(&t, &v);
    /* The library's metadata names the Python caller's file and line; a C program has
     * neither to give, so it names itself. */
    tb_text_puts(&t, ", \"metadata\": {\"file\": \"trainbig\", \"lineno\": 0");
    put_meta_int(&t, "epoch_num", meta.epoch_num);
    put_meta_int(&t, "first_epoch_num", meta.first_epoch_num);
    put_meta_int(&t, "epoch_count", meta.epoch_count);
    put_meta_text(&t, "status", meta.status);
    put_meta_text(&t, "error", meta.error);
    tb_text_puts(&t, "}}\n");
    if (t.oom) {
        free(t.s);
        return tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory for an event of the mllog report", m->path);
    }
    const bool written = fwrite(t.s, 1, t.len, m->f) == t.len;
    free(t.s);
    int rc = tb_report_file_flush(m->f, m->path, "mllog", err);
    if (!rc && !written)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot write the mllog report ([report] mllog)", m->path);
    return rc;
}

int tb_mllog_event(struct tb_mllog *m, enum tb_mllog_type type, const char *key, struct tb_mllog_value v,
                   struct tb_mllog_meta meta, struct tb_err *err)
{
    return tb_mllog_event_at(m, tb_mllog_now_ms(), type, key, v, meta, err);
}
