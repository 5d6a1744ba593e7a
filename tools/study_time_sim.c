/* tools/study_time_sim.c: the study's first benchmark on the sim backend: the training
 * time per platform, predicted. Nothing is computed on a modelled device, so no training
 * reaches a target mIoU; what the model gives is the step. The configuration's batch is
 * split over the study's four GPUs per machine (data parallelism: the gradients'
 * all-reduce is benchmark 5's, not counted here), each GPU's step at the configuration's
 * crop is timed on each platform's modelled V100 with its whole memory, without LMS (where
 * it fits) and under lru, prefetch and hybrid, and an epoch is Cityscapes' 2975 training
 * images (the study's) over the configuration's batch, steps of that time, for
 * [run] epochs epochs (the reference's 175). */
#include "config.h"

#include "tools/study_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/ini.h"
#include "core/config/setup.h"
#include "tools/steptime_internal.h"

enum { GPUS = 4, NPOL = 4 };
#define TRAIN_IMAGES 2975 /* Cityscapes' fine training split */

static const char *const policies[NPOL] = { "none", "lru", "prefetch", "hybrid" };

/* The configuration's batch, crop and epochs. */
static int read_config(const struct tb_study *s, int *batch, int *crop, int *epochs, struct tb_err *err)
{
    struct tb_config *cfg = NULL;
    struct tb_setup *setup = NULL;
    int rc = tb_config_load(s->rq->config, &cfg, err);
    for (int i = 0; !rc && i < s->rq->nsets; i++)
        rc = tb_config_set(cfg, s->rq->sets[i], err);
    if (!rc)
        rc = tb_setup_resolve(cfg, &setup, err);
    if (!rc) {
        *batch = (int)setup->settings.train.batch;
        *epochs = setup->settings.run.epochs;
        const struct tb_setup_slot *ds = &setup->slot[TB_SEC_DATASET];
        *crop = (int)tb_section_int(ds->section, "crop"); /* the loader's key, in every [dataset] */
        if (*crop <= 0)
            for (const struct tb_key *k = ds->plugin->p->keys; k && k->name; k++)
                if (strcmp(k->name, "width") == 0)
                    *crop = (int)tb_section_int(ds->section, "width");
        if (*crop <= 0)
            rc = tb_err_set(err, TB_ERR_CONFIG,
                            "%s: the training crop is unknown ([dataset] crop, or width): the modelled step needs "
                            "the image size",
                            s->rq->config);
    }
    tb_setup_free(setup);
    tb_config_free(cfg);
    return rc;
}

int tb_study_time_sim(struct tb_study *s, struct tb_err *err)
{
    int batch, crop, epochs;
    int rc = read_config(s, &batch, &crop, &epochs, err);
    if (rc)
        return rc;
    const int per_gpu = batch >= GPUS ? batch / GPUS : 1;
    const int steps = (TRAIN_IMAGES + per_gpu * GPUS - 1) / (per_gpu * GPUS);
    char w[32], h[32], b[32], plat[64], pol[64];
    snprintf(w, sizeof w, "dataset.width=%d", crop);
    snprintf(h, sizeof h, "dataset.height=%d", crop);
    snprintf(b, sizeof b, "train.batch=%d", per_gpu);
    double step_s[TB_STUDY_NPLAT][NPOL], need[TB_STUDY_NPLAT];
    char why[TB_STUDY_NPLAT][NPOL][160];
    for (int p = 0; p < TB_STUDY_NPLAT; p++) {
        snprintf(plat, sizeof plat, "platform.plugin=%s", tb_study_platforms[p]);
        /* What the step needs: on a device too large to run out. */
        const char *big[] = { "dataset.plugin=synthetic", "dataset.crop=0", w, h, b, plat, "swap.plugin=none",
                              "backend.device_memory=1T" };
        struct tb_step_timing t;
        need[p] = NAN;
        tb_study_progress(s, "%s, the step's footprint", tb_study_platforms[p]);
        if (tb_study_time_step(s, big, 8, &t, err) == TB_OK)
            need[p] = (double)t.peak;
        for (int q = 0; q < NPOL; q++) {
            s->frac = (NPOL * p + q + 1.0) / (NPOL * TB_STUDY_NPLAT);
            tb_study_progress(s, "%s, %s", tb_study_platforms[p], policies[q]);
            snprintf(pol, sizeof pol, "swap.plugin=%s", policies[q]);
            const char *extra[] = { "dataset.plugin=synthetic", "dataset.crop=0", w, h, b, plat, pol };
            struct tb_err cerr;
            tb_err_clear(&cerr);
            step_s[p][q] = NAN;
            why[p][q][0] = '\0';
            if (tb_study_time_step(s, extra, 7, &t, &cerr))
                snprintf(why[p][q], sizeof why[p][q], "%s",
                         cerr.status == TB_ERR_NOMEM && q == 0 ? "does not fit without LMS" : "failed");
            else
                step_s[p][q] = t.step_s;
        }
    }

    FILE *md = s->md;
    fprintf(md, "## 1. Training time per platform\n\n");
    fprintf(md,
            "**Predicted.** A modelled device computes no value, so no training reaches a target mIoU here: the "
            "model gives the step. The configuration's batch %d over the study's four GPUs per machine is %d per "
            "GPU, at %dx%d; each GPU's step is timed on each platform's modelled GPU with its whole memory, "
            "without LMS and under each policy. An epoch is Cityscapes' %d training images, %d steps; the run, "
            "[run] epochs = %d. The gradients' all-reduce across the four GPUs is not counted here (benchmark 5 "
            "models it).\n\n",
            batch, per_gpu, crop, crop, TRAIN_IMAGES, steps, epochs);
    fprintf(md, "| platform | step needs | policy | step s | epoch min | %d epochs h | with LMS / without |\n"
                "|---|---|---|---|---|---|---|\n",
                epochs);
    const char *cats[TB_STUDY_NPLAT];
    double lru[TB_STUDY_NPLAT], pf[TB_STUDY_NPLAT], hy[TB_STUDY_NPLAT];
    for (int p = 0; p < TB_STUDY_NPLAT; p++) {
        cats[p] = tb_study_platforms[p];
        for (int q = 0; q < NPOL; q++) {
            fprintf(md, "| %s | ", tb_study_platforms[p]);
            if (isnan(need[p]))
                fprintf(md, "? | ");
            else
                fprintf(md, "%.2f GiB | ", need[p] / 1073741824.0);
            if (isnan(step_s[p][q])) {
                fprintf(md, "%s | %s | | | |\n", policies[q], why[p][q]);
                continue;
            }
            const double epoch_s = steps * step_s[p][q];
            fprintf(md, "%s | %.3f | %.1f | %.1f | ", policies[q], step_s[p][q], epoch_s / 60,
                    epochs * epoch_s / 3600);
            if (q > 0 && !isnan(step_s[p][0]))
                fprintf(md, "%.2f |\n", step_s[p][q] / step_s[p][0]);
            else
                fprintf(md, "- |\n");
        }
        lru[p] = steps * epochs * step_s[p][1] / 3600;
        pf[p] = steps * epochs * step_s[p][2] / 3600;
        hy[p] = steps * epochs * step_s[p][3] / 3600;
    }
    fprintf(md, "\nIBM LMS's overheads in the study (at 700x700): %.0f%% (ac922), %.0f%% (dgx-station), %.0f%% "
                "(p3.8xlarge); benchmark 3 puts the policies beside them.\n",
            tb_lms_published("ac922", 1), tb_lms_published("dgx-station", 1), tb_lms_published("p3.8xlarge", 1));
    char title[160];
    snprintf(title, sizeof title, "Training time per platform, predicted: %d epochs, batch %d over 4 GPUs at %dx%d",
             epochs, batch, crop, crop);
    const struct tb_study_bars bars = {
        .name = "training-time",
        .alt = "training time",
        .title = title,
        .xlabel = "platform (modelled V100s and link)",
        .ylabel = "hours",
        .note = "predicted by the sim backend; the all-reduce not counted",
        .categories = cats,
        .n = TB_STUDY_NPLAT,
        .decimals = 1,
        .lru = lru,
        .prefetch = pf,
        .hybrid = hy,
        .published = NULL,
    };
    return tb_study_policy_bars(s, &bars, err);
}
