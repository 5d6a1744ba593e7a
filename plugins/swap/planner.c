/* swap/planner.c: the planner behind the prefetch and hybrid policies (planner.h).
 *
 * The schedule says, before anything runs, every step that touches every tensor. Walking
 * the steps in order, where the activations and gradients alive at a step would not fit
 * the device's budget, one of them that the step does not use is taken off the device
 * between two of its uses u < k < v, until they fit:
 *
 * - swapped: moved to host memory after u and brought back ahead of v, early enough that
 *   the copy is done when v needs it. Only where the compute between u and v covers the
 *   copies ("the window"). Of those, the one whose next use is farthest away.
 * - dropped (hybrid, recompute = yes): freed after u, no copy, and rebuilt before v by
 *   running again the forward ops that made it (trainbig/swap.h). Of those, the one whose
 *   recomputation costs least per byte, priced with the measured times of the ops it
 *   re-runs.
 *
 * Which of the two (hybrid): Capuchin's rule (Peng et al., ASPLOS 2020) made explicit
 * with the platform's link. A swap whose copies the link can carry while the steps
 * compute costs nothing, so one is taken wherever there is one. Once the steps are timed,
 * "can carry" counts the copies already planned: each direction of the link has each
 * step's time to give, a swap's copy out takes the spare time of the steps after its
 * last use and its copy back (with a 1.5x margin) that of the steps before its next use,
 * and a swap that does not fit there would make the step wait. Where no swap fits, the
 * recomputation that costs least per byte freed is taken instead, rather than a copy the
 * step would wait for. This is a greedy choice, not an optimum: an ILP over every
 * tensor's gaps (Checkmate) would need the same op times and link model and a solver run
 * per plan for networks of hundreds of ops (GLPK's exact search does not bound that
 * time), where this walk takes milliseconds and plans again as often as the measured
 * times drift.
 *
 * "Far enough" and "early enough" are the keys threshold and ahead (in steps). With
 * either at 0 (the default) the policy tunes itself: until it has timed one whole
 * training step it uses 8 and 2 (and counts every step as one unit of time); then, from
 * each step's measured time and the link's bandwidth (the platform's, or 12 GB/s without
 * one), a tensor is moved out only where the compute between two uses covers its copies
 * out and back, and brought back from the first step that leaves time for the copy in.
 * hybrid measures on and plans again when a training step's time has moved by more than
 * a quarter from the one it planned with. When memory is short anyway (a prefetch that
 * does not fit waits for the step that needs it; an allocation that does not fit), the
 * tensors whose next use is farthest away go out first. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <trainbig/clock.h>
#include <trainbig/trainbig.h>

#include "planner.h"

enum { DEFAULT_THRESHOLD = 8, DEFAULT_AHEAD = 2, MAX_CHAIN = 64 };

int planner_create(const struct tb_section *cfg, const char *name, bool recompute, bool adaptive, void **ctx,
                   struct tb_err *err)
{
    struct planner *p = calloc(1, sizeof *p);
    if (!p)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    p->name = name;
    p->threshold = (int)tb_section_int(cfg, "threshold");
    p->ahead = (int)tb_section_int(cfg, "ahead");
    p->min_size = tb_section_size(cfg, "min_size");
    p->recompute = recompute;
    p->adaptive = adaptive;
    *ctx = p; /* the caller's until destroy */
    return TB_OK;
}

static void free_actions(struct plan *pl)
{
    for (size_t k = 0; pl->out_after && k < pl->nsteps; k++) {
        free(pl->out_after[k]);
        free(pl->in_before[k]);
        if (pl->drop_after)
            free(pl->drop_after[k]);
    }
    free(pl->out_after);
    free(pl->in_before);
    free(pl->drop_after);
    pl->out_after = pl->in_before = pl->drop_after = NULL;
}

static void free_plan(struct plan *pl)
{
    free_actions(pl);
    for (size_t i = 0; pl->uses && i < pl->ntensors; i++)
        free(pl->uses[i]);
    free(pl->uses);
    free(pl->nuses);
    free(pl->seconds);
    free(pl->now);
    memset(pl, 0, sizeof *pl);
}

void planner_destroy(void *ctx)
{
    struct planner *p = ctx;
    for (int i = 0; i < MAX_EXECUTORS; i++)
        free_plan(&p->plans[i]);
    free(p);
}

static struct plan *find_plan(struct planner *p, const struct tb_swap_mem *m)
{
    for (int i = 0; i < MAX_EXECUTORS; i++)
        if (p->plans[i].m == m)
            return &p->plans[i];
    return NULL;
}

/* Appends tensor i to a UINT32_MAX-terminated list. */
static int push(uint32_t **list, uint32_t i)
{
    size_t n = 0;
    while (*list && (*list)[n] != UINT32_MAX)
        n++;
    uint32_t *l = realloc(*list, (n + 2) * sizeof *l);
    if (!l)
        return -1;
    l[n] = i;
    l[n + 1] = UINT32_MAX;
    *list = l;
    return 0;
}

/* The window in which tensor i, used at u and next at v, is off the device when moved out
 * after u: from e (its copy out done) to s (its copy back starts); e >= s: none. */
static void window(const struct planner *p, const struct plan *pl, const double *before, size_t i, uint32_t u,
                   uint32_t v, uint32_t *e, uint32_t *s)
{
    const struct tb_link *link = pl->has_link ? &pl->link : NULL;
    const double h2d = link && link->h2d_bytes_per_s > 0 ? link->h2d_bytes_per_s : 12e9;
    const double d2h = link && link->d2h_bytes_per_s > 0 ? link->d2h_bytes_per_s : 12e9;
    const double latency = link && link->latency_s > 0 ? link->latency_s : 1e-5;
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

/* Each direction's rate while both copy (the duplex figure, where known), and the fixed
 * cost of a copy. */
static void link_rates(const struct plan *pl, double *d2h, double *h2d, double *latency)
{
    const struct tb_link *link = pl->has_link ? &pl->link : NULL;
    *d2h = link && link->d2h_bytes_per_s > 0 ? link->d2h_bytes_per_s : 12e9;
    *h2d = link && link->h2d_bytes_per_s > 0 ? link->h2d_bytes_per_s : 12e9;
    if (link && link->duplex_bytes_per_s > 0) {
        *d2h = link->duplex_bytes_per_s < *d2h ? link->duplex_bytes_per_s : *d2h;
        *h2d = link->duplex_bytes_per_s < *h2d ? link->duplex_bytes_per_s : *h2d;
    }
    *latency = link && link->latency_s > 0 ? link->latency_s : 1e-5;
}

/* Takes `need` seconds of link time from the steps' spare time (seconds[j] - busy[j]),
 * from step `from` up to `to` (exclusive; dir > 0) or down from `from` to `to` (dir < 0),
 * booking it with commit; the step after the last one used (dir > 0) or the last one used
 * (dir < 0), or UINT32_MAX when the spare time runs out first. */
static uint32_t fill(const struct plan *pl, double *busy, uint32_t from, uint32_t to, int dir, double need, bool commit)
{
    uint32_t j = from;
    while (need > 0) {
        if (dir > 0 ? j >= to : j <= to)
            return UINT32_MAX;
        if (dir < 0)
            j--;
        const double spare = pl->seconds[j] - busy[j];
        if (spare > 0) {
            const double take = spare < need ? spare : need;
            need -= take;
            if (commit)
                busy[j] += take;
        }
        if (dir > 0)
            j++;
    }
    return j;
}

/* hybrid, once the steps are timed: the window of a swap of tensor i between uses u and v
 * given the copies booked so far on each direction of the link (out[], in[]: seconds per
 * step): its copy out takes the spare link time of the steps after u, its copy back (with
 * prefetch's 1.5x margin) that of the steps before v; it is off the device from e, when
 * the copy out is done, to s, when the copy back starts. False where the spare time
 * cannot carry them: the copies would be exposed. With commit the copies are booked. */
static bool loaded_window(const struct plan *pl, double *out, double *in, size_t i, uint32_t u, uint32_t v, bool commit,
                          uint32_t *e, uint32_t *s)
{
    double d2h, h2d, latency;
    link_rates(pl, &d2h, &h2d, &latency);
    const double bytes = (double)tb_schedule_tensor(pl->s, i)->bytes;
    *e = fill(pl, out, u + 1, v, +1, bytes / d2h + latency, commit);
    if (*e == UINT32_MAX)
        return false;
    *s = fill(pl, in, v, *e, -1, 1.5 * (bytes / h2d + latency), commit);
    return *s != UINT32_MAX && *e <= *s;
}

/* Whether tensor i (a candidate: taken[i] is set) has uses u < k < v with nothing planned
 * for that gap yet; *gap: the index of u in its uses. */
static bool gap_around(const struct plan *pl, uint8_t *const *taken, size_t i, size_t k, uint32_t *gap)
{
    if (!taken[i])
        return false;
    uint32_t a = 0;
    while (a + 1 < pl->nuses[i] && pl->uses[i][a + 1] <= k)
        a++;
    if (a + 1 >= pl->nuses[i] || taken[i][a] || !(pl->uses[i][a] < k && k < pl->uses[i][a + 1]))
        return false;
    *gap = a;
    return true;
}

/* A recomputation candidate: tensor i, dropped over its gap `gap`, for `cost` seconds. */
struct pick {
    size_t i;
    uint32_t gap;
    double cost;
};

/* What rebuilding tensor i before step v costs: the measured time of the forward steps it
 * re-runs (before the first step is timed, one unit each, as the steps are counted); -1
 * when it cannot be rebuilt there. */
static double price(const struct plan *pl, size_t i, uint32_t v)
{
    uint32_t steps[MAX_CHAIN];
    const int n = tb_swap_recompute_steps(pl->m, i, v, steps, MAX_CHAIN);
    if (n < 0)
        return -1;
    double cost = 0;
    for (int j = 0; j < n; j++)
        cost += pl->tuned ? pl->seconds[steps[j]] : 1.0;
    return cost;
}

/* Of the tensors off the device nowhere yet around step k, the one whose rebuild costs the
 * least per byte; i = SIZE_MAX when none can be. rcost[i][gap] caches price() + 1 (0:
 * not priced yet). */
static struct pick cheapest_drop(const struct plan *pl, uint8_t **taken, double **rcost, size_t k)
{
    struct pick best = { SIZE_MAX, 0, 0 };
    double best_ratio = 0;
    for (size_t i = 0; i < pl->ntensors; i++) {
        uint32_t a;
        if (tb_schedule_tensor(pl->s, i)->kind != TB_SCHED_ACTIVATION || !gap_around(pl, taken, i, k, &a))
            continue;
        const uint32_t v = pl->uses[i][a + 1];
        if (rcost[i][a] == 0)
            rcost[i][a] = price(pl, i, v) + 1;
        if (rcost[i][a] < 1)
            continue;
        const double cost = rcost[i][a] - 1, ratio = cost / (double)tb_schedule_tensor(pl->s, i)->bytes;
        if (best.i == SIZE_MAX || ratio < best_ratio) {
            best = (struct pick){ i, a, cost };
            best_ratio = ratio;
        }
    }
    return best;
}

/* Plans which tensors go out where, so that device memory stays within the budget at
 * every step: walking the steps in order, where the tensors live at a step would not fit,
 * the one (not used by that step) whose next use is farthest away goes out after its
 * previous use and comes back ahead of its next, until they fit. Windows too short to
 * hide their copies are not taken. Without a capacity nothing is planned. */
static int make_actions(struct planner *p, struct plan *pl, struct tb_err *err)
{
    free_actions(pl);
    const size_t N = pl->nsteps;
    pl->out_after = calloc(N, sizeof *pl->out_after);
    pl->in_before = calloc(N, sizeof *pl->in_before);
    pl->drop_after = calloc(N, sizeof *pl->drop_after);
    double *before = calloc(N + 1, sizeof *before);            /* before[k]: time of steps 0..k-1 */
    double *mem = calloc(N + 1, sizeof *mem);                  /* bytes of transient tensors on the device */
    uint8_t **taken = calloc(pl->ntensors + 1, sizeof *taken); /* [i][gap]: planned out */
    double **rcost = p->recompute ? calloc(pl->ntensors + 1, sizeof *rcost) : NULL; /* [i][gap], see price() */
    /* hybrid, timed: the link time booked per step, each direction */
    const bool loaded = p->adaptive && pl->tuned;
    double *out_busy = loaded ? calloc(N + 1, sizeof *out_busy) : NULL;
    double *in_busy = loaded ? calloc(N + 1, sizeof *in_busy) : NULL;
    int rc = !pl->out_after || !pl->in_before || !pl->drop_after || !before || !mem || !taken ||
             (p->recompute && !rcost) || (loaded && (!out_busy || !in_busy));
    for (size_t k = 0; k < N && !rc; k++)
        before[k + 1] = before[k] + (pl->tuned ? pl->seconds[k] : 1.0);
    for (size_t i = 0; i < pl->ntensors && !rc; i++) {
        const struct tb_sched_tensor *t = tb_schedule_tensor(pl->s, i);
        if ((t->kind != TB_SCHED_ACTIVATION && t->kind != TB_SCHED_GRADIENT) || t->first_use < 0)
            continue;
        const size_t last = t->last_use < (int32_t)N ? (size_t)t->last_use : N - 1;
        for (size_t k = (size_t)t->first_use; k <= last; k++)
            mem[k] += (double)t->bytes;
        if (pl->uses[i] && pl->nuses[i] > 1 && !(taken[i] = calloc(pl->nuses[i], 1)))
            rc = 1;
        if (rcost && taken[i] && !(rcost[i] = calloc(pl->nuses[i], sizeof **rcost)))
            rc = 1;
    }
    const double budget = pl->capacity > 0 ? (double)pl->capacity - pl->persistent - (double)pl->capacity / 20 : 0;
    for (size_t k = 0; k < N && !rc && pl->capacity > 0; k++) {
        while (mem[k] > budget && !rc) {
            size_t best = SIZE_MAX;
            uint32_t best_gap = 0, best_v = 0, best_e = 0, best_s = 0;
            for (size_t i = 0; i < pl->ntensors; i++) {
                uint32_t a;
                if (!gap_around(pl, taken, i, k, &a))
                    continue;
                const uint32_t u = pl->uses[i][a], v = pl->uses[i][a + 1];
                if (p->threshold && v - u <= (uint32_t)p->threshold)
                    continue;
                uint32_t e, s;
                if (loaded) {
                    if (!loaded_window(pl, out_busy, in_busy, i, u, v, false, &e, &s))
                        continue;
                } else {
                    window(p, pl, before, i, u, v, &e, &s);
                }
                if (!(e <= k && k < s))
                    continue;
                if (best == SIZE_MAX || v > best_v ||
                    (v == best_v && tb_schedule_tensor(pl->s, i)->bytes > tb_schedule_tensor(pl->s, best)->bytes)) {
                    best = i;
                    best_gap = a;
                    best_v = v;
                    best_e = e;
                    best_s = s;
                }
            }
            /* A swap the link hides costs nothing: it goes first. Without one, the cheapest
             * recomputation rather than a copy the step would wait for. */
            struct pick drop = { SIZE_MAX, 0, 0 };
            if (p->recompute && best == SIZE_MAX)
                drop = cheapest_drop(pl, taken, rcost, k);
            if (drop.i != SIZE_MAX) {
                const uint32_t u = pl->uses[drop.i][drop.gap], v = pl->uses[drop.i][drop.gap + 1];
                taken[drop.i][drop.gap] = 1;
                const double bytes = (double)tb_schedule_tensor(pl->s, drop.i)->bytes;
                for (uint32_t j = u + 1; j < v; j++)
                    mem[j] -= bytes;
                rc = push(&pl->drop_after[u], (uint32_t)drop.i);
                continue;
            }
            if (best == SIZE_MAX)
                break; /* nothing can go: the memory manager evicts on demand */
            if (loaded)
                loaded_window(pl, out_busy, in_busy, best, pl->uses[best][best_gap], best_v, true, &best_e, &best_s);
            taken[best][best_gap] = 1;
            const double bytes = (double)tb_schedule_tensor(pl->s, best)->bytes;
            for (uint32_t j = best_e; j < best_s; j++)
                mem[j] -= bytes;
            rc = push(&pl->out_after[pl->uses[best][best_gap]], (uint32_t)best) ||
                 push(&pl->in_before[best_s], (uint32_t)best);
        }
    }
    for (size_t i = 0; taken && i < pl->ntensors; i++)
        free(taken[i]);
    for (size_t i = 0; rcost && i < pl->ntensors; i++)
        free(rcost[i]);
    free(rcost);
    free(out_busy);
    free(in_busy);
    free(taken);
    free(before);
    free(mem);
    return rc ? tb_err_set(err, TB_ERR_NOMEM, "out of memory") : TB_OK;
}

int planner_plan(void *ctx, struct tb_swap_mem *m, const struct tb_schedule *s, uint64_t capacity,
                 const struct tb_link *link, struct tb_err *err)
{
    (void)capacity;
    struct planner *p = ctx;
    struct plan *pl = find_plan(p, NULL);
    if (!pl)
        return tb_err_set(err, TB_ERR_RUNTIME, "the %s policy plans at most %d executors at once", p->name,
                          MAX_EXECUTORS);
    if (link) {
        pl->link = *link;
        pl->has_link = true;
    }
    pl->m = m;
    pl->capacity = capacity;
    /* Until measured: the parameters now on the device, and as much again twice for their
     * gradients and momentum. */
    pl->persistent = 3.0 * (double)tb_swap_in_use(m);
    pl->s = s;
    pl->nsteps = tb_schedule_steps(s);
    pl->ntensors = tb_schedule_tensors(s);
    pl->uses = calloc(pl->ntensors + 1, sizeof *pl->uses);
    pl->nuses = calloc(pl->ntensors + 1, sizeof *pl->nuses);
    pl->seconds = calloc(pl->nsteps + 1, sizeof *pl->seconds);
    pl->now = calloc(pl->nsteps + 1, sizeof *pl->now);
    if (!pl->uses || !pl->nuses || !pl->seconds || !pl->now) {
        free_plan(pl);
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    }
    for (size_t k = 0; k < pl->nsteps; k++) {
        const uint32_t *ids;
        size_t n = tb_schedule_step_tensors(s, k, &ids);
        for (size_t j = 0; j < n; j++) {
            const struct tb_sched_tensor *t = tb_schedule_tensor(s, ids[j]);
            if ((t->kind != TB_SCHED_ACTIVATION && t->kind != TB_SCHED_GRADIENT) || t->bytes < p->min_size)
                continue;
            uint32_t **u = &pl->uses[ids[j]];
            uint32_t *grown = realloc(*u, (pl->nuses[ids[j]] + 1) * sizeof **u);
            if (!grown) {
                free_plan(pl);
                return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
            }
            *u = grown;
            if (!pl->nuses[ids[j]] || grown[pl->nuses[ids[j]] - 1] != (uint32_t)k)
                grown[pl->nuses[ids[j]]++] = (uint32_t)k;
        }
    }
    int rc = make_actions(p, pl, err);
    if (rc)
        free_plan(pl);
    return rc;
}

void planner_forget(void *ctx, struct tb_swap_mem *m)
{
    struct plan *pl = find_plan(ctx, m);
    if (pl)
        free_plan(pl);
}

int planner_before_step(void *ctx, struct tb_swap_mem *m, size_t step, struct tb_err *err)
{
    struct plan *pl = find_plan(ctx, m);
    if (!pl || step >= pl->nsteps)
        return TB_OK;
    pl->t0 = tb_now();
    if (!pl->tuned && pl->capacity) {
        /* What is on the device besides transient tensors, at its largest. */
        double transient = 0;
        for (size_t i = 0; i < pl->ntensors; i++) {
            const struct tb_sched_tensor *t = tb_schedule_tensor(pl->s, i);
            enum tb_residency r = tb_swap_residency(m, i);
            if ((t->kind == TB_SCHED_ACTIVATION || t->kind == TB_SCHED_GRADIENT) && r != TB_RES_NONE &&
                r != TB_RES_HOST && r != TB_RES_DROPPED)
                transient += (double)t->bytes;
        }
        const double other = (double)tb_swap_in_use(m) - transient;
        if (step == 0 || other > pl->measured)
            pl->measured = other;
    }
    for (const uint32_t *i = pl->in_before[step]; i && *i != UINT32_MAX; i++) {
        struct tb_err e;
        tb_err_clear(&e);
        /* No room now: the step that needs it brings it back. */
        if (tb_swap_in(m, *i, &e) == TB_ERR_NOMEM)
            continue;
    }
    (void)err;
    return TB_OK;
}

int planner_after_step(void *ctx, struct tb_swap_mem *m, size_t step, struct tb_err *err)
{
    struct planner *p = ctx;
    struct plan *pl = find_plan(p, m);
    if (!pl || step >= pl->nsteps)
        return TB_OK;
    /* hybrid: the op's own time, which copies can hide behind and a recomputation costs;
     * prefetch: the step's, waits included. */
    pl->now[step] = p->adaptive ? tb_swap_op_seconds(m, step) : tb_now() - pl->t0;
    if (!pl->tuned)
        pl->seconds[step] = pl->now[step];
    for (const uint32_t *i = pl->drop_after[step]; i && *i != UINT32_MAX; i++) {
        int rc = tb_swap_drop(m, *i, err);
        if (rc)
            return rc;
    }
    for (const uint32_t *i = pl->out_after[step]; i && *i != UINT32_MAX; i++) {
        int rc = tb_swap_out(m, *i, false, err);
        if (rc)
            return rc;
    }
    if (step + 1 != pl->nsteps)
        return TB_OK;
    /* One whole training step timed: plan again from the measurements. */
    if (!pl->tuned) {
        pl->tuned = true;
        if (pl->capacity)
            pl->persistent = pl->measured;
    } else {
        double total = 0;
        for (size_t k = 0; k < pl->nsteps; k++)
            total += pl->now[k];
        if (!p->adaptive || (total < 1.25 * pl->planned && total > 0.75 * pl->planned))
            return TB_OK;
        memcpy(pl->seconds, pl->now, pl->nsteps * sizeof *pl->seconds);
    }
    pl->planned = 0;
    for (size_t k = 0; k < pl->nsteps; k++)
        pl->planned += pl->seconds[k];
    pl->replans++;
    return make_actions(p, pl, err);
}

/* The next step at or after `step` that uses tensor i, or UINT32_MAX. */
static uint32_t next_use(const struct plan *pl, size_t i, size_t step)
{
    for (uint32_t a = 0; a < pl->nuses[i]; a++)
        if (pl->uses[i][a] >= step)
            return pl->uses[i][a];
    return UINT32_MAX;
}

static struct plan *sort_plan;
static size_t sort_step;

static int by_next_use_desc(const void *a, const void *b)
{
    uint32_t x = next_use(sort_plan, *(const size_t *)a, sort_step),
             y = next_use(sort_plan, *(const size_t *)b, sort_step);
    if (x != y)
        return x > y ? -1 : 1;
    return *(const size_t *)a < *(const size_t *)b ? -1 : *(const size_t *)a > *(const size_t *)b;
}

/* Out first: what is needed last. */
int planner_make_room(void *ctx, struct tb_swap_mem *m, size_t step, uint64_t bytes, struct tb_err *err)
{
    struct plan *pl = find_plan(ctx, m);
    if (!pl)
        return TB_OK;
    size_t *cand = malloc((pl->ntensors + 1) * sizeof *cand), n = 0;
    if (!cand)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < pl->ntensors; i++)
        if (pl->uses[i] && tb_swap_movable(m, i))
            cand[n++] = i;
    sort_plan = pl; /* hooks run one at a time, on the training thread */
    sort_step = step == SIZE_MAX ? 0 : step;
    qsort(cand, n, sizeof *cand, by_next_use_desc);
    int rc = tb_swap_out_until(m, cand, n, bytes, NULL, err);
    free(cand);
    return rc;
}
