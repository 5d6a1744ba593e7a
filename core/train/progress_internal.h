/* core/train/progress_internal.h: the training progress display (progress.c): on a
 * terminal one line redrawn in place, otherwise a log line every 30 seconds, with the
 * epoch, the step, images per second, the loss and the time left. Owns no memory: the
 * struct lives in the trainer, and everything it prints goes to stderr. */
#ifndef TB_CORE_PROGRESS_INTERNAL_H
#define TB_CORE_PROGRESS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tb_progress {
    bool live;  /* a terminal: one line redrawn in place */
    bool quiet; /* [report] progress = no, or a rank other than 0 */
    bool line_shown;
    bool modelled; /* the device is modelled: no loss to show, times are the model's */
    int batch, epochs;        /* [train] batch, [run] epochs */
    uint64_t iters_per_epoch; /* steps of one epoch */
    double run_start, last_progress, step_seconds_sum;
    uint64_t steps_timed; /* steps whose time step_seconds_sum holds */
};

/* Starts the display for a run beginning now: pmode is [report] progress (0 auto, 1 yes,
 * 2 no); only the lead rank (rank 0) shows anything. Set batch, epochs and
 * iters_per_epoch before the first tb_progress_show(). */
void tb_progress_init(struct tb_progress *p, int pmode, bool lead);

/* Erases the line shown in place, if any, so that a log line can take its place. */
void tb_progress_clear(struct tb_progress *p);

/* Adds the time one step took to the mean that gives the speed and the time left. */
void tb_progress_step(struct tb_progress *p, double seconds);

/* Shows where the run is: step step_in_epoch of epoch `epoch` (from 0), steps_left to go,
 * loss the last step's. Shown at most every 0.25 s (live) or 30 s (a log), unless force. */
void tb_progress_show(struct tb_progress *p, uint64_t epoch, uint64_t step_in_epoch, uint64_t steps_left, double loss,
                      bool force);

/* s seconds as M:SS or H:MM:SS into buf. */
void tb_format_duration(double s, char *buf, size_t size);

#endif
