/* core/data/hot_internal.h: how the data pipeline's hot loops are compiled (augment.c,
 * jitter.c). */
#ifndef TB_CORE_HOT_INTERNAL_H
#define TB_CORE_HOT_INTERNAL_H

/* AVX2 versions of the hot loops besides the baseline ones, where the toolchain picks one
 * at load time (GCC's target_clones through glibc's ifunc); elsewhere the baseline. The
 * loops' helpers are always inlined, so that each version gets its own. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
#define HOT __attribute__((target_clones("avx2", "default")))
#else
#define HOT
#endif
#if defined(__GNUC__)
#define INLINE static inline __attribute__((always_inline))
#else
#define INLINE static inline
#endif

/* Elements per inner loop: whole vectors, which the compiler vectorises even at -O2. */
enum { BLOCK = 16 };

#endif
