/* dataset-ppm: an example out-of-tree trainbig plugin, built with nothing but the
 * installed SDK (see Makefile and README.md).
 *
 * A dataset of binary Netpbm files: `{root}/{split}.txt` lists one sample per line as
 * "IMAGE.ppm LABEL.pgm" (paths relative to root; blank lines and lines starting with '#'
 * are skipped). Images are 8-bit binary PPM (P6), labels 8-bit binary PGM (P5) of the
 * same size whose values are class indices, or 255 for "ignore". */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/trainbig.h>

#define MAX_CLASSES 254 /* 255 means "ignore" */

struct ppm_sample {
    char *image; /* full paths, owned by the dataset */
    char *label;
};

struct ppm_dataset {
    const char *root; /* the section's, which outlives us */
    struct ppm_sample *samples;
    size_t n;
    struct tb_class classes[MAX_CLASSES];
    size_t nclasses;
};

static const struct tb_key ppm_keys[] = {
    { "root", TB_KEY_PATH, NULL, NULL, "directory holding {split}.txt and the files it lists" },
    { "classes", TB_KEY_LIST, "background,foreground", NULL, "class names, in label order" },
    TB_KEYS_END,
};

/* ------------------------------------------------------------------ Netpbm */

/* Reads one header number, skipping whitespace and '#' comments. */
static int read_header_number(FILE *f, unsigned *out)
{
    int c = fgetc(f);
    for (;;) {
        while (c != EOF && isspace(c))
            c = fgetc(f);
        if (c != '#')
            break;
        while (c != EOF && c != '\n')
            c = fgetc(f);
    }
    if (c == EOF || !isdigit(c))
        return -1;
    unsigned long v = 0;
    while (c != EOF && isdigit(c)) {
        v = v * 10 + (unsigned long)(c - '0');
        if (v > 1000000)
            return -1;
        c = fgetc(f);
    }
    /* Exactly one whitespace character ends the header's last number. */
    if (c == EOF || !isspace(c))
        return -1;
    *out = (unsigned)v;
    return 0;
}

/* Opens a binary Netpbm file of the given magic ("P6" or "P5") with maxval 255. */
static FILE *open_netpbm(const char *path, const char *magic, unsigned *w, unsigned *h, struct tb_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char m[3] = { 0 };
    unsigned maxval = 0;
    if (fread(m, 1, 2, f) != 2 || strcmp(m, magic) != 0 || read_header_number(f, w) || read_header_number(f, h) ||
        read_header_number(f, &maxval)) {
        tb_err_set(err, TB_ERR_RUNTIME, "%s: not a binary %s file (expected magic %s, width, height, maxval)", path,
                   strcmp(magic, "P6") == 0 ? "PPM" : "PGM", magic);
        fclose(f);
        return NULL;
    }
    if (maxval != 255 || *w == 0 || *h == 0) {
        tb_err_set(err, TB_ERR_RUNTIME, "%s: %ux%u with maxval %u; this plugin reads 8-bit files (maxval 255)", path,
                   *w, *h, maxval);
        fclose(f);
        return NULL;
    }
    return f;
}

/* ------------------------------------------------------------------ the vtable */

static void ppm_close(void *ctx)
{
    struct ppm_dataset *d = ctx;
    if (!d)
        return;
    for (size_t i = 0; i < d->n; i++) {
        free(d->samples[i].image);
        free(d->samples[i].label);
    }
    free(d->samples);
    free(d);
}

static char *join(const char *root, const char *name)
{
    size_t n = strlen(root) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", root, name);
    return p;
}

static int ppm_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    const char *const *names;
    size_t nclasses = tb_section_list(cfg, "classes", &names);
    if (nclasses == 0 || nclasses > MAX_CLASSES)
        return tb_err_set(err, TB_ERR_CONFIG, "[dataset] classes: %zu names given; between 1 and %d are allowed",
                          nclasses, MAX_CLASSES);

    struct ppm_dataset *d = calloc(1, sizeof *d);
    if (!d)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    d->nclasses = nclasses;
    for (size_t c = 0; c < nclasses; c++) {
        d->classes[c].name = names[c]; /* owned by the section, which outlives us */
        /* A fixed, well-spread palette: background black, then distinct hues. */
        d->classes[c].color[0] = (uint8_t)(c * 97 % 256);
        d->classes[c].color[1] = (uint8_t)(c * 59 % 256);
        d->classes[c].color[2] = (uint8_t)(c * 151 % 256);
    }
    d->root = tb_section_string(cfg, "root");
    *ctx = d;
    return TB_OK;
}

/* Reads {root}/{split}.txt. On failure the samples read so far stay in d, for destroy. */
static int ppm_open_split(void *ctx, const char *split, struct tb_err *err)
{
    struct ppm_dataset *d = ctx;
    const char *root = d->root;
    char listname[256];
    snprintf(listname, sizeof listname, "%s.txt", split);
    char *list = join(root, listname);
    FILE *f = list ? fopen(list, "r") : NULL;
    if (!f) {
        int rc = tb_err_set(err, TB_ERR_CONFIG, "%s: cannot open the list of %s samples: %s (set [dataset] root)",
                            list ? list : listname, split, strerror(errno));
        free(list);
        return rc;
    }
    char line[2048];
    int lineno = 0, rc = TB_OK;
    size_t cap = 0;
    while (rc == TB_OK && fgets(line, sizeof line, f)) {
        lineno++;
        char image[1024], label[1024], extra[2];
        int fields = sscanf(line, "%1023s %1023s %1s", image, label, extra);
        if (fields <= 0 || image[0] == '#')
            continue;
        if (fields != 2) {
            rc = tb_err_set(err, TB_ERR_CONFIG, "%s:%d: expected 'IMAGE.ppm LABEL.pgm', got '%.*s'", list, lineno,
                            (int)strcspn(line, "\n"), line);
            break;
        }
        if (d->n == cap) {
            cap = cap ? 2 * cap : 64;
            struct ppm_sample *s = realloc(d->samples, cap * sizeof *s);
            if (!s) {
                rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
                break;
            }
            d->samples = s;
        }
        d->samples[d->n].image = join(root, image);
        d->samples[d->n].label = join(root, label);
        if (!d->samples[d->n].image || !d->samples[d->n].label) {
            free(d->samples[d->n].image);
            free(d->samples[d->n].label);
            rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
            break;
        }
        d->n++;
    }
    fclose(f);
    if (rc == TB_OK && d->n == 0)
        rc = tb_err_set(err, TB_ERR_CONFIG, "%s: lists no samples", list);
    free(list);
    if (rc)
        return rc;
    tb_plog(TB_LOG_INFO, "%s: %zu samples, %zu classes", split, d->n, d->nclasses);
    return TB_OK;
}

static size_t ppm_count(void *ctx)
{
    return ((struct ppm_dataset *)ctx)->n;
}

static const char *ppm_sample_name(void *ctx, size_t i)
{
    return ((struct ppm_dataset *)ctx)->samples[i].image;
}

static int ppm_load(void *ctx, size_t i, struct tb_sample *out, struct tb_err *err)
{
    const struct ppm_dataset *d = ctx;
    const struct ppm_sample *s = &d->samples[i];
    unsigned w, h, lw, lh;
    FILE *img = open_netpbm(s->image, "P6", &w, &h, err);
    if (!img)
        return TB_ERR_RUNTIME;
    FILE *lab = open_netpbm(s->label, "P5", &lw, &lh, err);
    if (!lab) {
        fclose(img);
        return TB_ERR_RUNTIME;
    }
    int rc = TB_OK;
    if (lw != w || lh != h) {
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s is %ux%u but its label %s is %ux%u", s->image, w, h, s->label, lw, lh);
    } else if ((rc = tb_sample_reserve(out, w, h, err)) == TB_OK) {
        size_t pixels = (size_t)w * h;
        if (fread(out->image, 3, pixels, img) != pixels)
            rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: truncated: fewer than %ux%u RGB pixels", s->image, w, h);
        else if (fread(out->label, 1, pixels, lab) != pixels)
            rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: truncated: fewer than %ux%u pixels", s->label, w, h);
        for (size_t p = 0; rc == TB_OK && p < pixels; p++)
            if (out->label[p] != 255 && out->label[p] >= d->nclasses)
                rc = tb_err_set(err, TB_ERR_RUNTIME,
                                "%s: pixel (%zu, %zu) has label %u; allowed: 0..%zu (the classes) or 255 (ignore)",
                                s->label, p % w, p / w, out->label[p], d->nclasses - 1);
    }
    fclose(img);
    fclose(lab);
    return rc;
}

static size_t ppm_classes(void *ctx, const struct tb_class **classes)
{
    const struct ppm_dataset *d = ctx;
    *classes = d->classes;
    return d->nclasses;
}

static const struct tb_dataset_ops ppm_ops = {
    .head = { .create = ppm_create, .destroy = ppm_close },
    .open_split = ppm_open_split,
    .count = ppm_count,
    .sample_name = ppm_sample_name,
    .load = ppm_load,
    .classes = ppm_classes,
};

TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
    .abi_major = TB_ABI_MAJOR,
    .abi_minor = TB_ABI_MINOR,
    .kind = TB_KIND_DATASET,
    .name = "ppm",
    .version = "1.0.0",
    .description = "example: binary PPM images with PGM label maps listed in {root}/{split}.txt",
    .keys = ppm_keys,
    .ops.dataset = &ppm_ops,
};
