/* check_safetensors: the checkpoint file format. A round trip keeps names, shapes, data
 * (bit for bit) and metadata; writing is atomic (no temporary file left, the old file
 * replaced whole, never through a planted link); every kind of damage (truncation anywhere, a broken header, a hole or
 * overlap, another dtype, a size that disagrees with the shape) is refused with a message
 * naming the file; BF16 and F16 tensors read as floats, and the 16-bit conversions
 * (trainbig/half.h) round to nearest, ties to even. */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <math.h>
#include <stdint.h>
#include <trainbig/half.h>

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
    write_raw("{\"a\":{\"dtype\":\"F64\",\"shape\":[1,1,1,2],\"data_offsets\":[0,16]}}", 16);
    refused("tensor 'a' is F64; trainbig reads F32, BF16 and F16");
    write_raw("{\"a\":{\"dtype\":\"BF16\",\"shape\":[1,1,1,3],\"data_offsets\":[0,8]}}", 8);
    refused("tensor 'a': 8 bytes for shape (1,1,1,3) of BF16");
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
/* Tensors stored in 16 bits (as PyTorch saves bf16 and half weights) read as their exact
 * float values, beside an F32 one the 16-bit ones leave at an address floats cannot be
 * read at. */
START_TEST(sixteen_bit_tensors)
{
    const char *header = "{\"h\":{\"dtype\":\"BF16\",\"shape\":[1,1,1,3],\"data_offsets\":[0,6]},"
                         "\"f\":{\"dtype\":\"F16\",\"shape\":[3,1,1,1],\"data_offsets\":[6,12]},"
                         "\"g\":{\"dtype\":\"F32\",\"shape\":[1,2,1,1],\"data_offsets\":[12,20]}}";
    const size_t hl = strlen(header);
    unsigned char *b = calloc(1, 8 + hl + 20);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((unsigned long long)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    static const uint16_t bits[6] = { 0x3f80, 0xc000, 0x7f80, 0x3c00, 0x0001, 0xfbff };
    for (int i = 0; i < 6; i++)
        b[8 + hl + 2 * i] = (unsigned char)(bits[i] & 0xff), b[8 + hl + 2 * i + 1] = (unsigned char)(bits[i] >> 8);
    const float g[2] = { 0.5f, -3.25f };
    memcpy(b + 8 + hl + 12, g, sizeof g); /* little-endian hosts, as the format */
    spit(b, 8 + hl + 20);
    free(b);
    struct tb_safetensors *st = NULL;
    struct tb_err err;
    ck_assert_msg(tb_safetensors_read(path, &st, &err) == TB_OK, "%s", err.msg);
    struct tb_shape sh;
    const float *h = tb_safetensors_find(st, "h", &sh), *f = tb_safetensors_find(st, "f", NULL),
                *gg = tb_safetensors_find(st, "g", NULL);
    ck_assert(h && f && gg && sh.w == 3);
    ck_assert(h[0] == 1.0f && h[1] == -2.0f && h[2] == INFINITY);
    ck_assert(f[0] == 1.0f && f[1] == 5.9604644775390625e-8f && f[2] == -65504.0f);
    ck_assert(gg[0] == 0.5f && gg[1] == -3.25f);
    tb_safetensors_free(st);
}
END_TEST

/* The nearest 16-bit value to x, ties to even, by arithmetic in double: the format's
 * spacing at |x| (fraction bits, least normal exponent), then round (the default mode is to
 * nearest, ties to even); past the largest finite value, infinity. */
static double nearest16(float x, int frac, int emin, double max)
{
    const double mag = fabs((double)x);
    int e;
    frexp(mag, &e); /* mag = m 2^e, 0.5 <= m < 1 */
    const double step = ldexp(1.0, (e - 1 < emin ? emin : e - 1) - frac);
    const double r = nearbyint(mag / step) * step;
    const double v = r > max ? INFINITY : r;
    return x < 0 ? -v : v;
}

/* Every 16-bit pattern comes back from float unchanged (NaNs stay NaN), and the float
 * halfway to the next goes to the even one; every 4099th float goes to the nearest 16-bit
 * value, overflow to infinity. */
START_TEST(half_conversions)
{
    /* failures are counted, not asserted one by one: a passing assertion is not free */
    size_t bad = 0;
    char first[160] = "";
#define HALF_EXPECT(ok, ...)                                                                                          \
    do {                                                                                                              \
        if (!(ok) && !bad++)                                                                                          \
            snprintf(first, sizeof first, __VA_ARGS__);                                                               \
    } while (0)
    for (uint32_t b = 0; b < 0x10000; b++) {
        const uint16_t h = (uint16_t)b;
        const float fb = tb_f32_from_bf16(h), ff = tb_f32_from_f16(h);
        HALF_EXPECT(isnan(fb) ? isnan(tb_f32_from_bf16(tb_bf16_from_f32(fb))) : tb_bf16_from_f32(fb) == h,
                    "bf16 %#06x -> %a -> %#06x", b, (double)fb, tb_bf16_from_f32(fb));
        HALF_EXPECT(isnan(ff) ? isnan(tb_f32_from_f16(tb_f16_from_f32(ff))) : tb_f16_from_f32(ff) == h,
                    "f16 %#06x -> %a -> %#06x", b, (double)ff, tb_f16_from_f32(ff));
        /* the ties: halfway to the next value up in magnitude (exact in a float) */
        const float nb = tb_f32_from_bf16((uint16_t)(b + 1)), nf = tb_f32_from_f16((uint16_t)(b + 1));
        if (isfinite(fb) && isfinite(nb) && (b & 0x7fff) != 0x7fff) {
            const float mid = (float)(((double)fb + (double)nb) / 2);
            HALF_EXPECT(tb_f32_from_bf16(tb_bf16_from_f32(mid)) == nearest16(mid, 7, -126, 0x1.fep127), "bf16 tie %a",
                        (double)mid);
        }
        if (isfinite(ff) && isfinite(nf) && (b & 0x7fff) != 0x7fff) {
            const float mid = (float)(((double)ff + (double)nf) / 2);
            HALF_EXPECT(tb_f32_from_f16(tb_f16_from_f32(mid)) == nearest16(mid, 10, -14, 65504.0), "f16 tie %a",
                        (double)mid);
        }
    }
    for (uint64_t u = 0; u <= 0xffffffffu; u += 4099) {
        float x;
        const uint32_t v = (uint32_t)u;
        memcpy(&x, &v, sizeof x);
        if (isnan(x))
            continue;
        const double wb = nearest16(x, 7, -126, 0x1.fep127), wf = nearest16(x, 10, -14, 65504.0);
        const double gb = tb_f32_from_bf16(tb_bf16_from_f32(x)), gf = tb_f32_from_f16(tb_f16_from_f32(x));
        HALF_EXPECT(gb == wb, "bf16 of %a: %a, the nearest is %a", (double)x, gb, wb);
        HALF_EXPECT(gf == wf, "f16 of %a: %a, the nearest is %a", (double)x, gf, wf);
    }
#undef HALF_EXPECT
    ck_assert_msg(!bad, "%zu conversions wrong, the first: %s", bad, first);
}
END_TEST

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
    tcase_add_test(tc, sixteen_bit_tensors);
    tcase_add_test(tc, half_conversions);
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
