/* trainbig/file.h: opening the files a user names (core/util/file.c) so that a name that
 * is not a regular file is refused by what it is instead of read: a FIFO would block forever,
 * /dev/zero would be read until memory runs out, a directory fails with an errno that
 * says nothing ("No such device" from mmap). Datasets reading files of their own (an
 * annotation file, a list of samples) use these as the core does. */
#ifndef TB_FILE_H
#define TB_FILE_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>
#include <trainbig/error.h>

/* What a file of mode m is, for messages: "a directory", "a FIFO", "a character
 * device", ...; "a regular file" for one. */
const char *tb_file_kind(mode_t m);

/* Opens path read-only when it is a regular file (symbolic links followed). Otherwise,
 * or when it cannot be opened, returns -1 with err set to status and "PATH: cannot open
 * WHAT: REASON" (REASON: strerror, or "it is a FIFO, not a regular file"). Opening never
 * blocks: O_NONBLOCK is set for the open and cleared after the check. The fd is the
 * caller's to close. */
int tb_open_regular(const char *path, const char *what, int status, struct tb_err *err);

/* The same as a stdio stream for reading; NULL on failure. The caller fcloses it. */
FILE *tb_fopen_regular(const char *path, const char *what, int status, struct tb_err *err);

/* Whether path names a regular file (after symbolic links), without opening it; otherwise
 * err says what it is instead, as tb_open_regular does. */
int tb_check_regular(const char *path, const char *what, int status, struct tb_err *err);

/* Whether path, resolved through every symbolic link, lies inside the directory real_root,
 * which the caller resolved already (realpath(3)): a dataset resolves its root once, when
 * it opens, and checks each sample against it. TB_OK with *inside set. A path that does
 * not resolve (missing, a dangling or looping link) is an error with status: "PATH:
 * cannot open WHAT: REASON". For datasets that keep what they read under their root
 * unless the user allows otherwise. */
int tb_path_inside(const char *real_root, const char *path, const char *what, int status, bool *inside,
                   struct tb_err *err);

#endif
