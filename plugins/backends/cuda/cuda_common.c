/* backends/cuda/cuda_common.c: what every file of the CUDA backend uses (cuda_shared.h):
 * error reports, NVTX ranges, event and stream queries. It calls nothing else of the
 * backend, so the backend's files depend on it and it on none of them. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#ifdef HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

#include "cuda_shared.h"

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

/* ------------------------------------------------------------------ queries */

cudaError_t tb_cuda_polled(cudaError_t e)
{
    if (e == cudaErrorNotReady)
        (void)cudaGetLastError();
    return e;
}
