/* trainbig/random.h: splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom
 * number generators", OOPSLA 2014), the pseudo-random step the core, the plugins, the
 * benchmarks and the tests share. Header only (static inline, also for CUDA device code),
 * so it adds nothing to the ABI. Runs are compared bit for bit and against stored values:
 * these functions must not change. */
#ifndef TRAINBIG_RANDOM_H
#define TRAINBIG_RANDOM_H

#include <stdint.h>

#ifdef __CUDACC__
#define TB_RANDOM_INLINE __host__ __device__ static inline
#else
#define TB_RANDOM_INLINE static inline
#endif

/* 2^64 divided by the golden ratio, rounded to odd: splitmix64's increment, and a
 * multiplier that spreads a seed or a key over all 64 bits. */
#define TB_GOLDEN64 0x9E3779B97F4A7C15ull

/* splitmix64's output function: a bijection of z whose every output bit depends on every
 * input bit. */
TB_RANDOM_INLINE uint64_t tb_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* One splitmix64 step: advances *state by TB_GOLDEN64 and returns the new state mixed. */
TB_RANDOM_INLINE uint64_t tb_splitmix64(uint64_t *state)
{
    *state += TB_GOLDEN64;
    return tb_mix64(*state);
}

#endif
