/* tools/study_time.c: the study's first benchmark: training time per platform, and the
 * time to a target mIoU, the scaling studies' MLPerf-style measure.
 *
 * The configuration trains as `trainbig train` would (its dataset, batch and crop) until
 * validation reaches the target mIoU ([train] target_miou, or the scale's), with an
 * MLPerf-style log ([report] mllog) from which the epochs, their times and the time to
 * the target are read. Then its training step is timed uncapped and, on each platform,
 * with device memory capped below the step's footprint under lru, prefetch and hybrid, the link
 * emulated at the reference G-SCNN's balance (as benchmark 3). Swapping changes no
 * weight (the capped steps are bit-identical on the cpu backend), so the epochs to the
 * target are the same everywhere: a platform's epoch time is the measured epoch's scaled
 * by its capped step over the uncapped one, and its time to the target follows. "On the
 * platform's GPU" scales this CPU's times by f, its convolution rate over the
 * accelerator's: what the emulation keeps is the balance, not this CPU's speed. */
#include "config.h"

#include "tools/study_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/config/ini.h"
#include "core/config/setup.h"
#include "core/train/trainer.h"
#include "tools/figure_internal.h"
#include "tools/lms_internal.h"
#include "tools/plot_internal.h"
#include "tools/steptime_internal.h"

enum { MAX_EPOCHS = 4096 };

/* What the training's MLPerf log says. */
struct run_log {
    double run_start, run_stop; /* ms */
    char status[32];
    int epochs;                 /* trained */
    double epoch_s[MAX_EPOCHS]; /* [e - 1]: epoch e's training time */
    double eval_s;              /* all validations' time */
    int nevals;
    int target_epoch; /* the first whose validation reached the target; 0 = none */
    double target_ms; /* when (since run_start) */
    double last_miou;
};

/* The string after `"name": "` in line, into buf ("" if none). */
static void string_after(const char *line, const char *name, char *buf, size_t size)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": \"", name);
    const char *p = strstr(line, pat);
    buf[0] = '\0';
    if (p) {
        p += strlen(pat);
        snprintf(buf, size, "%.*s", (int)strcspn(p, "\""), p);
    }
}

static int read_log(const char *path, double target, struct run_log *l, struct tb_err *err)
{
    memset(l, 0, sizeof *l);
    FILE *f = fopen(path, "r");
    if (!f)
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot read the training's log: %s", path, strerror(errno));
    char line[4096], key[64];
    double epoch_start = NAN, eval_start = NAN;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, ":::MLLOG ", 9) != 0)
            continue;
        string_after(line, "key", key, sizeof key);
        const double t = tb_study_json_number(line, "time_ms");
        const int epoch = (int)tb_study_json_number(line, "epoch_num");
        if (strcmp(key, "run_start") == 0)
            l->run_start = t;
        else if (strcmp(key, "run_stop") == 0) {
            l->run_stop = t;
            string_after(line, "status", l->status, sizeof l->status);
        } else if (strcmp(key, "epoch_start") == 0)
            epoch_start = t;
        else if (strcmp(key, "epoch_stop") == 0 && epoch >= 1 && epoch <= MAX_EPOCHS && !isnan(epoch_start)) {
            l->epoch_s[epoch - 1] = (t - epoch_start) / 1e3;
            l->epochs = epoch > l->epochs ? epoch : l->epochs;
        } else if (strcmp(key, "eval_start") == 0)
            eval_start = t;
        else if (strcmp(key, "eval_stop") == 0 && !isnan(eval_start)) {
            l->eval_s += (t - eval_start) / 1e3;
            l->nevals++;
        } else if (strcmp(key, "eval_accuracy") == 0 && epoch >= 1) {
            l->last_miou = tb_study_json_number(line, "value");
            if (!l->target_epoch && l->last_miou >= target) {
                l->target_epoch = epoch;
                l->target_ms = t - l->run_start;
            }
        }
    }
    fclose(f);
    if (!l->epochs)
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: the training's log holds no finished epoch", path);
    return TB_OK;
}

/* Trains the configuration to `target` with its log at log_path, in DIR/runs/name. */
static int train_to_target(struct tb_study *s, double target, const char *name, const char *log_path,
                           struct tb_err *err)
{
    const struct tb_study_request *rq = s->rq;
    struct tb_config *cfg = NULL;
    int rc = tb_config_load(rq->config, &cfg, err);
    char out[4200], nm[300], tg[64], lg[4400];
    snprintf(out, sizeof out, "run.output=%s/runs", s->dir);
    snprintf(nm, sizeof nm, "run.name=%s", name);
    snprintf(tg, sizeof tg, "train.target_miou=%.6g", target);
    snprintf(lg, sizeof lg, "report.mllog=%s", log_path);
    const char *mine[] = { out, nm, tg, lg, "report.progress=no" };
    for (int i = 0; !rc && i < rq->nsets; i++)
        rc = tb_config_set(cfg, rq->sets[i], err);
    for (size_t i = 0; !rc && i < sizeof mine / sizeof mine[0]; i++)
        rc = tb_config_set(cfg, mine[i], err);
    struct tb_setup *setup = NULL;
    if (!rc)
        rc = tb_setup_resolve(cfg, &setup, err);
    if (!rc) {
        const struct tb_train_request req = { .config_path = rq->config, .sets = rq->sets, .nsets = rq->nsets };
        rc = tb_train(setup, &req, err);
    }
    tb_setup_free(setup);
    tb_config_free(cfg);
    return rc;
}

int tb_study_time_step(const struct tb_study *s, const char *const *extra, int nextra, struct tb_step_timing *t,
                       struct tb_err *err)
{
    const int n = s->rq->nsets + nextra;
    const char **all = malloc((size_t)n * sizeof *all);
    if (!all)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    for (int i = 0; i < s->rq->nsets; i++)
        all[i] = s->rq->sets[i];
    for (int i = 0; i < nextra; i++)
        all[s->rq->nsets + i] = extra[i];
    const int rc = tb_time_steps_swap(s->rq->config, all, n, s->sz->time_steps, t, err);
    free(all);
    return rc;
}

int tb_study_time(struct tb_study *s, struct tb_err *err)
{
    const struct tb_study_sizes *sz = s->sz;
    if (strcmp(s->backend, "sim") == 0)
        return tb_study_time_sim(s, err);
    if (strcmp(s->backend, "cpu") != 0)
        return tb_err_set(err, TB_ERR_RUNTIME, "the platforms are emulated on the cpu backend only");
    const double target = s->target_miou > 0 ? s->target_miou : sz->target_miou;

    /* 1. Training to the target, in a run directory of its own. */
    char name[64], dir[4200], log_path[4300];
    struct stat st;
    for (int i = 1;; i++) {
        snprintf(name, sizeof name, "time-to-target-%d", i);
        snprintf(dir, sizeof dir, "%s/runs/%s", s->dir, name);
        if (stat(dir, &st) != 0)
            break;
    }
    snprintf(log_path, sizeof log_path, "%s/runs/%s.mllog", s->dir, name);
    tb_study_progress(s, "training to mIoU %.2f (%s)", target, dir);
    s->frac = 0.05;
    int rc = train_to_target(s, target, name, log_path, err);
    if (rc)
        return tb_err_prefix(err, "training to mIoU %.2f", target);
    struct run_log *l = malloc(sizeof *l);
    if (!l)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    rc = read_log(log_path, target, l, err);
    char plots[4300];
    snprintf(plots, sizeof plots, "%s/training", s->dir);
#ifdef HAVE_JANSSON /* the curves: plot reads epochs.jsonl with it */
    FILE *devnull = fopen("/dev/null", "w");
    if (!rc)
        rc = tb_plot(dir, plots, devnull ? devnull : stderr, err);
    if (devnull)
        fclose(devnull);
#endif
    if (rc) {
        free(l);
        return rc;
    }
    double train_s = 0;
    for (int e = 0; e < l->epochs; e++)
        train_s += l->epoch_s[e];
    const double epoch_s = train_s / l->epochs;
    s->frac = 0.6;

    /* 2. The step, uncapped, then capped on each platform. */
    double k = s->lms ? s->lms->k : 0;
    if (k <= 0) {
        tb_study_progress(s, "the reference's balance");
        const struct tb_lms_options o = {
            .config = s->rq->config,
            .backend = "cpu",
            .sizes = { sz->lms_sizes[0], sz->lms_sizes[1] },
            .batch = sz->lms_batch,
            .user = s->rq->sets,
            .nuser = s->rq->nsets,
        };
        rc = tb_lms_balance(&o, &k, err);
        if (rc) {
            free(l);
            return rc;
        }
    }
    tb_study_progress(s, "the step uncapped");
    struct tb_step_timing base;
    const char *uncapped[] = { "backend.plugin=cpu", "swap.plugin=none", "backend.device_memory=0" };
    rc = tb_study_time_step(s, uncapped, 3, &base, err);
    if (rc) {
        free(l);
        return tb_err_prefix(err, "the step uncapped");
    }
    const double rate = base.conv_flops / base.step_s;
    char cap[64], gflops[64], scale[64], plat[64], pol[64];
    snprintf(cap, sizeof cap, "backend.device_memory=%.0f", base.peak * sz->time_cap);
    snprintf(gflops, sizeof gflops, "backend.compute_gflops=%.6g", rate / 1e9);
    snprintf(scale, sizeof scale, "backend.link_scale=%.6g", k);
    enum { NPOL = 3 };
    static const char *const policies[NPOL] = { "lru", "prefetch", "hybrid" };
    double ratio[TB_STUDY_NPLAT][NPOL], f[TB_STUDY_NPLAT];
    char why[TB_STUDY_NPLAT][NPOL][160];
    for (int p = 0; p < TB_STUDY_NPLAT; p++) {
        snprintf(plat, sizeof plat, "platform.plugin=%s", tb_study_platforms[p]);
        for (int q = 0; q < NPOL; q++) {
            s->frac = 0.6 + 0.4 * (NPOL * p + q) / (double)(NPOL * TB_STUDY_NPLAT);
            tb_study_progress(s, "%s, %s, capped", tb_study_platforms[p], policies[q]);
            snprintf(pol, sizeof pol, "swap.plugin=%s", policies[q]);
            const char *extra[] = { "backend.plugin=cpu", cap, "backend.emulate_link=yes", gflops, scale, plat, pol };
            struct tb_step_timing t;
            struct tb_err cerr;
            tb_err_clear(&cerr);
            why[p][q][0] = '\0';
            ratio[p][q] = NAN;
            if (tb_study_time_step(s, extra, 7, &t, &cerr))
                snprintf(why[p][q], sizeof why[p][q], "%.150s", cerr.msg);
            else
                ratio[p][q] = t.step_s; /* over the uncapped step below */
        }
        struct tb_link emu, given;
        const char *lk[] = { "backend.plugin=cpu", "backend.emulate_link=yes", gflops, plat };
        const int n = s->rq->nsets + 4;
        const char **all = malloc((size_t)n * sizeof *all);
        if (!all) {
            free(l);
            return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        }
        for (int i = 0; i < s->rq->nsets; i++)
            all[i] = s->rq->sets[i];
        memcpy(all + s->rq->nsets, lk, sizeof lk);
        rc = tb_step_link(s->rq->config, all, n, &emu, &given, NULL, err);
        free(all);
        if (rc) {
            free(l);
            return rc;
        }
        f[p] = rate / (given.accel_flops * given.accel_efficiency);
    }

    /* The uncapped step again: two-thread timings drift (another program beside them), so
     * the capped steps are against the faster of the two uncapped runs around them. */
    s->frac = 0.98;
    tb_study_progress(s, "the step uncapped, again");
    struct tb_step_timing again;
    rc = tb_study_time_step(s, uncapped, 3, &again, err);
    if (rc) {
        free(l);
        return tb_err_prefix(err, "the step uncapped");
    }
    const double first_s = base.step_s;
    base.step_s = fmin(base.step_s, again.step_s);
    for (int p = 0; p < TB_STUDY_NPLAT; p++)
        for (int q = 0; q < NPOL; q++)
            ratio[p][q] /= base.step_s;

    /* The section. */
    FILE *md = s->md;
    fprintf(md, "## 1. Training time per platform, and time to mIoU %.2f\n\n", target);
    if (l->target_epoch)
        fprintf(md,
                "The configuration trained to validation mIoU %.2f in **%d epoch%s, %.1f s** here (MLPerf-style: from "
                "run_start to the eval_accuracy that reached it; run_stop status %s; the log: `runs/%s.mllog`, the "
                "run: `runs/%s`). ",
                target, l->target_epoch, l->target_epoch == 1 ? "" : "s", l->target_ms / 1e3, l->status, name, name);
    else
        fprintf(md,
                "The configuration did **not reach** validation mIoU %.2f in its %d epochs (last: %.3f; run_stop "
                "status %s; the log: `runs/%s.mllog`). Times to the target below are therefore not given. ",
                target, l->epochs, l->last_miou, l->status, name);
    fprintf(md,
            "An epoch's training took %.1f s on average (%d epochs), its validation %.1f s. Its step (batch %d of "
            "%dx%d) took %.0f ms uncapped (the faster of %.0f and %.0f ms, before and after the capped runs), with "
            "a %.0f MiB footprint; capped at %.0f%% of it on each platform's link, emulated at the reference "
            "G-SCNN's balance (x%.1f).\n\n",
            epoch_s, l->epochs, l->nevals ? l->eval_s / l->nevals : 0, base.batch, base.width, base.height,
            base.step_s * 1e3, first_s * 1e3, again.step_s * 1e3, base.peak / 1048576.0, 100 * sz->time_cap, k);
    fprintf(md, "| platform | policy | epoch with LMS / without | IBM LMS (study, 700x700) | epoch here, s | time to "
                "target here, s | epoch on the platform's GPU, s (x f) | time to target there, s |\n"
                "|---|---|---|---|---|---|---|---|\n");
    for (int p = 0; p < TB_STUDY_NPLAT; p++) {
        fprintf(md, "| %s | none (uncapped) | 1.00 | 1.00 | %.1f | ", tb_study_platforms[p], epoch_s);
        if (l->target_epoch)
            fprintf(md, "%.1f | %.2f | %.2f |\n", l->target_ms / 1e3, epoch_s * f[p], l->target_ms / 1e3 * f[p]);
        else
            fprintf(md, "- | %.2f | - |\n", epoch_s * f[p]);
        for (int q = 0; q < NPOL; q++) {
            if (isnan(ratio[p][q])) {
                fprintf(md, "| %s | %s | failed: %s | | | | | |\n", tb_study_platforms[p], policies[q], why[p][q]);
                continue;
            }
            const double pub = q == 0 ? tb_lms_published(tb_study_platforms[p], 1) : -1;
            const double ep = epoch_s * ratio[p][q];
            fprintf(md, "| %s | %s | %.2f | ", tb_study_platforms[p], policies[q], ratio[p][q]);
            if (pub >= 0)
                fprintf(md, "%.2f | ", 1 + pub / 100);
            else
                fprintf(md, "- | ");
            fprintf(md, "%.1f | ", ep);
            if (l->target_epoch) {
                const double ttt = l->target_ms / 1e3 + l->target_epoch * epoch_s * (ratio[p][q] - 1);
                fprintf(md, "%.1f | %.2f | %.2f |\n", ttt, ep * f[p], ttt * f[p]);
            } else
                fprintf(md, "- | %.2f | - |\n", ep * f[p]);
        }
    }
    fprintf(md,
            "\nSwapping changes no weight, so the epochs to the target are the same on every platform; the time to "
            "the target differs by the epochs' time alone (validation is taken as it ran here). f per platform: "
            "%.3g (ac922), %.3g (dgx-station), %.3g (p3.8xlarge), this CPU's convolution rate in the step (%.1f "
            "GFLOP/s) over the accelerator's. The study's own epoch times are not reproduced: its IBM LMS overheads "
            "(as epoch with LMS / without) stand beside lru's, which swaps on demand as IBM LMS does.\n",
            f[0], f[1], f[2], rate / 1e9);
#ifndef HAVE_JANSSON
    fprintf(md, "\n(The training's curves need a build with jansson: `trainbig plot` reads epochs.jsonl with it.)\n");
#else
    fprintf(md, "\nThe training's curves: [loss](training/loss.png), [accuracy](training/accuracy.png), "
                "[throughput](training/throughput.png), [swap](training/swap.png), [per-class "
                "IoU](training/class_iou.png).\n");
#endif

    /* The figure: epoch time with LMS over without, per platform and policy. */
    const char *cats[TB_STUDY_NPLAT];
    double lru[TB_STUDY_NPLAT], pf[TB_STUDY_NPLAT], hy[TB_STUDY_NPLAT], pub[TB_STUDY_NPLAT];
    for (int p = 0; p < TB_STUDY_NPLAT; p++) {
        cats[p] = tb_study_platforms[p];
        lru[p] = ratio[p][0];
        pf[p] = ratio[p][1];
        hy[p] = ratio[p][2];
        const double v = tb_lms_published(tb_study_platforms[p], 1);
        pub[p] = v >= 0 ? 1 + v / 100 : NAN;
    }
    char title[160];
    snprintf(title, sizeof title, "Training time per platform: epoch with LMS over without (%.0f%% of the footprint)",
             100 * sz->time_cap);
    const struct tb_study_bars bars = {
        .name = "training-time",
        .alt = "training time",
        .title = title,
        .xlabel = "platform (emulated link, reference balance)",
        .ylabel = "epoch time with LMS / without",
        .note = "published: IBM LMS in the study at 700x700, as 1 + its overhead",
        .categories = cats,
        .n = TB_STUDY_NPLAT,
        .decimals = 2,
        .lru = lru,
        .prefetch = pf,
        .hybrid = hy,
        .published = pub,
    };
    rc = tb_study_policy_bars(s, &bars, err);
    free(l);
    return rc;
}
