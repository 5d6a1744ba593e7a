/* tests/testutil.h: small helpers shared by the Check suites (header-only).
 *
 * In a loop over many elements, test with `if` and fail with ck_abort_msg: Check records
 * the place of every ck_assert that passes (a write each), which turns a loop over a
 * tensor into millions of system calls, and minutes under valgrind. */
#ifndef TB_TESTS_TESTUTIL_H
#define TB_TESTS_TESTUTIL_H

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A fresh directory for this process, removed by nothing (under /tmp, small). */
static inline const char *test_tmpdir(void)
{
    static char dir[PATH_MAX];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/trainbig-test-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        ck_assert_ptr_nonnull(mkdtemp(dir));
    }
    return dir;
}

/* <test_tmpdir>/name, allocated: the caller frees it. */
static inline char *test_path(const char *name)
{
    char *path;
    ck_assert_int_ge(asprintf(&path, "%s/%s", test_tmpdir(), name), 0);
    return path;
}

/* Writes text to <test_tmpdir>/name and returns the path (static buffer per call site
 * would be fragile: the caller owns the returned string and frees it). */
static inline char *test_write_file(const char *name, const char *text)
{
    char *path = test_path(name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* Asserts that haystack contains needle, printing both when it does not. */
#define ck_assert_contains(haystack, needle)                                                                          \
    do {                                                                                                              \
        const char *h_ = (haystack), *n_ = (needle);                                                                  \
        ck_assert_msg(h_ && strstr(h_, n_), "expected to find \"%s\" in \"%s\"", n_, h_ ? h_ : "(null)");            \
    } while (0)

#define ck_assert_not_contains(haystack, needle)                                                                      \
    do {                                                                                                              \
        const char *h_ = (haystack), *n_ = (needle);                                                                  \
        ck_assert_msg(!strstr(h_, n_), "did not expect \"%s\" in \"%s\"", n_, h_);                                    \
    } while (0)

/* Lines in s: 0 for "", else 1 + the newlines (no trailing newline expected). */
static inline size_t test_count_lines(const char *s)
{
    if (!*s)
        return 0;
    size_t n = 1;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Runs one suite and returns the process exit status. */
#ifdef TRAINBIG_OPS_H
/* An op of `kind` on inputs in[0..nin-1], everything else zero (parameters, outputs). */
static inline struct tb_op test_op(enum tb_op_kind kind, uint32_t nin, const struct tb_tensor_desc *in)
{
    struct tb_op op;
    memset(&op, 0, sizeof op);
    op.kind = kind;
    op.nin = nin;
    for (uint32_t i = 0; i < nin; i++)
        op.in[i] = in[i];
    return op;
}
#endif

static inline int test_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
