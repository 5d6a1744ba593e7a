/* atomic_file.c: writing a file whole or not at all (atomic_file.h). */
#include "config.h"

#include "core/util/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util/kill_point.h"

static void release(struct tb_atomic_file *a)
{
    free(a->path);
    free(a->name);
    free(a->tmp);
    memset(a, 0, sizeof *a);
    a->dirfd = -1;
}

/* Creates a->tmp exclusively: a name already there (a planted link, a file of a process
 * whose PID this one now has) is never opened, the next one is tried. */
static int create_tmp(struct tb_atomic_file *a, size_t n)
{
    for (int k = 0; k < 100; k++) {
        if (k == 0)
            snprintf(a->tmp, n, "%s.tmp.%ld", a->name, (long)getpid());
        else
            snprintf(a->tmp, n, "%s.tmp.%ld-%d", a->name, (long)getpid(), k);
        int fd = openat(a->dirfd, a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0) {
            if (!(a->f = fdopen(fd, "wb"))) {
                int e = errno;
                close(fd);
                unlinkat(a->dirfd, a->tmp, 0);
                errno = e;
                return -1;
            }
            return 0;
        }
        if (errno != EEXIST)
            return -1;
    }
    return -1; /* errno is EEXIST */
}

int tb_atomic_openat(struct tb_atomic_file *a, int dirfd, const char *name, const char *path, struct tb_err *err)
{
    memset(a, 0, sizeof *a);
    a->dirfd = dirfd;
    const size_t n = strlen(name) + 48;
    a->path = strdup(path);
    a->name = strdup(name);
    a->tmp = malloc(n);
    if (!a->path || !a->name || !a->tmp) {
        release(a);
        return tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory", path);
    }
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
        release(a);
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "%s: is a symbolic link: refusing to replace it (remove it, or write to another path)",
                          path);
    }
    if (create_tmp(a, n) != 0) {
        int rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot create a temporary file beside it (%s): %s", path, a->tmp,
                            strerror(errno));
        release(a);
        return rc;
    }
    return TB_OK;
}

int tb_atomic_open(struct tb_atomic_file *a, const char *path, struct tb_err *err)
{
    return tb_atomic_openat(a, AT_FDCWD, path, path, err);
}

/* Makes the rename durable: syncs the directory holding the target. */
static int sync_dir(const struct tb_atomic_file *a, struct tb_err *err)
{
    int fd = -1;
    if (a->dirfd != AT_FDCWD && !strchr(a->name, '/')) {
        fd = dup(a->dirfd);
    } else {
        char *dir = strdup(a->name);
        if (!dir)
            return TB_OK; /* the file is written; only its directory entry's durability is unknown */
        char *slash = strrchr(dir, '/');
        const char *d = slash ? (slash == dir ? "/" : (*slash = '\0', dir)) : ".";
        fd = openat(a->dirfd, d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        free(dir);
    }
    int rc = TB_OK;
    if (fd >= 0) {
        if (fsync(fd) != 0)
            rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot sync its directory: %s", a->path, strerror(errno));
        close(fd);
    }
    return rc;
}

int tb_atomic_close(struct tb_atomic_file *a, int rc, struct tb_err *err)
{
    if (!rc && (ferror(a->f) || fflush(a->f) != 0 || fsync(fileno(a->f)) != 0))
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot write %s: %s", a->path, a->tmp,
                        errno ? strerror(errno) : "write error");
    if (fclose(a->f) != 0 && !rc)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot close %s: %s", a->path, a->tmp, strerror(errno));
    if (!rc)
        tb_kill_point("written, before its rename", a->path);
    if (!rc && renameat(a->dirfd, a->tmp, a->dirfd, a->name) != 0)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot rename %s over it: %s", a->path, a->tmp, strerror(errno));
    if (rc)
        unlinkat(a->dirfd, a->tmp, 0);
    else
        rc = sync_dir(a, err);
    if (!rc)
        tb_kill_point("renamed", a->path);
    release(a);
    return rc;
}
