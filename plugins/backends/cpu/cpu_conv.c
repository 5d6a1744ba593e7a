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
 * reference code when GEMM exists). Measured with bench/ops (2 threads, AVX-512 EPYC, peak
 * ~445 GFLOP/s by an FMA loop): on nChw16c every bench shape is direct, 3x3 64->64
 * fwd/bwd-data/bwd-weights 422/415/347 GFLOP/s, against 199/196/167 for the former NHWC
 * storage with nChw8c copies around each pass.
 *
 * A dilated "same" convolution whose dilation is at least the map's size (ASPP's large
 * rates on small maps) reads nothing but padding through its off-centre taps: every
 * output is the centre tap's 1x1 convolution, exactly (the other taps add zeros). It runs
 * as that 1x1 convolution on the centre slice of the weights, and its weight gradient is
 * zero but for the centre. In the quickstart G-SCNN (16x16 maps, rates 24 and 36) those
 * two convolutions' backward took 63 of a 254 ms step before.
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
#include <oneapi/dnnl/dnnl_debug.h>

#include "cpu_shared.h"

/* One primitive and what running it needs. */
struct prim {
    dnnl_primitive_t p;      /* NULL when not needed (e.g. no reorder) */
    dnnl_memory_desc_t spad; /* its scratchpad (user mode) */
    dnnl_memory_t spad_mem;  /* a memory object for it, handle set per run */
};

enum pass_kind { FWD, BWD_DATA, BWD_WEIGHTS, PASSES };
enum mode { STORED, PHASES, ANY };
static const char *const pass_names[PASSES] = { "forward", "backward-data", "backward-weights" };

/* An activation a pass reads or writes: in the layout the primitive takes (md), which is
 * the stored one unless the pass runs in ANY mode and oneDNN chose another: then it is
 * `moved`, reordered through scratch (to: stored -> md before, from: md -> stored after). */
struct operand {
    dnnl_memory_desc_t md;
    bool moved;
    struct prim to, from;
    dnnl_memory_t mem; /* describes md; handle: the tensor, or scratch when moved */
};

struct pass {
    struct prim p;
    enum mode mode;
    /* forward: src (x), dst (y); backward-data: diff_dst, diff_src; backward-weights: src,
     * diff_dst */
    struct operand a, b;
    dnnl_memory_desc_t w_md; /* the weights (or their gradient) in the primitive's layout */
    struct prim w_reorder;   /* user -> w_md (forward, backward-data); w_md -> user (backward-weights) */
    dnnl_memory_t w_mem;
    char impl[40];
};

/* Everything an op needs, owned by the state and freed by conv_release. Memory objects own
 * no data: their handles are set to the op's tensors and to scratch before each run. */
struct conv_state {
    uint32_t op_id;
    bool has_bias;
    struct pass pass[PASSES];
    dnnl_memory_desc_t x_md, y_md, w_user_md; /* the stored layouts */
    dnnl_memory_t x_mem, y_mem, w_user, bias;
    /* Centre tap only (see the top of the file): the passes are 1x1 and take the weights'
     * centre slice, w_user_md viewed as (O, I, 1, 1) at the centre; w_bytes: the whole
     * weight gradient, zeroed before its centre is written. */
    bool centre;
    size_t w_bytes;
    /* Phases: x and y shapes, dilation, phase image size, the phase batch (nChwBc). */
    struct tb_shape x, y;
    int blk, ph_dh, ph_dw, ph_h, ph_w;
    dnnl_memory_desc_t ph_x_md, ph_y_md;
    struct tb_cpu_reorders *counts; /* the backend's counters */
};

static const char *status_str(dnnl_status_t st)
{
    const char *s = dnnl_status2str(st);
    return s ? s : "unknown status";
}

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

static void prim_fini(struct prim *pr)
{
    if (pr->p)
        dnnl_primitive_destroy(pr->p);
    if (pr->spad_mem)
        dnnl_memory_destroy(pr->spad_mem);
    memset(pr, 0, sizeof *pr);
}

static void mem_fini(dnnl_memory_t *m)
{
    if (*m)
        dnnl_memory_destroy(*m);
    *m = NULL;
}

static void conv_release(void *state)
{
    struct conv_state *s = state;
    if (!s)
        return;
    for (int k = 0; k < PASSES; k++) {
        struct pass *ps = &s->pass[k];
        prim_fini(&ps->p);
        prim_fini(&ps->w_reorder);
        mem_fini(&ps->w_mem);
        struct operand *ops[2] = { &ps->a, &ps->b };
        for (int i = 0; i < 2; i++) {
            prim_fini(&ops[i]->to);
            prim_fini(&ops[i]->from);
            mem_fini(&ops[i]->mem);
        }
    }
    mem_fini(&s->x_mem);
    mem_fini(&s->y_mem);
    mem_fini(&s->w_user);
    mem_fini(&s->bias);
    free(s);
}

/* Makes pr's primitive from pd (which the caller still owns) and remembers its scratchpad. */
static dnnl_status_t prim_init(struct prim *pr, const_dnnl_primitive_desc_t pd, dnnl_engine_t eng)
{
    dnnl_status_t st = dnnl_primitive_create(&pr->p, pd);
    if (st != dnnl_success)
        return st;
    pr->spad = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    return dnnl_memory_create(&pr->spad_mem, &pr->spad, eng, DNNL_MEMORY_NONE);
}

/* A reorder from -> to into pr, or nothing when the two layouts are the same. */
static dnnl_status_t reorder_init(struct prim *pr, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                                  dnnl_engine_t eng, const_dnnl_primitive_attr_t attr)
{
    if (dnnl_memory_desc_equal(from, to))
        return dnnl_success;
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = dnnl_reorder_primitive_desc_create(&pd, from, eng, to, eng, attr);
    if (st != dnnl_success)
        return st;
    st = prim_init(pr, pd, eng);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

static const char *impl_of(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    if (!pd || dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl)
        return "?";
    return impl;
}

/* Whether pd runs a direct kernel rather than oneDNN's im2col+GEMM or reference code. */
static bool is_direct(const_dnnl_primitive_desc_t pd)
{
    const char *impl = impl_of(pd);
    return pd && !strstr(impl, "gemm") && !strstr(impl, "ref");
}

static bool is_ref(const_dnnl_primitive_desc_t pd)
{
    return !pd || strstr(impl_of(pd), "ref") != NULL;
}

/* The stored layout of a tensor of this description (see cpu_shared.h). */
static dnnl_status_t stored_md(const struct tb_cpu *cpu, const struct tb_tensor_desc *d, dnnl_memory_desc_t *md)
{
    const dnnl_dims_t dims = { d->shape.n, d->shape.c, d->shape.h, d->shape.w };
    const int b = tb_cpu_blk(cpu, d);
    const dnnl_format_tag_t tag = b == 16 ? dnnl_aBcd16b : b == 8 ? dnnl_aBcd8b : dnnl_acdb;
    return dnnl_memory_desc_init_by_tag(md, 4, dims, dnnl_f32, tag);
}

/* The geometry of one variant of the convolution. */
struct geom {
    dnnl_dims_t strides, dil, pad;
};

/* A primitive descriptor of pass k on src/dst layouts (NULL when oneDNN has none: not an
 * error, the caller tries another variant). hint: the forward of the same variant. */
static dnnl_primitive_desc_t pass_pd(enum pass_kind k, const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *w,
                                     const dnnl_memory_desc_t *bias, const dnnl_memory_desc_t *dst,
                                     const struct geom *g, const_dnnl_primitive_attr_t attr, dnnl_engine_t eng,
                                     const_dnnl_primitive_desc_t hint)
{
    dnnl_convolution_desc_t cd;
    dnnl_status_t st;
    if (k == FWD)
        st = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct, src, w,
                                                        bias, dst, g->strides, g->dil, g->pad, g->pad);
    else if (k == BWD_DATA)
        st = dnnl_dilated_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct, src, w, dst, g->strides,
                                                              g->dil, g->pad, g->pad);
    else
        st = dnnl_dilated_convolution_backward_weights_desc_init(&cd, dnnl_convolution_direct, src, w, bias, dst,
                                                                 g->strides, g->dil, g->pad, g->pad);
    dnnl_primitive_desc_t pd = NULL;
    if (st != dnnl_success || dnnl_primitive_desc_create(&pd, &cd, attr, eng, hint) != dnnl_success)
        return NULL;
    return pd;
}

/* The md of what pd takes for operand `q` of pass k (0 = a, 1 = b; see struct pass). */
static const dnnl_memory_desc_t *operand_md(const_dnnl_primitive_desc_t pd, enum pass_kind k, int q)
{
    static const dnnl_query_t which[PASSES][2] = {
        { dnnl_query_src_md, dnnl_query_dst_md },
        { dnnl_query_diff_dst_md, dnnl_query_diff_src_md },
        { dnnl_query_src_md, dnnl_query_diff_dst_md },
    };
    return dnnl_primitive_desc_query_md(pd, which[k][q], 0);
}

/* Sets up operand q of pass ps, whose stored layout is `stored`: moved when the primitive
 * takes another; `input`: read by the pass (reordered in) rather than written (out). */
static dnnl_status_t operand_init(struct operand *o, const dnnl_memory_desc_t *taken, const dnnl_memory_desc_t *stored,
                                  bool input, bool phases, dnnl_engine_t eng, const_dnnl_primitive_attr_t attr)
{
    o->md = *taken;
    o->moved = phases || !dnnl_memory_desc_equal(taken, stored);
    dnnl_status_t st = dnnl_success;
    if (o->moved && !phases)
        st = input ? reorder_init(&o->to, stored, taken, eng, attr) : reorder_init(&o->from, taken, stored, eng, attr);
    if (st == dnnl_success)
        st = dnnl_memory_create(&o->mem, taken, eng, DNNL_MEMORY_NONE);
    return st;
}

static int conv_prepare(struct tb_cpu *cpu, const struct tb_op *op, void **state, struct tb_err *err)
{
    const struct tb_conv2d_params *p = &op->p.conv;
    const struct tb_shape x = op->in[0].shape, w = op->in[1].shape,
                          y = op->out[0].shape; /* as the op contract checked them */

    struct conv_state *s = calloc(1, sizeof *s);
    if (!s)
        return tb_err_set(err, TB_ERR_NOMEM, "op %u (conv2d): out of memory", op->id);
    s->op_id = op->id;
    s->has_bias = p->has_bias != 0;
    s->counts = &cpu->reorders;
    s->x = x;
    s->y = y;

    dnnl_engine_t eng = cpu->dnnl_engine;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pds[PASSES] = { NULL, NULL, NULL };
    dnnl_primitive_desc_t fwd_of[3] = { NULL, NULL, NULL }; /* the forward of each variant: the hints */
    const char *what = "";
    dnnl_status_t st;
    int rc = TB_OK;
#define TRY(call, step)                    \
    do {                                   \
        what = (step);                     \
        if ((st = (call)) != dnnl_success) \
            goto dnnl_fail;                \
    } while (0)

    const dnnl_dims_t src_dims = { x.n, x.c, x.h, x.w }, dst_dims = { y.n, y.c, y.h, y.w };
    const dnnl_dims_t b_dims = { w.n };
    /* PyTorch pads symmetrically and drops what the stride does not reach; oneDNN takes
     * the same left/right padding and floors the same way. Its dilation counts the gaps. */
    const struct geom g = { { p->stride_h, p->stride_w }, { p->dil_h - 1, p->dil_w - 1 }, { p->pad_h, p->pad_w } };
    dnnl_memory_desc_t x_any, y_any, w_any, b_md, zero_md;
    memset(&zero_md, 0, sizeof zero_md);
    TRY(stored_md(cpu, &op->in[0], &s->x_md), "src descriptor");
    TRY(stored_md(cpu, &op->out[0], &s->y_md), "dst descriptor");
    TRY(stored_md(cpu, &op->in[1], &s->w_user_md), "weights descriptor");
    s->w_bytes = tb_shape_elems(w) * sizeof(float);
    /* Off-centre taps that read only padding: dilation at least the map (stride 1, same). */
    s->centre = p->stride_h == 1 && p->stride_w == 1 && p->kh % 2 == 1 && p->kw % 2 == 1 && p->kh * p->kw > 1 &&
                p->pad_h == p->dil_h * (p->kh - 1) / 2 && p->pad_w == p->dil_w * (p->kw - 1) / 2 &&
                (p->kh == 1 || p->dil_h >= x.h) && (p->kw == 1 || p->dil_w >= x.w);
    struct geom g1 = { { 1, 1 }, { 0, 0 }, { 0, 0 } };
    if (s->centre) {
        const dnnl_dims_t one = { w.n, w.c, 1, 1 }, at = { 0, 0, (p->kh - 1) / 2, (p->kw - 1) / 2 };
        dnnl_memory_desc_t whole = s->w_user_md;
        TRY(dnnl_memory_desc_init_submemory(&s->w_user_md, &whole, one, at), "weights centre descriptor");
    }
    const dnnl_dims_t w_pass_dims = { w.n, w.c, s->centre ? 1 : w.h, s->centre ? 1 : w.w };
    TRY(dnnl_memory_desc_init_by_tag(&x_any, 4, src_dims, dnnl_f32, dnnl_format_tag_any), "src descriptor");
    TRY(dnnl_memory_desc_init_by_tag(&y_any, 4, dst_dims, dnnl_f32, dnnl_format_tag_any), "dst descriptor");
    TRY(dnnl_memory_desc_init_by_tag(&w_any, 4, w_pass_dims, dnnl_f32, dnnl_format_tag_any), "weights descriptor");
    TRY(dnnl_memory_desc_init_by_tag(&b_md, 1, b_dims, dnnl_f32, dnnl_x), "bias descriptor");
    const dnnl_memory_desc_t *bias_md = s->has_bias ? &b_md : &zero_md;

    TRY(dnnl_primitive_attr_create(&attr), "attributes");
    TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "user scratchpad mode");

    /* Phases apply to dilated stride-1 "same" convolutions on blocked x and y. */
    const int xb = tb_cpu_blk(cpu, &op->in[0]), yb = tb_cpu_blk(cpu, &op->out[0]);
    const bool ph_shape = p->stride_h == 1 && p->stride_w == 1 && (p->dil_h > 1 || p->dil_w > 1) && p->kh % 2 == 1 &&
                          p->kw % 2 == 1 && p->pad_h == p->dil_h * (p->kh - 1) / 2 &&
                          p->pad_w == p->dil_w * (p->kw - 1) / 2 && xb && xb == yb && !s->centre;
    struct geom pg = { { 1, 1 }, { 0, 0 }, { (p->kh - 1) / 2, (p->kw - 1) / 2 } };
    if (ph_shape) {
        s->blk = xb;
        s->ph_dh = p->dil_h;
        s->ph_dw = p->dil_w;
        s->ph_h = (x.h + p->dil_h - 1) / p->dil_h;
        s->ph_w = (x.w + p->dil_w - 1) / p->dil_w;
        const dnnl_dim_t pn = (dnnl_dim_t)x.n * p->dil_h * p->dil_w;
        const dnnl_dims_t pxd = { pn, x.c, s->ph_h, s->ph_w }, pyd = { pn, y.c, s->ph_h, s->ph_w };
        const dnnl_format_tag_t tag = xb == 16 ? dnnl_aBcd16b : dnnl_aBcd8b;
        TRY(dnnl_memory_desc_init_by_tag(&s->ph_x_md, 4, pxd, dnnl_f32, tag), "phase src descriptor");
        TRY(dnnl_memory_desc_init_by_tag(&s->ph_y_md, 4, pyd, dnnl_f32, tag), "phase dst descriptor");
    }
    const dnnl_memory_desc_t *src_of[3] = { &s->x_md, &s->ph_x_md, &x_any };
    const dnnl_memory_desc_t *dst_of[3] = { &s->y_md, &s->ph_y_md, &y_any };
    const struct geom *geom_of[3] = { s->centre ? &g1 : &g, &pg, s->centre ? &g1 : &g };
    for (int v = 0; v < 3; v++)
        if (v != PHASES || ph_shape)
            fwd_of[v] = pass_pd(FWD, src_of[v], &w_any, bias_md, dst_of[v], geom_of[v], attr, eng, NULL);

    /* Each pass: the first variant that is direct; else the stored layouts or oneDNN's
     * choice, whichever is not reference code (see the top of the file). */
    for (int k = 0; k < PASSES; k++) {
        dnnl_primitive_desc_t cand[3] = { NULL, NULL, NULL };
        int chosen = -1;
        for (int v = 0; v < 3 && chosen < 0; v++) {
            if (!fwd_of[v])
                continue;
            cand[v] = k == FWD ? fwd_of[v]
                               : pass_pd((enum pass_kind)k, src_of[v], &w_any, bias_md, dst_of[v], geom_of[v], attr,
                                         eng, fwd_of[v]);
            if (cand[v] && is_direct(cand[v]))
                chosen = v;
        }
        if (chosen < 0)
            chosen = cand[STORED] && !is_ref(cand[STORED]) ? STORED : cand[ANY] ? ANY : STORED;
        if (!cand[chosen]) {
            what = pass_names[k];
            st = dnnl_unimplemented;
            goto dnnl_fail;
        }
        pds[k] = cand[chosen];
        for (int v = 0; v < 3; v++)
            if (v != chosen && cand[v] && cand[v] != fwd_of[v])
                dnnl_primitive_desc_destroy(cand[v]);
        struct pass *ps = &s->pass[k];
        ps->mode = (enum mode)chosen;
        snprintf(ps->impl, sizeof ps->impl, "%s", impl_of(pds[k]));
        TRY(prim_init(&ps->p, pds[k], eng), pass_names[k]);
        /* The operands: x-side and y-side per pass (struct pass). */
        const dnnl_memory_desc_t *stored_a = k == BWD_DATA ? &s->y_md : &s->x_md;
        const dnnl_memory_desc_t *stored_b = k == FWD ? &s->y_md : k == BWD_DATA ? &s->x_md : &s->y_md;
        const bool a_in = true, b_in = k == BWD_WEIGHTS;
        TRY(operand_init(&ps->a, operand_md(pds[k], (enum pass_kind)k, 0), stored_a, a_in, chosen == PHASES, eng, attr),
            "operand");
        TRY(operand_init(&ps->b, operand_md(pds[k], (enum pass_kind)k, 1), stored_b, b_in, chosen == PHASES, eng, attr),
            "operand");
        ps->w_md = *dnnl_primitive_desc_query_md(
            pds[k], k == BWD_WEIGHTS ? dnnl_query_diff_weights_md : dnnl_query_weights_md, 0);
        if (k == BWD_WEIGHTS)
            TRY(reorder_init(&ps->w_reorder, &ps->w_md, &s->w_user_md, eng, attr), "weight-gradient reorder");
        else
            TRY(reorder_init(&ps->w_reorder, &s->w_user_md, &ps->w_md, eng, attr), "weights reorder");
        TRY(dnnl_memory_create(&ps->w_mem, &ps->w_md, eng, DNNL_MEMORY_NONE), "weights memory");
    }

    TRY(dnnl_memory_create(&s->x_mem, &s->x_md, eng, DNNL_MEMORY_NONE), "src memory");
    TRY(dnnl_memory_create(&s->y_mem, &s->y_md, eng, DNNL_MEMORY_NONE), "dst memory");
    TRY(dnnl_memory_create(&s->w_user, &s->w_user_md, eng, DNNL_MEMORY_NONE), "weights memory");
    if (s->has_bias)
        TRY(dnnl_memory_create(&s->bias, &b_md, eng, DNNL_MEMORY_NONE), "bias memory");

    if (tb_log_enabled(TB_LOG_DEBUG)) {
        char line[320];
        tb_cpu_conv_describe(cpu, s, line, sizeof line);
        tb_plog(TB_LOG_DEBUG, "op %u: conv2d %dx%d %d->%d: %s", op->id, p->kh, p->kw, x.c, w.n, line);
    }
    goto done;

dnnl_fail:
    rc = tb_err_set(err, TB_ERR_RUNTIME, "op %u (conv2d): oneDNN: %s: %s", op->id, what, status_str(st));
done:
#undef TRY
    for (int k = BWD_DATA; k < PASSES; k++) /* pds[FWD] is one of fwd_of[] */
        if (pds[k])
            dnnl_primitive_desc_destroy(pds[k]);
    for (int v = 0; v < 3; v++)
        if (fwd_of[v])
            dnnl_primitive_desc_destroy(fwd_of[v]);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (rc) {
        conv_release(s);
        return rc;
    }
    *state = s;
    return TB_OK;
}

/* Whether a oneDNN implementation name says it runs an ISA below the backend's path (the
 * best this CPU has, unless [backend] isa forced a lower one). */
static bool below_path(const struct tb_cpu *cpu, const char *impl)
{
    const bool sse = strstr(impl, "sse41") != NULL, avx2 = strstr(impl, "avx2") != NULL;
    return (cpu->isa == TB_CPU_ISA_AVX512 && !strstr(impl, "avx512") && (sse || avx2)) ||
           (cpu->isa == TB_CPU_ISA_AVX2 && sse);
}

void tb_cpu_conv_describe(const struct tb_cpu *cpu, const void *state, char *buf, size_t size)
{
    const struct conv_state *s = state;
    static const char *const short_names[PASSES] = { "fwd", "bwd-data", "bwd-weights" };
    size_t used = 0;
    buf[0] = '\0';
    if (s->centre) {
        int n = snprintf(buf, size, "centre tap as 1x1: ");
        used = n > 0 && (size_t)n < size ? (size_t)n : 0;
    }
    static const char *const operand_names[PASSES][2] = { { "x", "y" }, { "dy", "dx" }, { "x", "dy" } };
    for (int k = 0; k < PASSES && used < size; k++) {
        const struct pass *ps = &s->pass[k];
        char how[96] = "";
        if (ps->mode == PHASES)
            snprintf(how, sizeof how, " (phases)");
        else if (ps->a.moved || ps->b.moved)
            snprintf(how, sizeof how, " (%s%s%s reordered, %.2f MiB)", ps->a.moved ? operand_names[k][0] : "",
                     ps->a.moved && ps->b.moved ? " and " : "", ps->b.moved ? operand_names[k][1] : "",
                     (double)((ps->a.moved ? md_bytes(&ps->a.md) : 0) + (ps->b.moved ? md_bytes(&ps->b.md) : 0)) /
                         1048576.0);
        int n = snprintf(buf + used, size - used, "%s%s %s%s%s", k ? ", " : "", short_names[k], ps->impl, how,
                         below_path(cpu, ps->impl) ? " [below the path's ISA]" : "");
        if (n < 0)
            break;
        used += (size_t)n;
    }
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
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (conv2d): oneDNN: %s failed: %s", s->op_id, what, status_str(st));
    return TB_OK;
}

static int set_handle(const struct conv_state *s, dnnl_memory_t m, void *data, struct tb_err *err)
{
    dnnl_status_t st = dnnl_memory_set_data_handle(m, data);
    if (st != dnnl_success)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (conv2d): oneDNN: setting a memory handle failed: %s", s->op_id,
                          status_str(st));
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
static void phase_gather(const struct conv_state *s, const float *a, float *ap, int n, int c)
{
    const size_t B = (size_t)s->blk, H = (size_t)s->x.h, W = (size_t)s->x.w, CB = (size_t)c / B;
    const size_t dh = (size_t)s->ph_dh, dw = (size_t)s->ph_dw, Hp = (size_t)s->ph_h, Wp = (size_t)s->ph_w;
    const long rows = (long)((size_t)n * dh * dw * CB * Hp);
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const size_t hp = (size_t)r % Hp, t = (size_t)r / Hp, cb = t % CB, nn = t / CB;
        const size_t px = nn % dw, py = nn / dw % dh, i = nn / (dw * dh), h = hp * dh + py;
        float *dst = ap + (size_t)r * Wp * B;
        if (h >= H) {
            memset(dst, 0, Wp * B * sizeof *dst);
            continue;
        }
        const float *src = a + (((i * CB + cb) * H + h) * W + px) * B;
        size_t wp = 0;
        for (; wp * dw + px < W; wp++)
            memcpy(dst + wp * B, src + wp * dw * B, B * sizeof *dst);
        if (wp < Wp)
            memset(dst + wp * B, 0, (Wp - wp) * B * sizeof *dst);
    }
}

/* The inverse of phase_gather, for the pixels inside the image. */
static void phase_scatter(const struct conv_state *s, const float *ap, float *a, int n, int c)
{
    const size_t B = (size_t)s->blk, H = (size_t)s->x.h, W = (size_t)s->x.w, CB = (size_t)c / B;
    const size_t dh = (size_t)s->ph_dh, dw = (size_t)s->ph_dw, Hp = (size_t)s->ph_h, Wp = (size_t)s->ph_w;
    const long rows = (long)((size_t)n * CB * H);
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const size_t h = (size_t)r % H, t = (size_t)r / H, cb = t % CB, i = t / CB, py = h % dh, hp = h / dh;
        float *dst = a + (size_t)r * W * B;
        for (size_t w = 0; w < W; w++) {
            const size_t nn = (i * dh + py) * dw + w % dw;
            memcpy(dst + w * B, ap + (((nn * CB + cb) * Hp + hp) * Wp + w / dw) * B, B * sizeof *dst);
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
        phase_gather(s, data, (float *)slot, images, channels);
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
        phase_scatter(s, (const float *)slot, data, images, channels);
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
        const size_t db_at = db_sink ? carve(&total, (size_t)op->in[1].shape.n * sizeof(float)) : 0;
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

const struct tb_cpu_kernel tb_cpu_conv2d_kernel = {
    .prepare = conv_prepare,
    .release = conv_release,
    .forward = conv_forward,
    .backward = conv_backward,
};
