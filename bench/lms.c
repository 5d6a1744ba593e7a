/* bench/lms: what large model support costs, per platform and swap policy.
 *
 * The quickstart G-SCNN trains on batches of synthetic images at two sizes. Each size runs
 * once with device memory unlimited (its footprint: the peak), then with device memory
 * capped below that footprint, on the CPU backend with the link of each platform emulated
 * (copies slowed by this CPU's compute rate over the platform's accelerator, so the
 * compute-to-transfer balance of an AC922 or a DGX Station is kept), under each policy.
 * Per run: the median step time, its overhead against the uncapped step, the bytes moved
 * each way per step, the share of the step spent stalled on copies, and peak device
 * memory. Everything runs through the same configuration path as `trainbig train`.
 *
 *   bench/lms [--steps N] [--cap FRACTION] [--sizes A,B] [--batch B] [--threads T]
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/batch_internal.h"
#include "lib/config_internal.h"
#include "lib/engine_internal.h"
#include "lib/run_internal.h"
#include "lib/setup_internal.h"

struct result {
    double step_s, stall_s;
    double out_bytes, in_bytes; /* per step */
    uint64_t peak;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One configuration: `sets` over the quickstart network; warm-up steps (the prefetch
 * policy tunes itself on the first), then `steps` timed. */
static int run(const char *const *sets, int nsets, int steps, struct result *out, struct tb_err *err)
{
    struct tb_config *cfg = tb_config_new("bench/lms");
    if (!cfg)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    int rc = TB_OK;
    for (int i = 0; i < nsets && !rc; i++)
        rc = tb_config_set(cfg, sets[i], err);
    struct tb_setup *s = NULL;
    if (!rc)
        rc = tb_setup_resolve(cfg, &s, err);
    struct tb_run r;
    memset(&r, 0, sizeof r);
    struct tb_graph *g = NULL;
    struct tb_exec *x = NULL;
    struct tb_batch b;
    memset(&b, 0, sizeof b);
    struct tb_batch_work bw = { 0 };
    struct tb_sample sample = { 0 };
    void *ds = NULL;
    const struct tb_dataset_ops *dops = NULL;
    double *times = NULL;
    if (!rc)
        rc = tb_run_open(&r, s, err);
    if (!rc) {
        dops = s->slot[TB_SEC_DATASET].plugin->p->ops.dataset;
        rc = dops->open(s->slot[TB_SEC_DATASET].section, "train", &ds, err);
        if (rc)
            ds = NULL;
    }
    const int batch = s ? (int)tb_section_int(s->slot[TB_SEC_TRAIN].section, "batch") : 0;
    const int side = s ? (int)tb_section_int(s->slot[TB_SEC_DATASET].section, "width") : 0;
    if (!rc) {
        const struct tb_class *classes;
        const int k = (int)dops->classes(ds, &classes);
        const struct tb_model_input in = { batch, 3, side, side, k, 255 };
        rc = tb_run_graph(&r, true, &in, &g, &x, err);
    }
    if (!rc)
        rc = tb_batch_init(&b, batch, side, side, NULL, err);
    for (int i = 0; i < batch && !rc; i++) {
        rc = dops->load(ds, (size_t)i, &sample, err);
        if (!rc)
            rc = tb_batch_put(&b, i, &sample, dops->sample_name(ds, (size_t)i), &bw, err);
    }
    const char *names[] = { "image", "canny", "labels", "edges" };
    const void *data[] = { b.image, b.canny, b.labels, b.edges };
    for (int i = 0; i < 4 && !rc; i++)
        rc = tb_exec_set_input(x, names[i], data[i], err);
    if (!rc && !(times = malloc((size_t)steps * sizeof *times)))
        rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    const int warmup = 2;
    struct tb_swap_stats before = { 0 };
    for (int k = 0; k < warmup + steps && !rc; k++) {
        if (k == warmup) {
            before = *tb_exec_swap_stats(x);
            r.engine.ops->mem_reset_peak(r.engine.ctx, r.engine.device);
        }
        double t0 = now();
        rc = tb_exec_forward(x, (uint64_t)k, err);
        if (!rc)
            rc = tb_exec_backward(x, err);
        if (!rc)
            rc = tb_sgd_step(&r.engine, 0.001f, 0.9f, 1e-4f, err);
        /* The step is done when its copies are: nothing may spill into the next. */
        if (!rc)
            r.engine.ops->stream_sync(r.engine.ctx, r.engine.device, TB_STREAM_D2H);
        if (!rc && k >= warmup)
            times[k - warmup] = now() - t0;
    }
    if (!rc) {
        const struct tb_swap_stats *a = tb_exec_swap_stats(x);
        qsort(times, (size_t)steps, sizeof *times, cmp_double);
        out->step_s = times[steps / 2];
        out->stall_s = (a->stall_seconds - before.stall_seconds) / steps;
        out->out_bytes = (double)(a->bytes_out - before.bytes_out) / steps;
        out->in_bytes = (double)(a->bytes_in - before.bytes_in) / steps;
        struct tb_mem_stats ms = { 0 };
        r.engine.ops->mem_stats(r.engine.ctx, r.engine.device, &ms);
        out->peak = ms.peak;
    }
    free(times);
    tb_sample_release(&sample);
    tb_batch_fini(&b);
    tb_batch_work_free(&bw);
    tb_exec_free(x);
    tb_graph_free(g);
    if (ds)
        dops->close(ds);
    tb_run_close(&r);
    tb_setup_free(s);
    tb_config_free(cfg);
    return rc;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench/lms [--steps N] [--cap FRACTION] [--sizes A,B] [--batch B] [--threads T]\n");
    return 2;
}

int main(int argc, char **argv)
{
    int steps = 5, batch = 8, threads = 0, sizes[2] = { 160, 192 };
    double cap_fraction = 0.6;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--steps") == 0)
            steps = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--cap") == 0)
            cap_fraction = atof(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--batch") == 0)
            batch = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0)
            threads = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--sizes") == 0 &&
                 sscanf(argv[i + 1], "%d,%d", &sizes[0], &sizes[1]) == 2)
            i++;
        else
            return usage();
    }
    if (steps < 1 || batch < 1 || cap_fraction <= 0 || cap_fraction >= 1 || sizes[0] < 16 || sizes[1] < 16)
        return usage();
    setenv("TRAINBIG_LOG", "warn", 0);

    static const char *const platforms[] = { "power9-nvlink", "x86-pcie" };
    static const char *const policies[] = { "lru", "prefetch" };
    printf("bench/lms: quickstart G-SCNN (width 0.125, shape_width 0.5, blocks 1,1,1,1,1,1), batch %d of synthetic "
           "images, cpu backend%s; device memory capped at %.0f%% of each size's footprint; link emulated per "
           "platform; median of %d steps after 2 warm-up steps\n",
           batch, threads ? "" : " (all cores)", cap_fraction * 100, steps);
    printf("study (IBM LMS, G-SCNN batch 8 on 4xV100): AC922 NVLink 43%% at 600x600, 30%% at 700x700; DGX Station "
           "PCIe 106%% and 73%%. Targets here: prefetch <= 10%% (power9-nvlink), <= 25%% (x86-pcie)\n");
    for (int z = 0; z < 2; z++) {
        char common[8][128];
        int n = 0;
        snprintf(common[n++], sizeof common[0], "model.plugin=gscnn");
        snprintf(common[n++], sizeof common[0], "model.width=0.125");
        snprintf(common[n++], sizeof common[0], "model.shape_width=0.5");
        snprintf(common[n++], sizeof common[0], "model.blocks=1,1,1,1,1,1");
        snprintf(common[n++], sizeof common[0], "dataset.plugin=synthetic");
        snprintf(common[n++], sizeof common[0], "dataset.width=%d", sizes[z]);
        snprintf(common[n++], sizeof common[0], "dataset.height=%d", sizes[z]);
        snprintf(common[n++], sizeof common[0], "train.batch=%d", batch);
        char extra[6][128];
        const char *sets[16];
        for (int i = 0; i < n; i++)
            sets[i] = common[i];
        int m = n;
        snprintf(extra[0], sizeof extra[0], "backend.plugin=cpu");
        snprintf(extra[1], sizeof extra[1], "backend.threads=%d", threads);
        sets[m++] = extra[0];
        sets[m++] = extra[1];
        struct tb_err err;
        tb_err_clear(&err);
        struct result base;
        if (run(sets, m, steps, &base, &err)) {
            fprintf(stderr, "bench/lms: %dx%d uncapped: %s\n", sizes[z], sizes[z], err.msg);
            return 1;
        }
        const uint64_t cap = (uint64_t)((double)base.peak * cap_fraction);
        printf("\n%dx%d: footprint %.0f MiB, step %.0f ms uncapped; capped at %.0f MiB\n", sizes[z], sizes[z],
               (double)base.peak / 1048576.0, base.step_s * 1e3, (double)cap / 1048576.0);
        printf("  %-14s %-9s %8s %9s %11s %11s %7s %9s\n", "platform", "policy", "step ms", "overhead", "MiB out/st",
               "MiB in/st", "stall%", "peak MiB");
        for (int p = 0; p < 2; p++) {
            for (int q = 0; q < 2; q++) {
                int k = m;
                snprintf(extra[2], sizeof extra[2], "backend.device_memory=%llu", (unsigned long long)cap);
                snprintf(extra[3], sizeof extra[3], "backend.emulate_link=yes");
                snprintf(extra[4], sizeof extra[4], "platform.plugin=%s", platforms[p]);
                snprintf(extra[5], sizeof extra[5], "swap.plugin=%s", policies[q]);
                for (int e = 2; e < 6; e++)
                    sets[k++] = extra[e];
                struct result res;
                tb_err_clear(&err);
                if (run(sets, k, steps, &res, &err)) {
                    printf("  %-14s %-9s failed: %s\n", platforms[p], policies[q], err.msg);
                    continue;
                }
                printf("  %-14s %-9s %8.0f %8.0f%% %11.1f %11.1f %6.1f%% %9.0f\n", platforms[p], policies[q],
                       res.step_s * 1e3, 100.0 * (res.step_s / base.step_s - 1), res.out_bytes / 1048576.0,
                       res.in_bytes / 1048576.0, 100.0 * res.stall_s / res.step_s, (double)res.peak / 1048576.0);
                fflush(stdout);
            }
        }
    }
    return 0;
}
