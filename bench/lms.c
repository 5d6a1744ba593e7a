/* bench/lms: what large model support costs, per platform and swap policy.
 *
 * The quickstart G-SCNN trains on batches of synthetic images at two sizes. Each size runs
 * with device memory unlimited (its footprint: the peak), then with device memory capped
 * below that footprint, on the CPU backend with the link of each platform emulated, under
 * each policy. Per run: the step time, its overhead against the uncapped step split into
 * stall (waiting for copies: a tensor needed or freed before its copy finished, and the
 * step's end waiting for its last copies out) and the rest (residual = overhead - stall),
 * itself split into the ops' own kernels running slower than uncapped ("ops": on the CPU,
 * the copies' memcpy taking cores and memory bandwidth from compute, which a GPU's copy
 * engines do not) and everything between the ops ("other": allocation, making room, the
 * swap bookkeeping), all in % of the uncapped step, the bytes moved
 * each way per step, and peak device memory. Everything runs through the same
 * configuration path as `trainbig train`.
 *
 * The emulated link: copies slowed by f = this CPU's achieved convolution rate over the
 * platform's accelerator's (accel_tflops x accel_efficiency), so the compute-to-transfer
 * balance of an AC922 or a DGX Station is kept. Achieved, not peak: a step here runs its
 * convolutions at a fraction of this CPU's FMA peak, cuDNN nearer the V100's. The CPU's
 * rate is the step's own: conv FLOPs per step over the uncapped step time of the same
 * round (backend.compute_gflops), so the emulated link follows the machine's speed as it
 * drifts. The backend's own estimate (a 3x3 64->64 convolution, what emulate_link measures
 * when compute_gflops is 0) is printed beside it: wide convolutions run far nearer this
 * CPU's peak than the quickstart network's narrow ones, and the step's rate is the one
 * its compute time follows.
 *
 * What a swap costs depends on the network as much as on the link: the bytes a step
 * swaps grow with its activations, the time that hides them with its FLOPs. The
 * quickstart network is narrow, so it computes far less per byte than the reference
 * G-SCNN, whose full-size steps this CPU cannot run. Both are measured here (conv FLOPs
 * per step over device bytes per image pixel, from the footprints at two sizes), and
 * every case runs twice: on the link as emulated (f), and on the link sped up by the
 * ratio k of the two (`[backend] link_scale`), which gives the quickstart network the
 * reference's compute-to-transfer balance: the analogue of the study's runs. The factors
 * multiply: copies run at f x k of the platform's rates. (With the step's rate in f, k
 * carries the quickstart's achieved rate over to the reference on the V100: the V100's
 * accel_efficiency is the reference's large convolutions'.)
 *
 * A control per size and platform: capped, prefetch, with emulate_link off, so the same
 * copies run on the same copy threads with the same events but take no emulated time
 * (only their memcpy). Its overhead is the mechanism's own cost. emulate_link off, not
 * link_scale at its largest (1000), which would still leave f x 1000 (a few times the
 * platform's rate here) and the latency: not free. The policy plans with the platform's
 * own rates then, against which any copy hides behind this CPU's compute.
 *
 * Two-thread timings drift: each size repeats its uncapped run and all capped runs
 * `--rounds` times; a run's overhead and stall are against its own round's uncapped step,
 * and the tables show medians over the rounds, the overhead with its spread (min-max).
 *
 * --backend cuda runs the same cases on the `cuda` backend (it must load and score above 0
 * here) and the GPU's real link: nothing is emulated or rescaled (that backend has no
 * emulate_link or link_scale), so each case runs once per round, on the platform plugin
 * `plugin = auto` chooses here (--platform NAME names another), and the cap is
 * [backend] device_memory below each size's measured footprint as on the CPU. The sizes
 * default to 384 and 512 there (the reference's intensity at 256 and 384), so that the
 * footprint's growth stands above the convolutions' workspace, part of the peak. The
 * overhead is shown without the stall/residual split: those times are the host's, which
 * runs ahead of the GPU (a wait for a swap-in overlaps work already queued).
 *
 *   bench/lms [--backend cpu|cuda] [--platform NAME] [--steps N] [--rounds R] [--cap FRACTION]
 *             [--sizes A,B] [--batch B] [--threads T] [--trace FILE] [--set SECTION.KEY=VALUE]...
 *
 * --trace FILE writes a Chrome trace (Perfetto) of the last timed step of the larger size
 * on x86-pcie under prefetch at the reference's balance (on cuda: the real link's platform,
 * prefetch): the compute stream and both copy streams, so the idle gaps swapping causes
 * are seen. --set adds an assignment to every run (for instance backend.compute_gflops).
 * --threads is the cpu backend's.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NO_PEAK /* built without OpenMP: the backend helpers only */
#include "benchutil.h"
#include "tools/steptime_internal.h"

/* Modes: the link as emulated, at the reference's balance, and the control (prefetch,
 * copies free). */
enum { MAX_USER = 8, MAX_ROUNDS = 15, NPLAT = 2, NPOL = 2, NMODE = 3, CONTROL = 2 };

static const char *const platforms[NPLAT] = { "power9-nvlink", "x86-pcie" };
static const char *const policies[NPOL] = { "lru", "prefetch" };
/* The study's overheads of IBM LMS (on demand, as lru) at 600x600 and 700x700. */
static const double study[NPLAT][2] = { { 43, 30 }, { 106, 73 } };
static const double target[NPLAT] = { 10, 25 };

static int usage(void)
{
    fprintf(stderr, "usage: bench/lms [--backend cpu|cuda] [--platform NAME] [--steps N] [--rounds R] [--cap FRACTION] "
                    "[--sizes A,B] [--batch B] [--threads T] [--trace FILE] [--set SECTION.KEY=VALUE]...\n");
    return 2;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double s[MAX_ROUNDS];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static void spread(const double *v, int n, double *lo, double *hi)
{
    *lo = *hi = v[0];
    for (int i = 1; i < n; i++) {
        *lo = v[i] < *lo ? v[i] : *lo;
        *hi = v[i] > *hi ? v[i] : *hi;
    }
}

/* The assignments of one run: the network (reference: the gscnn defaults), the size and
 * batch, the backend (with its threads on the cpu), the user's, then `extra`. */
struct runset {
    char buf[16 + MAX_USER][128]; /* [i] backs sets[i] where add() made it */
    const char *sets[16 + MAX_USER];
    int n;
};

static void add(struct runset *r, const char *fmt, const char *s, double v)
{
    char *b = r->buf[r->n];
    if (s)
        snprintf(b, sizeof r->buf[0], fmt, s);
    else
        snprintf(b, sizeof r->buf[0], fmt, v);
    r->sets[r->n] = b;
    r->n++;
}

static void base_sets(struct runset *r, bool reference, const char *backend, int size, int batch, int threads,
                      const char *const *user, int nuser)
{
    r->n = 0;
    add(r, "model.plugin=gscnn", NULL, 0);
    if (!reference) {
        add(r, "model.width=0.125", NULL, 0);
        add(r, "model.shape_width=0.5", NULL, 0);
        add(r, "model.blocks=1,1,1,1,1,1", NULL, 0);
    }
    add(r, "dataset.plugin=synthetic", NULL, 0);
    add(r, "dataset.width=%.0f", NULL, size);
    add(r, "dataset.height=%.0f", NULL, size);
    add(r, "train.batch=%.0f", NULL, batch);
    add(r, "backend.plugin=%s", backend, 0);
    if (strcmp(backend, "cpu") == 0)
        add(r, "backend.threads=%.0f", NULL, threads); /* the cuda backend has no such key */
    for (int i = 0; i < nuser; i++)
        r->sets[r->n++] = user[i];
}

/* Conv FLOPs per image pixel and device bytes per image pixel (the footprint's growth
 * between two sizes) of a network; 0 on failure (err). */
static int intensity(bool reference, const char *backend, const int size[2], int batch, int steps, int threads,
                     const char *const *user, int nuser, struct tb_step_timing t[2], double *flops_px, double *bytes_px,
                     struct tb_err *err)
{
    for (int z = 0; z < 2; z++) {
        struct runset r;
        base_sets(&r, reference, backend, size[z], batch, threads, user, nuser);
        tb_err_clear(err);
        if (tb_time_steps(NULL, r.sets, r.n, steps, &t[z], err))
            return -1;
    }
    const double px0 = (double)batch * size[0] * size[0], px1 = (double)batch * size[1] * size[1];
    *flops_px = t[1].conv_flops / px1;
    *bytes_px = ((double)t[1].peak - (double)t[0].peak) / (px1 - px0);
    return *bytes_px > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    int steps = 3, rounds = 3, batch = 8, threads = 0, sizes[2] = { 0, 0 };
    bool sizes_given = false;
    double cap_fraction = 0.6;
    const char *trace = NULL, *user[MAX_USER], *backend = "cpu", *platform = NULL;
    int nuser = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--backend") == 0)
            backend = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--platform") == 0)
            platform = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--set") == 0 && nuser < MAX_USER)
            user[nuser++] = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--steps") == 0)
            steps = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--rounds") == 0)
            rounds = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--cap") == 0)
            cap_fraction = atof(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--batch") == 0)
            batch = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--trace") == 0)
            trace = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0)
            threads = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--sizes") == 0 &&
                 sscanf(argv[i + 1], "%d,%d", &sizes[0], &sizes[1]) == 2) {
            sizes_given = true;
            i++;
        } else
            return usage();
    }
    const bool cuda = strcmp(backend, "cuda") == 0;
    /* On a GPU the sizes are larger: the convolutions' workspace (up to [backend]
     * workspace_limit, chosen per op by timing) is part of the peak, and the footprint's
     * growth between the two sizes must stand well above its variation. */
    if (!sizes_given) {
        sizes[0] = cuda ? 384 : 160;
        sizes[1] = cuda ? 512 : 192;
    }
    bool user_rate = false; /* --set backend.compute_gflops: the user's rate for every run */
    for (int i = 0; i < nuser; i++)
        user_rate |= strncmp(user[i], "backend.compute_gflops=", 23) == 0;
    if (steps < 1 || rounds < 1 || rounds > MAX_ROUNDS || batch < 1 || cap_fraction <= 0 || cap_fraction >= 1 ||
        sizes[0] < 16 || sizes[1] <= sizes[0] || (!cuda && strcmp(backend, "cpu") != 0) || (platform && !cuda))
        return usage();
    setenv("TRAINBIG_LOG", "warn", 0);
    setvbuf(stdout, NULL, _IOLBF, 0); /* each line as it comes: a run takes minutes */

    /* On cuda: one platform, the real one; the runs emulate nothing. */
    const char *plat[NPLAT] = { platforms[0], platforms[1] };
    const int nplat = cuda ? 1 : NPLAT, nmode = cuda ? 1 : NMODE;
    struct tb_plugin_handle *held = NULL;
    char plat_name[128] = "", plat_why[2048] = "";
    if (cuda) {
        /* Held to the end: the GPU runtime stays loaded while each run opens the backend. */
        held = bench_backend_require("cuda");
        struct bench_backend b;
        struct tb_device_info info;
        bench_backend_open(&b, "cuda", "");
        b.ops.backend->device_info(b.ctx, 0, &info);
        bench_backend_close(&b);
        if (platform) {
            snprintf(plat_name, sizeof plat_name, "%s", platform);
            snprintf(plat_why, sizeof plat_why, "--platform");
        } else {
            struct tb_plugin_handle *h;
            struct tb_err perr;
            tb_err_clear(&perr);
            if (tb_plugin_auto(TB_KIND_PLATFORM, &h, plat_why, sizeof plat_why, &perr)) {
                fprintf(stderr, "bench/lms: no platform for the real link: %s; name one with --platform\n", perr.msg);
                tb_plugin_close(held);
                return 1;
            }
            snprintf(plat_name, sizeof plat_name, "%s", h->p->name);
            tb_plugin_close(h);
        }
        plat[0] = plat_name;
        printf("bench/lms: quickstart G-SCNN (width 0.125, shape_width 0.5, blocks 1,1,1,1,1,1), batch %d of "
               "synthetic images, cuda backend on %s (%.1f GiB usable); device memory capped at %.0f%% of each "
               "size's footprint; the real link, platform %s (%s); per run the median of %d steps after 2 warm-up "
               "steps; medians over %d rounds\n",
               batch, info.name, (double)info.capacity / (1u << 30), cap_fraction * 100, plat_name, plat_why, steps,
               rounds);
    } else {
        printf("bench/lms: quickstart G-SCNN (width 0.125, shape_width 0.5, blocks 1,1,1,1,1,1), batch %d of "
               "synthetic images, cpu backend%s; device memory capped at %.0f%% of each size's footprint; link "
               "emulated per platform; per run the median of %d steps after 2 warm-up steps; medians over %d rounds\n",
               batch, threads ? "" : " (all cores)", cap_fraction * 100, steps, rounds);
    }

    /* Compute per byte: the reference network at two small sizes, batch 2 (its weights
     * are most of its footprint there; the growth between the sizes is its activations). */
    struct tb_err err;
    struct tb_step_timing ref_t[2], base0[2];
    double ref_fpx, ref_bpx, net_fpx, net_bpx;
    const int ref_sizes[2] = { cuda ? 256 : 48, cuda ? 384 : 64 };
    if (intensity(true, backend, ref_sizes, 2, 1, threads, user, nuser, ref_t, &ref_fpx, &ref_bpx, &err)) {
        if (err.msg[0])
            fprintf(stderr, "bench/lms: the reference G-SCNN: %s\n", err.msg);
        else
            fprintf(stderr,
                    "bench/lms: the reference G-SCNN: no footprint growth (peak %.1f MiB at %d, %.1f MiB at %d)\n",
                    ref_t[0].peak / 1048576.0, ref_sizes[0], ref_t[1].peak / 1048576.0, ref_sizes[1]);
        tb_plugin_close(held);
        return 1;
    }
    if (intensity(false, backend, sizes, batch, steps, threads, user, nuser, base0, &net_fpx, &net_bpx, &err)) {
        if (err.msg[0])
            fprintf(stderr, "bench/lms: the quickstart G-SCNN: %s\n", err.msg);
        else
            fprintf(stderr,
                    "bench/lms: the quickstart G-SCNN: no footprint growth (peak %.1f MiB at %d, %.1f MiB at %d)\n",
                    base0[0].peak / 1048576.0, sizes[0], base0[1].peak / 1048576.0, sizes[1]);
        tb_plugin_close(held);
        return 1;
    }
    const double ref_i = ref_fpx / ref_bpx, net_i = net_fpx / net_bpx, k = ref_i / net_i;
    printf("reference G-SCNN (width 1, shape_width 1, blocks 3,3,6,3,1,1): %.0f bytes of device memory and %.2f "
           "MFLOP of convolutions per image pixel per step: %.0f FLOP per byte\n",
           ref_bpx, ref_fpx / 1e6, ref_i);
    if (cuda)
        printf("quickstart G-SCNN: %.0f bytes and %.3f MFLOP per pixel: %.0f FLOP per byte, %.1fx less; each case "
               "runs on the real link only (nothing emulated or rescaled), so its overheads are this network's "
               "balance on this GPU, not the reference's\n",
               net_bpx, net_fpx / 1e6, net_i, k);
    else
        printf("quickstart G-SCNN: %.0f bytes and %.3f MFLOP per pixel: %.0f FLOP per byte, %.1fx less; so each "
               "case runs on the emulated link as is, and %.1fx faster (backend.link_scale), the reference's "
               "balance\n",
               net_bpx, net_fpx / 1e6, net_i, k, k);
    printf("study (IBM LMS, on demand like lru; G-SCNN batch 8 on 4xV100): AC922 NVLink 43%% at 600x600, 30%% at "
           "700x700; DGX Station PCIe 106%% and 73%%. Targets: prefetch <= 10%% (power9-nvlink), <= 25%% (x86-pcie) "
           "at the reference's balance\n");

    /* The emulation's rates: the backend's own estimate of this CPU (a 3x3 64->64
     * convolution beside its FMA peak) and each platform's accelerator, achieved. */
    struct tb_link emu[NPLAT], given[NPLAT];
    for (int p = 0; p < nplat && !cuda; p++) {
        struct runset c;
        base_sets(&c, false, backend, sizes[0], batch, threads, user, nuser);
        add(&c, "backend.emulate_link=yes", NULL, 0);
        add(&c, "platform.plugin=%s", plat[p], 0);
        if (p > 0 && !user_rate) /* measured once */
            add(&c, "backend.compute_gflops=%.6g", NULL, emu[0].accel_flops * emu[0].accel_efficiency / 1e9);
        tb_err_clear(&err);
        if (tb_step_link(NULL, c.sets, c.n, &emu[p], &given[p], &err)) {
            fprintf(stderr, "bench/lms: the emulated link of %s: %s\n", plat[p], err.msg);
            return 1;
        }
    }
    const double fma_peak = !cuda && emu[0].accel_efficiency < 1 ? emu[0].accel_flops : 0;
    if (!cuda) {
        const double conv = emu[0].accel_flops * emu[0].accel_efficiency;
        if (fma_peak > 0)
            printf("this CPU: FMA peak %.0f GFLOP/s; a 3x3 64->64 convolution (what emulate_link measures by "
                   "default) %.1f GFLOP/s, %.0f%% of it\n",
                   fma_peak / 1e9, conv / 1e9, 100 * conv / fma_peak);
        else
            printf("this CPU: convolutions at %.1f GFLOP/s (--set backend.compute_gflops) for every run\n", conv / 1e9);
        for (int p = 0; p < nplat; p++)
            printf("%s's accelerator: %.1f TFLOP/s x %.2f (accel_efficiency) = %.2f TFLOP/s achieved; %.1f GB/s "
                   "each way\n",
                   plat[p], given[p].accel_flops / 1e12, given[p].accel_efficiency,
                   given[p].accel_flops * given[p].accel_efficiency / 1e12, given[p].h2d_bytes_per_s / 1e9);
        printf("emulated link: copies at f = this CPU's achieved conv rate / the accelerator's (%s) of the "
               "platform's rates, times k = %.1f at the reference's balance\n",
               user_rate ? "the rate given" : "the rate: the step's conv FLOPs over its uncapped time, per round", k);
    }

    double summary[2][NMODE][NPLAT][NPOL];
    for (int z = 0; z < 2; z++) {
        double base_s[MAX_ROUNDS], rate[MAX_ROUNDS], step[NMODE][NPLAT][NPOL][MAX_ROUNDS],
            over[NMODE][NPLAT][NPOL][MAX_ROUNDS], stall[NMODE][NPLAT][NPOL][MAX_ROUNDS],
            slower[NMODE][NPLAT][NPOL][MAX_ROUNDS];
        struct tb_step_timing last[NMODE][NPLAT][NPOL];
        bool failed[NMODE][NPLAT][NPOL] = { { { false } } };
        char why[NMODE][NPLAT][NPOL][160];
        const uint64_t cap = (uint64_t)((double)base0[z].peak * cap_fraction);
        for (int r = 0; r < rounds; r++) {
            struct runset rs;
            base_sets(&rs, false, backend, sizes[z], batch, threads, user, nuser);
            struct tb_step_timing base = base0[z];
            tb_err_clear(&err);
            if (r > 0 && tb_time_steps(NULL, rs.sets, rs.n, steps, &base, &err)) {
                fprintf(stderr, "bench/lms: %dx%d uncapped: %s\n", sizes[z], sizes[z], err.msg);
                tb_plugin_close(held);
                return 1;
            }
            base_s[r] = base.step_s;
            rate[r] = base.conv_flops / base.step_s; /* the step's achieved conv rate, this round */
            for (int mode = 0; mode < nmode; mode++)
                for (int p = 0; p < nplat; p++)
                    for (int q = 0; q < NPOL; q++) {
                        if (failed[mode][p][q] || (mode == CONTROL && strcmp(policies[q], "prefetch") != 0))
                            continue;
                        struct runset c;
                        base_sets(&c, false, backend, sizes[z], batch, threads, user, nuser);
                        add(&c, "backend.device_memory=%.0f", NULL, (double)cap);
                        if (!cuda && mode != CONTROL) {
                            add(&c, "backend.emulate_link=yes", NULL, 0);
                            add(&c, "backend.link_scale=%.6g", NULL, mode ? k : 1.0);
                            if (!user_rate)
                                add(&c, "backend.compute_gflops=%.6g", NULL, rate[r] / 1e9);
                        }
                        add(&c, "platform.plugin=%s", plat[p], 0);
                        add(&c, "swap.plugin=%s", policies[q], 0);
                        struct tb_step_timing res;
                        tb_err_clear(&err);
                        /* cpu: x86-pcie at the reference's balance; cuda: the one case of prefetch */
                        const bool traced =
                            trace && z == 1 && mode == (cuda ? 0 : 1) && p == nplat - 1 && q == 1 && r == rounds - 1;
                        if (traced ? tb_time_steps_traced(NULL, c.sets, c.n, steps, trace, &res, &err)
                                   : tb_time_steps(NULL, c.sets, c.n, steps, &res, &err)) {
                            failed[mode][p][q] = true;
                            snprintf(why[mode][p][q], sizeof why[0][0][0], "%.150s", err.msg);
                            continue;
                        }
                        step[mode][p][q][r] = res.step_s;
                        over[mode][p][q][r] = 100.0 * (res.step_s / base.step_s - 1);
                        stall[mode][p][q][r] = 100.0 * res.stall_s / base.step_s;
                        slower[mode][p][q][r] = 100.0 * (res.ops_s - base.ops_s) / base.step_s;
                        last[mode][p][q] = res;
                    }
        }
        const double rate_m = median(rate, rounds);
        printf("\n%dx%d: footprint %.0f MiB, step %.0f ms uncapped; capped at %.0f MiB\n", sizes[z], sizes[z],
               (double)base0[z].peak / 1048576.0, median(base_s, rounds) * 1e3, (double)cap / 1048576.0);
        if (!cuda && !user_rate) {
            printf("  the step's convolutions: %.1f GFLOP/s (median over rounds", rate_m / 1e9);
            if (fma_peak > 0)
                printf("; %.0f%% of the FMA peak", 100 * rate_m / fma_peak);
            printf("): f =");
            for (int p = 0; p < nplat; p++)
                printf("%s %.4g (%s)", p ? "," : "", rate_m / (given[p].accel_flops * given[p].accel_efficiency),
                       plat[p]);
            printf("; f x k =");
            for (int p = 0; p < nplat; p++)
                printf("%s %.4g", p ? "," : "", k * rate_m / (given[p].accel_flops * given[p].accel_efficiency));
            printf("\n");
        }
        for (int mode = 0; mode < nmode; mode++) {
            if (cuda)
                printf("  the real link (platform %s):\n", plat_name);
            else if (mode == 0)
                printf("  link as emulated (this network's balance):\n");
            else if (mode == 1)
                printf("  link %.1fx faster (the reference's balance):\n", k);
            else
                printf("  control: prefetch, copies free (emulate_link off): the mechanism's own cost\n");
            printf("    %-14s %-9s %8s %9s %12s %7s %9s %8s %7s %11s %11s %9s\n", "platform", "policy", "step ms",
                   "overhead", "(min-max)", "stall", "residual", "ops", "other", "MiB out/st", "MiB in/st", "peak MiB");
            for (int p = 0; p < nplat; p++)
                for (int q = 0; q < NPOL; q++) {
                    summary[z][mode][p][q] = -1000; /* failed, or not run */
                    if (mode == CONTROL && strcmp(policies[q], "prefetch") != 0)
                        continue;
                    if (failed[mode][p][q]) {
                        printf("    %-14s %-9s failed: %s\n", plat[p], policies[q], why[mode][p][q]);
                        continue;
                    }
                    const struct tb_step_timing *res = &last[mode][p][q];
                    const double sm = median(step[mode][p][q], rounds), o = median(over[mode][p][q], rounds);
                    const double st = median(stall[mode][p][q], rounds), sl = median(slower[mode][p][q], rounds);
                    double lo, hi;
                    spread(over[mode][p][q], rounds, &lo, &hi);
                    char range[32];
                    snprintf(range, sizeof range, "(%.0f..%.0f)", lo, hi);
                    summary[z][mode][p][q] = o;
                    if (cuda) /* host-side times: see the note under the tables */
                        printf("    %-14s %-9s %8.0f %8.1f%% %12s %7s %9s %8s %7s %11.1f %11.1f %9.0f\n", plat[p],
                               policies[q], sm * 1e3, o, range, "-", "-", "-", "-", res->out_bytes / 1048576.0,
                               res->in_bytes / 1048576.0, (double)res->peak / 1048576.0);
                    else
                        printf(
                            "    %-14s %-9s %8.0f %8.1f%% %12s %6.1f%% %8.1f%% %7.1f%% %6.1f%% %11.1f %11.1f %9.0f\n",
                            plat[p], policies[q], sm * 1e3, o, range, st, o - st, sl, o - st - sl,
                            res->out_bytes / 1048576.0, res->in_bytes / 1048576.0, (double)res->peak / 1048576.0);
                }
        }
        if (cuda && z == 1)
            printf("  (no stall/residual split on cuda: the stall and the ops' times are taken on the host, which runs "
                   "ahead of the GPU, so a wait for a swap-in there overlaps GPU work already queued; the step's "
                   "overhead is the device's own. --trace shows where the compute stream idles)\n");
        if (trace && z == 1 && cuda)
            printf("  (a Chrome trace of %s, prefetch, the real link: %s)\n", plat_name, trace);
        else if (trace && z == 1)
            printf("  (a Chrome trace of x86-pcie, prefetch, the reference's balance: %s)\n", trace);
        fflush(stdout);
    }

    if (cuda) {
        /* The study's figures where the real platform is one of its two. */
        int sp = -1;
        for (int p = 0; p < NPLAT; p++)
            if (strcmp(plat_name, platforms[p]) == 0)
                sp = p;
        printf("\noverhead on the real link beside the study (sizes: %dx%d as its 600x600, %dx%d as its 700x700; "
               "this network's balance, not the reference's):\n",
               sizes[0], sizes[0], sizes[1], sizes[1]);
        printf("  %-14s %5s %10s %10s %10s %8s\n", "platform", "size", "IBM LMS", "lru", "prefetch", "target");
        for (int z = 0; z < 2; z++) {
            char cell[2][32], lms[32] = "-", tgt[48] = "-";
            for (int q = 0; q < NPOL; q++)
                if (summary[z][0][0][q] < -99)
                    snprintf(cell[q], sizeof cell[q], "failed");
                else
                    snprintf(cell[q], sizeof cell[q], "%.0f%%", summary[z][0][0][q]);
            if (sp >= 0) {
                const double v = summary[z][0][0][1];
                snprintf(lms, sizeof lms, "%.0f%%", study[sp][z]);
                snprintf(tgt, sizeof tgt, "<= %.0f%%%s", target[sp], v > -99 && v <= target[sp] ? " met" : " not met");
            }
            printf("  %-14s %5d %10s %10s %10s %8s\n", plat_name, sizes[z], lms, cell[0], cell[1], tgt);
        }
        tb_plugin_close(held);
        return 0;
    }

    printf("\noverhead beside the study (sizes: %dx%d as its 600x600, %dx%d as its 700x700; control: prefetch with "
           "copies free, target <= 3%%):\n",
           sizes[0], sizes[0], sizes[1], sizes[1]);
    printf("  %-14s %5s %10s %14s %14s %16s %8s %14s\n", "platform", "size", "IBM LMS", "lru (as is)", "lru (ref bal.)",
           "prefetch (ref)", "target", "control");
    for (int p = 0; p < NPLAT; p++)
        for (int z = 0; z < 2; z++) {
            char cell[4][32];
            const double v[4] = { summary[z][0][p][0], summary[z][1][p][0], summary[z][1][p][1],
                                  summary[z][CONTROL][p][1] };
            for (int c = 0; c < 4; c++)
                if (v[c] < -99)
                    snprintf(cell[c], sizeof cell[c], "failed");
                else
                    snprintf(cell[c], sizeof cell[c], "%.1f%%%s", v[c], c < 3 ? "" : v[c] <= 3 ? " met" : " not met");
            printf("  %-14s %5d %9.0f%% %14s %14s %16s %6s%.0f%%%s %14s\n", platforms[p], sizes[z], study[p][z],
                   cell[0], cell[1], cell[2], "<= ", target[p], v[2] > -99 && v[2] <= target[p] ? " met" : " not met",
                   cell[3]);
        }
    return 0;
}
