/* tools/study_lms.c: the study's third and fourth benchmarks. The overhead of large model
 * support per platform, policy and size, as bench/lms measures it (tools/lms.c), beside
 * IBM LMS's overheads the study published: 43% and 30% on the AC922, 106% and 73% on
 * the DGX Station, 105% and 91% on the p3.8xlarge (at 600x600 and 700x700). And one
 * training step's timeline per platform, as the study's nvprof pictures: the compute
 * track and both copy tracks, with the compute track's idle gaps counted. */
#include "config.h"

#include "tools/study_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine/engine.h"
#include "tools/figure_internal.h"
#include "tools/lms_internal.h"

static void lms_progress(void *arg, const struct tb_lms_options *o, const struct tb_lms_result *r, int size)
{
    (void)r;
    struct tb_study *s = arg;
    s->frac = size < 0 ? 0.1 : size == 0 ? 0.4 : 1; /* the larger size takes longer */
    if (size < 0)
        tb_study_progress(s, "the networks' intensities measured; %dx%d next", o->sizes[0], o->sizes[0]);
    else if (size == 0)
        tb_study_progress(s, "%dx%d done; %dx%d next", o->sizes[0], o->sizes[0], o->sizes[1], o->sizes[1]);
}

static void cell(FILE *md, const struct tb_lms_case *c, bool split)
{
    if (c->failed)
        fprintf(md, " failed: %s |", c->why);
    else if (!c->run)
        fprintf(md, " - |");
    else if (split)
        fprintf(md, " %.1f%% (%.0f..%.0f; stall %.1f, residual %.1f) |", c->overhead, c->lo, c->hi, c->stall,
                c->overhead - c->stall);
    else
        fprintf(md, " %.1f%% |", c->overhead);
}

/* The one measurement both benchmarks report, made by the first of them that runs; its
 * options are kept beside it (s->lms_opts) for the report's text. */
static int measure(struct tb_study *s, struct tb_err *err)
{
    if (s->lms_tried) {
        if (s->lms_rc)
            return tb_err_set(err, TB_ERR_RUNTIME, "the measurement benchmark 3 made failed (see there)");
        return TB_OK;
    }
    s->lms_tried = true;
    const struct tb_study_sizes *sz = s->sz;
    if (strcmp(s->backend, "cuda") == 0)
        return s->lms_rc = tb_err_set(err, TB_ERR_RUNTIME,
                                      "on the cuda backend the study's platforms are not emulated: run bench/lms "
                                      "--backend cuda --trace FILE for the GPU's own link");
    const bool sim = strcmp(s->backend, "sim") == 0;
    s->lms_opts = (struct tb_lms_options){
        .config = s->rq->config,
        .backend = sim ? "sim" : "cpu",
        .hybrid = true,
        .reported_only = true, /* the cases the table shows: the others would double the time */
        .nplat = TB_STUDY_NPLAT,
        .sizes = { sz->lms_sizes[0], sz->lms_sizes[1] },
        /* the study's batch was over four GPUs: one's share (batch norm needs 2) */
        .batch = !sim ? sz->lms_batch : sz->lms_batch / 4 >= 2 ? sz->lms_batch / 4 : 2,
        .steps = sz->lms_steps,
        .rounds = sim ? 1 : sz->lms_rounds, /* a model's times do not drift: one round says it */
        .cap_fraction = sz->lms_cap,
        .spans = true,
        .user = s->rq->sets,
        .nuser = s->rq->nsets,
        .progress = lms_progress,
        .progress_arg = s,
    };
    for (int p = 0; p < TB_STUDY_NPLAT; p++)
        s->lms_opts.platforms[p] = tb_study_platforms[p];
    s->lms = malloc(sizeof *s->lms);
    if (!s->lms)
        return s->lms_rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    s->lms_rc = tb_lms_measure(&s->lms_opts, s->lms, err);
    return s->lms_rc;
}

int tb_study_overhead(struct tb_study *s, struct tb_err *err)
{
    int rc = measure(s, err);
    if (rc)
        return rc;
    const struct tb_lms_options o = s->lms_opts;
    const struct tb_lms_result *r = s->lms;
    FILE *md = s->md;
    fprintf(md, "## 3. LMS overhead per platform, policy and size\n\n");
    const bool sim = strcmp(s->backend, "sim") == 0;
    /* The cases of the figure: on the cpu at the reference's balance; on sim as modelled. */
    const int mode = sim ? TB_LMS_AS_IS : TB_LMS_REF;
    if (sim) {
        fprintf(md,
                "**Predicted.** The configuration's network, batch %d of synthetic images at %dx%d and %dx%d (the "
                "study's 600x600 and 700x700; its batch 8 was over four GPUs), device memory capped at %.0f%% of each "
                "size's footprint, on each platform's modelled GPU and link; the step's time against the uncapped "
                "step (overhead), the stall in brackets (waiting for copies), and what recomputation took.\n\n",
                o.batch, o.sizes[0], o.sizes[0], o.sizes[1], o.sizes[1], 100 * o.cap_fraction);
        fprintf(md, "| platform | size | IBM LMS (study) | lru | prefetch | hybrid | MiB out / in per step (lru, "
                    "prefetch, hybrid) |\n|---|---|---|---|---|---|---|\n");
        for (int p = 0; p < o.nplat; p++)
            for (int z = 0; z < 2; z++) {
                const struct tb_lms_size *zs = &r->sizes[z];
                fprintf(md, "| %s | %d | %.0f%% |", o.platforms[p], zs->size, tb_lms_published(o.platforms[p], z));
                for (int q = 0; q < TB_LMS_NPOL; q++) {
                    const struct tb_lms_case *c = &zs->cases[mode][p][q];
                    if (c->run && !c->failed)
                        fprintf(md, " %.1f%% (stall %.1f, recompute %.1f) |", c->overhead, c->stall, c->recompute);
                    else
                        cell(md, c, false);
                }
                for (int q = 0; q < TB_LMS_NPOL; q++) {
                    const struct tb_lms_case *c = &zs->cases[mode][p][q];
                    if (c->run && !c->failed)
                        fprintf(md, "%s%.0f / %.0f", q ? ", " : " ", c->mid.out_bytes / 1048576.0,
                                c->mid.in_bytes / 1048576.0);
                    else
                        fprintf(md, "%s-", q ? ", " : " ");
                }
                fprintf(md, " |\n");
            }
    } else {
    fprintf(md,
            "The configuration's network, batch %d of synthetic images at %dx%d and %dx%d (as the study's 600x600 "
            "and 700x700), device memory capped at %.0f%% of each size's footprint; the step's time against the "
            "uncapped step (overhead), split into stall (waiting for copies) and the residual. Each platform's link "
            "is emulated (f in the header); \"reference balance\": the link also %.1fx faster, giving this network "
            "the reference G-SCNN's compute per byte (%.0f FLOP/B against %.0f), the analogue of the study's runs. "
            "hybrid: each activation kept, swapped or recomputed, whichever the planner prices lowest. Control: prefetch "
            "with copies free, the mechanism's own cost. Medians over %d rounds of %d steps, "
            "min..max in brackets.\n\n",
            o.batch, o.sizes[0], o.sizes[0], o.sizes[1], o.sizes[1], 100 * o.cap_fraction, r->k,
            r->ref_fpx / r->ref_bpx, r->net_fpx / r->net_bpx, o.rounds, o.steps);
    fprintf(md, "| platform | size | IBM LMS (study) | lru, as emulated | lru, reference balance | prefetch, reference "
                "balance | hybrid, reference balance | control | MiB out / in per step (prefetch, hybrid) |\n"
                "|---|---|---|---|---|---|---|---|---|\n");
    for (int p = 0; p < o.nplat; p++)
        for (int z = 0; z < 2; z++) {
            const struct tb_lms_size *zs = &r->sizes[z];
            fprintf(md, "| %s | %d | %.0f%% |", o.platforms[p], zs->size, tb_lms_published(o.platforms[p], z));
            cell(md, &zs->cases[TB_LMS_AS_IS][p][TB_LMS_LRU], false);
            cell(md, &zs->cases[TB_LMS_REF][p][TB_LMS_LRU], true);
            cell(md, &zs->cases[TB_LMS_REF][p][TB_LMS_PREFETCH], true);
            cell(md, &zs->cases[TB_LMS_REF][p][TB_LMS_HYBRID], true);
            cell(md, &zs->cases[TB_LMS_CONTROL][p][TB_LMS_PREFETCH], false);
            for (int q = TB_LMS_PREFETCH; q <= TB_LMS_HYBRID; q++) {
                const struct tb_lms_case *c = &zs->cases[TB_LMS_REF][p][q];
                if (c->run && !c->failed)
                    fprintf(md, "%s%.1f / %.1f", q == TB_LMS_PREFETCH ? " " : ", ", c->mid.out_bytes / 1048576.0,
                            c->mid.in_bytes / 1048576.0);
                else
                    fprintf(md, "%s-", q == TB_LMS_PREFETCH ? " " : ", ");
            }
            fprintf(md, " |\n");
        }
    }
    fprintf(md, "\nUncapped steps%s: ", sim ? " (predicted)" : "");
    for (int z = 0; z < 2; z++)
        fprintf(md, "%s%dx%d %.0f ms, footprint %.0f MiB (capped at %.0f MiB), convolutions at %.1f GFLOP/s",
                z ? "; " : "", r->sizes[z].size, r->sizes[z].size, r->sizes[z].base_step_s * 1e3,
                r->sizes[z].base.peak / 1048576.0, r->sizes[z].cap / 1048576.0, r->sizes[z].rate / 1e9);
    fprintf(md, ".\n");

    /* The figure: per platform and size, lru, prefetch and hybrid at the reference's balance, IBM
     * LMS's published overhead marked on lru's bar (both swap on demand or near it). */
    enum { NCAT = 2 * TB_STUDY_NPLAT };
    char catname[NCAT][48];
    const char *cats[NCAT];
    double lru[NCAT], pf[NCAT], hy[NCAT], pub[NCAT];
    for (int p = 0; p < TB_STUDY_NPLAT; p++)
        for (int z = 0; z < 2; z++) {
            const int k = 2 * p + z;
            snprintf(catname[k], sizeof catname[k], "%s %dx%d", o.platforms[p], r->sizes[z].size, r->sizes[z].size);
            cats[k] = catname[k];
            const struct tb_lms_case *l = &r->sizes[z].cases[mode][p][TB_LMS_LRU];
            const struct tb_lms_case *f = &r->sizes[z].cases[mode][p][TB_LMS_PREFETCH];
            const struct tb_lms_case *h = &r->sizes[z].cases[mode][p][TB_LMS_HYBRID];
            lru[k] = l->run ? l->overhead : NAN;
            pf[k] = f->run ? f->overhead : NAN;
            hy[k] = h->run && !h->failed ? h->overhead : NAN;
            pub[k] = tb_lms_published(o.platforms[p], z);
        }
    const struct tb_study_bars bars = {
        .name = "lms-overhead",
        .alt = "LMS overhead",
        .title = sim ? "LMS overhead, predicted: capped step against the uncapped step (modelled V100s)"
                     : "LMS overhead: capped step against the uncapped step (reference balance)",
        .xlabel = "platform, image size (the study's 600x600 and 700x700)",
        .ylabel = "overhead (% of the uncapped step)",
        .note = "published: IBM LMS in the study (G-SCNN, batch 8, V100)",
        .categories = cats,
        .n = NCAT,
        .decimals = 0,
        .lru = lru,
        .prefetch = pf,
        .hybrid = hy,
        .published = pub,
    };
    return tb_study_policy_bars(s, &bars, err);
}

/* ------------------------------------------------------------------ the timeline */

static int cmp_start(const void *a, const void *b)
{
    const struct tb_trace_span *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Gaps on the compute track at least this long are counted: shorter ones are the memory
 * manager's bookkeeping between any two ops. */
#define GAP_MIN_S 100e-6

struct gaps {
    double step_s, busy_s, idle_s, longest_s;
    int count;
    double copy_s[2]; /* each copy track's busy time */
};

static void measure_gaps(struct tb_trace_span *sp, size_t n, struct gaps *g)
{
    memset(g, 0, sizeof *g);
    qsort(sp, n, sizeof *sp, cmp_start);
    double end = 0, first = -1;
    for (size_t i = 0; i < n; i++) {
        const double e = sp[i].start + sp[i].dur;
        if (sp[i].track > 0) {
            g->copy_s[sp[i].track - 1] += sp[i].dur;
            continue;
        }
        if (first < 0)
            first = sp[i].start;
        else if (sp[i].start - end >= GAP_MIN_S) {
            g->count++;
            g->idle_s += sp[i].start - end;
            g->longest_s = fmax(g->longest_s, sp[i].start - end);
        }
        g->busy_s += sp[i].dur;
        end = fmax(end, e);
    }
    g->step_s = first >= 0 ? end - first : 0;
}

/* The figure: three tracks per step (compute with its idle gaps hatched, and each copy
 * direction), the uncapped step's compute track first, on one time axis. */
static int draw_timeline(struct tb_study *s, const struct tb_lms_result *r, struct tb_err *err)
{
    enum { NTRACK = 1 + 3 * TB_STUDY_NPLAT };
    struct tb_fig_track tracks[NTRACK];
    struct tb_fig_span *spans[NTRACK] = { NULL };
    char names[NTRACK][64];
    int rc = TB_OK;
    for (int t = 0; t < NTRACK && !rc; t++) {
        const int step = t == 0 ? 0 : 1 + (t - 1) / 3, track = t == 0 ? 0 : (t - 1) % 3;
        const struct tb_trace_span *sp = r->spans[step]; /* sorted by start (measure_gaps) */
        const size_t n = r->nspans[step];
        static const char *const what[] = { "compute", "to device", "to host" };
        snprintf(names[t], sizeof names[t], "%s %s", step ? tb_study_platforms[step - 1] : "uncapped", what[track]);
        /* At most every span and a gap before each. */
        if (!(spans[t] = malloc((2 * n + 1) * sizeof *spans[t]))) {
            rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
            break;
        }
        size_t k = 0;
        double end = -1;
        for (size_t i = 0; i < n; i++) {
            if (sp[i].track != track)
                continue;
            const double a = sp[i].start * 1e3, b = (sp[i].start + sp[i].dur) * 1e3;
            if (track == 0 && end >= 0 && sp[i].start * 1e3 - end >= GAP_MIN_S * 1e3)
                spans[t][k++] = (struct tb_fig_span){ end, a, TB_FIG_SPAN_GAP };
            spans[t][k++] = (struct tb_fig_span){ a, b > a ? b : a, track ? TB_FIG_SPAN_COPY : TB_FIG_SPAN_OP };
            end = end > b ? end : b;
        }
        tracks[t] = (struct tb_fig_track){ names[t], spans[t], k };
    }
    if (!rc) {
        const struct tb_fig_timeline f = {
            .title = strcmp(s->backend, "sim") == 0
                         ? "One training step per platform, predicted: compute and copies (prefetch, capped)"
                         : "One training step per platform: compute and copies (prefetch, capped, reference balance)",
            .tracks = tracks,
            .ntracks = NTRACK,
            .kind_names = { "op", "copy (swap)", "compute idle" },
        };
        char *base = tb_study_path(s, "timeline");
        rc = base ? tb_fig_timeline(base, &f, err) : tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        free(base);
        rc = tb_study_figure(s, "timeline", "timeline", rc);
    }
    for (int t = 0; t < NTRACK; t++)
        free(spans[t]);
    return rc;
}

int tb_study_timeline(struct tb_study *s, struct tb_err *err)
{
    int rc = measure(s, err);
    if (rc)
        return rc;
    const struct tb_lms_options *o = &s->lms_opts;
    struct tb_lms_result *r = s->lms; /* its spans are sorted here */
    struct gaps g[1 + TB_STUDY_NPLAT];
    for (int i = 0; i <= TB_STUDY_NPLAT; i++) {
        if (!r->spans[i])
            return tb_err_set(err, TB_ERR_RUNTIME, "%s: the traced step failed (benchmark 3 says why)",
                              i ? tb_study_platforms[i - 1] : "uncapped");
        measure_gaps(r->spans[i], r->nspans[i], &g[i]);
    }
    const struct tb_lms_size *zs = &r->sizes[1];
    FILE *md = s->md;
    fprintf(md, "## 4. One training step's timeline per platform\n\n");
    const bool sim = strcmp(s->backend, "sim") == 0;
    fprintf(md,
            "%sThe configuration's network, batch %d at %dx%d: one step uncapped, and one under prefetch with "
            "device memory capped at %.0f%% of the %.0f MiB footprint on each platform's %s (benchmark 3's runs: "
            "the last step of its last round). Idle: the compute track waiting between ops, in gaps of %.1f ms or "
            "more (shorter ones are the bookkeeping between any two ops, counted as busy). Times are %s.\n\n",
            sim ? "**Predicted.** " : "", o->batch, zs->size, zs->size, 100 * o->cap_fraction,
            zs->base.peak / 1048576.0, sim ? "modelled GPU and link" : "emulated link at the reference's balance",
            GAP_MIN_S * 1e3, sim ? "the model's, on the modelled V100" : "this CPU's");
    fprintf(md, "| platform | step ms | compute busy ms | idle ms (%% of the step) | gaps | longest gap ms | copy "
                "host to device ms | copy device to host ms |\n|---|---|---|---|---|---|---|---|\n");
    for (int p = 0; p <= TB_STUDY_NPLAT; p++)
        fprintf(md, "| %s | %.1f | %.1f | %.1f (%.0f%%) | %d | %.2f | %.1f | %.1f |\n",
                p ? tb_study_platforms[p - 1] : "uncapped (no swapping)", g[p].step_s * 1e3, g[p].busy_s * 1e3,
                g[p].idle_s * 1e3, g[p].step_s > 0 ? 100 * g[p].idle_s / g[p].step_s : 0, g[p].count,
                g[p].longest_s * 1e3, g[p].copy_s[0] * 1e3, g[p].copy_s[1] * 1e3);
    fprintf(md, "\nThe study's nvprof timelines showed the GPU idle while IBM LMS swapped on demand, longest on the "
                "PCIe machines. Here the idle gaps are what prefetching could not hide.\n");
    return draw_timeline(s, r, err);
}
