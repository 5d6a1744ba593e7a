/* tools/lms.c: what large model support costs, per platform and swap policy; printed by
 * bench/lms, reported by `trainbig study`.
 *
 * The quickstart G-SCNN trains on batches of synthetic images at two sizes. Each size runs
 * with device memory unlimited (its footprint: the peak), then with device memory capped
 * below that footprint, on the CPU backend with the link of each platform emulated, under
 * each policy. Per run: the step time, its overhead against the uncapped step split into
 * stall (waiting for copies: a tensor needed or freed before its copy finished, and the
 * step's end waiting for its last copies out) and the rest (residual = overhead - stall),
 * itself split into the ops' own kernels running slower than uncapped ("ops": on the CPU,
 * the copies' memcpy taking cores and memory bandwidth from compute, which a GPU's copy
 * engines do not) and everything between the ops ("other": allocation, making room, the
 * swap bookkeeping), all in % of the uncapped step, the bytes moved each way per step,
 * and peak device memory. Everything runs through the same configuration path as
 * `trainbig train` (steptime.c).
 *
 * The emulated link: copies slowed by f = this CPU's achieved convolution rate over the
 * platform's accelerator's (accel_tflops x accel_efficiency), so the compute-to-transfer
 * balance of an AC922 or a DGX Station is kept. Achieved, not peak: a step here runs its
 * convolutions at a fraction of this CPU's FMA peak, cuDNN nearer the V100's. The CPU's
 * rate is the step's own: conv FLOPs per step over the uncapped step time of the same
 * round (backend.compute_gflops), so the emulated link follows the machine's speed as it
 * drifts. The backend's own estimate (a 3x3 64->64 convolution, what emulate_link measures
 * when compute_gflops is 0) is kept beside it: wide convolutions run far nearer this
 * CPU's peak than the quickstart network's narrow ones, and the step's rate is the one
 * its compute time follows.
 *
 * What a swap costs depends on the network as much as on the link: the bytes a step
 * swaps grow with its activations, the time that hides them with its FLOPs. The
 * quickstart network is narrow, so it computes far less per byte than the reference
 * G-SCNN, whose full-size steps this CPU cannot run. Both are measured here (conv FLOPs
 * per step over device bytes per image pixel, from the footprints at two sizes), and
 * every case runs twice: on the link as emulated (f), and on the link sped up by the
 * ratio k of the two (`[backend] link_scale`), which gives the quickstart network the
 * reference's compute-to-transfer balance: the analogue of the study's runs. The factors
 * multiply: copies run at f x k of the platform's rates. (With the step's rate in f, k
 * carries the quickstart's achieved rate over to the reference on the V100: the V100's
 * accel_efficiency is the reference's large convolutions'.)
 *
 * A control per size and platform: capped, prefetch, with emulate_link off, so the same
 * copies run on the same copy threads with the same events but take no emulated time
 * (only their memcpy). Its overhead is the mechanism's own cost. emulate_link off, not
 * link_scale at its largest (1000), which would still leave f x 1000 (a few times the
 * platform's rate here) and the latency: not free. The policy plans with the platform's
 * own rates then, against which any copy hides behind this CPU's compute.
 *
 * Two-thread timings drift: each size repeats its uncapped run and all capped runs
 * `rounds` times; a run's overhead and its parts are against an uncapped step of its own
 * round, timed just before its group (the policies of one platform and mode): one
 * uncapped run per round, against which a round's cases ran over several minutes, put
 * the same swaps under prefetch and hybrid 15 points apart (the machine's speed had
 * moved between them, not the policies). The round's first uncapped run also gives the
 * emulated link its rate (below). Each case reports its median round by overhead, with
 * the spread over all rounds (min-max), and every part from that same round (and within
 * a run, from its median step), so that stall, the ops' slowdown, recomputation and the
 * rest add up to the overhead: medians taken part by part, over different rounds, do not.
 * At the reference's balance, where hybrid's target is read, prefetch runs a second time
 * right after hybrid, and hybrid is paired with the mean of the two prefetch runs around
 * it: a drift within the round falls on both sides. The two prefetch runs against each
 * other (A/A) show what the pairing can resolve: at 160x160 and 192x192 on two cores they
 * landed up to 16 points apart in one round, and their median over twelve rounds +3.6 and
 * +0.1 points, where the plan was the same.
 *
 * On the cuda backend the same cases run on the GPU's real link: nothing is emulated or
 * rescaled (that backend has no emulate_link or link_scale), so each case runs once per
 * round, on one platform (the caller's: the real link's), and the cap is [backend]
 * device_memory below each size's measured footprint as on the CPU. On the sim backend
 * likewise, but on every platform given (each modelled with its own link and accelerator):
 * every figure is then the model's, predicted. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/log.h>

#include "tools/lms_internal.h"

const char *const tb_lms_policies[TB_LMS_NPOL] = { "lru", "prefetch", "hybrid" };

enum { MAX_SETS = 20 };

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double s[TB_LMS_MAX_ROUNDS];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static void spread(const double *v, int n, double *lo, double *hi)
{
    *lo = *hi = v[0];
    for (int i = 1; i < n; i++) {
        *lo = v[i] < *lo ? v[i] : *lo;
        *hi = v[i] > *hi ? v[i] : *hi;
    }
}

void tb_lms_paired(const double *over, const double *first, const double *again, int n, double *med, double *lo,
                   double *hi)
{
    double d[TB_LMS_MAX_ROUNDS];
    for (int round = 0; round < n; round++)
        d[round] = over[round] - (again ? (first[round] + again[round]) / 2 : first[round]);
    *med = median(d, n);
    spread(d, n, lo, hi);
}

bool tb_lms_hybrid_met(const struct tb_lms_case *hybrid, const struct tb_lms_case *prefetch, double bound)
{
    if (!hybrid->run || !prefetch->run || !hybrid->paired || hybrid->vs_prefetch > 0)
        return false;
    return bound <= 0 || prefetch->overhead <= bound || hybrid->overhead <= bound;
}

/* The assignments of one run: the network (reference: the gscnn defaults), the size and
 * batch, the backend (with its threads on the cpu), the user's, then what add() appends
 * for the case. The user's strings are borrowed; the others live in buf. */
struct runset {
    char buf[MAX_SETS][128]; /* add()'s strings */
    int nbuf;
    const char **sets; /* owned: MAX_SETS + nuser */
    int n;
};

static void add(struct runset *r, const char *fmt, const char *s, double v)
{
    if (r->nbuf == MAX_SETS) /* the fixed sets below stay under it: an internal bug */
        abort();
    char *b = r->buf[r->nbuf++];
    if (s)
        snprintf(b, sizeof r->buf[0], fmt, s);
    else
        snprintf(b, sizeof r->buf[0], fmt, v);
    r->sets[r->n++] = b;
}

static int base_sets(struct runset *r, bool reference, const struct tb_lms_options *o, int size, int batch)
{
    r->sets = malloc((size_t)(MAX_SETS + o->nuser) * sizeof *r->sets);
    if (!r->sets)
        return -1;
    r->n = r->nbuf = 0;
    if (reference) { /* the reference G-SCNN: the gscnn defaults, set where a file sets others */
        add(r, "model.plugin=gscnn", NULL, 0);
        if (o->config) {
            add(r, "model.width=1", NULL, 0);
            add(r, "model.shape_width=1", NULL, 0);
            add(r, "model.blocks=3,3,6,3,1,1", NULL, 0);
        }
    } else if (!o->config) {
        add(r, "model.plugin=gscnn", NULL, 0);
        add(r, "model.width=0.125", NULL, 0);
        add(r, "model.shape_width=0.5", NULL, 0);
        add(r, "model.blocks=1,1,1,1,1,1", NULL, 0);
    }
    add(r, "dataset.plugin=synthetic", NULL, 0);
    add(r, "dataset.crop=0", NULL, 0);
    add(r, "dataset.width=%.0f", NULL, size);
    add(r, "dataset.height=%.0f", NULL, size);
    add(r, "train.batch=%.0f", NULL, batch);
    add(r, "backend.plugin=%s", o->backend, 0);
    if (strcmp(o->backend, "sim") == 0) /* uncapped: a modelled device with room for any step (a case caps it) */
        add(r, "backend.device_memory=1T", NULL, 0);
    if (strcmp(o->backend, "cpu") == 0)
        add(r, "backend.threads=%.0f", NULL, o->threads); /* the cuda backend has no such key */
    for (int i = 0; i < o->nuser; i++)
        r->sets[r->n++] = o->user[i];
    return 0;
}

/* Conv FLOPs per image pixel and device bytes per image pixel (the footprint's growth
 * between two sizes) of a network; -1 on failure (err says why; empty when the
 * footprint did not grow). */
static int intensity(bool reference, const struct tb_lms_options *o, const int size[2], int batch, int steps,
                     struct tb_step_timing t[2], double *flops_px, double *bytes_px, struct tb_err *err)
{
    for (int z = 0; z < 2; z++) {
        struct runset r;
        if (base_sets(&r, reference, o, size[z], batch))
            return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        tb_err_clear(err);
        const int rc = tb_time_steps(o->config, r.sets, r.n, steps, &t[z], err);
        free(r.sets);
        if (rc)
            return -1;
    }
    const double px0 = (double)batch * size[0] * size[0], px1 = (double)batch * size[1] * size[1];
    *flops_px = t[1].conv_flops / px1;
    *bytes_px = ((double)t[1].peak - (double)t[0].peak) / (px1 - px0);
    return *bytes_px > 0 ? 0 : -1;
}

/* Whether the runs emulate each platform's link on this CPU (the cpu backend), or run on
 * the link the backend has: the GPU's own (cuda), each platform's as modelled (sim). */
static bool emulates(const struct tb_lms_options *o)
{
    return strcmp(o->backend, "cpu") == 0;
}

double tb_lms_factor(const struct tb_lms_result *r, int z, int p)
{
    return r->sizes[z].rate / (r->given[p].accel_flops * r->given[p].accel_efficiency);
}

double tb_lms_published(const char *platform, int z)
{
    /* "Training Big on Images": G-SCNN, batch 8, IBM LMS, at 600x600 and 700x700. */
    static const struct {
        const char *name;
        double at[2];
    } pub[] = {
        { "ac922", { 43, 30 } },     { "power9-nvlink", { 43, 30 } }, { "dgx-station", { 106, 73 } },
        { "x86-pcie", { 106, 73 } }, { "p3.8xlarge", { 105, 91 } },
    };
    for (size_t i = 0; i < sizeof pub / sizeof pub[0]; i++)
        if (strcmp(pub[i].name, platform) == 0 && z >= 0 && z < 2)
            return pub[i].at[z];
    return -1;
}

/* The rate the emulated link follows in this round: the round's own (rate), unless its
 * uncapped step was starved (another program took the cores): then the link would slow as
 * much, and the capped runs, not starved alike, would wait minutes on copies. Starved:
 * below half the best rate of this size so far (best), or below 1/20 of the backend's
 * own estimate of this CPU; the better of those is used then, with a warning. */
static double link_rate(const struct tb_lms_options *o, const struct tb_lms_result *r, int z, int round, double rate,
                        double *best)
{
    const double estimate = r->emu[0].accel_flops * r->emu[0].accel_efficiency / 20;
    const double floor = fmax(*best / 2, estimate);
    if (!emulates(o) || r->user_rate || !(floor > 0) || rate >= floor) {
        *best = fmax(rate, *best);
        return rate;
    }
    const double use = fmax(*best, estimate);
    tb_log(TB_LOG_WARN,
           "%dx%d, round %d: the uncapped step ran at %.2f GFLOP/s, far below this machine's %.2f (another "
           "program busy beside it?); the emulated link follows %.2f GFLOP/s in this round, and its overheads "
           "are against a slow uncapped step",
           o->sizes[z], o->sizes[z], round + 1, rate / 1e9, floor / 1e9, use / 1e9);
    return use;
}

/* The per-round figures of every case of one size, filled by measure_size. */
struct rounds {
    double base_s[TB_LMS_MAX_ROUNDS], rate[TB_LMS_MAX_ROUNDS];
    /* the uncapped step timed just before each group of cases */
    double group_s[TB_LMS_NMODE][TB_LMS_MAX_PLAT][TB_LMS_MAX_ROUNDS];
    double group_ops_s[TB_LMS_NMODE][TB_LMS_MAX_PLAT][TB_LMS_MAX_ROUNDS];
    double over[TB_LMS_NMODE][TB_LMS_MAX_PLAT][TB_LMS_NPOL][TB_LMS_MAX_ROUNDS];
    /* at the reference's balance, prefetch's second run (after hybrid) */
    double again[TB_LMS_MAX_PLAT][TB_LMS_MAX_ROUNDS];
    struct tb_step_timing run[TB_LMS_NMODE][TB_LMS_MAX_PLAT][TB_LMS_NPOL][TB_LMS_MAX_ROUNDS];
};

/* The round whose overhead is the median (of an even count, the lower of the middle two). */
static int median_round(const double *over, int n)
{
    int by[TB_LMS_MAX_ROUNDS];
    for (int i = 0; i < n; i++) { /* insertion sort of the rounds by overhead */
        int j = i;
        for (; j > 0 && over[by[j - 1]] > over[i]; j--)
            by[j] = by[j - 1];
        by[j] = i;
    }
    return by[(n - 1) / 2];
}

/* Whether policy q runs in `mode`: the control runs prefetch only, hybrid runs unless
 * the options leave it out, and reported_only leaves out all but lru as emulated. */
static bool case_runs(const struct tb_lms_options *o, int mode, int q)
{
    return (mode != TB_LMS_CONTROL || q == TB_LMS_PREFETCH) && (o->hybrid || q != TB_LMS_HYBRID) &&
           (!o->reported_only || mode != TB_LMS_AS_IS || q == TB_LMS_LRU || !emulates(o));
}

/* Times case (mode, platform p, policy q) of size z once into *res. A run that fails
 * marks the case failed with its reason (c), and the caller goes on; nonzero (err set)
 * only when out of memory building the run. last: the size's last round, which may be
 * traced or kept as spans. */
static int time_case(const struct tb_lms_options *o, struct tb_lms_result *r, int z, int mode, int p, int q,
                     double emu_rate, bool last, struct tb_step_timing *res, struct tb_lms_case *c,
                     struct tb_err *err)
{
    const bool own_link = !emulates(o); /* the link the backend has: nothing emulated */
    struct runset cs;
    if (base_sets(&cs, false, o, o->sizes[z], o->batch))
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    add(&cs, "backend.device_memory=%.0f", NULL, (double)r->sizes[z].cap);
    if (!own_link && mode != TB_LMS_CONTROL) {
        add(&cs, "backend.emulate_link=yes", NULL, 0);
        add(&cs, "backend.link_scale=%.6g", NULL, mode ? r->k : 1.0);
        if (!r->user_rate)
            add(&cs, "backend.compute_gflops=%.6g", NULL, emu_rate / 1e9);
    }
    add(&cs, "platform.plugin=%s", o->platforms[p], 0);
    add(&cs, "swap.plugin=%s", tb_lms_policies[q], 0);
    struct tb_err cerr;
    tb_err_clear(&cerr);
    /* cpu: the last platform at the reference's balance; cuda: the one case of prefetch */
    const bool traced = o->trace && last && z == 1 && mode == (own_link ? 0 : TB_LMS_REF) && p == o->nplat - 1 &&
                        q == TB_LMS_PREFETCH;
    const bool keep_spans = o->spans && last && z == 1 && mode == (own_link ? 0 : TB_LMS_REF) && q == TB_LMS_PREFETCH;
    const int crc = traced       ? tb_time_steps_traced(o->config, cs.sets, cs.n, o->steps, o->trace, res, &cerr)
                    : keep_spans ? tb_time_steps_spans(o->config, cs.sets, cs.n, o->steps, &r->spans[1 + p],
                                                       &r->nspans[1 + p], res, &cerr)
                                 : tb_time_steps(o->config, cs.sets, cs.n, o->steps, res, &cerr);
    free(cs.sets);
    if (crc) {
        c->failed = true;
        snprintf(c->why, sizeof c->why, "%.150s", cerr.msg);
    }
    return TB_OK;
}

static int measure_size(const struct tb_lms_options *o, struct tb_lms_result *r, int z, struct rounds *m,
                        struct tb_err *err)
{
    const bool own_link = !emulates(o);
    const int nmode = own_link ? 1 : TB_LMS_NMODE;
    struct tb_lms_size *sz = &r->sizes[z];
    sz->cap = (uint64_t)((double)sz->base.peak * o->cap_fraction);
    double best = 0; /* the best uncapped rate of this size so far */
    for (int round = 0; round < o->rounds; round++) {
        struct runset rs;
        if (base_sets(&rs, false, o, o->sizes[z], o->batch))
            return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        struct tb_step_timing base = sz->base;
        tb_err_clear(err);
        const bool keep = o->spans && z == 1 && round == o->rounds - 1;
        const int rc =
            keep ? tb_time_steps_spans(o->config, rs.sets, rs.n, o->steps, &r->spans[0], &r->nspans[0], &base, err)
            : round > 0 ? tb_time_steps(o->config, rs.sets, rs.n, o->steps, &base, err)
                        : 0;
        free(rs.sets);
        if (rc)
            return tb_err_prefix(err, "%dx%d uncapped", o->sizes[z], o->sizes[z]);
        m->base_s[round] = base.step_s;
        m->rate[round] = base.conv_flops / base.step_s; /* the step's achieved conv rate, this round */
        const double emu_rate = link_rate(o, r, z, round, m->rate[round], &best);
        for (int mode = 0; mode < nmode; mode++)
            for (int p = 0; p < o->nplat; p++) {
                /* A group whose cases have all failed (out of memory in an earlier round)
                 * has nothing left to time against its uncapped step. */
                bool left = false;
                for (int q = 0; q < TB_LMS_NPOL; q++)
                    left = left || (!sz->cases[mode][p][q].failed && case_runs(o, mode, q));
                if (!left)
                    continue;
                /* The group's own uncapped step: the first group's is the one just run. */
                struct tb_step_timing gb = base;
                if (mode > 0 || p > 0) {
                    if (base_sets(&rs, false, o, o->sizes[z], o->batch))
                        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
                    const int grc = tb_time_steps(o->config, rs.sets, rs.n, o->steps, &gb, err);
                    free(rs.sets);
                    if (grc)
                        return tb_err_prefix(err, "%dx%d uncapped", o->sizes[z], o->sizes[z]);
                }
                m->group_s[mode][p][round] = gb.step_s;
                m->group_ops_s[mode][p][round] = gb.ops_s;
                for (int q = 0; q < TB_LMS_NPOL; q++) {
                    struct tb_lms_case *c = &sz->cases[mode][p][q];
                    if (c->failed || !case_runs(o, mode, q))
                        continue;
                    struct tb_step_timing res;
                    int trc = time_case(o, r, z, mode, p, q, emu_rate, round == o->rounds - 1, &res, c, err);
                    if (trc)
                        return trc;
                    if (c->failed)
                        continue;
                    c->run = true;
                    m->over[mode][p][q][round] = 100.0 * (res.step_s / gb.step_s - 1);
                    m->run[mode][p][q][round] = res;
                    /* At the reference's balance, prefetch once more right after hybrid:
                     * hybrid is paired with the two runs around it, and the two prefetch
                     * runs against each other show what pairing alone cannot resolve. */
                    struct tb_lms_case *pc = &sz->cases[mode][p][TB_LMS_PREFETCH];
                    if (q == TB_LMS_HYBRID && mode == TB_LMS_REF && !own_link && !o->reported_only && !pc->failed &&
                        pc->run) {
                        struct tb_step_timing again;
                        trc = time_case(o, r, z, mode, p, TB_LMS_PREFETCH, emu_rate, false, &again, pc, err);
                        if (trc)
                            return trc;
                        if (!pc->failed)
                            m->again[p][round] = 100.0 * (again.step_s / gb.step_s - 1);
                    }
                }
            }
    }
    sz->base_step_s = median(m->base_s, o->rounds);
    sz->rate = median(m->rate, o->rounds);
    for (int mode = 0; mode < nmode; mode++)
        for (int p = 0; p < o->nplat; p++)
            for (int q = 0; q < TB_LMS_NPOL; q++) {
                struct tb_lms_case *c = &sz->cases[mode][p][q];
                if (!c->run || c->failed) {
                    c->run = false;
                    continue;
                }
                /* One round's figures, not each its own median: the parts of its overhead
                 * (stall, the ops' slowdown, recomputation, the rest) add up. */
                const int mid = median_round(m->over[mode][p][q], o->rounds);
                const double base_s = m->group_s[mode][p][mid];
                c->mid = m->run[mode][p][q][mid];
                c->step_s = c->mid.step_s;
                c->overhead = m->over[mode][p][q][mid];
                spread(m->over[mode][p][q], o->rounds, &c->lo, &c->hi);
                c->stall = 100.0 * c->mid.stall_s / base_s;
                c->ops = 100.0 * (c->mid.ops_s - m->group_ops_s[mode][p][mid]) / base_s;
                c->recompute = 100.0 * c->mid.recompute_s / base_s;
            }
    for (int mode = 0; mode < nmode; mode++)
        for (int p = 0; p < o->nplat; p++) {
            struct tb_lms_case *pc = &sz->cases[mode][p][TB_LMS_PREFETCH];
            if (!pc->run)
                continue;
            /* prefetch against itself, where it ran twice in every round */
            const bool twice = mode == TB_LMS_REF && sz->cases[mode][p][TB_LMS_HYBRID].run;
            const double *first = m->over[mode][p][TB_LMS_PREFETCH];
            if (twice) {
                pc->repeated = true;
                tb_lms_paired(m->again[p], first, NULL, o->rounds, &pc->aa, &pc->aa_lo, &pc->aa_hi);
            }
            for (int q = 0; q < TB_LMS_NPOL; q++) {
                struct tb_lms_case *c = &sz->cases[mode][p][q];
                if (q == TB_LMS_PREFETCH || !c->run)
                    continue;
                c->paired = true;
                tb_lms_paired(m->over[mode][p][q], first, twice ? m->again[p] : NULL, o->rounds, &c->vs_prefetch,
                              &c->vs_lo, &c->vs_hi);
            }
        }
    return TB_OK;
}

int tb_lms_balance(const struct tb_lms_options *o, double *k, struct tb_err *err)
{
    struct tb_step_timing t[2];
    double ref_fpx, ref_bpx, net_fpx, net_bpx;
    const int ref_sizes[2] = { 48, 64 };
    if (intensity(true, o, ref_sizes, 2, 1, t, &ref_fpx, &ref_bpx, err)) {
        if (!err->msg[0])
            tb_err_set(err, TB_ERR_RUNTIME, "no footprint growth between %d and %d", ref_sizes[0], ref_sizes[1]);
        return tb_err_prefix(err, "the reference G-SCNN");
    }
    if (intensity(false, o, o->sizes, o->batch, 1, t, &net_fpx, &net_bpx, err)) {
        if (!err->msg[0])
            tb_err_set(err, TB_ERR_RUNTIME, "no footprint growth between %d and %d", o->sizes[0], o->sizes[1]);
        return tb_err_prefix(err, "the configuration's network");
    }
    *k = (ref_fpx / ref_bpx) / (net_fpx / net_bpx);
    return TB_OK;
}

int tb_lms_measure(const struct tb_lms_options *o, struct tb_lms_result *r, struct tb_err *err)
{
    memset(r, 0, sizeof *r);
    const bool own_link = !emulates(o);
    const bool known = !own_link || strcmp(o->backend, "cuda") == 0 || strcmp(o->backend, "sim") == 0;
    if (o->steps < 1 || o->rounds < 1 || o->rounds > TB_LMS_MAX_ROUNDS || o->batch < 1 || o->cap_fraction <= 0 ||
        o->cap_fraction >= 1 || o->sizes[0] < 16 || o->sizes[1] <= o->sizes[0] || o->nplat < 1 ||
        o->nplat > TB_LMS_MAX_PLAT || (strcmp(o->backend, "cuda") == 0 && o->nplat != 1) || !known)
        return tb_err_set(err, TB_ERR_CONFIG,
                          "large model support's cost: bad options (steps %d, rounds %d of at most %d, "
                          "batch %d, cap %g, sizes %d,%d, %d platforms, backend %s)",
                          o->steps, o->rounds, TB_LMS_MAX_ROUNDS, o->batch, o->cap_fraction, o->sizes[0], o->sizes[1],
                          o->nplat, o->backend);
    for (int i = 0; i < o->nuser; i++)
        r->user_rate |= strncmp(o->user[i], "backend.compute_gflops=", 23) == 0;
    for (int z = 0; z < 2; z++)
        r->sizes[z].size = o->sizes[z];

    /* Compute per byte: the reference network at two small sizes, batch 2 (its weights
     * are most of its footprint there; the growth between the sizes is its activations). */
    struct tb_step_timing ref_t[2];
    const int ref_sizes[2] = { own_link ? 256 : 48, own_link ? 384 : 64 };
    if (intensity(true, o, ref_sizes, 2, 1, ref_t, &r->ref_fpx, &r->ref_bpx, err)) {
        if (!err->msg[0])
            tb_err_set(err, TB_ERR_RUNTIME, "no footprint growth (peak %.1f MiB at %d, %.1f MiB at %d)",
                       ref_t[0].peak / 1048576.0, ref_sizes[0], ref_t[1].peak / 1048576.0, ref_sizes[1]);
        return tb_err_prefix(err, "the reference G-SCNN");
    }
    struct tb_step_timing base0[2];
    if (intensity(false, o, o->sizes, o->batch, o->steps, base0, &r->net_fpx, &r->net_bpx, err)) {
        if (!err->msg[0])
            tb_err_set(err, TB_ERR_RUNTIME, "no footprint growth (peak %.1f MiB at %d, %.1f MiB at %d)",
                       base0[0].peak / 1048576.0, o->sizes[0], base0[1].peak / 1048576.0, o->sizes[1]);
        return tb_err_prefix(err, o->config ? "the configuration's network" : "the quickstart G-SCNN");
    }
    r->k = (r->ref_fpx / r->ref_bpx) / (r->net_fpx / r->net_bpx);
    for (int z = 0; z < 2; z++)
        r->sizes[z].base = base0[z];

    /* The emulation's rates: the backend's own estimate of this CPU (a 3x3 64->64
     * convolution beside its FMA peak) and each platform's accelerator, achieved. */
    for (int p = 0; p < o->nplat && !own_link; p++) {
        struct runset c;
        if (base_sets(&c, false, o, o->sizes[0], o->batch))
            return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        add(&c, "backend.emulate_link=yes", NULL, 0);
        add(&c, "platform.plugin=%s", o->platforms[p], 0);
        if (p > 0 && !r->user_rate) /* measured once */
            add(&c, "backend.compute_gflops=%.6g", NULL, r->emu[0].accel_flops * r->emu[0].accel_efficiency / 1e9);
        tb_err_clear(err);
        const int rc = tb_step_link(o->config, c.sets, c.n, &r->emu[p], &r->given[p], NULL, err);
        free(c.sets);
        if (rc)
            return tb_err_prefix(err, "the emulated link of %s", o->platforms[p]);
    }
    r->fma_peak = !own_link && r->emu[0].accel_efficiency < 1 ? r->emu[0].accel_flops : 0;
    if (o->progress)
        o->progress(o->progress_arg, o, r, -1);

    struct rounds *m = malloc(sizeof *m); /* large: not on the stack */
    if (!m)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    for (int z = 0; z < 2; z++) {
        if (measure_size(o, r, z, m, err)) {
            free(m);
            return -1;
        }
        if (o->progress)
            o->progress(o->progress_arg, o, r, z);
    }
    free(m);
    return TB_OK;
}

void tb_lms_result_free(struct tb_lms_result *r)
{
    if (!r)
        return;
    for (int i = 0; i <= TB_LMS_MAX_PLAT; i++)
        free(r->spans[i]);
    free(r);
}
