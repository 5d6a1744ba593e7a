/* backends/cuda/cuda_kernels.cu: the CUDA backend's own kernels (declared in cuda_kernels.h):
 * fill and SGD, add, mul, dropout, max and global average pooling, bilinear resize, the two
 * losses and the two label ops, on NCHW tensors in device memory; and for data parallelism
 * the gradient scale and the statistics of synchronised batch norm.
 *
 * The CPU backend (plugins/backends/cpu, NHWC) is the reference these are tested against op
 * by op, so every per-element computation here is the CPU's, in the same float operations
 * and order. The work done for one output element lives in a __host__ __device__ function
 * (the "_at" helpers below) and the kernels are grid-stride loops around them, so the index
 * arithmetic can be checked on a machine without a GPU. Products that the CPU rounds before
 * an addition go through TB_MUL (__fmul_rn on the device) so that nvcc does not contract
 * them into FMAs: x86-64 without -mfma, what the CPU backend is built for, rounds each one.
 *
 * Determinism: no float atomics anywhere. Backward passes of pooling and resize are
 * gathers (each input element sums, in a fixed order, the outputs that read it), and the
 * losses and synchronised batch norm reduce per-block partial sums in double, then sum
 * those partials in a fixed order. Integer counts (class weights, BCE's class balance) use
 * atomics, which are exact in any order.
 *
 * No launcher synchronises or allocates: scratch comes from the caller, at least
 * tb_cuk_loss_scratch_bytes() bytes, 256-byte aligned. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <trainbig/random.h>

#include "cuda_kernels.h"

#define TB_BLOCK 256          /* threads per block, everywhere (block_sum needs a power of 2) */
#define TB_GRID_MAX 32768     /* blocks of a grid-stride kernel: enough to fill any GPU */
#define TB_LOSS_PARTS 4096    /* per-block partial sums of a loss, over all images (about) */
#define TB_LABELS 256         /* the values of a u8 label */
#define TB_AVG_BLOCK_HW 1024  /* global average pooling: a block per plane from this size, else a warp */
#define TB_BN_PART_ELEMS 4096 /* synchronised batch norm: values per partial sum (about) */
#define TB_BN_MAX_PARTS 256   /* ... and at most this many partials per channel (beyond one per image) */
#define TB_GRID_Y_MAX 65535   /* CUDA's limit on gridDim.y */

/* A product the CPU rounds before it is added to something: unfused on the device too. */
#ifdef __CUDA_ARCH__
#define TB_MUL(a, b) __fmul_rn((a), (b))
#else
#define TB_MUL(a, b) ((a) * (b))
#endif
/* The same for a double product (batch norm's statistics are double on the CPU). */
#ifdef __CUDA_ARCH__
#define TB_DMUL(a, b) __dmul_rn((a), (b))
#else
#define TB_DMUL(a, b) ((a) * (b))
#endif

/* ==================================================================== per-element helpers
 * Pure functions of their arguments, for host and device. */

/* tb_cpu_uniform (cpu_shared.h), bit for bit: dropout masks must equal the CPU's. */
__host__ __device__ static inline float tb_uniform(uint64_t seed, uint64_t step, uint32_t op, uint64_t index)
{
    uint64_t z = seed ^ (step * TB_GOLDEN64) ^ ((uint64_t)op << 40) ^ (index * 0xBF58476D1CE4E5B9ull);
    return (float)(tb_splitmix64(&z) >> 40) * (1.0f / 16777216.0f);
}

/* ---- max pooling */

struct tb_pool_geom {
    int h, w, oh, ow, k, stride, pad;
};

/* Rows (or columns) [*lo, *hi) of an input of size `in` that output o reads: the padding
 * is left out, which is what "never wins" means. */
__host__ __device__ static inline void pool_window(int o, int k, int stride, int pad, int in, int *lo, int *hi)
{
    const int start = o * stride - pad, end = start + k;
    *lo = start < 0 ? 0 : start;
    *hi = end > in ? in : end;
}

/* Max of a window of plane x (row length w) with PyTorch's comparison: row-major, a value
 * replaces the running maximum when greater or NaN, so the first maximum is kept. *arg (when
 * not NULL) gets its position iy * w + ix, the first element when nothing beats -inf. */
__host__ __device__ static inline float pool_max(const float *x, int w, int ylo, int yhi, int xlo, int xhi, int *arg)
{
    float best = -INFINITY;
    int at = ylo * w + xlo;
    for (int iy = ylo; iy < yhi; iy++)
        for (int ix = xlo; ix < xhi; ix++) {
            const float v = x[(size_t)iy * (size_t)w + (size_t)ix];
            if (v > best || isnan(v)) {
                best = v;
                at = iy * w + ix;
            }
        }
    if (arg)
        *arg = at;
    return best;
}

/* y[oy, ox] of one plane. */
__host__ __device__ static inline float pool_forward_at(const float *x, struct tb_pool_geom g, int oy, int ox)
{
    int ylo, yhi, xlo, xhi;
    pool_window(oy, g.k, g.stride, g.pad, g.h, &ylo, &yhi);
    pool_window(ox, g.k, g.stride, g.pad, g.w, &xlo, &xhi);
    return pool_max(x, g.w, ylo, yhi, xlo, xhi, NULL);
}

/* dx[iy, ix] of one plane: the dy of every window that holds (iy, ix) and whose first
 * maximum it is, in ascending (oy, ox) order as the CPU adds them. Output oy reads rows
 * [oy*stride - pad, oy*stride - pad + k), so row iy is read by
 * oy in [ceil((iy + pad - k + 1) / stride), floor((iy + pad) / stride)]. y only saves
 * work: an element that is not NaN and differs from the window's maximum cannot be it. */
__host__ __device__ static inline float pool_backward_at(const float *x, const float *y, const float *dy,
                                                         struct tb_pool_geom g, int iy, int ix)
{
    const int s = g.stride;
    const int ty = iy + g.pad - g.k + 1, tx = ix + g.pad - g.k + 1;
    const int oylo = ty <= 0 ? 0 : (ty + s - 1) / s, oxlo = tx <= 0 ? 0 : (tx + s - 1) / s;
    int oyhi = (iy + g.pad) / s, oxhi = (ix + g.pad) / s;
    if (oyhi > g.oh - 1)
        oyhi = g.oh - 1;
    if (oxhi > g.ow - 1)
        oxhi = g.ow - 1;
    const int self = iy * g.w + ix;
    const float v = x[(size_t)self];
    float acc = 0.0f; /* adding the CPU's 0.0f for the other windows changes nothing */
    for (int oy = oylo; oy <= oyhi; oy++) {
        int ylo, yhi;
        pool_window(oy, g.k, s, g.pad, g.h, &ylo, &yhi);
        for (int ox = oxlo; ox <= oxhi; ox++) {
            const size_t at = (size_t)oy * (size_t)g.ow + (size_t)ox;
            if (!(v == y[at]) && !isnan(v))
                continue;
            int xlo, xhi, arg;
            pool_window(ox, g.k, s, g.pad, g.w, &xlo, &xhi);
            pool_max(x, g.w, ylo, yhi, xlo, xhi, &arg);
            if (arg == self)
                acc += dy[at];
        }
    }
    return acc;
}

/* ---- bilinear resize (PyTorch's upsample_bilinear2d with `size`, as cpu_resize.c) */

struct tb_resize_geom {
    int h, w, oh, ow;
    float sh, sw; /* area_pixel_compute_scale of each axis */
    int align;    /* align_corners */
};

/* Output index d of an axis reads input indices i0, i1 with weights l0, l1. */
struct tb_lerp {
    int i0, i1;
    float l0, l1;
};

/* area_pixel_compute_scale: (in-1)/(out-1) with align_corners (0 for one output), else
 * in/out; in float, as PyTorch computes it for float tensors. */
__host__ __device__ static inline float resize_scale(int in, int out, int align)
{
    if (align)
        return out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f;
    return (float)in / (float)out;
}

__host__ __device__ static inline struct tb_resize_geom resize_geom(int h, int w, int oh, int ow, int align)
{
    struct tb_resize_geom g;
    g.h = h;
    g.w = w;
    g.oh = oh;
    g.ow = ow;
    g.sh = resize_scale(h, oh, align);
    g.sw = resize_scale(w, ow, align);
    g.align = align;
    return g;
}

/* compute_source_index_and_lambda for one axis (cpu_resize.c's axis_build, per index). */
__host__ __device__ static inline struct tb_lerp resize_src(int d, int in, int out, float scale, int align)
{
    struct tb_lerp r;
    if (in == out) { /* PyTorch copies a same-size axis exactly */
        r.i0 = r.i1 = d;
        r.l0 = 1.0f;
        r.l1 = 0.0f;
        return r;
    }
    /* dst * scale with align_corners, else (dst + 0.5) * scale - 0.5 clamped at 0 */
    float real;
    if (align) {
        real = TB_MUL(scale, (float)d);
    } else {
        real = TB_MUL(scale, (float)d + 0.5f) - 0.5f;
        if (real < 0.0f)
            real = 0.0f;
    }
    int i = (int)real; /* real >= 0: truncation is floor */
    if (i > in - 1)
        i = in - 1;
    float l1 = real - (float)i;
    l1 = l1 < 0.0f ? 0.0f : l1 > 1.0f ? 1.0f : l1;
    r.i0 = i;
    r.i1 = i < in - 1 ? i + 1 : i;
    r.l1 = l1;
    r.l0 = 1.0f - l1;
    return r;
}

/* The first output d in [0, out] whose i0 is >= t (out when none). i0 never decreases with
 * d, so an estimate from the inverse map, corrected by stepping, is exact whatever the
 * rounding of the estimate; it is off by a step or two at most. */
__host__ __device__ static inline int resize_first(int t, int in, int out, float scale, int align)
{
    float est;
    if (in == out)
        est = (float)t;
    else if (scale > 0.0f)
        est = align ? (float)t / scale : ((float)t + 0.5f) / scale - 0.5f;
    else
        est = 0.0f;
    int d = est <= 0.0f ? 0 : est >= (float)out ? out : (int)est;
    while (d > 0 && resize_src(d - 1, in, out, scale, align).i0 >= t)
        d--;
    while (d < out && resize_src(d, in, out, scale, align).i0 < t)
        d++;
    return d;
}

/* y[oy, ox] of one plane. */
__host__ __device__ static inline float resize_forward_at(const float *x, struct tb_resize_geom g, int oy, int ox)
{
    const struct tb_lerp a = resize_src(oy, g.h, g.oh, g.sh, g.align);
    const struct tb_lerp b = resize_src(ox, g.w, g.ow, g.sw, g.align);
    const float *r0 = x + (size_t)a.i0 * (size_t)g.w, *r1 = x + (size_t)a.i1 * (size_t)g.w;
    const float top = TB_MUL(b.l0, r0[b.i0]) + TB_MUL(b.l1, r0[b.i1]);
    const float bottom = TB_MUL(b.l0, r1[b.i0]) + TB_MUL(b.l1, r1[b.i1]);
    return TB_MUL(a.l0, top) + TB_MUL(a.l1, bottom);
}

/* dx[iy, ix] of one plane, a gather. Output d reads input i exactly when its i0 is i - 1
 * (then i1 = i) or i, a contiguous range of d. The terms come in the CPU's order: outputs
 * ascending, for each its i0 term before its i1 term (both, weights 0 included, where they
 * coincide), rows outside, columns inside, each (wy * wx) * dy rounded as there. */
__host__ __device__ static inline float resize_backward_at(const float *dy, struct tb_resize_geom g, int iy, int ix)
{
    const int ylo = resize_first(iy - 1, g.h, g.oh, g.sh, g.align);
    const int yhi = resize_first(iy + 1, g.h, g.oh, g.sh, g.align);
    const int xlo = resize_first(ix - 1, g.w, g.ow, g.sw, g.align);
    const int xhi = resize_first(ix + 1, g.w, g.ow, g.sw, g.align);
    float acc = 0.0f;
    for (int oy = ylo; oy < yhi; oy++) {
        const struct tb_lerp a = resize_src(oy, g.h, g.oh, g.sh, g.align);
        const float *row = dy + (size_t)oy * (size_t)g.ow;
        for (int e = 0; e < 2; e++) {
            if ((e ? a.i1 : a.i0) != iy)
                continue;
            const float wy = e ? a.l1 : a.l0;
            for (int ox = xlo; ox < xhi; ox++) {
                const struct tb_lerp b = resize_src(ox, g.w, g.ow, g.sw, g.align);
                if (b.i0 == ix)
                    acc += TB_MUL(TB_MUL(wy, b.l0), row[ox]);
                if (b.i1 == ix)
                    acc += TB_MUL(TB_MUL(wy, b.l1), row[ox]);
            }
        }
    }
    return acc;
}

/* ---- mul, losses, labels */

/* Backward of one pixel when g (value gv) is broadcast over the C channels: dx = dy * gv
 * (when dx), and the returned dg = dy * x summed in channel order in float, as the CPU does.
 * x, dy, dx point at channel 0 of the pixel; channels are hw apart. Each dy is read before
 * its dx is written, so dx may be dy. */
__host__ __device__ static inline float mul_bcast_backward_at(const float *x, float gv, const float *dy, float *dx,
                                                              int c, size_t hw)
{
    float acc = 0.0f;
    for (int k = 0; k < c; k++) {
        const size_t at = (size_t)k * hw;
        const float d = dy[at];
        acc += TB_MUL(d, x[at]);
        if (dx)
            dx[at] = d * gv;
    }
    return acc;
}

/* -log softmax(z)[t] = log(sum exp(z - m)) - (z[t] - m), m = max z (no exp overflows, the
 * sum is at least 1); z points at class 0 of the pixel, classes `stride` apart. */
__host__ __device__ static inline float ce_nll(const float *z, size_t stride, int k, int t)
{
    float m = z[0];
    for (int j = 1; j < k; j++) {
        const float v = z[(size_t)j * stride];
        m = v > m ? v : m;
    }
    float sum = 0.0f;
    for (int j = 0; j < k; j++)
        sum += expf(z[(size_t)j * stride] - m);
    return logf(sum) - (z[(size_t)t * stride] - m);
}

/* g[j] = c * (softmax(z)[j] - [j == t]) for the pixel's K classes. exp is computed twice
 * rather than stored and read back: the same function of the same float, the same value. */
__host__ __device__ static inline void ce_grad(const float *z, float *g, size_t stride, int k, int t, float c)
{
    float m = z[0];
    for (int j = 1; j < k; j++) {
        const float v = z[(size_t)j * stride];
        m = v > m ? v : m;
    }
    float sum = 0.0f;
    for (int j = 0; j < k; j++)
        sum += expf(z[(size_t)j * stride] - m);
    for (int j = 0; j < k; j++)
        g[(size_t)j * stride] = c * (expf(z[(size_t)j * stride] - m) / sum - (j == t ? 1.0f : 0.0f));
}

/* BCE with logits of one pixel, t 0 or 1: max(z,0) - z*t + log(1 + exp(-|z|)). */
__host__ __device__ static inline float bce_term(float z, int t)
{
    return fmaxf(z, 0.0f) - TB_MUL(z, (float)t) + log1pf(expf(-fabsf(z)));
}

/* Its gradient times the class weight and the mean's factor (cpos, cneg); 0 when ignored. */
__host__ __device__ static inline float bce_grad(float z, int t, float cpos, float cneg)
{
    const float e = expf(-fabsf(z)); /* sigmoid without overflow: exp of a non-positive number */
    const float sig = z >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
    return t == 1 ? cpos * (sig - 1.0f) : t == 0 ? cneg * sig : 0.0f;
}

/* class_weights of a class with `count` of the image's `total` counted pixels. */
__host__ __device__ static inline float cw_weight(unsigned long long count, unsigned long long total)
{
    return count ? (float)(2.0 - (double)count / (double)total) : 1.0f;
}

/* ---- synchronised batch norm (cpu_batchnorm.c's arithmetic, per element and per channel) */

/* The fixed split of one channel's N*H*W values into partial sums: each image's plane in
 * `chunks` runs of `per` values, part b = img * chunks + j covering values
 * [j * per, min(hw, (j + 1) * per)) of plane img. A function of the shape only, so the
 * sums are the same bits run to run whatever the GPU. */
struct tb_bn_split {
    int chunks, parts;
    size_t per;
};

__host__ __device__ static inline struct tb_bn_split bn_split(int n, size_t hw)
{
    size_t want = (hw + TB_BN_PART_ELEMS - 1) / TB_BN_PART_ELEMS;
    const size_t cap = n > 0 ? TB_BN_MAX_PARTS / (size_t)n : 1;
    if (want > cap)
        want = cap;
    if (want < 1)
        want = 1;
    struct tb_bn_split sp;
    sp.per = (hw + want - 1) / want;
    sp.chunks = sp.per ? (int)((hw + sp.per - 1) / sp.per) : 1;
    sp.parts = (n > 0 ? n : 0) * sp.chunks;
    return sp;
}

/* The values [*lo, *hi) of image *img's plane that part b sums. */
__host__ __device__ static inline void bn_part_range(struct tb_bn_split sp, size_t hw, int b, int *img, size_t *lo,
                                                     size_t *hi)
{
    *img = b / sp.chunks;
    const size_t j = (size_t)(b - *img * sp.chunks);
    *lo = j * sp.per;
    *hi = *lo + sp.per < hw ? *lo + sp.per : hw;
}

/* y = (x - mean) * scale + beta: centred first, as the CPU (no cancellation for a large mean). */
__host__ __device__ static inline float bn_affine_at(float x, float mean, float scale, float beta)
{
    return TB_MUL(x - mean, scale) + beta;
}

/* One channel's statistics from the global sums, as cpu_batchnorm.c's synchronised path:
 * k = sum x / P (the first pass), then the sums of d = x - k and of d^2 (the second), P
 * the count over every rank. mean = k + sum d / P refines k by what rounding left in it;
 * the running statistics take momentum of the batch's (the unbiased variance, times
 * P/(P-1)), in the CPU's double operations. */
struct tb_bn_stats {
    float save_mean, save_invstd, scale, running_mean, running_var;
};

__host__ __device__ static inline struct tb_bn_stats bn_stats_at(double k, double sdev, double sqdev, double count,
                                                                 float gamma, float running_mean, float running_var,
                                                                 double eps, double mom)
{
    const double d = sdev / count, mean = k + d;
    double var = sqdev / count - TB_DMUL(d, d); /* biased */
    if (var < 0.0)
        var = 0.0;
    const double inv = 1.0 / sqrt(var + eps);
    struct tb_bn_stats st;
    st.save_mean = (float)mean;
    st.save_invstd = (float)inv;
    st.scale = (float)((double)gamma * inv);
    st.running_mean = (float)(TB_DMUL(1.0 - mom, (double)running_mean) + TB_DMUL(mom, mean));
    st.running_var = (float)(TB_DMUL(1.0 - mom, (double)running_var) + TB_DMUL(mom, var) * count / (count - 1.0));
    return st;
}

/* dx = a1 * dy + a2 * (x - mean) + a3 per channel, from the global sums of dy and of
 * dy * (x - mean) and the global count (cpu_batchnorm.c's bn_backward). */
__host__ __device__ static inline void bn_coef_at(double sdy, double sdyx, double count, float gamma, float invstd,
                                                  float *a1, float *a2, float *a3)
{
    const double inv = (double)invstd, g = (double)gamma * inv;
    *a1 = (float)g;
    *a2 = (float)(-g * inv * inv * sdyx / count);
    *a3 = (float)(-g * sdy / count);
}

__host__ __device__ static inline float bn_dx_at(float dy, float x, float mean, float a1, float a2, float a3)
{
    return TB_MUL(a1, dy) + TB_MUL(a2, x - mean) + a3;
}

/* ==================================================================== device-only pieces */

/* Grid-stride loops: `for (size_t i = grid_first(); i < n; i += grid_stride())`, 64-bit indices. */
__device__ static inline size_t grid_first(void)
{
    return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ static inline size_t grid_stride(void)
{
    return (size_t)gridDim.x * blockDim.x;
}

/* Sum of v over the block in a fixed tree order (deterministic); every thread gets it.
 * sh: TB_BLOCK elements of shared memory, free again on return. */
template <typename T> __device__ static T block_sum(T v, T *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    const T r = sh[0];
    __syncthreads();
    return r;
}

/* The first bad label the kernels meet wins bad[0]; its finder fills in the rest. */
__device__ static void record_bad(int32_t *bad, int n, size_t p, int t)
{
    if (!bad || *(volatile int32_t *)bad != 0) /* a plain read first: one atomic per bad pixel is plenty */
        return;
    if (atomicCAS((int *)bad, 0, 1) == 0) {
        bad[1] = n;
        bad[2] = (int32_t)p;
        bad[3] = t;
    }
}

static unsigned grid_for(size_t n)
{
    const size_t b = (n + TB_BLOCK - 1) / TB_BLOCK;
    return (unsigned)(b < 1 ? 1 : b > TB_GRID_MAX ? TB_GRID_MAX : b);
}

/* Every launcher starts here, so the cudaGetLastError() it returns after its launches is
 * the launches' own error. A non-sticky error left by an earlier runtime call was already
 * returned to that call's caller, which handled it (and a runtime that records a query's
 * cudaErrorNotReady there must not fail a launch: see tb_cuda_polled). Sticky errors (a
 * faulting kernel) come back at once anyway: every call returns them until the context
 * is gone. */
static void forget_earlier_error(void)
{
    (void)cudaGetLastError();
}

/* ==================================================================== updates, elementwise */

static __global__ void fill_kernel(float *x, size_t n, float v)
{
    for (size_t i = grid_first(); i < n; i += grid_stride())
        x[i] = v;
}

cudaError_t tb_cuk_fill(cudaStream_t s, float *x, size_t n, float v)
{
    forget_earlier_error();
    fill_kernel<<<grid_for(n), TB_BLOCK, 0, s>>>(x, n, v);
    return cudaGetLastError();
}

static __global__ void sgd_kernel(float *p, const float *g, float *m, size_t n, float lr, float momentum, float wd)
{
    for (size_t i = grid_first(); i < n; i += grid_stride()) {
        const float d = g[i] + TB_MUL(wd, p[i]);
        const float mi = TB_MUL(momentum, m[i]) + d;
        m[i] = mi;
        p[i] = p[i] - TB_MUL(lr, mi);
    }
}

cudaError_t tb_cuk_sgd(cudaStream_t s, float *p, const float *g, float *m, size_t n, float lr, float momentum, float wd)
{
    forget_earlier_error();
    sgd_kernel<<<grid_for(n), TB_BLOCK, 0, s>>>(p, g, m, n, lr, momentum, wd);
    return cudaGetLastError();
}

static __global__ void add_kernel(const float *a, const float *b, float *y, size_t n)
{
    for (size_t i = grid_first(); i < n; i += grid_stride())
        y[i] = a[i] + b[i];
}

cudaError_t tb_cuk_add(cudaStream_t s, const float *a, const float *b, float *y, size_t n)
{
    forget_earlier_error();
    add_kernel<<<grid_for(n), TB_BLOCK, 0, s>>>(a, b, y, n);
    return cudaGetLastError();
}

/* y = x * g elementwise, g of x's shape. */
static __global__ void mul_same_kernel(const float *x, const float *g, float *y, size_t n)
{
    for (size_t i = grid_first(); i < n; i += grid_stride())
        y[i] = x[i] * g[i];
}

/* y = x * g with g (N,1,H,W): element (n, c, p) of x at (n*C + c)*hw + p takes g[n*hw + p]. */
static __global__ void mul_bcast_kernel(const float *x, const float *g, float *y, size_t n, size_t chw, size_t hw)
{
    for (size_t i = grid_first(); i < n; i += grid_stride()) {
        const size_t img = i / chw, p = i % hw;
        y[i] = x[i] * g[img * hw + p];
    }
}

/* Backward with g of x's shape: one pass, each dy read once before dx or dg is written
 * (so either may share dy's memory). */
static __global__ void mul_same_backward_kernel(const float *x, const float *g, const float *dy, float *dx, float *dg,
                                                size_t n)
{
    for (size_t i = grid_first(); i < n; i += grid_stride()) {
        const float d = dy[i];
        if (dx)
            dx[i] = d * g[i];
        if (dg)
            dg[i] = d * x[i];
    }
}

/* Backward with g (N,1,H,W): a thread per pixel, its channels in order (mul_bcast_backward_at). */
static __global__ void mul_bcast_backward_kernel(const float *x, const float *g, const float *dy, float *dx, float *dg,
                                                 size_t pixels, int c, size_t hw)
{
    for (size_t q = grid_first(); q < pixels; q += grid_stride()) {
        const size_t img = q / hw, at = img * (size_t)c * hw + (q - img * hw);
        const float acc = mul_bcast_backward_at(x + at, g[q], dy + at, dx ? dx + at : NULL, c, hw);
        if (dg)
            dg[q] = acc;
    }
}

cudaError_t tb_cuk_mul_forward(cudaStream_t s, const float *x, const float *g, float *y, int n, int c, int gc,
                               size_t hw)
{
    forget_earlier_error();
    const size_t total = (size_t)n * (size_t)c * hw;
    if (gc == c)
        mul_same_kernel<<<grid_for(total), TB_BLOCK, 0, s>>>(x, g, y, total);
    else
        mul_bcast_kernel<<<grid_for(total), TB_BLOCK, 0, s>>>(x, g, y, total, (size_t)c * hw, hw);
    return cudaGetLastError();
}

cudaError_t tb_cuk_mul_backward(cudaStream_t s, const float *x, const float *g, const float *dy, float *dx, float *dg,
                                int n, int c, int gc, size_t hw)
{
    forget_earlier_error();
    const size_t total = (size_t)n * (size_t)c * hw, pixels = (size_t)n * hw;
    if (!dx && !dg)
        return cudaGetLastError();
    if (gc == c)
        mul_same_backward_kernel<<<grid_for(total), TB_BLOCK, 0, s>>>(x, g, dy, dx, dg, total);
    else
        mul_bcast_backward_kernel<<<grid_for(pixels), TB_BLOCK, 0, s>>>(x, g, dy, dx, dg, pixels, c, hw);
    return cudaGetLastError();
}

/* ---- dropout: element i (canonical NCHW index) kept when tb_uniform(..., i) >= p */

static __global__ void dropout_kernel(const float *x, float *y, uint8_t *mask, size_t n, float p, float scale,
                                      uint64_t seed, uint64_t step, uint32_t op)
{
    for (size_t i = grid_first(); i < n; i += grid_stride()) {
        const uint8_t keep = tb_uniform(seed, step, op, i) >= p;
        mask[i] = keep;
        y[i] = x[i] * ((float)keep * scale);
    }
}

/* Channelwise: mask[n*C + c], drawn with index n*C + c as the CPU does; every element of
 * the plane redraws its plane's value (cheap next to the memory traffic) rather than wait
 * for the mask. The loop covers both the maps (mask) and the elements (y), so hw = 0
 * still writes the mask. */
static __global__ void dropout_channel_kernel(const float *x, float *y, uint8_t *mask, size_t maps, size_t hw, float p,
                                              float scale, uint64_t seed, uint64_t step, uint32_t op)
{
    const size_t total = maps * hw, count = total > maps ? total : maps;
    for (size_t i = grid_first(); i < count; i += grid_stride()) {
        if (i < maps)
            mask[i] = tb_uniform(seed, step, op, i) >= p;
        if (i < total) {
            const uint8_t keep = tb_uniform(seed, step, op, i / hw) >= p;
            y[i] = x[i] * ((float)keep * scale);
        }
    }
}

/* The mask of element i is mask[i / hw] channelwise, else mask[i]. */
static __global__ void dropout_backward_kernel(const float *dy, const uint8_t *mask, float *dx, size_t n, size_t hw,
                                               int channelwise, float scale)
{
    for (size_t i = grid_first(); i < n; i += grid_stride())
        dx[i] = dy[i] * ((float)mask[channelwise ? i / hw : i] * scale);
}

cudaError_t tb_cuk_dropout_forward(cudaStream_t s, const float *x, float *y, uint8_t *mask, int n, int c, size_t hw,
                                   float p, int channelwise, uint64_t seed, uint64_t step, uint32_t op_id)
{
    forget_earlier_error();
    /* The CPU's channelwise mask index is n*C + c, the element's index in the (N,C,1,1) mask
     * (cpu_eltwise.c: "for a channelwise mask both are n * C + c"), not (n*C + c)*H*W. */
    const float scale = 1.0f / (1.0f - p); /* one float, as the CPU (PyTorch's scaled noise) */
    const size_t maps = (size_t)n * (size_t)c, total = maps * hw;
    if (channelwise) {
        const size_t count = total > maps ? total : maps;
        dropout_channel_kernel<<<grid_for(count), TB_BLOCK, 0, s>>>(x, y, mask, maps, hw, p, scale, seed, step, op_id);
    } else {
        dropout_kernel<<<grid_for(total), TB_BLOCK, 0, s>>>(x, y, mask, total, p, scale, seed, step, op_id);
    }
    return cudaGetLastError();
}

cudaError_t tb_cuk_dropout_backward(cudaStream_t s, const float *dy, const uint8_t *mask, float *dx, int n, int c,
                                    size_t hw, float p, int channelwise)
{
    forget_earlier_error();
    const float scale = 1.0f / (1.0f - p);
    const size_t total = (size_t)n * (size_t)c * hw;
    dropout_backward_kernel<<<grid_for(total), TB_BLOCK, 0, s>>>(dy, mask, dx, total, hw, channelwise, scale);
    return cudaGetLastError();
}

/* ==================================================================== pooling and resizing */

static __global__ void maxpool_forward_kernel(const float *x, float *y, size_t planes, struct tb_pool_geom g)
{
    const size_t per = (size_t)g.oh * (size_t)g.ow, in = (size_t)g.h * (size_t)g.w;
    for (size_t i = grid_first(); i < planes * per; i += grid_stride()) {
        const size_t plane = i / per;
        const int r = (int)(i - plane * per);
        y[i] = pool_forward_at(x + plane * in, g, r / g.ow, r % g.ow);
    }
}

/* A gather: each input element of dx sums its own share (no atomics, deterministic). */
static __global__ void maxpool_backward_kernel(const float *x, const float *y, const float *dy, float *dx,
                                               size_t planes, struct tb_pool_geom g)
{
    const size_t per = (size_t)g.oh * (size_t)g.ow, in = (size_t)g.h * (size_t)g.w;
    for (size_t i = grid_first(); i < planes * in; i += grid_stride()) {
        const size_t plane = i / in;
        const int r = (int)(i - plane * in);
        dx[i] = pool_backward_at(x + plane * in, y + plane * per, dy + plane * per, g, r / g.w, r % g.w);
    }
}

static struct tb_pool_geom pool_geom(int h, int w, int oh, int ow, int k, int stride, int pad)
{
    struct tb_pool_geom g;
    g.h = h;
    g.w = w;
    g.oh = oh;
    g.ow = ow;
    g.k = k;
    g.stride = stride;
    g.pad = pad;
    return g;
}

cudaError_t tb_cuk_maxpool_forward(cudaStream_t s, const float *x, float *y, int n, int c, int h, int w, int oh, int ow,
                                   int k, int stride, int pad)
{
    forget_earlier_error();
    const size_t planes = (size_t)n * (size_t)c;
    maxpool_forward_kernel<<<grid_for(planes * (size_t)oh * (size_t)ow), TB_BLOCK, 0, s>>>(
        x, y, planes, pool_geom(h, w, oh, ow, k, stride, pad));
    return cudaGetLastError();
}

cudaError_t tb_cuk_maxpool_backward(cudaStream_t s, const float *x, const float *y, const float *dy, float *dx, int n,
                                    int c, int h, int w, int oh, int ow, int k, int stride, int pad)
{
    forget_earlier_error();
    const size_t planes = (size_t)n * (size_t)c;
    maxpool_backward_kernel<<<grid_for(planes * (size_t)h * (size_t)w), TB_BLOCK, 0, s>>>(
        x, y, dy, dx, planes, pool_geom(h, w, oh, ow, k, stride, pad));
    return cudaGetLastError();
}

/* Global average pooling: the mean in double, as the CPU, in a fixed order per size. Small
 * planes take a warp each, large ones a block each. */
static __global__ void avgpool_warp_kernel(const float *x, float *y, size_t nc, size_t hw)
{
    const unsigned lane = threadIdx.x & 31u;
    const size_t warps = (size_t)gridDim.x * (blockDim.x / 32u);
    /* plane is the same for the 32 lanes of a warp, so the shuffles see a whole warp */
    for (size_t plane = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32u; plane < nc; plane += warps) {
        const float *xp = x + plane * hw;
        double acc = 0.0;
        for (size_t p = lane; p < hw; p += 32)
            acc += (double)xp[p];
        for (int off = 16; off > 0; off >>= 1)
            acc += __shfl_down_sync(0xffffffffu, acc, off);
        if (lane == 0)
            y[plane] = (float)(acc / (double)hw);
    }
}

static __global__ void avgpool_block_kernel(const float *x, float *y, size_t nc, size_t hw)
{
    __shared__ double sh[TB_BLOCK];
    for (size_t plane = blockIdx.x; plane < nc; plane += gridDim.x) {
        const float *xp = x + plane * hw;
        double acc = 0.0;
        for (size_t p = threadIdx.x; p < hw; p += blockDim.x)
            acc += (double)xp[p];
        acc = block_sum(acc, sh);
        if (threadIdx.x == 0)
            y[plane] = (float)(acc / (double)hw);
    }
}

/* dx = dy / (H*W), divided as PyTorch's grad / (H*W) rather than multiplied by a rounded 1/(H*W). */
static __global__ void avgpool_backward_kernel(const float *dy, float *dx, size_t n, size_t hw, float area)
{
    for (size_t i = grid_first(); i < n; i += grid_stride())
        dx[i] = dy[i / hw] / area;
}

cudaError_t tb_cuk_avgpool_forward(cudaStream_t s, const float *x, float *y, size_t nc, size_t hw)
{
    forget_earlier_error();
    if (hw >= TB_AVG_BLOCK_HW) {
        const unsigned blocks = (unsigned)(nc < 1 ? 1 : nc > TB_GRID_MAX ? TB_GRID_MAX : nc);
        avgpool_block_kernel<<<blocks, TB_BLOCK, 0, s>>>(x, y, nc, hw);
    } else {
        avgpool_warp_kernel<<<grid_for(nc * 32), TB_BLOCK, 0, s>>>(x, y, nc, hw);
    }
    return cudaGetLastError();
}

cudaError_t tb_cuk_avgpool_backward(cudaStream_t s, const float *dy, float *dx, size_t nc, size_t hw)
{
    forget_earlier_error();
    avgpool_backward_kernel<<<grid_for(nc * hw), TB_BLOCK, 0, s>>>(dy, dx, nc * hw, hw, (float)hw);
    return cudaGetLastError();
}

static __global__ void resize_forward_kernel(const float *x, float *y, size_t planes, struct tb_resize_geom g)
{
    const size_t per = (size_t)g.oh * (size_t)g.ow, in = (size_t)g.h * (size_t)g.w;
    for (size_t i = grid_first(); i < planes * per; i += grid_stride()) {
        const size_t plane = i / per;
        const int r = (int)(i - plane * per);
        y[i] = resize_forward_at(x + plane * in, g, r / g.ow, r % g.ow);
    }
}

/* A gather (resize_backward_at): no atomics, the same sum in the same order every run. */
static __global__ void resize_backward_kernel(const float *dy, float *dx, size_t planes, struct tb_resize_geom g)
{
    const size_t per = (size_t)g.oh * (size_t)g.ow, in = (size_t)g.h * (size_t)g.w;
    for (size_t i = grid_first(); i < planes * in; i += grid_stride()) {
        const size_t plane = i / in;
        const int r = (int)(i - plane * in);
        dx[i] = resize_backward_at(dy + plane * per, g, r / g.w, r % g.w);
    }
}

cudaError_t tb_cuk_resize_forward(cudaStream_t s, const float *x, float *y, size_t nc, int h, int w, int oh, int ow,
                                  int align_corners)
{
    forget_earlier_error();
    resize_forward_kernel<<<grid_for(nc * (size_t)oh * (size_t)ow), TB_BLOCK, 0, s>>>(
        x, y, nc, resize_geom(h, w, oh, ow, align_corners));
    return cudaGetLastError();
}

cudaError_t tb_cuk_resize_backward(cudaStream_t s, const float *dy, float *dx, size_t nc, int h, int w, int oh, int ow,
                                   int align_corners)
{
    forget_earlier_error();
    resize_backward_kernel<<<grid_for(nc * (size_t)h * (size_t)w), TB_BLOCK, 0, s>>>(
        dy, dx, nc, resize_geom(h, w, oh, ow, align_corners));
    return cudaGetLastError();
}

/* ==================================================================== losses and labels
 *
 * The per-pixel reductions run on a (parts, N) grid: block (b, n) sums pixels b*TB_BLOCK +
 * thread, stepping parts*TB_BLOCK, of image n into partial n*parts + b; one block then adds
 * the partials in order. `parts` depends on the sizes only, so a run repeats its sums
 * exactly. */

/* Blocks per image: about TB_LOSS_PARTS in all, none idle on small images. */
static int loss_parts(int n, size_t hw)
{
    size_t b = (hw + TB_BLOCK - 1) / TB_BLOCK, cap = n > 0 ? TB_LOSS_PARTS / (size_t)n : TB_LOSS_PARTS;
    if (cap < 1)
        cap = 1;
    if (b > cap)
        b = cap;
    return b < 1 ? 1 : (int)b;
}

static dim3 loss_grid(int n, int parts)
{
    return dim3((unsigned)parts, (unsigned)(n < 1 ? 1 : n > 65535 ? 65535 : n));
}

/* Scratch, each piece 256-byte aligned: two arrays of N*parts 8-byte partials, N + 4 8-byte
 * values (per-image scales; BCE's two class weights), and N*256 class counts. */
struct loss_scratch {
    double *a, *b, *small;
    unsigned long long *counts;
};

static size_t round256(size_t bytes)
{
    return (bytes + 255) & ~(size_t)255;
}

static size_t loss_layout(int n, size_t hw, void *base, struct loss_scratch *ls)
{
    const size_t nn = n > 0 ? (size_t)n : 0, parts = nn * (size_t)loss_parts(n, hw);
    const size_t sa = round256(parts * sizeof(double)), ss = round256((nn + 4) * sizeof(double));
    const size_t sc = round256(nn * TB_LABELS * sizeof(unsigned long long));
    if (ls) {
        char *p = (char *)base;
        ls->a = (double *)p;
        ls->b = (double *)(p + sa);
        ls->small = (double *)(p + 2 * sa);
        ls->counts = (unsigned long long *)(p + 2 * sa + ss);
    }
    return 2 * sa + ss + sc;
}

size_t tb_cuk_loss_scratch_bytes(int n, int k, size_t hw)
{
    (void)k; /* class counts are per label value (256), whatever K */
    return loss_layout(n, hw, NULL, NULL);
}

/* ---- softmax cross-entropy */

/* Partials of sum w * nll (when logits) and sum w over the counted pixels; bad labels are
 * recorded (when bad) and count as ignored. */
static __global__ void ce_partials_kernel(const float *logits, const uint8_t *labels, const float *weights, int n,
                                          int k, size_t hw, int ignore, int parts, double *part_loss, double *part_w,
                                          int32_t *bad)
{
    __shared__ double sh[TB_BLOCK];
    for (int img = blockIdx.y; img < n; img += gridDim.y)
        for (int b = blockIdx.x; b < parts; b += gridDim.x) {
            const uint8_t *lab = labels + (size_t)img * hw;
            const float *z = logits ? logits + (size_t)img * (size_t)k * hw : NULL;
            double l = 0.0, wsum = 0.0;
            for (size_t p = (size_t)b * blockDim.x + threadIdx.x; p < hw; p += (size_t)parts * blockDim.x) {
                const int t = lab[p];
                if (t == ignore)
                    continue;
                if (t >= k) {
                    record_bad(bad, img, p, t);
                    continue;
                }
                const float w = weights ? weights[(size_t)img * (size_t)k + (size_t)t] : 1.0f;
                wsum += (double)w;
                if (z)
                    l += (double)(w * ce_nll(z + p, hw, k, t));
            }
            wsum = block_sum(wsum, sh);
            if (part_loss)
                l = block_sum(l, sh);
            if (threadIdx.x == 0) {
                const size_t at = (size_t)img * (size_t)parts + (size_t)b;
                part_w[at] = wsum;
                if (part_loss)
                    part_loss[at] = l;
            }
        }
}

/* Image n's sum of partials (all threads get it). */
__device__ static double image_sum(const double *part, int img, int parts, double *sh)
{
    const double *p = part + (size_t)img * (size_t)parts;
    double acc = 0.0;
    for (int j = threadIdx.x; j < parts; j += blockDim.x)
        acc += p[j];
    return block_sum(acc, sh);
}

/* One block: the loss from the partials, as cpu_loss.c's ce_forward. */
static __global__ void ce_loss_kernel(const double *part_loss, const double *part_w, int n, int parts, int per_image,
                                      float *loss)
{
    __shared__ double sh[TB_BLOCK];
    double total = 0.0, all_l = 0.0, all_w = 0.0;
    for (int img = 0; img < n; img++) {
        const double l = image_sum(part_loss, img, parts, sh), w = image_sum(part_w, img, parts, sh);
        if (per_image) {
            if (w > 0.0) /* an image with no counted pixel adds 0 */
                total += l / w;
        } else {
            all_l += l;
            all_w += w;
        }
    }
    if (threadIdx.x == 0) {
        if (!per_image)
            total = all_w > 0.0 ? all_l / all_w : 0.0;
        loss[0] = (float)total;
    }
}

/* One block: scale[n] = dloss / (image n's weight, or the batch's), 0 for a zero weight. */
static __global__ void ce_scale_kernel(const double *part_w, int n, int parts, int per_image, const float *dloss,
                                       double *scale)
{
    __shared__ double sh[TB_BLOCK];
    double all = 0.0;
    for (int img = 0; img < n; img++) {
        const double w = image_sum(part_w, img, parts, sh);
        all += w;
        if (threadIdx.x == 0)
            scale[img] = w;
    }
    __syncthreads(); /* thread 0's image weights, visible to the block */
    const double dl = (double)dloss[0];
    for (int img = threadIdx.x; img < n; img += blockDim.x) {
        const double denom = per_image ? scale[img] : all;
        scale[img] = denom > 0.0 ? dl / denom : 0.0;
    }
}

static __global__ void ce_grad_kernel(const float *logits, const uint8_t *labels, const float *weights,
                                      const double *scale, float *dz, int n, int k, size_t hw, int ignore)
{
    for (size_t q = grid_first(); q < (size_t)n * hw; q += grid_stride()) {
        const size_t img = q / hw, at = img * (size_t)k * hw + (q - img * hw);
        const int t = labels[q];
        if (t == ignore || t >= k) { /* ignored, or bad (already reported by forward) */
            for (int j = 0; j < k; j++)
                dz[at + (size_t)j * hw] = 0.0f;
            continue;
        }
        const float w = weights ? weights[img * (size_t)k + (size_t)t] : 1.0f;
        ce_grad(logits + at, dz + at, hw, k, t, (float)(scale[img] * (double)w));
    }
}

cudaError_t tb_cuk_softmax_ce_forward(cudaStream_t s, const float *logits, const uint8_t *labels, const float *weights,
                                      float *loss, int n, int k, size_t hw, int ignore_label, int per_image,
                                      void *scratch, int32_t *bad)
{
    forget_earlier_error();
    struct loss_scratch ls;
    loss_layout(n, hw, scratch, &ls);
    const int parts = loss_parts(n, hw);
    ce_partials_kernel<<<loss_grid(n, parts), TB_BLOCK, 0, s>>>(logits, labels, weights, n, k, hw, ignore_label, parts,
                                                                ls.a, ls.b, bad);
    ce_loss_kernel<<<1, TB_BLOCK, 0, s>>>(ls.a, ls.b, n, parts, per_image, loss);
    return cudaGetLastError();
}

cudaError_t tb_cuk_softmax_ce_backward(cudaStream_t s, const float *logits, const uint8_t *labels, const float *weights,
                                       const float *dloss, float *dlogits, int n, int k, size_t hw, int ignore_label,
                                       int per_image, void *scratch)
{
    forget_earlier_error();
    struct loss_scratch ls;
    loss_layout(n, hw, scratch, &ls);
    const int parts = loss_parts(n, hw);
    /* the denominators again (labels and weights only) */
    ce_partials_kernel<<<loss_grid(n, parts), TB_BLOCK, 0, s>>>(NULL, labels, weights, n, k, hw, ignore_label, parts,
                                                                NULL, ls.b, NULL);
    ce_scale_kernel<<<1, TB_BLOCK, 0, s>>>(ls.b, n, parts, per_image, dloss, ls.small);
    ce_grad_kernel<<<grid_for((size_t)n * hw), TB_BLOCK, 0, s>>>(logits, labels, weights, ls.small, dlogits, n, k, hw,
                                                                 ignore_label);
    return cudaGetLastError();
}

/* ---- class-balanced BCE with logits */

/* Partial counts of positives (t == 1) and negatives (t == 0). */
static __global__ void bce_count_kernel(const uint8_t *t, int n, size_t hw, int parts, unsigned long long *pos,
                                        unsigned long long *neg)
{
    __shared__ unsigned long long sh[TB_BLOCK];
    for (int img = blockIdx.y; img < n; img += gridDim.y)
        for (int b = blockIdx.x; b < parts; b += gridDim.x) {
            const uint8_t *tp = t + (size_t)img * hw;
            unsigned long long np = 0, nq = 0;
            for (size_t p = (size_t)b * blockDim.x + threadIdx.x; p < hw; p += (size_t)parts * blockDim.x) {
                np += tp[p] == 1;
                nq += tp[p] == 0;
            }
            np = block_sum(np, sh);
            nq = block_sum(nq, sh);
            if (threadIdx.x == 0) {
                pos[(size_t)img * (size_t)parts + (size_t)b] = np;
                neg[(size_t)img * (size_t)parts + (size_t)b] = nq;
            }
        }
}

/* One block: w[0] = Q/(P+Q) for a positive, w[1] = P/(P+Q) for a negative (0 without any). */
static __global__ void bce_weights_kernel(const unsigned long long *pos, const unsigned long long *neg, size_t count,
                                          float *w)
{
    __shared__ unsigned long long sh[TB_BLOCK];
    unsigned long long np = 0, nq = 0;
    for (size_t j = threadIdx.x; j < count; j += blockDim.x) {
        np += pos[j];
        nq += neg[j];
    }
    np = block_sum(np, sh);
    nq = block_sum(nq, sh);
    if (threadIdx.x == 0) {
        const unsigned long long all = np + nq;
        w[0] = all ? (float)((double)nq / (double)all) : 0.0f;
        w[1] = all ? (float)((double)np / (double)all) : 0.0f;
    }
}

static __global__ void bce_partials_kernel(const float *z, const uint8_t *t, const float *cw, int n, size_t hw,
                                           int parts, double *part)
{
    __shared__ double sh[TB_BLOCK];
    const float wpos = cw[0], wneg = cw[1];
    for (int img = blockIdx.y; img < n; img += gridDim.y)
        for (int b = blockIdx.x; b < parts; b += gridDim.x) {
            const size_t base = (size_t)img * hw;
            double acc = 0.0;
            for (size_t p = (size_t)b * blockDim.x + threadIdx.x; p < hw; p += (size_t)parts * blockDim.x) {
                const int ti = t[base + p];
                const float w = ti == 1 ? wpos : ti == 0 ? wneg : 0.0f;
                if (w == 0.0f)
                    continue;
                acc += (double)(w * bce_term(z[base + p], ti));
            }
            acc = block_sum(acc, sh);
            if (threadIdx.x == 0)
                part[(size_t)img * (size_t)parts + (size_t)b] = acc;
        }
}

/* One block: the mean over all N*H*W pixels. */
static __global__ void bce_loss_kernel(const double *part, size_t count, size_t pixels, float *loss)
{
    __shared__ double sh[TB_BLOCK];
    double acc = 0.0;
    for (size_t j = threadIdx.x; j < count; j += blockDim.x)
        acc += part[j];
    acc = block_sum(acc, sh);
    if (threadIdx.x == 0)
        loss[0] = (float)(acc / (double)pixels);
}

static __global__ void bce_grad_kernel(const float *z, const uint8_t *t, const float *cw, const float *dloss, float *dz,
                                       size_t pixels)
{
    /* d/dz of w * BCE is w * (sigmoid(z) - t), and the mean divides by N*H*W */
    const double base = (double)dloss[0] / (double)pixels;
    const float cpos = (float)(base * (double)cw[0]), cneg = (float)(base * (double)cw[1]);
    for (size_t i = grid_first(); i < pixels; i += grid_stride())
        dz[i] = bce_grad(z[i], t[i], cpos, cneg);
}

/* Counts and class weights into ls.small (two floats); returns the partials' count. */
static size_t bce_class_weights(cudaStream_t s, const uint8_t *t, int n, size_t hw, const struct loss_scratch *ls)
{
    const int parts = loss_parts(n, hw);
    unsigned long long *pos = (unsigned long long *)ls->a, *neg = (unsigned long long *)ls->b;
    bce_count_kernel<<<loss_grid(n, parts), TB_BLOCK, 0, s>>>(t, n, hw, parts, pos, neg);
    const size_t count = (size_t)(n > 0 ? n : 0) * (size_t)parts;
    bce_weights_kernel<<<1, TB_BLOCK, 0, s>>>(pos, neg, count, (float *)ls->small);
    return count;
}

cudaError_t tb_cuk_bce_forward(cudaStream_t s, const float *logits, const uint8_t *targets, float *loss, int n,
                               size_t hw, void *scratch)
{
    forget_earlier_error();
    struct loss_scratch ls;
    loss_layout(n, hw, scratch, &ls);
    const int parts = loss_parts(n, hw);
    const size_t count = bce_class_weights(s, targets, n, hw, &ls);
    /* ls.a held the positive counts, consumed by bce_weights_kernel before this runs */
    bce_partials_kernel<<<loss_grid(n, parts), TB_BLOCK, 0, s>>>(logits, targets, (const float *)ls.small, n, hw, parts,
                                                                 ls.a);
    bce_loss_kernel<<<1, TB_BLOCK, 0, s>>>(ls.a, count, (size_t)(n > 0 ? n : 0) * hw, loss);
    return cudaGetLastError();
}

cudaError_t tb_cuk_bce_backward(cudaStream_t s, const float *logits, const uint8_t *targets, const float *dloss,
                                float *dlogits, int n, size_t hw, void *scratch)
{
    forget_earlier_error();
    struct loss_scratch ls;
    loss_layout(n, hw, scratch, &ls);
    bce_class_weights(s, targets, n, hw, &ls);
    const size_t pixels = (size_t)(n > 0 ? n : 0) * hw;
    bce_grad_kernel<<<grid_for(pixels), TB_BLOCK, 0, s>>>(logits, targets, (const float *)ls.small, dloss, dlogits,
                                                          pixels);
    return cudaGetLastError();
}

/* ---- class weights, mask labels */

static __global__ void zero_u64_kernel(unsigned long long *x, size_t n)
{
    for (size_t i = grid_first(); i < n; i += grid_stride())
        x[i] = 0;
}

/* counts[n*256 + t] += image n's pixels labelled t (t < K, not ignored): a shared
 * histogram per block, then integer atomics (exact in any order). */
static __global__ void cw_count_kernel(const uint8_t *labels, int n, int k, size_t hw, int ignore, int parts,
                                       unsigned long long *counts, int32_t *bad)
{
    __shared__ unsigned long long hist[TB_LABELS];
    for (int img = blockIdx.y; img < n; img += gridDim.y)
        for (int b = blockIdx.x; b < parts; b += gridDim.x) {
            for (int j = threadIdx.x; j < TB_LABELS; j += blockDim.x)
                hist[j] = 0;
            __syncthreads();
            const uint8_t *lab = labels + (size_t)img * hw;
            for (size_t p = (size_t)b * blockDim.x + threadIdx.x; p < hw; p += (size_t)parts * blockDim.x) {
                const int t = lab[p];
                if (t == ignore)
                    continue;
                if (t >= k) {
                    record_bad(bad, img, p, t);
                    continue;
                }
                atomicAdd(&hist[t], 1ull);
            }
            __syncthreads();
            for (int j = threadIdx.x; j < TB_LABELS; j += blockDim.x)
                if (hist[j])
                    atomicAdd(&counts[(size_t)img * TB_LABELS + (size_t)j], hist[j]);
            __syncthreads(); /* before the next image's zeroing */
        }
}

static __global__ void cw_weights_kernel(const unsigned long long *counts, float *weights, size_t count, int k)
{
    for (size_t i = grid_first(); i < count; i += grid_stride()) {
        const size_t img = i / (size_t)k, j = i - img * (size_t)k;
        const unsigned long long *c = counts + img * TB_LABELS;
        unsigned long long total = 0;
        for (int v = 0; v < TB_LABELS; v++)
            total += c[v];
        weights[i] = cw_weight(j < TB_LABELS ? c[j] : 0, total); /* classes >= 256 never occur */
    }
}

cudaError_t tb_cuk_class_weights(cudaStream_t s, const uint8_t *labels, float *weights, int n, int k, size_t hw,
                                 int ignore_label, void *scratch, int32_t *bad)
{
    forget_earlier_error();
    struct loss_scratch ls;
    loss_layout(n, hw, scratch, &ls);
    const int parts = loss_parts(n, hw);
    const size_t nn = (size_t)(n > 0 ? n : 0), ncounts = nn * TB_LABELS, nweights = nn * (size_t)(k > 0 ? k : 0);
    zero_u64_kernel<<<grid_for(ncounts), TB_BLOCK, 0, s>>>(ls.counts, ncounts);
    cw_count_kernel<<<loss_grid(n, parts), TB_BLOCK, 0, s>>>(labels, n, k, hw, ignore_label, parts, ls.counts, bad);
    cw_weights_kernel<<<grid_for(nweights), TB_BLOCK, 0, s>>>(ls.counts, weights, nweights, k);
    return cudaGetLastError();
}

static __global__ void mask_labels_kernel(const uint8_t *labels, const float *x, uint8_t *out, size_t n,
                                          float threshold, uint8_t ignore)
{
    for (size_t i = grid_first(); i < n; i += grid_stride())
        out[i] = x[i] > threshold ? labels[i] : ignore;
}

cudaError_t tb_cuk_mask_labels(cudaStream_t s, const uint8_t *labels, const float *x, uint8_t *out, size_t count,
                               float threshold, int ignore_label)
{
    forget_earlier_error();
    mask_labels_kernel<<<grid_for(count), TB_BLOCK, 0, s>>>(labels, x, out, count, threshold, (uint8_t)ignore_label);
    return cudaGetLastError();
}

/* ==================================================================== data parallelism */

static __global__ void scale_kernel(float *x, size_t n, float alpha)
{
    for (size_t i = grid_first(); i < n; i += grid_stride())
        x[i] *= alpha;
}

cudaError_t tb_cuk_scale(cudaStream_t s, float *x, size_t n, float alpha)
{
    forget_earlier_error();
    if (!n)
        return cudaSuccess;
    scale_kernel<<<grid_for(n), TB_BLOCK, 0, s>>>(x, n, alpha);
    return cudaGetLastError();
}

/* ---- synchronised batch norm */

enum { BN_SUM_X, BN_SUM_DEV, BN_SUM_GRAD };

/* Block (b, ch) sums part b (bn_split) of channel ch in double: x (BN_SUM_X); d = x - k
 * and d^2 with k = red1[ch] / red1[c] (BN_SUM_DEV); or dy and dy * (x - mean) with mean =
 * mean_f[ch] (BN_SUM_GRAD). The first sum goes to part[ch * parts + b], the second to
 * part[(c + ch) * parts + b]. */
template <int KIND>
static __global__ void bn_partials_kernel(const float *x, const float *dy, const double *red1, const float *mean_f,
                                          int c, size_t hw, struct tb_bn_split sp, double *part)
{
    __shared__ double sh[TB_BLOCK];
    for (int ch = blockIdx.y; ch < c; ch += gridDim.y) {
        double center = 0.0;
        if constexpr (KIND == BN_SUM_DEV)
            center = red1[ch] / red1[c];
        if constexpr (KIND == BN_SUM_GRAD)
            center = (double)mean_f[ch];
        for (int b = blockIdx.x; b < sp.parts; b += gridDim.x) {
            int img;
            size_t lo, hi;
            bn_part_range(sp, hw, b, &img, &lo, &hi);
            const size_t base = ((size_t)img * (size_t)c + (size_t)ch) * hw;
            double s1 = 0.0, s2 = 0.0;
            for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
                const double v = (double)x[base + i];
                if constexpr (KIND == BN_SUM_X) {
                    s1 += v;
                } else if constexpr (KIND == BN_SUM_DEV) {
                    const double d = v - center;
                    s1 += d;
                    s2 += TB_DMUL(d, d);
                } else {
                    const double g = (double)dy[base + i];
                    s1 += g;
                    s2 += TB_DMUL(g, v - center);
                }
            }
            s1 = block_sum(s1, sh);
            if constexpr (KIND != BN_SUM_X)
                s2 = block_sum(s2, sh);
            if (threadIdx.x == 0) {
                part[(size_t)ch * (size_t)sp.parts + (size_t)b] = s1;
                if constexpr (KIND != BN_SUM_X)
                    part[((size_t)c + (size_t)ch) * (size_t)sp.parts + (size_t)b] = s2;
            }
        }
    }
}

/* out[r] = row r of the partials summed in part order (r < rows); out[rows] = count when
 * count >= 0 (the values this rank counted, all-reduced with the sums). */
static __global__ void bn_rows_kernel(const double *part, int parts, size_t rows, double count, double *out)
{
    for (size_t r = grid_first(); r < rows; r += grid_stride()) {
        const double *p = part + r * (size_t)parts;
        double acc = 0.0;
        for (int b = 0; b < parts; b++)
            acc += p[b];
        out[r] = acc;
    }
    if (count >= 0.0 && grid_first() == 0)
        out[rows] = count;
}

static __global__ void bn_stats_kernel(const double *red1, const double *red2, const float *gamma, float *rmean,
                                       float *rvar, float *save_mean, float *save_invstd, float *scale, int c,
                                       double eps, double mom)
{
    for (size_t ch = grid_first(); ch < (size_t)c; ch += grid_stride()) {
        const double count = red1[c];
        const struct tb_bn_stats st = bn_stats_at(red1[ch] / count, red2[ch], red2[(size_t)c + ch], count, gamma[ch],
                                                  rmean[ch], rvar[ch], eps, mom);
        save_mean[ch] = st.save_mean;
        save_invstd[ch] = st.save_invstd;
        scale[ch] = st.scale;
        rmean[ch] = st.running_mean;
        rvar[ch] = st.running_var;
    }
}

static __global__ void bn_normalize_kernel(const float *x, float *y, const float *mean, const float *scale,
                                           const float *beta, size_t planes, int c, size_t hw)
{
    for (size_t pl = blockIdx.y; pl < planes; pl += gridDim.y) {
        const int ch = (int)(pl % (size_t)c);
        const float m = mean[ch], sc = scale[ch], b = beta[ch];
        const float *xp = x + pl * hw;
        float *yp = y + pl * hw;
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < hw; i += (size_t)gridDim.x * blockDim.x)
            yp[i] = bn_affine_at(xp[i], m, sc, b);
    }
}

/* This rank's dgamma and dbeta from its own sums (before they are all-reduced). */
static __global__ void bn_local_grads_kernel(const double *red, const float *invstd, int c, float *dgamma, float *dbeta)
{
    for (size_t ch = grid_first(); ch < (size_t)c; ch += grid_stride()) {
        if (dbeta)
            dbeta[ch] = (float)red[ch];
        if (dgamma)
            dgamma[ch] = (float)(red[(size_t)c + ch] * (double)invstd[ch]);
    }
}

static __global__ void bn_coef_kernel(const double *red, const float *gamma, const float *invstd, int c, float *coef)
{
    const size_t cc = (size_t)c;
    for (size_t ch = grid_first(); ch < cc; ch += grid_stride())
        bn_coef_at(red[ch], red[cc + ch], red[2 * cc], gamma[ch], invstd[ch], &coef[ch], &coef[cc + ch],
                   &coef[2 * cc + ch]);
}

static __global__ void bn_dx_kernel(const float *x, const float *dy, const float *mean, const float *coef, float *dx,
                                    size_t planes, int c, size_t hw)
{
    for (size_t pl = blockIdx.y; pl < planes; pl += gridDim.y) {
        const int ch = (int)(pl % (size_t)c);
        const float m = mean[ch], a1 = coef[ch], a2 = coef[c + ch], a3 = coef[2 * c + ch];
        const size_t base = pl * hw;
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < hw; i += (size_t)gridDim.x * blockDim.x)
            dx[base + i] = bn_dx_at(dy[base + i], x[base + i], m, a1, a2, a3);
    }
}

/* Blocks for the partials: (part, channel). */
static dim3 bn_partials_grid(struct tb_bn_split sp, int c)
{
    const int x = sp.parts < TB_GRID_MAX ? sp.parts : TB_GRID_MAX, y = c < TB_GRID_Y_MAX ? c : TB_GRID_Y_MAX;
    return dim3((unsigned)(x > 0 ? x : 1), (unsigned)(y > 0 ? y : 1));
}

/* Blocks for a per-plane elementwise kernel: (values of a plane, plane), about TB_GRID_MAX in all. */
static dim3 bn_plane_grid(size_t planes, size_t hw)
{
    const size_t y = planes < TB_GRID_Y_MAX ? (planes ? planes : 1) : TB_GRID_Y_MAX;
    size_t x = (hw + TB_BLOCK - 1) / TB_BLOCK, xmax = TB_GRID_MAX / y;
    if (x > xmax)
        x = xmax;
    return dim3((unsigned)(x ? x : 1), (unsigned)y);
}

size_t tb_cuk_bn_part_doubles(int n, int c, size_t hw)
{
    return 2 * (size_t)bn_split(n, hw).parts * (size_t)(c > 0 ? c : 0);
}

cudaError_t tb_cuk_bn_sums(cudaStream_t s, const float *x, int n, int c, size_t hw, double *part, double *red1)
{
    forget_earlier_error();
    const struct tb_bn_split sp = bn_split(n, hw);
    if (c <= 0 || sp.parts <= 0 || !hw)
        return cudaSuccess;
    bn_partials_kernel<BN_SUM_X><<<bn_partials_grid(sp, c), TB_BLOCK, 0, s>>>(x, NULL, NULL, NULL, c, hw, sp, part);
    bn_rows_kernel<<<grid_for((size_t)c), TB_BLOCK, 0, s>>>(part, sp.parts, (size_t)c, (double)n * (double)hw, red1);
    return cudaGetLastError();
}

cudaError_t tb_cuk_bn_devs(cudaStream_t s, const float *x, int n, int c, size_t hw, const double *red1, double *part,
                           double *red2)
{
    forget_earlier_error();
    const struct tb_bn_split sp = bn_split(n, hw);
    if (c <= 0 || sp.parts <= 0 || !hw)
        return cudaSuccess;
    bn_partials_kernel<BN_SUM_DEV><<<bn_partials_grid(sp, c), TB_BLOCK, 0, s>>>(x, NULL, red1, NULL, c, hw, sp, part);
    bn_rows_kernel<<<grid_for(2 * (size_t)c), TB_BLOCK, 0, s>>>(part, sp.parts, 2 * (size_t)c, -1.0, red2);
    return cudaGetLastError();
}

cudaError_t tb_cuk_bn_forward(cudaStream_t s, const float *x, float *y, int n, int c, size_t hw, const double *red1,
                              const double *red2, const float *gamma, const float *beta, float *running_mean,
                              float *running_var, float *save_mean, float *save_invstd, float *scale, double eps,
                              double momentum)
{
    forget_earlier_error();
    if (c <= 0 || n <= 0 || !hw)
        return cudaSuccess;
    bn_stats_kernel<<<grid_for((size_t)c), TB_BLOCK, 0, s>>>(red1, red2, gamma, running_mean, running_var, save_mean,
                                                             save_invstd, scale, c, eps, momentum);
    const size_t planes = (size_t)n * (size_t)c;
    bn_normalize_kernel<<<bn_plane_grid(planes, hw), TB_BLOCK, 0, s>>>(x, y, save_mean, scale, beta, planes, c, hw);
    return cudaGetLastError();
}

cudaError_t tb_cuk_bn_grad_sums(cudaStream_t s, const float *x, const float *dy, const float *save_mean,
                                const float *save_invstd, int n, int c, size_t hw, double *part, double *red,
                                float *dgamma, float *dbeta)
{
    forget_earlier_error();
    const struct tb_bn_split sp = bn_split(n, hw);
    if (c <= 0 || sp.parts <= 0 || !hw)
        return cudaSuccess;
    bn_partials_kernel<BN_SUM_GRAD>
        <<<bn_partials_grid(sp, c), TB_BLOCK, 0, s>>>(x, dy, NULL, save_mean, c, hw, sp, part);
    bn_rows_kernel<<<grid_for(2 * (size_t)c), TB_BLOCK, 0, s>>>(part, sp.parts, 2 * (size_t)c, (double)n * (double)hw,
                                                                red);
    if (dgamma || dbeta)
        bn_local_grads_kernel<<<grid_for((size_t)c), TB_BLOCK, 0, s>>>(red, save_invstd, c, dgamma, dbeta);
    return cudaGetLastError();
}

cudaError_t tb_cuk_bn_backward_dx(cudaStream_t s, const float *x, const float *dy, const float *save_mean,
                                  const float *save_invstd, const float *gamma, const double *red, float *coef,
                                  float *dx, int n, int c, size_t hw)
{
    forget_earlier_error();
    if (c <= 0 || n <= 0 || !hw)
        return cudaSuccess;
    bn_coef_kernel<<<grid_for((size_t)c), TB_BLOCK, 0, s>>>(red, gamma, save_invstd, c, coef);
    const size_t planes = (size_t)n * (size_t)c;
    bn_dx_kernel<<<bn_plane_grid(planes, hw), TB_BLOCK, 0, s>>>(x, dy, save_mean, coef, dx, planes, c, hw);
    return cudaGetLastError();
}

/* ==================================================================== dual-task regulariser
 *
 * cpu_dual.c's definition (not its order of work), on NCHW tensors: the sample pixel by
 * pixel; each map's smoothing as a row pass and a column pass (a thread per element), the
 * magnitudes, their maxima (block partials, then one block: a maximum is exact in any
 * order), the masked sums in double (block partials added in a fixed order). The
 * backward's adjoints of the two smoothing passes scatter, each thread along its own
 * column (or row), so no two threads write one element and no float atomic is needed. */

#define DT_RADIUS 4
#define DT_TAPS (2 * DT_RADIUS + 1)
#define DT_EPS 1e-10f
#define DT_THRESHOLD 1e-8f
#define DT_FLOOR 1e-6f

__host__ __device__ static inline float dt_tap(int d)
{
    return (float)(d <= DT_RADIUS ? d + 1 : DT_TAPS - d) / (float)((DT_RADIUS + 1) * (DT_RADIUS + 1));
}

/* Symmetric padding, the edge sample repeated (cpu_dual.c's dt_reflect). */
__host__ __device__ static inline int dt_reflect(int i, int n)
{
    while (i < 0 || i >= n)
        i = i < 0 ? -i - 1 : 2 * n - 1 - i;
    return i;
}

/* Element (plane, y, x) of the map being smoothed: the sample's, or the one-hot labels'
 * (src NULL; plane = image * k + class, an ignored pixel is class 0). */
__device__ static inline float dt_value(const float *src, const uint8_t *labels, int k, int ignore, size_t hw,
                                        size_t plane, size_t at)
{
    if (src)
        return src[plane * hw + at];
    const int lab = labels[plane / (size_t)k * hw + at];
    return (lab == ignore ? 0 : lab) == (int)(plane % (size_t)k) ? 1.0f : 0.0f;
}

static __global__ void dt_sample_kernel(const float *logits, const uint8_t *labels, float *sample, int n, int k,
                                        size_t hw, float tau, int ignore, uint64_t seed, uint64_t step, uint32_t op,
                                        int32_t *bad)
{
    const size_t pixels = (size_t)n * hw;
    for (size_t i = grid_first(); i < pixels; i += grid_stride()) {
        const size_t img = i / hw, p = i - img * hw;
        const int t = labels[i];
        const bool ignored = t == ignore;
        if (!ignored && t >= k)
            record_bad(bad, (int)img, p, t);
        float m = -INFINITY;
        for (int c = 0; c < k; c++) {
            const size_t at = (img * (size_t)k + (size_t)c) * hw + p;
            const float u = tb_uniform(seed, step, op, at);
            const float g = -logf(DT_EPS - logf(u + DT_EPS));
            const float v = ((ignored ? 0.0f : logits[at]) + g) / tau;
            sample[at] = v;
            m = v > m ? v : m;
        }
        float sum = 0.0f;
        for (int c = 0; c < k; c++) {
            const size_t at = (img * (size_t)k + (size_t)c) * hw + p;
            sample[at] = expf(sample[at] - m);
            sum += sample[at];
        }
        for (int c = 0; c < k; c++) {
            const size_t at = (img * (size_t)k + (size_t)c) * hw + p;
            sample[at] = sample[at] / sum;
        }
    }
}

/* t = the map smoothed along W. */
static __global__ void dt_rows_kernel(const float *src, const uint8_t *labels, int k, int ignore, size_t planes, int h,
                                      int w, float *t)
{
    const size_t hw = (size_t)h * (size_t)w, count = planes * hw;
    for (size_t i = grid_first(); i < count; i += grid_stride()) {
        const size_t plane = i / hw, at = i - plane * hw, row = at / (size_t)w * (size_t)w;
        const int x = (int)(at - row);
        float acc = 0.0f;
        for (int d = 0; d < DT_TAPS; d++)
            acc += TB_MUL(dt_tap(d),
                          dt_value(src, labels, k, ignore, hw, plane, row + (size_t)dt_reflect(x + d - DT_RADIUS, w)));
        t[i] = acc;
    }
}

/* s = t smoothed along H. */
static __global__ void dt_cols_kernel(const float *t, size_t planes, int h, int w, float *s)
{
    const size_t hw = (size_t)h * (size_t)w, count = planes * hw;
    for (size_t i = grid_first(); i < count; i += grid_stride()) {
        const size_t plane = i / hw, at = i - plane * hw;
        const int y = (int)(at / (size_t)w), x = (int)(at % (size_t)w);
        float acc = 0.0f;
        for (int d = 0; d < DT_TAPS; d++)
            acc += TB_MUL(dt_tap(d), t[plane * hw + (size_t)dt_reflect(y + d - DT_RADIUS, h) * (size_t)w + (size_t)x]);
        s[i] = acc;
    }
}

/* The central differences of plane-major s at element i, zero beyond the border. */
__device__ static inline void dt_diffs(const float *s, int h, int w, size_t i, float *ox, float *oy)
{
    const size_t hw = (size_t)h * (size_t)w, at = i % hw;
    const int y = (int)(at / (size_t)w), x = (int)(at % (size_t)w);
    const float r = x + 1 < w ? s[i + 1] : 0.0f, l = x > 0 ? s[i - 1] : 0.0f;
    const float dn = y + 1 < h ? s[i + (size_t)w] : 0.0f, up = y > 0 ? s[i - (size_t)w] : 0.0f;
    *ox = TB_MUL(0.5f, r) - TB_MUL(0.5f, l);
    *oy = TB_MUL(0.5f, dn) - TB_MUL(0.5f, up);
}

static __global__ void dt_mag_kernel(const float *s, size_t count, int h, int w, float *m)
{
    for (size_t i = grid_first(); i < count; i += grid_stride()) {
        float ox, oy;
        dt_diffs(s, h, w, i, &ox, &oy);
        m[i] = sqrtf(TB_MUL(ox, ox) + TB_MUL(oy, oy) + DT_FLOOR);
    }
}

/* The larger of a and b, NaN when either is: a NaN magnitude reaches the maximum, and the
 * loss says so (ops.h). */
__device__ static inline float dt_fmax(float a, float b)
{
    return b > a || b != b ? b : a;
}

/* Maximum of v over the block, NaN when any is; every thread gets it (sh: TB_BLOCK floats). */
__device__ static float block_max(float v, float *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            sh[threadIdx.x] = dt_fmax(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
    const float r = sh[0];
    __syncthreads();
    return r;
}

/* out[blockIdx.x] = the maximum of the block's share of m (one block: of all of m). */
static __global__ void dt_max_kernel(const float *m, size_t count, float *out)
{
    __shared__ float sh[TB_BLOCK];
    float best = -INFINITY;
    for (size_t i = grid_first(); i < count; i += grid_stride())
        best = dt_fmax(best, m[i]);
    best = block_max(best, sh);
    if (threadIdx.x == 0)
        out[blockIdx.x] = best;
}

/* Block partials of: count(p >= th), count(q >= th), sum |p - q| over each, with p = mp/Mp
 * and q = mg/Mg (part: 4 arrays of gridDim.x). */
static __global__ void dt_sums_kernel(const float *mp, const float *mg, const float *maxima, size_t count, double *part)
{
    __shared__ double sh[TB_BLOCK];
    const float Mp = maxima[0], Mg = maxima[1];
    double a[4] = { 0, 0, 0, 0 };
    for (size_t i = grid_first(); i < count; i += grid_stride()) {
        const float p = mp[i] / Mp, q = mg[i] / Mg, d = fabsf(p - q);
        if (p >= DT_THRESHOLD) {
            a[0] += 1.0;
            a[2] += (double)d;
        }
        if (q >= DT_THRESHOLD) {
            a[1] += 1.0;
            a[3] += (double)d;
        }
    }
    for (int j = 0; j < 4; j++) {
        const double v = block_sum(a[j], sh);
        if (threadIdx.x == 0)
            part[(size_t)j * gridDim.x + blockIdx.x] = v;
    }
}

/* One block: sums[j] = the parts of partial j added in order (nsums arrays of parts). */
static __global__ void dt_total_kernel(const double *part, int parts, int nsums, double *sums)
{
    __shared__ double sh[TB_BLOCK];
    for (int j = 0; j < nsums; j++) {
        double acc = 0.0;
        for (int b = threadIdx.x; b < parts; b += blockDim.x)
            acc += part[(size_t)j * (size_t)parts + (size_t)b];
        acc = block_sum(acc, sh);
        if (threadIdx.x == 0)
            sums[j] = acc;
    }
}

static __global__ void dt_loss_kernel(const double *c, const float *maxima, float *loss)
{
    loss[0] = (float)(0.5 * c[2] / (c[0] + (double)DT_EPS) + 0.5 * c[3] / (c[1] + (double)DT_EPS));
    if (isnan(maxima[0])) /* a NaN sample is in no mask: say so rather than leave it out */
        loss[0] = NAN;
}

/* mg[i] = d loss / d p_i; partials of sum_i of that times mp_i, and of the tied maxima. */
static __global__ void dt_grad_p_kernel(const float *mp, float *mg, const float *maxima, const double *c,
                                        const float *dloss, size_t count, double *part)
{
    __shared__ double sh[TB_BLOCK];
    const float Mp = maxima[0], Mg = maxima[1];
    const double w1 = 0.5 * (double)dloss[0] / (c[0] + (double)DT_EPS),
                 w2 = 0.5 * (double)dloss[0] / (c[1] + (double)DT_EPS);
    double a[2] = { 0, 0 };
    for (size_t i = grid_first(); i < count; i += grid_stride()) {
        const float pi = mp[i] / Mp, qi = mg[i] / Mg;
        const float sg = pi > qi ? 1.0f : pi < qi ? -1.0f : 0.0f;
        const float g = sg * (float)((pi >= DT_THRESHOLD ? w1 : 0.0) + (qi >= DT_THRESHOLD ? w2 : 0.0));
        mg[i] = g;
        a[0] += (double)g * (double)mp[i];
        a[1] += mp[i] == Mp ? 1.0 : 0.0;
    }
    for (int j = 0; j < 2; j++) {
        const double v = block_sum(a[j], sh);
        if (threadIdx.x == 0)
            part[(size_t)j * gridDim.x + blockIdx.x] = v;
    }
}

/* mg[i] = d loss / d m_i: through the division by the maximum (shared by tied maxima). */
static __global__ void dt_grad_m_kernel(const float *mp, float *mg, const float *maxima, const double *gm_ties,
                                        size_t count)
{
    const float Mp = maxima[0];
    const float at_max = (float)(gm_ties[0] / ((double)Mp * (double)Mp * gm_ties[1]));
    for (size_t i = grid_first(); i < count; i += grid_stride())
        mg[i] = mg[i] / Mp - (mp[i] == Mp ? at_max : 0.0f);
}

/* a, b = d loss / d Ox, d Oy = dm * Ox / m, dm * Oy / m. */
static __global__ void dt_dxy_kernel(const float *s, const float *dm, size_t count, int h, int w, float *a, float *b)
{
    for (size_t i = grid_first(); i < count; i += grid_stride()) {
        float ox, oy;
        dt_diffs(s, h, w, i, &ox, &oy);
        const float m = sqrtf(TB_MUL(ox, ox) + TB_MUL(oy, oy) + DT_FLOOR);
        a[i] = TB_MUL(dm[i], ox) / m;
        b[i] = TB_MUL(dm[i], oy) / m;
    }
}

/* e = d loss / d S (each element gathers from its neighbours' dOx, dOy). */
static __global__ void dt_ds_kernel(const float *a, const float *b, size_t count, int h, int w, float *e)
{
    const size_t hw = (size_t)h * (size_t)w;
    for (size_t i = grid_first(); i < count; i += grid_stride()) {
        const size_t at = i % hw;
        const int y = (int)(at / (size_t)w), x = (int)(at % (size_t)w);
        float g = 0.0f;
        if (x > 0)
            g += TB_MUL(0.5f, a[i - 1]);
        if (x + 1 < w)
            g -= TB_MUL(0.5f, a[i + 1]);
        if (y > 0)
            g += TB_MUL(0.5f, b[i - (size_t)w]);
        if (y + 1 < h)
            g -= TB_MUL(0.5f, b[i + (size_t)w]);
        e[i] = g;
    }
}

/* t = the column pass's adjoint of e: a thread per (plane, column), scattering down it. */
static __global__ void dt_cols_adjoint_kernel(const float *e, size_t planes, int h, int w, float *t)
{
    const size_t hw = (size_t)h * (size_t)w, count = planes * (size_t)w;
    for (size_t j = grid_first(); j < count; j += grid_stride()) {
        const size_t plane = j / (size_t)w, x = j - plane * (size_t)w;
        const float *ep = e + plane * hw + x;
        float *tp = t + plane * hw + x;
        for (int y = 0; y < h; y++)
            tp[(size_t)y * (size_t)w] = 0.0f;
        for (int y = 0; y < h; y++) {
            const float g = ep[(size_t)y * (size_t)w];
            for (int d = 0; d < DT_TAPS; d++)
                tp[(size_t)dt_reflect(y + d - DT_RADIUS, h) * (size_t)w] += TB_MUL(dt_tap(d), g);
        }
    }
}

/* dq = the row pass's adjoint of t: a thread per (plane, row), scattering along it. */
static __global__ void dt_rows_adjoint_kernel(const float *t, size_t planes, int h, int w, float *dq)
{
    const size_t rows = planes * (size_t)h;
    for (size_t r = grid_first(); r < rows; r += grid_stride()) {
        const float *tr = t + r * (size_t)w;
        float *row = dq + r * (size_t)w;
        for (int x = 0; x < w; x++)
            row[x] = 0.0f;
        for (int x = 0; x < w; x++)
            for (int d = 0; d < DT_TAPS; d++)
                row[dt_reflect(x + d - DT_RADIUS, w)] += TB_MUL(dt_tap(d), tr[x]);
    }
}

/* dz_c = q_c (dq_c - sum_j q_j dq_j) / tau per pixel; 0 where the label is ignored. */
static __global__ void dt_softmax_grad_kernel(const float *sample, const uint8_t *labels, const float *dq, float *dz,
                                              int n, int k, size_t hw, float tau, int ignore)
{
    const size_t pixels = (size_t)n * hw;
    for (size_t i = grid_first(); i < pixels; i += grid_stride()) {
        const size_t img = i / hw, p = i - img * hw, base = img * (size_t)k * hw + p;
        if (labels[i] == ignore) {
            for (int c = 0; c < k; c++)
                dz[base + (size_t)c * hw] = 0.0f;
            continue;
        }
        float dot = 0.0f;
        for (int c = 0; c < k; c++)
            dot += TB_MUL(sample[base + (size_t)c * hw], dq[base + (size_t)c * hw]);
        for (int c = 0; c < k; c++) {
            const size_t at = base + (size_t)c * hw;
            dz[at] = TB_MUL(sample[at], dq[at] - dot) / tau;
        }
    }
}

/* Scratch: six maps of N*K*H*W floats (mp, mg, t, s, a, b), the partials (4 arrays of
 * TB_LOSS_PARTS doubles), the sums (8 doubles) and the maxima (2 floats). */
struct dt_scratch {
    float *mp, *mg, *t, *s, *a, *b;
    double *part, *sums;
    float *maxima;
};

static size_t dt_layout(size_t count, void *base, struct dt_scratch *ds)
{
    const size_t sm = round256(count * sizeof(float)), sp = round256(4 * TB_LOSS_PARTS * sizeof(double));
    const size_t ss = round256(8 * sizeof(double)), sx = round256(2 * sizeof(float));
    if (ds) {
        char *p = (char *)base;
        float **maps[6] = { &ds->mp, &ds->mg, &ds->t, &ds->s, &ds->a, &ds->b };
        for (int j = 0; j < 6; j++)
            *maps[j] = (float *)(p + (size_t)j * sm);
        ds->part = (double *)(p + 6 * sm);
        ds->sums = (double *)(p + 6 * sm + sp);
        ds->maxima = (float *)(p + 6 * sm + sp + ss);
    }
    return 6 * sm + sp + ss + sx;
}

size_t tb_cuk_dual_scratch_bytes(int n, int k, int h, int w)
{
    return dt_layout((size_t)n * (size_t)k * (size_t)h * (size_t)w, NULL, NULL);
}

/* Blocks of the reductions over count elements: at most TB_LOSS_PARTS, a fixed function of
 * the size (so the partials, and the sums, repeat run to run). */
static unsigned dt_parts(size_t count)
{
    const size_t b = (count + TB_BLOCK - 1) / TB_BLOCK;
    return (unsigned)(b < 1 ? 1 : b > TB_LOSS_PARTS ? TB_LOSS_PARTS : b);
}

/* The magnitudes of the sample and of the labels into ds->mp, ds->mg, their maxima into
 * ds->maxima, and the masks' counts and sums into ds->sums[0..3]. */
static void dt_maps(cudaStream_t s, const float *sample, const uint8_t *labels, int n, int k, int h, int w, int ignore,
                    const struct dt_scratch *ds)
{
    const size_t planes = (size_t)n * (size_t)k, count = planes * (size_t)h * (size_t)w;
    const unsigned parts = dt_parts(count);
    for (int j = 0; j < 2; j++) {
        float *m = j == 0 ? ds->mp : ds->mg;
        dt_rows_kernel<<<grid_for(count), TB_BLOCK, 0, s>>>(j == 0 ? sample : NULL, labels, k, ignore, planes, h, w,
                                                            ds->t);
        dt_cols_kernel<<<grid_for(count), TB_BLOCK, 0, s>>>(ds->t, planes, h, w, ds->s);
        dt_mag_kernel<<<grid_for(count), TB_BLOCK, 0, s>>>(ds->s, count, h, w, m);
        /* partial maxima into t (free again), then the maximum */
        dt_max_kernel<<<parts, TB_BLOCK, 0, s>>>(m, count, ds->t);
        dt_max_kernel<<<1, TB_BLOCK, 0, s>>>(ds->t, parts, ds->maxima + j);
    }
    dt_sums_kernel<<<parts, TB_BLOCK, 0, s>>>(ds->mp, ds->mg, ds->maxima, count, ds->part);
    dt_total_kernel<<<1, TB_BLOCK, 0, s>>>(ds->part, (int)parts, 4, ds->sums);
}

cudaError_t tb_cuk_dual_forward(cudaStream_t s, const float *logits, const uint8_t *labels, float *loss, float *sample,
                                int n, int k, int h, int w, float tau, int ignore_label, uint64_t seed, uint64_t step,
                                uint32_t op_id, void *scratch, int32_t *bad)
{
    forget_earlier_error();
    const size_t hw = (size_t)h * (size_t)w;
    struct dt_scratch ds;
    dt_layout((size_t)n * (size_t)k * hw, scratch, &ds);
    dt_sample_kernel<<<grid_for((size_t)n * hw), TB_BLOCK, 0, s>>>(logits, labels, sample, n, k, hw, tau, ignore_label,
                                                                   seed, step, op_id, bad);
    dt_maps(s, sample, labels, n, k, h, w, ignore_label, &ds);
    dt_loss_kernel<<<1, 1, 0, s>>>(ds.sums, ds.maxima, loss);
    return cudaGetLastError();
}

cudaError_t tb_cuk_dual_backward(cudaStream_t s, const uint8_t *labels, const float *sample, const float *dloss,
                                 float *dlogits, int n, int k, int h, int w, float tau, int ignore_label, void *scratch)
{
    forget_earlier_error();
    const size_t hw = (size_t)h * (size_t)w, planes = (size_t)n * (size_t)k, count = planes * hw;
    struct dt_scratch ds;
    dt_layout(count, scratch, &ds);
    dt_maps(s, sample, labels, n, k, h, w, ignore_label, &ds);
    const unsigned parts = dt_parts(count);
    dt_grad_p_kernel<<<parts, TB_BLOCK, 0, s>>>(ds.mp, ds.mg, ds.maxima, ds.sums, dloss, count, ds.part);
    dt_total_kernel<<<1, TB_BLOCK, 0, s>>>(ds.part, (int)parts, 2, ds.sums + 4);
    dt_grad_m_kernel<<<grid_for(count), TB_BLOCK, 0, s>>>(ds.mp, ds.mg, ds.maxima, ds.sums + 4, count);
    /* back through the magnitude, the differences and the smoothing; the sample's
     * gradient into mp */
    dt_rows_kernel<<<grid_for(count), TB_BLOCK, 0, s>>>(sample, labels, k, ignore_label, planes, h, w, ds.t);
    dt_cols_kernel<<<grid_for(count), TB_BLOCK, 0, s>>>(ds.t, planes, h, w, ds.s);
    dt_dxy_kernel<<<grid_for(count), TB_BLOCK, 0, s>>>(ds.s, ds.mg, count, h, w, ds.a, ds.b);
    dt_ds_kernel<<<grid_for(count), TB_BLOCK, 0, s>>>(ds.a, ds.b, count, h, w, ds.t);
    dt_cols_adjoint_kernel<<<grid_for(planes * (size_t)w), TB_BLOCK, 0, s>>>(ds.t, planes, h, w, ds.s);
    dt_rows_adjoint_kernel<<<grid_for(planes * (size_t)h), TB_BLOCK, 0, s>>>(ds.s, planes, h, w, ds.mp);
    dt_softmax_grad_kernel<<<grid_for((size_t)n * hw), TB_BLOCK, 0, s>>>(sample, labels, ds.mp, dlogits, n, k, hw, tau,
                                                                         ignore_label);
    return cudaGetLastError();
}
