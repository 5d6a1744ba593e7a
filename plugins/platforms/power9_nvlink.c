/* platform/power9-nvlink: an IBM AC922, POWER9 CPUs with NVLink 2.0 to the GPUs: about
 * 68 GB/s per direction measured between CPU and GPU on a 4-GPU machine. */
#include <stdio.h>

#include "link.h"

static int power9_score(char *why, size_t why_size)
{
    char model[256];
    if (tb_platform_cpuinfo_has("POWER9", model, sizeof model)) {
        snprintf(why, why_size, "POWER9 CPU (%s): GPUs attach over NVLink 2.0", model);
        return 20;
    }
    snprintf(why, why_size, "not a POWER9 CPU (%s)", *model ? model : "model unknown");
    return 0;
}

static const struct tb_key power9_keys[] = {
    { "h2d_gbps", TB_KEY_FLOAT, "68", "0.001..",
      "host-to-device bandwidth of one GPU's link, GB/s (AC922 measured: ~68)" },
    { "d2h_gbps", TB_KEY_FLOAT, "68", "0.001..", "device-to-host bandwidth of one GPU's link, GB/s" },
    { "accel_tflops", TB_KEY_FLOAT, "15.7", "0.001..", "fp32 TFLOP/s of the reference GPU (V100 SXM2: 15.7)" },
    TB_KEYS_END,
};

static const struct tb_platform_ops power9_ops = {
    .score = power9_score,
    .create = tb_platform_link_create,
    .destroy = tb_platform_link_destroy,
    .link = tb_platform_link_get,
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
