/* core/config/settings.c: the core's validated sections into typed structs, through the
 * bindings of core_keys.c (settings_internal.h). */
#include "config.h"

#include "core/config/settings_internal.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/config/section_internal.h"

/* The values a field of type t holds, as doubles (exact for these bounds). */
static void field_bounds(enum tb_field_type t, double *lo, double *hi)
{
    switch (t) {
    case TB_FIELD_INT:
        *lo = INT_MIN, *hi = INT_MAX;
        return;
    case TB_FIELD_U32:
        *lo = 0, *hi = UINT32_MAX;
        return;
    case TB_FIELD_U64:
        *lo = 0, *hi = 18446744073709551615.0;
        return;
    case TB_FIELD_FLOAT:
        *lo = -3.4028234663852886e38, *hi = 3.4028234663852886e38;
        return;
    default:
        *lo = -INFINITY, *hi = INFINITY;
    }
}

static bool type_matches(enum tb_field_type f, enum tb_key_type k)
{
    switch (f) {
    case TB_FIELD_INT:
        return k == TB_KEY_INT || k == TB_KEY_ENUM;
    case TB_FIELD_U32:
        return k == TB_KEY_INT;
    case TB_FIELD_U64:
        return k == TB_KEY_SIZE;
    case TB_FIELD_DOUBLE:
    case TB_FIELD_FLOAT:
        return k == TB_KEY_FLOAT;
    case TB_FIELD_BOOL:
        return k == TB_KEY_BOOL;
    case TB_FIELD_TEXT:
        return k == TB_KEY_STRING || k == TB_KEY_PATH || k == TB_KEY_ENUM;
    }
    return false;
}

bool tb_binding_fits(const struct tb_binding *b, const struct tb_key *k, char *why, size_t why_size)
{
    if (!type_matches(b->type, k->type)) {
        snprintf(why, why_size, "key '%s' (%s) is bound to a field of another type", k->name,
                 tb_key_type_name(k->type));
        return false;
    }
    if (k->type != TB_KEY_INT && k->type != TB_KEY_FLOAT && k->type != TB_KEY_SIZE)
        return true;
    double flo, fhi, a = -INFINITY, z = INFINITY;
    bool has_a = false, has_z = false;
    field_bounds(b->type, &flo, &fhi);
    char lo[64], hi[64];
    if (k->allowed && tb_split_range(k->allowed, lo, hi, sizeof lo) == 0) {
        tb_range_side(k->type, lo, &a, &has_a);
        tb_range_side(k->type, hi, &z, &has_z);
    }
    if (k->type == TB_KEY_SIZE && !has_a)
        a = 0, has_a = true; /* sizes are never negative */
    if ((!has_a && flo > -INFINITY) || (!has_z && fhi < INFINITY) || a < flo || z > fhi) {
        snprintf(why, why_size, "key '%s' allows '%s', more than its field holds (%.17g..%.17g)", k->name,
                 k->allowed ? k->allowed : "anything", flo, fhi);
        return false;
    }
    return true;
}

int tb_section_bind(const struct tb_section *s, const struct tb_binding *b, void *out, struct tb_err *err)
{
    for (; b->key; b++) {
        size_t i = 0;
        while (i < s->nkeys && strcmp(s->keys[i].name, b->key) != 0)
            i++;
        if (i == s->nkeys)
            return tb_err_set(err, TB_ERR_CONFIG, "internal error: [%s] has no key '%s' to bind", s->name, b->key);
        const struct tb_key *k = &s->keys[i];
        const struct tb_value *v = &s->values[i];
        if (!type_matches(b->type, k->type))
            return tb_err_set(err, TB_ERR_CONFIG, "internal error: [%s] %s is bound to a field of another type",
                              s->name, b->key);
        double x = k->type == TB_KEY_INT ? (double)v->v.i : k->type == TB_KEY_FLOAT ? v->v.f : (double)v->v.u;
        double lo, hi;
        field_bounds(b->type, &lo, &hi);
        if ((k->type == TB_KEY_INT || k->type == TB_KEY_FLOAT || k->type == TB_KEY_SIZE) && (x < lo || x > hi))
            return tb_err_set(err, TB_ERR_CONFIG,
                              "%s: [%s] %s = %s does not fit what trainbig holds it in (%.17g..%.17g)", s->origins[i],
                              s->name, b->key, v->text, lo, hi);
        char *field = (char *)out + b->offset;
        switch (b->type) {
        case TB_FIELD_INT: {
            const int iv = k->type == TB_KEY_ENUM ? v->v.e : (int)v->v.i;
            memcpy(field, &iv, sizeof iv);
            break;
        }
        case TB_FIELD_U32: {
            const uint32_t uv = (uint32_t)v->v.i;
            memcpy(field, &uv, sizeof uv);
            break;
        }
        case TB_FIELD_U64:
            memcpy(field, &v->v.u, sizeof v->v.u);
            break;
        case TB_FIELD_DOUBLE:
            memcpy(field, &v->v.f, sizeof v->v.f);
            break;
        case TB_FIELD_FLOAT: {
            const float fv = (float)v->v.f;
            memcpy(field, &fv, sizeof fv);
            break;
        }
        case TB_FIELD_BOOL:
            memcpy(field, &v->v.b, sizeof v->v.b);
            break;
        case TB_FIELD_TEXT: {
            const char *t = v->text ? v->text : "";
            memcpy(field, &t, sizeof t);
            break;
        }
        }
    }
    return TB_OK;
}

int tb_data_settings_read(const struct tb_section *ds, struct tb_data_settings *out, struct tb_err *err)
{
    memset(out, 0, sizeof *out);
    int rc = tb_section_bind(ds, tb_data_bindings, out, err);
    if (rc)
        return rc;
    out->skip_bad = out->on_bad_sample == 1;
    struct tb_augment *a = &out->aug;
    if (a->scale_min > a->scale_max)
        return tb_err_set(err, TB_ERR_CONFIG, "%s: [dataset] scale_min = %g is more than scale_max = %g (%s)",
                          tb_section_origin(ds, "scale_min"), a->scale_min, a->scale_max,
                          tb_section_origin(ds, "scale_max"));
    if (a->blur_sigma_min > a->blur_sigma_max)
        return tb_err_set(err, TB_ERR_CONFIG, "%s: [dataset] blur_sigma_min = %g is more than blur_sigma_max = %g (%s)",
                          tb_section_origin(ds, "blur_sigma_min"), a->blur_sigma_min, a->blur_sigma_max,
                          tb_section_origin(ds, "blur_sigma_max"));
    if (!out->augment) {
        /* Random crops only. */
        a->scale_min = a->scale_max = 1.0f;
        a->flip = false;
        a->jitter = 0.0f;
        a->blur_prob = 0.0f;
    }
    const char *vs = out->val_size;
    if (vs[0]) {
        unsigned w, h;
        char x, extra;
        if (sscanf(vs, "%u %c %u %c", &w, &x, &h, &extra) != 3 || (x != 'x' && x != 'X') || w < 1 || h < 1 ||
            w > 65536 || h > 65536)
            return tb_err_set(err, TB_ERR_CONFIG,
                              "%s: [dataset] val_size = '%s': expected WIDTHxHEIGHT, each 1..65536 (e.g. 1024x512), "
                              "or empty for images as decoded",
                              tb_section_origin(ds, "val_size"), vs);
        out->val_w = w;
        out->val_h = h;
    }
    return TB_OK;
}
