/* core/train/trainer_mllog_internal.h: the training run's events in the MLPerf-style log
 * (trainer_mllog.c), called by the loop (trainer.c) on struct tb_trainer's mllog. Each
 * returns TB_OK or the log's write error naming its file. */
#ifndef TB_CORE_TRAINER_MLLOG_INTERNAL_H
#define TB_CORE_TRAINER_MLLOG_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <trainbig/error.h>

#include "core/train/report_internal.h"
#include "core/train/trainer_setup_internal.h"

/* [report] mllog opened (appended to on resume), init_start at init_ms (when tb_train
 * began), then what the run is: the submission fields as far as trainbig knows them and
 * the hyperparameters. */
int tb_trainer_ml_open(struct tb_trainer *t, int64_t init_ms, struct tb_err *err);
/* init_stop and run_start, just before the first step; sets t->run_start. */
int tb_trainer_ml_run_start(struct tb_trainer *t, struct tb_err *err);
/* epoch_start of epoch (from 1), and block_start where a block opens with it. */
int tb_trainer_ml_epoch_start(struct tb_trainer *t, uint64_t epoch, struct tb_err *err);
/* epoch_stop, and block_stop when block_ends (validation follows, or it is the last). */
int tb_trainer_ml_epoch_stop(struct tb_trainer *t, uint64_t epoch, bool block_ends, struct tb_err *err);
/* Validation of r's epoch (tb_trainer_validate) between eval_start and eval_stop, with its
 * mIoU as eval_accuracy. */
int tb_trainer_validate_logged(struct tb_trainer *t, struct tb_epoch_row *r, struct tb_err *err);
/* run_stop: success or aborted; after an error rc, aborted with its message, rc returned. */
int tb_trainer_ml_run_stop(struct tb_trainer *t, int rc, struct tb_err *err);

#endif
