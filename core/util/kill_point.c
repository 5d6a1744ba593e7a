/* kill_point.c: a process killed on purpose at a chosen durable write (kill_point.h). */
#include "config.h"

#include "core/util/kill_point.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

void tb_kill_point(const char *what, const char *path)
{
    static atomic_long calls;
    const char *v = getenv("TRAINBIG_KILL_AT");
    if (!v || !*v)
        return;
    char *end;
    long at = strtol(v, &end, 10);
    if (*end || at <= 0)
        return;
    long n = atomic_fetch_add(&calls, 1) + 1;
    if (n != at)
        return;
    fprintf(stderr, "trainbig: killed at write %ld: %s %s\n", n, path, what);
    fflush(stderr);
    raise(SIGKILL);
}
