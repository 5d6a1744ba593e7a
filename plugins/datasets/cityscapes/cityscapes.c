/* datasets/cityscapes: the Cityscapes dataset (Cordts et al., CVPR 2016) as it unpacks
 * from the official zips.
 *
 * Images are {root}/leftImg8bit/{split}/{city}/{city}_{seq}_{frame}_leftImg8bit.png, their
 * fine annotations {root}/gtFine/{split}/{city}/{city}_{seq}_{frame}_gtFine_labelIds.png;
 * either tree may also sit inside the wrapper directory its zip creates
 * (leftImg8bit_trainvaltest/, gtFine_trainvaltest/). With coarse = yes the labels come
 * from {root}/gtCoarse/{split}/{city}/{city}_{seq}_{frame}_gtCoarse_labelIds.png instead,
 * and the train split also takes the images of leftImg8bit/train_extra/ (or
 * leftImg8bit_trainextra/leftImg8bit/train_extra/), labelled from gtCoarse/train_extra/.
 *
 * The label ids of *_labelIds.png are mapped to the 19 training classes with the official
 * table (cityscapesScripts labels.py); every other id becomes 255, ignored. The
 * *_labelTrainIds.png files some scripts write are never read.
 *
 * open() lists the directories once, sorts the samples by city and then file name, and
 * checks that every image has its label file; load() only reads ctx, so any number of
 * threads may load at once. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <trainbig/file.h>
#include <trainbig/image.h>
#include <trainbig/trainbig.h>

#include "plugins/datasets/cityscapes_classes.h"

enum { NCLASSES = (int)TB_CITYSCAPES_CLASSES, IGNORE = 255 };

/* The label ids (labels.py "id") that are training classes, indexed by trainId. */
static const uint8_t class_ids[NCLASSES] = {
    7, 8, 11, 12, 13, 17, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 31, 32, 33,
};

static const struct tb_key cityscapes_keys[] = {
    { "root", TB_KEY_PATH, NULL, NULL,
      "directory holding leftImg8bit/ and gtFine/ (or the zips' wrapper directories)" },
    { "cities", TB_KEY_LIST, "", NULL, "only these cities (e.g. aachen,bremen); empty = all" },
    { "coarse", TB_KEY_BOOL, "no", NULL, "labels from gtCoarse/; train adds leftImg8bit/train_extra/" },
    { "allow_outside_root", TB_KEY_BOOL, "no", NULL,
      "read images and labels whose symbolic links lead outside root (no: such a sample is bad)" },
    TB_KEYS_END,
};

struct sample {
    char *image, *label; /* full paths */
    const char *city;    /* into cities[] of the open call: for sorting only */
    const char *file;    /* the image's file name, inside image */
    int part;            /* 0: the split's own directory, 1: train_extra */
};

struct cityscapes {
    const struct tb_section *cfg; /* the core's, valid until the run ends */
    char *root;                   /* resolved (realpath), for allow_outside_root = no; NULL with yes */
    size_t count;
    struct sample *samples;
    uint8_t lut[256]; /* label id -> trainId or IGNORE */
};

/* ------------------------------------------------------------------ files */

/* A formatted string on the heap, or NULL when memory runs out. */
static char *strf(const char *fmt, ...) TB_PRINTF(1, 2);
static char *strf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Whether path names anything (symbolic links followed). A sample whose file is not a
 * regular file (a FIFO, a device, a directory) is kept, so that reading it says what it
 * is instead of the split silently holding one image fewer. */
static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Whether there is an entry named path, a dangling or looping link included: a sample
 * whose image is one is listed, and is bad when it is read, instead of dropped unseen. */
static bool entry_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

struct names {
    char **v;
    size_t n, cap;
};

static void names_free(struct names *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    *l = (struct names){ 0 };
}

static bool names_push(struct names *l, const char *s)
{
    if (l->n == l->cap) {
        const size_t cap = l->cap ? 2 * l->cap : 16;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return false;
        l->v = v;
        l->cap = cap;
    }
    const size_t len = strlen(s);
    if (!(l->v[l->n] = malloc(len + 1)))
        return false;
    memcpy(l->v[l->n++], s, len + 1);
    return true;
}

static bool names_has(const struct names *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], s) == 0)
            return true;
    return false;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), m = strlen(suffix);
    return n > m && strcmp(s + n - m, suffix) == 0;
}

/* The entries of dir, sorted: its subdirectories (dirs) or its entries whose name ends in
 * suffix (files; see exists()). */
static int list_dir(const char *dir, bool dirs, const char *suffix, struct names *out, struct tb_err *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return tb_err_set(err, TB_ERR_RUNTIME, "cityscapes: cannot list %s: %s", dir, strerror(errno));
    int rc = TB_OK;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        if (!dirs && !ends_with(e->d_name, suffix))
            continue;
        char *path = strf("%s/%s", dir, e->d_name);
        if (!path) {
            rc = tb_err_set(err, TB_ERR_NOMEM, "cityscapes: out of memory listing %s", dir);
            break;
        }
        const bool keep = dirs ? is_dir(path) : entry_exists(path);
        free(path);
        if (keep && !names_push(out, e->d_name)) {
            rc = tb_err_set(err, TB_ERR_NOMEM, "cityscapes: out of memory listing %s", dir);
            break;
        }
    }
    closedir(d);
    if (!rc && out->n > 1)
        qsort(out->v, out->n, sizeof *out->v, cmp_str);
    return rc;
}

/* The first of root/<candidate>/<split> that is a directory, as root/<candidate> in *base;
 * an error naming root/<candidates[0]>/<split> and the alternatives when none is. */
static int find_tree(const char *root, const char *const *candidates, size_t ncand, const char *split, const char *what,
                     char **base, struct tb_err *err)
{
    for (size_t k = 0; k < ncand; k++) {
        char *dir = strf("%s/%s/%s", root, candidates[k], split);
        if (!dir)
            return tb_err_set(err, TB_ERR_NOMEM, "cityscapes: out of memory");
        const bool found = is_dir(dir);
        free(dir);
        if (found) {
            if (!(*base = strf("%s/%s", root, candidates[k])))
                return tb_err_set(err, TB_ERR_NOMEM, "cityscapes: out of memory");
            return TB_OK;
        }
    }
    char also[512] = "";
    size_t used = 0;
    for (size_t k = 1; k < ncand && used < sizeof also; k++) {
        const int n = snprintf(also + used, sizeof also - used, "%s%s/%s/%s", k > 1 ? " or " : " (or ", root,
                               candidates[k], split);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    if (ncand > 1 && used < sizeof also - 1)
        snprintf(also + used, sizeof also - used, ", as the official zip unpacks)");
    return tb_err_set(err, TB_ERR_RUNTIME,
                      "cityscapes: no directory %s/%s/%s%s: expected %s there, one folder per city", root,
                      candidates[0], split, also, what);
}

/* ------------------------------------------------------------------ open */

/* One directory of images to list: <images>/<subset>/<city>/, labels in
 * <labels>/<subset>/<city>/ named <stem><label_suffix>. */
struct part {
    char *images, *labels; /* the trees' bases */
    const char *subset;    /* "train", "train_extra", ... */
    struct names cities;
};

struct scan {
    struct sample *v;
    size_t n, cap;
    size_t missing;                  /* images without a label file */
    char *first_image, *first_label; /* the first of them */
};

static int add_city(struct scan *sc, const struct part *p, int part, const char *city, const char *label_suffix,
                    struct tb_err *err)
{
    static const char image_suffix[] = "_leftImg8bit.png";
    char *dir = strf("%s/%s/%s", p->images, p->subset, city);
    if (!dir)
        return tb_err_set(err, TB_ERR_NOMEM, "cityscapes: out of memory");
    struct names files = { 0 };
    int rc = list_dir(dir, false, image_suffix, &files, err);
    for (size_t i = 0; !rc && i < files.n; i++) {
        const char *name = files.v[i];
        const int stem = (int)(strlen(name) - (sizeof image_suffix - 1));
        char *image = strf("%s/%s", dir, name);
        char *label = strf("%s/%s/%s/%.*s%s", p->labels, p->subset, city, stem, name, label_suffix);
        if (!image || !label) {
            free(image);
            free(label);
            rc = tb_err_set(err, TB_ERR_NOMEM, "cityscapes: out of memory");
            break;
        }
        if (!exists(label)) {
            if (!sc->missing++) {
                sc->first_image = image;
                sc->first_label = label;
            } else {
                free(image);
                free(label);
            }
            continue;
        }
        if (sc->n == sc->cap) {
            const size_t cap = sc->cap ? 2 * sc->cap : 256;
            struct sample *v = realloc(sc->v, cap * sizeof *v);
            if (!v) {
                free(image);
                free(label);
                rc = tb_err_set(err, TB_ERR_NOMEM, "cityscapes: out of memory for %zu samples", cap);
                break;
            }
            sc->v = v;
            sc->cap = cap;
        }
        sc->v[sc->n++] = (struct sample){ image, label, city, image + strlen(dir) + 1, part };
    }
    names_free(&files);
    free(dir);
    return rc;
}

static int cmp_sample(const void *pa, const void *pb)
{
    const struct sample *a = pa, *b = pb;
    int c = strcmp(a->city, b->city);
    if (!c)
        c = strcmp(a->file, b->file);
    if (!c)
        c = (a->part > b->part) - (a->part < b->part);
    return c;
}

static void free_samples(struct sample *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].image);
        free(v[i].label);
    }
    free(v);
}

static void cityscapes_close(void *ctx)
{
    struct cityscapes *d = ctx;
    if (!d)
        return;
    free_samples(d->samples, d->count);
    free(d->root);
    free(d);
}

/* The names of l into buf, separated by ", "; cut with "..." when they do not fit. */
static void join_names(const struct names *l, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < l->n && used + 1 < size; i++) {
        const int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", l->v[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    if (used >= size && size > 4)
        memcpy(buf + size - 4, "...", 4);
}

/* The folders of each part (the split; and, for coarse training, train_extra): its
 * images' and labels' trees under root and its cities, which all_cities collects. */
static int find_parts(const char *root, bool coarse, struct part *parts, int nparts, struct names *all_cities,
                      struct tb_err *err)
{
    static const char *const fine_images[] = { "leftImg8bit", "leftImg8bit_trainvaltest/leftImg8bit" };
    static const char *const extra_images[] = { "leftImg8bit", "leftImg8bit_trainextra/leftImg8bit" };
    static const char *const fine_labels[] = { "gtFine", "gtFine_trainvaltest/gtFine" };
    static const char *const coarse_labels[] = { "gtCoarse" };
    int rc = TB_OK;
    for (int k = 0; !rc && k < nparts; k++) {
        struct part *p = &parts[k];
        rc = find_tree(root, k ? extra_images : fine_images, 2, p->subset, "the images (*_leftImg8bit.png)", &p->images,
                       err);
        if (!rc && coarse)
            rc = find_tree(root, coarse_labels, 1, p->subset, "the coarse labels (*_gtCoarse_labelIds.png)", &p->labels,
                           err);
        else if (!rc)
            rc = find_tree(root, fine_labels, 2, p->subset, "the labels (*_gtFine_labelIds.png)", &p->labels, err);
        char *dir = rc ? NULL : strf("%s/%s", p->images, p->subset);
        if (!rc && !dir)
            rc = tb_err_set(err, TB_ERR_NOMEM, "cityscapes: out of memory");
        if (!rc)
            rc = list_dir(dir, true, NULL, &p->cities, err);
        free(dir);
        for (size_t c = 0; !rc && c < p->cities.n; c++)
            if (!names_has(all_cities, p->cities.v[c]) && !names_push(all_cities, p->cities.v[c]))
                rc = tb_err_set(err, TB_ERR_NOMEM, "cityscapes: out of memory");
    }
    return rc;
}

/* Every city [dataset] cities asks for must exist: an error names it and those found. */
static int check_cities(struct names *all_cities, const char *const *want, size_t nwant, const char *split,
                        const char *root, struct tb_err *err)
{
    for (size_t w = 0; w < nwant; w++)
        if (!names_has(all_cities, want[w])) {
            char found[1024];
            if (all_cities->n > 1)
                qsort(all_cities->v, all_cities->n, sizeof *all_cities->v, cmp_str);
            join_names(all_cities, found, sizeof found);
            return tb_err_set(err, TB_ERR_CONFIG, "cityscapes: cities: no city '%s' in split '%s' under %s (%s: %s)",
                              want[w], split, root, all_cities->n ? "cities found" : "no cities found",
                              all_cities->n ? found : "none");
        }
    return TB_OK;
}

/* A split with no image: say where none was found (in the cities asked for). */
static int empty_split(const char *split, const char *const *want, size_t nwant, const char *images, struct tb_err *err)
{
    if (!nwant)
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "cityscapes: split '%s' is empty: no *_leftImg8bit.png in the city folders of %s/%s", split,
                          images, split);
    struct names w = { 0 };
    char list[1024];
    for (size_t i = 0; i < nwant; i++)
        if (!names_push(&w, want[i]))
            break;
    join_names(&w, list, sizeof list);
    names_free(&w);
    return tb_err_set(err, TB_ERR_RUNTIME,
                      "cityscapes: split '%s' is empty: no *_leftImg8bit.png in the folders of cities %s under %s/%s",
                      split, list, images, split);
}

static int cityscapes_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    struct cityscapes *d = calloc(1, sizeof *d);
    if (!d)
        return tb_err_set(err, TB_ERR_NOMEM, "cityscapes: out of memory");
    d->cfg = cfg;
    memset(d->lut, IGNORE, sizeof d->lut);
    for (int c = 0; c < NCLASSES; c++)
        d->lut[class_ids[c]] = (uint8_t)c;
    *ctx = d;
    return TB_OK;
}

static int cityscapes_open_split(void *ctx, const char *split, struct tb_err *err)
{
    struct cityscapes *d = ctx;
    const struct tb_section *cfg = d->cfg;
    if (strcmp(split, "train") != 0 && strcmp(split, "val") != 0 && strcmp(split, "test") != 0)
        return tb_err_set(err, TB_ERR_CONFIG, "cityscapes: no split '%s' (train, val and test exist)", split);
    const char *root = tb_section_string(cfg, "root");
    const bool coarse = tb_section_bool(cfg, "coarse");
    const char *const *want;
    const size_t nwant = tb_section_list(cfg, "cities", &want);

    const char *const label_suffix = coarse ? "_gtCoarse_labelIds.png" : "_gtFine_labelIds.png";
    struct part parts[2] = { { .subset = split }, { .subset = "train_extra" } };
    const int nparts = coarse && strcmp(split, "train") == 0 ? 2 : 1;
    struct scan sc = { 0 };
    struct names all_cities = { 0 };
    int rc = find_parts(root, coarse, parts, nparts, &all_cities, err);
    if (!rc)
        rc = check_cities(&all_cities, want, nwant, split, root, err);
    for (int k = 0; !rc && k < nparts; k++)
        for (size_t c = 0; !rc && c < parts[k].cities.n; c++) {
            const char *city = parts[k].cities.v[c];
            bool take = nwant == 0;
            for (size_t w = 0; !take && w < nwant; w++)
                take = strcmp(want[w], city) == 0;
            if (take)
                rc = add_city(&sc, &parts[k], k, city, label_suffix, err);
        }
    if (!rc && sc.missing)
        rc = sc.missing == 1
                 ? tb_err_set(err, TB_ERR_RUNTIME, "cityscapes: image %s has no label file %s", sc.first_image,
                              sc.first_label)
                 : tb_err_set(err, TB_ERR_RUNTIME,
                              "cityscapes: image %s has no label file %s (%zu images of split '%s' have none)",
                              sc.first_image, sc.first_label, sc.missing, split);
    if (!rc && sc.n == 0)
        rc = empty_split(split, want, nwant, parts[0].images, err);
    if (!rc) {
        qsort(sc.v, sc.n, sizeof *sc.v, cmp_sample);
        /* city pointed into the parts' lists, freed below; only sorting needed it */
        for (size_t i = 0; i < sc.n; i++)
            sc.v[i].city = NULL;
        d->samples = sc.v; /* d's now: destroy frees them */
        d->count = sc.n;
    } else {
        free_samples(sc.v, sc.n);
    }
    if (!rc && !tb_section_bool(cfg, "allow_outside_root") && !(d->root = realpath(root, NULL)))
        rc = tb_err_set(err, TB_ERR_CONFIG, "cityscapes: root %s: cannot resolve it: %s", root, strerror(errno));
    free(sc.first_image);
    free(sc.first_label);
    for (int k = 0; k < 2; k++) {
        free(parts[k].images);
        free(parts[k].labels);
        names_free(&parts[k].cities);
    }
    names_free(&all_cities);
    return rc;
}

/* ------------------------------------------------------------------ the rest */

static size_t cityscapes_count(void *ctx)
{
    return ((struct cityscapes *)ctx)->count;
}

static const char *cityscapes_name(void *ctx, size_t i)
{
    return ((struct cityscapes *)ctx)->samples[i].image;
}

/* Without allow_outside_root: path (of `what`) must resolve to a file inside root. */
static int check_inside(const struct cityscapes *d, const char *path, const char *what, struct tb_err *err)
{
    bool inside = true;
    if (!d->root)
        return TB_OK;
    /* what the file is first: a link to /dev/zero is refused as a device */
    int rc = tb_check_regular(path, what, TB_ERR_RUNTIME, err);
    if (!rc)
        rc = tb_path_inside(d->root, path, what, TB_ERR_RUNTIME, &inside, err);
    if (!rc && !inside)
        rc = tb_err_set(err, TB_ERR_RUNTIME,
                        "%s: a symbolic link leads outside root %s: refused (allow_outside_root = yes reads it)", path,
                        d->root);
    return rc;
}

static int cityscapes_load(void *ctx, size_t i, struct tb_sample *out, struct tb_err *err)
{
    const struct cityscapes *d = ctx;
    const struct sample *s = &d->samples[i];
    int rc = check_inside(d, s->image, "the image", err);
    if (!rc)
        rc = check_inside(d, s->label, "the label", err);
    if (!rc)
        rc = tb_image_read_rgb(s->image, out, err);
    if (!rc)
        rc = tb_image_read_label(s->label, out, err);
    if (rc)
        return tb_err_prefix(err, "cityscapes");
    const size_t n = (size_t)out->width * out->height;
    for (size_t p = 0; p < n; p++)
        out->label[p] = d->lut[out->label[p]];
    return TB_OK;
}

static size_t cityscapes_classes(void *ctx, const struct tb_class **out)
{
    (void)ctx;
    *out = tb_cityscapes_classes;
    return NCLASSES;
}

static const struct tb_dataset_ops cityscapes_ops = {
    .head = { .create = cityscapes_create, .destroy = cityscapes_close },
    .open_split = cityscapes_open_split,
    .count = cityscapes_count,
    .sample_name = cityscapes_name,
    .load = cityscapes_load,
    .classes = cityscapes_classes,
};

TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
    .abi_major = TB_ABI_MAJOR,
    .abi_minor = TB_ABI_MINOR,
    .kind = TB_KIND_DATASET,
    .name = "cityscapes",
    .version = TB_VERSION,
    .description = "Cityscapes from leftImg8bit/ and gtFine/ (or gtCoarse/) PNGs, 19 classes",
    .keys = cityscapes_keys,
    .ops.dataset = &cityscapes_ops,
};
