/* core/train/rundir_internal.h: a training run's directory (rundir.c), which only this
 * run writes.
 *
 * A new run makes its directory itself (mkdir, mode 0775 under the umask): [run]
 * output/name, or output/name.N when that name exists in any form (a directory, empty or
 * not, a file, a symbolic link); it never takes one it did not make. A resumed run uses
 * the directory of its checkpoint, which must be a real directory (not a symbolic link),
 * owned by this user and not writable by every user. Either way the directory is opened
 * once and every file of the run in it is reached through that descriptor, never
 * through a symbolic link, so renaming or replacing the path while the run goes on
 * redirects nothing. An advisory lock on RUNDIR/.lock (fcntl, released by the kernel
 * when the process ends however it ends) is held for the run's life: a second process
 * on the same directory fails at once, naming the holder's PID. */
#ifndef TB_CORE_RUNDIR_INTERNAL_H
#define TB_CORE_RUNDIR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <trainbig/error.h>

struct tb_rundir {
    char path[4096]; /* for messages and the resume hint */
    int fd;          /* the directory; -1 when none */
    int lock_fd;     /* RUNDIR/.lock, holding the lock; -1 when none */
    bool made;       /* this run created it */
};

/* Makes output/name (or output/name.N) as above, opens and locks it; output is made
 * when missing (origin: where [run] output was set, for messages). */
int tb_rundir_create(struct tb_rundir *d, const char *output, const char *name, const char *origin,
                     struct tb_err *err);
/* Opens and locks the directory holding the checkpoint file `checkpoint`. */
int tb_rundir_open_resumed(struct tb_rundir *d, const char *checkpoint, struct tb_err *err);
/* Closes it (the lock goes); with remove_if_made, a directory this run made loses the
 * files named (report headers a failed run wrote) and then itself, when nothing else is
 * in it: true when it went. */
bool tb_rundir_close(struct tb_rundir *d, bool remove_if_made, const char *const *files, size_t nfiles);

#endif
