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
 *   bench/lms [--steps N] [--cap FRACTION] [--sizes A,B] [--batch B] [--threads T] [--trace FILE]
 *
 * --trace FILE writes a Chrome trace (Perfetto) of the last timed step of the larger size
 * on x86-pcie under prefetch: the compute stream and both copy streams, so the idle gaps
 * swapping causes are seen.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/steptime_internal.h"

static int usage(void)
{
    fprintf(stderr,
            "usage: bench/lms [--steps N] [--cap FRACTION] [--sizes A,B] [--batch B] [--threads T] [--trace FILE]\n");
    return 2;
}

int main(int argc, char **argv)
{
    int steps = 5, batch = 8, threads = 0, sizes[2] = { 160, 192 };
    double cap_fraction = 0.6;
    const char *trace = NULL, *user[8];
    int nuser = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--set") == 0 && nuser < 8)
            user[nuser++] = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--steps") == 0)
            steps = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--cap") == 0)
            cap_fraction = atof(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--batch") == 0)
            batch = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--trace") == 0)
            trace = argv[++i];
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
        const char *sets[32];
        for (int i = 0; i < n; i++)
            sets[i] = common[i];
        int m = n;
        for (int i = 0; i < nuser; i++)
            sets[m++] = user[i];
        snprintf(extra[0], sizeof extra[0], "backend.plugin=cpu");
        snprintf(extra[1], sizeof extra[1], "backend.threads=%d", threads);
        sets[m++] = extra[0];
        sets[m++] = extra[1];
        struct tb_err err;
        tb_err_clear(&err);
        struct tb_step_timing base;
        if (tb_time_steps(NULL, sets, m, steps, &base, &err)) {
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
                struct tb_step_timing res;
                tb_err_clear(&err);
                const bool traced = trace && z == 1 && p == 1 && q == 1;
                if (traced ? tb_time_steps_traced(NULL, sets, k, steps, trace, &res, &err)
                           : tb_time_steps(NULL, sets, k, steps, &res, &err)) {
                    printf("  %-14s %-9s failed: %s\n", platforms[p], policies[q], err.msg);
                    continue;
                }
                printf("  %-14s %-9s %8.0f %8.0f%% %11.1f %11.1f %6.1f%% %9.0f\n", platforms[p], policies[q],
                       res.step_s * 1e3, 100.0 * (res.step_s / base.step_s - 1), res.out_bytes / 1048576.0,
                       res.in_bytes / 1048576.0, 100.0 * res.stall_s / res.step_s, (double)res.peak / 1048576.0);
                if (traced)
                    printf("  (a trace of the last step: %s)\n", trace);
                fflush(stdout);
            }
        }
    }
    return 0;
}
