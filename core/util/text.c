/* core/util/text.c: a growing text buffer (text_internal.h). */
#include "config.h"

#include "core/util/text_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tb_text_put(struct tb_text *t, const char *s, size_t n)
{
    if (t->oom)
        return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *p = realloc(t->s, cap);
        if (!p) {
            t->oom = true;
            return;
        }
        t->s = p;
        t->cap = cap;
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

void tb_text_puts(struct tb_text *t, const char *s)
{
    tb_text_put(t, s, strlen(s));
}

void tb_text_put_json_string(struct tb_text *t, const char *s)
{
    tb_text_put(t, "\"", 1);
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            const char e[2] = { '\\', (char)c };
            tb_text_put(t, e, 2);
        } else if (c < 0x20) {
            char e[8];
            snprintf(e, sizeof e, "\\u%04x", c);
            tb_text_put(t, e, 6);
        } else {
            tb_text_put(t, (const char *)&c, 1);
        }
    }
    tb_text_put(t, "\"", 1);
}
