/* backends/cpu/cpu_conv_prepare.c: a convolution prepared (cpu_conv_internal.h): for each
 * pass, the first way oneDNN gives a direct kernel for (stored layouts, phases, its own
 * choice: cpu_conv.c's top comment), the primitive and its operands' layouts, the weights'
 * reorders; and what was chosen, as op_describe prints it. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "cpu_conv_internal.h"

static const char *const pass_names[PASSES] = { "forward", "backward-data", "backward-weights" };

const char *tb_cpu_conv_status(dnnl_status_t st)
{
    const char *s = dnnl_status2str(st);
    return s ? s : "unknown status";
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

void tb_cpu_conv_release(void *state)
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

/* oneDNN's data type of a float dtype. */
static dnnl_data_type_t dnnl_type(enum tb_dtype d)
{
    return d == TB_BF16 ? dnnl_bf16 : d == TB_F16 ? dnnl_f16 : dnnl_f32;
}

/* The stored layout of a tensor of this description (see cpu_shared.h). */
static dnnl_status_t stored_md(const struct tb_cpu *cpu, const struct tb_tensor_desc *d, dnnl_memory_desc_t *md)
{
    const dnnl_dims_t dims = { d->shape.n, d->shape.c, d->shape.h, d->shape.w };
    const int b = tb_cpu_blk(cpu, d);
    const dnnl_format_tag_t tag = b == 16 ? dnnl_aBcd16b : b == 8 ? dnnl_aBcd8b : dnnl_acdb;
    return dnnl_memory_desc_init_by_tag(md, 4, dims, dnnl_type(d->dtype), tag);
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

/* The ways a pass may run (enum mode): each one's x and y layouts, geometry and forward
 * (NULL: that way does not apply), the weights and bias, for init_pass. */
struct variants {
    const dnnl_memory_desc_t *src[3], *dst[3];
    const struct geom *geom[3];
    dnnl_primitive_desc_t fwd[3]; /* the forward of each: the backward passes' hints */
    const dnnl_memory_desc_t *w_any, *bias;
    const_dnnl_primitive_attr_t attr;
    dnnl_engine_t eng;
};

/* Pass k set up in s->pass[k]: the first way that is direct; else the stored layouts or
 * oneDNN's choice, whichever is not reference code (see cpu_conv.c's top). *pd: the
 * primitive descriptor chosen, the caller's to destroy unless it is a forward of vs;
 * *what: the step that failed. */
static dnnl_status_t init_pass(struct conv_state *s, const struct variants *vs, enum pass_kind k,
                               dnnl_primitive_desc_t *pd, const char **what)
{
    dnnl_primitive_desc_t cand[3] = { NULL, NULL, NULL };
    int chosen = -1;
    for (int v = 0; v < 3 && chosen < 0; v++) {
        if (!vs->fwd[v])
            continue;
        cand[v] = k == FWD ? vs->fwd[v]
                           : pass_pd(k, vs->src[v], vs->w_any, vs->bias, vs->dst[v], vs->geom[v], vs->attr, vs->eng,
                                     vs->fwd[v]);
        if (cand[v] && is_direct(cand[v]))
            chosen = v;
    }
    if (chosen < 0)
        chosen = cand[STORED] && !is_ref(cand[STORED]) ? STORED : cand[ANY] ? ANY : STORED;
    *what = pass_names[k];
    if (!cand[chosen])
        return dnnl_unimplemented;
    *pd = cand[chosen];
    for (int v = 0; v < 3; v++)
        if (v != chosen && cand[v] && cand[v] != vs->fwd[v])
            dnnl_primitive_desc_destroy(cand[v]);
    struct pass *ps = &s->pass[k];
    ps->mode = (enum mode)chosen;
    snprintf(ps->impl, sizeof ps->impl, "%s", impl_of(*pd));
    dnnl_status_t st;
    if ((st = prim_init(&ps->p, *pd, vs->eng)) != dnnl_success)
        return st;
    /* The operands: x-side and y-side per pass (struct pass). */
    const dnnl_memory_desc_t *stored_a = k == BWD_DATA ? &s->y_md : &s->x_md;
    const dnnl_memory_desc_t *stored_b = k == FWD ? &s->y_md : k == BWD_DATA ? &s->x_md : &s->y_md;
    const bool a_in = true, b_in = k == BWD_WEIGHTS;
    *what = "operand";
    if ((st = operand_init(&ps->a, operand_md(*pd, k, 0), stored_a, a_in, chosen == PHASES, vs->eng, vs->attr)) !=
            dnnl_success ||
        (st = operand_init(&ps->b, operand_md(*pd, k, 1), stored_b, b_in, chosen == PHASES, vs->eng, vs->attr)) !=
            dnnl_success)
        return st;
    ps->w_md =
        *dnnl_primitive_desc_query_md(*pd, k == BWD_WEIGHTS ? dnnl_query_diff_weights_md : dnnl_query_weights_md, 0);
    *what = k == BWD_WEIGHTS ? "weight-gradient reorder" : "weights reorder";
    if (k == BWD_WEIGHTS)
        st = reorder_init(&ps->w_reorder, &ps->w_md, &s->w_user_md, vs->eng, vs->attr);
    else
        st = reorder_init(&ps->w_reorder, &s->w_user_md, &ps->w_md, vs->eng, vs->attr);
    if (st != dnnl_success)
        return st;
    *what = "weights memory";
    return dnnl_memory_create(&ps->w_mem, &ps->w_md, vs->eng, DNNL_MEMORY_NONE);
}

/* Whether the off-centre taps read only padding: dilation at least the map (stride 1,
 * "same"): the convolution is its centre tap's 1x1 (see cpu_conv.c's top). */
static bool centre_only(const struct tb_conv2d_params *p, struct tb_shape x)
{
    return p->stride_h == 1 && p->stride_w == 1 && p->kh % 2 == 1 && p->kw % 2 == 1 && p->kh * p->kw > 1 &&
           p->pad_h == p->dil_h * (p->kh - 1) / 2 && p->pad_w == p->dil_w * (p->kw - 1) / 2 &&
           (p->kh == 1 || p->dil_h >= x.h) && (p->kw == 1 || p->dil_w >= x.w);
}

/* Whether phases apply: a dilated stride-1 "same" convolution on x and y blocked alike. */
static bool phases_apply(const struct tb_cpu *cpu, const struct tb_op *op, bool centre)
{
    const struct tb_conv2d_params *p = &op->p.conv;
    const int xb = tb_cpu_blk(cpu, &op->in[0]), yb = tb_cpu_blk(cpu, &op->out[0]);
    return p->stride_h == 1 && p->stride_w == 1 && (p->dil_h > 1 || p->dil_w > 1) && p->kh % 2 == 1 && p->kw % 2 == 1 &&
           p->pad_h == p->dil_h * (p->kh - 1) / 2 && p->pad_w == p->dil_w * (p->kw - 1) / 2 && xb && xb == yb &&
           !centre;
}

/* The phase images' geometry and layouts in s: N*dh*dw images of ceil(H/dh) x ceil(W/dw),
 * blocked as x is. */
static dnnl_status_t phase_layouts(const struct tb_cpu *cpu, const struct tb_op *op, struct conv_state *s)
{
    const struct tb_conv2d_params *p = &op->p.conv;
    const struct tb_shape x = op->in[0].shape, y = op->out[0].shape;
    const int xb = tb_cpu_blk(cpu, &op->in[0]);
    s->blk = xb;
    s->ph_dh = p->dil_h;
    s->ph_dw = p->dil_w;
    s->ph_h = (x.h + p->dil_h - 1) / p->dil_h;
    s->ph_w = (x.w + p->dil_w - 1) / p->dil_w;
    const dnnl_dim_t pn = (dnnl_dim_t)x.n * p->dil_h * p->dil_w;
    const dnnl_dims_t pxd = { pn, x.c, s->ph_h, s->ph_w }, pyd = { pn, y.c, s->ph_h, s->ph_w };
    const dnnl_format_tag_t tag = xb == 16 ? dnnl_aBcd16b : dnnl_aBcd8b;
    const dnnl_data_type_t dt = dnnl_type(op->in[0].dtype);
    dnnl_status_t st = dnnl_memory_desc_init_by_tag(&s->ph_x_md, 4, pxd, dt, tag);
    return st != dnnl_success ? st : dnnl_memory_desc_init_by_tag(&s->ph_y_md, 4, pyd, dt, tag);
}

/* The layouts: x, y and the weights as stored (the weights' centre slice where only the
 * centre tap reads the image), and each with format_tag any for oneDNN's own choice, the
 * bias. *what: the step that failed. */
static dnnl_status_t layouts(const struct tb_cpu *cpu, const struct tb_op *op, struct conv_state *s,
                             dnnl_memory_desc_t *x_any, dnnl_memory_desc_t *y_any, dnnl_memory_desc_t *w_any,
                             dnnl_memory_desc_t *b_md, const char **what)
{
    const struct tb_conv2d_params *p = &op->p.conv;
    const struct tb_shape x = op->in[0].shape, w = op->in[1].shape, y = op->out[0].shape;
    const dnnl_dims_t src_dims = { x.n, x.c, x.h, x.w }, dst_dims = { y.n, y.c, y.h, y.w };
    const dnnl_dims_t b_dims = { w.n };
    dnnl_status_t st;
#define LTRY(call, step)                   \
    do {                                   \
        *what = (step);                    \
        if ((st = (call)) != dnnl_success) \
            return st;                     \
    } while (0)
    LTRY(stored_md(cpu, &op->in[0], &s->x_md), "src descriptor");
    LTRY(stored_md(cpu, &op->out[0], &s->y_md), "dst descriptor");
    LTRY(stored_md(cpu, &op->in[1], &s->w_user_md), "weights descriptor");
    s->w_bytes = tb_shape_elems(w) * s->es;
    s->centre = centre_only(p, x);
    if (s->centre) {
        const dnnl_dims_t one = { w.n, w.c, 1, 1 }, at = { 0, 0, (p->kh - 1) / 2, (p->kw - 1) / 2 };
        dnnl_memory_desc_t whole = s->w_user_md;
        LTRY(dnnl_memory_desc_init_submemory(&s->w_user_md, &whole, one, at), "weights centre descriptor");
    }
    const dnnl_dims_t w_pass_dims = { w.n, w.c, s->centre ? 1 : w.h, s->centre ? 1 : w.w };
    const dnnl_data_type_t dt = dnnl_type(op->in[0].dtype); /* the op's one float dtype */
    LTRY(dnnl_memory_desc_init_by_tag(x_any, 4, src_dims, dt, dnnl_format_tag_any), "src descriptor");
    LTRY(dnnl_memory_desc_init_by_tag(y_any, 4, dst_dims, dt, dnnl_format_tag_any), "dst descriptor");
    LTRY(dnnl_memory_desc_init_by_tag(w_any, 4, w_pass_dims, dt, dnnl_format_tag_any), "weights descriptor");
    LTRY(dnnl_memory_desc_init_by_tag(b_md, 1, b_dims, dt, dnnl_x), "bias descriptor");
#undef LTRY
    return dnnl_success;
}

int tb_cpu_conv_prepare(struct tb_cpu *cpu, const struct tb_op *op, void **state, struct tb_err *err)
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
    s->es = tb_dtype_size(op->in[0].dtype);

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

    /* PyTorch pads symmetrically and drops what the stride does not reach; oneDNN takes
     * the same left/right padding and floors the same way. Its dilation counts the gaps. */
    const struct geom g = { { p->stride_h, p->stride_w }, { p->dil_h - 1, p->dil_w - 1 }, { p->pad_h, p->pad_w } };
    dnnl_memory_desc_t x_any, y_any, w_any, b_md, zero_md;
    memset(&zero_md, 0, sizeof zero_md);
    if ((st = layouts(cpu, op, s, &x_any, &y_any, &w_any, &b_md, &what)) != dnnl_success)
        goto dnnl_fail;
    const struct geom g1 = { { 1, 1 }, { 0, 0 }, { 0, 0 } }; /* the centre tap's 1x1 */
    const dnnl_memory_desc_t *bias_md = s->has_bias ? &b_md : &zero_md;

    TRY(dnnl_primitive_attr_create(&attr), "attributes");
    TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "user scratchpad mode");

    const bool ph_shape = phases_apply(cpu, op, s->centre);
    struct geom pg = { { 1, 1 }, { 0, 0 }, { (p->kh - 1) / 2, (p->kw - 1) / 2 } };
    if (ph_shape)
        TRY(phase_layouts(cpu, op, s), "phase descriptors");
    const dnnl_memory_desc_t *src_of[3] = { &s->x_md, &s->ph_x_md, &x_any };
    const dnnl_memory_desc_t *dst_of[3] = { &s->y_md, &s->ph_y_md, &y_any };
    const struct geom *geom_of[3] = { s->centre ? &g1 : &g, &pg, s->centre ? &g1 : &g };
    for (int v = 0; v < 3; v++)
        if (v != PHASES || ph_shape)
            fwd_of[v] = pass_pd(FWD, src_of[v], &w_any, bias_md, dst_of[v], geom_of[v], attr, eng, NULL);

    const struct variants vs = { { src_of[0], src_of[1], src_of[2] },
                                 { dst_of[0], dst_of[1], dst_of[2] },
                                 { geom_of[0], geom_of[1], geom_of[2] },
                                 { fwd_of[0], fwd_of[1], fwd_of[2] },
                                 &w_any,
                                 bias_md,
                                 attr,
                                 eng };
    for (int k = 0; k < PASSES; k++)
        if ((st = init_pass(s, &vs, (enum pass_kind)k, &pds[k], &what)) != dnnl_success)
            goto dnnl_fail;
    if (op->in[0].dtype != TB_F32)
        for (int k = 0; k < PASSES; k++)
            if (is_ref(pds[k])) { /* no 16-bit kernel here: f32's, on converted copies, is faster */
                rc = TB_CPU_WIDEN;
                goto done;
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
    /* oneDNN has no kernel for a 16-bit dtype here (f16 without AVX512-FP16): f32's, widened */
    rc = op->in[0].dtype != TB_F32 && st == dnnl_unimplemented
             ? TB_CPU_WIDEN
             : tb_err_set(err, TB_ERR_RUNTIME, "op %u (conv2d): oneDNN: %s: %s", op->id, what, tb_cpu_conv_status(st));
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
        tb_cpu_conv_release(s);
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
                     (double)((ps->a.moved ? dnnl_memory_desc_get_size(&ps->a.md) : 0) +
                              (ps->b.moved ? dnnl_memory_desc_get_size(&ps->b.md) : 0)) /
                         1048576.0);
        int n = snprintf(buf + used, size - used, "%s%s %s%s%s", k ? ", " : "", short_names[k], ps->impl, how,
                         below_path(cpu, ps->impl) ? " [below the path's ISA]" : "");
        if (n < 0)
            break;
        used += (size_t)n;
    }
}
