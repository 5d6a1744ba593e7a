/* backends/cuda/cuda_op_state.c: what the ops keep on the instance between launches
 * (cuda_shared.h): the op scratch space and the pending label check. Both wait on the
 * compute stream through tb_cuda_wait (cuda_comm.c), which polls NCCL when the instance
 * is attached: so they live here, above data parallelism, not in cuda_common.c below it. */
#include "config.h"

#include "cuda_shared.h"

void *tb_cuda_scratch(struct tb_cuda *cuda, size_t bytes, struct tb_err *err)
{
    if (bytes > cuda->scratch_asked)
        cuda->scratch_asked = bytes;
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
