/* core/config/section_internal.h: one validated INI section (section.c). */
#ifndef TB_CORE_SECTION_INTERNAL_H
#define TB_CORE_SECTION_INTERNAL_H

#include "core/config/ini.h"
#include "core/config/keys_internal.h"

struct tb_section {
    char *name;                /* "backend" */
    const struct tb_key *keys; /* the table it was validated against (not owned) */
    size_t nkeys;
    struct tb_value *values;   /* [nkeys], in table order */
    char **origins;            /* [nkeys]: "run.ini:12", "--set train.lr=0.1", "default" */
    struct tb_key *owned_keys; /* keys, when the section owns its table (a merged one) */
};

/* Builds section `name` of config c against keys: every key of c's section must be in
 * keys (except those listed in `skip`, NULL-terminated, handled by the caller), parse
 * and lie in range; keys not given take their defaults; a required key not given is an
 * error. `owner` names the table's owner in messages ("backend plugin 'cpu'").
 * Every problem is one line in err. On success *out is the caller's (tb_section_free). */
int tb_section_build(const struct tb_config *c, const char *name, const struct tb_key *keys, const char *owner,
                     const char *const *skip, struct tb_section **out, struct tb_err *err);
void tb_section_free(struct tb_section *s);

/* Whether s's table declares key. */
bool tb_section_has(const struct tb_section *s, const char *key);

/* Gives key `key` the value `text` where the section declares it and holds its default
 * (nobody set it): 1 when applied (origin: what the origin column says; NULL: check
 * only, nothing changes), 0 when the key is not declared or was set, -1 when text is no
 * value of the key (why says what is allowed). */
int tb_section_default(struct tb_section *s, const char *key, const char *text, const char *origin, char *why,
                       size_t why_size);

/* The value of key i as text ("" for an empty list), for printing. */
const char *tb_section_text(const struct tb_section *s, size_t i);

#endif
