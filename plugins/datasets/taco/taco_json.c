/* datasets/taco: reading a COCO-style annotation file (images, annotations, categories)
 * with jansson into a struct taco_set, checking every element it uses. */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "taco.h"

/* The state of one read: the file, for messages, and the set being built. */
struct reader {
    const char *path;
    struct tb_err *err;
    struct taco_set *set;
    size_t cap_polys, cap_coords;
};

static int fail(struct reader *r, int status, const char *fmt, ...) TB_PRINTF(3, 4);
static int fail(struct reader *r, int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tb_err_set(r->err, status, "taco: %s: %s", r->path, msg);
}

static int nomem(struct reader *r)
{
    return fail(r, TB_ERR_NOMEM, "out of memory");
}

/* obj's member key, which must be an integer in lo..hi; what names obj in messages. */
static int get_int(struct reader *r, json_t *obj, const char *what, const char *key, int64_t lo, int64_t hi,
                   int64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return fail(r, TB_ERR_RUNTIME, "%s: no \"%s\"", what, key);
    if (!json_is_integer(v))
        return fail(r, TB_ERR_RUNTIME, "%s: \"%s\" is not an integer", what, key);
    const json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return fail(r, TB_ERR_RUNTIME, "%s: %s %" JSON_INTEGER_FORMAT " is not in %" PRId64 "..%" PRId64, what, key, x,
                    lo, hi);
    *out = (int64_t)x;
    return TB_OK;
}

static int get_string(struct reader *r, json_t *obj, const char *what, const char *key, const char **out)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return fail(r, TB_ERR_RUNTIME, "%s: no \"%s\"", what, key);
    if (!json_is_string(v))
        return fail(r, TB_ERR_RUNTIME, "%s: \"%s\" is not a string", what, key);
    *out = json_string_value(v);
    if (!**out)
        return fail(r, TB_ERR_RUNTIME, "%s: \"%s\" is empty", what, key);
    return TB_OK;
}

static int get_array(struct reader *r, json_t *obj, const char *what, const char *key, json_t **out)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return fail(r, TB_ERR_RUNTIME, "%s: no \"%s\"", what, key);
    if (!json_is_array(v))
        return fail(r, TB_ERR_RUNTIME, "%s: \"%s\" is not a list", what, key);
    *out = v;
    return TB_OK;
}

static char *dup(const char *s)
{
    const size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* ------------------------------------------------------------------ categories */

struct category {
    int64_t id;
    const char *name, *super; /* owned by the JSON document */
};

static int cmp_category(const void *a, const void *b)
{
    const struct category *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* Reads the categories and makes the class table; label_of[id] is the label of category
 * id (0 = no such category). */
/* The classes from the n categories cats (sorted by id): background, then categories by
 * id (label = id + 1, names of ids that are not categories are "unused <id>") or
 * supercategories by first appearance; label_of maps each category id to its label. */
static int make_classes(struct reader *r, const struct category *cats, size_t n, enum taco_classes mode,
                        uint8_t label_of[256])
{
    struct taco_set *set = r->set;
    int rc;
    const size_t nclasses = mode == TACO_CATEGORY ? (size_t)cats[n - 1].id + 2 : n + 1; /* at most */
    set->classes = calloc(nclasses, sizeof *set->classes);
    if (!set->classes)
        return nomem(r);
    set->nclasses = 1;
    set->classes[0].name = dup("background");
    rc = set->classes[0].name ? TB_OK : nomem(r);
    if (mode == TACO_CATEGORY) {
        for (size_t k = 1; k < nclasses && !rc; k++) {
            char unused[32];
            snprintf(unused, sizeof unused, "unused %zu", k - 1);
            set->classes[k].name = dup(unused);
            set->nclasses = k + 1;
            if (!set->classes[k].name)
                rc = nomem(r);
        }
        for (size_t i = 0; i < n && !rc; i++) {
            struct tb_class *c = &set->classes[cats[i].id + 1];
            free((char *)c->name);
            c->name = dup(cats[i].name);
            label_of[cats[i].id] = (uint8_t)(cats[i].id + 1);
            if (!c->name)
                rc = nomem(r);
        }
    } else {
        for (size_t i = 0; i < n && !rc; i++) {
            size_t k = 1;
            while (k < set->nclasses && strcmp(set->classes[k].name, cats[i].super) != 0)
                k++;
            if (k == set->nclasses) {
                set->classes[k].name = dup(cats[i].super);
                if (!set->classes[k].name) {
                    rc = nomem(r);
                    break;
                }
                set->nclasses++;
            }
            label_of[cats[i].id] = (uint8_t)k;
        }
    }
    for (size_t k = 0; k < set->nclasses; k++)
        taco_palette(k, set->classes[k].color);
    return rc;
}

static int read_categories(struct reader *r, json_t *root, enum taco_classes mode, uint8_t label_of[256])
{
    json_t *list;
    int rc = get_array(r, root, "top level", "categories", &list);
    if (rc)
        return rc;
    const size_t n = json_array_size(list);
    if (n == 0)
        return fail(r, TB_ERR_RUNTIME, "\"categories\" is empty");
    if (n > TACO_LABEL_MAX)
        return fail(r, TB_ERR_RUNTIME, "%zu categories, at most %d are supported", n, TACO_LABEL_MAX);
    struct category *cats = calloc(n, sizeof *cats);
    if (!cats)
        return nomem(r);
    char what[64];
    for (size_t i = 0; i < n && !rc; i++) {
        json_t *c = json_array_get(list, i);
        snprintf(what, sizeof what, "categories[%zu]", i);
        if (!json_is_object(c)) {
            rc = fail(r, TB_ERR_RUNTIME, "%s is not an object", what);
            break;
        }
        rc = get_int(r, c, what, "id", 0, TACO_LABEL_MAX - 1, &cats[i].id);
        if (rc)
            break;
        snprintf(what, sizeof what, "category %" PRId64, cats[i].id);
        rc = get_string(r, c, what, "name", &cats[i].name);
        if (!rc && mode == TACO_SUPERCATEGORY)
            rc = get_string(r, c, what, "supercategory", &cats[i].super);
    }
    if (!rc) {
        qsort(cats, n, sizeof *cats, cmp_category);
        for (size_t i = 1; i < n && !rc; i++)
            if (cats[i].id == cats[i - 1].id)
                rc = fail(r, TB_ERR_RUNTIME, "category %" PRId64 " is defined twice", cats[i].id);
    }
    if (rc) {
        free(cats);
        return rc;
    }

    rc = make_classes(r, cats, n, mode, label_of);
    free(cats);
    return rc;
}

/* ------------------------------------------------------------------ images */

static int cmp_image(const void *a, const void *b)
{
    const struct taco_image *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

static int read_images(struct reader *r, json_t *root)
{
    json_t *list;
    int rc = get_array(r, root, "top level", "images", &list);
    if (rc)
        return rc;
    struct taco_set *set = r->set;
    const size_t n = json_array_size(list);
    set->images = calloc(n ? n : 1, sizeof *set->images);
    if (!set->images)
        return nomem(r);
    char what[64];
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(list, i);
        struct taco_image *im = &set->images[i];
        snprintf(what, sizeof what, "images[%zu]", i);
        if (!json_is_object(o))
            return fail(r, TB_ERR_RUNTIME, "%s is not an object", what);
        int64_t w, h;
        const char *file;
        if ((rc = get_int(r, o, what, "id", INT64_MIN, INT64_MAX, &im->id)))
            return rc;
        snprintf(what, sizeof what, "image %" PRId64, im->id);
        if ((rc = get_int(r, o, what, "width", 1, 1 << 16, &w)) ||
            (rc = get_int(r, o, what, "height", 1, 1 << 16, &h)) || (rc = get_string(r, o, what, "file_name", &file)))
            return rc;
        im->width = (uint32_t)w;
        im->height = (uint32_t)h;
        if (!(im->file = dup(file)))
            return nomem(r);
        set->nimages = i + 1;
    }
    qsort(set->images, n, sizeof *set->images, cmp_image);
    for (size_t i = 1; i < n; i++)
        if (set->images[i].id == set->images[i - 1].id)
            return fail(r, TB_ERR_RUNTIME, "image %" PRId64 " is defined twice", set->images[i].id);
    return TB_OK;
}

static struct taco_image *find_image(struct taco_set *set, int64_t id)
{
    const struct taco_image key = { .id = id };
    return bsearch(&key, set->images, set->nimages, sizeof key, cmp_image);
}

/* ------------------------------------------------------------------ annotations */

static int add_polygon(struct reader *r, json_t *poly, const char *what, size_t index)
{
    struct taco_set *set = r->set;
    if (!json_is_array(poly))
        return fail(r, TB_ERR_RUNTIME, "%s: polygon %zu is not a list of coordinates", what, index);
    const size_t n = json_array_size(poly);
    if (n % 2)
        return fail(r, TB_ERR_RUNTIME, "%s: polygon %zu has an odd number of coordinates (%zu)", what, index, n);
    if (n < 6)
        return fail(r, TB_ERR_RUNTIME, "%s: polygon %zu has %zu points, at least 3 are needed", what, index, n / 2);
    if (set->npolys == r->cap_polys) {
        const size_t cap = r->cap_polys ? 2 * r->cap_polys : 64;
        struct taco_poly *p = realloc(set->polys, cap * sizeof *p);
        if (!p)
            return nomem(r);
        set->polys = p;
        r->cap_polys = cap;
    }
    if (set->ncoords + n > r->cap_coords) {
        size_t cap = r->cap_coords ? 2 * r->cap_coords : 1024;
        while (cap < set->ncoords + n)
            cap *= 2;
        double *c = realloc(set->coords, cap * sizeof *c);
        if (!c)
            return nomem(r);
        set->coords = c;
        r->cap_coords = cap;
    }
    for (size_t k = 0; k < n; k++) {
        json_t *v = json_array_get(poly, k);
        if (!json_is_number(v))
            return fail(r, TB_ERR_RUNTIME, "%s: polygon %zu: coordinate %zu is not a number", what, index, k);
        const double x = json_number_value(v);
        if (!(fabs(x) <= TACO_COORD_MAX))
            return fail(r, TB_ERR_RUNTIME, "%s: polygon %zu: coordinate %zu (%g) is out of range", what, index, k, x);
        set->coords[set->ncoords + k] = x;
    }
    set->polys[set->npolys].first = set->ncoords / 2;
    set->polys[set->npolys].npoints = n / 2;
    set->npolys++;
    set->ncoords += n;
    if (n / 2 > set->max_points)
        set->max_points = n / 2;
    return TB_OK;
}

/* Painting order: by image, then largest area first, then by id. */
static int cmp_ann(const void *a, const void *b)
{
    const struct taco_ann *x = a, *y = b;
    if (x->image != y->image)
        return x->image < y->image ? -1 : 1;
    if (x->area != y->area)
        return x->area > y->area ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int read_annotations(struct reader *r, json_t *root, const uint8_t label_of[256])
{
    json_t *list;
    int rc = get_array(r, root, "top level", "annotations", &list);
    if (rc)
        return rc;
    struct taco_set *set = r->set;
    const size_t n = json_array_size(list);
    set->anns = calloc(n ? n : 1, sizeof *set->anns);
    if (!set->anns)
        return nomem(r);
    char what[64];
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(list, i);
        struct taco_ann *a = &set->anns[i];
        snprintf(what, sizeof what, "annotations[%zu]", i);
        if (!json_is_object(o))
            return fail(r, TB_ERR_RUNTIME, "%s is not an object", what);
        int64_t image_id, category_id;
        if ((rc = get_int(r, o, what, "id", INT64_MIN, INT64_MAX, &a->id)))
            return rc;
        snprintf(what, sizeof what, "annotation %" PRId64, a->id);
        if ((rc = get_int(r, o, what, "image_id", INT64_MIN, INT64_MAX, &image_id)) ||
            (rc = get_int(r, o, what, "category_id", INT64_MIN, INT64_MAX, &category_id)))
            return rc;
        const struct taco_image *im = find_image(set, image_id);
        if (!im)
            return fail(r, TB_ERR_RUNTIME, "%s: image_id %" PRId64 " is not an image", what, image_id);
        a->image = (size_t)(im - set->images);
        if (category_id < 0 || category_id > 255 || !label_of[category_id])
            return fail(r, TB_ERR_RUNTIME, "%s: category_id %" PRId64 " is not a category", what, category_id);
        a->label = label_of[category_id];
        json_t *area = json_object_get(o, "area");
        if (!area)
            return fail(r, TB_ERR_RUNTIME, "%s: no \"area\"", what);
        if (!json_is_number(area))
            return fail(r, TB_ERR_RUNTIME, "%s: \"area\" is not a number", what);
        a->area = json_number_value(area);
        json_t *seg = json_object_get(o, "segmentation");
        if (!seg)
            return fail(r, TB_ERR_RUNTIME, "%s: no \"segmentation\"", what);
        if (!json_is_array(seg))
            return fail(r, TB_ERR_RUNTIME, "%s: \"segmentation\" is not a list of polygons (RLE is not supported)",
                        what);
        a->first_poly = set->npolys;
        for (size_t k = 0; k < json_array_size(seg); k++)
            if ((rc = add_polygon(r, json_array_get(seg, k), what, k)))
                return rc;
        a->npoly = set->npolys - a->first_poly;
        set->nanns = i + 1;
    }
    qsort(set->anns, set->nanns, sizeof *set->anns, cmp_ann);
    for (size_t i = 0; i < set->nanns; i++) {
        struct taco_image *im = &set->images[set->anns[i].image];
        if (im->nann++ == 0)
            im->first_ann = i;
    }
    return TB_OK;
}

/* ------------------------------------------------------------------ the file */

int taco_read(const char *path, enum taco_classes mode, struct taco_set *set, struct tb_err *err)
{
    memset(set, 0, sizeof *set);
    struct reader r = { path, err, set, 0, 0 };
    json_error_t jerr;
    /* Opened here, not by name in jansson: a FIFO or a device is refused, not read. */
    FILE *f = tb_fopen_regular(path, "the annotations", TB_ERR_CONFIG, err);
    if (!f)
        return err->status;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
    fclose(f);
    if (!root)
        return fail(&r, TB_ERR_RUNTIME, "not valid JSON: line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
    int rc = TB_OK;
    uint8_t label_of[256] = { 0 };
    if (!json_is_object(root))
        rc = fail(&r, TB_ERR_RUNTIME, "the top level is not an object");
    if (!rc)
        rc = read_categories(&r, root, mode, label_of);
    if (!rc)
        rc = read_images(&r, root);
    if (!rc)
        rc = read_annotations(&r, root, label_of);
    json_decref(root);
    if (rc)
        taco_set_free(set);
    return rc;
}

void taco_set_free(struct taco_set *set)
{
    for (size_t i = 0; i < set->nimages; i++)
        free(set->images[i].file);
    free(set->images);
    free(set->anns);
    free(set->polys);
    free(set->coords);
    for (size_t k = 0; k < set->nclasses; k++)
        free((char *)set->classes[k].name);
    free(set->classes);
    memset(set, 0, sizeof *set);
}
