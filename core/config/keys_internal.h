/* core/config/keys_internal.h: parsing and checking values against struct tb_key (keys.c)
 * and the text forms of values (key_syntax.c). */
#ifndef TB_CORE_KEYS_INTERNAL_H
#define TB_CORE_KEYS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <trainbig/error.h>
#include <trainbig/keys.h>

#include "core/config/keys.h"

/* A parsed value. Owns text and items; free with tb_value_free(). */
struct tb_value {
    union {
        int64_t i;  /* INT */
        double f;   /* FLOAT */
        bool b;     /* BOOL */
        uint64_t u; /* SIZE */
        int e;      /* ENUM: index into allowed */
    } v;
    char *text;   /* as written (trimmed); ENUM: the canonical name; PATH: resolved */
    char **items; /* LIST, INT_LIST, FLOAT_LIST: the items as written */
    size_t nitems;
    int64_t *ints;  /* INT_LIST: nitems values */
    double *floats; /* FLOAT_LIST: nitems values */
};

/* Parses text as a value of key k. A relative PATH is joined to base_dir when base_dir is
 * non-NULL. On failure returns TB_ERR_CONFIG and writes the reason (what is wrong, then
 * what is allowed) into why; *out is left empty. */
int tb_key_parse(const struct tb_key *k, const char *text, const char *base_dir, struct tb_value *out, char *why,
                 size_t why_size);
void tb_value_free(struct tb_value *v);

/* Checks a key table as a plugin declares it: every problem becomes one line in err,
 * prefixed by `who`. Returns TB_OK or TB_ERR_PLUGIN. */
int tb_keys_check_table(const struct tb_key *keys, const char *who, struct tb_err *err);

/* ---- The text forms of values (key_syntax.c). Numbers are decimal only (digits, a sign,
 * a point, an exponent): no hexadecimal, no inf or nan. Each parser returns 0, or one of
 * these, whose text tb_parse_problem gives for messages. */
enum tb_parse_problem {
    TB_PARSE_SYNTAX = -1,    /* not the form at all */
    TB_PARSE_HEX = -2,       /* 0x...: hexadecimal is not a documented form */
    TB_PARSE_TOO_BIG = -3,   /* past what the type holds */
    TB_PARSE_TOO_SMALL = -4, /* a number too close to 0 to hold (below 2.2e-308), not 0 */
    TB_PARSE_ZERO = -5,      /* a size that is not 0 but rounds to 0 bytes */
};
/* What problem p (a parser's result) means, with the kind named ("an integer", "a
 * number", "a size"), into buf. */
void tb_parse_problem(int p, const char *kind, char *buf, size_t size);

/* A copy of s (of s[0..n)) without its leading and trailing white space; NULL when out
 * of memory. */
char *tb_trim_dup(const char *s);
char *tb_trim_ndup(const char *s, size_t n);
/* A decimal integer with an optional sign, within int64_t. */
int tb_parse_int(const char *s, int64_t *out);
/* A finite number, decimal or scientific. */
int tb_parse_float(const char *s, double *out);
/* yes/no, true/false, on/off, 1/0 in any case. */
int tb_parse_bool(const char *s, bool *out);
/* Parses a size ("16G", "1.5M", "4096") into bytes, to the nearest byte. */
int tb_parse_size(const char *text, uint64_t *bytes);
/* Formats bytes with the largest exact binary suffix ("16G", "1536M", "100"). */
void tb_format_size(uint64_t bytes, char *buf, size_t size);

/* Index of name in "a|b|c" (case-insensitive), or -1; the idx-th name copied into buf;
 * "a|b|c" as "a, b, c". */
int tb_name_index(const char *allowed, const char *name);
void tb_name_at(const char *allowed, int idx, char *buf, size_t size);
void tb_names_list(const char *allowed, char *buf, size_t size);

/* Splits "lo..hi" into its two sides (either may be empty); -1 when there is no "..". */
int tb_split_range(const char *range, char *lo, char *hi, size_t size);
/* One side of a range as a value of type t (INT, FLOAT or SIZE; a list's item type for
 * the typed lists), as a double for comparison; an empty side sets *present = false. */
int tb_range_side(enum tb_key_type t, const char *text, double *out, bool *present);

#endif
