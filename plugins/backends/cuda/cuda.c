/* backend/cuda: the CUDA backend. cuDNN for convolutions, batch norm and activations,
 * cuBLAS for axpy, the kernels of cuda_kernels.cu for the rest, and NCCL for data
 * parallelism (cuda_comm.c); see cuda_shared.h for how the backend contract maps onto
 * the CUDA runtime. Tested op by op against the CPU backend (tests/check_cuda.c). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_NUMA
#include <numa.h>
#endif

#include "cuda_shared.h"
#include "cuda_kernels.h"

static const struct tb_key cuda_keys[] = {
    { "device", TB_KEY_INT, "0", "0..1023", "the CUDA device (ordinal, after CUDA_VISIBLE_DEVICES) this run uses" },
    { "device_memory", TB_KEY_SIZE, "0", NULL,
      "device memory trainbig may hold (a cap below the GPU's, to test swapping); 0 = memory_fraction of what is "
      "free at start" },
    { "memory_fraction", TB_KEY_FLOAT, "0.9", "0.01..1",
      "with device_memory = 0: the share of the device's free memory at start that trainbig may hold" },
    { "workspace_limit", TB_KEY_SIZE, "1G", NULL,
      "the most cuDNN workspace one convolution may use; algorithms that need more are not considered" },
    { "conv_algo", TB_KEY_ENUM, "find", "find|heuristic|deterministic",
      "how convolution algorithms are chosen: find = time every candidate once (cudnnFind*), heuristic = "
      "cuDNN's heuristics (cudnnGet*_v7), deterministic = heuristics restricted to deterministic algorithms" },
    { "comm_timeout", TB_KEY_FLOAT, "600", "1..86400",
      "in a data-parallel run: seconds a rank waits for the others (NCCL's setup, an all-reduce, a synchronised "
      "batch norm) before it aborts NCCL and ends the run naming itself" },
    { "tf32", TB_KEY_BOOL, "no", NULL,
      "let convolutions use TF32 tensor cores (Ampere and later): faster, with a 10-bit mantissa; off by default so "
      "that results match the CPU backend and PyTorch's fp32" },
    TB_KEYS_END,
};

/* ------------------------------------------------------------------ score, create */

static int cuda_score(char *why, size_t why_size)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(why, why_size, "no usable CUDA device: %s",
                 e != cudaSuccess ? cudaGetErrorString(e) : "the driver sees no GPU");
        cudaGetLastError();
        return 0;
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        snprintf(why, why_size, "no usable CUDA device: device 0 does not answer (%s)",
                 cudaGetErrorString(cudaGetLastError()));
        return 0;
    }
    snprintf(why, why_size, "%d CUDA device%s, device 0: %s, %.0f GiB, compute capability %d.%d", n, n == 1 ? "" : "s",
             prop.name, (double)prop.totalGlobalMem / (1u << 30), prop.major, prop.minor);
    return 100;
}

static void cuda_destroy(void *ctx);

#define CREATE_TRY(call)                                \
    do {                                                \
        cudaError_t ce_ = (call);                       \
        if (ce_ != cudaSuccess)                         \
            return tb_cuda_fail(err, #call, ce_, NULL); \
    } while (0)

/* The device made current and what the instance runs on it: its streams, cuDNN and cuBLAS
 * on the compute stream, the label check's buffers. On error what was made stays in cuda
 * for cuda_destroy. */
static int create_handles(struct tb_cuda *cuda, struct cudaDeviceProp *prop, struct tb_err *err)
{
    CREATE_TRY(cudaSetDevice(cuda->ordinal));
    CREATE_TRY(cudaGetDeviceProperties(prop, cuda->ordinal));
    for (int s = 0; s < TB_STREAMS; s++)
        CREATE_TRY(cudaStreamCreateWithFlags(&cuda->stream[s], cudaStreamNonBlocking));
    cudnnStatus_t ds = cudnnCreate(&cuda->dnn);
    if (ds != CUDNN_STATUS_SUCCESS) {
        cuda->dnn = NULL;
        return tb_cudnn_fail(err, "cudnnCreate", ds, NULL);
    }
    ds = cudnnSetStream(cuda->dnn, cuda->stream[TB_STREAM_COMPUTE]);
    if (ds != CUDNN_STATUS_SUCCESS)
        return tb_cudnn_fail(err, "cudnnSetStream", ds, NULL);
    cublasStatus_t bs = cublasCreate(&cuda->blas);
    if (bs == CUBLAS_STATUS_SUCCESS)
        bs = cublasSetStream(cuda->blas, cuda->stream[TB_STREAM_COMPUTE]);
    if (bs == CUBLAS_STATUS_SUCCESS)
        bs = cublasSetMathMode(cuda->blas, cuda->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return tb_cublas_fail(err, "cublasCreate", bs, NULL);
    CREATE_TRY(cudaMalloc((void **)&cuda->bad_dev, 4 * sizeof(int32_t)));
    CREATE_TRY(cudaHostAlloc((void **)&cuda->bad_host, 4 * sizeof(int32_t), cudaHostAllocDefault));
    CREATE_TRY(cudaEventCreateWithFlags(&cuda->bad_event, cudaEventDisableTiming));
    return TB_OK;
}

/* The capacity last, once the context, cuDNN and cuBLAS hold what they take for
 * themselves, so that memory_fraction is of what is left to trainbig's tensors (NCCL's
 * buffers come later: comm_attach takes them out of a growing arena's capacity). */
static int take_capacity(struct tb_cuda *cuda, const struct tb_section *cfg, size_t *free_bytes, size_t *total_bytes,
                         uint64_t *cap, struct tb_err *err)
{
    CREATE_TRY(cudaMemGetInfo(free_bytes, total_bytes));
    *cap = tb_section_size(cfg, "device_memory");
    const bool reserve_all = *cap != 0; /* a set cap is one reservation, as the cpu backend's */
    if (*cap > *free_bytes)
        tb_plog(TB_LOG_WARN,
                "[backend] device_memory = %.2f GiB, but device %d has %.2f GiB free: allocations will "
                "fail before the cap",
                (double)*cap / (1u << 30), cuda->ordinal, (double)*free_bytes / (1u << 30));
    if (!*cap)
        *cap = (uint64_t)((double)*free_bytes * tb_section_float(cfg, "memory_fraction"));
    if (tb_cuda_memory_init(&cuda->memory, *cap, reserve_all))
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    return TB_OK;
}
#undef CREATE_TRY

static int cuda_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    struct tb_cuda *cuda = calloc(1, sizeof *cuda);
    if (!cuda)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    cuda->ordinal = (int)tb_section_int(cfg, "device");
    cuda->workspace_limit = (size_t)tb_section_size(cfg, "workspace_limit");
    const char *algo = tb_section_string(cfg, "conv_algo");
    /* The order of the key's allowed names. */
    static const enum tb_cuda_conv_algo algos[] = { TB_CUDA_CONV_FIND, TB_CUDA_CONV_HEURISTIC,
                                                    TB_CUDA_CONV_DETERMINISTIC };
    cuda->conv_algo = algos[tb_section_enum(cfg, "conv_algo")];
    cuda->tf32 = tb_section_bool(cfg, "tf32");
    cuda->comm_timeout = tb_section_float(cfg, "comm_timeout");
    cuda->host_node = -1;
    pthread_mutex_init(&cuda->host_lock, NULL);
    *ctx = NULL;

    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        cudaGetLastError();
        tb_err_set(err, TB_ERR_RUNTIME, "cuda backend: no usable CUDA device (%s); use [backend] plugin = cpu or auto",
                   e != cudaSuccess ? cudaGetErrorString(e) : "the driver sees no GPU");
        pthread_mutex_destroy(&cuda->host_lock);
        free(cuda);
        return TB_ERR_RUNTIME;
    }
    if (cuda->ordinal >= count) {
        tb_err_set(err, TB_ERR_CONFIG, "[backend] device = %d: this machine has %d CUDA device%s (0..%d)",
                   cuda->ordinal, count, count == 1 ? "" : "s", count - 1);
        pthread_mutex_destroy(&cuda->host_lock);
        free(cuda);
        return TB_ERR_CONFIG;
    }
    struct cudaDeviceProp prop;
    size_t free_bytes = 0, total_bytes = 0;
    uint64_t cap = 0;
    int rc = create_handles(cuda, &prop, err);
    if (!rc)
        rc = take_capacity(cuda, cfg, &free_bytes, &total_bytes, &cap, err);
    if (rc) {
        cuda_destroy(cuda);
        return rc;
    }
    /* Device names are short ("NVIDIA H100 80GB HBM3"): 96 characters of it are plenty. */
    snprintf(cuda->name, sizeof cuda->name, "%.96s (device %d, cc %d.%d)", prop.name, cuda->ordinal, prop.major,
             prop.minor);
    tb_plog(TB_LOG_DEBUG, "%s: %.2f of %.2f GiB free, trainbig may hold %.2f GiB; convolutions: %s, TF32 %s",
            cuda->name, (double)free_bytes / (1u << 30), (double)total_bytes / (1u << 30), (double)cap / (1u << 30),
            algo, cuda->tf32 ? "on" : "off");
    *ctx = cuda;
    return TB_OK;
}

struct tb_cuda_host_block {
    void *ptr;
    size_t bytes;
    bool numa; /* numa_alloc_onnode + cudaHostRegister, else cudaHostAlloc */
    struct tb_cuda_host_block *next;
};

static void host_block_free(struct tb_cuda_host_block *b)
{
#ifdef HAVE_NUMA
    if (b->numa) {
        cudaHostUnregister(b->ptr);
        numa_free(b->ptr, b->bytes);
        free(b);
        return;
    }
#endif
    cudaFreeHost(b->ptr);
    free(b);
}

static void cuda_destroy(void *ctx)
{
    struct tb_cuda *cuda = ctx;
    if (!cuda)
        return;
    cudaSetDevice(cuda->ordinal);
    /* NCCL first: it waits for its work, or aborts it when a peer failed, so that the
     * synchronisations below cannot hang on a collective that will never complete. */
    tb_cuda_comm_fini(cuda);
    for (int s = 0; s < TB_STREAMS; s++)
        if (cuda->stream[s])
            cudaStreamSynchronize(cuda->stream[s]);
    if (cuda->bad_pending) {
        struct tb_err err;
        tb_err_clear(&err);
        if (tb_cuda_label_check(cuda, true, &err))
            tb_plog(TB_LOG_ERROR, "%s", err.msg);
    }
    if (cuda->nvtx_step)
        tb_cuda_range_pop();
    if (cuda->scratch)
        tb_cuda_memory_free(&cuda->memory, cuda->scratch);
    tb_cuda_memory_fini(&cuda->memory);
    while (cuda->host_blocks) {
        struct tb_cuda_host_block *next = cuda->host_blocks->next;
        host_block_free(cuda->host_blocks);
        cuda->host_blocks = next;
    }
    if (cuda->bad_event)
        cudaEventDestroy(cuda->bad_event);
    if (cuda->clock_event)
        cudaEventDestroy(cuda->clock_event);
    if (cuda->bad_host)
        cudaFreeHost(cuda->bad_host);
    if (cuda->bad_dev)
        cudaFree(cuda->bad_dev);
    if (cuda->blas)
        cublasDestroy(cuda->blas);
    if (cuda->dnn)
        cudnnDestroy(cuda->dnn);
    for (int s = 0; s < TB_STREAMS; s++)
        if (cuda->stream[s])
            cudaStreamDestroy(cuda->stream[s]);
    pthread_mutex_destroy(&cuda->host_lock);
    free(cuda);
}

/* ------------------------------------------------------------------ scratch */

static void cuda_release_scratch(void *ctx, int device)
{
    struct tb_cuda *cuda = ctx;
    (void)device;
    if (!cuda->scratch)
        return;
    struct tb_err err;
    tb_err_clear(&err);
    if (tb_cuda_wait(cuda, NULL, cuda->stream[TB_STREAM_COMPUTE], &err)) {
        tb_plog(TB_LOG_ERROR, "%s (the scratch space stays)", err.msg); /* queued ops may still use it */
        return;
    }
    tb_cuda_memory_free(&cuda->memory, cuda->scratch);
    cuda->scratch = NULL;
    cuda->scratch_bytes = 0;
}

static uint64_t cuda_alloc_failed_bytes(void *ctx, int device)
{
    struct tb_cuda *cuda = ctx;
    (void)device;
    uint64_t b = cuda->failed_bytes;
    cuda->failed_bytes = 0;
    return b;
}

/* ------------------------------------------------------------------ platform */

static int cuda_set_platform(void *ctx, int device, struct tb_link *link, char *note, size_t note_size,
                             struct tb_err *err)
{
    struct tb_cuda *cuda = ctx;
    (void)device;
    (void)err;
    if (note_size)
        note[0] = '\0';
    cuda->host_node = -1;
    if (!link || link->numa_node < 0)
        return TB_OK;
#ifdef HAVE_NUMA
    if (numa_available() < 0) {
        snprintf(note, note_size,
                 "pinned host memory: NUMA node %d asked for, but this kernel has no NUMA support: "
                 "the driver places it",
                 link->numa_node);
    } else if (link->numa_node > numa_max_node()) {
        snprintf(note, note_size,
                 "pinned host memory: NUMA node %d asked for, but this machine's nodes are 0..%d: "
                 "the driver places it",
                 link->numa_node, numa_max_node());
    } else {
        cuda->host_node = link->numa_node;
        snprintf(note, note_size, "pinned host memory on NUMA node %d (numa_alloc_onnode + cudaHostRegister)",
                 link->numa_node);
    }
#else
    snprintf(note, note_size,
             "pinned host memory: NUMA node %d asked for, but this build has no libnuma: the driver "
             "places it",
             link->numa_node);
#endif
    return TB_OK;
}

/* ------------------------------------------------------------------ devices, memory */

static int cuda_device_count(void *ctx)
{
    (void)ctx;
    return 1;
}

static int cuda_device_info(void *ctx, int device, struct tb_device_info *out)
{
    struct tb_cuda *cuda = ctx;
    if (device != 0)
        return TB_ERR_RUNTIME;
    snprintf(out->name, sizeof out->name, "%s", cuda->name);
    out->capacity = cuda->memory.capacity;
    return TB_OK;
}

static void *cuda_mem_alloc(void *ctx, int device, size_t bytes)
{
    struct tb_cuda *cuda = ctx;
    if (device != 0)
        return NULL;
    tb_cuda_enter(cuda);
    return tb_cuda_memory_alloc(&cuda->memory, bytes);
}

static void cuda_mem_free(void *ctx, int device, void *ptr)
{
    struct tb_cuda *cuda = ctx;
    (void)device;
    tb_cuda_memory_free(&cuda->memory, ptr);
}

static void cuda_mem_stats(void *ctx, int device, struct tb_mem_stats *out)
{
    struct tb_cuda *cuda = ctx;
    (void)device;
    tb_cuda_memory_stats(&cuda->memory, out);
}

static size_t cuda_mem_blocks(void *ctx, int device, struct tb_mem_block *out, size_t max)
{
    struct tb_cuda *cuda = ctx;
    (void)device;
    return tb_cuda_memory_blocks(&cuda->memory, out, max);
}

static void cuda_mem_reset_peak(void *ctx, int device)
{
    struct tb_cuda *cuda = ctx;
    (void)device;
    tb_cuda_memory_reset_peak(&cuda->memory);
}

/* Pinned host memory: on the platform's NUMA node when there is one (allocated there,
 * then registered with the driver), else cudaHostAlloc's. */
static void *cuda_host_alloc(void *ctx, size_t bytes)
{
    struct tb_cuda *cuda = ctx;
    struct tb_cuda_host_block *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->bytes = bytes ? bytes : 1;
    cudaSetDevice(cuda->ordinal);
#ifdef HAVE_NUMA
    if (cuda->host_node >= 0) {
        b->ptr = numa_alloc_onnode(b->bytes, cuda->host_node);
        if (b->ptr && cudaHostRegister(b->ptr, b->bytes, cudaHostRegisterPortable) == cudaSuccess) {
            b->numa = true;
        } else if (b->ptr) {
            cudaGetLastError();
            numa_free(b->ptr, b->bytes);
            b->ptr = NULL;
        }
    }
#endif
    if (!b->ptr && cudaHostAlloc(&b->ptr, b->bytes, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        free(b);
        return NULL;
    }
    pthread_mutex_lock(&cuda->host_lock);
    b->next = cuda->host_blocks;
    cuda->host_blocks = b;
    pthread_mutex_unlock(&cuda->host_lock);
    return b->ptr;
}

static void cuda_host_free(void *ctx, void *ptr)
{
    struct tb_cuda *cuda = ctx;
    if (!ptr)
        return;
    pthread_mutex_lock(&cuda->host_lock);
    struct tb_cuda_host_block **p = &cuda->host_blocks;
    while (*p && (*p)->ptr != ptr)
        p = &(*p)->next;
    struct tb_cuda_host_block *b = *p;
    if (b)
        *p = b->next;
    pthread_mutex_unlock(&cuda->host_lock);
    if (b)
        host_block_free(b);
    else
        tb_plog(TB_LOG_ERROR, "host_free of %p, which host_alloc did not hand out: ignored", ptr);
}

/* ------------------------------------------------------------------ tensors */

static size_t cuda_tensor_bytes(void *ctx, const struct tb_tensor_desc *d)
{
    (void)ctx;
    return tb_shape_elems(d->shape) * tb_dtype_size(d->dtype);
}

/* Through the compute stream, so it is ordered after the ops that wrote t. */
static int tensor_copy_sync(struct tb_cuda *cuda, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            struct tb_err *err)
{
    cudaStream_t s = cuda->stream[TB_STREAM_COMPUTE];
    TB_CUDA_TRY(err, NULL, tb_cuda_enter(cuda));
    TB_CUDA_TRY(err, NULL, cudaMemcpyAsync(dst, src, bytes, kind, s));
    return tb_cuda_wait(cuda, NULL, s, err);
    return TB_OK;
}

static int cuda_tensor_write(void *ctx, const struct tb_tensor *t, const void *host, struct tb_err *err)
{
    return tensor_copy_sync(ctx, t->data, host, cuda_tensor_bytes(ctx, &t->desc), cudaMemcpyHostToDevice, err);
}

static int cuda_tensor_read(void *ctx, const struct tb_tensor *t, void *host, struct tb_err *err)
{
    return tensor_copy_sync(ctx, host, t->data, cuda_tensor_bytes(ctx, &t->desc), cudaMemcpyDeviceToHost, err);
}

static int cuda_tensor_fill(void *ctx, const struct tb_tensor *t, float value, struct tb_err *err)
{
    struct tb_cuda *cuda = ctx;
    TB_CUDA_TRY(err, NULL, tb_cuda_enter(cuda));
    if (t->desc.dtype != TB_F32)
        return tb_err_set(err, TB_ERR_RUNTIME, "tensor_fill: only f32 tensors");
    TB_CUDA_TRY(err, NULL, tb_cuk_fill(cuda->stream[TB_STREAM_COMPUTE], t->data, tb_shape_elems(t->desc.shape), value));
    return TB_OK;
}

/* cuBLAS axpy, in pieces of at most INT_MAX elements (its n is an int). */
static int cuda_tensor_accumulate(void *ctx, const struct tb_tensor *dst, const struct tb_tensor *src, float alpha,
                                  struct tb_err *err)
{
    struct tb_cuda *cuda = ctx;
    TB_CUDA_TRY(err, NULL, tb_cuda_enter(cuda));
    if (dst->desc.dtype != TB_F32 || src->desc.dtype != TB_F32 || !tb_shape_eq(dst->desc.shape, src->desc.shape))
        return tb_err_set(err, TB_ERR_RUNTIME, "tensor_accumulate: f32 tensors of one shape only");
    size_t n = tb_shape_elems(dst->desc.shape);
    float *d = dst->data;
    const float *s = src->data;
    for (size_t at = 0; at < n;) {
        const size_t chunk = n - at < (size_t)1 << 30 ? n - at : (size_t)1 << 30;
        TB_CUBLAS_TRY(err, NULL, cublasSaxpy(cuda->blas, (int)chunk, &alpha, s + at, 1, d + at, 1));
        at += chunk;
    }
    return TB_OK;
}

static int cuda_sgd_update(void *ctx, const struct tb_tensor *param, const struct tb_tensor *grad,
                           const struct tb_tensor *mom, float lr, float momentum, float weight_decay,
                           struct tb_err *err)
{
    struct tb_cuda *cuda = ctx;
    TB_CUDA_TRY(err, NULL, tb_cuda_enter(cuda));
    if (!tb_shape_eq(param->desc.shape, grad->desc.shape) || !tb_shape_eq(param->desc.shape, mom->desc.shape))
        return tb_err_set(err, TB_ERR_RUNTIME, "sgd_update: parameter, gradient and momentum differ in shape");
    TB_CUDA_TRY(err, NULL,
                tb_cuk_sgd(cuda->stream[TB_STREAM_COMPUTE], param->data, grad->data, mom->data,
                           tb_shape_elems(param->desc.shape), lr, momentum, weight_decay));
    return TB_OK;
}

/* ------------------------------------------------------------------ ops */

static int cuda_op_prepare(void *ctx, int device, const struct tb_op *op, void **state, struct tb_err *err)
{
    struct tb_cuda *cuda = ctx;
    (void)device;
    TB_CUDA_TRY(err, NULL, tb_cuda_enter(cuda));
    return tb_cuda_op_prepare(cuda, op, state, err);
}

static void cuda_op_release(void *ctx, void *state)
{
    (void)ctx;
    tb_cuda_op_release(state);
}

static int cuda_op_forward(void *ctx, const struct tb_op *op, void *state, uint64_t step, const struct tb_tensor *in,
                           const struct tb_tensor *out, struct tb_err *err)
{
    struct tb_cuda *cuda = ctx;
    TB_CUDA_TRY(err, op, tb_cuda_enter(cuda));
    tb_cuda_range_step(cuda, step);
    return tb_cuda_op_forward(cuda, op, state, step, in, out, err);
}

static int cuda_op_backward(void *ctx, const struct tb_op *op, void *state, const struct tb_tensor *in,
                            const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                            struct tb_err *err)
{
    TB_CUDA_TRY(err, op, tb_cuda_enter(ctx));
    return tb_cuda_op_backward(ctx, op, state, in, out, dout, din, err);
}

/* ------------------------------------------------------------------ data parallelism */

static int cuda_comm_attach(void *ctx, int device, const struct tb_comm *comm, struct tb_err *err)
{
    (void)device;
    return tb_cuda_comm_attach(ctx, comm, err);
}

static int cuda_allreduce_start(void *ctx, const struct tb_tensor *t, size_t n, float scale, struct tb_err *err)
{
    return tb_cuda_allreduce_start(ctx, t, n, scale, err);
}

static int cuda_allreduce_wait(void *ctx, double *busy_s, double *waited_s, struct tb_err *err)
{
    return tb_cuda_allreduce_wait(ctx, busy_s, waited_s, err);
}

static uint64_t cuda_op_scratch_bytes(void *ctx, const void *state, bool backward)
{
    (void)ctx;
    return tb_cuda_op_scratch_bytes(state, backward);
}

static const struct tb_backend_ops cuda_ops = {
    .head = { .score = cuda_score, .create = cuda_create, .destroy = cuda_destroy },
    .device_count = cuda_device_count,
    .device_info = cuda_device_info,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .mem_stats = cuda_mem_stats,
    .mem_reset_peak = cuda_mem_reset_peak,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .event_create = tb_cuda_event_create,
    .event_destroy = tb_cuda_event_destroy,
    .event_record = tb_cuda_event_record,
    .stream_wait = tb_cuda_stream_wait,
    .event_query = tb_cuda_event_query,
    .event_sync = tb_cuda_event_sync,
    .stream_sync = tb_cuda_stream_sync,
    .copy_async = tb_cuda_copy_async,
    .set_link_throttle = NULL, /* a real link: no emulation */
    .alloc_failed_bytes = cuda_alloc_failed_bytes,
    .release_scratch = cuda_release_scratch,
    .set_platform = cuda_set_platform,
    .event_time = tb_cuda_event_time,
    .tensor_bytes = cuda_tensor_bytes,
    .tensor_write = cuda_tensor_write,
    .tensor_read = cuda_tensor_read,
    .tensor_fill = cuda_tensor_fill,
    .tensor_accumulate = cuda_tensor_accumulate,
    .op_prepare = cuda_op_prepare,
    .op_release = cuda_op_release,
    .op_forward = cuda_op_forward,
    .op_backward = cuda_op_backward,
    .sgd_update = cuda_sgd_update,
    .comm_attach = cuda_comm_attach,
    .allreduce_start = cuda_allreduce_start,
    .allreduce_wait = cuda_allreduce_wait,
    .mem_blocks = cuda_mem_blocks,
    .op_scratch_bytes = cuda_op_scratch_bytes,
};

TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
    .abi_major = TB_ABI_MAJOR,
    .abi_minor = TB_ABI_MINOR,
    .kind = TB_KIND_BACKEND,
    .name = "cuda",
    .version = TB_VERSION,
#ifdef HAVE_NCCL
    .description = "NVIDIA GPU: cuDNN, cuBLAS and own CUDA kernels; caching allocator over cudaMalloc; NCCL for "
                   "data parallelism",
#else
    .description = "NVIDIA GPU: cuDNN, cuBLAS and own CUDA kernels; caching allocator over cudaMalloc (built "
                   "without NCCL: single process only)",
#endif
    .keys = cuda_keys,
    .ops.backend = &cuda_ops,
};
