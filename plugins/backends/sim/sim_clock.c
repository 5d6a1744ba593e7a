/* backends/sim/sim_clock.c: streams, events and the host on virtual time (sim_clock.h). */
#include "sim_clock.h"

#include <string.h>

static double later(double a, double b)
{
    return a > b ? a : b;
}

void sim_clock_init(struct sim_clock *c, double launch_s)
{
    memset(c, 0, sizeof *c);
    c->launch_s = launch_s > 0 ? launch_s : 0;
}

double sim_submit(struct sim_clock *c, enum tb_stream s, double seconds)
{
    c->host += c->launch_s; /* the call itself, on the host */
    const double start = later(c->tail[s], c->host);
    c->start[s] = start;
    c->tail[s] = start + (seconds > 0 ? seconds : 0);
    if (c->host_waits && s == TB_STREAM_COMPUTE)
        c->host = c->tail[s];
    return start;
}

double sim_copy_seconds(const struct sim_clock *c, enum tb_stream s, size_t bytes, const struct tb_link *link)
{
    const enum tb_stream other = s == TB_STREAM_H2D ? TB_STREAM_D2H : TB_STREAM_H2D;
    const double start = later(c->tail[s], c->host + c->launch_s);
    const bool both = c->start[other] <= start && start < c->tail[other];
    double rate = s == TB_STREAM_H2D ? link->h2d_bytes_per_s : link->d2h_bytes_per_s;
    if (both && link->duplex_bytes_per_s > 0 && link->duplex_bytes_per_s < rate)
        rate = link->duplex_bytes_per_s;
    return link->latency_s + (rate > 0 ? (double)bytes / rate : 0);
}

void sim_record(struct sim_clock *c, struct sim_event *e, enum tb_stream s)
{
    e->time = c->tail[s];
    e->recorded = true;
}

void sim_wait(struct sim_clock *c, enum tb_stream s, const struct sim_event *e)
{
    if (e->recorded && e->time > c->tail[s]) {
        c->tail[s] = e->time;
        c->start[s] = e->time; /* idle until then: not busy, for the other copy direction */
    }
}

bool sim_query(const struct sim_clock *c, const struct sim_event *e)
{
    return !e->recorded || e->time <= c->host;
}

void sim_event_sync(struct sim_clock *c, const struct sim_event *e)
{
    if (e->recorded)
        c->host = later(c->host, e->time);
}

void sim_stream_sync(struct sim_clock *c, enum tb_stream s)
{
    c->host = later(c->host, c->tail[s]);
}
