/* probe.c: `trainbig probe CONFIG`: this machine's host-device bandwidth as the configured
 * backend moves data (pinned and pageable host memory, each direction alone and both at
 * once), beside the link the configured platform describes. With [backend] emulate_link
 * the CPU backend's copies follow the emulated link, so the probe shows that too. */
#include "config.h"

#include "tools/probe_internal.h"

#include <stdlib.h>
#include <string.h>
#include <trainbig/clock.h>

#include "core/config/platform.h"
#include "core/train/run.h"

enum { REPEATS = 5 };

/* The backend's clock: a modelled device's copies take the model's time. */
static double backend_now(const struct tb_backend_ops *o, void *ctx)
{
    return o->now ? o->now(ctx) : tb_now();
}

/* Seconds of the fastest of REPEATS rounds of `bytes` copied on each stream given
 * (H2D: host to device, D2H: back), all queued at once. */
static double copies(const struct tb_backend_ops *o, void *ctx, bool h2d, bool d2h, void *dev, void *dev2, void *host,
                     void *host2, size_t bytes, struct tb_event *e1, struct tb_event *e2, struct tb_err *err)
{
    double best = 1e30;
    for (int r = 0; r < REPEATS; r++) {
        double t0 = backend_now(o, ctx);
        int rc = TB_OK;
        if (h2d && !(rc = o->copy_async(ctx, 0, TB_STREAM_H2D, dev, host, bytes, err)))
            rc = o->event_record(ctx, e1, TB_STREAM_H2D);
        if (!rc && d2h && !(rc = o->copy_async(ctx, 0, TB_STREAM_D2H, host2, dev2, bytes, err)))
            rc = o->event_record(ctx, e2, TB_STREAM_D2H);
        if (rc)
            return -1;
        if (h2d)
            o->event_sync(ctx, e1);
        if (d2h)
            o->event_sync(ctx, e2);
        double t = backend_now(o, ctx) - t0;
        best = t < best ? t : best;
    }
    return best;
}

/* Seconds of the fastest pageable round trip one way: tensor_write (to the device) or
 * tensor_read (back) of an (n,1,1,1) float tensor, which is a plain copy in any layout. */
static double pageable(const struct tb_backend_ops *o, void *ctx, bool to_device, struct tb_tensor *t, void *host,
                       struct tb_err *err)
{
    double best = 1e30;
    for (int r = 0; r < REPEATS; r++) {
        double t0 = backend_now(o, ctx);
        int rc = to_device ? o->tensor_write(ctx, t, host, err) : o->tensor_read(ctx, t, host, err);
        if (rc)
            return -1;
        double s = backend_now(o, ctx) - t0;
        best = s < best ? s : best;
    }
    return best;
}

int tb_probe(const struct tb_setup *s, size_t bytes, FILE *out, struct tb_err *err)
{
    struct tb_run r;
    int rc = tb_run_open(&r, s, err);
    const struct tb_backend_ops *o = r.engine.ops;
    void *ctx = r.engine.ctx;
    void *dev = NULL, *dev2 = NULL, *host = NULL, *host2 = NULL, *page = NULL;
    struct tb_event *e1 = NULL, *e2 = NULL;
    if (!rc) {
        dev = o->mem_alloc(ctx, 0, bytes);
        dev2 = o->mem_alloc(ctx, 0, bytes);
        host = o->host_alloc(ctx, bytes);
        host2 = o->host_alloc(ctx, bytes);
        page = malloc(bytes);
        e1 = o->event_create(ctx, 0);
        e2 = o->event_create(ctx, 0);
        if (!dev || !dev2)
            rc = tb_err_set(err, TB_ERR_NOMEM, "probe: no room for two %.0f MiB device blocks: lower the size",
                            (double)bytes / 1048576.0);
        else if (!host || !host2 || !page || !e1 || !e2)
            rc = tb_err_set(err, TB_ERR_NOMEM, "probe: out of host memory");
    }
    if (!rc) {
        memset(host, 1, bytes);
        memset(host2, 2, bytes);
        memset(page, 3, bytes);
        const double gb = (double)bytes / 1e9;
        const double h = copies(o, ctx, true, false, dev, dev2, host, host2, bytes, e1, e2, err);
        const double d = copies(o, ctx, false, true, dev, dev2, host, host2, bytes, e1, e2, err);
        const double both = copies(o, ctx, true, true, dev, dev2, host, host2, bytes, e1, e2, err);
        struct tb_tensor t = { .desc = { TB_F32, { (int32_t)(bytes / 4), 1, 1, 1 } }, .device = 0, .data = dev };
        const double ph = pageable(o, ctx, true, &t, page, err), pd = pageable(o, ctx, false, &t, page, err);
        if (h < 0 || d < 0 || both < 0 || ph < 0 || pd < 0) {
            rc = err->status ? err->status : TB_ERR_RUNTIME;
        } else {
            struct tb_device_info di = { 0 };
            if (o->device_info)
                o->device_info(ctx, 0, &di);
            fprintf(out, "probe: backend '%s' (%s), %.0f MiB per copy, the fastest of %d\n", r.backend->name, di.name,
                    (double)bytes / 1048576.0, REPEATS);
            const struct tb_link *l = &r.link, *p = &r.platform_link;
            const bool emulated = memcmp(l, p, sizeof *l) != 0;
            fprintf(out, "  %-30s %14s %14s %14s\n", "", "measured", emulated ? "emulated" : "", "platform");
            const struct {
                const char *what;
                double secs, emulated, platform;
            } rows[] = {
                { "pinned, host to device", h, l->h2d_bytes_per_s, p->h2d_bytes_per_s },
                { "pinned, device to host", d, l->d2h_bytes_per_s, p->d2h_bytes_per_s },
                { "pinned, both at once (each)", both,
                  l->duplex_bytes_per_s > 0 ? l->duplex_bytes_per_s : l->h2d_bytes_per_s,
                  p->duplex_bytes_per_s > 0 ? p->duplex_bytes_per_s : p->h2d_bytes_per_s },
                { "pageable, host to device", ph, 0, 0 },
                { "pageable, device to host", pd, 0, 0 },
            };
            for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
                char em[32] = "", pl[32] = "-";
                if (emulated && rows[i].emulated > 0)
                    snprintf(em, sizeof em, "%.3f GB/s", rows[i].emulated / 1e9);
                if (rows[i].platform > 0)
                    snprintf(pl, sizeof pl, "%.2f GB/s", rows[i].platform / 1e9);
                fprintf(out, "  %-30s %9.3f GB/s %14s %14s\n", rows[i].what, gb / rows[i].secs, em, pl);
            }
            fprintf(out, "  platform '%s': latency %.1f us, reference accelerator %.1f TFLOP/s%s\n", r.platform->name,
                    p->latency_s * 1e6, p->accel_flops / 1e12,
                    emulated ? "; emulated on this backend ([backend] emulate_link)" : "");
            char accel[256];
            tb_accel_text(&r.accel, p->accel_flops, accel, sizeof accel);
            fprintf(out, "  platform's accelerator: %s\n", accel);
            /* The emulated link's accelerator is this CPU (set_platform): its achieved
             * convolution rate is accel_flops x accel_efficiency, as the platform's. */
            if (emulated && p->h2d_bytes_per_s > 0) {
                const double cpu = l->accel_flops * l->accel_efficiency, gpu = p->accel_flops * p->accel_efficiency;
                char peak[96] = ""; /* known where the backend measured it below the rate */
                if (l->accel_efficiency < 1)
                    snprintf(peak, sizeof peak, " (%.0f%% of its %.0f GFLOP/s FMA peak)", 100 * l->accel_efficiency,
                             l->accel_flops / 1e9);
                fprintf(out,
                        "  compute: this CPU's convolutions %.1f GFLOP/s%s; the accelerator's %.1f TFLOP/s x %.2f "
                        "(accel_efficiency) = %.2f TFLOP/s; copies at %.4g times the platform's rates\n",
                        cpu / 1e9, peak, p->accel_flops / 1e12, p->accel_efficiency, gpu / 1e12,
                        l->h2d_bytes_per_s / p->h2d_bytes_per_s);
            }
        }
    }
    if (e1)
        o->event_destroy(ctx, e1);
    if (e2)
        o->event_destroy(ctx, e2);
    if (dev)
        o->mem_free(ctx, 0, dev);
    if (dev2)
        o->mem_free(ctx, 0, dev2);
    if (host)
        o->host_free(ctx, host);
    if (host2)
        o->host_free(ctx, host2);
    free(page);
    tb_run_close(&r);
    return rc;
}
