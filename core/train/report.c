/* report.c: a training run's per-epoch reports (core/train/report_internal.h): the
 * epochs.csv and epochs.jsonl rows, the epoch's log line and its op times, and the
 * ranks' statistics gathered into a row. It owns the two report files of struct
 * tb_report and allocates nothing else that outlives a call. */
#include "config.h"

#include "core/train/report_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dist/world.h"
#include "core/util/log_control.h"

static const char *const rank_stat_names[TB_RS_COUNT] = {
    "peak_device_bytes", "data_wait_seconds", "swap_out_bytes",         "swap_in_bytes",
    "stall_seconds",     "allreduce_seconds", "allreduce_wait_seconds", "seconds",
};

/* ------------------------------------------------------------------ numbers */

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

uint64_t tb_report_free_bytes(const struct tb_mem_stats *ms)
{
    const uint64_t total = ms->capacity && ms->capacity != UINT64_MAX ? ms->capacity : ms->reserved;
    return total > ms->in_use ? total - ms->in_use : 0;
}

/* 1 - largest free block / free bytes: 0 when the free memory is one block (or there is
 * none), near 1 when it is in many small pieces. NaN when the backend does not say. */
static double fragmentation(const struct tb_epoch_row *r)
{
    if (!r->frag_known)
        return NAN;
    return r->free_bytes ? 1.0 - (double)r->largest_free / (double)r->free_bytes : 0.0;
}

/* ------------------------------------------------------------------ swap counters */

struct tb_swap_stats tb_report_swap_total(const struct tb_exec *tx, const struct tb_exec *vx)
{
    struct tb_swap_stats sum = { 0 };
    if (tx)
        tb_swap_stats_add(&sum, tb_exec_swap_stats(tx));
    if (vx)
        tb_swap_stats_add(&sum, tb_exec_swap_stats(vx));
    return sum;
}

struct tb_swap_stats tb_report_swap_since(struct tb_swap_stats *mark, const struct tb_exec *tx,
                                          const struct tb_exec *vx)
{
    const struct tb_swap_stats now_ = tb_report_swap_total(tx, vx), d = tb_swap_stats_since(&now_, mark);
    *mark = now_;
    return d;
}

void tb_report_swap_csv_header(FILE *f)
{
    for (size_t i = 0; i < tb_swap_ncounters; i++)
        if (tb_swap_counters[i].csv)
            fprintf(f, ",%s", tb_swap_counters[i].csv);
}

/* The swap counters' epochs.csv columns (each after a comma) or epochs.jsonl members
 * (comma-separated), in the table's order. */
static void swap_counters(FILE *f, const struct tb_swap_stats *s, bool json)
{
    bool first = true;
    for (size_t i = 0; i < tb_swap_ncounters; i++) {
        const struct tb_swap_counter *c = &tb_swap_counters[i];
        const char *name = json ? c->json : c->csv;
        if (!name)
            continue;
        if (json)
            fprintf(f, "%s\"%s\":", first ? "" : ",", name);
        else
            fputc(',', f);
        first = false;
        if (c->type == TB_SWAP_COUNTER_U64)
            fprintf(f, "%" PRIu64, *(const uint64_t *)((const char *)s + c->offset));
        else if (json)
            json_number(f, tb_swap_counter_get(s, c));
        else
            csv_number(f, tb_swap_counter_get(s, c));
    }
}

/* Shares of the epoch's training activation and gradient bytes (steps x step_bytes) that
 * went to the host and that were dropped for recomputation (the rest stayed); NaN
 * without steps. A tensor moved out twice in a step counts twice. */
static void shares(const struct tb_epoch_row *r, double *swapped, double *recomputed)
{
    const double all = (double)r->steps * (double)r->step_bytes;
    *swapped = all > 0 ? (double)r->swap.bytes_out / all : NAN;
    *recomputed = all > 0 ? (double)r->swap.drop_bytes / all : NAN;
}

/* ------------------------------------------------------------------ rows */

static void write_csv(const struct tb_report *rep, const struct tb_epoch_row *r, const double *means)
{
    FILE *f = rep->csv;
    fprintf(f, "%" PRIu64 ",%" PRIu64 ",", r->epoch, r->steps);
    csv_number(f, r->seconds);
    fputc(',', f);
    csv_number(f, r->images_per_s);
    fputc(',', f);
    csv_number(f, r->steps ? r->loss : NAN);
    for (int i = 0; i < rep->nterms; i++) {
        fputc(',', f);
        csv_number(f, means[i]);
    }
    fputc(',', f);
    csv_number(f, r->steps ? r->lr : NAN);
    fputc(',', f);
    csv_number(f, r->validated ? r->miou : NAN);
    fputc(',', f);
    csv_number(f, r->validated ? r->acc : NAN);
    fputc(',', f);
    csv_number(f, r->validated ? r->val_loss : NAN);
    fprintf(f, ",%" PRIu64 ",", r->peak_bytes);
    csv_number(f, r->steps ? r->data_wait : NAN);
    fprintf(f, ",%" PRIu64, r->skipped);
    swap_counters(f, &r->swap, false);
    double sw, rc;
    shares(r, &sw, &rc);
    fputc(',', f);
    csv_number(f, sw);
    fputc(',', f);
    csv_number(f, rc);
    fprintf(f, ",%d,", rep->ranks);
    csv_number(f, r->steps ? r->allreduce : NAN);
    fputc(',', f);
    csv_number(f, r->steps ? r->allreduce_wait : NAN);
    if (r->frag_known)
        fprintf(f, ",%" PRIu64 ",%" PRIu64 ",", r->free_bytes, r->largest_free);
    else
        fputs(",,,", f);
    csv_number(f, fragmentation(r));
    fputc('\n', f);
}

/* The JSONL row's swap, ranks, all-reduce and free memory members. */
static void jsonl_swap_memory(const struct tb_report *rep, const struct tb_epoch_row *r, FILE *f)
{
    fputs(",\"swap\":{", f);
    swap_counters(f, &r->swap, true);
    double sw, rc;
    shares(r, &sw, &rc);
    fputs(",\"swapped_share\":", f);
    json_number(f, sw);
    fputs(",\"recomputed_share\":", f);
    json_number(f, rc);
    fprintf(f, "},\"ranks\":%d,\"allreduce_seconds\":", rep->ranks);
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
}

/* The JSONL row's per_rank (several ranks) and class_iou (validated) members. */
static void jsonl_ranks_classes(const struct tb_report *rep, const struct tb_epoch_row *r, FILE *f)
{
    if (rep->ranks > 1) {
        fputs(",\"per_rank\":{", f);
        for (int k = 0; k < TB_RS_COUNT; k++) {
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
    if (r->validated && !rep->modelled) {
        fputs(",\"class_iou\":{", f);
        for (int c = 0; c < rep->nclasses; c++) {
            fputs(c ? ",\"" : "\"", f);
            for (const char *p = rep->classes[c].name; *p; p++)
                fputc(*p == '"' || *p == '\\' ? '_' : *p, f);
            fputs("\":", f);
            json_number(f, tb_confusion_iou(rep->confusion, c));
        }
        fputc('}', f);
    }
}

static void write_jsonl(const struct tb_report *rep, const struct tb_epoch_row *r, const double *means)
{
    FILE *f = rep->jsonl;
    fprintf(f, "{\"epoch\":%" PRIu64 ",\"steps\":%" PRIu64 ",\"seconds\":", r->epoch, r->steps);
    json_number(f, r->seconds);
    fputs(",\"images_per_s\":", f);
    json_number(f, r->images_per_s);
    fputs(",\"loss\":", f);
    json_number(f, r->steps ? r->loss : NAN);
    fputs(",\"losses\":{", f);
    for (int i = 0; i < rep->nterms; i++) {
        fprintf(f, "%s\"%s\":", i ? "," : "", rep->terms[i].name);
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
    jsonl_swap_memory(rep, r, f);
    jsonl_ranks_classes(rep, r, f);
    fputs("}\n", f);
}

/* A modelled device's row: its values were not computed, so they are reported as absent
 * (CSV empty, JSON null), not as the zeros its reads gave. */
static struct tb_epoch_row values_of(const struct tb_report *rep, const struct tb_epoch_row *r)
{
    struct tb_epoch_row v = *r;
    if (rep->modelled)
        v.loss = v.miou = v.acc = v.val_loss = v.data_wait = NAN; /* the loader's wait is this machine's */
    return v;
}

int tb_report_rows(const struct tb_report *rep, const struct tb_epoch_row *row, struct tb_err *err)
{
    const struct tb_epoch_row values = values_of(rep, row), *r = &values;
    double means[TB_TERMS_MAX];
    for (int i = 0; i < rep->nterms; i++)
        means[i] = r->steps && !rep->modelled ? rep->terms[i].sum / (double)r->steps : NAN;
    if (rep->csv)
        write_csv(rep, r, means);
    int rc = tb_report_sync(rep, false, err);
    if (!rc && rep->jsonl)
        write_jsonl(rep, r, means);
    return rc ? rc : tb_report_sync(rep, true, err);
}

/* ------------------------------------------------------------------ log lines */

void tb_report_log_epoch(const struct tb_report *rep, const struct tb_epoch_row *r)
{
    char losses[512] = "";
    size_t o = 0;
    for (int i = 0; r->steps && i < rep->nterms && o < sizeof losses; i++)
        o += (size_t)snprintf(losses + o, sizeof losses - o, "%s%s %.4f", i ? ", " : "", rep->terms[i].name,
                              rep->terms[i].sum / (double)r->steps);
    char val[128] = "";
    if (r->validated && rep->modelled)
        snprintf(val, sizeof val, ", validated (modelled: no mIoU)");
    else if (r->validated)
        snprintf(val, sizeof val, ", val mIoU %.2f%% (pixel accuracy %.2f%%, loss %.4f)", 100.0 * r->miou,
                 100.0 * r->acc, r->val_loss); /* percent, as the validation table */
    if (rep->modelled)
        snprintf(losses, sizeof losses, "a modelled device computes none");
    char skipped[256] = "";
    size_t so = 0;
    if (r->skipped)
        so += (size_t)snprintf(skipped, sizeof skipped, ", %" PRIu64 " bad samples skipped", r->skipped);
    if (r->swap.swaps_out || r->swap.swaps_in)
        so += (size_t)snprintf(
            skipped + so, sizeof skipped - so, ", swapped %.2f GiB out and %.2f GiB in, stalled %.2f s",
            (double)r->swap.bytes_out / 1073741824.0, (double)r->swap.bytes_in / 1073741824.0, r->swap.stall_seconds);
    if (r->swap.recomputes && so < sizeof skipped)
        snprintf(skipped + so, sizeof skipped - so, ", recomputed %.2f GiB (%" PRIu64 " ops, %.2f s)",
                 (double)r->swap.recompute_bytes / 1073741824.0, r->swap.recomputes, r->swap.recompute_seconds);
    char frag[128] = "";
    if (r->frag_known)
        snprintf(frag, sizeof frag, " (now %.1f MiB free, largest block %.1f MiB: fragmentation %.0f%%)",
                 (double)r->free_bytes / 1048576.0, (double)r->largest_free / 1048576.0, 100.0 * fragmentation(r));
    tb_progress_clear(rep->progress);
    if (r->steps && rep->modelled)
        tb_log(TB_LOG_INFO,
               "epoch %" PRIu64 "/%d: %.1f s modelled, %.1f img/s, no loss (%s), lr %.3g%s%s, peak device memory "
               "%.1f MiB%s",
               r->epoch, rep->epochs, r->seconds, r->images_per_s, losses, r->lr, val, skipped,
               (double)r->peak_bytes / 1048576.0, frag);
    else if (r->steps)
        tb_log(TB_LOG_INFO,
               "epoch %" PRIu64 "/%d: %.1f s, %.1f img/s, loss %.4f (%s), lr %.3g%s, data wait %.2f s (%.1f%%)%s, "
               "peak device memory %.1f MiB%s",
               r->epoch, rep->epochs, r->seconds, r->images_per_s, r->loss, losses, r->lr, val, r->data_wait,
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

void tb_report_op_times(const struct tb_exec *tx, const double *op_seconds, double wait_seconds, double epoch_seconds)
{
    const struct tb_schedule *sch = tb_exec_schedule(tx);
    const size_t n = tb_schedule_steps(sch);
    size_t *ix = malloc(n * sizeof *ix);
    if (!ix || !tb_log_enabled(TB_LOG_DEBUG)) {
        free(ix);
        return;
    }
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        ix[i] = i;
        total += op_seconds[i];
    }
    op_seconds_base = op_seconds;
    qsort(ix, n, sizeof *ix, cmp_op_seconds);
    tb_log(TB_LOG_DEBUG, "epoch time %.2f s: ops %.2f s, data %.2f s, rest %.2f s; slowest ops:", epoch_seconds, total,
           wait_seconds, epoch_seconds - total - wait_seconds);
    for (size_t i = 0; i < n && i < 20; i++)
        tb_log(TB_LOG_DEBUG, "  %6.3f s %5.1f%%  %s", op_seconds[ix[i]], 100.0 * op_seconds[ix[i]] / total,
               tb_schedule_step_name(sch, ix[i]));
    free(ix);
}

/* ------------------------------------------------------------------ ranks */

int tb_report_gather_ranks(struct tb_epoch_row *r, int ranks, struct tb_err *err)
{
    double lo[TB_RS_COUNT + 1] = {
        [TB_RS_PEAK] = (double)r->peak_bytes,         [TB_RS_DATA_WAIT] = r->data_wait,
        [TB_RS_SWAP_OUT] = (double)r->swap.bytes_out, [TB_RS_SWAP_IN] = (double)r->swap.bytes_in,
        [TB_RS_STALL] = r->swap.stall_seconds,        [TB_RS_ALLREDUCE] = r->allreduce,
        [TB_RS_ALLREDUCE_WAIT] = r->allreduce_wait,   [TB_RS_SECONDS] = r->seconds,
        [TB_RS_COUNT] = (double)r->skipped,
    };
    double hi[TB_RS_COUNT + 1], sum[TB_RS_COUNT + 1];
    memcpy(hi, lo, sizeof hi);
    memcpy(sum, lo, sizeof sum);
    if (ranks > 1) {
        int rc = tb_comm_allreduce(lo, TB_RS_COUNT, TB_COMM_F64, TB_COMM_MIN, err);
        if (!rc)
            rc = tb_comm_allreduce(hi, TB_RS_COUNT, TB_COMM_F64, TB_COMM_MAX, err);
        if (!rc)
            rc = tb_comm_allreduce(sum, TB_RS_COUNT + 1, TB_COMM_F64, TB_COMM_SUM, err);
        if (rc)
            return tb_err_prefix(err, "gathering the ranks' epoch statistics");
    }
    for (int k = 0; k < TB_RS_COUNT; k++)
        r->ranks[k] = (struct tb_spread){ lo[k], sum[k] / ranks, hi[k] };
    r->skipped = (uint64_t)sum[TB_RS_COUNT];
    /* The job's all-reduce figures are the ranks' mean. */
    r->allreduce = r->ranks[TB_RS_ALLREDUCE].mean;
    r->allreduce_wait = r->ranks[TB_RS_ALLREDUCE_WAIT].mean;
    return TB_OK;
}
