/* backends/cpu/cpu_comm.c: data parallelism on the CPU backend: gradient all-reduce over
 * the core's MPI channels (trainbig/comm.h).
 *
 * The CPU's device memory is host memory, so MPI reduces the gradients where they lie. A
 * bucket of tensors is packed into one buffer (one collective instead of dozens of small
 * ones), summed over ranks on TB_CHANNEL_GRADS, and unpacked with the scale. Where MPI
 * allows two threads (comm->concurrent), a thread of this backend does that while the
 * training thread goes on with the rest of backward: that is the overlap. Otherwise
 * allreduce_start does it on the caller's thread, and nothing overlaps. The compute
 * stream is the caller, so allreduce_wait simply blocks until the queue is empty. */
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <trainbig/clock.h>

#include "cpu_shared.h"

struct bucket {
    float **data;  /* [n] the tensors, not owned */
    size_t *count; /* [n] their elements */
    size_t n, total;
    float scale;
    struct bucket *next;
};

struct tb_cpu_comm {
    const struct tb_comm *comm; /* the core's */
    pthread_t thread;
    bool started, stop;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    struct bucket *head, *tail; /* queued, in order */
    size_t pending;             /* queued or running */
    int failed;                 /* the first failure's status; err holds its text */
    struct tb_err err;
    double busy; /* seconds of reduction since the last wait */
    float *pack; /* the thread's packing buffer, grown as needed */
    size_t pack_cap;
};

static void bucket_free(struct bucket *b)
{
    if (b) {
        free(b->data);
        free(b->count);
        free(b);
    }
}

/* Sums one bucket over the ranks and scales it; on the thread that owns c->pack. */
static int reduce(struct tb_cpu_comm *c, const struct bucket *b, struct tb_err *err)
{
    float *buf = b->data[0];
    if (b->n > 1) {
        if (b->total > c->pack_cap) {
            float *p = realloc(c->pack, b->total * sizeof *p);
            if (!p)
                return tb_err_set(err, TB_ERR_NOMEM, "cpu backend: out of memory packing %zu gradients (%zu bytes)",
                                  b->n, b->total * sizeof *p);
            c->pack = p;
            c->pack_cap = b->total;
        }
        buf = c->pack;
        for (size_t i = 0, at = 0; i < b->n; at += b->count[i], i++)
            memcpy(buf + at, b->data[i], b->count[i] * sizeof *buf);
    }
    int rc = c->comm->allreduce(c->comm, TB_CHANNEL_GRADS, buf, b->total, TB_COMM_F32, TB_COMM_SUM, err);
    if (rc)
        return rc;
    for (size_t i = 0, at = 0; i < b->n; at += b->count[i], i++) {
        float *d = b->data[i];
        const float *s = buf + at;
        if (b->scale != 1.0f || s != d)
            for (size_t e = 0; e < b->count[i]; e++)
                d[e] = s[e] * b->scale;
    }
    return TB_OK;
}

static void *comm_thread(void *arg)
{
    struct tb_cpu_comm *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->head && !c->stop)
            pthread_cond_wait(&c->work_cv, &c->mu);
        if (!c->head)
            break;
        struct bucket *b = c->head;
        c->head = b->next;
        if (!c->head)
            c->tail = NULL;
        pthread_mutex_unlock(&c->mu);
        struct tb_err e;
        tb_err_clear(&e);
        const double t0 = tb_now();
        int rc = reduce(c, b, &e);
        const double t1 = tb_now();
        bucket_free(b);
        pthread_mutex_lock(&c->mu);
        c->busy += t1 - t0;
        if (rc && !c->failed) {
            c->failed = rc;
            c->err = e;
        }
        c->pending--;
        pthread_cond_broadcast(&c->done_cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int tb_cpu_comm_attach(void *ctx, int device, const struct tb_comm *comm, struct tb_err *err)
{
    struct tb_cpu *cpu = ctx;
    (void)device;
    if (cpu->comm)
        return tb_err_set(err, TB_ERR_RUNTIME, "cpu backend: comm_attach called twice");
    if (!comm || comm->size <= 1)
        return TB_OK;
    struct tb_cpu_comm *c = calloc(1, sizeof *c);
    if (!c)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    c->comm = comm;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->work_cv, NULL);
    pthread_cond_init(&c->done_cv, NULL);
    if (comm->concurrent) {
        if (pthread_create(&c->thread, NULL, comm_thread, c) != 0) {
            free(c);
            return tb_err_set(err, TB_ERR_RUNTIME, "cpu backend: cannot start the gradient all-reduce thread");
        }
        c->started = true;
    }
    cpu->comm = c;
    cpu->world = comm;
    /* The ranks of a node share its cores: "one per core" means this rank's share. */
    if (cpu->threads_auto && comm->local_size > 1) {
        int share = omp_get_num_procs() / comm->local_size;
        cpu->threads = share > 0 ? share : 1;
        omp_set_num_threads(cpu->threads);
    }
    return TB_OK;
}

void tb_cpu_comm_detach(struct tb_cpu *cpu)
{
    struct tb_cpu_comm *c = cpu->comm;
    if (!c)
        return;
    if (c->started) {
        pthread_mutex_lock(&c->mu);
        c->stop = true;
        pthread_cond_signal(&c->work_cv);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
    }
    for (struct bucket *b = c->head, *next; b; b = next) {
        next = b->next;
        bucket_free(b);
    }
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->work_cv);
    pthread_cond_destroy(&c->done_cv);
    free(c->pack);
    free(c);
    cpu->comm = NULL;
    cpu->world = NULL;
}

int tb_cpu_allreduce_start(void *ctx, const struct tb_tensor *t, size_t n, float scale, struct tb_err *err)
{
    struct tb_cpu *cpu = ctx;
    struct tb_cpu_comm *c = cpu->comm;
    if (n == 0)
        return TB_OK;
    for (size_t i = 0; i < n; i++)
        if (t[i].desc.dtype != TB_F32 || !t[i].data)
            return tb_err_set(err, TB_ERR_RUNTIME, "cpu backend: allreduce_start: tensor %zu is not f32 device memory",
                              i);
    if (!c) {
        /* One rank: the sum is the tensor itself. */
        if (scale != 1.0f)
            for (size_t i = 0; i < n; i++) {
                float *d = t[i].data;
                for (size_t e = 0, m = tb_shape_elems(t[i].desc.shape); e < m; e++)
                    d[e] *= scale;
            }
        return TB_OK;
    }
    struct bucket *b = calloc(1, sizeof *b);
    if (b) {
        b->data = malloc(n * sizeof *b->data);
        b->count = malloc(n * sizeof *b->count);
    }
    if (!b || !b->data || !b->count) {
        bucket_free(b);
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    }
    b->n = n;
    b->scale = scale;
    for (size_t i = 0; i < n; i++) {
        b->data[i] = t[i].data;
        b->count[i] = tb_shape_elems(t[i].desc.shape);
        b->total += b->count[i];
    }
    if (!c->started) {
        const double t0 = tb_now();
        int rc = reduce(c, b, err);
        c->busy += tb_now() - t0;
        bucket_free(b);
        return rc;
    }
    pthread_mutex_lock(&c->mu);
    if (c->tail)
        c->tail->next = b;
    else
        c->head = b;
    c->tail = b;
    c->pending++;
    pthread_cond_signal(&c->work_cv);
    pthread_mutex_unlock(&c->mu);
    return TB_OK;
}

int tb_cpu_allreduce_wait(void *ctx, double *busy_s, double *waited_s, struct tb_err *err)
{
    struct tb_cpu *cpu = ctx;
    struct tb_cpu_comm *c = cpu->comm;
    if (busy_s)
        *busy_s = 0;
    if (waited_s)
        *waited_s = 0;
    if (!c)
        return TB_OK;
    const double t0 = tb_now();
    pthread_mutex_lock(&c->mu);
    while (c->pending)
        pthread_cond_wait(&c->done_cv, &c->mu);
    int rc = c->failed;
    if (rc)
        *err = c->err;
    c->failed = 0;
    if (busy_s)
        *busy_s = c->busy;
    c->busy = 0;
    pthread_mutex_unlock(&c->mu);
    if (waited_s)
        *waited_s = c->started ? tb_now() - t0 : 0;
    return rc;
}
