/* backends/cuda/cuda_dnn.c: the ops cuDNN computes besides convolutions: batch norm
 * (spatial, training and inference) and the ReLU and sigmoid activations.
 *
 * Batch norm: cuDNN's spatial batch norm has the contract's semantics (biased variance
 * for normalising, unbiased for the running variance, save_invstd = 1/sqrt(var + eps),
 * running = (1 - momentum) * running + momentum * batch), as PyTorch relies on. Its
 * backward wants every gradient buffer; the ones the core does not want go to scratch.
 * Synchronised batch norm (`sync`, training, an attached comm) is cuda_syncbn.c's: cuDNN
 * cannot take the other ranks' sums.
 * Activations: the backward of both reads only y (the contract keeps y, not x), which
 * cuDNN's formulas allow: ReLU passes dy where y > 0, sigmoid multiplies by y (1 - y). */
#include <stdlib.h>

#include "cuda_shared.h"

static const float one = 1.0f, zero = 0.0f;

int tb_cuda_set_desc(cudnnTensorDescriptor_t d, struct tb_shape s, const struct tb_op *op, struct tb_err *err)
{
    TB_CUDNN_TRY(err, op, cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.c, s.h, s.w));
    return TB_OK;
}

/* ------------------------------------------------------------------ batch norm */

struct bn_state {
    cudnnTensorDescriptor_t x, stats; /* x: (N,C,H,W); stats: cuDNN's (1,C,1,1) */
};

static void bn_release(void *state)
{
    struct bn_state *st = state;
    if (!st)
        return;
    if (st->x)
        cudnnDestroyTensorDescriptor(st->x);
    if (st->stats)
        cudnnDestroyTensorDescriptor(st->stats);
    free(st);
}

static int bn_prepare_state(const struct tb_op *op, struct bn_state *st, struct tb_err *err)
{
    const struct tb_shape x = op->in[0].shape;
    if (op->nin != 5 || op->nout != 3)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (batchnorm): expected 5 inputs and 3 outputs, got %u and %u",
                          op->id, op->nin, op->nout);
    for (uint32_t i = 0; i < 5; i++)
        if (op->in[i].dtype != TB_F32 || (i > 0 && !tb_shape_eq(op->in[i].shape, (struct tb_shape){ 1, x.c, 1, 1 })))
            return tb_err_set(err, TB_ERR_RUNTIME, "op %u (batchnorm): input %u must be f32%s", op->id, i,
                              i ? " (1,C,1,1)" : "");
    if (op->p.bn.sync && !(op->p.bn.eps > 0.0f))
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (batchnorm): eps %g must be > 0", op->id, op->p.bn.eps);
    if (op->p.bn.eps < CUDNN_BN_MIN_EPSILON)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (batchnorm): eps %g is below cuDNN's smallest, %g", op->id,
                          op->p.bn.eps, CUDNN_BN_MIN_EPSILON);
    /* Synchronised, one value a channel here may be one of several over the ranks: checked
     * when it runs (tb_cuda_bn_check_values), once the comm is known. */
    if (op->p.bn.training && (int64_t)x.n * x.h * x.w < (op->p.bn.sync ? 1 : 2))
        return tb_cuda_bn_check_values(op, 1, err);
    TB_CUDNN_TRY(err, op, cudnnCreateTensorDescriptor(&st->x));
    TB_CUDNN_TRY(err, op, cudnnCreateTensorDescriptor(&st->stats));
    int rc = tb_cuda_set_desc(st->x, x, op, err);
    if (rc)
        return rc;
    TB_CUDNN_TRY(err, op, cudnnDeriveBNTensorDescriptor(st->stats, st->x, CUDNN_BATCHNORM_SPATIAL));
    return TB_OK;
}

static int bn_prepare(struct tb_cuda *cuda, const struct tb_op *op, void **state, struct tb_err *err)
{
    (void)cuda;
    struct bn_state *st = calloc(1, sizeof *st);
    if (!st)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    int rc = bn_prepare_state(op, st, err);
    if (rc) {
        bn_release(st);
        return rc;
    }
    *state = st;
    return TB_OK;
}

static int bn_forward(struct tb_cuda *cuda, const struct tb_op *op, void *state, uint64_t step,
                      const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    struct bn_state *st = state;
    (void)step;
    const struct tb_batchnorm_params *p = &op->p.bn;
    if (tb_cuda_syncbn_active(cuda, op))
        return tb_cuda_syncbn_forward(cuda, op, in, out, err);
    int rc = tb_cuda_bn_check_values(op, 1, err); /* a sync op let through by prepare, run unsynchronised */
    if (rc)
        return rc;
    if (p->training)
        TB_CUDNN_TRY(err, op,
                     cudnnBatchNormalizationForwardTraining(cuda->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, st->x,
                                                            in[0].data, st->x, out[0].data, st->stats, in[1].data,
                                                            in[2].data, (double)p->momentum, in[3].data, in[4].data,
                                                            (double)p->eps, out[1].data, out[2].data));
    else
        TB_CUDNN_TRY(err, op,
                     cudnnBatchNormalizationForwardInference(cuda->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, st->x,
                                                             in[0].data, st->x, out[0].data, st->stats, in[1].data,
                                                             in[2].data, in[3].data, in[4].data, (double)p->eps));
    return TB_OK;
}

static int bn_backward(struct tb_cuda *cuda, const struct tb_op *op, void *state, const struct tb_tensor *in,
                       const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                       struct tb_err *err)
{
    struct bn_state *st = state;
    if (!op->p.bn.training)
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "op %u (batchnorm): the cuda backend has no backward for batch norm in inference mode "
                          "(frozen statistics); train it in training mode or use the cpu backend",
                          op->id);
    if (tb_cuda_syncbn_active(cuda, op))
        return tb_cuda_syncbn_backward(cuda, op, in, out, dout, din, err);
    if (!dout[0].data)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (batchnorm): backward without an output gradient", op->id);
    const struct tb_shape x = op->in[0].shape;
    const size_t vec = (size_t)x.c * sizeof(float), vec_pad = (vec + 255) / 256 * 256;
    /* The running statistics carry no gradient: a buffer passed for one is zeroed, as the
     * cpu backend and the synchronised path do (cuDNN writes only dx, dgamma and dbeta). */
    for (int i = 3; i < 5; i++)
        if (din[i].data)
            TB_CUDA_TRY(err, op, cudaMemsetAsync(din[i].data, 0, vec, cuda->stream[TB_STREAM_COMPUTE]));
    /* Scratch for the gradients nobody wants: dx first (it may be large), then two vectors. */
    size_t need = 0;
    if (!din[0].data)
        need += (tb_shape_elems(x) * sizeof(float) + 255) / 256 * 256;
    if (!din[1].data)
        need += vec_pad;
    if (!din[2].data)
        need += vec_pad;
    char *scratch = NULL;
    if (need && !(scratch = tb_cuda_scratch(cuda, need, err)))
        return TB_ERR_NOMEM;
    void *dx = din[0].data, *dgamma = din[1].data, *dbeta = din[2].data;
    if (!dx) {
        dx = scratch;
        scratch += (tb_shape_elems(x) * sizeof(float) + 255) / 256 * 256;
    }
    if (!dgamma) {
        dgamma = scratch;
        scratch += vec_pad;
    }
    if (!dbeta)
        dbeta = scratch;
    (void)out;
    TB_CUDNN_TRY(err, op,
                 cudnnBatchNormalizationBackward(cuda->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, st->x,
                                                 in[0].data, st->x, dout[0].data, st->x, dx, st->stats, in[1].data,
                                                 dgamma, dbeta, (double)op->p.bn.eps, out[1].data, out[2].data));
    return TB_OK;
}

const struct tb_cuda_kernel tb_cuda_batchnorm_kernel = { bn_prepare, bn_release, bn_forward, bn_backward };

/* ------------------------------------------------------------------ activations */

struct act_state {
    cudnnTensorDescriptor_t x;
    cudnnActivationDescriptor_t act;
};

static void act_release(void *state)
{
    struct act_state *st = state;
    if (!st)
        return;
    if (st->x)
        cudnnDestroyTensorDescriptor(st->x);
    if (st->act)
        cudnnDestroyActivationDescriptor(st->act);
    free(st);
}

static int act_prepare_state(const struct tb_op *op, struct act_state *st, struct tb_err *err)
{
    if (op->nin != 1 || op->nout != 1 || op->in[0].dtype != TB_F32 || op->out[0].dtype != TB_F32 ||
        !tb_shape_eq(op->in[0].shape, op->out[0].shape))
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (%s): one f32 input and one output of its shape", op->id,
                          tb_op_kind_name(op->kind));
    TB_CUDNN_TRY(err, op, cudnnCreateTensorDescriptor(&st->x));
    TB_CUDNN_TRY(err, op, cudnnCreateActivationDescriptor(&st->act));
    int rc = tb_cuda_set_desc(st->x, op->in[0].shape, op, err);
    if (rc)
        return rc;
    const cudnnActivationMode_t mode = op->kind == TB_OP_RELU ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_SIGMOID;
    TB_CUDNN_TRY(err, op, cudnnSetActivationDescriptor(st->act, mode, CUDNN_PROPAGATE_NAN, 0.0));
    return TB_OK;
}

static int act_prepare(struct tb_cuda *cuda, const struct tb_op *op, void **state, struct tb_err *err)
{
    (void)cuda;
    struct act_state *st = calloc(1, sizeof *st);
    if (!st)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    int rc = act_prepare_state(op, st, err);
    if (rc) {
        act_release(st);
        return rc;
    }
    *state = st;
    return TB_OK;
}

static int act_forward(struct tb_cuda *cuda, const struct tb_op *op, void *state, uint64_t step,
                       const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    struct act_state *st = state;
    (void)step;
    TB_CUDNN_TRY(err, op,
                 cudnnActivationForward(cuda->dnn, st->act, &one, st->x, in[0].data, &zero, st->x, out[0].data));
    return TB_OK;
}

static int act_backward(struct tb_cuda *cuda, const struct tb_op *op, void *state, const struct tb_tensor *in,
                        const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                        struct tb_err *err)
{
    struct act_state *st = state;
    (void)in;
    if (!din[0].data)
        return TB_OK;
    if (!dout[0].data)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (%s): backward without an output gradient", op->id,
                          tb_op_kind_name(op->kind));
    /* y stands in for x: y > 0 exactly where x > 0, and sigmoid's gradient uses y alone. */
    TB_CUDNN_TRY(err, op,
                 cudnnActivationBackward(cuda->dnn, st->act, &one, st->x, out[0].data, st->x, dout[0].data, st->x,
                                         out[0].data, &zero, st->x, din[0].data));
    return TB_OK;
}

const struct tb_cuda_kernel tb_cuda_relu_kernel = { act_prepare, act_release, act_forward, act_backward };
const struct tb_cuda_kernel tb_cuda_sigmoid_kernel = { act_prepare, act_release, act_forward, act_backward };
