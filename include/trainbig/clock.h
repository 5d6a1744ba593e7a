/* trainbig/clock.h: the clock trainbig times things with, for plugins that time their own
 * work (a swap policy measuring its steps). Header only (static inline: no ABI), and not
 * in trainbig/trainbig.h: CLOCK_MONOTONIC is POSIX, so a file compiled as strict C11
 * defines _POSIX_C_SOURCE (199309L or later) before its first include. */
#ifndef TRAINBIG_CLOCK_H
#define TRAINBIG_CLOCK_H

#include <time.h>

/* Seconds on CLOCK_MONOTONIC: the clock of the core's timings and of the backends'
 * event_time, so op and copy times line up in traces. */
static inline double tb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
