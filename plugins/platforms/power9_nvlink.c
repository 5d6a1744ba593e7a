/* platform/power9-nvlink: an IBM AC922, POWER9 CPUs with NVLink 2.0 to the GPUs.
 *
 * Where the defaults come from:
 *   h2d_gbps, d2h_gbps = 68: measured between CPU and GPU on a 4-GPU AC922 in the study
 *     this project reproduces (issue 6). The wire's nominal rate is 75 GB/s per direction:
 *     in the 4-GPU AC922 each V100 has 3 NVLink 2.0 links to its POWER9, each 25 GB/s
 *     per direction (IBM Redpaper REDP-5472, "IBM Power System AC922 Introduction and
 *     Technical Overview": 150 GB/s both ways per GPU).
 *   duplex_gbps = 60: an estimate, not a measurement we could find published. NVLink has
 *     separate lanes per direction, so the wire allows the one-direction rate each way at
 *     once; what costs is the host side, whose memory then feeds one stream and absorbs
 *     the other (a POWER9 socket's DDR4 peaks near 170 GB/s). 60 is ~88% of the measured
 *     one-direction figure; measure your machine and set it.
 *   latency_us = 7: the fixed cost of one copy is the driver's and the copy engine's setup,
 *     not the wire's: NVIDIA's gdrcopy README puts cudaMemcpy's overhead at 6-7 us. We
 *     know of no published figure that differs for NVLink, so the same as x86-pcie.
 *   accel_tflops = 15.7: V100 SXM2 fp32 peak (NVIDIA V100 datasheet), the AC922's GPU.
 *   accel_efficiency = 0.7: an assumption, not a measurement: the fraction of that peak
 *     cuDNN reaches on the large fp32 3x3 convolutions that make most of G-SCNN's work.
 *     fp32 ResNet-50 training on one V100 is commonly reported at roughly 350-400
 *     images/s, 55-65% of the peak over the whole step (~25 GFLOP per image, non-conv ops
 *     included); the large convolutions alone run above that average. bench/step
 *     --backend cuda on a V100 prints the achieved rate: set its share here.
 *   nccl_env = NCCL_P2P_LEVEL=NVL: NCCL's documented level "use P2P when GPUs are
 *     connected through NVLink"; in the 4-GPU AC922 the two GPUs of a socket are joined
 *     by NVLink, and GPUs on different sockets talk through the host.
 *   swap_defaults = min_size=256K: on NVLink the link is rarely what a step waits for
 *     (bench/lms: lru and prefetch both within a few percent at the reference network's
 *     balance), so more, smaller tensors may move and more fits, though a 256K copy
 *     spends only 36% of its time moving data (3.9 us at 68 GB/s, plus 7 us fixed). */
#include <stdio.h>

#include "link.h"

static int power9_score(char *why, size_t why_size)
{
    struct plat_machine m;
    plat_probe("", &m);
    return plat_score_power9(&m, why, why_size);
}

static int power9_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    return plat_create(&trainbig_plugin, cfg, ctx, err);
}

static const struct tb_key power9_keys[] = {
    { "h2d_gbps", TB_KEY_FLOAT, "68", PLAT_GBPS_RANGE,
      "host-to-device bandwidth of one GPU's link, one direction alone, GB/s (AC922 measured: ~68)" },
    { "d2h_gbps", TB_KEY_FLOAT, "68", PLAT_GBPS_RANGE,
      "device-to-host bandwidth of one GPU's link, one direction alone, GB/s (AC922 measured: ~68)" },
    { "duplex_gbps", TB_KEY_FLOAT, "60", PLAT_DUPLEX_RANGE,
      "bandwidth of each direction while both copy at once, GB/s, at most h2d_gbps and d2h_gbps; 0 = as alone" },
    { "latency_us", TB_KEY_FLOAT, "7", PLAT_LATENCY_RANGE, "fixed cost of one copy, microseconds" },
    { "accel_tflops", TB_KEY_FLOAT, "15.7", PLAT_TFLOPS_RANGE, "fp32 TFLOP/s of the reference GPU (V100 SXM2: 15.7)" },
    { "accel_efficiency", TB_KEY_FLOAT, PLAT_EFFICIENCY_DEFAULT, PLAT_EFFICIENCY_RANGE, PLAT_EFFICIENCY_HELP },
    { "numa_node", TB_KEY_INT, "-1", PLAT_NUMA_RANGE,
      "NUMA node of the host memory nearest the GPU; -1 = the first GPU's node from sysfs, or unknown" },
    { "nccl_env", TB_KEY_LIST, "NCCL_P2P_LEVEL=NVL", NULL,
      "NCCL_NAME=VALUE defaults set where the environment does not set them; empty = none" },
    { "swap_defaults", TB_KEY_LIST, "min_size=256K", NULL,
      "[swap] key=value defaults for the policy where the [swap] section does not set them; empty = none" },
    TB_KEYS_END,
};

static const struct tb_platform_ops power9_ops = {
    .score = power9_score,
    .create = power9_create,
    .destroy = plat_destroy,
    .link = plat_link,
    .env_defaults = plat_env_defaults,
    .swap_defaults = plat_swap_defaults,
};

TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
    .abi_major = TB_ABI_MAJOR,
    .abi_minor = TB_ABI_MINOR,
    .kind = TB_KIND_PLATFORM,
    .name = "power9-nvlink",
    .version = TB_VERSION,
    .description = "IBM AC922: POWER9 host, GPUs on NVLink 2.0 to the CPU",
    .keys = power9_keys,
    .ops.platform = &power9_ops,
};
