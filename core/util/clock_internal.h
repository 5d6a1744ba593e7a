/* core/util/clock_internal.h: the one clock the core times things with, tb_now: the SDK's
 * (trainbig/clock.h), so plugins time with the same one. */
#ifndef TB_CORE_CLOCK_INTERNAL_H
#define TB_CORE_CLOCK_INTERNAL_H

#include <trainbig/clock.h>

#endif
