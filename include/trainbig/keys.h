/* trainbig/keys.h: configuration keys, declared in tables and read back validated.
 *
 * The core and every plugin declare their INI keys in a table of struct tb_key. The core
 * validates the whole configuration against these tables before anything runs, so a
 * plugin never sees a missing, mistyped or out-of-range value: it reads typed values from
 * its struct tb_section with the getters below.
 *
 * Value syntax, by type:
 *   TB_KEY_INT     decimal integer, optional sign                       42, -1
 *   TB_KEY_FLOAT   decimal or scientific notation                       0.01, 1e-4
 *   TB_KEY_BOOL    yes/no, true/false, on/off, 1/0 (any case)
 *   TB_KEY_SIZE    bytes, with an optional binary suffix K, M, G or T    512M, 16G, 1.5G
 *                  (powers of 1024; "KB", "KiB" and lower case accepted too)
 *   TB_KEY_ENUM    one of the names listed in `allowed`
 *   TB_KEY_STRING  any text (quote it in the file to keep ';' or '#')
 *   TB_KEY_PATH    a file or directory; a relative path written in an INI file is
 *                  relative to that file's directory, one given with --set to the
 *                  working directory; empty means "not set"
 *   TB_KEY_LIST    comma-separated items, spaces around items trimmed; empty = no items
 *   TB_KEY_INT_LIST, TB_KEY_FLOAT_LIST
 *                  comma-separated integers or numbers                  3,3,6,3,1,1
 *
 * `allowed` is, by type:
 *   INT, FLOAT, SIZE  a range "lo..hi"; either side may be left out ("1..", "..64")
 *   ENUM              the names, separated by '|': "none|lru|prefetch" (required)
 *   LIST              optional: the names each item must be one of, as for ENUM
 *   INT_LIST, FLOAT_LIST
 *                     optional: "[COUNT] RANGE", either part optional: COUNT is how many
 *                     items ("6", or a range "1..4"), RANGE each item's "lo..hi":
 *                     "[6] 1..64" is six integers from 1 to 64
 *   others            NULL
 * `def` is the default written as in the file; NULL makes the key required.
 * The loader checks a plugin's table when it loads it (types, defaults parse and lie in
 * range, no duplicate names, no key named "plugin") and refuses a plugin whose table is
 * wrong, naming the key. */
#ifndef TRAINBIG_KEYS_H
#define TRAINBIG_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tb_key_type {
    TB_KEY_INT = 1,
    TB_KEY_FLOAT,
    TB_KEY_BOOL,
    TB_KEY_SIZE,
    TB_KEY_ENUM,
    TB_KEY_STRING,
    TB_KEY_PATH,
    TB_KEY_LIST,
    TB_KEY_INT_LIST,
    TB_KEY_FLOAT_LIST,
};

struct tb_key {
    const char *name; /* lower case, [a-z0-9_] */
    enum tb_key_type type;
    const char *def;     /* default in file syntax; NULL = required */
    const char *allowed; /* range or names, see above; NULL = anything of the type */
    const char *help;    /* one line, shown by `trainbig plugins` and `trainbig config` */
};

/* Ends every key table. */
#define TB_KEYS_END                                 \
    {                                               \
        NULL, (enum tb_key_type)0, NULL, NULL, NULL \
    }

/* The validated values of one INI section. Owned by the core; valid from the plugin's
 * create call until the run ends. */
struct tb_section;

/* Typed getters. `key` must be declared in the section's table with the matching type:
 * asking for anything else is a bug in the caller, reported and aborted on.
 * Returned strings are owned by the section. */
int64_t tb_section_int(const struct tb_section *s, const char *key);
double tb_section_float(const struct tb_section *s, const char *key);
bool tb_section_bool(const struct tb_section *s, const char *key);
uint64_t tb_section_size(const struct tb_section *s, const char *key);
/* ENUM: the index of the value in `allowed`. */
int tb_section_enum(const struct tb_section *s, const char *key);
/* STRING, PATH and ENUM: the value as text (PATH: resolved as described above). */
const char *tb_section_string(const struct tb_section *s, const char *key);
/* LIST: the number of items; *items (may be NULL) receives the array, owned by s. */
size_t tb_section_list(const struct tb_section *s, const char *key, const char *const **items);
/* INT_LIST and FLOAT_LIST: the number of items, each validated against the
 * key's COUNT and RANGE; *items (may be NULL) receives the values, owned by s. */
size_t tb_section_ints(const struct tb_section *s, const char *key, const int64_t **items);
size_t tb_section_floats(const struct tb_section *s, const char *key, const double **items);

/* The section's name ("backend") and where a key's value came from ("run.ini:12",
 * "--set backend.threads=8", "default"), for messages. Owned by s. */
const char *tb_section_name(const struct tb_section *s);
const char *tb_section_origin(const struct tb_section *s, const char *key);

#ifdef __cplusplus
}
#endif
#endif
