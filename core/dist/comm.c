/* comm.c: the ranks of this job, over MPI (see world.h and trainbig/comm.h).
 *
 * MPI is joined only when a launcher started the process, so a plain `trainbig train`
 * never initialises MPI (whose singleton start spawns helpers and costs seconds). The two
 * channels of trainbig/comm.h are two duplicates of MPI_COMM_WORLD: collectives on one
 * never match collectives on the other, so a backend's gradient thread and the training
 * thread can each run theirs. That needs MPI_THREAD_MULTIPLE; with less, `concurrent` is
 * 0 and backends keep to one thread. Errors return (MPI_ERRORS_RETURN) with MPI's text. */
#include "config.h"

#include "core/dist/world.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef HAVE_MPI
#include <mpi.h>
#endif

static int world_allreduce(const struct tb_comm *c, enum tb_comm_channel ch, void *data, size_t count,
                           enum tb_comm_dtype dtype, enum tb_comm_reduce op, struct tb_err *err);
static int world_broadcast(const struct tb_comm *c, enum tb_comm_channel ch, void *data, size_t bytes, int root,
                           struct tb_err *err);

static struct tb_comm world = { 0, 1, 0, 1, 1, world_allreduce, world_broadcast, NULL };
static bool joined; /* MPI_Init_thread was called here */

#ifdef HAVE_MPI
static MPI_Comm channels[TB_CHANNELS];

static int mpi_error(int code, const char *call, struct tb_err *err)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", code);
    return tb_err_set(err, TB_ERR_RUNTIME, "rank %d of %d: %s failed: %s", world.rank, world.size, call, text);
}

static MPI_Datatype mpi_type(enum tb_comm_dtype t)
{
    switch (t) {
    case TB_COMM_F32:
        return MPI_FLOAT;
    case TB_COMM_F64:
        return MPI_DOUBLE;
    case TB_COMM_U64:
        return MPI_UINT64_T;
    case TB_COMM_I32:
        return MPI_INT32_T;
    }
    return MPI_DATATYPE_NULL;
}

static MPI_Op mpi_op(enum tb_comm_reduce op)
{
    return op == TB_COMM_MIN ? MPI_MIN : op == TB_COMM_MAX ? MPI_MAX : MPI_SUM;
}
#endif

static bool launched(int *rank, int *size)
{
    static const char *const sizes[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL };
    static const char *const ranks[] = { "OMPI_COMM_WORLD_RANK", "PMI_RANK", NULL };
    *rank = 0;
    *size = 1;
    for (int i = 0; sizes[i]; i++) {
        const char *s = getenv(sizes[i]), *r = getenv(ranks[i]);
        if (s) {
            *size = atoi(s);
            *rank = r ? atoi(r) : 0;
            return true;
        }
    }
    if (getenv("PMIX_RANK")) {
        *rank = atoi(getenv("PMIX_RANK"));
        *size = 0; /* unknown until MPI says */
        return true;
    }
    return false;
}

int tb_comm_init(struct tb_err *err)
{
    if (joined)
        return TB_OK;
    int rank, size;
    if (!launched(&rank, &size))
        return TB_OK;
#ifndef HAVE_MPI
    if (size <= 1)
        return TB_OK;
    return tb_err_set(err, TB_ERR_CONFIG,
                      "started as rank %d of %d by an MPI launcher, but this trainbig was built without MPI: install "
                      "Open MPI (Debian: apt-get install libopenmpi-dev), then ./configure && make",
                      rank, size);
#else
    int provided = 0, rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS)
        return tb_err_set(err, TB_ERR_RUNTIME, "MPI_Init_thread failed (error %d): started by mpirun as rank %d", rc,
                          rank);
    joined = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &world.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world.size);
    for (int c = 0; c < TB_CHANNELS; c++) {
        if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &channels[c])) != MPI_SUCCESS)
            return mpi_error(rc, "MPI_Comm_dup", err);
        MPI_Comm_set_errhandler(channels[c], MPI_ERRORS_RETURN);
    }
    MPI_Comm node;
    if ((rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world.rank, MPI_INFO_NULL, &node)) !=
        MPI_SUCCESS)
        return mpi_error(rc, "MPI_Comm_split_type", err);
    MPI_Comm_rank(node, &world.local_rank);
    MPI_Comm_size(node, &world.local_size);
    MPI_Comm_free(&node);
    world.concurrent = provided >= MPI_THREAD_MULTIPLE;
    return TB_OK;
#endif
}

void tb_comm_fini(void)
{
#ifdef HAVE_MPI
    if (!joined)
        return;
    for (int c = 0; c < TB_CHANNELS; c++)
        if (channels[c] != MPI_COMM_NULL)
            MPI_Comm_free(&channels[c]);
    MPI_Finalize();
    joined = false;
#endif
}

const struct tb_comm *tb_comm_world(void)
{
    return &world;
}

void tb_comm_abort(int code)
{
#ifdef HAVE_MPI
    if (joined && world.size > 1) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
#else
    (void)code;
#endif
}

static int world_allreduce(const struct tb_comm *c, enum tb_comm_channel ch, void *data, size_t count,
                           enum tb_comm_dtype dtype, enum tb_comm_reduce op, struct tb_err *err)
{
    (void)c;
    if (world.size == 1 || count == 0)
        return TB_OK;
#ifdef HAVE_MPI
    /* MPI counts are ints: reduce in pieces of at most 2^30 elements. */
    const size_t piece = (size_t)1 << 30;
    const size_t esize = dtype == TB_COMM_F64 || dtype == TB_COMM_U64 ? 8 : 4;
    for (size_t at = 0; at < count; at += piece) {
        size_t n = count - at < piece ? count - at : piece;
        void *buf = (char *)data + at * esize;
        int rc;
        if (ch == TB_CHANNEL_GRADS) {
            /* A gradient thread runs beside the training thread: a blocking collective
             * would spin on a core the training thread needs while it waits for the other
             * ranks. Poll the request and sleep between polls instead. */
            MPI_Request req;
            rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, mpi_type(dtype), mpi_op(op), channels[ch], &req);
            for (int done = 0; rc == MPI_SUCCESS && !done;) {
                rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
                if (rc == MPI_SUCCESS && !done)
                    nanosleep(&(struct timespec){ 0, 50000 }, NULL);
            }
        } else {
            rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, mpi_type(dtype), mpi_op(op), channels[ch]);
        }
        if (rc != MPI_SUCCESS)
            return mpi_error(rc, ch == TB_CHANNEL_GRADS ? "MPI_Iallreduce" : "MPI_Allreduce", err);
    }
    return TB_OK;
#else
    (void)ch;
    (void)data;
    (void)dtype;
    (void)op;
    return tb_err_set(err, TB_ERR_RUNTIME, "internal error: a collective over %d ranks without MPI", world.size);
#endif
}

static int world_broadcast(const struct tb_comm *c, enum tb_comm_channel ch, void *data, size_t bytes, int root,
                           struct tb_err *err)
{
    (void)c;
    if (world.size == 1 || bytes == 0)
        return TB_OK;
#ifdef HAVE_MPI
    const size_t piece = (size_t)1 << 30;
    for (size_t at = 0; at < bytes; at += piece) {
        size_t n = bytes - at < piece ? bytes - at : piece;
        int rc = MPI_Bcast((char *)data + at, (int)n, MPI_BYTE, root, channels[ch]);
        if (rc != MPI_SUCCESS)
            return mpi_error(rc, "MPI_Bcast", err);
    }
    return TB_OK;
#else
    (void)ch;
    (void)data;
    (void)root;
    return tb_err_set(err, TB_ERR_RUNTIME, "internal error: a collective over %d ranks without MPI", world.size);
#endif
}

int tb_comm_allreduce(void *data, size_t count, enum tb_comm_dtype dtype, enum tb_comm_reduce op, struct tb_err *err)
{
    return world.allreduce(&world, TB_CHANNEL_MAIN, data, count, dtype, op, err);
}

int tb_comm_broadcast(void *data, size_t bytes, int root, struct tb_err *err)
{
    return world.broadcast(&world, TB_CHANNEL_MAIN, data, bytes, root, err);
}
