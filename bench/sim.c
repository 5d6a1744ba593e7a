/* bench/sim: how well the sim backend predicts, each prediction printed beside what it
 * predicts.
 *
 * 1. Against this machine's cpu backend (bench/lms's cases): the quickstart G-SCNN at one
 *    size, an uncapped step traced on the cpu backend calibrates the sim ([backend]
 *    sim_profile = that trace; again in each round, so that the machine's drift between
 *    rounds falls on both sides); then the step with device memory capped at --cap of its
 *    footprint, on the link of power9-nvlink and of x86-pcie as the cpu backend emulates
 *    it (emulate_link, at the step's own convolution rate as bench/lms sets it), under
 *    lru, prefetch and hybrid, is measured (the median of --rounds runs, each against an
 *    uncapped step of its own round) and predicted by the sim on the same link as the
 *    copies really have it (measured with pinned copies each way, both at once and a chain
 *    of small ones for each copy's fixed cost: tb_step_link_measured; beside it, the sim's step on the link as the
 *    platform describes it, emulated, to show what the measurement is worth). The sim is
 *    capped so that its
 *    tensors have the room the cpu's had: the cpu's cap less what the cpu holds beside
 *    the tensors (its ops' scratch, which the sim does not model: the two uncapped peaks'
 *    difference). Errors: the step time's, in % of the measured; the overhead's, in
 *    points, against the measured overhead's stall and recomputation, which the sim
 *    models; the rest of the measured overhead (the ops' own slowdown: on the CPU, copies
 *    taking cores and memory bandwidth from the ops, which a GPU's copy engines do not;
 *    and the bookkeeping between ops) is printed beside, left out by design.
 * 2. Against a GPU (--backend cuda, on a machine with one): the same, on its real link,
 *    measured, and the platform `plugin = auto` chooses there (--platform NAME names
 *    another), whose description of the link is shown beside.
 * 3. Against the paper ("Training Big on Images"): the reference G-SCNN at 600x600 and
 *    700x700, batch 2 per GPU (the study's 8 over four V100s), on the ac922, dgx-station
 *    and p3.8xlarge presets, capped at --cap of its footprint, the overhead of lru (and
 *    prefetch, hybrid) beside IBM LMS's published overhead; and whether batch 16 at
 *    800x800 and batch 8 at 700x700 over four 16 GB V100s (4 and 2 per GPU) fit with no
 *    swapping (the study: the first ran out of memory, the second fit), beside the device
 *    memory trainbig's step needs. Every figure of this part is the sim's: predicted.
 *
 *   bench/sim [--backend cpu|cuda] [--platform NAME] [--size N] [--batch B] [--steps N]
 *             [--rounds R] [--cap FRACTION] [--link-scale K] [--threads T] [--skip-paper]
 *             [--skip-device]
 *   --link-scale K: the cpu backend's emulated links K times faster (bench/lms's second
 *   case, at the reference G-SCNN's balance where K is its k)
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH_NO_PEAK /* built without OpenMP: the backend helpers only */
#include "benchutil.h"
#include "tools/steptime_internal.h"

enum { NPOL = 3, MAX_ROUNDS = 9, MAX_SETS = 40, NPAPER = 3 };
/* The copies that measure a real device's link: large enough that a copy's fixed cost is
 * under 1% of it on PCIe 5 (64 MiB at 50 GB/s: 1.3 ms). */
#define LINK_PROBE_BYTES ((size_t)64 << 20)

static const char *const policies[NPOL] = { "lru", "prefetch", "hybrid" };
static const char *const cpu_platforms[] = { "power9-nvlink", "x86-pcie" };
static const char *const paper_platforms[NPAPER] = { "ac922", "dgx-station", "p3.8xlarge" };
/* "Training Big on Images": G-SCNN, batch 8 over four V100s, IBM LMS's overhead (%). */
static const double paper_lms[NPAPER][2] = { { 43, 30 }, { 106, 73 }, { 105, 91 } };

struct opts {
    const char *backend, *platform;
    int size, batch, steps, rounds, threads;
    double cap, link_scale;
    bool paper, device;
};

/* One run's assignments: fixed strings and formatted ones (kept in buf). */
struct sets {
    const char *v[MAX_SETS];
    char buf[MAX_SETS][4200];
    int n;
};

static void set(struct sets *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set(struct sets *s, const char *fmt, ...)
{
    if (s->n == MAX_SETS)
        abort(); /* the fixed sets below stay under it: a bug here */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->buf[s->n], sizeof s->buf[0], fmt, ap);
    va_end(ap);
    s->v[s->n] = s->buf[s->n];
    s->n++;
}

/* The quickstart network (or the reference's: the gscnn defaults) on synthetic images. */
static void network(struct sets *s, bool reference, int size, int batch)
{
    s->n = 0;
    set(s, "model.plugin=gscnn");
    if (!reference) {
        set(s, "model.width=0.125");
        set(s, "model.shape_width=0.5");
        set(s, "model.blocks=1,1,1,1,1,1");
    }
    set(s, "dataset.plugin=synthetic");
    set(s, "dataset.crop=0");
    set(s, "dataset.width=%d", size);
    set(s, "dataset.height=%d", size);
    set(s, "train.batch=%d", batch);
}

static void measured_backend(struct sets *s, const struct opts *o)
{
    set(s, "backend.plugin=%s", o->backend);
    if (strcmp(o->backend, "cpu") == 0)
        set(s, "backend.threads=%d", o->threads);
}

/* The quickstart network on platform `plat` (NULL: auto), measured on o's backend; with
 * emulate_gflops > 0 the cpu backend emulating the platform's link at that convolution
 * rate (and o's link_scale). */
static void measured_network(struct sets *s, const struct opts *o, const char *plat, double emulate_gflops)
{
    network(s, false, o->size, o->batch);
    measured_backend(s, o);
    if (plat)
        set(s, "platform.plugin=%s", plat);
    if (emulate_gflops > 0) {
        set(s, "backend.emulate_link=yes");
        set(s, "backend.link_scale=%.6g", o->link_scale);
        set(s, "backend.compute_gflops=%.6g", emulate_gflops);
    }
}

/* The same network for the sim (sim_backend() says how it plays the measured backend). */
static void sim_network(struct sets *s, const struct opts *o, const char *plat)
{
    network(s, false, o->size, o->batch);
    if (plat)
        set(s, "platform.plugin=%s", plat);
}

static int run(const struct sets *s, int steps, const char *trace, struct tb_step_timing *t, char *why,
               size_t why_size)
{
    struct tb_err err;
    tb_err_clear(&err);
    const int rc = trace ? tb_time_steps_traced(NULL, s->v, s->n, steps, trace, t, &err)
                         : tb_time_steps(NULL, s->v, s->n, steps, t, &err);
    if (rc && why && why_size) { /* the first why_size - 1 bytes of the message */
        const size_t n = strnlen(err.msg, why_size - 1);
        memcpy(why, err.msg, n);
        why[n] = '\0';
    }
    return rc;
}

/* This machine's copy rate (bytes read and written per second by memcpy over 64 MiB, the
 * best of the copies of a quarter of a second: the first in a process ran at 20 GB/s where
 * the later ones ran at 34): what the sim's memory-bound work not in the profile (fills,
 * the SGD update, moves inside the device) runs at when it plays this CPU. */
static double copy_rate(void)
{
    const size_t n = (size_t)64 << 20;
    char *a = malloc(n), *b = malloc(n);
    double best = 0;
    if (a && b) {
        memset(a, 1, n);
        memset(b, 2, n);
        const double start = bench_now();
        for (int r = 0; r < 5 || bench_now() - start < 0.25; r++) {
            const double t0 = bench_now();
            memcpy(b, a, n);
            const double dt = bench_now() - t0;
            if (dt > 0 && 2.0 * (double)n / dt > best)
                best = 2.0 * (double)n / dt;
        }
    }
    free(a);
    free(b);
    return best > 0 ? best : 10e9;
}

/* The sim playing the measured backend: its per-op times from `trace`; for the cpu
 * backend (mem_rate > 0) its memory-bound rest at mem_rate and a host that waits for each
 * op, as the cpu backend's ops run on the calling thread (a GPU's host runs ahead, and
 * sees copies finish later: on the cpu it freed swapped blocks sooner, and the sim playing
 * a GPU's host made room where the cpu had it); its link `link` (what the measured run's
 * copies had); its memory `cap` bytes (0: the platform's accelerator's). */
static void sim_backend(struct sets *s, const char *trace, double mem_rate, const struct tb_link *link, double cap)
{
    set(s, "backend.plugin=sim");
    set(s, "backend.sim_profile=%s", trace);
    if (mem_rate > 0) {
        set(s, "backend.host_waits=yes");
        /* the model's memory share of 0.8 (sim_model.c) applies to this: give it back */
        set(s, "platform.accel_mem_gbps=%.6g", mem_rate / 0.8 / 1e9);
    }
    if (link) {
        set(s, "platform.h2d_gbps=%.6g", link->h2d_bytes_per_s / 1e9);
        set(s, "platform.d2h_gbps=%.6g", link->d2h_bytes_per_s / 1e9);
        set(s, "platform.duplex_gbps=%.6g", link->duplex_bytes_per_s / 1e9);
        set(s, "platform.latency_us=%.6g", link->latency_s * 1e6);
    }
    if (cap > 0)
        set(s, "backend.device_memory=%.0f", cap);
}

/* ------------------------------------------------------------------ 1, 2: measured */

struct measured_case {
    bool failed;
    char why[200];
    double step_s, over, modelled, rest; /* the median round's; % of its round's uncapped step */
    double lo, hi;
    double moved; /* MiB swapped out and in per step */
    bool sim_failed;
    char sim_why[200];
    double sim_step_s, sim_over, sim_moved;
    double sim_described_s; /* the sim's step on the link as described (NAN: failed) */
};

/* One calibration: an uncapped step of the measured backend, its last timed step traced
 * into `trace`, and the sim calibrated from that trace (*su_ok: whether it ran). The trace
 * is one step, and a step a disturbance slowed makes every prediction from it as slow (a
 * traced step 30% above its run's median was seen): where the sim's ops then differ from
 * the measured median step's by more than CALIBRATION_SPREAD, the step is taken again, up
 * to CALIBRATION_TAKES times, keeping the closest; *retakes counts the extra takes. */
enum { CALIBRATION_TAKES = 3 };
#define CALIBRATION_SPREAD 0.05

static int calibrate(const struct opts *o, const char *plat, const char *trace, double mem_rate,
                     struct tb_step_timing *u, struct tb_step_timing *su, bool *su_ok, int *retakes, char *why,
                     size_t why_size)
{
    struct sets s;
    double best = INFINITY;
    char kept[] = "/tmp/trainbig-bench-sim-kept-XXXXXX";
    const int fd = mkstemp(kept);
    if (fd < 0)
        return snprintf(why, why_size, "a temporary file for the trace: cannot make one"), 1;
    close(fd);
    int rc = 0;
    for (int take = 0; take < CALIBRATION_TAKES; take++) {
        struct tb_step_timing mu, ms;
        measured_network(&s, o, plat, 0);
        if ((rc = run(&s, o->steps, trace, &mu, why, why_size)))
            break;
        sim_network(&s, o, plat);
        sim_backend(&s, trace, mem_rate, NULL, 0);
        char sim_why[sizeof ((struct measured_case *)0)->sim_why] = "";
        const bool ok = run(&s, o->steps, NULL, &ms, sim_why, sizeof sim_why) == 0;
        const double off = ok && mu.ops_s > 0 ? fabs(ms.ops_s / mu.ops_s - 1) : INFINITY;
        if (take == 0 || off < best) {
            best = off;
            *u = mu;
            *su = ms;
            *su_ok = ok;
            if (!ok) /* the sim's refusal, for a caller that cannot go on without it */
                snprintf(why, why_size, "%s", sim_why);
            if (rename(trace, kept) != 0) { /* keep this take's trace */
                rc = 1;
                snprintf(why, why_size, "cannot keep the trace %s", trace);
                break;
            }
        }
        if (off <= CALIBRATION_SPREAD)
            break;
        ++*retakes;
    }
    if (!rc && rename(kept, trace) != 0) {
        rc = 1;
        snprintf(why, why_size, "cannot keep the trace %s", kept);
    }
    unlink(kept);
    return rc;
}

static int against_backend(const struct opts *o)
{
    const bool cuda = strcmp(o->backend, "cuda") == 0;
    char trace[] = "/tmp/trainbig-bench-sim-XXXXXX";
    const int fd = mkstemp(trace);
    if (fd < 0) {
        perror("bench/sim: a temporary file for the trace");
        return 1;
    }
    close(fd);
    double mem_rate = cuda ? 0 : copy_rate();
    struct sets s;
    struct tb_step_timing base, simbase;
    char why[2048] = "";

    /* The calibration: one uncapped step, traced. */
    int retakes = 0;
    bool simbase_ok;
    if (calibrate(o, o->platform, trace, mem_rate, &base, &simbase, &simbase_ok, &retakes, why, sizeof why) ||
        !simbase_ok) {
        fprintf(stderr, "bench/sim: the uncapped %s step%s: %s\n", o->backend, simbase_ok ? "" : " on the sim", why);
        unlink(trace);
        return 1;
    }
    const double rate = base.conv_flops / base.step_s;
    printf("\n%d. the sim against the %s backend: quickstart G-SCNN, batch %d of %dx%d; calibrated from an uncapped "
           "step's trace (each round's own); device memory capped at %.0f%% of the footprint; %d rounds\n",
           cuda ? 2 : 1, o->backend, o->batch, o->size, o->size, 100 * o->cap, o->rounds);
    if (o->link_scale != 1)
        printf("  the emulated links %.4g times faster ([backend] link_scale; bench/lms's k gives the quickstart the "
               "reference G-SCNN's compute per byte)\n",
               o->link_scale);
    if (!cuda)
        printf("  this CPU: convolutions at %.2f GFLOP/s in the step (the emulated link follows it), memcpy %.1f GB/s "
               "(the sim's memory-bound work beside the profile's ops)\n",
               rate / 1e9, mem_rate / 1e9);
    printf("  uncapped step: measured %.1f ms (ops %.1f ms), sim %.1f ms (ops %.1f ms): %+.1f%%; peak device memory "
           "measured %.1f MiB, sim %.1f MiB (with the op scratch the trace names)\n",
           base.step_s * 1e3, base.ops_s * 1e3, simbase.step_s * 1e3, simbase.ops_s * 1e3,
           100 * (simbase.step_s / base.step_s - 1), (double)base.peak / 1048576, (double)simbase.peak / 1048576);
    const double cap = floor(o->cap * (double)base.peak);
    const int nplat = cuda ? 1 : 2;
    struct measured_case c[2][NPOL];
    memset(c, 0, sizeof c);
    double worst_step = 0, worst_over = 0;
    for (int p = 0; p < nplat; p++) {
        const char *plat = cuda ? o->platform : cpu_platforms[p];
        /* What the measured runs' copies see, measured (the sim plays that), and the link as
         * described: the platform's on a GPU, what the cpu backend makes of it when it
         * emulates it (each copy's fixed cost and rate before the copy threads' own). */
        struct tb_link link, described, given;
        const double emulate_gflops = cuda ? 0 : rate / 1e9;
        measured_network(&s, o, plat, emulate_gflops);
        struct tb_err err;
        tb_err_clear(&err);
        if (tb_step_link_measured(NULL, s.v, s.n, LINK_PROBE_BYTES, &link, &given, &err) ||
            tb_step_link(NULL, s.v, s.n, &described, &given, NULL, &err)) {
            fprintf(stderr, "bench/sim: the link of %s: %s\n", plat ? plat : "the platform", err.msg);
            unlink(trace);
            return 1;
        }
        double over[NPOL][MAX_ROUNDS], modelled[NPOL][MAX_ROUNDS], rest[NPOL][MAX_ROUNDS], step[NPOL][MAX_ROUNDS],
            moved[NPOL][MAX_ROUNDS], sim_step[NPOL][MAX_ROUNDS], sim_over[NPOL][MAX_ROUNDS],
            sim_moved[NPOL][MAX_ROUNDS], sim_described[NPOL][MAX_ROUNDS];
        bool sim_ok[NPOL][MAX_ROUNDS];
        int ok[NPOL] = { 0 };
        for (int r = 0; r < o->rounds; r++) {
            /* Each round calibrates the sim again from its own uncapped step, so that a
             * drift of this machine between rounds falls on both sides of the comparison;
             * the copy rate is a property of the machine: the best seen so far. */
            if (!cuda)
                mem_rate = fmax(mem_rate, copy_rate());
            struct tb_step_timing u, su;
            bool su_ok;
            if (calibrate(o, plat, trace, mem_rate, &u, &su, &su_ok, &retakes, why, sizeof why)) {
                fprintf(stderr, "bench/sim: an uncapped step: %s\n", why);
                unlink(trace);
                return 1;
            }
            for (int q = 0; q < NPOL; q++) {
                struct tb_step_timing t, st;
                measured_network(&s, o, plat, emulate_gflops);
                set(&s, "backend.device_memory=%.0f", cap);
                set(&s, "swap.plugin=%s", policies[q]);
                if (run(&s, o->steps, NULL, &t, c[p][q].why, sizeof c[p][q].why)) {
                    c[p][q].failed = true;
                    continue;
                }
                const int k = ok[q]++;
                step[q][k] = t.step_s;
                over[q][k] = 100 * (t.step_s / u.step_s - 1);
                modelled[q][k] = 100 * (t.stall_s + t.recompute_s) / u.step_s;
                rest[q][k] = over[q][k] - modelled[q][k];
                moved[q][k] = (t.out_bytes + t.in_bytes) / 1048576;
                /* the prediction: the sim on the same link, with the room the cpu had */
                sim_network(&s, o, plat);
                const double room = cap - ((double)u.peak - (double)(su_ok ? su.peak : simbase.peak));
                sim_backend(&s, trace, mem_rate, &link, room);
                set(&s, "swap.plugin=%s", policies[q]);
                sim_ok[q][k] = su_ok && run(&s, o->steps, NULL, &st, c[p][q].sim_why, sizeof c[p][q].sim_why) == 0;
                if (sim_ok[q][k]) {
                    sim_step[q][k] = st.step_s;
                    sim_over[q][k] = 100 * (st.step_s / su.step_s - 1);
                    sim_moved[q][k] = (st.out_bytes + st.in_bytes) / 1048576;
                }
                /* the same on the link as described, to show what measuring it gives */
                sim_network(&s, o, plat);
                sim_backend(&s, trace, mem_rate, &described, room);
                set(&s, "swap.plugin=%s", policies[q]);
                sim_described[q][k] = sim_ok[q][k] && run(&s, o->steps, NULL, &st, NULL, 0) == 0 ? st.step_s : NAN;
            }
        }
        for (int q = 0; q < NPOL; q++) {
            struct measured_case *m = &c[p][q];
            if (ok[q] == 0)
                continue;
            m->failed = false;
            /* the median round by overhead, its parts and its prediction its own */
            int idx[MAX_ROUNDS];
            for (int i = 0; i < ok[q]; i++)
                idx[i] = i;
            for (int i = 1; i < ok[q]; i++)
                for (int j = i; j > 0 && over[q][idx[j]] < over[q][idx[j - 1]]; j--) {
                    const int x = idx[j];
                    idx[j] = idx[j - 1];
                    idx[j - 1] = x;
                }
            const int mid = idx[(ok[q] - 1) / 2];
            m->step_s = step[q][mid];
            m->over = over[q][mid];
            m->modelled = modelled[q][mid];
            m->rest = rest[q][mid];
            m->moved = moved[q][mid];
            m->lo = over[q][idx[0]];
            m->hi = over[q][idx[ok[q] - 1]];
            m->sim_failed = !sim_ok[q][mid];
            if (!m->sim_failed) {
                m->sim_step_s = sim_step[q][mid];
                m->sim_over = sim_over[q][mid];
                m->sim_moved = sim_moved[q][mid];
                m->sim_described_s = sim_described[q][mid];
            }
        }
        printf("  %s: the link as the copies had it, measured (pinned %d MiB copies; 4 KiB copies back to back for "
               "the fixed cost): %.3g GB/s host to device, %.3g back, %.3g each way at once, %.0f us per copy; as "
               "described%s: %.3g / %.3g / %.3g GB/s, %.0f us\n",
               plat ? plat : "the platform", (int)(LINK_PROBE_BYTES >> 20), link.h2d_bytes_per_s / 1e9,
               link.d2h_bytes_per_s / 1e9, link.duplex_bytes_per_s / 1e9, link.latency_s * 1e6,
               cuda ? " by the platform" : " (the platform's, emulated)", described.h2d_bytes_per_s / 1e9,
               described.d2h_bytes_per_s / 1e9, described.duplex_bytes_per_s / 1e9, described.latency_s * 1e6);
        printf("    %-9s %12s %22s %18s %18s %10s %12s %12s %10s %12s %14s\n", "policy", "step (ms)",
               "overhead (min..max)", "stall+recompute", "left out (ops..)", "moved MiB", "sim step", "sim overhead",
               "sim moved", "step error", "overhead error");
        for (int q = 0; q < NPOL; q++) {
            const struct measured_case *m = &c[p][q];
            if (m->failed) {
                printf("    %-9s failed: %s\n", policies[q], m->why);
                continue;
            }
            char range[48];
            snprintf(range, sizeof range, "%.1f%% (%.0f..%.0f)", m->over, m->lo, m->hi);
            if (m->sim_failed) {
                printf("    %-9s %12.1f %22s %17.1f%% %17.1f%% sim failed: %s\n", policies[q], m->step_s * 1e3, range,
                       m->modelled, m->rest, m->sim_why);
                continue;
            }
            const double step_err = 100 * (m->sim_step_s / m->step_s - 1), over_err = m->sim_over - m->modelled;
            worst_step = fmax(worst_step, fabs(step_err));
            worst_over = fmax(worst_over, fabs(over_err));
            printf("    %-9s %12.1f %22s %17.1f%% %17.1f%% %10.0f %12.1f %11.1f%% %10.0f %+11.1f%% %+13.1f pt\n",
                   policies[q], m->step_s * 1e3, range, m->modelled, m->rest, m->moved, m->sim_step_s * 1e3,
                   m->sim_over, m->sim_moved, step_err, over_err);
        }
        printf("    the sim on the link as described instead of measured: step error");
        for (int q = 0; q < NPOL; q++) {
            const struct measured_case *m = &c[p][q];
            if (m->failed || m->sim_failed || isnan(m->sim_described_s))
                printf(" %s -", policies[q]);
            else
                printf(" %s %+.1f%%", policies[q], 100 * (m->sim_described_s / m->step_s - 1));
        }
        printf("\n");
    }
    printf("  worst errors: step %.1f%% (target 10%%), overhead %.1f points against the stall and recomputation "
           "(target 5); calibrating steps taken again: %d (the sim's ops more than %.0f%% off the measured median "
           "step's)\n",
           worst_step, worst_over, retakes, 100 * CALIBRATION_SPREAD);
    unlink(trace);
    return 0;
}

/* ------------------------------------------------------------------ 3: the paper */

static int against_paper(const struct opts *o)
{
    static const int sides[2] = { 600, 700 };
    printf("\n3. the sim against the paper: the reference G-SCNN (137 M parameters), batch 2 per GPU (the study's 8 "
           "over four 16 GB V100s), device memory capped at %.0f%% of the footprint; predicted by the op-time model "
           "(sim_model.c's table, no calibration)\n",
           100 * o->cap);
    printf("  %-12s %5s %12s %12s %10s %10s %10s %10s %16s\n", "platform", "size", "step (s)", "footprint", "IBM LMS",
           "lru", "prefetch", "hybrid", "every tensor");
    struct sets s;
    char why[2048];
    double lru[NPAPER][2];
    for (int p = 0; p < NPAPER; p++)
        for (int z = 0; z < 2; z++) {
            struct tb_step_timing u;
            network(&s, true, sides[z], 2);
            set(&s, "backend.plugin=sim");
            set(&s, "platform.plugin=%s", paper_platforms[p]);
            lru[p][z] = NAN;
            if (run(&s, o->steps, NULL, &u, why, sizeof why)) {
                printf("  %-12s %5d uncapped step failed: %s\n", paper_platforms[p], sides[z], why);
                continue;
            }
            char cell[NPOL][48];
            for (int q = 0; q < NPOL; q++) {
                struct tb_step_timing t;
                network(&s, true, sides[z], 2);
                set(&s, "backend.plugin=sim");
                set(&s, "platform.plugin=%s", paper_platforms[p]);
                set(&s, "backend.device_memory=%.0f", floor(o->cap * (double)u.peak));
                set(&s, "swap.plugin=%s", policies[q]);
                if (run(&s, o->steps, NULL, &t, why, sizeof why)) {
                    snprintf(cell[q], sizeof cell[q], "failed");
                    continue;
                }
                const double over = 100 * (t.step_s / u.step_s - 1);
                if (q == 0)
                    lru[p][z] = over;
                snprintf(cell[q], sizeof cell[q], "%.0f%%", over);
            }
            char lms[16];
            snprintf(lms, sizeof lms, "%.0f%%", paper_lms[p][z]);
            /* What swapping every activation and gradient out and back once would cost where
             * none of it hid behind compute: both directions at the link's duplex rate. */
            struct tb_link link, given;
            struct tb_err lerr;
            tb_err_clear(&lerr);
            char all[32] = "?";
            if (tb_step_link(NULL, s.v, s.n, &link, &given, NULL, &lerr) == 0 && given.duplex_bytes_per_s > 0)
                snprintf(all, sizeof all, "%.0f%%",
                         100 * u.transient_bytes / given.duplex_bytes_per_s / u.step_s);
            printf("  %-12s %5d %12.2f %8.2f GiB %10s %10s %10s %10s %16s\n", paper_platforms[p], sides[z], u.step_s,
                   (double)u.peak / 1073741824.0, lms, cell[0], cell[1], cell[2], all);
        }
    bool order = true, within = true;
    for (int z = 0; z < 2; z++) {
        order &= lru[0][z] < lru[1][z] && lru[0][z] < lru[2][z];
        for (int p = 0; p < NPAPER; p++)
            within &= fabs(lru[p][z] - paper_lms[p][z]) <= 15;
    }
    printf("  platform ordering (ac922 below dgx-station and p3.8xlarge) at both sizes: %s; every lru overhead "
           "within 15 points of IBM LMS's: %s\n",
           order ? "holds" : "does not hold", within ? "yes" : "no");
    printf("  (every tensor: each activation and gradient of the step swapped out and back once, none of it hidden "
           "behind compute, at the link's duplex rate, in %% of the uncapped step: what a policy that swaps "
           "everything above a size, as IBM LMS did, pays at most; lru moves only what the cap forces)\n");

    /* Whether the study's two batch x crop cells fit on a 16 GB V100 without swapping. */
    static const struct {
        int side, per_gpu;
        const char *study;
    } cells[2] = { { 800, 4, "out of memory" }, { 700, 2, "fit" } };
    printf("  fit on a 16 GB V100 (ac922's, no swapping):\n");
    for (int i = 0; i < 2; i++) {
        struct tb_step_timing t, need;
        network(&s, true, cells[i].side, cells[i].per_gpu);
        set(&s, "backend.plugin=sim");
        set(&s, "platform.plugin=ac922");
        const bool fits = run(&s, 1, NULL, &t, why, sizeof why) == 0;
        /* what the step needs: the same on a device too large to run out */
        network(&s, true, cells[i].side, cells[i].per_gpu);
        set(&s, "backend.plugin=sim");
        set(&s, "platform.plugin=ac922");
        set(&s, "backend.device_memory=1T");
        char needs[64] = "?";
        if (run(&s, 1, NULL, &need, NULL, 0) == 0)
            snprintf(needs, sizeof needs, "%.2f GiB", (double)need.peak / 1073741824.0);
        printf("    batch %d at %dx%d (%d per GPU): predicted %s (the step needs %s of the V100's modelled memory, "
               "ac922's accel_memory); the study: %s\n",
               4 * cells[i].per_gpu, cells[i].side, cells[i].side, cells[i].per_gpu, fits ? "fits" : "out of memory",
               needs, cells[i].study);
    }
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench/sim [--backend cpu|cuda] [--platform NAME] [--size N] [--batch B] [--steps N] "
                    "[--rounds R] [--cap FRACTION] [--link-scale K] [--threads T] [--skip-paper] [--skip-device]\n");
    return 2;
}

int main(int argc, char **argv)
{
    struct opts o = { .backend = "cpu", .size = 160, .batch = 8, .steps = 3, .rounds = 3, .threads = 0,
                      .cap = 0.6, .link_scale = 1, .paper = true, .device = true };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--backend") == 0 && next)
            o.backend = argv[++i];
        else if (strcmp(a, "--platform") == 0 && next)
            o.platform = argv[++i];
        else if (strcmp(a, "--size") == 0 && next)
            o.size = atoi(argv[++i]);
        else if (strcmp(a, "--batch") == 0 && next)
            o.batch = atoi(argv[++i]);
        else if (strcmp(a, "--steps") == 0 && next)
            o.steps = atoi(argv[++i]);
        else if (strcmp(a, "--rounds") == 0 && next)
            o.rounds = atoi(argv[++i]);
        else if (strcmp(a, "--cap") == 0 && next)
            o.cap = atof(argv[++i]);
        else if (strcmp(a, "--link-scale") == 0 && next)
            o.link_scale = atof(argv[++i]);
        else if (strcmp(a, "--threads") == 0 && next)
            o.threads = atoi(argv[++i]);
        else if (strcmp(a, "--skip-paper") == 0)
            o.paper = false;
        else if (strcmp(a, "--skip-device") == 0)
            o.device = false;
        else
            return usage();
    }
    const bool cuda = strcmp(o.backend, "cuda") == 0;
    if ((!cuda && strcmp(o.backend, "cpu") != 0) || o.size < 16 || o.batch < 1 || o.steps < 1 || o.rounds < 1 ||
        o.rounds > MAX_ROUNDS || !(o.cap > 0 && o.cap < 1) || o.threads < 0 || (o.platform && !cuda) ||
        !(o.link_scale >= 0.001 && o.link_scale <= 1000) || (cuda && o.link_scale != 1))
        return usage();
    setenv("TRAINBIG_LOG", "warn", 0);
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct tb_plugin_handle *held = cuda ? bench_backend_require("cuda") : NULL;
    printf("bench/sim: the sim backend's predictions beside measurements; per run the median step of %d after %d "
           "warm-up steps\n",
           o.steps, TB_STEPTIME_WARMUP);
    int rc = 0;
    if (o.device)
        rc |= against_backend(&o);
    if (!cuda)
        printf("\n2. the sim against a GPU: not run here (no GPU): bench/sim --backend cuda on a machine with one\n");
    if (o.paper && !rc)
        rc |= against_paper(&o);
    tb_plugin_close(held);
    return rc;
}
