/* core/train/trainer_mllog.c: the training run in the MLPerf-style event log ([report]
 * mllog, written by mllog.c): what the run is when it starts, its blocks, epochs and
 * validations, and how it ended (trainer_mllog_internal.h). Events go to rank 0's log;
 * on other ranks, and without [report] mllog, they are nothing. */
#include "config.h"

#include "core/train/trainer_mllog_internal.h"

#include <stdio.h>
#include <trainbig/clock.h>

#include "core/train/validation_internal.h"

/* [report] mllog: the log opened (a resumed run appends to it) with its init_start at
 * init_ms, when tb_train() began, then what the run is, in the keys the MLPerf log
 * defines: the submission fields as far as trainbig knows them (the benchmark is the
 * model plugin, the platform the platform plugin and the backend; no MLPerf benchmark,
 * hence the open division and research status; caches are not dropped) and the
 * hyperparameters. Rank 0 only. */
int tb_trainer_ml_open(struct tb_trainer *t, int64_t init_ms, struct tb_err *err)
{
    const struct tb_settings *st = &t->s->settings;
    struct tb_mllog *m = &t->mllog;
    int rc = tb_mllog_open(m, st->report.mllog, t->resume != NULL, err);
    if (!rc)
        rc = tb_mllog_event_at(m, init_ms, TB_MLLOG_START, "init_start", tb_mllog_null(), TB_MLLOG_META, err);
    char platform[512];
    snprintf(platform, sizeof platform, "%s (%s backend)", t->run.platform->name, t->run.backend->name);
    const struct {
        const char *key;
        struct tb_mllog_value v;
    } facts[] = {
        { "cache_clear", tb_mllog_bool(false) },
        { "submission_benchmark", tb_mllog_str(t->run.model->name) },
        { "submission_division", tb_mllog_str("open") },
        { "submission_status", tb_mllog_str("research") },
        { "submission_platform", tb_mllog_str(platform) },
        { "seed", tb_mllog_int(st->run.seed) },
        { "global_batch_size", tb_mllog_int(t->cfg.batch) },
        { "gradient_accumulation_steps", tb_mllog_int(1) },
        { "opt_name", tb_mllog_str("sgd") },
        { "opt_base_learning_rate", tb_mllog_num(t->cfg.lr) },
        { "opt_weight_decay", tb_mllog_num(t->cfg.weight_decay) },
        { "train_samples", tb_mllog_int((int64_t)t->train.count) },
        { "eval_samples", tb_mllog_int(t->val.ctx ? (int64_t)t->val.count : 0) },
    };
    for (size_t i = 0; !rc && i < sizeof facts / sizeof *facts; i++)
        rc = tb_mllog_event(m, TB_MLLOG_POINT, facts[i].key, facts[i].v, TB_MLLOG_META, err);
    if (!rc)
        tb_log(TB_LOG_INFO, "MLPerf log: %s (%s)", m->path, t->resume ? "appended to" : "new");
    return rc;
}

/* The end of initialisation and the start of the timed run, just before the first step. */
int tb_trainer_ml_run_start(struct tb_trainer *t, struct tb_err *err)
{
    int rc = tb_mllog_event(&t->mllog, TB_MLLOG_END, "init_stop", tb_mllog_null(), TB_MLLOG_META, err);
    if (!rc)
        rc = tb_mllog_event(&t->mllog, TB_MLLOG_START, "run_start", tb_mllog_null(), TB_MLLOG_META, err);
    t->run_start = tb_now();
    return rc;
}

/* The last epoch (from 1) of the block that starts at `epoch`: the next epoch that
 * validates ([train] val_every, and the last), or the last when none does. */
static uint64_t block_last(const struct tb_trainer *t, uint64_t epoch)
{
    const uint64_t epochs = t->total_iters / t->iters_per_epoch, every = (uint64_t)t->cfg.val_every;
    const uint64_t last = every ? (epoch + every - 1) / every * every : epochs;
    return last < epochs ? last : epochs;
}

/* An epoch (from 1) begins: a block, the epochs up to the next validation, opens with
 * its first (or the first this process trains, when it resumed inside one). */
int tb_trainer_ml_epoch_start(struct tb_trainer *t, uint64_t epoch, struct tb_err *err)
{
    int rc = TB_OK;
    struct tb_mllog_meta md = TB_MLLOG_META;
    if (!t->ml_block) {
        t->ml_block = epoch;
        md.first_epoch_num = (int64_t)epoch;
        md.epoch_count = (int64_t)(block_last(t, epoch) - epoch + 1);
        rc = tb_mllog_event(&t->mllog, TB_MLLOG_START, "block_start", tb_mllog_null(), md, err);
    }
    md = TB_MLLOG_META;
    md.epoch_num = (int64_t)epoch;
    return rc ? rc : tb_mllog_event(&t->mllog, TB_MLLOG_START, "epoch_start", tb_mllog_null(), md, err);
}

/* An epoch's steps are done; its block ends with it when validation follows or it is the
 * last. */
int tb_trainer_ml_epoch_stop(struct tb_trainer *t, uint64_t epoch, bool block_ends, struct tb_err *err)
{
    struct tb_mllog_meta md = TB_MLLOG_META;
    md.epoch_num = (int64_t)epoch;
    int rc = tb_mllog_event(&t->mllog, TB_MLLOG_END, "epoch_stop", tb_mllog_null(), md, err);
    if (rc || !block_ends || !t->ml_block)
        return rc;
    md = TB_MLLOG_META;
    md.first_epoch_num = (int64_t)t->ml_block;
    t->ml_block = 0;
    return tb_mllog_event(&t->mllog, TB_MLLOG_END, "block_stop", tb_mllog_null(), md, err);
}

/* Validation of r's epoch (0: the baseline before training) between eval_start and
 * eval_stop, its mIoU the log's eval_accuracy (none when a stop cut it short). */
int tb_trainer_validate_logged(struct tb_trainer *t, struct tb_epoch_row *r, struct tb_err *err)
{
    struct tb_mllog_meta md = TB_MLLOG_META;
    md.epoch_num = (int64_t)r->epoch;
    int rc = tb_mllog_event(&t->mllog, TB_MLLOG_START, "eval_start", tb_mllog_null(), md, err);
    if (!rc)
        rc = tb_trainer_validate(t, r, err);
    if (!rc)
        rc = tb_mllog_event(&t->mllog, TB_MLLOG_END, "eval_stop", tb_mllog_null(), md, err);
    if (!rc && r->validated)
        rc = tb_mllog_event(&t->mllog, TB_MLLOG_POINT, "eval_accuracy", tb_mllog_num(r->miou), md, err);
    return rc;
}

/* The run's end in the log: success when it ended as configured (the target reached or,
 * without one, every epoch done), aborted after a stop on request or with the target not
 * reached. After an error (rc) aborted with its message, as far as the file takes it:
 * the error returned stays rc's. */
int tb_trainer_ml_run_stop(struct tb_trainer *t, int rc, struct tb_err *err)
{
    if (!t->mllog.f)
        return rc;
    struct tb_mllog_meta md = TB_MLLOG_META;
    md.epoch_num = (int64_t)(t->iters_per_epoch ? t->iteration / t->iters_per_epoch : 0);
    if (rc) {
        struct tb_err ignored;
        tb_err_clear(&ignored);
        md.status = "aborted";
        md.error = err->msg;
        tb_mllog_event(&t->mllog, TB_MLLOG_END, "run_stop", tb_mllog_null(), md, &ignored);
        return rc;
    }
    const bool ended = !t->stopped && (t->cfg.target_miou > 0 ? t->target_epoch > 0 : true);
    md.status = ended ? "success" : "aborted";
    return tb_mllog_event(&t->mllog, TB_MLLOG_END, "run_stop", tb_mllog_null(), md, err);
}
