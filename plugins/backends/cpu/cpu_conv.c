/* backends/cpu/cpu_conv.c: TB_OP_CONV2D with oneDNN (C API): forward, backward-data,
 * backward-weights and the bias gradient.
 *
 * Activations are NHWC in device memory, but convolutions with kernels larger than 1x1
 * and channel counts that are multiples of 8 run on blocked activations (nChw8c, the
 * AVX2 block): src and diff_dst are reordered into nChw8c in scratch, the nChw8c
 * primitive runs, and dst or diff_src is reordered back. oneDNN 2.6's AVX2 kernels are
 * much faster on nChw8c than on nhwc, by far more than the reorders cost (a 16.8 MB
 * tensor nhwc <-> nChw8c takes about 0.5-1 ms). Measured with bench/ops on Zen 3, 2
 * threads, fp32 peak ~205 GFLOP/s, medians of 5 runs, reorders included, 3x3 64->64 on
 * 4x128x128: forward 124 -> 168 GFLOP/s, backward-data 133 -> 168, backward-weights 87
 * (nhwc im2col+GEMM) -> 130 (nChw8c jit), fwd+bwd 110 -> 152 (55% -> 76% of peak); the
 * same with dilation 2 (forward and backward-data blocked) 110 -> 125. The rule, with its
 * measurements, is in conv_prepare. The per-op reorder is a measured net win, not the
 * ideal: a blocked device layout for all kernels (batch norm, eltwise, pooling, concat
 * working on nChw8c too) would save the reorders and is the cleaner long-term design.
 *
 * Weights live in OHWI (cpu_internal.h), but
 * no fast oneDNN kernel takes OHWI as it is: asked for it, oneDNN 2.6 falls back to its
 * reference code (ref:any, under 1 GFLOP/s against 130 for 3x3 64->64 on this AVX2 CPU).
 * So each primitive is created with format_tag any for its weights and takes its own
 * blocked layout (on AVX2: OIhw8i8o for forward, OIhw8o8i for backward-data); the weights
 * are reordered into scratch memory before it runs, and the weight gradient back to OHWI
 * after. A weight tensor is N*OH*OW times smaller than the work done with it, so the
 * reorders cost well under 1% (about 25 us for 64x64x3x3). Two deliberate departures from
 * oneDNN's own choices, both measured (see backward-weights in conv_prepare and
 * try_prepad): backward-weights of kernels larger than 1x1 on nhwc takes the im2col+GEMM
 * path (HWIO weight gradient), and a forward that would fall to GEMM because of a large
 * padding runs image by image on a zero-bordered copy instead (both only for passes that
 * stay on nhwc: other channel counts, or dilations the nChw8c direct kernels refuse,
 * where the phases below do not apply).
 *
 * Dilated stride-1 "same" convolutions (odd kernel, padding dil*(k-1)/2, channel counts
 * multiples of 8) can run on phases (space-to-batch): output pixel (dh*Y+py, dw*X+px) only
 * reads input pixels of the same phase (py, px), so the convolution is a dense one (no
 * dilation, padding (k-1)/2) over the N*dh*dw phase sub-images of ceil(H/dh) x ceil(W/dw),
 * zero-filled past the edge (those zeros are the convolution's own padding, and zero
 * output-gradient rows add nothing). phase_gather copies NHWC straight into nChw8c phase
 * images in scratch, phase_scatter copies the results back; backward-weights is one dense
 * primitive over the batch N*dh*dw, which sums the phases by itself. Rules, measured with
 * bench/ops (Zen 3, 2 threads, GFLOP/s before -> after, medians of 4 interleaved runs;
 * the rejected variants from 3 runs with every pass on phases): backward-weights takes
 * the phases from phase images of 8x8 up (3x3 64->64 d2 on 4x128x128 81 -> 121, 256->256 d4 on 32x32 134 ->
 * 139, 64->64 d4 on 128x128 84 -> 129, 128->128 d4 on 64x64 97 -> 141, 32->32 d2 on
 * 128x128 54 -> 117, 256->256 d6 on 64x64 114 -> 133; smaller phase images lost:
 * 256->256 d18 on 64x64, 4x4 phases, 0.81x, 512->256 d12 on 32x32, 3x3, 0.72x); forward
 * from 3x3 phase images, only where the blocked dilated kernel is not direct (the large
 * dilations, which ran on the padded copy: 256->256 d4 160 -> 169, 64->64 d4 153 -> 166,
 * 128->128 d4 161 -> 170, d6 133 -> 163, d18 111 -> 125, 512->256 d12 92 -> 127; 2x2
 * phases, 64->64 d24 on 32x32, 0.57x; on phases 64->64 d2 ran 9% slower than blocked);
 * backward-data from 8x8 phase images where it is not blocked or the dilation is at least
 * 4 (d4: 1.00-1.09x against blocked, d6 150 -> 179; d2: 0.92-1.08x; 4x4 phases 0.84x,
 * 2x2 0.58x, 3x3 with 512->256 1.22x).
 *
 * 1x1 kernels stay on nhwc (jit_1x1) except backward-weights with at least 256 channels
 * on both sides and 512 on one, which runs on nChw8c copies: 1024->512 on 32x32 124 ->
 * 158, 4096->256 on 16x16 122 -> 157, 512->512 129 -> 154, 256->1024 118 -> 145; blocked,
 * 256->256 on 64x64 gained 2%, and 128->128 and 64->128 lost 30-35%. Blocked 1x1 forward
 * lost 10-43% everywhere, and backward-data 1-38% except 4096->256 (+3%).
 *
 * Backward-weights of stride-1 kernels larger than 1x1 with input channels in multiples
 * of 8, output rows of at least 32 pixels and a weight gradient of at most 12 MiB does not
 * use oneDNN at all: cpu_conv_wgrad.c computes it (and the bias gradient) straight from
 * nhwc in AVX2 register tiles, 1.1-1.3x faster than the best oneDNN path above on those
 * shapes (3x3 64->64 on 4x128x128 124 -> 168 GFLOP/s). The blocked and phase rules above
 * still choose forward and backward-data there, and backward-weights everywhere else.
 *
 * Everything is built once in prepare (struct conv_state). The primitives run in
 * user-managed scratchpad mode: their scratchpads, the reordered weights, the blocked
 * activations and the padded images are carved out of the backend's shared scratch
 * (tb_cpu_scratch), so that memory is counted as device memory, and nothing is allocated
 * per call.
 *
 * Determinism: the direct and GEMM convolutions (no Winograd) reduce in a fixed order for
 * a given thread count and shape, and the reorders only move data, so runs are
 * bit-identical (tests/check_conv.c checks); results may differ in the last bits between
 * thread counts. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "cpu_internal.h"

/* One primitive and what running it needs. */
struct prim {
    dnnl_primitive_t p;      /* NULL when not needed (e.g. no reorder) */
    dnnl_memory_desc_t spad; /* its scratchpad (user mode) */
    dnnl_memory_t spad_mem;  /* a memory object for it, handle set per run */
};

/* Everything an op needs, owned by the state and freed by conv_release. The memory objects
 * own no data: their handles are set to the op's tensors and to scratch before each run. */
struct conv_state {
    uint32_t op_id;
    bool has_bias;
    struct prim fwd, bwd_data, bwd_weights;
    /* Weight reorders, p == NULL where the primitive takes OHWI as it is. */
    struct prim w_to_fwd, w_to_bwd_data, dw_to_ohwi;
    /* Descriptors: OHWI weights, and the layouts each primitive chose. */
    dnnl_memory_desc_t w_ohwi, w_fwd, w_bwd_data, dw_bwd;
    /* Memory objects: activations (NHWC), weights in each layout, bias. */
    dnnl_memory_t src, dst, w_user, w_fwd_mem, w_bwdd_mem, dw_bwd_mem, bias;
    /* Forward image by image on a zero-bordered copy (see try_prepad); src_padded is NULL
     * when not. src_padded is one padded image, dst_image one image of y. */
    struct tb_shape x, y;
    int pad_h, pad_w;
    dnnl_memory_desc_t src_padded_md;
    dnnl_memory_t src_padded, dst_image;
    /* Blocked activations (see the top of the file): which passes run on nChw8c, the
     * reorders nhwc <-> nChw8c (src shape: to_blk for src, from_blk for diff_src; dst
     * shape: to_blk for diff_dst, from_blk for dst), and memory objects for the blocked
     * copies, whose handles point into scratch. */
    bool blk_fwd, blk_bwd_data, blk_bwd_weights;
    dnnl_memory_desc_t src_blk_md, dst_blk_md;
    struct prim src_to_blk, src_from_blk, dst_to_blk, dst_from_blk;
    dnnl_memory_t src_blk, dst_blk;
    /* Dilated stride-1 "same" convolutions on phases (see the top of the file): which passes run
     * as a dense convolution over the N*dh*dw phase sub-images (nChw8c, ph_h x ph_w each),
     * their descriptors and memory objects (handles into scratch). */
    bool ph_fwd, ph_bwd_data, ph_bwd_weights;
    int ph_dh, ph_dw, ph_h, ph_w;
    dnnl_memory_desc_t ph_src_md, ph_dst_md;
    dnnl_memory_t ph_src, ph_dst;
    /* Backward-weights (and bias) in cpu_conv_wgrad.c instead of oneDNN. */
    bool direct_bwd_weights;
    struct tb_cpu_wgrad wg;
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

static void prim_fini(struct prim *pr)
{
    if (pr->p)
        dnnl_primitive_destroy(pr->p);
    if (pr->spad_mem)
        dnnl_memory_destroy(pr->spad_mem);
    memset(pr, 0, sizeof *pr);
}

static void conv_release(void *state)
{
    struct conv_state *s = state;
    if (!s)
        return;
    prim_fini(&s->fwd);
    prim_fini(&s->bwd_data);
    prim_fini(&s->bwd_weights);
    prim_fini(&s->w_to_fwd);
    prim_fini(&s->w_to_bwd_data);
    prim_fini(&s->dw_to_ohwi);
    prim_fini(&s->src_to_blk);
    prim_fini(&s->src_from_blk);
    prim_fini(&s->dst_to_blk);
    prim_fini(&s->dst_from_blk);
    dnnl_memory_t *mems[] = { &s->src,        &s->dst,    &s->w_user,     &s->w_fwd_mem, &s->w_bwdd_mem,
                              &s->dw_bwd_mem, &s->bias,   &s->src_padded, &s->dst_image, &s->src_blk,
                              &s->dst_blk,    &s->ph_src, &s->ph_dst };
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (*mems[i])
            dnnl_memory_destroy(*mems[i]);
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
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl)
        return "?";
    return impl;
}

/* Whether pd runs a direct kernel rather than oneDNN's im2col+GEMM or reference code. */
static bool is_direct(const_dnnl_primitive_desc_t pd)
{
    const char *impl = impl_of(pd);
    return !strstr(impl, "gemm") && !strstr(impl, "ref");
}

/* oneDNN's AVX2 direct forward kernels refuse large paddings, which dilated kernels need
 * (3x3 with dilation 4 and padding 4 gets the GEMM path), and the GEMM path ran 2-2.5x
 * slower here (Zen 3, 2 threads: 3x3 64->64 d4 on 4x128x128, 50 vs 132 GFLOP/s; 3x3
 * 512->256 d12 on 4x32x32, 70 vs 140). The same convolution on a copy of the image with
 * the padding written out as zeros (and padding 0) gets the direct kernel, as fast on one
 * image at a time as on the batch. So: when the forward oneDNN picks is not direct, try
 * the padded one-image problem, and take it when it is direct and one padded image takes
 * no more scratch than the GEMM path's own scratchpad (an im2col buffer about 9x an image
 * for 3x3, so memory does not grow; a huge padding around a small map stays on GEMM). On
 * success *fwd_pd is replaced (the caller still owns it) and s->src_padded is set. */
static dnnl_status_t try_prepad(struct conv_state *s, dnnl_primitive_desc_t *fwd_pd, const struct tb_op *op,
                                const dnnl_memory_desc_t *w_any, const dnnl_memory_desc_t *bias_md,
                                const_dnnl_primitive_attr_t attr, dnnl_engine_t eng)
{
    const struct tb_conv2d_params *p = &op->p.conv;
    const struct tb_shape x = op->in[0].shape;
    if ((p->pad_h == 0 && p->pad_w == 0) || is_direct(*fwd_pd))
        return dnnl_success;
    const struct tb_shape y = op->out[0].shape;
    const dnnl_dims_t dims = { 1, x.c, x.h + 2 * p->pad_h, x.w + 2 * p->pad_w }, ydims = { 1, y.c, y.h, y.w };
    const dnnl_dims_t strides = { p->stride_h, p->stride_w }, dil = { p->dil_h - 1, p->dil_w - 1 }, zero = { 0, 0 };
    dnnl_memory_desc_t md, ymd;
    dnnl_convolution_desc_t cd;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st = dnnl_memory_desc_init_by_tag(&md, 4, dims, dnnl_f32, dnnl_nhwc);
    if (st == dnnl_success)
        st = dnnl_memory_desc_init_by_tag(&ymd, 4, ydims, dnnl_f32, dnnl_nhwc);
    if (st == dnnl_success)
        st = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct, &md, w_any,
                                                        bias_md, &ymd, strides, dil, zero, zero);
    if (st != dnnl_success)
        return st;
    /* No implementation for the padded problem is not an error: keep the first choice. */
    if (dnnl_primitive_desc_create(&pd, &cd, attr, eng, NULL) != dnnl_success)
        return dnnl_success;
    const size_t gemm_spad =
        dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(*fwd_pd, dnnl_query_scratchpad_md, 0));
    if (!is_direct(pd) || dnnl_memory_desc_get_size(&md) > gemm_spad) {
        dnnl_primitive_desc_destroy(pd);
        return dnnl_success;
    }
    st = dnnl_memory_create(&s->src_padded, &md, eng, DNNL_MEMORY_NONE);
    if (st == dnnl_success)
        st = dnnl_memory_create(&s->dst_image, &ymd, eng, DNNL_MEMORY_NONE);
    if (st != dnnl_success) {
        dnnl_primitive_desc_destroy(pd);
        return st;
    }
    s->src_padded_md = md;
    s->x = x;
    s->y = y;
    s->pad_h = p->pad_h;
    s->pad_w = p->pad_w;
    dnnl_primitive_desc_destroy(*fwd_pd);
    *fwd_pd = pd;
    return dnnl_success;
}

static int conv_prepare(struct tb_cpu *cpu, const struct tb_op *op, void **state, struct tb_err *err)
{
    const struct tb_conv2d_params *p = &op->p.conv;
    const uint32_t want_in = p->has_bias ? 3u : 2u;
    if (op->nin != want_in || op->nout != 1)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (conv2d): expected %u inputs and 1 output, got %u and %u", op->id,
                          want_in, op->nin, op->nout);
    for (uint32_t i = 0; i < op->nin; i++)
        if (op->in[i].dtype != TB_F32)
            return tb_err_set(err, TB_ERR_RUNTIME, "op %u (conv2d): input %u is not f32", op->id, i);
    if (op->out[0].dtype != TB_F32)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (conv2d): the output is not f32", op->id);
    if (p->kh < 1 || p->kw < 1 || p->stride_h < 1 || p->stride_w < 1 || p->dil_h < 1 || p->dil_w < 1 || p->pad_h < 0 ||
        p->pad_w < 0)
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "op %u (conv2d): bad parameters (kernel %dx%d, stride %dx%d, padding %dx%d, dilation %dx%d)",
                          op->id, p->kh, p->kw, p->stride_h, p->stride_w, p->pad_h, p->pad_w, p->dil_h, p->dil_w);
    const struct tb_shape x = op->in[0].shape, w = op->in[1].shape, y = op->out[0].shape;
    const int64_t ext_h = (int64_t)p->dil_h * (p->kh - 1) + 1, ext_w = (int64_t)p->dil_w * (p->kw - 1) + 1;
    const int64_t oh = ((int64_t)x.h + 2 * p->pad_h - ext_h) / p->stride_h + 1;
    const int64_t ow = ((int64_t)x.w + 2 * p->pad_w - ext_w) / p->stride_w + 1;
    if (x.h + 2 * (int64_t)p->pad_h < ext_h || x.w + 2 * (int64_t)p->pad_w < ext_w)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (conv2d): the %dx%d kernel (dilated) does not fit a %dx%d input",
                          op->id, p->kh, p->kw, x.h, x.w);
    if (w.c != x.c || w.h != p->kh || w.w != p->kw || y.n != x.n || y.c != w.n || y.h != oh || y.w != ow)
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "op %u (conv2d): shapes disagree: x (%d,%d,%d,%d), weight (%d,%d,%d,%d), y (%d,%d,%d,%d); "
                          "expected weight (O,%d,%d,%d) and y (%d,O,%lld,%lld)",
                          op->id, x.n, x.c, x.h, x.w, w.n, w.c, w.h, w.w, y.n, y.c, y.h, y.w, x.c, p->kh, p->kw, x.n,
                          (long long)oh, (long long)ow);
    if (p->has_bias && !tb_shape_eq(op->in[2].shape, (struct tb_shape){ 1, w.n, 1, 1 }))
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (conv2d): bias is (%d,%d,%d,%d), expected (1,%d,1,1)", op->id,
                          op->in[2].shape.n, op->in[2].shape.c, op->in[2].shape.h, op->in[2].shape.w, w.n);

    struct conv_state *s = calloc(1, sizeof *s);
    if (!s)
        return tb_err_set(err, TB_ERR_NOMEM, "op %u (conv2d): out of memory", op->id);
    s->op_id = op->id;
    s->has_bias = p->has_bias != 0;

    dnnl_engine_t eng = cpu->dnnl_engine;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t fwd_pd = NULL, bwdd_pd = NULL, bwdw_pd = NULL;
    dnnl_primitive_desc_t fwd_blk_pd = NULL, bwdd_blk_pd = NULL, bwdw_blk_pd = NULL;
    dnnl_primitive_desc_t ph_fwd_pd = NULL, ph_bwdd_pd = NULL, ph_bwdw_pd = NULL;
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
    const dnnl_dims_t w_dims = { w.n, w.c, w.h, w.w }, b_dims = { w.n };
    /* PyTorch pads symmetrically and drops what the stride does not reach; oneDNN takes
     * the same left/right padding and floors the same way. Its dilation counts the gaps. */
    const dnnl_dims_t strides = { p->stride_h, p->stride_w }, dil = { p->dil_h - 1, p->dil_w - 1 };
    const dnnl_dims_t pad = { p->pad_h, p->pad_w };
    dnnl_memory_desc_t src_md, dst_md, w_any, b_md, zero_md;
    memset(&zero_md, 0, sizeof zero_md);
    TRY(dnnl_memory_desc_init_by_tag(&src_md, 4, src_dims, dnnl_f32, dnnl_nhwc), "src descriptor");
    TRY(dnnl_memory_desc_init_by_tag(&dst_md, 4, dst_dims, dnnl_f32, dnnl_nhwc), "dst descriptor");
    TRY(dnnl_memory_desc_init_by_tag(&s->w_ohwi, 4, w_dims, dnnl_f32, dnnl_ohwi), "weights descriptor");
    TRY(dnnl_memory_desc_init_by_tag(&w_any, 4, w_dims, dnnl_f32, dnnl_format_tag_any), "weights descriptor");
    TRY(dnnl_memory_desc_init_by_tag(&b_md, 1, b_dims, dnnl_f32, dnnl_x), "bias descriptor");
    const dnnl_memory_desc_t *bias_md = s->has_bias ? &b_md : &zero_md;

    TRY(dnnl_primitive_attr_create(&attr), "attributes");
    TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "user scratchpad mode");

    dnnl_convolution_desc_t cd;
    TRY(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct, &src_md, &w_any,
                                                   bias_md, &dst_md, strides, dil, pad, pad),
        "forward descriptor");
    TRY(dnnl_primitive_desc_create(&fwd_pd, &cd, attr, eng, NULL), "forward primitive descriptor");

    /* Blocked activations (see the top of the file), for kernels larger than 1x1 with both
     * channel counts multiples of 8 (the AVX2 block; other counts would pad every pixel,
     * and 1x1 kernels are mostly as fast on nhwc). Backward-weights takes nChw8c at any such
     * count; forward and backward-data only from 32 channels in and out: below that the
     * reorders, which cost per element while the convolution costs per element times
     * channels, outweigh the faster kernel (3x3, N=4, 2 threads: 8->8 and 16->16 ran
     * 25-35% slower blocked, 32->32 broke even, 64->64 to 512->512 gained 20-50%), while
     * blocked backward-weights won everywhere (8->8 on 256x256 3.8x, 16->16 2.7x, 32->32
     * on 128x128 2.2x, 64->64 1.5x over the nhwc GEMM). Each pass takes the nChw8c primitive
     * only when oneDNN gives it a direct kernel, and otherwise stays on nhwc as before (so
     * dilated backward-weights keeps the GEMM path, and the large-dilation forward its
     * padded copy, where the phases below do not apply). 1x1 kernels: only backward-weights, from 256 channels on both
     * sides and 512 on one (see the top of the file). */
    const bool is1x1 = p->kh * p->kw == 1;
    const int cmin = x.c < w.n ? x.c : w.n, cmax = x.c < w.n ? w.n : x.c;
    const bool wide1x1 = is1x1 && cmin >= 256 && cmax >= 512;
    const bool blk_shape = (!is1x1 || wide1x1) && x.c % 8 == 0 && w.n % 8 == 0;
    const bool blk_wide = blk_shape && !is1x1 && x.c >= 32 && w.n >= 32;
    if (blk_shape) {
        TRY(dnnl_memory_desc_init_by_tag(&s->src_blk_md, 4, src_dims, dnnl_f32, dnnl_nChw8c), "blocked src descriptor");
        TRY(dnnl_memory_desc_init_by_tag(&s->dst_blk_md, 4, dst_dims, dnnl_f32, dnnl_nChw8c), "blocked dst descriptor");
        TRY(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct,
                                                       &s->src_blk_md, &w_any, bias_md, &s->dst_blk_md, strides, dil,
                                                       pad, pad),
            "blocked forward descriptor");
        /* No implementation is not an error: that pass stays on nhwc. */
        if (dnnl_primitive_desc_create(&fwd_blk_pd, &cd, attr, eng, NULL) == dnnl_success) {
            TRY(dnnl_dilated_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct, &s->src_blk_md, &w_any,
                                                                 &s->dst_blk_md, strides, dil, pad, pad),
                "blocked backward-data descriptor");
            if (dnnl_primitive_desc_create(&bwdd_blk_pd, &cd, attr, eng, fwd_blk_pd) != dnnl_success)
                bwdd_blk_pd = NULL;
            TRY(dnnl_dilated_convolution_backward_weights_desc_init(&cd, dnnl_convolution_direct, &s->src_blk_md,
                                                                    &w_any, bias_md, &s->dst_blk_md, strides, dil, pad,
                                                                    pad),
                "blocked backward-weights descriptor");
            if (dnnl_primitive_desc_create(&bwdw_blk_pd, &cd, attr, eng, fwd_blk_pd) != dnnl_success)
                bwdw_blk_pd = NULL;
            s->blk_fwd = blk_wide && is_direct(fwd_blk_pd);
            s->blk_bwd_data = blk_wide && bwdd_blk_pd && is_direct(bwdd_blk_pd);
            s->blk_bwd_weights = bwdw_blk_pd && is_direct(bwdw_blk_pd);
        }
    }

    /* Phases (see the top of the file for the rule and its measurements). Each pass takes
     * them only when oneDNN gives the dense nChw8c problem a direct kernel. */
    const bool ph_shape = p->stride_h == 1 && p->stride_w == 1 && (p->dil_h > 1 || p->dil_w > 1) && p->kh % 2 == 1 &&
                          p->kw % 2 == 1 && p->pad_h == p->dil_h * (p->kh - 1) / 2 &&
                          p->pad_w == p->dil_w * (p->kw - 1) / 2 && x.c % 8 == 0 && w.n % 8 == 0;
    if (ph_shape) {
        s->x = x;
        s->y = y;
        s->ph_dh = p->dil_h;
        s->ph_dw = p->dil_w;
        s->ph_h = (x.h + p->dil_h - 1) / p->dil_h;
        s->ph_w = (x.w + p->dil_w - 1) / p->dil_w;
        const dnnl_dim_t pn = (dnnl_dim_t)x.n * p->dil_h * p->dil_w;
        const dnnl_dims_t pxd = { pn, x.c, s->ph_h, s->ph_w }, pyd = { pn, w.n, s->ph_h, s->ph_w };
        const dnnl_dims_t one = { 1, 1 }, nodil = { 0, 0 }, ppad = { (p->kh - 1) / 2, (p->kw - 1) / 2 };
        TRY(dnnl_memory_desc_init_by_tag(&s->ph_src_md, 4, pxd, dnnl_f32, dnnl_nChw8c), "phase src descriptor");
        TRY(dnnl_memory_desc_init_by_tag(&s->ph_dst_md, 4, pyd, dnnl_f32, dnnl_nChw8c), "phase dst descriptor");
        TRY(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct,
                                                       &s->ph_src_md, &w_any, bias_md, &s->ph_dst_md, one, nodil, ppad,
                                                       ppad),
            "phase forward descriptor");
        if (dnnl_primitive_desc_create(&ph_fwd_pd, &cd, attr, eng, NULL) == dnnl_success) {
            TRY(dnnl_dilated_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct, &s->ph_src_md, &w_any,
                                                                 &s->ph_dst_md, one, nodil, ppad, ppad),
                "phase backward-data descriptor");
            if (dnnl_primitive_desc_create(&ph_bwdd_pd, &cd, attr, eng, ph_fwd_pd) != dnnl_success)
                ph_bwdd_pd = NULL;
            TRY(dnnl_dilated_convolution_backward_weights_desc_init(&cd, dnnl_convolution_direct, &s->ph_src_md, &w_any,
                                                                    bias_md, &s->ph_dst_md, one, nodil, ppad, ppad),
                "phase backward-weights descriptor");
            if (dnnl_primitive_desc_create(&ph_bwdw_pd, &cd, attr, eng, ph_fwd_pd) != dnnl_success)
                ph_bwdw_pd = NULL;
            const bool big_dil = p->dil_h >= 4 || p->dil_w >= 4;
            const int ph_min = s->ph_h < s->ph_w ? s->ph_h : s->ph_w;
            s->ph_fwd = !s->blk_fwd && ph_min >= 3 && is_direct(ph_fwd_pd);
            s->ph_bwd_data = (!s->blk_bwd_data || big_dil) && ph_min >= 8 && ph_bwdd_pd && is_direct(ph_bwdd_pd);
            s->ph_bwd_weights = ph_min >= 8 && ph_bwdw_pd && is_direct(ph_bwdw_pd);
        }
        if (s->ph_fwd)
            s->blk_fwd = false;
        if (s->ph_bwd_data)
            s->blk_bwd_data = false;
        if (s->ph_bwd_weights)
            s->blk_bwd_weights = false;
    }

    /* Backward-weights straight from nhwc where cpu_conv_wgrad.c takes it (the rule and its
     * measurements are there); the oneDNN primitive below is then built but not run. */
    s->direct_bwd_weights = tb_cpu_wgrad_init(&s->wg, x, y, p);
    if (s->direct_bwd_weights)
        s->blk_bwd_weights = s->ph_bwd_weights = false;

    if (s->ph_bwd_data) {
        bwdd_pd = ph_bwdd_pd;
        ph_bwdd_pd = NULL;
    } else if (!s->blk_bwd_data) {
        TRY(dnnl_dilated_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct, &src_md, &w_any, &dst_md,
                                                             strides, dil, pad, pad),
            "backward-data descriptor");
        TRY(dnnl_primitive_desc_create(&bwdd_pd, &cd, attr, eng, fwd_pd), "backward-data primitive descriptor");
    } else {
        bwdd_pd = bwdd_blk_pd;
        bwdd_blk_pd = NULL;
    }
    /* Backward-weights of a kernel larger than 1x1 on nhwc: with plain HWIO weight gradients
     * oneDNN takes its im2col+GEMM path, which on AVX2 with nhwc ran 1.3-2.5x faster than the
     * blocked jit kernel it picks by itself (measured on Zen 3, 2 threads: 3x3 64->64 on
     * 4x128x128, 85 vs 50 GFLOP/s), at the price of an im2col scratchpad about the size of
     * one image's im2col buffer (dilated kernels get that path, and that scratchpad, anyway).
     * 1x1 kernels keep oneDNN's choice (jit_1x1, up to 2x faster than the GEMM path). */
    if (s->ph_bwd_weights) {
        bwdw_pd = ph_bwdw_pd;
        ph_bwdw_pd = NULL;
    } else if (!s->blk_bwd_weights) {
        dnnl_memory_desc_t w_hwio;
        TRY(dnnl_memory_desc_init_by_tag(&w_hwio, 4, w_dims, dnnl_f32, dnnl_hwio), "weights descriptor");
        const dnnl_memory_desc_t *dw_md = p->kh * p->kw > 1 ? &w_hwio : &w_any;
        TRY(dnnl_dilated_convolution_backward_weights_desc_init(&cd, dnnl_convolution_direct, &src_md, dw_md, bias_md,
                                                                &dst_md, strides, dil, pad, pad),
            "backward-weights descriptor");
        TRY(dnnl_primitive_desc_create(&bwdw_pd, &cd, attr, eng, fwd_pd), "backward-weights primitive descriptor");
    } else {
        bwdw_pd = bwdw_blk_pd;
        bwdw_blk_pd = NULL;
    }

    if (s->ph_fwd) {
        dnnl_primitive_desc_destroy(fwd_pd);
        fwd_pd = ph_fwd_pd;
        ph_fwd_pd = NULL;
    } else if (s->blk_fwd) {
        dnnl_primitive_desc_destroy(fwd_pd);
        fwd_pd = fwd_blk_pd;
        fwd_blk_pd = NULL;
    } else {
        /* After the backward descriptors, which take the convolution as given as their hint. */
        TRY(try_prepad(s, &fwd_pd, op, &w_any, bias_md, attr, eng), "padded forward");
    }
    s->w_fwd = *dnnl_primitive_desc_query_md(fwd_pd, dnnl_query_weights_md, 0);
    s->w_bwd_data = *dnnl_primitive_desc_query_md(bwdd_pd, dnnl_query_weights_md, 0);
    s->dw_bwd = *dnnl_primitive_desc_query_md(bwdw_pd, dnnl_query_diff_weights_md, 0);

    TRY(prim_init(&s->fwd, fwd_pd, eng), "forward primitive");
    TRY(prim_init(&s->bwd_data, bwdd_pd, eng), "backward-data primitive");
    TRY(prim_init(&s->bwd_weights, bwdw_pd, eng), "backward-weights primitive");
    TRY(reorder_init(&s->w_to_fwd, &s->w_ohwi, &s->w_fwd, eng, attr), "weights reorder for forward");
    TRY(reorder_init(&s->w_to_bwd_data, &s->w_ohwi, &s->w_bwd_data, eng, attr), "weights reorder for backward-data");
    TRY(reorder_init(&s->dw_to_ohwi, &s->dw_bwd, &s->w_ohwi, eng, attr), "weight-gradient reorder to OHWI");
    if (s->blk_fwd || s->blk_bwd_weights)
        TRY(reorder_init(&s->src_to_blk, &src_md, &s->src_blk_md, eng, attr), "src reorder to nChw8c");
    if (s->blk_fwd)
        TRY(reorder_init(&s->dst_from_blk, &s->dst_blk_md, &dst_md, eng, attr), "dst reorder from nChw8c");
    if (s->blk_bwd_data || s->blk_bwd_weights)
        TRY(reorder_init(&s->dst_to_blk, &dst_md, &s->dst_blk_md, eng, attr), "diff_dst reorder to nChw8c");
    if (s->blk_bwd_data)
        TRY(reorder_init(&s->src_from_blk, &s->src_blk_md, &src_md, eng, attr), "diff_src reorder from nChw8c");
    if (s->blk_fwd || s->blk_bwd_data || s->blk_bwd_weights) {
        TRY(dnnl_memory_create(&s->src_blk, &s->src_blk_md, eng, DNNL_MEMORY_NONE), "blocked src memory");
        TRY(dnnl_memory_create(&s->dst_blk, &s->dst_blk_md, eng, DNNL_MEMORY_NONE), "blocked dst memory");
    }
    if (s->ph_fwd || s->ph_bwd_data || s->ph_bwd_weights) {
        TRY(dnnl_memory_create(&s->ph_src, &s->ph_src_md, eng, DNNL_MEMORY_NONE), "phase src memory");
        TRY(dnnl_memory_create(&s->ph_dst, &s->ph_dst_md, eng, DNNL_MEMORY_NONE), "phase dst memory");
    }

    TRY(dnnl_memory_create(&s->src, &src_md, eng, DNNL_MEMORY_NONE), "src memory");
    TRY(dnnl_memory_create(&s->dst, &dst_md, eng, DNNL_MEMORY_NONE), "dst memory");
    TRY(dnnl_memory_create(&s->w_user, &s->w_ohwi, eng, DNNL_MEMORY_NONE), "weights memory");
    TRY(dnnl_memory_create(&s->w_fwd_mem, &s->w_fwd, eng, DNNL_MEMORY_NONE), "weights memory");
    TRY(dnnl_memory_create(&s->w_bwdd_mem, &s->w_bwd_data, eng, DNNL_MEMORY_NONE), "weights memory");
    TRY(dnnl_memory_create(&s->dw_bwd_mem, &s->dw_bwd, eng, DNNL_MEMORY_NONE), "weight-gradient memory");
    if (s->has_bias)
        TRY(dnnl_memory_create(&s->bias, &b_md, eng, DNNL_MEMORY_NONE), "bias memory");

    if (tb_log_enabled(TB_LOG_DEBUG))
        tb_plog(TB_LOG_DEBUG, "op %u: conv2d %dx%d %d->%d: forward %s%s, backward-data %s%s, backward-weights %s%s%s%s",
                op->id, p->kh, p->kw, x.c, w.n, impl_of(fwd_pd),
                s->ph_fwd    ? " (phases)"
                : s->blk_fwd ? " (nChw8c)"
                             : "",
                impl_of(bwdd_pd),
                s->ph_bwd_data    ? " (phases)"
                : s->blk_bwd_data ? " (nChw8c)"
                                  : "",
                s->direct_bwd_weights ? "direct" : impl_of(bwdw_pd),
                s->ph_bwd_weights    ? " (phases)"
                : s->blk_bwd_weights ? " (nChw8c)"
                                     : "",
                s->w_to_fwd.p || s->w_to_bwd_data.p || s->dw_to_ohwi.p ? " (weights reordered)" : "",
                s->src_padded ? " (forward on a padded copy)" : "");
    goto done;

dnnl_fail:
    rc = tb_err_set(err, TB_ERR_RUNTIME, "op %u (conv2d): oneDNN: %s: %s", op->id, what, status_str(st));
done:
#undef TRY
    if (fwd_pd)
        dnnl_primitive_desc_destroy(fwd_pd);
    if (bwdd_pd)
        dnnl_primitive_desc_destroy(bwdd_pd);
    if (bwdw_pd)
        dnnl_primitive_desc_destroy(bwdw_pd);
    if (fwd_blk_pd)
        dnnl_primitive_desc_destroy(fwd_blk_pd);
    if (bwdd_blk_pd)
        dnnl_primitive_desc_destroy(bwdd_blk_pd);
    if (bwdw_blk_pd)
        dnnl_primitive_desc_destroy(bwdw_blk_pd);
    if (ph_fwd_pd)
        dnnl_primitive_desc_destroy(ph_fwd_pd);
    if (ph_bwdd_pd)
        dnnl_primitive_desc_destroy(ph_bwdd_pd);
    if (ph_bwdw_pd)
        dnnl_primitive_desc_destroy(ph_bwdw_pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (rc) {
        conv_release(s);
        return rc;
    }
    *state = s;
    return TB_OK;
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

/* Reorders `from` into `to` with pr (a no-op when pr has no primitive). */
static int reorder(const struct conv_state *s, struct tb_cpu *cpu, const struct prim *pr, dnnl_memory_t from,
                   dnnl_memory_t to, void *spad, const char *what, struct tb_err *err)
{
    if (!pr->p)
        return TB_OK;
    dnnl_exec_arg_t args[3] = { { DNNL_ARG_FROM, from }, { DNNL_ARG_TO, to } };
    return run(s, cpu, pr, 2, args, spad, what, err);
}

static size_t md_bytes(const dnnl_memory_desc_t *md)
{
    return dnnl_memory_desc_get_size(md);
}

static size_t max_size(size_t a, size_t b)
{
    return a > b ? a : b;
}

/* One image x (NHWC, H x W) into the middle of xp, an NHWC image of (H + 2 pad_h) x
 * (W + 2 pad_w), and zeros around it. xp is scratch another op may have left anything in:
 * every element is written. */
static void copy_padded(const struct conv_state *s, const float *x, float *xp)
{
    const size_t C = (size_t)s->x.c, W = (size_t)s->x.w, H = (size_t)s->x.h;
    const size_t pw = (size_t)s->pad_w, ph = (size_t)s->pad_h;
    const size_t Wp = W + 2 * pw, Hp = H + 2 * ph;
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < Hp; r++) {
        float *dst = xp + r * Wp * C;
        if (r < ph || r >= ph + H) {
            memset(dst, 0, Wp * C * sizeof *dst);
            continue;
        }
        memset(dst, 0, pw * C * sizeof *dst);
        memcpy(dst + pw * C, x + (r - ph) * W * C, W * C * sizeof *dst);
        memset(dst + (pw + W) * C, 0, pw * C * sizeof *dst);
    }
}

/* Phases (see the top of the file): a (NHWC, n x H x W x C, C a multiple of 8) into ap: nChw8c, n*dh*dw images of
 * C x ph_h x ph_w, phase image (i*dh + py)*dw + px holding the pixels (dh*Y + py, dw*X + px)
 * of image i, and zeros where those fall past the edge. ap is scratch: every element is
 * written. */
static void phase_gather(const struct conv_state *s, const float *a, float *ap, int n, int c)
{
    const size_t H = (size_t)s->x.h, W = (size_t)s->x.w, C = (size_t)c, CB = C / 8;
    const size_t dh = (size_t)s->ph_dh, dw = (size_t)s->ph_dw, Hp = (size_t)s->ph_h, Wp = (size_t)s->ph_w;
    const long rows = (long)((size_t)n * dh * dw * CB * Hp);
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const size_t hp = (size_t)r % Hp, t = (size_t)r / Hp, cb = t % CB, nn = t / CB;
        const size_t px = nn % dw, py = nn / dw % dh, i = nn / (dw * dh), h = hp * dh + py;
        float *dst = ap + (size_t)r * Wp * 8;
        if (h >= H) {
            memset(dst, 0, Wp * 8 * sizeof *dst);
            continue;
        }
        const float *src = a + ((i * H + h) * W + px) * C + cb * 8;
        size_t wp = 0;
        for (; wp * dw + px < W; wp++)
            memcpy(dst + wp * 8, src + wp * dw * C, 8 * sizeof *dst);
        if (wp < Wp)
            memset(dst + wp * 8, 0, (Wp - wp) * 8 * sizeof *dst);
    }
}

/* The inverse of phase_gather, for the pixels inside the image: ap (phases, nChw8c) into a
 * (NHWC, n x H x W x c). */
static void phase_scatter(const struct conv_state *s, const float *ap, float *a, int n, int c)
{
    const size_t H = (size_t)s->x.h, W = (size_t)s->x.w, C = (size_t)c, CB = C / 8;
    const size_t dh = (size_t)s->ph_dh, dw = (size_t)s->ph_dw, Hp = (size_t)s->ph_h, Wp = (size_t)s->ph_w;
    const long rows = (long)((size_t)n * H);
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const size_t h = (size_t)r % H, i = (size_t)r / H, py = h % dh, hp = h / dh;
        float *dst = a + (size_t)r * W * C;
        for (size_t w = 0; w < W; w++) {
            const size_t nn = (i * dh + py) * dw + w % dw;
            const float *src = ap + ((nn * CB * Hp + hp) * Wp + w / dw) * 8;
            for (size_t cb = 0; cb < CB; cb++)
                memcpy(dst + w * C + cb * 8, src + cb * Hp * Wp * 8, 8 * sizeof *dst);
        }
    }
}

static int conv_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                        const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)op;
    (void)step;
    struct conv_state *s = state;
    /* Scratch: [weights in the forward layout][one padded image][blocked src][blocked dst]
     * [scratchpad, shared by the reorders and the conv: they run one after the other]. */
    size_t total = 0;
    size_t w_at = s->w_to_fwd.p ? carve(&total, md_bytes(&s->w_fwd)) : 0;
    size_t xp_at = s->src_padded ? carve(&total, md_bytes(&s->src_padded_md)) : 0;
    size_t xb_at = s->blk_fwd ? carve(&total, md_bytes(&s->src_blk_md)) : 0;
    size_t yb_at = s->blk_fwd ? carve(&total, md_bytes(&s->dst_blk_md)) : 0;
    size_t pxs_at = s->ph_fwd ? carve(&total, md_bytes(&s->ph_src_md)) : 0;
    size_t pys_at = s->ph_fwd ? carve(&total, md_bytes(&s->ph_dst_md)) : 0;
    size_t spad = max_size(md_bytes(&s->fwd.spad), md_bytes(&s->w_to_fwd.spad));
    spad = max_size(spad, max_size(md_bytes(&s->src_to_blk.spad), md_bytes(&s->dst_from_blk.spad)));
    size_t spad_at = carve(&total, spad);
    char *scratch = tb_cpu_scratch(cpu, total, err);
    if (!scratch)
        return tb_err_prefix(err, "op %u (conv2d)", s->op_id);
    void *w = s->w_to_fwd.p ? (void *)(scratch + w_at) : in[1].data;
    int rc;
    if ((rc = set_handle(s, s->w_user, in[1].data, err)) || (rc = set_handle(s, s->w_fwd_mem, w, err)) ||
        (rc = set_handle(s, s->src, in[0].data, err)) || (rc = set_handle(s, s->dst, out[0].data, err)) ||
        (s->has_bias && (rc = set_handle(s, s->bias, in[2].data, err))))
        return rc;
    rc = reorder(s, cpu, &s->w_to_fwd, s->w_user, s->w_fwd_mem, scratch + spad_at, "weights reorder", err);
    if (rc)
        return rc;
    if (s->ph_fwd) {
        if ((rc = set_handle(s, s->ph_src, scratch + pxs_at, err)) ||
            (rc = set_handle(s, s->ph_dst, scratch + pys_at, err)))
            return rc;
        phase_gather(s, in[0].data, (float *)(scratch + pxs_at), s->x.n, s->x.c);
        dnnl_exec_arg_t args[5] = { { DNNL_ARG_SRC, s->ph_src },
                                    { DNNL_ARG_WEIGHTS, s->w_fwd_mem },
                                    { DNNL_ARG_DST, s->ph_dst } };
        int nargs = 3;
        if (s->has_bias)
            args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, s->bias };
        if ((rc = run(s, cpu, &s->fwd, nargs, args, scratch + spad_at, "forward", err)))
            return rc;
        phase_scatter(s, (const float *)(scratch + pys_at), out[0].data, s->y.n, s->y.c);
        return TB_OK;
    }
    if (s->blk_fwd) {
        if ((rc = set_handle(s, s->src_blk, scratch + xb_at, err)) ||
            (rc = set_handle(s, s->dst_blk, scratch + yb_at, err)))
            return rc;
        rc = reorder(s, cpu, &s->src_to_blk, s->src, s->src_blk, scratch + spad_at, "src reorder to nChw8c", err);
        if (rc)
            return rc;
        dnnl_exec_arg_t args[5] = { { DNNL_ARG_SRC, s->src_blk },
                                    { DNNL_ARG_WEIGHTS, s->w_fwd_mem },
                                    { DNNL_ARG_DST, s->dst_blk } };
        int nargs = 3;
        if (s->has_bias)
            args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, s->bias };
        if ((rc = run(s, cpu, &s->fwd, nargs, args, scratch + spad_at, "forward", err)))
            return rc;
        return reorder(s, cpu, &s->dst_from_blk, s->dst_blk, s->dst, scratch + spad_at, "dst reorder from nChw8c", err);
    }
    if (!s->src_padded) {
        dnnl_exec_arg_t args[5] = { { DNNL_ARG_SRC, s->src },
                                    { DNNL_ARG_WEIGHTS, s->w_fwd_mem },
                                    { DNNL_ARG_DST, s->dst } };
        int nargs = 3;
        if (s->has_bias)
            args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, s->bias };
        return run(s, cpu, &s->fwd, nargs, args, scratch + spad_at, "forward", err);
    }
    /* Image by image: pad it into scratch, convolve into its slice of y. */
    const size_t x_image = (size_t)s->x.h * s->x.w * s->x.c, y_image = (size_t)s->y.h * s->y.w * s->y.c;
    float *xp = (float *)(scratch + xp_at);
    if ((rc = set_handle(s, s->src_padded, xp, err)))
        return rc;
    for (int n = 0; n < s->x.n; n++) {
        copy_padded(s, (const float *)in[0].data + (size_t)n * x_image, xp);
        if ((rc = set_handle(s, s->dst_image, (float *)out[0].data + (size_t)n * y_image, err)))
            return rc;
        dnnl_exec_arg_t args[5] = { { DNNL_ARG_SRC, s->src_padded },
                                    { DNNL_ARG_WEIGHTS, s->w_fwd_mem },
                                    { DNNL_ARG_DST, s->dst_image } };
        int nargs = 3;
        if (s->has_bias)
            args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, s->bias };
        if ((rc = run(s, cpu, &s->fwd, nargs, args, scratch + spad_at, "forward", err)))
            return rc;
    }
    return TB_OK;
}

static int conv_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                         const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                         struct tb_err *err)
{
    (void)out;
    struct conv_state *s = state;
    const bool want_dx = din[0].data != NULL;
    bool want_dw = din[1].data != NULL;
    bool want_db = s->has_bias && din[2].data != NULL;
    if (!want_dx && !want_dw && !want_db)
        return TB_OK;
    if (!dout[0].data)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (conv2d): backward without an output gradient", s->op_id);
    if (s->direct_bwd_weights && (want_dw || want_db)) {
        char *ws = tb_cpu_scratch(cpu, tb_cpu_wgrad_scratch(&s->wg, cpu->threads), err);
        if (!ws)
            return tb_err_prefix(err, "op %u (conv2d)", s->op_id);
        tb_cpu_wgrad_run(&s->wg, cpu->threads, in[0].data, dout[0].data, want_dw ? din[1].data : NULL,
                         want_db ? din[2].data : NULL, ws);
        want_dw = want_db = false;
        if (!want_dx)
            return TB_OK;
    }

    /* Scratch: [weights for backward-data][weight gradient in oneDNN's layout, or a sink
     * when only the bias gradient is wanted][bias-gradient sink], then a region for the
     * passes. With blocked backward-weights: [blocked src, later the blocked diff_src]
     * [blocked diff_dst][scratchpad, shared: the primitives run one after the other].
     * Otherwise backward-weights (and the weight-gradient reorder) use the region as their
     * scratchpad first (GEMM: an im2col buffer), and backward-data then lays out
     * [blocked diff_src][blocked diff_dst][scratchpad] over it, so the blocked copies cost
     * no memory beyond that im2col buffer when they fit in it. */
    const bool want_wb = want_dw || want_db;
    const bool w_in_scratch = want_dx && s->w_to_bwd_data.p;
    const bool dw_in_scratch = want_wb && (s->dw_to_ohwi.p || !want_dw);
    const bool db_in_scratch = s->has_bias && !want_db && want_dw;
    const bool blk_w = want_wb && s->blk_bwd_weights, blk_d = want_dx && s->blk_bwd_data;
    size_t total = 0;
    size_t w_at = w_in_scratch ? carve(&total, md_bytes(&s->w_bwd_data)) : 0;
    size_t dw_at = dw_in_scratch ? carve(&total, md_bytes(&s->dw_bwd)) : 0;
    size_t db_at = db_in_scratch ? carve(&total, (size_t)op->in[1].shape.n * sizeof(float)) : 0;
    size_t spad = md_bytes(&s->bwd_data.spad);
    spad = max_size(spad, md_bytes(&s->w_to_bwd_data.spad));
    spad = max_size(spad, max_size(md_bytes(&s->src_to_blk.spad), md_bytes(&s->src_from_blk.spad)));
    spad = max_size(spad, md_bytes(&s->dst_to_blk.spad));
    const size_t wspad = max_size(md_bytes(&s->bwd_weights.spad), md_bytes(&s->dw_to_ohwi.spad));
    const bool ph_w = want_wb && s->ph_bwd_weights, ph_d = want_dx && s->ph_bwd_data;
    size_t xb_at = 0, yb_at = 0, pxs_at = 0, pys_at = 0, spad_at, wspad_at;
    if (ph_w || ph_d) {
        pxs_at = carve(&total, md_bytes(&s->ph_src_md));
        pys_at = carve(&total, md_bytes(&s->ph_dst_md));
        if (blk_w || blk_d) {
            xb_at = carve(&total, md_bytes(&s->src_blk_md));
            yb_at = carve(&total, md_bytes(&s->dst_blk_md));
        }
        spad_at = wspad_at = carve(&total, max_size(spad, wspad));
    } else if (blk_w) {
        xb_at = carve(&total, md_bytes(&s->src_blk_md));
        yb_at = carve(&total, md_bytes(&s->dst_blk_md));
        spad_at = wspad_at = carve(&total, max_size(spad, wspad));
    } else {
        size_t region = total;
        wspad_at = carve(&region, want_wb ? wspad : 0);
        if (blk_d) {
            xb_at = carve(&total, md_bytes(&s->src_blk_md));
            yb_at = carve(&total, md_bytes(&s->dst_blk_md));
        }
        spad_at = carve(&total, spad);
        total = max_size(total, region);
    }
    char *scratch = tb_cpu_scratch(cpu, total, err);
    if (!scratch)
        return tb_err_prefix(err, "op %u (conv2d)", s->op_id);

    int rc;
    if ((rc = set_handle(s, s->src, in[0].data, err)) || (rc = set_handle(s, s->dst, dout[0].data, err)))
        return rc;
    if ((blk_w || blk_d) && ((rc = set_handle(s, s->src_blk, scratch + xb_at, err)) ||
                             (rc = set_handle(s, s->dst_blk, scratch + yb_at, err))))
        return rc;
    if (ph_w || ph_d) {
        if ((rc = set_handle(s, s->ph_src, scratch + pxs_at, err)) ||
            (rc = set_handle(s, s->ph_dst, scratch + pys_at, err)))
            return rc;
        /* diff_dst into its phases once, for both passes. */
        phase_gather(s, dout[0].data, (float *)(scratch + pys_at), s->y.n, s->y.c);
    }
    /* diff_dst into nChw8c once, for both passes (after backward-weights when that one
     * runs on nhwc: its scratchpad shares the memory). */
    if (blk_w) {
        rc = reorder(s, cpu, &s->dst_to_blk, s->dst, s->dst_blk, scratch + spad_at, "diff_dst reorder to nChw8c", err);
        if (rc)
            return rc;
    }
    if (want_wb) {
        void *dw = dw_in_scratch ? (void *)(scratch + dw_at) : din[1].data;
        if ((rc = set_handle(s, s->dw_bwd_mem, dw, err)))
            return rc;
        if (blk_w) {
            rc = reorder(s, cpu, &s->src_to_blk, s->src, s->src_blk, scratch + wspad_at, "src reorder to nChw8c", err);
            if (rc)
                return rc;
        }
        if (ph_w)
            phase_gather(s, in[0].data, (float *)(scratch + pxs_at), s->x.n, s->x.c);
        dnnl_exec_arg_t args[5] = { { DNNL_ARG_SRC, ph_w    ? s->ph_src
                                                    : blk_w ? s->src_blk
                                                            : s->src },
                                    { DNNL_ARG_DIFF_DST, ph_w    ? s->ph_dst
                                                         : blk_w ? s->dst_blk
                                                                 : s->dst },
                                    { DNNL_ARG_DIFF_WEIGHTS, s->dw_bwd_mem } };
        int nargs = 3;
        if (s->has_bias) {
            if ((rc = set_handle(s, s->bias, db_in_scratch ? (void *)(scratch + db_at) : din[2].data, err)))
                return rc;
            args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_BIAS, s->bias };
        }
        rc = run(s, cpu, &s->bwd_weights, nargs, args, scratch + wspad_at, "backward-weights", err);
        if (rc)
            return rc;
        if (want_dw && s->dw_to_ohwi.p) {
            if ((rc = set_handle(s, s->w_user, din[1].data, err)))
                return rc;
            rc = reorder(s, cpu, &s->dw_to_ohwi, s->dw_bwd_mem, s->w_user, scratch + wspad_at,
                         "weight-gradient reorder", err);
            if (rc)
                return rc;
        }
    }
    if (want_dx) {
        void *w = w_in_scratch ? (void *)(scratch + w_at) : in[1].data;
        if ((rc = set_handle(s, s->w_user, in[1].data, err)) || (rc = set_handle(s, s->w_bwdd_mem, w, err)))
            return rc;
        rc = reorder(s, cpu, &s->w_to_bwd_data, s->w_user, s->w_bwdd_mem, scratch + spad_at, "weights reorder", err);
        if (rc)
            return rc;
        /* src/dst memory objects describe diff_src/diff_dst here: same shapes, same layouts.
         * The blocked src is no longer needed: the blocked diff_src takes its place. */
        if ((rc = set_handle(s, s->src, din[0].data, err)))
            return rc;
        if (blk_d && !blk_w) {
            rc = reorder(s, cpu, &s->dst_to_blk, s->dst, s->dst_blk, scratch + spad_at, "diff_dst reorder to nChw8c",
                         err);
            if (rc)
                return rc;
        }
        dnnl_exec_arg_t args[4] = { { DNNL_ARG_DIFF_DST, ph_d    ? s->ph_dst
                                                         : blk_d ? s->dst_blk
                                                                 : s->dst },
                                    { DNNL_ARG_WEIGHTS, s->w_bwdd_mem },
                                    { DNNL_ARG_DIFF_SRC, ph_d    ? s->ph_src
                                                         : blk_d ? s->src_blk
                                                                 : s->src } };
        rc = run(s, cpu, &s->bwd_data, 3, args, scratch + spad_at, "backward-data", err);
        if (rc)
            return rc;
        if (ph_d)
            phase_scatter(s, (const float *)(scratch + pxs_at), din[0].data, s->x.n, s->x.c);
        if (blk_d) {
            rc = reorder(s, cpu, &s->src_from_blk, s->src_blk, s->src, scratch + spad_at,
                         "diff_src reorder from nChw8c", err);
            if (rc)
                return rc;
        }
    }
    return TB_OK;
}

const struct tb_cpu_kernel tb_cpu_conv2d_kernel = {
    .prepare = conv_prepare,
    .release = conv_release,
    .forward = conv_forward,
    .backward = conv_backward,
};
