/* check_conv: the CPU backend's conv2d (oneDNN) and batchnorm kernels.
 *
 * Forward and backward are compared with plain double-precision references written here
 * on NCHW host arrays, and backward also with central finite differences of the forward
 * (opcheck_gradients). Then: gradients that are not wanted (din data NULL) are not
 * computed, din is written and not accumulated, batch-norm running statistics after one
 * and two steps, inference mode, and bit-identical results run to run.
 *
 * Tolerances.
 *  - Against the double references, an element passes when
 *        |got - want| <= REL_SUM * mag + ABS_FLOOR
 *    where mag is the sum of the absolute values of the terms that make `want` (computed
 *    by the reference alongside it). A float32 sum of K terms in any order is within about
 *    sqrt(K) * 2^-24 * mag typically and K * 2^-24 * mag at worst; REL_SUM = 2e-5 is ~340
 *    ulps of mag, far above the typical error of these sizes (K <= ~3000) and far below
 *    what any indexing mistake gives (an O(1) fraction of mag).
 *  - Batch norm output and dx (O(1) values, a handful of float operations each, through
 *    statistics summed in double): atol = rtol = 2e-5 (BN_TOL).
 *  - Finite differences (float32 forward, eps = 1e-2 on O(1) inputs): conv is linear in
 *    each input, so only rounding matters: about 2^-24 * |y| * sqrt(#outputs that move) /
 *    (2 eps) ~ 1e-4; atol = rtol = 1e-3. Batch norm is not linear and moves every output,
 *    so it gets atol = 1e-3, rtol = 1e-2, and the double reference above is the tight check.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/trainbig.h>

#include "testutil.h"
#include "opcheck.h"

#define REL_SUM 2e-5
#define ABS_FLOOR 1e-6
#define BN_TOL 2e-5
#define FD_EPS 1e-2f
#define FD_SAMPLES 16

static void setup(void)
{
    ck_assert_msg(getenv("TB_BUILDDIR"), "run through make check (TB_BUILDDIR unset)");
    unsetenv("TRAINBIG_PLUGIN_PATH");
    setenv("TRAINBIG_LOG", "error", 1);
}

static float *fmalloc(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    return p;
}

static double *dmalloc(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* |got - want| <= REL_SUM * mag + ABS_FLOOR elementwise (see the top of the file). */
static void assert_sum_close(const char *what, const float *got, const double *want, const double *mag, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= REL_SUM * mag[i] + ABS_FLOOR))
            ck_abort_msg("%s[%zu]: got %.9g, want %.9g (sum of |terms| %.4g)", what, i, (double)got[i], want[i], mag[i]);
}

static void assert_all(const char *what, const float *got, size_t n, float value)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &value, sizeof value) != 0)
            ck_abort_msg("%s[%zu]: %g, expected it untouched (%g)", what, i, (double)got[i], (double)value);
}

static void fill(struct test_backend *b, const struct tb_tensor *t, float value)
{
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(b->ops.backend->tensor_fill(b->ctx, t, value, &err) == TB_OK, "%s", err.msg);
}

static float *download(struct test_backend *b, const struct tb_tensor *t)
{
    float *h = fmalloc(tb_shape_elems(t->desc.shape));
    test_download(b, t, h);
    return h;
}

/* ================================================================== conv2d */

struct conv_case {
    int n, c, h, w, o;
    int kh, kw, sh, sw, ph, pw, dh, dw;
    int bias;
};

static int conv_oh(const struct conv_case *k)
{
    return (k->h + 2 * k->ph - k->dh * (k->kh - 1) - 1) / k->sh + 1;
}

static int conv_ow(const struct conv_case *k)
{
    return (k->w + 2 * k->pw - k->dw * (k->kw - 1) - 1) / k->sw + 1;
}

static struct tb_op conv_op(const struct conv_case *k, uint32_t id)
{
    struct tb_op op;
    memset(&op, 0, sizeof op);
    op.kind = TB_OP_CONV2D;
    op.id = id;
    op.nin = k->bias ? 3 : 2;
    op.nout = 1;
    op.in[0] = test_desc(TB_F32, k->n, k->c, k->h, k->w);
    op.in[1] = test_desc(TB_F32, k->o, k->c, k->kh, k->kw);
    if (k->bias)
        op.in[2] = test_desc(TB_F32, 1, k->o, 1, 1);
    op.out[0] = test_desc(TB_F32, k->n, k->o, conv_oh(k), conv_ow(k));
    op.p.conv = (struct tb_conv2d_params){ k->kh, k->kw, k->sh, k->sw, k->ph, k->pw, k->dh, k->dw, k->bias };
    return op;
}

/* Host inputs of a case, NCHW: x in [-1, 1), weights scaled by 1/sqrt(fan-in) so that y is
 * O(1), bias in [-1, 1), and an output gradient in [-1, 1). */
struct conv_data {
    float *x, *w, *b, *dy;
    size_t nx, nw, nb, ny;
};

static struct conv_data conv_data(const struct conv_case *k, uint64_t seed)
{
    struct conv_data d;
    d.nx = (size_t)k->n * k->c * k->h * k->w;
    d.nw = (size_t)k->o * k->c * k->kh * k->kw;
    d.nb = (size_t)k->o;
    d.ny = (size_t)k->n * k->o * conv_oh(k) * conv_ow(k);
    d.x = fmalloc(d.nx);
    d.w = fmalloc(d.nw);
    d.b = fmalloc(d.nb);
    d.dy = fmalloc(d.ny);
    test_random(d.x, d.nx, seed, -1.0f, 1.0f);
    float s = 1.0f / sqrtf((float)(k->c * k->kh * k->kw));
    test_random(d.w, d.nw, seed + 1, -s, s);
    test_random(d.b, d.nb, seed + 2, -1.0f, 1.0f);
    test_random(d.dy, d.ny, seed + 3, -1.0f, 1.0f);
    return d;
}

static void conv_data_free(struct conv_data *d)
{
    free(d->x);
    free(d->w);
    free(d->b);
    free(d->dy);
}

/* The input row a kernel tap reads, or -1 in the padding. */
static int tap(int out, int stride, int pad, int k, int dil, int size)
{
    int i = out * stride - pad + k * dil;
    return i >= 0 && i < size ? i : -1;
}

#define X_AT(k, n, c, y, x) ((((size_t)(n) * (k)->c + (c)) * (k)->h + (y)) * (k)->w + (x))
#define W_AT(k, o, c, y, x) ((((size_t)(o) * (k)->c + (c)) * (k)->kh + (y)) * (k)->kw + (x))
#define Y_AT(k, n, o, y, x) ((((size_t)(n) * (k)->o + (o)) * conv_oh(k) + (y)) * conv_ow(k) + (x))

/* y = conv(x, w) + b, straight from the definition; mag = sum of |terms|. */
static void ref_conv_forward(const struct conv_case *k, const struct conv_data *d, double *y, double *mag)
{
    for (int n = 0; n < k->n; n++)
        for (int o = 0; o < k->o; o++)
            for (int oy = 0; oy < conv_oh(k); oy++)
                for (int ox = 0; ox < conv_ow(k); ox++) {
                    double s = k->bias ? d->b[o] : 0.0, m = fabs(s);
                    for (int c = 0; c < k->c; c++)
                        for (int ky = 0; ky < k->kh; ky++) {
                            int iy = tap(oy, k->sh, k->ph, ky, k->dh, k->h);
                            if (iy < 0)
                                continue;
                            for (int kx = 0; kx < k->kw; kx++) {
                                int ix = tap(ox, k->sw, k->pw, kx, k->dw, k->w);
                                if (ix < 0)
                                    continue;
                                double t = (double)d->x[X_AT(k, n, c, iy, ix)] * d->w[W_AT(k, o, c, ky, kx)];
                                s += t;
                                m += fabs(t);
                            }
                        }
                    y[Y_AT(k, n, o, oy, ox)] = s;
                    mag[Y_AT(k, n, o, oy, ox)] = m;
                }
}

/* Gradients of L = sum dy * y: every (output, tap) pair adds its share. */
struct conv_grads {
    double *dx, *dxm, *dw, *dwm, *db, *dbm;
};

static struct conv_grads ref_conv_backward(const struct conv_case *k, const struct conv_data *d)
{
    struct conv_grads g = { dmalloc(d->nx), dmalloc(d->nx), dmalloc(d->nw),
                            dmalloc(d->nw), dmalloc(d->nb), dmalloc(d->nb) };
    for (int n = 0; n < k->n; n++)
        for (int o = 0; o < k->o; o++)
            for (int oy = 0; oy < conv_oh(k); oy++)
                for (int ox = 0; ox < conv_ow(k); ox++) {
                    double gy = d->dy[Y_AT(k, n, o, oy, ox)];
                    g.db[o] += gy;
                    g.dbm[o] += fabs(gy);
                    for (int c = 0; c < k->c; c++)
                        for (int ky = 0; ky < k->kh; ky++) {
                            int iy = tap(oy, k->sh, k->ph, ky, k->dh, k->h);
                            if (iy < 0)
                                continue;
                            for (int kx = 0; kx < k->kw; kx++) {
                                int ix = tap(ox, k->sw, k->pw, kx, k->dw, k->w);
                                if (ix < 0)
                                    continue;
                                size_t xi = X_AT(k, n, c, iy, ix), wi = W_AT(k, o, c, ky, kx);
                                g.dx[xi] += gy * d->w[wi];
                                g.dxm[xi] += fabs(gy * d->w[wi]);
                                g.dw[wi] += gy * d->x[xi];
                                g.dwm[wi] += fabs(gy * d->x[xi]);
                            }
                        }
                }
    return g;
}

static void conv_grads_free(struct conv_grads *g)
{
    free(g->dx);
    free(g->dxm);
    free(g->dw);
    free(g->dwm);
    free(g->db);
    free(g->dbm);
}

static void conv_set_inputs(struct opcheck *oc, const struct conv_case *k, const struct conv_data *d)
{
    opcheck_set_input(oc, 0, d->x);
    opcheck_set_input(oc, 1, d->w);
    if (k->bias)
        opcheck_set_input(oc, 2, d->b);
}

/* Runs backward with din as given (entries may have data NULL); dout = d->dy. */
static void conv_backward_with(struct opcheck *oc, const struct conv_data *d, const struct tb_tensor *din)
{
    struct tb_err err;
    tb_err_clear(&err);
    test_upload(oc->b, &oc->dout[0], d->dy);
    ck_assert_msg(
        oc->b->ops.backend->op_backward(oc->b->ctx, &oc->op, oc->state, oc->in, oc->out, oc->dout, din, &err) == TB_OK,
        "%s", err.msg);
}

/* Forward and full backward against the references, then backward against finite
 * differences. din is filled with NaN first: a kernel that accumulates fails. */
static void check_conv_case(const struct conv_case *k, uint32_t id)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", "threads = 2\n");
    struct tb_op op = conv_op(k, id);
    struct opcheck oc;
    opcheck_init(&oc, &b, &op);
    struct conv_data d = conv_data(k, id * 10);
    conv_set_inputs(&oc, k, &d);

    opcheck_forward(&oc, 0);
    float *y = download(&b, &oc.out[0]);
    double *ry = dmalloc(d.ny), *rm = dmalloc(d.ny);
    ref_conv_forward(k, &d, ry, rm);
    assert_sum_close("conv y", y, ry, rm, d.ny);

    for (uint32_t i = 0; i < op.nin; i++)
        fill(&b, &oc.din[i], NAN);
    conv_backward_with(&oc, &d, oc.din);
    struct conv_grads g = ref_conv_backward(k, &d);
    float *dx = download(&b, &oc.din[0]), *dw = download(&b, &oc.din[1]);
    assert_sum_close("conv dx", dx, g.dx, g.dxm, d.nx);
    assert_sum_close("conv dw", dw, g.dw, g.dwm, d.nw);
    if (k->bias) {
        float *db = download(&b, &oc.din[2]);
        assert_sum_close("conv db", db, g.db, g.dbm, d.nb);
        free(db);
    }

    const bool check[3] = { true, true, true };
    opcheck_gradients(&oc, check, FD_EPS, 1e-3, 1e-3, FD_SAMPLES, 0, 0);

    free(y);
    free(ry);
    free(rm);
    free(dx);
    free(dw);
    conv_grads_free(&g);
    conv_data_free(&d);
    opcheck_fini(&oc);
    test_backend_close(&b);
}

/* n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, bias */
START_TEST(conv_1x1)
{
    const struct conv_case k = { 2, 5, 7, 5, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1 };
    check_conv_case(&k, 1);
}
END_TEST

START_TEST(conv_1x1_stride2)
{
    const struct conv_case k = { 2, 8, 7, 5, 16, 1, 1, 2, 2, 0, 0, 1, 1, 0 };
    check_conv_case(&k, 2);
}
END_TEST

START_TEST(conv_3x3_pad)
{
    const struct conv_case k = { 2, 3, 7, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 0 };
    check_conv_case(&k, 3);
}
END_TEST

START_TEST(conv_3x3_no_pad_bias)
{
    const struct conv_case k = { 3, 3, 7, 5, 6, 3, 3, 1, 1, 0, 0, 1, 1, 1 };
    check_conv_case(&k, 4);
}
END_TEST

START_TEST(conv_7x7)
{
    const struct conv_case k = { 2, 3, 9, 7, 8, 7, 7, 1, 1, 3, 3, 1, 1, 1 };
    check_conv_case(&k, 5);
}
END_TEST

START_TEST(conv_7x7_stride2)
{
    /* The ResNet stem on an odd image: floor in the output size, and taps into both pads. */
    const struct conv_case k = { 2, 3, 13, 11, 8, 7, 7, 2, 2, 3, 3, 1, 1, 0 };
    check_conv_case(&k, 6);
}
END_TEST

START_TEST(conv_3x3_stride2_odd)
{
    const struct conv_case k = { 3, 3, 7, 5, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1 };
    check_conv_case(&k, 7);
}
END_TEST

START_TEST(conv_dilation2)
{
    const struct conv_case k = { 2, 3, 9, 7, 4, 3, 3, 1, 1, 2, 2, 2, 2, 0 };
    check_conv_case(&k, 8);
}
END_TEST

START_TEST(conv_dilation4)
{
    const struct conv_case k = { 2, 3, 11, 9, 4, 3, 3, 1, 1, 4, 4, 4, 4, 1 };
    check_conv_case(&k, 9);
}
END_TEST

START_TEST(conv_dilation2_no_pad)
{
    const struct conv_case k = { 2, 4, 9, 7, 3, 3, 3, 1, 1, 0, 0, 2, 2, 1 };
    check_conv_case(&k, 10);
}
END_TEST

START_TEST(conv_rectangular)
{
    /* Different kernel, stride, padding and dilation along H and W. */
    const struct conv_case k = { 2, 3, 9, 10, 4, 3, 5, 2, 1, 1, 4, 1, 2, 1 };
    check_conv_case(&k, 11);
}
END_TEST

/* Channel counts that are multiples of 8, so oneDNN takes its blocked jit kernels (and
 * the weight reorders) rather than the small-channel paths. */
START_TEST(conv_wide_3x3)
{
    const struct conv_case k = { 2, 16, 10, 9, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1 };
    check_conv_case(&k, 12);
}
END_TEST

START_TEST(conv_wide_1x1)
{
    const struct conv_case k = { 3, 32, 6, 7, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1 };
    check_conv_case(&k, 13);
}
END_TEST

START_TEST(conv_wide_dilated)
{
    const struct conv_case k = { 2, 16, 12, 11, 16, 3, 3, 1, 1, 2, 2, 2, 2, 0 };
    check_conv_case(&k, 14);
}
END_TEST

START_TEST(conv_wide_dilation4)
{
    const struct conv_case k = { 2, 16, 13, 12, 8, 3, 3, 1, 1, 4, 4, 4, 4, 1 };
    check_conv_case(&k, 15);
}
END_TEST

START_TEST(conv_wide_stride2)
{
    const struct conv_case k = { 2, 16, 11, 10, 32, 3, 3, 2, 2, 1, 1, 1, 1, 0 };
    check_conv_case(&k, 16);
}
END_TEST

/* At least 32 channels in and out, multiples of 8: forward and backward-data run on
 * blocked (nChw8c) copies of the activations, backward-weights too. */
START_TEST(conv_blocked_3x3)
{
    const struct conv_case k = { 2, 32, 11, 9, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1 };
    check_conv_case(&k, 17);
}
END_TEST

START_TEST(conv_blocked_stride2)
{
    const struct conv_case k = { 2, 32, 12, 9, 32, 3, 3, 2, 2, 1, 1, 1, 1, 0 };
    check_conv_case(&k, 18);
}
END_TEST

/* Dilated stride-1 "same" convolutions with channels in multiples of 8 run as dense
 * convolutions on the dh*dw phase sub-images (backward from 8x8 phase images): odd sizes
 * not divisible by the dilation (phase images padded with zeros past the edge), dilation
 * 2 and 4, unequal dilations. conv_wide_dilation4 has its forward on 4x3 phases. */
START_TEST(conv_phases_dilation2)
{
    const struct conv_case k = { 2, 32, 17, 15, 32, 3, 3, 1, 1, 2, 2, 2, 2, 1 };
    check_conv_case(&k, 21);
}
END_TEST

START_TEST(conv_phases_dilation4)
{
    const struct conv_case k = { 2, 32, 31, 29, 40, 3, 3, 1, 1, 4, 4, 4, 4, 0 };
    check_conv_case(&k, 22);
}
END_TEST

START_TEST(conv_phases_rectangular)
{
    const struct conv_case k = { 2, 16, 17, 23, 24, 3, 5, 1, 1, 2, 6, 2, 3, 1 };
    check_conv_case(&k, 23);
}
END_TEST

/* 1x1 with at least 256 channels in and out and 512 on one side: backward-weights on
 * blocked (nChw8c) copies. */
START_TEST(conv_blocked_1x1)
{
    const struct conv_case k = { 2, 256, 5, 3, 512, 1, 1, 1, 1, 0, 0, 1, 1, 1 };
    check_conv_case(&k, 24);
}
END_TEST

START_TEST(conv_blocked_1x1_wide)
{
    const struct conv_case k = { 3, 512, 4, 3, 256, 1, 1, 1, 1, 0, 0, 1, 1, 0 };
    check_conv_case(&k, 25);
}
END_TEST

/* Channel counts that are blocked on one ISA and not on another (40: nChw8c with AVX2,
 * NHWC with AVX-512; 16 and 24 likewise), so that a pass whose x and y differ in layout is
 * exercised; output channels not a multiple of any block (13, 6, 10, 7); a rectangular
 * dilated kernel, a padding wider than the kernel reaches (output columns with no input
 * under some taps), and no padding. */
/* Dilation at least the map's size: the off-centre taps read only padding, the backend
 * runs the centre tap as a 1x1 convolution, and their weight gradient must be zero (the
 * double-precision reference computes every tap). */
START_TEST(conv_centre_tap_only)
{
    const struct conv_case k = { 2, 32, 6, 7, 16, 3, 3, 1, 1, 8, 8, 8, 8, 1 };
    check_conv_case(&k, 61);
    const struct conv_case k2 = { 1, 16, 5, 9, 8, 3, 5, 1, 1, 12, 24, 12, 12, 0 };
    check_conv_case(&k2, 62);
    const struct conv_case k3 = { 2, 3, 4, 4, 5, 3, 3, 1, 1, 4, 4, 4, 4, 1 }; /* NHWC channels */
    check_conv_case(&k3, 63);
}
END_TEST

START_TEST(conv_mixed_layouts)
{
    const struct conv_case k = { 2, 40, 7, 35, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1 };
    check_conv_case(&k, 27);
}
END_TEST

START_TEST(conv_mixed_layouts_dilated)
{
    const struct conv_case k = { 2, 8, 9, 37, 6, 3, 5, 1, 1, 2, 6, 2, 3, 0 };
    check_conv_case(&k, 28);
}
END_TEST

START_TEST(conv_mixed_layouts_padding)
{
    const struct conv_case k = { 1, 16, 6, 33, 10, 3, 3, 1, 1, 3, 3, 1, 1, 1 };
    check_conv_case(&k, 29);
    const struct conv_case k0 = { 2, 24, 5, 40, 7, 3, 3, 1, 1, 0, 0, 1, 1, 1 };
    check_conv_case(&k0, 40);
}
END_TEST

/* Backward with some din entries NULL: those are neither computed nor touched, the
 * others are right. */
static void check_conv_partial(const struct conv_case *kp, uint32_t id)
{
    const struct conv_case k = *kp;
    struct test_backend b;
    test_backend_open(&b, "cpu", "threads = 2\n");
    struct tb_op op = conv_op(&k, id);
    struct opcheck oc;
    opcheck_init(&oc, &b, &op);
    struct conv_data d = conv_data(&k, id * 10);
    conv_set_inputs(&oc, &k, &d);
    opcheck_forward(&oc, 0);
    struct conv_grads g = ref_conv_backward(&k, &d);
    const float sentinel = 7.25f;

    for (int mode = 0; mode < 4; mode++) {
        /* 0: no dx (a first layer); 1: only db; 2: only dx; 3: only dw. */
        const bool want[3] = { mode == 2, mode == 0 || mode == 3, mode <= 1 };
        struct tb_tensor din[3];
        memcpy(din, oc.din, sizeof din);
        for (int i = 0; i < 3; i++) {
            fill(&b, &oc.din[i], sentinel);
            if (!want[i])
                din[i].data = NULL;
        }
        conv_backward_with(&oc, &d, din);
        float *dx = download(&b, &oc.din[0]), *dw = download(&b, &oc.din[1]), *db = download(&b, &oc.din[2]);
        if (want[0])
            assert_sum_close("dx", dx, g.dx, g.dxm, d.nx);
        else
            assert_all("dx", dx, d.nx, sentinel);
        if (want[1])
            assert_sum_close("dw", dw, g.dw, g.dwm, d.nw);
        else
            assert_all("dw", dw, d.nw, sentinel);
        if (want[2])
            assert_sum_close("db", db, g.db, g.dbm, d.nb);
        else
            assert_all("db", db, d.nb, sentinel);
        free(dx);
        free(dw);
        free(db);
    }
    conv_grads_free(&g);
    conv_data_free(&d);
    opcheck_fini(&oc);
    test_backend_close(&b);
}

/* Blocked 3x3, and a dilated one on phases. */
START_TEST(conv_partial_gradients)
{
    const struct conv_case k = { 2, 8, 9, 7, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1 };
    check_conv_partial(&k, 20);
    const struct conv_case kp = { 2, 32, 33, 31, 32, 3, 3, 1, 1, 4, 4, 4, 4, 1 };
    check_conv_partial(&kp, 26);
    const struct conv_case kd = { 2, 16, 5, 34, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1 };
    check_conv_partial(&kd, 41);
}
END_TEST

static void download_all(struct opcheck *oc, float **host)
{
    for (uint32_t i = 0; i < oc->op.nin; i++)
        host[i] = oc->din[i].data ? download(oc->b, &oc->din[i]) : NULL;
    host[oc->op.nin] = download(oc->b, &oc->out[0]);
}

/* Two forwards and two backwards give bit-identical results (same thread count), for
 * each kind of primitive the kernel picks: blocked jit (3x3), blocked dilated forward and
 * backward-data (dilation 2; the larger one with the weight gradient on phases), jit
 * 1x1, the forward on phases (dilation 4, then everything on phases), GEMM weight gradient with a padded-copy forward
 * (dilated, 12 channels), blocked 1x1 weight gradient. */
START_TEST(conv_deterministic)
{
    const struct conv_case cases[] = {
        { 4, 32, 20, 20, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1 }, { 4, 32, 20, 20, 32, 3, 3, 1, 1, 2, 2, 2, 2, 0 },
        { 4, 64, 16, 16, 32, 1, 1, 1, 1, 0, 0, 1, 1, 1 }, { 4, 32, 20, 20, 32, 3, 3, 1, 1, 4, 4, 4, 4, 1 },
        { 2, 32, 17, 15, 32, 3, 3, 1, 1, 2, 2, 2, 2, 1 }, { 2, 32, 31, 29, 40, 3, 3, 1, 1, 4, 4, 4, 4, 0 },
        { 4, 12, 20, 20, 12, 3, 3, 1, 1, 2, 2, 2, 2, 0 }, { 2, 256, 5, 3, 512, 1, 1, 1, 1, 0, 0, 1, 1, 1 },
    };
    struct test_backend b;
    test_backend_open(&b, "cpu", "threads = 2\n");
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const struct conv_case *k = &cases[ci];
        struct tb_op op = conv_op(k, 30 + (uint32_t)ci);
        struct opcheck oc;
        opcheck_init(&oc, &b, &op);
        struct conv_data d = conv_data(k, 300 + ci);
        conv_set_inputs(&oc, k, &d);
        float *run[2][4];
        for (int r = 0; r < 2; r++) {
            opcheck_forward(&oc, 0);
            conv_backward_with(&oc, &d, oc.din);
            download_all(&oc, run[r]);
        }
        for (uint32_t i = 0; i <= op.nin; i++) {
            size_t n = tb_shape_elems(i < op.nin ? op.in[i].shape : op.out[0].shape);
            ck_assert_msg(memcmp(run[0][i], run[1][i], n * sizeof(float)) == 0,
                          "case %zu: %s differs between two identical runs", ci,
                          i == op.nin ? "y"
                          : i == 0    ? "dx"
                          : i == 1    ? "dw"
                                      : "db");
            free(run[0][i]);
            free(run[1][i]);
        }
        conv_data_free(&d);
        opcheck_fini(&oc);
    }
    test_backend_close(&b);
}
END_TEST

START_TEST(conv_refuses_bad_shapes)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", "threads = 2\n");
    const struct conv_case k = { 1, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 0 };
    struct tb_op op = conv_op(&k, 41);
    op.out[0].shape.h = 7; /* should be 8 */
    struct tb_err err;
    tb_err_clear(&err);
    void *state = NULL;
    ck_assert_int_eq(b.ops.backend->op_prepare(b.ctx, 0, &op, &state, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "op 41 (conv2d)");
    op = conv_op(&k, 42);
    op.p.conv.dil_h = 0;
    tb_err_clear(&err);
    ck_assert_int_eq(b.ops.backend->op_prepare(b.ctx, 0, &op, &state, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "op 42 (conv2d)");
    test_backend_close(&b);
}
END_TEST

/* ================================================================== batchnorm */

static struct tb_op bn_op(int n, int c, int h, int w, int training, uint32_t id)
{
    struct tb_op op;
    memset(&op, 0, sizeof op);
    op.kind = TB_OP_BATCHNORM;
    op.id = id;
    op.nin = 5;
    op.nout = 3;
    op.in[0] = test_desc(TB_F32, n, c, h, w);
    for (int i = 1; i < 5; i++)
        op.in[i] = test_desc(TB_F32, 1, c, 1, 1);
    op.out[0] = op.in[0];
    op.out[1] = op.out[2] = op.in[1];
    op.p.bn = (struct tb_batchnorm_params){ .eps = 1e-5f, .momentum = 0.1f, .training = training };
    return op;
}

struct bn_data {
    float *x, *gamma, *beta, *rmean, *rvar, *dy;
    size_t nx, nc, P;
};

/* x = offset + U[-scale, scale) (plus a per-channel tilt, so channels differ), gamma
 * around 1, beta around 0, running stats plausible. */
static struct bn_data bn_data(const struct tb_op *op, uint64_t seed, float offset, float scale)
{
    struct bn_data d;
    const struct tb_shape s = op->in[0].shape;
    d.nx = tb_shape_elems(s);
    d.nc = (size_t)s.c;
    d.P = (size_t)s.n * s.h * s.w;
    d.x = fmalloc(d.nx);
    d.dy = fmalloc(d.nx);
    d.gamma = fmalloc(d.nc);
    d.beta = fmalloc(d.nc);
    d.rmean = fmalloc(d.nc);
    d.rvar = fmalloc(d.nc);
    test_random(d.x, d.nx, seed, -scale, scale);
    for (size_t i = 0; i < d.nx; i++) {
        size_t c = i / ((size_t)s.h * s.w) % d.nc;
        d.x[i] += offset + 0.25f * (float)c;
    }
    test_random(d.dy, d.nx, seed + 1, -1.0f, 1.0f);
    test_random(d.gamma, d.nc, seed + 2, 0.5f, 1.5f);
    test_random(d.beta, d.nc, seed + 3, -0.5f, 0.5f);
    test_random(d.rmean, d.nc, seed + 4, -0.5f, 0.5f);
    test_random(d.rvar, d.nc, seed + 5, 0.5f, 1.5f);
    return d;
}

static void bn_data_free(struct bn_data *d)
{
    free(d->x);
    free(d->dy);
    free(d->gamma);
    free(d->beta);
    free(d->rmean);
    free(d->rvar);
}

static void bn_set_inputs(struct opcheck *oc, const struct bn_data *d)
{
    opcheck_set_input(oc, 0, d->x);
    opcheck_set_input(oc, 1, d->gamma);
    opcheck_set_input(oc, 2, d->beta);
    opcheck_set_input(oc, 3, d->rmean);
    opcheck_set_input(oc, 4, d->rvar);
}

#define BN_AT(s, n, c, p) (((size_t)(n) * (s).c + (c)) * ((size_t)(s).h * (s).w) + (p))

/* Batch statistics per channel in double: mean, biased variance. */
static void ref_bn_stats(const struct tb_shape s, const float *x, double *mean, double *var)
{
    const size_t hw = (size_t)s.h * s.w, P = (size_t)s.n * hw;
    for (int c = 0; c < s.c; c++) {
        double sum = 0;
        for (int n = 0; n < s.n; n++)
            for (size_t p = 0; p < hw; p++)
                sum += x[BN_AT(s, n, c, p)];
        double m = sum / (double)P, ss = 0;
        for (int n = 0; n < s.n; n++)
            for (size_t p = 0; p < hw; p++)
                ss += (x[BN_AT(s, n, c, p)] - m) * (x[BN_AT(s, n, c, p)] - m);
        mean[c] = m;
        var[c] = ss / (double)P;
    }
}

/* y = (x - mean) / sqrt(var + eps) * gamma + beta with the given statistics. */
static void ref_bn_normalise(const struct tb_shape s, const struct bn_data *d, const double *mean, const double *var,
                             double eps, double *y)
{
    const size_t hw = (size_t)s.h * s.w;
    for (int n = 0; n < s.n; n++)
        for (int c = 0; c < s.c; c++)
            for (size_t p = 0; p < hw; p++) {
                size_t i = BN_AT(s, n, c, p);
                y[i] = (d->x[i] - mean[c]) / sqrt(var[c] + eps) * d->gamma[c] + d->beta[c];
            }
}

/* Backward in double: training uses the batch statistics (and their dependence on x),
 * inference the running ones (y affine in x). */
static void ref_bn_backward(const struct tb_shape s, const struct bn_data *d, bool training, double eps, double *dx,
                            double *dgamma, double *dbeta)
{
    const size_t hw = (size_t)s.h * s.w, P = (size_t)s.n * hw;
    double *mean = dmalloc(d->nc), *var = dmalloc(d->nc);
    if (training)
        ref_bn_stats(s, d->x, mean, var);
    else
        for (size_t c = 0; c < d->nc; c++) {
            mean[c] = d->rmean[c];
            var[c] = d->rvar[c];
        }
    for (int c = 0; c < s.c; c++) {
        double inv = 1.0 / sqrt(var[c] + eps), sdy = 0, sdyx = 0;
        for (int n = 0; n < s.n; n++)
            for (size_t p = 0; p < hw; p++) {
                size_t i = BN_AT(s, n, c, p);
                sdy += d->dy[i];
                sdyx += d->dy[i] * (d->x[i] - mean[c]);
            }
        dbeta[c] = sdy;
        dgamma[c] = sdyx * inv;
        for (int n = 0; n < s.n; n++)
            for (size_t p = 0; p < hw; p++) {
                size_t i = BN_AT(s, n, c, p);
                if (training)
                    dx[i] = d->gamma[c] * inv *
                            (d->dy[i] - sdy / (double)P - (d->x[i] - mean[c]) * inv * inv * sdyx / (double)P);
                else
                    dx[i] = d->dy[i] * d->gamma[c] * inv;
            }
    }
    free(mean);
    free(var);
}

/* Forward against the reference (y, save_mean, save_invstd, running stats after the
 * step), backward against the reference, then against finite differences. */
static void check_bn_training(int n, int c, int h, int w, float offset, float fd_eps, uint32_t id)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", "threads = 2\n");
    struct tb_op op = bn_op(n, c, h, w, 1, id);
    struct opcheck oc;
    opcheck_init(&oc, &b, &op);
    struct bn_data d = bn_data(&op, id * 10, offset, 1.0f);
    bn_set_inputs(&oc, &d);
    const struct tb_shape s = op.in[0].shape;
    const double eps = op.p.bn.eps, mom = op.p.bn.momentum;

    opcheck_forward(&oc, 0);
    double *mean = dmalloc(d.nc), *var = dmalloc(d.nc), *ry = dmalloc(d.nx);
    ref_bn_stats(s, d.x, mean, var);
    ref_bn_normalise(s, &d, mean, var, eps, ry);
    float *y = download(&b, &oc.out[0]);
    test_assert_close("bn y", y, ry, d.nx, BN_TOL, BN_TOL);
    double *want = dmalloc(d.nc);
    float *got = download(&b, &oc.out[1]);
    test_assert_close("save_mean", got, mean, d.nc, 1e-6 * (1 + fabs(offset)), 1e-6);
    free(got);
    for (size_t i = 0; i < d.nc; i++)
        want[i] = 1.0 / sqrt(var[i] + eps);
    got = download(&b, &oc.out[2]);
    test_assert_close("save_invstd", got, want, d.nc, 1e-6, 1e-5);
    free(got);
    for (size_t i = 0; i < d.nc; i++)
        want[i] = (1 - mom) * d.rmean[i] + mom * mean[i];
    got = download(&b, &oc.in[3]);
    test_assert_close("running_mean", got, want, d.nc, 1e-6 * (1 + fabs(offset)), 1e-6);
    free(got);
    for (size_t i = 0; i < d.nc; i++)
        want[i] = (1 - mom) * d.rvar[i] + mom * var[i] * (double)d.P / (double)(d.P - 1);
    got = download(&b, &oc.in[4]);
    test_assert_close("running_var", got, want, d.nc, 1e-6, 1e-5);
    free(got);

    /* Backward reads the saved statistics of the forward above. */
    for (uint32_t i = 0; i < 3; i++)
        fill(&b, &oc.din[i], NAN);
    float *dys[3] = { d.dy, NULL, NULL };
    opcheck_backward(&oc, dys);
    double *rdx = dmalloc(d.nx), *rdg = dmalloc(d.nc), *rdb = dmalloc(d.nc);
    ref_bn_backward(s, &d, true, eps, rdx, rdg, rdb);
    float *dx = download(&b, &oc.din[0]), *dg = download(&b, &oc.din[1]), *db = download(&b, &oc.din[2]);
    test_assert_close("bn dx", dx, rdx, d.nx, BN_TOL, BN_TOL);
    /* dgamma and dbeta are sums over N*H*W terms of O(1): REL_SUM of that count. */
    test_assert_close("bn dgamma", dg, rdg, d.nc, REL_SUM * (double)d.P, 1e-5);
    test_assert_close("bn dbeta", db, rdb, d.nc, REL_SUM * (double)d.P, 1e-5);

    const bool check[5] = { true, true, true, false, false };
    opcheck_gradients(&oc, check, fd_eps, 1e-3, 1e-2, FD_SAMPLES, 6, 0);

    free(dx);
    free(dg);
    free(db);
    free(rdx);
    free(rdg);
    free(rdb);
    free(y);
    free(ry);
    free(mean);
    free(var);
    free(want);
    bn_data_free(&d);
    opcheck_fini(&oc);
    test_backend_close(&b);
}

START_TEST(bn_training_small)
{
    check_bn_training(2, 3, 7, 5, 0.0f, FD_EPS, 50);
}
END_TEST

START_TEST(bn_training_many_blocks)
{
    /* P * C large enough that the sums are split into several blocks, the last short. */
    check_bn_training(4, 24, 31, 29, 0.5f, FD_EPS, 51);
}
END_TEST

START_TEST(bn_training_blocked)
{
    /* Channels in blocks: 32 on every vector path (nChw16c, nChw8c), 24 on AVX2's; and a
     * large mean, whose shift (the first pixel of each channel) must be that channel's. */
    check_bn_training(2, 32, 9, 7, 0.5f, FD_EPS, 54);
    check_bn_training(2, 24, 5, 6, 0.0f, FD_EPS, 55);
    check_bn_training(2, 48, 6, 5, 100.0f, FD_EPS, 56);
}
END_TEST

START_TEST(bn_training_large_mean)
{
    /* Mean 100 against a spread of 1: a naive sum(x^2) - sum(x)^2 / P loses digits. */
    check_bn_training(2, 5, 9, 7, 100.0f, FD_EPS, 52);
}
END_TEST

START_TEST(bn_training_batch1_1x2)
{
    /* Two values per channel: the smallest batch training accepts (P - 1 = 1). With two
     * values the normalised output is +-1 and curves sharply where they are close, so
     * the finite differences take a smaller step (float32 rounding is small here: only
     * two outputs per channel move). */
    check_bn_training(1, 4, 1, 2, 0.0f, 1e-3f, 53);
}
END_TEST

/* The running statistics after two steps on different batches. */
START_TEST(bn_running_stats_two_steps)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", "threads = 2\n");
    struct tb_op op = bn_op(3, 6, 5, 4, 1, 60);
    struct opcheck oc;
    opcheck_init(&oc, &b, &op);
    struct bn_data d1 = bn_data(&op, 600, 1.0f, 2.0f), d2 = bn_data(&op, 610, -2.0f, 0.5f);
    bn_set_inputs(&oc, &d1);
    const double mom = op.p.bn.momentum;
    double *m1 = dmalloc(d1.nc), *v1 = dmalloc(d1.nc), *m2 = dmalloc(d1.nc), *v2 = dmalloc(d1.nc);
    ref_bn_stats(op.in[0].shape, d1.x, m1, v1);
    ref_bn_stats(op.in[0].shape, d2.x, m2, v2);
    const double unbias = (double)d1.P / (double)(d1.P - 1);
    double *rm = dmalloc(d1.nc), *rv = dmalloc(d1.nc);
    for (size_t c = 0; c < d1.nc; c++) {
        rm[c] = (1 - mom) * d1.rmean[c] + mom * m1[c];
        rv[c] = (1 - mom) * d1.rvar[c] + mom * v1[c] * unbias;
    }
    opcheck_forward(&oc, 0);
    float *got = download(&b, &oc.in[3]);
    test_assert_close("running_mean after 1", got, rm, d1.nc, 1e-6, 1e-6);
    free(got);
    got = download(&b, &oc.in[4]);
    test_assert_close("running_var after 1", got, rv, d1.nc, 1e-6, 1e-5);
    free(got);

    /* Second step: only x changes (uploading the running stats again would reset them). */
    opcheck_set_input(&oc, 0, d2.x);
    for (size_t c = 0; c < d1.nc; c++) {
        rm[c] = (1 - mom) * rm[c] + mom * m2[c];
        rv[c] = (1 - mom) * rv[c] + mom * v2[c] * unbias;
    }
    opcheck_forward(&oc, 1);
    got = download(&b, &oc.in[3]);
    test_assert_close("running_mean after 2", got, rm, d1.nc, 1e-6, 1e-5);
    free(got);
    got = download(&b, &oc.in[4]);
    test_assert_close("running_var after 2", got, rv, d1.nc, 1e-6, 1e-5);
    free(got);

    free(m1);
    free(v1);
    free(m2);
    free(v2);
    free(rm);
    free(rv);
    bn_data_free(&d1);
    bn_data_free(&d2);
    opcheck_fini(&oc);
    test_backend_close(&b);
}
END_TEST

/* Inference: running statistics, save_* and the running stats untouched; backward with
 * the running statistics (as PyTorch in eval mode). */
START_TEST(bn_inference)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", "threads = 2\n");
    struct tb_op op = bn_op(2, 5, 6, 7, 0, 70);
    struct opcheck oc;
    opcheck_init(&oc, &b, &op);
    struct bn_data d = bn_data(&op, 700, 0.3f, 1.0f);
    bn_set_inputs(&oc, &d);
    const struct tb_shape s = op.in[0].shape;
    const double eps = op.p.bn.eps;
    const float sentinel = -3.5f;
    fill(&b, &oc.out[1], sentinel);
    fill(&b, &oc.out[2], sentinel);

    opcheck_forward(&oc, 0);
    double *mean = dmalloc(d.nc), *var = dmalloc(d.nc), *ry = dmalloc(d.nx);
    for (size_t c = 0; c < d.nc; c++) {
        mean[c] = d.rmean[c];
        var[c] = d.rvar[c];
    }
    ref_bn_normalise(s, &d, mean, var, eps, ry);
    float *y = download(&b, &oc.out[0]);
    test_assert_close("bn inference y", y, ry, d.nx, BN_TOL, BN_TOL);
    float *got = download(&b, &oc.out[1]);
    assert_all("save_mean", got, d.nc, sentinel);
    free(got);
    got = download(&b, &oc.out[2]);
    assert_all("save_invstd", got, d.nc, sentinel);
    free(got);
    got = download(&b, &oc.in[3]);
    ck_assert(memcmp(got, d.rmean, d.nc * sizeof(float)) == 0);
    free(got);
    got = download(&b, &oc.in[4]);
    ck_assert(memcmp(got, d.rvar, d.nc * sizeof(float)) == 0);
    free(got);

    float *dys[3] = { d.dy, NULL, NULL };
    opcheck_backward(&oc, dys);
    double *rdx = dmalloc(d.nx), *rdg = dmalloc(d.nc), *rdb = dmalloc(d.nc);
    ref_bn_backward(s, &d, false, eps, rdx, rdg, rdb);
    float *dx = download(&b, &oc.din[0]), *dg = download(&b, &oc.din[1]), *db = download(&b, &oc.din[2]);
    test_assert_close("bn inference dx", dx, rdx, d.nx, BN_TOL, BN_TOL);
    test_assert_close("bn inference dgamma", dg, rdg, d.nc, REL_SUM * (double)d.P, 1e-5);
    test_assert_close("bn inference dbeta", db, rdb, d.nc, REL_SUM * (double)d.P, 1e-5);

    const bool check[5] = { true, true, true, false, false };
    opcheck_gradients(&oc, check, FD_EPS, 1e-3, 1e-3, FD_SAMPLES, 6, 0);

    free(dx);
    free(dg);
    free(db);
    free(rdx);
    free(rdg);
    free(rdb);
    free(y);
    free(ry);
    free(mean);
    free(var);
    bn_data_free(&d);
    opcheck_fini(&oc);
    test_backend_close(&b);
}
END_TEST

/* din entries with data NULL are skipped; the others still right. */
START_TEST(bn_partial_gradients)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", "threads = 2\n");
    struct tb_op op = bn_op(2, 4, 5, 6, 1, 80);
    struct opcheck oc;
    opcheck_init(&oc, &b, &op);
    struct bn_data d = bn_data(&op, 800, 0.0f, 1.0f);
    bn_set_inputs(&oc, &d);
    opcheck_forward(&oc, 0);
    double *rdx = dmalloc(d.nx), *rdg = dmalloc(d.nc), *rdb = dmalloc(d.nc);
    ref_bn_backward(op.in[0].shape, &d, true, op.p.bn.eps, rdx, rdg, rdb);
    const float sentinel = 9.5f;
    for (int mode = 0; mode < 2; mode++) {
        /* 0: no dx; 1: only dx. */
        struct tb_tensor din[5];
        memcpy(din, oc.din, sizeof din);
        for (int i = 0; i < 5; i++) {
            fill(&b, &oc.din[i], sentinel);
            if ((i == 0) == (mode == 0) || i >= 3)
                din[i].data = NULL;
        }
        struct tb_err err;
        tb_err_clear(&err);
        test_upload(&b, &oc.dout[0], d.dy);
        ck_assert_msg(b.ops.backend->op_backward(b.ctx, &op, oc.state, oc.in, oc.out, oc.dout, din, &err) == TB_OK,
                      "%s", err.msg);
        float *dx = download(&b, &oc.din[0]), *dg = download(&b, &oc.din[1]), *db = download(&b, &oc.din[2]);
        if (mode == 0) {
            assert_all("dx", dx, d.nx, sentinel);
            test_assert_close("dgamma", dg, rdg, d.nc, REL_SUM * (double)d.P, 1e-5);
            test_assert_close("dbeta", db, rdb, d.nc, REL_SUM * (double)d.P, 1e-5);
        } else {
            test_assert_close("dx", dx, rdx, d.nx, BN_TOL, BN_TOL);
            assert_all("dgamma", dg, d.nc, sentinel);
            assert_all("dbeta", db, d.nc, sentinel);
        }
        free(dx);
        free(dg);
        free(db);
    }
    free(rdx);
    free(rdg);
    free(rdb);
    bn_data_free(&d);
    opcheck_fini(&oc);
    test_backend_close(&b);
}
END_TEST

/* Forward (y, saved and running statistics) and backward of batch norm on `threads`. */
static void bn_run(const char *threads, float **res)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", threads);
    struct tb_op op = bn_op(4, 40, 23, 21, 1, 90);
    struct opcheck oc;
    opcheck_init(&oc, &b, &op);
    struct bn_data d = bn_data(&op, 900, 0.7f, 1.0f);
    bn_set_inputs(&oc, &d);
    opcheck_forward(&oc, 0);
    float *dys[3] = { d.dy, NULL, NULL };
    opcheck_backward(&oc, dys);
    res[0] = download(&b, &oc.out[0]);
    res[1] = download(&b, &oc.out[1]);
    res[2] = download(&b, &oc.out[2]);
    res[3] = download(&b, &oc.in[3]);
    res[4] = download(&b, &oc.in[4]);
    res[5] = download(&b, &oc.din[0]);
    res[6] = download(&b, &oc.din[1]);
    res[7] = download(&b, &oc.din[2]);
    bn_data_free(&d);
    opcheck_fini(&oc);
    test_backend_close(&b);
}

/* Bit-identical run to run, and (by construction of the reduction) for any thread count. */
START_TEST(bn_deterministic)
{
    static const char *const names[8] = { "y",           "save_mean", "save_invstd", "running_mean",
                                          "running_var", "dx",        "dgamma",      "dbeta" };
    const size_t nx = (size_t)4 * 40 * 23 * 21, sizes[8] = { nx, 40, 40, 40, 40, nx, 40, 40 };
    float *a[8], *b2[8], *b1[8];
    bn_run("threads = 2\n", a);
    bn_run("threads = 2\n", b2);
    bn_run("threads = 1\n", b1);
    for (int i = 0; i < 8; i++) {
        ck_assert_msg(memcmp(a[i], b2[i], sizes[i] * sizeof(float)) == 0, "%s differs between two runs", names[i]);
        ck_assert_msg(memcmp(a[i], b1[i], sizes[i] * sizeof(float)) == 0, "%s differs between 1 and 2 threads",
                      names[i]);
        free(a[i]);
        free(b2[i]);
        free(b1[i]);
    }
}
END_TEST

START_TEST(bn_refuses_single_value_training)
{
    struct test_backend b;
    test_backend_open(&b, "cpu", "threads = 2\n");
    struct tb_op op = bn_op(1, 8, 1, 1, 1, 91);
    struct tb_err err;
    tb_err_clear(&err);
    void *state = NULL;
    ck_assert_int_eq(b.ops.backend->op_prepare(b.ctx, 0, &op, &state, &err), TB_ERR_RUNTIME);
    ck_assert_contains(err.msg, "op 91 (batchnorm)");
    /* Inference on one value is fine. */
    op.p.bn.training = 0;
    tb_err_clear(&err);
    ck_assert_msg(b.ops.backend->op_prepare(b.ctx, 0, &op, &state, &err) == TB_OK, "%s", err.msg);
    b.ops.backend->op_release(b.ctx, state);
    test_backend_close(&b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conv");
    TCase *tc = tcase_create("conv2d");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, conv_1x1);
    tcase_add_test(tc, conv_1x1_stride2);
    tcase_add_test(tc, conv_3x3_pad);
    tcase_add_test(tc, conv_3x3_no_pad_bias);
    tcase_add_test(tc, conv_7x7);
    tcase_add_test(tc, conv_7x7_stride2);
    tcase_add_test(tc, conv_3x3_stride2_odd);
    tcase_add_test(tc, conv_dilation2);
    tcase_add_test(tc, conv_dilation4);
    tcase_add_test(tc, conv_dilation2_no_pad);
    tcase_add_test(tc, conv_rectangular);
    tcase_add_test(tc, conv_wide_3x3);
    tcase_add_test(tc, conv_wide_1x1);
    tcase_add_test(tc, conv_wide_dilated);
    tcase_add_test(tc, conv_centre_tap_only);
    tcase_add_test(tc, conv_mixed_layouts);
    tcase_add_test(tc, conv_mixed_layouts_dilated);
    tcase_add_test(tc, conv_mixed_layouts_padding);
    tcase_add_test(tc, conv_wide_dilation4);
    tcase_add_test(tc, conv_wide_stride2);
    tcase_add_test(tc, conv_blocked_3x3);
    tcase_add_test(tc, conv_blocked_stride2);
    tcase_add_test(tc, conv_phases_dilation2);
    tcase_add_test(tc, conv_phases_dilation4);
    tcase_add_test(tc, conv_phases_rectangular);
    tcase_add_test(tc, conv_blocked_1x1);
    tcase_add_test(tc, conv_blocked_1x1_wide);
    tcase_add_test(tc, conv_partial_gradients);
    tcase_add_test(tc, conv_deterministic);
    tcase_add_test(tc, conv_refuses_bad_shapes);
    suite_add_tcase(s, tc);

    tc = tcase_create("batchnorm");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, bn_training_small);
    tcase_add_test(tc, bn_training_many_blocks);
    tcase_add_test(tc, bn_training_blocked);
    tcase_add_test(tc, bn_training_large_mean);
    tcase_add_test(tc, bn_training_batch1_1x2);
    tcase_add_test(tc, bn_running_stats_two_steps);
    tcase_add_test(tc, bn_inference);
    tcase_add_test(tc, bn_partial_gradients);
    tcase_add_test(tc, bn_deterministic);
    tcase_add_test(tc, bn_refuses_single_value_training);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
