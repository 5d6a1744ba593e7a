/* core/train/trainer.h: the training pipeline (trainer.c): a resolved configuration
 * run end to end, epochs of SGD steps over the dataset, validation, reports and
 * checkpoints.
 *
 * A run writes into its run directory, [run] output/name (output/name.2, .3 ... when that
 * one already holds files: an earlier run is never overwritten; a resumed run writes
 * where its checkpoint is): checkpoints epoch-EEEE.safetensors (at epoch ends) and
 * epoch-EEEE-step-SSSSSS.safetensors (when stopped during epoch EEEE), epochs.csv and
 * epochs.jsonl unless [report] names other files. Data order is a pure function of the
 * seed and the epoch, dropout of the seed and the step, so a run resumed from a
 * checkpoint takes the same steps as one that never stopped. */
#ifndef TB_CORE_TRAINER_H
#define TB_CORE_TRAINER_H

#include <signal.h>
#include <stdbool.h>
#include <trainbig/error.h>

#include "core/config/setup.h"

struct tb_train_request {
    const char *config_path; /* the INI file, for messages and the resume hint */
    const char *const *sets; /* the --set overrides given, repeated in the resume hint */
    int nsets;
    const char *resume;          /* checkpoint to continue from, or NULL */
    volatile sig_atomic_t *stop; /* set (by a signal handler) to finish the step, checkpoint and return */
    bool *stopped;               /* when not NULL: receives whether the run ended early on *stop */
};

/* Trains as s describes. TB_OK when the run finished or was stopped through req->stop
 * (then a checkpoint was written and the log says how to resume); otherwise an error
 * naming what failed, with every checkpoint written before it intact. */
int tb_train(const struct tb_setup *s, const struct tb_train_request *req, struct tb_err *err);

#endif
