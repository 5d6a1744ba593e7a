/* tools/study.c: `trainbig study CONFIG`: the "Training Big on Images" study's benchmarks
 * on one configuration, written as DIR/report.md with a figure (PNG and SVG) per
 * benchmark beside the study's published numbers. This file drives them: the scales'
 * sizes, the progress line, the report's header (the machine, the CPU's measured peak,
 * the emulation's factors, the configuration's hash) and its end. Each benchmark is its
 * own module and writes its section (study_internal.h).
 *
 * On the cpu backend every platform is emulated: copies run at the platform's link rates
 * slowed by f, this CPU's achieved convolution rate over the platform's accelerator's, so
 * the compute-to-transfer balance of the study's machines is kept (tools/lms.c says how).
 * report.md is written whole at the end (NAME.tmp.PID renamed), the figures as each
 * benchmark finishes. */
#include "config.h"

#include "tools/study_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <trainbig/clock.h>
#include <trainbig/version.h>
#include <unistd.h>

#include "core/config/ini.h"
#include "core/config/setup.h"
#include "core/train/run.h"
#include "tools/figure_internal.h"
#include "tools/lms_internal.h"
#include "tools/steptime_internal.h"

const char *const tb_study_platforms[TB_STUDY_NPLAT] = { "ac922", "dgx-station", "p3.8xlarge" };

#ifdef HAVE_PLPLOT

/* small: every benchmark on 2 CPU cores in about 15 minutes, sizes at which the
 * quickstart's network swaps; reference: the study's own sizes, for a GPU. */
static const struct tb_study_sizes scales[3] = {
    {
        .name = "small",
        .time_steps = 3,
        .time_cap = 0.6,
        .target_miou = 0.4,
        .batches = { 2, 4, 8, 16 }, /* batch norm trains on 2 images or more */
        .nbatch = 4,
        .crops = { 64, 96, 128, 160 },
        .ncrop = 4,
        .grid_memory = 96ull << 20,
        .lms_sizes = { 128, 160 },
        .lms_batch = 4,
        .lms_steps = 2,
        .lms_rounds = 2,
        .lms_cap = 0.6,
        .ranks = { 1, 2 },
        .nranks = 2,
        .scaling_steps = 8,
        .minutes = 15,
    },
    {
        .name = "reference",
        .time_steps = 5,
        .time_cap = 0.6,
        .target_miou = 0.6,
        .batches = { 2, 4, 8, 16 },
        .nbatch = 4,
        .crops = { 500, 600, 700, 800 },
        .ncrop = 4,
        .grid_memory = 16ull << 30, /* a V100's 16 GB, the study's */
        .lms_sizes = { 600, 700 },
        .lms_batch = 8,
        .lms_steps = 3,
        .lms_rounds = 3,
        .lms_cap = 0.6,
        .ranks = { 1, 2, 4 },
        .nranks = 3,
        .scaling_steps = 20,
        .minutes = 120,
    },
    {
        /* test: every benchmark in about a minute, to try the command and for the tests;
         * its numbers mean nothing */
        .name = "test",
        .time_steps = 1,
        .time_cap = 0.85, /* tiny networks: the weights are most of the footprint */
        .target_miou = 0.05,
        .batches = { 2, 4 },
        .nbatch = 2,
        .crops = { 32, 64 },
        .ncrop = 2,
        .grid_memory = 24ull << 20,
        .lms_sizes = { 64, 96 },
        .lms_batch = 2,
        .lms_steps = 1,
        .lms_rounds = 1,
        .lms_cap = 0.85,
        .ranks = { 1, 2 },
        .nranks = 2,
        .scaling_steps = 2,
        .minutes = 1.5,
    },
};

/* Each benchmark's expected share of the whole, for the time left (small scale, measured). */
static const double shares[TB_STUDY_COUNT + 1] = { 0, 0.25, 0.25, 0.33, 0.02, 0.15 };

static const char *const titles[TB_STUDY_COUNT + 1] = {
    "", "training time per platform", "use of LMS", "LMS overhead", "timeline of a step", "scaling 1 -> N",
};

void tb_study_progress(struct tb_study *s, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const double elapsed = tb_now() - s->t0;
    /* Left: what remains of the expected total, at the pace so far once there is one. */
    double total = 0;
    for (int b = 1; b <= TB_STUDY_COUNT; b++)
        if (!s->rq->only || (s->rq->only & (1u << b)))
            total += shares[b];
    const double done = s->share_done + shares[s->bench] * (s->frac < 1 ? s->frac : 1);
    const double left =
        done > 0.05 * total && elapsed > 10 ? elapsed / done * (total - done) : s->sz->minutes * 60 * (total - done);
    fprintf(stderr, "%sstudy [%d/%d] %s: %s (%d:%02d elapsed, about %.0f min left)%s", s->tty ? "\r\033[K" : "",
            s->ibench, s->nbench, titles[s->bench], what, (int)elapsed / 60, (int)elapsed % 60, left / 60 + 0.5,
            s->tty ? "" : "\n");
    fflush(stderr);
}

char *tb_study_path(const struct tb_study *s, const char *name)
{
    const size_t n = strlen(s->dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", s->dir, name);
    return p;
}

double tb_study_json_number(const char *line, const char *name)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\"", name);
    const char *p = strstr(line, pat);
    if (!p)
        return NAN;
    p += strlen(pat);
    p += strspn(p, " \t");
    return *p == ':' ? strtod(p + 1, NULL) : NAN;
}

int tb_study_figure(struct tb_study *s, const char *name, const char *alt, int rc)
{
    if (!rc)
        fprintf(s->md, "\n![%s](%s.png) ([SVG](%s.svg))\n", alt, name, name);
    return rc;
}

int tb_study_policy_bars(struct tb_study *s, const struct tb_study_bars *b, struct tb_err *err)
{
    const struct tb_fig_bar_series series[] = {
        { "lru (on demand)", b->lru, b->published, b->n },
        { "prefetch", b->prefetch, NULL, b->n },
        { "hybrid", b->hybrid, NULL, b->n },
    };
    const struct tb_fig_bars fig = {
        .title = b->title,
        .xlabel = b->xlabel,
        .ylabel = b->ylabel,
        .categories = b->categories,
        .ncategories = b->n,
        .series = series,
        .nseries = sizeof series / sizeof series[0],
        .value_decimals = b->decimals,
        .note = b->note,
    };
    char *base = tb_study_path(s, b->name);
    const int rc = base ? tb_fig_bars(base, &fig, err) : tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    free(base);
    return tb_study_figure(s, b->name, b->alt, rc);
}

/* The CPU's model from /proc/cpuinfo ("" when it says none). */
static void cpu_model(char *buf, size_t size)
{
    buf[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        const char *v = strchr(line, ':');
        if (v && (strncmp(line, "model name", 10) == 0 || strncmp(line, "cpu\t", 4) == 0)) {
            v++;
            while (*v == ' ' || *v == '\t')
                v++;
            snprintf(buf, size, "%.*s", (int)strcspn(v, "\n"), v);
            break;
        }
    }
    fclose(f);
}

static int make_dir(const char *dir, struct tb_err *err)
{
    if (mkdir(dir, 0777) == 0 || errno == EEXIST) {
        struct stat st;
        if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
            return TB_OK;
        return tb_err_set(err, TB_ERR_RUNTIME, "--out %s: not a directory", dir);
    }
    return tb_err_set(err, TB_ERR_RUNTIME, "--out %s: cannot create the directory: %s", dir, strerror(errno));
}

/* The header: what ran where, so that two reports can be compared. */
static int write_header(struct tb_study *s, struct tb_err *err)
{
    const struct tb_study_request *rq = s->rq;
    struct tb_config *cfg = NULL;
    struct tb_setup *setup = NULL;
    int rc = tb_config_load(rq->config, &cfg, err);
    for (int i = 0; !rc && i < rq->nsets; i++)
        rc = tb_config_set(cfg, rq->sets[i], err);
    if (!rc)
        rc = tb_setup_resolve(cfg, &setup, err);
    char *text = rc ? NULL : tb_run_config_text(setup);
    if (!rc && !text)
        rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    if (!rc) {
        const struct tb_setup_slot *be = &setup->slot[TB_SEC_BACKEND];
        const char *name = be->plugin->p->name;
        s->backend = strcmp(name, "cuda") == 0 ? "cuda" : strcmp(name, "sim") == 0 ? "sim" : "cpu";
        if (strcmp(s->backend, "sim") == 0)
            snprintf(s->sim_profile, sizeof s->sim_profile, "%s", tb_section_string(be->section, "sim_profile"));
        snprintf(s->policy, sizeof s->policy, "%s", setup->slot[TB_SEC_SWAP].plugin->p->name);
        s->target_miou = setup->settings.train.target_miou;
        s->sync_bn = setup->settings.sync_bn;
        for (const struct tb_key *k = be->plugin->p->keys; k && k->name; k++)
            if (strcmp(k->name, "device_memory") == 0)
                s->device_memory = tb_section_size(be->section, "device_memory");
    }
    if (rc) {
        tb_setup_free(setup);
        tb_config_free(cfg);
        return rc;
    }
    const uint64_t hash = tb_run_config_hash(text);
    char cpu[256], host[256] = "";
    cpu_model(cpu, sizeof cpu);
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
    FILE *md = s->md;
    fprintf(md, "# trainbig study: %s\n\n", rq->config);
    fprintf(md, "The \"Training Big on Images\" study's benchmarks (G-SCNN with large model support on an IBM AC922, "
                "an NVIDIA DGX Station and an AWS p3.8xlarge) run on this configuration, each beside the study's "
                "published numbers.\n\n");
    fprintf(md, "| | |\n|---|---|\n");
    fprintf(md, "| configuration | `%s`, hash `%016" PRIx64 "` (the checkpoints' config_hash)", rq->config, hash);
    for (int i = 0; i < rq->nsets; i++)
        fprintf(md, "%s`--set %s`", i ? ", " : "; ", rq->sets[i]);
    fprintf(md, " |\n");
    fprintf(md, "| scale | %s |\n", s->sz->name);
    fprintf(md, "| trainbig | %s (plugin ABI %d.%d) |\n", TB_VERSION, TB_ABI_MAJOR, TB_ABI_MINOR);
    fprintf(md, "| machine | %s: %s, %ld cores online |\n", host, cpu[0] ? cpu : "CPU model unknown",
            sysconf(_SC_NPROCESSORS_ONLN));
    const bool sim = strcmp(s->backend, "sim") == 0;
    char calib[4200] = "";
    if (sim && s->sim_profile[0])
        snprintf(calib, sizeof calib, "; calibrated by per-op times measured on a device ([backend] sim_profile = %s)",
                 s->sim_profile);
    else if (sim)
        snprintf(calib, sizeof calib, "; not calibrated (no [backend] sim_profile: every op time is the model's)");
    fprintf(md, "| backend | %s%s%s |\n", s->backend,
            strcmp(s->backend, "cpu") == 0 ? ": every platform emulated (its link and its accelerator's speed)"
            : sim ? ": every platform's GPU modelled on a virtual clock under the real engine and policies; **every "
                    "figure of this report is predicted**, by the op-time model of plugins/backends/sim/sim_model.c"
                  : ": the GPU's own link; platforms other than this machine's not emulated",
            calib);
    fprintf(md, "| date | %s |\n", date);

    /* The emulation's rates: this CPU's FMA peak and a convolution's rate as the cpu
     * backend measures them, each platform's accelerator, achieved. */
    if (strcmp(s->backend, "cpu") == 0) {
        double cpu_gflops = 0;
        for (int p = 0; p < TB_STUDY_NPLAT; p++) {
            char plat[64];
            snprintf(plat, sizeof plat, "platform.plugin=%s", tb_study_platforms[p]);
            /* This CPU's rate is measured once, for the first: the factors then differ by the
             * platforms alone, not by the drift of one measurement to the next. */
            char rate[64];
            snprintf(rate, sizeof rate, "backend.compute_gflops=%.6g", cpu_gflops);
            const char *extra[] = { "backend.plugin=cpu", "backend.emulate_link=yes", plat, rate };
            const int nextra = p > 0 ? 4 : 3, n = rq->nsets + nextra;
            const char **all = malloc((size_t)n * sizeof *all);
            if (!all) {
                rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
                break;
            }
            for (int i = 0; i < rq->nsets; i++)
                all[i] = rq->sets[i];
            memcpy(all + rq->nsets, extra, (size_t)nextra * sizeof *extra);
            struct tb_link emu, given;
            rc = tb_step_link(rq->config, all, n, &emu, &given, NULL, err);
            free(all);
            if (rc) {
                tb_err_prefix(err, "the emulated link of %s", tb_study_platforms[p]);
                break;
            }
            const double cpu_rate = emu.accel_flops * emu.accel_efficiency;
            const double accel = given.accel_flops * given.accel_efficiency;
            s->accel_gflops[p] = accel / 1e9;
            if (p == 0) {
                cpu_gflops = cpu_rate / 1e9;
                s->cpu_gflops = cpu_gflops;
                if (emu.accel_efficiency < 1)
                    fprintf(md,
                            "| this CPU | FMA peak %.0f GFLOP/s, measured by the cpu backend; a 3x3 64->64 "
                            "convolution %.1f GFLOP/s, %.0f%% of it |\n",
                            emu.accel_flops / 1e9, cpu_rate / 1e9, 100 * emu.accel_efficiency);
                else
                    fprintf(md,
                            "| this CPU | a 3x3 64->64 convolution %.1f GFLOP/s; its FMA peak measured no higher "
                            "(another program busy beside it?) |\n",
                            cpu_rate / 1e9);
            }
            fprintf(md,
                    "| %s | %.1f TFLOP/s x %.2f achieved; link %.0f GB/s each way (%.0f both ways), %.0f us per copy; "
                    "emulated: f = %.3g (this CPU's convolution rate over the accelerator's), copies at %.3g GB/s |\n",
                    tb_study_platforms[p], given.accel_flops / 1e12, given.accel_efficiency,
                    given.h2d_bytes_per_s / 1e9, given.duplex_bytes_per_s / 1e9, given.latency_s * 1e6,
                    cpu_rate / accel, emu.h2d_bytes_per_s / 1e9);
        }
    }
    for (int p = 0; sim && !rc && p < TB_STUDY_NPLAT; p++) {
        /* The modelled machines: each platform's link and accelerator as the sim takes them. */
        char plat[64];
        snprintf(plat, sizeof plat, "platform.plugin=%s", tb_study_platforms[p]);
        const int n = rq->nsets + 1;
        const char **all = malloc((size_t)n * sizeof *all);
        if (!all) {
            rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
            break;
        }
        for (int i = 0; i < rq->nsets; i++)
            all[i] = rq->sets[i];
        all[rq->nsets] = plat;
        struct tb_link link, given;
        rc = tb_step_link(rq->config, all, n, &link, &given, NULL, err);
        free(all);
        if (rc) {
            tb_err_prefix(err, "the link of %s", tb_study_platforms[p]);
            break;
        }
        fprintf(md,
                "| %s | modelled: %.1f TFLOP/s fp32 x %.2f on large convolutions; link %.0f GB/s each way (%.0f both "
                "ways), %.0f us per copy |\n",
                tb_study_platforms[p], given.accel_flops / 1e12, given.accel_efficiency, given.h2d_bytes_per_s / 1e9,
                given.duplex_bytes_per_s / 1e9, given.latency_s * 1e6);
    }
    fprintf(md, "\n");
    free(text);
    tb_setup_free(setup);
    tb_config_free(cfg);
    return rc;
}

int tb_study(const struct tb_study_request *rq, struct tb_err *err)
{
    struct tb_study s = {
        .rq = rq,
        .sz = &scales[rq->scale],
        .t0 = tb_now(),
        .tty = isatty(2),
    };
    int rc = make_dir(rq->out, err);
    if (rc)
        return rc;
    s.dir = (char *)rq->out;
    char *final = tb_study_path(&s, "report.md");
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", final ? final : "", (long)getpid());
    if (!final || !(s.md = fopen(tmp, "w"))) {
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot write the report: %s", final ? tmp : rq->out,
                        final ? strerror(errno) : "out of memory");
        free(final);
        return rc;
    }
    rc = write_header(&s, err);
    static int (*const run[TB_STUDY_COUNT + 1])(struct tb_study *, struct tb_err *) = {
        NULL, tb_study_time, tb_study_grid, tb_study_overhead, tb_study_timeline, tb_study_scaling,
    };
    for (int b = 1; b <= TB_STUDY_COUNT; b++)
        s.nbench += !rq->only || (rq->only & (1u << b));
    /* Each benchmark writes its section into memory, and report.md puts them in number
     * order. They run in another: 3 measures what 4 draws and 1 uses (the reference's
     * balance), the grid next, 5 last. A benchmark that fails is reported as failed and
     * the others still run: what was measured is kept; the study then ends with the
     * first failure's error. */
    static const int order[TB_STUDY_COUNT] = { 3, 4, 2, 1, 5 };
    char *section[TB_STUDY_COUNT + 1] = { NULL };
    size_t section_size[TB_STUDY_COUNT + 1] = { 0 };
    FILE *report = s.md;
    const bool header_failed = rc != 0;
    for (int i = 0; i < TB_STUDY_COUNT && !header_failed; i++) {
        const int b = order[i];
        if (rq->only && !(rq->only & (1u << b)))
            continue;
        if (!(s.md = open_memstream(&section[b], &section_size[b]))) {
            if (!rc)
                rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
            break;
        }
        s.bench = b;
        s.ibench++;
        s.frac = 0;
        tb_study_progress(&s, "starting");
        const double t = tb_now();
        struct tb_err berr;
        tb_err_clear(&berr);
        const int brc = run[b](&s, &berr);
        if (brc) {
            fprintf(s.md, "\n**Benchmark %d (%s) failed:** %s\n\n", b, titles[b], berr.msg);
            fprintf(stderr, "%strainbig: study, benchmark %d (%s) failed: %s\n", s.tty ? "\r\033[K" : "", b, titles[b],
                    berr.msg);
            if (!rc) {
                rc = brc;
                *err = berr;
                tb_err_prefix(err, "study, benchmark %d (%s)", b, titles[b]);
            }
        } else
            fprintf(s.md, "\n_(%.0f s)_\n\n", tb_now() - t);
        fclose(s.md);
        s.share_done += shares[b];
    }
    s.md = report;
    for (int b = 1; b <= TB_STUDY_COUNT; b++) {
        if (section[b])
            fwrite(section[b], 1, section_size[b], s.md);
        free(section[b]);
    }
    if (s.tty)
        fputs("\r\033[K", stderr);
    const double took = tb_now() - s.t0;
    if (!rc)
        fprintf(s.md, "---\nThe study took %d min %02d s.\n", (int)took / 60, (int)took % 60);
    errno = 0;
    const bool written = fflush(s.md) == 0 && !ferror(s.md);
    if (fclose(s.md) != 0 || !written) {
        if (!rc)
            rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot write the report: %s", tmp,
                            errno ? strerror(errno) : "write error");
    }
    /* The report is kept unless nothing was measured (the header failed). */
    if (!header_failed && rename(tmp, final) != 0 && !rc)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: cannot rename %s into place: %s", final, tmp, strerror(errno));
    if (header_failed)
        unlink(tmp);
    else
        fprintf(stdout, "study: %s written in %d min %02d s%s\n", final, (int)took / 60, (int)took % 60,
                rc ? " (a benchmark failed: see the report)" : "");
    free(final);
    tb_lms_result_free(s.lms);
    return rc;
}

#else /* built without PLplot */

int tb_study(const struct tb_study_request *rq, struct tb_err *err)
{
    (void)rq;
    return tb_err_set(err, TB_ERR_RUNTIME,
                      "this trainbig was built without PLplot, which draws the study's figures: "
                      "install libplplot-dev and plplot-driver-cairo, then configure and build "
                      "again");
}

#endif
