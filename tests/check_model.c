/* check_model: the gscnn model plugin builds the reference G-SCNN.
 *
 * Parameter counts are checked exactly against the reference nv-tlabs/GSCNN, counted as
 * it counts them (convolution weights and biases, BN weight and bias; running statistics
 * are buffers), part by part, for the full network and for a narrow one; graphs are built
 * without running. The reference's unused side output on mod1 (65 parameters at width 1, 9
 * at width 0.125) is left out, so the totals are the reference's minus that. A narrow
 * network also runs forward on the CPU backend, and bad [model] settings are refused
 * naming the key. */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/trainbig.h>

#include "core/engine/engine_internal.h"
#include "core/engine/graph_internal.h"
#include "core/config/setup_internal.h"
#include "core/train/inputs.h"
#include "opcheck.h"
#include "testutil.h"

static void setup(void)
{
    ck_assert_msg(getenv("TB_BUILDDIR"), "run through make check (TB_BUILDDIR unset)");
    unsetenv("TRAINBIG_PLUGIN_PATH");
    setenv("TRAINBIG_LOG", "error", 1);
}

/* Parts of the network by parameter-name prefix, in the reference's terms. */
enum { P_MOD1, P_MOD2, P_MOD3, P_MOD4, P_MOD5, P_MOD6, P_MOD7, P_SHAPE, P_CANNY, P_ASPP, P_DECODER, P_COUNT };
static const char *const part_name[P_COUNT] = { "trunk.mod1", "trunk.mod2", "trunk.mod3", "trunk.mod4",
                                                "trunk.mod5", "trunk.mod6", "trunk.mod7", "shape",
                                                "canny_fuse", "aspp",       "decoder" };

static int part_of(const char *name)
{
    for (int i = 0; i < P_COUNT; i++) {
        size_t n = strlen(part_name[i]);
        if (strncmp(name, part_name[i], n) == 0 && name[n] == '.')
            return i;
    }
    return -1;
}

static struct tb_graph *build(struct tb_instance *m, const char *settings, bool training, int batch, int h, int w,
                              struct tb_err *err)
{
    ck_assert_msg(tb_instance_open(TB_KIND_MODEL, "gscnn", NULL, settings, m, err) == TB_OK, "%s", err->msg);
    struct tb_graph *g = tb_graph_new(training);
    ck_assert_ptr_nonnull(g);
    const struct tb_model_input in = { batch, 3, h, w, 19, 255 };
    ck_assert_msg(m->ops.model->build(m->ctx, g, &in, err) == TB_OK, "%s", err->msg);
    ck_assert_msg(!tb_graph_error(g), "%s", tb_graph_error(g));
    return g;
}

/* Sums the parameters of g per part, prints the split, and checks it against want. */
static void check_counts(const char *what, struct tb_graph *g, const long long *want, long long want_total)
{
    long long got[P_COUNT] = { 0 }, total = 0;
    for (size_t i = 0; i < g->nnodes; i++) {
        const struct tb_node *x = g->nodes[i];
        if (x->kind != TB_NODE_PARAM)
            continue;
        const int p = part_of(x->name);
        ck_assert_msg(p >= 0, "%s: parameter %s is in no part of the network", what, x->name);
        got[p] += (long long)tb_shape_elems(x->desc.shape);
        total += (long long)tb_shape_elems(x->desc.shape);
    }
    printf("%s: %lld parameters:", what, total);
    for (int i = 0; i < P_COUNT; i++)
        printf(" %s %lld", part_name[i], got[i]);
    printf("\n");
    for (int i = 0; i < P_COUNT; i++)
        ck_assert_msg(got[i] == want[i], "%s: %s has %lld parameters, the reference %lld", what, part_name[i], got[i],
                      want[i]);
    ck_assert_msg(total == want_total, "%s: %lld parameters, expected %lld", what, total, want_total);
}

/* The full reference network: 137,278,190 in the reference, of which its unused mod1 side
 * output is 65 (a 1x1 conv 64->1 with bias). */
START_TEST(full_network_counts)
{
    static const long long want[P_COUNT] = { 1728,     820608,      3279616, 27274752, 26484736, 9442304,
                                             37758976, 107948 - 65, 2,       30412032, 1695488 };
    struct tb_instance m;
    struct tb_err err;
    struct tb_graph *g = build(&m, "", false, 1, 64, 64, &err);
    check_counts("gscnn (reference)", g, want, 137278190LL - 65);
    tb_graph_free(g);
    tb_instance_close(&m);
}
END_TEST

/* width 0.125, one block per module: 1,465,790 in the reference (mod1 side output 9). */
START_TEST(narrow_network_counts)
{
    static const long long want[P_COUNT] = { 216,    3632,      14432, 57536,  119040, 148096,
                                             591104, 29044 - 9, 2,     475552, 27136 };
    struct tb_instance m;
    struct tb_err err;
    struct tb_graph *g = build(&m, "width = 0.125\nblocks = 1,1,1,1,1,1\nshape_width = 1.0\n", false, 1, 64, 64, &err);
    check_counts("gscnn (width 0.125, blocks 1,1,1,1,1,1)", g, want, 1465790LL - 9);
    tb_graph_free(g);
    tb_instance_close(&m);
}
END_TEST

/* Named parameters follow the scopes, and the outputs have the input's size. */
START_TEST(names_and_outputs)
{
    struct tb_instance m;
    struct tb_err err;
    struct tb_graph *g = build(&m, "width = 0.125\nblocks = 1,1,2,1,1,1\n", false, 2, 40, 56, &err);
    static const char *const names[] = { "trunk.mod1.conv1.weight",        "trunk.mod4.block1.proj.weight",
                                         "trunk.mod4.block2.conv2.weight", "trunk.mod7.block1.conv3.weight",
                                         "shape.gate2.conv_in.bias",       "shape.side7.weight",
                                         "aspp.rate3.conv.weight",         "decoder.classifier.weight" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ck_assert_msg(tb_graph_find(g, names[i]), "no parameter %s", names[i]);
    ck_assert_msg(!tb_graph_find(g, "trunk.mod4.block2.proj.weight"), "a projection where channels and stride stay");
    ck_assert_msg(!tb_graph_find(g, "decoder.classifier.bias"), "the classifier has no bias");
    bool seg = false, edge = false;
    for (size_t i = 0; i < g->noutputs; i++) {
        const struct tb_shape s = tb_node_desc(g->outputs[i].x).shape;
        if (strcmp(g->outputs[i].name, "seg_logits") == 0) {
            seg = true;
            ck_assert(s.n == 2 && s.c == 19 && s.h == 40 && s.w == 56);
        } else if (strcmp(g->outputs[i].name, "edge_prob") == 0) {
            edge = true;
            ck_assert(s.n == 2 && s.c == 1 && s.h == 40 && s.w == 56);
        }
    }
    ck_assert_msg(seg && edge, "outputs seg_logits and edge_prob");
    const struct tb_node *w = tb_graph_find(g, "aspp.rate2.conv.weight");
    ck_assert_int_eq(tb_node_desc(w).shape.n, 32);
    ck_assert_int_eq(tb_node_desc(w).shape.c, 512);
    tb_graph_free(g);
    tb_instance_close(&m);
}
END_TEST

/* The narrow network runs forward on the CPU backend (inference: untrained batch norm
 * uses its initial running statistics): outputs finite, edge probabilities in [0, 1]. */
START_TEST(narrow_network_runs)
{
    struct tb_instance m;
    struct tb_err err;
    struct tb_graph *g = build(&m, "width = 0.125\nblocks = 1,1,1,1,1,1\n", false, 2, 32, 40, &err);
    struct test_backend b;
    test_backend_open(&b, "cpu", "threads = 2\n");
    struct tb_engine e;
    ck_assert_msg(tb_engine_init(&e, b.h->p, b.ctx, 0, 7, &err) == TB_OK, "%s", err.msg);
    struct tb_exec *x;
    ck_assert_msg(tb_exec_create(&e, g, &x, &err) == TB_OK, "%s", err.msg);
    const size_t pix = (size_t)2 * 32 * 40;
    float *img = malloc(pix * 3 * sizeof *img), *canny = malloc(pix * sizeof *canny);
    for (size_t i = 0; i < pix * 3; i++)
        img[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    for (size_t i = 0; i < pix; i++)
        canny[i] = i % 7 == 0 ? 255.0f : 0.0f;
    ck_assert_msg(tb_exec_set_input(x, "image", img, &err) == TB_OK, "%s", err.msg);
    ck_assert_msg(tb_exec_set_input(x, "canny", canny, &err) == TB_OK, "%s", err.msg);
    ck_assert_msg(tb_exec_forward(x, 0, &err) == TB_OK, "%s", err.msg);
    float *seg = malloc(pix * 19 * sizeof *seg), *edge = malloc(pix * sizeof *edge);
    ck_assert_msg(tb_exec_read(x, "seg_logits", seg, &err) == TB_OK, "%s", err.msg);
    ck_assert_msg(tb_exec_read(x, "edge_prob", edge, &err) == TB_OK, "%s", err.msg);
    for (size_t i = 0; i < pix * 19; i++)
        ck_assert_msg(isfinite(seg[i]), "seg[%zu] = %g", i, seg[i]);
    for (size_t i = 0; i < pix; i++)
        ck_assert_msg(edge[i] >= 0.0f && edge[i] <= 1.0f, "edge[%zu] = %g", i, edge[i]);
    free(img);
    free(canny);
    free(seg);
    free(edge);
    tb_exec_free(x);
    tb_engine_fini(&e);
    test_backend_close(&b);
    tb_graph_free(g);
    tb_instance_close(&m);
}
END_TEST

/* A training graph: the four loss terms of the reference, every parameter reached by
 * the objective, and one step forward and backward on the CPU backend gives finite,
 * positive losses and a gradient for every parameter. */
START_TEST(narrow_network_trains)
{
    struct tb_instance m;
    struct tb_err err;
    const int N = 2, H = 32, W = 40;
    struct tb_graph *g = build(&m, "width = 0.125\nblocks = 1,1,1,1,1,1\n", true, N, H, W, &err);
    ck_assert_int_eq(g->nlosses, 4);
    static const char *const terms[4] = { "seg", "edge", "att", "dual" };
    static const float weights[4] = { 1.0f, 20.0f, 1.0f, 1.0f };
    for (int i = 0; i < 4; i++) {
        ck_assert_str_eq(g->losses[i].name, terms[i]);
        ck_assert(g->losses[i].weight == weights[i]);
    }
    struct test_backend b;
    test_backend_open(&b, "cpu", "threads = 2\n");
    struct tb_engine e;
    ck_assert_msg(tb_engine_init(&e, b.h->p, b.ctx, 0, 7, &err) == TB_OK, "%s", err.msg);
    struct tb_exec *x;
    ck_assert_msg(tb_exec_create(&e, g, &x, &err) == TB_OK, "%s", err.msg);
    const size_t pix = (size_t)N * H * W;
    float *img = malloc(pix * 3 * sizeof *img), *canny = malloc(pix * sizeof *canny);
    uint8_t *labels = malloc(pix), *edges = malloc(pix);
    for (size_t i = 0; i < pix * 3; i++)
        img[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    for (size_t i = 0; i < pix; i++) {
        const int col = (int)(i % W), row = (int)(i / W % H);
        labels[i] = row < H / 2 ? (col < W / 3 ? 0 : 7) : (i % 53 == 0 ? 255 : 13);
        edges[i] = row == H / 2 || row == H / 2 - 1 ? 1 : 0;
        canny[i] = edges[i] ? 255.0f : 0.0f;
    }
    ck_assert_msg(tb_exec_set_input(x, "image", img, &err) == TB_OK, "%s", err.msg);
    ck_assert_msg(tb_exec_set_input(x, "canny", canny, &err) == TB_OK, "%s", err.msg);
    ck_assert_msg(tb_exec_set_input(x, "labels", labels, &err) == TB_OK, "%s", err.msg);
    ck_assert_msg(tb_exec_set_input(x, "edges", edges, &err) == TB_OK, "%s", err.msg);
    ck_assert_msg(tb_exec_forward(x, 0, &err) == TB_OK, "%s", err.msg);
    for (int i = 0; i < 4; i++) {
        if (i == 2)
            continue; /* att may be 0: no edge is confident before training */
        float loss;
        ck_assert_msg(tb_exec_read(x, terms[i], &loss, &err) == TB_OK, "%s", err.msg);
        ck_assert_msg(isfinite(loss) && loss > 0, "%s loss %g", terms[i], loss);
    }
    ck_assert_msg(tb_exec_backward(x, &err) == TB_OK, "%s", err.msg);
    size_t trained = 0;
    for (size_t i = 0; i < tb_engine_param_count(&e); i++) {
        struct tb_param *p = tb_engine_param_at(&e, i);
        if (!p->trainable)
            continue;
        ck_assert_msg(p->grad.data, "%s got no gradient", p->name);
        trained++;
    }
    ck_assert_uint_gt(trained, 100);
    free(img);
    free(canny);
    free(labels);
    free(edges);
    tb_exec_free(x);
    tb_engine_fini(&e);
    test_backend_close(&b);
    tb_graph_free(g);
    tb_instance_close(&m);
}
END_TEST

/* A term of weight 0 is reported (an output of its name) but not trained: dual_weight = 0
 * leaves the reference's other three losses. */
START_TEST(dual_weight_zero_reports_only)
{
    struct tb_instance m;
    struct tb_err err;
    struct tb_graph *g = build(&m, "width = 0.125\nblocks = 1,1,1,1,1,1\ndual_weight = 0\n", true, 1, 32, 40, &err);
    ck_assert_int_eq(g->nlosses, 3);
    for (size_t i = 0; i < g->nlosses; i++)
        ck_assert_str_ne(g->losses[i].name, "dual");
    bool reported = false;
    for (size_t i = 0; i < g->noutputs; i++)
        reported |= strcmp(g->outputs[i].name, "dual") == 0;
    ck_assert_msg(reported, "dual_weight = 0: the dual term is not reported");
    tb_graph_free(g);
    tb_instance_close(&m);
}
END_TEST

static void refused(const char *settings, const char *want1, const char *want2)
{
    struct tb_instance m;
    struct tb_err err;
    ck_assert_int_ne(tb_instance_open(TB_KIND_MODEL, "gscnn", NULL, settings, &m, &err), TB_OK);
    ck_assert_msg(strstr(err.msg, want1) && strstr(err.msg, want2), "'%s': message '%s' lacks '%s' or '%s'", settings,
                  err.msg, want1, want2);
}

START_TEST(bad_settings_refused)
{
    refused("blocks = 3,3,6\n", "blocks", "3 items; allowed: a comma-separated list of 6 integers in 1..64");
    refused("blocks = 3,3,x,3,1,1\n", "blocks", "item 3 'x' is not an integer");
    refused("blocks = 3,3,6,3,0,1\n", "blocks", "item 5 '0' is out of range");
    refused("aspp_rates = 12,24\n", "aspp_rates", "list of 3 integers");
    refused("aspp_rates = 12,24,1025\n", "aspp_rates", "item 3 '1025' is out of range");
    refused("width = 0\n", "width", "0.01..16");
    refused("trunk = resnet50\n", "trunk", "wider_resnet38");
}
END_TEST

/* The inputs besides "image" and "labels" are the model's: the training graph's "canny"
 * and "edges", the inference graph's "canny" only, made by its prepare(); a model that
 * reads an input it cannot make, or one of another size than the images fed, is refused
 * naming the input. */
START_TEST(inputs_owned_by_the_model)
{
    const char *settings = "width = 0.125\nblocks = 1,1,1,1,1,1\n";
    struct tb_instance m;
    struct tb_err err;
    struct tb_batch_spec spec;
    for (int training = 0; training < 2; training++) {
        struct tb_graph *g = build(&m, settings, training, 2, 40, 56, &err);
        ck_assert_msg(tb_inputs_spec(&spec, g, m.h->p, m.ctx, 2, 40, 56, &err) == TB_OK, "%s", err.msg);
        ck_assert_int_eq(spec.nfeeds, training ? 2 : 1);
        ck_assert_str_eq(spec.feeds[0].name, "canny");
        ck_assert(spec.feeds[0].dtype == TB_F32 && spec.feeds[0].channels == 1);
        if (training) {
            ck_assert_str_eq(spec.feeds[1].name, "edges");
            ck_assert(spec.feeds[1].dtype == TB_U8 && spec.feeds[1].channels == 1);
        }
        ck_assert_ptr_eq(spec.prepare, m.ops.model->prepare);
        tb_inputs_spec_free(&spec);

        ck_assert_int_eq(tb_inputs_spec(&spec, g, m.h->p, m.ctx, 2, 40, 64, &err), TB_ERR_PLUGIN);
        ck_assert_contains(err.msg, "model 'gscnn': graph input 'image' (f32, 2x3x40x56): its shape is not");

        struct tb_model_ops no_prepare = *m.ops.model;
        no_prepare.prepare = NULL;
        struct tb_plugin p = *m.h->p;
        p.ops.model = &no_prepare;
        ck_assert_int_eq(tb_inputs_spec(&spec, g, &p, m.ctx, 2, 40, 56, &err), TB_ERR_PLUGIN);
        ck_assert_contains(err.msg, "graph input 'canny' (f32, 2x1x40x56): the core feeds only 'image' and "
                                    "'labels', and the model has no prepare() to make it");
        tb_graph_free(g);
        tb_instance_close(&m);
    }
}
END_TEST

static Suite *model_suite(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("gscnn");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, full_network_counts);
    tcase_add_test(tc, narrow_network_counts);
    tcase_add_test(tc, names_and_outputs);
    tcase_add_test(tc, narrow_network_runs);
    tcase_add_test(tc, narrow_network_trains);
    tcase_add_test(tc, dual_weight_zero_reports_only);
    tcase_add_test(tc, bad_settings_refused);
    tcase_add_test(tc, inputs_owned_by_the_model);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(model_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
