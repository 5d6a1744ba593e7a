/* tests/check_ops.c: the CPU backend's kernels for relu, sigmoid, add, mul, dropout, maxpool,
 * global average pooling, bilinear resize, concat, softmax cross-entropy and class-balanced
 * BCE with logits; and every case of the op case list (tests/op_cases.c) on the cpu backend.
 *
 * Every forward is compared with a plain double-precision reference written here on NCHW
 * host arrays from the definitions in trainbig/ops.h (PyTorch's), never from the kernels;
 * every backward with central finite differences of the forward (opcheck_gradients) and,
 * where float differences are too coarse to be sharp (the losses, broadcasts, sums), with a
 * double-precision reference backward as well. Tolerances are |got - want| <= atol +
 * rtol * |want| and are stated at each check. The case list, which check_cuda runs on cuda
 * against cpu, covers every op kind of the contract: each case's backward against finite
 * differences, and determinism: each case run twice on one backend gives the same bits,
 * and the same bits again with 1 and 3 threads. */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/trainbig.h>

#include "testutil.h"
#include "opcheck.h"
#include "op_cases.h"
/* For tb_cpu_uniform, the definition of the CPU backend's dropout mask. */
#include "plugins/backends/cpu/cpu_shared.h"
#include "plugins/backends/cpu/cpu_vmath.h"

#define THREADS "threads = 2\n"

/* ------------------------------------------------------------------ helpers */

/* NCHW index of (n, c, y, x) in a tensor of shape s. */
static size_t at(struct tb_shape s, int n, int c, int y, int x)
{
    return (((size_t)n * (size_t)s.c + (size_t)c) * (size_t)s.h + (size_t)y) * (size_t)s.w + (size_t)x;
}

static double *dzeros(size_t n)
{
    double *x = calloc(n + 1, sizeof *x);
    ck_assert_ptr_nonnull(x);
    return x;
}

static float *fzeros(size_t n)
{
    float *x = calloc(n + 1, sizeof *x);
    ck_assert_ptr_nonnull(x);
    return x;
}

static uint8_t *bytes(size_t n)
{
    uint8_t *x = calloc(n + 1, 1);
    ck_assert_ptr_nonnull(x);
    return x;
}

/* test_assert_close, with the elements compared first in a plain loop: Check's assertions
 * each write to a pipe, which adds up over large arrays. On a mismatch, the harness's
 * check names the first one. */
static void assert_close(const char *what, const float *got, const double *want, size_t n, double atol, double rtol)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= atol + rtol * fabs(want[i]))) {
            test_assert_close(what, got, want, n, atol, rtol);
            break;
        }
}

/* Distinct values 0.01 * (a permutation of 0..n-1) - offset: no two elements of a pooling
 * window are within 2 * eps of each other, so finite differences never cross a tie. */
static float *distinct(size_t n, uint64_t seed, float offset)
{
    float *x = malloc(n * sizeof *x + 1);
    ck_assert_ptr_nonnull(x);
    for (size_t i = 0; i < n; i++)
        x[i] = 0.01f * (float)i - offset;
    uint64_t s = seed * TB_GOLDEN64 + 7;
    for (size_t i = n; i > 1; i--) {
        size_t j = op_next_rand(&s) % i;
        float t = x[i - 1];
        x[i - 1] = x[j];
        x[j] = t;
    }
    return x;
}

/* Checks the gradients of the f32 inputs whose bit is set in `inputs` at up to FD_SAMPLES
 * elements of each, spread over it, with the given step size and tolerances. (Every
 * element's gradient is compared with a reference elsewhere; finite differences confirm
 * the references and the kernels agree with the forward.) */
#define FD_SAMPLES 90

static void fd_check(struct opcheck *oc, uint32_t inputs, float eps, double atol, double rtol, uint64_t step)
{
    bool check[TB_OP_MAX_IN] = { false };
    for (uint32_t i = 0; i < oc->op.nin; i++)
        check[i] = inputs >> i & 1;
    opcheck_gradients(oc, check, eps, atol, rtol, FD_SAMPLES, 0, step);
}

/* Backward with dy for output 0 (the only f32 output with a gradient in this file). */
static void backward_dy(struct opcheck *oc, float *dy)
{
    float *d[TB_OP_MAX_OUT] = { dy, NULL, NULL };
    opcheck_backward(oc, d);
}

static float *get_output(struct opcheck *oc, uint32_t j)
{
    float *y = malloc(opcheck_bytes(oc->op.out[j]) + 1);
    ck_assert_ptr_nonnull(y);
    opcheck_get_output(oc, j, y);
    return y;
}

static float *get_din(struct opcheck *oc, uint32_t i)
{
    float *g = malloc(opcheck_bytes(oc->op.in[i]) + 1);
    ck_assert_ptr_nonnull(g);
    test_download(oc->b, &oc->din[i], g);
    return g;
}

/* op_forward's status and message, for the error cases. */
static int try_forward(struct opcheck *oc, struct tb_err *err)
{
    tb_err_clear(err);
    return oc->b->ops.backend->op_forward(oc->b->ctx, &oc->op, oc->state, 0, oc->in, oc->out, err);
}

static int try_prepare(struct test_backend *b, const struct tb_op *op, struct tb_err *err)
{
    void *state = NULL;
    tb_err_clear(err);
    int rc = b->ops.backend->op_prepare(b->ctx, 0, op, &state, err);
    if (rc == TB_OK)
        b->ops.backend->op_release(b->ctx, state);
    return rc;
}

/* ------------------------------------------------------------------ relu, sigmoid */

START_TEST(relu_forward_backward)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    /* 32 channels are blocked on every vector path (nChw16c, nChw8c), 24 on AVX2 only */
    static const int channels[4] = { 1, 3, 32, 24 };
    for (int variant = 0; variant < 4; variant++) {
        struct tb_op op = new_op(TB_OP_RELU, 3, 1, 1);
        op.in[0] = op.out[0] = f32(2, channels[variant], 5, 7);
        size_t n = elems(op.in[0]);
        float *x = op_frand(n, 11 + (uint64_t)variant, -1.0f, 1.0f);
        /* keep away from the kink so that finite differences see one side only */
        for (size_t i = 0; i < n; i++)
            if (fabsf(x[i]) < 0.05f)
                x[i] = x[i] < 0.0f ? -0.05f - x[i] : 0.05f + x[i];
        struct opcheck oc;
        opcheck_init(&oc, &b, &op);
        opcheck_set_input(&oc, 0, x);
        opcheck_forward(&oc, 0);
        float *y = get_output(&oc, 0);
        double *want = dzeros(n);
        for (size_t i = 0; i < n; i++)
            want[i] = x[i] > 0.0f ? (double)x[i] : 0.0;
        assert_close("relu y", y, want, n, 0.0, 0.0); /* exact */
        float *dy = op_frand(n, 12, -1.0f, 1.0f);
        backward_dy(&oc, dy);
        float *dx = get_din(&oc, 0);
        for (size_t i = 0; i < n; i++)
            want[i] = x[i] > 0.0f ? (double)dy[i] : 0.0;
        assert_close("relu dx", dx, want, n, 0.0, 0.0); /* exact */
        /* linear pieces: finite differences are exact up to float rounding of y */
        fd_check(&oc, 1, 1e-3f, 5e-4, 1e-3, 0);
        opcheck_fini(&oc);
        free(x), free(y), free(want), free(dy), free(dx);
    }
    test_backend_close(&b);
}
END_TEST

START_TEST(relu_zero_has_zero_gradient)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    struct tb_op op = new_op(TB_OP_RELU, 4, 1, 1);
    op.in[0] = op.out[0] = f32(1, 2, 1, 4);
    float x[8] = { 0.0f, -0.0f, 1.0f, -1.0f, 0.0f, 2.5f, -0.0f, 1e-30f };
    float ones[8] = { 1, 1, 1, 1, 1, 1, 1, 1 };
    struct opcheck oc;
    opcheck_init(&oc, &b, &op);
    opcheck_set_input(&oc, 0, x);
    opcheck_forward(&oc, 0);
    float y[8], dx[8];
    opcheck_get_output(&oc, 0, y);
    backward_dy(&oc, ones);
    test_download(&b, &oc.din[0], dx);
    const double want_y[8] = { 0, 0, 1, 0, 0, 2.5, 0, 1e-30f };
    const double want_dx[8] = { 0, 0, 1, 0, 0, 1, 0, 1 };
    assert_close("relu y", y, want_y, 8, 0.0, 0.0);
    assert_close("relu dx at 0", dx, want_dx, 8, 0.0, 0.0);
    opcheck_fini(&oc);
    test_backend_close(&b);
}
END_TEST

START_TEST(sigmoid_forward_backward)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    static const int channels[4] = { 1, 3, 32, 24 }; /* blocked: see relu */
    for (int variant = 0; variant < 4; variant++) {
        struct tb_op op = new_op(TB_OP_SIGMOID, 5, 1, 1);
        op.in[0] = op.out[0] = f32(2, channels[variant], 5, 7);
        size_t n = elems(op.in[0]);
        float *x = op_frand(n, 21 + (uint64_t)variant, -6.0f, 6.0f);
        /* saturated values: exp overflows on one side and must still give 0 or 1 */
        x[0] = 100.0f, x[1] = -100.0f, x[2] = 20.0f, x[3] = -20.0f, x[4] = 0.0f;
        struct opcheck oc;
        opcheck_init(&oc, &b, &op);
        opcheck_set_input(&oc, 0, x);
        opcheck_forward(&oc, 0);
        float *y = get_output(&oc, 0);
        double *want = dzeros(n);
        for (size_t i = 0; i < n; i++)
            want[i] = 1.0 / (1.0 + exp(-(double)x[i]));
        assert_close("sigmoid y", y, want, n, 1e-30, 2e-6); /* a few float ulps */
        float *dy = op_frand(n, 22, -1.0f, 1.0f);
        backward_dy(&oc, dy);
        float *dx = get_din(&oc, 0);
        for (size_t i = 0; i < n; i++) {
            double s = 1.0 / (1.0 + exp(-(double)x[i]));
            want[i] = (double)dy[i] * s * (1.0 - s);
        }
        /* from the float y: 1 - y loses ~6e-8 absolute where y is near 1 */
        assert_close("sigmoid dx", dx, want, n, 2e-7, 1e-5);
        /* FD on moderate inputs only (the saturated ones have gradient ~0 anyway) */
        for (size_t i = 0; i < 5; i++)
            x[i] = 0.5f * (float)i - 1.0f;
        opcheck_set_input(&oc, 0, x);
        fd_check(&oc, 1, 1e-3f, 2e-4, 1e-3, 0);
        opcheck_fini(&oc);
        free(x), free(y), free(want), free(dy), free(dx);
    }
    test_backend_close(&b);
}
END_TEST

/* ------------------------------------------------------------------ add, mul */

START_TEST(add_forward_backward)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    struct tb_op op = new_op(TB_OP_ADD, 6, 2, 1);
    op.in[0] = op.in[1] = op.out[0] = f32(2, 3, 5, 7);
    size_t n = elems(op.in[0]);
    float *a = op_frand(n, 31, -1.0f, 1.0f), *bb = op_frand(n, 32, -1.0f, 1.0f), *dy = op_frand(n, 33, -1.0f, 1.0f);
    struct opcheck oc;
    opcheck_init(&oc, &b, &op);
    opcheck_set_input(&oc, 0, a);
    opcheck_set_input(&oc, 1, bb);
    opcheck_forward(&oc, 0);
    float *y = get_output(&oc, 0);
    double *want = dzeros(n);
    for (size_t i = 0; i < n; i++)
        want[i] = (double)(a[i] + bb[i]); /* one float addition: exact comparison */
    assert_close("add y", y, want, n, 0.0, 0.0);
    backward_dy(&oc, dy);
    float *da = get_din(&oc, 0), *db = get_din(&oc, 1);
    for (size_t i = 0; i < n; i++)
        want[i] = dy[i];
    assert_close("add da", da, want, n, 0.0, 0.0);
    assert_close("add db", db, want, n, 0.0, 0.0);
    fd_check(&oc, 3, 1e-2f, 1e-4, 1e-3, 0);
    opcheck_fini(&oc);
    free(a), free(bb), free(dy), free(y), free(want), free(da), free(db);
    test_backend_close(&b);
}
END_TEST

/* x (N,C,H,W) * g (N,C,H,W) or (N,1,H,W): y, dx and dg in double. */
static void mul_ref(struct tb_shape s, int gc, const float *x, const float *g, const float *dy, double *y, double *dx,
                    double *dg)
{
    struct tb_shape gs = { s.n, gc, s.h, s.w };
    memset(dg, 0, tb_shape_elems(gs) * sizeof *dg);
    for (int n = 0; n < s.n; n++)
        for (int c = 0; c < s.c; c++)
            for (int yy = 0; yy < s.h; yy++)
                for (int xx = 0; xx < s.w; xx++) {
                    size_t i = at(s, n, c, yy, xx), j = at(gs, n, gc == 1 ? 0 : c, yy, xx);
                    y[i] = (double)x[i] * g[j];
                    dx[i] = (double)dy[i] * g[j];
                    dg[j] += (double)dy[i] * x[i];
                }
}

START_TEST(mul_same_and_broadcast)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    /* x channels, g channels: same shape, broadcast over 3, and the 1-channel case */
    static const int cases[][2] = {
        { 3, 3 }, { 3, 1 }, { 1, 1 }, { 5, 1 }, { 32, 32 }, { 32, 1 }, { 48, 1 }, { 24, 1 }
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct tb_op op = new_op(TB_OP_MUL, 7, 2, 1);
        op.in[0] = op.out[0] = f32(2, cases[k][0], 5, 7);
        op.in[1] = f32(2, cases[k][1], 5, 7);
        size_t n = elems(op.in[0]), ng = elems(op.in[1]);
        float *x = op_frand(n, 41 + k, -1.0f, 1.0f), *g = op_frand(ng, 42 + k, -1.0f, 1.0f);
        float *dy = op_frand(n, 43 + k, -1.0f, 1.0f);
        struct opcheck oc;
        opcheck_init(&oc, &b, &op);
        opcheck_set_input(&oc, 0, x);
        opcheck_set_input(&oc, 1, g);
        opcheck_forward(&oc, 0);
        float *y = get_output(&oc, 0);
        double *wy = dzeros(n), *wdx = dzeros(n), *wdg = dzeros(ng);
        mul_ref(op.in[0].shape, cases[k][1], x, g, dy, wy, wdx, wdg);
        assert_close("mul y", y, wy, n, 0.0, 1e-7); /* one float product: half an ulp */
        backward_dy(&oc, dy);
        float *dx = get_din(&oc, 0), *dg = get_din(&oc, 1);
        assert_close("mul dx", dx, wdx, n, 0.0, 1e-7);
        /* dg of the broadcast sums C float products in float */
        assert_close("mul dg", dg, wdg, ng, 1e-6, 1e-5);
        fd_check(&oc, 3, 1e-2f, 2e-4, 1e-3, 0);
        opcheck_fini(&oc);
        free(x), free(g), free(dy), free(y), free(wy), free(wdx), free(wdg), free(dx), free(dg);
    }
    test_backend_close(&b);
}
END_TEST

/* ------------------------------------------------------------------ dropout */

static struct tb_op dropout_op(int n, int c, int h, int w, float p, int channelwise, int training)
{
    struct tb_op op = new_op(TB_OP_DROPOUT, 17, 1, 2);
    op.in[0] = op.out[0] = f32(n, c, h, w);
    op.out[1] = channelwise ? u8(n, c, 1, 1) : u8(n, c, h, w);
    op.p.dropout.p = p;
    op.p.dropout.channelwise = channelwise;
    op.p.dropout.training = training;
    op.p.dropout.seed = 0x5eed1234ull;
    return op;
}

/* The mask ops.h and cpu_shared.h define: element i (canonical NCHW index) kept when
 * tb_cpu_uniform(seed, step, op id, i) >= p. */
static uint8_t mask_ref(const struct tb_op *op, uint64_t step, size_t i)
{
    return tb_cpu_uniform(op->p.dropout.seed, step, op->id, i) >= op->p.dropout.p;
}

/* Runs forward at `step`; checks y = x * mask / (1 - p) and the mask against its definition;
 * returns the mask (NCHW) and the count of dropped mask elements. */
static uint8_t *dropout_run(struct opcheck *oc, const float *x, uint64_t step, size_t *dropped)
{
    const struct tb_op *op = &oc->op;
    struct tb_shape s = op->in[0].shape;
    size_t n = elems(op->in[0]), nm = elems(op->out[1]);
    opcheck_forward(oc, step);
    float *y = get_output(oc, 0);
    uint8_t *m = bytes(nm);
    opcheck_get_output(oc, 1, m);
    double *want = dzeros(n);
    *dropped = 0;
    for (size_t i = 0; i < nm; i++) {
        if (m[i] != mask_ref(op, step, i))
            ck_abort_msg("dropout mask[%zu] = %d, want %d (step %llu)", i, m[i], mask_ref(op, step, i),
                         (unsigned long long)step);
        *dropped += m[i] == 0;
    }
    for (int nn = 0; nn < s.n; nn++)
        for (int c = 0; c < s.c; c++)
            for (int yy = 0; yy < s.h; yy++)
                for (int xx = 0; xx < s.w; xx++) {
                    size_t i = at(s, nn, c, yy, xx);
                    size_t mi = op->p.dropout.channelwise ? (size_t)nn * (size_t)s.c + (size_t)c : i;
                    want[i] = (double)x[i] * m[mi] / (1.0 - (double)op->p.dropout.p);
                }
    assert_close("dropout y", y, want, n, 0.0, 2e-7); /* x * float(1/(1-p)): an ulp */
    free(y);
    free(want);
    return m;
}

START_TEST(dropout_elementwise)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    struct tb_op op = dropout_op(2, 3, 5, 7, 0.3f, 0, 1);
    size_t n = elems(op.in[0]);
    float *x = op_frand(n, 51, -1.0f, 1.0f);
    struct opcheck oc;
    opcheck_init(&oc, &b, &op);
    opcheck_set_input(&oc, 0, x);
    size_t d1, d2, d3;
    uint8_t *m1 = dropout_run(&oc, x, 5, &d1);
    uint8_t *m2 = dropout_run(&oc, x, 5, &d2); /* the same step: the same mask */
    ck_assert_mem_eq(m1, m2, n);
    uint8_t *m3 = dropout_run(&oc, x, 6, &d3); /* the next step: another mask */
    ck_assert_msg(memcmp(m1, m3, n) != 0, "dropout: steps 5 and 6 drew the same mask");
    ck_assert_msg(d1 > 0 && d1 < n, "dropout dropped %zu of %zu", d1, n);
    /* backward: dx = dy * mask / (1 - p), from the mask of the last forward */
    float *dy = op_frand(n, 52, -1.0f, 1.0f);
    backward_dy(&oc, dy);
    float *dx = get_din(&oc, 0);
    double *want = dzeros(n);
    for (size_t i = 0; i < n; i++)
        want[i] = (double)dy[i] * m3[i] / 0.7;
    assert_close("dropout dx", dx, want, n, 0.0, 2e-7);
    /* with the mask fixed by the step, y is linear in x */
    fd_check(&oc, 1, 1e-2f, 2e-4, 1e-3, 6);
    opcheck_fini(&oc);
    free(x), free(m1), free(m2), free(m3), free(dy), free(dx), free(want);

    /* blocked channels (see relu): the mask still follows the NCHW index, dx the mask */
    for (int c = 24; c <= 32; c += 8) {
        op = dropout_op(2, c, 5, 7, 0.3f, 0, 1);
        n = elems(op.in[0]);
        x = op_frand(n, 55, -1.0f, 1.0f);
        opcheck_init(&oc, &b, &op);
        opcheck_set_input(&oc, 0, x);
        m1 = dropout_run(&oc, x, 9, &d1);
        dy = op_frand(n, 56, -1.0f, 1.0f);
        backward_dy(&oc, dy);
        dx = get_din(&oc, 0);
        want = dzeros(n);
        for (size_t i = 0; i < n; i++)
            want[i] = (double)dy[i] * m1[i] / 0.7;
        assert_close("dropout dx (blocked)", dx, want, n, 0.0, 2e-7);
        opcheck_fini(&oc);
        free(x), free(m1), free(dy), free(dx), free(want);
    }

    /* many elements, p = 0.5: the dropped fraction within 5 standard deviations */
    op = dropout_op(4, 8, 16, 16, 0.5f, 0, 1);
    n = elems(op.in[0]);
    x = op_frand(n, 53, -1.0f, 1.0f);
    opcheck_init(&oc, &b, &op);
    opcheck_set_input(&oc, 0, x);
    m1 = dropout_run(&oc, x, 1, &d1);
    double sd = sqrt((double)n * 0.25);
    ck_assert_msg(fabs((double)d1 - 0.5 * (double)n) < 5 * sd, "dropout p=0.5 dropped %zu of %zu", d1, n);
    opcheck_fini(&oc);
    free(x), free(m1);

    /* p = 0 keeps everything, unscaled */
    op = dropout_op(2, 3, 5, 7, 0.0f, 0, 1);
    n = elems(op.in[0]);
    x = op_frand(n, 54, -1.0f, 1.0f);
    opcheck_init(&oc, &b, &op);
    opcheck_set_input(&oc, 0, x);
    m1 = dropout_run(&oc, x, 3, &d1);
    ck_assert_uint_eq(d1, 0);
    float *y = get_output(&oc, 0);
    ck_assert_mem_eq(y, x, n * sizeof *x);
    opcheck_fini(&oc);
    free(x), free(m1), free(y);
    test_backend_close(&b);
}
END_TEST

START_TEST(dropout_channelwise)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    /* 1024 feature maps of 3x5 */
    struct tb_op op = dropout_op(16, 64, 3, 5, 0.3f, 1, 1);
    struct tb_shape s = op.in[0].shape;
    size_t n = elems(op.in[0]), maps = elems(op.out[1]);
    float *x = op_frand(n, 61, 0.5f, 1.5f); /* never 0: a zero in y means dropped */
    struct opcheck oc;
    opcheck_init(&oc, &b, &op);
    opcheck_set_input(&oc, 0, x);
    size_t total = 0;
    uint8_t *first = NULL;
    for (uint64_t step = 0; step < 4; step++) {
        size_t d;
        uint8_t *m = dropout_run(&oc, x, step, &d); /* checks y map by map against the mask */
        total += d;
        /* whole maps: every pixel of a map is zero or none is */
        float *y = get_output(&oc, 0);
        for (int nn = 0; nn < s.n; nn++)
            for (int c = 0; c < s.c; c++) {
                int zeros = 0;
                for (int p = 0; p < s.h * s.w; p++)
                    zeros += y[at(s, nn, c, 0, 0) + (size_t)p] == 0.0f;
                if (!(zeros == 0 || zeros == s.h * s.w) ||
                    (zeros != 0) != (m[(size_t)nn * (size_t)s.c + (size_t)c] == 0))
                    ck_abort_msg("dropout map (%d,%d): %d zeros, mask %d", nn, c, zeros,
                                 m[(size_t)nn * (size_t)s.c + (size_t)c]);
            }
        free(y);
        if (step == 0)
            first = m;
        else {
            ck_assert_msg(memcmp(first, m, maps) != 0, "dropout: steps 0 and %llu drew the same maps",
                          (unsigned long long)step);
            free(m);
        }
    }
    /* about p of the 4096 maps drawn, within 5 standard deviations */
    double cnt = 4.0 * (double)maps, sd = sqrt(cnt * 0.3 * 0.7);
    ck_assert_msg(fabs((double)total - 0.3 * cnt) < 5 * sd, "dropout p=0.3 dropped %zu of %.0f maps", total, cnt);
    /* the same step again gives the first mask */
    size_t d;
    uint8_t *again = dropout_run(&oc, x, 0, &d);
    ck_assert_mem_eq(first, again, maps);
    float *dy = op_frand(n, 62, -1.0f, 1.0f);
    backward_dy(&oc, dy);
    float *dx = get_din(&oc, 0);
    double *want = dzeros(n);
    for (int nn = 0; nn < s.n; nn++)
        for (int c = 0; c < s.c; c++)
            for (int p = 0; p < s.h * s.w; p++) {
                size_t i = at(s, nn, c, 0, 0) + (size_t)p;
                want[i] = (double)dy[i] * first[(size_t)nn * (size_t)s.c + (size_t)c] / 0.7;
            }
    assert_close("dropout channelwise dx", dx, want, n, 0.0, 2e-7);
    opcheck_fini(&oc);
    free(x), free(first), free(again), free(dy), free(dx), free(want);

    /* a small one for finite differences */
    op = dropout_op(2, 3, 5, 7, 0.4f, 1, 1);
    n = elems(op.in[0]);
    x = op_frand(n, 63, -1.0f, 1.0f);
    opcheck_init(&oc, &b, &op);
    opcheck_set_input(&oc, 0, x);
    fd_check(&oc, 1, 1e-2f, 2e-4, 1e-3, 9);
    opcheck_fini(&oc);
    free(x);
    test_backend_close(&b);
}
END_TEST

START_TEST(dropout_inference_passthrough)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    for (int channelwise = 0; channelwise < 2; channelwise++) {
        struct tb_op op = dropout_op(2, 3, 5, 7, 0.5f, channelwise, 0);
        size_t n = elems(op.in[0]), nm = elems(op.out[1]);
        float *x = op_frand(n, 71, -1.0f, 1.0f), *dy = op_frand(n, 72, -1.0f, 1.0f);
        struct opcheck oc;
        opcheck_init(&oc, &b, &op);
        opcheck_set_input(&oc, 0, x);
        uint8_t *m = bytes(nm), *m2 = bytes(nm);
        memset(m, 0xAB, nm);
        test_upload(&b, &oc.out[1], m);
        opcheck_forward(&oc, 5);
        float *y = get_output(&oc, 0);
        ck_assert_mem_eq(y, x, n * sizeof *x); /* y = x, bit for bit */
        opcheck_get_output(&oc, 1, m2);
        ck_assert_mem_eq(m, m2, nm); /* the mask is not touched */
        backward_dy(&oc, dy);
        float *dx = get_din(&oc, 0);
        ck_assert_mem_eq(dx, dy, n * sizeof *dy);
        opcheck_fini(&oc);
        free(x), free(dy), free(m), free(m2), free(y), free(dx);
    }
    test_backend_close(&b);
}
END_TEST

/* ------------------------------------------------------------------ max pooling */

/* y and, for the backward, dx (double), per ops.h: padding never wins; the gradient goes to
 * the first maximum of the window in row-major order. */
static void maxpool_ref(struct tb_shape s, int k, int stride, int pad, const float *x, const float *dy, double *y,
                        double *dx)
{
    int oh = (s.h + 2 * pad - k) / stride + 1, ow = (s.w + 2 * pad - k) / stride + 1;
    struct tb_shape os = { s.n, s.c, oh, ow };
    memset(dx, 0, tb_shape_elems(s) * sizeof *dx);
    for (int n = 0; n < s.n; n++)
        for (int c = 0; c < s.c; c++)
            for (int oy = 0; oy < oh; oy++)
                for (int ox = 0; ox < ow; ox++) {
                    double best = -INFINITY;
                    long arg = -1;
                    for (int i = 0; i < k; i++)
                        for (int j = 0; j < k; j++) {
                            int yy = oy * stride - pad + i, xx = ox * stride - pad + j;
                            if (yy < 0 || yy >= s.h || xx < 0 || xx >= s.w)
                                continue; /* padding */
                            size_t e = at(s, n, c, yy, xx);
                            if (arg < 0 || x[e] > best) {
                                best = x[e];
                                arg = (long)e;
                            }
                        }
                    if (arg < 0)
                        ck_abort_msg("maxpool reference: an empty window");
                    y[at(os, n, c, oy, ox)] = best;
                    if (dy)
                        dx[arg] += dy[at(os, n, c, oy, ox)];
                }
}

static struct tb_op maxpool_op(int n, int c, int h, int w, int k, int stride, int pad)
{
    struct tb_op op = new_op(TB_OP_MAXPOOL, 23, 1, 1);
    op.in[0] = f32(n, c, h, w);
    op.out[0] = f32(n, c, (h + 2 * pad - k) / stride + 1, (w + 2 * pad - k) / stride + 1);
    op.p.pool.k = k;
    op.p.pool.stride = stride;
    op.p.pool.pad = pad;
    return op;
}

/* Forward and backward against the reference on input x; FD when fd. */
static void maxpool_case(struct test_backend *b, struct tb_op op, const float *x, bool fd)
{
    size_t n = elems(op.in[0]), no = elems(op.out[0]);
    float *dy = op_frand(no, 81, -1.0f, 1.0f);
    struct opcheck oc;
    opcheck_init(&oc, b, &op);
    opcheck_set_input(&oc, 0, x);
    opcheck_forward(&oc, 0);
    float *y = get_output(&oc, 0);
    double *wy = dzeros(no), *wdx = dzeros(n);
    maxpool_ref(op.in[0].shape, op.p.pool.k, op.p.pool.stride, op.p.pool.pad, x, dy, wy, wdx);
    for (size_t i = 0; i < no; i++) /* a maximum is exact (== also holds for -inf) */
        if ((double)y[i] != wy[i])
            ck_abort_msg("maxpool y[%zu]: got %.8g, want %.8g", i, (double)y[i], wy[i]);
    backward_dy(&oc, dy);
    float *dx = get_din(&oc, 0);
    /* each dx sums at most k*k dy in float */
    assert_close("maxpool dx", dx, wdx, n, 1e-6, 1e-6);
    /* values 0.01 apart, eps 1e-3: no tie is crossed; the error is the rounding of x +- eps
     * (an ulp of |x| <= 2 over 2 eps, 1.2e-4) times up to k*k windows */
    if (fd)
        fd_check(&oc, 1, 1e-3f, 2e-3, 1e-3, 0);
    opcheck_fini(&oc);
    free(dy), free(y), free(wy), free(wdx), free(dx);
}

START_TEST(maxpool_forward_backward)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    /* {C, H, W, k, stride, pad}: ResNet's stem pool on odd sizes, 2x2/2 with and without a
     * dropped last row and column, and overlapping windows at stride 1 */
    static const int cases[][6] = {
        { 1, 5, 7, 3, 2, 1 }, { 3, 5, 7, 3, 2, 1 },  { 3, 5, 7, 2, 2, 0 },  { 2, 6, 8, 2, 2, 0 }, { 2, 5, 7, 3, 1, 1 },
        { 1, 4, 4, 1, 1, 0 }, { 32, 5, 7, 3, 2, 1 }, { 24, 6, 8, 2, 2, 0 }, /* blocked channels (see relu) */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int *c = cases[i];
        struct tb_op op = maxpool_op(2, c[0], c[1], c[2], c[3], c[4], c[5]);
        float *x = distinct(elems(op.in[0]), 80 + i, 1.0f);
        maxpool_case(&b, op, x, true);
        free(x);
    }
    test_backend_close(&b);
}
END_TEST

START_TEST(maxpool_ties_go_to_first)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    struct tb_op op = maxpool_op(2, 2, 5, 7, 3, 2, 1);
    size_t n = elems(op.in[0]);
    float *x = fzeros(n);
    /* a constant map, and a map of two values in stripes: every window has ties */
    for (size_t i = 0; i < n; i++)
        x[i] = i < n / 2 ? 0.5f : (float)((i / 2) % 2);
    maxpool_case(&b, op, x, false);
    /* all -inf: the first element of the window still gets the gradient */
    for (size_t i = 0; i < n; i++)
        x[i] = -INFINITY;
    maxpool_case(&b, op, x, false);
    free(x);

    /* by hand: 1x1x2x2, k=2, s=2: all equal, the gradient goes to (0,0) */
    op = maxpool_op(1, 1, 2, 2, 2, 2, 0);
    float x4[4] = { 3, 3, 3, 3 }, dy = 2.0f, dx[4];
    struct opcheck oc;
    opcheck_init(&oc, &b, &op);
    opcheck_set_input(&oc, 0, x4);
    opcheck_forward(&oc, 0);
    backward_dy(&oc, &dy);
    test_download(&b, &oc.din[0], dx);
    const double want[4] = { 2, 0, 0, 0 };
    assert_close("maxpool tie dx", dx, want, 4, 0.0, 0.0);
    opcheck_fini(&oc);
    test_backend_close(&b);
}
END_TEST

/* ------------------------------------------------------------------ global average pooling */

START_TEST(avgpool_forward_backward)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    /* 70: more than one block of the sums' channels; 32, 48: blocked tensors (see relu) */
    static const int channels[] = { 1, 3, 70, 32, 48 };
    for (size_t k = 0; k < sizeof channels / sizeof channels[0]; k++) {
        struct tb_op op = new_op(TB_OP_GLOBAL_AVGPOOL, 29, 1, 1);
        op.in[0] = f32(2, channels[k], 5, 7);
        op.out[0] = f32(2, channels[k], 1, 1);
        struct tb_shape s = op.in[0].shape;
        size_t n = elems(op.in[0]), no = elems(op.out[0]);
        float *x = op_frand(n, 91 + k, -1.0f, 1.0f), *dy = op_frand(no, 92 + k, -1.0f, 1.0f);
        struct opcheck oc;
        opcheck_init(&oc, &b, &op);
        opcheck_set_input(&oc, 0, x);
        opcheck_forward(&oc, 0);
        float *y = get_output(&oc, 0);
        double *wy = dzeros(no), *wdx = dzeros(n);
        for (int nn = 0; nn < s.n; nn++)
            for (int c = 0; c < s.c; c++) {
                double sum = 0;
                for (int yy = 0; yy < s.h; yy++)
                    for (int xx = 0; xx < s.w; xx++) {
                        sum += x[at(s, nn, c, yy, xx)];
                        wdx[at(s, nn, c, yy, xx)] = dy[nn * s.c + c] / 35.0;
                    }
                wy[nn * s.c + c] = sum / 35.0;
            }
        assert_close("avgpool y", y, wy, no, 1e-7, 1e-6);
        backward_dy(&oc, dy);
        float *dx = get_din(&oc, 0);
        assert_close("avgpool dx", dx, wdx, n, 0.0, 1e-7);
        fd_check(&oc, 1, 1e-2f, 1e-4, 1e-3, 0);
        opcheck_fini(&oc);
        free(x), free(dy), free(y), free(wy), free(wdx), free(dx);
    }
    test_backend_close(&b);
}
END_TEST

/* ------------------------------------------------------------------ bilinear resize */

/* PyTorch's source coordinate of output index d (F.interpolate, bilinear, size given). */
static double resize_src(int d, int in, int out, int align_corners)
{
    if (align_corners)
        return out > 1 ? (double)d * (double)(in - 1) / (double)(out - 1) : 0.0;
    double s = ((double)d + 0.5) * (double)in / (double)out - 0.5;
    return s < 0.0 ? 0.0 : s;
}

/* The two input indices and weights output d reads along one axis. */
static void resize_taps(int d, int in, int out, int align_corners, int *i0, int *i1, double *l0, double *l1)
{
    double s = resize_src(d, in, out, align_corners);
    int i = (int)floor(s);
    if (i > in - 1)
        i = in - 1;
    *i0 = i;
    *i1 = i + 1 < in ? i + 1 : in - 1;
    *l1 = s - i;
    *l0 = 1.0 - *l1;
}

/* y = bilinear(x) and dx = its transpose applied to dy, in double. */
static void resize_ref(struct tb_shape s, int oh, int ow, int align_corners, const float *x, const float *dy, double *y,
                       double *dx)
{
    struct tb_shape os = { s.n, s.c, oh, ow };
    memset(dx, 0, tb_shape_elems(s) * sizeof *dx);
    for (int n = 0; n < s.n; n++)
        for (int c = 0; c < s.c; c++)
            for (int oy = 0; oy < oh; oy++)
                for (int ox = 0; ox < ow; ox++) {
                    int y0, y1, x0, x1;
                    double a0, a1, b0, b1;
                    resize_taps(oy, s.h, oh, align_corners, &y0, &y1, &a0, &a1);
                    resize_taps(ox, s.w, ow, align_corners, &x0, &x1, &b0, &b1);
                    size_t o = at(os, n, c, oy, ox);
                    y[o] = a0 * (b0 * x[at(s, n, c, y0, x0)] + b1 * x[at(s, n, c, y0, x1)]) +
                           a1 * (b0 * x[at(s, n, c, y1, x0)] + b1 * x[at(s, n, c, y1, x1)]);
                    if (dy) {
                        dx[at(s, n, c, y0, x0)] += a0 * b0 * dy[o];
                        dx[at(s, n, c, y0, x1)] += a0 * b1 * dy[o];
                        dx[at(s, n, c, y1, x0)] += a1 * b0 * dy[o];
                        dx[at(s, n, c, y1, x1)] += a1 * b1 * dy[o];
                    }
                }
}

static struct tb_op resize_op(int n, int c, int h, int w, int oh, int ow, int align_corners)
{
    struct tb_op op = new_op(TB_OP_RESIZE, 31, 1, 1);
    op.in[0] = f32(n, c, h, w);
    op.out[0] = f32(n, c, oh, ow);
    op.p.resize.out_h = oh;
    op.p.resize.out_w = ow;
    op.p.resize.align_corners = align_corners;
    return op;
}

START_TEST(resize_forward_backward)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    /* {C, H, W, OH, OW}: up, down, mixed, to and from a single pixel, same size */
    static const int cases[][5] = {
        { 3, 5, 7, 9, 12 },  { 3, 9, 12, 4, 5 },  { 1, 5, 7, 3, 11 }, { 2, 5, 7, 1, 1 },
        { 2, 1, 1, 3, 4 },   { 2, 5, 7, 5, 7 },   { 1, 4, 6, 8, 12 }, { 2, 8, 12, 4, 6 },
        { 32, 5, 7, 9, 12 }, { 24, 9, 12, 4, 5 }, /* blocked channels (see relu) */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int ac = 0; ac < 2; ac++) {
            const int *c = cases[i];
            struct tb_op op = resize_op(2, c[0], c[1], c[2], c[3], c[4], ac);
            size_t n = elems(op.in[0]), no = elems(op.out[0]);
            float *x = op_frand(n, 101 + i, -1.0f, 1.0f), *dy = op_frand(no, 102 + i, -1.0f, 1.0f);
            struct opcheck oc;
            opcheck_init(&oc, &b, &op);
            opcheck_set_input(&oc, 0, x);
            opcheck_forward(&oc, 0);
            float *y = get_output(&oc, 0);
            double *wy = dzeros(no), *wdx = dzeros(n);
            resize_ref(op.in[0].shape, c[3], c[4], ac, x, dy, wy, wdx);
            /* the kernel's coordinates are float, as PyTorch's: a few ulps of a value <= 1 */
            assert_close(ac ? "resize y (align_corners)" : "resize y", y, wy, no, 1e-6, 1e-5);
            backward_dy(&oc, dy);
            float *dx = get_din(&oc, 0);
            assert_close(ac ? "resize dx (align_corners)" : "resize dx", dx, wdx, n, 2e-6, 1e-5);
            fd_check(&oc, 1, 1e-2f, 2e-4, 1e-3, 0);
            opcheck_fini(&oc);
            free(x), free(dy), free(y), free(wy), free(wdx), free(dx);
        }
    test_backend_close(&b);
}
END_TEST

/* Runs resize on a 1-image 1-channel x and compares with values worked out by hand. */
static void resize_hand(struct test_backend *b, int h, int w, int oh, int ow, int ac, const float *x,
                        const double *want, const float *dy, const double *want_dx)
{
    struct tb_op op = resize_op(1, 1, h, w, oh, ow, ac);
    struct opcheck oc;
    opcheck_init(&oc, b, &op);
    opcheck_set_input(&oc, 0, x);
    opcheck_forward(&oc, 0);
    float *y = get_output(&oc, 0);
    assert_close(ac ? "resize by hand (align_corners)" : "resize by hand", y, want, (size_t)(oh * ow), 1e-6, 1e-6);
    if (dy) {
        backward_dy(&oc, (float *)dy);
        float *dx = get_din(&oc, 0);
        assert_close("resize dx by hand", dx, want_dx, (size_t)(h * w), 1e-6, 1e-6);
        free(dx);
    }
    opcheck_fini(&oc);
    free(y);
}

START_TEST(resize_by_hand)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    const float x[4] = { 1, 2, 3, 4 };
    /* 2x2 -> 3x3. align_corners: sources 0, 0.5, 1. Without: (d + 0.5) * 2/3 - 0.5 =
     * -1/6 -> 0, 0.5, 7/6 (past the last pixel: its value). Both give the midpoints. The
     * gradient of all-ones dy: each input pixel receives (1 + 0.5) per axis, 2.25. */
    const double want3[9] = { 1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4 };
    const float ones[9] = { 1, 1, 1, 1, 1, 1, 1, 1, 1 };
    const double dx3[4] = { 2.25, 2.25, 2.25, 2.25 };
    resize_hand(&b, 2, 2, 3, 3, 1, x, want3, ones, dx3);
    resize_hand(&b, 2, 2, 3, 3, 0, x, want3, ones, dx3);
    /* 2x2 -> 4x4: value = 1 + fx + 2 fy with per-axis fractions f. align_corners: d/3 =
     * 0, 1/3, 2/3, 1. Without: (d + 0.5)/2 - 0.5 = -0.25 -> 0, 0.25, 0.75, 1.25 -> 1. */
    double want4[16];
    const double fa[4] = { 0, 1.0 / 3, 2.0 / 3, 1 }, fh[4] = { 0, 0.25, 0.75, 1 };
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            want4[i * 4 + j] = 1 + fa[j] + 2 * fa[i];
    resize_hand(&b, 2, 2, 4, 4, 1, x, want4, NULL, NULL);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            want4[i * 4 + j] = 1 + fh[j] + 2 * fh[i];
    resize_hand(&b, 2, 2, 4, 4, 0, x, want4, NULL, NULL);
    /* 2x2 -> 1x1: align_corners takes the corner; without, the centre 0.5: the mean. */
    const double corner = 1, centre = 2.5;
    resize_hand(&b, 2, 2, 1, 1, 1, x, &corner, NULL, NULL);
    resize_hand(&b, 2, 2, 1, 1, 0, x, &centre, NULL, NULL);
    /* 1x4 -> 1x2 (downsampling): align_corners: 0 and 3 -> 1, 4. Without: scale 2,
     * 0.5 and 2.5 -> 1.5, 3.5; dy = (1, 10) goes half and half to its two neighbours. */
    const double ends[2] = { 1, 4 }, mids[2] = { 1.5, 3.5 };
    const float dy2[2] = { 1, 10 };
    const double dx_ends[4] = { 1, 0, 0, 10 }, dx_mids[4] = { 0.5, 0.5, 5, 5 };
    resize_hand(&b, 1, 4, 1, 2, 1, x, ends, dy2, dx_ends);
    resize_hand(&b, 1, 4, 1, 2, 0, x, mids, dy2, dx_mids);
    test_backend_close(&b);
}
END_TEST

/* ------------------------------------------------------------------ concat */

START_TEST(concat_three)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    /* NHWC throughout; blocked output from NHWC and blocked inputs; blocked on AVX2's
     * block only; blocked inputs into an NHWC output (see relu for which are blocked) */
    static const int configs[4][3] = { { 1, 2, 3 }, { 16, 1, 15 }, { 16, 8, 8 }, { 32, 16, 3 } };
    for (int cfg = 0; cfg < 4; cfg++) {
        const int *ch = configs[cfg];
        struct tb_op op = new_op(TB_OP_CONCAT, 37, 3, 1);
        for (int i = 0; i < 3; i++)
            op.in[i] = f32(2, ch[i], 5, 7);
        op.out[0] = f32(2, ch[0] + ch[1] + ch[2], 5, 7);
        struct tb_shape ys = op.out[0].shape;
        size_t no = elems(op.out[0]);
        float *x[3];
        struct opcheck oc;
        opcheck_init(&oc, &b, &op);
        for (int i = 0; i < 3; i++) {
            x[i] = op_frand(elems(op.in[i]), 111 + (uint64_t)i, -1.0f, 1.0f);
            opcheck_set_input(&oc, (uint32_t)i, x[i]);
        }
        opcheck_forward(&oc, 0);
        float *y = get_output(&oc, 0);
        float *dy = op_frand(no, 114, -1.0f, 1.0f);
        double *want = dzeros(no);
        /* y channel (c0 + c) of image n is channel c of input i, c0 = channels before it */
        for (int n = 0, c0 = 0; n < 2; n++, c0 = 0)
            for (int i = 0; i < 3; c0 += ch[i], i++)
                for (int c = 0; c < ch[i]; c++)
                    for (int p = 0; p < 35; p++)
                        want[at(ys, n, c0 + c, 0, 0) + (size_t)p] = x[i][at(op.in[i].shape, n, c, 0, 0) + (size_t)p];
        assert_close("concat y", y, want, no, 0.0, 0.0);
        backward_dy(&oc, dy);
        for (int i = 0, c0 = 0; i < 3; c0 += ch[i], i++) {
            size_t ni = elems(op.in[i]);
            float *dx = get_din(&oc, (uint32_t)i);
            double *wdx = dzeros(ni);
            for (int n = 0; n < 2; n++)
                for (int c = 0; c < ch[i]; c++)
                    for (int p = 0; p < 35; p++)
                        wdx[at(op.in[i].shape, n, c, 0, 0) + (size_t)p] = dy[at(ys, n, c0 + c, 0, 0) + (size_t)p];
            assert_close("concat dx", dx, wdx, ni, 0.0, 0.0);
            free(dx), free(wdx);
        }
        /* an input whose gradient is not wanted (data NULL) is skipped, the others written */
        void *keep = oc.din[1].data;
        float *before = get_din(&oc, 0);
        oc.din[1].data = NULL;
        struct tb_err err;
        tb_err_clear(&err);
        ck_assert_int_eq(b.ops.backend->op_backward(b.ctx, &oc.op, oc.state, oc.in, oc.out, oc.dout, oc.din, &err),
                         TB_OK);
        oc.din[1].data = keep;
        float *after = get_din(&oc, 0);
        ck_assert_mem_eq(before, after, elems(op.in[0]) * sizeof(float));
        fd_check(&oc, 7, 1e-2f, 1e-4, 1e-3, 0);
        opcheck_fini(&oc);
        for (int i = 0; i < 3; i++)
            free(x[i]);
        free(y), free(dy), free(want), free(before), free(after);
    }
    test_backend_close(&b);
}
END_TEST

/* ------------------------------------------------------------------ softmax cross-entropy */

struct ce_case {
    int n, k, h, w;
    int weighted, per_image;
};

/* loss and d loss / d logits (times dl) in double, straight from ops.h. */
static double ce_ref(const struct ce_case *cc, const float *z, const uint8_t *lab, const float *wts, double dl,
                     double *dz)
{
    struct tb_shape s = { cc->n, cc->k, cc->h, cc->w };
    struct tb_shape ls = { cc->n, 1, cc->h, cc->w };
    double num_all = 0, den_all = 0, loss = 0;
    double *num = dzeros((size_t)cc->n), *den = dzeros((size_t)cc->n);
    for (int n = 0; n < cc->n; n++)
        for (int y = 0; y < cc->h; y++)
            for (int x = 0; x < cc->w; x++) {
                int t = lab[at(ls, n, 0, y, x)];
                if (t == 255)
                    continue;
                double w = cc->weighted ? wts[n * cc->k + t] : 1.0;
                double m = -INFINITY, se = 0;
                for (int k = 0; k < cc->k; k++)
                    m = fmax(m, z[at(s, n, k, y, x)]);
                for (int k = 0; k < cc->k; k++)
                    se += exp(z[at(s, n, k, y, x)] - m);
                double nll = -(z[at(s, n, t, y, x)] - m - log(se));
                num[n] += w * nll;
                den[n] += w;
            }
    for (int n = 0; n < cc->n; n++)
        num_all += num[n], den_all += den[n];
    if (cc->per_image) {
        for (int n = 0; n < cc->n; n++)
            loss += den[n] > 0 ? num[n] / den[n] : 0.0; /* an image with no counted pixel adds 0 */
    } else {
        loss = den_all > 0 ? num_all / den_all : 0.0;
    }
    memset(dz, 0, tb_shape_elems(s) * sizeof *dz);
    for (int n = 0; n < cc->n; n++)
        for (int y = 0; y < cc->h; y++)
            for (int x = 0; x < cc->w; x++) {
                int t = lab[at(ls, n, 0, y, x)];
                if (t == 255)
                    continue;
                double d = cc->per_image ? den[n] : den_all;
                if (!(d > 0))
                    continue;
                double w = cc->weighted ? wts[n * cc->k + t] : 1.0;
                double m = -INFINITY, se = 0;
                for (int k = 0; k < cc->k; k++)
                    m = fmax(m, z[at(s, n, k, y, x)]);
                for (int k = 0; k < cc->k; k++)
                    se += exp(z[at(s, n, k, y, x)] - m);
                for (int k = 0; k < cc->k; k++) {
                    double p = exp(z[at(s, n, k, y, x)] - m) / se;
                    dz[at(s, n, k, y, x)] = dl * w / d * (p - (k == t ? 1.0 : 0.0));
                }
            }
    free(num);
    free(den);
    return loss;
}

static struct tb_op ce_op(const struct ce_case *cc)
{
    struct tb_op op = new_op(TB_OP_SOFTMAX_CE, 42, cc->weighted ? 3 : 2, 1);
    op.in[0] = f32(cc->n, cc->k, cc->h, cc->w);
    op.in[1] = u8(cc->n, 1, cc->h, cc->w);
    if (cc->weighted)
        op.in[2] = f32(cc->n, cc->k, 1, 1);
    op.out[0] = f32(1, 1, 1, 1);
    op.p.ce.ignore_label = 255;
    op.p.ce.weighted = cc->weighted;
    op.p.ce.per_image = cc->per_image;
    return op;
}

/* Labels: random classes with about 1 in 5 ignored; image `empty` (if >= 0) all ignored. */
static uint8_t *ce_labels(const struct ce_case *cc, uint64_t seed, int empty)
{
    size_t n = (size_t)cc->n * (size_t)cc->h * (size_t)cc->w, per = (size_t)cc->h * (size_t)cc->w;
    uint8_t *l = bytes(n);
    uint64_t s = seed * TB_GOLDEN64 + 3;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = op_next_rand(&s);
        l[i] = r % 5 == 0 ? 255 : (uint8_t)(r / 5 % (uint64_t)cc->k);
        if (empty >= 0 && i / per == (size_t)empty)
            l[i] = 255;
    }
    return l;
}

/* Forward and backward against ce_ref, then finite differences. */
static void ce_check(struct test_backend *b, const struct ce_case *cc, const float *z, const uint8_t *lab,
                     const float *wts, bool fd)
{
    struct tb_op op = ce_op(cc);
    size_t n = elems(op.in[0]);
    struct opcheck oc;
    opcheck_init(&oc, b, &op);
    opcheck_set_input(&oc, 0, z);
    opcheck_set_input(&oc, 1, lab);
    if (cc->weighted)
        opcheck_set_input(&oc, 2, wts);
    opcheck_forward(&oc, 0);
    float loss;
    opcheck_get_output(&oc, 0, &loss);
    double *wdz = dzeros(n);
    const float dl = 0.7f;
    double want = ce_ref(cc, z, lab, wts, dl, wdz);
    /* float per-pixel log-softmax, double sums: relative 1e-6 */
    assert_close("softmax_ce loss", &loss, &want, 1, 1e-7, 2e-6);
    float dlv = dl;
    backward_dy(&oc, &dlv);
    float *dz = get_din(&oc, 0);
    /* gradients are ~ 1/(counted pixels): absolute 1e-8, relative a few float ulps */
    assert_close("softmax_ce dlogits", dz, wdz, n, 1e-8, 1e-5);
    /* FD of the float loss: an ulp of the loss (<= 5e-7) over 2 eps = 2.5e-5, against
     * gradients of about 1e-2 */
    if (fd)
        fd_check(&oc, 1, 1e-2f, 1e-4, 1e-2, 0);
    opcheck_fini(&oc);
    free(wdz), free(dz);
}

START_TEST(softmax_ce_modes)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    for (int weighted = 0; weighted < 2; weighted++)
        for (int per_image = 0; per_image < 2; per_image++) {
            /* 32 classes: blocked logits on every vector path, 16 on AVX-512's (see relu) */
            for (int kk = 0; kk < 3; kk++) {
                static const int classes[3] = { 4, 32, 16 };
                struct ce_case cc = { 3, classes[kk], 5, 7, weighted, per_image };
                size_t n = (size_t)cc.n * (size_t)cc.k * (size_t)cc.h * (size_t)cc.w;
                float *z = op_frand(n, 121, -3.0f, 3.0f);
                float *wts = op_frand((size_t)cc.n * (size_t)cc.k, 122, 0.25f, 2.0f);
                uint8_t *lab = ce_labels(&cc, 123, 2); /* image 2: every pixel ignored */
                ce_check(&b, &cc, z, lab, wts, kk == 0);
                free(z), free(wts), free(lab);
            }
        }
    /* one class, one channel: the loss is 0 and so is every gradient */
    struct ce_case one = { 2, 1, 5, 7, 0, 0 };
    float *z = op_frand(70, 124, -3.0f, 3.0f);
    uint8_t *lab = ce_labels(&one, 125, -1);
    ce_check(&b, &one, z, lab, NULL, false);
    free(z), free(lab);
    test_backend_close(&b);
}
END_TEST

START_TEST(softmax_ce_values_by_hand)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    /* 2 images of 1x2 pixels, 2 classes. Image 0: logits (0,0) label 0 -> log 2; logits
     * (ln 3, 0) label 1 -> log 4. Image 1: (0,0) label 1 -> log 2; pixel ignored. */
    struct ce_case cc = { 2, 2, 1, 2, 1, 0 };
    const float l3 = (float)log(3.0);
    /* NCHW: z[n][k][x] */
    const float z[8] = { 0, l3, 0, 0, 0, 5, 0, -5 };
    const uint8_t lab[4] = { 0, 1, 1, 255 };
    const float w[4] = { 1, 3, 2, 0.5f }; /* w[n][k] */
    const double L2 = log(2.0), L4 = log(4.0);
    double want;
    /* weighted global mean: (1 log2 + 3 log4 + 0.5 log2) / (1 + 3 + 0.5) */
    cc.weighted = 1, cc.per_image = 0;
    struct tb_op op = ce_op(&cc);
    struct opcheck oc;
    opcheck_init(&oc, &b, &op);
    opcheck_set_input(&oc, 0, z);
    opcheck_set_input(&oc, 1, lab);
    opcheck_set_input(&oc, 2, w);
    opcheck_forward(&oc, 0);
    float loss;
    opcheck_get_output(&oc, 0, &loss);
    want = (1 * L2 + 3 * L4 + 0.5 * L2) / 4.5;
    assert_close("softmax_ce weighted mean", &loss, &want, 1, 1e-7, 1e-6);
    opcheck_fini(&oc);
    /* weighted per image: (1 log2 + 3 log4) / 4 + 0.5 log2 / 0.5 */
    cc.per_image = 1;
    op = ce_op(&cc);
    opcheck_init(&oc, &b, &op);
    opcheck_set_input(&oc, 0, z);
    opcheck_set_input(&oc, 1, lab);
    opcheck_set_input(&oc, 2, w);
    opcheck_forward(&oc, 0);
    opcheck_get_output(&oc, 0, &loss);
    want = (1 * L2 + 3 * L4) / 4 + L2;
    assert_close("softmax_ce weighted per image", &loss, &want, 1, 1e-7, 1e-6);
    opcheck_fini(&oc);
    /* unweighted global: (log2 + log4 + log2) / 3 */
    cc.weighted = 0, cc.per_image = 0;
    op = ce_op(&cc);
    opcheck_init(&oc, &b, &op);
    opcheck_set_input(&oc, 0, z);
    opcheck_set_input(&oc, 1, lab);
    opcheck_forward(&oc, 0);
    opcheck_get_output(&oc, 0, &loss);
    want = (L2 + L4 + L2) / 3;
    assert_close("softmax_ce mean", &loss, &want, 1, 1e-7, 1e-6);
    opcheck_fini(&oc);
    test_backend_close(&b);
}
END_TEST

START_TEST(softmax_ce_all_ignored_and_stable)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    /* every pixel of the batch ignored: loss 0, gradient 0, in both reductions */
    for (int per_image = 0; per_image < 2; per_image++) {
        struct ce_case cc = { 2, 3, 5, 7, 1, per_image };
        size_t n = (size_t)2 * 3 * 35;
        float *z = op_frand(n, 131, -3.0f, 3.0f), *wts = op_frand(6, 132, 0.5f, 2.0f);
        uint8_t *lab = bytes(70);
        memset(lab, 255, 70);
        ce_check(&b, &cc, z, lab, wts, false);
        free(z), free(wts), free(lab);
    }
    /* huge logits: log-sum-exp with the maximum taken out stays finite and exact */
    struct ce_case cc = { 2, 5, 3, 5, 0, 0 };
    size_t n = (size_t)2 * 5 * 15;
    float *z = op_frand(n, 133, -1.0f, 1.0f);
    for (size_t i = 0; i < n; i++)
        z[i] *= i % 3 ? 1000.0f : 80.0f;
    uint8_t *lab = ce_labels(&cc, 134, -1);
    ce_check(&b, &cc, z, lab, NULL, false);
    free(z), free(lab);
    test_backend_close(&b);
}
END_TEST

START_TEST(softmax_ce_bad_label)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    struct ce_case cc = { 3, 4, 5, 7, 0, 0 };
    struct tb_op op = ce_op(&cc);
    float *z = op_frand(elems(op.in[0]), 141, -1.0f, 1.0f);
    uint8_t *lab = ce_labels(&cc, 142, -1);
    /* two bad labels; the first in (image, row, column) order is reported */
    lab[at(op.in[1].shape, 2, 0, 0, 0)] = 7;
    lab[at(op.in[1].shape, 1, 0, 2, 3)] = 4; /* == K */
    struct opcheck oc;
    opcheck_init(&oc, &b, &op);
    opcheck_set_input(&oc, 0, z);
    opcheck_set_input(&oc, 1, lab);
    struct tb_err err;
    ck_assert_int_eq(try_forward(&oc, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "op 42");
    ck_assert_contains(err.msg, "softmax_ce");
    ck_assert_contains(err.msg, "image 1");
    ck_assert_contains(err.msg, "row 2, column 3");
    ck_assert_contains(err.msg, "label 4");
    /* backward refuses the same labels */
    tb_err_clear(&err);
    ck_assert_int_eq(b.ops.backend->op_backward(b.ctx, &oc.op, oc.state, oc.in, oc.out, oc.dout, oc.din, &err),
                     TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "image 1");
    /* 254 is no class either when the ignore label is 255 */
    lab[at(op.in[1].shape, 1, 0, 2, 3)] = 1;
    lab[at(op.in[1].shape, 0, 0, 4, 6)] = 254;
    opcheck_set_input(&oc, 1, lab);
    ck_assert_int_eq(try_forward(&oc, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "image 0, pixel (row 4, column 6): label 254");
    opcheck_fini(&oc);
    free(z), free(lab);
    test_backend_close(&b);
}
END_TEST

/* ------------------------------------------------------------------ BCE with logits */

/* The class-balanced loss and its gradient (times dl) in double, from ops.h. */
static double bce_ref(size_t n, const float *z, const uint8_t *t, double dl, double *dz)
{
    double P = 0, Q = 0, sum = 0;
    for (size_t i = 0; i < n; i++)
        P += t[i] == 1, Q += t[i] == 0;
    for (size_t i = 0; i < n; i++) {
        double w = t[i] == 1 ? Q / (P + Q) : t[i] == 0 ? P / (P + Q) : 0.0;
        double x = z[i], y = t[i] == 1 ? 1.0 : 0.0;
        if (w == 0.0) {
            dz[i] = 0.0;
            continue;
        }
        /* -(y log s(x) + (1-y) log(1 - s(x))), written without overflow */
        sum += w * (fmax(x, 0.0) - x * y + log1p(exp(-fabs(x))));
        dz[i] = dl * w * (1.0 / (1.0 + exp(-x)) - y) / (double)n;
    }
    return sum / (double)n;
}

static struct tb_op bce_op(int n, int h, int w)
{
    struct tb_op op = new_op(TB_OP_BCE_LOGITS, 47, 2, 1);
    op.in[0] = f32(n, 1, h, w);
    op.in[1] = u8(n, 1, h, w);
    op.out[0] = f32(1, 1, 1, 1);
    return op;
}

static void bce_check(struct test_backend *b, struct tb_op op, const float *z, const uint8_t *t, bool fd,
                      const double *exact_loss)
{
    size_t n = elems(op.in[0]);
    struct opcheck oc;
    opcheck_init(&oc, b, &op);
    opcheck_set_input(&oc, 0, z);
    opcheck_set_input(&oc, 1, t);
    opcheck_forward(&oc, 0);
    float loss;
    opcheck_get_output(&oc, 0, &loss);
    double *wdz = dzeros(n);
    const float dl = 1.3f;
    double want = bce_ref(n, z, t, dl, wdz);
    assert_close("bce loss", &loss, &want, 1, 1e-7, 2e-6);
    if (exact_loss)
        assert_close("bce loss by hand", &loss, exact_loss, 1, 1e-7, 1e-6);
    float dlv = dl;
    backward_dy(&oc, &dlv);
    float *dz = get_din(&oc, 0);
    assert_close("bce dlogits", dz, wdz, n, 1e-9, 1e-5);
    /* the loss is ~0.3, an ulp 3e-8 over 2 eps = 1.5e-6, against gradients of ~1e-2 */
    if (fd)
        fd_check(&oc, 1, 1e-2f, 2e-5, 1e-2, 0);
    opcheck_fini(&oc);
    free(wdz), free(dz);
}

/* ------------------------------------------------------------------ dual-task regulariser */

/* The reference's convTri(E, 4) on one H x W plane, in double: the plane padded as the
 * reference pads it (R = the row replicated by one at each end, R reflected by four about
 * its ends, and of that the four samples next to the row on each side), then the full
 * 9 x 9 triangle kernel [1..5..1]/25 outer [1..5..1]/25. */
static int dual_pad(int j, int n)
{
    /* R[0] = x[0], R[i] = x[i - 1], R[n + 1] = x[n - 1]; position j < 0 of the padded row
     * is R[-j], position j >= n is R[2n - j] */
    const int r = j < 0 ? -j : j >= n ? 2 * n - j : j + 1;
    return r == 0 ? 0 : r == n + 1 ? n - 1 : r - 1;
}

static void dual_smooth_ref(const double *e, int H, int W, double *s)
{
    double f[9];
    for (int d = 0; d < 9; d++)
        f[d] = (d <= 4 ? d + 1 : 9 - d) / 25.0;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            double acc = 0;
            for (int dy = 0; dy < 9; dy++)
                for (int dx = 0; dx < 9; dx++)
                    acc += f[dy] * f[dx] * e[dual_pad(y + dy - 4, H) * W + dual_pad(x + dx - 4, W)];
            s[y * W + x] = acc;
        }
}

/* Unnormalised gradient magnitudes of every plane of e (NCHW), in double. */
static void dual_mag_ref(struct tb_shape sh, const double *e, double *m)
{
    const int H = sh.h, W = sh.w;
    double *s = dzeros((size_t)H * W);
    for (int p = 0; p < sh.n * sh.c; p++) {
        dual_smooth_ref(e + (size_t)p * H * W, H, W, s);
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                double ox = 0.5 * ((x + 1 < W ? s[y * W + x + 1] : 0) - (x > 0 ? s[y * W + x - 1] : 0));
                double oy = 0.5 * ((y + 1 < H ? s[(y + 1) * W + x] : 0) - (y > 0 ? s[(y - 1) * W + x] : 0));
                m[(size_t)p * H * W + y * W + x] = sqrt(ox * ox + oy * oy + 1e-6);
            }
    }
    free(s);
}

/* The loss and the sample (NCHW) from ops.h's definition, in double; the uniform numbers are
 * the CPU backend's definition (tb_cpu_uniform), the rest is computed here. */
static double dual_ref(const struct tb_op *op, const float *z, const uint8_t *lab, uint64_t step, double *sample)
{
    const struct tb_shape s = op->in[0].shape;
    const size_t hw = (size_t)s.h * s.w, all = elems(op->in[0]);
    double *onehot = dzeros(all), *mp = dzeros(all), *mg = dzeros(all);
    for (int n = 0; n < s.n; n++)
        for (size_t p = 0; p < hw; p++) {
            const int t = lab[n * hw + p];
            const bool ign = t == op->p.dual.ignore_label;
            double v[256], m = -INFINITY, sum = 0;
            for (int k = 0; k < s.c; k++) {
                const size_t i = ((size_t)n * s.c + k) * hw + p;
                const double u = tb_cpu_uniform(op->p.dual.seed, step, op->id, i);
                const double g = -log(1e-10 - log(u + 1e-10));
                v[k] = ((ign ? 0.0 : z[i]) + g) / op->p.dual.tau;
                m = fmax(m, v[k]);
            }
            for (int k = 0; k < s.c; k++)
                sum += exp(v[k] - m);
            for (int k = 0; k < s.c; k++) {
                const size_t i = ((size_t)n * s.c + k) * hw + p;
                sample[i] = exp(v[k] - m) / sum;
                onehot[i] = (ign ? 0 : t) == k;
            }
        }
    dual_mag_ref(s, sample, mp);
    dual_mag_ref(s, onehot, mg);
    double Mp = 0, Mg = 0;
    for (size_t i = 0; i < all; i++)
        Mp = fmax(Mp, mp[i]), Mg = fmax(Mg, mg[i]);
    double c1 = 0, c2 = 0, a1 = 0, a2 = 0;
    for (size_t i = 0; i < all; i++) {
        const double p = mp[i] / Mp, q = mg[i] / Mg, d = fabs(p - q);
        if (p >= 1e-8)
            c1 += 1, a1 += d;
        if (q >= 1e-8)
            c2 += 1, a2 += d;
    }
    free(onehot), free(mp), free(mg);
    return 0.5 * a1 / (c1 + 1e-10) + 0.5 * a2 / (c2 + 1e-10);
}

static struct tb_op dual_op(int n, int k, int h, int w)
{
    struct tb_op op = new_op(TB_OP_DUAL_TASK, 51, 2, 2);
    op.in[0] = f32(n, k, h, w);
    op.in[1] = u8(n, 1, h, w);
    op.out[0] = f32(1, 1, 1, 1);
    op.out[1] = op.in[0];
    op.p.dual = (struct tb_dual_params){ 0.5f, 255, 0 };
    return op;
}

/* Forward against the double reference on 5 classes (NHWC here) and 16 (channel-blocked),
 * one image with every label ignored, one with a single class; the backward against
 * finite differences of the forward at the same step (the same noise). */
START_TEST(dual_task_forward_backward)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    static const int shapes[][4] = { { 3, 5, 9, 11 }, { 1, 16, 12, 7 }, { 2, 3, 3, 4 } };
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        const int *d = shapes[c];
        struct tb_op op = dual_op(d[0], d[1], d[2], d[3]);
        const size_t all = elems(op.in[0]), hw = (size_t)d[2] * d[3];
        float *z = op_frand(all, 1300 + c, -3.0f, 3.0f);
        uint8_t *lab = op_labels(elems(op.in[1]), d[1], 6, 1310 + c);
        if (d[0] == 3) {
            memset(lab + hw, 255, hw);   /* image 1: all ignored */
            memset(lab + 2 * hw, 2, hw); /* image 2: one class, no boundary */
        }
        struct opcheck oc;
        opcheck_init(&oc, &b, &op);
        opcheck_set_input(&oc, 0, z);
        opcheck_set_input(&oc, 1, lab);
        const uint64_t step = 40 + c;
        opcheck_forward(&oc, step);
        float loss;
        opcheck_get_output(&oc, 0, &loss);
        float *sample = get_output(&oc, 1);
        double *want_sample = dzeros(all);
        const double want = dual_ref(&op, z, lab, step, want_sample);
        /* the sample: float expf/logf against double, a few ulps of values <= 1 */
        assert_close("dual_task sample", sample, want_sample, all, 1e-6, 1e-5);
        /* the loss: float per-element terms of a chain of 81-tap sums, summed in double */
        assert_close("dual_task loss", &loss, &want, 1, 1e-6, 1e-4);
        ck_assert_msg(want > 1e-3, "the case must have boundaries to compare (loss %g)", want);
        /* one float ulp of the loss (~1e-8) over 2 eps is 5e-7, against gradients of
         * ~1e-3 .. 1e-5; the L1's kinks make a few per cent of an element at most */
        bool check[TB_OP_MAX_IN] = { true, false };
        opcheck_gradients(&oc, check, 1e-2f, 3e-6, 3e-2, FD_SAMPLES, 0x2, step);
        /* ignored pixels' logits are replaced by 0: no gradient reaches them */
        float dl = 1.0f;
        opcheck_forward(&oc, step);
        backward_dy(&oc, &dl);
        float *dz = get_din(&oc, 0);
        /* and every element against central differences of the double reference (eps
         * 1e-4, the same noise): 0.5% of each, where float rounding is ~1e-5 of it */
        double *tmp = dzeros(all);
        for (size_t e = 0; e < all; e++) {
            const float keep = z[e];
            z[e] = keep + 1e-4f;
            const double lp = dual_ref(&op, z, lab, step, tmp);
            z[e] = keep - 1e-4f;
            const double lm = dual_ref(&op, z, lab, step, tmp);
            z[e] = keep;
            const double num = (lp - lm) / ((double)(keep + 1e-4f) - (double)(keep - 1e-4f));
            ck_assert_msg(fabs(num - (double)dz[e]) <= 1e-6 + 5e-3 * fabs(num),
                          "dual_task case %zu: d logits [%zu]: backward %.6g, finite differences of the reference %.6g",
                          c, e, (double)dz[e], num);
        }
        free(tmp);
        double norm = 0;
        for (int n = 0; n < d[0]; n++)
            for (int k = 0; k < d[1]; k++)
                for (size_t p = 0; p < hw; p++) {
                    const float g = dz[((size_t)n * d[1] + k) * hw + p];
                    if (lab[n * hw + p] == 255)
                        ck_assert_msg(g == 0.0f, "dual_task: an ignored pixel has gradient %g", (double)g);
                    norm += fabs(g);
                }
        ck_assert_msg(norm > 0, "dual_task: no gradient at all");
        opcheck_fini(&oc);
        free(z), free(lab), free(sample), free(want_sample), free(dz);
    }
    test_backend_close(&b);
}
END_TEST

/* Backward takes the maps forward left in the scratch while no op has used it since, and
 * makes them again once one has: the same bits either way, and twice in a row. A NaN logit
 * leaves no finite loss: the loss is NaN, and the gradient but at ignored pixels. */
START_TEST(dual_task_backward_maps_and_nan)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    struct tb_op op = dual_op(2, 5, 20, 9);
    const size_t all = elems(op.in[0]);
    float *z = op_frand(all, 1450, -2.0f, 2.0f);
    uint8_t *lab = op_labels(elems(op.in[1]), 5, 6, 1451);
    struct opcheck oc;
    opcheck_init(&oc, &b, &op);
    opcheck_set_input(&oc, 0, z);
    opcheck_set_input(&oc, 1, lab);
    float dl = 0.7f;
    opcheck_forward(&oc, 12);
    backward_dy(&oc, &dl);
    float *kept = get_din(&oc, 0);
    backward_dy(&oc, &dl);
    float *again = get_din(&oc, 0);
    /* a softmax cross-entropy (which takes the scratch) between forward and backward */
    const struct ce_case cc = { 2, 5, 20, 9, 0, 0 };
    struct tb_op ce = ce_op(&cc);
    struct opcheck other;
    opcheck_init(&other, &b, &ce);
    opcheck_set_input(&other, 0, z);
    opcheck_set_input(&other, 1, lab);
    opcheck_forward(&oc, 12);
    opcheck_forward(&other, 0);
    backward_dy(&oc, &dl);
    float *made = get_din(&oc, 0);
    ck_assert_msg(memcmp(kept, again, all * sizeof *kept) == 0, "dual_task: a second backward differs");
    ck_assert_msg(memcmp(kept, made, all * sizeof *kept) == 0,
                  "dual_task: backward with its maps made again differs from backward with forward's");
    z[7] = NAN;
    opcheck_set_input(&oc, 0, z);
    opcheck_forward(&oc, 12);
    float loss;
    opcheck_get_output(&oc, 0, &loss);
    ck_assert_msg(isnan(loss), "dual_task: a NaN logit gives loss %g", (double)loss);
    backward_dy(&oc, &dl);
    float *nan_dz = get_din(&oc, 0);
    const size_t hw = 20 * 9;
    for (size_t i = 0; i < all; i++) {
        const bool ignored = lab[i / (5 * hw) * hw + i % hw] == 255; /* NCHW */
        ck_assert_msg(ignored ? nan_dz[i] == 0.0f : isnan(nan_dz[i]),
                      "dual_task: a NaN logit leaves d logits [%zu] = %g (label %s)", i, (double)nan_dz[i],
                      ignored ? "ignored" : "a class");
    }
    opcheck_fini(&other);
    opcheck_fini(&oc);
    free(z), free(lab), free(kept), free(again), free(made), free(nan_dz);
    test_backend_close(&b);
}
END_TEST

/* The kernels' exp and log (cpu_vmath.h) against libm's double ones, over every 509th float
 * of their ranges (subnormal arguments and results included), and at their special values. */
static double ulps_off(float got, double want)
{
    if (isinf(want) || want == 0.0)
        return got == (float)want ? 0.0 : INFINITY;
    const float w = fabsf((float)want);
    return fabs((double)got - want) / (double)(nextafterf(w, INFINITY) - w);
}

START_TEST(vmath_against_libm)
{
    double worst_exp = 0, worst_log = 0;
    float at_exp = 0, at_log = 0;
    for (uint32_t u = 0; u < 0x7f800000u; u += 509) {
        float x;
        memcpy(&x, &u, sizeof x);
        const double l = ulps_off(tb_vm_logf(x), log((double)x));
        if (l > worst_log)
            worst_log = l, at_log = x;
        for (int sign = 0; sign < 2; sign++) {
            const float y = sign ? -x : x;
            if (y > 88.72f || y < -103.0f)
                continue;
            const double want = exp((double)y);
            /* a subnormal result has fewer bits: hold it to half its last place, absolutely */
            const double e = want < 1.17549435e-38 ? fabs((double)tb_vm_expf(y) - want) / 1.4e-45 : ulps_off(tb_vm_expf(y), want);
            if (e > worst_exp)
                worst_exp = e, at_exp = y;
        }
    }
    ck_assert_msg(worst_log <= 2.0, "tb_vm_logf is %.3f ulp off at %a", worst_log, (double)at_log);
    ck_assert_msg(worst_exp <= 2.0, "tb_vm_expf is %.3f ulp off at %a", worst_exp, (double)at_exp);
    ck_assert(tb_vm_logf(1.0f) == 0.0f && tb_vm_expf(0.0f) == 1.0f);
    ck_assert(tb_vm_logf(0.0f) == -INFINITY && tb_vm_logf(INFINITY) == INFINITY);
    ck_assert(isnan(tb_vm_logf(-1.0f)) && isnan(tb_vm_logf(NAN)) && isnan(tb_vm_expf(NAN)));
    ck_assert(tb_vm_expf(-INFINITY) == 0.0f && tb_vm_expf(-200.0f) == 0.0f);
    ck_assert(tb_vm_expf(INFINITY) == INFINITY && tb_vm_expf(89.0f) == INFINITY);
}
END_TEST

/* The noise is a function of the step (and the seed, the op): the same step gives the same
 * bits, another step another sample; a label that is no class is an error naming it. */
START_TEST(dual_task_noise_and_labels)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    struct tb_op op = dual_op(2, 4, 6, 5);
    const size_t all = elems(op.in[0]);
    float *z = op_frand(all, 1400, -1.0f, 1.0f);
    uint8_t *lab = op_labels(elems(op.in[1]), 4, 0, 1401);
    struct opcheck oc;
    opcheck_init(&oc, &b, &op);
    opcheck_set_input(&oc, 0, z);
    opcheck_set_input(&oc, 1, lab);
    opcheck_forward(&oc, 9);
    float *a = get_output(&oc, 1);
    opcheck_forward(&oc, 10);
    float *c = get_output(&oc, 1);
    opcheck_forward(&oc, 9);
    float *a2 = get_output(&oc, 1);
    ck_assert(memcmp(a, a2, all * sizeof *a) == 0);
    ck_assert(memcmp(a, c, all * sizeof *a) != 0);
    lab[at(op.in[1].shape, 1, 0, 3, 2)] = 4; /* == K */
    opcheck_set_input(&oc, 1, lab);
    struct tb_err err;
    ck_assert_int_eq(try_forward(&oc, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "dual_task");
    ck_assert_contains(err.msg, "image 1, pixel (row 3, column 2): label 4");
    opcheck_fini(&oc);
    free(z), free(lab), free(a), free(c), free(a2);
    test_backend_close(&b);
}
END_TEST

/* ---- class weights and masked labels ---- */

/* Random labels with ignored pixels, one image whose labels are all ignored and one with a
 * single class: weights against counts done here, 1 + (1 - freq) for present classes. */
START_TEST(class_weights_by_count)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    const int N = 4, K = 6, H = 9, W = 11;
    struct tb_op op = new_op(TB_OP_CLASS_WEIGHTS, 48, 1, 1);
    op.in[0] = u8(N, 1, H, W);
    op.out[0] = f32(N, K, 1, 1);
    op.p.label.ignore_label = 255;
    op.p.label.classes = K;
    const size_t pix = (size_t)H * W;
    uint8_t *t = bytes(N * pix);
    uint64_t s = 481;
    for (size_t i = 0; i < N * pix; i++) {
        uint64_t r = op_next_rand(&s) % 10;
        t[i] = r == 9 ? 255 : (uint8_t)(r % 4 == 3 ? 1 : r % 4); /* classes 0..2 only: 3..5 absent */
    }
    memset(t + 2 * pix, 255, pix);
    memset(t + 3 * pix, 5, pix);
    t[3 * pix + 7] = 255;
    struct opcheck oc;
    opcheck_init(&oc, &b, &op);
    opcheck_set_input(&oc, 0, t);
    opcheck_forward(&oc, 0);
    float got[4 * 6];
    opcheck_get_output(&oc, 0, got);
    for (int n = 0; n < N; n++) {
        size_t count[6] = { 0 }, total = 0;
        for (size_t p = 0; p < pix; p++)
            if (t[n * pix + p] != 255) {
                count[t[n * pix + p]]++;
                total++;
            }
        for (int k = 0; k < K; k++) {
            double want = count[k] ? 2.0 - (double)count[k] / (double)total : 1.0;
            ck_assert_msg(fabs(got[n * K + k] - want) < 1e-6, "image %d class %d: weight %g, want %g", n, k,
                          got[n * K + k], want);
        }
    }
    ck_assert_msg(got[2 * K + 0] == 1.0f && got[3 * K + 5] == 1.0f, "no counted pixel -> 1; one class -> 2 - 1 = 1");
    /* A label that is neither a class nor ignored is an error naming the pixel. */
    t[pix + 2 * W + 3] = 6;
    opcheck_set_input(&oc, 0, t);
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_int_ne(b.ops.backend->op_forward(b.ctx, &oc.op, oc.state, 0, oc.in, oc.out, &err), TB_OK);
    ck_assert_msg(strstr(err.msg, "image 1, pixel (row 2, column 3): label 6 is not a class (0..5)"), "%s", err.msg);
    opcheck_fini(&oc);
    free(t);
    test_backend_close(&b);
}
END_TEST

START_TEST(mask_labels_threshold)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    struct tb_op op = new_op(TB_OP_MASK_LABELS, 49, 2, 1);
    op.in[0] = u8(2, 1, 1, 4);
    op.in[1] = f32(2, 1, 1, 4);
    op.out[0] = u8(2, 1, 1, 4);
    op.p.label.ignore_label = 255;
    op.p.label.threshold = 0.8f;
    const uint8_t t[8] = { 1, 2, 3, 255, 4, 5, 6, 7 };
    const float x[8] = { 0.9f, 0.8f, 0.81f, 0.99f, 0.0f, 1.0f, 0.79f, 0.85f };
    const uint8_t want[8] = { 1, 255, 3, 255, 255, 5, 255, 7 };
    struct opcheck oc;
    opcheck_init(&oc, &b, &op);
    opcheck_set_input(&oc, 0, t);
    opcheck_set_input(&oc, 1, x);
    opcheck_forward(&oc, 0);
    uint8_t got[8];
    opcheck_get_output(&oc, 0, got);
    for (int i = 0; i < 8; i++)
        ck_assert_msg(got[i] == want[i], "pixel %d: %d, want %d (x %g, threshold 0.8)", i, got[i], want[i], x[i]);
    opcheck_fini(&oc);
    test_backend_close(&b);
}
END_TEST

START_TEST(bce_balanced)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    struct tb_op op = bce_op(2, 5, 7);
    size_t n = elems(op.in[0]);
    float *z = op_frand(n, 151, -4.0f, 4.0f);
    uint8_t *t = bytes(n);
    uint64_t s = 152;
    /* edges are rare: about 1 in 6 positive, 1 in 8 ignored (255 or any other value) */
    for (size_t i = 0; i < n; i++) {
        uint64_t r = op_next_rand(&s) % 48;
        t[i] = r < 8 ? 1 : r < 14 ? (r % 2 ? 255 : 2) : 0;
    }
    bce_check(&b, op, z, t, true, NULL);
    /* saturated logits: max(x,0) - x t + log1p(exp(-|x|)) has no overflow */
    for (size_t i = 0; i < n; i++)
        z[i] *= 25.0f;
    bce_check(&b, op, z, t, false, NULL);
    /* every pixel ignored: 0 */
    memset(t, 255, n);
    double zero = 0.0;
    bce_check(&b, op, z, t, false, &zero);
    free(z), free(t);
    test_backend_close(&b);
}
END_TEST

START_TEST(bce_by_hand)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    /* one positive, two negatives, one ignored, logits 0 (BCE = log 2 each): the positive
     * weighs 2/3, each negative 1/3: loss = (2/3 + 2/3) log 2 / 4 = log(2) / 3. The
     * gradients: positive 2/3 (1/2 - 1) / 4 = -1/12, negative 1/3 * 1/2 / 4 = 1/24. */
    struct tb_op op = bce_op(1, 1, 4);
    const float z[4] = { 0, 0, 0, 0 };
    const uint8_t t[4] = { 1, 0, 0, 255 };
    const double want = log(2.0) / 3.0;
    bce_check(&b, op, z, t, false, &want);
    struct opcheck oc;
    opcheck_init(&oc, &b, &op);
    opcheck_set_input(&oc, 0, z);
    opcheck_set_input(&oc, 1, t);
    opcheck_forward(&oc, 0);
    float one = 1.0f, dz[4];
    backward_dy(&oc, &one);
    test_download(&b, &oc.din[0], dz);
    const double wdz[4] = { -1.0 / 12, 1.0 / 24, 1.0 / 24, 0 };
    assert_close("bce dlogits by hand", dz, wdz, 4, 1e-8, 1e-6);
    opcheck_fini(&oc);
    /* only positives: their weight Q/(P+Q) is 0, so is the loss */
    const uint8_t pos[4] = { 1, 1, 255, 1 };
    const float z2[4] = { -1, 2, 3, -4 };
    const double zero = 0.0;
    bce_check(&b, op, z2, pos, false, &zero);
    test_backend_close(&b);
}
END_TEST

/* ------------------------------------------------------------------ errors from prepare */

START_TEST(prepare_rejects_bad_shapes)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    struct tb_err err;
    struct tb_op op = maxpool_op(2, 3, 5, 7, 3, 2, 1);
    op.out[0].shape.h = 2; /* should be 3 */
    ck_assert_int_eq(try_prepare(&b, &op, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "op 23 (maxpool)");
    op = new_op(TB_OP_MUL, 8, 2, 1);
    op.in[0] = op.out[0] = f32(2, 3, 5, 7);
    op.in[1] = f32(2, 2, 5, 7);
    ck_assert_int_eq(try_prepare(&b, &op, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "op 8 (mul)");
    op = new_op(TB_OP_CONCAT, 9, 2, 1);
    op.in[0] = op.in[1] = f32(2, 3, 5, 7);
    op.out[0] = f32(2, 5, 5, 7);
    ck_assert_int_eq(try_prepare(&b, &op, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "op 9 (concat)");
    op = dropout_op(2, 3, 5, 7, 1.0f, 0, 1);
    ck_assert_int_eq(try_prepare(&b, &op, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "op 17 (dropout)");
    op = resize_op(2, 3, 5, 7, 9, 12, 0);
    op.out[0].shape.w = 11;
    ck_assert_int_eq(try_prepare(&b, &op, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "op 31 (resize)");
    struct ce_case cc = { 2, 4, 5, 7, 1, 0 };
    op = ce_op(&cc);
    op.in[2] = f32(2, 3, 1, 1);
    ck_assert_int_eq(try_prepare(&b, &op, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "op 42 (softmax_ce)");
    test_backend_close(&b);
}
END_TEST

/* ------------------------------------------------------------------ the case list
 *
 * Every case of tests/op_cases.c, the list check_cuda runs on cuda against cpu: its
 * backward against central finite differences, and the same bits from two runs and from
 * 1, 2 and 3 threads. */

/* Every op kind of the contract has a case, so a new op gets its finite differences and
 * determinism here and its cuda parity in check_cuda by its cases alone; and every case is
 * checked by finite differences or says why not. */
START_TEST(op_cases_cover_every_kind)
{
    size_t count[TB_OP_KIND_COUNT] = { 0 };
    const size_t n = op_case_count();
    char(*names)[sizeof((struct pcase *)0)->name] = calloc(n + 1, sizeof *names);
    ck_assert_ptr_nonnull(names);
    for (size_t k = 0; k < n; k++) {
        struct pcase pc;
        op_case_make(k, &pc); /* checks the op against the contract (tb_op_check) */
        ck_assert_msg(pc.op.kind > 0 && pc.op.kind < TB_OP_KIND_COUNT, "op case %zu (%s): kind %d", k, pc.name,
                      (int)pc.op.kind);
        count[pc.op.kind]++;
        /* the name is how the suites report a case */
        for (size_t j = 0; j < k; j++)
            ck_assert_msg(strcmp(names[j], pc.name) != 0, "op cases %zu and %zu are both named \"%s\"", j, k, pc.name);
        memcpy(names[k], pc.name, sizeof names[k]);
        ck_assert_msg(pc.fd.skip || (pc.backward && pc.fd.eps > 0 && pc.fd.samples > 0),
                      "op case %zu (%s): no finite differences, and no reason why", k, pc.name);
        pc_free(&pc);
    }
    free(names);
    for (int kind = 1; kind < TB_OP_KIND_COUNT; kind++) {
        const char *name = tb_op_kind_name((enum tb_op_kind)kind);
        ck_assert_msg(name, "op kind %d of the contract has no name", kind);
        ck_assert_msg(count[kind] > 0, "op kind %s (%d) has no case in tests/op_cases.c", name, kind);
    }
}
END_TEST

/* Case pc's backward against central finite differences of its forward, on the inputs its
 * fd.prep makes checkable, for the inputs and outputs that carry a gradient. */
static void case_gradients(struct test_backend *b, struct pcase *pc)
{
    if (pc->fd.prep)
        pc->fd.prep(pc);
    struct opcheck oc;
    opcheck_init(&oc, b, &pc->op);
    oc.name = pc->name;
    bool check[TB_OP_MAX_IN] = { false };
    for (uint32_t i = 0; i < pc->op.nin; i++) {
        opcheck_set_input(&oc, i, pc->in[i]);
        check[i] = in_has_grad(&pc->op, i) && !(pc->no_din >> i & 1);
    }
    uint32_t skip_out = 0;
    for (uint32_t j = 0; j < pc->op.nout; j++)
        if (!out_has_grad(&pc->op, j))
            skip_out |= 1u << j; /* batch norm's saved statistics */
    opcheck_gradients(&oc, check, pc->fd.eps, pc->fd.atol, pc->fd.rtol, pc->fd.samples, skip_out, pc->step);
    opcheck_fini(&oc);
}

/* Every case but those the list says finite differences cannot check. One backend for
 * all: opening one costs more than most cases. */
START_TEST(op_case_gradients)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    for (size_t k = 0; k < op_case_count(); k++) {
        struct pcase pc;
        op_case_make(k, &pc);
        if (!pc.fd.skip)
            case_gradients(&b, &pc);
        pc_free(&pc);
    }
    test_backend_close(&b);
}
END_TEST

/* Two runs of pc wrote the same bits: outputs (but those the case leaves alone), inputs
 * updated in place, and input gradients (but those in skip_din). */
static void assert_same_bits(const struct pcase *pc, const struct result *a, const struct result *b, uint32_t skip_din,
                             const char *what)
{
    const struct tb_op *op = &pc->op;
    for (uint32_t j = 0; j < op->nout; j++)
        if (!(pc->keeps_out >> j & 1))
            ck_assert_msg(memcmp(a->out[j], b->out[j], opcheck_bytes(op->out[j])) == 0, "%s: output %u: %s", pc->name,
                          j, what);
    for (uint32_t i = 0; i < op->nin; i++) {
        ck_assert_msg(memcmp(a->in_after[i], b->in_after[i], opcheck_bytes(op->in[i])) == 0,
                      "%s: input %u after the run: %s", pc->name, i, what);
        ck_assert(!a->din[i] == !b->din[i]);
        if (a->din[i] && !(skip_din >> i & 1))
            ck_assert_msg(memcmp(a->din[i], b->din[i], opcheck_bytes(op->in[i])) == 0, "%s: input gradient %u: %s",
                          pc->name, i, what);
    }
}

/* The outputs pc leaves alone still hold the junk they were filled with. */
static void assert_kept(const struct pcase *pc, const struct result *r, float junk, uint8_t junk_u8)
{
    for (uint32_t j = 0; j < pc->op.nout; j++) {
        if (!(pc->keeps_out >> j & 1))
            continue;
        for (size_t e = 0; e < elems(pc->op.out[j]); e++) {
            const enum tb_dtype d = pc->op.out[j].dtype;
            bool kept = d == TB_F32    ? ((const float *)r->out[j])[e] == junk
                        : d == TB_U8   ? ((const uint8_t *)r->out[j])[e] == junk_u8
                        : d == TB_BF16 ? ((const uint16_t *)r->out[j])[e] == tb_bf16_from_f32(junk)
                                       : ((const uint16_t *)r->out[j])[e] == tb_f16_from_f32(junk);
            ck_assert_msg(kept, "%s: output %u [%zu] was written; the op leaves it alone here", pc->name, j, e);
        }
    }
}

/* Every case twice on one backend. Outputs and gradients are first filled with different
 * junk each time, so an element a kernel forgets to write shows up as a difference. */
START_TEST(deterministic_twice)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    for (size_t k = 0; k < op_case_count(); k++) {
        struct pcase pc;
        op_case_make(k, &pc);
        struct result r1, r2;
        op_case_run(&b, &pc, 12345.0f, 0x5A, &r1);
        op_case_run(&b, &pc, -0.5f, 0xA5, &r2);
        assert_kept(&pc, &r1, 12345.0f, 0x5A);
        assert_kept(&pc, &r2, -0.5f, 0xA5);
        assert_same_bits(&pc, &r1, &r2, 0, "two runs differ");
        result_free(&r1);
        result_free(&r2);
        pc_free(&pc);
    }
    test_backend_close(&b);
}
END_TEST

/* Stronger than required: no result depends on how the work is split over threads, but
 * for the gradients a case marks (din_by_threads: conv2d's weights and bias). */
START_TEST(deterministic_across_thread_counts)
{
    const size_t count = op_case_count();
    struct result *ref = calloc(count + 1, sizeof *ref);
    ck_assert_ptr_nonnull(ref);
    static const char *const configs[] = { THREADS, "threads = 1\n", "threads = 3\n" };
    for (size_t t = 0; t < 3; t++) {
        struct test_backend b;
        test_backend_open(&b, "cpu", configs[t]);
        for (size_t k = 0; k < count; k++) {
            struct pcase pc;
            op_case_make(k, &pc);
            struct result r;
            op_case_run(&b, &pc, 3.0f, 0x33, &r);
            if (t == 0) {
                ref[k] = r;
            } else {
                char what[64];
                snprintf(what, sizeof what, "%.11s differs from 2 threads", configs[t]);
                assert_same_bits(&pc, &r, &ref[k], pc.din_by_threads, what);
                result_free(&r);
            }
            pc_free(&pc);
        }
        test_backend_close(&b);
    }
    for (size_t k = 0; k < count; k++)
        result_free(&ref[k]);
    free(ref);
}
END_TEST

/* ------------------------------------------------------------------ 16-bit dtypes */

/* A 16-bit run's tensor against its f32 twin's (u8: exactly): within the case's f32
 * tolerance t plus one ulp of the 16-bit dtype (rounding once, and a sum in another order
 * may land on the other neighbour), and f16's subnormal spacing. */
static void compare_narrow(const struct pcase *pc, const char *what, uint32_t k, struct tb_tensor_desc d,
                           const void *got, const void *want, struct tol t)
{
    const size_t n = elems(d);
    if (d.dtype == TB_U8) {
        ck_assert_msg(memcmp(got, want, n) == 0, "%s: %s %u: the u8 elements differ from f32's", pc->name, what, k);
        return;
    }
    const double ulp = d.dtype == TB_BF16 ? 0x1p-7 : d.dtype == TB_F16 ? 0x1p-10 : 0;
    const double tiny = d.dtype == TB_F16 ? 0x1p-24 : 0;
    double max = 0;
    for (size_t i = 0; i < n; i++)
        max = fmax(max, fabs((double)((const float *)want)[i]));
    for (size_t i = 0; i < n; i++) {
        const double g = pc_value(got, d.dtype, i), w = (double)((const float *)want)[i];
        ck_assert_msg(fabs(g - w) <= (t.rel + ulp) * fabs(w) + t.rel_max * max + tiny,
                      "%s: %s %u [%zu]: %.9g, its f32 twin %.9g (tolerance %.3g + one %s ulp of |f32|, %.3g of max "
                      "%.4g)",
                      pc->name, what, k, i, g, w, t.rel, tb_dtype_name(d.dtype), t.rel_max, max);
    }
}

/* Every case of a kind with a float class at bf16 and at f16, on the backend's own path
 * (cpu_widen.c where a kernel takes f32 only), against the same case at f32 on the same
 * rounded values: ops.h's rule for 16-bit ops. check_ops runs on every ISA path
 * (isa-*.test), so each path's 16-bit ops are checked. */
START_TEST(sixteen_bit_op_cases)
{
    static const enum tb_dtype dts[] = { TB_BF16, TB_F16 };
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    size_t ran = 0;
    for (size_t k = 0; k < op_case_count(); k++)
        for (size_t d = 0; d < 2; d++) {
            struct pcase pc, ref;
            op_case_make(k, &pc);
            if (!pc_narrow(&pc, dts[d], &ref)) {
                pc_free(&pc);
                continue;
            }
            struct result rn, rf;
            op_case_run(&b, &pc, 7.0f, 0x77, &rn);
            op_case_run(&b, &ref, 7.0f, 0x77, &rf);
            const struct tb_op *op = &pc.op;
            for (uint32_t j = 0; j < op->nout; j++)
                if (!(pc.keeps_out >> j & 1))
                    compare_narrow(&pc, "output", j, op->out[j], rn.out[j], rf.out[j], pc.out[j]);
            for (uint32_t i = 0; i < op->nin; i++) {
                compare_narrow(&pc, "input after the run", i, op->in[i], rn.in_after[i], rf.in_after[i],
                               pc.in_after[i]);
                ck_assert(!rn.din[i] == !rf.din[i]);
                if (rn.din[i])
                    compare_narrow(&pc, "input gradient", i, op->in[i], rn.din[i], rf.din[i], pc.din[i]);
            }
            ran++;
            result_free(&rn);
            result_free(&rf);
            pc_free(&pc);
            pc_free(&ref);
        }
    ck_assert_uint_gt(ran, 80); /* every kind with a float class, twice */
    test_backend_close(&b);
}
END_TEST

/* The cast op: each element rounded exactly as trainbig/half.h does (ties to even,
 * overflow to infinity, f16 subnormals, NaN kept), between each pair of float dtypes, in a
 * blocked and an NHWC layout; and its backward is dy converted to x's dtype, bit for bit. */
START_TEST(cast_rounds_as_half_h)
{
    static const float special[] = { 0.0f, -0.0f, 1.0f, -1.0f, 1.00390625f /* 1 + 2^-8: a bf16 tie */,
                                     1.01171875f /* 1 + 3 * 2^-8 */, 65504.0f, 65519.0f, 65520.0f, 1e-8f,
                                     0x1p-25f, 0x1.8p-25f, 0x1p-14f, 1e-40f /* a float subnormal */, 3.0e38f,
                                     INFINITY, -INFINITY, NAN, 1.00048828125f /* 1 + 2^-11: an f16 tie */ };
    const size_t ns = sizeof special / sizeof special[0];
    static const enum tb_dtype dts[] = { TB_F32, TB_BF16, TB_F16 };
    struct test_backend b;
    test_backend_open(&b, "cpu", THREADS);
    for (int c = 16; c <= 19; c += 3)
        for (size_t f = 0; f < 3; f++)
            for (size_t t = 0; t < 3; t++) {
                if (f == t)
                    continue;
                const enum tb_dtype from = dts[f], to = dts[t];
                struct tb_op op = new_op(TB_OP_CAST, 61, 1, 1);
                op.in[0] = test_desc(from, 2, c, 5, 7);
                op.out[0] = test_desc(to, 2, c, 5, 7);
                op.p.cast.dtype = to;
                const size_t n = elems(op.in[0]);
                float *x = op_frand(n, 1400 + (uint64_t)c, -4.0f, 4.0f);
                for (size_t i = 0; i < n; i += 3)
                    x[i] = special[i / 3 % ns] * (i % 2 ? -1.0f : 1.0f);
                uint16_t *h = malloc(2 * n + 2), *gy16 = malloc(2 * n + 2);
                float *gy = op_frand(n, 1500 + (uint64_t)c, -2.0f, 2.0f);
                ck_assert(h && gy16);
                for (size_t i = 0; i < n; i++) {
                    h[i] = from == TB_BF16 ? tb_bf16_from_f32(x[i]) : tb_f16_from_f32(x[i]);
                    gy16[i] = to == TB_BF16 ? tb_bf16_from_f32(gy[i]) : tb_f16_from_f32(gy[i]);
                }
                struct opcheck oc;
                opcheck_init(&oc, &b, &op);
                opcheck_set_input(&oc, 0, from == TB_F32 ? (void *)x : (void *)h);
                opcheck_forward(&oc, 0);
                void *y = malloc(4 * n + 4), *dx = malloc(4 * n + 4);
                ck_assert(y && dx);
                opcheck_get_output(&oc, 0, y);
                test_upload(&b, &oc.dout[0], to == TB_F32 ? (void *)gy : (void *)gy16);
                struct tb_err err;
                tb_err_clear(&err);
                ck_assert_msg(b.ops.backend->op_backward(b.ctx, &oc.op, oc.state, oc.in, oc.out, oc.dout, oc.din,
                                                         &err) == TB_OK,
                              "%s", err.msg);
                test_download(&b, &oc.din[0], dx);
                for (size_t i = 0; i < n; i++) {
                    /* the exact value of the input, rounded once to the output's dtype */
                    const float v = from == TB_F32 ? x[i] : (float)pc_value(h, from, i);
                    const float g = to == TB_F32 ? gy[i] : (float)pc_value(gy16, to, i);
                    uint32_t want_y, got_y, want_dx, got_dx;
                    if (to == TB_F32) {
                        want_y = tb_float_bits(v);
                        got_y = tb_float_bits(((float *)y)[i]);
                    } else {
                        want_y = to == TB_BF16 ? tb_bf16_from_f32(v) : tb_f16_from_f32(v);
                        got_y = ((uint16_t *)y)[i];
                    }
                    if (from == TB_F32) {
                        want_dx = tb_float_bits(g);
                        got_dx = tb_float_bits(((float *)dx)[i]);
                    } else {
                        want_dx = from == TB_BF16 ? tb_bf16_from_f32(g) : tb_f16_from_f32(g);
                        got_dx = ((uint16_t *)dx)[i];
                    }
                    ck_assert_msg(got_y == want_y, "cast %s to %s, %d channels, [%zu] = %.9g: 0x%x, want 0x%x",
                                  tb_dtype_name(from), tb_dtype_name(to), c, i, (double)v, got_y, want_y);
                    ck_assert_msg(got_dx == want_dx, "cast %s to %s backward, [%zu]: 0x%x, want 0x%x",
                                  tb_dtype_name(from), tb_dtype_name(to), i, got_dx, want_dx);
                }
                opcheck_fini(&oc);
                free(x);
                free(h);
                free(gy);
                free(gy16);
                free(y);
                free(dx);
            }
    test_backend_close(&b);
}
END_TEST

int main(void)
{
    /* Thousands of tiny ops, each a few OpenMP fork/joins: with libgomp's default spinning
     * at barriers, another process holding one of two cores turns every join into a wait
     * for a time slice (measured: 1.5 s alone, over 40 s beside a busy process). Sleeping
     * waiters keep the suite fast anywhere; the results do not depend on it. libgomp reads
     * the variable when the backend plugin loads it, after this; a setting in the
     * environment wins. */
    setenv("OMP_WAIT_POLICY", "passive", 0);
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("eltwise");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, relu_forward_backward);
    tcase_add_test(tc, relu_zero_has_zero_gradient);
    tcase_add_test(tc, sigmoid_forward_backward);
    tcase_add_test(tc, add_forward_backward);
    tcase_add_test(tc, mul_same_and_broadcast);
    suite_add_tcase(s, tc);

    tc = tcase_create("dropout");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, dropout_elementwise);
    tcase_add_test(tc, dropout_channelwise);
    tcase_add_test(tc, dropout_inference_passthrough);
    suite_add_tcase(s, tc);

    tc = tcase_create("pool");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, maxpool_forward_backward);
    tcase_add_test(tc, maxpool_ties_go_to_first);
    tcase_add_test(tc, avgpool_forward_backward);
    suite_add_tcase(s, tc);

    tc = tcase_create("resize_concat");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, resize_forward_backward);
    tcase_add_test(tc, resize_by_hand);
    tcase_add_test(tc, concat_three);
    suite_add_tcase(s, tc);

    tc = tcase_create("loss");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, softmax_ce_modes);
    tcase_add_test(tc, softmax_ce_values_by_hand);
    tcase_add_test(tc, softmax_ce_all_ignored_and_stable);
    tcase_add_test(tc, softmax_ce_bad_label);
    tcase_add_test(tc, bce_balanced);
    tcase_add_test(tc, bce_by_hand);
    tcase_add_test(tc, class_weights_by_count);
    tcase_add_test(tc, mask_labels_threshold);
    tcase_add_test(tc, dual_task_forward_backward);
    tcase_add_test(tc, dual_task_noise_and_labels);
    tcase_add_test(tc, dual_task_backward_maps_and_nan);
    tcase_add_test(tc, vmath_against_libm);
    suite_add_tcase(s, tc);

    tc = tcase_create("checks");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, prepare_rejects_bad_shapes);
    suite_add_tcase(s, tc);

    tc = tcase_create("cases"); /* tests/op_cases.c */
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, op_cases_cover_every_kind);
    tcase_add_test(tc, op_case_gradients);
    tcase_add_test(tc, deterministic_twice);
    tcase_add_test(tc, deterministic_across_thread_counts);
    tcase_add_test(tc, sixteen_bit_op_cases);
    tcase_add_test(tc, cast_rounds_as_half_h);
    suite_add_tcase(s, tc);

    return test_run_suite(s);
}
