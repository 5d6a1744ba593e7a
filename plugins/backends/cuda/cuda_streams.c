/* backends/cuda/cuda_streams.c: the three streams' side of the backend contract: events
 * (with timing, for event_time), waits between streams, synchronisation through
 * tb_cuda_wait, and copies on the copy streams. */
#include <stdlib.h>
#include <trainbig/clock.h>

#include "cuda_shared.h"

struct tb_event {
    cudaEvent_t ev;
};

struct tb_event *tb_cuda_event_create(void *ctx, int device)
{
    struct tb_cuda *cuda = ctx;
    (void)device;
    struct tb_event *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    cudaSetDevice(cuda->ordinal);
    /* With timing (cudaEventCreate's default), for event_time: traces place copies by it. */
    if (cudaEventCreate(&e->ev) != cudaSuccess) {
        cudaGetLastError();
        free(e);
        return NULL;
    }
    return e;
}

void tb_cuda_event_destroy(void *ctx, struct tb_event *ev)
{
    (void)ctx;
    if (!ev)
        return;
    cudaEventDestroy(ev->ev);
    free(ev);
}

int tb_cuda_event_record(void *ctx, struct tb_event *ev, enum tb_stream stream)
{
    struct tb_cuda *cuda = ctx;
    tb_cuda_enter(cuda); /* a failure shows in the next call */
    if (stream < 0 || stream >= TB_STREAMS)
        return TB_ERR_RUNTIME;
    return cudaEventRecord(ev->ev, cuda->stream[stream]) == cudaSuccess ? TB_OK : TB_ERR_RUNTIME;
}

int tb_cuda_stream_wait(void *ctx, int device, enum tb_stream stream, struct tb_event *ev)
{
    struct tb_cuda *cuda = ctx;
    tb_cuda_enter(cuda); /* a failure shows in the next call */
    (void)device;
    if (stream < 0 || stream >= TB_STREAMS)
        return TB_ERR_RUNTIME;
    /* Waiting on an event never recorded is a no-op in CUDA too. */
    return cudaStreamWaitEvent(cuda->stream[stream], ev->ev, 0) == cudaSuccess ? TB_OK : TB_ERR_RUNTIME;
}

int tb_cuda_event_query(void *ctx, struct tb_event *ev)
{
    tb_cuda_enter(ctx);
    cudaError_t e = tb_cuda_polled(cudaEventQuery(ev->ev));
    if (e == cudaErrorNotReady)
        return 0;
    if (e != cudaSuccess) {
        tb_plog(TB_LOG_ERROR, "cudaEventQuery failed: %s", cudaGetErrorString(e));
        return 1; /* not pending: the error surfaces at the next call that can return it */
    }
    return 1;
}

/* The origin of event_time: clock_event completed now. */
static int clock_origin(struct tb_cuda *cuda)
{
    if (!cuda->clock_event && cudaEventCreate(&cuda->clock_event) != cudaSuccess) {
        cudaGetLastError();
        cuda->clock_event = NULL;
        return -1;
    }
    if (cudaEventRecord(cuda->clock_event, cuda->stream[TB_STREAM_COMPUTE]) != cudaSuccess ||
        cudaEventSynchronize(cuda->clock_event) != cudaSuccess) {
        cuda->clock_host = 0;
        return -1;
    }
    cuda->clock_host = tb_now();
    return 0;
}

/* When ev completed, in CLOCK_MONOTONIC seconds: the origin's host time plus the GPU's
 * elapsed time from the origin's event to ev (which may be earlier: negative). 0 while
 * ev is pending or never recorded. */
double tb_cuda_event_time(void *ctx, struct tb_event *ev)
{
    struct tb_cuda *cuda = ctx;
    tb_cuda_enter(cuda);
    if (tb_cuda_polled(cudaEventQuery(ev->ev)) != cudaSuccess) {
        cudaGetLastError(); /* pending, or never recorded (an error then) */
        return 0;
    }
    if ((!cuda->clock_host || tb_now() - cuda->clock_host > 60) && clock_origin(cuda))
        return 0;
    float ms = 0;
    if (cudaEventElapsedTime(&ms, cuda->clock_event, ev->ev) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return cuda->clock_host + 1e-3 * (double)ms;
}

int tb_cuda_event_sync(void *ctx, struct tb_event *ev)
{
    tb_cuda_enter(ctx);
    struct tb_err err;
    tb_err_clear(&err);
    int rc = tb_cuda_wait(ctx, ev->ev, NULL, &err);
    if (rc)
        tb_plog(TB_LOG_ERROR, "%s", err.msg);
    return rc;
}

int tb_cuda_stream_sync(void *ctx, int device, enum tb_stream stream)
{
    struct tb_cuda *cuda = ctx;
    tb_cuda_enter(cuda); /* a failure shows in the next call */
    (void)device;
    if (stream < 0 || stream >= TB_STREAMS)
        return TB_ERR_RUNTIME;
    struct tb_err err;
    tb_err_clear(&err);
    int rc = tb_cuda_wait(cuda, NULL, cuda->stream[stream], &err);
    if (rc)
        tb_plog(TB_LOG_ERROR, "%s", err.msg);
    return rc;
}

int tb_cuda_copy_async(void *ctx, int device, enum tb_stream stream, void *dst, const void *src, size_t bytes,
                           struct tb_err *err)
{
    struct tb_cuda *cuda = ctx;
    TB_CUDA_TRY(err, NULL, tb_cuda_enter(cuda));
    (void)device;
    static const enum cudaMemcpyKind kinds[TB_STREAMS] = {
        [TB_STREAM_COMPUTE] = cudaMemcpyDeviceToDevice,
        [TB_STREAM_H2D] = cudaMemcpyHostToDevice,
        [TB_STREAM_D2H] = cudaMemcpyDeviceToHost,
    };
    static const char *what[TB_STREAMS] = { "copy", "swap in", "swap out" };
    if (stream < 0 || stream >= TB_STREAMS)
        return tb_err_set(err, TB_ERR_RUNTIME, "cuda backend: copy_async on stream %d (0..2)", (int)stream);
    tb_cuda_range_push("%s %zu bytes", what[stream], bytes);
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kinds[stream], cuda->stream[stream]);
    tb_cuda_range_pop();
    if (e != cudaSuccess)
        return tb_cuda_fail(err, "cudaMemcpyAsync", e, NULL);
    return TB_OK;
}

