/* backends/sim/sim_clock.h: CUDA's ordering of streams, events and the host, on virtual
 * time (sim_clock.c), for a backend that models a device instead of running one.
 *
 * Each stream has a tail: the time the work queued on it so far completes. Work queued on
 * a stream starts when the stream's earlier work is done and the host has submitted it,
 * so it runs for its modelled seconds from max(tail, host) (the host spends launch_s per
 * submission, as a driver call does). An event records a stream's tail; a stream that
 * waits on an event starts its next work no earlier than the event's time; syncs move the
 * host's time to what they wait for, and a query tells whether the host's time has
 * reached the event's, without moving it. The two copy streams share the link: a copy
 * that starts while the other direction is busy runs at the duplex rate. Times are
 * seconds from the clock's start. */
#ifndef TB_SIM_CLOCK_H
#define TB_SIM_CLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <trainbig/backend.h>

struct sim_clock {
    double host;              /* the driving thread's time */
    double tail[TB_STREAMS];  /* when each stream's queued work completes */
    double start[TB_STREAMS]; /* when each stream's last work began */
    double launch_s;          /* host time one submission takes */
    /* The host waits for each piece of compute it submits, as where the ops run on the
     * host's own thread (the cpu backend); false: it runs ahead, as a GPU's host does. */
    bool host_waits;
};

/* An event: the time the work before its record completes; never recorded: complete. */
struct sim_event {
    double time;
    bool recorded;
};

/* A cleared clock whose submissions take launch_s of host time each. */
void sim_clock_init(struct sim_clock *c, double launch_s);

/* Queues work of `seconds` on stream s; returns the time it starts (it ends at
 * c->tail[s]; with host_waits, compute work ends there on the host too). */
double sim_submit(struct sim_clock *c, enum tb_stream s, double seconds);

/* The seconds a copy of `bytes` on copy stream s (TB_STREAM_H2D or D2H) takes when queued
 * now, under the link: latency plus bytes at the direction's rate, or at the duplex rate
 * when the other direction is busy at the time it would start. 0 rates: instantaneous. */
double sim_copy_seconds(const struct sim_clock *c, enum tb_stream s, size_t bytes, const struct tb_link *link);

void sim_record(struct sim_clock *c, struct sim_event *e, enum tb_stream s);
void sim_wait(struct sim_clock *c, enum tb_stream s, const struct sim_event *e);
bool sim_query(const struct sim_clock *c, const struct sim_event *e);
void sim_event_sync(struct sim_clock *c, const struct sim_event *e);
void sim_stream_sync(struct sim_clock *c, enum tb_stream s);

#endif
