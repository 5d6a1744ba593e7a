/* core/util/atomic_file.h: writing a file whole or not at all (atomic_file.c).
 *
 * The bytes go to PATH.tmp.PID beside PATH; closing flushes them to disk, renames the
 * temporary over PATH and syncs the directory, so a reader, a crash or a full disk leaves
 * the old file or the new one, never half of one. A failure removes the temporary; one a
 * killed process left behind is swept by the next run (report_files.c). Checkpoints,
 * reports rewritten on resume, traces and pictures are written this way. */
#ifndef TB_CORE_ATOMIC_FILE_H
#define TB_CORE_ATOMIC_FILE_H

#include <stdio.h>
#include <trainbig/error.h>

struct tb_atomic_file {
    FILE *f;    /* write here (binary mode) */
    char *path; /* the target; owned */
    char *tmp;  /* the temporary beside it; owned */
};

/* Creates the temporary for path; on failure (err names path) nothing is left open. */
int tb_atomic_open(struct tb_atomic_file *a, const char *path, struct tb_err *err);
/* With rc == TB_OK: flushes, syncs, closes and renames the temporary over the target;
 * a failure there is an error naming the target. With rc != TB_OK (the writer failed and
 * said so in err): closes and removes the temporary, and returns rc with err untouched.
 * Either way a is released. */
int tb_atomic_close(struct tb_atomic_file *a, int rc, struct tb_err *err);

#endif
