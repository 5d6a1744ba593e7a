/* backends/cuda/cuda_shared.h: the CUDA backend's pieces, shared by its files (not
 * exported: the plugin's only symbol is trainbig_plugin).
 *
 * The contract's semantics are CUDA's, so the mapping is 1:1: one instance drives one GPU
 * ([backend] device), the three streams of enum tb_stream are three CUDA streams, events
 * are CUDA events, copies are cudaMemcpyAsync, and ops are cuDNN calls, cuBLAS calls and
 * the kernels of cuda_kernels.cu, all queued on the compute stream.
 *
 * Layout of device tensors: NCHW, the canonical layout, so tensor_write and tensor_read
 * are plain copies and cuDNN sees NCHW descriptors. A (1, C, 1, 1) vector is C contiguous
 * values; a convolution weight (O, C, KH, KW) is cuDNN's NCHW filter. */
#ifndef TB_CUDA_SHARED_H
#define TB_CUDA_SHARED_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <trainbig/trainbig.h>

#include "../arena.h"

/* ------------------------------------------------------------------ memory (cuda_memory.c)
 *
 * One arena over cudaMalloc'd memory (never managed memory), suballocated with block
 * splitting and coalescing (../arena.c): the whole capacity in one cudaMalloc at create
 * when [backend] device_memory is set, else segments of at least 256 MiB taken as needed
 * up to the capacity. cudaMalloc and cudaFree synchronise the device, so nothing returns
 * to the driver before fini. */

struct tb_cuda_memory {
    pthread_mutex_t lock;
    uint64_t capacity; /* bytes trainbig may hold on the device */
    uint64_t peak, allocs, fails;
    bool fixed;            /* the capacity is one reservation: never grow */
    struct tb_arena arena; /* in_use and reserved are its */
};

/* reserve_all: take the whole capacity from the driver now (when that fails, a warning,
 * and segments as needed). TB_ERR_NOMEM when out of host memory. */
int tb_cuda_memory_init(struct tb_cuda_memory *m, uint64_t capacity, bool reserve_all);
/* cudaFree of every segment, blocks handed out included (the owner has stopped using them). */
void tb_cuda_memory_fini(struct tb_cuda_memory *m);
/* NULL when the request does not fit under the capacity or the device is out of memory. */
void *tb_cuda_memory_alloc(struct tb_cuda_memory *m, size_t bytes);
void tb_cuda_memory_free(struct tb_cuda_memory *m, void *ptr);
void tb_cuda_memory_stats(struct tb_cuda_memory *m, struct tb_mem_stats *out);
/* The arena's blocks (the backend's mem_blocks). */
size_t tb_cuda_memory_blocks(struct tb_cuda_memory *m, struct tb_mem_block *out, size_t max);
void tb_cuda_memory_reset_peak(struct tb_cuda_memory *m);
/* `bytes` of the device were taken outside the arena after create (NCCL's buffers): a
 * growing arena's capacity shrinks by them, never below what it holds; a fixed one keeps
 * its reservation, which was taken first. */
void tb_cuda_memory_taken_outside(struct tb_cuda_memory *m, uint64_t bytes);

/* ------------------------------------------------------------------ the backend (cuda.c) */

enum tb_cuda_conv_algo {
    TB_CUDA_CONV_FIND,          /* cudnnFind*Ex: time the candidates once, on the first run */
    TB_CUDA_CONV_HEURISTIC,     /* cudnnGet*_v7: cuDNN's heuristics, nothing timed */
    TB_CUDA_CONV_DETERMINISTIC, /* heuristics, deterministic algorithms only */
};

struct tb_cuda_host_block; /* pinned host memory (host_alloc) */
struct tb_cuda_comm;       /* the attached ranks: NCCL, the comm stream (cuda_comm.c) */

struct tb_cuda {
    int ordinal; /* [backend] device: the CUDA device this instance drives */
    cudaStream_t stream[TB_STREAMS];
    cudnnHandle_t dnn;   /* on the compute stream */
    cublasHandle_t blas; /* on the compute stream */
    struct tb_cuda_memory memory;
    char name[128];
    /* Scratch space shared by all ops (they run in order on the compute stream): cuDNN
     * workspace, loss partial sums, missing gradients. From device memory, so the core's
     * memory manager and the swap policies see it. */
    void *scratch;
    size_t scratch_bytes;
    uint64_t failed_bytes;  /* the last scratch request that did not fit (alloc_failed_bytes) */
    size_t scratch_asked;   /* the most the running op pass asked of tb_cuda_scratch (op_scratch_bytes) */
    size_t workspace_limit; /* [backend] workspace_limit: cuDNN workspace per convolution */
    double comm_timeout;    /* [backend] comm_timeout: seconds a wait on other ranks may take */
    enum tb_cuda_conv_algo conv_algo;
    bool tf32;     /* [backend] tf32: convolutions may use TF32 tensor cores */
    int host_node; /* NUMA node of pinned host memory; -1: the driver decides */
    pthread_mutex_t host_lock;
    struct tb_cuda_host_block *host_blocks;
    /* Label checks: kernels that read labels report the first bad one in bad_dev (int32[4]);
     * it is copied to bad_host (pinned) behind bad_event and looked at before the next
     * such op, in the op's backward, or at destroy. */
    int32_t *bad_dev, *bad_host;
    cudaEvent_t bad_event;
    /* event_time's origin: an event on the compute stream and the CLOCK_MONOTONIC time it
     * completed at; taken again after a minute, since elapsed times are float
     * milliseconds (a microsecond's resolution up to about 60 s). */
    cudaEvent_t clock_event;
    double clock_host;
    bool bad_pending;
    uint32_t bad_op; /* the op that launched the pending check */
    enum tb_op_kind bad_kind;
    int32_t bad_classes, bad_w; /* its K and image width, for the message */
    int32_t bad_ignore;
    uint64_t nvtx_step;        /* the training step of the open NVTX step range (+1; 0 = none) */
    struct tb_cuda_comm *comm; /* NULL until comm_attach; owned, freed by tb_cuda_comm_fini */
};

/* ------------------------------------------------------------------ streams, events (cuda_streams.c)
 *
 * The backend members of the same names (backend.h); ctx is the struct tb_cuda. */
struct tb_event *tb_cuda_event_create(void *ctx, int device);
void tb_cuda_event_destroy(void *ctx, struct tb_event *ev);
int tb_cuda_event_record(void *ctx, struct tb_event *ev, enum tb_stream stream);
int tb_cuda_stream_wait(void *ctx, int device, enum tb_stream stream, struct tb_event *ev);
int tb_cuda_event_query(void *ctx, struct tb_event *ev);
double tb_cuda_event_time(void *ctx, struct tb_event *ev);
int tb_cuda_event_sync(void *ctx, struct tb_event *ev);
int tb_cuda_stream_sync(void *ctx, int device, enum tb_stream stream);
int tb_cuda_copy_async(void *ctx, int device, enum tb_stream stream, void *dst, const void *src, size_t bytes,
                       struct tb_err *err);

/* ------------------------------------------------------------------ shared by every file (cuda_common.c) */

/* Error reports: the call, the status and its string; op may be NULL. They fill err and
 * return TB_ERR_RUNTIME (TB_ERR_NOMEM for an out-of-memory status). */
int tb_cuda_fail(struct tb_err *err, const char *call, cudaError_t e, const struct tb_op *op);

/* Makes this instance's GPU the calling thread's current device, which the CUDA runtime,
 * cuDNN and cuBLAS act on: every entry point that queues work or waits calls it, so two
 * instances on two GPUs in one process, or a thread other than the one that created the
 * instance, reach the right device. A thread's current device is one integer: the check
 * costs tens of nanoseconds, and cudaSetDevice runs only on a change. */
static inline cudaError_t tb_cuda_enter(const struct tb_cuda *cuda)
{
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current == cuda->ordinal)
        return cudaSuccess;
    return cudaSetDevice(cuda->ordinal);
}

/* The result of an event or stream query: where it is cudaErrorNotReady, an expected
 * answer, the thread's last error is cleared, so that a runtime that records it there
 * cannot make the next launch check report it as its own. (CUDA 13.0 on an H100 does not
 * record it: a query answering NotReady left cudaPeekAtLastError at cudaSuccess; PyTorch
 * clears it after its queries all the same.) Returns e. */
cudaError_t tb_cuda_polled(cudaError_t e);
int tb_cudnn_fail(struct tb_err *err, const char *call, cudnnStatus_t s, const struct tb_op *op);
int tb_cublas_fail(struct tb_err *err, const char *call, cublasStatus_t s, const struct tb_op *op);

#define TB_CUDA_TRY(err, op, call)                          \
    do {                                                    \
        cudaError_t tb_e_ = (call);                         \
        if (tb_e_ != cudaSuccess)                           \
            return tb_cuda_fail((err), #call, tb_e_, (op)); \
    } while (0)
#define TB_CUDNN_TRY(err, op, call)                          \
    do {                                                     \
        cudnnStatus_t tb_s_ = (call);                        \
        if (tb_s_ != CUDNN_STATUS_SUCCESS)                   \
            return tb_cudnn_fail((err), #call, tb_s_, (op)); \
    } while (0)
#define TB_CUBLAS_TRY(err, op, call)                          \
    do {                                                      \
        cublasStatus_t tb_s_ = (call);                        \
        if (tb_s_ != CUBLAS_STATUS_SUCCESS)                   \
            return tb_cublas_fail((err), #call, tb_s_, (op)); \
    } while (0)

/* NVTX ranges (no-ops without NVTX). */
void tb_cuda_range_push(const char *fmt, ...) TB_PRINTF(1, 2);
void tb_cuda_range_pop(void);
/* Opens the range "step N" when step changes (closing the previous one). */
void tb_cuda_range_step(struct tb_cuda *cuda, uint64_t step);

/* ------------------------------------------------------------------ data parallelism (cuda_comm.c)
 *
 * comm_attach joins the ranks of a struct tb_comm with two NCCL communicators, bootstrapped
 * through comm->broadcast: one for the gradient all-reduce, on a comm stream of its own so
 * that it overlaps the rest of backward, and one for synchronised batch norm, on the
 * compute stream (NCCL must not run one communicator from two streams at once). A world
 * of one attached runs one-rank NCCL where the build has it (what one GPU can test), and
 * without NCCL, or with nothing attached, its all-reduce is the scale alone. */

/* The backend's data-parallel members (backend.h). */
int tb_cuda_comm_attach(struct tb_cuda *cuda, const struct tb_comm *comm, struct tb_err *err);
int tb_cuda_allreduce_start(struct tb_cuda *cuda, const struct tb_tensor *t, size_t n, float scale, struct tb_err *err);
int tb_cuda_allreduce_wait(struct tb_cuda *cuda, double *busy_s, double *waited_s, struct tb_err *err);
/* Blocks until ev (or, when ev is NULL, all of stream s) has completed. When ranks are
 * attached through NCCL the wait may depend on a peer, so it polls: NCCL's asynchronous
 * errors abort the communicators, and no progress for [backend] comm_timeout seconds
 * ends it with this rank named. Otherwise a plain cudaEventSynchronize or
 * cudaStreamSynchronize. Every blocking wait of the backend goes through here. */
int tb_cuda_wait(struct tb_cuda *cuda, cudaEvent_t ev, cudaStream_t s, struct tb_err *err);
/* Waits for what the comm stream still runs (aborting NCCL on an asynchronous error, so a
 * dead peer cannot hang it) and frees cuda->comm; for destroy. */
void tb_cuda_comm_fini(struct tb_cuda *cuda);
/* Whether a comm is attached (of any size): synchronised batch norm uses its own kernels
 * then; and its number of ranks (1 when none is). */
bool tb_cuda_comm_attached(const struct tb_cuda *cuda);
int tb_cuda_comm_size(const struct tb_cuda *cuda);
/* On the compute stream: buf (count doubles of device memory) becomes the sum over the
 * ranks, in place, through the batch-norm communicator; nothing in a world of one. op
 * names the op in errors. */
int tb_cuda_comm_sum_f64(struct tb_cuda *cuda, double *buf, size_t count, const struct tb_op *op, struct tb_err *err);

/* Synchronised batch norm in training (cuda_syncbn.c): the batch statistics and backward's
 * sums over every rank's batch; the batch-norm row (cuda_dnn.c) hands over to these when
 * tb_cuda_syncbn_active. */
bool tb_cuda_syncbn_active(const struct tb_cuda *cuda, const struct tb_op *op);
/* Batch norm in training needs 2 values a channel or more, over `ranks` ranks of op's
 * input: TB_OK, or the error naming the op (cuda_dnn.c checks it too). */
int tb_cuda_bn_check_values(const struct tb_op *op, int ranks, struct tb_err *err);
int tb_cuda_syncbn_forward(struct tb_cuda *cuda, const struct tb_op *op, const struct tb_tensor *in,
                           const struct tb_tensor *out, struct tb_err *err);
int tb_cuda_syncbn_backward(struct tb_cuda *cuda, const struct tb_op *op, const struct tb_tensor *in,
                            const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                            struct tb_err *err);

/* ------------------------------------------------------------------ op state (cuda_op_state.c) */

/* A scratch buffer of at least `bytes` bytes (256-byte aligned), valid until the next
 * call; NULL with err filled (TB_ERR_NOMEM) and failed_bytes set when it does not fit. The
 * buffer it replaces may still be read by queued work: it is freed only after the compute
 * stream has drained. */
void *tb_cuda_scratch(struct tb_cuda *cuda, size_t bytes, struct tb_err *err);
/* The most scratch one pass of the op asked for (op_scratch_bytes). */
uint64_t tb_cuda_op_scratch_bytes(const void *state, bool backward);

/* The pending label check: waits for it (wait) or only looks when it has completed, and
 * reports a bad label as TB_ERR_RUNTIME naming the op, image, pixel and label. */
int tb_cuda_label_check(struct tb_cuda *cuda, bool wait, struct tb_err *err);
/* Starts a label check for op (after waiting for any pending one): zeroes bad_dev. The
 * kernel is launched between this and tb_cuda_label_check_end. */
int tb_cuda_label_check_begin(struct tb_cuda *cuda, const struct tb_op *op, int classes, int width, int ignore,
                              struct tb_err *err);
int tb_cuda_label_check_end(struct tb_cuda *cuda, const struct tb_op *op, struct tb_err *err);

/* ------------------------------------------------------------------ ops (cuda_ops.c and kernels)
 *
 * Each op kind has a row of functions, as in the CPU backend; prepare and release may be
 * NULL (no state). */
typedef int (*tb_cuda_prepare_fn)(struct tb_cuda *cuda, const struct tb_op *op, void **state, struct tb_err *err);
typedef void (*tb_cuda_release_fn)(void *state);
typedef int (*tb_cuda_forward_fn)(struct tb_cuda *cuda, const struct tb_op *op, void *state, uint64_t step,
                                  const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err);
typedef int (*tb_cuda_backward_fn)(struct tb_cuda *cuda, const struct tb_op *op, void *state,
                                   const struct tb_tensor *in, const struct tb_tensor *out,
                                   const struct tb_tensor *dout, const struct tb_tensor *din, struct tb_err *err);

struct tb_cuda_kernel {
    tb_cuda_prepare_fn prepare;
    tb_cuda_release_fn release;
    tb_cuda_forward_fn forward;
    tb_cuda_backward_fn backward;
};

extern const struct tb_cuda_kernel tb_cuda_conv2d_kernel;    /* cuda_conv.c (cuDNN) */
extern const struct tb_cuda_kernel tb_cuda_batchnorm_kernel; /* cuda_dnn.c (cuDNN) */
extern const struct tb_cuda_kernel tb_cuda_relu_kernel;      /* cuda_dnn.c (cuDNN) */
extern const struct tb_cuda_kernel tb_cuda_sigmoid_kernel;   /* cuda_dnn.c (cuDNN) */

int tb_cuda_op_prepare(struct tb_cuda *cuda, const struct tb_op *op, void **state, struct tb_err *err);
void tb_cuda_op_release(void *state);
int tb_cuda_op_forward(struct tb_cuda *cuda, const struct tb_op *op, void *state, uint64_t step,
                       const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err);
int tb_cuda_op_backward(struct tb_cuda *cuda, const struct tb_op *op, void *state, const struct tb_tensor *in,
                        const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                        struct tb_err *err);

/* A 4-d NCHW float descriptor of shape s. */
int tb_cuda_set_desc(cudnnTensorDescriptor_t d, struct tb_shape s, const struct tb_op *op, struct tb_err *err);

#endif
