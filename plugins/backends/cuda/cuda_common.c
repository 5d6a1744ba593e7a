/* backends/cuda/cuda_common.c: what every file of the CUDA backend uses (cuda_internal.h):
 * error reports, NVTX ranges, the op scratch space and the label checks. It calls nothing
 * else of the backend but the device memory (cuda_memory.c), so the backend's files
 * depend on it and not on cuda.c. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#ifdef HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

#include "cuda_internal.h"

/* ------------------------------------------------------------------ errors */

static int fail_common(struct tb_err *err, int code, const char *call, const char *status, const struct tb_op *op)
{
    if (op) {
        const char *kind = tb_op_kind_name(op->kind);
        return tb_err_set(err, code, "cuda backend: op %u (%s): %s failed: %s", op->id, kind ? kind : "?", call,
                          status);
    }
    return tb_err_set(err, code, "cuda backend: %s failed: %s", call, status);
}

int tb_cuda_fail(struct tb_err *err, const char *call, cudaError_t e, const struct tb_op *op)
{
    char status[256];
    snprintf(status, sizeof status, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    return fail_common(err, e == cudaErrorMemoryAllocation ? TB_ERR_NOMEM : TB_ERR_RUNTIME, call, status, op);
}

int tb_cudnn_fail(struct tb_err *err, const char *call, cudnnStatus_t s, const struct tb_op *op)
{
    char status[256];
    snprintf(status, sizeof status, "%s (%d)", cudnnGetErrorString(s), (int)s);
    return fail_common(err, s == CUDNN_STATUS_ALLOC_FAILED ? TB_ERR_NOMEM : TB_ERR_RUNTIME, call, status, op);
}

int tb_cublas_fail(struct tb_err *err, const char *call, cublasStatus_t s, const struct tb_op *op)
{
    char status[256];
    snprintf(status, sizeof status, "%s (%d)", cublasGetStatusString(s), (int)s);
    return fail_common(err, s == CUBLAS_STATUS_ALLOC_FAILED ? TB_ERR_NOMEM : TB_ERR_RUNTIME, call, status, op);
}

/* ------------------------------------------------------------------ NVTX */

void tb_cuda_range_push(const char *fmt, ...)
{
#ifdef HAVE_NVTX
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    nvtxRangePushA(name);
#else
    (void)fmt;
#endif
}

void tb_cuda_range_pop(void)
{
#ifdef HAVE_NVTX
    nvtxRangePop();
#endif
}

void tb_cuda_range_step(struct tb_cuda *cuda, uint64_t step)
{
    if (cuda->nvtx_step == step + 1)
        return;
    if (cuda->nvtx_step)
        tb_cuda_range_pop();
    tb_cuda_range_push("step %llu", (unsigned long long)step);
    cuda->nvtx_step = step + 1;
}

/* ------------------------------------------------------------------ scratch, label checks */

void *tb_cuda_scratch(struct tb_cuda *cuda, size_t bytes, struct tb_err *err)
{
    if (cuda->scratch && bytes <= cuda->scratch_bytes)
        return cuda->scratch;
    if (cuda->scratch) {
        /* Queued ops may still read the old buffer. */
        if (tb_cuda_wait(cuda, NULL, cuda->stream[TB_STREAM_COMPUTE], err))
            return NULL;
        tb_cuda_memory_free(&cuda->memory, cuda->scratch);
    }
    cuda->scratch = tb_cuda_memory_alloc(&cuda->memory, bytes ? bytes : 256);
    cuda->scratch_bytes = cuda->scratch ? bytes : 0;
    if (!cuda->scratch) {
        cuda->failed_bytes = bytes ? bytes : 256;
        tb_err_set(err, TB_ERR_NOMEM, "cuda backend: no device memory left for %zu bytes of op scratch space", bytes);
    }
    return cuda->scratch;
}

cudaError_t tb_cuda_polled(cudaError_t e)
{
    if (e == cudaErrorNotReady)
        (void)cudaGetLastError();
    return e;
}

int tb_cuda_label_check(struct tb_cuda *cuda, bool wait, struct tb_err *err)
{
    if (!cuda->bad_pending)
        return TB_OK;
    if (wait) {
        int rc = tb_cuda_wait(cuda, cuda->bad_event, NULL, err);
        cuda->bad_pending = false;
        if (rc)
            return rc;
    } else {
        cudaError_t e = tb_cuda_polled(cudaEventQuery(cuda->bad_event));
        if (e == cudaErrorNotReady)
            return TB_OK;
        cuda->bad_pending = false;
        if (e != cudaSuccess)
            return tb_cuda_fail(err, "cudaEventQuery", e, NULL);
    }
    const int32_t *b = cuda->bad_host;
    if (!b[0])
        return TB_OK;
    const char *kind = tb_op_kind_name(cuda->bad_kind);
    const int w = cuda->bad_w > 0 ? cuda->bad_w : 1;
    return tb_err_set(err, TB_ERR_RUNTIME,
                      "op %u (%s): image %d of the batch, pixel (x %d, y %d): label %d is neither a class (0..%d) nor "
                      "the ignore label %d",
                      cuda->bad_op, kind ? kind : "?", b[1], b[2] % w, b[2] / w, b[3], cuda->bad_classes - 1,
                      cuda->bad_ignore);
}

int tb_cuda_label_check_begin(struct tb_cuda *cuda, const struct tb_op *op, int classes, int width, int ignore,
                              struct tb_err *err)
{
    int rc = tb_cuda_label_check(cuda, true, err);
    if (rc)
        return rc;
    TB_CUDA_TRY(err, op, cudaMemsetAsync(cuda->bad_dev, 0, 4 * sizeof(int32_t), cuda->stream[TB_STREAM_COMPUTE]));
    cuda->bad_op = op->id;
    cuda->bad_kind = op->kind;
    cuda->bad_classes = classes;
    cuda->bad_w = width;
    cuda->bad_ignore = ignore;
    return TB_OK;
}

int tb_cuda_label_check_end(struct tb_cuda *cuda, const struct tb_op *op, struct tb_err *err)
{
    cudaStream_t s = cuda->stream[TB_STREAM_COMPUTE];
    TB_CUDA_TRY(err, op,
                cudaMemcpyAsync(cuda->bad_host, cuda->bad_dev, 4 * sizeof(int32_t), cudaMemcpyDeviceToHost, s));
    TB_CUDA_TRY(err, op, cudaEventRecord(cuda->bad_event, s));
    cuda->bad_pending = true;
    return TB_OK;
}
