/* trainbig/platform.h: the platform vtable ([platform] section).
 *
 * A platform describes a machine class: how fast host and device memory talk, and how
 * fast the accelerator it was measured with computes (so the CPU backend can emulate the
 * link at the right compute-to-transfer ratio). */
#ifndef TRAINBIG_PLATFORM_H
#define TRAINBIG_PLATFORM_H

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
};

struct tb_platform_ops {
    tb_score_fn score; /* optional, see trainbig/plugin.h */
    /* As tb_backend_ops.create, from the validated [platform] section. */
    int (*create)(const struct tb_section *cfg, void **ctx, struct tb_err *err);
    void (*destroy)(void *ctx);
    /* Fills *out for this instance (after its key overrides). */
    void (*link)(void *ctx, struct tb_link *out);
};

#ifdef __cplusplus
}
#endif
#endif
