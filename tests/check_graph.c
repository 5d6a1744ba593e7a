/* check_graph: the graph builder (shape inference, parameter names, errors) and the
 * schedule (forward and backward order, first and last use of every tensor). */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/trainbig.h>

#include "core/engine/graph_internal.h"
#include "core/engine/op_kinds_internal.h"
#include "core/engine/schedule_internal.h"
#include "testutil.h"

static struct tb_graph *g;

static void new_training_graph(void)
{
    g = tb_graph_new(true);
    ck_assert_ptr_nonnull(g);
}

static void free_graph(void)
{
    tb_graph_free(g);
    g = NULL;
}

static struct tb_shape shape(int n, int c, int h, int w)
{
    struct tb_shape s = { n, c, h, w };
    return s;
}

#define ck_assert_shape(node, N, C, H, W)                                                                              \
    do {                                                                                                               \
        struct tb_shape s_ = tb_node_desc(node).shape;                                                                 \
        ck_assert_msg(s_.n == (N) && s_.c == (C) && s_.h == (H) && s_.w == (W), "shape %dx%dx%dx%d, want %dx%dx%dx%d", \
                      s_.n, s_.c, s_.h, s_.w, (N), (C), (H), (W));                                                     \
    } while (0)

/* ------------------------------------------------------------------ builder */

START_TEST(conv_shapes)
{
    struct tb_node *x = tb_input(g, "image", TB_F32, shape(2, 3, 17, 12));
    ck_assert_shape(tb_conv2d(g, "same", x, 8, 3, 1, -1, 1, false), 2, 8, 17, 12);
    ck_assert_shape(tb_conv2d(g, "down", x, 8, 3, 2, 1, 1, true), 2, 8, 9, 6);
    ck_assert_shape(tb_conv2d(g, "dil", x, 4, 3, 1, -1, 2, false), 2, 4, 17, 12);
    ck_assert_shape(tb_conv2d(g, "valid7", x, 4, 7, 1, 0, 1, false), 2, 4, 11, 6);
    ck_assert_shape(tb_conv2d(g, "point", x, 5, 1, 1, 0, 1, false), 2, 5, 17, 12);
    ck_assert_ptr_null(tb_graph_error(g));
    /* Padding "same" for a dilated kernel: dilation * (k - 1) / 2. */
    ck_assert_int_eq(g->ops[2].op.p.conv.pad_h, 2);
    ck_assert_int_eq(g->ops[2].op.p.conv.dil_w, 2);
}
END_TEST

START_TEST(other_shapes)
{
    struct tb_node *x = tb_input(g, "image", TB_F32, shape(2, 4, 9, 9));
    ck_assert_shape(tb_maxpool(g, x, 3, 2, 1), 2, 4, 5, 5);
    ck_assert_shape(tb_global_avgpool(g, x), 2, 4, 1, 1);
    ck_assert_shape(tb_resize(g, x, 20, 3, true), 2, 4, 20, 3);
    struct tb_node *parts[3] = { x, tb_relu(g, x), tb_sigmoid(g, x) };
    ck_assert_shape(tb_concat(g, 3, parts), 2, 12, 9, 9);
    struct tb_node *gate = tb_input(g, "gate", TB_F32, shape(2, 1, 9, 9));
    ck_assert_shape(tb_mul(g, x, gate), 2, 4, 9, 9);
    ck_assert_shape(tb_batchnorm(g, "bn", x), 2, 4, 9, 9);
    struct tb_node *d = tb_dropout(g, x, 0.5f, true);
    ck_assert_shape(d, 2, 4, 9, 9);
    /* The dropout mask is a second output, (N, C, 1, 1) u8 when channelwise. */
    const struct tb_gop *o = &g->ops[g->nops - 1];
    ck_assert_int_eq(o->op.nout, 2);
    ck_assert_int_eq(o->op.out[1].dtype, TB_U8);
    ck_assert_int_eq(o->op.out[1].shape.h, 1);
    struct tb_node *labels = tb_input(g, "labels", TB_U8, shape(2, 1, 9, 9));
    ck_assert_shape(tb_softmax_ce(g, x, labels, NULL, 255, false), 1, 1, 1, 1);
    /* Class weights (N,K,1,1) and masked labels carry no gradient, even from a parameter. */
    struct tb_node *cw = tb_class_weights(g, labels, 19, 255);
    ck_assert_shape(cw, 2, 19, 1, 1);
    ck_assert(!cw->requires_grad);
    struct tb_node *edge = tb_sigmoid(g, tb_conv2d(g, "edge", x, 1, 1, 1, 0, 1, false));
    ck_assert(edge->requires_grad);
    struct tb_node *masked = tb_mask_labels(g, labels, edge, 0.8f, 255);
    ck_assert_shape(masked, 2, 1, 9, 9);
    ck_assert_int_eq(tb_node_desc(masked).dtype, TB_U8);
    ck_assert(!masked->requires_grad);
    ck_assert_ptr_null(tb_graph_error(g));
    ck_assert_ptr_null(tb_mask_labels(g, labels, x, 0.8f, 255));
    ck_assert_msg(strstr(tb_graph_error(g),
                         "(inputs labels, image): mask_labels: labels 2x1x9x9 and x 2x4x9x9 must both be Nx1xHxW"),
                  "%s", tb_graph_error(g));
}
END_TEST

START_TEST(parameter_names_follow_scopes)
{
    struct tb_node *x = tb_input(g, "image", TB_F32, shape(1, 3, 8, 8));
    tb_graph_push_scope(g, "trunk");
    tb_graph_push_scope(g, "mod%d", 2);
    tb_graph_push_scope(g, "block%d", 1);
    x = tb_conv2d(g, "conv1", x, 4, 3, 1, -1, 1, true);
    x = tb_batchnorm(g, "bn1", x);
    tb_graph_pop_scope(g);
    tb_graph_pop_scope(g);
    tb_graph_pop_scope(g);
    tb_conv2d(g, "head", x, 2, 1, 1, 0, 1, false);
    ck_assert_ptr_null(tb_graph_error(g));
    struct tb_node *w = tb_graph_find(g, "trunk.mod2.block1.conv1.weight");
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(w->kind, TB_NODE_PARAM);
    ck_assert_shape(w, 4, 3, 3, 3);
    ck_assert_int_eq(w->init, TB_INIT_KAIMING_NORMAL);
    ck_assert_ptr_nonnull(tb_graph_find(g, "trunk.mod2.block1.conv1.bias"));
    ck_assert_int_eq(tb_graph_find(g, "trunk.mod2.block1.bn1.weight")->init, TB_INIT_ONES);
    ck_assert_int_eq(tb_graph_find(g, "trunk.mod2.block1.bn1.running_var")->kind, TB_NODE_BUFFER);
    ck_assert_ptr_nonnull(tb_graph_find(g, "head.weight"));
    ck_assert_ptr_null(tb_graph_find(g, "head.bias"));
}
END_TEST

/* A 16-bit input is refused by name and dtype: no op takes one yet. */
START_TEST(sixteen_bit_input_refused)
{
    ck_assert_ptr_null(tb_input(g, "half", TB_BF16, shape(1, 3, 4, 4)));
    ck_assert_contains(tb_graph_error(g), "input half is bf16 (dtype 3); a graph's inputs are f32 or u8");
}
END_TEST

START_TEST(mismatch_names_op_and_shapes)
{
    struct tb_node *a = tb_input(g, "a", TB_F32, shape(2, 3, 8, 8));
    struct tb_node *b = tb_input(g, "b", TB_F32, shape(2, 3, 8, 9));
    ck_assert_ptr_null(tb_add(g, a, b));
    ck_assert_contains(tb_graph_error(g), "add0 (inputs a, b): add: a 2x3x8x8 and b 2x3x8x9 differ in shape");
    /* Sticky: later calls fail quietly and the first cause stays. */
    ck_assert_ptr_null(tb_relu(g, a));
    ck_assert_ptr_null(tb_input(g, "c", TB_F32, shape(1, 1, 1, 1)));
    ck_assert_contains(tb_graph_error(g), "add0 (inputs a, b): add: a 2x3x8x8");
}
END_TEST

START_TEST(each_op_checks_its_inputs)
{
    struct {
        const char *expect;
    } cases[] = {
        { "concat0 (inputs a, b): concat: input 1 2x3x8x9 differs from input 0 2x3x8x8 in N, H or W" },
        { "mul0 (inputs a, g2): mul: g 2x2x8x8 must be 2x3x8x8 or 2x1x8x8 to multiply x 2x3x8x8" },
        { "big (inputs a, big.weight): conv2d: x 2x3x8x8 with kernel 11x11, stride 1, padding 0, dilation 1: the "
          "kernel does not fit the padded input" },
        { "softmax_ce0 (inputs a, lab): softmax_ce: labels 2x1x8x9 must be 2x1x8x8 to match logits 2x3x8x8" },
        { "dropout0 (inputs a): dropout: p = 1; allowed: 0 <= p < 1" },
        { "maxpool0 (inputs a): maxpool: x 2x3x8x8, kernel 3, stride 1, padding 2: the window does not fit" },
        { "relu0 (inputs lab): relu: input 0 is u8, expected a float (f32, bf16 or f16)" },
        { "bce_logits0 (inputs a, lab): bce_logits: logits 2x3x8x8 and targets 2x1x8x9 must both be Nx1xHxW" },
        { "loss l: a is 2x3x8x8; a loss is 1x1x1x1" },
        { "concat: 1 inputs; between 2 and 8 are allowed" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct tb_graph *h = tb_graph_new(true);
        struct tb_node *a = tb_input(h, "a", TB_F32, shape(2, 3, 8, 8));
        struct tb_node *b = tb_input(h, "b", TB_F32, shape(2, 3, 8, 9));
        struct tb_node *g2 = tb_input(h, "g2", TB_F32, shape(2, 2, 8, 8));
        struct tb_node *lab = tb_input(h, "lab", TB_U8, shape(2, 1, 8, 9));
        struct tb_node *pair[2] = { a, b };
        switch (i) {
        case 0:
            tb_concat(h, 2, pair);
            break;
        case 1:
            tb_mul(h, a, g2);
            break;
        case 2:
            tb_conv2d(h, "big", a, 4, 11, 1, 0, 1, false);
            break;
        case 3:
            tb_softmax_ce(h, a, lab, NULL, 255, false);
            break;
        case 4:
            tb_dropout(h, a, 1.0f, false);
            break;
        case 5:
            tb_maxpool(h, a, 3, 1, 2);
            break;
        case 6:
            tb_relu(h, lab);
            break;
        case 7:
            tb_bce_logits(h, a, lab);
            break;
        case 8:
            tb_graph_loss(h, "l", a, 1.0f);
            break;
        case 9:
            tb_concat(h, 1, pair);
            break;
        }
        ck_assert_msg(tb_graph_error(h) != NULL, "case %zu: no error", i);
        ck_assert_contains(tb_graph_error(h), cases[i].expect);
        tb_graph_free(h);
    }
}
END_TEST

START_TEST(names_are_unique)
{
    struct tb_node *x = tb_input(g, "image", TB_F32, shape(1, 3, 8, 8));
    tb_conv2d(g, "conv", x, 4, 3, 1, -1, 1, false);
    ck_assert_ptr_null(tb_conv2d(g, "conv", x, 4, 3, 1, -1, 1, false));
    ck_assert_contains(tb_graph_error(g), "conv.weight: the name is used twice in the graph");
}
END_TEST

START_TEST(scope_misuse_is_an_error)
{
    tb_graph_pop_scope(g);
    ck_assert_contains(tb_graph_error(g), "without a matching push");
}
END_TEST

START_TEST(inference_graph_flags)
{
    struct tb_graph *h = tb_graph_new(false);
    struct tb_node *x = tb_input(h, "image", TB_F32, shape(1, 3, 8, 8));
    tb_dropout(h, tb_batchnorm(h, "bn", x), 0.3f, false);
    ck_assert(!tb_graph_training(h));
    ck_assert_int_eq(h->ops[0].op.p.bn.training, 0);
    ck_assert_int_eq(h->ops[1].op.p.dropout.training, 0);
    tb_graph_free(h);
    ck_assert(tb_graph_training(g));
}
END_TEST

/* ------------------------------------------------------------------ schedule */

static size_t four_bytes(void *arg, const struct tb_tensor_desc *d)
{
    (void)arg;
    return tb_shape_elems(d->shape) * tb_dtype_size(d->dtype);
}

static size_t tensor_named(const struct tb_schedule *s, const char *name)
{
    for (size_t i = 0; i < tb_schedule_tensors(s); i++)
        if (strcmp(tb_schedule_tensor(s, i)->name, name) == 0)
            return i;
    ck_abort_msg("no tensor named %s in the schedule", name);
    return 0;
}

/* image -> conv1 -> relu -> conv2 -> softmax_ce(labels) */
static struct tb_schedule *small_net(struct tb_graph *h)
{
    struct tb_node *x = tb_input(h, "image", TB_F32, shape(2, 3, 8, 8));
    struct tb_node *lab = tb_input(h, "labels", TB_U8, shape(2, 1, 8, 8));
    struct tb_node *y = tb_conv2d(h, "conv1", x, 4, 3, 1, -1, 1, true);
    y = tb_relu(h, y);
    y = tb_conv2d(h, "conv2", y, 5, 1, 1, 0, 1, false);
    struct tb_node *loss = tb_softmax_ce(h, y, lab, NULL, 255, false);
    tb_graph_loss(h, "seg", loss, 1.0f);
    ck_assert_ptr_null(tb_graph_error(h));
    struct tb_schedule *s = tb_schedule_build(h, four_bytes, NULL);
    ck_assert_ptr_nonnull(s);
    return s;
}

START_TEST(schedule_orders_forward_then_reverse)
{
    struct tb_schedule *s = small_net(g);
    ck_assert_uint_eq(tb_schedule_forward_steps(s), 4);
    /* Backward: softmax_ce, conv2, relu, conv1: every op lies between a loss and a weight. */
    ck_assert_uint_eq(tb_schedule_steps(s), 8);
    ck_assert_str_eq(tb_schedule_step_name(s, 0), "conv1");
    ck_assert_str_eq(tb_schedule_step_name(s, 3), "softmax_ce3");
    ck_assert_str_eq(tb_schedule_step_name(s, 4), "softmax_ce3 (backward)");
    ck_assert_str_eq(tb_schedule_step_name(s, 7), "conv1 (backward)");
    ck_assert_ptr_null(tb_schedule_step_name(s, 8));
    tb_schedule_free(s);
}
END_TEST

START_TEST(schedule_first_and_last_use)
{
    struct tb_schedule *s = small_net(g);
    /* conv1's output feeds only relu, whose backward reads relu's output, not its input:
     * it dies at step 1. */
    const struct tb_sched_tensor *c1 = tb_schedule_tensor(s, tensor_named(s, "conv1"));
    ck_assert_int_eq(c1->kind, TB_SCHED_ACTIVATION);
    ck_assert_int_eq(c1->first_use, 0);
    ck_assert_int_eq(c1->last_use, 1);
    ck_assert_uint_eq(c1->bytes, 2 * 4 * 8 * 8 * 4);
    /* relu's output is read by conv2's backward (step 5) and relu's own (step 6). */
    const struct tb_sched_tensor *r = tb_schedule_tensor(s, tensor_named(s, "relu1"));
    ck_assert_int_eq(r->first_use, 1);
    ck_assert_int_eq(r->last_use, 6);
    /* The loss is kept past the end of the step, readable by the trainer. */
    ck_assert_int_eq(tb_schedule_tensor(s, tensor_named(s, "softmax_ce3"))->last_use, 8);
    /* conv2's output is read by the loss's backward only. */
    ck_assert_int_eq(tb_schedule_tensor(s, tensor_named(s, "conv2"))->last_use, 4);
    /* Gradients: relu's is written by conv2's backward and read by relu's. */
    const struct tb_sched_tensor *gr = tb_schedule_tensor(s, tensor_named(s, "relu1.grad"));
    ck_assert_int_eq(gr->kind, TB_SCHED_GRADIENT);
    ck_assert_int_eq(gr->first_use, 5);
    ck_assert_int_eq(gr->last_use, 6);
    const struct tb_sched_tensor *gw = tb_schedule_tensor(s, tensor_named(s, "conv1.weight.grad"));
    ck_assert_int_eq(gw->kind, TB_SCHED_PARAM_GRAD);
    ck_assert_int_eq(gw->first_use, 7);
    /* The image needs no gradient, the labels never do. */
    for (size_t i = 0; i < tb_schedule_tensors(s); i++) {
        ck_assert_str_ne(tb_schedule_tensor(s, i)->name, "image.grad");
        ck_assert_str_ne(tb_schedule_tensor(s, i)->name, "labels.grad");
    }
    /* Step 5 (conv2's backward) touches relu's output, conv2's weight, both gradients. */
    const uint32_t *ids;
    size_t n = tb_schedule_step_tensors(s, 5, &ids);
    ck_assert_uint_eq(n, 5);
    tb_schedule_free(s);
}
END_TEST

START_TEST(schedule_skips_what_no_loss_reaches)
{
    struct tb_node *x = tb_input(g, "image", TB_F32, shape(1, 3, 8, 8));
    struct tb_node *lab = tb_input(g, "labels", TB_U8, shape(1, 1, 8, 8));
    struct tb_node *used = tb_conv2d(g, "used", x, 2, 1, 1, 0, 1, false);
    struct tb_node *side = tb_conv2d(g, "side", x, 2, 1, 1, 0, 1, false);
    tb_graph_output(g, "side", side);
    tb_graph_loss(g, "seg", tb_softmax_ce(g, used, lab, NULL, 255, false), 1.0f);
    struct tb_schedule *s = tb_schedule_build(g, four_bytes, NULL);
    /* Forward runs all three ops; backward only the loss and "used". */
    ck_assert_uint_eq(tb_schedule_forward_steps(s), 3);
    ck_assert_uint_eq(tb_schedule_steps(s), 5);
    for (size_t i = 0; i < tb_schedule_tensors(s); i++)
        ck_assert_str_ne(tb_schedule_tensor(s, i)->name, "side.weight.grad");
    ck_assert_int_eq(tb_schedule_tensor(s, tensor_named(s, "side"))->last_use, 5);
    tb_schedule_free(s);
}
END_TEST

START_TEST(inference_schedule_has_no_backward)
{
    struct tb_graph *h = tb_graph_new(false);
    struct tb_schedule *s = small_net(h);
    ck_assert_uint_eq(tb_schedule_steps(s), tb_schedule_forward_steps(s));
    ck_assert_int_eq(tb_schedule_tensor(s, tensor_named(s, "conv1"))->last_use, 1);
    /* Without backward the loss is still kept past its own step. */
    ck_assert_int_eq(tb_schedule_tensor(s, tensor_named(s, "softmax_ce3"))->last_use, 4);
    tb_schedule_free(s);
    tb_graph_free(h);
}
END_TEST

/* ------------------------------------------------------------------ the op contract */

static struct tb_tensor_desc F(int n, int c, int h, int w) {
    return (struct tb_tensor_desc){ TB_F32, { n, c, h, w } };
}

static struct tb_tensor_desc
U(int n, int c, int h, int w) {
    return (struct tb_tensor_desc){ TB_U8, { n, c, h, w } };
}

static struct tb_tensor_desc B(int n, int c, int h, int w) {
    return (struct tb_tensor_desc){ TB_BF16, { n, c, h, w } };
}

/* One case of the contract: an op's inputs and parameters, and either the outputs the rule
 * must give or the start of its refusal. Every kind has a case that passes and one that
 * breaks its rule; adding a kind adds its cases here. */
struct contract_case {
    struct tb_op op;
    uint32_t nout;
    struct tb_tensor_desc out[TB_OP_MAX_OUT];
    const char *refusal; /* NULL: accepted */
};

START_TEST(op_contract_cases)
{
    struct contract_case cases[64];
    size_t n = 0;
#define ACCEPT(OP, NOUT, ...) (cases[n++] = (struct contract_case){ (OP), (NOUT), { __VA_ARGS__ }, NULL })
#define REFUSE(OP, WHY) (cases[n++] = (struct contract_case){ (OP), 0, { { 0, { 0, 0, 0, 0 } } }, (WHY) })
    struct tb_op op;
    /* conv2d: 3x3, stride 2, padding 1, dilation 1, with bias */
    op = test_op(TB_OP_CONV2D, 3, (struct tb_tensor_desc[]){ F(2, 3, 9, 8), F(5, 3, 3, 3), F(1, 5, 1, 1) });
    op.p.conv = (struct tb_conv2d_params){ 3, 3, 2, 2, 1, 1, 1, 1, 1 };
    ACCEPT(op, 1, F(2, 5, 5, 4));
    op.p.conv.has_bias = 0;
    REFUSE(op, "conv2d: has_bias = 0 with 3 inputs");
    op.p.conv.has_bias = 1;
    op.in[1] = F(5, 4, 3, 3);
    REFUSE(op, "conv2d: weight 5x4x3x3 must be Ox3x3x3 for x 2x3x9x8");
    op.in[1] = F(5, 3, 3, 3);
    op.p.conv.dil_h = op.p.conv.dil_w = 2000000000;
    REFUSE(op, "the kernel does not fit the padded input");
    /* at bf16: every float input bf16, and so is y; a weight left f32 is refused */
    op = test_op(TB_OP_CONV2D, 3, (struct tb_tensor_desc[]){ B(2, 3, 9, 8), B(5, 3, 3, 3), B(1, 5, 1, 1) });
    op.p.conv = (struct tb_conv2d_params){ 3, 3, 2, 2, 1, 1, 1, 1, 1 };
    ACCEPT(op, 1, B(2, 5, 5, 4));
    op.in[1] = F(5, 3, 3, 3);
    REFUSE(op, "conv2d: input 1 is f32, expected bf16 as input 0 (one float dtype per op)");
    /* batchnorm */
    op =
        test_op(TB_OP_BATCHNORM, 5,
                (struct tb_tensor_desc[]){ F(2, 4, 3, 3), F(1, 4, 1, 1), F(1, 4, 1, 1), F(1, 4, 1, 1), F(1, 4, 1, 1) });
    op.p.bn = (struct tb_batchnorm_params){ 1e-5f, 0.1f, 1, 0 };
    ACCEPT(op, 3, F(2, 4, 3, 3), F(1, 4, 1, 1), F(1, 4, 1, 1));
    op.in[3] = F(1, 3, 1, 1);
    REFUSE(op, "batchnorm: running_mean 1x3x1x1 must be 1x4x1x1");
    /* a bf16 x: y bf16, the statistics and parameters f32 */
    op.in[0] = B(2, 4, 3, 3);
    op.in[3] = F(1, 4, 1, 1);
    ACCEPT(op, 3, B(2, 4, 3, 3), F(1, 4, 1, 1), F(1, 4, 1, 1));
    op.in[1] = B(1, 4, 1, 1);
    REFUSE(op, "batchnorm: input 1 is bf16, expected f32");
    /* relu, sigmoid */
    op = test_op(TB_OP_RELU, 1, (struct tb_tensor_desc[]){ F(1, 2, 3, 4) });
    ACCEPT(op, 1, F(1, 2, 3, 4));
    op = test_op(TB_OP_SIGMOID, 1, (struct tb_tensor_desc[]){ U(1, 2, 3, 4) });
    REFUSE(op, "sigmoid: input 0 is u8, expected f32");
    op = test_op(TB_OP_RELU, 1, (struct tb_tensor_desc[]){ U(1, 2, 3, 4) });
    REFUSE(op, "relu: input 0 is u8, expected a float (f32, bf16 or f16)");
    /* maxpool: 3, stride 2, pad 1 */
    op = test_op(TB_OP_MAXPOOL, 1, (struct tb_tensor_desc[]){ F(1, 2, 7, 6) });
    op.p.pool = (struct tb_pool_params){ 3, 2, 1 };
    ACCEPT(op, 1, F(1, 2, 4, 3));
    op.p.pool.pad = 2;
    REFUSE(op, "maxpool: x 1x2x7x6, kernel 3, stride 2, padding 2: the window does not fit");
    /* global_avgpool, resize */
    op = test_op(TB_OP_GLOBAL_AVGPOOL, 1, (struct tb_tensor_desc[]){ F(3, 5, 7, 2) });
    ACCEPT(op, 1, F(3, 5, 1, 1));
    op = test_op(TB_OP_RESIZE, 1, (struct tb_tensor_desc[]){ F(1, 2, 3, 4) });
    op.p.resize = (struct tb_resize_params){ 9, 7, 1 };
    ACCEPT(op, 1, F(1, 2, 9, 7));
    op.p.resize.out_w = 0;
    REFUSE(op, "resize: x 1x2x3x4 to 9x0: the output needs a side >= 1");
    /* concat */
    op = test_op(TB_OP_CONCAT, 3, (struct tb_tensor_desc[]){ F(2, 1, 4, 4), F(2, 3, 4, 4), F(2, 2, 4, 4) });
    ACCEPT(op, 1, F(2, 6, 4, 4));
    op.nin = 1;
    REFUSE(op, "concat: 1 inputs; it takes 2 to 8");
    /* add, mul */
    op = test_op(TB_OP_ADD, 2, (struct tb_tensor_desc[]){ F(1, 2, 3, 4), F(1, 2, 3, 5) });
    REFUSE(op, "add: a 1x2x3x4 and b 1x2x3x5 differ in shape");
    op = test_op(TB_OP_ADD, 2, (struct tb_tensor_desc[]){ F(1, 2, 3, 4), B(1, 2, 3, 4) });
    REFUSE(op, "add: input 1 is bf16, expected f32 as input 0");
    op = test_op(TB_OP_MUL, 2, (struct tb_tensor_desc[]){ F(2, 3, 5, 7), F(2, 1, 5, 7) });
    ACCEPT(op, 1, F(2, 3, 5, 7));
    op.in[1] = F(2, 2, 5, 7);
    REFUSE(op, "mul: g 2x2x5x7 must be 2x3x5x7 or 2x1x5x7 to multiply x 2x3x5x7");
    /* dropout: channelwise mask */
    op = test_op(TB_OP_DROPOUT, 1, (struct tb_tensor_desc[]){ F(2, 3, 5, 7) });
    op.p.dropout = (struct tb_dropout_params){ 0.5f, 1, 1, 0 };
    ACCEPT(op, 2, F(2, 3, 5, 7), U(2, 3, 1, 1));
    op.p.dropout.p = 1.0f;
    REFUSE(op, "dropout: p = 1; allowed: 0 <= p < 1");
    /* cast: to any float dtype, nothing else */
    op = test_op(TB_OP_CAST, 1, (struct tb_tensor_desc[]){ F(2, 3, 5, 7) });
    op.p.cast.dtype = TB_BF16;
    ACCEPT(op, 1, B(2, 3, 5, 7));
    op.p.cast.dtype = TB_U8;
    REFUSE(op, "cast: to dtype 2 (u8): allowed f32, bf16, f16");
    /* softmax_ce, weighted */
    op = test_op(TB_OP_SOFTMAX_CE, 3, (struct tb_tensor_desc[]){ F(2, 4, 3, 3), U(2, 1, 3, 3), F(2, 4, 1, 1) });
    op.p.ce = (struct tb_ce_params){ 255, 1, 0 };
    ACCEPT(op, 1, F(1, 1, 1, 1));
    op.in[1] = U(2, 1, 3, 4);
    REFUSE(op, "softmax_ce: labels 2x1x3x4 must be 2x1x3x3 to match logits 2x4x3x3");
    op.in[0] = B(2, 4, 3, 3); /* the losses take f32 logits only */
    REFUSE(op, "softmax_ce: input 0 is bf16, expected f32");
    /* bce_logits */
    op = test_op(TB_OP_BCE_LOGITS, 2, (struct tb_tensor_desc[]){ F(2, 1, 3, 3), U(2, 1, 3, 3) });
    ACCEPT(op, 1, F(1, 1, 1, 1));
    op.in[1] = F(2, 1, 3, 3);
    REFUSE(op, "bce_logits: input 1 is f32, expected u8");
    /* class_weights, mask_labels */
    op = test_op(TB_OP_CLASS_WEIGHTS, 1, (struct tb_tensor_desc[]){ U(2, 1, 3, 3) });
    op.p.label = (struct tb_label_params){ 255, 0.0f, 19 };
    ACCEPT(op, 1, F(2, 19, 1, 1));
    op.p.label.classes = 0;
    REFUSE(op, "class_weights: labels 2x1x3x3 must be Nx1xHxW and classes (0) at least 1");
    op = test_op(TB_OP_MASK_LABELS, 2, (struct tb_tensor_desc[]){ U(2, 1, 3, 3), F(2, 1, 3, 3) });
    ACCEPT(op, 1, U(2, 1, 3, 3));
    op.in[1] = F(2, 2, 3, 3);
    REFUSE(op, "mask_labels: labels 2x1x3x3 and x 2x2x3x3 must both be Nx1xHxW");
    /* dual_task: the loss and the sample */
    op = test_op(TB_OP_DUAL_TASK, 2, (struct tb_tensor_desc[]){ F(2, 4, 3, 5), U(2, 1, 3, 5) });
    op.p.dual = (struct tb_dual_params){ 0.5f, 255, 0 };
    ACCEPT(op, 2, F(1, 1, 1, 1), F(2, 4, 3, 5));
    op.p.dual.tau = 0.0f;
    REFUSE(op, "dual_task: tau = 0; allowed: tau > 0");
    op = test_op(TB_OP_DUAL_TASK, 2, (struct tb_tensor_desc[]){ F(2, 4, 2, 5), U(2, 1, 2, 5) });
    op.p.dual = (struct tb_dual_params){ 0.5f, 255, 0 };
    REFUSE(op, "dual_task: logits 2x4x2x5: H and W must be at least 3 (the smoothing pads by reflection)");
    /* any kind: an empty dimension */
    op = test_op(TB_OP_RELU, 1, (struct tb_tensor_desc[]){ F(1, 0, 3, 4) });
    REFUSE(op, "relu: input 0 has shape 1x0x3x4: every dimension must be >= 1");
#undef ACCEPT
#undef REFUSE
    bool kind_passes[TB_OP_KIND_COUNT] = { false };
    for (size_t i = 0; i < n; i++) {
        const struct contract_case *c = &cases[i];
        struct tb_tensor_desc out[TB_OP_MAX_OUT];
        uint32_t nout;
        char why[600] = "";
        const int rc = tb_op_outputs(&c->op, out, &nout, why, sizeof why);
        if (c->refusal) {
            ck_assert_msg(rc != 0, "case %zu (%s): accepted, should be refused", i, tb_op_kind_name(c->op.kind));
            ck_assert_msg(strstr(why, c->refusal), "case %zu: '%s' lacks '%s'", i, why, c->refusal);
            continue;
        }
        ck_assert_msg(rc == 0, "case %zu: %s", i, why);
        ck_assert_uint_eq(nout, c->nout);
        kind_passes[c->op.kind] = true;
        struct tb_op full = c->op;
        full.nout = nout;
        for (uint32_t j = 0; j < nout; j++) {
            ck_assert_msg(out[j].dtype == c->out[j].dtype && tb_shape_eq(out[j].shape, c->out[j].shape),
                          "case %zu (%s): output %u is %d %dx%dx%dx%d", i, tb_op_kind_name(c->op.kind), j,
                          (int)out[j].dtype, out[j].shape.n, out[j].shape.c, out[j].shape.h, out[j].shape.w);
            full.out[j] = out[j];
        }
        /* tb_op_check takes the op whole, and refuses a wrong output or count. */
        ck_assert_msg(tb_op_check(&full, why, sizeof why) == 0, "case %zu: %s", i, why);
        full.out[0].shape.w++;
        ck_assert(tb_op_check(&full, why, sizeof why) != 0);
        ck_assert_msg(strstr(why, "output 0 is"), "%s", why);
        full.out[0].shape.w--;
        full.nout++;
        ck_assert(tb_op_check(&full, why, sizeof why) != 0);
    }
    for (int k = 1; k < TB_OP_KIND_COUNT; k++)
        if (k != TB_OP_ADD && k != TB_OP_SIGMOID)
            ck_assert_msg(kind_passes[k], "%s has no accepted case", tb_op_kind_name((enum tb_op_kind)k));
    struct tb_op none = test_op((enum tb_op_kind)TB_OP_KIND_COUNT, 0, NULL);
    struct tb_tensor_desc out[TB_OP_MAX_OUT];
    uint32_t nout;
    char why[200];
    ck_assert_int_ne(tb_op_outputs(&none, out, &nout, why, sizeof why), 0);
}
END_TEST

/* An op's cost from its shapes (tb_op_cost): a convolution's multiply-adds, forward and
 * for each gradient wanted, and the bytes its kernels cannot avoid moving; a kind that
 * makes two passes counts both; a kind without backward costs nothing there; FLOPs and
 * bytes grow with the batch as they should. */
static struct tb_op costed(enum tb_op_kind kind, uint32_t nin, const struct tb_tensor_desc *in)
{
    struct tb_op op = test_op(kind, nin, in);
    if (kind == TB_OP_BATCHNORM)
        op.p.bn = (struct tb_batchnorm_params){ 1e-5f, 0.1f, 1, 0 };
    char why[200];
    ck_assert_msg(tb_op_outputs(&op, op.out, &op.nout, why, sizeof why) == 0, "%s", why);
    return op;
}

START_TEST(op_cost_from_shapes)
{
    const struct tb_tensor_desc x = { TB_F32, { 2, 3, 8, 8 } }, w = { TB_F32, { 4, 3, 3, 3 } };
    const struct tb_tensor_desc conv_in[] = { x, w };
    struct tb_op conv = test_op(TB_OP_CONV2D, 2, conv_in);
    conv.p.conv = (struct tb_conv2d_params){ 3, 3, 1, 1, 1, 1, 1, 1, 0 };
    char why[200];
    ck_assert_msg(tb_op_outputs(&conv, conv.out, &conv.nout, why, sizeof why) == 0, "%s", why);
    struct tb_op_cost c;
    tb_op_cost(&conv, 0x3, &c);
    const double macs = 2.0 * 4 * 8 * 8 * 3 * 3 * 3; /* outputs x C x KH x KW */
    ck_assert_double_eq(c.fwd_flops, 2 * macs);
    ck_assert_double_eq(c.bwd_flops, 4 * macs);                            /* dx and dw */
    ck_assert_double_eq(c.fwd_bytes, 4.0 * (384 + 108 + 512));             /* x, w, y */
    ck_assert_double_eq(c.bwd_bytes, 4.0 * (384 + 108 + 512 + 384 + 108)); /* x, w, dy; dx, dw */
    tb_op_cost(&conv, 0x2, &c);                                            /* the first convolution: no data gradient */
    ck_assert_double_eq(c.bwd_flops, 2 * macs);
    ck_assert_double_eq(c.bwd_bytes, 4.0 * (384 + 108 + 512 + 108));

    /* batch norm in training reads x twice (statistics, then normalising) */
    const struct tb_tensor_desc vec = { TB_F32, { 1, 3, 1, 1 } };
    const struct tb_tensor_desc bn_in[] = { x, vec, vec, vec, vec };
    struct tb_op bn = costed(TB_OP_BATCHNORM, 5, bn_in);
    struct tb_op_cost train_c, infer_c;
    bn.p.bn.training = 1;
    tb_op_cost(&bn, 0x7, &train_c);
    bn.p.bn.training = 0;
    tb_op_cost(&bn, 0, &infer_c);
    ck_assert_double_eq(train_c.fwd_bytes - infer_c.fwd_bytes, 4.0 * 384);
    ck_assert(train_c.fwd_flops > infer_c.fwd_flops);

    /* a concatenation moves bytes and computes nothing */
    const struct tb_tensor_desc cat_in[] = { x, x };
    struct tb_op cat = costed(TB_OP_CONCAT, 2, cat_in);
    tb_op_cost(&cat, 0x3, &c);
    ck_assert_double_eq(c.fwd_flops, 0);
    ck_assert_double_eq(c.fwd_bytes, 4.0 * 4 * 384);
    ck_assert_double_eq(c.bwd_bytes, 4.0 * 4 * 384); /* dy; dx0, dx1 */

    /* no backward: nothing there, whatever is asked */
    const struct tb_tensor_desc labels = { TB_U8, { 2, 1, 8, 8 } };
    struct tb_op cw = test_op(TB_OP_CLASS_WEIGHTS, 1, &labels);
    cw.p.label.classes = 5;
    ck_assert_msg(tb_op_outputs(&cw, cw.out, &cw.nout, why, sizeof why) == 0, "%s", why);
    tb_op_cost(&cw, 0x1, &c);
    ck_assert(c.fwd_bytes == 128 + 2 * 5 * 4 && c.bwd_flops == 0 && c.bwd_bytes == 0);

    /* twice the batch, twice the cost, for every kind the engine builds here */
    const struct tb_tensor_desc x2 = { TB_F32, { 4, 3, 8, 8 } };
    const struct tb_tensor_desc relu_in[] = { x }, relu_in2[] = { x2 };
    struct tb_op r1 = costed(TB_OP_RELU, 1, relu_in), r2 = costed(TB_OP_RELU, 1, relu_in2);
    struct tb_op_cost c1, c2;
    tb_op_cost(&r1, 0x1, &c1);
    tb_op_cost(&r2, 0x1, &c2);
    ck_assert(c2.fwd_flops == 2 * c1.fwd_flops && c2.fwd_bytes == 2 * c1.fwd_bytes && c2.bwd_bytes == 2 * c1.bwd_bytes);

    /* an unknown kind costs nothing (and does not crash) */
    struct tb_op none = test_op((enum tb_op_kind)TB_OP_KIND_COUNT, 0, NULL);
    tb_op_cost(&none, 0, &c);
    ck_assert(c.fwd_flops == 0 && c.fwd_bytes == 0 && c.bwd_flops == 0 && c.bwd_bytes == 0);
}
END_TEST

/* Every op kind has its whole row (op_kinds.c): a name, an arity and input dtypes, a
 * shape rule and a cost; its gradient and backward-read masks name only inputs and
 * outputs it can have; and no two kinds share a name. */
START_TEST(every_op_kind_has_its_row)
{
    ck_assert_ptr_null(tb_op_row((enum tb_op_kind)0));
    ck_assert_ptr_null(tb_op_row((enum tb_op_kind)TB_OP_KIND_COUNT));
    for (int kind = 1; kind < TB_OP_KIND_COUNT; kind++) {
        const struct tb_op_row *r = tb_op_row((enum tb_op_kind)kind);
        ck_assert_msg(r && r->name, "op kind %d has no row", kind);
        ck_assert_msg(r->min_in >= 1 && r->min_in <= r->max_in && r->max_in <= TB_OP_MAX_IN, "%s: inputs %u..%u",
                      r->name, r->min_in, r->max_in);
        ck_assert_msg(r->dtype[0] != 0, "%s: no input dtype", r->name);
        ck_assert_msg(r->shape && r->cost, "%s: no shape rule or no cost", r->name);
        const uint32_t in_mask = r->max_in >= 32 ? UINT32_MAX : (1u << r->max_in) - 1;
        if (r->grad_in != TB_OP_ALL)
            ck_assert_msg((r->grad_in & ~in_mask) == 0, "%s: gradient for an input it cannot have", r->name);
        if (r->bwd_in != TB_OP_ALL)
            ck_assert_msg((r->bwd_in & ~in_mask) == 0, "%s: backward reads an input it cannot have", r->name);
        ck_assert_msg((r->grad_out | r->bwd_out) < (1u << TB_OP_MAX_OUT), "%s: an output past TB_OP_MAX_OUT", r->name);
        ck_assert_str_eq(tb_op_kind_name((enum tb_op_kind)kind), r->name);
        for (int other = 1; other < kind; other++)
            ck_assert_str_ne(tb_op_row((enum tb_op_kind)other)->name, r->name);
    }
}
END_TEST

/* The op of graph gr whose output is node y. */
static const struct tb_op *producer(const struct tb_graph *gr, const struct tb_node *y)
{
    ck_assert_ptr_nonnull(y);
    ck_assert_int_ge(y->producer, 0);
    return &gr->ops[y->producer].op;
}

/* [train] precision = bf16 (tb_graph_set_precision): each op's float inputs cast by its
 * kind's autocast class (op_kinds.c): a convolution's input, weight and bias to bf16, the
 * parameters themselves still f32; batch norm and relu follow their input; a gate's
 * sigmoid and the loss cast back to f32; a product of bf16 and f32 runs in f32; an output
 * the core reads is f32. At fp32 the same network has no cast at all. */
START_TEST(autocast_policy)
{
    for (int bf16 = 0; bf16 < 2; bf16++) {
        struct tb_graph *gr = tb_graph_new(true);
        tb_graph_set_precision(gr, bf16 ? TB_BF16 : TB_F32);
        struct tb_node *img = tb_input(gr, "image", TB_F32, (struct tb_shape){ 2, 3, 8, 8 });
        struct tb_node *lab = tb_input(gr, "labels", TB_U8, (struct tb_shape){ 2, 1, 8, 8 });
        struct tb_node *conv = tb_conv2d(gr, "conv1", img, 16, 3, 1, -1, 1, true);
        struct tb_node *bn = tb_batchnorm(gr, "bn1", conv);
        struct tb_node *r = tb_relu(gr, bn);
        struct tb_node *gate = tb_sigmoid(gr, tb_conv2d(gr, "gate", r, 1, 1, 1, 0, 1, true));
        struct tb_node *m = tb_mul(gr, r, gate);
        struct tb_node *logits = tb_conv2d(gr, "head", m, 4, 1, 1, 0, 1, false);
        struct tb_node *loss = tb_softmax_ce(gr, logits, lab, NULL, 255, false);
        tb_graph_loss(gr, "seg", loss, 1.0f);
        tb_graph_output(gr, "pred", logits);
        ck_assert_msg(!tb_graph_error(gr), "%s", tb_graph_error(gr));
        const enum tb_dtype low = bf16 ? TB_BF16 : TB_F32;
        size_t casts = 0;
        for (size_t k = 0; k < gr->nops; k++) {
            const struct tb_op *op = &gr->ops[k].op;
            casts += op->kind == TB_OP_CAST;
            if (op->kind == TB_OP_CONV2D)
                for (uint32_t i = 0; i < op->nin; i++)
                    ck_assert_msg(op->in[i].dtype == low, "%s: input %u is %s", gr->ops[k].name, i,
                                  tb_dtype_name(op->in[i].dtype));
        }
        ck_assert_uint_eq(casts, bf16 ? 11 : 0); /* 3 inputs, 5 parameters, r up, logits down twice */
        ck_assert_int_eq(producer(gr, bn)->in[0].dtype, low);
        ck_assert_int_eq(bn->desc.dtype, low);
        ck_assert_int_eq(producer(gr, bn)->in[1].dtype, TB_F32); /* gamma */
        ck_assert_int_eq(r->desc.dtype, low);
        ck_assert_int_eq(producer(gr, gate)->in[0].dtype, TB_F32);
        ck_assert_int_eq(producer(gr, m)->in[0].dtype, TB_F32);
        ck_assert_int_eq(m->desc.dtype, TB_F32);
        ck_assert_int_eq(producer(gr, loss)->in[0].dtype, TB_F32);
        ck_assert_int_eq(gr->outputs[0].x->desc.dtype, TB_F32);
        for (size_t i = 0; i < gr->nnodes; i++)
            if (gr->nodes[i]->kind == TB_NODE_PARAM || gr->nodes[i]->kind == TB_NODE_BUFFER)
                ck_assert_int_eq(gr->nodes[i]->desc.dtype, TB_F32);
        /* every op's id is its place, after the casts moved them */
        for (size_t k = 0; k < gr->nops; k++)
            ck_assert_uint_eq(gr->ops[k].op.id, k);
        tb_graph_free(gr);
    }
}
END_TEST

/* trainbig.ini(5)'s [train] precision lists each op kind (in bold) under its autocast
 * class, as its row in op_kinds.c gives it, and under no other. */
START_TEST(autocast_classes_documented)
{
    const char *src = getenv("TB_SRCDIR");
    ck_assert_msg(src, "run through make check (TB_SRCDIR unset)");
    char path[4096];
    snprintf(path, sizeof path, "%s/doc/trainbig.ini.5", src);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f, "%s", path);
    static char man[1 << 20];
    const size_t n = fread(man, 1, sizeof man - 1, f);
    fclose(f);
    man[n] = '\0';
    static const char *const heads[3] = { "\n.B follows\n", "\n.B 16\\-bit\n", "\n.B f32\n" };
    char *part[3];
    for (int c = 0; c < 3; c++) {
        char *at = strstr(man, heads[c]);
        ck_assert_msg(at, "%s: no %s class under [train] precision", path, heads[c] + 1);
        const char *end = strstr(at + 1, "\n.TP");
        const char *re = strstr(at + 1, "\n.RE");
        if (!end || (re && re < end))
            end = re;
        ck_assert_ptr_nonnull(end);
        part[c] = strndup(at, (size_t)(end - at));
    }
    for (int kind = 1; kind < TB_OP_KIND_COUNT; kind++) {
        const struct tb_op_row *k = tb_op_row((enum tb_op_kind)kind);
        for (int c = 0; c < 3; c++) {
            char word[64]; /* each kind in bold: \fBname\fP */
            snprintf(word, sizeof word, "\\fB%s\\fP", k->name);
            const bool found = strstr(part[c], word) != NULL;
            ck_assert_msg(found == ((int)k->autocast == c), "%s: %s %s listed under %s", path, k->name,
                          found ? "wrongly" : "not", heads[c] + 4);
        }
    }
    for (int c = 0; c < 3; c++)
        free(part[c]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("graph");
    TCase *tc = tcase_create("builder");
    tcase_add_checked_fixture(tc, new_training_graph, free_graph);
    tcase_add_test(tc, conv_shapes);
    tcase_add_test(tc, other_shapes);
    tcase_add_test(tc, parameter_names_follow_scopes);
    tcase_add_test(tc, mismatch_names_op_and_shapes);
    tcase_add_test(tc, sixteen_bit_input_refused);
    tcase_add_test(tc, each_op_checks_its_inputs);
    tcase_add_test(tc, names_are_unique);
    tcase_add_test(tc, scope_misuse_is_an_error);
    tcase_add_test(tc, inference_graph_flags);
    tcase_add_test(tc, op_contract_cases);
    tcase_add_test(tc, op_cost_from_shapes);
    tcase_add_test(tc, every_op_kind_has_its_row);
    tcase_add_test(tc, autocast_policy);
    tcase_add_test(tc, autocast_classes_documented);
    suite_add_tcase(s, tc);
    tc = tcase_create("schedule");
    tcase_add_checked_fixture(tc, new_training_graph, free_graph);
    tcase_add_test(tc, schedule_orders_forward_then_reverse);
    tcase_add_test(tc, schedule_first_and_last_use);
    tcase_add_test(tc, schedule_skips_what_no_loss_reaches);
    tcase_add_test(tc, inference_schedule_has_no_backward);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
