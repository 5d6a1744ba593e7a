/* error.c: struct tb_err, the message carrier of every fallible call. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <trainbig/error.h>

void tb_err_clear(struct tb_err *e)
{
    if (!e)
        return;
    e->status = TB_OK;
    e->count = 0;
    e->msg[0] = '\0';
}

/* Keep room for the line written when the buffer fills up. */
enum { RESERVE = 64 };

/* Ends a message at `at`, where `cut` of its bytes had no room, saying so. */
static void mark_cut(char *at, size_t cut)
{
    snprintf(at, RESERVE + 1, " [message cut: %zu more bytes]", cut);
}

/* Appends one message: line holds the first bytes of a message n bytes long (all of it when
 * n < TB_ERR_MSG_MAX). A message that does not fit beside those before it is counted in a
 * closing "(and N more)"; a first message longer than the whole buffer keeps its start and
 * says how many bytes were cut. Nothing is dropped without a word. */
static void append(struct tb_err *e, const char *line, size_t n)
{
    size_t used = strlen(e->msg);
    e->count++;
    if (used + 1 + n + RESERVE < sizeof e->msg) {
        if (used)
            e->msg[used++] = '\n';
        memcpy(e->msg + used, line, n + 1);
        return;
    }
    if (!used) {
        size_t keep = sizeof e->msg - RESERVE - 1;
        memcpy(e->msg, line, keep);
        mark_cut(e->msg + keep, n - keep);
        return;
    }
    /* Full: rewrite the last line as a count of what did not fit. */
    char *tail = strstr(e->msg, "\n(and ");
    if (!tail)
        tail = e->msg + used;
    int shown = 0;
    for (const char *p = e->msg; p < tail && *p; p++)
        shown += *p == '\n';
    shown += tail > e->msg;
    snprintf(tail, sizeof e->msg - (size_t)(tail - e->msg), "%s(and %d more)", tail > e->msg ? "\n" : "",
             e->count - shown);
}

/* Formats into line (TB_ERR_MSG_MAX bytes); returns the whole message's length, which is
 * more than line holds when the message is longer. */
static size_t format(char *line, const char *fmt, va_list ap)
{
    int n = vsnprintf(line, TB_ERR_MSG_MAX, fmt, ap);
    if (n < 0) {
        snprintf(line, TB_ERR_MSG_MAX, "(a message that could not be formatted: \"%s\")", fmt);
        return strlen(line);
    }
    return (size_t)n;
}

int tb_err_vadd(struct tb_err *e, int status, const char *fmt, va_list ap)
{
    if (!e)
        return status;
    if (e->status == TB_OK)
        e->status = status;
    char line[TB_ERR_MSG_MAX];
    append(e, line, format(line, fmt, ap));
    return status;
}

int tb_err_add(struct tb_err *e, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tb_err_vadd(e, status, fmt, ap);
    va_end(ap);
    return status;
}

int tb_err_set(struct tb_err *e, int status, const char *fmt, ...)
{
    if (!e)
        return status;
    /* Formatted before e is cleared: an argument may be e->msg itself ("... (the last:
     * %s)", err->msg), which clearing first would empty. */
    char line[TB_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    size_t n = format(line, fmt, ap);
    va_end(ap);
    tb_err_clear(e);
    e->status = status;
    append(e, line, n);
    return status;
}

int tb_err_prefix(struct tb_err *e, const char *fmt, ...)
{
    if (!e)
        return TB_ERR_RUNTIME;
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    size_t plen = strlen(prefix) + 2, mlen = strlen(e->msg), cut = 0;
    if (plen + mlen >= sizeof e->msg) {
        /* The message's end gives way to the prefix, and says how much of it did. */
        size_t keep = sizeof e->msg - RESERVE - 1 - plen;
        cut = mlen - keep;
        mlen = keep;
    }
    memmove(e->msg + plen, e->msg, mlen);
    e->msg[plen + mlen] = '\0';
    memcpy(e->msg, prefix, plen - 2);
    memcpy(e->msg + plen - 2, ": ", 2);
    if (cut)
        mark_cut(e->msg + plen + mlen, cut);
    return e->status;
}

int tb_exit_code(int status)
{
    switch (status) {
    case TB_OK:
        return 0;
    case TB_ERR_CONFIG:
    case TB_ERR_PLUGIN:
        return 2;
    default:
        return 1;
    }
}

const char *tb_status_name(int status)
{
    switch (status) {
    case TB_OK:
        return "ok";
    case TB_ERR_CONFIG:
        return "configuration error";
    case TB_ERR_PLUGIN:
        return "plugin error";
    case TB_ERR_NOMEM:
        return "out of memory";
    default:
        return "runtime error";
    }
}
