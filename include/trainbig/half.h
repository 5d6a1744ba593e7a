/* trainbig/half.h: the 16-bit floats' bits to and from float, on the host.
 *
 * TB_BF16 and TB_F16 tensors (trainbig/tensor.h) hold uint16_t bit patterns. Converting
 * from float rounds to nearest, ties to even, as CUDA's __float2bfloat16 and __float2half
 * and PyTorch's .to() do; NaN stays NaN (quiet), infinities stay infinite, a float past the
 * 16-bit format's largest finite value becomes infinity, and f16's subnormals are kept.
 * Converting to float is exact. Backends convert on the device with their own code; these
 * are for the core, tools and tests (checkpoints, host copies). */
#ifndef TRAINBIG_HALF_H
#define TRAINBIG_HALF_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A float's bits and back (what the conversions below work on). */
static inline uint32_t tb_float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float tb_float_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* bfloat16: the top 16 bits of the float, rounded. */
static inline uint16_t tb_bf16_from_f32(float f)
{
    const uint32_t u = tb_float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep its sign, make it quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    /* adding 0x7fff plus the lowest kept bit rounds to nearest, ties to even; a carry into
     * the exponent is the right result, up to infinity */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline float tb_f32_from_bf16(uint16_t h)
{
    return tb_float_from_bits((uint32_t)h << 16);
}

/* binary16: sign, 5 exponent bits (bias 15), 10 fraction bits. */
static inline uint16_t tb_f16_from_f32(float f)
{
    const uint32_t u = tb_float_bits(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: quiet, its top fraction bits kept */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x03ffu));
    if (a >= 0x477ff000u) /* 65520 and above round past 65504: infinity (and inf itself) */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* 2^-14 and above: a normal f16 */
        /* rebias the exponent (127 -> 15), then round the 13 dropped bits to even; a carry
         * into the exponent is the right result */
        const uint32_t r = a - 0x38000000u;
        return (uint16_t)(sign | ((r + 0x0fffu + ((r >> 13) & 1u)) >> 13));
    }
    if (a < 0x33000000u) /* under 2^-25, half the smallest subnormal: zero (2^-25 itself is a tie to 0) */
        return sign;
    /* a subnormal f16: the significand with its hidden bit, shifted to units of 2^-24 */
    const uint32_t e = a >> 23, m = (a & 0x007fffffu) | 0x00800000u;
    const uint32_t shift = 126u - e; /* 14 .. 24: the value is m 2^(e - 150), a unit 2^-24 */
    const uint32_t q = m >> shift, rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    return (uint16_t)(sign | (q + (rest > half || (rest == half && (q & 1u)))));
}

static inline float tb_f32_from_f16(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x03ffu;
    if (e == 0x1f) /* infinity or NaN */
        return tb_float_from_bits(sign | 0x7f800000u | (m << 13));
    if (e)
        return tb_float_from_bits(sign | ((e + 112u) << 23) | (m << 13));
    /* zero or subnormal: m 2^-24, exact in a float */
    const float v = (float)m * 5.9604644775390625e-8f;
    return sign ? -v : v;
}

#ifdef __cplusplus
}
#endif
#endif
