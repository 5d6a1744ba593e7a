/* backends/sim/sim_comm.h: data parallelism on the modelled device ([backend] sim_ranks):
 * the ring all-reduce of each gradient bucket the engine queues, on the platform's
 * GPU-to-GPU and network links (struct tb_accel), on a stream of its own that
 * starts after the compute queued so far and runs beside the rest of backward, as NCCL's
 * stream does; and synchronised batch norm's small all-reduces, which the op waits for on
 * the compute stream (sim_comm.c; sim_ops.c queues them). */
#ifndef TB_SIM_COMM_H
#define TB_SIM_COMM_H

#include <stdbool.h>
#include <stdint.h>
#include <trainbig/platform.h>

struct sim_comm {
    int ranks;     /* the GPUs modelled; 1: none to reduce with */
    bool attached; /* by comm_attach: synchronised batch norms reduce over the ranks */
    double tail;   /* when the queued all-reduces complete */
    double busy;   /* seconds they ran since the last wait */
    /* since create, for the log: gradient buckets all-reduced, and the batch norms'
     * all-reduces of their sums (on the compute stream) with their seconds */
    uint64_t buckets, bn_reduces;
    double bucket_s, bn_s;
};

/* The seconds a ring all-reduce of `bytes` takes over n GPUs of accelerator a: 2(n-1)/n of
 * the bytes over the ring's slowest hop and 2(n-1) ring steps of its latency. Within a node
 * (n <= a->per_node) the hop is the GPUs' peer link; a ring over nodes also crosses the
 * network, so it runs at the slower of the two. 0 for n <= 1. */
double sim_ring_seconds(const struct tb_accel *a, int n, double bytes);

/* The seconds synchronised batch norm's all-reduces of its per-channel sums take over n
 * GPUs, for C channels, as the cuda backend runs them (cuda_syncbn.c, in doubles):
 * forward [sum x, count] then [two sums of deviations]; backward [two sums, count]. Each
 * is a ring all-reduce of its own, so at these sizes each pays the ring's latency. */
double sim_syncbn_seconds(const struct tb_accel *a, int n, int64_t channels, bool backward);

#endif
