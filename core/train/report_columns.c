/* report_columns.c: the columns of epochs.csv and the members of epochs.jsonl, one row
 * each (report_internal.h), in the order both files list them. report.c writes the CSV
 * header, the CSV rows and the JSON rows from this table, and the manual's [report] csv
 * list is checked against it. */
#include "config.h"

#include "core/train/report_internal.h"

#include <math.h>
#include <stddef.h>

double tb_report_fragmentation(const struct tb_report *rep, const struct tb_epoch_row *r)
{
    (void)rep;
    if (!r->frag_known)
        return NAN;
    return r->free_bytes ? 1.0 - (double)r->largest_free / (double)r->free_bytes : 0.0;
}

/* Shares of the epoch's training activation and gradient bytes (steps x step_bytes) that
 * went to the host and that were dropped for recomputation (the rest stayed); NaN
 * without steps. A tensor moved out twice in a step counts twice. */
static double swapped_share(const struct tb_report *rep, const struct tb_epoch_row *r)
{
    (void)rep;
    const double all = (double)r->steps * (double)r->step_bytes;
    return all > 0 ? (double)r->swap.bytes_out / all : NAN;
}

static double recomputed_share(const struct tb_report *rep, const struct tb_epoch_row *r)
{
    (void)rep;
    const double all = (double)r->steps * (double)r->step_bytes;
    return all > 0 ? (double)r->swap.drop_bytes / all : NAN;
}

static double ranks(const struct tb_report *rep, const struct tb_epoch_row *r)
{
    (void)r;
    return rep->ranks;
}

#define U64(field) TB_COL_U64, offsetof(struct tb_epoch_row, field), NULL
#define F64(field) TB_COL_F64, offsetof(struct tb_epoch_row, field), NULL
#define FN(fn) TB_COL_FN, 0, fn
#define SPECIAL(kind) kind, 0, NULL

/* CSV name, JSON name (NULL: the CSV's), the JSON object holding it (NULL: the row),
 * its value, when it has one, whether a modelled device leaves it out, its unit, what
 * it is. */
const struct tb_report_column tb_report_columns[] = {
    { "epoch", NULL, NULL, U64(epoch), TB_COL_ALWAYS, false, "", "the epoch, from 1; 0 is val_at_start's row" },
    { "steps", NULL, NULL, U64(steps), TB_COL_ALWAYS, false, "", "training steps the epoch ran" },
    { "seconds", NULL, NULL, F64(seconds), TB_COL_ALWAYS, false, "s", "the epoch's training time" },
    { "images_per_s", NULL, NULL, F64(images_per_s), TB_COL_ALWAYS, false, "1/s", "training images a second" },
    { "loss", NULL, NULL, F64(loss), TB_COL_TRAINED, true, "", "the training objective, mean over the steps" },
    { "loss_", "losses", NULL, SPECIAL(TB_COL_TERMS), TB_COL_TRAINED, true, "",
      "each loss term the model reports, mean over the steps (CSV: loss_TERM; JSON: an object by term)" },
    { "lr", NULL, NULL, F64(lr), TB_COL_TRAINED, false, "", "the learning rate of the epoch's last step" },
    { "miou", NULL, NULL, F64(miou), TB_COL_VALIDATED, true, "", "validation mean IoU, a fraction" },
    { "pixel_accuracy", NULL, NULL, F64(acc), TB_COL_VALIDATED, true, "", "validation pixel accuracy, a fraction" },
    { "val_loss", NULL, NULL, F64(val_loss), TB_COL_VALIDATED, true, "", "validation loss, mean over the images" },
    { "peak_device_bytes", NULL, NULL, U64(peak_bytes), TB_COL_ALWAYS, false, "B", "the device memory's peak" },
    { "data_wait_seconds", NULL, NULL, F64(data_wait), TB_COL_TRAINED, true, "s",
      "the steps waiting for batches (on a modelled device, this machine's loader: left out)" },
    { "skipped_samples", NULL, NULL, U64(skipped), TB_COL_ALWAYS, false, "",
      "bad samples skipped ([dataset] on_bad_sample)" },
    { "swap_", "swap", "swap", SPECIAL(TB_COL_SWAP), TB_COL_ALWAYS, false, "",
      "the memory manager's counters (core/engine/swap_stats.h)" },
    { "swapped_share", NULL, "swap", FN(swapped_share), TB_COL_ALWAYS, false, "",
      "bytes moved out over the bytes of activations and gradients the training steps made" },
    { "recomputed_share", NULL, "swap", FN(recomputed_share), TB_COL_ALWAYS, false, "",
      "bytes dropped for recomputation over the same" },
    { "ranks", NULL, NULL, FN(ranks), TB_COL_ALWAYS, false, "", "ranks of the job" },
    { "allreduce_seconds", NULL, NULL, F64(allreduce), TB_COL_TRAINED, false, "s",
      "the gradient all-reduces running, the ranks' mean" },
    { "allreduce_wait_seconds", NULL, NULL, F64(allreduce_wait), TB_COL_TRAINED, false, "s",
      "the steps waiting for them, the ranks' mean" },
    { "free_device_bytes", NULL, NULL, U64(free_bytes), TB_COL_FRAG, false, "B",
      "device memory free at the epoch's end" },
    { "largest_free_device_bytes", NULL, NULL, U64(largest_free), TB_COL_FRAG, false, "B",
      "the largest of it in one block" },
    { "fragmentation", NULL, NULL, FN(tb_report_fragmentation), TB_COL_ALWAYS, false, "",
      "1 - largest free block / free" },
};
const size_t tb_report_ncolumns = sizeof tb_report_columns / sizeof tb_report_columns[0];

bool tb_report_column_present(const struct tb_report *rep, const struct tb_epoch_row *r,
                              const struct tb_report_column *c)
{
    if (c->computed && rep->modelled)
        return false;
    switch (c->when) {
    case TB_COL_ALWAYS:
        return true;
    case TB_COL_TRAINED:
        return r->steps > 0;
    case TB_COL_VALIDATED:
        return r->validated;
    case TB_COL_FRAG:
        return r->frag_known;
    }
    return false;
}

double tb_report_column_number(const struct tb_report *rep, const struct tb_epoch_row *r,
                               const struct tb_report_column *c)
{
    if (!tb_report_column_present(rep, r, c))
        return NAN;
    switch (c->kind) {
    case TB_COL_U64:
        return (double)*(const uint64_t *)((const char *)r + c->offset);
    case TB_COL_F64:
        return *(const double *)((const char *)r + c->offset);
    case TB_COL_FN:
        return c->value(rep, r);
    case TB_COL_TERMS:
    case TB_COL_SWAP:
        break;
    }
    return NAN;
}
