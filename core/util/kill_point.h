/* core/util/kill_point.h: a process killed on purpose at a chosen durable write
 * (kill_point.c), so that tests can stop a run between any two of its writes and renames
 * and check what a resume makes of the files, instead of killing at random times.
 *
 * TRAINBIG_KILL_AT=N in the environment: the N-th call of tb_kill_point in this process
 * (counting from 1) writes "trainbig: killed at write N: PATH WHAT" to standard error and
 * raises SIGKILL. Unset, empty or not a positive number: no call does anything. */
#ifndef TB_CORE_KILL_POINT_H
#define TB_CORE_KILL_POINT_H

/* A durable write just made (what: which, path: of which file); see above. */
void tb_kill_point(const char *what, const char *path);

#endif
