/* core/config/key_syntax.c: the text forms of key values: integers, numbers, sizes, yes/no,
 * "a|b|c" names and "lo..hi" ranges (keys_internal.h). */
#include "config.h"

#include "core/config/keys_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------ scalars */

char *tb_trim_dup(const char *s)
{
    return tb_trim_ndup(s, strlen(s));
}

char *tb_trim_ndup(const char *s, size_t n)
{
    while (n && isspace((unsigned char)*s)) {
        s++;
        n--;
    }
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    char *r = malloc(n + 1);
    if (r) {
        memcpy(r, s, n);
        r[n] = '\0';
    }
    return r;
}

/* Refuses the forms strtod takes that a setting does not: hexadecimal ("0x10"), inf and
 * nan. What follows a number's digits (a size's suffix) is left to the caller. */
static int decimal_only(const char *s)
{
    const char *p = s + (*s == '+' || *s == '-');
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        return TB_PARSE_HEX;
    return isdigit((unsigned char)*p) || (*p == '.' && isdigit((unsigned char)p[1])) ? 0 : TB_PARSE_SYNTAX;
}

void tb_parse_problem(int p, const char *kind, char *buf, size_t size)
{
    switch (p) {
    case TB_PARSE_HEX:
        snprintf(buf, size, "not %s: hexadecimal is not accepted, write it in decimal", kind);
        break;
    case TB_PARSE_TOO_BIG:
        snprintf(buf, size, "too large for %s", kind);
        break;
    case TB_PARSE_TOO_SMALL:
        snprintf(buf, size, "too close to 0 to hold (the smallest is 2.2e-308): write 0 or a larger value");
        break;
    case TB_PARSE_ZERO:
        snprintf(buf, size, "rounds to 0 bytes: write 0 for none, or at least 1 byte");
        break;
    default:
        snprintf(buf, size, "not %s", kind);
    }
}

int tb_parse_int(const char *s, int64_t *out)
{
    if (!*s)
        return TB_PARSE_SYNTAX;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s)
        return TB_PARSE_SYNTAX;
    if ((*end == 'x' || *end == 'X') && end - s <= 2 && end[-1] == '0')
        return TB_PARSE_HEX;
    if (*end)
        return TB_PARSE_SYNTAX;
    if (errno == ERANGE)
        return TB_PARSE_TOO_BIG;
    if (errno)
        return TB_PARSE_SYNTAX;
    *out = v;
    return 0;
}

int tb_parse_float(const char *s, double *out)
{
    if (!*s)
        return TB_PARSE_SYNTAX;
    int rc = decimal_only(s);
    if (rc)
        return rc;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || end == s)
        return TB_PARSE_SYNTAX;
    if (errno == ERANGE)
        return fabs(v) > 1.0 ? TB_PARSE_TOO_BIG : TB_PARSE_TOO_SMALL;
    if (errno || !isfinite(v))
        return TB_PARSE_SYNTAX;
    if (v != 0 && fpclassify(v) == FP_SUBNORMAL)
        return TB_PARSE_TOO_SMALL;
    *out = v;
    return 0;
}

int tb_parse_size(const char *s, uint64_t *bytes)
{
    if (!*s || *s == '-' || *s == '+')
        return TB_PARSE_SYNTAX;
    int rc = decimal_only(s);
    if (rc)
        return rc;
    char *end;
    errno = 0;
    if (isdigit((unsigned char)*s)) {
        unsigned long long whole = strtoull(s, &end, 10);
        if (!*end || ((*end == 'b' || *end == 'B') && !end[1])) {
            if (errno == ERANGE)
                return TB_PARSE_TOO_BIG;
            *bytes = whole;
            return 0;
        }
        errno = 0;
    }
    double v = strtod(s, &end);
    if (end == s || !isfinite(v) || v < 0)
        return TB_PARSE_SYNTAX;
    if (errno == ERANGE)
        return v > 1.0 ? TB_PARSE_TOO_BIG : TB_PARSE_ZERO;
    double mul = 1;
    if (*end) {
        switch (toupper((unsigned char)*end)) {
        case 'K':
            mul = 1024.0;
            break;
        case 'M':
            mul = 1024.0 * 1024;
            break;
        case 'G':
            mul = 1024.0 * 1024 * 1024;
            break;
        case 'T':
            mul = 1024.0 * 1024 * 1024 * 1024;
            break;
        case 'B':
            mul = 1;
            end--; /* "B" alone: plain bytes */
            break;
        default:
            return TB_PARSE_SYNTAX;
        }
        end++;
        if (strcasecmp(end, "") != 0 && strcasecmp(end, "B") != 0 && strcasecmp(end, "iB") != 0)
            return TB_PARSE_SYNTAX;
    }
    double b = v * mul;
    if (b >= 18446744073709551616.0) /* 2^64 */
        return TB_PARSE_TOO_BIG;
    *bytes = (uint64_t)llround(b);
    /* 0 means "none" wherever a size is optional: a value meant as some bytes must not
     * become it. */
    if (*bytes == 0 && v != 0)
        return TB_PARSE_ZERO;
    return 0;
}

void tb_format_size(uint64_t bytes, char *buf, size_t size)
{
    static const char suffix[] = "KMGT";
    int s = -1;
    while (s < 3 && bytes && bytes % 1024 == 0) {
        bytes /= 1024;
        s++;
    }
    if (s < 0)
        snprintf(buf, size, "%llu", (unsigned long long)bytes);
    else
        snprintf(buf, size, "%llu%c", (unsigned long long)bytes, suffix[s]);
}

int tb_parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = { "yes", "true", "on", "1" };
    static const char *const no[] = { "no", "false", "off", "0" };
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -1;
}

/* Index of name in "a|b|c" (case-insensitive), or -1. */
int tb_name_index(const char *allowed, const char *name)
{
    if (!allowed)
        return -1;
    size_t len = strlen(name);
    int idx = 0;
    for (const char *p = allowed;; idx++) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && strncasecmp(p, name, n) == 0)
            return idx;
        if (!bar)
            return -1;
        p = bar + 1;
    }
}

/* The idx-th name of "a|b|c", copied into buf. */
void tb_name_at(const char *allowed, int idx, char *buf, size_t size)
{
    const char *p = allowed;
    for (int i = 0; i < idx && p; i++) {
        p = strchr(p, '|');
        if (p)
            p++;
    }
    if (!p) {
        buf[0] = '\0';
        return;
    }
    const char *bar = strchr(p, '|');
    size_t n = bar ? (size_t)(bar - p) : strlen(p);
    if (n >= size)
        n = size - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
}

/* "a|b|c" -> "a, b, c" */
void tb_names_list(const char *allowed, char *buf, size_t size)
{
    size_t o = 0;
    for (const char *p = allowed; *p && o + 3 < size; p++) {
        if (*p == '|') {
            buf[o++] = ',';
            buf[o++] = ' ';
        } else {
            buf[o++] = *p;
        }
    }
    buf[o] = '\0';
}

/* Splits "lo..hi" into its two sides (either may be empty). -1 when there is no "..". */
int tb_split_range(const char *range, char *lo, char *hi, size_t size)
{
    const char *dots = strstr(range, "..");
    if (!dots)
        return -1;
    size_t n = (size_t)(dots - range);
    if (n >= size || strlen(dots + 2) >= size)
        return -1;
    memcpy(lo, range, n);
    lo[n] = '\0';
    strcpy(hi, dots + 2);
    return 0;
}

/* Parses one side of a range as the key's scalar type into a double, for comparison.
 * Empty side: *present = false. */
int tb_range_side(enum tb_key_type t, const char *text, double *out, bool *present)
{
    *present = *text != '\0';
    if (!*present)
        return 0;
    if (t == TB_KEY_INT) {
        int64_t v;
        if (tb_parse_int(text, &v))
            return -1;
        *out = (double)v;
    } else if (t == TB_KEY_FLOAT) {
        if (tb_parse_float(text, out))
            return -1;
    } else {
        uint64_t v;
        if (tb_parse_size(text, &v))
            return -1;
        *out = (double)v;
    }
    return 0;
}
