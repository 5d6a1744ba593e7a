/* core/util/printable.h: text from users and files made safe to print (printable.c).
 * A message can quote a value, a path or a line read from a file; bytes a terminal acts
 * on (an escape sequence can move the cursor, retitle the window or hide what follows)
 * or cannot show are written as \xNN instead, so every message says what it quotes. */
#ifndef TB_CORE_PRINTABLE_H
#define TB_CORE_PRINTABLE_H

#include <stddef.h>
#include <stdio.h>

/* Copies s into dst (cap bytes, at least 1; always NUL-terminated, cut before a character
 * that does not fit whole), escaping as \xNN: control bytes other than newline and tab,
 * DEL, the C1 controls U+0080..U+009F, and every byte that is not part of valid UTF-8.
 * 4 * strlen(s) + 1 bytes always hold the whole. Returns dst. */
char *tb_printable(char *dst, size_t cap, const char *s);
/* Writes s to f as tb_printable makes it ("(out of memory)" if it cannot). */
void tb_fputs_printable(const char *s, FILE *f);

#endif
