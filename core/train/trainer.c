/* trainer.c: the training loop. Epochs of SGD steps over a shuffled training split,
 * validation on the model's inference graph (sharing the parameters by name), a log
 * line and a CSV and JSONL row per epoch, checkpoints, and a clean stop on request.
 *
 * Batches come from the data loader (dataloader.c), whose worker threads prepare them
 * while the step before runs; the time a step waits for one is reported per epoch. A
 * batch's samples and augmentation, and each step's dropout, are pure functions of the
 * seed, the epoch and the step: that is what makes a resumed run bit-identical to one
 * that never stopped. */
#include "config.h"

#include "core/train/trainer_internal.h"
#include "core/util/clock_internal.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/data/batch_internal.h"
#include "core/train/checkpoint_internal.h"
#include "core/dist/comm_internal.h"
#include "core/data/dataloader_internal.h"
#include "core/engine/graph_internal.h"
#include "core/util/log_internal.h"
#include "core/train/metrics_internal.h"
#include "core/dist/replicas_internal.h"
#include "core/train/run_internal.h"

enum { IGNORE_LABEL = 255, MAX_TERMS = 8 };

/* A loss term the log reports: one of the graph's losses (weight > 0, part of the
 * objective) or a (1,1,1,1) output the model only reports. */
struct term {
    const char *name; /* owned by the graph */
    float weight;     /* 0: reported only */
    bool sums_images; /* over ranks its value is their sum, not their mean */
    double sum;       /* over this epoch's steps */
};

struct split {
    const char *name; /* "train", "val" */
    const struct tb_dataset_ops *ops;
    void *ctx;
    size_t count;
    int width, height; /* of every image of a batch */
    struct tb_data_loader *loader;
};

struct trainer {
    const struct tb_setup *s;
    const struct tb_train_request *req;
    struct tb_run run;
    struct split train, val;
    const struct tb_class *classes;
    int nclasses;

    /* [run], [train] */
    int batch, val_batch, epochs, val_every, checkpoint_every, keep, replica_check;
    double lr, lr_power, momentum, weight_decay;
    bool poly, val_at_start;

    /* Data parallelism: the ranks, and each one's share of a batch. Rank 0 alone writes
     * the run directory, reports, checkpoints and logs. */
    const struct tb_comm *world;
    bool lead;    /* rank 0 */
    bool sync_bn; /* [model] sync_bn, with more than one rank */
    int rank_batch, rank_val_batch;
    bool stop_agreed;        /* several ranks: a stop request seen by any, agreed at the last step */
    uint64_t replica_checks; /* checks passed */

    struct tb_data_settings data; /* the loader's [dataset] keys */
    struct tb_graph *tg, *vg;
    struct tb_exec *tx, *vx;
    struct tb_confusion confusion;
    float *val_logits;
    struct term terms[MAX_TERMS];
    int nterms;

    uint64_t iters_per_epoch, total_iters, iteration;
    double last_lr;
    char rundir[4096];
    char *model_text, *training_text, *config_text;
    FILE *csv, *jsonl;

    /* progress */
    bool live;  /* a terminal: one line redrawn in place */
    bool quiet; /* [report] progress = no */
    bool line_shown;
    double run_start, last_progress, step_seconds_sum;
    uint64_t steps_timed;
    double wait_seconds;            /* this epoch: steps waiting for their batch */
    uint64_t skipped;               /* this epoch: bad samples skipped (training and validation) */
    struct tb_swap_stats swap_mark; /* both executors' swap counters when the epoch began */
    double *op_seconds;             /* this epoch: per schedule step of the training graph */
};

/* ------------------------------------------------------------------ progress */

static void progress_clear(struct trainer *t)
{
    if (t->live && t->line_shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    t->line_shown = false;
}

static void format_duration(double s, char *buf, size_t size)
{
    long v = s > 0 && s < 1e8 ? (long)(s + 0.5) : 0;
    if (v >= 3600)
        snprintf(buf, size, "%ld:%02ld:%02ld", v / 3600, v / 60 % 60, v % 60);
    else
        snprintf(buf, size, "%ld:%02ld", v / 60, v % 60);
}

static void progress(struct trainer *t, uint64_t epoch, uint64_t step_in_epoch, double loss, bool force)
{
    if (t->quiet)
        return;
    const double tnow = tb_now();
    const double interval = t->live ? 0.25 : 30.0;
    if (!force && tnow - t->last_progress < interval)
        return;
    t->last_progress = tnow;
    const double per_step = t->steps_timed ? t->step_seconds_sum / (double)t->steps_timed : 0;
    const double ips = per_step > 0 ? t->batch / per_step : 0;
    char eta[32];
    format_duration(per_step * (double)(t->total_iters - t->iteration), eta, sizeof eta);
    char line[256];
    snprintf(line, sizeof line, "epoch %" PRIu64 "/%d  step %" PRIu64 "/%" PRIu64 "  %.1f img/s  loss %.4f  ETA %s",
             epoch + 1, t->epochs, step_in_epoch, t->iters_per_epoch, ips, loss, eta);
    if (t->live) {
        fprintf(stderr, "\r\033[K%s", line);
        t->line_shown = true;
    } else {
        tb_log(TB_LOG_INFO, "%s", line);
    }
    fflush(stderr);
}

/* ------------------------------------------------------------------ setup */

/* Opens a split and decides the size of its batch images. */
static int open_split(struct trainer *t, const char *name, struct split *sp, struct tb_err *err)
{
    const struct tb_plugin *p = t->s->slot[TB_SEC_DATASET].plugin->p;
    sp->name = name;
    sp->ops = p->ops.dataset;
    int rc = sp->ops->open(t->s->slot[TB_SEC_DATASET].section, name, &sp->ctx, err);
    if (rc) {
        sp->ctx = NULL;
        return tb_err_prefix(err, "dataset '%s', split %s", p->name, name);
    }
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

static int open_loader(struct trainer *t, struct split *sp, bool train, int batch, struct tb_err *err)
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
    };
    return tb_data_loader_open(&lc, &sp->loader, err);
}

static void close_split(struct split *sp)
{
    tb_data_loader_close(sp->loader);
    sp->loader = NULL;
    if (sp->ctx)
        sp->ops->close(sp->ctx);
    sp->ctx = NULL;
}

static int read_settings(struct trainer *t, struct tb_err *err)
{
    const struct tb_section *run = t->s->slot[TB_SEC_RUN].section, *tr = t->s->slot[TB_SEC_TRAIN].section;
    t->epochs = (int)tb_section_int(run, "epochs");
    t->batch = (int)tb_section_int(tr, "batch");
    t->val_batch = (int)tb_section_int(tr, "val_batch");
    if (t->val_batch == 0)
        t->val_batch = t->batch;
    t->lr = tb_section_float(tr, "lr");
    t->poly = strcmp(tb_section_string(tr, "lr_policy"), "poly") == 0;
    t->lr_power = tb_section_float(tr, "lr_power");
    t->momentum = tb_section_float(tr, "momentum");
    t->weight_decay = tb_section_float(tr, "weight_decay");
    t->val_every = (int)tb_section_int(tr, "val_every");
    t->val_at_start = tb_section_bool(tr, "val_at_start");
    t->checkpoint_every = (int)tb_section_int(tr, "checkpoint_every");
    t->keep = (int)tb_section_int(tr, "keep");
    t->replica_check = (int)tb_section_int(tr, "replica_check");
    int rc = tb_data_settings_read(t->s->slot[TB_SEC_DATASET].section, &t->data, err);
    if (rc)
        return rc;
    if (t->batch > 1 << 16)
        return tb_err_set(err, TB_ERR_CONFIG, "%s: [train] batch = %d is more than this trainer handles (65536)",
                          tb_section_origin(tr, "batch"), t->batch);
    /* The batch is the global one: each rank takes an equal share. */
    const int ranks = t->world->size;
    if (t->batch % ranks)
        return tb_err_set(err, TB_ERR_CONFIG,
                          "%s: [train] batch = %d cannot be shared equally by %d ranks: make it a multiple of %d (it "
                          "is the batch of all ranks together)",
                          tb_section_origin(tr, "batch"), t->batch, ranks, ranks);
    if (t->val_batch % ranks)
        return tb_err_set(err, TB_ERR_CONFIG,
                          "%s: [train] val_batch = %d cannot be shared equally by %d ranks: make it a multiple of %d",
                          tb_section_origin(tr, t->val_batch == t->batch ? "batch" : "val_batch"), t->val_batch, ranks,
                          ranks);
    t->rank_batch = t->batch / ranks;
    t->rank_val_batch = t->val_batch / ranks;
    t->sync_bn = ranks > 1 && tb_section_bool(t->s->slot[TB_SEC_MODEL].section, "sync_bn");
    return TB_OK;
}

/* The run directory: output/name, or output/name.N when that already holds files. */
static int make_rundir(struct trainer *t, struct tb_err *err)
{
    const struct tb_section *run = t->s->slot[TB_SEC_RUN].section;
    if (!t->lead)
        return TB_OK; /* rank 0 writes the run directory */
    if (t->req->resume) {
        const char *slash = strrchr(t->req->resume, '/');
        if (!slash)
            snprintf(t->rundir, sizeof t->rundir, ".");
        else
            snprintf(t->rundir, sizeof t->rundir, "%.*s", (int)(slash - t->req->resume), t->req->resume);
        if (!t->rundir[0])
            snprintf(t->rundir, sizeof t->rundir, "/");
        return TB_OK;
    }
    const char *output = tb_section_string(run, "output"), *name = tb_section_string(run, "name");
    if (mkdir(output, 0777) != 0 && errno != EEXIST)
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot create the output directory ([run] output, %s): %s", output,
                          tb_section_origin(run, "output"), strerror(errno));
    for (int n = 1; n < 10000; n++) {
        if (n == 1)
            snprintf(t->rundir, sizeof t->rundir, "%s/%s", output, name);
        else
            snprintf(t->rundir, sizeof t->rundir, "%s/%s.%d", output, name, n);
        if (mkdir(t->rundir, 0777) == 0)
            return TB_OK;
        if (errno != EEXIST)
            return tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot create the run directory: %s", t->rundir,
                              strerror(errno));
        DIR *d = opendir(t->rundir);
        if (!d)
            continue; /* a file of that name: take the next */
        bool empty = true;
        for (struct dirent *de; empty && (de = readdir(d));)
            empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
        closedir(d);
        if (empty)
            return TB_OK;
    }
    return tb_err_set(err, TB_ERR_RUNTIME, "%s/%s: 9999 run directories exist already; choose another [run] name",
                      output, name);
}

static int open_report(struct trainer *t, const char *key, const char *file, FILE **out, bool *fresh,
                       struct tb_err *err)
{
    const struct tb_section *rep = t->s->slot[TB_SEC_REPORT].section;
    const char *v = tb_section_string(rep, key);
    char path[4200];
    if (v[0])
        snprintf(path, sizeof path, "%s", v);
    else
        snprintf(path, sizeof path, "%s/%s", t->rundir, file);
    struct stat st;
    *fresh = stat(path, &st) != 0 || st.st_size == 0;
    *out = fopen(path, "a");
    if (!*out)
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot open the %s report ([report] %s): %s", path, key, key,
                          strerror(errno));
    return TB_OK;
}

/* The loss terms: the graph's losses, then its (1,1,1,1) outputs that are not losses. */
static void find_terms(struct trainer *t)
{
    const struct tb_graph *g = t->tg;
    for (size_t i = 0; i < g->nlosses && t->nterms < MAX_TERMS; i++)
        t->terms[t->nterms++] =
            (struct term){ g->losses[i].name, g->losses[i].weight, tb_graph_loss_sums_images(g, g->losses[i].x), 0 };
    for (size_t i = 0; i < g->noutputs && t->nterms < MAX_TERMS; i++) {
        struct tb_shape sh = g->outputs[i].x->desc.shape;
        if (sh.n == 1 && sh.c == 1 && sh.h == 1 && sh.w == 1 && g->outputs[i].x->desc.dtype == TB_F32)
            t->terms[t->nterms++] =
                (struct term){ g->outputs[i].name, 0.0f, tb_graph_loss_sums_images(g, g->outputs[i].x), 0 };
    }
}

static int setup(struct trainer *t, struct tb_err *err)
{
    int rc = read_settings(t, err);
    if (!rc)
        rc = tb_run_open(&t->run, t->s, err);
    if (!rc)
        rc = open_split(t, "train", &t->train, err);
    if (rc)
        return rc;
    const struct tb_plugin *dp = t->s->slot[TB_SEC_DATASET].plugin->p;
    t->nclasses = (int)t->train.ops->classes(t->train.ctx, &t->classes);
    if (t->nclasses < 1 || t->nclasses > 255)
        return tb_err_set(err, TB_ERR_PLUGIN, "dataset '%s' declares %d classes; 1 to 255 are allowed", dp->name,
                          t->nclasses);
    if (t->train.count < (size_t)t->batch)
        return tb_err_set(
            err, TB_ERR_CONFIG, "%s: [train] batch = %d, but the train split of dataset '%s' has only %zu samples",
            tb_section_origin(t->s->slot[TB_SEC_TRAIN].section, "batch"), t->batch, dp->name, t->train.count);
    t->iters_per_epoch = t->train.count / (size_t)t->batch; /* the last partial batch is dropped */
    t->total_iters = t->iters_per_epoch * (uint64_t)t->epochs;
    const bool validate = t->val_every > 0 || t->val_at_start;
    if (validate && (rc = open_split(t, "val", &t->val, err)))
        return rc;

    const struct tb_model_input tin = { t->rank_batch, 3, t->train.height, t->train.width, t->nclasses, IGNORE_LABEL };
    rc = tb_run_graph(&t->run, true, &tin, &t->tg, &t->tx, err);
    if (!rc)
        rc = open_loader(t, &t->train, true, t->rank_batch, err);
    if (!rc && validate) {
        const struct tb_model_input vin = {
            t->rank_val_batch, 3, t->val.height, t->val.width, t->nclasses, IGNORE_LABEL
        };
        rc = tb_run_graph(&t->run, false, &vin, &t->vg, &t->vx, err);
        if (!rc)
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
    find_terms(t);
    t->model_text = tb_run_model_text(t->s, t->nclasses);
    t->training_text = tb_run_training_text(t->s);
    t->config_text = tb_run_config_text(t->s);
    if (!t->model_text || !t->training_text || !t->config_text)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    return TB_OK;
}

static void teardown(struct trainer *t)
{
    progress_clear(t);
    if (t->csv)
        fclose(t->csv);
    if (t->jsonl)
        fclose(t->jsonl);
    free(t->model_text);
    free(t->training_text);
    free(t->config_text);
    free(t->op_seconds);
    free(t->val_logits);
    tb_confusion_fini(&t->confusion);
    tb_exec_free(t->tx);
    tb_exec_free(t->vx);
    tb_graph_free(t->tg);
    tb_graph_free(t->vg);
    close_split(&t->train);
    close_split(&t->val);
    tb_run_close(&t->run);
}

/* ------------------------------------------------------------------ checkpoints */

static bool is_checkpoint_name(const char *n)
{
    unsigned e, s;
    char tail[32];
    if (sscanf(n, "epoch-%4u%31s", &e, tail) != 2)
        return false;
    return strcmp(tail, ".safetensors") == 0 ||
           (sscanf(tail, "-step-%6u%31s", &s, tail) == 2 && strcmp(tail, ".safetensors") == 0);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Deletes all but the newest `keep` checkpoints of the run directory (names sort in the
 * order they were written). Only files named as the trainer names them are touched. */
static void prune_checkpoints(struct trainer *t)
{
    DIR *d = opendir(t->rundir);
    if (!d)
        return;
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (!is_checkpoint_name(de->d_name))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn)
                break;
            names = nn;
        }
        if (!(names[n] = strdup(de->d_name)))
            break;
        n++;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i + (size_t)t->keep < n; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", t->rundir, names[i]);
        if (unlink(path) == 0)
            tb_log(TB_LOG_DEBUG, "%s: removed ([train] keep = %d)", path, t->keep);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static int save_checkpoint(struct trainer *t, bool interrupted, char *path, size_t size, struct tb_err *err)
{
    const uint64_t epoch = t->iteration / t->iters_per_epoch, step = t->iteration % t->iters_per_epoch;
    if (interrupted && step)
        snprintf(path, size, "%s/epoch-%04" PRIu64 "-step-%06" PRIu64 ".safetensors", t->rundir, epoch + 1, step);
    else
        snprintf(path, size, "%s/epoch-%04" PRIu64 ".safetensors", t->rundir, epoch);
    if (!t->lead)
        return TB_OK; /* rank 0 writes; every rank holds the same weights */
    const struct tb_ckpt_info info = {
        .epoch = epoch,
        .iteration = t->iteration,
        .seed = t->run.engine.seed,
        .lr = t->last_lr,
        .model = t->model_text,
        .training = t->training_text,
        .config = t->config_text,
    };
    int rc = tb_checkpoint_save(path, &t->run.engine, &info, err);
    if (rc)
        return rc;
    progress_clear(t);
    tb_log(TB_LOG_INFO, "checkpoint %s", path);
    prune_checkpoints(t);
    return TB_OK;
}

static int resume(struct trainer *t, struct tb_err *err)
{
    struct tb_ckpt_info info = { .model = t->model_text };
    char *there = NULL;
    int rc = tb_checkpoint_load(t->req->resume, &t->run.engine, true, &info, &there, err);
    if (rc)
        return rc;
    if (strcmp(there, t->training_text) != 0) {
        char diff[600];
        tb_text_first_difference(t->training_text, there, diff, sizeof diff);
        tb_log(TB_LOG_WARN,
               "%s: the training settings differ from the checkpoint's (%s): training continues from its weights, but "
               "will not match a run that never stopped",
               t->req->resume, diff);
    }
    free(there);
    if (info.seed != t->run.engine.seed)
        tb_log(TB_LOG_WARN, "%s: written with [run] seed = %" PRIu64 ", continuing with seed %" PRIu64, t->req->resume,
               info.seed, t->run.engine.seed);
    t->iteration = info.iteration;
    t->last_lr = info.lr;
    tb_log(TB_LOG_INFO, "resumed from %s: %" PRIu64 " epochs and %" PRIu64 " steps done", t->req->resume, info.epoch,
           info.iteration);
    return TB_OK;
}

/* ------------------------------------------------------------------ steps */

/* The next batch of a split's loader, timed; its skipped samples logged and counted. */
static int next_batch(struct trainer *t, struct split *sp, struct tb_loaded *lb, struct tb_err *err)
{
    const double w0 = tb_now();
    int rc = tb_data_loader_next(sp->loader, lb, err);
    if (sp == &t->train)
        t->wait_seconds += tb_now() - w0;
    if (rc)
        return rc;
    if (lb->nskipped)
        progress_clear(t);
    for (int i = 0; i < lb->nskipped; i++)
        tb_log(TB_LOG_WARN, "%s split: skipped %s", sp->name, lb->skipped[i]);
    t->skipped += (uint64_t)lb->nskipped;
    return TB_OK;
}

static int set_inputs(struct tb_exec *x, const struct tb_graph *g, const struct tb_batch *b, struct tb_err *err)
{
    const struct {
        const char *name;
        const void *data;
    } in[] = { { "image", b->image }, { "canny", b->canny }, { "labels", b->labels }, { "edges", b->edges } };
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        if (!tb_graph_find(g, in[i].name))
            continue;
        int rc = tb_exec_set_input(x, in[i].name, in[i].data, err);
        if (rc)
            return rc;
    }
    return TB_OK;
}

/* Data parallel: the step's loss terms become the global batch's (a term that sums over
 * images is the ranks' sum, one that averages is their mean), and a stop request seen by
 * any rank becomes every rank's, so that all stop after the same step. One collective. */
static int reduce_step(struct trainer *t, double *values, struct tb_err *err)
{
    if (t->world->size == 1)
        return TB_OK;
    double v[MAX_TERMS + 1];
    memcpy(v, values, (size_t)t->nterms * sizeof *v);
    v[t->nterms] = t->req->stop && *t->req->stop ? 1.0 : 0.0;
    int rc = tb_comm_allreduce(v, (size_t)t->nterms + 1, TB_COMM_F64, TB_COMM_SUM, err);
    if (rc)
        return rc;
    for (int i = 0; i < t->nterms; i++)
        values[i] = t->terms[i].sums_images ? v[i] : v[i] / t->world->size;
    t->stop_agreed = v[t->nterms] > 0;
    return TB_OK;
}

/* One SGD step on the batch of step `it`; *loss receives the objective. */
static int train_step(struct trainer *t, double *loss, struct tb_err *err)
{
    const uint64_t epoch = t->iteration / t->iters_per_epoch, step = t->iteration % t->iters_per_epoch;
    struct tb_loaded lb;
    int rc = next_batch(t, &t->train, &lb, err);
    if (!rc)
        rc = set_inputs(t->tx, t->tg, lb.b, err);
    if (!rc)
        rc = tb_exec_forward(t->tx, t->iteration, err);
    double values[MAX_TERMS], objective = 0;
    for (int i = 0; !rc && i < t->nterms; i++) {
        float v;
        rc = tb_exec_read(t->tx, t->terms[i].name, &v, err);
        values[i] = v;
    }
    if (!rc)
        rc = reduce_step(t, values, err);
    for (int i = 0; !rc && i < t->nterms; i++)
        objective += t->terms[i].weight * values[i];
    if (!rc && !isfinite(objective)) {
        char parts[512];
        size_t o = 0;
        for (int i = 0; i < t->nterms && o < sizeof parts; i++)
            o += (size_t)snprintf(parts + o, sizeof parts - o, "%s%s %g", i ? ", " : "", t->terms[i].name, values[i]);
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "epoch %" PRIu64 ", step %" PRIu64 ": the loss is not finite (%s); "
                          "training stopped: lower [train] lr, or resume from the last checkpoint",
                          epoch + 1, step + 1, parts);
    }
    if (!rc)
        rc = tb_exec_backward(t->tx, err);
    const double lr = t->poly ? tb_lr_poly(t->lr, t->iteration, t->total_iters, t->lr_power) : t->lr;
    if (!rc)
        rc = tb_sgd_step(&t->run.engine, (float)lr, (float)t->momentum, (float)t->weight_decay, err);
    if (rc)
        return tb_err_prefix(err, "epoch %" PRIu64 ", step %" PRIu64, epoch + 1, step + 1);
    for (int i = 0; i < t->nterms; i++)
        t->terms[i].sum += values[i];
    const struct tb_schedule *sch = tb_exec_schedule(t->tx);
    const double *secs = tb_exec_step_seconds(t->tx);
    for (size_t i = 0; i < tb_schedule_steps(sch); i++)
        t->op_seconds[i] += secs[i];
    t->last_lr = lr;
    *loss = objective;
    return TB_OK;
}

/* Mean softmax cross-entropy of n images' logits over their labelled pixels: the plain
 * validation loss. *pixels receives how many pixels counted. */
static double val_ce(const float *logits, const uint8_t *labels, int n, int k, size_t hw, uint64_t *pixels)
{
    double sum = 0;
    uint64_t count = 0;
    for (int i = 0; i < n; i++)
        for (size_t p = 0; p < hw; p++) {
            uint8_t y = labels[(size_t)i * hw + p];
            if (y >= k)
                continue;
            const float *l = logits + (size_t)i * k * hw + p;
            float m = l[0];
            for (int c = 1; c < k; c++)
                m = l[(size_t)c * hw] > m ? l[(size_t)c * hw] : m;
            double z = 0;
            for (int c = 0; c < k; c++)
                z += exp((double)(l[(size_t)c * hw] - m));
            sum += log(z) + m - l[(size_t)y * hw];
            count++;
        }
    *pixels += count;
    return sum;
}

/* Runs the validation split; *miou, *acc, *loss receive the results (NaN for none).
 * *stopped is set, and nothing else, when a stop request cuts it short. */
static int validate(struct trainer *t, double *miou, double *acc, double *loss, bool *stopped, struct tb_err *err)
{
    tb_confusion_clear(&t->confusion);
    const size_t hw = (size_t)t->val.width * (size_t)t->val.height;
    double ce = 0;
    uint64_t pixels = 0, bad = 0;
    const uint64_t batches = tb_data_loader_batches(t->val.loader);
    tb_data_loader_start(t->val.loader, 0, batches);
    for (uint64_t k = 0; k < batches; k++) {
        /* With several ranks a stop waits for the end of validation: they must agree. */
        if (t->world->size == 1 && t->req->stop && *t->req->stop) {
            *stopped = true;
            return TB_OK;
        }
        struct tb_loaded lb;
        int rc = next_batch(t, &t->val, &lb, err);
        const int n = lb.count;
        if (!rc)
            rc = set_inputs(t->vx, t->vg, lb.b, err);
        if (!rc)
            rc = tb_exec_forward(t->vx, 0, err);
        if (!rc)
            rc = tb_exec_read(t->vx, "seg_logits", t->val_logits, err);
        if (rc)
            return tb_err_prefix(err, "validation");
        bad +=
            tb_confusion_add(&t->confusion, t->val_logits, lb.b->labels, n, t->val.height, t->val.width, IGNORE_LABEL);
        ce += val_ce(t->val_logits, lb.b->labels, n, t->nclasses, hw, &pixels);
    }
    if (t->world->size > 1) {
        /* Each rank saw its shard: the job's counts are the sums. */
        double sums[2] = { ce, (double)pixels };
        uint64_t more[2] = { bad, 0 };
        int rc = tb_comm_allreduce(t->confusion.counts, (size_t)t->nclasses * (size_t)t->nclasses, TB_COMM_U64,
                                   TB_COMM_SUM, err);
        if (!rc)
            rc = tb_comm_allreduce(sums, 2, TB_COMM_F64, TB_COMM_SUM, err);
        if (!rc)
            rc = tb_comm_allreduce(more, 2, TB_COMM_U64, TB_COMM_SUM, err);
        if (rc)
            return tb_err_prefix(err, "validation");
        ce = sums[0];
        pixels = (uint64_t)sums[1];
        bad = more[0];
    }
    if (bad)
        tb_log(TB_LOG_WARN, "validation: %" PRIu64 " pixels had labels outside 0..%d and 255; they were not counted",
               bad, t->nclasses - 1);
    *miou = tb_confusion_miou(&t->confusion);
    *acc = tb_confusion_accuracy(&t->confusion);
    *loss = pixels ? ce / (double)pixels : NAN;
    return TB_OK;
}

/* ------------------------------------------------------------------ reports */

/* The swap counters of both executors together. */
static struct tb_swap_stats swap_total(const struct trainer *t)
{
    struct tb_swap_stats sum = { 0 };
    const struct tb_exec *xs[2] = { t->tx, t->vx };
    for (int k = 0; k < 2; k++) {
        if (!xs[k])
            continue;
        const struct tb_swap_stats *a = tb_exec_swap_stats(xs[k]);
        sum.bytes_out += a->bytes_out;
        sum.bytes_in += a->bytes_in;
        sum.swaps_out += a->swaps_out;
        sum.swaps_in += a->swaps_in;
        sum.demand_ins += a->demand_ins;
        sum.stall_seconds += a->stall_seconds;
        sum.evicting_allocs += a->evicting_allocs;
        sum.host_bytes += a->host_bytes;
    }
    return sum;
}

/* The counters since t->swap_mark, and a new mark. */
static struct tb_swap_stats swap_since_mark(struct trainer *t)
{
    struct tb_swap_stats now_ = swap_total(t), d = now_;
    const struct tb_swap_stats *m = &t->swap_mark;
    d.bytes_out -= m->bytes_out;
    d.bytes_in -= m->bytes_in;
    d.swaps_out -= m->swaps_out;
    d.swaps_in -= m->swaps_in;
    d.demand_ins -= m->demand_ins;
    d.stall_seconds -= m->stall_seconds;
    d.evicting_allocs -= m->evicting_allocs;
    t->swap_mark = now_;
    return d;
}

static void json_number(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

static void csv_number(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
}

/* A statistic over the ranks of a data-parallel run. */
struct spread {
    double min, mean, max;
};

enum {
    RS_PEAK,
    RS_DATA_WAIT,
    RS_SWAP_OUT,
    RS_SWAP_IN,
    RS_STALL,
    RS_ALLREDUCE,
    RS_ALLREDUCE_WAIT,
    RS_SECONDS,
    RS_COUNT
};
static const char *const rank_stat_names[RS_COUNT] = {
    "peak_device_bytes", "data_wait_seconds", "swap_out_bytes",         "swap_in_bytes",
    "stall_seconds",     "allreduce_seconds", "allreduce_wait_seconds", "seconds",
};

struct epoch_row {
    uint64_t epoch, steps;
    double allreduce, allreduce_wait; /* seconds: the gradient all-reduces ran, and steps waited for them */
    struct spread ranks[RS_COUNT];    /* more than one rank: each statistic's spread */
    double seconds, images_per_s, loss, lr, miou, acc, val_loss;
    double data_wait; /* seconds the steps waited for batches */
    uint64_t peak_bytes, skipped;
    /* At the epoch's end: device bytes free (under the cap, or of what the backend holds
     * without one) and the largest of them in one block; known from backends of ABI 1.7. */
    bool frag_known;
    uint64_t free_bytes, largest_free;
    struct tb_swap_stats swap; /* this epoch's, training and validation */
    bool validated;
};

/* Free device bytes: the cap (or, without one, what the backend holds) less what is in use. */
static uint64_t mem_free_bytes(const struct tb_mem_stats *ms)
{
    const uint64_t total = ms->capacity && ms->capacity != UINT64_MAX ? ms->capacity : ms->reserved;
    return total > ms->in_use ? total - ms->in_use : 0;
}

/* 1 - largest free block / free bytes: 0 when the free memory is one block (or there is
 * none), near 1 when it is in many small pieces. NaN when the backend does not say. */
static double fragmentation(const struct epoch_row *r)
{
    if (!r->frag_known)
        return NAN;
    return r->free_bytes ? 1.0 - (double)r->largest_free / (double)r->free_bytes : 0.0;
}

static void write_rows(struct trainer *t, const struct epoch_row *r)
{
    double means[MAX_TERMS];
    for (int i = 0; i < t->nterms; i++)
        means[i] = r->steps ? t->terms[i].sum / (double)r->steps : NAN;
    if (t->csv) {
        fprintf(t->csv, "%" PRIu64 ",%" PRIu64 ",", r->epoch, r->steps);
        csv_number(t->csv, r->seconds);
        fputc(',', t->csv);
        csv_number(t->csv, r->images_per_s);
        fputc(',', t->csv);
        csv_number(t->csv, r->steps ? r->loss : NAN);
        for (int i = 0; i < t->nterms; i++) {
            fputc(',', t->csv);
            csv_number(t->csv, means[i]);
        }
        fputc(',', t->csv);
        csv_number(t->csv, r->steps ? r->lr : NAN);
        fputc(',', t->csv);
        csv_number(t->csv, r->validated ? r->miou : NAN);
        fputc(',', t->csv);
        csv_number(t->csv, r->validated ? r->acc : NAN);
        fputc(',', t->csv);
        csv_number(t->csv, r->validated ? r->val_loss : NAN);
        fprintf(t->csv, ",%" PRIu64 ",", r->peak_bytes);
        csv_number(t->csv, r->steps ? r->data_wait : NAN);
        fprintf(t->csv, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",", r->skipped, r->swap.bytes_out,
                r->swap.bytes_in, r->swap.swaps_out, r->swap.swaps_in);
        csv_number(t->csv, r->swap.stall_seconds);
        fprintf(t->csv, ",%d,", t->world->size);
        csv_number(t->csv, r->steps ? r->allreduce : NAN);
        fputc(',', t->csv);
        csv_number(t->csv, r->steps ? r->allreduce_wait : NAN);
        if (r->frag_known)
            fprintf(t->csv, ",%" PRIu64 ",%" PRIu64 ",", r->free_bytes, r->largest_free);
        else
            fputs(",,,", t->csv);
        csv_number(t->csv, fragmentation(r));
        fputc('\n', t->csv);
        fflush(t->csv);
    }
    if (t->jsonl) {
        FILE *f = t->jsonl;
        fprintf(f, "{\"epoch\":%" PRIu64 ",\"steps\":%" PRIu64 ",\"seconds\":", r->epoch, r->steps);
        json_number(f, r->seconds);
        fputs(",\"images_per_s\":", f);
        json_number(f, r->images_per_s);
        fputs(",\"loss\":", f);
        json_number(f, r->steps ? r->loss : NAN);
        fputs(",\"losses\":{", f);
        for (int i = 0; i < t->nterms; i++) {
            fprintf(f, "%s\"%s\":", i ? "," : "", t->terms[i].name);
            json_number(f, means[i]);
        }
        fputs("},\"lr\":", f);
        json_number(f, r->steps ? r->lr : NAN);
        fputs(",\"miou\":", f);
        json_number(f, r->validated ? r->miou : NAN);
        fputs(",\"pixel_accuracy\":", f);
        json_number(f, r->validated ? r->acc : NAN);
        fputs(",\"val_loss\":", f);
        json_number(f, r->validated ? r->val_loss : NAN);
        fprintf(f, ",\"peak_device_bytes\":%" PRIu64 ",\"data_wait_seconds\":", r->peak_bytes);
        json_number(f, r->steps ? r->data_wait : NAN);
        fprintf(f, ",\"skipped_samples\":%" PRIu64, r->skipped);
        fprintf(f,
                ",\"swap\":{\"bytes_out\":%" PRIu64 ",\"bytes_in\":%" PRIu64 ",\"swaps_out\":%" PRIu64
                ",\"swaps_in\":%" PRIu64 ",\"demand_ins\":%" PRIu64 ",\"evicting_allocs\":%" PRIu64
                ",\"stall_seconds\":",
                r->swap.bytes_out, r->swap.bytes_in, r->swap.swaps_out, r->swap.swaps_in, r->swap.demand_ins,
                r->swap.evicting_allocs);
        json_number(f, r->swap.stall_seconds);
        fprintf(f, "},\"ranks\":%d,\"allreduce_seconds\":", t->world->size);
        json_number(f, r->steps ? r->allreduce : NAN);
        fputs(",\"allreduce_wait_seconds\":", f);
        json_number(f, r->steps ? r->allreduce_wait : NAN);
        if (r->frag_known)
            fprintf(f, ",\"free_device_bytes\":%" PRIu64 ",\"largest_free_device_bytes\":%" PRIu64, r->free_bytes,
                    r->largest_free);
        else
            fputs(",\"free_device_bytes\":null,\"largest_free_device_bytes\":null", f);
        fputs(",\"fragmentation\":", f);
        json_number(f, fragmentation(r));
        if (t->world->size > 1) {
            fputs(",\"per_rank\":{", f);
            for (int k = 0; k < RS_COUNT; k++) {
                fprintf(f, "%s\"%s\":{\"min\":", k ? "," : "", rank_stat_names[k]);
                json_number(f, r->ranks[k].min);
                fputs(",\"mean\":", f);
                json_number(f, r->ranks[k].mean);
                fputs(",\"max\":", f);
                json_number(f, r->ranks[k].max);
                fputc('}', f);
            }
            fputc('}', f);
        }
        if (r->validated) {
            fputs(",\"class_iou\":{", f);
            for (int c = 0; c < t->nclasses; c++) {
                fputs(c ? ",\"" : "\"", f);
                for (const char *p = t->classes[c].name; *p; p++)
                    fputc(*p == '"' || *p == '\\' ? '_' : *p, f);
                fputs("\":", f);
                json_number(f, tb_confusion_iou(&t->confusion, c));
            }
            fputc('}', f);
        }
        fputs("}\n", f);
        fflush(f);
    }
}

static int open_reports(struct trainer *t, struct tb_err *err)
{
    if (!t->lead)
        return TB_OK;
    bool fresh;
    int rc = open_report(t, "csv", "epochs.csv", &t->csv, &fresh, err);
    if (rc)
        return rc;
    if (fresh) {
        fputs("epoch,steps,seconds,images_per_s,loss", t->csv);
        for (int i = 0; i < t->nterms; i++)
            fprintf(t->csv, ",loss_%s", t->terms[i].name);
        fputs(",lr,miou,pixel_accuracy,val_loss,peak_device_bytes,data_wait_seconds,skipped_samples,swap_out_bytes,"
              "swap_in_bytes,"
              "swaps_out,swaps_in,stall_seconds,ranks,allreduce_seconds,allreduce_wait_seconds,free_device_bytes,"
              "largest_free_device_bytes,fragmentation\n",
              t->csv);
    }
    return open_report(t, "jsonl", "epochs.jsonl", &t->jsonl, &fresh, err);
}

static void log_epoch(struct trainer *t, const struct epoch_row *r)
{
    char losses[512] = "";
    size_t o = 0;
    for (int i = 0; r->steps && i < t->nterms && o < sizeof losses; i++)
        o += (size_t)snprintf(losses + o, sizeof losses - o, "%s%s %.4f", i ? ", " : "", t->terms[i].name,
                              t->terms[i].sum / (double)r->steps);
    char val[128] = "";
    if (r->validated)
        snprintf(val, sizeof val, ", val mIoU %.4f (pixel accuracy %.4f, loss %.4f)", r->miou, r->acc, r->val_loss);
    char skipped[256] = "";
    size_t so = 0;
    if (r->skipped)
        so += (size_t)snprintf(skipped, sizeof skipped, ", %" PRIu64 " bad samples skipped", r->skipped);
    if (r->swap.swaps_out || r->swap.swaps_in)
        snprintf(skipped + so, sizeof skipped - so, ", swapped %.2f GiB out and %.2f GiB in, stalled %.2f s",
                 (double)r->swap.bytes_out / 1073741824.0, (double)r->swap.bytes_in / 1073741824.0,
                 r->swap.stall_seconds);
    char frag[128] = "";
    if (r->frag_known)
        snprintf(frag, sizeof frag, " (now %.1f MiB free, largest block %.1f MiB: fragmentation %.0f%%)",
                 (double)r->free_bytes / 1048576.0, (double)r->largest_free / 1048576.0, 100.0 * fragmentation(r));
    progress_clear(t);
    if (r->steps)
        tb_log(TB_LOG_INFO,
               "epoch %" PRIu64 "/%d: %.1f s, %.1f img/s, loss %.4f (%s), lr %.3g%s, data wait %.2f s (%.1f%%)%s, "
               "peak device memory %.1f MiB%s",
               r->epoch, t->epochs, r->seconds, r->images_per_s, r->loss, losses, r->lr, val, r->data_wait,
               r->seconds > 0 ? 100.0 * r->data_wait / r->seconds : 0.0, skipped, (double)r->peak_bytes / 1048576.0,
               frag);
    else
        tb_log(TB_LOG_INFO, "epoch %" PRIu64 " (before training)%s", r->epoch, val);
}

static const double *op_seconds_base;

static int cmp_op_seconds(const void *a, const void *b)
{
    double x = op_seconds_base[*(const size_t *)a], y = op_seconds_base[*(const size_t *)b];
    return x < y ? 1 : x > y ? -1 : 0;
}

/* At log level debug: where the epoch's step time went, the slowest ops first. */
static void log_op_times(struct trainer *t, double epoch_seconds)
{
    const struct tb_schedule *sch = tb_exec_schedule(t->tx);
    const size_t n = tb_schedule_steps(sch);
    size_t *ix = malloc(n * sizeof *ix);
    if (!ix || !tb_log_enabled(TB_LOG_DEBUG)) {
        free(ix);
        return;
    }
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        ix[i] = i;
        total += t->op_seconds[i];
    }
    op_seconds_base = t->op_seconds;
    qsort(ix, n, sizeof *ix, cmp_op_seconds);
    tb_log(TB_LOG_DEBUG, "epoch time %.2f s: ops %.2f s, data %.2f s, rest %.2f s; slowest ops:", epoch_seconds, total,
           t->wait_seconds, epoch_seconds - total - t->wait_seconds);
    for (size_t i = 0; i < n && i < 20; i++)
        tb_log(TB_LOG_DEBUG, "  %6.3f s %5.1f%%  %s", t->op_seconds[ix[i]], 100.0 * t->op_seconds[ix[i]] / total,
               tb_schedule_step_name(sch, ix[i]));
    free(ix);
}

/* Validates, prints the class table, and fills r. */
static int run_validation(struct trainer *t, struct epoch_row *r, struct tb_err *err)
{
    bool stopped = false;
    int rc = validate(t, &r->miou, &r->acc, &r->val_loss, &stopped, err);
    if (rc == TB_OK && stopped) {
        progress_clear(t);
        tb_log(TB_LOG_INFO, "validation after epoch %" PRIu64 " cut short: a stop was requested", r->epoch);
        return TB_OK;
    }
    if (rc)
        return rc;
    r->validated = true;
    if (!t->lead)
        return TB_OK;
    progress_clear(t);
    printf("validation after epoch %" PRIu64 " (%zu images):\n", r->epoch, t->val.count);
    tb_confusion_print(&t->confusion, t->classes, stdout);
    fflush(stdout);
    return TB_OK;
}

/* ------------------------------------------------------------------ ranks */

/* Whether to stop after this step: a request on any rank, agreed by all (one rank), or
 * this process's own request (one rank). */
static bool stopping(const struct trainer *t)
{
    return t->world->size > 1 ? t->stop_agreed : t->req->stop && *t->req->stop;
}

/* Without synchronised batch norm each rank's running statistics follow its own images:
 * before they are used (validation) or kept (checkpoints) they become rank 0's, as
 * PyTorch's DistributedDataParallel does with broadcast_buffers. */
static int align_buffers(struct trainer *t, struct tb_err *err)
{
    if (t->world->size == 1 || t->sync_bn)
        return TB_OK;
    return tb_replicas_broadcast_buffers(&t->run.engine, t->world, 0, err);
}

/* Every [train] replica_check steps: the weights must be the same on every rank. */
static int check_replicas(struct trainer *t, struct tb_err *err)
{
    if (t->world->size == 1 || t->replica_check <= 0 || t->iteration % (uint64_t)t->replica_check != 0)
        return TB_OK;
    int rc = tb_replicas_check(&t->run.engine, t->world, t->sync_bn, err);
    if (rc)
        return tb_err_prefix(err, "after step %" PRIu64 " ([train] replica_check = %d)", t->iteration,
                             t->replica_check);
    t->replica_checks++;
    return TB_OK;
}

/* The epoch's statistics of every rank: min, mean and max of each, and the skipped
 * samples of all. Every rank calls it. */
static int gather_ranks(struct trainer *t, struct epoch_row *r, struct tb_err *err)
{
    double lo[RS_COUNT + 1] = {
        [RS_PEAK] = (double)r->peak_bytes,         [RS_DATA_WAIT] = r->data_wait,
        [RS_SWAP_OUT] = (double)r->swap.bytes_out, [RS_SWAP_IN] = (double)r->swap.bytes_in,
        [RS_STALL] = r->swap.stall_seconds,        [RS_ALLREDUCE] = r->allreduce,
        [RS_ALLREDUCE_WAIT] = r->allreduce_wait,   [RS_SECONDS] = r->seconds,
        [RS_COUNT] = (double)r->skipped,
    };
    double hi[RS_COUNT + 1], sum[RS_COUNT + 1];
    memcpy(hi, lo, sizeof hi);
    memcpy(sum, lo, sizeof sum);
    if (t->world->size > 1) {
        int rc = tb_comm_allreduce(lo, RS_COUNT, TB_COMM_F64, TB_COMM_MIN, err);
        if (!rc)
            rc = tb_comm_allreduce(hi, RS_COUNT, TB_COMM_F64, TB_COMM_MAX, err);
        if (!rc)
            rc = tb_comm_allreduce(sum, RS_COUNT + 1, TB_COMM_F64, TB_COMM_SUM, err);
        if (rc)
            return tb_err_prefix(err, "gathering the ranks' epoch statistics");
    }
    for (int k = 0; k < RS_COUNT; k++)
        r->ranks[k] = (struct spread){ lo[k], sum[k] / t->world->size, hi[k] };
    r->skipped = (uint64_t)sum[RS_COUNT];
    /* The job's all-reduce figures are the ranks' mean. */
    r->allreduce = r->ranks[RS_ALLREDUCE].mean;
    r->allreduce_wait = r->ranks[RS_ALLREDUCE_WAIT].mean;
    return TB_OK;
}

/* ------------------------------------------------------------------ the run */

static void resume_hint(struct trainer *t, const char *path)
{
    char sets[2048] = "";
    size_t o = 0;
    for (int i = 0; i < t->req->nsets && o < sizeof sets; i++)
        o += (size_t)snprintf(sets + o, sizeof sets - o, " --set '%s'", t->req->sets[i]);
    progress_clear(t);
    tb_log(TB_LOG_INFO, "stopped on request; to continue: trainbig train %s%s --resume %s", t->req->config_path, sets,
           path);
}

static int train_loop(struct trainer *t, struct tb_err *err)
{
    const struct tb_backend_ops *bops = t->run.engine.ops;
    void *bctx = t->run.engine.ctx;
    char path[4400];
    int rc;
    if (t->val_at_start && t->iteration == 0) {
        struct epoch_row r = { 0 };
        t->skipped = 0;
        t->swap_mark = swap_total(t);
        rc = align_buffers(t, err);
        if (!rc)
            rc = run_validation(t, &r, err);
        if (rc)
            return rc;
        r.skipped = t->skipped;
        r.swap = swap_since_mark(t);
        if ((rc = gather_ranks(t, &r, err)))
            return rc;
        log_epoch(t, &r);
        write_rows(t, &r);
    }
    if (t->iteration >= t->total_iters) {
        tb_log(TB_LOG_INFO, "nothing to do: the checkpoint has done all %d epochs ([run] epochs)", t->epochs);
        return TB_OK;
    }
    /* Every rank starts from the same weights (one seed, or one checkpoint): check it. */
    if ((rc = check_replicas(t, err)))
        return rc;
    tb_data_loader_start(t->train.loader, t->iteration, t->total_iters);
    while (t->iteration < t->total_iters) {
        const uint64_t epoch = t->iteration / t->iters_per_epoch;
        for (int i = 0; i < t->nterms; i++)
            t->terms[i].sum = 0;
        memset(t->op_seconds, 0, tb_schedule_steps(tb_exec_schedule(t->tx)) * sizeof *t->op_seconds);
        t->wait_seconds = 0;
        t->skipped = 0;
        t->swap_mark = swap_total(t);
        t->run.engine.allreduce_busy_s = t->run.engine.allreduce_wait_s = 0;
        bops->mem_reset_peak(bctx, t->run.engine.device);
        const double t0 = tb_now();
        uint64_t steps = 0;
        double loss_sum = 0;
        do {
            const double s0 = tb_now();
            double loss = 0;
            /* [report] trace: the run's second step (the first warms up), or its only one. */
            const char *trace = tb_section_string(t->s->slot[TB_SEC_REPORT].section, "trace");
            const bool traced = trace[0] && t->steps_timed == (t->total_iters - t->iteration > 1 ? 1u : 0u);
            if (traced)
                tb_exec_trace_begin(t->tx);
            rc = train_step(t, &loss, err);
            if (!rc && traced && (rc = tb_exec_trace_write(t->tx, trace, err)) == TB_OK) {
                progress_clear(t);
                tb_log(TB_LOG_INFO, "trace of step %" PRIu64 " (compute and copy streams) written to %s",
                       t->iteration + 1, trace);
            }
            if (rc)
                return rc;
            t->iteration++;
            steps++;
            if ((rc = check_replicas(t, err)))
                return rc;
            loss_sum += loss;
            t->step_seconds_sum += tb_now() - s0;
            t->steps_timed++;
            progress(t, epoch, t->iteration - epoch * t->iters_per_epoch, loss, steps == 1);
            if (stopping(t)) {
                rc = align_buffers(t, err);
                if (!rc)
                    rc = save_checkpoint(t, true, path, sizeof path, err);
                if (!rc)
                    resume_hint(t, path);
                return rc;
            }
        } while (t->iteration % t->iters_per_epoch != 0);

        struct tb_mem_stats ms = { 0 };
        bops->mem_stats(bctx, t->run.engine.device, &ms);
        const double secs = tb_now() - t0;
        progress_clear(t);
        log_op_times(t, secs);
        struct epoch_row r = {
            .epoch = epoch + 1,
            .steps = steps,
            .seconds = secs,
            .images_per_s = (double)(steps * (uint64_t)t->batch) / secs,
            .loss = loss_sum / (double)steps,
            .lr = t->last_lr,
            .peak_bytes = ms.peak,
            .frag_known = t->run.engine.largest_free_known,
            .free_bytes = mem_free_bytes(&ms),
            .largest_free = ms.largest_free,
            .data_wait = t->wait_seconds,
            .allreduce = t->run.engine.allreduce_busy_s,
            .allreduce_wait = t->run.engine.allreduce_wait_s,
        };
        const bool last = t->iteration == t->total_iters;
        if ((rc = align_buffers(t, err)))
            return rc;
        if (t->val_every > 0 && ((epoch + 1) % (uint64_t)t->val_every == 0 || last)) {
            rc = run_validation(t, &r, err);
            if (rc)
                return rc;
        }
        r.skipped = t->skipped; /* training's and validation's */
        r.swap = swap_since_mark(t);
        if ((rc = gather_ranks(t, &r, err)))
            return rc;
        log_epoch(t, &r);
        write_rows(t, &r);
        if (last || (t->checkpoint_every > 0 && (epoch + 1) % (uint64_t)t->checkpoint_every == 0)) {
            rc = save_checkpoint(t, false, path, sizeof path, err);
            if (rc)
                return rc;
        }
        if (!last && stopping(t)) {
            if (!(t->checkpoint_every > 0 && (epoch + 1) % (uint64_t)t->checkpoint_every == 0)) {
                rc = save_checkpoint(t, true, path, sizeof path, err);
                if (rc)
                    return rc;
            }
            resume_hint(t, path);
            return TB_OK;
        }
    }
    char total[32];
    format_duration(tb_now() - t->run_start, total, sizeof total);
    tb_log(TB_LOG_INFO, "done: %d epochs in %s; final checkpoint %s", t->epochs, total, path);
    if (t->replica_checks)
        tb_log(TB_LOG_INFO, "replica check: the weights were the same on all %d ranks at all %" PRIu64 " checks",
               t->world->size, t->replica_checks);
    return TB_OK;
}

int tb_train(const struct tb_setup *s, const struct tb_train_request *req, struct tb_err *err)
{
    tb_err_clear(err);
    struct trainer *t = calloc(1, sizeof *t);
    if (!t)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    t->s = s;
    t->req = req;
    t->world = tb_comm_world();
    t->lead = t->world->rank == 0;
    t->run_start = tb_now();
    const int pmode = tb_section_enum(s->slot[TB_SEC_REPORT].section, "progress"); /* auto|yes|no */
    t->live = t->lead && (pmode == 1 || (pmode == 0 && isatty(STDERR_FILENO)));
    t->quiet = pmode == 2 || !t->lead;
    int rc = setup(t, err);
    if (!rc)
        rc = make_rundir(t, err);
    if (!rc && req->resume)
        rc = resume(t, err);
    if (!rc)
        rc = open_reports(t, err);
    if (!rc) {
        uint64_t params = 0;
        for (size_t i = 0; i < tb_engine_param_count(&t->run.engine); i++) {
            const struct tb_param *p = tb_engine_param_at(&t->run.engine, i);
            params += p->trainable ? tb_shape_elems(p->value.desc.shape) : 0;
        }
        tb_log(TB_LOG_INFO,
               "training %s (%" PRIu64 " parameters) on %s: %zu training images of %dx%d, batch %d, %" PRIu64
               " steps per epoch, %d epochs; writing to %s",
               t->run.model->name, params, t->run.backend->name, t->train.count, t->train.width, t->train.height,
               t->batch, t->iters_per_epoch, t->epochs, t->rundir);
        if (t->world->size > 1)
            tb_log(TB_LOG_INFO,
                   "data parallel over %d ranks: %d images per rank and step, gradients averaged in buckets of "
                   "%.1f MiB ([train] allreduce_bucket), batch norm %s ([model] sync_bn)",
                   t->world->size, t->rank_batch, (double)t->run.engine.bucket_bytes / 1048576.0,
                   t->sync_bn ? "synchronised over the ranks" : "per rank");
        rc = train_loop(t, err);
    }
    teardown(t);
    free(t);
    return rc;
}
