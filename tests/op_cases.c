/* tests/op_cases.c: the op cases of tests/op_cases.h, run by check_ops (finite differences
 * and determinism on the cpu backend) and check_cuda (cuda against cpu).
 *
 * Each kind's cases are made by one function (`i`: which case) and counted in the table at
 * the end; a new op is a function and a line there. Most shapes are odd and even, 17..40
 * pixels a side, with channel counts blocked on the CPU's vector paths (16, 24, 32) and not
 * (5, 13, 19); the cases of 19 channels on 17x13 are large enough that two or three
 * threads each get several rows. */
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
/* tb_op_grad_inputs and tb_op_grad_outputs: the executor's reading of ops.h's "no grad";
 * each kind's row (its float class). */
#include "core/engine/graph_internal.h"
#include "core/engine/op_kinds_internal.h"

/* Elements of each input the finite differences perturb, spread over it (check_ops' and
 * check_conv's own tests compare every element with a double reference; here the
 * differences confirm that each case's backward agrees with its forward). */
#define FD_SAMPLES 90

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------ helpers */

float *op_frand(size_t n, uint64_t seed, float lo, float hi)
{
    float *x = malloc(n * sizeof *x + 1);
    ck_assert_ptr_nonnull(x);
    test_random(x, n, seed, lo, hi);
    return x;
}

uint64_t op_next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s >> 11;
}

/* Labels in 0..k-1, about one in `ignore_every` = 255 (0: none). */
uint8_t *op_labels(size_t n, int k, int ignore_every, uint64_t seed)
{
    uint8_t *l = malloc(n + 1);
    ck_assert_ptr_nonnull(l);
    uint64_t s = seed * TB_GOLDEN64 + 5;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = op_next_rand(&s);
        l[i] = ignore_every && r % (uint64_t)ignore_every == 0 ? 255 : (uint8_t)(r / 64 % (uint64_t)k);
    }
    return l;
}

static void name_add(struct pcase *pc, const char *suffix)
{
    size_t len = strlen(pc->name);
    snprintf(pc->name + len, sizeof pc->name - len, "%s", suffix);
}

static const char *shape_str(struct tb_shape s)
{
    static char buf[64];
    snprintf(buf, sizeof buf, "%dx%dx%dx%d", s.n, s.c, s.h, s.w);
    return buf;
}

bool in_has_grad(const struct tb_op *op, uint32_t i)
{
    return tb_dtype_is_float(op->in[i].dtype) && (tb_op_grad_inputs(op) >> i & 1);
}

bool out_has_grad(const struct tb_op *op, uint32_t j)
{
    return tb_dtype_is_float(op->out[j].dtype) && (tb_op_grad_outputs(op) >> j & 1);
}

double pc_value(const void *host, enum tb_dtype d, size_t i)
{
    const uint16_t *h = host;
    return d == TB_F32    ? (double)((const float *)host)[i]
           : d == TB_BF16 ? (double)tb_f32_from_bf16(h[i])
                          : (double)tb_f32_from_f16(h[i]);
}

/* n f32 values rounded to dt: as dt bits (narrow) or as the floats they stand for. */
static void *round_to(const float *x, size_t n, enum tb_dtype dt, bool narrow)
{
    void *out = malloc(n * (narrow ? 2 : 4) + 1);
    ck_assert_ptr_nonnull(out);
    for (size_t i = 0; i < n; i++) {
        const uint16_t h = dt == TB_BF16 ? tb_bf16_from_f32(x[i]) : tb_f16_from_f32(x[i]);
        if (narrow)
            ((uint16_t *)out)[i] = h;
        else
            ((float *)out)[i] = dt == TB_BF16 ? tb_f32_from_bf16(h) : tb_f32_from_f16(h);
    }
    return out;
}

/* Random floats in [-1, 1) from seed, in dtype d (f32, or rounded to a 16-bit one). */
static void *frand_as(enum tb_dtype d, size_t n, uint64_t seed)
{
    float *x = op_frand(n, seed, -1.0f, 1.0f);
    if (d == TB_F32)
        return x;
    void *h = round_to(x, n, d, true);
    free(x);
    return h;
}

/* ------------------------------------------------------------------ building a case */

void pc_init(struct pcase *pc, const char *name, const struct tb_op *op, uint64_t seed)
{
    memset(pc, 0, sizeof *pc);
    char why[600];
    ck_assert_msg(tb_op_check(op, why, sizeof why) == 0, "%s: the case breaks the op contract: %s", name, why);
    snprintf(pc->name, sizeof pc->name, "%s", name);
    pc->op = *op;
    pc->forwards = 1;
    for (uint32_t i = 0; i < op->nin; i++) {
        if (tb_dtype_is_float(op->in[i].dtype)) {
            pc->in[i] = frand_as(op->in[i].dtype, elems(op->in[i]), seed + i);
        } else {
            pc->in[i] = calloc(1, elems(op->in[i]) + 1);
            ck_assert_ptr_nonnull(pc->in[i]);
        }
        pc->backward |= in_has_grad(op, i);
    }
    for (uint32_t j = 0; j < op->nout; j++)
        if (out_has_grad(op, j))
            pc->dy[j] = frand_as(op->out[j].dtype, elems(op->out[j]), seed + 100 + j);
    /* eps 1e-2 on O(1) inputs. For an op linear in each input only rounding matters: an
     * ulp (6e-8) of each output that moves, over 2 eps, ~1e-5 for a few outputs. */
    pc->fd = (struct fd_spec){ 1e-2f, 2e-4, 1e-3, FD_SAMPLES, NULL, NULL };
    if (!pc->backward)
        pc->fd.skip = "no input carries a gradient: the op has no backward";
}

void pc_set(struct pcase *pc, uint32_t i, void *host)
{
    free(pc->in[i]);
    pc->in[i] = host;
}

void pc_tol(struct pcase *pc, struct tol out, struct tol din)
{
    for (int j = 0; j < TB_OP_MAX_OUT; j++)
        pc->out[j] = out;
    for (int i = 0; i < TB_OP_MAX_IN; i++)
        pc->din[i] = din;
}

void pc_free(struct pcase *pc)
{
    for (int i = 0; i < TB_OP_MAX_IN; i++)
        free(pc->in[i]);
    for (int j = 0; j < TB_OP_MAX_OUT; j++)
        free(pc->dy[j]);
}

bool pc_narrow(struct pcase *pc, enum tb_dtype dt, struct pcase *ref)
{
    const struct tb_op_row *row = tb_op_row(pc->op.kind);
    ck_assert_ptr_nonnull(row);
    if (pc->op.kind == TB_OP_CAST)
        return false;
    struct tb_op op = pc->op;
    bool any = false;
    for (uint32_t i = 0; i < op.nin; i++)
        if (tb_op_row_dtype(row, i) == TB_OP_FLOAT) {
            op.in[i].dtype = dt;
            any = true;
        }
    if (!any)
        return false;
    char why[600];
    ck_assert_msg(tb_op_outputs(&op, op.out, &op.nout, why, sizeof why) == 0, "%s at %s: %s", pc->name,
                  tb_dtype_name(dt), why);
    *ref = *pc; /* takes over pc's arrays; pc gets new ones */
    snprintf(pc->name + strlen(pc->name), sizeof pc->name - strlen(pc->name), " at %s", tb_dtype_name(dt));
    for (uint32_t i = 0; i < op.nin; i++) {
        if (op.in[i].dtype != dt)
            continue;
        pc->in[i] = round_to(ref->in[i], elems(op.in[i]), dt, true);
        void *wide = round_to(ref->in[i], elems(op.in[i]), dt, false);
        free(ref->in[i]);
        ref->in[i] = wide;
    }
    for (uint32_t i = 0; i < op.nin; i++)
        if (op.in[i].dtype != dt) { /* the others: a copy each */
            const size_t bytes = opcheck_bytes(op.in[i]);
            pc->in[i] = malloc(bytes + 1);
            ck_assert_ptr_nonnull(pc->in[i]);
            memcpy(pc->in[i], ref->in[i], bytes);
        }
    for (uint32_t j = 0; j < op.nout; j++) {
        pc->dy[j] = NULL;
        if (!ref->dy[j])
            continue;
        if (op.out[j].dtype == dt) {
            pc->dy[j] = round_to(ref->dy[j], elems(op.out[j]), dt, true);
            void *wide = round_to(ref->dy[j], elems(op.out[j]), dt, false);
            free(ref->dy[j]);
            ref->dy[j] = wide;
        } else { /* an f32 output's gradient stays as it is */
            pc->dy[j] = malloc(opcheck_bytes(op.out[j]) + 1);
            ck_assert_ptr_nonnull(pc->dy[j]);
            memcpy(pc->dy[j], ref->dy[j], opcheck_bytes(op.out[j]));
        }
    }
    pc->op = op;
    pc->fd.skip = "a 16-bit case: its f32 twin is checked by finite differences";
    return true;
}

static void fd_tol(struct pcase *pc, float eps, double atol, double rtol)
{
    pc->fd.eps = eps;
    pc->fd.atol = atol;
    pc->fd.rtol = rtol;
}

/* ------------------------------------------------------------------ running a case */

void result_free(struct result *r)
{
    for (int j = 0; j < TB_OP_MAX_OUT; j++)
        free(r->out[j]);
    for (int i = 0; i < TB_OP_MAX_IN; i++) {
        free(r->in_after[i]);
        free(r->din[i]);
    }
}

static void *host_buf(struct tb_tensor_desc d)
{
    void *p = malloc(opcheck_bytes(d) + 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

void op_case_run(struct test_backend *b, const struct pcase *pc, float junk, uint8_t junk_u8, struct result *r)
{
    memset(r, 0, sizeof *r);
    const struct tb_op *op = &pc->op;
    struct opcheck oc;
    opcheck_init(&oc, b, op);
    struct tb_err err;
    tb_err_clear(&err);
    for (uint32_t i = 0; i < op->nin; i++) {
        opcheck_set_input(&oc, i, pc->in[i]);
        if (oc.din[i].data)
            ck_assert_int_eq(b->ops.backend->tensor_fill(b->ctx, &oc.din[i], junk, &err), TB_OK);
    }
    for (uint32_t j = 0; j < op->nout; j++) {
        if (tb_dtype_is_float(op->out[j].dtype)) {
            ck_assert_int_eq(b->ops.backend->tensor_fill(b->ctx, &oc.out[j], junk, &err), TB_OK);
        } else {
            uint8_t *fill = host_buf(op->out[j]);
            memset(fill, junk_u8, elems(op->out[j]));
            test_upload(b, &oc.out[j], fill);
            free(fill);
        }
    }
    const char *backend = b->h->p->name;
    for (int k = 0; k < pc->forwards; k++) {
        tb_err_clear(&err);
        int rc = b->ops.backend->op_forward(b->ctx, &oc.op, oc.state, pc->step, oc.in, oc.out, &err);
        ck_assert_msg(rc == TB_OK, "%s: forward on %s: %s", pc->name, backend, err.msg);
    }
    for (uint32_t j = 0; j < op->nout; j++) {
        r->out[j] = host_buf(op->out[j]);
        test_download(b, &oc.out[j], r->out[j]);
    }
    for (uint32_t i = 0; i < op->nin; i++) {
        r->in_after[i] = host_buf(op->in[i]);
        test_download(b, &oc.in[i], r->in_after[i]);
    }
    if (pc->backward) {
        struct tb_tensor dout[TB_OP_MAX_OUT], din[TB_OP_MAX_IN];
        for (uint32_t j = 0; j < op->nout; j++) {
            dout[j] = oc.dout[j];
            if (!out_has_grad(op, j)) {
                dout[j].data = NULL;
                continue;
            }
            ck_assert_ptr_nonnull(pc->dy[j]);
            test_upload(b, &dout[j], pc->dy[j]);
        }
        for (uint32_t i = 0; i < op->nin; i++) {
            din[i] = oc.din[i];
            if (!in_has_grad(op, i) || (pc->no_din >> i & 1))
                din[i].data = NULL;
        }
        tb_err_clear(&err);
        int rc = b->ops.backend->op_backward(b->ctx, &oc.op, oc.state, oc.in, oc.out, dout, din, &err);
        ck_assert_msg(rc == TB_OK, "%s: backward on %s: %s", pc->name, backend, err.msg);
        for (uint32_t i = 0; i < op->nin; i++)
            if (din[i].data) {
                r->din[i] = host_buf(op->in[i]);
                test_download(b, &din[i], r->din[i]);
            }
    }
    opcheck_fini(&oc);
}

/* ------------------------------------------------------------------ inputs for finite differences */

/* relu: |x| >= 0.05, so that x +- eps (1e-3) stays on one side of the kink. */
static void fd_off_kink(struct pcase *pc)
{
    float *x = pc->in[0];
    for (size_t i = 0; i < elems(pc->op.in[0]); i++)
        if (fabsf(x[i]) < 0.05f)
            x[i] = x[i] < 0.0f ? -0.05f - x[i] : 0.05f + x[i];
}

/* maxpool: in each (n, c) plane the values 0.01 * (a permutation of 0..HW-1), centred: no
 * window holds two within 2 eps (2e-3) of each other, so no difference crosses a tie (the
 * parity cases' ties and integers included). Per plane, so that |x| <= 0.005 * HW stays
 * small: the error is the rounding of x +- eps, an ulp of |x| over 2 eps, times the
 * windows an element is in. */
static void fd_distinct_planes(struct pcase *pc)
{
    const struct tb_shape s = pc->op.in[0].shape;
    const size_t plane = (size_t)s.h * (size_t)s.w;
    float *x = pc->in[0];
    uint64_t r = 0x9e3779b9u;
    for (size_t p = 0; p < (size_t)s.n * (size_t)s.c; p++) {
        float *v = x + p * plane;
        for (size_t i = 0; i < plane; i++)
            v[i] = 0.01f * (float)i - 0.005f * (float)plane;
        for (size_t i = plane; i > 1; i--) {
            size_t j = op_next_rand(&r) % i;
            float t = v[i - 1];
            v[i - 1] = v[j];
            v[j] = t;
        }
    }
}

/* ------------------------------------------------------------------ conv2d */

void conv_case(struct pcase *pc, const struct conv_spec *s, uint64_t seed, struct tol tol)
{
    struct tb_op op = new_op(TB_OP_CONV2D, 10, s->bias ? 3 : 2, 1);
    op.in[0] = f32(s->n, s->c, s->h, s->w);
    op.in[1] = f32(s->o, s->c, s->k, s->k);
    if (s->bias)
        op.in[2] = f32(1, s->o, 1, 1);
    int oh = (s->h + 2 * s->pad - s->dil * (s->k - 1) - 1) / s->stride + 1;
    int ow = (s->w + 2 * s->pad - s->dil * (s->k - 1) - 1) / s->stride + 1;
    op.out[0] = f32(s->n, s->o, oh, ow);
    op.p.conv = (struct tb_conv2d_params){ s->k, s->k, s->stride, s->stride, s->pad, s->pad, s->dil, s->dil, s->bias };
    char name[128];
    snprintf(name, sizeof name, "conv2d %dx%dx%dx%d -> %d, %dx%d stride %d pad %d dilation %d%s", s->n, s->c, s->h,
             s->w, s->o, s->k, s->k, s->stride, s->pad, s->dil, s->bias ? " bias" : "");
    pc_init(pc, name, &op, seed);
    /* weights scaled by 1/sqrt(fan-in) so that y is O(1), like a network's */
    float sc = 1.0f / sqrtf((float)(s->c * s->k * s->k));
    test_random(pc->in[1], elems(op.in[1]), seed + 50, -sc, sc);
    pc_tol(pc, tol, tol);
    /* oneDNN splits dw's and db's sums over N*OH*OW by thread, for some shapes and counts */
    pc->din_by_threads = 0x6;
    /* linear in each input: rounding only (check_conv's bound, ~1e-4) */
    fd_tol(pc, 1e-2f, 1e-3, 1e-3);
}

/* N = 2, C 3..32, odd and even sizes 17..33. */
const struct conv_spec conv_specs[] = {
    /* n  c   h   w   o  k  s  p  d  bias */
    { 2, 16, 17, 19, 24, 3, 1, 1, 1, 1 }, /* 3x3, padding 1, bias */
    { 2, 16, 17, 19, 24, 3, 1, 1, 1, 0 }, /* the same without bias */
    { 2, 8, 33, 33, 16, 3, 2, 1, 1, 1 },  /* stride 2, odd size */
    { 2, 32, 21, 21, 32, 3, 1, 2, 2, 0 }, /* dilation 2, padding 2 (ASPP) */
    { 2, 24, 25, 23, 16, 3, 2, 2, 2, 1 }, /* stride 2 and dilation 2 */
    { 2, 32, 17, 17, 8, 1, 1, 0, 1, 0 },  /* 1x1 */
    { 2, 3, 33, 31, 16, 7, 2, 3, 1, 0 },  /* the 7x7 stem, stride 2 */
    { 2, 8, 18, 20, 8, 3, 1, 0, 1, 1 },   /* no padding, even size */
};
const size_t conv_spec_count = LEN(conv_specs);

static void conv_cases(struct pcase *pc, size_t i)
{
    if (i < conv_spec_count) {
        conv_case(pc, &conv_specs[i], 100 + 10 * i, TOL_CONV);
        return;
    }
    /* A network's first convolution: no dx wanted; dw and db still right. */
    conv_case(pc, &conv_specs[2], 200, TOL_CONV);
    pc->no_din = 1u << 0;
    name_add(pc, ", without dx");
}

/* ------------------------------------------------------------------ batchnorm */

void bn_case(struct pcase *pc, int n, int c, int h, int w, int training, uint64_t seed)
{
    struct tb_op op = new_op(TB_OP_BATCHNORM, 11, 5, 3);
    op.in[0] = op.out[0] = f32(n, c, h, w);
    for (int i = 1; i < 5; i++)
        op.in[i] = f32(1, c, 1, 1);
    op.out[1] = op.out[2] = f32(1, c, 1, 1);
    op.p.bn = (struct tb_batchnorm_params){ 1e-5f, 0.1f, training, 0 };
    char name[128];
    snprintf(name, sizeof name, "batchnorm %s %dx%dx%dx%d", training ? "training" : "inference", n, c, h, w);
    pc_init(pc, name, &op, seed);
    /* x: U(-1, 1) plus 0.1 per channel, so channels differ; gamma around 1, beta around
     * 0, running statistics plausible */
    float *x = pc->in[0];
    for (size_t i = 0; i < elems(op.in[0]); i++)
        x[i] += 0.1f * (float)(i / ((size_t)h * (size_t)w) % (size_t)c);
    test_random(pc->in[1], (size_t)c, seed + 11, 0.5f, 1.5f);
    test_random(pc->in[2], (size_t)c, seed + 12, -0.5f, 0.5f);
    test_random(pc->in[3], (size_t)c, seed + 13, -0.5f, 0.5f);
    test_random(pc->in[4], (size_t)c, seed + 14, 0.5f, 1.5f);
    pc_tol(pc, TOL_BN, TOL_BN);
    pc->din[1] = pc->din[2] = TOL_FSUM; /* dgamma, dbeta: sums over N*H*W */
    if (training)
        pc->in_after[3] = pc->in_after[4] = TOL_BN; /* the running statistics move */
    /* not linear, and every output of the channel moves: check_conv's atol 1e-3, rtol 1e-2 */
    fd_tol(pc, 1e-2f, 1e-3, 1e-2);
}

static void bn_cases(struct pcase *pc, size_t i)
{
    /* Training: y, save_mean, save_invstd, the running statistics (updated in place,
     * unbiased variance) after one and after two forwards, and dx, dgamma, dbeta. */
    static const int shapes[][4] = { { 2, 16, 17, 19 }, { 2, 32, 33, 33 }, { 4, 8, 9, 7 } };
    if (i < 6) {
        const int *s = shapes[i / 2];
        bn_case(pc, s[0], s[1], s[2], s[3], 1, 400 + 10 * (i / 2));
        pc->forwards = (int)(i % 2) + 1;
        name_add(pc, pc->forwards > 1 ? ", 2 forwards" : ", 1 forward");
        return;
    }
    /* Pixels of channels no block divides (NHWC on every path): 19, and 1036, more than
     * the 16-bit kernels convert at once. */
    if (i == 7) {
        bn_case(pc, 2, 19, 9, 11, 1, 460);
        return;
    }
    if (i == 8) {
        bn_case(pc, 1, 1036, 3, 2, 1, 470);
        return;
    }
    /* Inference: y from the running statistics, which stay as they are, and save_* are
     * left alone (still the junk they were filled with). */
    bn_case(pc, 2, 16, 17, 19, 0, 450);
    pc->backward = false;
    pc->keeps_out = 0x6;
    pc->fd.skip = "batch norm's backward is training only (trainbig/ops.h); check_cuda's batchnorm_inference_backward "
                  "tries cuda's where it has one";
}

/* ------------------------------------------------------------------ relu, sigmoid, add, mul */

static void relu_cases(struct pcase *pc, size_t i)
{
    struct tb_op op = new_op(TB_OP_RELU, 12, 1, 1);
    op.in[0] = op.out[0] = i == 0 ? f32(2, 16, 17, 19) : f32(2, 19, 17, 13);
    char name[128];
    snprintf(name, sizeof name, "relu %s", shape_str(op.in[0].shape));
    pc_init(pc, name, &op, i == 0 ? 500 : 1000);
    if (i == 0) {
        float *x = pc->in[0];
        for (size_t e = 0; e < elems(op.in[0]); e += 7)
            x[e] = 0.0f; /* relu'(0) = 0: y > 0 decides */
    }
    pc_tol(pc, TOL_EXACT, TOL_EXACT);
    /* linear pieces: the differences are exact up to the rounding of y */
    fd_tol(pc, 1e-3f, 5e-4, 1e-3);
    pc->fd.prep = fd_off_kink;
}

static void sigmoid_cases(struct pcase *pc, size_t i)
{
    struct tb_op op = new_op(TB_OP_SIGMOID, 13, 1, 1);
    op.in[0] = op.out[0] = i == 0 ? f32(2, 16, 17, 19) : f32(2, 19, 17, 13);
    char name[128];
    snprintf(name, sizeof name, "sigmoid %s", shape_str(op.in[0].shape));
    pc_init(pc, name, &op, i == 0 ? 510 : 1010);
    if (i == 0)
        pc_set(pc, 0, op_frand(elems(op.in[0]), 511, -8.0f, 8.0f));
    pc_tol(pc, TOL_TRANSCENDENTAL, TOL_TRANSCENDENTAL);
    /* an ulp of y (<= 6e-8) over 2 eps: 3e-5 */
    fd_tol(pc, 1e-3f, 2e-4, 1e-3);
}

static void add_cases(struct pcase *pc, size_t i)
{
    struct tb_op op = new_op(TB_OP_ADD, 14, 2, 1);
    op.in[0] = op.in[1] = op.out[0] = i == 0 ? f32(2, 24, 17, 33) : f32(2, 19, 17, 13);
    char name[128];
    snprintf(name, sizeof name, "add %s", shape_str(op.in[0].shape));
    pc_init(pc, name, &op, i == 0 ? 520 : 1020);
    pc_tol(pc, TOL_EXACT, TOL_EXACT); /* one rounding forward, copies backward */
    fd_tol(pc, 1e-2f, 1e-4, 1e-3);
}

/* g of x's shape, and g (N,1,H,W) broadcast over the channels (G-SCNN's gates). */
static void mul_cases(struct pcase *pc, size_t i)
{
    const int broadcast = (int)(i % 2), c = i < 2 ? 16 : 19, w = i < 2 ? 19 : 13;
    struct tb_op op = new_op(TB_OP_MUL, 15, 2, 1);
    op.in[0] = op.out[0] = f32(2, c, 17, w);
    op.in[1] = f32(2, broadcast ? 1 : c, 17, w);
    char name[128];
    snprintf(name, sizeof name, "%s %s", broadcast ? "mul broadcast (N,1,H,W)" : "mul (N,C,H,W)",
             shape_str(op.in[0].shape));
    pc_init(pc, name, &op, (i < 2 ? 530 : 1030) + (uint64_t)broadcast);
    pc->out[0] = TOL_EXACT;
    pc->din[0] = TOL_ULP;
    pc->din[1] = broadcast ? TOL_FSUM : TOL_ULP; /* dg sums dy * x over C */
}

/* ------------------------------------------------------------------ dropout */

static void dropout_case(struct pcase *pc, struct tb_shape s, int channelwise, int training, uint64_t step)
{
    struct tb_op op = new_op(TB_OP_DROPOUT, 16, 1, 2);
    op.in[0] = op.out[0] = f32(s.n, s.c, s.h, s.w);
    op.out[1] = channelwise ? u8(s.n, s.c, 1, 1) : u8(s.n, s.c, s.h, s.w);
    op.p.dropout = (struct tb_dropout_params){ 0.3f, channelwise, training, 1234 };
    char name[128];
    snprintf(name, sizeof name, "dropout %s %s step %llu, %s", channelwise ? "channelwise" : "elementwise",
             training ? "training" : "inference", (unsigned long long)step, shape_str(s));
    pc_init(pc, name, &op, 540);
    pc->step = step;
    pc->out[0] = training ? TOL_ULP : TOL_EXACT;
    pc->out[1] = TOL_EXACT; /* the masks: bit-identical (u8 compare) */
    pc->din[0] = training ? TOL_ULP : TOL_EXACT;
    if (!training)
        pc->keeps_out = 0x2; /* in inference the mask is not written */
    /* the mask is a function of the step, the same in every forward of the differences:
     * y is linear in x */
}

/* The masks are a pure function of (seed, step, op id, element): the same bits on both
 * backends at every step; in inference y = x and the mask is not written. */
static void dropout_cases(struct pcase *pc, size_t i)
{
    static const uint64_t steps[] = { 0, 1, 123456789 };
    if (i < 8) {
        const int channelwise = (int)(i / 4), j = (int)(i % 4);
        const struct tb_shape s = { 2, 32, 17, 19 };
        if (j < 3)
            dropout_case(pc, s, channelwise, 1, steps[j]);
        else
            dropout_case(pc, s, channelwise, 0, 5);
        return;
    }
    const struct tb_shape s = { 2, 19, 17, 13 };
    dropout_case(pc, s, (int)(i - 8), 1, 11);
}

/* ------------------------------------------------------------------ pooling */

static void maxpool_case(struct pcase *pc, const char *what, int n, int c, int h, int w, int k, int stride, int pad,
                         uint64_t seed)
{
    struct tb_op op = new_op(TB_OP_MAXPOOL, 17, 1, 1);
    op.in[0] = f32(n, c, h, w);
    op.out[0] = f32(n, c, (h + 2 * pad - k) / stride + 1, (w + 2 * pad - k) / stride + 1);
    op.p.pool = (struct tb_pool_params){ k, stride, pad };
    char name[128];
    snprintf(name, sizeof name, "maxpool %dx%d/%d pad %d, %s, %dx%dx%dx%d", k, k, stride, pad, what, n, c, h, w);
    pc_init(pc, name, &op, seed);
    pc->out[0] = TOL_EXACT; /* a maximum is exact */
    pc->din[0] = TOL_ULP;   /* each dx sums the dy of the windows whose first maximum it is */
    /* an ulp of |x| <= 5.5 (4.8e-7) over 2 eps, 2.4e-4, times up to 4 windows (3x3 stride
     * 2; 9 at stride 1 on 17x17 planes, where |x| <= 1.5: 6e-5 each) */
    fd_tol(pc, 1e-3f, 2e-3, 1e-3);
    pc->fd.prep = fd_distinct_planes;
}

/* Random values; values after a relu (half of them 0: every window in a zero region ties);
 * small integers (ties everywhere, and windows at the border whose values are all
 * negative: padding never wins). The gradient goes to the first maximum in row-major
 * window order: a backend that picks another one moves an O(1) dy. */
static void maxpool_cases(struct pcase *pc, size_t i)
{
    float *x;
    switch (i) {
    case 0:
        maxpool_case(pc, "random", 2, 16, 33, 33, 3, 2, 1, 600);
        break;
    case 1:
        maxpool_case(pc, "after relu", 2, 16, 17, 19, 3, 2, 1, 610);
        x = pc->in[0];
        for (size_t e = 0; e < elems(pc->op.in[0]); e++)
            x[e] = x[e] > 0.0f ? x[e] : 0.0f;
        break;
    case 2:
        maxpool_case(pc, "integers -3..1", 2, 8, 18, 21, 3, 2, 1, 620);
        x = pc->in[0];
        for (size_t e = 0; e < elems(pc->op.in[0]); e++)
            x[e] = floorf(2.5f * x[e] - 0.5f); /* [-1, 1) -> -3..1 */
        break;
    case 3:
        maxpool_case(pc, "integers 0..2, stride 1", 2, 8, 17, 17, 3, 1, 1, 630);
        x = pc->in[0];
        for (size_t e = 0; e < elems(pc->op.in[0]); e++)
            x[e] = floorf(1.5f * x[e] + 1.5f); /* 0..2 */
        break;
    case 4:
        maxpool_case(pc, "2x2 no padding", 2, 8, 17, 20, 2, 2, 0, 640);
        break;
    case 5:
        maxpool_case(pc, "random", 2, 19, 17, 13, 3, 2, 1, 1050);
        break;
    default:
        maxpool_case(pc, "random, stride 1", 2, 19, 17, 13, 3, 1, 1, 1051);
        break;
    }
}

/* the last: 150 channels, more than one block of the sums' channels */
static const int avgpool_shapes[][4] = { { 2, 32, 17, 19 }, { 2, 8, 33, 33 }, { 3, 5, 1, 1 }, { 3, 150, 17, 13 } };

static void avgpool_cases(struct pcase *pc, size_t i)
{
    const int *s = avgpool_shapes[i];
    struct tb_op op = new_op(TB_OP_GLOBAL_AVGPOOL, 18, 1, 1);
    op.in[0] = f32(s[0], s[1], s[2], s[3]);
    op.out[0] = f32(s[0], s[1], 1, 1);
    char name[128];
    snprintf(name, sizeof name, "global avgpool %s", shape_str(op.in[0].shape));
    pc_init(pc, name, &op, i < 3 ? 650 + i : 1060);
    pc->out[0] = TOL_FSUM;
    pc->din[0] = TOL_ULP; /* dy / HW */
    fd_tol(pc, 1e-2f, 1e-4, 1e-3);
}

/* ------------------------------------------------------------------ resize, concat */

/* {C, H, W, OH, OW} and align_corners */
static const int resize_specs[][6] = {
    { 8, 17, 19, 33, 37, 0 },  { 8, 17, 19, 33, 37, 1 }, /* up, odd factors */
    { 8, 16, 16, 32, 32, 0 },  { 8, 16, 16, 32, 32, 1 }, /* up x2 */
    { 8, 33, 31, 17, 9, 0 },   { 8, 33, 31, 17, 9, 1 },  /* down */
    { 8, 33, 33, 32, 34, 0 },  { 8, 33, 33, 32, 34, 1 }, /* nearly the same size, both ways */
    { 19, 17, 13, 40, 29, 0 }, { 19, 17, 13, 40, 29, 1 }, { 19, 40, 29, 17, 13, 0 }, { 19, 40, 29, 9, 5, 1 },
};

static void resize_cases(struct pcase *pc, size_t i)
{
    const int *c = resize_specs[i];
    struct tb_op op = new_op(TB_OP_RESIZE, 19, 1, 1);
    op.in[0] = f32(2, c[0], c[1], c[2]);
    op.out[0] = f32(2, c[0], c[3], c[4]);
    op.p.resize = (struct tb_resize_params){ c[3], c[4], c[5] };
    char name[128];
    snprintf(name, sizeof name, "resize %dx%d -> %dx%d align_corners %d, %d channels", c[1], c[2], c[3], c[4], c[5],
             c[0]);
    pc_init(pc, name, &op, i < 8 ? 700 + i : 1070 + i);
    pc_tol(pc, TOL_RESIZE, TOL_RESIZE);
}

/* the inputs' channels (0: no third input); the last on 17x13, the others on 17x23 */
static const int concat_channels[][3] = { { 8, 16, 0 }, { 5, 1, 13 }, { 5, 1, 13 } };

static void concat_cases(struct pcase *pc, size_t i)
{
    const int *ch = concat_channels[i];
    const uint32_t nin = ch[2] ? 3 : 2;
    const int w = i < 2 ? 23 : 13;
    struct tb_op op = new_op(TB_OP_CONCAT, 20 + (uint32_t)(i > 0), nin, 1);
    int c = 0;
    for (uint32_t k = 0; k < nin; k++) {
        op.in[k] = f32(2, ch[k], 17, w);
        c += ch[k];
    }
    op.out[0] = f32(2, c, 17, w);
    char name[128];
    snprintf(name, sizeof name, "concat of %u, %s", nin, shape_str(op.out[0].shape));
    pc_init(pc, name, &op, i < 2 ? 750 + 10 * i : 1080);
    pc_tol(pc, TOL_EXACT, TOL_EXACT); /* copies both ways */
    fd_tol(pc, 1e-2f, 1e-4, 1e-3);
}

/* ------------------------------------------------------------------ losses and labels */

static void ce_case(struct pcase *pc, int W, int weighted, int per_image, uint64_t seed)
{
    const int N = 3, K = 19, H = 17;
    struct tb_op op = new_op(TB_OP_SOFTMAX_CE, 42, weighted ? 3 : 2, 1);
    op.in[0] = f32(N, K, H, W);
    op.in[1] = u8(N, 1, H, W);
    if (weighted)
        op.in[2] = f32(N, K, 1, 1);
    op.out[0] = f32(1, 1, 1, 1);
    op.p.ce = (struct tb_ce_params){ 255, weighted, per_image };
    char name[128];
    snprintf(name, sizeof name, "softmax_ce %s, %s, %s", weighted ? "weighted" : "unweighted",
             per_image ? "per image" : "over the batch", shape_str(op.in[0].shape));
    pc_init(pc, name, &op, seed);
    pc_set(pc, 0, op_frand(elems(op.in[0]), seed + 1, -4.0f, 4.0f));
    /* about 1 in 5 pixels ignored, and image 2 has no counted pixel (it adds 0) */
    uint8_t *l = op_labels(elems(op.in[1]), K, 5, seed + 2);
    memset(l + 2 * (size_t)H * W, 255, (size_t)H * W);
    pc_set(pc, 1, l);
    if (weighted)
        pc_set(pc, 2, op_frand(elems(op.in[2]), seed + 3, 0.25f, 2.0f));
    ((float *)pc->dy[0])[0] = 0.7f; /* dloss */
    pc->out[0] = TOL_LOSS;
    pc->din[0] = TOL_LOSS_GRAD;
    /* an ulp of the float loss (<= 5e-7) over 2 eps = 2.5e-5, against gradients of ~1e-3 */
    fd_tol(pc, 1e-2f, 1e-4, 1e-2);
}

static void ce_cases(struct pcase *pc, size_t i)
{
    const int weighted = (int)(i % 4 / 2), per_image = (int)(i % 2);
    if (i < 4)
        ce_case(pc, 23, weighted, per_image, 800 + 10 * (uint64_t)(2 * weighted + per_image));
    else
        ce_case(pc, 13, weighted, per_image, 1090 + 10 * (uint64_t)(2 * weighted + per_image));
}

static const int bce_shapes[][3] = { { 2, 33, 33 }, { 3, 17, 19 }, { 3, 17, 13 } };

static void bce_cases(struct pcase *pc, size_t i)
{
    const int *s3 = bce_shapes[i];
    const uint64_t seed = i < 2 ? 870 + i : 1130;
    struct tb_op op = new_op(TB_OP_BCE_LOGITS, 43, 2, 1);
    op.in[0] = f32(s3[0], 1, s3[1], s3[2]);
    op.in[1] = u8(s3[0], 1, s3[1], s3[2]);
    op.out[0] = f32(1, 1, 1, 1);
    char name[128];
    snprintf(name, sizeof name, "bce_logits %s", shape_str(op.in[0].shape));
    pc_init(pc, name, &op, seed);
    pc_set(pc, 0, op_frand(elems(op.in[0]), seed + 1, -6.0f, 6.0f));
    /* edges are rare: ~1 in 6 positive; 255 and any other value (7) are ignored */
    uint8_t *t = pc->in[1];
    uint64_t s = seed + 10;
    for (size_t e = 0; e < elems(op.in[1]); e++) {
        uint64_t r = op_next_rand(&s) % 24;
        t[e] = r < 4 ? 1 : r == 4 ? 255 : r == 5 ? 7 : 0;
    }
    ((float *)pc->dy[0])[0] = 1.3f;
    pc->out[0] = TOL_LOSS;
    pc->din[0] = TOL_LOSS_GRAD;
    /* the loss is ~0.3: an ulp (3e-8) over 2 eps = 1.5e-6, against gradients of ~1e-4 */
    fd_tol(pc, 1e-2f, 2e-5, 1e-2);
}

void class_weights_case(struct pcase *pc)
{
    const int N = 3, K = 19, H = 17, W = 23;
    struct tb_op op = new_op(TB_OP_CLASS_WEIGHTS, 48, 1, 1);
    op.in[0] = u8(N, 1, H, W);
    op.out[0] = f32(N, K, 1, 1);
    op.p.label = (struct tb_label_params){ 255, 0.0f, K };
    pc_init(pc, "class_weights", &op, 900);
    /* classes 0..11 only (12..18 absent: weight 1), 1 in 6 ignored; image 1 all ignored,
     * image 2 one class (2 - 1 = 1) */
    uint8_t *l = op_labels(elems(op.in[0]), 12, 6, 901);
    memset(l + (size_t)H * W, 255, (size_t)H * W);
    memset(l + 2 * (size_t)H * W, 4, (size_t)H * W);
    pc_set(pc, 0, l);
    pc->out[0] = TOL_CLASS_WEIGHTS;
}

static void class_weights_cases(struct pcase *pc, size_t i)
{
    (void)i;
    class_weights_case(pc);
}

static void mask_labels_cases(struct pcase *pc, size_t i)
{
    (void)i;
    const int N = 2, H = 33, W = 31;
    struct tb_op op = new_op(TB_OP_MASK_LABELS, 49, 2, 1);
    op.in[0] = u8(N, 1, H, W);
    op.in[1] = f32(N, 1, H, W);
    op.out[0] = u8(N, 1, H, W);
    op.p.label = (struct tb_label_params){ 255, 0.8f, 0 };
    pc_init(pc, "mask_labels", &op, 950);
    pc_set(pc, 0, op_labels(elems(op.in[0]), 19, 7, 951));
    float *x = op_frand(elems(op.in[1]), 952, 0.0f, 1.0f);
    for (size_t e = 0; e < elems(op.in[1]); e += 9)
        x[e] = 0.8f; /* on the threshold: not above it */
    pc_set(pc, 1, x);
    pc->out[0] = TOL_EXACT;
}

/* The dual-task regulariser on 5 classes (NHWC on the cpu) and on 16 (channel-blocked
 * there), about 1 in 5 pixels ignored, at two steps (other Gumbel noise); one image of 48
 * and 40 rows, which the cpu cuts into strips by its thread count. */
static const int dual_specs[][5] = { /* n, k, h, w, step */
                                     { 2, 5, 9, 11, 0 },
                                     { 2, 5, 9, 11, 7 },
                                     { 1, 16, 8, 13, 3 },
                                     { 1, 5, 48, 9, 5 },
                                     { 1, 16, 40, 6, 2 }
};

static void dual_cases(struct pcase *pc, size_t i)
{
    const int *d = dual_specs[i];
    const uint64_t seed = 1200 + 10 * i;
    struct tb_op op = new_op(TB_OP_DUAL_TASK, 50, 2, 2);
    op.in[0] = f32(d[0], d[1], d[2], d[3]);
    op.in[1] = u8(d[0], 1, d[2], d[3]);
    op.out[0] = f32(1, 1, 1, 1);
    op.out[1] = op.in[0];
    op.p.dual = (struct tb_dual_params){ 0.5f, 255, 0 };
    char name[128];
    snprintf(name, sizeof name, "dual_task %s, step %d", shape_str(op.in[0].shape), d[4]);
    pc_init(pc, name, &op, seed);
    pc->step = (uint64_t)d[4];
    pc_set(pc, 0, op_frand(elems(op.in[0]), seed + 1, -2.0f, 2.0f));
    pc_set(pc, 1, op_labels(elems(op.in[1]), d[1], 5, seed + 2));
    ((float *)pc->dy[0])[0] = 0.9f; /* dloss */
    /* the sample: expf and logf of the noise (a few ulps); the loss: per-element float terms
     * summed in double; the gradient: a chain of float sums of up to 81 smoothing taps */
    pc->out[0] = TOL_LOSS;
    pc->out[1] = TOL_TRANSCENDENTAL;
    pc->din[0] = (struct tol){ 1e-4, 1e-4 };
    /* the loss is ~0.1: an ulp (7e-9) over 2 eps = 3.5e-7, against gradients of ~1e-4; the
     * L1 and the maximum have kinks, and a difference quotient that straddles one is off
     * by up to ~1e-5 (check_ops compares every element with a sharper reference) */
    fd_tol(pc, 1e-2f, 1.5e-5, 2e-2);
}

/* ------------------------------------------------------------------ cast */

/* Between every pair of dtypes the graph builder makes (f32 to and from each 16-bit one)
 * and between the 16-bit ones, blocked on the CPU's vector paths (16 channels) and not. */
static const struct {
    enum tb_dtype from, to;
    int n, c, h, w;
} cast_specs[] = {
    { TB_F32, TB_BF16, 2, 16, 17, 13 }, { TB_BF16, TB_F32, 2, 5, 17, 13 }, { TB_F32, TB_F16, 1, 19, 9, 11 },
    { TB_F16, TB_F32, 2, 16, 9, 7 },    { TB_F16, TB_BF16, 2, 16, 9, 7 },
};

static void cast_cases(struct pcase *pc, size_t i)
{
    struct tb_op op = new_op(TB_OP_CAST, 60, 1, 1);
    op.in[0] = test_desc(cast_specs[i].from, cast_specs[i].n, cast_specs[i].c, cast_specs[i].h, cast_specs[i].w);
    op.out[0] = (struct tb_tensor_desc){ cast_specs[i].to, op.in[0].shape };
    op.p.cast.dtype = cast_specs[i].to;
    char name[128];
    snprintf(name, sizeof name, "cast %s to %s %s", tb_dtype_name(cast_specs[i].from), tb_dtype_name(cast_specs[i].to),
             shape_str(op.in[0].shape));
    pc_init(pc, name, &op, 1300 + 10 * i);
    /* a value per element, rounded as trainbig/half.h does, on every backend */
    pc_tol(pc, TOL_EXACT, TOL_EXACT);
    pc->fd.skip = "a cast's forward is a step function at 16 bits; check_ops compares its gradient with dy converted";
}

/* ------------------------------------------------------------------ the list */

/* Per kind: the shapes check_cuda compared on both backends, then those check_ops ran on
 * 1, 2 and 3 threads where it ran the kind (19 channels on 17x13 and the like). */
static const struct {
    void (*make)(struct pcase *pc, size_t i);
    size_t count;
} families[] = {
    { conv_cases, LEN(conv_specs) + 1 }, /* + one without dx */
    { bn_cases, 9 },                     /* 3 shapes x 1 and 2 forwards, inference, 2 NHWC */
    { relu_cases, 2 },
    { sigmoid_cases, 2 },
    { add_cases, 2 },
    { mul_cases, 4 },      /* same shape, broadcast; twice */
    { dropout_cases, 10 }, /* 2 x (3 steps, inference); 2 on 19 channels */
    { maxpool_cases, 7 },
    { avgpool_cases, LEN(avgpool_shapes) },
    { resize_cases, LEN(resize_specs) },
    { concat_cases, LEN(concat_channels) },
    { ce_cases, 8 }, /* weighted x per_image, twice */
    { bce_cases, LEN(bce_shapes) },
    { class_weights_cases, 1 },
    { mask_labels_cases, 1 },
    { dual_cases, LEN(dual_specs) },
    { cast_cases, LEN(cast_specs) },
};

size_t op_case_count(void)
{
    size_t n = 0;
    for (size_t f = 0; f < LEN(families); f++)
        n += families[f].count;
    return n;
}

void op_case_make(size_t k, struct pcase *pc)
{
    size_t i = k;
    for (size_t f = 0; f < LEN(families); f++) {
        if (i < families[f].count) {
            families[f].make(pc, i);
            return;
        }
        i -= families[f].count;
    }
    ck_abort_msg("op case %zu: past the end of the list (%zu cases)", k, op_case_count());
}
