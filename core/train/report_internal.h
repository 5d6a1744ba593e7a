/* core/train/report_internal.h: what a training run reports per epoch (report.c): a row
 * of epochs.csv and one of epochs.jsonl ([report] csv and jsonl name other files), the
 * epoch's log line, at log level debug where its step time went, and the statistics
 * every rank contributes to the row.
 *
 * Memory: struct tb_report owns its two files (tb_report_close() closes them); the loss
 * terms, classes, confusion matrix and progress display it points to are the trainer's
 * and outlive it. */
#ifndef TB_CORE_REPORT_INTERNAL_H
#define TB_CORE_REPORT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <trainbig/backend.h>
#include <trainbig/dataset.h>
#include <trainbig/error.h>

#include "core/config/setup_internal.h"
#include "core/engine/engine_internal.h"
#include "core/engine/swapmem_internal.h"
#include "core/train/metrics_internal.h"
#include "core/train/progress_internal.h"

enum { TB_TERMS_MAX = 8 };

/* A loss term the log reports: one of the graph's losses (weight > 0, part of the
 * objective) or a (1,1,1,1) output the model only reports. */
struct tb_term {
    const char *name; /* owned by the graph */
    float weight;     /* 0: reported only */
    bool sums_images; /* over ranks its value is their sum, not their mean */
    double sum;       /* over this epoch's steps */
};

/* A statistic over the ranks of a data-parallel run. */
struct tb_spread {
    double min, mean, max;
};

/* The statistics each rank contributes to a row, one row each: its name in epochs.jsonl's
 * per_rank (the column it spreads), and its value in an epoch row r, in the order per_rank
 * lists them. */
#define TB_RANK_STATS(X)                                           \
    X(PEAK, "peak_device_bytes", (double)r->peak_bytes)            \
    X(DATA_WAIT, "data_wait_seconds", r->data_wait)                \
    X(SWAP_OUT, "swap_out_bytes", (double)r->swap.bytes_out)       \
    X(SWAP_IN, "swap_in_bytes", (double)r->swap.bytes_in)          \
    X(STALL, "stall_seconds", r->swap.stall_seconds)               \
    X(ALLREDUCE, "allreduce_seconds", r->allreduce)                \
    X(ALLREDUCE_WAIT, "allreduce_wait_seconds", r->allreduce_wait) \
    X(SECONDS, "seconds", r->seconds)

enum {
#define TB_RS_ENUM(id, name, value) TB_RS_##id,
    TB_RANK_STATS(TB_RS_ENUM)
#undef TB_RS_ENUM
        TB_RS_COUNT
};

/* One epoch's row; epoch 0 with no steps is the validation before training. */
struct tb_epoch_row {
    uint64_t epoch, steps;
    double allreduce, allreduce_wait;    /* seconds: the gradient all-reduces ran, and steps waited for them */
    struct tb_spread ranks[TB_RS_COUNT]; /* more than one rank: each statistic's spread */
    double seconds, images_per_s, loss, lr, miou, acc, val_loss;
    double data_wait; /* seconds the steps waited for batches */
    uint64_t peak_bytes, skipped;
    /* At the epoch's end: device bytes free (under the cap, or of what the backend holds
     * without one) and the largest of them in one block; frag_known is false in a row
     * that holds none (a zeroed one). */
    bool frag_known;
    uint64_t free_bytes, largest_free;
    struct tb_swap_stats swap; /* this epoch's, training and validation */
    uint64_t step_bytes;       /* the activations and gradients one training step makes */
    bool validated;
};

struct tb_report {
    FILE *csv, *jsonl;           /* owned; NULL on ranks other than 0 */
    char *csv_path, *jsonl_path; /* owned: the files, for messages */
    int epochs;                  /* [run] epochs */
    int ranks;                   /* of the job */
    const struct tb_term *terms;
    int nterms;
    const struct tb_class *classes;
    int nclasses;
    const struct tb_confusion *confusion; /* the last validation's */
    struct tb_progress *progress;         /* cleared before a log line */
    bool modelled;                        /* the device is modelled: no loss or mIoU was computed */
};

/* ------------------------------------------------------------------ columns */

/* When a column has a value; without one it is empty in epochs.csv, null in epochs.jsonl. */
enum tb_column_when {
    TB_COL_ALWAYS,
    TB_COL_TRAINED,   /* the epoch ran steps (not val_at_start's row) */
    TB_COL_VALIDATED, /* the epoch validated */
    TB_COL_FRAG,      /* the backend says its largest free block */
};

enum tb_column_kind {
    TB_COL_U64,   /* a uint64_t of struct tb_epoch_row, printed exactly */
    TB_COL_F64,   /* a double of struct tb_epoch_row */
    TB_COL_FN,    /* computed from the row by value() */
    TB_COL_TERMS, /* the model's loss terms: CSV loss_TERM columns, a JSON object by term */
    TB_COL_SWAP,  /* the memory manager's counters, as core/engine/swap_stats.h lists them */
};

/* A column of epochs.csv and member of epochs.jsonl (report_columns.c). Epochs add no
 * two rows: each column is the epoch's own (how a value aggregates over the steps is the
 * trainer's; over ranks, tb_report_gather_ranks'). */
struct tb_report_column {
    const char *csv;   /* its CSV header (TERMS: the prefix of each term's) */
    const char *json;  /* its JSON member; NULL: as csv */
    const char *group; /* the JSON object it is a member of; NULL: the row itself */
    enum tb_column_kind kind;
    size_t offset; /* U64, F64: of the field in struct tb_epoch_row */
    double (*value)(const struct tb_report *rep, const struct tb_epoch_row *r); /* FN */
    enum tb_column_when when;
    bool computed; /* a value the device computes: none on a modelled device */
    const char *unit, *what;
};

extern const struct tb_report_column tb_report_columns[];
extern const size_t tb_report_ncolumns;

/* Whether column c of row r has a value; its value as a number (NaN: none). */
bool tb_report_column_present(const struct tb_report *rep, const struct tb_epoch_row *r,
                              const struct tb_report_column *c);
double tb_report_column_number(const struct tb_report *rep, const struct tb_epoch_row *r,
                               const struct tb_report_column *c);

/* 1 - largest free block / free bytes: 0 when the free memory is one block (or there is
 * none), near 1 when it is in many small pieces. NaN when the backend does not say. */
double tb_report_fragmentation(const struct tb_report *rep, const struct tb_epoch_row *r);

/* Writes epochs.csv's header line (report.c). */
void tb_report_csv_header(const struct tb_report *rep, FILE *f);

/* Opens (appends to) the CSV and JSONL reports (report_files.c): the files [report] csv
 * and jsonl name, or epochs.csv and epochs.jsonl in the run directory (open as dirfd,
 * rundir in messages; never through a symbolic link there); a new or empty CSV file gets
 * its header first, written through at once. A resumed run passes the epochs its
 * checkpoint completed as keep: rows of later epochs (reported before a stop that came
 * ahead of their checkpoint) are dropped first, as the run reports them again, and so is a
 * last line a kill cut short; keep =
 * UINT64_MAX drops nothing. The fields other than the files must be set already. Only
 * rank 0 calls it. */
int tb_report_open(struct tb_report *rep, const struct tb_report_settings *report, int dirfd, const char *rundir,
                   uint64_t keep, struct tb_err *err);
void tb_report_close(struct tb_report *rep);

/* Opens name in the directory open as dirfd (AT_FDCWD: name is a path, followed as the
 * user named it; else never through a symbolic link), the file of [report] `key` that
 * messages call path, for appending or (append false) from empty. An error names the
 * file and the key. *out is the caller's to close. */
int tb_report_file_open(int dirfd, const char *name, const char *path, const char *key, bool append, FILE **out,
                        struct tb_err *err);

/* f's buffered writes on their way to path, the file of [report] `key`; an error names
 * both (a full disk, /dev/full). f may be NULL (nothing to do). */
int tb_report_file_flush(FILE *f, const char *path, const char *key, struct tb_err *err);

/* Writes the buffered rows through; an error names the file that cannot take them (a
 * full disk, /dev/full). */
int tb_report_flush(const struct tb_report *rep, struct tb_err *err);

/* The CSV report (jsonl false) or the JSONL one written through and synced to disk; an
 * error names the file. */
int tb_report_sync(const struct tb_report *rep, bool jsonl, struct tb_err *err);

/* Appends r to the open reports, each term's mean over r's steps from its sum, each file
 * written through and synced before the next (tb_report_sync). */
int tb_report_rows(const struct tb_report *rep, const struct tb_epoch_row *r, struct tb_err *err);

/* Logs r's line: the epoch's time, speed, losses, validation, data wait and memory. */
void tb_report_log_epoch(const struct tb_report *rep, const struct tb_epoch_row *r);

/* At log level debug: where the epoch's step time went (op_seconds, per schedule step of
 * tx), the slowest ops first. */
void tb_report_op_times(const struct tb_exec *tx, const double *op_seconds, double wait_seconds, double epoch_seconds);

/* The epoch's statistics of every rank: min, mean and max of each, and the skipped
 * samples of all; the job's all-reduce figures become the ranks' mean. Every rank calls
 * it. */
int tb_report_gather_ranks(struct tb_epoch_row *r, int ranks, struct tb_err *err);

/* Free device bytes: the cap (or, without one, what the backend holds) less what is in use. */
uint64_t tb_report_free_bytes(const struct tb_mem_stats *ms);

/* The swap counters of both executors together (vx may be NULL). */
struct tb_swap_stats tb_report_swap_total(const struct tb_exec *tx, const struct tb_exec *vx);

/* The counters since *mark, which becomes the counters now. */
struct tb_swap_stats tb_report_swap_since(struct tb_swap_stats *mark, const struct tb_exec *tx,
                                          const struct tb_exec *vx);

#endif
