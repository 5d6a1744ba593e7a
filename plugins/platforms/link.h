/* platforms/link.h: what the shipped platform plugins share: a link described by keys. */
#ifndef TB_PLATFORMS_LINK_H
#define TB_PLATFORMS_LINK_H

#include <trainbig/trainbig.h>

/* Reads h2d_gbps, d2h_gbps and accel_tflops from cfg into a new struct tb_link. */
int tb_platform_link_create(const struct tb_section *cfg, void **ctx, struct tb_err *err);
void tb_platform_link_destroy(void *ctx);
void tb_platform_link_get(void *ctx, struct tb_link *out);

/* True when a line of /proc/cpuinfo contains needle; cpu_model receives the model line. */
int tb_platform_cpuinfo_has(const char *needle, char *cpu_model, size_t size);

#endif
