/* tests/fuzz/fuzz_util.h: what the fuzz targets share. The readers under test take a
 * path, so each input becomes an anonymous in-memory file (memfd), named by its
 * /proc/self/fd path: nothing is written to disk, and nothing is left behind. */
#ifndef TB_FUZZ_UTIL_H
#define TB_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/util/log_control.h"

/* A file holding data[0..size), its path in path (room for 32 bytes). Returns the
 * descriptor, which the caller closes (fuzz_file_close); -1 when no file could be made. */
static inline int fuzz_file(const uint8_t *data, size_t size, char *path, size_t path_size)
{
    int fd = memfd_create("fuzz", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    for (size_t done = 0; done < size;) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)n;
    }
    snprintf(path, path_size, "/proc/self/fd/%d", fd);
    return fd;
}

static inline void fuzz_file_close(int fd)
{
    if (fd >= 0)
        close(fd);
}

/* Errors are expected outcomes: keep the log quiet so libFuzzer's output stays readable. */
static inline void fuzz_quiet(void)
{
    static int done;
    if (!done) {
        tb_log_set_level(TB_LOG_ERROR, true);
        done = 1;
    }
}

#endif
