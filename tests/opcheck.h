/* tests/opcheck.h: run one backend op from a test, and check its backward against
 * central finite differences of its forward (header-only; include after testutil.h).
 *
 *   struct test_backend b;
 *   test_backend_open(&b, "cpu", "threads = 2\n");
 *   struct opcheck oc;
 *   opcheck_init(&oc, &b, &op);           // allocates every input and output, op_prepare
 *   opcheck_set_input(&oc, 0, x_nchw);    // host values in the canonical NCHW layout
 *   opcheck_forward(&oc, 0);
 *   opcheck_get_output(&oc, 0, y_nchw);
 *   opcheck_gradients(&oc, ...);          // backward vs finite differences
 *   opcheck_fini(&oc);
 *   test_backend_close(&b);
 *
 * The backend plugin is found by name through the normal search path (the build tree). */
#ifndef TB_TESTS_OPCHECK_H
#define TB_TESTS_OPCHECK_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/trainbig.h>

#include "core/config/ini.h"
#include "core/config/loader.h"
#include "core/config/section_internal.h"
#include "core/config/setup_internal.h"
#include "testutil.h"

/* A backend instance (h, ops, ctx) opened by name. */
#define test_backend tb_instance

/* Opens backend plugin `name` with `keys` ("key = value" lines of its [backend] section). */
static inline void test_backend_open(struct test_backend *b, const char *name, const char *keys)
{
    struct tb_err err;
    ck_assert_msg(tb_instance_open(TB_KIND_BACKEND, name, NULL, keys, b, &err) == TB_OK, "%s", err.msg);
}

static inline void test_backend_close(struct test_backend *b)
{
    tb_instance_close(b);
}

/* A device tensor of the given description (device 0). */
static inline struct tb_tensor test_tensor(struct test_backend *b, struct tb_tensor_desc d)
{
    struct tb_tensor t = { d, 0, NULL };
    size_t bytes = b->ops.backend->tensor_bytes(b->ctx, &d);
    t.data = b->ops.backend->mem_alloc(b->ctx, 0, bytes ? bytes : 1);
    ck_assert_ptr_nonnull(t.data);
    return t;
}

static inline void test_tensor_free(struct test_backend *b, struct tb_tensor *t)
{
    if (t->data)
        b->ops.backend->mem_free(b->ctx, 0, t->data);
    t->data = NULL;
}

static inline void test_upload(struct test_backend *b, const struct tb_tensor *t, const void *host)
{
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(b->ops.backend->tensor_write(b->ctx, t, host, &err) == TB_OK, "%s", err.msg);
}

static inline void test_download(struct test_backend *b, const struct tb_tensor *t, void *host)
{
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(b->ops.backend->tensor_read(b->ctx, t, host, &err) == TB_OK, "%s", err.msg);
}

/* Deterministic pseudo-random floats in [lo, hi). */
static inline void test_random(float *x, size_t n, uint64_t seed, float lo, float hi)
{
    uint64_t s = seed * TB_GOLDEN64 + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = lo + (hi - lo) * (float)(s >> 40) / 16777216.0f;
    }
}

static inline struct tb_tensor_desc test_desc(enum tb_dtype t, int n, int c, int h, int w)
{
    struct tb_tensor_desc d = { t, { n, c, h, w } };
    return d;
}

/* Short forms for the op suites: an op of a kind with its counts, the rest zero; f32 and
 * u8 descriptions; a description's element count. */
static inline struct tb_op new_op(enum tb_op_kind kind, uint32_t id, uint32_t nin, uint32_t nout)
{
    struct tb_op op;
    memset(&op, 0, sizeof op);
    op.kind = kind;
    op.id = id;
    op.nin = nin;
    op.nout = nout;
    return op;
}

static inline struct tb_tensor_desc f32(int n, int c, int h, int w)
{
    return test_desc(TB_F32, n, c, h, w);
}

static inline struct tb_tensor_desc u8(int n, int c, int h, int w)
{
    return test_desc(TB_U8, n, c, h, w);
}

static inline size_t elems(struct tb_tensor_desc d)
{
    return tb_shape_elems(d.shape);
}

/* ------------------------------------------------------------------ one op */

struct opcheck {
    struct test_backend *b;
    struct tb_op op;
    const char *name; /* what messages call the op (a test case's name), or NULL */
    void *state;
    struct tb_tensor in[TB_OP_MAX_IN], out[TB_OP_MAX_OUT];
    struct tb_tensor din[TB_OP_MAX_IN], dout[TB_OP_MAX_OUT];
    void *host_in[TB_OP_MAX_IN]; /* the current input values, NCHW */
};

static inline size_t opcheck_bytes(struct tb_tensor_desc d)
{
    return tb_shape_elems(d.shape) * tb_dtype_size(d.dtype);
}

/* Allocates every input, output and gradient, zeroes the inputs, and prepares the op. */
static inline void opcheck_init(struct opcheck *oc, struct test_backend *b, const struct tb_op *op)
{
    memset(oc, 0, sizeof *oc);
    oc->b = b;
    oc->op = *op;
    for (uint32_t i = 0; i < op->nin; i++) {
        oc->in[i] = test_tensor(b, op->in[i]);
        oc->host_in[i] = calloc(1, opcheck_bytes(op->in[i]) + 1);
        ck_assert_ptr_nonnull(oc->host_in[i]);
        test_upload(b, &oc->in[i], oc->host_in[i]);
        if (tb_dtype_is_float(op->in[i].dtype))
            oc->din[i] = test_tensor(b, op->in[i]);
    }
    for (uint32_t j = 0; j < op->nout; j++) {
        oc->out[j] = test_tensor(b, op->out[j]);
        if (tb_dtype_is_float(op->out[j].dtype))
            oc->dout[j] = test_tensor(b, op->out[j]);
    }
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(b->ops.backend->op_prepare(b->ctx, 0, &oc->op, &oc->state, &err) == TB_OK, "%s", err.msg);
}

static inline void opcheck_fini(struct opcheck *oc)
{
    oc->b->ops.backend->op_release(oc->b->ctx, oc->state);
    for (uint32_t i = 0; i < oc->op.nin; i++) {
        test_tensor_free(oc->b, &oc->in[i]);
        test_tensor_free(oc->b, &oc->din[i]);
        free(oc->host_in[i]);
    }
    for (uint32_t j = 0; j < oc->op.nout; j++) {
        test_tensor_free(oc->b, &oc->out[j]);
        test_tensor_free(oc->b, &oc->dout[j]);
    }
}

/* Sets input i from host values (NCHW, the input's dtype). */
static inline void opcheck_set_input(struct opcheck *oc, uint32_t i, const void *host)
{
    memcpy(oc->host_in[i], host, opcheck_bytes(oc->op.in[i]));
    test_upload(oc->b, &oc->in[i], host);
}

static inline void opcheck_forward(struct opcheck *oc, uint64_t step)
{
    struct tb_err err;
    tb_err_clear(&err);
    ck_assert_msg(oc->b->ops.backend->op_forward(oc->b->ctx, &oc->op, oc->state, step, oc->in, oc->out, &err) == TB_OK,
                  "%s", err.msg);
}

static inline void opcheck_get_output(struct opcheck *oc, uint32_t j, void *host)
{
    test_download(oc->b, &oc->out[j], host);
}

/* Runs forward then backward with the given output gradients (host NCHW floats, one per
 * f32 output; NULL entries = zero). din[i] for f32 inputs is then readable with
 * test_download(oc->b, &oc->din[i], ...). */
static inline void opcheck_backward(struct opcheck *oc, float *const *dout_host)
{
    struct tb_err err;
    tb_err_clear(&err);
    for (uint32_t j = 0; j < oc->op.nout; j++) {
        if (!oc->dout[j].data)
            continue;
        if (dout_host && dout_host[j])
            test_upload(oc->b, &oc->dout[j], dout_host[j]);
        else
            ck_assert(oc->b->ops.backend->tensor_fill(oc->b->ctx, &oc->dout[j], 0.0f, &err) == TB_OK);
    }
    ck_assert_msg(oc->b->ops.backend->op_backward(oc->b->ctx, &oc->op, oc->state, oc->in, oc->out, oc->dout, oc->din,
                                                  &err) == TB_OK,
                  "%s", err.msg);
}

/* L = sum over f32 outputs j of sum_e w_j[e] * out_j[e], from a fresh forward (in double). */
static inline double opcheck_objective(struct opcheck *oc, float *const *w, uint64_t step)
{
    opcheck_forward(oc, step);
    double L = 0;
    for (uint32_t j = 0; j < oc->op.nout; j++) {
        if (oc->op.out[j].dtype != TB_F32 || !w[j])
            continue;
        size_t n = tb_shape_elems(oc->op.out[j].shape);
        float *y = malloc(n * sizeof *y);
        ck_assert_ptr_nonnull(y);
        opcheck_get_output(oc, j, y);
        for (size_t e = 0; e < n; e++)
            L += (double)w[j][e] * (double)y[e];
        free(y);
    }
    return L;
}

/* Checks the gradient of every f32 input i with check[i] true: backward with random output
 * weights w against central differences (x +- eps) of L = sum w * out. At most `samples`
 * elements of each input are perturbed (spread over it). An element passes when
 * |analytic - numeric| <= atol + rtol * |numeric|. Outputs listed in `skip_out` (a
 * bitmask) get zero weight (for example a batch-norm's saved statistics). */
static inline void opcheck_gradients(struct opcheck *oc, const bool *check, float eps, double atol, double rtol,
                                     size_t samples, uint32_t skip_out, uint64_t step)
{
    float *w[TB_OP_MAX_OUT] = { 0 };
    for (uint32_t j = 0; j < oc->op.nout; j++) {
        if (oc->op.out[j].dtype != TB_F32 || (skip_out >> j & 1))
            continue;
        size_t n = tb_shape_elems(oc->op.out[j].shape);
        w[j] = malloc(n * sizeof *w[j]);
        ck_assert_ptr_nonnull(w[j]);
        test_random(w[j], n, 1000 + j, -1.0f, 1.0f);
    }
    opcheck_forward(oc, step);
    opcheck_backward(oc, w);
    for (uint32_t i = 0; i < oc->op.nin; i++) {
        if (!check[i] || oc->op.in[i].dtype != TB_F32)
            continue;
        size_t n = tb_shape_elems(oc->op.in[i].shape);
        float *g = malloc(n * sizeof *g);
        float *x = malloc(n * sizeof *x);
        ck_assert(g && x);
        test_download(oc->b, &oc->din[i], g);
        memcpy(x, oc->host_in[i], n * sizeof *x);
        size_t stride = n > samples ? n / samples : 1;
        for (size_t e = 0; e < n; e += stride) {
            float keep = x[e];
            x[e] = keep + eps;
            opcheck_set_input(oc, i, x);
            double lp = opcheck_objective(oc, w, step);
            x[e] = keep - eps;
            opcheck_set_input(oc, i, x);
            double lm = opcheck_objective(oc, w, step);
            x[e] = keep;
            opcheck_set_input(oc, i, x);
            double numeric = (lp - lm) / (2.0 * eps);
            ck_assert_msg(fabs((double)g[e] - numeric) <= atol + rtol * fabs(numeric),
                          "%s%s%s op %u: d input %u [%zu]: backward %.6g, finite differences %.6g",
                          oc->name ? oc->name : "", oc->name ? ": " : "", tb_op_kind_name(oc->op.kind), oc->op.id, i, e,
                          (double)g[e], numeric);
        }
        free(g);
        free(x);
    }
    for (uint32_t j = 0; j < oc->op.nout; j++)
        free(w[j]);
}

/* Asserts |got - want| <= atol + rtol * |want| elementwise, naming the first mismatch. */
static inline void test_assert_close(const char *what, const float *got, const double *want, size_t n, double atol,
                                     double rtol)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= atol + rtol * fabs(want[i])))
            ck_abort_msg("%s[%zu]: got %.8g, want %.8g", what, i, (double)got[i], want[i]);
}

#endif
