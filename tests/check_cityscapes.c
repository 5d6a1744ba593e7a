/* check_cityscapes: the `cityscapes` dataset plugin on small trees written with
 * tests/fixtures.c (the main one is the tree tests/make_fixtures writes, at the same
 * size): the directory layout and the zips' wrapper directories, the order of the
 * samples, the whole labelIds -> trainId table pixel by pixel, the `cities` filter, the
 * coarse annotations, the errors (missing directories, an image without its label, an
 * empty split, a truncated PNG, a label map of another size) and concurrent loads. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/trainbig.h>

#include "core/config/setup_internal.h"
#include "tests/fixtures.h"
#include "tests/testutil.h"

enum { W = FIXTURE_CS_WIDTH, H = FIXTURE_CS_HEIGHT }; /* the size tests/make_fixtures writes */

/* The official table (cityscapesScripts labels.py): trainId of label ids 0..33; the
 * license plate (-1) and every id past 33 are 255 too. Written out in full here, apart
 * from the plugin's table, so that a slip in either shows. */
static const uint8_t official_train_id[34] = {
    255, /*  0 unlabeled */
    255, /*  1 ego vehicle */
    255, /*  2 rectification border */
    255, /*  3 out of roi */
    255, /*  4 static */
    255, /*  5 dynamic */
    255, /*  6 ground */
    0,   /*  7 road */
    1,   /*  8 sidewalk */
    255, /*  9 parking */
    255, /* 10 rail track */
    2,   /* 11 building */
    3,   /* 12 wall */
    4,   /* 13 fence */
    255, /* 14 guard rail */
    255, /* 15 bridge */
    255, /* 16 tunnel */
    5,   /* 17 pole */
    255, /* 18 polegroup */
    6,   /* 19 traffic light */
    7,   /* 20 traffic sign */
    8,   /* 21 vegetation */
    9,   /* 22 terrain */
    10,  /* 23 sky */
    11,  /* 24 person */
    12,  /* 25 rider */
    13,  /* 26 car */
    14,  /* 27 truck */
    15,  /* 28 bus */
    255, /* 29 caravan */
    255, /* 30 trailer */
    16,  /* 31 train */
    17,  /* 32 motorcycle */
    18,  /* 33 bicycle */
};

static uint8_t expected_train_id(uint8_t id)
{
    return id < 34 ? official_train_id[id] : 255;
}

/* ------------------------------------------------------------------ the fixture */

/* The trees come from tests/fixtures.c: the frames' pixels are fixture_cs_pixels(). */
#define train_frames (fixture_cs_train.v)
#define val_frames (fixture_cs_val.v)
#define test_frames (fixture_cs_test.v)
#define extra_frames (fixture_cs_extra.v)
#define NTRAIN (fixture_cs_train.n)
#define NVAL (fixture_cs_val.n)
#define NEXTRA (fixture_cs_extra.n)

/* The fixture is written before Check runs any test: its failures (the fixture writers
 * print them) end the process. */
static void need(int rc)
{
    if (rc) {
        fputs("check_cityscapes: cannot write the fixture\n", stderr);
        exit(EXIT_FAILURE);
    }
}

static char *root_main, *root_wrap_images, *root_wrap_labels, *root_no_label, *root_empty, *root_broken, *root_coarse,
    *root_no_extra, *root_nothing, *root_links;

static char fixture_dir[4096];

/* <fixture_dir>/name, allocated: the caller frees it. */
static char *fixture_path(const char *name)
{
    char *path;
    need(asprintf(&path, "%s/%s", fixture_dir, name) < 0);
    return path;
}

static void put_frame(const char *root, const char *images, const char *labels, const char *kind, const char *subset,
                      const struct fixture_frame *fr)
{
    need(fixture_cs_frame(root, images, labels, kind, subset, fr, W, H));
}

static void put_split(const char *root, const char *images, const char *labels, const char *subset,
                      const struct fixture_frames *v, size_t n)
{
    need(fixture_cs_split(root, images, labels, subset, v, n, W, H));
}

static void make_dirs(const char *name)
{
    char *dir = fixture_path(name);
    need(fixture_mkdirs(dir));
    free(dir);
}

static void make_trees(void)
{
    snprintf(fixture_dir, sizeof fixture_dir, "%s/trainbig-cityscapes-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(fixture_dir)) {
        fprintf(stderr, "check_cityscapes: mkdtemp %s: %s\n", fixture_dir, strerror(errno));
        exit(EXIT_FAILURE);
    }
    /* train, val and test, as tests/make_fixtures writes them */
    root_main = fixture_path("main");
    need(fixture_cityscapes(root_main, W, H));

    /* Each tree inside its zip's wrapper directory, the other one plain. */
    root_wrap_images = fixture_path("wrap-images");
    put_split(root_wrap_images, "leftImg8bit_trainvaltest/leftImg8bit", "gtFine", "train", &fixture_cs_train, NTRAIN);
    root_wrap_labels = fixture_path("wrap-labels");
    put_split(root_wrap_labels, "leftImg8bit", "gtFine_trainvaltest/gtFine", "train", &fixture_cs_train, NTRAIN);

    /* bremen_000000_000008 has no label. */
    root_no_label = fixture_path("no-label");
    put_split(root_no_label, "leftImg8bit", "gtFine", "train", &fixture_cs_train, 4);
    put_frame(root_no_label, "leftImg8bit", NULL, "gtFine", "train", &train_frames[4]);

    /* val: a city folder without images; test: no city at all. */
    root_empty = fixture_path("empty");
    put_split(root_empty, "leftImg8bit", "gtFine", "train", &fixture_cs_train, 1);
    make_dirs("empty/leftImg8bit/val/aachen");
    make_dirs("empty/gtFine/val/aachen");
    make_dirs("empty/leftImg8bit/test");
    make_dirs("empty/gtFine/test");

    /* train: sample 1 truncated; val: a label map of half the size. */
    root_broken = fixture_path("broken");
    put_split(root_broken, "leftImg8bit", "gtFine", "train", &fixture_cs_train, 3);
    char *path = fixture_path("broken/leftImg8bit/train/aachen/aachen_000001_000005_leftImg8bit.png");
    need(fixture_truncate_half(path));
    free(path);
    put_split(root_broken, "leftImg8bit", "gtFine", "val", &fixture_cs_val, 1);
    path = fixture_path("broken/gtFine/val/frankfurt/frankfurt_000000_000294_gtFine_labelIds.png");
    uint8_t small[(W / 2) * (H / 2)] = { 7 };
    need(fixture_png(path, small, W / 2, H / 2, false));
    free(path);

    /* train's images made links (links_are_samples): a plain tree for now. */
    root_links = fixture_path("links");
    put_split(root_links, "leftImg8bit", "gtFine", "train", &fixture_cs_train, 3);

    /* Coarse labels: train (with train_extra) and val; fine labels only for val. */
    root_coarse = fixture_path("coarse");
    for (size_t i = 0; i < NTRAIN; i++)
        put_frame(root_coarse, "leftImg8bit", "gtCoarse", "gtCoarse", "train", &train_frames[i]);
    for (size_t i = 0; i < NEXTRA; i++)
        put_frame(root_coarse, "leftImg8bit_trainextra/leftImg8bit", "gtCoarse", "gtCoarse", "train_extra",
                  &extra_frames[i]);
    for (size_t i = 0; i < NVAL; i++)
        put_frame(root_coarse, "leftImg8bit", "gtCoarse", "gtCoarse", "val", &val_frames[i]);

    /* Coarse train labels, but no train_extra images. */
    root_no_extra = fixture_path("no-extra");
    put_frame(root_no_extra, "leftImg8bit", "gtCoarse", "gtCoarse", "train", &train_frames[0]);

    root_nothing = fixture_path("nothing");
}

/* ------------------------------------------------------------------ helpers */

static void setup(void)
{
    ck_assert_msg(getenv("TB_BUILDDIR"), "run through make check (TB_BUILDDIR unset)");
    unsetenv("TRAINBIG_PLUGIN_PATH");
    setenv("TRAINBIG_LOG", "error", 1);
}

static char *settings_for(const char *root, const char *more)
{
    char *s;
    ck_assert_int_ge(asprintf(&s, "root = %s\n%s", root, more), 0);
    return s;
}

static void open_split(struct tb_instance *d, const char *root, const char *split, const char *more)
{
    char *settings = settings_for(root, more);
    struct tb_err err;
    ck_assert_msg(tb_instance_open(TB_KIND_DATASET, "cityscapes", split, settings, d, &err) == TB_OK, "%s", err.msg);
    free(settings);
}

/* Opening fails; returns the message (static). */
static const char *open_fails(const char *root, const char *split, const char *more)
{
    static struct tb_err err;
    char *settings = settings_for(root, more);
    struct tb_instance d;
    ck_assert_int_ne(tb_instance_open(TB_KIND_DATASET, "cityscapes", split, settings, &d, &err), TB_OK);
    free(settings);
    return err.msg;
}

static void load(struct tb_instance *d, size_t i, struct tb_sample *s)
{
    struct tb_err err;
    ck_assert_msg(d->ops.dataset->load(d->ctx, i, s, &err) == TB_OK, "%s", err.msg);
}

static void check_name(struct tb_instance *d, size_t i, const char *root, const char *images, const char *subset,
                       const struct fixture_frame *f)
{
    char want[4096];
    snprintf(want, sizeof want, "%s/%s/%s/%s/%s_%06d_%06d_leftImg8bit.png", root, images, subset, f->city, f->city,
             f->seq, f->frame);
    ck_assert_str_eq(d->ops.dataset->sample_name(d->ctx, i), want);
}

/* Sample i holds frame f: the image's bytes, and each pixel's trainId from the table. */
static void check_sample(struct tb_instance *d, size_t i, const struct fixture_frame *f)
{
    struct tb_sample s = { 0 };
    load(d, i, &s);
    ck_assert_uint_eq(s.width, W);
    ck_assert_uint_eq(s.height, H);
    uint8_t rgb[W * H * 3], ids[W * H];
    fixture_cs_pixels(f, W, H, rgb, ids);
    ck_assert_msg(memcmp(s.image, rgb, sizeof rgb) == 0, "sample %zu: image bytes differ", i);
    bool seen[256] = { false };
    for (int p = 0; p < W * H; p++) {
        seen[ids[p]] = true;
        if (s.label[p] != expected_train_id(ids[p]))
            ck_abort_msg("sample %zu pixel %d: id %d gave %d, expected %d", i, p, ids[p], s.label[p],
                         expected_train_id(ids[p]));
    }
    for (int id = 0; id < 34; id++)
        ck_assert_msg(seen[id], "the fixture misses id %d", id);
    ck_assert(seen[255]);
    tb_sample_release(&s);
}

/* ------------------------------------------------------------------ tests */

START_TEST(classes_splits_and_order)
{
    struct tb_instance d;
    open_split(&d, root_main, "train", "");
    const struct tb_class *cl;
    ck_assert_uint_eq(d.ops.dataset->classes(d.ctx, &cl), 19);
    static const char *const names[19] = {
        "road",         "sidewalk",   "building", "wall",       "fence",   "pole",  "traffic light",
        "traffic sign", "vegetation", "terrain",  "sky",        "person",  "rider", "car",
        "truck",        "bus",        "train",    "motorcycle", "bicycle",
    };
    for (int c = 0; c < 19; c++)
        ck_assert_str_eq(cl[c].name, names[c]);
    ck_assert(cl[0].color[0] == 128 && cl[0].color[1] == 64 && cl[0].color[2] == 128);   /* road */
    ck_assert(cl[13].color[0] == 0 && cl[13].color[1] == 0 && cl[13].color[2] == 142);   /* car */
    ck_assert(cl[18].color[0] == 119 && cl[18].color[1] == 11 && cl[18].color[2] == 32); /* bicycle */
    ck_assert_uint_eq(d.ops.dataset->count(d.ctx), NTRAIN);
    for (size_t i = 0; i < NTRAIN; i++)
        check_name(&d, i, root_main, "leftImg8bit", "train", &train_frames[i]);
    tb_instance_close(&d);

    open_split(&d, root_main, "val", "");
    ck_assert_uint_eq(d.ops.dataset->count(d.ctx), NVAL);
    for (size_t i = 0; i < NVAL; i++)
        check_name(&d, i, root_main, "leftImg8bit", "val", &val_frames[i]);
    tb_instance_close(&d);

    /* test opens like the others (its labels are dummies) */
    open_split(&d, root_main, "test", "");
    ck_assert_uint_eq(d.ops.dataset->count(d.ctx), 1);
    check_name(&d, 0, root_main, "leftImg8bit", "test", &test_frames[0]);
    tb_instance_close(&d);

    ck_assert_contains(open_fails(root_main, "extra", ""), "no split 'extra' (train, val and test exist)");
}
END_TEST

/* Every pixel of every sample, against the official table: all ids 0..33 and 255 occur. */
START_TEST(label_ids_to_train_ids)
{
    struct tb_instance d;
    open_split(&d, root_main, "train", "");
    for (size_t i = 0; i < NTRAIN; i++)
        check_sample(&d, i, &train_frames[i]);
    tb_instance_close(&d);
    open_split(&d, root_main, "val", "");
    for (size_t i = 0; i < NVAL; i++)
        check_sample(&d, i, &val_frames[i]);
    tb_instance_close(&d);
}
END_TEST

START_TEST(wrapper_directories)
{
    struct tb_instance d;
    open_split(&d, root_wrap_images, "train", "");
    ck_assert_uint_eq(d.ops.dataset->count(d.ctx), NTRAIN);
    for (size_t i = 0; i < NTRAIN; i++) {
        check_name(&d, i, root_wrap_images, "leftImg8bit_trainvaltest/leftImg8bit", "train", &train_frames[i]);
        check_sample(&d, i, &train_frames[i]);
    }
    tb_instance_close(&d);
    open_split(&d, root_wrap_labels, "train", "");
    ck_assert_uint_eq(d.ops.dataset->count(d.ctx), NTRAIN);
    for (size_t i = 0; i < NTRAIN; i++)
        check_sample(&d, i, &train_frames[i]);
    tb_instance_close(&d);
}
END_TEST

START_TEST(cities_filter)
{
    struct tb_instance d;
    open_split(&d, root_main, "train", "cities = zurich, aachen\n");
    ck_assert_uint_eq(d.ops.dataset->count(d.ctx), 6); /* 3 in aachen, 3 in zurich */
    check_name(&d, 0, root_main, "leftImg8bit", "train", &train_frames[0]);
    check_name(&d, 2, root_main, "leftImg8bit", "train", &train_frames[2]);
    check_name(&d, 3, root_main, "leftImg8bit", "train", &train_frames[5]);
    check_name(&d, 5, root_main, "leftImg8bit", "train", &train_frames[7]);
    check_sample(&d, 3, &train_frames[5]);
    tb_instance_close(&d);
    const char *msg = open_fails(root_main, "train", "cities = aachen, paris\n");
    ck_assert_contains(msg, "no city 'paris'");
    ck_assert_contains(msg, "aachen, bremen, zurich");
    ck_assert_contains(open_fails(root_main, "val", "cities = aachen\n"), "frankfurt, lindau");
}
END_TEST

START_TEST(coarse_annotations)
{
    struct tb_instance d;
    /* train: the train images and those of train_extra, by city then file name */
    open_split(&d, root_coarse, "train", "coarse = yes\n");
    ck_assert_uint_eq(d.ops.dataset->count(d.ctx), NTRAIN + NEXTRA);
    check_name(&d, 0, root_coarse, "leftImg8bit", "train", &train_frames[0]);
    check_name(&d, 3, root_coarse, "leftImg8bit_trainextra/leftImg8bit", "train_extra", &extra_frames[0]);
    check_name(&d, 6, root_coarse, "leftImg8bit_trainextra/leftImg8bit", "train_extra", &extra_frames[1]);
    check_sample(&d, 3, &extra_frames[0]);
    check_sample(&d, 6, &extra_frames[1]);
    check_sample(&d, 7, &train_frames[5]);
    tb_instance_close(&d);
    open_split(&d, root_coarse, "val", "coarse = yes\ncities = lindau\n");
    ck_assert_uint_eq(d.ops.dataset->count(d.ctx), 1);
    check_sample(&d, 0, &val_frames[2]);
    tb_instance_close(&d);
    /* the fine labels are not there */
    const char *msg = open_fails(root_coarse, "val", "");
    ck_assert_contains(msg, "gtFine/val");
    ck_assert_contains(msg, "gtFine_trainvaltest/gtFine/val");
    /* and the main tree has no coarse ones */
    ck_assert_contains(open_fails(root_main, "val", "coarse = yes\n"), "gtCoarse/val");
    msg = open_fails(root_no_extra, "train", "coarse = yes\n");
    ck_assert_contains(msg, "leftImg8bit/train_extra");
    ck_assert_contains(msg, "leftImg8bit_trainextra/leftImg8bit/train_extra");
}
END_TEST

START_TEST(missing_directories)
{
    char want[4096];
    const char *msg = open_fails(root_nothing, "train", "");
    snprintf(want, sizeof want, "%s/leftImg8bit/train", root_nothing);
    ck_assert_contains(msg, want);
    snprintf(want, sizeof want, "%s/leftImg8bit_trainvaltest/leftImg8bit/train", root_nothing);
    ck_assert_contains(msg, want);
    ck_assert_contains(msg, "_leftImg8bit.png");
    /* images there, labels not */
    msg = open_fails(root_coarse, "train", "");
    snprintf(want, sizeof want, "%s/gtFine/train", root_coarse);
    ck_assert_contains(msg, want);
    snprintf(want, sizeof want, "%s/gtFine_trainvaltest/gtFine/train", root_coarse);
    ck_assert_contains(msg, want);
    ck_assert_contains(msg, "_gtFine_labelIds.png");
}
END_TEST

START_TEST(image_without_label)
{
    const char *msg = open_fails(root_no_label, "train", "");
    char want[4096];
    snprintf(want, sizeof want, "%s/leftImg8bit/train/bremen/bremen_000000_000008_leftImg8bit.png", root_no_label);
    ck_assert_contains(msg, want);
    snprintf(want, sizeof want, "%s/gtFine/train/bremen/bremen_000000_000008_gtFine_labelIds.png", root_no_label);
    ck_assert_contains(msg, want);
    /* the other cities open */
    struct tb_instance d;
    open_split(&d, root_no_label, "train", "cities = aachen\n");
    ck_assert_uint_eq(d.ops.dataset->count(d.ctx), 3);
    tb_instance_close(&d);
}
END_TEST

START_TEST(empty_split)
{
    const char *msg = open_fails(root_empty, "val", "");
    ck_assert_contains(msg, "split 'val' is empty");
    ck_assert_contains(msg, "leftImg8bit/val");
    ck_assert_contains(open_fails(root_empty, "test", ""), "split 'test' is empty");
    msg = open_fails(root_empty, "val", "cities = aachen\n");
    ck_assert_contains(msg, "split 'val' is empty");
    ck_assert_contains(msg, "cities aachen");
}
END_TEST

START_TEST(broken_files)
{
    struct tb_instance d;
    struct tb_sample s = { 0 };
    struct tb_err err;
    open_split(&d, root_broken, "train", "");
    ck_assert_uint_eq(d.ops.dataset->count(d.ctx), 3);
    load(&d, 0, &s);
    ck_assert_int_eq(d.ops.dataset->load(d.ctx, 1, &s, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "aachen_000001_000005_leftImg8bit.png");
    load(&d, 2, &s); /* and the next one still loads */
    tb_instance_close(&d);
    open_split(&d, root_broken, "val", "");
    ck_assert_int_eq(d.ops.dataset->load(d.ctx, 0, &s, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "frankfurt_000000_000294_gtFine_labelIds.png");
    tb_instance_close(&d);
    tb_sample_release(&s);
}
END_TEST

/* Images that are a dangling link, a looping link and a link out of root are samples
 * like any other, bad when read (dropped unseen before, with "bad samples: 0"); the link
 * out of root reads with allow_outside_root = yes. */
START_TEST(links_are_samples)
{
    struct tb_instance d;
    struct tb_sample s = { 0 };
    struct tb_err err;
    char *image[3], *outside = fixture_path("outside.png");
    open_split(&d, root_links, "train", "");
    ck_assert_uint_eq(d.ops.dataset->count(d.ctx), 3);
    for (size_t i = 0; i < 3; i++)
        need(!(image[i] = strdup(d.ops.dataset->sample_name(d.ctx, i))));
    tb_instance_close(&d);
    need(rename(image[2], outside) != 0);
    need(unlink(image[0]) != 0 || symlink("nowhere.png", image[0]) != 0);
    need(unlink(image[1]) != 0 || symlink(image[1], image[1]) != 0);
    need(symlink(outside, image[2]) != 0);
    open_split(&d, root_links, "train", "");
    ck_assert_uint_eq(d.ops.dataset->count(d.ctx), 3);
    static const char *const why[3] = { "No such file or directory", "Too many levels of symbolic links",
                                        "a symbolic link leads outside root" };
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(d.ops.dataset->load(d.ctx, i, &s, &err), TB_ERR_RUNTIME);
        ck_assert_contains(err.msg, image[i]);
        ck_assert_contains(err.msg, why[i]);
    }
    tb_instance_close(&d);
    open_split(&d, root_links, "train", "allow_outside_root = yes\n");
    load(&d, 2, &s);
    ck_assert_uint_eq(s.width, W);
    tb_instance_close(&d);
    tb_sample_release(&s);
    for (size_t i = 0; i < 3; i++)
        free(image[i]);
    free(outside);
}
END_TEST

struct job {
    struct tb_instance *d;
    int reverse;
    uint8_t *image; /* NTRAIN images of W * H * 3 bytes */
    uint8_t *label; /* NTRAIN label maps of W * H */
};

static void *load_all(void *arg)
{
    struct job *j = arg;
    struct tb_sample s = { 0 };
    struct tb_err err;
    for (int round = 0; round < 20; round++)
        for (size_t k = 0; k < NTRAIN; k++) {
            const size_t i = j->reverse ? NTRAIN - 1 - k : k;
            if (j->d->ops.dataset->load(j->d->ctx, i, &s, &err) != TB_OK || s.width != W || s.height != H)
                return "load failed";
            memcpy(j->image + i * W * H * 3, s.image, W * H * 3);
            memcpy(j->label + i * W * H, s.label, W * H);
        }
    tb_sample_release(&s);
    return NULL;
}

/* Two threads loading the split at once get what one thread gets, and a second open the same. */
START_TEST(deterministic_and_thread_safe)
{
    struct tb_instance d;
    open_split(&d, root_main, "train", "");
    struct job j[3] = { { 0 } };
    for (int k = 0; k < 3; k++) {
        j[k].image = calloc(NTRAIN, W * H * 3);
        j[k].label = calloc(NTRAIN, W * H);
        ck_assert(j[k].image && j[k].label);
    }
    j[0].d = j[1].d = &d;
    j[1].reverse = 1;
    pthread_t ta, tb;
    ck_assert_int_eq(pthread_create(&ta, NULL, load_all, &j[0]), 0);
    ck_assert_int_eq(pthread_create(&tb, NULL, load_all, &j[1]), 0);
    void *ra, *rb;
    pthread_join(ta, &ra);
    pthread_join(tb, &rb);
    ck_assert_ptr_null(ra);
    ck_assert_ptr_null(rb);
    tb_instance_close(&d);
    open_split(&d, root_main, "train", "");
    j[2].d = &d;
    ck_assert_ptr_null(load_all(&j[2]));
    tb_instance_close(&d);
    for (int k = 0; k < 2; k++) {
        ck_assert(memcmp(j[k].image, j[2].image, NTRAIN * W * H * 3) == 0);
        ck_assert(memcmp(j[k].label, j[2].label, NTRAIN * W * H) == 0);
    }
    for (int k = 0; k < 3; k++) {
        free(j[k].image);
        free(j[k].label);
    }
}
END_TEST

static Suite *cityscapes_suite(void)
{
    Suite *s = suite_create("cityscapes");
    TCase *tc = tcase_create("cityscapes");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, classes_splits_and_order);
    tcase_add_test(tc, label_ids_to_train_ids);
    tcase_add_test(tc, wrapper_directories);
    tcase_add_test(tc, cities_filter);
    tcase_add_test(tc, coarse_annotations);
    tcase_add_test(tc, missing_directories);
    tcase_add_test(tc, image_without_label);
    tcase_add_test(tc, empty_split);
    tcase_add_test(tc, broken_files);
    tcase_add_test(tc, links_are_samples);
    tcase_add_test(tc, deterministic_and_thread_safe);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    make_trees(); /* once, before Check forks: every test reads the same trees */
    return test_run_suite(cityscapes_suite());
}
