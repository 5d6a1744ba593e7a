/* backends/cpu/cpu_cast.c: element conversions between the float dtypes, and the cast op
 * (TB_OP_CAST, trainbig/ops.h) made of them; built once per ISA like the other kernels
 * (the loops vectorise at the ISA's width), tb_cpu_convert picks the backend's.
 *
 * Conversions round as trainbig/half.h does (nearest, ties to even; NaN kept), element by
 * element, so their bits depend on neither the thread count nor the layout: a tensor and
 * its converted copy have one layout (cpu_shared.h decides it by shape), so a flat loop
 * converts every element in place order. */
#include "config.h"

#include <string.h>
#include <trainbig/half.h>

#include "cpu_shared.h"

/* Below this many elements one thread converts: a parallel region costs more. */
#define PARALLEL_FROM 32768

void TB_CPU_ISA_FN(convert)(void *dst, enum tb_dtype to, const void *src, enum tb_dtype from, size_t n)
{
    const long long count = (long long)n;
    const int par = n >= PARALLEL_FROM;
    if (to == from) {
        memcpy(dst, src, n * tb_dtype_size(to));
        return;
    }
    if (from == TB_F32 && to == TB_BF16) {
        const float *s = src;
        uint16_t *d = dst;
#pragma omp parallel for simd schedule(static) if (par)
        for (long long i = 0; i < count; i++)
            d[i] = tb_bf16_from_f32(s[i]);
    } else if (from == TB_BF16 && to == TB_F32) {
        const uint16_t *s = src;
        float *d = dst;
#pragma omp parallel for simd schedule(static) if (par)
        for (long long i = 0; i < count; i++)
            d[i] = tb_f32_from_bf16(s[i]);
    } else if (from == TB_F32 && to == TB_F16) {
        const float *s = src;
        uint16_t *d = dst;
#pragma omp parallel for simd schedule(static) if (par)
        for (long long i = 0; i < count; i++)
            d[i] = tb_f16_from_f32(s[i]);
    } else if (from == TB_F16 && to == TB_F32) {
        const uint16_t *s = src;
        float *d = dst;
#pragma omp parallel for simd schedule(static) if (par)
        for (long long i = 0; i < count; i++)
            d[i] = tb_f32_from_f16(s[i]);
    } else { /* between the 16-bit ones: through the exact float, rounded once */
        const uint16_t *s = src;
        uint16_t *d = dst;
        const bool to_f16 = to == TB_F16;
#pragma omp parallel for simd schedule(static) if (par)
        for (long long i = 0; i < count; i++)
            d[i] = to_f16 ? tb_f16_from_f32(tb_f32_from_bf16(s[i])) : tb_bf16_from_f32(tb_f32_from_f16(s[i]));
    }
}

static int cast_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                        const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)cpu, (void)state, (void)step, (void)err;
    TB_CPU_ISA_FN(convert)
    (out[0].data, out[0].desc.dtype, in[0].data, in[0].desc.dtype, tb_shape_elems(op->in[0].shape));
    return TB_OK;
}

static int cast_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                         const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                         struct tb_err *err)
{
    (void)cpu, (void)state, (void)in, (void)out, (void)err;
    if (din[0].data)
        TB_CPU_ISA_FN(convert)
    (din[0].data, din[0].desc.dtype, dout[0].data, dout[0].desc.dtype, tb_shape_elems(op->in[0].shape));
    return TB_OK;
}

const struct tb_cpu_kernel TB_CPU_KERNEL(cast) = { NULL, NULL, cast_forward, cast_backward, NULL,
                                                  1u << TB_BF16 | 1u << TB_F16 };
