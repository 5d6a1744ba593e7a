/* backends/cuda/cuda_comm.c: data parallelism: comm_attach, allreduce_start,
 * allreduce_wait, and the all-reduce that synchronised batch norm (cuda_syncbn.c) uses.
 *
 * NCCL. comm_attach makes two communicators over the ranks of the core's struct tb_comm:
 * rank 0 creates their unique ids (ncclGetUniqueId) and broadcasts them on
 * TB_CHANNEL_MAIN, then every rank joins both (ncclCommInitRank) on this instance's
 * device. `grads` carries the gradient buckets on the comm stream, a stream of this file's
 * own, so that they run while the compute stream goes on with the rest of backward; `bn`
 * carries synchronised batch norm's sums on the compute stream. Two, because the
 * operations of one communicator must not be in flight on two streams at once.
 *
 * Order across the two. Operations of two communicators on one GPU can deadlock unless
 * every rank runs them in one consistent total order (NCCL's user guide, "Using multiple
 * NCCL communicators concurrently"). Every rank issues them from its one driving thread
 * in the same order (the backend contract), so the order of issue is such an order, and
 * the streams are made to keep it: a bucket starts after everything already on the
 * compute stream (batch-norm sums included), and before a batch-norm sum the compute
 * stream waits for the buckets issued so far. NCCL 2.26 and later can keep that order
 * itself (NCCL_LAUNCH_ORDER_IMPLICIT=1 in the environment); then the second wait is left
 * out, and a batch norm's backward overlaps the buckets before it too.
 *
 * Busy time. Each bucket is bracketed by timing events on the comm stream; allreduce_wait
 * waits for the last one, polling ncclCommGetAsyncError meanwhile (an operation that hit a
 * network error or a dead peer never completes: waiting on its event alone would hang),
 * and adds up the buckets' elapsed times.
 *
 * A world of one (tests; `mpirun -np 1`) runs the same code over one-rank communicators
 * where the build has NCCL. Without NCCL only a world of one can attach: its all-reduce is
 * the scale alone, and batch norm's sums stay this rank's. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <trainbig/clock.h>
#ifdef HAVE_NCCL
/* nccl.h declares ncclGroupStart() and a few more without (void) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
#endif

#include "cuda_shared.h"
#include "cuda_kernels.h"

struct tb_cuda_comm {
    int rank, size;
    bool attached;        /* by comm_attach (else made by an allreduce_start without one: a world of one) */
    cudaStream_t stream;  /* the comm stream: gradient buckets and their scaling */
    cudaEvent_t ready;    /* the compute stream's point the next bucket starts after */
    cudaEvent_t done;     /* the comm stream's point after the buckets so far */
    cudaEvent_t *t0, *t1; /* timing events around bucket i (cap of them created) */
    size_t nbuckets, cap; /* buckets since the last allreduce_wait */
    bool unordered;       /* buckets issued that the compute stream has not waited for */
    bool implicit_order;  /* NCCL orders the launches of its communicators itself */
    bool avg;             /* ncclAvg is there (NCCL >= 2.10) */
    double timeout;       /* [backend] comm_timeout, seconds */
    int failed;           /* the first failure (a tb_status), sticky: NCCL is aborted then */
    char why[TB_ERR_MSG_MAX];
#ifdef HAVE_NCCL
    ncclComm_t grads, bn; /* NULL without NCCL work to do (a world of one made without attach) */
#endif
};

bool tb_cuda_comm_attached(const struct tb_cuda *cuda)
{
    return cuda->comm && cuda->comm->attached;
}

int tb_cuda_comm_size(const struct tb_cuda *cuda)
{
    return tb_cuda_comm_attached(cuda) ? cuda->comm->size : 1;
}

/* ------------------------------------------------------------------ NCCL errors */

#ifdef HAVE_NCCL
/* Fills err for a failed NCCL call or an asynchronous error: the call, NCCL's string for
 * the status, and NCCL's last message where it keeps one. */
static int nccl_fail(struct tb_err *err, const char *call, ncclResult_t r, const struct tb_op *op)
{
    const char *last = NULL;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
    last = ncclGetLastError(NULL);
#endif
    char where[96] = "";
    if (op) {
        const char *kind = tb_op_kind_name(op->kind);
        snprintf(where, sizeof where, "op %u (%s): ", op->id, kind ? kind : "?");
    }
    return tb_err_set(err, TB_ERR_RUNTIME, "cuda backend: %s%s failed: %s (%d)%s%s (NCCL_DEBUG=WARN says more)", where,
                      call, ncclGetErrorString(r), (int)r, last && *last ? ": " : "", last ? last : "");
}

#define TB_NCCL_TRY(err, op, call)                       \
    do {                                                 \
        ncclResult_t tb_r_ = (call);                     \
        if (tb_r_ != ncclSuccess)                        \
            return nccl_fail((err), #call, tb_r_, (op)); \
    } while (0)
#endif

/* NCCL cannot be used after a failure (its guide: abort the communicators): abort both,
 * and keep the message for every later call. Returns rc. */
static int comm_failed(struct tb_cuda_comm *cc, int rc, const struct tb_err *err)
{
    if (!cc->failed) {
        cc->failed = rc;
        snprintf(cc->why, sizeof cc->why, "%s", err && err->msg[0] ? err->msg : "cuda backend: an all-reduce failed");
    }
#ifdef HAVE_NCCL
    if (cc->grads)
        ncclCommAbort(cc->grads);
    if (cc->bn)
        ncclCommAbort(cc->bn);
    cc->grads = cc->bn = NULL;
#endif
    return rc;
}

static int report_failed(const struct tb_cuda_comm *cc, struct tb_err *err)
{
    return tb_err_set(err, cc->failed, "%s", cc->why);
}

/* An asynchronous error of either communicator (a network failure, a dead peer). */
static int check_async(struct tb_cuda_comm *cc, struct tb_err *err)
{
#ifdef HAVE_NCCL
    const ncclComm_t comms[2] = { cc->grads, cc->bn };
    static const char *what[2] = { "the gradient all-reduce (ncclCommGetAsyncError)",
                                   "batch norm's all-reduce (ncclCommGetAsyncError)" };
    for (int i = 0; i < 2; i++) {
        if (!comms[i])
            continue;
        ncclResult_t state = ncclSuccess, r = ncclCommGetAsyncError(comms[i], &state);
        if (r != ncclSuccess)
            return comm_failed(cc, nccl_fail(err, "ncclCommGetAsyncError", r, NULL), err);
        if (state != ncclSuccess && state != ncclInProgress)
            return comm_failed(cc, nccl_fail(err, what[i], state, NULL), err);
    }
#else
    (void)cc;
    (void)err;
#endif
    return TB_OK;
}

/* No progress for cc->timeout seconds: the other ranks (or one of them) have stopped. */
static int timed_out(struct tb_cuda_comm *cc, const char *what, struct tb_err *err)
{
    tb_err_set(err, TB_ERR_RUNTIME,
               "cuda backend: rank %d of %d waited %.0f s ([backend] comm_timeout) for %s without progress: another "
               "rank has stopped, hangs or lost its link; NCCL aborted on this rank",
               cc->rank, cc->size, cc->timeout, what);
    return comm_failed(cc, TB_ERR_RUNTIME, err);
}

/* Blocks until ev (or, when ev is NULL, all of stream s) has completed, checking NCCL for
 * asynchronous errors meanwhile, for at most cc->timeout seconds. */
static int wait_polling(struct tb_cuda_comm *cc, cudaEvent_t ev, cudaStream_t s, struct tb_err *err)
{
    const double deadline = tb_now() + cc->timeout;
    for (unsigned n = 0;; n++) {
        cudaError_t e = tb_cuda_polled(ev ? cudaEventQuery(ev) : cudaStreamQuery(s));
        if (e == cudaSuccess)
            return TB_OK;
        if (e != cudaErrorNotReady)
            return comm_failed(cc, tb_cuda_fail(err, ev ? "cudaEventQuery" : "cudaStreamQuery", e, NULL), err);
        int rc = check_async(cc, err);
        if (rc)
            return rc;
        if ((n & 1023) == 1023 && tb_now() > deadline) /* the clock every ~20 ms */
            return timed_out(cc, ev ? "an event of work that waits on the other ranks" : "a stream that waits on "
                                                                                           "the other ranks",
                             err);
        const struct timespec nap = { 0, 20000 }; /* 20 us: a step's wait is milliseconds */
        nanosleep(&nap, NULL);
    }
}

int tb_cuda_wait(struct tb_cuda *cuda, cudaEvent_t ev, cudaStream_t s, struct tb_err *err)
{
    struct tb_cuda_comm *cc = cuda->comm;
#ifdef HAVE_NCCL
    if (cc && !cc->failed && (cc->grads || cc->bn))
        return wait_polling(cc, ev, s, err);
#endif
    (void)cc;
    cudaError_t e = ev ? cudaEventSynchronize(ev) : cudaStreamSynchronize(s);
    return e == cudaSuccess ? TB_OK : tb_cuda_fail(err, ev ? "cudaEventSynchronize" : "cudaStreamSynchronize", e, NULL);
}

#ifdef HAVE_NCCL
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
#define TB_NCCL_NONBLOCKING 1
#endif
/* The result r of an NCCL call on c: the communicators are nonblocking (so that a rank
 * that never joins cannot hang this one), and a call may answer ncclInProgress, after
 * which c must report ncclSuccess before it is used again (NCCL's guide, "Fault
 * tolerance"). Polls for that, for at most cc->timeout seconds; on a failure or the
 * timeout the communicators are aborted. */
static int settle(struct tb_cuda_comm *cc, ncclComm_t c, ncclResult_t r, const char *call, const struct tb_op *op,
                  struct tb_err *err)
{
    const double deadline = tb_now() + cc->timeout;
    for (unsigned n = 0; r == ncclInProgress; n++) {
        ncclResult_t state = ncclInProgress, q = ncclCommGetAsyncError(c, &state);
        if (q != ncclSuccess)
            return comm_failed(cc, nccl_fail(err, "ncclCommGetAsyncError", q, op), err);
        r = state;
        if (r != ncclInProgress)
            break;
        if ((n & 1023) == 1023 && tb_now() > deadline)
            return timed_out(cc, call, err);
        const struct timespec nap = { 0, 20000 };
        nanosleep(&nap, NULL);
    }
    return r == ncclSuccess ? TB_OK : comm_failed(cc, nccl_fail(err, call, r, op), err);
}
#endif

/* ------------------------------------------------------------------ attach, free */

static void comm_free(struct tb_cuda_comm *cc)
{
    if (!cc)
        return;
#ifdef HAVE_NCCL
    /* After a failure comm_failed has aborted them already. A nonblocking communicator is
     * finalised first (it flushes its work and may answer ncclInProgress), then destroyed;
     * one that does not settle within the timeout is aborted instead. */
    ncclComm_t *comms[2] = { &cc->grads, &cc->bn };
    for (int i = 0; i < 2; i++) {
        if (!*comms[i])
            continue;
#ifdef TB_NCCL_NONBLOCKING
        struct tb_err err;
        tb_err_clear(&err);
        if (settle(cc, *comms[i], ncclCommFinalize(*comms[i]), "NCCL's finalisation (ncclCommFinalize)", NULL, &err)) {
            tb_plog(TB_LOG_ERROR, "%s", err.msg); /* settle aborted both */
            break;
        }
#endif
        ncclCommDestroy(*comms[i]);
        *comms[i] = NULL;
    }
#endif
    if (cc->stream) {
        cudaStreamSynchronize(cc->stream);
        cudaStreamDestroy(cc->stream);
    }
    for (size_t i = 0; i < cc->cap; i++) {
        cudaEventDestroy(cc->t0[i]);
        cudaEventDestroy(cc->t1[i]);
    }
    free(cc->t0);
    free(cc->t1);
    if (cc->ready)
        cudaEventDestroy(cc->ready);
    if (cc->done)
        cudaEventDestroy(cc->done);
    free(cc);
}

/* The comm stream and its events. The stream has the device's highest priority: a bucket
 * is on the critical path at the end of backward, and its kernels are few and small. */
static int comm_streams(struct tb_cuda_comm *cc, struct tb_err *err)
{
    int least = 0, greatest = 0;
    TB_CUDA_TRY(err, NULL, cudaDeviceGetStreamPriorityRange(&least, &greatest));
    TB_CUDA_TRY(err, NULL, cudaStreamCreateWithPriority(&cc->stream, cudaStreamNonBlocking, greatest));
    TB_CUDA_TRY(err, NULL, cudaEventCreateWithFlags(&cc->ready, cudaEventDisableTiming));
    TB_CUDA_TRY(err, NULL, cudaEventCreateWithFlags(&cc->done, cudaEventDisableTiming));
    return TB_OK;
}

#ifdef HAVE_NCCL
/* The two communicators: ids from rank 0, through comm->broadcast, then ncclCommInitRank
 * (which returns once every rank has joined). */
static int nccl_join(struct tb_cuda *cuda, struct tb_cuda_comm *cc, const struct tb_comm *comm, struct tb_err *err)
{
    int version = 0;
    TB_NCCL_TRY(err, NULL, ncclGetVersion(&version));
    cc->avg = NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0) && version >= NCCL_VERSION(2, 10, 0);
    const char *order = getenv("NCCL_LAUNCH_ORDER_IMPLICIT");
    cc->implicit_order = version >= NCCL_VERSION(2, 26, 0) && order && atoi(order) != 0;

    /* Rank 0's ids, or why it has none: every rank learns either, so none is left waiting. */
    struct {
        int32_t ok;
        char why[252];
        ncclUniqueId id[2];
    } boot;
    memset(&boot, 0, sizeof boot);
    if (comm->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&boot.id[0]);
        if (r == ncclSuccess)
            r = ncclGetUniqueId(&boot.id[1]);
        boot.ok = r == ncclSuccess;
        if (!boot.ok)
            snprintf(boot.why, sizeof boot.why, "%s (%d)", ncclGetErrorString(r), (int)r);
    }
    if (comm->size > 1) {
        int rc = comm->broadcast(comm, TB_CHANNEL_MAIN, &boot, sizeof boot, 0, err);
        if (rc)
            return tb_err_prefix(err, "cuda backend: comm_attach: broadcasting NCCL's unique ids");
    }
    if (!boot.ok)
        return tb_err_set(err, TB_ERR_RUNTIME, "cuda backend: comm_attach: ncclGetUniqueId on rank 0 failed: %s",
                          boot.why);
    /* NCCL takes the current device; locals, so that a failed init leaves nothing to destroy. */
    TB_CUDA_TRY(err, NULL, cudaSetDevice(cuda->ordinal));
    size_t free_before = 0, free_after = 0, total = 0;
    TB_CUDA_TRY(err, NULL, cudaMemGetInfo(&free_before, &total));
    ncclComm_t grads = NULL, bn = NULL;
#ifdef TB_NCCL_NONBLOCKING
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&grads, comm->size, boot.id[0], comm->rank, &config);
    if (grads) {
        cc->grads = grads; /* aborted by comm_failed if it does not settle */
        if (settle(cc, grads, r, "NCCL's setup of the gradient communicator (ncclCommInitRankConfig)", NULL, err))
            return cc->failed;
        r = ncclCommInitRankConfig(&bn, comm->size, boot.id[1], comm->rank, &config);
        if (bn) {
            cc->bn = bn;
            if (settle(cc, bn, r, "NCCL's setup of the batch-norm communicator (ncclCommInitRankConfig)", NULL, err))
                return cc->failed;
            r = ncclSuccess;
        }
    }
#else
    ncclResult_t r = ncclCommInitRank(&grads, comm->size, boot.id[0], comm->rank);
    if (r == ncclSuccess) {
        cc->grads = grads;
        r = ncclCommInitRank(&bn, comm->size, boot.id[1], comm->rank);
    }
#endif
    if (r != ncclSuccess) {
        /* the usual cause of ncclInvalidUsage here: two ranks on one GPU */
        char msg[TB_ERR_MSG_MAX];
        nccl_fail(err, "ncclCommInitRank", r, NULL);
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "ncclCommInitRank failed");
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "%s; rank %d (node-local rank %d) is on device %d: each rank needs a GPU of its own "
                          "([backend] device, or CUDA_VISIBLE_DEVICES per rank)",
                          msg, comm->rank, comm->local_rank, cuda->ordinal);
    }
    cc->bn = bn;
    /* What the communicators hold on the device is no longer trainbig's to take. */
    if (cudaMemGetInfo(&free_after, &total) == cudaSuccess && free_after < free_before)
        tb_cuda_memory_taken_outside(&cuda->memory, free_before - free_after);
    tb_plog(TB_LOG_DEBUG,
            "cuda backend: rank %d of %d: NCCL %d.%d.%d, gradient and batch-norm communicators on device %d; "
            "%s, launch order %s",
            comm->rank, comm->size, version / 10000, version / 100 % 100, version % 100, cuda->ordinal,
            cc->avg ? "ncclAvg" : "ncclSum and a scale", cc->implicit_order ? "NCCL's (implicit)" : "by events");
    return TB_OK;
}
#endif

int tb_cuda_comm_attach(struct tb_cuda *cuda, const struct tb_comm *comm, struct tb_err *err)
{
    if (tb_cuda_comm_attached(cuda))
        return tb_err_set(err, TB_ERR_RUNTIME, "cuda backend: comm_attach called twice");
    if (!comm || comm->size < 1 || comm->rank < 0 || comm->rank >= comm->size)
        return tb_err_set(err, TB_ERR_RUNTIME, "cuda backend: comm_attach: rank %d of %d ranks", comm ? comm->rank : -1,
                          comm ? comm->size : 0);
#ifndef HAVE_NCCL
    if (comm->size > 1)
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "cuda backend: this build has no NCCL, so it cannot join a data-parallel run of %d ranks: "
                          "install NCCL's development files (Debian and Ubuntu: apt-get install libnccl-dev, from "
                          "Debian's contrib section or NVIDIA's CUDA repository), then configure and build trainbig "
                          "again",
                          comm->size);
#endif
    TB_CUDA_TRY(err, NULL, cudaSetDevice(cuda->ordinal));
    if (cuda->comm) {
        /* a world of one made by an earlier allreduce_start: its buckets first */
        int rc = tb_cuda_allreduce_wait(cuda, NULL, NULL, err);
        if (rc)
            return rc;
        comm_free(cuda->comm);
        cuda->comm = NULL;
    }
    struct tb_cuda_comm *cc = calloc(1, sizeof *cc);
    if (!cc)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    cc->rank = comm->rank;
    cc->size = comm->size;
    cc->timeout = cuda->comm_timeout; /* [backend] comm_timeout: 1..86400, validated */
    cc->attached = true;
    int rc = comm_streams(cc, err);
#ifdef HAVE_NCCL
    if (!rc)
        rc = nccl_join(cuda, cc, comm, err);
#endif
    if (rc) {
        comm_free(cc);
        return rc;
    }
    cuda->comm = cc;
    return TB_OK;
}

void tb_cuda_comm_fini(struct tb_cuda *cuda)
{
    struct tb_cuda_comm *cc = cuda->comm;
    if (!cc)
        return;
    cuda->comm = NULL;
    cudaSetDevice(cuda->ordinal);
    /* Both streams may hold NCCL work: wait for it, or abort NCCL on an error, so that
     * destroy returns even when a peer has died. */
    if (!cc->failed) {
        struct tb_err err;
        tb_err_clear(&err);
        int rc = wait_polling(cc, NULL, cc->stream, &err);
        if (!rc)
            rc = wait_polling(cc, NULL, cuda->stream[TB_STREAM_COMPUTE], &err);
        if (rc)
            tb_plog(TB_LOG_ERROR, "%s", err.msg);
    }
    comm_free(cc);
}

/* The comm state, made as a world of one when nothing was attached (a single-process run
 * whose core all-reduces anyway: the scale alone). */
static int comm_get(struct tb_cuda *cuda, struct tb_cuda_comm **out, struct tb_err *err)
{
    if (!cuda->comm) {
        struct tb_cuda_comm *cc = calloc(1, sizeof *cc);
        if (!cc)
            return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        cc->size = 1;
        cc->timeout = cuda->comm_timeout; /* [backend] comm_timeout: 1..86400, validated */
        int rc = comm_streams(cc, err);
        if (rc) {
            comm_free(cc);
            return rc;
        }
        cuda->comm = cc;
    }
    *out = cuda->comm;
    return TB_OK;
}

/* ------------------------------------------------------------------ gradient all-reduce */

/* More timing events (twice as many pairs) when the buckets outgrow them. */
static int grow_timers(struct tb_cuda_comm *cc, struct tb_err *err)
{
    if (cc->nbuckets < cc->cap)
        return TB_OK;
    const size_t cap = cc->cap ? 2 * cc->cap : 16;
    cudaEvent_t *t0 = realloc(cc->t0, cap * sizeof *t0);
    if (!t0)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    cc->t0 = t0;
    cudaEvent_t *t1 = realloc(cc->t1, cap * sizeof *t1);
    if (!t1)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    cc->t1 = t1;
    for (size_t i = cc->cap; i < cap; i++) {
        /* timing on (cudaEventCreate's default): allreduce_wait reads the time between a pair */
        cudaError_t e = cudaEventCreate(&cc->t0[i]);
        if (e == cudaSuccess && (e = cudaEventCreate(&cc->t1[i])) != cudaSuccess)
            cudaEventDestroy(cc->t0[i]);
        if (e != cudaSuccess)
            return tb_cuda_fail(err, "cudaEventCreate", e, NULL);
        cc->cap = i + 1;
    }
    return TB_OK;
}

#ifdef HAVE_NCCL
/* The bucket's all-reduces fused into one NCCL operation (a group), in place, on the comm stream. */
static int nccl_bucket(struct tb_cuda_comm *cc, const struct tb_tensor *t, size_t n, ncclRedOp_t op, struct tb_err *err)
{
    TB_NCCL_TRY(err, NULL, ncclGroupStart());
    ncclResult_t first = ncclSuccess;
    for (size_t i = 0; i < n && first == ncclSuccess; i++) {
        const size_t count = tb_shape_elems(t[i].desc.shape); /* NCHW f32: bytes / 4 (tensor_bytes) */
        if (count)
            first = ncclAllReduce(t[i].data, t[i].data, count, ncclFloat32, op, cc->grads, cc->stream);
    }
    /* always closed: a group left open would take in the next NCCL call */
    ncclResult_t r = ncclGroupEnd();
    if (first != ncclSuccess && first != ncclInProgress)
        return nccl_fail(err, "ncclAllReduce", first, NULL);
#ifdef TB_NCCL_NONBLOCKING
    return settle(cc, cc->grads, r, "the gradient all-reduce (ncclGroupEnd)", NULL, err);
#else
    if (r != ncclSuccess)
        return nccl_fail(err, "ncclGroupEnd", r, NULL);
    return TB_OK;
#endif
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
/* scale == 1/size, to float's precision: what ncclAvg computes. */
static bool is_mean(float scale, int size)
{
    return fabs((double)scale * (double)size - 1.0) <= 1e-6;
}
#endif
#endif

/* Bucket k on the comm stream: after the compute stream's work so far (the backward that
 * wrote the gradients), between timing events k. */
static int bucket(struct tb_cuda *cuda, struct tb_cuda_comm *cc, const struct tb_tensor *t, size_t n, float scale,
                  size_t k, struct tb_err *err)
{
    cudaStream_t cs = cc->stream;
    TB_CUDA_TRY(err, NULL, cudaEventRecord(cc->ready, cuda->stream[TB_STREAM_COMPUTE]));
    TB_CUDA_TRY(err, NULL, cudaStreamWaitEvent(cs, cc->ready, 0));
    TB_CUDA_TRY(err, NULL, cudaEventRecord(cc->t0[k], cs));
    bool scaled = scale == 1.0f;
#ifdef HAVE_NCCL
    if (cc->grads) {
        ncclRedOp_t op = ncclSum;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
        if (!scaled && cc->avg && is_mean(scale, cc->size)) {
            op = ncclAvg;
            scaled = true;
        }
#endif
        int rc = nccl_bucket(cc, t, n, op, err);
        if (rc)
            return rc;
    }
#endif
    for (size_t i = 0; i < n && !scaled; i++)
        TB_CUDA_TRY(err, NULL, tb_cuk_scale(cs, t[i].data, tb_shape_elems(t[i].desc.shape), scale));
    TB_CUDA_TRY(err, NULL, cudaEventRecord(cc->t1[k], cs));
    return TB_OK;
}

int tb_cuda_allreduce_start(struct tb_cuda *cuda, const struct tb_tensor *t, size_t n, float scale, struct tb_err *err)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].desc.dtype != TB_F32)
            return tb_err_set(err, TB_ERR_RUNTIME,
                              "cuda backend: allreduce_start: tensor %zu of the bucket is not f32 (gradients are)", i);
    TB_CUDA_TRY(err, NULL, cudaSetDevice(cuda->ordinal));
    struct tb_cuda_comm *cc = NULL;
    int rc = comm_get(cuda, &cc, err);
    if (rc)
        return rc;
    if (cc->failed)
        return report_failed(cc, err);
    rc = grow_timers(cc, err);
    if (rc)
        return rc;
    tb_cuda_range_push("all-reduce %zu tensors", n);
    rc = bucket(cuda, cc, t, n, scale, cc->nbuckets, err);
    tb_cuda_range_pop();
    if (rc)
        return comm_failed(cc, rc, err); /* part of a bucket may be queued: nothing can go on */
    cc->nbuckets++;
    cc->unordered = true;
    return TB_OK;
}

int tb_cuda_allreduce_wait(struct tb_cuda *cuda, double *busy_s, double *waited_s, struct tb_err *err)
{
    if (busy_s)
        *busy_s = 0.0;
    if (waited_s)
        *waited_s = 0.0;
    struct tb_cuda_comm *cc = cuda->comm;
    if (!cc)
        return TB_OK;
    if (cc->failed)
        return report_failed(cc, err);
    if (!cc->nbuckets)
        return TB_OK;
    TB_CUDA_TRY(err, NULL, cudaSetDevice(cuda->ordinal));
    /* What the compute stream runs from now on (the optimizer) waits for every bucket; the
     * caller is not blocked by that. */
    TB_CUDA_TRY(err, NULL, cudaEventRecord(cc->done, cc->stream));
    TB_CUDA_TRY(err, NULL, cudaStreamWaitEvent(cuda->stream[TB_STREAM_COMPUTE], cc->done, 0));
    cc->unordered = false;
    /* The busy time needs the buckets' end events complete: waiting for the last one is
     * what blocks. */
    const size_t nb = cc->nbuckets;
    cc->nbuckets = 0;
    const double t = tb_now();
    int rc = wait_polling(cc, cc->t1[nb - 1], NULL, err);
    if (waited_s)
        *waited_s = tb_now() - t;
    if (rc)
        return rc;
    double busy = 0.0;
    for (size_t i = 0; i < nb; i++) {
        float ms = 0.0f;
        TB_CUDA_TRY(err, NULL, cudaEventElapsedTime(&ms, cc->t0[i], cc->t1[i]));
        busy += 1e-3 * (double)ms;
    }
    if (busy_s)
        *busy_s = busy;
    return TB_OK;
}

/* ------------------------------------------------------------------ batch norm's sums */

int tb_cuda_comm_sum_f64(struct tb_cuda *cuda, double *buf, size_t count, const struct tb_op *op, struct tb_err *err)
{
    struct tb_cuda_comm *cc = cuda->comm;
    if (!cc)
        return TB_OK;
    if (cc->failed)
        return report_failed(cc, err);
#ifdef HAVE_NCCL
    if (!cc->bn)
        return TB_OK;
    cudaStream_t compute = cuda->stream[TB_STREAM_COMPUTE];
    if (cc->unordered && !cc->implicit_order) {
        /* after the buckets issued before, as on every rank (see the top of the file) */
        TB_CUDA_TRY(err, op, cudaEventRecord(cc->done, cc->stream));
        TB_CUDA_TRY(err, op, cudaStreamWaitEvent(compute, cc->done, 0));
        cc->unordered = false;
    }
    ncclResult_t r = ncclAllReduce(buf, buf, count, ncclFloat64, ncclSum, cc->bn, compute);
#ifdef TB_NCCL_NONBLOCKING
    int rc = settle(cc, cc->bn, r, "batch norm's all-reduce (ncclAllReduce)", op, err);
    if (rc)
        return rc;
#else
    if (r != ncclSuccess)
        return comm_failed(cc, nccl_fail(err, "ncclAllReduce", r, op), err);
#endif
#else
    (void)buf;
    (void)count;
    (void)op;
    (void)err;
#endif
    return TB_OK;
}
