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

int tb_err_vadd(struct tb_err *e, int status, const char *fmt, va_list ap)
{
    if (!e)
        return status;
    if (e->status == TB_OK)
        e->status = status;
    size_t len = strlen(e->msg);
    /* Keep room for the summary line written when the buffer fills up. */
    const size_t reserve = 64;
    if (len + reserve < sizeof e->msg) {
        char line[1024];
        vsnprintf(line, sizeof line, fmt, ap);
        size_t need = strlen(line) + (len ? 1 : 0);
        if (len + need + reserve < sizeof e->msg) {
            if (len)
                e->msg[len++] = '\n';
            memcpy(e->msg + len, line, strlen(line) + 1);
            e->count++;
            return status;
        }
    }
    e->count++;
    /* Full: rewrite the last line as a count of what did not fit. */
    char *tail = strstr(e->msg, "\n(and ");
    if (!tail)
        tail = e->msg + len;
    int shown = 0;
    for (const char *p = e->msg; p < tail && *p; p++)
        shown += *p == '\n';
    shown += tail > e->msg;
    snprintf(tail, sizeof e->msg - (size_t)(tail - e->msg), "%s(and %d more)", tail > e->msg ? "\n" : "",
             e->count - shown);
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
    /* Formatted before e is cleared: an argument may be e->msg itself ("... (the last:
     * %s)", err->msg), which clearing first would empty. */
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    tb_err_clear(e);
    return tb_err_add(e, status, "%s", line);
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
    size_t plen = strlen(prefix) + 2, mlen = strlen(e->msg);
    if (plen >= sizeof e->msg)
        plen = sizeof e->msg - 1;
    if (plen + mlen >= sizeof e->msg)
        mlen = sizeof e->msg - 1 - plen;
    memmove(e->msg + plen, e->msg, mlen);
    e->msg[plen + mlen] = '\0';
    memcpy(e->msg, prefix, plen - 2);
    memcpy(e->msg + plen - 2, ": ", 2);
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
