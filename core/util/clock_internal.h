/* core/util/clock_internal.h: the one clock the core times things with (header-only). */
#ifndef TB_CORE_CLOCK_INTERNAL_H
#define TB_CORE_CLOCK_INTERNAL_H

#include <time.h>

/* Seconds on CLOCK_MONOTONIC: the clock backends' event_time uses too, so op and copy
 * times line up in traces. */
static inline double tb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
