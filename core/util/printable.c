/* core/util/printable.c: text made safe to print (printable.h). */
#include "config.h"

#include "core/util/printable.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The length of the valid UTF-8 sequence at s (2..4), or 0: not one (overlong forms,
 * surrogates and code points past U+10FFFF are not valid). */
static size_t utf8_length(const unsigned char *s)
{
    const unsigned char c = s[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < n; k++)
        if (s[k] < 0x80 || s[k] > 0xBF)
            return 0;
    return n;
}

char *tb_printable(char *dst, size_t cap, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    while (*p) {
        const size_t n = *p < 0x80 ? 1 : utf8_length(p);
        /* C1 controls are valid UTF-8 (C2 80..C2 9F) and as active as C0 ones */
        const bool c1 = n == 2 && p[0] == 0xC2 && p[1] <= 0x9F;
        const bool plain = n > 1 ? !c1 : (*p >= 0x20 && *p != 0x7F) || *p == '\n' || *p == '\t';
        if (plain && n > 0) {
            if (o + n >= cap)
                break;
            for (size_t k = 0; k < n; k++)
                dst[o++] = (char)p[k];
            p += n;
            continue;
        }
        /* escaped: one byte (a C1 control: both of its bytes) */
        const size_t bytes = c1 ? 2 : 1;
        if (o + 4 * bytes >= cap)
            break;
        for (size_t k = 0; k < bytes; k++, p++)
            o += (size_t)snprintf(dst + o, cap - o, "\\x%02x", (unsigned)*p);
    }
    dst[o] = '\0';
    return dst;
}

void tb_fputs_printable(const char *s, FILE *f)
{
    const size_t n = 4 * strlen(s) + 1; /* the most tb_printable writes */
    char *b = malloc(n);
    fputs(b ? tb_printable(b, n, s) : "(out of memory)", f);
    free(b);
}
