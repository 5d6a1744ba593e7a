/* trainbig/log.h: the one logging facility.
 *
 * Lines go to stderr as "YYYY-MM-DD HH:MM:SS.mmm level [tag] message". The level comes from
 * [run] log_level, or from the TRAINBIG_LOG environment variable, which wins (error, warn,
 * info, debug). Plugins log through tb_plog() in trainbig/plugin.h so their name is on
 * every line. Thread-safe: one line is written at a time. */
#ifndef TRAINBIG_LOG_H
#define TRAINBIG_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <trainbig/error.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tb_log_level {
    TB_LOG_ERROR = 0,
    TB_LOG_WARN = 1,
    TB_LOG_INFO = 2,
    TB_LOG_DEBUG = 3,
};

/* True when a message at this level would be written (to skip costly formatting). */
bool tb_log_enabled(enum tb_log_level level);

/* A core message, tagged "core". */
void tb_log(enum tb_log_level level, const char *fmt, ...) TB_PRINTF(2, 3);

/* A message tagged with tag (for example "swap/lru"); tag may be NULL for "core". */
void tb_log_tagged(const char *tag, enum tb_log_level level, const char *fmt, ...) TB_PRINTF(3, 4);
void tb_vlog_tagged(const char *tag, enum tb_log_level level, const char *fmt, va_list ap);

#ifdef __cplusplus
}
#endif
#endif
