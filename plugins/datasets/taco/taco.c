/* datasets/taco: TACO, Trash Annotations in Context (http://tacodataset.org): photographs
 * of litter with COCO-style polygon annotations in 60 categories and 28 supercategories.
 *
 * open() reads annotations.json (see taco_json.c), keeps the images of the split asked
 * for, and load() decodes one photograph through libtrainbig (EXIF orientation applied)
 * and rasterises its polygons into the label map (taco_raster.c): background 0, larger
 * objects first so that small ones lying on them stay visible.
 *
 * TACO has no official split: the images are shuffled with split_seed and cut by
 * split_ratios, unless root holds annotations_train.json, annotations_val.json and
 * annotations_test.json, in which case each split reads its own file. */
#define _DEFAULT_SOURCE /* realpath */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <trainbig/image.h>
#include <trainbig/trainbig.h>

#include <trainbig/file.h>

#include "taco.h"

static const struct tb_key taco_keys[] = {
    { "root", TB_KEY_PATH, NULL, NULL, "directory holding annotations.json and the batch_*/ directories" },
    { "annotations", TB_KEY_STRING, "annotations.json", NULL, "annotation file, relative to root" },
    { "classes", TB_KEY_ENUM, "supercategory", "category|supercategory",
      "labels: background + 60 categories, or background + 28 supercategories" },
    { "split_seed", TB_KEY_INT, "0", "0..", "shuffles the images before they are cut into splits" },
    { "split_ratios", TB_KEY_INT_LIST, "80,10,10", "[3] 0..1000000", "shares of train, val and test" },
    { "allow_outside_root", TB_KEY_BOOL, "no", NULL,
      "read images whose file_name or symbolic links lead outside root (no: such an image is refused)" },
    TB_KEYS_END,
};

static const char *const split_names[3] = { "train", "val", "test" };

struct taco {
    const struct tb_section *cfg; /* the core's, valid until the run ends */
    char *root;
    char *real_root; /* root resolved (realpath), without allow_outside_root */
    bool outside_ok; /* allow_outside_root */
    char *file;      /* the annotation file read, for messages */
    struct taco_set set;
    size_t count;
    size_t *samples; /* indices into set.images, by image id */
};

/* "dir/name" (or name alone when it is absolute), allocated. */
static char *join(const char *dir, const char *name)
{
    if (name[0] == '/')
        dir = "";
    const size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s%s%s", dir, *dir ? "/" : "", name);
    return p;
}

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* split_ratios: three integers in 0..1000000 (the key table's), not all zero. */
static int read_ratios(const struct tb_section *cfg, uint64_t ratios[3], struct tb_err *err)
{
    const int64_t *items;
    const size_t n = tb_section_ints(cfg, "split_ratios", &items);
    for (size_t k = 0; k < 3; k++)
        ratios[k] = k < n ? (uint64_t)items[k] : 0;
    if (ratios[0] + ratios[1] + ratios[2] == 0)
        return tb_err_set(err, TB_ERR_CONFIG, "[%s] split_ratios (%s): all three are 0; allowed: shares, not all 0",
                          tb_section_name(cfg), tb_section_origin(cfg, "split_ratios"));
    return TB_OK;
}

/* splitmix64 at z, leaving z as it was. */
static uint64_t mix(uint64_t z)
{
    return tb_splitmix64(&z);
}

static int cmp_size(const void *a, const void *b)
{
    const size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* Picks the images of split `which`: the images (sorted by id) are shuffled by a
 * Fisher-Yates pass driven by the seed and cut at n * r0 / sum and n * (r0 + r1) / sum.
 * The split's images are then put back in id order. */
static int pick_split(struct taco *d, int which, uint64_t seed, const uint64_t ratios[3], struct tb_err *err)
{
    const size_t n = d->set.nimages;
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    if (!order)
        return tb_err_set(err, TB_ERR_NOMEM, "taco: out of memory");
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    uint64_t state = mix(seed ^ 0x7461636fu); /* "taco" */
    for (size_t i = n; i > 1; i--) {
        state = mix(state);
        const size_t j = (size_t)(state % i);
        const size_t t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
    const uint64_t sum = ratios[0] + ratios[1] + ratios[2];
    const size_t cut1 = (size_t)((uint64_t)n * ratios[0] / sum),
                 cut2 = (size_t)((uint64_t)n * (ratios[0] + ratios[1]) / sum);
    const size_t lo = which == 0 ? 0 : which == 1 ? cut1 : cut2, hi = which == 0 ? cut1 : which == 1 ? cut2 : n;
    memmove(order, order + lo, (hi - lo) * sizeof *order);
    qsort(order, hi - lo, sizeof *order, cmp_size);
    d->samples = order;
    d->count = hi - lo;
    return TB_OK;
}

static void taco_close(void *ctx)
{
    struct taco *d = ctx;
    if (!d)
        return;
    taco_set_free(&d->set);
    free(d->samples);
    free(d->root);
    free(d->real_root);
    free(d->file);
    free(d);
}

/* An incomplete download is said at open, with how much is missing, rather than at the
 * first step that meets a missing file (which still fails it, or skips it with [dataset]
 * on_bad_sample = skip). */
static void warn_missing(const struct taco *d, const char *split)
{
    size_t missing = 0;
    const char *first = NULL;
    struct stat st;
    for (size_t i = 0; i < d->count; i++) {
        const char *name = d->set.images[d->samples[i]].file;
        char *path = join(d->root, name);
        if (path && stat(path, &st) != 0 && errno == ENOENT && !missing++)
            first = name;
        free(path);
    }
    if (missing)
        tb_plog(TB_LOG_WARN,
                "split %s: %zu of its %zu images are missing under %s (the first: %s): an incomplete download? "
                "Training stops at the first one, or skips them with [dataset] on_bad_sample = skip",
                split, missing, d->count, d->root, first);
}

/* Whether name leads out of the directory it is joined to by its own text: absolute,
 * or with a ".." component. */
static bool leaves_root(const char *name)
{
    if (name[0] == '/')
        return true;
    for (const char *p = name; (p = strstr(p, "..")); p += 2)
        if ((p == name || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
            return true;
    return false;
}

/* Without allow_outside_root, no file_name may leave root by its text (links that do are
 * found when the image is read). */
static int check_names(const struct taco *d, const struct tb_section *cfg, struct tb_err *err)
{
    for (size_t i = 0; i < d->set.nimages; i++) {
        const struct taco_image *im = &d->set.images[i];
        if (leaves_root(im->file))
            return tb_err_set(err, TB_ERR_CONFIG,
                              "taco: %s: image %" PRId64 ": file_name '%s' leaves root %s (an absolute path or a "
                              "'..' component): give it relative to root, or set [%s] allow_outside_root = yes",
                              d->file, im->id, im->file, d->root, tb_section_name(cfg));
    }
    return TB_OK;
}

/* The annotations file of split `which` into d->file: the user's annotations_SPLIT.json
 * when all three are in the root (*given), else [dataset] annotations, to be split. Two of
 * the three is an error naming the missing one. */
static int annotations_file(struct taco *d, const struct tb_section *cfg, int which, bool *given, struct tb_err *err)
{
    int rc = TB_OK;
    char *split_files[3] = { NULL, NULL, NULL };
    int present = 0;
    for (int k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "annotations_%s.json", split_names[k]);
        split_files[k] = join(d->root, name);
        if (!split_files[k]) {
            for (int m = 0; m < k; m++)
                free(split_files[m]);
            return tb_err_set(err, TB_ERR_NOMEM, "taco: out of memory");
        }
        present += is_file(split_files[k]);
    }
    if (present > 0 && present < 3) {
        int missing = 0;
        while (is_file(split_files[missing]))
            missing++;
        rc = tb_err_set(err, TB_ERR_CONFIG,
                        "taco: %s is missing: give annotations_train.json, annotations_val.json and "
                        "annotations_test.json together, or none of them to split %s",
                        split_files[missing], tb_section_string(cfg, "annotations"));
    } else if (present == 3) {
        d->file = split_files[which];
        split_files[which] = NULL;
    } else
        d->file = join(d->root, tb_section_string(cfg, "annotations"));
    for (int k = 0; k < 3; k++)
        free(split_files[k]);
    *given = present == 3;
    if (!rc && !d->file)
        rc = tb_err_set(err, TB_ERR_NOMEM, "taco: out of memory");
    return rc;
}

static int taco_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    struct taco *d = calloc(1, sizeof *d);
    if (!d)
        return tb_err_set(err, TB_ERR_NOMEM, "taco: out of memory");
    d->cfg = cfg;
    *ctx = d;
    return TB_OK;
}

/* On failure what was made stays in d, for destroy. */
static int taco_open_split(void *ctx, const char *split, struct tb_err *err)
{
    struct taco *d = ctx;
    const struct tb_section *cfg = d->cfg;
    int which = -1;
    for (int k = 0; k < 3; k++)
        if (strcmp(split, split_names[k]) == 0)
            which = k;
    if (which < 0)
        return tb_err_set(err, TB_ERR_CONFIG, "taco: no split '%s' (train, val and test exist)", split);
    uint64_t ratios[3];
    int rc = read_ratios(cfg, ratios, err);
    if (rc)
        return rc;
    if (!(d->root = strdup(tb_section_string(cfg, "root"))))
        return tb_err_set(err, TB_ERR_NOMEM, "taco: out of memory");
    struct stat st;
    if (stat(d->root, &st) != 0 || !S_ISDIR(st.st_mode))
        return tb_err_set(err, TB_ERR_CONFIG, "taco: root %s (%s) is not a directory", d->root,
                          tb_section_origin(cfg, "root"));

    bool given = false;
    rc = annotations_file(d, cfg, which, &given, err);
    if (rc)
        return rc;

    const enum taco_classes mode = tb_section_enum(cfg, "classes") == 0 ? TACO_CATEGORY : TACO_SUPERCATEGORY;
    rc = taco_read(d->file, mode, &d->set, err);
    if (rc)
        return rc;
    d->outside_ok = tb_section_bool(cfg, "allow_outside_root");
    if (!d->outside_ok && !(d->real_root = realpath(d->root, NULL)))
        return tb_err_set(err, TB_ERR_CONFIG, "taco: root %s (%s): cannot resolve it: %s", d->root,
                          tb_section_origin(cfg, "root"), strerror(errno));
    if (!d->outside_ok && (rc = check_names(d, cfg, err)))
        return rc;
    if (given) {
        d->samples = malloc((d->set.nimages ? d->set.nimages : 1) * sizeof *d->samples);
        if (!d->samples)
            return tb_err_set(err, TB_ERR_NOMEM, "taco: out of memory");
        for (size_t i = 0; i < d->set.nimages; i++)
            d->samples[i] = i;
        d->count = d->set.nimages;
        tb_plog(TB_LOG_INFO, "split %s: %zu images from the user-provided %s (split_seed and split_ratios unused)",
                split, d->count, d->file);
    } else {
        rc = pick_split(d, which, (uint64_t)tb_section_int(cfg, "split_seed"), ratios, err);
        if (rc)
            return rc;
        tb_plog(TB_LOG_INFO,
                "split %s: %zu of the %zu images of %s (split_seed %" PRId64 ", split_ratios %" PRIu64 ",%" PRIu64
                ",%" PRIu64 ")",
                split, d->count, d->set.nimages, d->file, tb_section_int(cfg, "split_seed"), ratios[0], ratios[1],
                ratios[2]);
    }
    warn_missing(d, split);
    return TB_OK;
}

static size_t taco_count(void *ctx)
{
    return ((struct taco *)ctx)->count;
}

static const char *taco_name(void *ctx, size_t i)
{
    const struct taco *d = ctx;
    return d->set.images[d->samples[i]].file;
}

static int taco_load(void *ctx, size_t i, struct tb_sample *out, struct tb_err *err)
{
    const struct taco *d = ctx;
    const struct taco_set *set = &d->set;
    const struct taco_image *im = &set->images[d->samples[i]];
    char *path = join(d->root, im->file);
    if (!path)
        return tb_err_set(err, TB_ERR_NOMEM, "taco: out of memory");
    bool inside = true;
    /* what the file is first: a link to /dev/zero is refused as a device */
    int rc = d->outside_ok ? TB_OK : tb_check_regular(path, "the image", TB_ERR_RUNTIME, err);
    if (!rc && !d->outside_ok)
        rc = tb_path_inside(d->real_root, path, "the image", TB_ERR_RUNTIME, &inside, err);
    if (!rc && !inside)
        rc = tb_err_set(err, TB_ERR_RUNTIME,
                        "%s: a symbolic link leads outside root %s: refused (allow_outside_root = yes reads it)", path,
                        d->root);
    if (!rc)
        rc = tb_image_read_rgb(path, out, err);
    if (rc) {
        free(path);
        return tb_err_prefix(err, "taco");
    }
    if (out->width != im->width || out->height != im->height) {
        rc = tb_err_set(err, TB_ERR_RUNTIME,
                        "taco: %s: the image is %" PRIu32 "x%" PRIu32 " (after EXIF orientation) but %s says %" PRIu32
                        "x%" PRIu32 " (image %" PRId64 ")",
                        path, out->width, out->height, d->file, im->width, im->height, im->id);
        free(path);
        return rc;
    }
    free(path);
    memset(out->label, 0, (size_t)out->width * out->height);
    double *xs = malloc((set->max_points ? set->max_points : 1) * sizeof *xs);
    if (!xs)
        return tb_err_set(err, TB_ERR_NOMEM, "taco: out of memory");
    for (size_t a = im->first_ann; a < im->first_ann + im->nann; a++) {
        const struct taco_ann *ann = &set->anns[a];
        for (size_t p = ann->first_poly; p < ann->first_poly + ann->npoly; p++)
            taco_fill_polygon(out->label, out->width, out->height, set->coords + 2 * set->polys[p].first,
                              set->polys[p].npoints, ann->label, xs);
    }
    free(xs);
    return TB_OK;
}

static size_t taco_classes(void *ctx, const struct tb_class **classes)
{
    const struct taco *d = ctx;
    *classes = d->set.classes;
    return d->set.nclasses;
}

static const struct tb_dataset_ops taco_ops = {
    .head = { .create = taco_create, .destroy = taco_close },
    .open_split = taco_open_split,
    .count = taco_count,
    .sample_name = taco_name,
    .load = taco_load,
    .classes = taco_classes,
};

TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
    .abi_major = TB_ABI_MAJOR,
    .abi_minor = TB_ABI_MINOR,
    .kind = TB_KIND_DATASET,
    .name = "taco",
    .version = TB_VERSION,
    .description = "TACO litter photographs, COCO-style polygons rasterised to 60 categories or 28 supercategories",
    .keys = taco_keys,
    .ops.dataset = &taco_ops,
};
