/* platform/x86-pcie: an x86 server with GPUs on PCIe 3.0 x16, like the DGX Station of the
 * study: about 12 GB/s per direction to a GPU on the CPU's own NUMA node (far less across
 * sockets).
 *
 * Where the defaults come from:
 *   h2d_gbps, d2h_gbps = 12: measured on the DGX Station in the study this project
 *     reproduces (issue 6). PCIe 3.0 x16's nominal rate is 15.75 GB/s per direction
 *     (8 GT/s x 16 lanes x 128/130 encoding).
 *   duplex_gbps = 10: an estimate, not a measurement we could find published. PCIe has
 *     separate lanes per direction, but each direction's data needs acknowledgements and
 *     flow-control credits sent on the other's lanes, and the host's memory serves both
 *     streams, so copies both ways at once each lose some speed; 10 is ~83% of the
 *     one-direction figure. Measure your machine and set it.
 *   latency_us = 7: NVIDIA's gdrcopy README: "a cudaMemcpy can incur in a 6-7us
 *     overhead" (driver and copy-engine setup per copy).
 *   accel_tflops = 15.7: V100 SXM2 fp32 peak (NVIDIA V100 datasheet), the DGX Station's
 *     GPU.
 *   accel_efficiency = 0.7: an assumption, not a measurement: the fraction of that peak
 *     cuDNN reaches on the large fp32 3x3 convolutions that make most of G-SCNN's work.
 *     fp32 ResNet-50 training on one V100 is commonly reported at roughly 350-400
 *     images/s, 55-65% of the peak over the whole step (~25 GFLOP per image, non-conv ops
 *     included); the large convolutions alone run above that average. bench/step
 *     --backend cuda on a V100 prints the achieved rate: set its share here.
 *   nccl_env = NCCL_P2P_LEVEL=PHB: NCCL's documented level "use P2P when GPUs are on the
 *     same NUMA node", through the CPU's PCIe host bridge, not across sockets.
 *   swap_defaults = min_size=1M: on PCIe the link is what swapping waits for, so each
 *     copy should move data most of its time: a 1M copy does for 93% of it (87 us at
 *     12 GB/s, plus 7 us fixed); smaller tensors stay on the device. */
#include <stdio.h>

#include "link.h"

static int x86_pcie_score(char *why, size_t why_size)
{
    struct plat_machine m;
    plat_probe("", &m);
    return plat_score_x86_pcie(&m, why, why_size);
}

static int x86_pcie_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    return plat_create(&trainbig_plugin, cfg, ctx, err);
}

static const struct tb_key x86_pcie_keys[] = {
    { "h2d_gbps", TB_KEY_FLOAT, "12", PLAT_GBPS_RANGE,
      "host-to-device bandwidth of one GPU's link, one direction alone, GB/s (PCIe 3.0 x16: ~12)" },
    { "d2h_gbps", TB_KEY_FLOAT, "12", PLAT_GBPS_RANGE,
      "device-to-host bandwidth of one GPU's link, one direction alone, GB/s (PCIe 3.0 x16: ~12)" },
    { "duplex_gbps", TB_KEY_FLOAT, "10", PLAT_DUPLEX_RANGE,
      "bandwidth of each direction while both copy at once, GB/s, at most h2d_gbps and d2h_gbps; 0 = as alone" },
    { "latency_us", TB_KEY_FLOAT, "7", PLAT_LATENCY_RANGE, "fixed cost of one copy, microseconds" },
    { "accel_tflops", TB_KEY_FLOAT, "15.7", PLAT_TFLOPS_RANGE, "fp32 TFLOP/s of the reference GPU (V100 SXM2: 15.7)" },
    { "accel_efficiency", TB_KEY_FLOAT, PLAT_EFFICIENCY_DEFAULT, PLAT_EFFICIENCY_RANGE, PLAT_EFFICIENCY_HELP },
    { "numa_node", TB_KEY_INT, "-1", PLAT_NUMA_RANGE,
      "NUMA node of the host memory nearest the GPU; -1 = the first GPU's node from sysfs, or unknown" },
    { "nccl_env", TB_KEY_LIST, "NCCL_P2P_LEVEL=PHB", NULL,
      "NCCL_NAME=VALUE defaults set where the environment does not set them; empty = none" },
    { "swap_defaults", TB_KEY_LIST, "min_size=1M", NULL,
      "[swap] key=value defaults for the policy where the [swap] section does not set them; empty = none" },
    TB_KEYS_END,
};

static const struct tb_platform_ops x86_pcie_ops = {
    .score = x86_pcie_score,
    .create = x86_pcie_create,
    .destroy = plat_destroy,
    .link = plat_link,
    .env_defaults = plat_env_defaults,
    .swap_defaults = plat_swap_defaults,
};

TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
    .abi_major = TB_ABI_MAJOR,
    .abi_minor = TB_ABI_MINOR,
    .kind = TB_KIND_PLATFORM,
    .name = "x86-pcie",
    .version = TB_VERSION,
    .description = "x86 host, GPUs on PCIe 3.0 x16 (DGX Station class)",
    .keys = x86_pcie_keys,
    .ops.platform = &x86_pcie_ops,
};
