/* file.c: opening the files a user names, regular files only (trainbig/file.h). */
#include "config.h"

#include <trainbig/file.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *tb_file_kind(mode_t m)
{
    if (S_ISREG(m))
        return "a regular file";
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISSOCK(m))
        return "a socket";
    return "not a regular file";
}

static int refuse(const char *path, const char *what, int status, mode_t m, struct tb_err *err)
{
    return tb_err_set(err, status, "%s: cannot open %s: it is %s, not a regular file", path, what, tb_file_kind(m));
}

int tb_check_regular(const char *path, const char *what, int status, struct tb_err *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return tb_err_set(err, status, "%s: cannot open %s: %s", path, what, strerror(errno));
    return S_ISREG(st.st_mode) ? TB_OK : refuse(path, what, status, st.st_mode, err);
}

int tb_open_regular(const char *path, const char *what, int status, struct tb_err *err)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        tb_err_set(err, status, "%s: cannot open %s: %s", path, what, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        tb_err_set(err, status, "%s: cannot open %s: %s", path, what, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        refuse(path, what, status, st.st_mode, err);
        close(fd);
        return -1;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
        (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

FILE *tb_fopen_regular(const char *path, const char *what, int status, struct tb_err *err)
{
    int fd = tb_open_regular(path, what, status, err);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "r");
    if (!f) {
        tb_err_set(err, TB_ERR_NOMEM, "%s: cannot open %s: %s", path, what, strerror(errno));
        close(fd);
    }
    return f;
}

int tb_path_inside(const char *real_root, const char *path, const char *what, int status, bool *inside,
                   struct tb_err *err)
{
    *inside = false;
    char *p = realpath(path, NULL);
    if (!p)
        return tb_err_set(err, status, "%s: cannot open %s: %s", path, what, strerror(errno));
    const size_t n = strlen(real_root);
    *inside = strncmp(p, real_root, n) == 0 && (p[n] == '/' || p[n] == '\0' || (n == 1 && real_root[0] == '/'));
    free(p);
    return TB_OK;
}
