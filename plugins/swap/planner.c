/* swap/planner.c: the planner behind the prefetch and hybrid policies (planner.h).
 *
 * From the schedule (every step that touches every tensor), walking the steps in order:
 * where the tensors alive at a step would not fit the device's budget, one the step does
 * not use is taken off the device between two of its uses u < k < v, until they fit.
 * Swapped (copied out after u, back ahead of v), where the compute between them hides the
 * copies on the link's two FIFO queues without delaying a copy already planned; the one
 * whose next use is farthest first. Or, under hybrid, dropped and rebuilt before v by
 * re-running the forward ops that made it, where no swap hides: the rebuild cheapest per
 * byte freed, weighed against what the swap prefetch would plan there would make the steps
 * wait, and never dearer than that tensor's copies waited for whole. Rebuilds go one
 * level deep and re-run at most MAX_REBUILD ops. With threshold and ahead at 0 the
 * windows come from measured step times and the link; hybrid plans again when the times
 * drift or the memory manager had to make room. doc/swap-planner.md gives the rules in
 * full and the measurements that chose them. */
#include <stdlib.h>
#include <string.h>
#include <trainbig/trainbig.h>

#include "planner.h"

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

void planner_free_plan(struct plan *pl)
{
    free_actions(pl);
    for (size_t i = 0; pl->uses && i < pl->ntensors; i++)
        free(pl->uses[i]);
    free(pl->uses);
    free(pl->nuses);
    free(pl->seconds);
    free(pl->now);
    free(pl->recent);
    free(pl->reserve);
    free(pl->room_pass);
    free(pl->made_bytes);
    memset(pl, 0, sizeof *pl);
}

void planner_destroy(void *ctx)
{
    struct planner *p = ctx;
    for (int i = 0; i < MAX_EXECUTORS; i++)
        planner_free_plan(&p->plans[i]);
    free(p);
}

struct plan *planner_find_plan(struct planner *p, const struct tb_swap_mem *m)
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

/* Whether tensor i may be swapped: large enough that its copies are not mostly the link's
 * fixed cost. Any activation may be dropped: a rebuild pays no copy. */
bool planner_swappable(const struct planner *p, const struct plan *pl, size_t i)
{
    return pl->uses[i] && tb_schedule_tensor(pl->s, i)->bytes >= p->min_size;
}

/* Steps [from, to): where a tensor is off the device over one of its gaps; dropped, or
 * on the host. */
struct span {
    uint32_t from, to;
    bool dropped;
};

/* A tensor's rebuild, priced once per plan (known: price() ran): its time, the memory it
 * holds while it runs, and the activations its ops read that it does not make itself,
 * which may not be on the host when it runs (owned). */
struct price {
    bool known, ok;
    double seconds, bytes;
    uint32_t *reads;
    uint32_t nreads;
};

/* What the walk has planned so far. Per tensor and gap (between uses a and a + 1):
 * whether it is off the device there (taken), over which steps (off) and, for a drop,
 * its rebuild's price (rcost, hybrid). Per tensor: the steps at which a planned rebuild
 * reads it (needed), where it may not be on the host. */
struct walk {
    uint8_t **taken;
    struct span **off;
    struct price **rcost;
    uint32_t **needed;
    uint32_t *nneeded;
};

/* The gap of tensor i around step k: its uses a and a + 1 with uses[a] < k < uses[a+1];
 * false when k is not inside one. */
static bool gap_at(const struct plan *pl, size_t i, size_t k, uint32_t *gap)
{
    if (!pl->uses[i] || pl->nuses[i] < 2)
        return false;
    uint32_t a = 0;
    while (a + 1 < pl->nuses[i] && pl->uses[i][a + 1] <= k)
        a++;
    if (a + 1 >= pl->nuses[i] || !(pl->uses[i][a] < k && k < pl->uses[i][a + 1]))
        return false;
    *gap = a;
    return true;
}

/* Whether tensor i has uses u < k < v with nothing planned for that gap yet; *gap: the
 * index of u in its uses. */
static bool gap_around(const struct plan *pl, const struct walk *w, size_t i, size_t k, uint32_t *gap)
{
    return w->taken[i] && gap_at(pl, i, k, gap) && !w->taken[i][*gap];
}

/* What the plan has of tensor i at step k: NULL where it is on the device, else the span
 * it is off in. */
static const struct span *off_at(const struct plan *pl, const struct walk *w, size_t i, uint32_t k)
{
    uint32_t a;
    return w->taken[i] && gap_at(pl, i, k, &a) && w->taken[i][a] && w->off[i][a].from <= k && k < w->off[i][a].to
               ? &w->off[i][a]
               : NULL;
}

/* Whether a planned rebuild reads tensor i at a step in [from, to): it may not be on the
 * host there. */
static bool needed_within(const struct walk *w, size_t i, uint32_t from, uint32_t to)
{
    for (uint32_t j = 0; j < w->nneeded[i]; j++)
        if (from <= w->needed[i][j] && w->needed[i][j] < to)
            return true;
    return false;
}

/* A recomputation candidate: tensor i, dropped over its gap `gap`: its rebuild takes
 * `seconds` and, while it runs, `bytes` on the device besides the tensor. */
struct pick {
    size_t i;
    uint32_t gap;
    double seconds, bytes;
};

/* Prices rebuilding tensor i before step v into c (c->ok false when it cannot be rebuilt
 * there). The time: the measured time of the forward steps it re-runs (before the first
 * step is timed, one unit each, as the steps are counted). The memory: a chain of several
 * holds an input and an output of its ops at a time (the executor frees a rebuilt input
 * once its op has run again), so twice the largest tensor the steps before the last one
 * make. The reads: the activations of its steps that none of them makes (an activation's
 * first step is the one that makes it). -1 when out of memory. */
static int price(const struct plan *pl, size_t i, uint32_t v, struct price *c)
{
    uint32_t steps[MAX_REBUILD];
    const int n = tb_swap_recompute_steps(pl->m, i, v, steps, MAX_REBUILD);
    c->known = true;
    c->ok = n >= 0;
    c->seconds = c->bytes = 0;
    for (int j = 0; j < n; j++) {
        c->seconds += pl->tuned ? pl->seconds[steps[j]] : 1.0;
        if (j + 1 < n && 2 * pl->made_bytes[steps[j]] > c->bytes)
            c->bytes = 2 * pl->made_bytes[steps[j]];
    }
    for (int j = 0; j < n; j++) {
        const uint32_t *ids;
        const size_t nt = tb_schedule_step_tensors(pl->s, steps[j], &ids);
        for (size_t q = 0; q < nt; q++) {
            const struct tb_sched_tensor *t = tb_schedule_tensor(pl->s, ids[q]);
            bool made = ids[q] == i;
            for (int r = 0; r < n && !made; r++)
                made = t->first_use == (int32_t)steps[r];
            if (made || t->kind != TB_SCHED_ACTIVATION)
                continue;
            uint32_t *grown = realloc(c->reads, (c->nreads + 1) * sizeof *grown);
            if (!grown)
                return -1;
            c->reads = grown;
            c->reads[c->nreads++] = ids[q];
        }
    }
    return 0;
}

/* Of the tensors off the device nowhere yet around step k, the one whose rebuild costs the
 * least time per byte; i = SIZE_MAX when none can be. What a rebuild reads must not be on
 * the host then (it would be brought back on demand, and waited for); a read that is
 * dropped then is rebuilt with it (and dropped again after), its own rebuild's time and
 * memory added.
 * *rc: -1 when out of memory. */
static struct pick cheapest_drop(const struct plan *pl, struct walk *w, size_t k, int *rc)
{
    struct pick best = { SIZE_MAX, 0, 0, 0 };
    double best_ratio = 0;
    for (size_t i = 0; i < pl->ntensors && !*rc; i++) {
        uint32_t a;
        if (tb_schedule_tensor(pl->s, i)->kind != TB_SCHED_ACTIVATION || !gap_around(pl, w, i, k, &a))
            continue;
        const uint32_t u = pl->uses[i][a], v = pl->uses[i][a + 1];
        /* A rebuild planned to read it while it would be dropped would have to rebuild it
         * too, a cost its price did not count: chains grown that way ran to a dozen ops. */
        if (needed_within(w, i, u + 1, v))
            continue;
        struct price *c = &w->rcost[i][a];
        if (!c->known && price(pl, i, v, c))
            *rc = -1;
        if (!c->ok)
            continue;
        double seconds = c->seconds, bytes = c->bytes;
        bool refused = false;
        for (uint32_t j = 0; j < c->nreads && !refused; j++) {
            const uint32_t y = c->reads[j];
            const struct span *o = off_at(pl, w, y, v);
            uint32_t g;
            if (o && !o->dropped)
                refused = true; /* on the host: brought back on demand, and waited for */
            else if (o && gap_at(pl, y, v, &g)) {
                /* rebuilt first (priced at v, where it runs), and held while this rebuild
                 * runs; one level deep: what its own rebuild reads must be on the device */
                struct price cy = { 0 };
                if (price(pl, y, v, &cy))
                    *rc = -1;
                refused = !cy.ok;
                for (uint32_t q = 0; q < cy.nreads && !refused; q++)
                    refused = off_at(pl, w, cy.reads[q], v) != NULL;
                seconds += cy.seconds;
                bytes += (double)tb_schedule_tensor(pl->s, y)->bytes + cy.bytes;
                free(cy.reads);
            }
        }
        if (refused)
            continue;
        const double ratio = seconds / (double)tb_schedule_tensor(pl->s, i)->bytes;
        if (best.i == SIZE_MAX || ratio < best_ratio) {
            best = (struct pick){ i, a, seconds, bytes };
            best_ratio = ratio;
        }
    }
    return best;
}

/* Records that a planned rebuild reads tensor i at step v. -1 when out of memory. */
static int need(struct walk *w, size_t i, uint32_t v)
{
    uint32_t *grown = realloc(w->needed[i], (w->nneeded[i] + 1) * sizeof *grown);
    if (!grown)
        return -1;
    w->needed[i] = grown;
    w->needed[i][w->nneeded[i]++] = v;
    return 0;
}

static void free_walk(struct walk *w, const struct plan *pl)
{
    for (size_t i = 0; i < pl->ntensors; i++) {
        if (w->taken)
            free(w->taken[i]);
        if (w->off)
            free(w->off[i]);
        if (w->needed)
            free(w->needed[i]);
        for (uint32_t a = 0; w->rcost && w->rcost[i] && a < pl->nuses[i]; a++)
            free(w->rcost[i][a].reads);
        if (w->rcost)
            free(w->rcost[i]);
    }
    free(w->taken);
    free(w->off);
    free(w->needed);
    free(w->nneeded);
    free(w->rcost);
}

/* A swap candidate: tensor i over its gap `gap` (next use v), off the device from step e
 * until its copy back from step s; i = SIZE_MAX: none. */
struct swap {
    size_t i;
    uint32_t gap, v, e, s;
};

/* Of the tensors off the device nowhere yet around step k, the one to swap: whose next use
 * is farthest away (the larger of equals). With the link's queues (out not NULL), only
 * one whose copies they carry in time (loaded_window); without, one whose window the
 * steps' times leave for its copies alone (window), as prefetch plans. */
static struct swap best_swap(const struct planner *p, const struct plan *pl, const struct walk *w, const double *before,
                             const struct queue *out, const struct queue *in, uint32_t k)
{
    struct swap best = { SIZE_MAX, 0, 0, 0, 0 };
    for (size_t i = 0; i < pl->ntensors; i++) {
        uint32_t a;
        if (!planner_swappable(p, pl, i) || !gap_around(pl, w, i, k, &a))
            continue;
        const uint32_t u = pl->uses[i][a], v = pl->uses[i][a + 1];
        if (p->threshold && v - u <= (uint32_t)p->threshold)
            continue;
        uint32_t e, s;
        if (out) {
            if (!planner_loaded_window(pl, before, out, in, i, u, v, k, &e, &s))
                continue;
        } else {
            planner_window(p, pl, before, i, u, v, &e, &s);
        }
        if (!(e <= k && k < s) || needed_within(w, i, e, s))
            continue;
        if (best.i == SIZE_MAX || v > best.v ||
            (v == best.v && tb_schedule_tensor(pl->s, i)->bytes > tb_schedule_tensor(pl->s, best.i)->bytes))
            best = (struct swap){ i, a, v, e, s };
    }
    return best;
}

/* Plans which tensors go out where, so that device memory stays within the budget at
 * every step: walking the steps in order, where the tensors live at a step would not fit,
 * the one (not used by that step) whose next use is farthest away goes out after its
 * previous use and comes back ahead of its next, until they fit. Windows too short to
 * hide their copies are not taken. Without a capacity nothing is planned. */
/* Before the walk: when each step starts (before[k], in step units until timed), the
 * memory each step holds with nothing planned (its transient tensors and what the plan
 * reserves), and the walk's records for each tensor with a gap. Nonzero: out of memory. */
static int start_walk(const struct plan *pl, struct walk *w, double *before, double *mem)
{
    const size_t N = pl->nsteps;
    for (size_t k = 0; k < N; k++) {
        before[k + 1] = before[k] + (pl->tuned ? pl->seconds[k] : 1.0);
        mem[k] = pl->reserve[k];
    }
    for (size_t i = 0; i < pl->ntensors; i++) {
        const struct tb_sched_tensor *t = tb_schedule_tensor(pl->s, i);
        if ((t->kind != TB_SCHED_ACTIVATION && t->kind != TB_SCHED_GRADIENT) || t->first_use < 0)
            continue;
        const size_t last = t->last_use < (int32_t)N ? (size_t)t->last_use : N - 1;
        for (size_t k = (size_t)t->first_use; k <= last; k++)
            mem[k] += (double)t->bytes;
        if (!pl->uses[i] || pl->nuses[i] < 2)
            continue;
        if (!(w->taken[i] = calloc(pl->nuses[i], 1)) || !(w->off[i] = calloc(pl->nuses[i], sizeof **w->off)))
            return 1;
        if (w->rcost && !(w->rcost[i] = calloc(pl->nuses[i], sizeof **w->rcost)))
            return 1;
    }
    return 0;
}

/* The drop planned: the tensor off the device over its gap, what its rebuild reads
 * needed on the device then (and, for a read dropped then too, what that one's rebuild
 * reads), the memory it frees and the rebuild's own before its next use. */
static int take_drop(struct plan *pl, struct walk *w, const struct pick *drop, double *mem)
{
    const uint32_t u = pl->uses[drop->i][drop->gap], v = pl->uses[drop->i][drop->gap + 1];
    w->taken[drop->i][drop->gap] = 1;
    w->off[drop->i][drop->gap] = (struct span){ u + 1, v, true };
    const struct price *c = &w->rcost[drop->i][drop->gap];
    int rc = 0;
    for (uint32_t j = 0; j < c->nreads && !rc; j++) {
        const uint32_t y = c->reads[j];
        rc = need(w, y, v);
        const struct span *o = off_at(pl, w, y, v);
        if (!rc && o && o->dropped) { /* rebuilt with it: what it reads then too */
            struct price cy = { 0 };
            rc = price(pl, y, v, &cy);
            for (uint32_t q = 0; q < cy.nreads && !rc; q++)
                rc = need(w, cy.reads[q], v);
            free(cy.reads);
        }
    }
    const double bytes = (double)tb_schedule_tensor(pl->s, drop->i)->bytes;
    for (uint32_t j = u + 1; j < v; j++)
        mem[j] -= bytes;
    mem[v] += drop->bytes; /* the rebuild's own, before step v */
    return rc || push(&pl->drop_after[u], (uint32_t)drop->i);
}

/* The swap planned: the tensor off the device from e to s, its copy out after its use
 * and back before s. */
static int take_swap(struct plan *pl, struct walk *w, const struct swap *best, double *mem)
{
    const uint32_t u = pl->uses[best->i][best->gap];
    w->taken[best->i][best->gap] = 1;
    w->off[best->i][best->gap] = (struct span){ best->e, best->s, false };
    const double bytes = (double)tb_schedule_tensor(pl->s, best->i)->bytes;
    for (uint32_t j = best->e; j < best->s; j++)
        mem[j] -= bytes;
    return push(&pl->out_after[u], (uint32_t)best->i) || push(&pl->in_before[best->s], (uint32_t)best->i);
}

int planner_make_actions(struct planner *p, struct plan *pl, struct tb_err *err)
{
    free_actions(pl);
    const size_t N = pl->nsteps, T = pl->ntensors;
    pl->out_after = calloc(N, sizeof *pl->out_after);
    pl->in_before = calloc(N, sizeof *pl->in_before);
    pl->drop_after = calloc(N, sizeof *pl->drop_after);
    double *before = calloc(N + 1, sizeof *before); /* before[k]: time of steps 0..k-1 */
    double *mem = calloc(N + 1, sizeof *mem);       /* bytes of transient tensors on the device */
    struct walk w = {
        .taken = calloc(T + 1, sizeof *w.taken),
        .off = calloc(T + 1, sizeof *w.off),
        .rcost = p->recompute ? calloc(T + 1, sizeof *w.rcost) : NULL,
        .needed = calloc(T + 1, sizeof *w.needed),
        .nneeded = calloc(T + 1, sizeof *w.nneeded),
    };
    /* hybrid, timed: the copies planned on each direction of the link */
    const bool loaded = p->adaptive && pl->tuned;
    struct queue outq = { 0 }, inq = { 0 };
    int rc = !pl->out_after || !pl->in_before || !pl->drop_after || !before || !mem || !w.taken || !w.off ||
             (p->recompute && !w.rcost) || !w.needed || !w.nneeded;
    rc = rc || start_walk(pl, &w, before, mem);
    const double budget = pl->capacity > 0 ? (double)pl->capacity - pl->persistent - (double)pl->capacity / 20 : 0;
    for (size_t k = 0; k < N && !rc && pl->capacity > 0; k++) {
        while (mem[k] > budget && !rc) {
            /* A swap the link hides costs nothing: it goes first. */
            struct swap best = best_swap(p, pl, &w, before, loaded ? &outq : NULL, &inq, (uint32_t)k);
            /* Without one: the cheapest recomputation, or, where a swap prefetch would plan
             * costs the step less per byte freed in what it waits for its copies (and for the
             * copies they delay), that swap. */
            struct pick drop = { SIZE_MAX, 0, 0, 0 };
            double exposed = 0;
            bool late = false;
            if (best.i == SIZE_MAX && loaded) {
                best = best_swap(p, pl, &w, before, NULL, NULL, (uint32_t)k);
                late = best.i != SIZE_MAX;
                if (late)
                    exposed = planner_exposed_seconds(pl, before, &outq, &inq, best.i, pl->uses[best.i][best.gap],
                                                      best.v, (uint32_t)k, best.s);
            }
            if (p->recompute && (best.i == SIZE_MAX || late))
                drop = cheapest_drop(pl, &w, k, &rc);
            if (drop.i != SIZE_MAX && pl->tuned && drop.seconds > planner_evict_seconds(pl, drop.i))
                drop.i = SIZE_MAX; /* dearer than the copies the step would wait for */
            if (drop.i != SIZE_MAX && late &&
                drop.seconds / (double)tb_schedule_tensor(pl->s, drop.i)->bytes >
                    exposed / (double)tb_schedule_tensor(pl->s, best.i)->bytes)
                drop.i = SIZE_MAX; /* dearer than the late swap */
            if (drop.i != SIZE_MAX) {
                rc = rc || take_drop(pl, &w, &drop, mem);
                continue;
            }
            if (best.i == SIZE_MAX || rc)
                break; /* nothing can go: the memory manager evicts on demand */
            const uint32_t u = pl->uses[best.i][best.gap];
            if (loaded) /* a late swap: memory needed from k, not freed before */
                rc = planner_queue_swap(pl, before, &outq, &inq, best.i, u, best.v, late ? (uint32_t)k : best.e, best.s,
                                        late);
            if (!rc)
                rc = take_swap(pl, &w, &best, mem);
        }
    }
    free_walk(&w, pl);
    free(outq.c);
    free(inq.c);
    free(before);
    free(mem);
    return rc ? tb_err_set(err, TB_ERR_NOMEM, "out of memory") : TB_OK;
}

int planner_plan(void *ctx, struct tb_swap_mem *m, const struct tb_schedule *s, uint64_t capacity,
                 const struct tb_link *link, struct tb_err *err)
{
    (void)capacity;
    struct planner *p = ctx;
    struct plan *pl = planner_find_plan(p, NULL);
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
    pl->recent = calloc(HISTORY * pl->nsteps + 1, sizeof *pl->recent);
    pl->reserve = calloc(pl->nsteps + 1, sizeof *pl->reserve);
    pl->room_pass = calloc(pl->nsteps + 1, sizeof *pl->room_pass);
    pl->made_bytes = calloc(pl->nsteps + 1, sizeof *pl->made_bytes);
    if (!pl->uses || !pl->nuses || !pl->seconds || !pl->now || !pl->recent || !pl->reserve || !pl->room_pass ||
        !pl->made_bytes) {
        planner_free_plan(pl);
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    }
    for (size_t k = 0; k < pl->nsteps; k++) {
        const uint32_t *ids;
        size_t n = tb_schedule_step_tensors(s, k, &ids);
        for (size_t j = 0; j < n; j++) {
            const struct tb_sched_tensor *t = tb_schedule_tensor(s, ids[j]);
            if (t->kind == TB_SCHED_ACTIVATION && t->first_use == (int32_t)k && (double)t->bytes > pl->made_bytes[k])
                pl->made_bytes[k] = (double)t->bytes;
            if (t->kind != TB_SCHED_ACTIVATION && t->kind != TB_SCHED_GRADIENT)
                continue;
            uint32_t **u = &pl->uses[ids[j]];
            uint32_t *grown = realloc(*u, (pl->nuses[ids[j]] + 1) * sizeof **u);
            if (!grown) {
                planner_free_plan(pl);
                return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
            }
            *u = grown;
            if (!pl->nuses[ids[j]] || grown[pl->nuses[ids[j]] - 1] != (uint32_t)k)
                grown[pl->nuses[ids[j]]++] = (uint32_t)k;
        }
    }
    int rc = planner_make_actions(p, pl, err);
    if (rc)
        planner_free_plan(pl);
    return rc;
}

void planner_forget(void *ctx, struct tb_swap_mem *m)
{
    struct plan *pl = planner_find_plan(ctx, m);
    if (pl)
        planner_free_plan(pl);
}
