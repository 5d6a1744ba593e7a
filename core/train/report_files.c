/* report_files.c: the CSV and JSONL report files (core/train/report_internal.h): opened
 * for appending, cut back to the checkpoint's epochs when a run resumes, and every write
 * checked, so that a report that cannot be written stops the run by name instead of
 * training on with empty files. Opening and flushing a [report] file with those messages
 * is shared with the MLPerf log (mllog.c). */
#include "config.h"

#include "core/train/report_internal.h"
#include "core/util/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util/kill_point.h"
#include "core/util/log_control.h"
#include "core/util/text_internal.h"

/* The epoch a report line is the row of; false for the CSV header or a line that is no
 * row (kept as it is). */
static bool row_epoch(const char *line, bool csv, uint64_t *epoch)
{
    const char *p = line;
    if (!csv) {
        p = strstr(line, "\"epoch\":");
        if (!p)
            return false;
        p += 8;
    }
    if (*p < '0' || *p > '9')
        return false;
    char *end;
    *epoch = strtoull(p, &end, 10);
    return *end == ',';
}

/* Opens name in dirfd for reading, never through a symbolic link; NULL with errno set. */
static FILE *open_read(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f && fd >= 0)
        close(fd);
    return f;
}

/* Rewrites name (path in messages) without the rows of epochs after `keep`: those of a
 * run that stopped after reporting them and before checkpointing, which the resumed run
 * reports again; and without a last line that has no newline (a row cut by a kill while
 * it was written). Through a temporary file renamed into place; nothing is touched when
 * nothing goes. */
static int drop_rows_after(int dirfd, const char *name, const char *path, bool csv, uint64_t keep, struct tb_err *err)
{
    FILE *in = open_read(dirfd, name);
    if (!in)
        return errno == ENOENT ? TB_OK : tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot read: %s", path, strerror(errno));
    struct tb_text kept = { 0 };
    char *line = NULL;
    size_t cap = 0, dropped = 0;
    ssize_t n;
    uint64_t first = 0, last = 0, epoch;
    bool torn = false;
    while ((n = getline(&line, &cap, in)) >= 0) {
        if (line[n - 1] != '\n') {
            torn = true; /* only the last line can lack one */
            continue;
        }
        if (row_epoch(line, csv, &epoch) && epoch > keep) {
            first = dropped++ ? first : epoch;
            last = epoch > last ? epoch : last;
            continue;
        }
        tb_text_put(&kept, line, (size_t)n);
    }
    free(line);
    const bool read_error = ferror(in);
    fclose(in);
    int rc = TB_OK;
    if (read_error)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot read: %s", path, strerror(errno));
    else if (kept.oom)
        rc = tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory", path);
    if (rc || (!dropped && !torn)) {
        free(kept.s);
        return rc;
    }
    struct tb_atomic_file a;
    rc = tb_atomic_openat(&a, dirfd, name, path, err);
    if (!rc && kept.len && fwrite(kept.s, 1, kept.len, a.f) != kept.len)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot rewrite it: %s", path, strerror(errno));
    if (a.f)
        rc = tb_atomic_close(&a, rc, err);
    if (!rc && torn)
        tb_log(TB_LOG_INFO, "%s: dropped its last line, cut short by a stop while it was written", path);
    if (!rc && dropped)
        tb_log(TB_LOG_INFO,
               "%s: dropped %zu row(s) of epochs %" PRIu64 "..%" PRIu64
               ", which the checkpoint does not hold: the resumed run reports them again",
               path, dropped, first, last);
    free(kept.s);
    return rc;
}

/* Opens [report] `key`'s file for appending: v, or when v is "" `file` in the run
 * directory (open as dirfd, rundir in messages), first without the rows after epoch
 * `keep`. *path is the caller's. */
static int open_one(const char *v, int dirfd, const char *rundir, const char *key, const char *file, uint64_t keep,
                    FILE **out, char **path, bool *fresh, struct tb_err *err)
{
    size_t len = (v[0] ? strlen(v) : strlen(rundir) + strlen(file) + 1) + 1;
    if (!(*path = malloc(len)))
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    if (v[0])
        snprintf(*path, len, "%s", v);
    else
        snprintf(*path, len, "%s/%s", rundir, file);
    const int at = v[0] ? AT_FDCWD : dirfd;
    const char *name = v[0] ? v : file;
    int rc = keep == UINT64_MAX ? TB_OK : drop_rows_after(at, name, *path, strcmp(key, "csv") == 0, keep, err);
    if (rc)
        return tb_err_prefix(err, "[report] %s", key);
    rc = tb_report_file_open(at, name, *path, key, true, out, err);
    struct stat st;
    *fresh = !rc && (fstat(fileno(*out), &st) != 0 || st.st_size == 0);
    return rc;
}

int tb_report_file_open(int dirfd, const char *name, const char *path, const char *key, bool append, FILE **out,
                        struct tb_err *err)
{
    /* In the run directory never through a symbolic link; a path the user named is
     * theirs to point where they like (/dev/stdout). */
    const int flags =
        O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC) | (dirfd == AT_FDCWD ? 0 : O_NOFOLLOW);
    int fd = openat(dirfd, name, flags, 0666);
    *out = fd >= 0 ? fdopen(fd, append ? "a" : "w") : NULL;
    if (*out)
        return TB_OK;
    const int e = errno;
    if (fd >= 0)
        close(fd);
    if (e == ELOOP && dirfd != AT_FDCWD)
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "%s: is a symbolic link: refusing to write the %s report ([report] %s) through it", path, key,
                          key);
    return tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot open the %s report ([report] %s): %s", path, key, key,
                      strerror(e));
}

int tb_report_open(struct tb_report *rep, const struct tb_report_settings *report, int dirfd, const char *rundir,
                   uint64_t keep, struct tb_err *err)
{
    bool fresh;
    int rc = open_one(report->csv, dirfd, rundir, "csv", "epochs.csv", keep, &rep->csv, &rep->csv_path, &fresh, err);
    if (rc)
        return rc;
    if (fresh)
        tb_report_csv_header(rep, rep->csv);
    rc = open_one(report->jsonl, dirfd, rundir, "jsonl", "epochs.jsonl", keep, &rep->jsonl, &rep->jsonl_path, &fresh,
                  err);
    /* The header written now, so a file that cannot take it fails before any step. */
    return rc ? rc : tb_report_flush(rep, err);
}

int tb_report_file_flush(FILE *f, const char *path, const char *key, struct tb_err *err)
{
    if (!f)
        return TB_OK;
    errno = 0;
    if (fflush(f) == 0 && !ferror(f))
        return TB_OK;
    return tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot write the %s report ([report] %s): %s", path, key, key,
                      errno ? strerror(errno) : "write error");
}

int tb_report_flush(const struct tb_report *rep, struct tb_err *err)
{
    int rc = tb_report_file_flush(rep->csv, rep->csv_path, "csv", err);
    return rc ? rc : tb_report_file_flush(rep->jsonl, rep->jsonl_path, "jsonl", err);
}

/* f written through and on disk: an error names path and [report] key. A file that
 * cannot be synced (a pipe, /dev/null) is as durable as it gets once written. */
static int sync_one(FILE *f, const char *path, const char *key, struct tb_err *err)
{
    if (!f)
        return TB_OK;
    int rc = tb_report_file_flush(f, path, key, err);
    if (!rc && fsync(fileno(f)) != 0 && errno != EINVAL && errno != EROFS)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot sync the %s report ([report] %s): %s", path, key, key,
                        strerror(errno));
    if (!rc)
        tb_kill_point("row written", path);
    return rc;
}

int tb_report_sync(const struct tb_report *rep, bool jsonl, struct tb_err *err)
{
    return jsonl ? sync_one(rep->jsonl, rep->jsonl_path, "jsonl", err) : sync_one(rep->csv, rep->csv_path, "csv", err);
}

void tb_report_close(struct tb_report *rep)
{
    if (rep->csv)
        fclose(rep->csv);
    if (rep->jsonl)
        fclose(rep->jsonl);
    free(rep->csv_path);
    free(rep->jsonl_path);
    rep->csv = rep->jsonl = NULL;
    rep->csv_path = rep->jsonl_path = NULL;
}
