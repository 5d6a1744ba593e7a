/* trainer_setup.c: a training run's state built and torn down
 * (core/train/trainer_setup_internal.h): the settings read once, the run directory, the
 * dataset splits with their loaders and the batches they hand out, the training and
 * validation graphs, the loss terms and what the reports and checkpoints need.
 * Everything made here belongs to the struct tb_trainer and is freed by
 * tb_trainer_teardown(). */
#include "config.h"

#include "core/train/trainer_setup_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <trainbig/clock.h>

#include "core/data/batch.h"
#include "core/train/checkpoint.h"
#include "core/train/host_memory.h"
#include "core/engine/graph_internal.h"
#include "core/util/log_control.h"

/* ------------------------------------------------------------------ splits */

/* Opens a split and decides the size of its batch images. */
static int open_split(struct tb_trainer *t, const char *name, struct tb_split *sp, struct tb_err *err)
{
    const struct tb_plugin *p = t->s->slot[TB_SEC_DATASET].plugin->p;
    sp->name = name;
    sp->ops = p->ops.dataset;
    int rc = tb_dataset_open(p, t->s->slot[TB_SEC_DATASET].section, name, &sp->ctx, err);
    if (rc)
        return tb_err_prefix(err, "dataset '%s', split %s", p->name, name);
    sp->count = sp->ops->count(sp->ctx);
    if (sp->count == 0)
        return tb_err_set(err, TB_ERR_CONFIG, "dataset '%s': the %s split has no samples", p->name, name);
    uint32_t w, h;
    rc = tb_data_image_size(sp->ops, sp->ctx, &t->data, strcmp(name, "train") == 0, &w, &h, err);
    if (rc)
        return tb_err_prefix(err, "dataset '%s', %s split", p->name, name);
    sp->width = (int)w;
    sp->height = (int)h;
    return TB_OK;
}

/* The loader of split sp, whose inputs besides the image and labels (sp->inputs, from its
 * graph) the model makes from each sample. */
static int open_loader(struct tb_trainer *t, struct tb_split *sp, bool train, int batch, struct tb_err *err)
{
    char what[256];
    snprintf(what, sizeof what, "dataset '%s', %s split", t->s->slot[TB_SEC_DATASET].plugin->p->name, sp->name);
    const struct tb_backend_ops *be = t->run.engine.ops;
    const struct tb_host_allocator pinned = { be->host_alloc, be->host_free, t->run.engine.ctx };
    const struct tb_data_loader_config lc = {
        .ops = sp->ops,
        .ctx = sp->ctx,
        .what = what,
        .train = train,
        .batch = batch,
        .rank = t->world->rank,
        .world = t->world->size,
        .seed = t->run.engine.seed,
        .width = (uint32_t)sp->width,
        .height = (uint32_t)sp->height,
        .set = &t->data,
        .host = be->host_alloc && be->host_free ? &pinned : NULL,
        .spec = &sp->inputs,
    };
    return tb_data_loader_open(&lc, &sp->loader, err);
}

static void close_split(struct tb_split *sp)
{
    tb_data_loader_close(sp->loader);
    sp->loader = NULL;
    tb_inputs_spec_free(&sp->inputs);
    if (sp->ctx)
        sp->ops->head.destroy(sp->ctx);
    sp->ctx = NULL;
}

/* ------------------------------------------------------------------ batches */

int tb_trainer_next_batch(struct tb_trainer *t, struct tb_split *sp, struct tb_loaded *lb, struct tb_err *err)
{
    const double w0 = tb_now();
    int rc = tb_data_loader_next(sp->loader, lb, err);
    if (sp == &t->train)
        t->wait_seconds += tb_now() - w0;
    if (rc)
        return rc;
    if (lb->nskipped)
        tb_progress_clear(&t->progress);
    for (int i = 0; i < lb->nskipped; i++)
        tb_log(TB_LOG_WARN, "%s split: skipped %s", sp->name, lb->skipped[i]);
    t->skipped += (uint64_t)lb->nskipped;
    return TB_OK;
}

/* ------------------------------------------------------------------ settings */

static int read_settings(struct tb_trainer *t, struct tb_err *err)
{
    const struct tb_section *tr = t->s->slot[TB_SEC_TRAIN].section;
    struct tb_train_settings *c = &t->cfg;
    *c = t->s->settings.train;
    if (c->val_batch == 0)
        c->val_batch = c->batch;
    t->data = t->s->settings.data;
    /* The batch is the global one: each rank takes an equal share. */
    const int ranks = t->world->size;
    if (c->batch % ranks)
        return tb_err_set(err, TB_ERR_CONFIG,
                          "%s: [train] batch = %d cannot be shared equally by %d ranks: make it a multiple of %d (it "
                          "is the batch of all ranks together)",
                          tb_section_origin(tr, "batch"), c->batch, ranks, ranks);
    if (c->val_batch % ranks)
        return tb_err_set(err, TB_ERR_CONFIG,
                          "%s: [train] val_batch = %d cannot be shared equally by %d ranks: make it a multiple of %d",
                          tb_section_origin(tr, c->val_batch == c->batch ? "batch" : "val_batch"), c->val_batch, ranks,
                          ranks);
    /* The target is judged on validation: without any it could never be reached. */
    if (c->target_miou > 0 && c->val_every == 0)
        return tb_err_set(err, TB_ERR_CONFIG,
                          "%s: [train] target_miou = %g is judged on validation, but [train] val_every = 0 (%s) "
                          "never validates: set val_every > 0, or target_miou = 0 for none",
                          tb_section_origin(tr, "target_miou"), c->target_miou, tb_section_origin(tr, "val_every"));
    t->rank_batch = c->batch / ranks;
    t->rank_val_batch = c->val_batch / ranks;
    t->sync_bn = ranks > 1 && t->s->settings.sync_bn;
    return TB_OK;
}

/* ------------------------------------------------------------------ the run directory */

int tb_trainer_make_rundir(struct tb_trainer *t, struct tb_err *err)
{
    const struct tb_section *run = t->s->slot[TB_SEC_RUN].section;
    if (!t->lead)
        return TB_OK; /* rank 0 writes the run directory */
    if (t->resume) {
        int rc = tb_rundir_open_resumed(&t->rundir, t->resume, err);
        if (!rc)
            tb_checkpoint_sweep_temps(t->rundir.fd, t->rundir.path); /* what a killed run was writing */
        return rc;
    }
    return tb_rundir_create(&t->rundir, t->s->settings.run.output, t->s->settings.run.name,
                            tb_section_origin(run, "output"), err);
}

/* ------------------------------------------------------------------ graphs and terms */

/* The loss terms: the graph's losses, then its (1,1,1,1) outputs that are not losses. */
static void find_terms(struct tb_trainer *t)
{
    const struct tb_graph *g = t->tg;
    for (size_t i = 0; i < g->nlosses && t->nterms < TB_TERMS_MAX; i++)
        t->terms[t->nterms++] =
            (struct tb_term){ g->losses[i].name, g->losses[i].weight, tb_graph_loss_sums_images(g, g->losses[i].x), 0 };
    for (size_t i = 0; i < g->noutputs && t->nterms < TB_TERMS_MAX; i++) {
        struct tb_shape sh = g->outputs[i].x->desc.shape;
        if (sh.n == 1 && sh.c == 1 && sh.h == 1 && sh.w == 1 && g->outputs[i].x->desc.dtype == TB_F32)
            t->terms[t->nterms++] =
                (struct tb_term){ g->outputs[i].name, 0.0f, tb_graph_loss_sums_images(g, g->outputs[i].x), 0 };
    }
}

/* Before anything big is allocated: what training will take from host memory (device
 * memory where that is host memory, swap space, the loaders' batches, validation's
 * logits, a checkpoint) fits in what the host has. */
static int check_host_memory(struct tb_trainer *t, bool validate, struct tb_err *err)
{
    const uint64_t slots = (uint64_t)t->data.prefetch + 1; /* the loader's ring (dataloader.c) */
    uint64_t buffers = slots * tb_batch_bytes(t->rank_batch, t->train.height, t->train.width, &t->train.inputs);
    if (validate)
        buffers += slots * tb_batch_bytes(t->rank_val_batch, t->val.height, t->val.width, &t->val.inputs) +
                   (uint64_t)t->rank_val_batch * (uint64_t)t->nclasses * (uint64_t)t->val.height *
                       (uint64_t)t->val.width * sizeof *t->val_logits;
    char fix[512];
    const struct tb_section *train = t->s->slot[TB_SEC_TRAIN].section, *data = t->s->slot[TB_SEC_DATASET].section;
    snprintf(fix, sizeof fix, "lower [train] batch = %d (%s) or the training crop, %dx%d now ([dataset] crop = %u, %s)",
             t->cfg.batch, tb_section_origin(train, "batch"), t->train.width, t->train.height, t->data.crop,
             tb_section_origin(data, "crop"));
    struct tb_graph *const gs[2] = { t->tg, t->vg };
    return tb_host_memory_check(&t->run.engine, gs, 2, buffers, true, "training", fix, NULL, err);
}

/* The graphs and loaders of training and (when it runs) validation, and their buffers. */
static int setup_graphs(struct tb_trainer *t, bool validate, struct tb_err *err)
{
    const struct tb_model_input tin = {
        t->rank_batch, 3, t->train.height, t->train.width, t->nclasses, TB_IGNORE_LABEL
    };
    const struct tb_model_input vin = {
        t->rank_val_batch, 3, t->val.height, t->val.width, t->nclasses, TB_IGNORE_LABEL
    };
    /* The graphs first, their executors (which allocate) once the host is known to hold
     * the run. */
    int rc = tb_run_build(&t->run, true, &tin, &t->tg, err);
    if (!rc)
        rc = tb_inputs_spec(&t->train.inputs, t->tg, t->run.model, t->run.model_ctx, t->rank_batch, t->train.height,
                            t->train.width, err);
    if (!rc && validate)
        rc = tb_run_build(&t->run, false, &vin, &t->vg, err);
    if (!rc && validate)
        rc = tb_inputs_spec(&t->val.inputs, t->vg, t->run.model, t->run.model_ctx, t->rank_val_batch, t->val.height,
                            t->val.width, err);
    if (!rc)
        rc = check_host_memory(t, validate, err);
    if (!rc)
        rc = tb_run_exec(&t->run, t->tg, &tin, &t->tx, err);
    if (!rc && validate && (rc = tb_run_exec(&t->run, t->vg, &vin, &t->vx, err)) == TB_OK)
        tb_exec_release(t->vx); /* it holds device memory only while it validates */
    if (!rc)
        rc = open_loader(t, &t->train, true, t->rank_batch, err);
    if (!rc && validate) {
        rc = open_loader(t, &t->val, false, t->rank_val_batch, err);
        if (!rc && tb_confusion_init(&t->confusion, t->nclasses) != 0)
            rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        size_t n = (size_t)t->rank_val_batch * (size_t)t->nclasses * (size_t)t->val.height * (size_t)t->val.width;
        if (!rc && !(t->val_logits = malloc(n * sizeof *t->val_logits)))
            rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory for validation logits (%zu bytes)", n * sizeof(float));
    }
    if (rc)
        return rc;
    t->op_seconds = calloc(tb_schedule_steps(tb_exec_schedule(t->tx)) + 1, sizeof *t->op_seconds);
    if (!t->op_seconds)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    return TB_OK;
}

/* The loss terms, the texts a checkpoint holds, and what the report and the progress
 * display know of the run. */
static int setup_reporting(struct tb_trainer *t, struct tb_err *err)
{
    find_terms(t);
    t->report = (struct tb_report){
        .epochs = t->s->settings.run.epochs,
        .ranks = t->world->size,
        .terms = t->terms,
        .nterms = t->nterms,
        .classes = t->classes,
        .nclasses = t->nclasses,
        .confusion = &t->confusion,
        .progress = &t->progress,
        .modelled = t->run.engine.modelled,
    };
    t->progress.modelled = t->run.engine.modelled;
    t->progress.batch = t->cfg.batch;
    t->progress.epochs = t->s->settings.run.epochs;
    t->progress.iters_per_epoch = t->iters_per_epoch;
    t->model_text = tb_run_model_text(t->s, t->nclasses);
    t->training_text = tb_run_training_text(t->s);
    t->config_text = tb_run_config_text(t->s);
    if (!t->model_text || !t->training_text || !t->config_text)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    return TB_OK;
}

int tb_trainer_setup(struct tb_trainer *t, struct tb_err *err)
{
    /* The run first: a modelled device may make the world its ranks, which the settings
     * share the batch over. */
    int rc = tb_run_open(&t->run, t->s, err);
    if (!rc)
        rc = read_settings(t, err);
    if (!rc)
        rc = open_split(t, "train", &t->train, err);
    if (rc)
        return rc;
    const struct tb_plugin *dp = t->s->slot[TB_SEC_DATASET].plugin->p;
    t->nclasses = (int)t->train.ops->classes(t->train.ctx, &t->classes);
    if (t->nclasses < 1 || t->nclasses > 255)
        return tb_err_set(err, TB_ERR_PLUGIN, "dataset '%s' declares %d classes; 1 to 255 are allowed", dp->name,
                          t->nclasses);
    if (t->train.count < (size_t)t->cfg.batch)
        return tb_err_set(
            err, TB_ERR_CONFIG, "%s: [train] batch = %d, but the train split of dataset '%s' has only %zu samples",
            tb_section_origin(t->s->slot[TB_SEC_TRAIN].section, "batch"), t->cfg.batch, dp->name, t->train.count);
    t->iters_per_epoch = t->train.count / (size_t)t->cfg.batch; /* the last partial batch is dropped */
    t->total_iters = t->iters_per_epoch * (uint64_t)t->s->settings.run.epochs;
    const bool validate = t->cfg.val_every > 0 || t->cfg.val_at_start;
    if (validate && (rc = open_split(t, "val", &t->val, err)))
        return tb_err_set(err, rc,
                          "%s; training validates on it ([train] val_every = %d%s): train without "
                          "validation with --set train.val_every=0%s",
                          err->msg, t->cfg.val_every, t->cfg.val_at_start ? ", val_at_start = yes" : "",
                          t->cfg.val_at_start ? " --set train.val_at_start=no" : "");
    rc = setup_graphs(t, validate, err);
    if (!rc)
        rc = setup_reporting(t, err);
    return rc;
}

void tb_trainer_teardown(struct tb_trainer *t)
{
    tb_progress_clear(&t->progress);
    tb_report_close(&t->report);
    tb_mllog_close(&t->mllog);
    free(t->model_text);
    free(t->training_text);
    free(t->config_text);
    free(t->op_seconds);
    free(t->val_logits);
    tb_confusion_fini(&t->confusion);
    /* The loaders' threads first: they may still be filling batches for the graphs. */
    close_split(&t->train);
    close_split(&t->val);
    tb_exec_free(t->tx);
    tb_exec_free(t->vx);
    tb_graph_free(t->tg);
    tb_graph_free(t->vg);
    tb_run_close(&t->run);
}
