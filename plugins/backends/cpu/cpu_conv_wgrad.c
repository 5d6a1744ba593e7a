/* backends/cpu/cpu_conv_wgrad.c: backward-weights (and the bias gradient) of stride-1
 * convolutions with kernels larger than 1x1, straight from the NHWC activations, in AVX2
 * register tiles.
 *
 * Why not oneDNN: its AVX2 backward-weights kernels reach only 60-70% of this machine's
 * peak on G-SCNN's 3x3 shapes (nChw8c jit, or im2col+GEMM on nhwc), against 81-84% for
 * forward and backward-data. The weight gradient is a reduction over pixels,
 * dW[o][kh][kw][c] = sum over (n, y, x) of dY[n][y][x][o] * X[n][y+kh*d-p][x+kw*d-p][c],
 * and it vectorises well as outer products: a tile of NO output channels (broadcast) by
 * NV*8 input channels (vectors) stays in NO*NV ymm accumulators while a run of pixels
 * streams through. Measured with bench/ops (Zen 3, 2 threads, peak ~205 GFLOP/s), against
 * the best oneDNN path: 3x3 64->64 on 4x128x128 124 -> 168 GFLOP/s, the same dilated 2
 * 130 -> 172, 256->256 dilation 4 on 32x32 145 -> 168.
 *
 * Two things make the tiles fast, both measured on the prototype: the 4x24 tile (12
 * accumulators; 6x16 and 3x32 were 2-8% slower), and packing. In NHWC a channel slice of
 * consecutive pixels lies at a stride of C floats, and with C = 64 (256 bytes) those lines
 * fall into a quarter of the L1 sets; the tiles then ran at 68% of peak instead of 85%. So
 * each input row is copied once into channel blocks [block][x][24] (a ring holds the
 * (kh-1)*dil+1 rows a window of output rows needs), and each output-gradient row into
 * [o-block][x][4], and the tiles run on those dense copies.
 *
 * Threads split the output channels (whole 4-channel blocks), so no two threads write the
 * same gradient and nothing is reduced across threads. Each gradient element sums its
 * pixels in the same order whatever the thread count: results are bit-identical across
 * runs and thread counts. Every thread packs its own copy of the input rows (about 5% of
 * the time, and no barriers).
 *
 * Where it applies (tb_cpu_wgrad_init): x86-64 with AVX2 and FMA, stride 1, a kernel larger
 * than 1x1, input channels a multiple of 8, output rows of at least 32 pixels (shorter
 * rows spend too much on loading and storing the accumulators: 512->512 on 16x16 ran at
 * 54% of peak), and a weight gradient of at most 12 MiB. Every output row sweeps the whole
 * gradient through the tiles, so it has to stay in cache: measured against oneDNN (2
 * threads, two runs each), 3x3 128->128 on 4x64x64 1.11-1.23x, 304->256 on 2x64x64
 * 1.22-1.28x, 512->512 on 4x32x32 (9 MiB) 1.07-1.13x, but 512->1024 dilation 2 on 2x32x32
 * (18 MiB) 0.89-0.94x, 1024->1024 dilation 2 on 64x64 (36 MiB) 0.89-0.96x, and
 * 4096->256 dilation 12 (36 MiB) 0.94-1.07x; 16 and 32 channels on 2x256x256 broke even.
 * Everything else keeps oneDNN (cpu_conv.c). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define TB_WGRAD_AVX2 1
#include <immintrin.h>
#endif

enum {
    NO = 4,       /* output channels per tile (broadcast) */
    NV = 3,       /* ymm vectors of input channels per tile */
    CB = 8 * NV,  /* input channels per block */
    MIN_ROW = 32, /* shortest output row taken */
};

#define MAX_GRAD_BYTES ((size_t)12 << 20) /* largest weight gradient taken */

static size_t align64(size_t bytes)
{
    return (bytes + 63) & ~(size_t)63;
}

bool tb_cpu_wgrad_init(struct tb_cpu_wgrad *wg, struct tb_shape x, struct tb_shape y, const struct tb_conv2d_params *p)
{
    memset(wg, 0, sizeof *wg);
#ifdef TB_WGRAD_AVX2
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        return false;
    if (p->stride_h != 1 || p->stride_w != 1 || p->kh * p->kw < 2 || x.c % 8 != 0 || y.w < MIN_ROW)
        return false;
    if ((size_t)y.c * p->kh * p->kw * x.c * sizeof(float) > MAX_GRAD_BYTES)
        return false;
    wg->x = x;
    wg->y = y;
    wg->kh = p->kh;
    wg->kw = p->kw;
    wg->pad_h = p->pad_h;
    wg->pad_w = p->pad_w;
    wg->dil_h = p->dil_h;
    wg->dil_w = p->dil_w;
    wg->win = (p->kh - 1) * p->dil_h + 1;
    wg->ncb = (x.c + CB - 1) / CB;
    return true;
#else
    (void)x;
    (void)y;
    (void)p;
    return false;
#endif
}

/* Per thread: the ring of packed input rows, one packed output-gradient row for all the
 * channel blocks a thread can own, double bias sums, and the ring's tags. */
static size_t ring_bytes(const struct tb_cpu_wgrad *wg)
{
    return align64((size_t)wg->win * wg->ncb * wg->x.w * CB * sizeof(float));
}

static size_t dyrow_bytes(const struct tb_cpu_wgrad *wg)
{
    const size_t nob = (size_t)(wg->y.c + NO - 1) / NO;
    return align64(nob * wg->y.w * NO * sizeof(float));
}

static size_t thread_bytes(const struct tb_cpu_wgrad *wg)
{
    return ring_bytes(wg) + dyrow_bytes(wg) + align64((size_t)wg->y.c * sizeof(double)) +
           align64((size_t)wg->win * sizeof(int64_t));
}

size_t tb_cpu_wgrad_scratch(const struct tb_cpu_wgrad *wg, int threads)
{
    return (size_t)threads * thread_bytes(wg);
}

#ifdef TB_WGRAD_AVX2

/* dw[i][v*8 .. v*8+7] += sum over len pixels of a[i] * b[v*8 .. v*8+7], for a tile of
 * no (1..NO) output channels and nv (1..NV) vectors; a advances by NO floats a pixel, b by
 * CB (both packed). The accumulators live in registers for the whole run. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
tile(int no, int nv, const float *a, const float *b, int len, float *dw, size_t ldw)
{
    __m256 acc[NO][NV];
#pragma GCC unroll 4
    for (int i = 0; i < NO; i++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++)
            acc[i][v] = i < no && v < nv ? _mm256_loadu_ps(dw + i * ldw + 8 * v) : _mm256_setzero_ps();
    for (int j = 0; j < len; j++, a += NO, b += CB) {
        __m256 bv[NV];
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++)
            bv[v] = v < nv ? _mm256_load_ps(b + 8 * v) : _mm256_setzero_ps();
#pragma GCC unroll 4
        for (int i = 0; i < NO; i++) {
            if (i >= no)
                break;
            const __m256 av = _mm256_broadcast_ss(a + i);
#pragma GCC unroll 3
            for (int v = 0; v < NV; v++)
                if (v < nv)
                    acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NO; i++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++)
            if (i < no && v < nv)
                _mm256_storeu_ps(dw + i * ldw + 8 * v, acc[i][v]);
}

/* One specialisation per tile shape, so that no and nv are constants in each. */
#define TILE_FN(NO_, NV_)                                                                                       \
    __attribute__((target("avx2,fma"))) static void tile_##NO_##_##NV_(const float *a, const float *b, int len, \
                                                                       float *dw, size_t ldw)                   \
    {                                                                                                           \
        tile(NO_, NV_, a, b, len, dw, ldw);                                                                     \
    }
#define TILE_ROW(NO_) TILE_FN(NO_, 1) TILE_FN(NO_, 2) TILE_FN(NO_, 3)
TILE_ROW(1)
TILE_ROW(2)
TILE_ROW(3)
TILE_ROW(4)
#undef TILE_ROW
#undef TILE_FN

typedef void (*tile_fn)(const float *a, const float *b, int len, float *dw, size_t ldw);
static const tile_fn tiles[NO + 1][NV + 1] = {
    { NULL },
    { NULL, tile_1_1, tile_1_2, tile_1_3 },
    { NULL, tile_2_1, tile_2_2, tile_2_3 },
    { NULL, tile_3_1, tile_3_2, tile_3_3 },
    { NULL, tile_4_1, tile_4_2, tile_4_3 },
};

/* Input row (n, iy) into [block][x][CB], channels past C left as they are (never read:
 * the last block's tiles take only its nv vectors). */
__attribute__((target("avx2,fma"))) static void pack_x_row(const struct tb_cpu_wgrad *wg, const float *x, int n, int iy,
                                                           float *ring_row)
{
    const int C = wg->x.c, W = wg->x.w;
    const float *src = x + ((size_t)n * wg->x.h + iy) * W * C;
    for (int cb = 0; cb < wg->ncb; cb++) {
        const int c0 = cb * CB, nc = C - c0 < CB ? C - c0 : CB;
        float *dst = ring_row + (size_t)cb * W * CB;
        for (int ix = 0; ix < W; ix++)
            for (int v = 0; v < nc; v += 8)
                _mm256_store_ps(dst + (size_t)ix * CB + v, _mm256_loadu_ps(src + (size_t)ix * C + c0 + v));
    }
}

/* Output-gradient row (n, oy), output channel blocks ob0..ob1-1, into [block][x][NO]
 * (missing channels of a partial block are zero), adding every value to the bias sums. */
static void pack_dy_row(const struct tb_cpu_wgrad *wg, const float *dy, int n, int oy, int ob0, int ob1, float *packed,
                        double *bsum)
{
    const int O = wg->y.c, W = wg->y.w;
    const float *src = dy + ((size_t)n * wg->y.h + oy) * W * O;
    for (int ob = ob0; ob < ob1; ob++) {
        const int o0 = ob * NO, no = O - o0 < NO ? O - o0 : NO;
        float *dst = packed + (size_t)(ob - ob0) * W * NO;
        double *bs = bsum + o0;
        for (int ix = 0; ix < W; ix++) {
            const float *s = src + (size_t)ix * O + o0;
            float *d = dst + (size_t)ix * NO;
            for (int i = 0; i < no; i++) {
                d[i] = s[i];
                bs[i] += s[i];
            }
            for (int i = no; i < NO; i++)
                d[i] = 0.0f;
        }
    }
}

static void run_thread(const struct tb_cpu_wgrad *wg, const float *x, const float *dy, float *dw, float *db,
                       char *scratch, int t, int nt)
{
    const int O = wg->y.c, C = wg->x.c, W = wg->x.w, OW = wg->y.w, K2 = wg->kh * wg->kw;
    const int nob = (O + NO - 1) / NO, ob0 = (int)((int64_t)nob * t / nt), ob1 = (int)((int64_t)nob * (t + 1) / nt);
    if (ob0 >= ob1)
        return;
    const int o_lo = ob0 * NO, o_hi = ob1 * NO < O ? ob1 * NO : O;
    float *ring = (float *)scratch;
    float *dyp = (float *)(scratch + ring_bytes(wg));
    double *bsum = (double *)(scratch + ring_bytes(wg) + dyrow_bytes(wg));
    const size_t ring_row = (size_t)wg->ncb * W * CB, ldw = (size_t)K2 * C;

    if (dw)
        memset(dw + (size_t)o_lo * ldw, 0, (size_t)(o_hi - o_lo) * ldw * sizeof(float));
    memset(bsum, 0, (size_t)O * sizeof(double));
    /* Which input row each ring slot holds (n * H + iy), -1 for none. A window of output
     * rows' input rows spans win consecutive rows, so iy % win never collides in it. */
    int64_t *tag = (int64_t *)((char *)bsum + align64((size_t)O * sizeof(double)));
    for (int i = 0; i < wg->win; i++)
        tag[i] = -1;

    for (int n = 0; n < wg->y.n; n++)
        for (int oy = 0; oy < wg->y.h; oy++) {
            pack_dy_row(wg, dy, n, oy, ob0, ob1, dyp, bsum);
            if (!dw)
                continue;
            for (int kh = 0; kh < wg->kh; kh++) {
                const int iy = oy + kh * wg->dil_h - wg->pad_h;
                if (iy < 0 || iy >= wg->x.h)
                    continue;
                const int64_t key = (int64_t)n * wg->x.h + iy;
                if (tag[iy % wg->win] != key) {
                    tag[iy % wg->win] = key;
                    pack_x_row(wg, x, n, iy, ring + (size_t)(iy % wg->win) * ring_row);
                }
            }
            for (int cb = 0; cb < wg->ncb; cb++) {
                const int c0 = cb * CB, nv = (C - c0) / 8 < NV ? (C - c0) / 8 : NV;
                for (int ob = ob0; ob < ob1; ob++) {
                    const int o0 = ob * NO, no = O - o0 < NO ? O - o0 : NO;
                    const float *a = dyp + (size_t)(ob - ob0) * OW * NO;
                    const tile_fn fn = tiles[no][nv];
                    for (int kh = 0; kh < wg->kh; kh++) {
                        const int iy = oy + kh * wg->dil_h - wg->pad_h;
                        if (iy < 0 || iy >= wg->x.h)
                            continue;
                        const float *b = ring + (size_t)(iy % wg->win) * ring_row + (size_t)cb * W * CB;
                        for (int kw = 0; kw < wg->kw; kw++) {
                            /* Output columns whose input column ox + off lies inside the row. */
                            const int off = kw * wg->dil_w - wg->pad_w;
                            const int lo = off < 0 ? -off : 0;
                            int hi = W - off;
                            if (hi > OW)
                                hi = OW;
                            if (lo >= hi)
                                continue;
                            fn(a + (size_t)lo * NO, b + (size_t)(lo + off) * CB, hi - lo,
                               dw + ((size_t)o0 * K2 + (size_t)kh * wg->kw + kw) * C + c0, ldw);
                        }
                    }
                }
            }
        }
    if (db)
        for (int o = o_lo; o < o_hi; o++)
            db[o] = (float)bsum[o];
}

void tb_cpu_wgrad_run(const struct tb_cpu_wgrad *wg, int threads, const float *x, const float *dy, float *dw, float *db,
                      void *scratch)
{
    const size_t per = thread_bytes(wg);
#pragma omp parallel num_threads(threads)
    {
#ifdef _OPENMP
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
        const int t = 0, nt = 1;
#endif
        run_thread(wg, x, dy, dw, db, (char *)scratch + (size_t)t * per, t, nt);
    }
}

#else

void tb_cpu_wgrad_run(const struct tb_cpu_wgrad *wg, int threads, const float *x, const float *dy, float *dw, float *db,
                      void *scratch)
{
    /* tb_cpu_wgrad_init never accepts a convolution here. */
    (void)wg, (void)threads, (void)x, (void)dy, (void)dw, (void)db, (void)scratch;
    abort();
}

#endif
