/* log.c: timestamped, levelled log lines on stderr (or a stream a test chooses). */
#include "config.h"

#include "core/util/log_control.h"
#include "core/util/printable.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <trainbig/plugin.h>

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_level = -1; /* -1: not decided yet (TRAINBIG_LOG or info) */
static bool log_level_from_env;
static FILE *log_stream;
static int log_rank, log_ranks = 1;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

int tb_log_level_parse(const char *text)
{
    if (!text)
        return -1;
    for (int i = 0; i < 4; i++)
        if (strcasecmp(text, level_names[i]) == 0)
            return i;
    if (strcasecmp(text, "warning") == 0)
        return TB_LOG_WARN;
    return -1;
}

static void decide_level(void)
{
    if (log_level >= 0)
        return;
    const char *env = getenv("TRAINBIG_LOG");
    int l = tb_log_level_parse(env);
    if (l >= 0) {
        log_level = l;
        log_level_from_env = true;
    } else {
        log_level = TB_LOG_INFO;
        if (env && *env)
            fprintf(stderr,
                    "trainbig: TRAINBIG_LOG=%s is not a log level (allowed: error, warn, info, debug); ignoring it\n",
                    env);
    }
}

void tb_log_set_level(enum tb_log_level level, bool override_env)
{
    pthread_mutex_lock(&log_lock);
    decide_level();
    if (override_env || !log_level_from_env)
        log_level = (int)level;
    pthread_mutex_unlock(&log_lock);
}

bool tb_log_level_set_by_env(void)
{
    pthread_mutex_lock(&log_lock);
    decide_level();
    bool r = log_level_from_env;
    pthread_mutex_unlock(&log_lock);
    return r;
}

void tb_log_reset(void)
{
    pthread_mutex_lock(&log_lock);
    log_level = -1;
    log_level_from_env = false;
    pthread_mutex_unlock(&log_lock);
}

void tb_log_set_stream(FILE *stream)
{
    pthread_mutex_lock(&log_lock);
    log_stream = stream;
    pthread_mutex_unlock(&log_lock);
}

bool tb_log_enabled(enum tb_log_level level)
{
    pthread_mutex_lock(&log_lock);
    decide_level();
    bool on = (int)level <= log_level;
    pthread_mutex_unlock(&log_lock);
    return on;
}

void tb_log_set_rank(int rank, int size)
{
    pthread_mutex_lock(&log_lock);
    log_rank = rank;
    log_ranks = size;
    pthread_mutex_unlock(&log_lock);
}

void tb_vlog_tagged(const char *tag, enum tb_log_level level, const char *fmt, va_list ap)
{
    if (!tb_log_enabled(level) || (log_rank != 0 && level > TB_LOG_WARN))
        return;
    char raw[2048], msg[4 * sizeof raw];
    vsnprintf(raw, sizeof raw, fmt, ap);
    tb_printable(msg, sizeof msg, raw); /* it may quote what a user or a file gave */

    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);

    unsigned l = (unsigned)level < 4 ? (unsigned)level : 3;
    pthread_mutex_lock(&log_lock);
    FILE *out = log_stream ? log_stream : stderr;
    if (log_ranks > 1)
        fprintf(out, "%s.%03ld %-5s [rank %d] [%s] %s\n", stamp, (long)(tv.tv_usec / 1000), level_names[l], log_rank,
                tag ? tag : "core", msg);
    else
        fprintf(out, "%s.%03ld %-5s [%s] %s\n", stamp, (long)(tv.tv_usec / 1000), level_names[l], tag ? tag : "core",
                msg);
    fflush(out);
    pthread_mutex_unlock(&log_lock);
}

void tb_log_tagged(const char *tag, enum tb_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tb_vlog_tagged(tag, level, fmt, ap);
    va_end(ap);
}

void tb_log(enum tb_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tb_vlog_tagged(NULL, level, fmt, ap);
    va_end(ap);
}

void tb_log_plugin(const struct tb_plugin *p, enum tb_log_level level, const char *fmt, ...)
{
    char tag[160];
    const char *kind = p ? tb_kind_name(p->kind) : NULL;
    snprintf(tag, sizeof tag, "%s/%s", kind ? kind : "plugin", p && p->name ? p->name : "?");
    va_list ap;
    va_start(ap, fmt);
    tb_vlog_tagged(tag, level, fmt, ap);
    va_end(ap);
}
