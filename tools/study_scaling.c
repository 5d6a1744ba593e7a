/* tools/study_scaling.c: the study's fifth benchmark: data-parallel scaling from 1 to N,
 * measured here over ranks and modelled beyond for the study's GPU nodes, beside the
 * scaling studies' 1.8x, 3.3x and 4.9x on 2, 4 and 8 nodes of 4 V100s.
 *
 * Measured: the configuration's network on synthetic images, weak scaling (every rank
 * takes the same batch per step), `mpirun -np R trainbig train` for each R of the scale,
 * two epochs, the second timed (from its row of epochs.jsonl). On the cpu backend the
 * ranks split this machine's cores, so the "speedup" here measures the overhead of data
 * parallelism (gradient all-reduce, synchronised batch norm), not scaling.
 *
 * Modelled, as bench/scaling models it: a ring all-reduce of the gradients, 2(N-1)/N x
 * gradient bytes / bw + 2(N-1) x latency x buckets, over the ring's slowest hop, with the
 * platforms' figures (gpus_per_node, peer_gbps, peer_latency_us, net_gbps, net_latency_us;
 * plugins/platforms/platform.c gives their sources): within an AC922 the X-bus between its
 * sockets, within a PCIe node (dgx-station's) PCIe 3.0, between nodes InfiniBand EDR. A GPU's step is the measured 1-rank step x f (this
 * CPU's convolution rate over the platform preset's accelerator, achieved: the V100's
 * accel_tflops x accel_efficiency, as the header reports them). Without overlap a step is compute +
 * all-reduce; with it, compute + what the all-reduce leaves after backward (2/3 of the
 * step). speedup(M nodes) = M x T(1 node) / T(M nodes). */
#include "config.h"

#include "tools/study_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/config/ini.h"
#include "core/config/setup.h"
#include "core/train/run.h"
#include "tools/figure_internal.h"
#include "tools/steptime_internal.h"

extern char **environ;

enum { PER_RANK_BATCH = 2, MAX_NODES = 8 };

struct point {
    int ranks, batch, threads;
    double step_s, ips, ar_s, wait_s;
    uint64_t params;
};

/* The configuration for R ranks, written (effective, as `trainbig config` prints it) to
 * ini: synthetic images of the configuration's training size, weak scaling, 2 epochs. */
static int write_ini(struct tb_study *s, int ranks, int threads, const char *name, const char *ini, int side,
                     struct tb_err *err)
{
    const struct tb_study_request *rq = s->rq;
    struct tb_config *cfg = NULL;
    int rc = tb_config_load(rq->config, &cfg, err);
    for (int i = 0; !rc && i < rq->nsets; i++)
        rc = tb_config_set(cfg, rq->sets[i], err);
    if (!rc)
        rc = tb_config_switch_plugin(cfg, TB_SEC_DATASET, "synthetic", err);
    char a[10][300];
    snprintf(a[0], sizeof a[0], "run.output=%s/runs", s->dir);
    snprintf(a[1], sizeof a[1], "run.name=%s", name);
    snprintf(a[2], sizeof a[2], "run.epochs=2");
    snprintf(a[3], sizeof a[3], "train.batch=%d", ranks * PER_RANK_BATCH);
    snprintf(a[4], sizeof a[4], "dataset.width=%d", side);
    snprintf(a[5], sizeof a[5], "dataset.height=%d", side);
    snprintf(a[6], sizeof a[6], "dataset.train_count=%d", s->sz->scaling_steps * ranks * PER_RANK_BATCH);
    snprintf(a[7], sizeof a[7], "train.val_every=0");
    snprintf(a[8], sizeof a[8], "train.checkpoint_every=0");
    snprintf(a[9], sizeof a[9], "backend.threads=%d", threads);
    for (int i = 0; !rc && i < 10; i++)
        rc = tb_config_set(cfg, a[i], err);
    if (!rc)
        rc = tb_config_set(cfg, "report.progress=no", err);
    struct tb_setup *setup = NULL;
    if (!rc)
        rc = tb_setup_resolve(cfg, &setup, err);
    if (!rc) {
        FILE *f = fopen(ini, "w");
        if (!f)
            rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: %s", ini, strerror(errno));
        else {
            tb_setup_print(setup, f);
            if (fclose(f) != 0)
                rc = tb_err_set(err, TB_ERR_RUNTIME, "%s: %s", ini, strerror(errno));
        }
    }
    tb_setup_free(setup);
    tb_config_free(cfg);
    return rc;
}

/* The last line of a file holding `what`, into buf ("" if none). */
static void find_line(const char *path, const char *what, char *buf, size_t size)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char *line = NULL;
    size_t n = 0;
    while (getline(&line, &n, f) > 0)
        if (strstr(line, what))
            snprintf(buf, size, "%s", line);
    free(line);
    fclose(f);
}

static int measure(struct tb_study *s, int ranks, bool mpi, int side, struct point *pt, struct tb_err *err)
{
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const int threads = cores / ranks > 1 ? (int)(cores / ranks) : 1;
    char name[64], ini[4300], log[4300], rundir[4300], jsonl[4400];
    struct stat st;
    for (int i = 1;; i++) {
        snprintf(name, sizeof name, "scaling-r%d-%d", ranks, i);
        snprintf(rundir, sizeof rundir, "%s/runs/%s", s->dir, name);
        if (stat(rundir, &st) != 0)
            break;
    }
    snprintf(ini, sizeof ini, "%s/runs/%s.ini", s->dir, name);
    snprintf(log, sizeof log, "%s/runs/%s.log", s->dir, name);
    char runs[4300];
    snprintf(runs, sizeof runs, "%s/runs", s->dir);
    mkdir(runs, 0777);
    int rc = write_ini(s, ranks, threads, name, ini, side, err);
    if (rc)
        return rc;
    char np[16];
    snprintf(np, sizeof np, "%d", ranks);
    const char *argv[16];
    int n = 0;
    if (mpi) {
        argv[n++] = "mpirun";
        if (geteuid() == 0)
            argv[n++] = "--allow-run-as-root";
        argv[n++] = "--oversubscribe";
        argv[n++] = "-np";
        argv[n++] = np;
    }
    argv[n++] = s->rq->self;
    argv[n++] = "train";
    argv[n++] = ini;
    argv[n] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    const int e = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e)
        return tb_err_set(err, TB_ERR_RUNTIME, "cannot run %s: %s", argv[0], strerror(e));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return tb_err_set(err, TB_ERR_RUNTIME, "%d rank%s: `%s%s train %s` failed (exit %d); its output: %s", ranks,
                          ranks > 1 ? "s" : "", mpi ? "mpirun -np R " : "", s->rq->self, ini,
                          WIFEXITED(status) ? WEXITSTATUS(status) : -1, log);
    char row[8192];
    snprintf(jsonl, sizeof jsonl, "%s/epochs.jsonl", rundir);
    find_line(jsonl, "\"epoch\":2,", row, sizeof row);
    if (!row[0])
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: no second epoch", jsonl);
    const double steps = tb_study_json_number(row, "steps");
    pt->ranks = ranks;
    pt->batch = ranks * PER_RANK_BATCH;
    pt->threads = threads;
    pt->step_s = tb_study_json_number(row, "seconds") / steps;
    pt->ips = tb_study_json_number(row, "images_per_s");
    pt->ar_s = tb_study_json_number(row, "allreduce_seconds") / steps;
    pt->wait_s = tb_study_json_number(row, "allreduce_wait_seconds") / steps;
    if (isnan(pt->ar_s))
        pt->ar_s = 0;
    if (isnan(pt->wait_s))
        pt->wait_s = 0;
    if (!steps || isnan(pt->step_s))
        return tb_err_set(err, TB_ERR_RUNTIME, "%s: no step time in the second epoch's row", jsonl);
    return TB_OK;
}

/* The model's step on n GPUs (one node, or n / per_node nodes) of a node class: a platform's
 * GPUs together (struct tb_accel). */
struct link_class {
    const char *name;
    int platform; /* tb_study_platforms[platform] */
    struct tb_accel a;
};

/* The GPUs together of platform `name` (its [platform] keys, with the user's assignments). */
static int platform_ring(struct tb_study *s, const char *name, struct tb_accel *a, struct tb_err *err)
{
    char plat[64];
    snprintf(plat, sizeof plat, "platform.plugin=%s", name);
    const int n = s->rq->nsets + 1;
    const char **all = malloc((size_t)n * sizeof *all);
    if (!all)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    for (int i = 0; i < s->rq->nsets; i++)
        all[i] = s->rq->sets[i];
    all[s->rq->nsets] = plat;
    struct tb_link link, given;
    int rc = tb_step_link(s->rq->config, all, n, &link, &given, a, err);
    free(all);
    if (rc)
        return tb_err_prefix(err, "the GPUs of %s", name);
    if (a->per_node < 1 || a->peer_bytes_per_s <= 0 || a->net_bytes_per_s <= 0)
        return tb_err_set(err, TB_ERR_CONFIG,
                          "platform '%s' does not say how its GPUs talk (gpus_per_node, peer_gbps, net_gbps): "
                          "the scaling model needs them",
                          name);
    return TB_OK;
}

static double allreduce_s(int n, double grad_bytes, double gbps, double latency_s)
{
    if (n <= 1)
        return 0;
    const double first = 1048576.0, bucket = 25 * 1048576.0; /* core/dist/gradsync.c's buckets */
    const double buckets = grad_bytes <= first ? 1 : 1 + ceil((grad_bytes - first) / bucket);
    return 2.0 * (n - 1) / n * grad_bytes / (gbps * 1e9) + 2.0 * (n - 1) * latency_s * buckets;
}

static double model_step(double t, int gpus, double grad_bytes, const struct link_class *node, bool overlap)
{
    double bw, latency;
    tb_accel_ring_hop(&node->a, gpus, &bw, &latency);
    const double ar = allreduce_s(gpus, grad_bytes, bw / 1e9, latency);
    return overlap ? t + fmax(0, ar - t * 2.0 / 3.0) : t + ar;
}

/* On sim: a step of `gpus` modelled GPUs of platform `name` ([backend] sim_ranks), weak
 * scaling (2 images per GPU), its gradients all-reduced in the engine's own buckets as
 * backward queues them. */
static int engine_step(struct tb_study *s, const char *name, int gpus, int side, double *step_s, struct tb_err *err)
{
    char plat[64], ranks[64], batch[64], count[64], w[64], h[64];
    snprintf(plat, sizeof plat, "platform.plugin=%s", name);
    snprintf(ranks, sizeof ranks, "backend.sim_ranks=%d", gpus);
    snprintf(batch, sizeof batch, "train.batch=%d", PER_RANK_BATCH * gpus); /* all GPUs' together */
    snprintf(count, sizeof count, "dataset.train_count=%d", PER_RANK_BATCH * gpus);
    snprintf(w, sizeof w, "dataset.width=%d", side);
    snprintf(h, sizeof h, "dataset.height=%d", side);
    const char *extra[] = { "dataset.plugin=synthetic", "dataset.crop=0", w, h, count, batch, plat, ranks };
    const int nextra = (int)(sizeof extra / sizeof extra[0]), n = s->rq->nsets + nextra;
    const char **all = malloc((size_t)n * sizeof *all);
    if (!all)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    for (int i = 0; i < s->rq->nsets; i++)
        all[i] = s->rq->sets[i];
    memcpy(all + s->rq->nsets, extra, sizeof extra);
    struct tb_step_timing t;
    int rc = tb_time_steps(s->rq->config, all, n, 1, &t, err);
    free(all);
    if (rc)
        return tb_err_prefix(err, "%d modelled GPUs of %s", gpus, name);
    *step_s = t.step_s;
    return TB_OK;
}

/* On sim, each node class's speedup over one node by the engine (sp[c][m] for 1, 2, 4, 8
 * nodes), and its table. */
static int engine_scaling(struct tb_study *s, const struct link_class *classes, int side, double sp[2][4],
                          struct tb_err *err)
{
    static const int nodes[4] = { 1, 2, 4, 8 };
    FILE *md = s->md;
    fprintf(md, "\nPredicted by the engine itself: the same step on N modelled GPUs (`[backend] sim_ranks = N`, %d "
                "images per GPU), each gradient bucket all-reduced in a ring on the platform's links as backward "
                "finishes it, beside the rest of backward; %s\n\n| node | GPU | ms per step, 1 GPU | 1 node | "
                "2 nodes | 4 nodes | 8 nodes |\n|---|---|---|---|---|---|---|\n",
            PER_RANK_BATCH,
            s->sync_bn ? "batch norm synchronised over the GPUs (`[model] sync_bn = yes`): each one's sums all-reduced "
                         "in the same ring on the compute stream, the op waiting for them."
                       : "batch norm per GPU (`[model] sync_bn = no`): no collective in forward.");
    for (int c = 0; c < 2; c++) {
        const char *name = tb_study_platforms[classes[c].platform];
        const int per_node = classes[c].a.per_node;
        double one, node1 = 0;
        int rc = engine_step(s, name, 1, side, &one, err);
        for (int m = 0; !rc && m < 4; m++) {
            s->frac = 0.5 + 0.5 * (c * 4 + m) / 8.0;
            tb_study_progress(s, "%s, %d modelled GPUs", name, per_node * nodes[m]);
            double t;
            rc = engine_step(s, name, per_node * nodes[m], side, &t, err);
            if (!rc && m == 0)
                node1 = t;
            if (!rc)
                sp[c][m] = nodes[m] * node1 / t;
        }
        if (rc)
            return rc;
        fprintf(md, "| %s, the engine (sim_ranks) | %s | %.1f | %.2fx | %.2fx | %.2fx | %.2fx |\n", classes[c].name,
                classes[c].a.name[0] ? classes[c].a.name : "?", one * 1e3, sp[c][0], sp[c][1], sp[c][2], sp[c][3]);
    }
    fprintf(md, "| the scaling studies (published) | | | 1x | 1.8x | 3.3x | 4.9x |\n");
    return TB_OK;
}

int tb_study_scaling(struct tb_study *s, struct tb_err *err)
{
    const struct tb_study_sizes *sz = s->sz;
    const int side = sz->lms_sizes[0];
    /* mpirun where it is; 1 rank runs without it */
    const bool mpi = system("command -v mpirun >/dev/null 2>&1") == 0;
    struct point pts[4];
    memset(pts, 0, sizeof pts);
    int npts = 0;
    /* On sim no ranks run: one modelled GPU's step feeds the model below. */
    const bool sim = strcmp(s->backend, "sim") == 0;
    for (int i = 0; i < sz->nranks && !sim; i++) {
        const int r = sz->ranks[i];
        if (r > 1 && !mpi)
            break;
        s->frac = (double)i / sz->nranks;
        tb_study_progress(s, "%d rank%s (weak scaling, %d images per rank and step)", r, r > 1 ? "s" : "",
                          PER_RANK_BATCH);
        int rc = measure(s, r, mpi && r > 1, side, &pts[npts], err);
        if (rc)
            return rc;
        npts++;
    }
    /* The gradients' size: the trainable parameters of the network, from one step. */
    char w[64], h[64];
    snprintf(w, sizeof w, "dataset.width=%d", side);
    snprintf(h, sizeof h, "dataset.height=%d", side);
    const char *extra[] = { "dataset.plugin=synthetic", "dataset.crop=0", w, h, "train.batch=2" };
    const int nall = s->rq->nsets + 5;
    const char **all = malloc((size_t)nall * sizeof *all);
    if (!all)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    for (int i = 0; i < s->rq->nsets; i++)
        all[i] = s->rq->sets[i];
    memcpy(all + s->rq->nsets, extra, sizeof extra);
    struct tb_step_timing one;
    int prc = tb_time_steps(s->rq->config, all, nall, 1, &one, err);
    free(all);
    if (prc)
        return tb_err_prefix(err, "the network's parameters");
    pts[0].params = one.params;
    if (sim) {
        pts[0].step_s = one.step_s;
        pts[0].batch = 2;
    }
    struct link_class classes[2] = {
        { "AC922 (NVLink; X-bus between sockets)", 0, { .per_node = 0 } },
        { "DGX Station / p3.8xlarge (PCIe 3.0)", 1, { .per_node = 0 } },
    };
    for (int c = 0; c < 2; c++) {
        int rc = platform_ring(s, tb_study_platforms[classes[c].platform], &classes[c].a, err);
        if (rc)
            return rc;
    }
    /* A GPU's step: on the cpu backend the measured step x f of the node's platform (this
     * CPU's convolution rate over its accelerator's, achieved: the header's); on a GPU the
     * measured step itself. */
    const bool cpu = strcmp(s->backend, "cpu") == 0;
    const double cpu_rate = s->cpu_gflops * 1e9, grad_bytes = 4.0 * pts[0].params;
    double t1[2], f[2];
    for (int c = 0; c < 2; c++) {
        const double accel = s->accel_gflops[classes[c].platform] * 1e9;
        f[c] = !cpu ? 1 : cpu_rate > 0 && accel > 0 ? cpu_rate / accel : NAN;
        t1[c] = pts[0].step_s * f[c];
    }

    FILE *md = s->md;
    fprintf(md, "## 5. Scaling 1 -> N\n\n");
    if (!sim)
        fprintf(md,
                "Measured here: the configuration's network on synthetic %dx%d images, weak scaling (%d images per "
                "rank and step), `%strainbig train`, the second of two epochs (%d steps) timed. The ranks split this "
                "machine's %ld cores, so the speedup here is the overhead of data parallelism, not scaling.%s\n\n",
                side, side, PER_RANK_BATCH, mpi ? "mpirun -np R " : "", sz->scaling_steps,
                sysconf(_SC_NPROCESSORS_ONLN), mpi ? "" : " (No mpirun on the PATH: one rank only.)");
    if (sim)
        fprintf(md, "**Predicted.** On the sim backend no ranks run: the first table takes one modelled GPU's step "
                    "(batch 2 of %dx%d) into the ring model below; the second runs the engine on N modelled GPUs "
                    "(`[backend] sim_ranks`).\n\n",
                side, side);
    else
        fprintf(md, "| ranks | batch | threads per rank | ms per step | images/s | speedup | all-reduce ms per step "
                    "(busy / exposed) |\n|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < npts; i++)
        fprintf(md, "| %d | %d | %d | %.1f | %.2f | %.2fx | %.2f / %.2f |\n", pts[i].ranks, pts[i].batch,
                pts[i].threads, pts[i].step_s * 1e3, pts[i].ips, pts[i].ips / pts[0].ips, pts[i].ar_s * 1e3,
                pts[i].wait_s * 1e3);
    static const int nodes[4] = { 1, 2, 4, 8 };
    static const double published[4] = { 1, 1.8, 3.3, 4.9 };
    double sp[2][2][4];
    for (int c = 0; c < 2; c++)
        for (int o = 0; o < 2; o++) {
            const int per_node = classes[c].a.per_node;
            const double node1 = model_step(t1[c], per_node, grad_bytes, &classes[c], o);
            for (int m = 0; m < 4; m++)
                sp[c][o][m] =
                    nodes[m] * node1 / model_step(t1[c], per_node * nodes[m], grad_bytes, &classes[c], o);
        }
    if (cpu)
        fprintf(md,
                "\nModelled for the study's nodes of %d GPUs: a GPU's step = the 1-rank step here x f = %.1f ms x "
                "%.3g = %.2f ms on %s's accelerator (f: this CPU's convolution rate, %.1f GFLOP/s, over its "
                "achieved %.0f GFLOP/s, the platform's accel_tflops x accel_efficiency)",
                classes[0].a.per_node, pts[0].step_s * 1e3, f[0], t1[0] * 1e3, tb_study_platforms[classes[0].platform],
                cpu_rate / 1e9, s->accel_gflops[classes[0].platform]);
    else
        fprintf(md,
                "\nModelled for the study's nodes of %d GPUs: a GPU's step = the 1-rank step measured here, %.2f ms",
                classes[0].a.per_node, t1[0] * 1e3);
    for (int c = 1; c < 2; c++)
        if (t1[c] != t1[0])
            fprintf(md, "; %.2f ms on %s's", t1[c] * 1e3, tb_study_platforms[classes[c].platform]);
    fprintf(md, "; gradients %.1f MB (%llu parameters); a ring all-reduce over the slowest hop (", grad_bytes / 1e6,
            (unsigned long long)pts[0].params);
    for (int c = 0; c < 2; c++) {
        const struct tb_accel *a = &classes[c].a;
        fprintf(md, "%s%s: %d GPUs per node, %.3g GB/s and %.3g us per step within a node, %.3g GB/s and %.3g us between",
                c ? "; " : "", tb_study_platforms[classes[c].platform], a->per_node, a->peer_bytes_per_s / 1e9,
                a->peer_latency_s * 1e6, a->net_bytes_per_s / 1e9, a->net_latency_s * 1e6);
    }
    fprintf(md, ": the platforms' gpus_per_node, peer_gbps, peer_latency_us, net_gbps and net_latency_us); overlap: with "
                "backward (2/3 of the step).\n\n");
    fprintf(md, "| node | overlap | 1 node | 2 nodes | 4 nodes | 8 nodes |\n|---|---|---|---|---|---|\n");
    for (int c = 0; c < 2; c++)
        for (int o = 1; o >= 0; o--)
            fprintf(md, "| %s | %s | %.2fx | %.2fx | %.2fx | %.2fx |\n", classes[c].name, o ? "yes" : "no", sp[c][o][0],
                    sp[c][o][1], sp[c][o][2], sp[c][o][3]);
    fprintf(md, "| the scaling studies (published) | | 1x | 1.8x | 3.3x | 4.9x |\n");
    double eng[2][4];
    if (sim) {
        int rc = engine_scaling(s, classes, side, eng, err);
        if (rc)
            return rc;
    }

    double x[4], ser[7][4];
    for (int m = 0; m < 4; m++) {
        x[m] = nodes[m];
        ser[0][m] = sp[0][1][m];
        ser[1][m] = sp[0][0][m];
        ser[2][m] = sp[1][1][m];
        ser[3][m] = sp[1][0][m];
        ser[4][m] = published[m];
        ser[5][m] = sim ? eng[0][m] : 0;
        ser[6][m] = sim ? eng[1][m] : 0;
    }
    const struct tb_fig_series series[] = {
        { "AC922 model, overlap", ser[0], 4 },        { "AC922 model, no overlap", ser[1], 4 },
        { "PCIe node model, overlap", ser[2], 4 },    { "PCIe node model, no overlap", ser[3], 4 },
        { "scaling studies (published)", ser[4], 4 }, { "AC922, the engine on sim", ser[5], 4 },
        { "PCIe node, the engine on sim", ser[6], 4 },
    };
    const struct tb_fig_panel panel = {
        .ylabel = "speedup over 1 node", .series = series, .nseries = sim ? 7 : 5, .from_zero = true
    };
    const struct tb_fig_lines fig = {
        .title = "Scaling over nodes of 4 V100s: the model beside the scaling studies",
        .xlabel = "nodes",
        .x = x,
        .n = 4,
        .integer_x = true,
        .panels = &panel,
        .npanels = 1,
    };
    char *base = tb_study_path(s, "scaling");
    int rc = base ? tb_fig_lines(base, &fig, err) : tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    free(base);
    return tb_study_figure(s, "scaling", "scaling", rc);
}
