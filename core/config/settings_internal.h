/* core/config/settings_internal.h: the core's own keys ([run], [train], [report], the
 * loader's keys of [dataset], [model] sync_bn) read once, when the configuration is
 * resolved, into typed structs (settings.c). Each key of the core's tables
 * (core_keys.c) is bound to the field it fills by a struct tb_binding made from the same
 * row; the binding checks that the value fits the field, and check_config that every key
 * is bound once, to a field of its type, whose range holds the key's. */
#ifndef TB_CORE_SETTINGS_INTERNAL_H
#define TB_CORE_SETTINGS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <trainbig/error.h>
#include <trainbig/keys.h>

#include "core/config/section_internal.h"
#include "core/config/settings.h"

/* The C type of a bound field. Texts point into the section, which outlives them. */
enum tb_field_type {
    TB_FIELD_INT = 1, /* int: INT, ENUM (the index) */
    TB_FIELD_U32,     /* uint32_t: INT */
    TB_FIELD_U64,     /* uint64_t: SIZE */
    TB_FIELD_DOUBLE,  /* double: FLOAT */
    TB_FIELD_FLOAT,   /* float: FLOAT */
    TB_FIELD_BOOL,    /* bool: BOOL */
    TB_FIELD_TEXT,    /* const char *: STRING, PATH, ENUM (the name) */
};

struct tb_binding {
    const char *key;
    enum tb_field_type type;
    size_t offset; /* of the field in the settings struct */
};
/* Binds key to field of struct settings, the field's type read from its C type: a
 * field of a type no binding fills does not compile. */
#define TB_BIND(key, settings, field)                                       \
    {                                                                       \
        (key), TB_FIELD_TYPE_OF(settings, field), offsetof(settings, field) \
    }
#define TB_FIELD_TYPE_OF(settings, field) \
    _Generic(((settings *)0)->field, int: TB_FIELD_INT, uint32_t: TB_FIELD_U32, uint64_t: TB_FIELD_U64,         \
             double: TB_FIELD_DOUBLE, float: TB_FIELD_FLOAT, bool: TB_FIELD_BOOL, const char *: TB_FIELD_TEXT)
#define TB_BINDINGS_END                \
    {                                  \
        NULL, (enum tb_field_type)0, 0 \
    }

/* Fills the bound fields of out from validated section s. A value the field cannot hold
 * (a table bug: check_config tests for it) is TB_ERR_CONFIG naming the key. */
int tb_section_bind(const struct tb_section *s, const struct tb_binding *b, void *out, struct tb_err *err);

/* Whether binding b may fill from key k: the type matches and the field holds every
 * value the key allows. why says what is wrong otherwise. */
bool tb_binding_fits(const struct tb_binding *b, const struct tb_key *k, char *why, size_t why_size);

/* Reads the loader's keys from a validated [dataset] section. A bad val_size or
 * scale_min > scale_max is TB_ERR_CONFIG naming the key and where it was set. */
int tb_data_settings_read(const struct tb_section *ds, struct tb_data_settings *out, struct tb_err *err);

/* The bindings of the core's tables, in core_keys.c. */
extern const struct tb_binding tb_run_bindings[], tb_train_bindings[], tb_report_bindings[], tb_data_bindings[],
    tb_model_core_bindings[];

#endif
