/* swap/prefetch: swaps planned from the schedule, so copies overlap compute.
 *
 * The schedule says, before anything runs, every step that touches every tensor. After a
 * use of an activation or gradient, if its next use is far enough away, the tensor goes
 * to host memory right then; it is brought back early enough before that next use that
 * the copy is done when the step needs it.
 *
 * "Far enough" and "early enough" are the keys threshold and ahead (in steps). With
 * either at 0 (the default) the policy tunes itself: until it has timed one whole
 * training step it uses 8 and 2; then, from each step's measured time and the link's
 * bandwidth (the platform's, or 12 GB/s without one), a tensor is moved out only where
 * the compute between two uses covers its copies out and back, and brought back from
 * the first step that leaves time for the copy in. When memory is short anyway (a
 * prefetch that does not fit waits for the step that needs it; an allocation that does
 * not fit), the tensors whose next use is farthest away go out first. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <trainbig/clock.h>
#include <trainbig/trainbig.h>

enum { DEFAULT_THRESHOLD = 8, DEFAULT_AHEAD = 2, MAX_EXECUTORS = 8 };

/* The plan of one executor's schedule. */
struct plan {
    struct tb_swap_mem *m;
    const struct tb_schedule *s;
    size_t nsteps, ntensors;
    uint32_t **uses; /* [ntensors]: the steps touching tensor i, ascending; NULL if not movable */
    uint32_t *nuses;
    /* Actions: out_after[k] and in_before[k] list tensors, each terminated by UINT32_MAX. */
    uint32_t **out_after, **in_before;
    double *seconds; /* [nsteps] measured */
    double t0;
    bool tuned;
    uint64_t capacity;   /* device memory, 0 = unlimited */
    double persistent;   /* what is not a transient tensor: parameters, their gradients and
                          * momentum, the backend's scratch (estimated, then measured) */
    double measured;     /* the largest seen during the first step */
    struct tb_link link; /* the platform's, when has_link */
    bool has_link;
};

struct prefetch {
    int threshold, ahead; /* 0: tuned */
    uint64_t min_size;
    struct plan plans[MAX_EXECUTORS];
};

static const struct tb_key prefetch_keys[] = {
    { "threshold", TB_KEY_INT, "0", "0..1000000",
      "move a tensor out only when its next use is more than this many steps away; 0 = tuned from measured step "
      "times and the link" },
    { "ahead", TB_KEY_INT, "0", "0..1000000",
      "start bringing a tensor back this many steps before its use; 0 = tuned from measured step times and the link" },
    { "min_size", TB_KEY_SIZE, "1M", NULL, "tensors smaller than this are never moved" },
    TB_KEYS_END,
};

static int prefetch_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    struct prefetch *p = calloc(1, sizeof *p);
    if (!p)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    p->threshold = (int)tb_section_int(cfg, "threshold");
    p->ahead = (int)tb_section_int(cfg, "ahead");
    p->min_size = tb_section_size(cfg, "min_size");
    *ctx = p; /* the caller's until destroy */
    return TB_OK;
}

static void free_actions(struct plan *pl)
{
    for (size_t k = 0; pl->out_after && k < pl->nsteps; k++) {
        free(pl->out_after[k]);
        free(pl->in_before[k]);
    }
    free(pl->out_after);
    free(pl->in_before);
    pl->out_after = pl->in_before = NULL;
}

static void free_plan(struct plan *pl)
{
    free_actions(pl);
    for (size_t i = 0; pl->uses && i < pl->ntensors; i++)
        free(pl->uses[i]);
    free(pl->uses);
    free(pl->nuses);
    free(pl->seconds);
    memset(pl, 0, sizeof *pl);
}

static void prefetch_destroy(void *ctx)
{
    struct prefetch *p = ctx;
    for (int i = 0; i < MAX_EXECUTORS; i++)
        free_plan(&p->plans[i]);
    free(p);
}

static struct plan *find_plan(struct prefetch *p, const struct tb_swap_mem *m)
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
static void window(const struct prefetch *p, const struct plan *pl, const double *before, size_t i, uint32_t u,
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

/* Plans which tensors go out where, so that device memory stays within the budget at
 * every step: walking the steps in order, where the tensors live at a step would not fit,
 * the one (not used by that step) whose next use is farthest away goes out after its
 * previous use and comes back ahead of its next, until they fit. Windows too short to
 * hide their copies are not taken. Without a capacity nothing is planned. */
static int make_actions(struct prefetch *p, struct plan *pl, struct tb_err *err)
{
    free_actions(pl);
    const size_t N = pl->nsteps;
    pl->out_after = calloc(N, sizeof *pl->out_after);
    pl->in_before = calloc(N, sizeof *pl->in_before);
    double *before = calloc(N + 1, sizeof *before);            /* before[k]: time of steps 0..k-1 */
    double *mem = calloc(N + 1, sizeof *mem);                  /* bytes of transient tensors on the device */
    uint8_t **taken = calloc(pl->ntensors + 1, sizeof *taken); /* [i][gap]: planned out */
    int rc = !pl->out_after || !pl->in_before || !before || !mem || !taken;
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
    }
    const double budget = pl->capacity > 0 ? (double)pl->capacity - pl->persistent - (double)pl->capacity / 20 : 0;
    for (size_t k = 0; k < N && !rc && pl->capacity > 0; k++) {
        while (mem[k] > budget && !rc) {
            size_t best = SIZE_MAX;
            uint32_t best_gap = 0, best_v = 0, best_e = 0, best_s = 0;
            for (size_t i = 0; i < pl->ntensors; i++) {
                if (!taken[i])
                    continue;
                /* The gap of tensor i around step k: uses u < k < v. */
                uint32_t a = 0;
                while (a + 1 < pl->nuses[i] && pl->uses[i][a + 1] <= k)
                    a++;
                if (a + 1 >= pl->nuses[i] || taken[i][a])
                    continue;
                const uint32_t u = pl->uses[i][a], v = pl->uses[i][a + 1];
                if (!(u < k && k < v) || (p->threshold && v - u <= (uint32_t)p->threshold))
                    continue;
                uint32_t e, s;
                window(p, pl, before, i, u, v, &e, &s);
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
            if (best == SIZE_MAX)
                break; /* nothing can go: the memory manager evicts on demand */
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
    free(taken);
    free(before);
    free(mem);
    return rc ? tb_err_set(err, TB_ERR_NOMEM, "out of memory") : TB_OK;
}

static int prefetch_plan(void *ctx, struct tb_swap_mem *m, const struct tb_schedule *s, uint64_t capacity,
                         const struct tb_link *link, struct tb_err *err)
{
    (void)capacity;
    struct prefetch *p = ctx;
    struct plan *pl = find_plan(p, NULL);
    if (!pl)
        return tb_err_set(err, TB_ERR_RUNTIME, "the prefetch policy plans at most %d executors at once", MAX_EXECUTORS);
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
    if (!pl->uses || !pl->nuses || !pl->seconds) {
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

static void prefetch_forget(void *ctx, struct tb_swap_mem *m)
{
    struct plan *pl = find_plan(ctx, m);
    if (pl)
        free_plan(pl);
}

static int prefetch_before_step(void *ctx, struct tb_swap_mem *m, size_t step, struct tb_err *err)
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
                r != TB_RES_HOST)
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

static int prefetch_after_step(void *ctx, struct tb_swap_mem *m, size_t step, struct tb_err *err)
{
    struct prefetch *p = ctx;
    struct plan *pl = find_plan(p, m);
    if (!pl || step >= pl->nsteps)
        return TB_OK;
    if (!pl->tuned)
        pl->seconds[step] = tb_now() - pl->t0;
    for (const uint32_t *i = pl->out_after[step]; i && *i != UINT32_MAX; i++) {
        int rc = tb_swap_out(m, *i, false, err);
        if (rc)
            return rc;
    }
    /* One whole training step timed: plan again from the measurements. */
    if (!pl->tuned && step + 1 == pl->nsteps) {
        pl->tuned = true;
        if (pl->capacity)
            pl->persistent = pl->measured;
        return make_actions(p, pl, err);
    }
    return TB_OK;
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
static int prefetch_make_room(void *ctx, struct tb_swap_mem *m, size_t step, uint64_t bytes, struct tb_err *err)
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

static const struct tb_swap_ops prefetch_ops = {
    .create = prefetch_create,
    .destroy = prefetch_destroy,
    .plan = prefetch_plan,
    .before_step = prefetch_before_step,
    .after_step = prefetch_after_step,
    .make_room = prefetch_make_room,
    .forget = prefetch_forget,
};

TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
    .abi_major = TB_ABI_MAJOR,
    .abi_minor = TB_ABI_MINOR,
    .kind = TB_KIND_SWAP,
    .name = "prefetch",
    .version = TB_VERSION,
    .description = "swaps planned from the schedule: out after a use when the next is far, back in ahead of it",
    .keys = prefetch_keys,
    .ops.swap = &prefetch_ops,
};
