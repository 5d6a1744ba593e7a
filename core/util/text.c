/* core/util/text.c: a growing text buffer (text_internal.h). */
#include "config.h"

#include "core/util/text_internal.h"

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
