/* core/train/mllog_internal.h: the run's MLPerf-style event log ([report] mllog, mllog.c).
 * One event per line: ":::MLLOG " and a JSON object whose members are, in this order,
 * namespace (""), time_ms (the wall clock, milliseconds since the Unix epoch), event_type
 * (INTERVAL_START, INTERVAL_END or POINT_IN_TIME), key, value and metadata ({"file":
 * "trainbig", "lineno": 0} and the event's own fields), spaced as the MLPerf logging
 * library writes them, so that the tools that read its logs read this one. Every line is
 * flushed as it is written: a run that dies keeps the events before its end. Which events
 * a run writes, and when, is the trainer's (trainer_mllog.c).
 *
 * Memory: struct tb_mllog owns its file and its copy of the path; tb_mllog_close() frees
 * both. Only rank 0 opens one; on a struct never opened (the key empty, another rank)
 * every event is a no-op. */
#ifndef TB_CORE_MLLOG_INTERNAL_H
#define TB_CORE_MLLOG_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <trainbig/error.h>

enum tb_mllog_type { TB_MLLOG_START, TB_MLLOG_END, TB_MLLOG_POINT };

/* An event's value: null, a boolean, an integer, a number (non-finite: null) or a string
 * (the caller's, escaped as it is written). */
enum tb_mllog_kind { TB_MLV_NULL = 0, TB_MLV_BOOL, TB_MLV_INT, TB_MLV_NUM, TB_MLV_STR };
struct tb_mllog_value {
    enum tb_mllog_kind kind;
    bool b;
    int64_t i;
    double num;
    const char *str;
};

/* The metadata after file and lineno: an epoch field < 0 and a NULL text are left out.
 * Start from TB_MLLOG_META. */
struct tb_mllog_meta {
    int64_t epoch_num, first_epoch_num, epoch_count;
    const char *status; /* run_stop: "success" or "aborted" */
    const char *error;  /* run_stop after an error: its message */
};
#define TB_MLLOG_META ((struct tb_mllog_meta){ -1, -1, -1, NULL, NULL })

struct tb_mllog {
    FILE *f;    /* owned; NULL when there is no log */
    char *path; /* owned: the file, for messages */
};

/* Opens path ([report] mllog): truncated for a new run, appended to when `append` (a
 * resumed run). An error names the file and the key. Only rank 0 calls it. */
int tb_mllog_open(struct tb_mllog *m, const char *path, bool append, struct tb_err *err);
void tb_mllog_close(struct tb_mllog *m);

/* The wall clock as time_ms: milliseconds since the Unix epoch (CLOCK_REALTIME). */
int64_t tb_mllog_now_ms(void);

/* Writes one event, stamped now (tb_mllog_event) or at time_ms, and flushes it; an error
 * names the file. Nothing happens when m has no file. */
int tb_mllog_event(struct tb_mllog *m, enum tb_mllog_type type, const char *key, struct tb_mllog_value v,
                   struct tb_mllog_meta meta, struct tb_err *err);
int tb_mllog_event_at(struct tb_mllog *m, int64_t time_ms, enum tb_mllog_type type, const char *key,
                      struct tb_mllog_value v, struct tb_mllog_meta meta, struct tb_err *err);

/* Values. */
static inline struct tb_mllog_value tb_mllog_null(void)
{
    return (struct tb_mllog_value){ .kind = TB_MLV_NULL };
}
static inline struct tb_mllog_value tb_mllog_bool(bool b)
{
    return (struct tb_mllog_value){ .kind = TB_MLV_BOOL, .b = b };
}
static inline struct tb_mllog_value tb_mllog_int(int64_t i)
{
    return (struct tb_mllog_value){ .kind = TB_MLV_INT, .i = i };
}
static inline struct tb_mllog_value tb_mllog_num(double num)
{
    return (struct tb_mllog_value){ .kind = TB_MLV_NUM, .num = num };
}
static inline struct tb_mllog_value tb_mllog_str(const char *str)
{
    return (struct tb_mllog_value){ .kind = TB_MLV_STR, .str = str };
}

#endif
