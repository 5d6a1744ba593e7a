/* swap/planner_link.c: the link as the planner counts on it (planner.h): each direction's
 * rate and fixed cost, the window a swap has between two uses, and each direction as its
 * copy stream runs it, a first-in-first-out queue of the copies planned, which says when
 * a copy will be done and what a new one would delay. */
#include <math.h> /* HUGE_VAL */
#include <stdlib.h>
#include <string.h>
#include <trainbig/trainbig.h>

#include "planner.h"

/* Each direction's rate (with duplex: while both copy, the duplex figure where known),
 * and the fixed cost of a copy: the platform's, or 12 GB/s and 10 us without one. */
static void link_rates(const struct plan *pl, bool duplex, double *d2h, double *h2d, double *latency)
{
    const struct tb_link *link = pl->has_link ? &pl->link : NULL;
    *d2h = link && link->d2h_bytes_per_s > 0 ? link->d2h_bytes_per_s : 12e9;
    *h2d = link && link->h2d_bytes_per_s > 0 ? link->h2d_bytes_per_s : 12e9;
    if (duplex && link && link->duplex_bytes_per_s > 0) {
        *d2h = link->duplex_bytes_per_s < *d2h ? link->duplex_bytes_per_s : *d2h;
        *h2d = link->duplex_bytes_per_s < *h2d ? link->duplex_bytes_per_s : *h2d;
    }
    *latency = link && link->latency_s > 0 ? link->latency_s : 1e-5;
}

/* The window in which tensor i, used at u and next at v, is off the device when moved out
 * after u: from e (its copy out done) to s (its copy back starts); e >= s: none. */
void planner_window(const struct planner *p, const struct plan *pl, const double *before, size_t i, uint32_t u,
                    uint32_t v, uint32_t *e, uint32_t *s)
{
    double d2h, h2d, latency;
    link_rates(pl, false, &d2h, &h2d, &latency);
    const double bytes = (double)tb_schedule_tensor(pl->s, i)->bytes;
    const double t_out = bytes / d2h + latency, t_in = bytes / h2d + latency;
    const uint32_t ahead = (uint32_t)(p->ahead ? p->ahead : DEFAULT_AHEAD);
    if (pl->tuned && !p->ahead) {
        /* Out: freed once the copy has had its time; in: from the latest step that leaves
         * the copy in 1.5 times its time. */
        for (*e = u + 1; *e < v && before[*e] - before[u + 1] < t_out;)
            ++*e;
        for (*s = v; *s > u + 1 && before[v] - before[*s] < 1.5 * t_in;)
            --*s;
    } else {
        *e = u + 2;
        *s = v > u + ahead ? v - ahead : u + 1;
    }
}

/* Where a copy issued at `at` joins the queue: after those issued at or before it. */
static size_t queue_slot(const struct queue *q, double at)
{
    size_t j = q->n;
    while (j > 0 && q->c[j - 1].at > at)
        j--;
    return j;
}

/* Runs the queue with a copy (at, seconds) added: false when a queued copy would miss its
 * deadline; *end: when the new one is done. */
static bool queue_try(const struct queue *q, double at, double seconds, double *end)
{
    const size_t slot = queue_slot(q, at);
    double t = 0;
    for (size_t j = 0; j <= q->n; j++) {
        if (j == slot) {
            t = (at > t ? at : t) + seconds;
            *end = t;
        }
        if (j == q->n)
            break;
        t = (q->c[j].at > t ? q->c[j].at : t) + q->c[j].seconds;
        if (t > q->c[j].deadline * (1 + 1e-9))
            return false;
    }
    return true;
}

/* The time the steps wait on one direction's copies, each past its `need`, with `extra`
 * (when not NULL) added; a sum, so copies late together count more than the step waits. */
static double queue_late(const struct queue *q, const struct copy *extra)
{
    const size_t slot = extra ? queue_slot(q, extra->at) : q->n + 1;
    double t = 0, late = 0;
    for (size_t j = 0; j <= q->n; j++) {
        const struct copy *run[2] = { j == slot ? extra : NULL, j < q->n ? &q->c[j] : NULL };
        for (int r = 0; r < 2; r++) {
            if (!run[r])
                continue;
            t = (run[r]->at > t ? run[r]->at : t) + run[r]->seconds;
            late += t > run[r]->need ? t - run[r]->need : 0;
        }
    }
    return late;
}

static int queue_add(struct queue *q, struct copy c)
{
    if (q->n == q->cap) {
        const size_t cap = q->cap ? 2 * q->cap : 64;
        struct copy *grown = realloc(q->c, cap * sizeof *grown);
        if (!grown)
            return -1;
        q->c = grown;
        q->cap = cap;
    }
    const size_t slot = queue_slot(q, c.at);
    memmove(&q->c[slot + 1], &q->c[slot], (q->n - slot) * sizeof *q->c);
    q->c[slot] = c;
    q->n++;
    return 0;
}

/* A swap of tensor i on the link as hybrid plans it (duplex rates): its copies' times. */
static void copy_seconds(const struct plan *pl, size_t i, double *t_out, double *t_in)
{
    double d2h, h2d, latency;
    link_rates(pl, true, &d2h, &h2d, &latency);
    const double bytes = (double)tb_schedule_tensor(pl->s, i)->bytes;
    *t_out = bytes / d2h + latency;
    *t_in = bytes / h2d + latency;
}

/* hybrid, once the steps are timed: the window of a swap of tensor i between uses u and v
 * given the copies planned so far on each direction of the link, each a FIFO queue: its
 * copy out is issued after u, its memory counted free from e, the first step that starts
 * after the copy is done; its copy back is issued before s, the latest step from which it
 * is done with prefetch's 1.5x margin before v (its deadline: due), and the copies queued
 * behind it still meet theirs. False where there is no such window (the copies would make
 * a step wait). */
bool planner_loaded_window(const struct plan *pl, const double *before, const struct queue *out, const struct queue *in,
                           size_t i, uint32_t u, uint32_t v, uint32_t k, uint32_t *e, uint32_t *s)
{
    double t_out, t_in, done;
    copy_seconds(pl, i, &t_out, &t_in);
    if (!queue_try(out, before[u + 1], t_out, &done))
        return false;
    for (*e = u + 1; *e <= k && before[*e] < done;)
        ++*e;
    if (*e > k)
        return false; /* not off the device by the step that needs the room */
    const double due = before[v] - 0.5 * t_in;
    for (*s = v - 1; *s > k; --*s) {
        double back;
        if (queue_try(in, before[*s], t_in, &back) && back <= due)
            return true;
    }
    return false;
}

/* The two copies of a swap of tensor i (uses u < v): out after u, the memory counted free
 * from step `freed`; back from step s, counted on at v. Held to the window's deadlines (out
 * done by `freed`, back with prefetch's margin before v), or, `late` (a swap the link
 * cannot hide), to none: those queued after it are timed behind it. */
static void swap_copies(const struct plan *pl, const double *before, size_t i, uint32_t u, uint32_t v, uint32_t freed,
                        uint32_t s, bool late, struct copy *o, struct copy *b)
{
    double t_out, t_in;
    copy_seconds(pl, i, &t_out, &t_in);
    *o = (struct copy){ before[u + 1], t_out, late ? HUGE_VAL : before[freed], before[freed] };
    *b = (struct copy){ before[s], t_in, late ? HUGE_VAL : before[v] - 0.5 * t_in, before[v] };
}

/* Queues those copies; -1 when out of memory. */
int planner_queue_swap(const struct plan *pl, const double *before, struct queue *out, struct queue *in, size_t i,
                       uint32_t u, uint32_t v, uint32_t freed, uint32_t s, bool late)
{
    struct copy o, b;
    swap_copies(pl, before, i, u, v, freed, s, late, &o, &b);
    return queue_add(out, o) || queue_add(in, b) ? -1 : 0;
}

/* A swap of tensor i (uses u < v, memory needed from step k, copy back from s) that the
 * link cannot hide: what the steps would wait for its copies and for the copies it
 * delays, on each direction's queue. */
double planner_exposed_seconds(const struct plan *pl, const double *before, const struct queue *out,
                               const struct queue *in, size_t i, uint32_t u, uint32_t v, uint32_t k, uint32_t s)
{
    struct copy o, b;
    swap_copies(pl, before, i, u, v, k, s, true, &o, &b);
    return queue_late(out, &o) - queue_late(out, NULL) + queue_late(in, &b) - queue_late(in, NULL);
}

/* What taking tensor i off the device costs at most: the step waits for its copy out and
 * again for the copy back at its next use. A rebuild dearer than that (a wide
 * convolution re-run costs some ten times the copies of its output over PCIe) is not
 * taken. */
double planner_evict_seconds(const struct plan *pl, size_t i)
{
    double d2h, h2d, latency;
    link_rates(pl, false, &d2h, &h2d, &latency);
    const double bytes = (double)tb_schedule_tensor(pl->s, i)->bytes;
    return bytes / d2h + bytes / h2d + 2 * latency;
}
