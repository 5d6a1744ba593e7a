/* core/config/platform.h: what the tools may say of a platform (platform.c). */
#ifndef TB_CORE_PLATFORM_H
#define TB_CORE_PLATFORM_H

#include <stddef.h>
#include <trainbig/platform.h>

/* One line describing accelerator a, whose fp32 rate is fp32_flops (tb_link's
 * accel_flops), for probe and reports: "V100 SXM2 16 GB: 15.0 GiB for trainbig, 900 GB/s
 * memory, 15.7 TFLOP/s fp32, 125.0 fp16, no bf16 (dense, matrix units)". */
void tb_accel_text(const struct tb_accel *a, double fp32_flops, char *buf, size_t size);

#endif
