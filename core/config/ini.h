/* core/config/ini.h: an INI file and its --set overrides, as raw text entries with
 * where each came from (config.c). Typing and validation happen in setup.c. */
#ifndef TB_CORE_INI_H
#define TB_CORE_INI_H

#include <stdbool.h>
#include <stddef.h>
#include <trainbig/error.h>

enum tb_origin {
    TB_ORIGIN_DEFAULT = 0,
    TB_ORIGIN_FILE,
    TB_ORIGIN_SET,
};

struct tb_entry {
    char *section; /* lower case */
    char *key;     /* lower case */
    char *value;   /* as iniparser returns it: trimmed, quotes removed */
    enum tb_origin origin;
    int line;      /* FILE: its line (1-based); 0 when unknown */
    char *set_arg; /* SET: the argument as given */
};

struct tb_config_section {
    char *name;
    int line;      /* first [name] line; 0 when only --set mentions it */
    char *set_arg; /* when only --set mentions it */
};

struct tb_config {
    char *path; /* as given */
    char *dir;  /* its directory, made absolute: base of relative paths in the file */
    struct tb_entry *entries;
    size_t nentries, cap;
    struct tb_config_section *sections; /* in order of first appearance */
    size_t nsections, seccap;
};

/* Reads an INI file. Every syntax problem (a line that is neither a [section] nor
 * key = value, a key outside any section, a key set twice in a section) is one line in
 * err, as "FILE:LINE: ...". On success *out is the caller's, to free with
 * tb_config_free(). */
int tb_config_load(const char *path, struct tb_config **out, struct tb_err *err);

/* An empty configuration named `label` (for messages), filled with tb_config_set(); paths
 * in it are relative to the working directory. NULL when out of memory. */
struct tb_config *tb_config_new(const char *label);

/* Applies one "section.key=value" override (from --set). Replaces a value from the file
 * or an earlier --set. A malformed argument is TB_ERR_CONFIG. */
int tb_config_set(struct tb_config *c, const char *assignment, struct tb_err *err);

/* Forgets the keys given for `section` (the section stays known), except those for which
 * keep(key, arg) is true (keep NULL: all go). For tools that try other settings of a
 * section than the file's, such as `trainbig fit` with each policy. */
void tb_config_drop_section(struct tb_config *c, const char *section, bool (*keep)(const char *key, void *arg),
                            void *arg);

void tb_config_free(struct tb_config *c);

/* The entry for section.key, or NULL. */
struct tb_entry *tb_config_find(const struct tb_config *c, const char *section, const char *key);

/* Where an entry came from, for messages: "run.ini:12", "run.ini: --set a.b=c". */
void tb_config_where(const struct tb_config *c, const struct tb_entry *e, char *buf, size_t size);

/* "--set section.key=value": where a value given by --set came from, as the effective
 * configuration prints it and messages name it. NULL when out of memory; the caller
 * frees it. */
char *tb_set_origin(const char *set_arg);

/* The same for a section header. */
void tb_config_section_where(const struct tb_config *c, const struct tb_config_section *s, char *buf, size_t size);

#endif
