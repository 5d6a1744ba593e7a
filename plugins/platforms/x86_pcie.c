/* platform/x86-pcie: an x86 server with GPUs on PCIe 3.0 x16, like the DGX Station of the
 * study: about 12 GB/s per direction to a GPU on the CPU's own NUMA node (far less across
 * sockets). */
#include <stdio.h>

#include "link.h"

static int x86_pcie_score(char *why, size_t why_size)
{
#if defined(__x86_64__) || defined(__i386__)
    char model[256];
    tb_platform_cpuinfo_has("model name", model, sizeof model);
    snprintf(why, why_size, "x86 CPU (%s): GPUs attach over PCIe", *model ? model : "model unknown");
    return 10;
#else
    snprintf(why, why_size, "not an x86 CPU");
    return 0;
#endif
}

static const struct tb_key x86_pcie_keys[] = {
    { "h2d_gbps", TB_KEY_FLOAT, "12", "0.001..",
      "host-to-device bandwidth of one GPU's link, GB/s (PCIe 3.0 x16: ~12)" },
    { "d2h_gbps", TB_KEY_FLOAT, "12", "0.001..", "device-to-host bandwidth of one GPU's link, GB/s" },
    { "accel_tflops", TB_KEY_FLOAT, "15.7", "0.001..", "fp32 TFLOP/s of the reference GPU (V100 SXM2: 15.7)" },
    TB_KEYS_END,
};

static const struct tb_platform_ops x86_pcie_ops = {
    .score = x86_pcie_score,
    .create = tb_platform_link_create,
    .destroy = tb_platform_link_destroy,
    .link = tb_platform_link_get,
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
