/* bench/benchutil.h: what the benchmarks share: opening a backend by name, timing, and
 * this machine's measured fp32 peak (header-only). A program built without OpenMP
 * defines BENCH_NO_PEAK before including it: it gets all but the peak. */
#ifndef TB_BENCH_BENCHUTIL_H
#define TB_BENCH_BENCHUTIL_H

#ifndef BENCH_NO_PEAK
#include <immintrin.h>
#include <omp.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <trainbig/trainbig.h>
#include <unistd.h>

#include "core/config/ini.h"
#include "core/config/loader.h"
#include "core/config/setup.h"

#define bench_backend tb_instance

/* Opens backend `name` with `keys` ("threads = 2\n") as its [backend] section; exits
 * with the message on failure (this is a benchmark program, not library code). */
static inline void bench_backend_open(struct bench_backend *b, const char *name, const char *keys)
{
    struct tb_err err;
    if (tb_instance_open(TB_KIND_BACKEND, name, NULL, keys, b, &err)) {
        fprintf(stderr, "bench: cannot open backend %s: %s\n", name, err.msg);
        exit(1);
    }
}

static inline void bench_backend_close(struct bench_backend *b)
{
    tb_instance_close(b);
}

/* Finds backend `name` and asks its score() whether it can run here, as `plugin = auto`
 * does (core/config/loader.c); exits with the reason when it cannot be loaded or scores 0. Returns
 * the plugin, open: keep it until the backend is closed, so that what it loaded (a GPU
 * runtime) stays loaded between the check and the run. */
static inline struct tb_plugin_handle *bench_backend_require(const char *name)
{
    struct tb_plugin_handle *h;
    struct tb_err err;
    tb_err_clear(&err);
    if (tb_plugin_find(TB_KIND_BACKEND, name, &h, &err)) {
        fprintf(stderr, "bench: cannot open backend %s: %s\n", name, err.msg);
        exit(1);
    }
    tb_score_fn score = h->p->ops.head->score;
    char why[256] = "";
    if (score && score(why, sizeof why) <= 0) {
        fprintf(stderr, "bench: backend %s cannot run on this machine (score 0): %s\n", name, why);
        tb_plugin_close(h);
        exit(1);
    }
    return h;
}

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#ifndef BENCH_NO_PEAK
/* Independent fused multiply-adds on 12 accumulators (named variables, so the compiler
 * keeps them in registers), enough chains to keep both FMA pipes busy through the FMA
 * latency. Returns FLOPs done: 12 FMAs x lanes x 2 per iteration. */
#define BENCH_FMA12(fma, a, m, c) \
    do {                          \
        a##0 = fma(a##0, m, c);   \
        a##1 = fma(a##1, m, c);   \
        a##2 = fma(a##2, m, c);   \
        a##3 = fma(a##3, m, c);   \
        a##4 = fma(a##4, m, c);   \
        a##5 = fma(a##5, m, c);   \
        a##6 = fma(a##6, m, c);   \
        a##7 = fma(a##7, m, c);   \
        a##8 = fma(a##8, m, c);   \
        a##9 = fma(a##9, m, c);   \
        a##10 = fma(a##10, m, c); \
        a##11 = fma(a##11, m, c); \
    } while (0)

__attribute__((target("avx512f"))) static inline double bench_fma_avx512(long iters, float *sink)
{
    __m512 a0 = _mm512_set1_ps(0.0f), a1 = _mm512_set1_ps(0.1f), a2 = _mm512_set1_ps(0.2f), a3 = _mm512_set1_ps(0.3f),
           a4 = _mm512_set1_ps(0.4f), a5 = _mm512_set1_ps(0.5f), a6 = _mm512_set1_ps(0.6f), a7 = _mm512_set1_ps(0.7f),
           a8 = _mm512_set1_ps(0.8f), a9 = _mm512_set1_ps(0.9f), a10 = _mm512_set1_ps(1.0f), a11 = _mm512_set1_ps(1.1f);
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (long it = 0; it < iters; it++)
        BENCH_FMA12(_mm512_fmadd_ps, a, m, c);
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    *sink = _mm512_reduce_add_ps(s);
    return (double)iters * 12 * 16 * 2;
}

__attribute__((target("avx2,fma"))) static inline double bench_fma_avx2(long iters, float *sink)
{
    __m256 a0 = _mm256_set1_ps(0.0f), a1 = _mm256_set1_ps(0.1f), a2 = _mm256_set1_ps(0.2f), a3 = _mm256_set1_ps(0.3f),
           a4 = _mm256_set1_ps(0.4f), a5 = _mm256_set1_ps(0.5f), a6 = _mm256_set1_ps(0.6f), a7 = _mm256_set1_ps(0.7f),
           a8 = _mm256_set1_ps(0.8f), a9 = _mm256_set1_ps(0.9f), a10 = _mm256_set1_ps(1.0f), a11 = _mm256_set1_ps(1.1f);
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (long it = 0; it < iters; it++)
        BENCH_FMA12(_mm256_fmadd_ps, a, m, c);
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    float out[8];
    _mm256_storeu_ps(out, s);
    *sink = out[0] + out[7];
    return (double)iters * 12 * 8 * 2;
}

/* This machine's fp32 peak with `threads` threads, in FLOP/s: the best of a few runs of
 * the FMA loop on every thread at once, on AVX-512 (where the CPU has it and `zmm`) or
 * AVX2 (the peak of a path capped at AVX2). */
static inline double bench_peak_flops_isa(int threads, int zmm)
{
    __builtin_cpu_init();
    int avx512 = zmm && __builtin_cpu_supports("avx512f");
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double flops = 0;
        double t0 = bench_now();
#pragma omp parallel num_threads(threads) reduction(+ : flops)
        {
            float sink;
            flops += avx512 ? bench_fma_avx512(20000000, &sink) : bench_fma_avx2(20000000, &sink);
            if (sink == 12345.0f)
                printf(" ");
        }
        double rate = flops / (bench_now() - t0);
        if (rate > best)
            best = rate;
    }
    return best;
}

/* The peak of the widest vectors this CPU has. */
static inline double bench_peak_flops(int threads)
{
    return bench_peak_flops_isa(threads, 1);
}
#endif

#endif
