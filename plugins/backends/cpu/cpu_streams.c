/* backends/cpu/cpu_streams.c: streams, events and the copy engines.
 *
 * The compute stream is the calling thread: its work has run by the time the call that
 * submitted it returns, so recording an event on it completes the event at once, and
 * making it wait for an event blocks the caller until the event completes.
 *
 * Each copy stream is a thread that runs a queue of items in order: copies, event records
 * (the event completes when the thread reaches the record) and event waits (the thread
 * blocks until the event completes). With link emulation a copy also takes the time the
 * emulated link would: the thread sleeps out the rest, it does not spin. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <trainbig/clock.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "cpu_shared.h"

enum item_kind { ITEM_COPY, ITEM_RECORD, ITEM_WAIT };

struct tb_cpu_item {
    enum item_kind kind;
    void *dst;
    const void *src;
    size_t bytes;
    struct tb_event *ev;
    uint64_t gen; /* RECORD: the generation it completes; WAIT: the one it waits for */
    struct tb_cpu_item *next;
};

/* An event completes generation `gen` when its latest record has run. Items that name it
 * hold a reference, so destroying an event with records still queued is safe. */
struct tb_event {
    uint64_t gen, done_gen;
    int refs;
    double done_time; /* CLOCK_MONOTONIC seconds when done_gen last advanced */
};

static struct tb_cpu_stream *copy_stream(struct tb_cpu_streams *s, enum tb_stream stream)
{
    return stream == TB_STREAM_H2D ? &s->copy[0] : stream == TB_STREAM_D2H ? &s->copy[1] : NULL;
}

static void unref(struct tb_event *ev)
{
    if (ev && --ev->refs == 0)
        free(ev);
}

static void sleep_until(const struct timespec *t)
{
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, t, NULL) == EINTR)
        ;
}

/* A copy engine's copy. Large ones store around the caches (non-temporal stores, where
 * the ISA has them: SSE2 is in every x86-64): the copy's destination is read again only
 * steps later (a host copy when it comes back, a tensor brought back ahead of its use),
 * so cached stores would read each destination line in first and push the running op's
 * data out of the caches shared with it. At 160x160 on 2 cores (Zen 4), prefetch with
 * copies free (bench/lms's control) cost 7.4% of the step instead of 12.0%, hybrid at
 * x86-pcie's reference balance 9.2% instead of 11.2% (medians of 10 paired rounds).
 * Small copies stay cached: the next op may read them at once. */
enum { STREAM_MIN = 256 << 10 };

static void copy_bytes(void *dst, const void *src, size_t bytes)
{
#if defined(__SSE2__)
    if (bytes >= STREAM_MIN) {
        unsigned char *d = dst;
        const unsigned char *s = src;
        const size_t head = (16 - ((uintptr_t)d & 15)) & 15; /* the stores must be 16-byte aligned */
        memcpy(d, s, head);
        d += head;
        s += head;
        bytes -= head;
        const size_t body = bytes & ~(size_t)63;
        for (size_t i = 0; i < body; i += 64) {
            const __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
            const __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
            const __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
            const __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
            _mm_stream_si128((__m128i *)(d + i), a);
            _mm_stream_si128((__m128i *)(d + i + 16), b);
            _mm_stream_si128((__m128i *)(d + i + 32), c);
            _mm_stream_si128((__m128i *)(d + i + 48), e);
        }
        _mm_sfence(); /* the streamed stores are seen before the copy is reported done */
        memcpy(d + body, s + body, bytes - body);
        return;
    }
#endif
    memcpy(dst, src, bytes);
}

static void *copy_engine(void *arg)
{
    struct tb_cpu_streams *s = ((void **)arg)[0];
    struct tb_cpu_stream *st = ((void **)arg)[1];
    free(arg);
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!st->head && !s->stopping)
            pthread_cond_wait(&s->changed, &s->lock);
        if (!st->head)
            break; /* stopping, and nothing left to do */
        struct tb_cpu_item *it = st->head;
        if (it->kind == ITEM_COPY) {
            double bw = st->bytes_per_s, lat = s->latency_s;
            const struct tb_cpu_stream *other = st == &s->copy[0] ? &s->copy[1] : &s->copy[0];
            if (bw > 0 && other->copying && s->duplex_bytes_per_s > 0 && s->duplex_bytes_per_s < bw)
                bw = s->duplex_bytes_per_s; /* the link is shared both ways now */
            st->copying = true;
            struct timespec start;
            clock_gettime(CLOCK_MONOTONIC, &start);
            pthread_mutex_unlock(&s->lock);
            copy_bytes(it->dst, it->src, it->bytes);
            if (bw > 0 || lat > 0) {
                double secs = (bw > 0 ? (double)it->bytes / bw : 0) + lat;
                struct timespec end = start;
                end.tv_sec += (time_t)secs;
                end.tv_nsec += (long)((secs - (double)(time_t)secs) * 1e9);
                if (end.tv_nsec >= 1000000000L) {
                    end.tv_sec++;
                    end.tv_nsec -= 1000000000L;
                }
                sleep_until(&end);
            }
            pthread_mutex_lock(&s->lock);
            st->copying = false;
        } else if (it->kind == ITEM_RECORD) {
            if (it->ev->done_gen < it->gen) {
                it->ev->done_gen = it->gen;
                it->ev->done_time = tb_now();
            }
        } else {
            while (it->ev->done_gen < it->gen && !s->stopping)
                pthread_cond_wait(&s->changed, &s->lock);
        }
        st->head = it->next;
        if (!st->head)
            st->tail = NULL;
        st->done++;
        unref(it->ev);
        free(it);
        pthread_cond_broadcast(&s->changed);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int tb_cpu_streams_init(struct tb_cpu_streams *s, struct tb_err *err)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_cond_init(&s->changed, &attr);
    pthread_condattr_destroy(&attr);
    for (int i = 0; i < 2; i++) {
        void **arg = malloc(2 * sizeof *arg);
        if (!arg) {
            tb_cpu_streams_fini(s);
            return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        }
        arg[0] = s;
        arg[1] = &s->copy[i];
        int rc = pthread_create(&s->copy[i].thread, NULL, copy_engine, arg);
        if (rc) {
            free(arg);
            tb_cpu_streams_fini(s);
            return tb_err_set(err, TB_ERR_RUNTIME, "cpu backend: cannot start a copy thread: %s", strerror(rc));
        }
        s->copy[i].started = true;
    }
    return TB_OK;
}

void tb_cpu_streams_fini(struct tb_cpu_streams *s)
{
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < 2; i++)
        while (s->copy[i].started && s->copy[i].done < s->copy[i].submitted)
            pthread_cond_wait(&s->changed, &s->lock);
    s->stopping = true;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < 2; i++)
        if (s->copy[i].started)
            pthread_join(s->copy[i].thread, NULL);
    pthread_cond_destroy(&s->changed);
    pthread_mutex_destroy(&s->lock);
}

/* Queues an item (taking a reference to its event) on a copy stream. Lock held. */
static int enqueue(struct tb_cpu_streams *s, struct tb_cpu_stream *st, struct tb_cpu_item *it)
{
    if (it->ev)
        it->ev->refs++;
    if (st->tail)
        st->tail->next = it;
    else
        st->head = it;
    st->tail = it;
    st->submitted++;
    pthread_cond_broadcast(&s->changed);
    return TB_OK;
}

struct tb_event *tb_cpu_event_create(struct tb_cpu_streams *s)
{
    (void)s;
    struct tb_event *ev = calloc(1, sizeof *ev);
    if (ev)
        ev->refs = 1;
    return ev;
}

void tb_cpu_event_destroy(struct tb_cpu_streams *s, struct tb_event *ev)
{
    if (!ev)
        return;
    pthread_mutex_lock(&s->lock);
    unref(ev);
    pthread_mutex_unlock(&s->lock);
}

int tb_cpu_event_record(struct tb_cpu_streams *s, struct tb_event *ev, enum tb_stream stream)
{
    struct tb_cpu_stream *st = copy_stream(s, stream);
    pthread_mutex_lock(&s->lock);
    ev->gen++;
    int rc = TB_OK;
    if (!st) {
        ev->done_gen = ev->gen; /* the compute stream's work has already run */
        ev->done_time = tb_now();
        pthread_cond_broadcast(&s->changed);
    } else {
        struct tb_cpu_item *it = calloc(1, sizeof *it);
        if (!it) {
            ev->gen--;
            rc = TB_ERR_NOMEM;
        } else {
            it->kind = ITEM_RECORD;
            it->ev = ev;
            it->gen = ev->gen;
            enqueue(s, st, it);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int tb_cpu_stream_wait(struct tb_cpu_streams *s, enum tb_stream stream, struct tb_event *ev)
{
    struct tb_cpu_stream *st = copy_stream(s, stream);
    pthread_mutex_lock(&s->lock);
    uint64_t gen = ev->gen;
    int rc = TB_OK;
    if (!st) {
        while (ev->done_gen < gen)
            pthread_cond_wait(&s->changed, &s->lock);
    } else if (ev->done_gen < gen) {
        struct tb_cpu_item *it = calloc(1, sizeof *it);
        if (!it) {
            rc = TB_ERR_NOMEM;
        } else {
            it->kind = ITEM_WAIT;
            it->ev = ev;
            it->gen = gen;
            enqueue(s, st, it);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int tb_cpu_event_query(struct tb_cpu_streams *s, struct tb_event *ev)
{
    pthread_mutex_lock(&s->lock);
    int done = ev->done_gen >= ev->gen;
    pthread_mutex_unlock(&s->lock);
    return done;
}

void tb_cpu_event_sync(struct tb_cpu_streams *s, struct tb_event *ev)
{
    pthread_mutex_lock(&s->lock);
    uint64_t gen = ev->gen;
    while (ev->done_gen < gen)
        pthread_cond_wait(&s->changed, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

void tb_cpu_stream_sync(struct tb_cpu_streams *s, enum tb_stream stream)
{
    struct tb_cpu_stream *st = copy_stream(s, stream);
    if (!st)
        return; /* compute work has already run */
    pthread_mutex_lock(&s->lock);
    uint64_t target = st->submitted;
    while (st->done < target)
        pthread_cond_wait(&s->changed, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

int tb_cpu_copy_async(struct tb_cpu_streams *s, enum tb_stream stream, void *dst, const void *src, size_t bytes,
                      struct tb_err *err)
{
    struct tb_cpu_stream *st = copy_stream(s, stream);
    if (!st) {
        memmove(dst, src, bytes); /* device to device, on the compute stream: now */
        return TB_OK;
    }
    struct tb_cpu_item *it = calloc(1, sizeof *it);
    if (!it)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory queueing a copy");
    it->kind = ITEM_COPY;
    it->dst = dst;
    it->src = src;
    it->bytes = bytes;
    pthread_mutex_lock(&s->lock);
    enqueue(s, st, it);
    pthread_mutex_unlock(&s->lock);
    return TB_OK;
}

double tb_cpu_event_time(struct tb_cpu_streams *s, struct tb_event *ev)
{
    pthread_mutex_lock(&s->lock);
    double t = ev->done_time;
    pthread_mutex_unlock(&s->lock);
    return t;
}

void tb_cpu_set_duplex(struct tb_cpu_streams *s, double bytes_per_s)
{
    pthread_mutex_lock(&s->lock);
    s->duplex_bytes_per_s = bytes_per_s;
    pthread_mutex_unlock(&s->lock);
}

void tb_cpu_set_throttle(struct tb_cpu_streams *s, const struct tb_link_throttle *link)
{
    pthread_mutex_lock(&s->lock);
    s->copy[0].bytes_per_s = link ? link->h2d_bytes_per_s : 0;
    s->copy[1].bytes_per_s = link ? link->d2h_bytes_per_s : 0;
    s->latency_s = link ? link->latency_s : 0;
    pthread_mutex_unlock(&s->lock);
}
