/* core/util/atomic_file.h: writing a file whole or not at all (atomic_file.c).
 *
 * The bytes go to NAME.tmp.PID beside NAME (NAME.tmp.PID-N when that name is taken);
 * closing flushes them to disk, renames the temporary over NAME and syncs the directory,
 * so a reader, a crash or a full disk leaves the old file or the new one, never half of
 * one. The temporary is created exclusively and never through a symbolic link, and a
 * target that is a symbolic link is refused, so a link planted beside the target cannot
 * turn the write into one of another file. A failure removes the temporary; one a killed
 * process left behind is swept by the next run (checkpoint.c). Checkpoints, reports
 * rewritten on resume, traces and pictures are written this way. */
#ifndef TB_CORE_ATOMIC_FILE_H
#define TB_CORE_ATOMIC_FILE_H

#include <stdio.h>
#include <trainbig/error.h>

struct tb_atomic_file {
    FILE *f;     /* write here (binary mode) */
    int dirfd;   /* the directory name and tmp are in (AT_FDCWD: the working directory); not owned */
    char *path;  /* the target as messages name it; owned */
    char *name;  /* the target, relative to dirfd; owned */
    char *tmp;   /* the temporary beside it, relative to dirfd; owned */
};

/* Creates the temporary for path; on failure (err names path) nothing is left open. */
int tb_atomic_open(struct tb_atomic_file *a, const char *path, struct tb_err *err);
/* The same for name in the directory open as dirfd (the caller's, kept open until the
 * close), which messages call path. */
int tb_atomic_openat(struct tb_atomic_file *a, int dirfd, const char *name, const char *path, struct tb_err *err);
/* With rc == TB_OK: flushes, syncs, closes and renames the temporary over the target;
 * a failure there is an error naming the target. With rc != TB_OK (the writer failed and
 * said so in err): closes and removes the temporary, and returns rc with err untouched.
 * Either way a is released. */
int tb_atomic_close(struct tb_atomic_file *a, int rc, struct tb_err *err);

#endif
