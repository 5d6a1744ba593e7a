/* check_exec: the executor on the CPU backend: memory freed at last use, gradients of
 * tensors used twice accumulated, the whole backward pass against finite differences of
 * the objective, a small net that overfits one batch, determinism, shared parameters,
 * and a clean out-of-memory error. */
#include "config.h"

#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/trainbig.h>

#include "core/engine/engine_internal.h"
#include "core/engine/exec_internal.h"
#include "opcheck.h"
#include "testutil.h"

static struct test_backend b;
static struct tb_engine e;

/* The backend under test: cpu, or sim (TB_TEST_BACKEND=sim, tests/exec-sim.test), which
 * runs the cases that read no value; its keys are the cpu's but threads. */
static const char *backend_name(void)
{
    const char *name = getenv("TB_TEST_BACKEND");
    return name && *name ? name : "cpu";
}

static bool on_sim(void)
{
    return strcmp(backend_name(), "sim") == 0;
}

static const char *keys_for_backend(const char *keys)
{
    static const char threads[] = "threads = 2\n";
    return on_sim() && strncmp(keys, threads, sizeof threads - 1) == 0 ? keys + sizeof threads - 1 : keys;
}

static void open_engine_keys(const char *keys)
{
    setenv("TRAINBIG_LOG", "error", 1);
    test_backend_open(&b, backend_name(), keys_for_backend(keys));
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_engine_init(&e, b.h->p, b.ctx, 0, 7, &err) == TB_OK, "%s", err.msg);
}

static void open_engine(void)
{
    open_engine_keys("threads = 2\n");
}

static void close_engine(void)
{
    tb_engine_fini(&e);
    test_backend_close(&b);
}

static struct tb_shape shape(int n, int c, int h, int w)
{
    struct tb_shape s = { n, c, h, w };
    return s;
}

static size_t tensor_named(const struct tb_schedule *s, const char *name)
{
    for (size_t i = 0; i < tb_schedule_tensors(s); i++)
        if (strcmp(tb_schedule_tensor(s, i)->name, name) == 0)
            return i;
    ck_abort_msg("no tensor %s", name);
    return 0;
}

/* Inputs for an N x C x H x W image batch and its labels (K classes, by quadrant). */
static void feed(struct tb_exec *x, int n, int c, int h, int w, int k, uint64_t seed)
{
    size_t pix = (size_t)n * h * w;
    float *img = malloc(pix * c * sizeof *img);
    uint8_t *lab = malloc(pix);
    test_random(img, pix * c, seed, -1.0f, 1.0f);
    for (int i = 0; i < n; i++)
        for (int y = 0; y < h; y++)
            for (int xx = 0; xx < w; xx++) {
                size_t p = ((size_t)i * h + y) * w + xx;
                lab[p] = (uint8_t)(((y >= h / 2) * 2 + (xx >= w / 2) + i) % k);
                /* Make the classes visible in the image, so the net can learn them. */
                img[((size_t)i * c + lab[p] % c) * h * w + (size_t)y * w + xx] += 1.5f;
            }
    lab[0] = 255; /* one ignored pixel */
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_exec_set_input(x, "image", img, &err) == TB_OK, "%s", err.msg);
    ck_assert_msg(tb_exec_set_input(x, "labels", lab, &err) == TB_OK, "%s", err.msg);
    free(img);
    free(lab);
}

/* conv 3x3 -> BN -> ReLU -> conv 3x3 -> ReLU -> conv 1x1 to K classes -> CE */
static struct tb_graph *small_net(bool training, int n, int k)
{
    struct tb_graph *g = tb_graph_new(training);
    struct tb_node *x = tb_input(g, "image", TB_F32, shape(n, 3, 12, 10));
    struct tb_node *lab = tb_input(g, "labels", TB_U8, shape(n, 1, 12, 10));
    x = tb_relu(g, tb_batchnorm(g, "bn1", tb_conv2d(g, "conv1", x, 8, 3, 1, -1, 1, false)));
    x = tb_relu(g, tb_conv2d(g, "conv2", x, 8, 3, 1, -1, 1, true));
    x = tb_conv2d(g, "head", x, k, 1, 1, 0, 1, true);
    tb_graph_output(g, "logits", x);
    tb_graph_loss(g, "seg", tb_softmax_ce(g, x, lab, NULL, 255, false), 1.0f);
    ck_assert_msg(!tb_graph_error(g), "%s", tb_graph_error(g));
    return g;
}

static float step(struct tb_exec *x, uint64_t it, float lr, bool update)
{
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_exec_forward(x, it, &err) == TB_OK, "%s", err.msg);
    float loss;
    ck_assert_msg(tb_exec_read(x, "seg", &loss, &err) == TB_OK, "%s", err.msg);
    if (update) {
        ck_assert_msg(tb_exec_backward(x, &err) == TB_OK, "%s", err.msg);
        ck_assert_msg(tb_sgd_step(&e, lr, 0.9f, 1e-4f, &err) == TB_OK, "%s", err.msg);
    }
    return loss;
}

/* ------------------------------------------------------------------ liveness */

START_TEST(activations_freed_at_last_use)
{
    struct tb_graph *g = small_net(true, 2, 4);
    struct tb_exec *x;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_exec_create(&e, g, &x, &err) == TB_OK, "%s", err.msg);
    const struct tb_schedule *s = tb_exec_schedule(x);
    feed(x, 2, 3, 12, 10, 4, 1);
    ck_assert_int_eq(tb_exec_forward(x, 0, &err), TB_OK);
    /* conv1's output was read by bn1's forward and backward: still there after forward;
     * relu's input (bn1's output) is not read by relu's backward: gone. */
    ck_assert(tb_exec_resident(x, tensor_named(s, "conv1")));
    ck_assert(!tb_exec_resident(x, tensor_named(s, "bn1")));
    ck_assert(tb_exec_resident(x, tensor_named(s, "relu2"))); /* read by its own backward */
    ck_assert(tb_exec_resident(x, tensor_named(s, "head")));  /* an output: kept */
    ck_assert_int_eq(tb_exec_backward(x, &err), TB_OK);
    /* After backward only outputs and losses remain, and parameters' gradients. */
    for (size_t i = 0; i < tb_schedule_tensors(s); i++) {
        const struct tb_sched_tensor *t = tb_schedule_tensor(s, i);
        bool keep = strcmp(t->name, "head") == 0 || strcmp(t->name, "softmax_ce6") == 0;
        if (t->kind == TB_SCHED_ACTIVATION || t->kind == TB_SCHED_GRADIENT)
            ck_assert_msg(tb_exec_resident(x, i) == keep, "%s resident = %d", t->name, tb_exec_resident(x, i));
    }
    /* Nothing stays pinned between steps. */
    for (size_t i = 0; i < tb_schedule_tensors(s); i++)
        ck_assert_uint_eq(tb_exec_pins(x, i), 0);
    /* Every step was timed. */
    for (size_t i = 0; i < tb_schedule_steps(s); i++)
        ck_assert_msg(tb_exec_step_seconds(x)[i] > 0, "step %s not timed", tb_schedule_step_name(s, i));
    /* A second step reuses the allocations pattern: each activation allocated once more. */
    size_t c1 = tensor_named(s, "conv1");
    ck_assert_uint_eq(tb_exec_allocations(x, c1), 1);
    ck_assert_int_eq(tb_exec_forward(x, 1, &err), TB_OK);
    ck_assert_uint_eq(tb_exec_allocations(x, c1), 2);
    tb_exec_free(x);
    tb_graph_free(g);
}
END_TEST

/* ------------------------------------------------------------------ gradients */

/* The objective's derivative with respect to some elements of parameter `name`, by central
 * differences through the whole executor, against the gradient backward left. */
static void check_param_grad(struct tb_exec *x, const char *name, double tol)
{
    struct tb_param *p = tb_engine_find_param(&e, name);
    ck_assert_ptr_nonnull(p);
    size_t n = tb_shape_elems(p->value.desc.shape);
    float *v = malloc(n * sizeof *v), *gr = malloc(n * sizeof *gr);
    test_download(&b, &p->value, v);
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_exec_forward(x, 0, &err), TB_OK);
    ck_assert_int_eq(tb_exec_backward(x, &err), TB_OK);
    test_download(&b, &p->grad, gr);
    for (size_t i = 0; i<n; i += n> 6 ? n / 6 : 1) {
        float keep = v[i];
        const float eps = 1e-2f;
        v[i] = keep + eps;
        test_upload(&b, &p->value, v);
        double lp = step(x, 0, 0, false);
        v[i] = keep - eps;
        test_upload(&b, &p->value, v);
        double lm = step(x, 0, 0, false);
        v[i] = keep;
        test_upload(&b, &p->value, v);
        double numeric = (lp - lm) / (2 * eps);
        ck_assert_msg(fabs(gr[i] - numeric) <= tol + tol * fabs(numeric), "%s[%zu]: backward %.6g, numeric %.6g", name,
                      i, (double)gr[i], numeric);
    }
    free(v);
    free(gr);
}

START_TEST(tensor_used_twice_accumulates)
{
    /* h feeds an add with itself and a mul: its gradient has three contributions. */
    struct tb_graph *g = tb_graph_new(true);
    struct tb_node *img = tb_input(g, "image", TB_F32, shape(2, 3, 6, 5));
    struct tb_node *lab = tb_input(g, "labels", TB_U8, shape(2, 1, 6, 5));
    struct tb_node *h = tb_conv2d(g, "conv", img, 3, 3, 1, -1, 1, true);
    struct tb_node *z = tb_add(g, h, h);
    struct tb_node *gate = tb_sigmoid(g, tb_conv2d(g, "gate", img, 1, 1, 1, 0, 1, false));
    z = tb_add(g, z, tb_mul(g, h, gate));
    tb_graph_loss(g, "seg", tb_softmax_ce(g, z, lab, NULL, 255, false), 1.0f);
    ck_assert_ptr_null(tb_graph_error(g));
    struct tb_exec *x;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_exec_create(&e, g, &x, &err) == TB_OK, "%s", err.msg);
    feed(x, 2, 3, 6, 5, 3, 2);
    check_param_grad(x, "conv.weight", 5e-3);
    check_param_grad(x, "conv.bias", 5e-3);
    check_param_grad(x, "gate.weight", 5e-3);
    tb_exec_free(x);
    tb_graph_free(g);
}
END_TEST

START_TEST(whole_net_gradients)
{
    struct tb_graph *g = small_net(true, 2, 3);
    struct tb_exec *x;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_exec_create(&e, g, &x, &err) == TB_OK, "%s", err.msg);
    feed(x, 2, 3, 12, 10, 3, 3);
    check_param_grad(x, "conv1.weight", 1e-2);
    check_param_grad(x, "bn1.weight", 1e-2);
    check_param_grad(x, "conv2.bias", 1e-2);
    check_param_grad(x, "head.weight", 1e-2);
    tb_exec_free(x);
    tb_graph_free(g);
}
END_TEST

START_TEST(many_parameters)
{
    /* More parameters than the engine's first table holds (64): gradients must still land
     * on the parameters that were created first. */
    struct tb_graph *g = tb_graph_new(true);
    struct tb_node *y = tb_input(g, "image", TB_F32, shape(1, 3, 4, 4));
    struct tb_node *lab = tb_input(g, "labels", TB_U8, shape(1, 1, 4, 4));
    for (int i = 0; i < 40; i++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", i);
        y = tb_conv2d(g, name, y, 3, 1, 1, 0, 1, true);
    }
    tb_graph_loss(g, "seg", tb_softmax_ce(g, y, lab, NULL, 255, false), 1.0f);
    ck_assert_ptr_null(tb_graph_error(g));
    struct tb_exec *x;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_exec_create(&e, g, &x, &err) == TB_OK, "%s", err.msg);
    ck_assert_uint_eq(e.nparams, 80);
    feed(x, 1, 3, 4, 4, 3, 11);
    check_param_grad(x, "c0.bias", 5e-3);
    check_param_grad(x, "c39.weight", 5e-3);
    tb_exec_free(x);
    tb_graph_free(g);
}
END_TEST

START_TEST(weighted_losses_sum)
{
    /* Two losses with weights 1 and 0.25 on one head: the gradient is their weighted sum,
     * which finite differences of the weighted objective check. */
    struct tb_graph *g = tb_graph_new(true);
    struct tb_node *img = tb_input(g, "image", TB_F32, shape(1, 3, 6, 6));
    struct tb_node *lab = tb_input(g, "labels", TB_U8, shape(1, 1, 6, 6));
    struct tb_node *y = tb_conv2d(g, "conv", img, 3, 3, 1, -1, 1, false);
    struct tb_node *ce = tb_softmax_ce(g, y, lab, NULL, 255, false);
    tb_graph_loss(g, "seg", ce, 1.0f);
    tb_graph_loss(g, "seg_again", ce, 0.25f);
    struct tb_exec *x;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_exec_create(&e, g, &x, &err) == TB_OK, "%s", err.msg);
    feed(x, 1, 3, 6, 6, 3, 4);
    struct tb_param *p = tb_engine_find_param(&e, "conv.weight");
    float g1[81], v[81];
    ck_assert_int_eq(tb_exec_forward(x, 0, &err), TB_OK);
    ck_assert_int_eq(tb_exec_backward(x, &err), TB_OK);
    test_download(&b, &p->grad, g1);
    test_download(&b, &p->value, v);
    /* d(1.25 * ce)/dw, numerically, at one element. */
    float keep = v[10];
    v[10] = keep + 1e-2f;
    test_upload(&b, &p->value, v);
    double lp = step(x, 0, 0, false);
    v[10] = keep - 1e-2f;
    test_upload(&b, &p->value, v);
    double lm = step(x, 0, 0, false);
    double numeric = 1.25 * (lp - lm) / 2e-2;
    ck_assert_msg(fabs(g1[10] - numeric) < 5e-3 + 5e-3 * fabs(numeric), "backward %g, numeric %g", (double)g1[10],
                  numeric);
    tb_exec_free(x);
    tb_graph_free(g);
}
END_TEST

START_TEST(unreached_parameter_gets_zero_gradient)
{
    struct tb_graph *g = tb_graph_new(true);
    struct tb_node *img = tb_input(g, "image", TB_F32, shape(1, 3, 6, 6));
    struct tb_node *lab = tb_input(g, "labels", TB_U8, shape(1, 1, 6, 6));
    struct tb_node *y = tb_conv2d(g, "used", img, 3, 1, 1, 0, 1, false);
    tb_graph_output(g, "side", tb_conv2d(g, "side", img, 2, 1, 1, 0, 1, false));
    tb_graph_loss(g, "seg", tb_softmax_ce(g, y, lab, NULL, 255, false), 1.0f);
    struct tb_exec *x;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_exec_create(&e, g, &x, &err) == TB_OK, "%s", err.msg);
    feed(x, 1, 3, 6, 6, 3, 5);
    ck_assert_int_eq(tb_exec_forward(x, 0, &err), TB_OK);
    ck_assert_int_eq(tb_exec_backward(x, &err), TB_OK);
    ck_assert_ptr_nonnull(tb_engine_find_param(&e, "used.weight")->grad.data);
    /* No gradient at all for "side": SGD leaves it alone, as PyTorch does with grad None. */
    ck_assert_ptr_null(tb_engine_find_param(&e, "side.weight")->grad.data);
    tb_exec_free(x);
    tb_graph_free(g);
}
END_TEST

/* ------------------------------------------------------------------ training */

START_TEST(small_net_overfits_one_batch)
{
    struct tb_graph *g = small_net(true, 2, 4);
    struct tb_exec *x;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_exec_create(&e, g, &x, &err) == TB_OK, "%s", err.msg);
    feed(x, 2, 3, 12, 10, 4, 6);
    float first = step(x, 0, 0.05f, true), last = first;
    int it = 1;
    for (; it < 200 && last > 0.1f * first; it++)
        last = step(x, (uint64_t)it, tb_lr_poly(0.05, (uint64_t)it, 200, 1.0), true);
    ck_assert_msg(last <= 0.1f * first, "loss %g -> %g after %d steps: not down by 90%%", (double)first, (double)last,
                  it);
    tb_exec_free(x);
    tb_graph_free(g);
}
END_TEST

static void losses_of_run(float *out, int n)
{
    struct tb_graph *g = small_net(true, 2, 4);
    struct tb_exec *x;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_exec_create(&e, g, &x, &err) == TB_OK, "%s", err.msg);
    feed(x, 2, 3, 12, 10, 4, 8);
    for (int i = 0; i < n; i++)
        out[i] = step(x, (uint64_t)i, 0.05f, true);
    tb_exec_free(x);
    tb_graph_free(g);
}

START_TEST(runs_are_bit_identical)
{
    float a[4], c[4];
    losses_of_run(a, 4);
    tb_engine_fini(&e); /* fresh parameters from the same seed */
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_engine_init(&e, b.h->p, b.ctx, 0, 7, &err), TB_OK);
    losses_of_run(c, 4);
    ck_assert_int_eq(memcmp(a, c, sizeof a), 0);
    ck_assert(a[3] != a[0]); /* it did train */
}
END_TEST

START_TEST(parameters_enumerable_by_name)
{
    struct tb_graph *g = small_net(true, 2, 4);
    struct tb_exec *x;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_exec_create(&e, g, &x, &err) == TB_OK, "%s", err.msg);
    feed(x, 2, 3, 12, 10, 4, 12);
    step(x, 0, 0.01f, true);
    /* conv1.weight, bn1.{weight,bias,running_mean,running_var}, conv2.{weight,bias},
     * head.{weight,bias}: 9, each trainable one with its gradient and momentum. */
    ck_assert_uint_eq(tb_engine_param_count(&e), 9);
    int trainable = 0, buffers = 0;
    for (size_t i = 0; i < tb_engine_param_count(&e); i++) {
        const struct tb_param *p = tb_engine_param_at(&e, i);
        ck_assert_ptr_eq(tb_engine_find_param(&e, p->name), p);
        if (p->trainable) {
            trainable++;
            ck_assert_msg(p->grad.data && p->momentum.data, "%s lacks its gradient or momentum", p->name);
        } else {
            buffers++;
            ck_assert_msg(strstr(p->name, "running_"), "%s is a buffer", p->name);
            ck_assert_ptr_null(p->momentum.data);
        }
    }
    ck_assert_int_eq(trainable, 7);
    ck_assert_int_eq(buffers, 2);
    ck_assert_ptr_null(tb_engine_param_at(&e, 9));
    tb_exec_free(x);
    tb_graph_free(g);
}
END_TEST

/* small_net's training and inference graphs with their executors on the one engine:
 * they share its parameters. */
struct exec_pair {
    struct tb_graph *train, *infer;
    struct tb_exec *xt, *xi;
};

static void open_pair(struct exec_pair *p)
{
    p->train = small_net(true, 2, 4);
    p->infer = small_net(false, 2, 4);
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_exec_create(&e, p->train, &p->xt, &err) == TB_OK, "%s", err.msg);
    ck_assert_msg(tb_exec_create(&e, p->infer, &p->xi, &err) == TB_OK, "%s", err.msg);
}

static void close_pair(struct exec_pair *p)
{
    tb_exec_free(p->xt);
    tb_exec_free(p->xi);
    tb_graph_free(p->train);
    tb_graph_free(p->infer);
}

START_TEST(inference_graph_shares_parameters)
{
    struct exec_pair p;
    open_pair(&p);
    struct tb_exec *xt = p.xt, *xi = p.xi;
    struct tb_err err;
    tb_err_clear(&err);
    feed(xt, 2, 3, 12, 10, 4, 9);
    feed(xi, 2, 3, 12, 10, 4, 9);
    float before = step(xi, 0, 0, false);
    for (int i = 0; i < 20; i++)
        step(xt, (uint64_t)i, 0.05f, true);
    float after = step(xi, 0, 0, false);
    /* Training moved the shared weights and the running statistics the inference graph
     * normalises with: its loss on the training batch fell. */
    ck_assert_msg(after < before, "inference loss %g -> %g", (double)before, (double)after);
    ck_assert_int_eq(tb_exec_backward(xi, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "inference");
    close_pair(&p);
}
END_TEST

/* The device's memory in use, less the scratch the backend keeps between ops (its own,
 * shared by every executor, and given up whenever room is needed). */
static void held_apart_from_scratch(struct tb_mem_stats *st)
{
    if (b.ops.backend->release_scratch)
        b.ops.backend->release_scratch(b.ctx, 0);
    b.ops.backend->mem_stats(b.ctx, 0, st);
}

/* The bytes of x's inputs, from its schedule. */
static uint64_t input_bytes(const struct tb_exec *x)
{
    const struct tb_schedule *s = tb_exec_schedule(x);
    uint64_t sum = 0;
    for (size_t i = 0; i < tb_schedule_tensors(s); i++)
        if (tb_schedule_tensor(s, i)->kind == TB_SCHED_INPUT)
            sum += tb_schedule_tensor(s, i)->bytes;
    return sum;
}

/* Validation's executor sits idle while training's runs, and the other way round: each
 * gives back what its last run left and its inputs, and is the same after. */
START_TEST(a_released_executor_holds_no_device_memory)
{
    struct exec_pair p;
    open_pair(&p);
    struct tb_exec *xt = p.xt, *xi = p.xi;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_sgd_prepare(&e, &err) == TB_OK, "%s", err.msg);
    struct tb_mem_stats made, idle, again;
    held_apart_from_scratch(&made);
    const uint64_t inputs = input_bytes(xt) + input_bytes(xi); /* image and labels, twice */

    feed(xi, 2, 3, 12, 10, 4, 9);
    step(xi, 0, 0, false);
    float logits[2 * 4 * 12 * 10], logits2[2 * 4 * 12 * 10];
    ck_assert_msg(tb_exec_read(xi, "logits", logits, &err) == TB_OK, "%s", err.msg);
    tb_exec_release(xi);
    tb_exec_release(xt);
    held_apart_from_scratch(&idle);
    /* What is left is the engine's: parameters, gradients, momentum. */
    ck_assert_uint_ge(made.in_use - idle.in_use, inputs);
    ck_assert_uint_le(made.in_use - idle.in_use, inputs + 4 * 512); /* blocks round up */

    /* A forward with inputs given back and not set again is refused, naming the input. */
    ck_assert_int_eq(tb_exec_forward(xi, 0, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "input 'image' has not been set");

    /* Set again, the executor computes what it did; released, it holds nothing again. */
    feed(xi, 2, 3, 12, 10, 4, 9);
    step(xi, 0, 0, false);
    ck_assert_msg(tb_exec_read(xi, "logits", logits2, &err) == TB_OK, "%s", err.msg);
    ck_assert(memcmp(logits, logits2, sizeof logits) == 0);
    tb_exec_release(xi);
    feed(xt, 2, 3, 12, 10, 4, 9);
    step(xt, 0, 0.05f, true);
    tb_exec_release(xt);
    held_apart_from_scratch(&again);
    ck_assert_uint_eq(again.in_use, idle.in_use);
    close_pair(&p);
}
END_TEST

/* ------------------------------------------------------------------ errors */

static void open_tiny_engine(void)
{
    open_engine_keys("threads = 2\ndevice_memory = 200K\n");
}

START_TEST(out_of_memory_is_reported)
{
    struct tb_graph *g = tb_graph_new(true);
    struct tb_node *img = tb_input(g, "image", TB_F32, shape(1, 3, 64, 64));
    struct tb_node *y = tb_conv2d(g, "wide", img, 32, 3, 1, -1, 1, false);
    tb_graph_output(g, "y", y);
    struct tb_exec *x = NULL;
    struct tb_err err;
    tb_err_clear(&err);
    int rc = tb_exec_create(&e, g, &x, &err);
    if (rc == TB_OK)
        rc = tb_exec_forward(x, 0, &err);
    ck_assert_int_eq(rc, TB_ERR_NOMEM);
    ck_assert_contains(err.msg, "out of device memory at wide: wide needs 0.5 MiB");
    ck_assert_contains(err.msg, "the device has 0.2 MiB");
    ck_assert_contains(err.msg, "largest live: image 0.0 MiB");
    ck_assert_contains(err.msg, "[backend] device_memory");
    tb_exec_free(x);
    tb_graph_free(g);
}
END_TEST

/* A policy that counts bytes only: it moves tensors out (lowest index first) until the
 * free bytes would hold the request, whether or not they are one block. */
static uint64_t bytes_only_largest_ask;

static int bytes_only_make_room(void *ctx, struct tb_swap_mem *m, size_t step, uint64_t bytes, struct tb_err *err)
{
    (void)ctx;
    (void)step;
    if (bytes > bytes_only_largest_ask)
        bytes_only_largest_ask = bytes;
    for (size_t i = 0; tb_swap_capacity(m) - tb_swap_in_use(m) < bytes && i < 64; i++) {
        int rc = tb_swap_out(m, i, true, err);
        if (rc)
            return rc;
    }
    return TB_OK;
}

static const struct tb_swap_ops bytes_only_ops = { .make_room = bytes_only_make_room };

static void open_fragmenting_engine(void)
{
    /* 6.5 blocks of 64 KiB: the input and four outputs of one block each leave 1.5 free. */
    open_engine_keys("threads = 2\ndevice_memory = 416K\n");
    e.swap = (struct tb_swap_policy){ "bytes-only", &bytes_only_ops, NULL, NULL };
}

static void open_six_block_engine(void)
{
    open_engine_keys("threads = 2\ndevice_memory = 384K\n");
}

/* The 128 KiB concatenation does not fit in 96 KiB free. Moving out output a frees 64 KiB
 * more, enough bytes, but not beside the other free block; the policy, counting bytes,
 * then moves nothing: the core asks it for more than is free until the allocation
 * succeeds, and every value survives the moves. */
enum { FRAG_C = 16, FRAG_H = 32, FRAG_W = 32 };

/* A chain of four 64 KiB outputs, a = relu(image), b = relu(a), ..., then y, the image
 * concatenated with itself (128 KiB). */
static struct tb_graph *fragmenting_graph(void)
{
    struct tb_graph *g = tb_graph_new(false);
    struct tb_node *img = tb_input(g, "image", TB_F32, shape(1, FRAG_C, FRAG_H, FRAG_W));
    static const char *const names[] = { "a", "b", "c", "d" };
    struct tb_node *prev = img;
    for (int k = 0; k < 4; k++)
        tb_graph_output(g, names[k], prev = tb_relu(g, prev));
    struct tb_node *two[2] = { img, img };
    tb_graph_output(g, "y", tb_concat(g, 2, two));
    ck_assert_msg(!tb_graph_error(g), "%s", tb_graph_error(g));
    return g;
}

/* After a forward pass of fragmenting_graph on `in`: y is the image twice and each of a..d
 * its ReLU, wherever the moves put them (from the host where they went there). `out` holds
 * twice the image. */
static void assert_fragmenting_values(struct tb_exec *x, const float *in, float *out)
{
    enum { N = FRAG_C * FRAG_H * FRAG_W };
    if (on_sim())
        return; /* a modelled device keeps no values: the moves are what its run checks */
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_exec_read(x, "y", out, &err) == TB_OK, "%s", err.msg);
    for (int i = 0; i < N; i++)
        if (out[i] != in[i] || out[N + i] != in[i])
            ck_abort_msg("y[%d] or y[%d]: %g and %g, expected %g (both copies of the input)", i, N + i,
                         (double)out[i], (double)out[N + i], (double)in[i]);
    static const char *const names[] = { "a", "b", "c", "d" };
    for (int k = 0; k < 4; k++) {
        ck_assert_msg(tb_exec_read(x, names[k], out, &err) == TB_OK, "%s", err.msg);
        for (int i = 0; i < N; i++)
            if (out[i] != (in[i] > 0 ? in[i] : 0.0f))
                ck_abort_msg("%s[%d]: %g, expected relu(%g)", names[k], i, (double)out[i], (double)in[i]);
    }
}

/* One forward pass of fragmenting_graph: its graph, executor, input, and room to read
 * twice the input back. */
struct frag_run {
    struct tb_graph *g;
    struct tb_exec *x;
    float *in, *out;
};

/* The executor of fragmenting_graph under e's policy, a random image (`seed`) set. */
static void frag_open(struct frag_run *r, unsigned seed)
{
    enum { N = FRAG_C * FRAG_H * FRAG_W };
    struct tb_err err;
    tb_err_clear(&err);
    r->g = fragmenting_graph();
    ck_assert_msg(tb_exec_create(&e, r->g, &r->x, &err) == TB_OK, "%s", err.msg);
    r->in = malloc(N * sizeof *r->in);
    r->out = malloc(2 * N * sizeof *r->out);
    ck_assert(r->in && r->out);
    test_random(r->in, N, seed, -1.0f, 1.0f);
    ck_assert_msg(tb_exec_set_input(r->x, "image", r->in, &err) == TB_OK, "%s", err.msg);
}

static void frag_forward(struct frag_run *r)
{
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_exec_forward(r->x, 0, &err) == TB_OK, "%s", err.msg);
}

/* Every value checked (assert_fragmenting_values), then the run freed and e's policy
 * forgotten. */
static void frag_close(struct frag_run *r)
{
    assert_fragmenting_values(r->x, r->in, r->out);
    free(r->in);
    free(r->out);
    tb_exec_free(r->x);
    tb_graph_free(r->g);
    e.swap = (struct tb_swap_policy){ 0 };
}

START_TEST(room_is_made_until_a_fragmented_allocation_fits)
{
    struct frag_run r;
    frag_open(&r, 3);
    bytes_only_largest_ask = 0;
    frag_forward(&r);
    struct tb_exec *x = r.x;
    /* Asked for more than the 128 KiB, once the free bytes sufficed and did not fit. */
    ck_assert_uint_gt(bytes_only_largest_ask, 128u << 10);
    ck_assert_uint_ge(tb_exec_swap_stats(x)->evicting_allocs, 1);
    const struct tb_schedule *s = tb_exec_schedule(x);
    /* a, b and c went (the hole beside d's neighbour grew to three blocks); d stayed. */
    ck_assert(!tb_exec_resident(x, tensor_named(s, "relu0")));
    ck_assert(!tb_exec_resident(x, tensor_named(s, "relu1")));
    ck_assert(!tb_exec_resident(x, tensor_named(s, "relu2")));
    ck_assert(tb_exec_resident(x, tensor_named(s, "relu3")));
    struct tb_mem_stats st;
    b.ops.backend->mem_stats(b.ctx, 0, &st);
    ck_assert_uint_eq(st.reserved, 416u << 10); /* the arena never grew */
    frag_close(&r); /* a, b and c back from the host */
}
END_TEST

/* A policy that moves out the tensors of the cheapest address range (tb_swap_out_range),
 * and counts what it moved. */
static uint64_t range_moved;

static int range_make_room(void *ctx, struct tb_swap_mem *m, size_t step, uint64_t bytes, struct tb_err *err)
{
    (void)ctx;
    (void)step;
    uint64_t moved = 0;
    int rc = tb_swap_out_range(m, bytes, NULL, true, &moved, err);
    range_moved += moved;
    return rc;
}

static const struct tb_swap_ops range_ops = { .make_room = range_make_room };

/* The same fragmented memory: the range policy moves out one output, the one between the
 * two free blocks, where the bytes-only one moved three; every value survives. */
START_TEST(a_range_is_cleared_where_free_memory_is_split)
{
    e.swap = (struct tb_swap_policy){ "range", &range_ops, NULL, NULL };
    struct frag_run r;
    frag_open(&r, 4);
    range_moved = 0;
    frag_forward(&r);
    struct tb_exec *x = r.x;
    const struct tb_schedule *s = tb_exec_schedule(x);
    /* d lay between the free blocks (the small blocks go high: d is the lowest); it alone went. */
    ck_assert_uint_eq(range_moved, 64u << 10);
    ck_assert(tb_exec_resident(x, tensor_named(s, "relu0")));
    ck_assert(tb_exec_resident(x, tensor_named(s, "relu1")));
    ck_assert(tb_exec_resident(x, tensor_named(s, "relu2")));
    ck_assert(!tb_exec_resident(x, tensor_named(s, "relu3")));
    ck_assert_uint_eq(tb_exec_swap_stats(x)->bytes_out, 64u << 10);
    frag_close(&r);
}
END_TEST

/* ------------------------------------------------------------------ recomputation */

/* A policy that drops, after every step, every activation it may (tb_swap_drop), so that
 * each one is rebuilt by recomputation before its next use; it records what it dropped. */
static uint8_t dropped[512];

static int drop_all_after_step(void *ctx, struct tb_swap_mem *m, size_t step, struct tb_err *err)
{
    (void)ctx;
    (void)step;
    for (size_t i = 0; i < sizeof dropped; i++)
        if (tb_swap_droppable(m, i)) {
            int rc = tb_swap_drop(m, i, err);
            if (rc)
                return rc;
            ck_assert_int_eq(tb_swap_residency(m, i), TB_RES_DROPPED);
            dropped[i] = 1;
        }
    return TB_OK;
}

static const struct tb_swap_ops drop_all_ops = { .after_step = drop_all_after_step };

/* Every op kind: conv, batch norm (training), relu, maxpool, resize, dropout, sigmoid,
 * mul, add, global average pool, concat; the losses softmax CE (weighted by class_weights,
 * and on mask_labels' labels), BCE and the dual task. */
static struct tb_graph *every_kind_net(void)
{
    struct tb_graph *g = tb_graph_new(true);
    struct tb_node *img = tb_input(g, "image", TB_F32, shape(2, 3, 12, 10));
    struct tb_node *lab = tb_input(g, "labels", TB_U8, shape(2, 1, 12, 10));
    struct tb_node *r1 = tb_relu(g, tb_batchnorm(g, "bn1", tb_conv2d(g, "conv1", img, 8, 3, 1, -1, 1, false)));
    struct tb_node *u1 = tb_resize(g, tb_maxpool(g, r1, 2, 2, 0), 12, 10, false);
    struct tb_node *d1 = tb_dropout(g, u1, 0.3f, false);
    struct tb_node *gate = tb_sigmoid(g, tb_conv2d(g, "gate", img, 8, 1, 1, 0, 1, true));
    struct tb_node *a1 = tb_add(g, tb_mul(g, d1, gate), r1);
    /* the context at bf16, and back (casts, and 16-bit ops, rebuilt too) */
    struct tb_node *ctx =
        tb_cast(g, tb_resize(g, tb_global_avgpool(g, tb_cast(g, a1, TB_BF16)), 12, 10, false), TB_F32);
    struct tb_node *both[2] = { a1, ctx };
    struct tb_node *cat = tb_concat(g, 2, both);
    struct tb_node *logits = tb_conv2d(g, "head", cat, 3, 1, 1, 0, 1, true);
    struct tb_node *edge = tb_conv2d(g, "edge", cat, 1, 1, 1, 0, 1, true);
    struct tb_node *w = tb_class_weights(g, lab, 3, 255);
    tb_graph_loss(g, "seg", tb_softmax_ce(g, logits, lab, w, 255, false), 1.0f);
    struct tb_node *masked = tb_mask_labels(g, lab, tb_sigmoid(g, edge), 0.5f, 255);
    tb_graph_loss(g, "att", tb_softmax_ce(g, logits, masked, NULL, 255, false), 0.5f);
    tb_graph_loss(g, "edge", tb_bce_logits(g, edge, lab), 0.25f);
    tb_graph_loss(g, "dual", tb_dual_task(g, logits, lab, 0.5f, 255), 1.0f);
    ck_assert_msg(!tb_graph_error(g), "%s", tb_graph_error(g));
    return g;
}

/* Every parameter's gradient and every buffer's value, in creation order. */
static float *snapshot(size_t *n_out)
{
    size_t n = 0;
    for (size_t i = 0; i < tb_engine_param_count(&e); i++)
        n += 2 * tb_shape_elems(tb_engine_param_at(&e, i)->value.desc.shape);
    float *v = calloc(n, sizeof *v), *at = v;
    for (size_t i = 0; i < tb_engine_param_count(&e); i++) {
        struct tb_param *p = tb_engine_param_at(&e, i);
        size_t k = tb_shape_elems(p->value.desc.shape);
        test_download(&b, p->trainable ? &p->grad : &p->value, at);
        at += k;
    }
    *n_out = (size_t)(at - v);
    return v;
}

/* One training step of net x: its four losses; the gradients and buffers in *snap. */
static void run_every_kind(struct tb_exec *x, float *losses, float **snap, size_t *n)
{
    static const char *const names[] = { "seg", "att", "edge", "dual" };
    struct tb_err err;
    tb_err_clear(&err);
    feed(x, 2, 3, 12, 10, 3, 11);
    ck_assert_msg(tb_exec_forward(x, 5, &err) == TB_OK, "%s", err.msg);
    ck_assert_msg(tb_exec_backward(x, &err) == TB_OK, "%s", err.msg);
    for (int k = 0; k < 4; k++)
        ck_assert_msg(tb_exec_read(x, names[k], &losses[k], &err) == TB_OK, "%s", err.msg);
    *snap = snapshot(n);
}

/* Recomputation changes no value: the same step with every droppable activation dropped
 * after each step and rebuilt before its next use gives the same losses, gradients and
 * running statistics, bit for bit; and the dropped tensors came from every kind of op
 * that has an output other than a loss. */
START_TEST(recomputing_every_op_kind_is_bit_identical)
{
    struct tb_graph *g = every_kind_net();
    struct tb_exec *plain, *dropping;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_exec_create(&e, g, &plain, &err) == TB_OK, "%s", err.msg);
    e.swap = (struct tb_swap_policy){ "drop-all", &drop_all_ops, NULL, NULL };
    ck_assert_msg(tb_exec_create(&e, g, &dropping, &err) == TB_OK, "%s", err.msg);
    const struct tb_schedule *s = tb_exec_schedule(dropping);
    ck_assert_uint_le(tb_schedule_tensors(s), sizeof dropped);

    /* Buffers as they were, for the second run to start from the same running statistics. */
    size_t n0;
    float *start = snapshot(&n0);
    float la[4], lb[4], *sa, *sb;
    size_t na, nb;
    run_every_kind(plain, la, &sa, &na);
    size_t off = 0; /* put the buffers back */
    for (size_t i = 0; i < tb_engine_param_count(&e); i++) {
        struct tb_param *p = tb_engine_param_at(&e, i);
        if (!p->trainable)
            test_upload(&b, &p->value, start + off);
        off += tb_shape_elems(p->value.desc.shape);
    }
    memset(dropped, 0, sizeof dropped);
    tb_exec_trace_begin(dropping);
    run_every_kind(dropping, lb, &sb, &nb);
    ck_assert_uint_eq(na, nb);
    for (int k = 0; k < 4; k++)
        ck_assert_msg(la[k] == lb[k], "loss %d: %.9g uncapped, %.9g recomputed", k, (double)la[k], (double)lb[k]);
    for (size_t i = 0; i < na; i++)
        if (sa[i] != sb[i])
            ck_abort_msg("gradient or buffer element %zu: %.9g plain, %.9g recomputed", i, (double)sa[i], (double)sb[i]);

    const struct tb_swap_stats *st = tb_exec_swap_stats(dropping);
    ck_assert_uint_gt(st->drops, 0);
    ck_assert_uint_ge(st->recomputes, st->drops);
    ck_assert_uint_gt(st->recompute_bytes, 0);
    ck_assert_uint_eq(st->swaps_out, 0);
    /* The trace has each op run again, on the compute track, marked. */
    struct tb_trace_span *sp;
    size_t nsp, reruns = 0;
    ck_assert_msg(tb_exec_trace_spans(dropping, &sp, &nsp, &err) == TB_OK, "%s", err.msg);
    for (size_t i = 0; i < nsp; i++)
        if (sp[i].recompute) {
            ck_assert_int_eq(sp[i].track, 0);
            ck_assert(sp[i].dur >= 0);
            reruns++;
        }
    ck_assert_uint_eq(reruns, st->recomputes);
    free(sp);
    bool kind_seen[TB_OP_KIND_COUNT] = { false };
    for (size_t i = 0; i < tb_schedule_tensors(s); i++)
        if (dropped[i]) {
            const struct tb_op *op =
                tb_exec_step_op(dropping, (size_t)tb_schedule_tensor(s, i)->first_use, NULL, NULL, 0);
            kind_seen[op->kind] = true;
        }
    for (int k = 1; k < TB_OP_KIND_COUNT; k++)
        if (k != TB_OP_SOFTMAX_CE && k != TB_OP_BCE_LOGITS) /* a loss is all they write */
            ck_assert_msg(kind_seen[k], "no output of a %s was dropped and recomputed", tb_op_kind_name(k));
    /* What may not be dropped: a loss, the parameters, a gradient. */
    uint32_t chain[64];
    ck_assert_int_eq(tb_swap_recompute_steps(&dropping->mem, tensor_named(s, "conv1.weight"), 10, chain, 64), -1);
    free(start);
    free(sa);
    free(sb);
    tb_exec_free(plain);
    tb_exec_free(dropping);
    tb_graph_free(g);
}
END_TEST

/* A chain of adds, none of whose outputs a later step needs (an add's backward reads no
 * input), ending in a product whose backward reads it: rebuilding that runs all of them. */
enum { CHAIN_ADDS = 8 };

static struct tb_graph *add_chain_net(void)
{
    struct tb_graph *g = tb_graph_new(true);
    struct tb_node *img = tb_input(g, "image", TB_F32, shape(2, 3, 16, 16));
    struct tb_node *lab = tb_input(g, "labels", TB_U8, shape(2, 1, 16, 16));
    struct tb_node *c = tb_conv2d(g, "c", img, 8, 3, 1, -1, 1, false);
    struct tb_node *c2 = tb_conv2d(g, "c2", img, 8, 3, 1, -1, 1, false);
    struct tb_node *sum = c;
    for (int k = 0; k < CHAIN_ADDS; k++)
        sum = tb_add(g, sum, c2);
    struct tb_node *head = tb_conv2d(g, "head", tb_mul(g, sum, c2), 3, 1, 1, 0, 1, true);
    tb_graph_loss(g, "seg", tb_softmax_ce(g, head, lab, NULL, 255, false), 1.0f);
    ck_assert_msg(!tb_graph_error(g), "%s", tb_graph_error(g));
    return g;
}

/* The device's peak over one training step of a fresh executor of g under `policy`
 * (NULL: none); its recomputations in *recomputes. */
static uint64_t step_peak(struct tb_graph *g, const struct tb_swap_ops *policy, uint64_t *recomputes)
{
    struct tb_exec *x;
    struct tb_err err;
    tb_err_clear(&err);
    e.swap = policy ? (struct tb_swap_policy){ "drop-all", policy, NULL, NULL } : (struct tb_swap_policy){ 0 };
    ck_assert_msg(tb_exec_create(&e, g, &x, &err) == TB_OK, "%s", err.msg);
    b.ops.backend->mem_reset_peak(b.ctx, 0);
    feed(x, 2, 3, 16, 16, 3, 7);
    ck_assert_msg(tb_exec_forward(x, 1, &err) == TB_OK, "%s", err.msg);
    ck_assert_msg(tb_exec_backward(x, &err) == TB_OK, "%s", err.msg);
    struct tb_mem_stats st;
    b.ops.backend->mem_stats(b.ctx, 0, &st);
    *recomputes = tb_exec_swap_stats(x)->recomputes;
    tb_exec_free(x);
    e.swap = (struct tb_swap_policy){ 0 };
    return st.peak;
}

/* Rebuilding through a chain holds a few of its tensors at a time: each rebuilt input is
 * freed once the op that reads it has run again, so the step with everything dropped
 * peaks at most four tensors above the step without (an op's input and output, the
 * tensor rebuilt, a convolution's scratch), not the chain's nine. */
START_TEST(a_rebuild_chain_holds_few_tensors_at_once)
{
    struct tb_graph *g = add_chain_net();
    uint64_t none, recomputes;
    const uint64_t plain = step_peak(g, NULL, &none);
    memset(dropped, 0, sizeof dropped);
    const uint64_t dropping = step_peak(g, &drop_all_ops, &recomputes);
    const uint64_t tensor = 2 * 8 * 16 * 16 * sizeof(float);
    ck_assert_uint_eq(none, 0);
    ck_assert_uint_ge(recomputes, CHAIN_ADDS + 1); /* the chain did run again */
    ck_assert_msg(dropping <= plain + 4 * tensor,
                  "peak %" PRIu64 " bytes with every activation dropped, %" PRIu64 " without: %.1f tensors more",
                  dropping, plain, ((double)dropping - (double)plain) / (double)tensor);
    tb_graph_free(g);
}
END_TEST

/* An executor of graph g under the test policy `ops` (named name), with input "image"
 * holding in[]. */
static struct tb_exec *exec_with_policy(struct tb_graph *g, const char *name, const struct tb_swap_ops *ops,
                                        const float *in)
{
    struct tb_exec *x;
    struct tb_err err;
    tb_err_clear(&err);
    e.swap = (struct tb_swap_policy){ name, ops, NULL, NULL };
    ck_assert_msg(tb_exec_create(&e, g, &x, &err) == TB_OK, "%s", err.msg);
    ck_assert_msg(tb_exec_set_input(x, "image", in, &err) == TB_OK, "%s", err.msg);
    return x;
}

/* A policy that drops a and b after step 1, and notes where a is after step 4 (below). */
static size_t tensor_a, tensor_b;
static enum tb_residency a_after_step4;

static int drop_a_and_b(void *ctx, struct tb_swap_mem *m, size_t step, struct tb_err *err)
{
    (void)ctx;
    if (step == 1) {
        int rc = tb_swap_drop(m, tensor_a, err);
        return rc ? rc : tb_swap_drop(m, tensor_b, err);
    }
    if (step == 4)
        a_after_step4 = tb_swap_residency(m, tensor_a);
    return TB_OK;
}

static const struct tb_swap_ops drop_a_and_b_ops = { .after_step = drop_a_and_b };

/* a = relu(image), b = relu(a), c = relu(image), d = relu(c), e = b + d, f = a + e: a is
 * read at steps 1 and 5, b at 4. Both dropped after step 1, b's rebuild before step 4 reads
 * a, which is rebuilt for it and then dropped again, as the policy left it, rather than
 * kept on the device until step 5 (a plan counts that memory free); step 5 rebuilds it. */
START_TEST(a_rebuild_leaves_what_it_read_where_the_policy_had_it)
{
    enum { N = 2 * 8 * 16 * 16 };
    struct tb_graph *g = tb_graph_new(false);
    struct tb_node *img = tb_input(g, "image", TB_F32, shape(2, 8, 16, 16));
    struct tb_node *na = tb_relu(g, img), *nb = tb_relu(g, na);
    struct tb_node *nd = tb_relu(g, tb_relu(g, img));
    tb_graph_output(g, "f", tb_add(g, na, tb_add(g, nb, nd)));
    ck_assert_msg(!tb_graph_error(g), "%s", tb_graph_error(g));
    float *in = malloc(N * sizeof *in), *out = malloc(N * sizeof *out);
    test_random(in, N, 5, -1.0f, 1.0f);
    struct tb_exec *x = exec_with_policy(g, "drop-a-and-b", &drop_a_and_b_ops, in);
    const struct tb_schedule *s = tb_exec_schedule(x);
    tensor_a = tensor_named(s, "relu0");
    tensor_b = tensor_named(s, "relu1");
    struct tb_err err;
    tb_err_clear(&err);
    a_after_step4 = TB_RES_NONE;
    ck_assert_msg(tb_exec_forward(x, 0, &err) == TB_OK, "%s", err.msg);
    ck_assert_int_eq(a_after_step4, TB_RES_DROPPED);
    /* b once, a for it, a again for step 5 */
    ck_assert_uint_eq(tb_exec_swap_stats(x)->recomputes, 3);
    ck_assert_msg(tb_exec_read(x, "f", out, &err) == TB_OK, "%s", err.msg);
    for (int i = 0; i < N && !on_sim(); i++) {
        const float r = in[i] > 0 ? in[i] : 0.0f;
        ck_assert(out[i] == r + (r + r));
    }
    free(in);
    free(out);
    tb_exec_free(x);
    e.swap = (struct tb_swap_policy){ 0 };
    tb_graph_free(g);
}
END_TEST

/* A policy that drops t and moves p out after step 1 (below), and makes no room itself. */
static size_t tensor_p, tensor_t;

static int drop_t_move_p(void *ctx, struct tb_swap_mem *m, size_t step, struct tb_err *err)
{
    (void)ctx;
    if (step != 1)
        return TB_OK;
    int rc = tb_swap_drop(m, tensor_t, err);
    return rc ? rc : tb_swap_out(m, tensor_p, true, err);
}

static int no_room(void *ctx, struct tb_swap_mem *m, size_t step, uint64_t bytes, struct tb_err *err)
{
    (void)ctx;
    (void)m;
    (void)step;
    (void)bytes;
    (void)err;
    return TB_OK;
}

static const struct tb_swap_ops drop_t_move_p_ops = { .after_step = drop_t_move_p, .make_room = no_room };

/* A rebuild's own inputs are moved too when nothing else makes room. In six 64 KiB
 * blocks (the image in the top one): p = relu(image), t = concat(p, p, p) (three blocks),
 * c = relu(image), d = relu(c), y = avgpool(t), f = (c + d) + p. t is dropped and p moved
 * out after step 1; c and d take the two blocks below the image. Rebuilding t for y brings
 * p back into the block below them, which leaves two free blocks under p and, once c and d
 * go, two above: three blocks free, none of them three in a row, until p (held by the
 * rebuild, not a tensor of y's step) is placed again too. The executor runs on engine e
 * (six blocks, a backend with or without its block list); what crossed the link each way
 * and what moved inside the device are in *out, *in and *relocated. */
static void rebuild_in_fragmented_memory(uint64_t *out, uint64_t *in_bytes, uint64_t *relocated)
{
    enum { C = 16, H = 32, W = 32, N = C * H * W };
    struct tb_graph *g = tb_graph_new(false);
    struct tb_node *img = tb_input(g, "image", TB_F32, shape(1, C, H, W));
    struct tb_node *np = tb_relu(g, img);
    struct tb_node *three[3] = { np, np, np };
    struct tb_node *nt = tb_concat(g, 3, three);
    struct tb_node *nc = tb_relu(g, img);
    struct tb_node *nd = tb_relu(g, nc);
    tb_graph_output(g, "y", tb_global_avgpool(g, nt));
    tb_graph_output(g, "f", tb_add(g, tb_add(g, nc, nd), np));
    ck_assert_msg(!tb_graph_error(g), "%s", tb_graph_error(g));
    float *in = malloc(N * sizeof *in), *res = malloc(N * sizeof *res);
    test_random(in, N, 6, -1.0f, 1.0f);
    struct tb_exec *x = exec_with_policy(g, "drop-t-move-p", &drop_t_move_p_ops, in);
    const struct tb_schedule *s = tb_exec_schedule(x);
    tensor_p = tensor_named(s, "relu0");
    tensor_t = tensor_named(s, "concat1");
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_exec_forward(x, 0, &err) == TB_OK, "%s", err.msg);
    ck_assert_uint_eq(tb_exec_swap_stats(x)->recomputes, 1);
    ck_assert_uint_ge(tb_exec_swap_stats(x)->evicting_allocs, 1);
    *out = tb_exec_swap_stats(x)->bytes_out;
    *in_bytes = tb_exec_swap_stats(x)->bytes_in;
    *relocated = tb_exec_swap_stats(x)->relocated_bytes;
    ck_assert_msg(tb_exec_read(x, "f", res, &err) == TB_OK, "%s", err.msg);
    for (int i = 0; i < N && !on_sim(); i++) {
        const float r = in[i] > 0 ? in[i] : 0.0f;
        ck_assert(res[i] == (r + r) + r);
    }
    ck_assert_msg(tb_exec_read(x, "y", res, &err) == TB_OK, "%s", err.msg);
    for (int c = 0; c < 3 * C && !on_sim(); c++) {
        double sum = 0;
        for (int i = 0; i < H * W; i++)
            sum += in[c % C * H * W + i] > 0 ? in[c % C * H * W + i] : 0.0f;
        ck_assert_msg(fabs(res[c] - sum / (H * W)) < 1e-5, "channel %d: %g, expected %g", c, res[c], sum / (H * W));
    }
    struct tb_mem_stats st;
    b.ops.backend->mem_stats(b.ctx, 0, &st);
    ck_assert_uint_eq(st.reserved, 384u << 10); /* the arena never grew */
    free(in);
    free(res);
    tb_exec_free(x);
    e.swap = (struct tb_swap_policy){ 0 };
    tb_graph_free(g);
}

/* Both ways, the policy moves p out and c and d go to the host (the last resort's first
 * move: every tensor not in use), 192 KiB; p, c and d come back, 192 KiB. With the
 * backend's block list, p then moves inside the device, away from the free blocks it
 * splits: one copy on the compute stream. */
START_TEST(a_rebuild_moves_what_it_holds_inside_the_device)
{
    uint64_t out, in, relocated;
    rebuild_in_fragmented_memory(&out, &in, &relocated);
    ck_assert_uint_eq(out, 192u << 10);
    ck_assert_uint_eq(in, 192u << 10);
    ck_assert_uint_eq(relocated, 64u << 10);
}
END_TEST

/* Without it (a backend that cannot say where its free memory lies), p goes to the host
 * (its copy there is still good: nothing crosses) and comes back around the block: 64 KiB
 * more over the link. */
static struct tb_backend_ops no_blocks_ops;
static struct tb_plugin no_blocks_backend;

static void open_six_block_engine_without_blocks(void)
{
    setenv("TRAINBIG_LOG", "error", 1);
    test_backend_open(&b, backend_name(), keys_for_backend("threads = 2\ndevice_memory = 384K\n"));
    no_blocks_ops = *b.h->p->ops.backend;
    no_blocks_ops.mem_blocks = NULL;
    no_blocks_backend = *b.h->p;
    no_blocks_backend.ops.backend = &no_blocks_ops;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_engine_init(&e, &no_blocks_backend, b.ctx, 0, 7, &err) == TB_OK, "%s", err.msg);
}

START_TEST(a_rebuild_moves_what_it_holds_through_the_host)
{
    uint64_t out, in, relocated;
    rebuild_in_fragmented_memory(&out, &in, &relocated);
    ck_assert_uint_eq(out, 192u << 10);
    ck_assert_uint_eq(in, 256u << 10);
    ck_assert_uint_eq(relocated, 0);
}
END_TEST

/* A policy that moves output a out after step 3 (d made) and makes no room itself: only
 * the core's last resorts do. */
static size_t frag_a;

static int a_out_after_d(void *ctx, struct tb_swap_mem *m, size_t step, struct tb_err *err)
{
    (void)ctx;
    return step == 3 ? tb_swap_out(m, frag_a, true, err) : TB_OK;
}

static const struct tb_swap_ops a_out_no_room_ops = { .after_step = a_out_after_d, .make_room = no_room };

/* The same fragmented memory, with a's block free too: 160 KiB free in three blocks, d
 * between two of them. The core moves d into a's old block, inside the device, and the
 * concatenation fits: nothing crosses the link but the policy's move of a; every value
 * survives. */
START_TEST(split_free_memory_is_joined_inside_the_device)
{
    e.swap = (struct tb_swap_policy){ "a-out", &a_out_no_room_ops, NULL, NULL };
    struct frag_run r;
    frag_open(&r, 8);
    struct tb_exec *x = r.x;
    frag_a = tensor_named(tb_exec_schedule(x), "relu0");
    tb_exec_trace_begin(x);
    frag_forward(&r);
    const struct tb_swap_stats *st = tb_exec_swap_stats(x);
    ck_assert_uint_eq(st->evicting_allocs, 1);
    ck_assert_uint_eq(st->bytes_out, 64u << 10);
    ck_assert_uint_eq(st->relocated_bytes, 64u << 10);
    /* The trace has the move on the compute track, marked, beside the policy's copy out. */
    struct tb_trace_span *sp;
    size_t nsp, moves = 0, outs = 0;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_exec_trace_spans(x, &sp, &nsp, &err) == TB_OK, "%s", err.msg);
    for (size_t i = 0; i < nsp; i++) {
        if (sp[i].relocate) {
            ck_assert_int_eq(sp[i].track, 0);
            ck_assert_uint_eq(sp[i].bytes, 64u << 10);
            ck_assert_str_eq(sp[i].name, "relu3"); /* d, into a's old block */
            ck_assert(sp[i].dur >= 0);
            moves++;
        }
        outs += sp[i].track == 2;
    }
    ck_assert_uint_eq(moves, 1);
    ck_assert_uint_eq(outs, 1);
    free(sp);
    frag_close(&r);
}
END_TEST

/* A policy that moves output a out after step 0 and asks for it back at once, noting
 * where it was when it asked. */
static size_t recall_a;
static enum tb_residency recall_a_was;

static int a_out_and_back(void *ctx, struct tb_swap_mem *m, size_t step, struct tb_err *err)
{
    (void)ctx;
    if (step != 0)
        return TB_OK;
    int rc = tb_swap_out(m, recall_a, false, err);
    recall_a_was = tb_swap_residency(m, recall_a);
    return rc ? rc : tb_swap_in(m, recall_a, err);
}

static const struct tb_swap_ops a_out_and_back_ops = { .after_step = a_out_and_back };

/* A tensor asked back while its copy out still runs keeps its device block: nothing
 * crosses the link back, the step that reads it does not wait for a copy in, and it ends
 * on both sides. On sim the host always asks before it sees the copy done (it runs ahead
 * of the modelled device, as it does of a GPU); on cpu the copy may already be done, and
 * then a is brought back. */
START_TEST(a_tensor_asked_back_while_moving_out_stays)
{
    e.swap = (struct tb_swap_policy){ "out-and-back", &a_out_and_back_ops, NULL, NULL };
    struct frag_run r;
    frag_open(&r, 9);
    struct tb_exec *x = r.x;
    recall_a = tensor_named(tb_exec_schedule(x), "relu0");
    frag_forward(&r);
    const struct tb_swap_stats *st = tb_exec_swap_stats(x);
    ck_assert_uint_eq(st->bytes_out, 64u << 10);
    ck_assert_uint_eq(st->demand_ins, 0);
    ck_assert(recall_a_was == TB_RES_MOVING_OUT || recall_a_was == TB_RES_HOST);
    ck_assert_msg(!on_sim() || recall_a_was == TB_RES_MOVING_OUT, "on sim the host saw the copy out done: %d",
                  (int)recall_a_was);
    ck_assert_uint_eq(st->bytes_in, recall_a_was == TB_RES_MOVING_OUT ? 0 : 64u << 10);
    ck_assert_uint_eq(st->swaps_in, recall_a_was == TB_RES_MOVING_OUT ? 0 : 1);
    ck_assert(tb_exec_resident(x, recall_a));
    frag_close(&r);
}
END_TEST

/* The swap space is capped: past the engine's limit a swap-out fails naming the limit and
 * what to change, instead of taking host memory until the OOM killer comes; what the
 * copies held is counted and given back. */
/* Every counter in the table sums, differences and combines as its row says: a SUM
 * counter's epoch is its difference, a MAX or LEVEL counter stands as it is; two
 * executors add, but for a MAX. */
START_TEST(swap_counters_aggregate_as_declared)
{
    ck_assert_uint_gt(tb_swap_ncounters, 0);
    size_t bytes = 0;
    struct tb_swap_stats mark, now, sum = { 0 };
    for (size_t i = 0; i < tb_swap_ncounters; i++) {
        const struct tb_swap_counter *c = &tb_swap_counters[i];
        bytes += c->type == TB_SWAP_COUNTER_U64 ? sizeof(uint64_t) : sizeof(double);
        char *m = (char *)&mark + c->offset, *n = (char *)&now + c->offset;
        if (c->type == TB_SWAP_COUNTER_U64) {
            *(uint64_t *)m = 2;
            *(uint64_t *)n = 7;
        } else {
            *(double *)m = 2;
            *(double *)n = 7;
        }
    }
    ck_assert_uint_eq(bytes, sizeof(struct tb_swap_stats)); /* every field has its row */
    const struct tb_swap_stats d = tb_swap_stats_since(&now, &mark);
    tb_swap_stats_add(&sum, &mark);
    tb_swap_stats_add(&sum, &now);
    for (size_t i = 0; i < tb_swap_ncounters; i++) {
        const struct tb_swap_counter *c = &tb_swap_counters[i];
        const bool summed = c->agg == TB_SWAP_COUNTER_SUM;
        ck_assert_msg(tb_swap_counter_get(&d, c) == (summed ? 5 : 7), "%s: since gives %g", c->field,
                      tb_swap_counter_get(&d, c));
        ck_assert_msg(tb_swap_counter_get(&sum, c) == (c->agg == TB_SWAP_COUNTER_MAX ? 7 : 9), "%s: sum gives %g",
                      c->field, tb_swap_counter_get(&sum, c));
        ck_assert_msg(c->csv || c->json || c->agg == TB_SWAP_COUNTER_LEVEL, "%s is reported nowhere", c->field);
    }
    /* the pinned host memory is a level, not a count: an epoch holds it, it does not add to it */
    ck_assert_uint_eq(d.host_bytes, 7);
    ck_assert_uint_eq(d.bytes_out, 5);
    ck_assert_uint_eq(d.rebuild_nesting, 7);
}
END_TEST

START_TEST(swap_space_is_capped)
{
    struct tb_graph *g = fragmenting_graph();
    struct tb_exec *x;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_exec_create(&e, g, &x, &err) == TB_OK, "%s", err.msg);
    /* Room for one 64 KiB copy; the forward pass moves out three (the test above). */
    e.swap_space_limit = 100u << 10;
    snprintf(e.swap_space_why, sizeof e.swap_space_why, "the test's limit");
    ck_assert_int_eq(tb_exec_forward(x, 0, &err), TB_ERR_NOMEM);
    ck_assert_contains(err.msg, "would take the swap space past 0.1 MiB");
    ck_assert_contains(err.msg, "holds 0.1 MiB of pinned host memory for swapped-out tensors, and the test's limit");
    ck_assert_contains(err.msg, "[backend] device_memory");
    ck_assert_uint_eq(e.swap_space_used, 64u << 10);
    tb_exec_free(x);
    ck_assert_uint_eq(e.swap_space_used, 0);
    tb_graph_free(g);
}
END_TEST

/* The estimate made before an executor exists: what creating it takes, exactly; a step's
 * activations at their peak, exactly for a chain (two of its tensors live at once), and
 * below what a training step measures (which adds op scratch: on the scalar path an
 * im2col buffer several times an activation). */
START_TEST(estimate_bounds_the_measured_step)
{
    enum { C = 16, H = 32, W = 32 };
    struct tb_graph *chain = tb_graph_new(false);
    struct tb_node *prev = tb_input(chain, "image", TB_F32, shape(1, C, H, W));
    for (int k = 0; k < 3; k++)
        prev = tb_relu(chain, prev);
    tb_graph_output(chain, "y", prev);
    struct tb_exec_estimate est;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_exec_estimate(&e, &chain, 1, &est, &err) == TB_OK, "%s", err.msg);
    ck_assert_uint_eq(est.step, 2u * C * H * W * sizeof(float));
    ck_assert_uint_eq(est.made, (uint64_t)C * H * W * sizeof(float)); /* the input */
    ck_assert_uint_eq(est.saved, 0);
    tb_graph_free(chain);

    struct tb_graph *g = small_net(true, 2, 4);
    ck_assert_msg(tb_exec_estimate(&e, &g, 1, &est, &err) == TB_OK, "%s", err.msg);
    struct tb_mem_stats st0, st1, st2;
    b.ops.backend->mem_stats(b.ctx, 0, &st0);
    struct tb_exec *x;
    ck_assert_msg(tb_exec_create(&e, g, &x, &err) == TB_OK, "%s", err.msg);
    ck_assert_msg(tb_sgd_prepare(&e, &err) == TB_OK, "%s", err.msg);
    b.ops.backend->mem_stats(b.ctx, 0, &st1);
    b.ops.backend->mem_reset_peak(b.ctx, 0);
    feed(x, 2, 3, 12, 10, 4, 6);
    step(x, 0, 0.05f, true);
    b.ops.backend->mem_stats(b.ctx, 0, &st2);
    const uint64_t made = st1.in_use - st0.in_use, measured = st2.peak - st1.in_use;
    /* Blocks round up to 512 bytes: the estimate counts exact sizes. */
    ck_assert_uint_le(est.made, made);
    ck_assert_uint_ge(est.made + 512 * 64, made);
    ck_assert_uint_gt(est.step, 0);
    ck_assert_uint_le(est.step, measured);
    ck_assert_uint_gt(est.saved, 0);
    tb_exec_free(x);
    tb_graph_free(g);
}
END_TEST

START_TEST(broken_graph_refused)
{
    struct tb_graph *g = tb_graph_new(true);
    tb_relu(g, tb_input(g, "labels", TB_U8, shape(1, 1, 2, 2)));
    struct tb_exec *x;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_exec_create(&e, g, &x, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "the graph is broken: relu0 (inputs labels): relu: input 0 is u8, expected a float (f32, bf16 or f16)");
    tb_graph_free(g);
}
END_TEST

/* A graph with a 16-bit tensor on a backend whose dtypes lack it (one of ABI 2.1, without
 * the member) is refused before any op is prepared, naming the op, the dtype and the
 * backend; the backend as it is runs it where it lists bf16. */
START_TEST(sixteen_bit_graph_needs_the_backends_dtype)
{
    struct tb_graph *g = tb_graph_new(false);
    struct tb_node *x = tb_cast(g, tb_input(g, "image", TB_F32, shape(1, 3, 4, 4)), TB_BF16);
    tb_graph_output(g, "y", tb_relu(g, x));
    ck_assert_msg(!tb_graph_error(g), "%s", tb_graph_error(g));
    struct tb_exec *xe;
    struct tb_err err;
    tb_err_clear(&err);
    const struct tb_backend_ops *o = b.h->p->ops.backend;
    if (o->dtypes && (o->dtypes(b.ctx, 0) >> TB_BF16 & 1u)) {
        ck_assert_msg(tb_exec_create(&e, g, &xe, &err) == TB_OK, "%s", err.msg);
        tb_exec_free(xe);
    }
    static struct tb_backend_ops f32_only;
    static struct tb_plugin f32_backend;
    f32_only = *o;
    f32_only.dtypes = NULL;
    f32_backend = *b.h->p;
    f32_backend.ops.backend = &f32_only;
    struct tb_engine e2;
    ck_assert_msg(tb_engine_init(&e2, &f32_backend, b.ctx, 0, 7, &err) == TB_OK, "%s", err.msg);
    ck_assert_int_eq(tb_exec_create(&e2, g, &xe, &err), TB_ERR_CONFIG);
    ck_assert_contains(err.msg, "cast0 (cast) has a bf16 tensor, and backend '");
    ck_assert_contains(err.msg, "' runs its ops in f32 only (its dtypes member)");
    tb_engine_fini(&e2);
    tb_graph_free(g);
}
END_TEST

/* Mean and standard deviation of a parameter's values. */
static void moments(const char *name, struct tb_tensor_desc d, enum tb_init init, double *mean, double *std,
                    float *copy)
{
    struct tb_param *p;
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(tb_engine_param(&e, name, true, d, init, &p, &err) == TB_OK, "%s", err.msg);
    size_t n = tb_shape_elems(d.shape);
    float *v = copy ? copy : malloc(n * sizeof *v);
    test_download(&b, &p->value, v);
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) {
        s += v[i];
        s2 += (double)v[i] * v[i];
    }
    *mean = s / (double)n;
    *std = sqrt(s2 / (double)n - *mean * *mean);
    if (!copy)
        free(v);
}

START_TEST(initialisers)
{
    /* A 64x64x3x3 weight: fan_in = fan_out = 576. */
    struct tb_tensor_desc d = { TB_F32, { 64, 64, 3, 3 } };
    double mean, std;
    moments("k.weight", d, TB_INIT_KAIMING_NORMAL, &mean, &std, NULL);
    ck_assert_msg(fabs(mean) < 0.002 && fabs(std - sqrt(2.0 / 576)) < 0.02 * sqrt(2.0 / 576),
                  "kaiming: mean %g std %g, want 0 and %g", mean, std, sqrt(2.0 / 576));
    moments("x.weight", d, TB_INIT_XAVIER_NORMAL, &mean, &std, NULL);
    ck_assert_msg(fabs(mean) < 0.002 && fabs(std - sqrt(2.0 / 1152)) < 0.02 * sqrt(2.0 / 1152),
                  "xavier: mean %g std %g, want 0 and %g", mean, std, sqrt(2.0 / 1152));
    moments("z", (struct tb_tensor_desc){ TB_F32, { 1, 7, 1, 1 } }, TB_INIT_ZEROS, &mean, &std, NULL);
    ck_assert(mean == 0 && std == 0);
    moments("o", (struct tb_tensor_desc){ TB_F32, { 1, 7, 1, 1 } }, TB_INIT_ONES, &mean, &std, NULL);
    ck_assert(mean == 1 && std == 0);

    /* Values depend on the seed and the name, not on what was created before. */
    size_t n = tb_shape_elems(d.shape);
    float *first = malloc(n * sizeof *first), *again = malloc(n * sizeof *again);
    moments("a.weight", d, TB_INIT_KAIMING_NORMAL, &mean, &std, first);
    tb_engine_fini(&e);
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_eq(tb_engine_init(&e, b.h->p, b.ctx, 0, 7, &err), TB_OK);
    moments("other.weight", d, TB_INIT_KAIMING_NORMAL, &mean, &std, again);
    ck_assert(memcmp(first, again, n * sizeof *first) != 0);
    moments("a.weight", d, TB_INIT_KAIMING_NORMAL, &mean, &std, again);
    ck_assert(memcmp(first, again, n * sizeof *first) == 0);
    tb_engine_fini(&e);
    ck_assert_int_eq(tb_engine_init(&e, b.h->p, b.ctx, 0, 8, &err), TB_OK);
    moments("a.weight", d, TB_INIT_KAIMING_NORMAL, &mean, &std, again);
    ck_assert(memcmp(first, again, n * sizeof *first) != 0);
    /* The same name with another shape is an error naming both. */
    struct tb_param *p;
    ck_assert_int_eq(tb_engine_param(&e, "a.weight", true, (struct tb_tensor_desc){ TB_F32, { 1, 2, 3, 3 } },
                                     TB_INIT_ZEROS, &p, &err),
                     TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "a.weight is 64x64x3x3 in one graph and 1x2x3x3 in another");
    free(first);
    free(again);
}
END_TEST

START_TEST(lr_policies)
{
    ck_assert_double_eq_tol(tb_lr_poly(0.01, 0, 100, 1.0), 0.01, 1e-15);
    ck_assert_double_eq_tol(tb_lr_poly(0.01, 50, 100, 1.0), 0.005, 1e-15);
    ck_assert_double_eq_tol(tb_lr_poly(0.01, 75, 100, 0.9), 0.01 * pow(0.25, 0.9), 1e-15);
    ck_assert_double_eq(tb_lr_poly(0.01, 100, 100, 1.0), 0.0);
    ck_assert_double_eq_tol(tb_lr_step(0.1, 29, 30, 0.1), 0.1, 1e-15);
    ck_assert_double_eq_tol(tb_lr_step(0.1, 30, 30, 0.1), 0.01, 1e-15);
    ck_assert_double_eq_tol(tb_lr_step(0.1, 95, 30, 0.5), 0.0125, 1e-15);
}
END_TEST

int main(void)
{
    /* On sim: the cases about memory, swapping, recomputation and scheduling, none of
     * whose assertions reads a value (those that check values too skip that part). */
    const bool all = !on_sim();
    Suite *s = suite_create(all ? "exec" : "exec on sim");
    TCase *tc = tcase_create("memory");
    tcase_add_checked_fixture(tc, open_engine, close_engine);
    tcase_add_test(tc, activations_freed_at_last_use);
    tcase_add_test(tc, broken_graph_refused);
    tcase_add_test(tc, sixteen_bit_graph_needs_the_backends_dtype);
    tcase_add_test(tc, a_tensor_asked_back_while_moving_out_stays);
    if (all) {
        tcase_add_test(tc, lr_policies);
        tcase_add_test(tc, initialisers);
    }
    suite_add_tcase(s, tc);
    if (all) {
        tc = tcase_create("gradients");
        tcase_add_checked_fixture(tc, open_engine, close_engine);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, tensor_used_twice_accumulates);
        tcase_add_test(tc, whole_net_gradients);
        tcase_add_test(tc, weighted_losses_sum);
        tcase_add_test(tc, many_parameters);
        tcase_add_test(tc, unreached_parameter_gets_zero_gradient);
        suite_add_tcase(s, tc);
    }
    tc = tcase_create("training");
    tcase_add_checked_fixture(tc, open_engine, close_engine);
    tcase_set_timeout(tc, 120);
    if (all) {
        tcase_add_test(tc, small_net_overfits_one_batch);
        tcase_add_test(tc, runs_are_bit_identical);
        tcase_add_test(tc, inference_graph_shares_parameters);
        tcase_add_test(tc, parameters_enumerable_by_name);
        tcase_add_test(tc, recomputing_every_op_kind_is_bit_identical);
    }
    tcase_add_test(tc, a_released_executor_holds_no_device_memory);
    tcase_add_test(tc, estimate_bounds_the_measured_step);
    tcase_add_test(tc, a_rebuild_chain_holds_few_tensors_at_once);
    tcase_add_test(tc, a_rebuild_leaves_what_it_read_where_the_policy_had_it);
    suite_add_tcase(s, tc);
    tc = tcase_create("swap counters");
    tcase_add_test(tc, swap_counters_aggregate_as_declared);
    suite_add_tcase(s, tc);
    tc = tcase_create("oom");
    tcase_add_checked_fixture(tc, open_tiny_engine, close_engine);
    tcase_add_test(tc, out_of_memory_is_reported);
    suite_add_tcase(s, tc);

    tc = tcase_create("fragmentation");
    tcase_add_checked_fixture(tc, open_fragmenting_engine, close_engine);
    tcase_add_test(tc, room_is_made_until_a_fragmented_allocation_fits);
    tcase_add_test(tc, a_range_is_cleared_where_free_memory_is_split);
    tcase_add_test(tc, split_free_memory_is_joined_inside_the_device);
    tcase_add_test(tc, swap_space_is_capped);
    suite_add_tcase(s, tc);

    tc = tcase_create("rebuild in fragmented memory");
    tcase_add_checked_fixture(tc, open_six_block_engine, close_engine);
    tcase_add_test(tc, a_rebuild_moves_what_it_holds_inside_the_device);
    suite_add_tcase(s, tc);
    tc = tcase_create("rebuild in fragmented memory, no block list");
    tcase_add_checked_fixture(tc, open_six_block_engine_without_blocks, close_engine);
    tcase_add_test(tc, a_rebuild_moves_what_it_holds_through_the_host);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
