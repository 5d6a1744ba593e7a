/* backends/cuda/cuda_conv.c: TB_OP_CONV2D through cuDNN (forward, backward-data,
 * backward-filter, bias).
 *
 * Algorithms are chosen once per op and direction, among those whose workspace fits
 * [backend] workspace_limit: with conv_algo = find by timing every candidate on the op's
 * real tensors the first time it runs (cudnnFind*Ex; the workspace for the search comes
 * from the device allocator, halved until it fits), otherwise at prepare from cuDNN's
 * heuristics (cudnnGet*_v7), restricted to deterministic algorithms with conv_algo =
 * deterministic. Without [backend] tf32 only FMA-math algorithms are taken, so no TF32
 * tensor-core kernel runs. The workspace of a run is the backend's scratch space, taken
 * from device memory: when it does not fit, the op fails with TB_ERR_NOMEM before it has
 * changed anything, and the core makes room and runs it again. */
#include <stdlib.h>

#include "cuda_shared.h"

struct conv_algo {
    bool chosen;
    int algo; /* cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
    size_t workspace;
    cudnnMathType_t math;
};

struct conv_state {
    cudnnTensorDescriptor_t x, y, b;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    struct conv_algo fwd, data, filter;
};

/* The fields of cuDNN's three perf structs that the choice looks at. */
struct conv_candidate {
    int algo;
    cudnnStatus_t status;
    size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
};

enum { MAX_CANDIDATES = 16 };

/* The first usable candidate (cuDNN lists them best first), or false. Without TF32 only
 * candidates of FMA math qualify: cuDNN 9 lists each algorithm with the math type it was
 * found or timed under, and running one under another math type is another kernel (its
 * workspace and support may differ), so a candidate is never forced to FMA math. */
static bool choose(const struct tb_cuda *cuda, const struct conv_candidate *c, int n, struct conv_algo *out)
{
    for (int i = 0; i < n; i++) {
        if (c[i].status != CUDNN_STATUS_SUCCESS || c[i].memory > cuda->workspace_limit)
            continue;
        if (cuda->conv_algo == TB_CUDA_CONV_DETERMINISTIC && c[i].determinism != CUDNN_DETERMINISTIC)
            continue;
        if (!cuda->tf32 && c[i].math != CUDNN_FMA_MATH)
            continue;
        out->chosen = true;
        out->algo = c[i].algo;
        out->workspace = c[i].memory;
        out->math = c[i].math;
        return true;
    }
    return false;
}

#define COPY_CANDIDATES(perf, n, cand)                                                                               \
    for (int i_ = 0; i_ < (n); i_++)                                                                                 \
        (cand)[i_] = (struct conv_candidate)                                                                         \
        {                                                                                                            \
            (int)(perf)[i_].algo, (perf)[i_].status, (perf)[i_].memory, (perf)[i_].determinism, (perf)[i_].mathType, \
        }

static int no_algorithm(struct tb_cuda *cuda, const struct tb_op *op, const char *dir, struct tb_err *err)
{
    return tb_err_set(err, TB_ERR_RUNTIME,
                      "op %u (conv2d): cuDNN offers no %s algorithm%s within [backend] workspace_limit = %zu bytes%s",
                      op->id, dir, cuda->conv_algo == TB_CUDA_CONV_DETERMINISTIC ? " that is deterministic" : "",
                      cuda->workspace_limit, cuda->tf32 ? "" : " without TF32");
}

/* Heuristic choice of one direction (0 forward, 1 backward-data, 2 backward-filter). */
static int choose_heuristic(struct tb_cuda *cuda, const struct tb_op *op, struct conv_state *st, int dir,
                            struct tb_err *err)
{
    struct conv_candidate cand[MAX_CANDIDATES];
    int n = 0;
    TB_CUDNN_TRY(err, op, cudnnSetConvolutionMathType(st->conv, cuda->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    if (dir == 0) {
        cudnnConvolutionFwdAlgoPerf_t perf[MAX_CANDIDATES];
        TB_CUDNN_TRY(
            err, op,
            cudnnGetConvolutionForwardAlgorithm_v7(cuda->dnn, st->x, st->w, st->conv, st->y, MAX_CANDIDATES, &n, perf));
        COPY_CANDIDATES(perf, n, cand);
        return choose(cuda, cand, n, &st->fwd) ? TB_OK : no_algorithm(cuda, op, "forward", err);
    }
    if (dir == 1) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_CANDIDATES];
        TB_CUDNN_TRY(err, op,
                     cudnnGetConvolutionBackwardDataAlgorithm_v7(cuda->dnn, st->w, st->y, st->conv, st->x,
                                                                 MAX_CANDIDATES, &n, perf));
        COPY_CANDIDATES(perf, n, cand);
        return choose(cuda, cand, n, &st->data) ? TB_OK : no_algorithm(cuda, op, "backward-data", err);
    }
    cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX_CANDIDATES];
    TB_CUDNN_TRY(err, op,
                 cudnnGetConvolutionBackwardFilterAlgorithm_v7(cuda->dnn, st->x, st->y, st->conv, st->w, MAX_CANDIDATES,
                                                               &n, perf));
    COPY_CANDIDATES(perf, n, cand);
    return choose(cuda, cand, n, &st->filter) ? TB_OK : no_algorithm(cuda, op, "backward-filter", err);
}

/* Device memory for a search: workspace_limit, halved until it fits (at least 0). */
static void *search_workspace(struct tb_cuda *cuda, size_t *bytes)
{
    for (size_t b = cuda->workspace_limit; b >= ((size_t)1 << 20); b /= 2) {
        void *p = tb_cuda_memory_alloc(&cuda->memory, b);
        if (p) {
            *bytes = b;
            return p;
        }
    }
    *bytes = 0;
    return NULL;
}

/* Timed choice of one direction on the op's tensors (their contents are overwritten:
 * y, dx or dw, which the caller computes right after). */
static int choose_find(struct tb_cuda *cuda, const struct tb_op *op, struct conv_state *st, int dir, const void *a,
                       const void *b, void *out, struct tb_err *err)
{
    struct conv_candidate cand[MAX_CANDIDATES];
    int n = 0;
    size_t ws_bytes;
    void *ws = search_workspace(cuda, &ws_bytes);
    cudnnStatus_t s = cudnnSetConvolutionMathType(st->conv, cuda->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH);
    if (s != CUDNN_STATUS_SUCCESS) {
        if (ws)
            tb_cuda_memory_free(&cuda->memory, ws);
        return tb_cudnn_fail(err, "cudnnSetConvolutionMathType", s, op);
    }
    const char *call;
    if (dir == 0) {
        cudnnConvolutionFwdAlgoPerf_t perf[MAX_CANDIDATES];
        call = "cudnnFindConvolutionForwardAlgorithmEx";
        s = cudnnFindConvolutionForwardAlgorithmEx(cuda->dnn, st->x, a, st->w, b, st->conv, st->y, out, MAX_CANDIDATES,
                                                   &n, perf, ws, ws_bytes);
        if (s == CUDNN_STATUS_SUCCESS)
            COPY_CANDIDATES(perf, n, cand);
    } else if (dir == 1) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_CANDIDATES];
        call = "cudnnFindConvolutionBackwardDataAlgorithmEx";
        s = cudnnFindConvolutionBackwardDataAlgorithmEx(cuda->dnn, st->w, a, st->y, b, st->conv, st->x, out,
                                                        MAX_CANDIDATES, &n, perf, ws, ws_bytes);
        if (s == CUDNN_STATUS_SUCCESS)
            COPY_CANDIDATES(perf, n, cand);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX_CANDIDATES];
        call = "cudnnFindConvolutionBackwardFilterAlgorithmEx";
        s = cudnnFindConvolutionBackwardFilterAlgorithmEx(cuda->dnn, st->x, a, st->y, b, st->conv, st->w, out,
                                                          MAX_CANDIDATES, &n, perf, ws, ws_bytes);
        if (s == CUDNN_STATUS_SUCCESS)
            COPY_CANDIDATES(perf, n, cand);
    }
    if (ws) {
        /* The search has run on the compute stream. */
        int rc = tb_cuda_wait(cuda, NULL, cuda->stream[TB_STREAM_COMPUTE], err);
        if (rc)
            return rc; /* ws stays: queued work may still use it */
        tb_cuda_memory_free(&cuda->memory, ws);
    }
    if (s != CUDNN_STATUS_SUCCESS)
        return tb_cudnn_fail(err, call, s, op);
    struct conv_algo *dst = dir == 0 ? &st->fwd : dir == 1 ? &st->data : &st->filter;
    if (choose(cuda, cand, n, dst))
        return TB_OK;
    /* Nothing timed fits (the search had less workspace than the limit): the heuristics. */
    return choose_heuristic(cuda, op, st, dir, err);
}

static void conv_release(void *state)
{
    struct conv_state *st = state;
    if (!st)
        return;
    if (st->x)
        cudnnDestroyTensorDescriptor(st->x);
    if (st->y)
        cudnnDestroyTensorDescriptor(st->y);
    if (st->b)
        cudnnDestroyTensorDescriptor(st->b);
    if (st->w)
        cudnnDestroyFilterDescriptor(st->w);
    if (st->conv)
        cudnnDestroyConvolutionDescriptor(st->conv);
    free(st);
}

static int conv_prepare_state(struct tb_cuda *cuda, const struct tb_op *op, struct conv_state *st, struct tb_err *err)
{
    const struct tb_conv2d_params *p = &op->p.conv;
    const struct tb_shape x = op->in[0].shape, w = op->in[1].shape, y = op->out[0].shape;
    if (op->nin != (p->has_bias ? 3u : 2u) || op->nout != 1 || op->in[0].dtype != TB_F32 || op->in[1].dtype != TB_F32 ||
        op->out[0].dtype != TB_F32 || w.c != x.c || y.c != w.n || y.n != x.n)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (conv2d): inputs and output do not match", op->id);
    TB_CUDNN_TRY(err, op, cudnnCreateTensorDescriptor(&st->x));
    TB_CUDNN_TRY(err, op, cudnnCreateTensorDescriptor(&st->y));
    TB_CUDNN_TRY(err, op, cudnnCreateFilterDescriptor(&st->w));
    TB_CUDNN_TRY(err, op, cudnnCreateConvolutionDescriptor(&st->conv));
    int rc = tb_cuda_set_desc(st->x, x, op, err);
    if (!rc)
        rc = tb_cuda_set_desc(st->y, y, op, err);
    if (rc)
        return rc;
    TB_CUDNN_TRY(err, op, cudnnSetFilter4dDescriptor(st->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, w.n, w.c, w.h, w.w));
    TB_CUDNN_TRY(err, op,
                 cudnnSetConvolution2dDescriptor(st->conv, p->pad_h, p->pad_w, p->stride_h, p->stride_w, p->dil_h,
                                                 p->dil_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    int on, oc, oh, ow;
    TB_CUDNN_TRY(err, op, cudnnGetConvolution2dForwardOutputDim(st->conv, st->x, st->w, &on, &oc, &oh, &ow));
    if (on != y.n || oc != y.c || oh != y.h || ow != y.w)
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "op %u (conv2d): output (%d,%d,%d,%d) described, cuDNN computes (%d,%d,%d,%d)", op->id, y.n,
                          y.c, y.h, y.w, on, oc, oh, ow);
    if (p->has_bias) {
        TB_CUDNN_TRY(err, op, cudnnCreateTensorDescriptor(&st->b));
        rc = tb_cuda_set_desc(st->b, (struct tb_shape){ 1, y.c, 1, 1 }, op, err);
        if (rc)
            return rc;
    }
    if (cuda->conv_algo != TB_CUDA_CONV_FIND)
        for (int dir = 0; dir < 3; dir++) {
            rc = choose_heuristic(cuda, op, st, dir, err);
            if (rc)
                return rc;
        }
    return TB_OK;
}

static int conv_prepare(struct tb_cuda *cuda, const struct tb_op *op, void **state, struct tb_err *err)
{
    struct conv_state *st = calloc(1, sizeof *st);
    if (!st)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    int rc = conv_prepare_state(cuda, op, st, err);
    if (rc) {
        conv_release(st);
        return rc;
    }
    *state = st;
    return TB_OK;
}

static const float one = 1.0f, zero = 0.0f;

static int conv_forward(struct tb_cuda *cuda, const struct tb_op *op, void *state, uint64_t step,
                        const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    struct conv_state *st = state;
    (void)step;
    if (!st->fwd.chosen) {
        int rc = choose_find(cuda, op, st, 0, in[0].data, in[1].data, out[0].data, err);
        if (rc)
            return rc;
    }
    void *ws = NULL;
    if (st->fwd.workspace && !(ws = tb_cuda_scratch(cuda, st->fwd.workspace, err)))
        return TB_ERR_NOMEM;
    TB_CUDNN_TRY(err, op, cudnnSetConvolutionMathType(st->conv, st->fwd.math));
    TB_CUDNN_TRY(err, op,
                 cudnnConvolutionForward(cuda->dnn, &one, st->x, in[0].data, st->w, in[1].data, st->conv,
                                         (cudnnConvolutionFwdAlgo_t)st->fwd.algo, ws, st->fwd.workspace, &zero, st->y,
                                         out[0].data));
    if (op->p.conv.has_bias)
        TB_CUDNN_TRY(err, op, cudnnAddTensor(cuda->dnn, &one, st->b, in[2].data, &one, st->y, out[0].data));
    return TB_OK;
}

static int conv_backward(struct tb_cuda *cuda, const struct tb_op *op, void *state, const struct tb_tensor *in,
                         const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                         struct tb_err *err)
{
    struct conv_state *st = state;
    (void)out;
    const void *dy = dout[0].data;
    if (!dy)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (conv2d): backward without an output gradient", op->id);
    int rc;
    if (din[0].data && !st->data.chosen && (rc = choose_find(cuda, op, st, 1, in[1].data, dy, din[0].data, err)))
        return rc;
    if (din[1].data && !st->filter.chosen && (rc = choose_find(cuda, op, st, 2, in[0].data, dy, din[1].data, err)))
        return rc;
    size_t need = 0;
    if (din[0].data && st->data.workspace > need)
        need = st->data.workspace;
    if (din[1].data && st->filter.workspace > need)
        need = st->filter.workspace;
    void *ws = NULL;
    if (need && !(ws = tb_cuda_scratch(cuda, need, err)))
        return TB_ERR_NOMEM;
    if (din[0].data) {
        TB_CUDNN_TRY(err, op, cudnnSetConvolutionMathType(st->conv, st->data.math));
        TB_CUDNN_TRY(err, op,
                     cudnnConvolutionBackwardData(cuda->dnn, &one, st->w, in[1].data, st->y, dy, st->conv,
                                                  (cudnnConvolutionBwdDataAlgo_t)st->data.algo, ws, st->data.workspace,
                                                  &zero, st->x, din[0].data));
    }
    if (din[1].data) {
        TB_CUDNN_TRY(err, op, cudnnSetConvolutionMathType(st->conv, st->filter.math));
        TB_CUDNN_TRY(err, op,
                     cudnnConvolutionBackwardFilter(cuda->dnn, &one, st->x, in[0].data, st->y, dy, st->conv,
                                                    (cudnnConvolutionBwdFilterAlgo_t)st->filter.algo, ws,
                                                    st->filter.workspace, &zero, st->w, din[1].data));
    }
    if (op->p.conv.has_bias && din[2].data)
        TB_CUDNN_TRY(err, op, cudnnConvolutionBackwardBias(cuda->dnn, &one, st->y, dy, &zero, st->b, din[2].data));
    return TB_OK;
}

const struct tb_cuda_kernel tb_cuda_conv2d_kernel = { conv_prepare, conv_release, conv_forward, conv_backward };
