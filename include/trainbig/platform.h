/* trainbig/platform.h: the platform vtable ([platform] section).
 *
 * A platform describes a machine class: how fast host and device memory talk, and how
 * fast the accelerator it was measured with computes (so the CPU backend can emulate the
 * link at the right compute-to-transfer ratio), which NUMA node holds the host memory
 * nearest the accelerator, and the environment defaults (NCCL's) that suit the machine.
 */
#ifndef TRAINBIG_PLATFORM_H
#define TRAINBIG_PLATFORM_H

#include <stdint.h>
#include <trainbig/error.h>
#include <trainbig/keys.h>
#include <trainbig/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The host-device link of one accelerator. */
struct tb_link {
    double h2d_bytes_per_s; /* host to device, one direction alone */
    double d2h_bytes_per_s; /* device to host, one direction alone */
    double accel_flops;     /* fp32 FLOP/s of the platform's reference accelerator */
    /* Each direction's bandwidth while both directions copy at once; never more than
     * either one-direction figure. 0 = unknown: assume the one-direction figures. */
    double duplex_bytes_per_s;
    /* Fixed cost of one copy, seconds (driver and DMA setup), on top of bytes / rate.
     * 0 = none or unknown. */
    double latency_s;
    /* NUMA node of the host memory nearest the accelerator (where pinned swap buffers
     * belong); -1 = unknown, or any node is as near. */
    int numa_node;
    /* The fraction of accel_flops the accelerator achieves on large fp32 3x3
     * convolutions (cuDNN's, in training): its achieved rate is accel_flops times this.
     * The CPU backend's emulate_link compares this CPU's achieved convolution rate with
     * it, not peak with peak. Above 1 where fast algorithms (Winograd, FFT) beat the
     * direct convolution's FLOP count. 0 = unknown: TB_ACCEL_EFFICIENCY_DEFAULT. */
    double accel_efficiency;
};

/* accel_efficiency where a platform gives none: an assumption, not a measurement (see
 * the shipped platforms' accel_efficiency key for what it rests on). */
#define TB_ACCEL_EFFICIENCY_DEFAULT 0.7

/* One device of the platform's accelerator (accel()): what it holds and how
 * fast it computes and reads its memory, beside the link above. Its fp32 rate is
 * tb_link's accel_flops (and accel_efficiency), declared there once. A backend that models
 * the device rather than running on it plans against these; a figure a platform does not
 * know is 0. */
struct tb_accel {
    char name[64];          /* "V100 SXM2 16 GB"; "" = unknown */
    uint64_t memory_bytes;  /* device memory one process may use, after the CUDA context and libraries' handles */
    double mem_bytes_per_s; /* device memory bandwidth, peak */
    double fp16_flops;      /* dense fp16 rate of its matrix units (tensor cores), fp32 accumulation; 0 = none */
    double bf16_flops;      /* the same for bf16; 0 = none */
    /* The GPUs together, for data parallelism. */
    /* A ring all-reduce over the GPUs of one node runs at its slowest hop, and one over
     * nodes at the network's; each figure is per direction, 0 = unknown. */
    int per_node;            /* GPUs in one node (server) */
    double peer_bytes_per_s; /* the slowest hop of a ring over one node's GPUs */
    double peer_latency_s;   /* the fixed cost of one ring step on that hop */
    double net_bytes_per_s;  /* between nodes: one GPU's share of its node's network */
    double net_latency_s;    /* the fixed cost of one ring step between nodes */
    /* ABI 2.1: a ring over two GPUs of a node joined directly (the two V100s of an AC922
     * socket on NVLink), faster than the peer hop a ring over the whole node takes; 0 =
     * none, as peer_bytes_per_s. */
    double pair_bytes_per_s;
};

/* The hop that bounds a ring all-reduce over n GPUs of platform a (per direction) and
 * the fixed cost of each of its steps: the pair's link for 2 GPUs where a has one, the
 * peer hop within one node, and over nodes the slower of that and the network. Figures
 * a leaves at 0 (unknown) stay 0. */
void tb_accel_ring_hop(const struct tb_accel *a, int n, double *bytes_per_s, double *latency_s);

struct tb_platform_ops {
    /* ---- ABI 2.0 ---- */
    struct tb_plugin_head head; /* score, create from the [platform] section: trainbig/plugin.h */
    /* Fills *out for this instance (after its key overrides). Required. The core has
     * cleared *out and set numa_node to -1 (unknown) and accel_efficiency to
     * TB_ACCEL_EFFICIENCY_DEFAULT before the call: a plugin may leave a field it does not
     * know as it is. */
    void (*link)(void *ctx, struct tb_link *out);
    /* Optional (NULL = none): environment defaults for this machine, as "NAME=VALUE"
     * strings ended by NULL, owned by ctx and valid until destroy(); NULL or an empty
     * list = none. The core sets each one that is not already set in the process
     * environment (what the user set wins) before any library that reads it starts, and
     * logs which it set. For NCCL's settings, e.g. "NCCL_P2P_LEVEL=NVL". */
    const char *const *(*env_defaults)(void *ctx);
    /* Optional (NULL = none): defaults for the [swap] policy's keys on this machine, as
     * "key=value" strings ended by NULL, owned by ctx and valid until destroy(). The core
     * applies each whose key the policy declares and the user did not set, before the
     * policy is created, and logs which; a value the key refuses is a configuration error
     * naming the platform. For example "min_size=256K" where the link has time to spare. */
    const char *const *(*swap_defaults)(void *ctx);
    /* Optional (NULL = none described): fills *out, which the core has cleared, with this
     * instance's accelerator (after its key overrides). */
    void (*accel)(void *ctx, struct tb_accel *out);
};

#ifdef __cplusplus
}
#endif
#endif
