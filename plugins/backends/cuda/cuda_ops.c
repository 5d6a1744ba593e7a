/* backends/cuda/cuda_ops.c: each op kind's kernel, through the shared dispatcher
 * (../op_dispatch.h); wraps every op in an NVTX range, and drives the kernels of
 * cuda_kernels.cu for the ops cuDNN does not compute:
 * pooling, resize, concat, add, mul, dropout, the losses (the dual-task regulariser
 * included) and the label ops.
 *
 * Max pooling is ours rather than cuDNN's because the contract says which of tied maxima
 * takes the gradient (the first, in row-major window order) and cuDNN does not; after a
 * ReLU, ties at 0 are the rule. Concat is one strided 2-d copy per input (each image's
 * channels are contiguous in NCHW). */
#include <stdlib.h>

#include "cuda_shared.h"
#include "cuda_kernels.h"
#include "../op_dispatch.h"

#define COMPUTE(cuda) ((cuda)->stream[TB_STREAM_COMPUTE])

static size_t hw_of(struct tb_shape s)
{
    return (size_t)s.h * (size_t)s.w;
}

/* ------------------------------------------------------------------ pooling, resize */

static int maxpool_forward(struct tb_cuda *cuda, const struct tb_op *op, void *state, uint64_t step,
                           const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)step;
    const struct tb_shape x = op->in[0].shape, y = op->out[0].shape;
    const struct tb_pool_params *p = &op->p.pool;
    TB_CUDA_TRY(err, op,
                tb_cuk_maxpool_forward(COMPUTE(cuda), in[0].data, out[0].data, x.n, x.c, x.h, x.w, y.h, y.w, p->k,
                                       p->stride, p->pad));
    return TB_OK;
}

static int maxpool_backward(struct tb_cuda *cuda, const struct tb_op *op, void *state, const struct tb_tensor *in,
                            const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                            struct tb_err *err)
{
    (void)state;
    if (!din[0].data)
        return TB_OK;
    const struct tb_shape x = op->in[0].shape, y = op->out[0].shape;
    const struct tb_pool_params *p = &op->p.pool;
    TB_CUDA_TRY(err, op,
                tb_cuk_maxpool_backward(COMPUTE(cuda), in[0].data, out[0].data, dout[0].data, din[0].data, x.n, x.c,
                                        x.h, x.w, y.h, y.w, p->k, p->stride, p->pad));
    return TB_OK;
}

static int avgpool_forward(struct tb_cuda *cuda, const struct tb_op *op, void *state, uint64_t step,
                           const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)step;
    const struct tb_shape x = op->in[0].shape;
    TB_CUDA_TRY(err, op,
                tb_cuk_avgpool_forward(COMPUTE(cuda), in[0].data, out[0].data, (size_t)x.n * (size_t)x.c, hw_of(x)));
    return TB_OK;
}

static int avgpool_backward(struct tb_cuda *cuda, const struct tb_op *op, void *state, const struct tb_tensor *in,
                            const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                            struct tb_err *err)
{
    (void)state;
    (void)in;
    (void)out;
    if (!din[0].data)
        return TB_OK;
    const struct tb_shape x = op->in[0].shape;
    TB_CUDA_TRY(err, op,
                tb_cuk_avgpool_backward(COMPUTE(cuda), dout[0].data, din[0].data, (size_t)x.n * (size_t)x.c, hw_of(x)));
    return TB_OK;
}

static int resize_forward(struct tb_cuda *cuda, const struct tb_op *op, void *state, uint64_t step,
                          const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)step;
    const struct tb_shape x = op->in[0].shape, y = op->out[0].shape;
    TB_CUDA_TRY(err, op,
                tb_cuk_resize_forward(COMPUTE(cuda), in[0].data, out[0].data, (size_t)x.n * (size_t)x.c, x.h, x.w, y.h,
                                      y.w, op->p.resize.align_corners));
    return TB_OK;
}

static int resize_backward(struct tb_cuda *cuda, const struct tb_op *op, void *state, const struct tb_tensor *in,
                           const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                           struct tb_err *err)
{
    (void)state;
    (void)in;
    (void)out;
    if (!din[0].data)
        return TB_OK;
    const struct tb_shape x = op->in[0].shape, y = op->out[0].shape;
    TB_CUDA_TRY(err, op,
                tb_cuk_resize_backward(COMPUTE(cuda), dout[0].data, din[0].data, (size_t)x.n * (size_t)x.c, x.h, x.w,
                                       y.h, y.w, op->p.resize.align_corners));
    return TB_OK;
}

/* ------------------------------------------------------------------ concat, add, mul */

/* Input i's channels sit at channel offset `off` of every image of the output. */
static int concat_copy(struct tb_cuda *cuda, const struct tb_op *op, uint32_t i, size_t off, void *y, void *x,
                       bool to_y, struct tb_err *err)
{
    const struct tb_shape ys = op->out[0].shape, xs = op->in[i].shape;
    const size_t es = tb_dtype_size(op->out[0].dtype), plane = hw_of(ys) * es;
    const size_t ypitch = (size_t)ys.c * plane, xpitch = (size_t)xs.c * plane;
    char *yp = (char *)y + off * plane;
    if (to_y)
        TB_CUDA_TRY(
            err, op,
            cudaMemcpy2DAsync(yp, ypitch, x, xpitch, xpitch, (size_t)ys.n, cudaMemcpyDeviceToDevice, COMPUTE(cuda)));
    else
        TB_CUDA_TRY(
            err, op,
            cudaMemcpy2DAsync(x, xpitch, yp, ypitch, xpitch, (size_t)ys.n, cudaMemcpyDeviceToDevice, COMPUTE(cuda)));
    return TB_OK;
}

static int concat_forward(struct tb_cuda *cuda, const struct tb_op *op, void *state, uint64_t step,
                          const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)step;
    size_t off = 0;
    for (uint32_t i = 0; i < op->nin; i++) {
        int rc = concat_copy(cuda, op, i, off, out[0].data, in[i].data, true, err);
        if (rc)
            return rc;
        off += (size_t)op->in[i].shape.c;
    }
    return TB_OK;
}

static int concat_backward(struct tb_cuda *cuda, const struct tb_op *op, void *state, const struct tb_tensor *in,
                           const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                           struct tb_err *err)
{
    (void)state;
    (void)in;
    (void)out;
    size_t off = 0;
    for (uint32_t i = 0; i < op->nin; i++) {
        if (din[i].data) {
            int rc = concat_copy(cuda, op, i, off, dout[0].data, din[i].data, false, err);
            if (rc)
                return rc;
        }
        off += (size_t)op->in[i].shape.c;
    }
    return TB_OK;
}

static int add_forward(struct tb_cuda *cuda, const struct tb_op *op, void *state, uint64_t step,
                       const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)step;
    if (!tb_shape_eq(op->in[0].shape, op->in[1].shape) || !tb_shape_eq(op->in[0].shape, op->out[0].shape))
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (add): inputs and output differ in shape", op->id);
    TB_CUDA_TRY(err, op,
                tb_cuk_add(COMPUTE(cuda), in[0].data, in[1].data, out[0].data, tb_shape_elems(op->out[0].shape)));
    return TB_OK;
}

static int add_backward(struct tb_cuda *cuda, const struct tb_op *op, void *state, const struct tb_tensor *in,
                        const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                        struct tb_err *err)
{
    (void)state;
    (void)in;
    (void)out;
    const size_t bytes = tb_shape_elems(op->out[0].shape) * sizeof(float);
    for (int i = 0; i < 2; i++)
        if (din[i].data)
            TB_CUDA_TRY(err, op,
                        cudaMemcpyAsync(din[i].data, dout[0].data, bytes, cudaMemcpyDeviceToDevice, COMPUTE(cuda)));
    return TB_OK;
}

static int mul_forward(struct tb_cuda *cuda, const struct tb_op *op, void *state, uint64_t step,
                       const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)step;
    const struct tb_shape x = op->in[0].shape;
    TB_CUDA_TRY(
        err, op,
        tb_cuk_mul_forward(COMPUTE(cuda), in[0].data, in[1].data, out[0].data, x.n, x.c, op->in[1].shape.c, hw_of(x)));
    return TB_OK;
}

static int mul_backward(struct tb_cuda *cuda, const struct tb_op *op, void *state, const struct tb_tensor *in,
                        const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                        struct tb_err *err)
{
    (void)state;
    (void)out;
    if (!din[0].data && !din[1].data)
        return TB_OK;
    const struct tb_shape x = op->in[0].shape;
    TB_CUDA_TRY(err, op,
                tb_cuk_mul_backward(COMPUTE(cuda), in[0].data, in[1].data, dout[0].data, din[0].data, din[1].data, x.n,
                                    x.c, op->in[1].shape.c, hw_of(x)));
    return TB_OK;
}

/* ------------------------------------------------------------------ dropout */

static int dropout_forward(struct tb_cuda *cuda, const struct tb_op *op, void *state, uint64_t step,
                           const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    const struct tb_shape x = op->in[0].shape;
    const struct tb_dropout_params *p = &op->p.dropout;
    if (!p->training) {
        TB_CUDA_TRY(err, op,
                    cudaMemcpyAsync(out[0].data, in[0].data, tb_shape_elems(x) * sizeof(float),
                                    cudaMemcpyDeviceToDevice, COMPUTE(cuda)));
        return TB_OK;
    }
    TB_CUDA_TRY(err, op,
                tb_cuk_dropout_forward(COMPUTE(cuda), in[0].data, out[0].data, out[1].data, x.n, x.c, hw_of(x), p->p,
                                       p->channelwise, p->seed, step, op->id));
    return TB_OK;
}

static int dropout_backward(struct tb_cuda *cuda, const struct tb_op *op, void *state, const struct tb_tensor *in,
                            const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                            struct tb_err *err)
{
    (void)state;
    (void)in;
    if (!din[0].data)
        return TB_OK;
    const struct tb_shape x = op->in[0].shape;
    const struct tb_dropout_params *p = &op->p.dropout;
    if (!p->training) {
        TB_CUDA_TRY(err, op,
                    cudaMemcpyAsync(din[0].data, dout[0].data, tb_shape_elems(x) * sizeof(float),
                                    cudaMemcpyDeviceToDevice, COMPUTE(cuda)));
        return TB_OK;
    }
    TB_CUDA_TRY(err, op,
                tb_cuk_dropout_backward(COMPUTE(cuda), dout[0].data, out[1].data, din[0].data, x.n, x.c, hw_of(x), p->p,
                                        p->channelwise));
    return TB_OK;
}

/* ------------------------------------------------------------------ losses, labels */

static void *loss_scratch(struct tb_cuda *cuda, const struct tb_op *op, struct tb_err *err)
{
    const struct tb_shape x = op->in[0].shape;
    return tb_cuda_scratch(cuda, tb_cuk_loss_scratch_bytes(x.n, x.c, hw_of(x)), err);
}

static int ce_forward(struct tb_cuda *cuda, const struct tb_op *op, void *state, uint64_t step,
                      const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)step;
    const struct tb_shape x = op->in[0].shape;
    const struct tb_ce_params *p = &op->p.ce;
    void *scratch = loss_scratch(cuda, op, err);
    if (!scratch)
        return TB_ERR_NOMEM;
    int rc = tb_cuda_label_check_begin(cuda, op, x.c, x.w, p->ignore_label, err);
    if (rc)
        return rc;
    TB_CUDA_TRY(err, op,
                tb_cuk_softmax_ce_forward(COMPUTE(cuda), in[0].data, in[1].data, p->weighted ? in[2].data : NULL,
                                          out[0].data, x.n, x.c, hw_of(x), p->ignore_label, p->per_image, scratch,
                                          cuda->bad_dev));
    return tb_cuda_label_check_end(cuda, op, err);
}

static int ce_backward(struct tb_cuda *cuda, const struct tb_op *op, void *state, const struct tb_tensor *in,
                       const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                       struct tb_err *err)
{
    (void)state;
    (void)out;
    /* A bad label found in forward fails the step here, before its gradients are used. */
    int rc = tb_cuda_label_check(cuda, true, err);
    if (rc || !din[0].data)
        return rc;
    const struct tb_shape x = op->in[0].shape;
    const struct tb_ce_params *p = &op->p.ce;
    void *scratch = loss_scratch(cuda, op, err);
    if (!scratch)
        return TB_ERR_NOMEM;
    TB_CUDA_TRY(err, op,
                tb_cuk_softmax_ce_backward(COMPUTE(cuda), in[0].data, in[1].data, p->weighted ? in[2].data : NULL,
                                           dout[0].data, din[0].data, x.n, x.c, hw_of(x), p->ignore_label, p->per_image,
                                           scratch));
    return TB_OK;
}

static int bce_forward(struct tb_cuda *cuda, const struct tb_op *op, void *state, uint64_t step,
                       const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)step;
    const struct tb_shape x = op->in[0].shape;
    void *scratch = loss_scratch(cuda, op, err);
    if (!scratch)
        return TB_ERR_NOMEM;
    TB_CUDA_TRY(err, op,
                tb_cuk_bce_forward(COMPUTE(cuda), in[0].data, in[1].data, out[0].data, x.n, hw_of(x), scratch));
    return TB_OK;
}

static int bce_backward(struct tb_cuda *cuda, const struct tb_op *op, void *state, const struct tb_tensor *in,
                        const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                        struct tb_err *err)
{
    (void)state;
    (void)out;
    if (!din[0].data)
        return TB_OK;
    const struct tb_shape x = op->in[0].shape;
    void *scratch = loss_scratch(cuda, op, err);
    if (!scratch)
        return TB_ERR_NOMEM;
    TB_CUDA_TRY(
        err, op,
        tb_cuk_bce_backward(COMPUTE(cuda), in[0].data, in[1].data, dout[0].data, din[0].data, x.n, hw_of(x), scratch));
    return TB_OK;
}

static int class_weights_forward(struct tb_cuda *cuda, const struct tb_op *op, void *state, uint64_t step,
                                 const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)step;
    const struct tb_shape l = op->in[0].shape;
    const int K = op->out[0].shape.c;
    void *scratch = tb_cuda_scratch(cuda, tb_cuk_loss_scratch_bytes(l.n, K, hw_of(l)), err);
    if (!scratch)
        return TB_ERR_NOMEM;
    int rc = tb_cuda_label_check_begin(cuda, op, K, l.w, op->p.label.ignore_label, err);
    if (rc)
        return rc;
    TB_CUDA_TRY(err, op,
                tb_cuk_class_weights(COMPUTE(cuda), in[0].data, out[0].data, l.n, K, hw_of(l), op->p.label.ignore_label,
                                     scratch, cuda->bad_dev));
    return tb_cuda_label_check_end(cuda, op, err);
}

static int mask_labels_forward(struct tb_cuda *cuda, const struct tb_op *op, void *state, uint64_t step,
                               const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)step;
    TB_CUDA_TRY(err, op,
                tb_cuk_mask_labels(COMPUTE(cuda), in[0].data, in[1].data, out[0].data, tb_shape_elems(op->in[0].shape),
                                   op->p.label.threshold, op->p.label.ignore_label));
    return TB_OK;
}

static int dual_forward(struct tb_cuda *cuda, const struct tb_op *op, void *state, uint64_t step,
                        const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    const struct tb_shape x = op->in[0].shape;
    const struct tb_dual_params *p = &op->p.dual;
    void *scratch = tb_cuda_scratch(cuda, tb_cuk_dual_scratch_bytes(x.n, x.c, x.h, x.w), err);
    if (!scratch)
        return TB_ERR_NOMEM;
    int rc = tb_cuda_label_check_begin(cuda, op, x.c, x.w, p->ignore_label, err);
    if (rc)
        return rc;
    TB_CUDA_TRY(err, op,
                tb_cuk_dual_forward(COMPUTE(cuda), in[0].data, in[1].data, out[0].data, out[1].data, x.n, x.c, x.h, x.w,
                                    p->tau, p->ignore_label, p->seed, step, op->id, scratch, cuda->bad_dev));
    return tb_cuda_label_check_end(cuda, op, err);
}

static int dual_backward(struct tb_cuda *cuda, const struct tb_op *op, void *state, const struct tb_tensor *in,
                         const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                         struct tb_err *err)
{
    (void)state;
    /* A bad label found in forward fails the step here, before its gradients are used. */
    int rc = tb_cuda_label_check(cuda, true, err);
    if (rc || !din[0].data)
        return rc;
    const struct tb_shape x = op->in[0].shape;
    const struct tb_dual_params *p = &op->p.dual;
    void *scratch = tb_cuda_scratch(cuda, tb_cuk_dual_scratch_bytes(x.n, x.c, x.h, x.w), err);
    if (!scratch)
        return TB_ERR_NOMEM;
    TB_CUDA_TRY(err, op,
                tb_cuk_dual_backward(COMPUTE(cuda), in[1].data, out[1].data, dout[0].data, din[0].data, x.n, x.c, x.h,
                                     x.w, p->tau, p->ignore_label, scratch));
    return TB_OK;
}

/* ------------------------------------------------------------------ routing */

static const struct tb_cuda_kernel maxpool_kernel = { NULL, NULL, maxpool_forward, maxpool_backward };
static const struct tb_cuda_kernel avgpool_kernel = { NULL, NULL, avgpool_forward, avgpool_backward };
static const struct tb_cuda_kernel resize_kernel = { NULL, NULL, resize_forward, resize_backward };
static const struct tb_cuda_kernel concat_kernel = { NULL, NULL, concat_forward, concat_backward };
static const struct tb_cuda_kernel add_kernel = { NULL, NULL, add_forward, add_backward };
static const struct tb_cuda_kernel mul_kernel = { NULL, NULL, mul_forward, mul_backward };
static const struct tb_cuda_kernel dropout_kernel = { NULL, NULL, dropout_forward, dropout_backward };
static const struct tb_cuda_kernel softmax_ce_kernel = { NULL, NULL, ce_forward, ce_backward };
static const struct tb_cuda_kernel bce_kernel = { NULL, NULL, bce_forward, bce_backward };
static const struct tb_cuda_kernel class_weights_kernel = { NULL, NULL, class_weights_forward, NULL };
static const struct tb_cuda_kernel mask_labels_kernel = { NULL, NULL, mask_labels_forward, NULL };
static const struct tb_cuda_kernel dual_kernel = { NULL, NULL, dual_forward, dual_backward };

/* The kernel of each op kind. */
static const struct tb_cuda_kernel *const kernels[TB_OP_KIND_COUNT] = {
    [TB_OP_CONV2D] = &tb_cuda_conv2d_kernel,
    [TB_OP_BATCHNORM] = &tb_cuda_batchnorm_kernel,
    [TB_OP_RELU] = &tb_cuda_relu_kernel,
    [TB_OP_SIGMOID] = &tb_cuda_sigmoid_kernel,
    [TB_OP_MAXPOOL] = &maxpool_kernel,
    [TB_OP_GLOBAL_AVGPOOL] = &avgpool_kernel,
    [TB_OP_RESIZE] = &resize_kernel,
    [TB_OP_CONCAT] = &concat_kernel,
    [TB_OP_ADD] = &add_kernel,
    [TB_OP_MUL] = &mul_kernel,
    [TB_OP_DROPOUT] = &dropout_kernel,
    [TB_OP_SOFTMAX_CE] = &softmax_ce_kernel,
    [TB_OP_BCE_LOGITS] = &bce_kernel,
    [TB_OP_CLASS_WEIGHTS] = &class_weights_kernel,
    [TB_OP_MASK_LABELS] = &mask_labels_kernel,
    [TB_OP_DUAL_TASK] = &dual_kernel,
};

/* The kernel's own prepare and release, as the shared dispatcher calls them. */
static int kernel_prepare(void *backend, const void *kernel, const struct tb_op *op, void **inner,
                          struct tb_err *err)
{
    const struct tb_cuda_kernel *k = kernel;
    return k->prepare ? k->prepare(backend, op, inner, err) : TB_OK;
}

static void kernel_release(const void *kernel, void *inner)
{
    const struct tb_cuda_kernel *k = kernel;
    if (k->release)
        k->release(inner);
}

static const struct tb_op_dispatch dispatch = { "cuda", kernel_prepare, kernel_release };

uint64_t tb_cuda_op_scratch_bytes(const void *state, bool backward)
{
    return tb_op_dispatch_scratch_bytes(state, backward);
}

int tb_cuda_op_prepare(struct tb_cuda *cuda, const struct tb_op *op, void **state, struct tb_err *err)
{
    const struct tb_cuda_kernel *k = (unsigned)op->kind < TB_OP_KIND_COUNT ? kernels[op->kind] : NULL;
    return tb_op_dispatch_prepare(&dispatch, cuda, k, op, state, err);
}

void tb_cuda_op_release(void *state)
{
    tb_op_dispatch_release(&dispatch, state);
}

int tb_cuda_op_forward(struct tb_cuda *cuda, const struct tb_op *op, void *state, uint64_t step,
                       const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    struct tb_op_state *s = state;
    const struct tb_cuda_kernel *k = s->kernel;
    /* A bad label of an earlier op surfaces at the first op after its check completed. */
    int rc = tb_cuda_label_check(cuda, false, err);
    if (rc)
        return rc;
    tb_cuda_range_push("%s %u forward", tb_op_kind_name(op->kind), op->id);
    cuda->scratch_asked = 0;
    rc = k->forward(cuda, op, s->inner, step, in, out, err);
    tb_op_dispatch_scratch(s, false, cuda->scratch_asked);
    tb_cuda_range_pop();
    return rc;
}

int tb_cuda_op_backward(struct tb_cuda *cuda, const struct tb_op *op, void *state, const struct tb_tensor *in,
                        const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                        struct tb_err *err)
{
    struct tb_op_state *s = state;
    const struct tb_cuda_kernel *k = s->kernel;
    if (!k->backward)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u: %s has no backward", op->id, tb_op_kind_name(op->kind));
    int rc = tb_cuda_label_check(cuda, false, err);
    if (rc)
        return rc;
    tb_cuda_range_push("%s %u backward", tb_op_kind_name(op->kind), op->id);
    cuda->scratch_asked = 0;
    rc = k->backward(cuda, op, s->inner, in, out, dout, din, err);
    tb_op_dispatch_scratch(s, true, cuda->scratch_asked);
    tb_cuda_range_pop();
    return rc;
}
