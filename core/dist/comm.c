/* comm.c: the ranks of this job, over MPI (see world.h and trainbig/comm.h).
 *
 * MPI is joined only when a launcher started the process, so a plain `trainbig train`
 * never initialises MPI (whose singleton start spawns helpers and costs seconds). The two
 * channels of trainbig/comm.h are two duplicates of MPI_COMM_WORLD: collectives on one
 * never match collectives on the other, so a backend's gradient thread and the training
 * thread can each run theirs. That needs MPI_THREAD_MULTIPLE; with less, `concurrent` is
 * 0 and backends keep to one thread. Errors return (MPI_ERRORS_RETURN) with MPI's text.
 *
 * MPI collectives have no timeout: a rank that stops (SIGSTOP, a hung device, a deadlock)
 * leaves the others waiting forever. So every collective here is non-blocking and polled
 * against a deadline ([run] collective_timeout). A rank that times out asks every other
 * rank, on a third communicator (`notes`), which collective it is waiting in; ranks
 * answer while they poll their own collectives. A rank that does not answer within a
 * short grace has not arrived, and the error names it. */
#include "config.h"

#include "core/dist/world.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <trainbig/log.h>

#ifdef HAVE_MPI
#include <mpi.h>
#endif

static int world_allreduce(const struct tb_comm *c, enum tb_comm_channel ch, void *data, size_t count,
                           enum tb_comm_dtype dtype, enum tb_comm_reduce op, struct tb_err *err);
static int world_broadcast(const struct tb_comm *c, enum tb_comm_channel ch, void *data, size_t bytes, int root,
                           struct tb_err *err);

static struct tb_comm world = { 0, 1, 0, 1, 1, world_allreduce, world_broadcast, NULL };
static bool joined;                                /* MPI_Init_thread was called here */
static double timeout_s = TB_COMM_DEFAULT_TIMEOUT; /* 0: wait forever */

void tb_comm_set_timeout(double seconds)
{
    timeout_s = seconds > 0 ? seconds : 0;
}

#ifdef HAVE_MPI
static MPI_Comm channels[TB_CHANNELS];
static MPI_Comm notes; /* the arrival questions and answers */
/* Collectives issued on each channel: a channel's collectives are issued by one thread
 * at a time, so each count has one writer. */
static unsigned long long issued[TB_CHANNELS];
static const char *const channel_name[TB_CHANNELS] = { "main", "gradients" };

/* Tags on `notes`: a question about channel ch, and its answer. */
#define QUESTION_TAG(ch) (2 * (int)(ch))
#define ANSWER_TAG(ch) (2 * (int)(ch) + 1)

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
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &notes)) != MPI_SUCCESS)
        return mpi_error(rc, "MPI_Comm_dup", err);
    MPI_Comm_set_errhandler(notes, MPI_ERRORS_RETURN);
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
    if (notes != MPI_COMM_NULL)
        MPI_Comm_free(&notes);
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

#ifdef HAVE_MPI
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Answers the questions other ranks asked about channel ch: the number of this rank's
 * collective on it (the one it waits in). Only the thread polling ch calls this. */
static void answer_questions(enum tb_comm_channel ch)
{
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, QUESTION_TAG(ch), notes, &flag, &st) != MPI_SUCCESS || !flag)
            return;
        unsigned long long question, answer[2];
        if (MPI_Recv(&question, 1, MPI_UNSIGNED_LONG_LONG, st.MPI_SOURCE, QUESTION_TAG(ch), notes, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS)
            return;
        answer[0] = question; /* which question this answers */
        answer[1] = issued[ch];
        /* Eight bytes go eagerly: this does not wait for the asker. */
        MPI_Send(answer, 2, MPI_UNSIGNED_LONG_LONG, st.MPI_SOURCE, ANSWER_TAG(ch), notes);
    }
}

/* Appends " rank R" for each rank r with pick[r] set, at most 16 named, to `out`. */
static void list_ranks(char *out, size_t cap, const unsigned char *pick, int n)
{
    size_t used = strlen(out);
    int named = 0, more = 0;
    for (int r = 0; r < n; r++) {
        if (!pick[r])
            continue;
        if (named == 16) {
            more++;
            continue;
        }
        int w = snprintf(out + used, cap - used, "%s%d", named ? ", " : "", r);
        if (w > 0 && (size_t)w < cap - used)
            used += (size_t)w;
        named++;
    }
    if (more)
        snprintf(out + used, cap - used, " and %d more", more);
}

/* After a roll call of n ranks (this one is me): answered[r], what each rank that answered
 * waits in (elsewhere[r]), against the collective asked about (question). Words who
 * did not arrive and who waits elsewhere into who; missing and astray are scratch. */
static void who_is_missing(int n, int me, unsigned long long question, const unsigned char *answered,
                           const unsigned long long *elsewhere, unsigned char *missing, unsigned char *astray,
                           char *who, size_t size)
{
    int nmissing = 0, nastray = 0;
    for (int r = 0; r < n; r++) {
        missing[r] = r != me && !answered[r];
        astray[r] = answered[r] && elsewhere[r] != question;
        nmissing += missing[r];
        nastray += astray[r];
    }
    who[0] = '\0';
    if (nmissing) {
        snprintf(who, size, "%s ", nmissing == 1 ? "rank" : "ranks");
        list_ranks(who, size, missing, n);
        size_t used = strlen(who);
        snprintf(who + used, size - used, " did not arrive (stopped, hung, or that much slower than this rank)");
    }
    if (nastray) {
        size_t used = strlen(who);
        snprintf(who + used, size - used, "%s%s ", nmissing ? "; " : "", nastray == 1 ? "rank" : "ranks");
        list_ranks(who, size, astray, n);
        used = strlen(who);
        snprintf(who + used, size - used,
                 " waits in another collective on this channel (the ranks disagree on "
                 "what to do: a bug)");
    }
    if (!nmissing && !nastray)
        snprintf(who, size, "every rank is waiting in it: MPI is not moving the data (check the network)");
}

/* Past the deadline: asks every other rank which collective on `ch` it waits in, and
 * names those that do not answer within a short grace (they have not arrived) and those
 * waiting in another one. Returns TB_OK when the collective completes meanwhile. */
static int report_missing(MPI_Request *req, enum tb_comm_channel ch, const char *what, double waited,
                          struct tb_err *err)
{
    const int n = world.size, me = world.rank;
    /* One block: the question, its send requests, and per rank its answer and what it
     * says. It lives until the job ends when a rank is missing: the job is then aborted,
     * and a stopped rank may never take its question. */
    struct roll {
        unsigned long long question;
        MPI_Request *sends;
        unsigned long long *elsewhere; /* the collective each rank that answered waits in */
        unsigned char *answered, *missing, *astray;
    } *roll = malloc(sizeof *roll + (size_t)n * (sizeof(MPI_Request) + sizeof(unsigned long long) + 3));
    if (!roll)
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "rank %d of %d: %s #%llu on the %s channel waited %.1f s ([run] collective_timeout = %g); "
                          "out of memory while asking the other ranks why",
                          me, n, what, issued[ch], channel_name[ch], waited, timeout_s);
    roll->sends = (MPI_Request *)(roll + 1);
    roll->elsewhere = (unsigned long long *)(roll->sends + n);
    roll->answered = (unsigned char *)(roll->elsewhere + n);
    roll->missing = roll->answered + n;
    roll->astray = roll->missing + n;
    memset(roll->answered, 0, 3 * (size_t)n);
    unsigned long long *question = &roll->question, *elsewhere = roll->elsewhere;
    unsigned char *answered = roll->answered, *missing = roll->missing, *astray = roll->astray;
    MPI_Request *sends = roll->sends;
    *question = issued[ch];
    for (int r = 0; r < n; r++) {
        sends[r] = MPI_REQUEST_NULL;
        if (r != me)
            MPI_Isend(question, 1, MPI_UNSIGNED_LONG_LONG, r, QUESTION_TAG(ch), notes, &sends[r]);
    }
    /* Waiting ranks answer within their next poll (at most a millisecond); a second
     * covers a loaded machine. */
    const double grace = 1.0, asked = now_s();
    int answers = 0, done = 0;
    while (answers < n - 1 && now_s() - asked < grace) {
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done)
            break;
        answer_questions(ch);
        for (;;) {
            int flag = 0;
            MPI_Status st;
            if (MPI_Iprobe(MPI_ANY_SOURCE, ANSWER_TAG(ch), notes, &flag, &st) != MPI_SUCCESS || !flag)
                break;
            unsigned long long answer[2];
            if (MPI_Recv(answer, 2, MPI_UNSIGNED_LONG_LONG, st.MPI_SOURCE, ANSWER_TAG(ch), notes, MPI_STATUS_IGNORE) !=
                MPI_SUCCESS)
                break;
            /* An answer to an earlier question (a collective that then completed) is old. */
            if (answer[0] == *question && !answered[st.MPI_SOURCE]) {
                answered[st.MPI_SOURCE] = 1;
                elsewhere[st.MPI_SOURCE] = answer[1];
                answers++;
            }
        }
        nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
    }
    if (done) {
        /* Everyone arrived after all: every rank took its question. */
        MPI_Waitall(n, sends, MPI_STATUSES_IGNORE);
        free(roll);
        tb_log(TB_LOG_WARN, "rank %d of %d: %s #%llu on the %s channel took %.1f s, past [run] collective_timeout = %g",
               me, n, what, issued[ch], channel_name[ch], now_s() - asked + waited, timeout_s);
        return TB_OK;
    }
    char who[512];
    who_is_missing(n, me, *question, answered, elsewhere, missing, astray, who, sizeof who);
    return tb_err_set(err, TB_ERR_RUNTIME,
                      "rank %d of %d: %s #%llu on the %s channel did not complete within %g s: %s; raise [run] "
                      "collective_timeout if a rank can legitimately take that long",
                      me, n, what, issued[ch], channel_name[ch], timeout_s, who);
}

/* Polls `req` until it completes, answering the other ranks' questions meanwhile; past
 * the deadline, says which ranks did not arrive. */
static int wait_collective(MPI_Request *req, enum tb_comm_channel ch, const char *what, struct tb_err *err)
{
    /* The main channel spins for a millisecond first: its collectives are small and on the
     * step's critical path (synchronised batch norm). A gradient thread runs beside the
     * training thread and sleeps between polls at once, leaving it the core. MPI moves
     * data only inside MPI calls, so the sleeps stay short; after a second of waiting for
     * a straggler, a waiting rank polls less often. */
    const double spin = ch == TB_CHANNEL_MAIN ? 1e-3 : 0, start = now_s();
    for (;;) {
        int done = 0, rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return mpi_error(rc, what, err);
        if (done)
            return TB_OK;
        answer_questions(ch);
        const double waited = now_s() - start;
        if (timeout_s > 0 && waited >= timeout_s)
            return report_missing(req, ch, what, waited, err);
        if (waited >= spin)
            nanosleep(&(struct timespec){ 0, waited < 1.0 ? 50000 : 500000 }, NULL);
    }
}
#endif

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
        MPI_Request req;
        issued[ch]++;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, (char *)data + at * esize, (int)n, mpi_type(dtype), mpi_op(op),
                                channels[ch], &req);
        if (rc != MPI_SUCCESS)
            return mpi_error(rc, "MPI_Iallreduce", err);
        if ((rc = wait_collective(&req, ch, "all-reduce", err)) != TB_OK)
            return rc;
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
        MPI_Request req;
        issued[ch]++;
        int rc = MPI_Ibcast((char *)data + at, (int)n, MPI_BYTE, root, channels[ch], &req);
        if (rc != MPI_SUCCESS)
            return mpi_error(rc, "MPI_Ibcast", err);
        if ((rc = wait_collective(&req, ch, "broadcast", err)) != TB_OK)
            return rc;
    }
    return TB_OK;
#else
    (void)ch;
    (void)data;
    (void)root;
    return tb_err_set(err, TB_ERR_RUNTIME, "internal error: a collective over %d ranks without MPI", world.size);
#endif
}

/* ------------------------------------------------------------------ modelled ranks */

/* The modelled ranks are identical: each holds what this process holds, so a sum is
 * `size` times the value, a minimum or maximum the value itself, a broadcast nothing. */
static int modelled_allreduce(const struct tb_comm *c, enum tb_comm_channel ch, void *data, size_t count,
                              enum tb_comm_dtype dtype, enum tb_comm_reduce op, struct tb_err *err)
{
    (void)ch;
    if (op != TB_COMM_SUM)
        return TB_OK;
    const int n = c->size;
    for (size_t i = 0; i < count; i++)
        switch (dtype) {
        case TB_COMM_F32:
            ((float *)data)[i] *= (float)n;
            break;
        case TB_COMM_F64:
            ((double *)data)[i] *= n;
            break;
        case TB_COMM_U64:
            ((uint64_t *)data)[i] *= (uint64_t)n;
            break;
        case TB_COMM_I32: {
            const int64_t v = (int64_t)((int32_t *)data)[i] * n;
            if (v > INT32_MAX || v < INT32_MIN)
                return tb_err_set(err, TB_ERR_RUNTIME, "a sum over %d modelled ranks overflows 32 bits", n);
            ((int32_t *)data)[i] = (int32_t)v;
            break;
        }
        }
    return TB_OK;
}

static int modelled_broadcast(const struct tb_comm *c, enum tb_comm_channel ch, void *data, size_t bytes, int root,
                              struct tb_err *err)
{
    (void)c;
    (void)ch;
    (void)data;
    (void)bytes;
    (void)root;
    (void)err;
    return TB_OK;
}

int tb_comm_model_ranks(int ranks, struct tb_err *err)
{
    if (world.size > 1 && world.allreduce != modelled_allreduce)
        return tb_err_set(err, TB_ERR_CONFIG,
                          "a modelled device standing for %d GPUs was started as one of %d ranks: run it as one "
                          "process (the device models the others)",
                          ranks, world.size);
    world = (struct tb_comm){ 0, ranks, 0, ranks, 1, modelled_allreduce, modelled_broadcast, NULL };
    return TB_OK;
}

void tb_comm_unmodel(void)
{
    if (world.allreduce == modelled_allreduce)
        world = (struct tb_comm){ 0, 1, 0, 1, 1, world_allreduce, world_broadcast, NULL };
}

bool tb_comm_modelled(void)
{
    return world.allreduce == modelled_allreduce;
}

int tb_comm_allreduce(void *data, size_t count, enum tb_comm_dtype dtype, enum tb_comm_reduce op, struct tb_err *err)
{
    return world.allreduce(&world, TB_CHANNEL_MAIN, data, count, dtype, op, err);
}

int tb_comm_broadcast(void *data, size_t bytes, int root, struct tb_err *err)
{
    return world.broadcast(&world, TB_CHANNEL_MAIN, data, bytes, root, err);
}
