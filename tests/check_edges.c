/* check_edges: the edge maps of the SDK (trainbig/edges.h) that G-SCNN's prepare() makes
 * its inputs from: Canny edges of the image (OpenCV's definition: Sobel 3x3, L1 magnitude,
 * the strongest channel, non-maximum suppression with its tie rule, hysteresis), the
 * boundary targets of a label map; and a batch slot holding them, made by the gscnn
 * plugin's prepare(), with the normalised image. */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/setup_internal.h"
#include "core/data/batch.h"
#include <trainbig/edges.h>

enum { W = 16, H = 12 };

static uint8_t img[H][W][3], out[H][W];

static void fill(uint8_t v)
{
    memset(img, v, sizeof img);
}

static int count_edges(void)
{
    int n = 0;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            n += out[y][x] == 255;
    return n;
}

static struct tb_canny_work work; /* reused across calls, as the core does */

static void canny(int low, int high)
{
    ck_assert_int_eq(tb_canny(&img[0][0][0], W, H, low, high, &out[0][0], &work), 0);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            ck_assert(out[y][x] == 0 || out[y][x] == 255);
}

/* Columns >= 8 of the channels in mask set to v (a vertical step between columns 7 and 8). */
static void vertical_step(uint8_t v, int mask, int y0, int y1)
{
    for (int y = y0; y < y1; y++)
        for (int x = 8; x < W; x++)
            for (int c = 0; c < 3; c++)
                if (mask >> c & 1)
                    img[y][x][c] = v;
}

START_TEST(canny_uniform_has_no_edges)
{
    fill(117);
    canny(10, 100);
    ck_assert_int_eq(count_edges(), 0);
}
END_TEST

/* Columns 7 and 8 have the same magnitude (4 * 200); OpenCV keeps the first along the
 * gradient (m > left, m >= right), so the edge is column 7 exactly, in every row. */
START_TEST(canny_vertical_step_tie_rule)
{
    for (int mask = 1; mask <= 7; mask++) {
        fill(0);
        vertical_step(200, mask, 0, H);
        canny(10, 100);
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                ck_assert_msg(out[y][x] == (x == 7 ? 255 : 0), "channels %d: (%d,%d) = %d", mask, y, x, out[y][x]);
    }
}
END_TEST

START_TEST(canny_horizontal_step)
{
    fill(10);
    for (int y = 4; y < H; y++)
        for (int x = 0; x < W; x++)
            img[y][x][2] = 250;
    canny(10, 100);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            ck_assert_msg(out[y][x] == (y == 3 ? 255 : 0), "(%d,%d) = %d", y, x, out[y][x]);
}
END_TEST

/* A step of 20 has magnitude 80: above low 10, not above high 100, so nothing seeds it;
 * with high 79 the whole column is an edge. */
START_TEST(canny_thresholds)
{
    fill(0);
    vertical_step(20, 7, 0, H);
    canny(10, 100);
    ck_assert_int_eq(count_edges(), 0);
    canny(10, 79);
    ck_assert_int_eq(count_edges(), H);
    canny(80, 200); /* magnitude 80 is not above low 80 */
    ck_assert_int_eq(count_edges(), 0);
    canny(100, 10); /* swapped thresholds are put in order, as OpenCV does */
    ck_assert_int_eq(count_edges(), 0);
}
END_TEST

/* Hysteresis: the same weak step (magnitude 80, below high 100, so alone it is no edge),
 * with row 4 stepping by 40 (magnitude 120 or more: strong). The strong pixels seed the
 * weak ones 8-connected to them: column 7 becomes an edge in every row far from row 4.
 * (Row 4's own steps up and down from its neighbours are edges too.) */
START_TEST(canny_hysteresis)
{
    fill(0);
    vertical_step(20, 7, 0, H);
    vertical_step(40, 7, 4, 5);
    canny(10, 100);
    for (int y = 0; y < H; y++)
        if (y < 2 || y > 6)
            ck_assert_msg(out[y][7] == 255 && out[y][6] == 0 && out[y][8] == 0, "row %d: not an edge at column 7 only",
                          y);
}
END_TEST

static uint8_t lab[H][W], tgt[H][W];

START_TEST(label_edges_within_radius)
{
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            lab[y][x] = x < 8 ? 1 : 2;
    tb_label_edges(&lab[0][0], W, H, 2, 255, &tgt[0][0]);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            ck_assert_msg(tgt[y][x] == (x >= 6 && x <= 9), "(%d,%d) = %d", y, x, tgt[y][x]);
}
END_TEST

/* A single pixel of another class: the pixels within Euclidean distance 2 of it (13 with
 * itself; (2,1) offsets are sqrt(5) away) are edges, nothing else, not the image border. */
START_TEST(label_edges_euclidean_disc)
{
    memset(lab, 0, sizeof lab);
    lab[5][5] = 3;
    tb_label_edges(&lab[0][0], W, H, 2, 255, &tgt[0][0]);
    int n = 0;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            const int d2 = (y - 5) * (y - 5) + (x - 5) * (x - 5);
            ck_assert_msg(tgt[y][x] == (d2 <= 4), "(%d,%d) = %d", y, x, tgt[y][x]);
            n += tgt[y][x];
        }
    ck_assert_int_eq(n, 13);
}
END_TEST

/* Ignored pixels stay ignored, and bordering them is not a class change. */
START_TEST(label_edges_ignore)
{
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            lab[y][x] = x < 8 ? 4 : 255;
    tb_label_edges(&lab[0][0], W, H, 2, 255, &tgt[0][0]);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            ck_assert_msg(tgt[y][x] == (x < 8 ? 0 : 255), "(%d,%d) = %d", y, x, tgt[y][x]);
}
END_TEST

/* The rule stated per pixel, looking at every pixel of the disc. */
static uint8_t disc_rule(const uint8_t *l, int w, int h, int x, int y, int radius)
{
    const uint8_t c = l[y * w + x];
    if (c == 255)
        return 255;
    for (int ny = 0; ny < h; ny++)
        for (int nx = 0; nx < w; nx++) {
            const int d2 = (nx - x) * (nx - x) + (ny - y) * (ny - y);
            const uint8_t m = l[ny * w + nx];
            if (d2 <= radius * radius && m != c && m != 255)
                return 1;
        }
    return 0;
}

/* Random maps of every size from 1x1 (narrower than the disc, mostly borders) to wide
 * ones (mostly region interiors, which tb_label_edges settles without the disc): the
 * result is the rule's at every pixel, for radii 0 to 3. */
START_TEST(label_edges_random_maps)
{
    enum { MAXW = 40, MAXH = 17 };
    static uint8_t l[MAXW * MAXH], t[MAXW * MAXH];
    uint32_t r = 12345;
    for (int trial = 0; trial < 400; trial++) {
        r = r * 1103515245u + 12345u;
        const int w = 1 + (int)(r >> 8) % MAXW, h = 1 + (int)(r >> 16) % MAXH, radius = trial % 4;
        const int cell = 1 + trial % 7;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                r = r * 1103515245u + 12345u;
                const int v = ((x / cell) * 3 + (y / cell) * 5) % 4;
                l[y * w + x] = (r >> 24) % 17 == 0 ? 255 : (uint8_t)(v == 3 ? 255 : v);
            }
        tb_label_edges(l, w, h, radius, 255, t);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                ck_assert_msg(t[y * w + x] == disc_rule(l, w, h, x, y, radius), "%dx%d radius %d at (%d,%d)", w, h,
                              radius, x, y);
    }
}
END_TEST

/* A batch slot: the image normalised per channel and the labels copied by the core, the
 * Canny edges and edge targets as computed above by the gscnn plugin's prepare(); a sample
 * of another size is refused by name. */
START_TEST(batch_inputs)
{
    struct tb_batch b;
    struct tb_batch_work bw = { 0 };
    struct tb_err err;
    struct tb_instance m;
    ck_assert_msg(tb_instance_open(TB_KIND_MODEL, "gscnn", NULL, "", &m, &err) == TB_OK, "%s", err.msg);
    const struct tb_model_feed feeds[] = { { "canny", TB_F32, 1, NULL }, { "edges", TB_U8, 1, NULL } };
    const struct tb_batch_spec spec = { 2, feeds, m.ops.model->prepare, m.ops.model->free_work, m.ctx };
    ck_assert_ptr_nonnull(spec.prepare);
    ck_assert_int_eq(tb_batch_init(&b, 2, H, W, &spec, NULL, &err), TB_OK);
    const float *cny = tb_batch_feed(&b, "canny");
    const uint8_t *edges = tb_batch_feed(&b, "edges");
    ck_assert(cny && edges && !tb_batch_feed(&b, "image"));
    fill(0);
    vertical_step(200, 7, 0, H);
    img[3][4][1] = 51;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            lab[y][x] = x < 8 ? 1 : (y == 0 ? 255 : 2);
    struct tb_sample s = { W, H, &img[0][0][0], &lab[0][0], (size_t)W * H };
    ck_assert_int_eq(tb_batch_put(&b, 1, &s, "s", &bw, &err), TB_OK);
    const size_t plane = (size_t)W * H, slot = 3 * plane;
    ck_assert(fabsf(b.image[slot + plane + 3 * W + 4] - (0.2f - 0.456f) / 0.224f) < 1e-5f);
    ck_assert(fabsf(b.image[slot + 2 * plane + 5 * W + 9] - (200 / 255.0f - 0.406f) / 0.225f) < 1e-5f);
    canny(10, 100);
    tb_label_edges(&lab[0][0], W, H, 2, 255, &tgt[0][0]);
    for (size_t p = 0; p < plane; p++) {
        ck_assert(cny[plane + p] == (&out[0][0])[p]);
        ck_assert(b.labels[plane + p] == (&lab[0][0])[p]);
        ck_assert(edges[plane + p] == (&tgt[0][0])[p]);
    }
    ck_assert_int_eq(edges[plane + 5 * W + 9], 1);
    ck_assert_int_eq(edges[plane + 9], 255);
    s.width = W - 1;
    ck_assert_int_ne(tb_batch_put(&b, 0, &s, "city/0001", &bw, &err), TB_OK);
    ck_assert_msg(strstr(err.msg, "sample city/0001 is 15x12, but the batch takes 16x12 images"), "%s", err.msg);
    /* A skipped sample's slot: nothing to learn from. */
    ck_assert_int_eq(tb_batch_put_ignored(&b, 1, &bw, &err), TB_OK);
    for (size_t p = 0; p < plane; p++) {
        ck_assert(b.image[slot + p] == 0.0f && cny[plane + p] == 0.0f);
        ck_assert(b.labels[plane + p] == 255 && edges[plane + p] == 255);
    }
    tb_batch_work_free(&bw);
    tb_batch_fini(&b);

    /* A batch of image and labels only: a model that reads no edges costs nothing for them. */
    ck_assert_int_eq(tb_batch_init(&b, 1, H, W, NULL, NULL, &err), TB_OK);
    s.width = W;
    ck_assert_int_eq(tb_batch_put(&b, 0, &s, "s", &bw, &err), TB_OK);
    ck_assert(!tb_batch_feed(&b, "canny") && !bw.model_work);
    tb_batch_work_free(&bw);
    tb_batch_fini(&b);
    tb_instance_close(&m);
}
END_TEST

static Suite *edges_suite(void)
{
    Suite *s = suite_create("edges");
    TCase *tc = tcase_create("canny");
    tcase_add_test(tc, canny_uniform_has_no_edges);
    tcase_add_test(tc, canny_vertical_step_tie_rule);
    tcase_add_test(tc, canny_horizontal_step);
    tcase_add_test(tc, canny_thresholds);
    tcase_add_test(tc, canny_hysteresis);
    suite_add_tcase(s, tc);
    tc = tcase_create("labels");
    tcase_add_test(tc, label_edges_within_radius);
    tcase_add_test(tc, label_edges_euclidean_disc);
    tcase_add_test(tc, label_edges_ignore);
    tcase_add_test(tc, label_edges_random_maps);
    tcase_add_test(tc, batch_inputs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(edges_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
