/* backends/cuda/cuda_syncbn.c: synchronised batch norm in training (ops.h: batch norm's
 * `sync`), for an instance with an attached comm.
 *
 * cuDNN's batch norm computes its statistics inside one call, so the sums of every rank
 * cannot be put together there; this computes them with the kernels of cuda_kernels.cu
 * and all-reduces them between the steps, on the compute stream (tb_cuda_comm_sum_f64):
 *
 *   forward   [sum x, count] -> all-reduce -> [sum (x - k), sum (x - k)^2] -> all-reduce -> statistics, y
 *   backward  [sum dy, sum dy * (x - mean), count] -> (dgamma, dbeta: this rank's) -> all-reduce -> dx
 *
 * Two passes for the variance, the second over the deviations from the first's global
 * mean k (one pass with a shift would need the same shift on every rank), as the cpu
 * backend's synchronised path. The counts travel with the sums, so ranks may hold batches
 * of different sizes. The semantics and the per-element arithmetic are cpu_batchnorm.c's
 * (biased variance to normalise, the unbiased one for running_var, y centred on the float
 * save_mean that backward reads). Everything else
 * about batch norm (inference, a plain or unattached instance) stays cuDNN's (cuda_dnn.c).
 *
 * Scratch: the partial sums, the all-reduced vectors and the per-channel coefficients are
 * the backend's op scratch (tb_cuda_scratch), taken before anything is queued, so an op
 * that does not fit fails before it has changed anything or joined a collective. */
#include "cuda_shared.h"
#include "cuda_kernels.h"

bool tb_cuda_syncbn_active(const struct tb_cuda *cuda, const struct tb_op *op)
{
    return op->p.bn.sync && op->p.bn.training && tb_cuda_comm_attached(cuda);
}

int tb_cuda_bn_check_values(const struct tb_op *op, int ranks, struct tb_err *err)
{
    const struct tb_shape x = op->in[0].shape;
    if (!op->p.bn.training || (int64_t)x.n * x.h * x.w * ranks >= 2)
        return TB_OK;
    return tb_err_set(err, TB_ERR_RUNTIME,
                      "op %u (batchnorm): training needs more than 1 value per channel, input is (%d,%d,%d,%d)", op->id,
                      x.n, x.c, x.h, x.w);
}

static size_t pad256(size_t bytes)
{
    return (bytes + 255) / 256 * 256;
}

/* Scratch carved into: part (doubles), red (nred doubles), f (nf floats), 256-byte aligned. */
struct bn_work {
    double *part, *red;
    float *f;
};

static int get_work(struct tb_cuda *cuda, const struct tb_op *op, size_t nred, size_t nf, struct bn_work *w,
                    struct tb_err *err)
{
    const struct tb_shape x = op->in[0].shape;
    const size_t hw = (size_t)x.h * (size_t)x.w;
    const size_t part_b = pad256(tb_cuk_bn_part_doubles(x.n, x.c, hw) * sizeof(double));
    const size_t red_b = pad256(nred * sizeof(double));
    char *s = tb_cuda_scratch(cuda, part_b + red_b + pad256(nf * sizeof(float)), err);
    if (!s)
        return tb_err_prefix(err, "op %u (batchnorm)", op->id);
    w->part = (double *)s;
    w->red = (double *)(s + part_b);
    w->f = (float *)(s + part_b + red_b);
    return TB_OK;
}

int tb_cuda_syncbn_forward(struct tb_cuda *cuda, const struct tb_op *op, const struct tb_tensor *in,
                           const struct tb_tensor *out, struct tb_err *err)
{
    const struct tb_shape x = op->in[0].shape;
    const size_t C = (size_t)x.c, hw = (size_t)x.h * (size_t)x.w;
    int rc = tb_cuda_bn_check_values(op, tb_cuda_comm_size(cuda), err);
    if (rc)
        return rc;
    if (!C || !x.n || !hw)
        return TB_OK;
    /* red: [sum x (C), count] then [sum x - k (C), sum (x - k)^2 (C)]; f: gamma * invstd */
    struct bn_work w;
    rc = get_work(cuda, op, 3 * C + 1, C, &w, err);
    if (rc)
        return rc;
    double *red1 = w.red, *red2 = w.red + C + 1;
    cudaStream_t s = cuda->stream[TB_STREAM_COMPUTE];
    TB_CUDA_TRY(err, op, tb_cuk_bn_sums(s, in[0].data, x.n, x.c, hw, w.part, red1));
    rc = tb_cuda_comm_sum_f64(cuda, red1, C + 1, op, err);
    if (rc)
        return rc;
    TB_CUDA_TRY(err, op, tb_cuk_bn_devs(s, in[0].data, x.n, x.c, hw, red1, w.part, red2));
    rc = tb_cuda_comm_sum_f64(cuda, red2, 2 * C, op, err);
    if (rc)
        return rc;
    const struct tb_batchnorm_params *p = &op->p.bn;
    TB_CUDA_TRY(err, op,
                tb_cuk_bn_forward(s, in[0].data, out[0].data, x.n, x.c, hw, red1, red2, in[1].data, in[2].data,
                                  in[3].data, in[4].data, out[1].data, out[2].data, w.f, (double)p->eps,
                                  (double)p->momentum));
    return TB_OK;
}

int tb_cuda_syncbn_backward(struct tb_cuda *cuda, const struct tb_op *op, const struct tb_tensor *in,
                            const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                            struct tb_err *err)
{
    const struct tb_shape x = op->in[0].shape;
    const size_t C = (size_t)x.c, hw = (size_t)x.h * (size_t)x.w;
    cudaStream_t s = cuda->stream[TB_STREAM_COMPUTE];
    float *dx = din[0].data, *dgamma = din[1].data, *dbeta = din[2].data;
    const float *xv = in[0].data, *gamma = in[1].data, *dy = dout[0].data;
    const float *mean = out[1].data, *invstd = out[2].data;
    const bool work = (dx || dgamma || dbeta) && C && x.n && hw;
    if (work && !dy)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (batchnorm): backward without an output gradient", op->id);
    if (work && (!xv || !gamma || !mean || !invstd))
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (batchnorm): backward needs x, gamma and the saved statistics",
                          op->id);
    /* red: [sum dy (C), sum dy * (x - mean) (C), count]; f: dx's three coefficients */
    struct bn_work w;
    if (work) {
        int rc = get_work(cuda, op, 2 * C + 1, 3 * C, &w, err);
        if (rc)
            return rc;
    }
    /* the running statistics carry no gradient: a buffer passed for one is zeroed, as the CPU does */
    for (int i = 3; i < 5; i++)
        if (din[i].data)
            TB_CUDA_TRY(err, op, cudaMemsetAsync(din[i].data, 0, C * sizeof(float), s));
    if (!work)
        return TB_OK;
    TB_CUDA_TRY(err, op, tb_cuk_bn_grad_sums(s, xv, dy, mean, invstd, x.n, x.c, hw, w.part, w.red, dgamma, dbeta));
    /* Only dx needs the other ranks' sums. Every rank runs the same graph, so either all
     * of them join this all-reduce or none does. */
    if (!dx)
        return TB_OK;
    int rc = tb_cuda_comm_sum_f64(cuda, w.red, 2 * C + 1, op, err);
    if (rc)
        return rc;
    TB_CUDA_TRY(err, op, tb_cuk_bn_backward_dx(s, xv, dy, mean, invstd, gamma, w.red, w.f, dx, x.n, x.c, hw));
    return TB_OK;
}
