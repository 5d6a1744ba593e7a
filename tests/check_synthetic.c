/* check_synthetic: the `synthetic` dataset plugin: the Cityscapes classes and palette,
 * split sizes, sizes, determinism (run to run, thread to thread, seed to seed), and
 * scenes that contain the classes they promise and no others. */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/trainbig.h>

#include "core/config/setup_internal.h"

static void setup(void)
{
    ck_assert_msg(getenv("TB_BUILDDIR"), "run through make check (TB_BUILDDIR unset)");
    unsetenv("TRAINBIG_PLUGIN_PATH");
    setenv("TRAINBIG_LOG", "error", 1);
}

static void open_split(struct tb_instance *d, const char *split, const char *settings)
{
    struct tb_err err;
    ck_assert_msg(tb_instance_open(TB_KIND_DATASET, "synthetic", split, settings, d, &err) == TB_OK, "%s", err.msg);
}

static void load(struct tb_instance *d, size_t i, struct tb_sample *s)
{
    struct tb_err err;
    ck_assert_msg(d->ops.dataset->load(d->ctx, i, s, &err) == TB_OK, "%s", err.msg);
}

START_TEST(classes_and_splits)
{
    struct tb_instance d;
    open_split(&d, "val", "val_count = 7\nwidth = 200\nheight = 72\n");
    const struct tb_class *cl;
    ck_assert_uint_eq(d.ops.dataset->classes(d.ctx, &cl), 19);
    ck_assert_str_eq(cl[0].name, "road");
    ck_assert_str_eq(cl[10].name, "sky");
    ck_assert_str_eq(cl[18].name, "bicycle");
    ck_assert(cl[13].color[0] == 0 && cl[13].color[1] == 0 && cl[13].color[2] == 142); /* car */
    ck_assert_uint_eq(d.ops.dataset->count(d.ctx), 7);
    ck_assert_str_eq(d.ops.dataset->sample_name(d.ctx, 3), "synthetic/val/000003");
    struct tb_sample s = { 0 };
    load(&d, 6, &s);
    ck_assert_uint_eq(s.width, 200);
    ck_assert_uint_eq(s.height, 72);
    tb_sample_release(&s);
    tb_instance_close(&d);
    open_split(&d, "train", "");
    ck_assert_uint_eq(d.ops.dataset->count(d.ctx), 256);
    tb_instance_close(&d);
    struct tb_err err;
    ck_assert_int_ne(tb_instance_open(TB_KIND_DATASET, "synthetic", "extra", "", &d, &err), TB_OK);
    ck_assert_msg(strstr(err.msg, "no split 'extra' (train, val and test exist)"), "%s", err.msg);
}
END_TEST

/* The classes drawn, over 32 scenes: each of these appears, the others never. */
START_TEST(scenes_hold_their_classes)
{
    static const int drawn[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15 };
    struct tb_instance d;
    open_split(&d, "train", "");
    struct tb_sample s = { 0 };
    size_t seen[19] = { 0 };
    int with_road_sky_building = 0;
    for (size_t i = 0; i < 32; i++) {
        load(&d, i, &s);
        bool here[19] = { false };
        for (size_t p = 0; p < (size_t)s.width * s.height; p++) {
            ck_assert_msg(s.label[p] < 19, "sample %zu: label %d", i, s.label[p]);
            seen[s.label[p]]++;
            here[s.label[p]] = true;
        }
        with_road_sky_building += here[0] && here[10] && here[2];
    }
    ck_assert_int_eq(with_road_sky_building, 32);
    bool want[19] = { false };
    for (size_t k = 0; k < sizeof drawn / sizeof drawn[0]; k++)
        want[drawn[k]] = true;
    for (int c = 0; c < 19; c++)
        ck_assert_msg(want[c] ? seen[c] > 0 : seen[c] == 0, "class %d: %zu pixels", c, seen[c]);
    tb_sample_release(&s);
    tb_instance_close(&d);
}
END_TEST

struct job {
    struct tb_instance *d;
    size_t first;
    uint8_t *image, *label; /* 8 samples of 64x48 */
};

static void *load_eight(void *arg)
{
    struct job *j = arg;
    struct tb_sample s = { 0 };
    struct tb_err err;
    for (size_t i = 0; i < 8; i++) {
        if (j->d->ops.dataset->load(j->d->ctx, j->first + i, &s, &err) != TB_OK)
            return "load failed";
        memcpy(j->image + i * 64 * 48 * 3, s.image, 64 * 48 * 3);
        memcpy(j->label + i * 64 * 48, s.label, 64 * 48);
    }
    tb_sample_release(&s);
    return NULL;
}

/* Two threads loading at once get the bytes one thread gets, and so does a second open. */
START_TEST(deterministic_and_thread_safe)
{
    const char *settings = "width = 64\nheight = 48\nseed = 5\n";
    struct tb_instance d;
    open_split(&d, "train", settings);
    uint8_t *img[3], *lab[3];
    for (int k = 0; k < 3; k++) {
        img[k] = malloc(16 * 64 * 48 * 3);
        lab[k] = malloc(16 * 64 * 48);
    }
    struct job a = { &d, 0, img[0], lab[0] }, b = { &d, 8, img[0] + 8 * 64 * 48 * 3, lab[0] + 8 * 64 * 48 };
    pthread_t ta, tb;
    ck_assert_int_eq(pthread_create(&ta, NULL, load_eight, &a), 0);
    ck_assert_int_eq(pthread_create(&tb, NULL, load_eight, &b), 0);
    void *ra, *rb;
    pthread_join(ta, &ra);
    pthread_join(tb, &rb);
    ck_assert_ptr_null(ra);
    ck_assert_ptr_null(rb);
    tb_instance_close(&d);
    open_split(&d, "train", settings);
    struct job c = { &d, 0, img[1], lab[1] }, e = { &d, 8, img[1] + 8 * 64 * 48 * 3, lab[1] + 8 * 64 * 48 };
    ck_assert_ptr_null(load_eight(&c));
    ck_assert_ptr_null(load_eight(&e));
    tb_instance_close(&d);
    ck_assert(memcmp(img[0], img[1], 16 * 64 * 48 * 3) == 0);
    ck_assert(memcmp(lab[0], lab[1], 16 * 64 * 48) == 0);
    /* Another seed, another split: other scenes. */
    open_split(&d, "train", "width = 64\nheight = 48\nseed = 6\n");
    struct job f = { &d, 0, img[2], lab[2] };
    ck_assert_ptr_null(load_eight(&f));
    tb_instance_close(&d);
    ck_assert(memcmp(lab[0], lab[2], 8 * 64 * 48) != 0);
    open_split(&d, "val", settings);
    ck_assert_ptr_null(load_eight(&f));
    tb_instance_close(&d);
    ck_assert(memcmp(lab[0], lab[2], 8 * 64 * 48) != 0);
    for (int k = 0; k < 3; k++) {
        free(img[k]);
        free(lab[k]);
    }
}
END_TEST

static Suite *synthetic_suite(void)
{
    Suite *s = suite_create("synthetic");
    TCase *tc = tcase_create("synthetic");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, classes_and_splits);
    tcase_add_test(tc, scenes_hold_their_classes);
    tcase_add_test(tc, deterministic_and_thread_safe);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(synthetic_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
