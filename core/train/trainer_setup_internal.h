/* core/train/trainer_setup_internal.h: one training run's state (struct tb_trainer),
 * shared by the loop (trainer.c), validation (validation.c) and what builds and tears
 * it down and hands out the splits' batches (trainer_setup.c): the settings read once
 * from the configuration, the run directory, the dataset splits and their loaders, the
 * training and validation graphs, the loss terms, reports, the MLPerf log and the
 * progress display.
 *
 * Memory: tb_trainer_setup() fills a zeroed struct tb_trainer; everything it opens or
 * allocates (splits, loaders, graphs, executors, the run, buffers, texts, report files)
 * is the struct's and tb_trainer_teardown() frees it all, whatever setup returned. The
 * setup and the request's texts the struct points to are the caller's. */
#ifndef TB_CORE_TRAINER_SETUP_INTERNAL_H
#define TB_CORE_TRAINER_SETUP_INTERNAL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <trainbig/dataset.h>
#include <trainbig/error.h>

#include "core/config/setup_internal.h"
#include "core/data/batch.h"
#include "core/data/dataloader.h"
#include "core/dist/world.h"
#include "core/train/inputs.h"
#include "core/train/metrics_internal.h"
#include "core/train/mllog_internal.h"
#include "core/train/progress_internal.h"
#include "core/train/report_internal.h"
#include "core/train/run.h"
#include "core/train/rundir_internal.h"

enum { TB_IGNORE_LABEL = 255 };

struct tb_split {
    const char *name; /* "train", "val" */
    const struct tb_dataset_ops *ops;
    void *ctx;
    size_t count;
    int width, height;           /* of every image of a batch */
    struct tb_batch_spec inputs; /* the model's inputs its batches hold (inputs.c) */
    struct tb_data_loader *loader;
};

struct tb_trainer {
    const struct tb_setup *s;
    /* The request's (core/train/trainer.h), copied: the file and --set overrides for the
     * resume hint, the checkpoint resumed from (or NULL), the stop flag. */
    const char *config_path;
    const char *const *sets;
    int nsets;
    const char *resume;
    volatile sig_atomic_t *stop;
    struct tb_run run;
    struct tb_split train, val;
    const struct tb_class *classes;
    int nclasses;
    struct tb_train_settings cfg; /* the setup's [train], val_batch 0 made batch */

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
    struct tb_term terms[TB_TERMS_MAX];
    int nterms;

    uint64_t iters_per_epoch, total_iters, iteration;
    double last_lr;
    struct tb_rundir rundir; /* rank 0's; fd -1 on the others */
    uint64_t kept_work; /* checkpoints and report rows written: what a failed run leaves */
    char *model_text, *training_text, *config_text;
    struct tb_report report;
    struct tb_mllog mllog; /* [report] mllog: rank 0's, when set */
    uint64_t ml_block;     /* the MLPerf log's open block: its first epoch (from 1); 0 = none */
    double run_start;      /* tb_now() at the log's run_start: the target's time is since then */

    /* [train] target_miou: this run's best validation after training (epoch from 1; the
     * val_at_start baseline does not count), and the epoch that reached the target (0 =
     * none yet). */
    double best_miou;
    uint64_t best_epoch, target_epoch;
    bool stopped; /* on request, with a checkpoint to resume from */

    struct tb_progress progress;
    double wait_seconds;            /* this epoch: steps waiting for their batch */
    uint64_t skipped;               /* this epoch: bad samples skipped (training and validation) */
    struct tb_swap_stats swap_mark; /* both executors' swap counters when the epoch began */
    double *op_seconds;             /* this epoch: per schedule step of the training graph */
};

/* Reads the settings, opens the run (backend, model, engine), the splits, their loaders
 * and graphs, and prepares the loss terms, the texts a checkpoint holds and the report's
 * and progress display's fields. t->s, the request's fields, t->world and t->lead are set already. */
int tb_trainer_setup(struct tb_trainer *t, struct tb_err *err);

/* The run directory (rank 0 only), opened and locked (core/train/rundir_internal.h):
 * where the resumed checkpoint is, else a new [run] output/name, or output/name.N when
 * that name is taken. */
int tb_trainer_make_rundir(struct tb_trainer *t, struct tb_err *err);

/* Frees and closes everything setup made; t itself stays the caller's. */
void tb_trainer_teardown(struct tb_trainer *t);

/* The next batch of a split's loader, timed (training's wait counts in t->wait_seconds);
 * its skipped samples logged and counted in t->skipped. The batch is the loader's. */
int tb_trainer_next_batch(struct tb_trainer *t, struct tb_split *sp, struct tb_loaded *lb, struct tb_err *err);

#endif
