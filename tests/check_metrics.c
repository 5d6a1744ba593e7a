/* check_metrics: the confusion matrix and IoU of validation, on a batch worked by hand. */
#include "config.h"

#include <check.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/train/metrics_internal.h"

/* 2 images of 1x4 pixels, K = 4 classes (class 3 never labelled nor predicted). Logits
 * are NCHW: for each image, 4 planes of 4 pixels. */
static const float logits[2 * 4 * 4] = {
    /* image 0: predictions 0, 1, 1, 0 (pixel 3: a tie between 0 and 2 goes to the first) */
    5,
    0,
    0,
    1, /* k = 0 */
    1,
    3,
    2,
    0, /* k = 1 */
    0,
    1,
    1,
    1, /* k = 2 */
    -9,
    -9,
    -9,
    -9,
    /* image 1: predictions 2, 2, 0, 1 */
    0,
    0,
    4,
    0, /* k = 0 */
    0,
    0,
    0,
    2, /* k = 1 */
    1,
    1,
    0,
    0, /* k = 2 */
    -9,
    -9,
    -9,
    -9,
};
/* labels: image 0: 0, 1, 2, 0 (the tie); image 1: 2, ignored, 0, 2 */
static const uint8_t labels[8] = { 0, 1, 2, 0, 2, 255, 0, 2 };

START_TEST(confusion_by_hand)
{
    struct tb_confusion m;
    ck_assert_int_eq(tb_confusion_init(&m, 4), 0);
    ck_assert_uint_eq(tb_confusion_add(&m, logits, labels, 2, 1, 4, 255), 0);
    /* counted (label, prediction): (0,0) (1,1) (2,1) (0,0) | (2,2) (0,0) (2,1) */
    ck_assert_uint_eq(m.counts[0 * 4 + 0], 3);
    ck_assert_uint_eq(m.counts[1 * 4 + 1], 1);
    ck_assert_uint_eq(m.counts[2 * 4 + 1], 2);
    ck_assert_uint_eq(m.counts[2 * 4 + 2], 1);
    /* IoU: class 0 2/2, class 1 1/(1 + 2) , class 2 1/3, class 3 NaN */
    ck_assert(fabs(tb_confusion_iou(&m, 0) - 1.0) < 1e-12);
    ck_assert(fabs(tb_confusion_iou(&m, 1) - 1.0 / 3) < 1e-12);
    ck_assert(fabs(tb_confusion_iou(&m, 2) - 1.0 / 3) < 1e-12);
    ck_assert(isnan(tb_confusion_iou(&m, 3)));
    ck_assert(fabs(tb_confusion_miou(&m) - (1.0 + 2.0 / 3) / 3) < 1e-12);
    ck_assert(fabs(tb_confusion_accuracy(&m) - 5.0 / 7) < 1e-12);
    /* A label that is neither a class nor ignored is reported, not counted. */
    const uint8_t bad[8] = { 7, 255, 255, 255, 255, 255, 255, 255 };
    ck_assert_uint_eq(tb_confusion_add(&m, logits, bad, 2, 1, 4, 255), 1);
    ck_assert(fabs(tb_confusion_accuracy(&m) - 5.0 / 7) < 1e-12);

    static const struct tb_class names[4] = {
        { "road", { 0 } }, { "car", { 0 } }, { "Plastic bag & wrapper and more", { 0 } }, { "bus", { 0 } }
    };
    char buf[1024] = { 0 };
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    tb_confusion_print(&m, names, f);
    fclose(f);
    ck_assert_msg(strstr(buf, "road") && strstr(buf, "100.00") && strstr(buf, "33.33") && strstr(buf, "mIoU") &&
                      strstr(buf, "55.56") && strstr(buf, "pixel accuracy") && strstr(buf, "71.43"),
                  "%s", buf);
    /* Every row's IoU column starts where the header's does, however long a name is. */
    const char *head = strstr(buf, "IoU %"), *line = buf;
    ck_assert_ptr_nonnull(head);
    const long col = head - buf - 2; /* "IoU %" is right-aligned in 7 columns: its start */
    for (int row = 0; (line = strchr(line, '\n')) && line[1]; row++) {
        line++;
        const char *end = strchr(line, '\n');
        ck_assert_msg(end && end - line > col + 6 && line[col - 1] == ' ' &&
                          (isdigit((unsigned char)line[col + 6]) || line[col + 6] == '-'),
                      "row %d misaligned:\n%s", row, buf);
    }

    tb_confusion_clear(&m);
    ck_assert(isnan(tb_confusion_miou(&m)));
    ck_assert(isnan(tb_confusion_accuracy(&m)));
    tb_confusion_fini(&m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("confusion");
    tcase_add_test(tc, confusion_by_hand);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
