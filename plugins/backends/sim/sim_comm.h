/* backends/sim/sim_comm.h: data parallelism on the modelled device ([backend] sim_ranks):
 * the ring all-reduce of each gradient bucket the engine queues, on the platform's
 * GPU-to-GPU and network links (struct tb_accel, ABI 1.15), on a stream of its own that
 * starts after the compute queued so far and runs beside the rest of backward, as NCCL's
 * stream does (sim_comm.c). */
#ifndef TB_SIM_COMM_H
#define TB_SIM_COMM_H

#include <trainbig/platform.h>

struct sim_comm {
    int ranks;       /* the GPUs modelled; 1: none to reduce with */
    double tail;     /* when the queued all-reduces complete */
    double busy;     /* seconds they ran since the last wait */
    uint64_t queued; /* all-reduces queued since create */
};

/* The seconds a ring all-reduce of `bytes` takes over n GPUs of accelerator a: 2(n-1)/n of
 * the bytes over the ring's slowest hop and 2(n-1) ring steps of its latency. Within a node
 * (n <= a->per_node) the hop is the GPUs' peer link; a ring over nodes also crosses the
 * network, so it runs at the slower of the two. 0 for n <= 1. */
double sim_ring_seconds(const struct tb_accel *a, int n, double bytes);

#endif
