/* bench/lms: what large model support costs, per platform and swap policy: the
 * measurement of tools/lms.c (its comment says how), printed as tables beside the
 * study's figures for IBM LMS.
 *
 * On the cpu backend each case runs on the link of power9-nvlink and x86-pcie emulated,
 * under lru, prefetch and hybrid, at two sizes, as emulated and at the reference's
 * balance, with a control (prefetch, copies free). Each case also says how much of the
 * step's activations and gradients (their bytes) stayed on the device, went to the host
 * and were dropped to be recomputed, and what the recomputation cost. --backend cuda runs the same cases on the `cuda`
 * backend (it must load and score above 0 here) and the GPU's real link: nothing is
 * emulated or rescaled, so each case runs once per round, on the platform plugin
 * `plugin = auto` chooses here (--platform NAME names another). The sizes default to 384
 * and 512 there (the reference's intensity at 256 and 384), so that the footprint's
 * growth stands above the convolutions' workspace, part of the peak. The overhead is
 * shown without the stall/residual split: those times are the host's, which runs ahead
 * of the GPU (a wait for a swap-in overlaps work already queued).
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
#include "tools/lms_internal.h"

enum { MAX_USER = 8, NPLAT = 2 };

static const char *const platforms[NPLAT] = { "power9-nvlink", "x86-pcie" };
static const double target[NPLAT] = { 10, 25 };
/* hybrid's own bound where prefetch exceeds it (0: none; on power9-nvlink hybrid makes
 * prefetch's plan, and "no worse than prefetch" is the test) */
static const double hybrid_bound[NPLAT] = { 0, 10 };

/* why: what was wrong, or NULL. */
static int usage(const char *why)
{
    if (why)
        fprintf(stderr, "bench/lms: %s\n", why);
    fprintf(stderr, "usage: bench/lms [--backend cpu|cuda] [--platform NAME] [--steps N] [--rounds R] [--cap FRACTION] "
                    "[--sizes A,B] [--batch B] [--threads T] [--trace FILE] [--set SECTION.KEY=VALUE]...\n");
    return 2;
}

/* What the tables need besides the result. */
struct print_ctx {
    bool cuda;
    const char *plat_name, *plat_why;
    const char *gpu_name;
    double gpu_gib;
    double summary[2][TB_LMS_NMODE][NPLAT][TB_LMS_NPOL];
};

static void print_preamble(const struct tb_lms_options *o, const struct tb_lms_result *r, const struct print_ctx *pc)
{
    const double ref_i = r->ref_fpx / r->ref_bpx, net_i = r->net_fpx / r->net_bpx, k = r->k;
    printf("reference G-SCNN (width 1, shape_width 1, blocks 3,3,6,3,1,1): %.0f bytes of device memory and %.2f "
           "MFLOP of convolutions per image pixel per step: %.0f FLOP per byte\n",
           r->ref_bpx, r->ref_fpx / 1e6, ref_i);
    if (pc->cuda)
        printf("quickstart G-SCNN: %.0f bytes and %.3f MFLOP per pixel: %.0f FLOP per byte, %.1fx less; each case "
               "runs on the real link only (nothing emulated or rescaled), so its overheads are this network's "
               "balance on this GPU, not the reference's\n",
               r->net_bpx, r->net_fpx / 1e6, net_i, k);
    else
        printf("quickstart G-SCNN: %.0f bytes and %.3f MFLOP per pixel: %.0f FLOP per byte, %.1fx less; so each "
               "case runs on the emulated link as is, and %.1fx faster (backend.link_scale), the reference's "
               "balance\n",
               r->net_bpx, r->net_fpx / 1e6, net_i, k, k);
    printf("study (IBM LMS, on demand like lru; G-SCNN batch 8 on 4xV100): AC922 NVLink 43%% at 600x600, 30%% at "
           "700x700; DGX Station PCIe 106%% and 73%%. Targets: prefetch <= 10%% (power9-nvlink), <= 25%% (x86-pcie) "
           "at the reference's balance\n");
    if (pc->cuda)
        return;
    const double conv = r->emu[0].accel_flops * r->emu[0].accel_efficiency;
    if (r->fma_peak > 0)
        printf("this CPU: FMA peak %.0f GFLOP/s; a 3x3 64->64 convolution (what emulate_link measures by "
               "default) %.1f GFLOP/s, %.0f%% of it\n",
               r->fma_peak / 1e9, conv / 1e9, 100 * conv / r->fma_peak);
    else
        printf("this CPU: convolutions at %.1f GFLOP/s (--set backend.compute_gflops) for every run\n", conv / 1e9);
    for (int p = 0; p < o->nplat; p++)
        printf("%s's accelerator: %.1f TFLOP/s x %.2f (accel_efficiency) = %.2f TFLOP/s achieved; %.1f GB/s "
               "each way\n",
               o->platforms[p], r->given[p].accel_flops / 1e12, r->given[p].accel_efficiency,
               r->given[p].accel_flops * r->given[p].accel_efficiency / 1e12, r->given[p].h2d_bytes_per_s / 1e9);
    printf("emulated link: copies at f = this CPU's achieved conv rate / the accelerator's (%s) of the "
           "platform's rates, times k = %.1f at the reference's balance\n",
           r->user_rate ? "the rate given" : "the rate: the step's conv FLOPs over its uncapped time, per round", k);
}

static void print_size(const struct tb_lms_options *o, const struct tb_lms_result *r, int z, struct print_ctx *pc)
{
    const struct tb_lms_size *sz = &r->sizes[z];
    const int nmode = pc->cuda ? 1 : TB_LMS_NMODE;
    printf("\n%dx%d: footprint %.0f MiB, step %.0f ms uncapped; capped at %.0f MiB\n", sz->size, sz->size,
           (double)sz->base.peak / 1048576.0, sz->base_step_s * 1e3, (double)sz->cap / 1048576.0);
    if (!pc->cuda && !r->user_rate) {
        printf("  the step's convolutions: %.1f GFLOP/s (median over rounds", sz->rate / 1e9);
        if (r->fma_peak > 0)
            printf("; %.0f%% of the FMA peak", 100 * sz->rate / r->fma_peak);
        printf("): f =");
        for (int p = 0; p < o->nplat; p++)
            printf("%s %.4g (%s)", p ? "," : "", tb_lms_factor(r, z, p), o->platforms[p]);
        printf("; f x k =");
        for (int p = 0; p < o->nplat; p++)
            printf("%s %.4g", p ? "," : "", r->k * tb_lms_factor(r, z, p));
        printf("\n");
    }
    for (int mode = 0; mode < nmode; mode++) {
        if (pc->cuda)
            printf("  the real link (platform %s):\n", pc->plat_name);
        else if (mode == TB_LMS_AS_IS)
            printf("  link as emulated (this network's balance):\n");
        else if (mode == TB_LMS_REF)
            printf("  link %.1fx faster (the reference's balance):\n", r->k);
        else
            printf("  control: prefetch, copies free (emulate_link off): the mechanism's own cost\n");
        printf("    %-14s %-9s %8s %9s %12s %7s %9s %8s %7s %7s %11s %11s %9s %16s\n", "platform", "policy", "step ms",
               "overhead", "(min-max)", "stall", "residual", "ops", "recomp", "other", "MiB out/st", "MiB in/st",
               "peak MiB", "kept/swap/recomp");
        for (int p = 0; p < o->nplat; p++)
            for (int q = 0; q < TB_LMS_NPOL; q++) {
                const struct tb_lms_case *c = &sz->cases[mode][p][q];
                pc->summary[z][mode][p][q] = -1000; /* failed, or not run */
                if (mode == TB_LMS_CONTROL && q != TB_LMS_PREFETCH)
                    continue;
                if (c->failed) {
                    printf("    %-14s %-9s failed: %s\n", o->platforms[p], tb_lms_policies[q], c->why);
                    continue;
                }
                if (!c->run)
                    continue;
                char range[32];
                snprintf(range, sizeof range, "(%.0f..%.0f)", c->lo, c->hi);
                pc->summary[z][mode][p][q] = c->overhead;
                const double o_ = c->overhead, st = c->stall, sl = c->ops;
                /* Shares of the step's activation and gradient bytes: out to the host, dropped for
                 * recomputation, the rest kept (a tensor moved out twice counts twice). */
                const double all = c->mid.transient_bytes > 0 ? c->mid.transient_bytes : 1;
                const double sw = 100 * c->mid.out_bytes / all, dr = 100 * c->mid.drop_bytes / all;
                char shares[32];
                snprintf(shares, sizeof shares, "%.0f/%.0f/%.0f%%", sw + dr < 100 ? 100 - sw - dr : 0, sw, dr);
                const double rc = c->recompute;
                if (pc->cuda) /* host-side times: see the note under the tables */
                    printf("    %-14s %-9s %8.0f %8.1f%% %12s %7s %9s %8s %7s %7s %11.1f %11.1f %9.0f %16s\n",
                           o->platforms[p], tb_lms_policies[q], c->step_s * 1e3, o_, range, "-", "-", "-", "-", "-",
                           c->mid.out_bytes / 1048576.0, c->mid.in_bytes / 1048576.0, (double)c->mid.peak / 1048576.0,
                           shares);
                else
                    printf("    %-14s %-9s %8.0f %8.1f%% %12s %6.1f%% %8.1f%% %7.1f%% %6.1f%% %6.1f%% %11.1f %11.1f "
                           "%9.0f %16s\n",
                           o->platforms[p], tb_lms_policies[q], c->step_s * 1e3, o_, range, st, o_ - st, sl, rc,
                           o_ - st - sl - rc, c->mid.out_bytes / 1048576.0, c->mid.in_bytes / 1048576.0,
                           (double)c->mid.peak / 1048576.0, shares);
            }
    }
    if (pc->cuda && z == 1)
        printf("  (no stall/residual split on cuda: the stall and the ops' times are taken on the host, which runs "
               "ahead of the GPU, so a wait for a swap-in there overlaps GPU work already queued; the step's "
               "overhead is the device's own. --trace shows where the compute stream idles)\n");
    if (o->trace && z == 1 && pc->cuda)
        printf("  (a Chrome trace of %s, prefetch, the real link: %s)\n", pc->plat_name, o->trace);
    else if (o->trace && z == 1)
        printf("  (a Chrome trace of x86-pcie, prefetch, the reference's balance: %s)\n", o->trace);
    fflush(stdout);
}

static void progress(void *arg, const struct tb_lms_options *o, const struct tb_lms_result *r, int size)
{
    if (size < 0)
        print_preamble(o, r, arg);
    else
        print_size(o, r, size, arg);
}

int main(int argc, char **argv)
{
    struct tb_lms_options o = {
        .backend = "cpu", .steps = 3, .rounds = 3, .batch = 8, .cap_fraction = 0.6, .hybrid = true
    };
    bool sizes_given = false;
    const char *user[MAX_USER], *platform = NULL;
    int nuser = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--backend") == 0)
            o.backend = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--platform") == 0)
            platform = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--set") == 0 && nuser < MAX_USER)
            user[nuser++] = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--steps") == 0)
            o.steps = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--rounds") == 0)
            o.rounds = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--cap") == 0)
            o.cap_fraction = atof(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--batch") == 0)
            o.batch = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--trace") == 0)
            o.trace = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0)
            o.threads = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--sizes") == 0 &&
                 sscanf(argv[i + 1], "%d,%d", &o.sizes[0], &o.sizes[1]) == 2) {
            sizes_given = true;
            i++;
        } else
            return usage(NULL);
    }
    o.user = user;
    o.nuser = nuser;
    struct print_ctx pc = { .cuda = strcmp(o.backend, "cuda") == 0 };
    /* On a GPU the sizes are larger: the convolutions' workspace (up to [backend]
     * workspace_limit, chosen per op by timing) is part of the peak, and the footprint's
     * growth between the two sizes must stand well above its variation. */
    if (!sizes_given) {
        o.sizes[0] = pc.cuda ? 384 : 160;
        o.sizes[1] = pc.cuda ? 512 : 192;
    }
    if (platform && !pc.cuda)
        return usage("--platform is for --backend cuda (the real link's platform); on cpu every run emulates "
                     "both power9-nvlink and x86-pcie");
    if (o.steps < 1 || o.rounds < 1 || o.rounds > TB_LMS_MAX_ROUNDS || o.batch < 1 || o.cap_fraction <= 0 ||
        o.cap_fraction >= 1 || o.sizes[0] < 16 || o.sizes[1] <= o.sizes[0] ||
        (!pc.cuda && strcmp(o.backend, "cpu") != 0))
        return usage(NULL);
    setenv("TRAINBIG_LOG", "warn", 0);
    setvbuf(stdout, NULL, _IOLBF, 0); /* each line as it comes: a run takes minutes */

    /* On cuda: one platform, the real one; the runs emulate nothing. */
    struct tb_plugin_handle *held = NULL;
    char plat_name[128] = "", plat_why[2048] = "";
    if (pc.cuda) {
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
        o.platforms[0] = plat_name;
        o.nplat = 1;
        pc.plat_name = plat_name;
        printf("bench/lms: quickstart G-SCNN (width 0.125, shape_width 0.5, blocks 1,1,1,1,1,1), batch %d of "
               "synthetic images, cuda backend on %s (%.1f GiB usable); device memory capped at %.0f%% of each "
               "size's footprint; the real link, platform %s (%s); per run the median step of %d after %d "
               "warm-up steps; per case the median round of %d, its parts its own\n",
               o.batch, info.name, (double)info.capacity / (1u << 30), o.cap_fraction * 100, plat_name, plat_why,
               o.steps, TB_STEPTIME_WARMUP, o.rounds);
    } else {
        o.platforms[0] = platforms[0];
        o.platforms[1] = platforms[1];
        o.nplat = NPLAT;
        printf("bench/lms: quickstart G-SCNN (width 0.125, shape_width 0.5, blocks 1,1,1,1,1,1), batch %d of "
               "synthetic images, cpu backend%s; device memory capped at %.0f%% of each size's footprint; link "
               "emulated per platform; per run the median step of %d after %d warm-up steps; per case the median "
               "round of %d, its parts its own\n",
               o.batch, o.threads ? "" : " (all cores)", o.cap_fraction * 100, o.steps, TB_STEPTIME_WARMUP,
               o.rounds);
    }
    o.progress = progress;
    o.progress_arg = &pc;

    struct tb_lms_result *r = malloc(sizeof *r);
    struct tb_err err;
    tb_err_clear(&err);
    if (!r || tb_lms_measure(&o, r, &err)) {
        fprintf(stderr, "bench/lms: %s\n", r ? err.msg : "out of memory");
        tb_lms_result_free(r);
        tb_plugin_close(held);
        return 1;
    }

    if (pc.cuda) {
        /* The study's figures where the real platform is one of its machines. */
        printf("\noverhead on the real link beside the study (sizes: %dx%d as its 600x600, %dx%d as its 700x700; "
               "this network's balance, not the reference's):\n",
               o.sizes[0], o.sizes[0], o.sizes[1], o.sizes[1]);
        printf("  %-14s %5s %10s %10s %10s %10s %8s\n", "platform", "size", "IBM LMS", "lru", "prefetch", "hybrid",
               "target");
        for (int z = 0; z < 2; z++) {
            char cell[TB_LMS_NPOL][32], lms[32] = "-", tgt[48] = "-";
            for (int q = 0; q < TB_LMS_NPOL; q++)
                if (pc.summary[z][0][0][q] < -99)
                    snprintf(cell[q], sizeof cell[q], "failed");
                else
                    snprintf(cell[q], sizeof cell[q], "%.0f%%", pc.summary[z][0][0][q]);
            const double pub = tb_lms_published(plat_name, z);
            if (pub >= 0) {
                const bool nvlink = strcmp(plat_name, "power9-nvlink") == 0 || strcmp(plat_name, "ac922") == 0;
                const double v = pc.summary[z][0][0][TB_LMS_PREFETCH], t = target[nvlink ? 0 : 1];
                snprintf(lms, sizeof lms, "%.0f%%", pub);
                snprintf(tgt, sizeof tgt, "<= %.0f%%%s", t, v > -99 && v <= t ? " met" : " not met");
            }
            printf("  %-14s %5d %10s %10s %10s %10s %8s\n", plat_name, o.sizes[z], lms, cell[0], cell[1], cell[2], tgt);
        }
        tb_lms_result_free(r);
        tb_plugin_close(held);
        return 0;
    }

    printf("\noverhead beside the study (sizes: %dx%d as its 600x600, %dx%d as its 700x700; control: prefetch with "
           "copies free, target <= 3%%):\n",
           o.sizes[0], o.sizes[0], o.sizes[1], o.sizes[1]);
    printf("  %-14s %5s %10s %14s %14s %16s %8s %14s %14s %20s %20s %14s\n", "platform", "size", "IBM LMS",
           "lru (as is)", "lru (ref bal.)", "prefetch (ref)", "target", "control", "hybrid (ref)", "hybrid-prefetch",
           "prefetch A/A", "hybrid target");
    for (int p = 0; p < NPLAT; p++)
        for (int z = 0; z < 2; z++) {
            char cell[5][32];
            const double v[5] = { pc.summary[z][TB_LMS_AS_IS][p][TB_LMS_LRU], pc.summary[z][TB_LMS_REF][p][TB_LMS_LRU],
                                  pc.summary[z][TB_LMS_REF][p][TB_LMS_PREFETCH],
                                  pc.summary[z][TB_LMS_CONTROL][p][TB_LMS_PREFETCH],
                                  pc.summary[z][TB_LMS_REF][p][TB_LMS_HYBRID] };
            for (int c = 0; c < 5; c++)
                if (v[c] < -99)
                    snprintf(cell[c], sizeof cell[c], "failed");
                else
                    snprintf(cell[c], sizeof cell[c], "%.1f%%%s", v[c], c != 3 ? "" : v[c] <= 3 ? " met" : " not met");
            /* The hybrid target: no worse than prefetch, round by round (the median
             * of the paired differences), and within hybrid_bound where prefetch is not. */
            const struct tb_lms_case *h = &r->sizes[z].cases[TB_LMS_REF][p][TB_LMS_HYBRID];
            const struct tb_lms_case *pf = &r->sizes[z].cases[TB_LMS_REF][p][TB_LMS_PREFETCH];
            char diff[40] = "-", aa[40] = "-";
            if (v[4] > -99 && v[2] > -99 && h->paired)
                snprintf(diff, sizeof diff, "%+.1f (%+.0f..%+.0f)", h->vs_prefetch, h->vs_lo, h->vs_hi);
            if (v[2] > -99 && pf->repeated)
                snprintf(aa, sizeof aa, "%+.1f (%+.0f..%+.0f)", pf->aa, pf->aa_lo, pf->aa_hi);
            const bool hybrid_met = tb_lms_hybrid_met(h, pf, hybrid_bound[p]);
            printf("  %-14s %5d %9.0f%% %14s %14s %16s %6s%.0f%%%s %14s %14s %20s %20s %14s\n", platforms[p],
                   o.sizes[z], tb_lms_published(platforms[p], z), cell[0], cell[1], cell[2], "<= ", target[p],
                   v[2] > -99 && v[2] <= target[p] ? " met" : " not met", cell[3], cell[4], diff, aa,
                   hybrid_met ? "met" : "not met");
        }
    printf("  (hybrid-prefetch: hybrid's overhead less prefetch's in the same round, in points, the median over the "
           "rounds (min..max); prefetch runs just before hybrid and again just after, and hybrid's pair is the mean "
           "of the two. prefetch A/A: its second run less its first, the same way: how far apart one plan lands. "
           "hybrid target: the hybrid-prefetch median at most 0, and on x86-pcie hybrid at most 10%% where "
           "prefetch is above that)\n");
    tb_lms_result_free(r);
    return 0;
}
