/* core/util/text_internal.h: a growing text buffer (text.c); on allocation failure it stops
 * growing and remembers that, so a writer checks once at the end. s is the caller's to
 * free. */
#ifndef TB_CORE_TEXT_INTERNAL_H
#define TB_CORE_TEXT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

struct tb_text {
    char *s; /* NUL-terminated once anything was put */
    size_t len, cap;
    bool oom;
};

/* Appends n bytes of s. */
void tb_text_put(struct tb_text *t, const char *s, size_t n);
/* Appends the string s. */
void tb_text_puts(struct tb_text *t, const char *s);
/* Appends s as a JSON string: quoted, with '"', '\\' and control characters escaped
 * (bytes from 0x80 are kept: UTF-8 passes through). */
void tb_text_put_json_string(struct tb_text *t, const char *s);

#endif
