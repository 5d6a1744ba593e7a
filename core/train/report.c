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
#define TB_RS_NAME(id, name, value) [TB_RS_##id] = name,
    TB_RANK_STATS(TB_RS_NAME)
#undef TB_RS_NAME
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

/* The swap counters' epochs.csv columns (each after a comma) or epochs.jsonl members
 * (comma-separated, the first without when first), in the table's order. */
static void swap_counters(FILE *f, const struct tb_swap_stats *s, bool json, bool first)
{
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

/* ------------------------------------------------------------------ rows */

void tb_report_csv_header(const struct tb_report *rep, FILE *f)
{
    for (size_t k = 0; k < tb_report_ncolumns; k++) {
        const struct tb_report_column *c = &tb_report_columns[k];
        if (c->kind == TB_COL_TERMS) {
            for (int i = 0; i < rep->nterms; i++)
                fprintf(f, ",%s%s", c->csv, rep->terms[i].name);
        } else if (c->kind == TB_COL_SWAP) {
            for (size_t i = 0; i < tb_swap_ncounters; i++)
                if (tb_swap_counters[i].csv)
                    fprintf(f, ",%s", tb_swap_counters[i].csv);
        } else {
            fprintf(f, "%s%s", k ? "," : "", c->csv);
        }
    }
    fputc('\n', f);
}

/* Column c's value in row r, as CSV (json false: empty without one) or JSON (null);
 * TERMS and SWAP: each of their columns after a comma, or their members (the first
 * without a comma when first). means: each loss term's over the epoch's steps. */
static void cell(FILE *f, const struct tb_report *rep, const struct tb_epoch_row *r, const struct tb_report_column *c,
                 const double *means, bool json, bool first)
{
    switch (c->kind) {
    case TB_COL_TERMS: {
        const bool present = tb_report_column_present(rep, r, c);
        for (int i = 0; i < rep->nterms; i++) {
            if (json)
                fprintf(f, "%s\"%s\":", i ? "," : "", rep->terms[i].name);
            else
                fputc(',', f);
            (json ? json_number : csv_number)(f, present ? means[i] : NAN);
        }
        return;
    }
    case TB_COL_SWAP:
        swap_counters(f, &r->swap, json, first);
        return;
    case TB_COL_U64:
        if (tb_report_column_present(rep, r, c)) {
            fprintf(f, "%" PRIu64, *(const uint64_t *)((const char *)r + c->offset));
            return;
        }
        break;
    case TB_COL_F64:
    case TB_COL_FN:
        break;
    }
    (json ? json_number : csv_number)(f, tb_report_column_number(rep, r, c));
}

static void write_csv(const struct tb_report *rep, const struct tb_epoch_row *r, const double *means)
{
    FILE *f = rep->csv;
    for (size_t k = 0; k < tb_report_ncolumns; k++) {
        const struct tb_report_column *c = &tb_report_columns[k];
        if (k && c->kind != TB_COL_TERMS && c->kind != TB_COL_SWAP)
            fputc(',', f); /* those two put a comma before each of their columns */
        cell(f, rep, r, c, means, false, false);
    }
    fputc('\n', f);
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
    const char *group = NULL;
    bool first = true; /* of the object being written */
    fputc('{', f);
    for (size_t k = 0; k < tb_report_ncolumns; k++) {
        const struct tb_report_column *c = &tb_report_columns[k];
        if (group && (!c->group || strcmp(c->group, group) != 0)) {
            fputc('}', f);
            group = NULL;
        }
        if (c->group && !group) {
            fprintf(f, ",\"%s\":{", c->group);
            group = c->group;
            first = true;
        }
        const char *name = c->json ? c->json : c->csv;
        if (c->kind == TB_COL_SWAP) { /* its members straight in the group */
            cell(f, rep, r, c, means, true, first);
            first = false;
            continue;
        }
        fprintf(f, "%s\"%s\":", first ? "" : ",", name);
        first = false;
        if (c->kind == TB_COL_TERMS)
            fputc('{', f);
        cell(f, rep, r, c, means, true, true);
        if (c->kind == TB_COL_TERMS)
            fputc('}', f);
    }
    if (group)
        fputc('}', f);
    jsonl_ranks_classes(rep, r, f);
    fputs("}\n", f);
}

int tb_report_rows(const struct tb_report *rep, const struct tb_epoch_row *row, struct tb_err *err)
{
    const struct tb_epoch_row *r = row;
    double means[TB_TERMS_MAX];
    for (int i = 0; i < rep->nterms; i++)
        means[i] = r->steps ? rep->terms[i].sum / (double)r->steps : NAN;
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
                 (double)r->free_bytes / 1048576.0, (double)r->largest_free / 1048576.0,
                 100.0 * tb_report_fragmentation(rep, r));
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
#define TB_RS_VALUE(id, name, value) [TB_RS_##id] = (value),
        TB_RANK_STATS(TB_RS_VALUE)
#undef TB_RS_VALUE
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
