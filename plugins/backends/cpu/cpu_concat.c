/* backends/cpu/cpu_concat.c: concatenation along channels of 2..8 inputs.
 *
 * A copy per pixel: the output pixel's channels are the inputs' pixels' channels one after
 * the other (C0 values, then C1, ...). The inputs and the output may each be NHWC or
 * blocked (their C decides, cpu_shared.h), so a pixel's channels are copied in runs that
 * are contiguous on both sides: all of them between NHWC tensors, up to a block otherwise.
 * Backward copies the slices back out. Any element size: the 16-bit dtypes too. */
#include <string.h>

#include "cpu_shared.h"

/* Where one pixel's channels live in a tensor: channel c at base + (c / e) * stride + c % e,
 * with e the channel block (C itself for NHWC, whose one "block" is the whole pixel). */
struct pixel_map {
    size_t e, stride, cb;
};

static struct pixel_map pixel_map(const struct tb_cpu *cpu, const struct tb_tensor_desc *d)
{
    const int b = tb_cpu_blk(cpu, d);
    const size_t hw = (size_t)d->shape.h * (size_t)d->shape.w;
    const size_t e = b ? (size_t)b : (size_t)d->shape.c;
    return (struct pixel_map){ e, hw * e, (size_t)d->shape.c / e };
}

/* Offset of channel 0 of pixel p (in image n) of a tensor mapped by m. */
static inline size_t pixel_base(const struct pixel_map *m, size_t n, size_t p)
{
    return n * m->cb * m->stride + p * m->e;
}

/* Copies channels [fc, fc + len) of one pixel of `from` (map fm, base fb) to channels
 * [tc, tc + len) of one pixel of `to` (map tm, base tb), in runs contiguous on both sides:
 * forward puts an input's channels at its offset in y (fc = 0), backward takes them back
 * out (tc = 0). */
static inline void copy_channels(char *to, const struct pixel_map *tm, size_t tb, size_t tc, const char *from,
                                 const struct pixel_map *fm, size_t fb, size_t fc, size_t len, size_t es)
{
    for (size_t c = 0; c < len;) {
        const size_t t = tc + c, f = fc + c;
        size_t run = len - c;
        if (fm->e - f % fm->e < run)
            run = fm->e - f % fm->e;
        if (tm->e - t % tm->e < run)
            run = tm->e - t % tm->e;
        memcpy(to + (tb + t / tm->e * tm->stride + t % tm->e) * es,
               from + (fb + f / fm->e * fm->stride + f % fm->e) * es, run * es);
        c += run;
    }
}

static int concat_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                          const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)step;
    (void)err;
    struct tb_shape ys = op->out[0].shape;
    char *y = out[0].data; /* (N, sum Ci, H, W) */
    const size_t hw = (size_t)ys.h * (size_t)ys.w, pixels = (size_t)ys.n * hw, es = tb_dtype_size(op->out[0].dtype);
    const uint32_t k = op->nin;
    struct pixel_map ym = pixel_map(cpu, &op->out[0]), xm[TB_OP_MAX_IN];
    for (uint32_t i = 0; i < k; i++)
        xm[i] = pixel_map(cpu, &op->in[i]);
#pragma omp parallel for schedule(static)
    for (size_t q = 0; q < pixels; q++) {
        const size_t n = q / hw, p = q % hw;
        size_t c0 = 0;
        for (uint32_t i = 0; i < k; i++) {
            const size_t ci = (size_t)op->in[i].shape.c;
            copy_channels(y, &ym, pixel_base(&ym, n, p), c0, in[i].data, &xm[i], pixel_base(&xm[i], n, p), 0, ci, es);
            c0 += ci;
        }
    }
    return TB_OK;
}

static int concat_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                           const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                           struct tb_err *err)
{
    (void)state;
    (void)in;
    (void)out;
    (void)err;
    struct tb_shape ys = op->out[0].shape;
    const char *dy = dout[0].data; /* (N, sum Ci, H, W) */
    const size_t hw = (size_t)ys.h * (size_t)ys.w, pixels = (size_t)ys.n * hw, es = tb_dtype_size(op->out[0].dtype);
    const uint32_t k = op->nin;
    struct pixel_map ym = pixel_map(cpu, &op->out[0]), xm[TB_OP_MAX_IN];
    for (uint32_t i = 0; i < k; i++)
        xm[i] = pixel_map(cpu, &op->in[i]);
#pragma omp parallel for schedule(static)
    for (size_t q = 0; q < pixels; q++) {
        const size_t n = q / hw, p = q % hw;
        size_t c0 = 0;
        for (uint32_t i = 0; i < k; i++) {
            const size_t ci = (size_t)op->in[i].shape.c;
            char *dx = din[i].data; /* (N,Ci,H,W), or NULL when not wanted */
            if (dx)
                copy_channels(dx, &xm[i], pixel_base(&xm[i], n, p), 0, dy, &ym, pixel_base(&ym, n, p), c0, ci, es);
            c0 += ci;
        }
    }
    return TB_OK;
}

const struct tb_cpu_kernel TB_CPU_KERNEL(concat) = {
    .forward = concat_forward,
    .backward = concat_backward,
    .dtypes = 1u << TB_BF16 | 1u << TB_F16,
};
