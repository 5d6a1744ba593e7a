/* progress.c: the training progress display (core/train/progress_internal.h). It
 * allocates nothing; the state is the caller's struct tb_progress. */
#include "config.h"

#include "core/train/progress_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <trainbig/clock.h>
#include <unistd.h>

#include "core/util/log_control.h"

void tb_progress_init(struct tb_progress *p, int pmode, bool lead)
{
    *p = (struct tb_progress){ .run_start = tb_now() };
    p->live = lead && (pmode == 1 || (pmode == 0 && isatty(STDERR_FILENO)));
    p->quiet = pmode == 2 || !lead;
}

void tb_progress_clear(struct tb_progress *p)
{
    if (p->live && p->line_shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    p->line_shown = false;
}

void tb_progress_step(struct tb_progress *p, double seconds)
{
    p->step_seconds_sum += seconds;
    p->steps_timed++;
}

void tb_format_duration(double s, char *buf, size_t size)
{
    long v = s > 0 && s < 1e8 ? (long)(s + 0.5) : 0;
    if (v >= 3600)
        snprintf(buf, size, "%ld:%02ld:%02ld", v / 3600, v / 60 % 60, v % 60);
    else
        snprintf(buf, size, "%ld:%02ld", v / 60, v % 60);
}

void tb_progress_show(struct tb_progress *p, uint64_t epoch, uint64_t step_in_epoch, uint64_t steps_left, double loss,
                      bool force)
{
    if (p->quiet)
        return;
    const double tnow = tb_now();
    const double interval = p->live ? 0.25 : 30.0;
    if (!force && tnow - p->last_progress < interval)
        return;
    p->last_progress = tnow;
    const double per_step = p->steps_timed ? p->step_seconds_sum / (double)p->steps_timed : 0;
    const double ips = per_step > 0 ? p->batch / per_step : 0;
    char eta[32];
    tb_format_duration(per_step * (double)steps_left, eta, sizeof eta);
    char line[256];
    if (p->modelled) /* img/s and the time left are the model's, not this machine's */
        snprintf(line, sizeof line,
                 "epoch %" PRIu64 "/%d  step %" PRIu64 "/%" PRIu64 "  %.1f img/s modelled  %s left modelled", epoch + 1,
                 p->epochs, step_in_epoch, p->iters_per_epoch, ips, eta);
    else
        snprintf(line, sizeof line, "epoch %" PRIu64 "/%d  step %" PRIu64 "/%" PRIu64 "  %.1f img/s  loss %.4f  ETA %s",
                 epoch + 1, p->epochs, step_in_epoch, p->iters_per_epoch, ips, loss, eta);
    if (p->live) {
        fprintf(stderr, "\r\033[K%s", line);
        p->line_shown = true;
    } else {
        tb_log(TB_LOG_INFO, "%s", line);
    }
    fflush(stderr);
}
