/* core/util/log_control.h: what the core and the command (not plugins) may do to the log. */
#ifndef TB_CORE_LOG_CONTROL_H
#define TB_CORE_LOG_CONTROL_H

#include <stdbool.h>
#include <stdio.h>
#include <trainbig/log.h>

/* "error", "warn" (or "warning"), "info", "debug", any case; -1 when none of these. */
int tb_log_level_parse(const char *text);

/* Sets the level. TRAINBIG_LOG, when set to a level, wins unless override_env. */
void tb_log_set_level(enum tb_log_level level, bool override_env);

/* True when TRAINBIG_LOG decided the level. */
bool tb_log_level_set_by_env(void);

/* A data-parallel run: every line names its rank, and ranks other than 0 write only
 * warnings and errors (rank 0 speaks for the job). */
void tb_log_set_rank(int rank, int size);

/* Forgets the level so TRAINBIG_LOG is read again (tests). */
void tb_log_reset(void);

/* Where lines go; NULL = stderr. The caller keeps the stream open while it is set. */
void tb_log_set_stream(FILE *stream);

#endif
