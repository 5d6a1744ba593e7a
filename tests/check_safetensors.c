/* check_safetensors: the checkpoint file format. A round trip keeps names, shapes, data
 * (bit for bit) and metadata; writing is atomic (no temporary file left, the old file
 * replaced whole, never through a planted link); every kind of damage (truncation anywhere, a broken header, a hole or
 * overlap, another dtype, a size that disagrees with the shape) is refused with a message
 * naming the file. */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/train/safetensors_internal.h"

static char dir[256], path[300];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/trainbig-st-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
}

static void teardown(void)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char p[600];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

static float a[2 * 3 * 3 * 3], bvec[5];

static void write_two(const char *extra_value)
{
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
        a[i] = (float)i * 0.37f - 3.0f;
    for (size_t i = 0; i < 5; i++)
        bvec[i] = 1.0f / (float)(i + 3);
    bvec[4] = -0.0f;
    const struct tb_st_tensor t[2] = { { "trunk.mod1.conv1.weight", { 2, 3, 3, 3 }, a },
                                       { "decoder.bn1.bias", { 1, 5, 1, 1 }, bvec } };
    const char *meta[] = { "epoch", "3", "note", extra_value };
    struct tb_err err;
    ck_assert_msg(tb_safetensors_write(path, t, 2, meta, 2, &err) == TB_OK, "%s", err.msg);
}

static int files_in_dir(void)
{
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

START_TEST(round_trip)
{
    write_two("quote \" backslash \\ newline \n tab \t caf\xc3\xa9");
    ck_assert_int_eq(files_in_dir(), 1);
    struct tb_safetensors *st;
    struct tb_err err;
    ck_assert_msg(tb_safetensors_read(path, &st, &err) == TB_OK, "%s", err.msg);
    ck_assert_uint_eq(tb_safetensors_count(st), 2);
    struct tb_shape s;
    const float *d = tb_safetensors_find(st, "trunk.mod1.conv1.weight", &s);
    ck_assert_ptr_nonnull(d);
    ck_assert(s.n == 2 && s.c == 3 && s.h == 3 && s.w == 3);
    ck_assert(memcmp(d, a, sizeof a) == 0);
    d = tb_safetensors_find(st, "decoder.bn1.bias", &s);
    ck_assert(s.n == 1 && s.c == 5 && s.h == 1 && s.w == 1);
    ck_assert(memcmp(d, bvec, sizeof bvec) == 0); /* -0.0 too */
    ck_assert_ptr_null(tb_safetensors_find(st, "nope", NULL));
    ck_assert_str_eq(tb_safetensors_meta(st, "epoch"), "3");
    ck_assert_str_eq(tb_safetensors_meta(st, "note"), "quote \" backslash \\ newline \n tab \t caf\xc3\xa9");
    ck_assert_ptr_null(tb_safetensors_meta(st, "missing"));
    tb_safetensors_free(st);
}
END_TEST

/* The header is padded to 8 bytes, so the data is aligned; the length prefix is
 * little-endian. */
START_TEST(layout)
{
    write_two("x");
    FILE *f = fopen(path, "rb");
    unsigned char len8[8];
    ck_assert_uint_eq(fread(len8, 1, 8, f), 8);
    unsigned long long hlen = 0;
    for (int i = 0; i < 8; i++)
        hlen |= (unsigned long long)len8[i] << (8 * i);
    ck_assert_uint_eq(hlen % 8, 0);
    fseek(f, 0, SEEK_END);
    ck_assert_int_eq(ftell(f), (long)(8 + hlen + sizeof a + sizeof bvec));
    fclose(f);
}
END_TEST

/* Rewriting replaces the file whole and leaves no temporary file; a write into a missing
 * directory fails naming the path and leaves nothing. */
START_TEST(atomic_write)
{
    write_two("first");
    write_two("second");
    ck_assert_int_eq(files_in_dir(), 1);
    struct tb_safetensors *st;
    struct tb_err err;
    ck_assert_msg(tb_safetensors_read(path, &st, &err) == TB_OK, "%s", err.msg);
    ck_assert_str_eq(tb_safetensors_meta(st, "note"), "second");
    tb_safetensors_free(st);
    char bad[400];
    snprintf(bad, sizeof bad, "%s/missing/ckpt.safetensors", dir);
    const struct tb_st_tensor t = { "w", { 1, 1, 1, 1 }, a };
    ck_assert_int_ne(tb_safetensors_write(bad, &t, 1, NULL, 0, &err), TB_OK);
    ck_assert_msg(strstr(err.msg, bad) && strstr(err.msg, "cannot create"), "%s", err.msg);
    ck_assert_int_eq(files_in_dir(), 1);
}
END_TEST

static unsigned char *slurp(size_t *len)
{
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*len);
    ck_assert_uint_eq(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

static void spit(const unsigned char *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_uint_eq(fwrite(b, 1, len, f), len);
    fclose(f);
}

static void refused(const char *want)
{
    struct tb_safetensors *st = NULL;
    struct tb_err err;
    ck_assert_int_ne(tb_safetensors_read(path, &st, &err), TB_OK);
    ck_assert_ptr_null(st);
    ck_assert_msg(strstr(err.msg, path), "message does not name the file: %s", err.msg);
    ck_assert_msg(strstr(err.msg, want), "message lacks '%s': %s", want, err.msg);
}

START_TEST(truncated_anywhere)
{
    write_two("x");
    size_t len;
    unsigned char *b = slurp(&len);
    const size_t cuts[] = { 0, 5, 8, 20, 60, len - sizeof a - sizeof bvec, len - 7, len - 1 };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        spit(b, cuts[i]);
        struct tb_safetensors *st = NULL;
        struct tb_err err;
        ck_assert_msg(tb_safetensors_read(path, &st, &err) != TB_OK, "cut at %zu of %zu accepted", cuts[i], len);
        ck_assert_msg(strstr(err.msg, path), "%s", err.msg);
    }
    spit(b, len - 1);
    refused("truncated");
    free(b);
}
END_TEST

/* Hand-made files: a valid one is read, each broken variant refused. */
static void write_raw(const char *header, size_t data_len)
{
    size_t h = strlen(header);
    unsigned char *b = calloc(1, 8 + h + data_len);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((unsigned long long)h >> (8 * i));
    memcpy(b + 8, header, h);
    spit(b, 8 + h + data_len);
    free(b);
}

START_TEST(broken_headers)
{
    struct tb_safetensors *st;
    struct tb_err err;
    /* valid, unpadded (the data is then unaligned: read through a copy) */
    write_raw("{\"b\":{\"dtype\":\"F32\",\"shape\":[1,1,1,2],\"data_offsets\":[4,12]},"
              "\"a\":{\"shape\":[1,1,1,1],\"data_offsets\":[0,4],\"dtype\":\"F32\"}}",
              12);
    ck_assert_msg(tb_safetensors_read(path, &st, &err) == TB_OK, "%s", err.msg);
    ck_assert_uint_eq(tb_safetensors_count(st), 2);
    tb_safetensors_free(st);
    write_raw("{\"a\":{\"dtype\":\"F16\",\"shape\":[1,1,1,2],\"data_offsets\":[0,4]}}", 4);
    refused("tensor 'a' is F16; trainbig reads F32 only");
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,2],\"data_offsets\":[0,4]}}", 4);
    refused("tensor 'a': 4 bytes for shape (1,1,1,2)");
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1],\"data_offsets\":[0,4]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1],\"data_offsets\":[8,12]}}",
              12);
    refused("tensor 'b' starts at byte 8 of the data, expected 4");
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1],\"data_offsets\":[0,4]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1],\"data_offsets\":[2,6]}}",
              8);
    refused("(a hole or an overlap)");
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16);
    refused("a shape is not 4-dimensional");
    /* reversed offsets were printed as a wrap-around (18446744073709550752 bytes), and one
     * past the data was blamed on the tensor after it */
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1],\"data_offsets\":[8,4]}}", 8);
    refused("tensor 'a': data_offsets [8, 4] end before they begin");
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1],\"data_offsets\":[0,4000]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1],\"data_offsets\":[4,8]}}",
              8);
    refused("tensor 'a': data_offsets [0, 4000] end past the 8 bytes the file holds after the header");
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1]}}", 4);
    refused("lacks dtype, shape or data_offsets");
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1],\"data_offsets\":[0,4]}", 4);
    refused("not a valid safetensors file");
    write_raw("{\"__metadata__\":{\"k\":3}}", 0);
    refused("__metadata__ must map strings to strings");
    write_raw("[1,2]", 0);
    refused("expected '{'");
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1],\"data_offsets\":[0,4]}} x", 4);
    refused("text after the closing brace");
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1],\"data_offsets\":[0,4]}}", 8);
    refused("the tensors cover 4 bytes but the file holds 8");
    /* A shape whose byte count wraps around 2^64 to 0 passed as empty (fuzz_checkpoint's check
     * that every tensor's bytes lie in the file catches it). */
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[65536,65536,65536,65536],\"data_offsets\":[0,0]}}", 0);
    refused("tensor 'a': 0 bytes for shape (65536,65536,65536,65536) of F32");
    write_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[65536,65536,65536,16384],\"data_offsets\":[0,0]}}", 0);
    refused("tensor 'a': 0 bytes for shape (65536,65536,65536,16384) of F32");
    unsigned char huge[16] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}' };
    spit(huge, sizeof huge);
    refused("not a safetensors file, or truncated");
}
END_TEST

/* A file of no tensors at all is a valid, empty file (found by fuzz_checkpoint: its check
 * sorted a NULL array, which UBSan reports). */
START_TEST(no_tensors)
{
    write_raw("{}", 0);
    struct tb_safetensors *st;
    struct tb_err err;
    ck_assert_msg(tb_safetensors_read(path, &st, &err) == TB_OK, "%s", err.msg);
    ck_assert_uint_eq(tb_safetensors_count(st), 0);
    ck_assert_ptr_null(tb_safetensors_at(st, 0, NULL, NULL));
    tb_safetensors_free(st);
    ck_assert_msg(tb_safetensors_write(path, NULL, 0, NULL, 0, &err) == TB_OK, "%s", err.msg);
    ck_assert_msg(tb_safetensors_read(path, &st, &err) == TB_OK, "%s", err.msg);
    ck_assert_uint_eq(tb_safetensors_count(st), 0);
    tb_safetensors_free(st);
}
END_TEST

/* A path that is not a regular file is refused by what it is, without reading (issue:
 * a FIFO blocked, a directory said "cannot map: No such device"). */
START_TEST(not_a_regular_file)
{
    ck_assert_int_eq(mkdir(path, 0700), 0);
    refused("it is a directory, not a regular file");
    ck_assert_int_eq(rmdir(path), 0);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    refused("it is a FIFO, not a regular file");
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(symlink("/dev/zero", path), 0);
    refused("it is a character device, not a regular file");
    ck_assert_int_eq(unlink(path), 0);
}
END_TEST

/* A link planted where the temporary goes (PATH.tmp.PID) is never written through: the
 * victim keeps its bytes, the file lands whole as a regular file, the link stays. (With
 * fopen(..., "wb") the victim became the checkpoint and PATH a link to it.) */
START_TEST(planted_temporary_link)
{
    char victim[320], tmp[340];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    FILE *f = fopen(victim, "w");
    ck_assert_ptr_nonnull(f);
    fputs("precious", f);
    fclose(f);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    ck_assert_int_eq(symlink(victim, tmp), 0);
    write_two("x");
    struct stat st;
    ck_assert_int_eq(lstat(path, &st), 0);
    ck_assert_msg(S_ISREG(st.st_mode), "the checkpoint is not a regular file");
    ck_assert_int_eq(lstat(victim, &st), 0);
    ck_assert_int_eq((int)st.st_size, 8);
    ck_assert_int_eq(lstat(tmp, &st), 0);
    ck_assert_msg(S_ISLNK(st.st_mode), "the planted link was replaced");
    ck_assert_int_eq(files_in_dir(), 3); /* the checkpoint, the victim, the link: no temporary left */
}
END_TEST

/* A target that is a symbolic link is refused by name, and what it points to is not touched. */
START_TEST(target_link_refused)
{
    char victim[320];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    FILE *f = fopen(victim, "w");
    ck_assert_ptr_nonnull(f);
    fputs("precious", f);
    fclose(f);
    ck_assert_int_eq(symlink(victim, path), 0);
    const struct tb_st_tensor t[1] = { { "w", { 1, 1, 1, 1 }, bvec } };
    struct tb_err err;
    ck_assert_int_ne(tb_safetensors_write(path, t, 1, NULL, 0, &err), TB_OK);
    ck_assert_msg(strstr(err.msg, "ckpt.safetensors: is a symbolic link: refusing to replace it"), "%s", err.msg);
    struct stat st;
    ck_assert_int_eq(stat(victim, &st), 0);
    ck_assert_int_eq((int)st.st_size, 8);
    ck_assert_int_eq(files_in_dir(), 2);
}
END_TEST

static Suite *safetensors_suite(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("safetensors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, round_trip);
    tcase_add_test(tc, layout);
    tcase_add_test(tc, atomic_write);
    tcase_add_test(tc, planted_temporary_link);
    tcase_add_test(tc, target_link_refused);
    tcase_add_test(tc, truncated_anywhere);
    tcase_add_test(tc, broken_headers);
    tcase_add_test(tc, no_tensors);
    tcase_add_test(tc, not_a_regular_file);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(safetensors_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
