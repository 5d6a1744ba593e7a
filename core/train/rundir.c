/* rundir.c: a training run's directory, which only this run writes
 * (core/train/rundir_internal.h). */
#include "config.h"

#include "core/train/rundir_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOCK_NAME ".lock"

static void init(struct tb_rundir *d)
{
    d->path[0] = '\0';
    d->fd = d->lock_fd = -1;
    d->made = false;
}

/* The lock on d->fd's .lock file; this process's PID written in it for people. */
static int lock(struct tb_rundir *d, struct tb_err *err)
{
    d->lock_fd = openat(d->fd, LOCK_NAME, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (d->lock_fd < 0)
        return tb_err_set(err, TB_ERR_RUNTIME, "%s/%s: cannot open the run directory's lock file: %s", d->path,
                          LOCK_NAME, strerror(errno));
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
    if (fcntl(d->lock_fd, F_SETLK, &fl) != 0) {
        const int e = errno;
        struct flock held = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
        if ((e == EAGAIN || e == EACCES) && fcntl(d->lock_fd, F_GETLK, &held) == 0 && held.l_type != F_UNLCK)
            return tb_err_set(err, TB_ERR_RUNTIME,
                              "%s: in use by another run, process %ld (it holds %s/%s): wait for it to end, or "
                              "give this run another directory",
                              d->path, (long)held.l_pid, d->path, LOCK_NAME);
        return tb_err_set(err, TB_ERR_RUNTIME, "%s/%s: cannot lock the run directory: %s", d->path, LOCK_NAME,
                          strerror(e));
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    /* The PID is for people reading the file; the lock is what counts, so a failed write
     * is no error. */
    if (ftruncate(d->lock_fd, 0) == 0)
        (void)!pwrite(d->lock_fd, pid, (size_t)n, 0);
    return TB_OK;
}

/* Opens d->path, made by this run or not, as the run's directory: see the header. */
static int open_dir(struct tb_rundir *d, bool ours, struct tb_err *err)
{
    d->fd = open(d->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d->fd < 0) {
        struct stat st;
        if (errno == ELOOP || (lstat(d->path, &st) == 0 && S_ISLNK(st.st_mode)))
            return tb_err_set(err, TB_ERR_RUNTIME,
                              "%s: the run directory is a symbolic link: refusing to write through it (name the "
                              "real directory)",
                              d->path);
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot open the run directory: %s", d->path, strerror(errno));
    }
    struct stat st;
    if (fstat(d->fd, &st) != 0)
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot read the run directory: %s", d->path, strerror(errno));
    if (!ours && st.st_uid != geteuid())
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "%s: the run directory belongs to user %ld, not to this one (%ld): refusing to write in it",
                          d->path, (long)st.st_uid, (long)geteuid());
    if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "%s: the run directory is writable by every user (mode %04o): anyone could replace its "
                          "files; chmod o-w it first",
                          d->path, (unsigned)(st.st_mode & 07777));
    return lock(d, err);
}

int tb_rundir_create(struct tb_rundir *d, const char *output, const char *name, const char *origin,
                     struct tb_err *err)
{
    init(d);
    if (mkdir(output, 0777) != 0 && errno != EEXIST)
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot create the output directory ([run] output, %s): %s", output,
                          origin, strerror(errno));
    for (int n = 1; n < 10000; n++) {
        int len = n == 1 ? snprintf(d->path, sizeof d->path, "%s/%s", output, name)
                         : snprintf(d->path, sizeof d->path, "%s/%s.%d", output, name, n);
        if (len < 0 || (size_t)len >= sizeof d->path)
            return tb_err_set(err, TB_ERR_CONFIG, "%s/%s: the run directory's path is longer than %zu bytes", output,
                              name, sizeof d->path - 1);
        if (mkdir(d->path, 0775) == 0) {
            d->made = true;
            return open_dir(d, true, err);
        }
        if (errno != EEXIST)
            return tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot create the run directory: %s", d->path,
                              strerror(errno));
    }
    return tb_err_set(err, TB_ERR_RUNTIME, "%s/%s: 9999 run directories exist already; choose another [run] name",
                      output, name);
}

int tb_rundir_open_resumed(struct tb_rundir *d, const char *checkpoint, struct tb_err *err)
{
    init(d);
    const char *slash = strrchr(checkpoint, '/');
    if (!slash)
        snprintf(d->path, sizeof d->path, ".");
    else if (slash == checkpoint)
        snprintf(d->path, sizeof d->path, "/");
    else if ((size_t)(slash - checkpoint) >= sizeof d->path)
        return tb_err_set(err, TB_ERR_CONFIG, "%s: the directory's path is longer than %zu bytes", checkpoint,
                          sizeof d->path - 1);
    else
        snprintf(d->path, sizeof d->path, "%.*s", (int)(slash - checkpoint), checkpoint);
    /* Nothing is locked or swept for a checkpoint that is not there. */
    struct stat st;
    if (stat(checkpoint, &st) != 0)
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot read the checkpoint to resume: %s", checkpoint,
                          strerror(errno));
    return open_dir(d, false, err);
}

bool tb_rundir_close(struct tb_rundir *d, bool remove_if_made, const char *const *files, size_t nfiles)
{
    bool removed = false;
    if (remove_if_made && d->made && d->fd >= 0) {
        for (size_t i = 0; i < nfiles; i++)
            unlinkat(d->fd, files[i], 0); /* ours: the directory was new */
        unlinkat(d->fd, LOCK_NAME, 0);
        removed = rmdir(d->path) == 0;
    }
    if (d->lock_fd >= 0)
        close(d->lock_fd); /* the lock goes with it */
    if (d->fd >= 0)
        close(d->fd);
    d->fd = d->lock_fd = -1;
    return removed;
}
