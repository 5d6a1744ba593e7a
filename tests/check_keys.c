/* tests/check_keys.c: unit tests of core/config/keys.c: the value syntax of every key type,
 * ranges and names, key-table checks, typo suggestions and sizes. */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <trainbig/error.h>
#include <trainbig/keys.h>

#include "core/config/keys_internal.h"
#include "tests/testutil.h"

#define KIB ((uint64_t)1024)
#define MIB (KIB * 1024)
#define GIB (MIB * 1024)
#define TIB (GIB * 1024)

/* ------------------------------------------------------------------ helpers */

/* Parses text as key k; asserts success and returns the value (caller frees). */
static struct tb_value parse_ok_at(const struct tb_key *k, const char *text, const char *base, int line)
{
    struct tb_value v;
    char why[1024];
    int rc = tb_key_parse(k, text, base, &v, why, sizeof why);
    ck_assert_msg(rc == TB_OK, "line %d: %s key '%s': parsing \"%s\" failed (rc %d): %s", line,
                  tb_key_type_name(k->type), k->name, text, rc, why);
    return v;
}
#define parse_ok(k, text, base) parse_ok_at((k), (text), (base), __LINE__)

/* Parses text as key k; asserts TB_ERR_CONFIG, an emptied value, and that the reason
 * contains each of the NULL-terminated needles. */
static void parse_fails_at(const struct tb_key *k, const char *text, int line, ...)
{
    struct tb_value v;
    char why[1024];
    memset(&v, 0x5a, sizeof v);
    int rc = tb_key_parse(k, text, NULL, &v, why, sizeof why);
    if (rc == TB_OK) { /* free before failing: a failure does not return in CK_FORK=no */
        char shown[256];
        snprintf(shown, sizeof shown, "%s", v.text);
        tb_value_free(&v);
        ck_abort_msg("line %d: %s key '%s': \"%s\" was accepted (as \"%s\")", line, tb_key_type_name(k->type), k->name,
                     text, shown);
    }
    ck_assert_msg(rc == TB_ERR_CONFIG, "line %d: %s key '%s': \"%s\" gave %d, want TB_ERR_CONFIG", line,
                  tb_key_type_name(k->type), k->name, text, rc);
    ck_assert_ptr_null(v.text);
    ck_assert_ptr_null(v.items);
    ck_assert_uint_eq(v.nitems, 0);
    va_list ap;
    va_start(ap, line);
    for (const char *n; (n = va_arg(ap, const char *));)
        ck_assert_msg(strstr(why, n), "line %d: \"%s\": expected \"%s\" in the reason \"%s\"", line, text, n, why);
    va_end(ap);
}
#define parse_fails(k, text, ...) parse_fails_at((k), (text), __LINE__, __VA_ARGS__, (const char *)NULL)

static uint64_t size_of(const char *text)
{
    uint64_t b = 0xdeadbeef;
    ck_assert_msg(tb_parse_size(text, &b) == 0, "tb_parse_size(\"%s\") failed", text);
    return b;
}

/* ------------------------------------------------------------------ int */

static const struct tb_key k_int = { "threads", TB_KEY_INT, "1", NULL, "h" };
static const struct tb_key k_int_range = { "threads", TB_KEY_INT, "1", "1..64", "h" };
static const struct tb_key k_int_lo = { "epochs", TB_KEY_INT, "1", "1..", "h" };
static const struct tb_key k_int_hi = { "depth", TB_KEY_INT, "1", "..64", "h" };

START_TEST(int_values)
{
    struct tb_value v = parse_ok(&k_int, "42", NULL);
    ck_assert_int_eq(v.v.i, 42);
    ck_assert_str_eq(v.text, "42");
    tb_value_free(&v);

    v = parse_ok(&k_int, "  -7 ", NULL);
    ck_assert_int_eq(v.v.i, -7);
    ck_assert_str_eq(v.text, "-7");
    tb_value_free(&v);

    v = parse_ok(&k_int, "+3", NULL);
    ck_assert_int_eq(v.v.i, 3);
    tb_value_free(&v);

    v = parse_ok(&k_int, "9223372036854775807", NULL);
    ck_assert_int_eq(v.v.i, INT64_MAX);
    tb_value_free(&v);

    v = parse_ok(&k_int, "-9223372036854775808", NULL);
    ck_assert_int_eq(v.v.i, INT64_MIN);
    tb_value_free(&v);
}
END_TEST

START_TEST(int_rejects)
{
    parse_fails(&k_int, "abc", "not an integer", "allowed: an integer");
    parse_fails(&k_int, "1.5", "not an integer");
    parse_fails(&k_int, "12x", "not an integer");
    parse_fails(&k_int, "0x10", "not an integer");
    parse_fails(&k_int, "1 2", "not an integer");
    parse_fails(&k_int, "", "empty value", "an integer");
    parse_fails(&k_int, "   ", "empty value");
    parse_fails(&k_int, "9223372036854775808", "too large for an integer"); /* overflow */
    parse_fails(&k_int, "-9223372036854775809", "too large for an integer");
    parse_fails(&k_int, "99999999999999999999999", "too large for an integer");
}
END_TEST

START_TEST(int_ranges)
{
    struct tb_value v = parse_ok(&k_int_range, "1", NULL);
    ck_assert_int_eq(v.v.i, 1);
    tb_value_free(&v);
    v = parse_ok(&k_int_range, "64", NULL);
    ck_assert_int_eq(v.v.i, 64);
    tb_value_free(&v);
    parse_fails(&k_int_range, "0", "out of range", "an integer in 1..64");
    parse_fails(&k_int_range, "65", "out of range", "an integer in 1..64");
    parse_fails(&k_int_range, "-1", "out of range", "1..64");

    v = parse_ok(&k_int_lo, "1000000", NULL);
    ck_assert_int_eq(v.v.i, 1000000);
    tb_value_free(&v);
    parse_fails(&k_int_lo, "0", "out of range", "an integer >= 1");

    v = parse_ok(&k_int_hi, "-5", NULL);
    ck_assert_int_eq(v.v.i, -5);
    tb_value_free(&v);
    parse_fails(&k_int_hi, "65", "out of range", "an integer <= 64");
}
END_TEST

/* Ranges compare exactly, also where a double cannot tell the numbers apart. */
START_TEST(int_range_exact_at_large_values)
{
    static const struct tb_key k = { "big", TB_KEY_INT, "0", "0..9007199254740992", "h" }; /* 2^53 */
    struct tb_value v = parse_ok(&k, "9007199254740992", NULL);
    tb_value_free(&v);
    parse_fails(&k, "9007199254740993", "out of range", "0..9007199254740992");
}
END_TEST

/* ------------------------------------------------------------------ float */

static const struct tb_key k_float = { "lr", TB_KEY_FLOAT, "0.01", NULL, "h" };
static const struct tb_key k_frac = { "scale", TB_KEY_FLOAT, "0.5", "0..1", "h" };

START_TEST(float_values)
{
    struct tb_value v = parse_ok(&k_float, "0.01", NULL);
    ck_assert_double_eq(v.v.f, 0.01);
    ck_assert_str_eq(v.text, "0.01");
    tb_value_free(&v);
    v = parse_ok(&k_float, "1e-4", NULL);
    ck_assert_double_eq(v.v.f, 1e-4);
    tb_value_free(&v);
    v = parse_ok(&k_float, " -2.5 ", NULL);
    ck_assert_double_eq(v.v.f, -2.5);
    ck_assert_str_eq(v.text, "-2.5");
    tb_value_free(&v);
    v = parse_ok(&k_float, "3", NULL);
    ck_assert_double_eq(v.v.f, 3.0);
    tb_value_free(&v);
    v = parse_ok(&k_float, "6.02E23", NULL);
    ck_assert_double_eq(v.v.f, 6.02e23);
    tb_value_free(&v);

    parse_fails(&k_float, "abc", "not a number", "allowed: a number");
    parse_fails(&k_float, "1.5x", "not a number");
    parse_fails(&k_float, "", "empty value");
    parse_fails(&k_float, "inf", "not a number");
    parse_fails(&k_float, "nan", "not a number");
    parse_fails(&k_float, "1e999", "too large for a number");
}
END_TEST

START_TEST(float_ranges)
{
    struct tb_value v = parse_ok(&k_frac, "0", NULL);
    ck_assert_double_eq(v.v.f, 0.0);
    tb_value_free(&v);
    v = parse_ok(&k_frac, "1", NULL);
    ck_assert_double_eq(v.v.f, 1.0);
    tb_value_free(&v);
    v = parse_ok(&k_frac, "0.25", NULL);
    ck_assert_double_eq(v.v.f, 0.25);
    tb_value_free(&v);
    parse_fails(&k_frac, "1.0001", "out of range", "a number in 0..1");
    parse_fails(&k_frac, "-0.1", "out of range", "a number in 0..1");

    static const struct tb_key pos = { "lr", TB_KEY_FLOAT, "1", "0..", "h" };
    parse_fails(&pos, "-1e-9", "out of range", "a number >= 0");
}
END_TEST

/* ------------------------------------------------------------------ bool */

static const struct tb_key k_bool = { "fast", TB_KEY_BOOL, "no", NULL, "h" };

START_TEST(bool_spellings)
{
    static const char *const yes[] = { "yes", "YES", "Yes", "true", "TRUE", "True", "on", "ON", "On", "1", " yes " };
    static const char *const no[] = { "no", "NO", "No", "false", "FALSE", "False", "off", "OFF", "Off", "0", "\tno\t" };
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        struct tb_value v = parse_ok(&k_bool, yes[i], NULL);
        ck_assert_msg(v.v.b == true, "\"%s\" should be true", yes[i]);
        tb_value_free(&v);
    }
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
        struct tb_value v = parse_ok(&k_bool, no[i], NULL);
        ck_assert_msg(v.v.b == false, "\"%s\" should be false", no[i]);
        tb_value_free(&v);
    }
}
END_TEST

START_TEST(bool_rejects)
{
    parse_fails(&k_bool, "maybe", "not a yes/no value", "yes or no (also true/false, on/off, 1/0)");
    parse_fails(&k_bool, "2", "not a yes/no value");
    parse_fails(&k_bool, "y", "not a yes/no value");
    parse_fails(&k_bool, "yess", "not a yes/no value");
    parse_fails(&k_bool, "", "empty value", "yes or no");
}
END_TEST

/* ------------------------------------------------------------------ size */

static const struct tb_key k_size = { "device_memory", TB_KEY_SIZE, "0", NULL, "h" };
static const struct tb_key k_size_hi = { "device_memory", TB_KEY_SIZE, "0", "..1T", "h" };

START_TEST(size_suffixes)
{
    ck_assert_uint_eq(size_of("0"), 0);
    ck_assert_uint_eq(size_of("4096"), 4096);
    ck_assert_uint_eq(size_of("100B"), 100);
    ck_assert_uint_eq(size_of("1K"), KIB);
    ck_assert_uint_eq(size_of("2k"), 2 * KIB);
    ck_assert_uint_eq(size_of("16KiB"), 16 * KIB);
    ck_assert_uint_eq(size_of("16kib"), 16 * KIB);
    ck_assert_uint_eq(size_of("16KB"), 16 * KIB);
    ck_assert_uint_eq(size_of("512M"), 512 * MIB);
    ck_assert_uint_eq(size_of("512MB"), 512 * MIB);
    ck_assert_uint_eq(size_of("512MiB"), 512 * MIB);
    ck_assert_uint_eq(size_of("16G"), 16 * GIB);
    ck_assert_uint_eq(size_of("16g"), 16 * GIB);
    ck_assert_uint_eq(size_of("1.5G"), 3 * GIB / 2);
    ck_assert_uint_eq(size_of("0.5K"), 512);
    ck_assert_uint_eq(size_of("1T"), TIB);
    ck_assert_uint_eq(size_of("3TiB"), 3 * TIB);
    ck_assert_uint_eq(size_of("16383T"), 16383 * TIB); /* just below 2^64 */

    struct tb_value v = parse_ok(&k_size, " 1.5G ", NULL);
    ck_assert_uint_eq(v.v.u, 1610612736u);
    ck_assert_str_eq(v.text, "1.5G");
    tb_value_free(&v);
}
END_TEST

START_TEST(size_rejects)
{
    static const char *const bad[] = { "-1",   "12X",    "",      "+5",    "G",         "K16",
                                       "16GX", "16 G B", "16Gb2", "1.5.G", "16777216T", /* 2^64: overflow */
                                       "1e30", "inf",    "nan",   "16iB" };
    uint64_t b = 77;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_msg(tb_parse_size(bad[i], &b) != 0, "tb_parse_size accepted \"%s\" as %llu", bad[i],
                      (unsigned long long)b);
        ck_assert_uint_eq(b, 77); /* untouched on failure */
    }
    parse_fails(&k_size, "-1", "not a size", "a size in bytes with an optional K, M, G or T suffix");
    parse_fails(&k_size, "12X", "not a size", "K, M, G or T");
    parse_fails(&k_size, "", "empty value", "a size in bytes");
    parse_fails(&k_size, "16777216T", "too large for a size");
}
END_TEST

/* Numbers are decimal only, and a value says what is wrong with it: hexadecimal (strtod
 * took 0x100M and lr = 0x10), a size that rounds to 0 bytes (0.0000001K gave 0, "no
 * cap"), a number too close to 0 to hold (1e-320 was "not a number"). */
START_TEST(decimal_forms_only)
{
    parse_fails(&k_int, "0x10", "not an integer: hexadecimal is not accepted, write it in decimal");
    parse_fails(&k_int, "-0X1f", "hexadecimal is not accepted");
    parse_fails(&k_float, "0x10", "not a number: hexadecimal is not accepted");
    parse_fails(&k_float, "0x1p-3", "hexadecimal");
    parse_fails(&k_size, "0x100M", "not a size: hexadecimal is not accepted");
    parse_fails(&k_float, "-inf", "not a number");
    parse_fails(&k_float, "1e-320", "too close to 0 to hold", "write 0 or a larger value");
    parse_fails(&k_float, "1e-400", "too close to 0 to hold");
    parse_fails(&k_size, "0.0000001K", "rounds to 0 bytes: write 0 for none, or at least 1 byte");
    parse_fails(&k_size, "0.4", "rounds to 0 bytes");
    parse_fails(&k_size, "1e-30G", "rounds to 0 bytes");
    ck_assert_uint_eq(size_of("0"), 0);
    ck_assert_uint_eq(size_of("0K"), 0);
    ck_assert_uint_eq(size_of("0.0M"), 0);
    ck_assert_uint_eq(size_of("0.6"), 1);
    struct tb_value v = parse_ok(&k_float, "2.3e-308", NULL);
    ck_assert_double_eq(v.v.f, 2.3e-308);
    tb_value_free(&v);
    v = parse_ok(&k_float, ".5", NULL);
    ck_assert_double_eq(v.v.f, 0.5);
    tb_value_free(&v);
    /* a list's bad item is named as such before its count */
    static const struct tb_key blocks = { "blocks", TB_KEY_INT_LIST, "3,3,6,3,1,1", "[6] 1..64", "h" };
    parse_fails(&blocks, "-2147483649", "item 1 '-2147483649' is out of range");
    parse_fails(&blocks, "99999999999999999999", "item 1 '99999999999999999999' is too large for an integer");
    parse_fails(&blocks, "0x3,3,6,3,1,1", "item 1 '0x3' is not an integer: hexadecimal");
}
END_TEST

/* A plain byte count is exact, even above 2^53 where a double would round it. */
START_TEST(size_plain_bytes_exact)
{
    ck_assert_uint_eq(size_of("9007199254740993"), UINT64_C(9007199254740993));
    ck_assert_uint_eq(size_of("18446744073709551615"), UINT64_MAX);
}
END_TEST

START_TEST(size_ranges)
{
    struct tb_value v = parse_ok(&k_size_hi, "1T", NULL);
    ck_assert_uint_eq(v.v.u, TIB);
    tb_value_free(&v);
    v = parse_ok(&k_size_hi, "1024G", NULL);
    ck_assert_uint_eq(v.v.u, TIB);
    tb_value_free(&v);
    parse_fails(&k_size_hi, "2T", "out of range", "<= 1T");
    parse_fails(&k_size_hi, "1025G", "out of range", "<= 1T");

    static const struct tb_key both = { "cache", TB_KEY_SIZE, "1M", "4K..16M", "h" };
    v = parse_ok(&both, "4096", NULL);
    ck_assert_uint_eq(v.v.u, 4 * KIB);
    tb_value_free(&v);
    parse_fails(&both, "4095", "out of range", "in 4K..16M");
    parse_fails(&both, "16M1", "not a size");
    parse_fails(&both, "17M", "out of range", "4K..16M");

    static const struct tb_key from0 = { "cache", TB_KEY_SIZE, "0", "0..", "h" };
    v = parse_ok(&from0, "0", NULL);
    ck_assert_uint_eq(v.v.u, 0);
    tb_value_free(&v);
}
END_TEST

START_TEST(size_format_and_round_trip)
{
    char buf[64];
    static const struct {
        uint64_t bytes;
        const char *text;
    } cases[] = {
        { 0, "0" },          { 100, "100" },   { 1023, "1023" },        { 1024, "1K" },
        { 1025, "1025" },    { 1536, "1536" }, { 1536 * KIB, "1536K" }, { 3 * GIB / 2, "1536M" },
        { 16 * GIB, "16G" }, { TIB, "1T" },    { 1024 * TIB, "1024T" }, { UINT64_C(1) << 60, "1048576T" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tb_format_size(cases[i].bytes, buf, sizeof buf);
        ck_assert_str_eq(buf, cases[i].text);
        ck_assert_uint_eq(size_of(buf), cases[i].bytes);
    }
    static const char *const texts[] = { "512M", "16G", "1T", "7K", "12345" };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        tb_format_size(size_of(texts[i]), buf, sizeof buf);
        ck_assert_str_eq(buf, texts[i]);
    }
    tb_format_size(size_of("1.5G"), buf, sizeof buf);
    ck_assert_str_eq(buf, "1536M");
    tb_format_size(size_of("512MB"), buf, sizeof buf);
    ck_assert_str_eq(buf, "512M");

    /* A small buffer truncates but stays terminated. */
    char small[4];
    memset(small, 'x', sizeof small);
    tb_format_size(123456789, small, sizeof small);
    ck_assert_str_eq(small, "123");
}
END_TEST

/* ------------------------------------------------------------------ enum */

static const struct tb_key k_enum = { "policy", TB_KEY_ENUM, "none", "none|lru|prefetch", "h" };

START_TEST(enum_values)
{
    struct tb_value v = parse_ok(&k_enum, "none", NULL);
    ck_assert_int_eq(v.v.e, 0);
    ck_assert_str_eq(v.text, "none");
    tb_value_free(&v);
    v = parse_ok(&k_enum, "LRU", NULL);
    ck_assert_int_eq(v.v.e, 1);
    ck_assert_str_eq(v.text, "lru"); /* canonical spelling */
    tb_value_free(&v);
    v = parse_ok(&k_enum, "  PreFetch ", NULL);
    ck_assert_int_eq(v.v.e, 2);
    ck_assert_str_eq(v.text, "prefetch");
    tb_value_free(&v);

    static const struct tb_key mixed = { "mode", TB_KEY_ENUM, "Eager", "Eager|lazy", "h" };
    v = parse_ok(&mixed, "EAGER", NULL);
    ck_assert_int_eq(v.v.e, 0);
    ck_assert_str_eq(v.text, "Eager");
    tb_value_free(&v);
}
END_TEST

START_TEST(enum_rejects)
{
    parse_fails(&k_enum, "lr", "not an allowed value", "one of: none, lru, prefetch");
    parse_fails(&k_enum, "lrux", "not an allowed value", "one of: none, lru, prefetch");
    parse_fails(&k_enum, "none|lru", "not an allowed value");
    parse_fails(&k_enum, "", "empty value", "one of: none, lru, prefetch");
    static const struct tb_key noallowed = { "policy", TB_KEY_ENUM, NULL, NULL, "h" };
    parse_fails(&noallowed, "none", "not an allowed value");
}
END_TEST

/* ------------------------------------------------------------------ list */

static const struct tb_key k_list = { "tags", TB_KEY_LIST, "", NULL, "h" };
static const struct tb_key k_colors = { "colors", TB_KEY_LIST, "red", "red|green|blue", "h" };

START_TEST(list_values)
{
    struct tb_value v = parse_ok(&k_list, " a ,b,  c d ,e ", NULL);
    ck_assert_uint_eq(v.nitems, 4);
    ck_assert_str_eq(v.items[0], "a");
    ck_assert_str_eq(v.items[1], "b");
    ck_assert_str_eq(v.items[2], "c d");
    ck_assert_str_eq(v.items[3], "e");
    tb_value_free(&v);
    ck_assert_uint_eq(v.nitems, 0);
    ck_assert_ptr_null(v.items);

    v = parse_ok(&k_list, "single", NULL);
    ck_assert_uint_eq(v.nitems, 1);
    ck_assert_str_eq(v.items[0], "single");
    ck_assert_str_eq(v.text, "single");
    tb_value_free(&v);

    v = parse_ok(&k_list, "", NULL);
    ck_assert_uint_eq(v.nitems, 0);
    ck_assert_str_eq(v.text, "");
    tb_value_free(&v);

    v = parse_ok(&k_list, "    ", NULL);
    ck_assert_uint_eq(v.nitems, 0);
    tb_value_free(&v);
}
END_TEST

START_TEST(list_rejects)
{
    parse_fails(&k_list, "a,,b", "empty list item", "a comma-separated list");
    parse_fails(&k_list, "a,", "empty list item");
    parse_fails(&k_list, ",a", "empty list item");
    parse_fails(&k_list, "a, ,b", "empty list item");
    parse_fails(&k_list, ",", "empty list item");
}
END_TEST

START_TEST(list_allowed_items)
{
    struct tb_value v = parse_ok(&k_colors, "red, blue ,green", NULL);
    ck_assert_uint_eq(v.nitems, 3);
    ck_assert_str_eq(v.items[0], "red");
    ck_assert_str_eq(v.items[1], "blue");
    ck_assert_str_eq(v.items[2], "green");
    tb_value_free(&v);

    v = parse_ok(&k_colors, "Blue, GREEN", NULL); /* as for ENUM: any case, stored as the table spells it */
    ck_assert_uint_eq(v.nitems, 2);
    ck_assert_str_eq(v.items[0], "blue");
    ck_assert_str_eq(v.items[1], "green");
    tb_value_free(&v);

    static const struct tb_key mixed = { "modes", TB_KEY_LIST, "", "Eager|lazy", "h" };
    v = parse_ok(&mixed, "eager,LAZY", NULL);
    ck_assert_str_eq(v.items[0], "Eager");
    ck_assert_str_eq(v.items[1], "lazy");
    tb_value_free(&v);

    v = parse_ok(&k_colors, "", NULL);
    ck_assert_uint_eq(v.nitems, 0);
    tb_value_free(&v);

    parse_fails(&k_colors, "red, purple", "unknown item 'purple'", "a comma-separated list of: red, green, blue");
    parse_fails(&k_colors, "re", "unknown item 're'", "red, green, blue");
    parse_fails(&k_colors, "red,,blue", "empty list item");
}
END_TEST

/* Typed lists: the count and each item's type and range checked, the values
 * parsed once. */
START_TEST(typed_list_values)
{
    static const struct tb_key blocks = { "blocks", TB_KEY_INT_LIST, "3,3,6,3,1,1", "[6] 1..64", "h" };
    struct tb_value v = parse_ok(&blocks, " 3, 3 ,6,3,1, 64", NULL);
    ck_assert_uint_eq(v.nitems, 6);
    const int64_t want[] = { 3, 3, 6, 3, 1, 64 };
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(v.ints[i], want[i]);
    ck_assert_ptr_null(v.floats);
    tb_value_free(&v);
    ck_assert_ptr_null(v.ints);
    parse_fails(&blocks, "3,3,6", "3 items", "a comma-separated list of 6 integers in 1..64");
    parse_fails(&blocks, "3,3,6,3,1,1,1", "7 items");
    parse_fails(&blocks, "3,3,x,3,1,1", "item 3 'x' is not an integer");
    parse_fails(&blocks, "3,3,6,3,0,1", "item 5 '0' is out of range");
    parse_fails(&blocks, "1,1,-1,1,1,1", "item 3 '-1' is out of range");
    parse_fails(&blocks, "1,1,1,1,1,2147483648", "item 6 '2147483648' is out of range");
    parse_fails(&blocks, "3,3,,3,1,1", "empty list item");

    static const struct tb_key ratios = { "r", TB_KEY_FLOAT_LIST, "", "[1..3] 0..1", "h" };
    v = parse_ok(&ratios, "0.5, 1e-1", NULL);
    ck_assert_uint_eq(v.nitems, 2);
    ck_assert(v.floats[0] == 0.5 && v.floats[1] == 0.1);
    tb_value_free(&v);
    parse_fails(&ratios, "", "0 items", "a comma-separated list of 1 to 3 numbers in 0..1");
    parse_fails(&ratios, "0.5,2", "item 2 '2' is out of range");
    parse_fails(&ratios, "0.5,nan", "item 2 'nan' is not a number");

    static const struct tb_key any = { "a", TB_KEY_INT_LIST, "", NULL, "h" };
    v = parse_ok(&any, "", NULL);
    ck_assert_uint_eq(v.nitems, 0);
    tb_value_free(&v);
    v = parse_ok(&any, "-5,9000000000", NULL);
    ck_assert(v.nitems == 2 && v.ints[0] == -5 && v.ints[1] == 9000000000LL);
    tb_value_free(&v);
    static const struct tb_key some = { "a", TB_KEY_INT_LIST, "", "[2..]", "h" };
    parse_fails(&some, "1", "1 item", "a comma-separated list of at least 2 integers");

    ck_assert_str_eq(tb_key_type_name(TB_KEY_INT_LIST), "int list");
    ck_assert_str_eq(tb_key_type_name(TB_KEY_FLOAT_LIST), "float list");
}
END_TEST

/* ------------------------------------------------------------------ string, path */

static const struct tb_key k_string = { "label", TB_KEY_STRING, "", NULL, "h" };
static const struct tb_key k_path = { "cache", TB_KEY_PATH, "", NULL, "h" };

START_TEST(string_values)
{
    struct tb_value v = parse_ok(&k_string, "  hello, world; #1  ", "/ignored");
    ck_assert_str_eq(v.text, "hello, world; #1");
    ck_assert_uint_eq(v.nitems, 0);
    tb_value_free(&v);
    v = parse_ok(&k_string, "", NULL);
    ck_assert_str_eq(v.text, "");
    tb_value_free(&v);
    v = parse_ok(&k_string, NULL, NULL); /* NULL text reads as empty */
    ck_assert_str_eq(v.text, "");
    tb_value_free(&v);
    v = parse_ok(&k_string, "relative/not/a/path", "/base");
    ck_assert_str_eq(v.text, "relative/not/a/path");
    tb_value_free(&v);
}
END_TEST

START_TEST(path_values)
{
    struct tb_value v = parse_ok(&k_path, "data/train.bin", "/base/dir");
    ck_assert_str_eq(v.text, "/base/dir/data/train.bin");
    tb_value_free(&v);

    v = parse_ok(&k_path, "/abs/file", "/base/dir");
    ck_assert_str_eq(v.text, "/abs/file");
    tb_value_free(&v);

    v = parse_ok(&k_path, "", "/base/dir");
    ck_assert_str_eq(v.text, "");
    tb_value_free(&v);

    v = parse_ok(&k_path, "   ", "/base/dir");
    ck_assert_str_eq(v.text, "");
    tb_value_free(&v);

    v = parse_ok(&k_path, "./x", "/base/dir");
    ck_assert_str_eq(v.text, "/base/dir/x");
    tb_value_free(&v);

    v = parse_ok(&k_path, "../up", "/base/dir");
    ck_assert_str_eq(v.text, "/base/dir/../up");
    tb_value_free(&v);

    v = parse_ok(&k_path, "  spaced/name  ", "/base");
    ck_assert_str_eq(v.text, "/base/spaced/name");
    tb_value_free(&v);

    v = parse_ok(&k_path, "rel/x", "sub");
    ck_assert_str_eq(v.text, "sub/rel/x");
    tb_value_free(&v);

    /* No base, or the working directory as base: left as written. */
    v = parse_ok(&k_path, "rel/x", NULL);
    ck_assert_str_eq(v.text, "rel/x");
    tb_value_free(&v);
    v = parse_ok(&k_path, "rel/x", ".");
    ck_assert_str_eq(v.text, "rel/x");
    tb_value_free(&v);
    v = parse_ok(&k_path, "rel/x", "");
    ck_assert_str_eq(v.text, "rel/x");
    tb_value_free(&v);
    v = parse_ok(&k_path, "./x", NULL);
    ck_assert_str_eq(v.text, "./x");
    tb_value_free(&v);
}
END_TEST

START_TEST(unknown_type_rejected)
{
    static const struct tb_key k = { "odd", (enum tb_key_type)99, NULL, NULL, "h" };
    struct tb_value v;
    char why[256];
    ck_assert_int_eq(tb_key_parse(&k, "1", NULL, &v, why, sizeof why), TB_ERR_CONFIG);
    ck_assert_contains(why, "unknown type 99");
    ck_assert_ptr_null(v.text);
}
END_TEST

START_TEST(reason_truncated_safely)
{
    char why[16];
    struct tb_value v;
    memset(why, 'x', sizeof why);
    ck_assert_int_eq(tb_key_parse(&k_enum, "bogus", NULL, &v, why, sizeof why), TB_ERR_CONFIG);
    ck_assert_uint_eq(strlen(why), sizeof why - 1);
    ck_assert_str_eq(why, "not an allowed ");
}
END_TEST

/* ------------------------------------------------------------------ describe, tables */

START_TEST(describe_each_type)
{
    static const struct {
        struct tb_key k;
        const char *want;
    } cases[] = {
        { { "a", TB_KEY_INT, "1", "1..64", "h" }, "an integer in 1..64" },
        { { "a", TB_KEY_INT, "1", "1..", "h" }, "an integer >= 1" },
        { { "a", TB_KEY_INT, "1", "..64", "h" }, "an integer <= 64" },
        { { "a", TB_KEY_INT, "1", "..", "h" }, "an integer" },
        { { "a", TB_KEY_INT, "1", NULL, "h" }, "an integer" },
        { { "a", TB_KEY_FLOAT, "1", "0..1", "h" }, "a number in 0..1" },
        { { "a", TB_KEY_FLOAT, "1", NULL, "h" }, "a number" },
        { { "a", TB_KEY_SIZE, "0", "..1T", "h" },
          "a size in bytes with an optional K, M, G or T suffix (powers of 1024) <= 1T" },
        { { "a", TB_KEY_SIZE, "0", NULL, "h" },
          "a size in bytes with an optional K, M, G or T suffix (powers of 1024)" },
        { { "a", TB_KEY_BOOL, "no", NULL, "h" }, "yes or no (also true/false, on/off, 1/0)" },
        { { "a", TB_KEY_ENUM, "x", "x|y|z", "h" }, "one of: x, y, z" },
        { { "a", TB_KEY_LIST, "", "red|green|blue", "h" }, "a comma-separated list of: red, green, blue" },
        { { "a", TB_KEY_LIST, "", NULL, "h" }, "a comma-separated list" },
        { { "a", TB_KEY_STRING, "", NULL, "h" }, "any text" },
        { { "a", TB_KEY_PATH, "", NULL, "h" }, "a path (relative to the INI file's directory)" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char buf[256];
        tb_key_describe(&cases[i].k, buf, sizeof buf);
        ck_assert_str_eq(buf, cases[i].want);
    }
    char small[10];
    tb_key_describe(&cases[0].k, small, sizeof small);
    ck_assert_str_eq(small, "an intege");
}
END_TEST

START_TEST(type_names_count_find)
{
    ck_assert_str_eq(tb_key_type_name(TB_KEY_INT), "int");
    ck_assert_str_eq(tb_key_type_name(TB_KEY_FLOAT), "float");
    ck_assert_str_eq(tb_key_type_name(TB_KEY_BOOL), "bool");
    ck_assert_str_eq(tb_key_type_name(TB_KEY_SIZE), "size");
    ck_assert_str_eq(tb_key_type_name(TB_KEY_ENUM), "enum");
    ck_assert_str_eq(tb_key_type_name(TB_KEY_STRING), "string");
    ck_assert_str_eq(tb_key_type_name(TB_KEY_PATH), "path");
    ck_assert_str_eq(tb_key_type_name(TB_KEY_LIST), "list");
    ck_assert_ptr_null(tb_key_type_name((enum tb_key_type)0));
    ck_assert_ptr_null(tb_key_type_name((enum tb_key_type)42));

    static const struct tb_key keys[] = {
        { "threads", TB_KEY_INT, "1", NULL, "h" },
        { "mode", TB_KEY_ENUM, "a", "a|b", "h" },
        TB_KEYS_END,
    };
    ck_assert_uint_eq(tb_keys_count(keys), 2);
    ck_assert_uint_eq(tb_keys_count(NULL), 0);
    ck_assert_ptr_eq(tb_keys_find(keys, "mode"), &keys[1]);
    ck_assert_ptr_eq(tb_keys_find(keys, "threads"), &keys[0]);
    ck_assert_ptr_null(tb_keys_find(keys, "Mode"));
    ck_assert_ptr_null(tb_keys_find(keys, "missing"));
    ck_assert_ptr_null(tb_keys_find(NULL, "mode"));
}
END_TEST

/* Checks a table that must be refused; every needle must be in the message. */
static void table_refused_at(const struct tb_key *keys, int want_lines, int line, ...)
{
    struct tb_err err;
    tb_err_clear(&err);
    int rc = tb_keys_check_table(keys, "plug.so: plugin 'p'", &err);
    ck_assert_msg(rc == TB_ERR_PLUGIN, "line %d: the table was accepted (rc %d)", line, rc);
    ck_assert_int_eq(err.status, TB_ERR_PLUGIN);
    ck_assert_msg(err.count == want_lines, "line %d: %d messages, want %d: %s", line, err.count, want_lines, err.msg);
    ck_assert_uint_eq(test_count_lines(err.msg), (size_t)want_lines);
    /* Every line names the plugin. */
    for (const char *p = err.msg; p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        ck_assert_msg(strncmp(p, "plug.so: plugin 'p': ", 21) == 0, "line %d: a line lacks the prefix: %s", line,
                      err.msg);
    va_list ap;
    va_start(ap, line);
    for (const char *n; (n = va_arg(ap, const char *));)
        ck_assert_msg(strstr(err.msg, n), "line %d: expected \"%s\" in \"%s\"", line, n, err.msg);
    va_end(ap);
}
#define table_refused(keys, nlines, ...) table_refused_at((keys), (nlines), __LINE__, __VA_ARGS__, (const char *)NULL)

START_TEST(table_good)
{
    static const struct tb_key keys[] = {
        { "threads", TB_KEY_INT, "1", "1..64", "worker threads" },
        { "scale", TB_KEY_FLOAT, "0.5", "0..1", "a fraction" },
        { "fast", TB_KEY_BOOL, "no", NULL, "a switch" },
        { "device_memory", TB_KEY_SIZE, "0", "..1T", "memory cap" },
        { "mode", TB_KEY_ENUM, "eager", "eager|lazy|auto", "a choice" },
        { "label", TB_KEY_STRING, "", NULL, "free text" },
        { "cache", TB_KEY_PATH, NULL, NULL, "a file (required)" },
        { "tags", TB_KEY_LIST, "", NULL, "any words" },
        { "colors", TB_KEY_LIST, "red, blue", "red|green|blue", "some colours" },
        { "n2_x", TB_KEY_INT, NULL, NULL, "digits and underscores" },
        TB_KEYS_END,
    };
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_keys_check_table(keys, "who", &err), TB_OK);
    ck_assert_int_eq(err.count, 0);
    ck_assert_str_eq(err.msg, "");
    ck_assert_int_eq(tb_keys_check_table(NULL, "who", &err), TB_OK);
    static const struct tb_key empty[] = { TB_KEYS_END };
    ck_assert_int_eq(tb_keys_check_table(empty, "who", &err), TB_OK);
    ck_assert_int_eq(err.count, 0);
}
END_TEST

START_TEST(table_bad_names)
{
    static const struct tb_key upper[] = { { "Threads", TB_KEY_INT, "1", NULL, "h" }, TB_KEYS_END };
    table_refused(upper, 1, "key 'Threads'", "lower case [a-z0-9_]");
    static const struct tb_key dash[] = { { "device-memory", TB_KEY_SIZE, "0", NULL, "h" }, TB_KEYS_END };
    table_refused(dash, 1, "key 'device-memory'", "lower case");
    static const struct tb_key empty[] = { { "", TB_KEY_INT, "1", NULL, "h" }, TB_KEYS_END };
    table_refused(empty, 1, "key ''", "lower case");
    static const struct tb_key dotted[] = { { "a.b", TB_KEY_INT, "1", NULL, "h" }, TB_KEYS_END };
    table_refused(dotted, 1, "key 'a.b'");
}
END_TEST

START_TEST(table_duplicate_and_reserved)
{
    static const struct tb_key dup[] = {
        { "threads", TB_KEY_INT, "1", NULL, "h" },
        { "mode", TB_KEY_ENUM, "a", "a|b", "h" },
        { "threads", TB_KEY_INT, "2", NULL, "h" },
        TB_KEYS_END,
    };
    table_refused(dup, 1, "key 'threads' is declared twice");
    static const struct tb_key reserved[] = { { "plugin", TB_KEY_STRING, "", NULL, "h" }, TB_KEYS_END };
    table_refused(reserved, 1, "key 'plugin' is reserved for the core");
}
END_TEST

START_TEST(table_enum_without_values)
{
    static const struct tb_key none[] = { { "mode", TB_KEY_ENUM, NULL, NULL, "h" }, TB_KEYS_END };
    table_refused(none, 1, "enum key 'mode' lists no allowed values");
    static const struct tb_key blank[] = { { "mode", TB_KEY_ENUM, NULL, "", "h" }, TB_KEYS_END };
    table_refused(blank, 1, "enum key 'mode' lists no allowed values");
}
END_TEST

START_TEST(table_bad_ranges)
{
    static const struct tb_key reversed[] = { { "threads", TB_KEY_INT, NULL, "64..1", "h" }, TB_KEYS_END };
    table_refused(reversed, 1, "key 'threads' has a bad range '64..1'", "lo..hi");
    static const struct tb_key nodots[] = { { "threads", TB_KEY_INT, NULL, "1-64", "h" }, TB_KEYS_END };
    table_refused(nodots, 1, "bad range '1-64'");
    static const struct tb_key words[] = { { "threads", TB_KEY_INT, NULL, "one..two", "h" }, TB_KEYS_END };
    table_refused(words, 1, "bad range 'one..two'");
    static const struct tb_key fracint[] = { { "threads", TB_KEY_INT, NULL, "0.5..2", "h" }, TB_KEYS_END };
    table_refused(fracint, 1, "bad range '0.5..2'");
    static const struct tb_key size[] = { { "mem", TB_KEY_SIZE, NULL, "1G..1M", "h" }, TB_KEYS_END };
    table_refused(size, 1, "key 'mem' has a bad range '1G..1M'");
    static const struct tb_key sizeneg[] = { { "mem", TB_KEY_SIZE, NULL, "-1..", "h" }, TB_KEYS_END };
    table_refused(sizeneg, 1, "bad range '-1..'");
    static const struct tb_key fl[] = { { "lr", TB_KEY_FLOAT, NULL, "1..0", "h" }, TB_KEYS_END };
    table_refused(fl, 1, "key 'lr' has a bad range '1..0'");
}
END_TEST

START_TEST(table_bad_typed_lists)
{
    static const struct tb_key bad_count[] = { { "a", TB_KEY_INT_LIST, "1", "[x] 1..2", "h" }, TB_KEYS_END };
    table_refused(bad_count, 1, "key 'a' has a bad allowed '[x] 1..2'");
    static const struct tb_key bad_range[] = { { "a", TB_KEY_FLOAT_LIST, NULL, "[1] 2..1", "h" }, TB_KEYS_END };
    table_refused(bad_range, 1, "key 'a' has a bad allowed '[1] 2..1'");
    static const struct tb_key bad_default[] = { { "a", TB_KEY_INT_LIST, "1,2", "[3]", "h" }, TB_KEYS_END };
    table_refused(bad_default, 1, "key 'a' has a bad default '1,2': 2 items");
}
END_TEST

START_TEST(table_bad_defaults)
{
    static const struct tb_key notint[] = { { "threads", TB_KEY_INT, "zero", "1..8", "h" }, TB_KEYS_END };
    table_refused(notint, 1, "key 'threads' has a bad default 'zero'", "not an integer", "an integer in 1..8");
    static const struct tb_key outside[] = { { "threads", TB_KEY_INT, "100", "1..64", "h" }, TB_KEYS_END };
    table_refused(outside, 1, "bad default '100'", "out of range", "1..64");
    static const struct tb_key badenum[] = { { "mode", TB_KEY_ENUM, "fast", "eager|lazy", "h" }, TB_KEYS_END };
    table_refused(badenum, 1, "key 'mode' has a bad default 'fast'", "one of: eager, lazy");
    static const struct tb_key badbool[] = { { "fast", TB_KEY_BOOL, "perhaps", NULL, "h" }, TB_KEYS_END };
    table_refused(badbool, 1, "bad default 'perhaps'", "yes or no");
    static const struct tb_key badlist[] = { { "colors", TB_KEY_LIST, "red,pink", "red|blue", "h" }, TB_KEYS_END };
    table_refused(badlist, 1, "bad default 'red,pink'", "unknown item 'pink'");
    static const struct tb_key badsize[] = { { "mem", TB_KEY_SIZE, "2T", "..1T", "h" }, TB_KEYS_END };
    table_refused(badsize, 1, "bad default '2T'", "out of range");
}
END_TEST

START_TEST(table_allowed_where_not_allowed)
{
    static const struct tb_key b[] = { { "fast", TB_KEY_BOOL, "no", "yes|no", "h" }, TB_KEYS_END };
    table_refused(b, 1, "bool key 'fast' cannot have allowed values");
    static const struct tb_key s[] = { { "label", TB_KEY_STRING, "", "a|b", "h" }, TB_KEYS_END };
    table_refused(s, 1, "string key 'label' cannot have allowed values");
    static const struct tb_key p[] = { { "cache", TB_KEY_PATH, "", "x", "h" }, TB_KEYS_END };
    table_refused(p, 1, "path key 'cache' cannot have allowed values");
}
END_TEST

START_TEST(table_missing_help_and_type)
{
    static const struct tb_key nohelp[] = { { "threads", TB_KEY_INT, "1", NULL, NULL }, TB_KEYS_END };
    table_refused(nohelp, 1, "key 'threads' has no help text");
    static const struct tb_key blank[] = { { "threads", TB_KEY_INT, "1", NULL, "" }, TB_KEYS_END };
    table_refused(blank, 1, "key 'threads' has no help text");
    static const struct tb_key badtype[] = { { "odd", (enum tb_key_type)0, NULL, NULL, "h" }, TB_KEYS_END };
    table_refused(badtype, 1, "key 'odd' has an unknown type 0");
}
END_TEST

START_TEST(table_every_problem_reported)
{
    static const struct tb_key keys[] = {
        { "Bad", TB_KEY_INT, "1", NULL, "h" },
        { "plugin", TB_KEY_STRING, "", NULL, "h" },
        { "mode", TB_KEY_ENUM, NULL, NULL, "h" },
        { "threads", TB_KEY_INT, "0", "1..8", "h" },
        { "fast", TB_KEY_BOOL, "no", "x", "" },
        { "threads", TB_KEY_INT, "1", "1..8", "h" },
        TB_KEYS_END,
    };
    table_refused(keys, 7, "key 'Bad'", "key 'plugin' is reserved", "enum key 'mode' lists no allowed values",
                  "key 'threads' has a bad default '0'", "bool key 'fast' cannot have allowed values",
                  "key 'fast' has no help text", "key 'threads' is declared twice");
}
END_TEST

/* ------------------------------------------------------------------ typos */

START_TEST(nearest_finds_typos)
{
    static const char *const keys[] = { "threads", "scale", "fast", "device_memory", "mode",
                                        "label",   "cache", "tags", "colors" };
    const size_t n = sizeof keys / sizeof *keys;
    ck_assert_str_eq(tb_nearest("thraeds", keys, n), "threads");  /* transposition */
    ck_assert_str_eq(tb_nearest("treads", keys, n), "threads");   /* deletion */
    ck_assert_str_eq(tb_nearest("threadss", keys, n), "threads"); /* insertion */
    ck_assert_str_eq(tb_nearest("threds", keys, n), "threads");
    ck_assert_str_eq(tb_nearest("THREADS", keys, n), "threads"); /* any case */
    ck_assert_str_eq(tb_nearest("device_memroy", keys, n), "device_memory");
    ck_assert_str_eq(tb_nearest("devicememory", keys, n), "device_memory");
    ck_assert_str_eq(tb_nearest("colours", keys, n), "colors");
    ck_assert_str_eq(tb_nearest("mdoe", keys, n), "mode");
    ck_assert_str_eq(tb_nearest("scael", keys, n), "scale");
    ck_assert_str_eq(tb_nearest("lable", keys, n), "label");
    /* Exact match is its own nearest. */
    ck_assert_str_eq(tb_nearest("cache", keys, n), "cache");

    static const char *const two[] = { "ab", "xy" };
    ck_assert_str_eq(tb_nearest("ba", two, 2), "ab"); /* a swap counts once */

    static const char *const sections[] = {
        "run", "backend", "platform", "model", "dataset", "swap", "train", "report"
    };
    ck_assert_str_eq(tb_nearest("modle", sections, 8), "model");
    ck_assert_str_eq(tb_nearest("datset", sections, 8), "dataset");
    ck_assert_str_eq(tb_nearest("backedn", sections, 8), "backend");
    ck_assert_str_eq(tb_nearest("rnu", sections, 8), "run");
}
END_TEST

START_TEST(nearest_nothing_close)
{
    static const char *const keys[] = { "threads", "scale", "fast", "device_memory", "mode" };
    const size_t n = sizeof keys / sizeof *keys;
    ck_assert_ptr_null(tb_nearest("xyzzy", keys, n));
    ck_assert_ptr_null(tb_nearest("batch_size", keys, n));
    ck_assert_ptr_null(tb_nearest("memory", keys, n)); /* a part of a name is no typo */
    ck_assert_ptr_null(tb_nearest("q", keys, n));
    ck_assert_ptr_null(tb_nearest("thr", keys, n));
    ck_assert_ptr_null(tb_nearest("threads", keys, 0));
    ck_assert_ptr_null(tb_nearest("threads", NULL, 0));
    static const char *const short_names[] = { "abc" };
    ck_assert_ptr_null(tb_nearest("xyz", short_names, 1));
    ck_assert_ptr_null(tb_nearest("bca", short_names, 1)); /* two edits on a short word */
    /* Words too long to compare are never suggested. */
    static const char *const long_names[] = {
        "a_very_long_key_name_that_goes_on_and_on_for_more_than_sixty_three_characters_x"
    };
    ck_assert_ptr_null(
        tb_nearest("a_very_long_key_name_that_goes_on_and_on_for_more_than_sixty_three_characters_y", long_names, 1));
}
END_TEST

/* ------------------------------------------------------------------ main */

int main(void)
{
    Suite *s = suite_create("keys");

    TCase *tc = tcase_create("int");
    tcase_add_test(tc, int_values);
    tcase_add_test(tc, int_rejects);
    tcase_add_test(tc, int_ranges);
    tcase_add_test(tc, int_range_exact_at_large_values);
    suite_add_tcase(s, tc);

    tc = tcase_create("float_bool");
    tcase_add_test(tc, float_values);
    tcase_add_test(tc, float_ranges);
    tcase_add_test(tc, bool_spellings);
    tcase_add_test(tc, bool_rejects);
    suite_add_tcase(s, tc);

    tc = tcase_create("size");
    tcase_add_test(tc, size_suffixes);
    tcase_add_test(tc, size_rejects);
    tcase_add_test(tc, decimal_forms_only);
    tcase_add_test(tc, size_plain_bytes_exact);
    tcase_add_test(tc, size_ranges);
    tcase_add_test(tc, size_format_and_round_trip);
    suite_add_tcase(s, tc);

    tc = tcase_create("enum_list");
    tcase_add_test(tc, enum_values);
    tcase_add_test(tc, enum_rejects);
    tcase_add_test(tc, list_values);
    tcase_add_test(tc, list_rejects);
    tcase_add_test(tc, list_allowed_items);
    tcase_add_test(tc, typed_list_values);
    suite_add_tcase(s, tc);

    tc = tcase_create("string_path");
    tcase_add_test(tc, string_values);
    tcase_add_test(tc, path_values);
    tcase_add_test(tc, unknown_type_rejected);
    tcase_add_test(tc, reason_truncated_safely);
    suite_add_tcase(s, tc);

    tc = tcase_create("tables");
    tcase_add_test(tc, describe_each_type);
    tcase_add_test(tc, type_names_count_find);
    tcase_add_test(tc, table_good);
    tcase_add_test(tc, table_bad_names);
    tcase_add_test(tc, table_duplicate_and_reserved);
    tcase_add_test(tc, table_enum_without_values);
    tcase_add_test(tc, table_bad_ranges);
    tcase_add_test(tc, table_bad_defaults);
    tcase_add_test(tc, table_bad_typed_lists);
    tcase_add_test(tc, table_allowed_where_not_allowed);
    tcase_add_test(tc, table_missing_help_and_type);
    tcase_add_test(tc, table_every_problem_reported);
    suite_add_tcase(s, tc);

    tc = tcase_create("nearest");
    tcase_add_test(tc, nearest_finds_typos);
    tcase_add_test(tc, nearest_nothing_close);
    suite_add_tcase(s, tc);

    return test_run_suite(s);
}
