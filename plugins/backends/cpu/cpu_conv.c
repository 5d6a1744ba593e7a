/* backends/cpu/cpu_conv.c: TB_OP_CONV2D with oneDNN (C API): forward, backward-data,
 * backward-weights and the bias gradient.
 *
 * Tensors arrive in the backend's own layouts (cpu_shared.h): activations with channel
 * counts that are multiples of the ISA's block are nChw16c (AVX-512) or nChw8c (below),
 * which is what oneDNN's direct convolutions choose for themselves on that ISA, so most
 * passes run on the tensors as they are. Each pass (forward, backward-data,
 * backward-weights) is set up once, in prepare, in the first of these ways oneDNN gives a
 * direct kernel (JIT, not its im2col+GEMM or reference code):
 *
 *   stored:  the primitive on the stored layouts of x and y;
 *   phases:  dilated stride-1 "same" convolutions on blocked tensors, as a dense convolution
 *            over the N*dh*dw phase sub-images (space-to-batch): output pixel
 *            (dh*Y + py, dw*X + px) reads only input pixels of phase (py, px), so each phase
 *            is a dense convolution (no dilation, padding (k-1)/2) over a ceil(H/dh) x
 *            ceil(W/dw) image zero-filled past the edge (those zeros are the convolution's
 *            own padding; zero output-gradient rows add nothing). oneDNN 2.6's AVX2 kernels
 *            refuse large dilations in forward and backward-weights (GEMM, or for blocked
 *            backward-weights its reference code, thousands of times slower), so this is
 *            the AVX2 path for G-SCNN's ASPP; backward-weights over the phase batch sums
 *            the phases by itself;
 *   any:     the primitive with format_tag any for x and y: oneDNN's own choice, with x, y
 *            or their gradients reordered into it through scratch where it differs.
 *
 * and, where none is direct, the stored layouts on GEMM, or oneDNN's choice (never its
 * reference code when GEMM exists). bench/ops prints which way each pass runs.
 *
 * A dilated "same" convolution whose dilation is at least the map's size (ASPP's large
 * rates on small maps) reads nothing but padding through its off-centre taps: every
 * output is the centre tap's 1x1 convolution, exactly (the other taps add zeros). It runs
 * as that 1x1 convolution on the centre slice of the weights, and its weight gradient is
 * zero but for the centre (the quickstart G-SCNN's ASPP, rates 24 and 36 on 16x16 maps,
 * has two such convolutions).
 *
 * Weights follow the storage rule too (OIhw as aBcdBb when I is a multiple of the block,
 * else OHWI). No fast kernel takes them as they are, so each primitive takes its own
 * layout (format_tag any; OIhw16i16o and the like): they are reordered into scratch before
 * a pass runs and the gradient back after. A weight is N*OH*OW times smaller than the work
 * done with it, so these cost well under 1%.
 *
 * Every reorder (activations, weights, phase gathers and scatters) is counted in
 * cpu->reorders, which bench/step prints per step: on a tensor layout that oneDNN likes,
 * the activation count is zero.
 *
 * The primitives run in user-managed scratchpad mode: scratchpads, reordered weights and
 * moved activations are carved out of the backend's shared scratch (tb_cpu_scratch), so that
 * memory is counted as device memory and nothing is allocated per call.
 *
 * Determinism: the direct and GEMM convolutions (no Winograd) reduce in a fixed order for a
 * given thread count and shape, and reorders only move data, so runs are bit-identical
 * (tests/check_conv.c checks); results may differ in the last bits between thread counts
 * and between ISAs. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "cpu_conv_internal.h"

/* Byte offsets inside one scratch buffer, each rounded up to 64 bytes (the scratch is
 * 64-byte aligned, oneDNN wants at least that for its buffers). */
static size_t carve(size_t *total, size_t bytes)
{
    size_t at = *total;
    *total += (bytes + 63) / 64 * 64;
    return at;
}

static size_t md_bytes(const dnnl_memory_desc_t *md)
{
    return dnnl_memory_desc_get_size(md);
}

static size_t max_size(size_t a, size_t b)
{
    return a > b ? a : b;
}

/* Runs pr with args (plus its scratchpad at spad) and waits for it. */
static int run(const struct conv_state *s, struct tb_cpu *cpu, const struct prim *pr, int nargs, dnnl_exec_arg_t *args,
               void *spad, const char *what, struct tb_err *err)
{
    dnnl_status_t st = dnnl_memory_set_data_handle(pr->spad_mem, spad);
    if (st == dnnl_success) {
        args[nargs].arg = DNNL_ARG_SCRATCHPAD;
        args[nargs].memory = pr->spad_mem;
        st = dnnl_primitive_execute(pr->p, cpu->dnnl_stream, nargs + 1, args);
    }
    if (st == dnnl_success)
        st = dnnl_stream_wait(cpu->dnnl_stream);
    if (st != dnnl_success)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (conv2d): oneDNN: %s failed: %s", s->op_id, what,
                          tb_cpu_conv_status(st));
    return TB_OK;
}

static int set_handle(const struct conv_state *s, dnnl_memory_t m, void *data, struct tb_err *err)
{
    dnnl_status_t st = dnnl_memory_set_data_handle(m, data);
    if (st != dnnl_success)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (conv2d): oneDNN: setting a memory handle failed: %s", s->op_id,
                          tb_cpu_conv_status(st));
    return TB_OK;
}

/* Reorders `from` into `to` with pr (a no-op when pr has no primitive), counting it. */
static int reorder(const struct conv_state *s, struct tb_cpu *cpu, const struct prim *pr, dnnl_memory_t from,
                   dnnl_memory_t to, size_t bytes, bool weights, void *spad, const char *what, struct tb_err *err)
{
    if (!pr->p)
        return TB_OK;
    if (weights) {
        s->counts->weights++;
        s->counts->weight_bytes += bytes;
    } else {
        s->counts->acts++;
        s->counts->act_bytes += bytes;
    }
    dnnl_exec_arg_t args[3] = { { DNNL_ARG_FROM, from }, { DNNL_ARG_TO, to } };
    return run(s, cpu, pr, 2, args, spad, what, err);
}

/* Phases (see the top of the file): a (blocked, n images of c channels, H x W) into ap, the
 * phase batch: n*dh*dw images of c x ph_h x ph_w in the same block, phase image
 * (i*dh + py)*dw + px holding the pixels (dh*Y + py, dw*X + px) of image i, and zeros where
 * those fall past the edge. ap is scratch: every element is written. */
static void phase_gather(const struct conv_state *s, const char *a, char *ap, int n, int c)
{
    const size_t es = s->es, B = (size_t)s->blk, H = (size_t)s->x.h, W = (size_t)s->x.w, CB = (size_t)c / B;
    const size_t dh = (size_t)s->ph_dh, dw = (size_t)s->ph_dw, Hp = (size_t)s->ph_h, Wp = (size_t)s->ph_w;
    const long rows = (long)((size_t)n * dh * dw * CB * Hp);
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const size_t hp = (size_t)r % Hp, t = (size_t)r / Hp, cb = t % CB, nn = t / CB;
        const size_t px = nn % dw, py = nn / dw % dh, i = nn / (dw * dh), h = hp * dh + py;
        char *dst = ap + (size_t)r * Wp * B * es;
        if (h >= H) {
            memset(dst, 0, Wp * B * es);
            continue;
        }
        const char *src = a + (((i * CB + cb) * H + h) * W + px) * B * es;
        size_t wp = 0;
        for (; wp * dw + px < W; wp++)
            memcpy(dst + wp * B * es, src + wp * dw * B * es, B * es);
        if (wp < Wp)
            memset(dst + wp * B * es, 0, (Wp - wp) * B * es);
    }
}

/* The inverse of phase_gather, for the pixels inside the image. */
static void phase_scatter(const struct conv_state *s, const char *ap, char *a, int n, int c)
{
    const size_t es = s->es, B = (size_t)s->blk, H = (size_t)s->x.h, W = (size_t)s->x.w, CB = (size_t)c / B;
    const size_t dh = (size_t)s->ph_dh, dw = (size_t)s->ph_dw, Hp = (size_t)s->ph_h, Wp = (size_t)s->ph_w;
    const long rows = (long)((size_t)n * CB * H);
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const size_t h = (size_t)r % H, t = (size_t)r / H, cb = t % CB, i = t / CB, py = h % dh, hp = h / dh;
        char *dst = a + (size_t)r * W * B * es;
        for (size_t w = 0; w < W; w++) {
            const size_t nn = (i * dh + py) * dw + w % dw;
            memcpy(dst + w * B * es, ap + (((nn * CB + cb) * Hp + hp) * Wp + w / dw) * B * es, B * es);
        }
    }
}

/* Scratch for one pass after `base` bytes: [weights in its layout (forward and
 * backward-data; backward-weights places its gradient itself)][a moved][b moved]
 * [scratchpad], each slot present only when needed. */
struct slots {
    size_t w, a, b, spad, total;
};

static struct slots pass_slots(const struct pass *ps, size_t base, bool weights)
{
    struct slots sl = { 0, 0, 0, 0, base };
    if (weights && ps->w_reorder.p)
        sl.w = carve(&sl.total, md_bytes(&ps->w_md));
    if (ps->a.moved)
        sl.a = carve(&sl.total, md_bytes(&ps->a.md));
    if (ps->b.moved)
        sl.b = carve(&sl.total, md_bytes(&ps->b.md));
    size_t spad = max_size(md_bytes(&ps->p.spad), md_bytes(&ps->w_reorder.spad));
    spad = max_size(spad, max_size(md_bytes(&ps->a.to.spad), md_bytes(&ps->a.from.spad)));
    spad = max_size(spad, max_size(md_bytes(&ps->b.to.spad), md_bytes(&ps->b.from.spad)));
    sl.spad = carve(&sl.total, spad);
    return sl;
}

/* Brings an input operand into the layout its pass takes: the tensor itself, a reorder
 * into scratch, or its phases. `stored` describes the tensor (x_mem or y_mem). */
static int operand_in(struct conv_state *s, struct tb_cpu *cpu, struct operand *o, dnnl_memory_t stored, void *data,
                      char *slot, int channels, int images, char *spad, struct tb_err *err)
{
    int rc;
    if (!o->moved)
        return set_handle(s, o->mem, data, err);
    if ((rc = set_handle(s, o->mem, slot, err)))
        return rc;
    if (!o->to.p) { /* phases */
        phase_gather(s, data, slot, images, channels);
        s->counts->acts++;
        s->counts->act_bytes += md_bytes(&o->md);
        return TB_OK;
    }
    if ((rc = set_handle(s, stored, data, err)))
        return rc;
    return reorder(s, cpu, &o->to, stored, o->mem, md_bytes(&o->md), false, spad, "reorder in", err);
}

/* After a pass wrote an output operand in scratch: back into the tensor. */
static int operand_out(struct conv_state *s, struct tb_cpu *cpu, struct operand *o, dnnl_memory_t stored, void *data,
                       char *slot, int channels, int images, char *spad, struct tb_err *err)
{
    if (!o->moved)
        return TB_OK;
    if (!o->from.p) {
        phase_scatter(s, slot, data, images, channels);
        s->counts->acts++;
        s->counts->act_bytes += md_bytes(&o->md);
        return TB_OK;
    }
    int rc = set_handle(s, stored, data, err);
    if (rc)
        return rc;
    return reorder(s, cpu, &o->from, o->mem, stored, md_bytes(&o->md), false, spad, "reorder out", err);
}

/* The weights (w, stored) as pass ps takes them: as they are, or reordered into slot. */
static int weights_in(struct conv_state *s, struct tb_cpu *cpu, struct pass *ps, void *w, char *slot, char *spad,
                      struct tb_err *err)
{
    int rc;
    if ((rc = set_handle(s, s->w_user, w, err)) || (rc = set_handle(s, ps->w_mem, ps->w_reorder.p ? slot : w, err)))
        return rc;
    return reorder(s, cpu, &ps->w_reorder, s->w_user, ps->w_mem, md_bytes(&ps->w_md), true, spad, "weights reorder",
                   err);
}

static int conv_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                        const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)op;
    (void)step;
    struct conv_state *s = state;
    struct pass *ps = &s->pass[FWD];
    const struct slots sl = pass_slots(ps, 0, true);
    char *scratch = tb_cpu_scratch(cpu, sl.total, err);
    if (!scratch)
        return tb_err_prefix(err, "op %u (conv2d)", s->op_id);
    char *spad = scratch + sl.spad;
    int rc;
    if ((rc = weights_in(s, cpu, ps, in[1].data, scratch + sl.w, spad, err)) ||
        (s->has_bias && (rc = set_handle(s, s->bias, in[2].data, err))))
        return rc;
    if ((rc = operand_in(s, cpu, &ps->a, s->x_mem, in[0].data, scratch + sl.a, s->x.c, s->x.n, spad, err)))
        return rc;
    if ((rc = set_handle(s, ps->b.mem, ps->b.moved ? (void *)(scratch + sl.b) : out[0].data, err)))
        return rc;
    dnnl_exec_arg_t args[5] = { { DNNL_ARG_SRC, ps->a.mem },
                                { DNNL_ARG_WEIGHTS, ps->w_mem },
                                { DNNL_ARG_DST, ps->b.mem } };
    int nargs = 3;
    if (s->has_bias)
        args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, s->bias };
    if ((rc = run(s, cpu, &ps->p, nargs, args, spad, "forward", err)))
        return rc;
    return operand_out(s, cpu, &ps->b, s->y_mem, out[0].data, scratch + sl.b, s->y.c, s->y.n, spad, err);
}

static int conv_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                         const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                         struct tb_err *err)
{
    (void)out;
    struct conv_state *s = state;
    const bool want_dx = din[0].data != NULL;
    const bool want_dw = din[1].data != NULL;
    const bool want_db = s->has_bias && din[2].data != NULL;
    if (!want_dx && !want_dw && !want_db)
        return TB_OK;
    if (!dout[0].data)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (conv2d): backward without an output gradient", s->op_id);
    int rc;
    if (want_dw || want_db) {
        /* Scratch: [weight gradient in oneDNN's layout, or a sink when only the bias
         * gradient is wanted][bias-gradient sink][the pass's slots]. */
        struct pass *ps = &s->pass[BWD_WEIGHTS];
        const bool dw_in_scratch = ps->w_reorder.p || !want_dw;
        const bool db_sink = s->has_bias && !want_db;
        size_t total = 0;
        const size_t dw_at = dw_in_scratch ? carve(&total, md_bytes(&ps->w_md)) : 0;
        const size_t db_at = db_sink ? carve(&total, (size_t)op->in[1].shape.n * s->es) : 0;
        const struct slots sl = pass_slots(ps, total, false);
        char *scratch = tb_cpu_scratch(cpu, sl.total, err);
        if (!scratch)
            return tb_err_prefix(err, "op %u (conv2d)", s->op_id);
        char *spad = scratch + sl.spad;
        if ((rc = set_handle(s, ps->w_mem, dw_in_scratch ? (void *)(scratch + dw_at) : din[1].data, err)))
            return rc;
        if ((rc = operand_in(s, cpu, &ps->a, s->x_mem, in[0].data, scratch + sl.a, s->x.c, s->x.n, spad, err)) ||
            (rc = operand_in(s, cpu, &ps->b, s->y_mem, dout[0].data, scratch + sl.b, s->y.c, s->y.n, spad, err)))
            return rc;
        dnnl_exec_arg_t args[5] = { { DNNL_ARG_SRC, ps->a.mem },
                                    { DNNL_ARG_DIFF_DST, ps->b.mem },
                                    { DNNL_ARG_DIFF_WEIGHTS, ps->w_mem } };
        int nargs = 3;
        if (s->has_bias) {
            if ((rc = set_handle(s, s->bias, db_sink ? (void *)(scratch + db_at) : din[2].data, err)))
                return rc;
            args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_BIAS, s->bias };
        }
        if ((rc = run(s, cpu, &ps->p, nargs, args, spad, "backward-weights", err)))
            return rc;
        if (want_dw && ps->w_reorder.p) {
            if (s->centre) /* the off-centre taps' gradient: zero */
                memset(din[1].data, 0, s->w_bytes);
            if ((rc = set_handle(s, s->w_user, din[1].data, err)))
                return rc;
            if ((rc = reorder(s, cpu, &ps->w_reorder, ps->w_mem, s->w_user, md_bytes(&ps->w_md), true, spad,
                              "weight-gradient reorder", err)))
                return rc;
        }
    }
    if (!want_dx)
        return TB_OK;
    struct pass *ps = &s->pass[BWD_DATA];
    const struct slots sl = pass_slots(ps, 0, true);
    char *scratch = tb_cpu_scratch(cpu, sl.total, err);
    if (!scratch)
        return tb_err_prefix(err, "op %u (conv2d)", s->op_id);
    char *spad = scratch + sl.spad;
    if ((rc = weights_in(s, cpu, ps, in[1].data, scratch + sl.w, spad, err)))
        return rc;
    if ((rc = operand_in(s, cpu, &ps->a, s->y_mem, dout[0].data, scratch + sl.a, s->y.c, s->y.n, spad, err)))
        return rc;
    if ((rc = set_handle(s, ps->b.mem, ps->b.moved ? (void *)(scratch + sl.b) : din[0].data, err)))
        return rc;
    dnnl_exec_arg_t args[4] = { { DNNL_ARG_DIFF_DST, ps->a.mem },
                                { DNNL_ARG_WEIGHTS, ps->w_mem },
                                { DNNL_ARG_DIFF_SRC, ps->b.mem } };
    if ((rc = run(s, cpu, &ps->p, 3, args, spad, "backward-data", err)))
        return rc;
    return operand_out(s, cpu, &ps->b, s->x_mem, din[0].data, scratch + sl.b, s->x.c, s->x.n, spad, err);
}

/* 16-bit too, where oneDNN has a kernel for it on this path (else prepare says widen). */
const struct tb_cpu_kernel tb_cpu_conv2d_kernel = {
    .prepare = tb_cpu_conv_prepare,
    .release = tb_cpu_conv_release,
    .forward = conv_forward,
    .backward = conv_backward,
    .dtypes = 1u << TB_BF16 | 1u << TB_F16,
};
