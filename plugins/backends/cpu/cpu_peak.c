/* backends/cpu/cpu_peak.c: what this CPU computes at, measured when the backend starts
 * (cpu_shared.h): its fp32 multiply-add peak, and the rate its kernels achieve on a
 * convolution, which emulate_link scales the platform's link by. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_shared.h"

/* A short multiply-add loop on every thread: this CPU's fp32 peak, FLOP/s (the best of 3
 * runs), shown beside the achieved convolution rate emulate_link scales by. The x86
 * build has AVX2+FMA and AVX-512 copies, the widest the CPU has taken (oneDNN's
 * convolutions use the widest too: a narrower loop would put the peak below them). */
typedef float tb_v8 __attribute__((vector_size(32)));
typedef float tb_v16 __attribute__((vector_size(64)));

/* Twelve independent chains in named variables (registers): enough to keep two FMA
 * units busy through their latency. */
#define FMA_LOOP_BODY(V, lanes, madd)                                                                         \
    const V m = (V){ 0 } + 0.999f, c = (V){ 0 } + 1e-4f;                                                      \
    V a0 = c, a1 = c + 1, a2 = c + 2, a3 = c + 3, a4 = c + 4, a5 = c + 5, a6 = c + 6, a7 = c + 7, a8 = c + 8, \
      a9 = c + 9, a10 = c + 10, a11 = c + 11;                                                                 \
    for (long k = 0; k < iters; k++) {                                                                        \
        a0 = madd(a0, m, c);                                                                                  \
        a1 = madd(a1, m, c);                                                                                  \
        a2 = madd(a2, m, c);                                                                                  \
        a3 = madd(a3, m, c);                                                                                  \
        a4 = madd(a4, m, c);                                                                                  \
        a5 = madd(a5, m, c);                                                                                  \
        a6 = madd(a6, m, c);                                                                                  \
        a7 = madd(a7, m, c);                                                                                  \
        a8 = madd(a8, m, c);                                                                                  \
        a9 = madd(a9, m, c);                                                                                  \
        a10 = madd(a10, m, c);                                                                                \
        a11 = madd(a11, m, c);                                                                                \
    }                                                                                                         \
    V t = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;                                        \
    return t[0] == 12345.0f ? 0 : (double)iters * 12 * (lanes)*2;

#define PLAIN_MADD(x, y, z) ((x) * (y) + (z))

static double fma_loop_plain(long iters)
{
    FMA_LOOP_BODY(tb_v8, 8, PLAIN_MADD)
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target("avx2,fma"))) static double fma_loop_avx2(long iters)
{
    FMA_LOOP_BODY(tb_v8, 8, __builtin_ia32_vfmaddps256)
}

/* All 16 lanes, no mask, the current rounding mode (4: _MM_FROUND_CUR_DIRECTION). */
#define MADD512(x, y, z) __builtin_ia32_vfmaddps512_mask((x), (y), (z), (unsigned short)0xffff, 4)

__attribute__((target("avx512f"))) static double fma_loop_avx512(long iters)
{
    FMA_LOOP_BODY(tb_v16, 16, MADD512)
}
#define HAVE_FMA_LOOP_AVX2 1
#endif

static double fma_loop(long iters)
{
#ifdef HAVE_FMA_LOOP_AVX2
    if (__builtin_cpu_supports("avx512f"))
        return fma_loop_avx512(iters);
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return fma_loop_avx2(iters);
#endif
    return fma_loop_plain(iters);
}

double tb_cpu_measure_flops(int threads)
{
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        double flops = 0, t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : flops)
        flops += fma_loop(20000000);
        double rate = flops / (omp_get_wtime() - t0);
        best = rate > best ? rate : best;
    }
    return best;
}

/* This CPU's achieved fp32 rate on a representative convolution, FLOP/s: 3x3, 64 -> 64
 * channels, stride 1, padding 1, on 56x56 images (a ResNet's first stage; one image per
 * thread, at least 2, at most 16): forward, backward data and backward weights through
 * the op entry points training uses, the median of CONV_REPS after a warm-up. Its
 * tensors and the op's scratch come from device memory and all go back to it before
 * this returns; so does the peak (nothing else is allocated yet when set_platform runs). */
enum { CONV_REPS = 5, CONV_SIDE = 56, CONV_CH = 64 };

int tb_cpu_measure_conv_flops(struct tb_cpu *cpu, double *rate, struct tb_err *err)
{
    const int n = cpu->threads < 2 ? 2 : cpu->threads > 16 ? 16 : cpu->threads;
    struct tb_op op;
    memset(&op, 0, sizeof op);
    op.kind = TB_OP_CONV2D;
    op.nin = 2;
    op.nout = 1;
    op.in[0] = (struct tb_tensor_desc){ TB_F32, { n, CONV_CH, CONV_SIDE, CONV_SIDE } };
    op.in[1] = (struct tb_tensor_desc){ TB_F32, { CONV_CH, CONV_CH, 3, 3 } };
    op.out[0] = op.in[0]; /* same padding: y is x's shape */
    op.p.conv = (struct tb_conv2d_params){ 3, 3, 1, 1, 1, 1, 1, 1, 0 };
    /* x, w, y, dy, dx, dw */
    const struct tb_tensor_desc *desc[6] = { &op.in[0], &op.in[1], &op.out[0], &op.out[0], &op.in[0], &op.in[1] };
    struct tb_tensor t[6];
    size_t need = 0;
    int rc = TB_OK;
    for (int i = 0; i < 6; i++) {
        const size_t bytes = tb_shape_elems(desc[i]->shape) * sizeof(float);
        need += bytes;
        t[i] = (struct tb_tensor){ *desc[i], 0, rc ? NULL : tb_cpu_memory_alloc(&cpu->memory, bytes) };
        if (!rc && !t[i].data)
            rc = TB_ERR_NOMEM;
        else if (t[i].data)
            for (size_t k = 0; k < bytes / sizeof(float); k++)
                ((float *)t[i].data)[k] = 0.01f * (float)(k % 97) - 0.48f; /* no denormals, no zeros */
    }
    void *state = NULL;
    if (!rc)
        rc = tb_cpu_op_prepare(cpu, &op, &state, err);
    double secs[CONV_REPS];
    for (int r = -1; r < CONV_REPS && !rc; r++) {
        const double t0 = omp_get_wtime();
        rc = tb_cpu_op_forward(cpu, &op, state, 0, &t[0], &t[2], err);
        if (!rc) {
            const struct tb_tensor din[2] = { t[4], t[5] };
            rc = tb_cpu_op_backward(cpu, &op, state, t, &t[2], &t[3], din, err);
        }
        if (r >= 0)
            secs[r] = omp_get_wtime() - t0;
    }
    if (state)
        tb_cpu_op_release(state);
    for (int i = 0; i < 6; i++)
        if (t[i].data)
            tb_cpu_memory_free(&cpu->memory, t[i].data);
    const bool no_room = rc == TB_ERR_NOMEM;
    if (cpu->scratch)
        tb_cpu_memory_free(&cpu->memory, cpu->scratch);
    cpu->scratch = NULL;
    cpu->scratch_bytes = 0;
    cpu->failed_bytes = 0;
    tb_cpu_memory_reset_peak(&cpu->memory);
    if (no_room) {
        struct tb_mem_stats ms;
        tb_cpu_memory_stats(&cpu->memory, &ms);
        tb_err_clear(err);
        return tb_err_set(err, TB_ERR_CONFIG,
                          "[backend] emulate_link = yes: measuring this CPU's convolution rate takes about %.0f MiB of "
                          "device memory, more than [backend] device_memory = %.1f MiB leaves: raise device_memory, or "
                          "set [backend] compute_gflops (this CPU's achieved convolution rate, GFLOP/s, > 0)",
                          (double)need / 1048576.0 + 1, (double)ms.capacity / 1048576.0);
    }
    if (rc)
        return tb_err_prefix(err, "[backend] emulate_link: measuring this CPU's convolution rate");
    for (int i = 1; i < CONV_REPS; i++) /* insertion sort: the median of a few */
        for (int j = i; j > 0 && secs[j] < secs[j - 1]; j--) {
            const double x = secs[j];
            secs[j] = secs[j - 1];
            secs[j - 1] = x;
        }
    const double flops = 3.0 * 2.0 * (double)tb_shape_elems(op.out[0].shape) * CONV_CH * 9;
    *rate = flops / secs[CONV_REPS / 2];
    return TB_OK;
}
