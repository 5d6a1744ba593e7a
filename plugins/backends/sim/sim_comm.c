/* backends/sim/sim_comm.c: the ring all-reduce's time (see sim_comm.h). */
#include "sim_comm.h"

double sim_ring_seconds(const struct tb_accel *a, int n, double bytes)
{
    if (n <= 1)
        return 0;
    double bw, latency;
    tb_accel_ring_hop(a, n, &bw, &latency);
    const double steps = 2.0 * (n - 1);
    return (bw > 0 ? steps / n * bytes / bw : 0) + steps * latency;
}

double sim_syncbn_seconds(const struct tb_accel *a, int n, int64_t channels, bool backward)
{
    const double c = (double)channels, d = sizeof(double);
    if (backward)
        return sim_ring_seconds(a, n, (2 * c + 1) * d);
    return sim_ring_seconds(a, n, (c + 1) * d) + sim_ring_seconds(a, n, 2 * c * d);
}
