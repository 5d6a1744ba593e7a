/* trainer.c: the training loop. Epochs of SGD steps over a shuffled training split,
 * validation when due (validation.c), the epoch's reports (report.c), checkpoints,
 * the MLPerf-style event log (trainer_mllog.c), an end at the epoch that reaches [train]
 * target_miou, and a clean stop on request. What the loop runs on, its settings,
 * splits, graphs and buffers, is built and freed by trainer_setup.c
 * (core/train/trainer_setup_internal.h); the loop allocates nothing that outlives a
 * call.
 *
 * Batches come from the data loader (dataloader.c), whose worker threads prepare them
 * while the step before runs; the time a step waits for one is reported per epoch. A
 * batch's samples and augmentation, and each step's dropout, are pure functions of the
 * seed, the epoch and the step: that is what makes a resumed run bit-identical to one
 * that never stopped. */
#include "config.h"

#include "core/train/trainer.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <trainbig/clock.h>

#include "core/data/batch.h"
#include "core/train/checkpoint.h"
#include "core/dist/world.h"
#include "core/data/dataloader.h"
#include "core/util/log_control.h"
#include "core/dist/replicas_internal.h"
#include "core/train/mllog_internal.h"
#include "core/train/trainer_mllog_internal.h"
#include "core/train/report_internal.h"
#include "core/train/run.h"
#include "core/train/trainer_setup_internal.h"
#include "core/train/validation_internal.h"

/* ------------------------------------------------------------------ checkpoints */

static int save_checkpoint(struct tb_trainer *t, bool interrupted, char *path, size_t size, struct tb_err *err)
{
    const uint64_t epoch = t->iteration / t->iters_per_epoch, step = t->iteration % t->iters_per_epoch;
    char name[64];
    if (interrupted && step)
        snprintf(name, sizeof name, "epoch-%04" PRIu64 "-step-%06" PRIu64 ".safetensors", epoch + 1, step);
    else
        snprintf(name, sizeof name, "epoch-%04" PRIu64 ".safetensors", epoch);
    snprintf(path, size, "%s/%s", t->rundir.path, name);
    if (t->run.engine.modelled) {
        snprintf(path, size, "none (a modelled device has no weights to keep)");
        return TB_OK;
    }
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
    int rc = tb_checkpoint_save(t->rundir.fd, name, path, &t->run.engine, &info, err);
    if (rc)
        return rc;
    t->kept_work++;
    tb_progress_clear(&t->progress);
    tb_log(TB_LOG_INFO, "checkpoint %s", path);
    tb_checkpoint_prune(t->rundir.fd, t->rundir.path, t->cfg.keep);
    return TB_OK;
}

static int resume(struct tb_trainer *t, struct tb_err *err)
{
    struct tb_ckpt_info info = { .model = t->model_text };
    char *there = NULL;
    int rc = tb_checkpoint_load(t->resume, &t->run.engine, true, &info, &there, err);
    if (rc)
        return rc;
    if (strcmp(there, t->training_text) != 0) {
        char diff[600];
        tb_text_first_difference(t->training_text, there, diff, sizeof diff);
        tb_log(TB_LOG_WARN,
               "%s: the training settings differ from the checkpoint's (%s): training continues from its weights, but "
               "will not match a run that never stopped",
               t->resume, diff);
    }
    free(there);
    if (info.seed != t->run.engine.seed)
        tb_log(TB_LOG_WARN, "%s: written with [run] seed = %" PRIu64 ", continuing with seed %" PRIu64, t->resume,
               info.seed, t->run.engine.seed);
    t->iteration = info.iteration;
    t->last_lr = info.lr;
    tb_log(TB_LOG_INFO, "resumed from %s: %" PRIu64 " epochs and %" PRIu64 " steps done", t->resume, info.epoch,
           info.iteration);
    return TB_OK;
}

/* ------------------------------------------------------------------ steps */

/* Data parallel: the step's loss terms become the global batch's (a term that sums over
 * images is the ranks' sum, one that averages is their mean), and a stop request seen by
 * any rank becomes every rank's, so that all stop after the same step. One collective. */
static int reduce_step(struct tb_trainer *t, double *values, struct tb_err *err)
{
    if (t->world->size == 1)
        return TB_OK;
    double v[TB_TERMS_MAX + 1];
    memcpy(v, values, (size_t)t->nterms * sizeof *v);
    v[t->nterms] = t->stop && *t->stop ? 1.0 : 0.0;
    int rc = tb_comm_allreduce(v, (size_t)t->nterms + 1, TB_COMM_F64, TB_COMM_SUM, err);
    if (rc)
        return rc;
    for (int i = 0; i < t->nterms; i++)
        values[i] = t->terms[i].sums_images ? v[i] : v[i] / t->world->size;
    t->stop_agreed = v[t->nterms] > 0;
    return TB_OK;
}

/* One SGD step on the batch of step `it`; *loss receives the objective. */
static int train_step(struct tb_trainer *t, double *loss, struct tb_err *err)
{
    const uint64_t epoch = t->iteration / t->iters_per_epoch, step = t->iteration % t->iters_per_epoch;
    struct tb_loaded lb;
    int rc = tb_trainer_next_batch(t, &t->train, &lb, err);
    if (!rc)
        rc = tb_inputs_set(t->tx, t->tg, lb.b, err);
    if (!rc)
        rc = tb_exec_forward(t->tx, t->iteration, err);
    double values[TB_TERMS_MAX], objective = 0;
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
    const double lr = t->cfg.lr_policy == TB_LR_POLY
                          ? tb_lr_poly(t->cfg.lr, t->iteration, t->total_iters, t->cfg.lr_power)
                          : t->cfg.lr;
    if (!rc)
        rc = tb_sgd_step(&t->run.engine, (float)lr, (float)t->cfg.momentum, (float)t->cfg.weight_decay, err);
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

/* ------------------------------------------------------------------ ranks */

/* Whether to stop after this step: a request on any rank, agreed by all (one rank), or
 * this process's own request (one rank). */
static bool stopping(const struct tb_trainer *t)
{
    return t->world->size > 1 ? t->stop_agreed : t->stop && *t->stop;
}

/* Without synchronised batch norm each rank's running statistics follow its own images:
 * before they are used (validation) or kept (checkpoints) they become rank 0's, as
 * PyTorch's DistributedDataParallel does with broadcast_buffers. */
static int align_buffers(struct tb_trainer *t, struct tb_err *err)
{
    if (t->world->size == 1 || t->sync_bn)
        return TB_OK;
    return tb_replicas_broadcast_buffers(&t->run.engine, t->world, 0, err);
}

/* Every [train] replica_check steps: the weights must be the same on every rank. */
static int check_replicas(struct tb_trainer *t, struct tb_err *err)
{
    if (t->world->size == 1 || t->cfg.replica_check <= 0 || t->iteration % (uint64_t)t->cfg.replica_check != 0)
        return TB_OK;
    int rc = tb_replicas_check(&t->run.engine, t->world, t->sync_bn, err);
    if (rc)
        return tb_err_prefix(err, "after step %" PRIu64 " ([train] replica_check = %d)", t->iteration,
                             t->cfg.replica_check);
    t->replica_checks++;
    return TB_OK;
}

/* ------------------------------------------------------------------ [train] target_miou */

/* Whether r's validation reached the target, which makes its epoch the last; this run's
 * best validation is kept for the warning when none does. */
static bool reached_target(struct tb_trainer *t, const struct tb_epoch_row *r)
{
    if (!r->validated || !isfinite(r->miou))
        return false;
    if (!t->best_epoch || r->miou > t->best_miou) {
        t->best_miou = r->miou;
        t->best_epoch = r->epoch;
    }
    if (t->cfg.target_miou <= 0 || r->miou < t->cfg.target_miou)
        return false;
    t->target_epoch = r->epoch;
    return true;
}

static void log_target_reached(struct tb_trainer *t, const struct tb_epoch_row *r)
{
    char since[32];
    tb_format_duration(tb_now() - t->run_start, since, sizeof since);
    tb_progress_clear(&t->progress);
    tb_log(TB_LOG_INFO,
           "target reached: epoch %" PRIu64 " validated at mIoU %.4f, at least [train] target_miou = %g, %s after "
           "run start; training ends with this epoch (of %d)",
           r->epoch, r->miou, t->cfg.target_miou, since, t->s->settings.run.epochs);
}

/* Training ended (or had nothing to do) short of the target. Not an error: the run did
 * what it was asked; the MLPerf log says aborted. */
static void warn_target_missed(const struct tb_trainer *t)
{
    if (!t->lead)
        return;
    char best[128] = "no validation after training ran in this process";
    if (t->best_epoch)
        snprintf(best, sizeof best, "the best was mIoU %.4f, at epoch %" PRIu64, t->best_miou, t->best_epoch);
    tb_log(TB_LOG_WARN, "[train] target_miou = %g was not reached in %d epochs ([run] epochs): %s", t->cfg.target_miou,
           t->s->settings.run.epochs, best);
}

/* ------------------------------------------------------------------ the run */

static void resume_hint(struct tb_trainer *t, const char *path)
{
    char sets[2048] = "";
    size_t o = 0;
    for (int i = 0; i < t->nsets && o < sizeof sets; i++)
        o += (size_t)snprintf(sets + o, sizeof sets - o, " --set '%s'", t->sets[i]);
    char launcher[64] = ""; /* the job's ranks are started again the same way */
    if (t->world->size > 1)
        snprintf(launcher, sizeof launcher, "mpirun -np %d ", t->world->size);
    tb_progress_clear(&t->progress);
    tb_log(TB_LOG_INFO, "stopped on request; to continue: %strainbig train %s%s --resume %s", launcher, t->config_path,
           sets, path);
}

/* The epoch's reports: the ranks' statistics gathered into r, its log line and rows. */
static int report_epoch(struct tb_trainer *t, struct tb_epoch_row *r, struct tb_err *err)
{
    r->skipped = t->skipped; /* training's and validation's */
    r->swap = tb_report_swap_since(&t->swap_mark, t->tx, t->vx);
    r->step_bytes = tb_exec_transient_bytes(t->tx);
    int rc = tb_report_gather_ranks(r, t->world->size, err);
    if (rc)
        return rc;
    tb_report_log_epoch(&t->report, r);
    t->kept_work++;
    return tb_report_rows(&t->report, r, err);
}

/* [train] val_at_start: validation before the first step, reported as epoch 0. */
static int validate_at_start(struct tb_trainer *t, struct tb_err *err)
{
    struct tb_epoch_row r = { 0 };
    t->skipped = 0;
    t->swap_mark = tb_report_swap_total(t->tx, t->vx);
    int rc = align_buffers(t, err);
    if (!rc)
        rc = tb_trainer_validate_logged(t, &r, err);
    if (!rc)
        rc = report_epoch(t, &r, err);
    return rc;
}

/* An epoch under way: which (from 0), its steps so far, their losses' sum, its start. */
struct epoch_run {
    uint64_t epoch, steps;
    double loss_sum, t0;
};

/* Zeroes the epoch's counters (loss terms, op times, data wait, skipped samples, swap
 * and all-reduce figures, the device's peak memory) and starts its clock. */
static void begin_epoch(struct tb_trainer *t, struct epoch_run *e)
{
    for (int i = 0; i < t->nterms; i++)
        t->terms[i].sum = 0;
    memset(t->op_seconds, 0, tb_schedule_steps(tb_exec_schedule(t->tx)) * sizeof *t->op_seconds);
    t->wait_seconds = 0;
    t->skipped = 0;
    t->swap_mark = tb_report_swap_total(t->tx, t->vx);
    t->run.engine.allreduce_busy_s = t->run.engine.allreduce_wait_s = 0;
    t->run.engine.ops->mem_reset_peak(t->run.engine.ctx, t->run.engine.device);
    *e = (struct epoch_run){ .epoch = t->iteration / t->iters_per_epoch, .t0 = tb_engine_now(&t->run.engine) };
}

/* One step of the loop: the SGD step (traced when [report] trace asks for this one), the
 * replica check and the progress display; *loss receives the step's objective. */
static int loop_step(struct tb_trainer *t, const struct epoch_run *e, double *loss, struct tb_err *err)
{
    const double s0 = tb_engine_now(&t->run.engine);
    const char *trace = t->s->settings.report.trace;
    /* [report] trace: the run's second step (the first warms up), or its only one. (Asking
     * at each step whether more than one remains skipped both steps of a two-step run.) */
    const uint64_t done = t->progress.steps_timed;
    const bool traced = trace[0] && (done == 1 || (done == 0 && t->total_iters - t->iteration == 1));
    if (traced)
        tb_exec_trace_begin(t->tx);
    int rc = train_step(t, loss, err);
    if (!rc && traced && (rc = tb_exec_trace_write(t->tx, trace, err)) == TB_OK) {
        tb_progress_clear(&t->progress);
        tb_log(TB_LOG_INFO, "trace of step %" PRIu64 " (compute and copy streams) written to %s", t->iteration + 1,
               trace);
    }
    if (rc)
        return rc;
    t->iteration++;
    if ((rc = check_replicas(t, err)))
        return rc;
    tb_progress_step(&t->progress, tb_engine_now(&t->run.engine) - s0);
    tb_progress_show(&t->progress, e->epoch, t->iteration - e->epoch * t->iters_per_epoch,
                     t->total_iters - t->iteration, *loss, e->steps == 0);
    return TB_OK;
}

/* The steps of the epoch. *stopped is set when a stop was requested: the checkpoint is
 * then written (to path) and the way to resume logged. */
static int epoch_steps(struct tb_trainer *t, struct epoch_run *e, char *path, size_t size, bool *stopped,
                       struct tb_err *err)
{
    do {
        double loss = 0;
        int rc = loop_step(t, e, &loss, err);
        if (rc)
            return rc;
        e->steps++;
        e->loss_sum += loss;
        if (stopping(t)) {
            *stopped = true;
            rc = align_buffers(t, err);
            if (!rc)
                rc = save_checkpoint(t, true, path, size, err);
            if (!rc)
                resume_hint(t, path);
            return rc;
        }
    } while (t->iteration % t->iters_per_epoch != 0);
    return TB_OK;
}

/* The epoch's row as its steps left it, before validation and the other ranks. */
static struct tb_epoch_row epoch_row(struct tb_trainer *t, const struct epoch_run *e)
{
    struct tb_mem_stats ms = { 0 };
    t->run.engine.ops->mem_stats(t->run.engine.ctx, t->run.engine.device, &ms);
    const double secs = tb_engine_now(&t->run.engine) - e->t0;
    tb_progress_clear(&t->progress);
    tb_report_op_times(t->tx, t->op_seconds, t->wait_seconds, secs);
    return (struct tb_epoch_row){
        .epoch = e->epoch + 1,
        .steps = e->steps,
        .seconds = secs,
        .images_per_s = (double)(e->steps * (uint64_t)t->cfg.batch) / secs,
        .loss = e->loss_sum / (double)e->steps,
        .lr = t->last_lr,
        .peak_bytes = ms.peak,
        .frag_known = true,
        .free_bytes = tb_report_free_bytes(&ms),
        .largest_free = ms.largest_free,
        .data_wait = t->wait_seconds,
        .allreduce = t->run.engine.allreduce_busy_s,
        .allreduce_wait = t->run.engine.allreduce_wait_s,
    };
}

/* The end of an epoch: validation when due, the reports, the checkpoint when due (to
 * path). An epoch whose validation reaches [train] target_miou is the last: it gets the
 * final checkpoint, and t->target_epoch ends the loop. *stopped is set when a stop was
 * requested before the last epoch: then a checkpoint is written and the way to resume
 * logged. */
static int end_epoch(struct tb_trainer *t, const struct epoch_run *e, char *path, size_t size, bool *stopped,
                     struct tb_err *err)
{
    struct tb_epoch_row r = epoch_row(t, e);
    bool last = t->iteration == t->total_iters;
    const bool due = t->cfg.checkpoint_every > 0 && (e->epoch + 1) % (uint64_t)t->cfg.checkpoint_every == 0;
    const bool validating = t->cfg.val_every > 0 && ((e->epoch + 1) % (uint64_t)t->cfg.val_every == 0 || last);
    int rc = tb_trainer_ml_epoch_stop(t, r.epoch, validating || last, err);
    if (!rc)
        rc = align_buffers(t, err);
    if (!rc && validating)
        rc = tb_trainer_validate_logged(t, &r, err);
    if (rc)
        return rc;
    if (reached_target(t, &r))
        last = true;
    /* The rows before the checkpoint, on disk (synced) before it is written: a
     * checkpoint of epoch E then never exists without the rows of epochs up to E, and a
     * resume from it drops the rows after E (those of epochs it runs again), so that
     * after a kill anywhere every row is there exactly once. A report that cannot be
     * written stops the run before this epoch's checkpoint, which the resume runs again. */
    if ((rc = report_epoch(t, &r, err)))
        return rc;
    if (last || due) {
        rc = save_checkpoint(t, false, path, size, err);
        if (rc)
            return rc;
    }
    if (t->target_epoch)
        log_target_reached(t, &r);
    if (!last && stopping(t)) {
        *stopped = true;
        if (!due) {
            rc = save_checkpoint(t, true, path, size, err);
            if (rc)
                return rc;
        }
        resume_hint(t, path);
    }
    return TB_OK;
}

static int train_loop(struct tb_trainer *t, struct tb_err *err)
{
    char path[4400];
    int rc;
    if (t->cfg.val_at_start && t->iteration == 0 && (rc = validate_at_start(t, err)))
        return rc;
    if (t->iteration >= t->total_iters) {
        tb_log(TB_LOG_INFO, "nothing to do: the checkpoint has done all %d epochs ([run] epochs)",
               t->s->settings.run.epochs);
        if (t->cfg.target_miou > 0)
            warn_target_missed(t);
        return TB_OK;
    }
    /* Every rank starts from the same weights (one seed, or one checkpoint): check it. */
    if ((rc = check_replicas(t, err)))
        return rc;
    tb_data_loader_start(t->train.loader, t->iteration, t->total_iters);
    bool stopped = false;
    while (t->iteration < t->total_iters && !t->target_epoch) {
        struct epoch_run e;
        begin_epoch(t, &e);
        rc = tb_trainer_ml_epoch_start(t, e.epoch + 1, err);
        if (!rc)
            rc = epoch_steps(t, &e, path, sizeof path, &stopped, err);
        if (!rc && !stopped)
            rc = end_epoch(t, &e, path, sizeof path, &stopped, err);
        t->stopped = stopped;
        if (rc || stopped)
            return rc;
    }
    char total[32];
    tb_format_duration(tb_now() - t->progress.run_start, total, sizeof total);
    if (t->target_epoch)
        tb_log(TB_LOG_INFO, "done: %" PRIu64 " of %d epochs, the target reached, in %s; final checkpoint %s",
               t->target_epoch, t->s->settings.run.epochs, total, path);
    else
        tb_log(TB_LOG_INFO, "done: %d epochs in %s; final checkpoint %s", t->s->settings.run.epochs, total, path);
    if (t->cfg.target_miou > 0 && !t->target_epoch)
        warn_target_missed(t);
    if (t->replica_checks)
        tb_log(TB_LOG_INFO, "replica check: the weights were the same on all %d ranks at all %" PRIu64 " checks",
               t->world->size, t->replica_checks);
    return TB_OK;
}

/* The run's first log lines: what trains on what, and how the ranks share it. */
static void log_start(const struct tb_trainer *t)
{
    uint64_t params = 0;
    for (size_t i = 0; i < tb_engine_param_count(&t->run.engine); i++) {
        const struct tb_param *p = tb_engine_param_at(&t->run.engine, i);
        params += p->trainable ? tb_shape_elems(p->value.desc.shape) : 0;
    }
    tb_log(TB_LOG_INFO,
           "training %s (%" PRIu64 " parameters) on %s: %zu training images of %dx%d, batch %d, %" PRIu64
           " steps per epoch, %d epochs; writing to %s",
           t->run.model->name, params, t->run.backend->name, t->train.count, t->train.width, t->train.height,
           t->cfg.batch, t->iters_per_epoch, t->s->settings.run.epochs, t->rundir.path);
    if (t->world->size > 1)
        tb_log(TB_LOG_INFO,
               "data parallel over %d ranks: %d images per rank and step, gradients averaged in buckets of "
               "%.1f MiB ([train] allreduce_bucket), batch norm %s ([model] sync_bn)",
               t->world->size, t->rank_batch, (double)t->run.engine.bucket_bytes / 1048576.0,
               t->sync_bn ? "synchronised over the ranks" : "per rank");
}

/* Closes the run directory. A run that failed before it wrote a row or a checkpoint
 * leaves nothing: its report files (a CSV header) go, and the directory it made with
 * them when nothing else is in it, so the next run takes the name instead of NAME.2. */
static void close_rundir(struct tb_trainer *t, bool failed)
{
    static const char *const files[] = { "epochs.csv", "epochs.jsonl" };
    const bool remove = failed && !t->kept_work;
    if (tb_rundir_close(&t->rundir, remove, files, remove ? sizeof files / sizeof files[0] : 0))
        tb_log(TB_LOG_INFO, "removed %s: the run failed before it wrote a report row or a checkpoint", t->rundir.path);
}

/* A modelled device computes no value: what needs one is refused, not run on zeros. */
static int refuse_values(const struct tb_trainer *t, struct tb_err *err)
{
    if (!t->run.engine.modelled)
        return TB_OK;
    if (t->resume)
        return tb_err_set(err, TB_ERR_CONFIG,
                          "--resume %s: backend '%s' models its device and computes no weights, so a run on it "
                          "neither resumes from nor writes checkpoints; run without --resume",
                          t->resume, t->run.backend->name);
    if (t->cfg.target_miou > 0)
        return tb_err_set(err, TB_ERR_CONFIG,
                          "%s: [train] target_miou = %g needs a measured mIoU, and backend '%s' models its device "
                          "and computes none; set it to 0",
                          tb_section_origin(t->s->slot[TB_SEC_TRAIN].section, "target_miou"), t->cfg.target_miou,
                          t->run.backend->name);
    return TB_OK;
}

int tb_train(const struct tb_setup *s, const struct tb_train_request *req, struct tb_err *err)
{
    tb_err_clear(err);
    const int64_t init_ms = tb_mllog_now_ms(); /* the MLPerf log's init_start */
    struct tb_trainer *t = calloc(1, sizeof *t);
    if (!t)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    t->s = s;
    t->config_path = req->config_path;
    t->sets = req->sets;
    t->nsets = req->nsets;
    t->resume = req->resume;
    t->stop = req->stop;
    t->world = tb_comm_world();
    t->lead = t->world->rank == 0;
    t->rundir.fd = t->rundir.lock_fd = -1;
    tb_progress_init(&t->progress, s->settings.report.progress, t->lead);
    int rc = tb_trainer_setup(t, err);
    if (!rc)
        rc = refuse_values(t, err);
    if (!rc)
        rc = tb_trainer_make_rundir(t, err);
    if (!rc && req->resume)
        rc = resume(t, err);
    /* The MLPerf log before the reports: a report that cannot be opened is logged as the
     * run's abort. */
    if (!rc && t->lead && s->settings.report.mllog[0])
        rc = tb_trainer_ml_open(t, init_ms, err);
    if (!rc && t->lead)
        rc = tb_report_open(&t->report, &s->settings.report, t->rundir.fd, t->rundir.path,
                            req->resume ? t->iteration / t->iters_per_epoch : UINT64_MAX, err);
    if (!rc) {
        log_start(t);
        rc = tb_trainer_ml_run_start(t, err);
    }
    if (!rc)
        rc = train_loop(t, err);
    rc = tb_trainer_ml_run_stop(t, rc, err);
    if (req->stopped)
        *req->stopped = !rc && t->stopped;
    tb_trainer_teardown(t);
    close_rundir(t, rc != TB_OK);
    free(t);
    return rc;
}
