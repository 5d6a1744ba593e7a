/* validation.c: validation during training (core/train/validation_internal.h): the
 * validation split's batches through the inference graph, the confusion matrix and
 * losses summed over the ranks, and the class table. It allocates nothing; what it
 * fills (the confusion matrix, the logits buffer, the row) is the caller's. */
#include "config.h"

#include "core/train/validation_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "core/dist/world.h"
#include "core/util/log_control.h"

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
static int validate(struct tb_trainer *t, double *miou, double *acc, double *loss, bool *stopped, struct tb_err *err)
{
    tb_confusion_clear(&t->confusion);
    const size_t hw = (size_t)t->val.width * (size_t)t->val.height;
    double ce = 0;
    uint64_t pixels = 0, bad = 0;
    const uint64_t batches = tb_data_loader_batches(t->val.loader);
    tb_data_loader_start(t->val.loader, 0, batches);
    for (uint64_t k = 0; k < batches; k++) {
        /* With several ranks a stop waits for the end of validation: they must agree. */
        if (t->world->size == 1 && t->stop && *t->stop) {
            *stopped = true;
            return TB_OK;
        }
        struct tb_loaded lb;
        int rc = tb_trainer_next_batch(t, &t->val, &lb, err);
        const int n = lb.count;
        if (!rc)
            rc = tb_inputs_set(t->vx, t->vg, lb.b, err);
        if (!rc)
            rc = tb_exec_forward(t->vx, 0, err);
        if (!rc)
            rc = tb_exec_read(t->vx, "seg_logits", t->val_logits, err);
        if (rc)
            return tb_err_prefix(err, "validation");
        bad += tb_confusion_add(&t->confusion, t->val_logits, lb.b->labels, n, t->val.height, t->val.width,
                                TB_IGNORE_LABEL);
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

int tb_trainer_validate(struct tb_trainer *t, struct tb_epoch_row *r, struct tb_err *err)
{
    /* The two executors share the device and take turns: what training's last step left
     * (its outputs and inputs) is given back for validation's batches, and validation's
     * for the training steps after it, so neither's peak is taken from the other's. */
    tb_exec_release(t->tx);
    bool stopped = false;
    int rc = validate(t, &r->miou, &r->acc, &r->val_loss, &stopped, err);
    tb_exec_release(t->vx);
    if (rc == TB_OK && stopped) {
        tb_progress_clear(&t->progress);
        tb_log(TB_LOG_INFO, "validation after epoch %" PRIu64 " cut short: a stop was requested", r->epoch);
        return TB_OK;
    }
    if (rc)
        return rc;
    r->validated = true;
    if (!t->lead)
        return TB_OK;
    tb_progress_clear(&t->progress);
    if (t->run.engine.modelled) {
        printf("validation after epoch %" PRIu64 " (%zu images): modelled, no prediction computed\n", r->epoch,
               t->val.count);
        fflush(stdout);
        return TB_OK;
    }
    printf("validation after epoch %" PRIu64 " (%zu images):\n", r->epoch, t->val.count);
    tb_confusion_print(&t->confusion, t->classes, stdout);
    fflush(stdout);
    return TB_OK;
}
