/* core/config/keys.h: describing keys to people (keys.c): what `trainbig plugins` and the
 * configuration's messages say about a struct tb_key (trainbig/keys.h). Parsing values
 * is core/config/keys_internal.h's. */
#ifndef TB_CORE_KEYS_H
#define TB_CORE_KEYS_H

#include <stddef.h>
#include <trainbig/keys.h>

/* "an integer in 1..64", "one of: none, lru, prefetch", ... */
void tb_key_describe(const struct tb_key *k, char *buf, size_t size);
const char *tb_key_type_name(enum tb_key_type t);

/* Number of keys before TB_KEYS_END (0 for NULL). */
size_t tb_keys_count(const struct tb_key *keys);
const struct tb_key *tb_keys_find(const struct tb_key *keys, const char *name);

/* The candidate closest to word by edit distance (transpositions count once), or NULL
 * when none is close enough to be a likely typo. */
const char *tb_nearest(const char *word, const char *const *candidates, size_t n);

#endif
