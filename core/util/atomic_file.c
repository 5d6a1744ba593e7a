/* atomic_file.c: writing a file whole or not at all (atomic_file.h). */
#include "config.h"

#include "core/util/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tb_atomic_open(struct tb_atomic_file *a, const char *path, struct tb_err *err)
{
    memset(a, 0, sizeof *a);
    const size_t n = strlen(path) + 32;
    a->path = strdup(path);
    a->tmp = malloc(n);
    if (!a->path || !a->tmp) {
        free(a->path);
        free(a->tmp);
        return tb_err_set(err, TB_ERR_NOMEM, "%s: out of memory", path);
    }
    /* Beside the target, so that rename() replaces it in one step. */
    snprintf(a->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    if (!(a->f = fopen(a->tmp, "wb"))) {
        int rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot create a temporary file beside it (%s): %s", path, a->tmp,
                            strerror(errno));
        free(a->path);
        free(a->tmp);
        memset(a, 0, sizeof *a);
        return rc;
    }
    return TB_OK;
}

/* Makes the rename durable: syncs the directory holding path. */
static int sync_dir(const char *path, struct tb_err *err)
{
    char *dir = strdup(path);
    if (!dir)
        return TB_OK; /* the file is written; only its directory entry's durability is unknown */
    char *slash = strrchr(dir, '/');
    const char *d = slash ? (slash == dir ? "/" : (*slash = '\0', dir)) : ".";
    int rc = TB_OK;
    int fd = open(d, O_RDONLY);
    if (fd >= 0) {
        if (fsync(fd) != 0)
            rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot sync its directory: %s", path, strerror(errno));
        close(fd);
    }
    free(dir);
    return rc;
}

int tb_atomic_close(struct tb_atomic_file *a, int rc, struct tb_err *err)
{
    if (!rc && (ferror(a->f) || fflush(a->f) != 0 || fsync(fileno(a->f)) != 0))
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot write %s: %s", a->path, a->tmp,
                        errno ? strerror(errno) : "write error");
    if (fclose(a->f) != 0 && !rc)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot close %s: %s", a->path, a->tmp, strerror(errno));
    if (!rc && rename(a->tmp, a->path) != 0)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot rename %s over it: %s", a->path, a->tmp, strerror(errno));
    if (rc)
        unlink(a->tmp);
    else
        rc = sync_dir(a->path, err);
    free(a->path);
    free(a->tmp);
    memset(a, 0, sizeof *a);
    return rc;
}
