/* core/train/validation_internal.h: validation during training (validation.c): the
 * validation split through the model's inference graph, which shares the training
 * graph's parameters by name, into the confusion matrix, mIoU, pixel accuracy and the
 * plain cross-entropy, summed over the ranks. Allocates nothing: the confusion matrix
 * and the logits buffer are the trainer's (core/train/trainer_setup_internal.h). */
#ifndef TB_CORE_VALIDATION_INTERNAL_H
#define TB_CORE_VALIDATION_INTERNAL_H

#include <trainbig/error.h>

#include "core/train/report_internal.h"
#include "core/train/trainer_setup_internal.h"

/* Validates, prints the class table (rank 0), and fills r's miou, acc, val_loss and
 * validated. A stop request cuts it short on a run of one rank: that is logged and r
 * stays not validated; several ranks finish it (they must agree). */
int tb_trainer_validate(struct tb_trainer *t, struct tb_epoch_row *r, struct tb_err *err);

#endif
