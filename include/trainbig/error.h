/* trainbig/error.h: errors are values.
 *
 * Functions that can fail return an int status (TB_OK or a negative tb_status) and,
 * when given a struct tb_err, write a message into it that a person can act on: the file,
 * section, key or sample at fault, the value, and what is allowed. The caller owns the
 * struct (usually on its stack); nothing in it needs freeing. */
#ifndef TRAINBIG_ERROR_H
#define TRAINBIG_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TB_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define TB_PRINTF(fmt, args)
#endif

enum tb_status {
    TB_OK = 0,
    TB_ERR_RUNTIME = -1, /* failed while running: I/O, a device, a plugin's own work */
    TB_ERR_CONFIG = -2,  /* the configuration or the command line is wrong (exit code 2) */
    TB_ERR_NOMEM = -3,   /* out of host memory */
    TB_ERR_PLUGIN = -4,  /* a plugin could not be found, loaded or accepted (exit code 2) */
};

#define TB_ERR_MSG_MAX 4096

struct tb_err {
    int status;               /* first non-OK status recorded, TB_OK when clear */
    int count;                /* how many messages were recorded */
    char msg[TB_ERR_MSG_MAX]; /* one line per message, no trailing newline */
};

/* Resets e to "no error". e may be NULL. */
void tb_err_clear(struct tb_err *e);

/* Replaces e's message with one line and returns status, so a caller can write
 * `return tb_err_set(err, TB_ERR_CONFIG, "...")`. e may be NULL (then only returns); an
 * argument may be e->msg itself (the old message quoted in the new one). */
int tb_err_set(struct tb_err *e, int status, const char *fmt, ...) TB_PRINTF(3, 4);

/* Appends one more line (for validators that report every problem at once) and returns
 * status. Lines past TB_ERR_MSG_MAX are counted and summarised, never dropped silently; a
 * single message longer than the whole buffer keeps its start and ends with
 * "[message cut: N more bytes]". */
int tb_err_add(struct tb_err *e, int status, const char *fmt, ...) TB_PRINTF(3, 4);
int tb_err_vadd(struct tb_err *e, int status, const char *fmt, va_list ap);

/* Puts "prefix: " in front of e's message (single-line messages only; a multi-line message
 * gets the prefix on its first line). Where the two would not fit, the message's end gives
 * way and "[message cut: N more bytes]" says so. Returns e->status. */
int tb_err_prefix(struct tb_err *e, const char *fmt, ...) TB_PRINTF(2, 3);

/* The process exit code for a status: 0 for TB_OK, 2 for configuration and plugin
 * errors, 1 for everything else. */
int tb_exit_code(int status);

/* A short name for a status ("configuration error", ...). Static storage. */
const char *tb_status_name(int status);

#ifdef __cplusplus
}
#endif
#endif
