/* backends/cpu/cpu_vmath.h: e^x and ln x in float, written so that a loop under
 * `#pragma omp simd` vectorises on every kernel ISA. libm's expf and logf are calls the
 * compiler can only vectorise with -ffast-math (glibc's vector variants), which would
 * change every other kernel's arithmetic too; these are straight-line float and integer
 * operations instead, the same bits on every ISA (no fused multiply-adds: the kernels
 * build as ISO C, where GCC does not contract).
 *
 * Accuracy (tests/check_ops.c, vmath_against_libm, measures it against double exp and
 * log over every float of the ranges below): within 2 ulp of the exact result. */
#ifndef TB_CPU_VMATH_H
#define TB_CPU_VMATH_H

#include <math.h>
#include <stdint.h>
#include <trainbig/half.h>

/* ln 2 in two parts: the first has 9 significant bits, so n times it is exact for the
 * exponents a float has; the second is the rest (ln 2 = 0.693147180559945...). */
#define TB_VM_LN2_HI 0.693359375f
#define TB_VM_LN2_LO (-2.12194440e-4f)

/* e^x for every float x: results under the smallest subnormal are 0, over FLT_MAX +inf,
 * NaN stays NaN. x = n ln 2 + r with |r| <= ln 2 / 2, e^r by its Taylor series to r^7
 * (the next term is under 2^-27 of e^r), times 2^n made in two halves so that n from
 * -150 to 128 (subnormal and largest results) each fit a float's exponent. */
static inline float tb_vm_expf(float x)
{
    const float shift = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    const float k = x * 1.44269504f + shift;
    const float n = k - shift;
    const float r = (x - n * TB_VM_LN2_HI) - n * TB_VM_LN2_LO;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* n in k's low mantissa bits (two's complement around 1.5 * 2^23's) */
    const int32_t ni = (int32_t)(tb_float_bits(k) - tb_float_bits(shift));
    const int32_t n1 = ni / 2, n2 = ni - n1;
    const float s1 = tb_float_from_bits((uint32_t)(n1 + 127) << 23), s2 = tb_float_from_bits((uint32_t)(n2 + 127) << 23);
    float y = p * s1 * s2;
    y = x < -104.0f ? 0.0f : y;
    y = x > 88.7228394f ? INFINITY : y;
    return x != x ? x : y;
}

/* ln m of x = m 2^e, sqrt(1/2) <= m < sqrt(2), plus e ln 2: tb_vm_logf's core, for a
 * positive normal x only (what the special cases leave). */
static inline float tb_vm_logf_normal(float x)
{
    const uint32_t off = 0x3f3504f3u; /* the bits of sqrt(1/2) */
    const uint32_t t = tb_float_bits(x) - off;
    const int32_t e = (int32_t)(t >> 23) - (int32_t)((t >> 31) << 9);
    const float m = tb_float_from_bits((t & 0x007fffffu) + off);
    const float f = m - 1.0f;
    const float s = f / (2.0f + f);
    const float z = s * s;
    float q = 2.0f / 9.0f;
    q = q * z + 2.0f / 7.0f;
    q = q * z + 2.0f / 5.0f;
    q = q * z + 2.0f / 3.0f;
    const float lnm = 2.0f * s + s * (z * q);
    const float fe = (float)e;
    return fe * TB_VM_LN2_HI + (lnm + fe * TB_VM_LN2_LO);
}

/* ln x for every float x: -inf at 0, NaN below 0 and for NaN, +inf at +inf. x = m 2^e with
 * sqrt(1/2) <= m < sqrt(2) (a subnormal x scaled by 2^23 first); ln m = 2 atanh(s) with
 * s = (m - 1) / (m + 1), |s| <= 0.172, by its series to s^9 (the next term is under
 * 2^-28 of ln m). */
static inline float tb_vm_logf(float x)
{
    const int tiny = x < 1.17549435e-38f; /* FLT_MIN: subnormal (or not positive) */
    float y = tb_vm_logf_normal(tiny ? x * 8388608.0f : x) - (tiny ? 23.0f * TB_VM_LN2_HI : 0.0f) -
              (tiny ? 23.0f * TB_VM_LN2_LO : 0.0f);
    y = x == 0.0f ? -INFINITY : y;
    y = x < 0.0f ? NAN : y;
    y = x == INFINITY ? INFINITY : y;
    return x != x ? x : y;
}

#endif
