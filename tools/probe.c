/* probe.c: `trainbig probe CONFIG`: this machine's host-device bandwidth as the configured
 * backend moves data (pinned and pageable host memory, each direction alone and both at
 * once, and what each of a chain of small copies takes), beside the link the configured
 * platform describes.
 * With [backend] emulate_link the CPU backend's copies follow the emulated link, so the
 * probe shows that too. tb_probe_link gives the same measurement as a link, which
 * bench/sim hands to the sim when it plays a real device. */
#include "config.h"

#include "tools/probe_internal.h"

#include <stdlib.h>
#include <string.h>
#include <trainbig/clock.h>

#include "core/config/platform.h"

enum { REPEATS = 5 };
/* The copies whose time is taken for a copy's fixed cost: small enough that their bytes
 * take well under a microsecond on any link the probe meets (4 KiB at 12 GB/s: 0.3 us),
 * LATENCY_CHAIN of them back to back. */
#define LATENCY_BYTES ((size_t)4096)
enum { LATENCY_CHAIN = 16 };

/* The backend's clock: a modelled device's copies take the model's time. */
static double backend_now(const struct tb_backend_ops *o, void *ctx)
{
    return o->now ? o->now(ctx) : tb_now();
}

/* Two device blocks, two pinned host blocks and two events: what the timed copies use.
 * All of it the backend's, given back by probe_buffers_free. */
struct probe_buffers {
    const struct tb_backend_ops *o;
    void *ctx;
    void *dev, *dev2, *host, *host2;
    struct tb_event *e1, *e2;
};

static void probe_buffers_free(struct probe_buffers *b)
{
    const struct tb_backend_ops *o = b->o;
    if (!o)
        return;
    if (b->e1)
        o->event_destroy(b->ctx, b->e1);
    if (b->e2)
        o->event_destroy(b->ctx, b->e2);
    if (b->dev)
        o->mem_free(b->ctx, 0, b->dev);
    if (b->dev2)
        o->mem_free(b->ctx, 0, b->dev2);
    if (b->host)
        o->host_free(b->ctx, b->host);
    if (b->host2)
        o->host_free(b->ctx, b->host2);
    memset(b, 0, sizeof *b);
}

static int probe_buffers_make(struct probe_buffers *b, const struct tb_run *r, size_t bytes, struct tb_err *err)
{
    memset(b, 0, sizeof *b);
    const struct tb_backend_ops *o = b->o = r->engine.ops;
    void *ctx = b->ctx = r->engine.ctx;
    b->dev = o->mem_alloc(ctx, 0, bytes);
    b->dev2 = o->mem_alloc(ctx, 0, bytes);
    b->host = o->host_alloc(ctx, bytes);
    b->host2 = o->host_alloc(ctx, bytes);
    b->e1 = o->event_create(ctx, 0);
    b->e2 = o->event_create(ctx, 0);
    int rc = TB_OK;
    if (!b->dev || !b->dev2)
        rc = tb_err_set(err, TB_ERR_NOMEM, "probe: no room for two %.0f MiB device blocks: lower the size",
                        (double)bytes / 1048576.0);
    else if (!b->host || !b->host2 || !b->e1 || !b->e2)
        rc = tb_err_set(err, TB_ERR_NOMEM, "probe: out of host memory");
    if (rc) {
        probe_buffers_free(b);
        return rc;
    }
    memset(b->host, 1, bytes);
    memset(b->host2, 2, bytes);
    return TB_OK;
}

/* Seconds of the fastest of REPEATS rounds of `bytes` copied on each stream given
 * (H2D: host to device, D2H: back), all queued at once; -1 on the backend's error. */
static double copies(const struct probe_buffers *b, bool h2d, bool d2h, size_t bytes, struct tb_err *err)
{
    const struct tb_backend_ops *o = b->o;
    void *ctx = b->ctx;
    double best = 1e30;
    for (int r = 0; r < REPEATS; r++) {
        double t0 = backend_now(o, ctx);
        int rc = TB_OK;
        if (h2d && !(rc = o->copy_async(ctx, 0, TB_STREAM_H2D, b->dev, b->host, bytes, err)))
            rc = o->event_record(ctx, b->e1, TB_STREAM_H2D);
        if (!rc && d2h && !(rc = o->copy_async(ctx, 0, TB_STREAM_D2H, b->host2, b->dev2, bytes, err)))
            rc = o->event_record(ctx, b->e2, TB_STREAM_D2H);
        if (rc)
            return -1;
        if (h2d)
            o->event_sync(ctx, b->e1);
        if (d2h)
            o->event_sync(ctx, b->e2);
        double t = backend_now(o, ctx) - t0;
        best = t < best ? t : best;
    }
    return best;
}

/* Seconds of the fastest pageable round trip one way: tensor_write (to the device) or
 * tensor_read (back) of an (n,1,1,1) float tensor, which is a plain copy in any layout. */
static double pageable(const struct probe_buffers *b, bool to_device, struct tb_tensor *t, void *host,
                       struct tb_err *err)
{
    double best = 1e30;
    for (int r = 0; r < REPEATS; r++) {
        double t0 = backend_now(b->o, b->ctx);
        int rc = to_device ? b->o->tensor_write(b->ctx, t, host, err) : b->o->tensor_read(b->ctx, t, host, err);
        if (rc)
            return -1;
        double s = backend_now(b->o, b->ctx) - t0;
        best = s < best ? s : best;
    }
    return best;
}

/* Seconds per copy of LATENCY_CHAIN copies of `bytes` queued back to back on one stream
 * (H2D, or D2H), the fastest of REPEATS: what each copy costs the stream, without the
 * host's wait for one copy, which a stream of copies does not pay per copy; -1 on the
 * backend's error. */
static double chained(const struct probe_buffers *b, bool h2d, size_t bytes, struct tb_err *err)
{
    const struct tb_backend_ops *o = b->o;
    const enum tb_stream s = h2d ? TB_STREAM_H2D : TB_STREAM_D2H;
    struct tb_event *ev = h2d ? b->e1 : b->e2;
    double best = 1e30;
    for (int r = 0; r < REPEATS; r++) {
        const double t0 = backend_now(o, b->ctx);
        for (int k = 0; k < LATENCY_CHAIN; k++) {
            char *dev = (char *)b->dev + (size_t)k * bytes, *host = (char *)b->host + (size_t)k * bytes;
            if (h2d ? o->copy_async(b->ctx, 0, s, dev, host, bytes, err)
                    : o->copy_async(b->ctx, 0, s, host, dev, bytes, err))
                return -1;
        }
        if (o->event_record(b->ctx, ev, s))
            return -1;
        o->event_sync(b->ctx, ev);
        const double t = (backend_now(o, b->ctx) - t0) / LATENCY_CHAIN;
        best = t < best ? t : best;
    }
    return best;
}

/* The pinned measurements both tb_probe and tb_probe_link give: seconds of `bytes` each
 * way alone and both at once, and of each copy of `small_bytes` (LATENCY_BYTES, or less
 * where `bytes` holds no chain of them) in a chain, the mean of the two ways. */
struct pinned_times {
    double h2d, d2h, both, small;
    size_t small_bytes;
};

static int time_pinned(const struct probe_buffers *b, size_t bytes, struct pinned_times *t, struct tb_err *err)
{
    t->h2d = copies(b, true, false, bytes, err);
    t->d2h = copies(b, false, true, bytes, err);
    t->both = copies(b, true, true, bytes, err);
    t->small_bytes = bytes / LATENCY_CHAIN < LATENCY_BYTES ? bytes / LATENCY_CHAIN : LATENCY_BYTES;
    const double sh = chained(b, true, t->small_bytes, err), sd = chained(b, false, t->small_bytes, err);
    if (t->h2d < 0 || t->d2h < 0 || t->both < 0 || sh < 0 || sd < 0)
        return err->status ? err->status : TB_ERR_RUNTIME;
    t->small = (sh + sd) / 2;
    return TB_OK;
}

int tb_probe_link(const struct tb_run *r, size_t bytes, struct tb_link *measured, struct tb_err *err)
{
    struct probe_buffers b;
    int rc = probe_buffers_make(&b, r, bytes, err);
    struct pinned_times t;
    if (!rc)
        rc = time_pinned(&b, bytes, &t, err);
    probe_buffers_free(&b);
    if (rc)
        return rc;
    *measured = r->link;
    measured->h2d_bytes_per_s = (double)bytes / t.h2d;
    measured->d2h_bytes_per_s = (double)bytes / t.d2h;
    /* never above either direction alone, as struct tb_link has it */
    double duplex = (double)bytes / t.both;
    if (duplex > measured->h2d_bytes_per_s)
        duplex = measured->h2d_bytes_per_s;
    if (duplex > measured->d2h_bytes_per_s)
        duplex = measured->d2h_bytes_per_s;
    measured->duplex_bytes_per_s = duplex;
    /* the small copy's time less its bytes at the measured rates: what a copy costs
     * beside its data */
    const double small = (double)t.small_bytes;
    const double data = (small / measured->h2d_bytes_per_s + small / measured->d2h_bytes_per_s) / 2;
    measured->latency_s = t.small > data ? t.small - data : 0;
    return TB_OK;
}

int tb_probe(const struct tb_setup *s, size_t bytes, FILE *out, struct tb_err *err)
{
    struct tb_run r;
    int rc = tb_run_open(&r, s, err);
    struct probe_buffers b = { 0 };
    void *page = NULL;
    if (!rc)
        rc = probe_buffers_make(&b, &r, bytes, err);
    if (!rc && !(page = malloc(bytes)))
        rc = tb_err_set(err, TB_ERR_NOMEM, "probe: out of host memory");
    struct pinned_times pin;
    if (!rc)
        rc = time_pinned(&b, bytes, &pin, err);
    if (!rc) {
        memset(page, 3, bytes);
        const struct tb_backend_ops *o = b.o;
        const double gb = (double)bytes / 1e9;
        struct tb_tensor t = { .desc = { TB_F32, { (int32_t)(bytes / 4), 1, 1, 1 } }, .device = 0, .data = b.dev };
        const double ph = pageable(&b, true, &t, page, err), pd = pageable(&b, false, &t, page, err);
        if (ph < 0 || pd < 0) {
            rc = err->status ? err->status : TB_ERR_RUNTIME;
        } else {
            struct tb_device_info di = { 0 };
            if (o->device_info)
                o->device_info(b.ctx, 0, &di);
            fprintf(out, "probe: backend '%s' (%s), %.0f MiB per copy, the fastest of %d\n", r.backend->name, di.name,
                    (double)bytes / 1048576.0, REPEATS);
            const struct tb_link *l = &r.link, *p = &r.platform_link;
            const bool emulated = memcmp(l, p, sizeof *l) != 0;
            fprintf(out, "  %-30s %14s %14s %14s\n", "", "measured", emulated ? "emulated" : "", "platform");
            const struct {
                const char *what;
                double secs, emulated, platform;
            } rows[] = {
                { "pinned, host to device", pin.h2d, l->h2d_bytes_per_s, p->h2d_bytes_per_s },
                { "pinned, device to host", pin.d2h, l->d2h_bytes_per_s, p->d2h_bytes_per_s },
                { "pinned, both at once (each)", pin.both,
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
            char em[32] = "", pl[32] = "-";
            if (emulated)
                snprintf(em, sizeof em, "%.1f us", l->latency_s * 1e6);
            if (p->latency_s > 0)
                snprintf(pl, sizeof pl, "%.1f us", p->latency_s * 1e6);
            fprintf(out, "  %-30s %11.1f us %14s %14s\n", "pinned, 4 KiB copies (each)", pin.small * 1e6, em, pl);
            fprintf(out, "  platform '%s': reference accelerator %.1f TFLOP/s%s\n", r.platform->name,
                    p->accel_flops / 1e12, emulated ? "; emulated on this backend ([backend] emulate_link)" : "");
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
    free(page);
    probe_buffers_free(&b);
    tb_run_close(&r);
    return rc;
}
