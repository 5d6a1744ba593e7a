/* bench/step: milliseconds per training step on the CPU backend of two networks, each
 * against the same network in PyTorch when /usr/bin/python3 has torch (same threads,
 * channels_last, run after trainbig's steps in the same run), with the ratio
 * "trainbig / pytorch" (target <= 0.90). A benchmark, not a test.
 *
 * resnet18 (bench/step_torch.py): a fixed ResNet-18-style segmentation network built here.
 * 7x7/2 stem conv 3->64, BN, ReLU, 3x3/2 max pool; 4 stages of 2 basic blocks, widths
 * 64/128/256/512 (stages 2-4 start with stride 2 and a 1x1/2 projection); a 1x1 conv to 19
 * classes; bilinear upsampling to the input size; cross-entropy. Batch 4, 3x224x224.
 *
 * gscnn (bench/gscnn_torch.py): the `gscnn` model plugin with the quickstart settings
 * (gscnn_quickstart below: [model] width 0.125, shape_width 0.5, blocks 1,1,1,1,1,1, the rest default; 19 classes,
 * ignore label 255; batch 8 of 128x128 images), trained on its four losses (seg, edge,
 * att, dual) and fed one batch of the `synthetic` dataset through the core's batch builder
 * (normalised image, Canny edges, labels, edge targets). The PyTorch twin is the same
 * network layer for layer; it is given trainbig's count of trainable parameters and
 * refuses to time a network whose count differs (both counts are printed). Before timing,
 * the first step's forward is run once more to hand the twin the parameters it started
 * from, its dropout ops and the step and op its Gumbel noise came from, its four losses and
 * its segmentation logits: the twin runs that step from the same weights with the same
 * dropout masks and noise and prints its four losses beside trainbig's, and the dual-task
 * regulariser alone on trainbig's logits (printed checks, not part of the timing; the
 * twin's timed steps then start from those weights).
 *
 * Both: SGD lr 0.005 (the quickstart's), momentum 0.9, weight decay 1e-4; 2 warm-up steps, then the median of
 * STEPS timed steps (forward, backward, SGD update). The convolutions' FLOPs (forward,
 * backward-data, backward-weights; no backward-data for a convolution whose input needs
 * no gradient) per step are shown against this machine's fp32 peak, measured in the run.
 *
 * --backend cuda times the same networks on the `cuda` backend (it must load and score above
 * 0 here), each step ending when the device has finished it, against the twin on the GPU
 * (cudnn.benchmark, TF32 off as the backend's default tf32 = no); throughput is shown in
 * TFLOP/s, against the GPU's fp32 peak where its name is in gpu_peaks[] below. --set
 * KEY=VALUE adds a [backend] key (conv_algo=heuristic, tf32=yes: the twin then allows TF32
 * too). --size reference times the reference G-SCNN of etc/gscnn-cityscapes.ini (width 1,
 * shape_width 1, blocks 3,3,6,3,1,1) on crops of 800 (--crop), batch 2 (--batch): meant
 * for a GPU. --no-torch skips the twin; --torch-format contiguous runs it in NCHW.
 *
 * --isa forces the cpu backend's path ([backend] isa, which caps oneDNN too) and runs the
 * twin on the same one (DNNL_MAX_CPU_ISA for its oneDNN, ATEN_CPU_CAPABILITY for its own
 * kernels, unless set already); the peak is then that path's (AVX2's FMA loop on an AVX-512
 * CPU). Under the ratio: one more step's time by op kind, each op's device time from events
 * recorded around it (on a GPU the host runs ahead of the work), the layout reorders per
 * step, and how each convolution runs (oneDNN's implementation per pass). --trace FILE
 * writes a Chrome trace of a step (the last network's), whose op events carry each op's
 * signature and device time: [backend] sim_profile = FILE calibrates the sim backend.
 *
 *   ./bench/step [--backend cpu|cuda] [--set KEY=VALUE]... [--model resnet18|gscnn]
 *                [--size quickstart|reference] [--batch B] [--crop N] [--no-torch] [--trace FILE]
 *                [--torch-format channels_last|contiguous] [--isa auto|avx512|avx2|scalar]
 *                [THREADS [STEPS]]
 *       (default: cpu, both networks, all cores, 10 timed steps) */
#include "config.h"

#include <math.h>
#include <stdint.h>

#include "benchutil.h"
#include "core/data/batch.h"
#include "core/engine/engine.h"
#include "core/train/inputs.h"

/* The optimizer of both networks. */
#define SGD_LR 0.005f
#define SGD_MOMENTUM 0.9f
#define SGD_WEIGHT_DECAY 1e-4f

/* resnet18 */
enum { BATCH = 4, SIDE = 224, CLASSES = 19 };

/* gscnn */
#define GSCNN_CLASSES 19 /* the synthetic dataset's (Cityscapes) classes */
#define GSCNN_IGNORE 255 /* ignore label */

struct gscnn_size {
    const char *width;       /* [model] width */
    const char *shape_width; /* [model] shape_width */
    const char *blocks;      /* [model] blocks, mod2..mod7 */
    int batch;               /* images per step */
    int side;                /* image height and width */
};

/* The quickstart settings (etc/quickstart.ini). */
static const struct gscnn_size gscnn_quickstart = { "0.125", "0.5", "1,1,1,1,1,1", 8, 128 };
/* The reference G-SCNN (etc/gscnn-cityscapes.ini's [model], the plugin's defaults) on its
 * crop of 800. Its batch of 16 is the whole of a multi-GPU step: here 2 by default, and
 * --batch to find what one GPU holds. */
static const struct gscnn_size gscnn_reference = { "1.0", "1.0", "3,3,6,3,1,1", 2, 800 };

/* fp32 peaks (non-tensor-core FMA, boost clock) of GPUs by a part of their CUDA device
 * name, from NVIDIA's datasheets; the first match counts, so the more specific names come
 * first. A GPU not listed gets TFLOP/s only. */
static const struct {
    const char *name_part, *what;
    double tflops;
} gpu_peaks[] = {
    { "H100 PCIe", "H100 PCIe", 51 }, /* "NVIDIA H100 PCIe" */
    { "H100 NVL", "H100 NVL", 60 },   /* "NVIDIA H100 NVL" */
    { "H100", "H100 SXM5", 67 },      /* "NVIDIA H100 80GB HBM3" */
    { "H200 NVL", "H200 NVL", 60 },   /* "NVIDIA H200 NVL" */
    { "H200", "H200 SXM", 67 },       /* "NVIDIA H200"; GH200's is the same 67 */
    { "A100", "A100", 19.5 },         /* SXM4 and PCIe alike */
    { "V100-PCIE", "V100 PCIe", 14 }, /* "Tesla V100-PCIE-32GB" */
    { "V100", "V100 SXM2", 15.7 },    /* "Tesla V100-SXM2-16GB" */
};

/* What a run times on and how. */
struct opts {
    bool cuda;            /* --backend cuda: sync the device around each step; TFLOP/s */
    int threads, steps;   /* CPU threads (the cpu backend's and PyTorch's), timed steps */
    double peak;          /* fp32 FLOP/s; 0 = not known (a GPU not in gpu_peaks[]) */
    bool torch;           /* run the PyTorch twin */
    char torch_args[256]; /* to both twins, after their own: " --device cuda --tf32" */
    struct gscnn_size size;
    const char *trace;    /* --trace FILE: a Chrome trace of one more step (the sim's calibration) */
};

static struct tb_node *conv_bn(struct tb_graph *g, const char *name, struct tb_node *x, int out, int k, int stride,
                               bool relu)
{
    char bn[64];
    snprintf(bn, sizeof bn, "%s_bn", name);
    x = tb_batchnorm(g, bn, tb_conv2d(g, name, x, out, k, stride, -1, 1, false));
    return relu ? tb_relu(g, x) : x;
}

static struct tb_node *basic_block(struct tb_graph *g, struct tb_node *x, int out, int stride)
{
    struct tb_node *y = conv_bn(g, "conv1", x, out, 3, stride, true);
    y = conv_bn(g, "conv2", y, out, 3, 1, false);
    struct tb_node *shortcut = x;
    if (stride != 1 || tb_node_desc(x).shape.c != out)
        shortcut = conv_bn(g, "downsample", x, out, 1, stride, false);
    return tb_relu(g, tb_add(g, y, shortcut));
}

static struct tb_graph *build_resnet18(void)
{
    struct tb_graph *g = tb_graph_new(true);
    struct tb_node *x = tb_input(g, "image", TB_F32, (struct tb_shape){ BATCH, 3, SIDE, SIDE });
    struct tb_node *labels = tb_input(g, "labels", TB_U8, (struct tb_shape){ BATCH, 1, SIDE, SIDE });
    x = conv_bn(g, "stem", x, 64, 7, 2, true);
    x = tb_maxpool(g, x, 3, 2, 1);
    static const int widths[4] = { 64, 128, 256, 512 };
    for (int s = 0; s < 4; s++)
        for (int blk = 0; blk < 2; blk++) {
            tb_graph_push_scope(g, "layer%d.%d", s + 1, blk);
            x = basic_block(g, x, widths[s], s > 0 && blk == 0 ? 2 : 1);
            tb_graph_pop_scope(g);
        }
    x = tb_conv2d(g, "classifier", x, CLASSES, 1, 1, 0, 1, true);
    x = tb_resize(g, x, SIDE, SIDE, false);
    tb_graph_loss(g, "ce", tb_softmax_ce(g, x, labels, NULL, 255, false), 1.0f);
    return g;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* 2 warm-up steps, then `steps` timed training steps (forward, backward, SGD); the median
 * ms in *median, the losses named in loss[] as of the last step in value[], and in
 * *nonfinite the first step (1-based, warm-up included) with a loss that is not finite, or
 * 0. */
static int time_steps(struct tb_engine *e, struct tb_exec *x, bool sync, int steps, int nloss, const char *const *loss,
                      float *value, double *median, int *nonfinite, struct tb_err *err)
{
    *nonfinite = 0;
    double *ms = calloc((size_t)steps, sizeof *ms);
    if (!ms)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    int rc = TB_OK;
    for (int i = -2; i < steps && !rc; i++) {
        /* A device runs the step's work after the calls have returned: the step ends
         * when the compute stream is idle. */
        if (sync)
            e->ops->stream_sync(e->ctx, e->device, TB_STREAM_COMPUTE);
        double t0 = bench_now();
        rc = tb_exec_forward(x, (uint64_t)(i + 2), err);
        if (!rc)
            rc = tb_exec_backward(x, err);
        if (!rc)
            rc = tb_sgd_step(e, SGD_LR, SGD_MOMENTUM, SGD_WEIGHT_DECAY, err);
        if (!rc && sync)
            rc = e->ops->stream_sync(e->ctx, e->device, TB_STREAM_COMPUTE);
        double dt = bench_now() - t0;
        for (int k = 0; k < nloss && !rc; k++) {
            rc = tb_exec_read(x, loss[k], &value[k], err);
            if (!rc && !isfinite(value[k]) && !*nonfinite)
                *nonfinite = i + 3;
        }
        if (i >= 0)
            ms[i] = dt * 1e3;
    }
    if (!rc) {
        qsort(ms, (size_t)steps, sizeof *ms, cmp_double);
        *median = ms[steps / 2];
    }
    free(ms);
    return rc;
}

/* The backend's reorder counters now (zero without them). */
static struct tb_reorder_stats reorders_now(const struct tb_engine *e)
{
    struct tb_reorder_stats r;
    memset(&r, 0, sizeof r);
    if (e->reorder_stats)
        e->reorder_stats(e->ctx, e->device, &r);
    return r;
}

/* One more training step, traced: each op's time on the device, from events recorded
 * around it (the host's clock runs ahead of a GPU's work), into sec[nsteps]; and with
 * --trace, that step's Chrome trace, whose op events carry their signatures ([backend]
 * sim_profile reads it). Nonzero when it failed (err says why). */
static int device_seconds(struct tb_engine *e, struct tb_exec *x, const struct opts *o, double *sec,
                          struct tb_err *err)
{
    for (int pass = 0; pass < (o->trace ? 2 : 1); pass++) {
        tb_exec_trace_begin(x);
        int rc = tb_exec_forward(x, 1000 + (uint64_t)pass, err);
        if (!rc)
            rc = tb_exec_backward(x, err);
        if (!rc)
            rc = tb_sgd_step(e, SGD_LR, SGD_MOMENTUM, SGD_WEIGHT_DECAY, err);
        if (!rc)
            rc = e->ops->stream_sync(e->ctx, e->device, TB_STREAM_COMPUTE);
        if (!rc && pass == 1) {
            if (!(rc = tb_exec_trace_write(x, o->trace, err)))
                printf("trainbig: a Chrome trace of one step written to %s (each op's device time and signature: "
                       "[backend] sim_profile = %s calibrates the sim backend with it)\n",
                       o->trace, o->trace);
            continue;
        }
        struct tb_trace_span *sp = NULL;
        size_t n = 0;
        if (!rc)
            rc = tb_exec_trace_spans(x, &sp, &n, err);
        const size_t nsteps = tb_schedule_steps(tb_exec_schedule(x));
        for (size_t k = 0; !rc && k < nsteps && k < n; k++)
            sec[k] = sp[k].dur; /* the first nsteps spans are the steps' ops, in order */
        free(sp);
        if (rc)
            return rc;
    }
    return TB_OK;
}

/* Where the last step's time went, by op kind (each op's device time, device_seconds);
 * the layout conversions per step since `before` over `runs` steps; and how the backend
 * runs the convolutions (each distinct description once, with its count). */
static void breakdown(struct tb_engine *e, struct tb_exec *x, const struct tb_reorder_stats *before, int runs,
                      const struct opts *o)
{
    const struct tb_schedule *sch = tb_exec_schedule(x);
    const size_t nsched = tb_schedule_steps(sch);
    double *sec = calloc(nsched ? nsched : 1, sizeof *sec);
    struct tb_err err;
    tb_err_clear(&err);
    if (!sec || device_seconds(e, x, o, sec, &err)) {
        printf("trainbig: no op breakdown: %s\n", sec ? err.msg : "out of memory");
        free(sec);
        return;
    }
    double by_kind[TB_OP_KIND_COUNT] = { 0 }, total = 0;
    enum { MAX_HOW = 16 };
    char how[MAX_HOW][320];
    int count[MAX_HOW] = { 0 }, nhow = 0;
    for (size_t i = 0; i < tb_schedule_steps(sch); i++) {
        bool backward;
        char line[320];
        const struct tb_op *op = tb_exec_step_op(x, i, &backward, line, sizeof line);
        by_kind[op->kind] += sec[i];
        total += sec[i];
        if (op->kind != TB_OP_CONV2D || backward || !line[0])
            continue;
        int k = 0;
        while (k < nhow && strcmp(how[k], line) != 0)
            k++;
        if (k == nhow && nhow < MAX_HOW)
            snprintf(how[nhow++], sizeof how[0], "%s", line);
        if (k < nhow)
            count[k]++;
    }
    printf("trainbig: one step by op kind, each op's device time (ms, forward + backward):");
    for (int kind = 1; kind < TB_OP_KIND_COUNT; kind++)
        if (by_kind[kind] > 0)
            printf(" %s %.1f (%.0f%%)", tb_op_kind_name((enum tb_op_kind)kind), by_kind[kind] * 1e3,
                   100.0 * by_kind[kind] / total);
    printf("\n");
    /* The five slowest steps, by name. */
    printf("trainbig: the slowest ops of that step (ms):");
    const size_t nsteps = tb_schedule_steps(sch);
    bool *shown = calloc(nsteps ? nsteps : 1, sizeof *shown);
    for (int k = 0; k < 5 && shown; k++) {
        size_t best = nsteps;
        for (size_t i = 0; i < nsteps; i++)
            if (!shown[i] && (best == nsteps || sec[i] > sec[best]))
                best = i;
        if (best == nsteps)
            break;
        shown[best] = true;
        printf("%s %s %.1f", k ? "," : "", tb_schedule_step_name(sch, best), sec[best] * 1e3);
    }
    free(shown);
    printf("\n");
    const struct tb_reorder_stats now = reorders_now(e);
    if (e->reorder_stats && runs > 0)
        printf("trainbig: layout reorders per step: activations %.1f (%.2f MiB), weights %.1f (%.2f MiB)\n",
               (double)(now.activations - before->activations) / runs,
               (double)(now.activation_bytes - before->activation_bytes) / runs / 1048576.0,
               (double)(now.weights - before->weights) / runs,
               (double)(now.weight_bytes - before->weight_bytes) / runs / 1048576.0);
    for (int k = 0; k < nhow; k++)
        printf("trainbig: %3d convolution%s %s\n", count[k], count[k] == 1 ? ": " : "s:", how[k]);
    free(sec);
}

/* Trainable parameters (elements) of the engine. */
static long long trainable_params(const struct tb_engine *e)
{
    long long n = 0;
    for (size_t i = 0; i < tb_engine_param_count(e); i++) {
        const struct tb_param *p = tb_engine_param_at(e, i);
        if (p->trainable)
            n += (long long)tb_shape_elems(p->value.desc.shape);
    }
    return n;
}

/* Runs `PYTHON SRCDIR/bench/SCRIPT ARGS`, PYTHON being $TB_PYTHON or /usr/bin/python3 (a
 * GPU machine's torch may live in another interpreter); its median ms per step, or -1 when
 * torch is not there or the script timed nothing. Lines other than the machine-readable
 * ones are shown; *params gets its 'torch-params' line (-1 without one) when not NULL. */
static double torch_ms(const char *srcdir, const char *script, const char *args, long long *params)
{
    if (params)
        *params = -1;
    const char *python = getenv("TB_PYTHON") && *getenv("TB_PYTHON") ? getenv("TB_PYTHON") : "/usr/bin/python3";
    if (access(python, X_OK) != 0)
        return -1;
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s %s/bench/%s %s 2>&1", python, srcdir, script, args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char line[512];
    double ms = -1;
    long long n;
    while (fgets(line, sizeof line, p)) {
        if (sscanf(line, "torch-ms-per-step %lf", &ms) == 1)
            continue;
        if (sscanf(line, "torch-params %lld", &n) == 1) {
            if (params)
                *params = n;
            continue;
        }
        printf("  (pytorch) %s", line);
    }
    pclose(p);
    return ms;
}

/* " = 41% of peak" for a rate, or "" where the peak is not known. */
static const char *of_peak(double rate, double peak, char *buf, size_t size)
{
    if (peak > 0)
        snprintf(buf, size, " = %.0f%% of peak", 100.0 * rate / peak);
    else
        buf[0] = 0;
    return buf;
}

/* The lines every network ends with: trainbig's time and convolution throughput, then
 * PyTorch's and the ratio (theirs <= 0: none, `why`, or not available). */
static void report(const struct opts *o, double ours, double theirs, const char *why, double flops, const char *losses,
                   int nonfinite, const char *memory)
{
    const double peak = o->peak;
    const int steps = o->steps;
    if (nonfinite)
        printf("trainbig: note: the losses are not finite from step %d of %d on (training diverged; those steps "
               "are timed too)\n",
               nonfinite, steps + 2);
    const char *no_torch =
        o->torch ? "not available ($TB_PYTHON or /usr/bin/python3 with torch)" : "not run (--no-torch)";
    if (o->cuda) {
        /* A GPU's rate reads better in TFLOP/s, and its peak may not be known. */
        char pct[64];
        printf("trainbig: %.1f ms per step (median of %d; %s), %.2f TFLOP/s in convolutions%s\n", ours, steps, losses,
               flops / (ours / 1e3) / 1e12, of_peak(flops / (ours / 1e3), peak, pct, sizeof pct));
        fputs(memory, stdout);
        if (theirs > 0)
            printf("pytorch:  %.1f ms per step, %.2f TFLOP/s%s\nratio trainbig / pytorch: %.2f (target <= 0.90)\n",
                   theirs, flops / (theirs / 1e3) / 1e12, of_peak(flops / (theirs / 1e3), peak, pct, sizeof pct),
                   ours / theirs);
        else
            printf("pytorch: %s; no ratio\n", why ? why : no_torch);
        return;
    }
    printf("trainbig: %.1f ms per step (median of %d; %s), %.0f GFLOP/s in convolutions = %.0f%% of peak\n", ours,
           steps, losses, flops / (ours / 1e3) / 1e9, 100.0 * flops / (ours / 1e3) / peak);
    if (theirs > 0)
        printf("pytorch:  %.1f ms per step, %.0f%% of peak\nratio trainbig / pytorch: %.2f (target <= 0.90)\n", theirs,
               100.0 * flops / (theirs / 1e3) / peak, ours / theirs);
    else
        printf("pytorch: %s; no ratio\n", why        ? why
                                          : o->torch ? "not available (/usr/bin/python3 with torch)"
                                                     : no_torch);
}

/* On a GPU, the line on the device memory trainbig's allocator held at most (what decides
 * the batch that fits); "" on the CPU. */
static void memory_line(const struct opts *o, struct bench_backend *b, char *buf, size_t size)
{
    buf[0] = 0;
    if (!o->cuda || !b->ops.backend->mem_stats)
        return;
    struct tb_mem_stats st;
    memset(&st, 0, sizeof st);
    b->ops.backend->mem_stats(b->ctx, 0, &st);
    snprintf(buf, size, "trainbig: device memory peak %.2f GiB of %.2f GiB usable\n", (double)st.peak / (1u << 30),
             (double)st.capacity / (1u << 30));
}

/* The error of a network that failed: on a GPU, out of memory says what to change. */
static void report_error(const struct opts *o, const char *net, int rc, const struct tb_err *err)
{
    fprintf(stderr, "bench: %s: %s\n", net, err->msg);
    if (o->cuda && rc == TB_ERR_NOMEM)
        fprintf(stderr, "bench: %s: out of device memory: try a smaller --batch or --crop\n", net);
}

static const char *srcdir(void)
{
    return getenv("TB_SRCDIR") ? getenv("TB_SRCDIR") : ".";
}

static int bench_resnet18(struct bench_backend *b, const struct opts *o)
{
    struct tb_err err;
    tb_err_clear(&err);
    struct tb_engine e;
    struct tb_graph *g = build_resnet18();
    struct tb_exec *x = NULL;
    int rc = tb_engine_init(&e, b->h->p, b->ctx, 0, 1, &err);
    if (rc) {
        fprintf(stderr, "bench: resnet18: %s\n", err.msg);
        tb_graph_free(g);
        return 1;
    }
    rc = tb_exec_create(&e, g, &x, &err);
    if (rc) {
        fprintf(stderr, "bench: resnet18: %s\n", err.msg);
        tb_engine_fini(&e);
        tb_graph_free(g);
        return 1;
    }
    size_t n = (size_t)BATCH * 3 * SIDE * SIDE;
    float *image = malloc(n * sizeof *image);
    uint8_t *labels = malloc((size_t)BATCH * SIDE * SIDE);
    if (!image || !labels) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    uint64_t s = 42;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        image[i] = (float)(s >> 40) / 16777216.0f - 0.5f;
    }
    for (size_t i = 0; i < (size_t)BATCH * SIDE * SIDE; i++)
        labels[i] = (uint8_t)((i / SIDE / 16 + i % SIDE / 16) % CLASSES);
    rc = tb_exec_set_input(x, "image", image, &err);
    if (!rc)
        rc = tb_exec_set_input(x, "labels", labels, &err);

    printf("\nbench/step: ResNet-18-style segmentation, batch %d, 3x%dx%d, %d classes, SGD momentum\n", BATCH, SIDE,
           SIDE, CLASSES);
    static const char *const loss_name[1] = { "ce" };
    float loss = 0;
    double ours = 0;
    int nonfinite = 0;
    const struct tb_reorder_stats before = reorders_now(&e);
    if (!rc)
        rc = time_steps(&e, x, o->cuda, o->steps, 1, loss_name, &loss, &ours, &nonfinite, &err);
    if (rc) {
        report_error(o, "resnet18", rc, &err);
    } else {
        char what[64];
        snprintf(what, sizeof what, "loss %.4f", (double)loss);
        char args[512];
        snprintf(args, sizeof args, "%d %d%s", o->threads, o->steps, o->torch_args);
        char memory[128];
        memory_line(o, b, memory, sizeof memory);
        double theirs = o->torch ? torch_ms(srcdir(), "step_torch.py", args, NULL) : -1;
        report(o, ours, theirs, NULL, tb_graph_conv_flops(g), what, nonfinite, memory);
        breakdown(&e, x, &before, o->steps + 2, o);
    }
    free(image);
    free(labels);
    tb_exec_free(x);
    tb_engine_fini(&e);
    tb_graph_free(g);
    return rc ? 1 : 0;
}

/* Writes the batch's four arrays, raw and in that order (image, canny: f32; labels,
 * edges: u8; NCHW), to a new temporary file for the PyTorch twin; its name in path, or ""
 * when it could not be written. */
static void write_batch(const struct tb_batch *b, char *path, size_t size)
{
    const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, size, "%s/trainbig-bench-XXXXXX", dir);
    int fd = mkstemp(path);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "wb");
    if (!f) {
        if (fd >= 0) {
            close(fd);
            unlink(path);
        }
        path[0] = 0;
        return;
    }
    const size_t pix = (size_t)b->n * (size_t)b->h * (size_t)b->w;
    const float *canny = tb_batch_feed(b, "canny");
    const uint8_t *edges = tb_batch_feed(b, "edges");
    bool ok = canny && edges && fwrite(b->image, sizeof *b->image, 3 * pix, f) == 3 * pix &&
              fwrite(canny, sizeof *canny, pix, f) == pix && fwrite(b->labels, 1, pix, f) == pix &&
              fwrite(edges, 1, pix, f) == pix;
    if (fclose(f) != 0 || !ok) {
        unlink(path);
        path[0] = 0;
    }
}

/* The first step's forward (step 0, as time_steps' first), into fs: its "seg_logits" (count
 * floats) and the parameters it started from written raw to temporary files (names empty
 * when that fails), its four losses, and what its noise was drawn from. Training batch norm
 * normalises with the batch's statistics, so the running statistics this forward moves
 * change no later step's losses. */
/* The trainable parameters' values (NCHW floats, in the engine's order, one after another)
 * into a temporary file named in path (empty when that fails). */
static int write_params(struct tb_engine *e, char *path, size_t size, struct tb_err *err)
{
    const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, size, "%s/trainbig-bench-XXXXXX", dir);
    int fd = mkstemp(path);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "wb");
    bool ok = f != NULL;
    int rc = TB_OK;
    for (size_t i = 0; i < tb_engine_param_count(e) && ok && !rc; i++) {
        const struct tb_param *p = tb_engine_param_at(e, i);
        if (!p->trainable)
            continue;
        const size_t n = tb_shape_elems(p->value.desc.shape);
        float *host = malloc(n * sizeof *host + 1);
        if (!host)
            rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        if (!rc)
            rc = e->ops->tensor_read(e->ctx, &p->value, host, err);
        if (!rc)
            ok = fwrite(host, sizeof *host, n, f) == n;
        free(host);
    }
    if (f)
        ok = fclose(f) == 0 && ok;
    else if (fd >= 0)
        close(fd);
    if (!ok || rc) {
        if (fd >= 0)
            unlink(path);
        path[0] = 0;
    }
    return rc;
}

/* What the twin is handed to check the first step: its logits' and parameters' files, the
 * step its noise is drawn at, the dual_task op and the dropout ops ("id:p,..." in forward
 * order), and trainbig's four losses of that step. */
struct first_step {
    char logits[4096], params[4096];
    uint64_t noise_step;
    uint32_t dual_op;
    char dropout[512];
    float loss[4];
};

static int dual_first_step(struct tb_engine *e, struct tb_exec *x, const struct tb_graph *g, size_t count,
                           struct first_step *fs, struct tb_err *err)
{
    char *path = fs->logits;
    const size_t size = sizeof fs->logits;
    path[0] = fs->params[0] = fs->dropout[0] = 0;
    uint32_t *op = &fs->dual_op;
    *op = UINT32_MAX;
    const struct tb_schedule *sch = tb_exec_schedule(x);
    size_t len = 0;
    for (size_t i = 0; i < tb_schedule_steps(sch); i++) {
        bool backward;
        const struct tb_op *o = tb_exec_step_op(x, i, &backward, NULL, 0);
        if (o->kind == TB_OP_DUAL_TASK)
            *op = o->id;
        if (o->kind == TB_OP_DROPOUT && !backward && len < sizeof fs->dropout) {
            int k = snprintf(fs->dropout + len, sizeof fs->dropout - len, "%s%u:%.9g%s", len ? "," : "", o->id,
                             (double)o->p.dropout.p, o->p.dropout.channelwise ? "" : "e");
            len += k > 0 ? (size_t)k : 0;
        }
    }
    if (*op == UINT32_MAX || !tb_graph_has_output(g, "seg_logits"))
        return TB_OK;                             /* nothing to check */
    fs->noise_step = 0 ^ (e->seed * TB_GOLDEN64); /* tb_exec_forward's mixing of the run seed */
    int rc = write_params(e, fs->params, sizeof fs->params, err);
    if (!rc)
        rc = tb_exec_forward(x, 0, err);
    static const char *const names[4] = { "seg", "edge", "att", "dual" };
    for (int k = 0; k < 4 && !rc; k++)
        rc = tb_exec_read(x, names[k], &fs->loss[k], err);
    float *host = rc ? NULL : malloc(count * sizeof *host);
    if (!rc && !host)
        rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    if (!rc)
        rc = tb_exec_read(x, "seg_logits", host, err);
    if (!rc) {
        const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(path, size, "%s/trainbig-bench-XXXXXX", dir);
        int fd = mkstemp(path);
        FILE *f = fd < 0 ? NULL : fdopen(fd, "wb");
        bool ok = f && fwrite(host, sizeof *host, count, f) == count;
        if (f)
            ok = fclose(f) == 0 && ok;
        else if (fd >= 0)
            close(fd);
        if (!ok) {
            if (fd >= 0)
                unlink(path);
            path[0] = 0;
        }
    }
    free(host);
    return rc;
}

/* One batch of the synthetic dataset as the model's inputs (those of spec its own). */
static int synthetic_batch(struct tb_batch *batch, const struct tb_batch_spec *spec, const struct gscnn_size *z,
                           struct tb_err *err)
{
    char settings[128];
    snprintf(settings, sizeof settings, "width = %d\nheight = %d\ntrain_count = %d\n", z->side, z->side,
             z->batch > 256 ? z->batch : 256);
    struct tb_instance d;
    int rc = tb_instance_open(TB_KIND_DATASET, "synthetic", "train", settings, &d, err);
    if (rc)
        return rc;
    const struct tb_class *classes;
    size_t nclasses = d.ops.dataset->classes(d.ctx, &classes);
    if (nclasses != GSCNN_CLASSES)
        rc = tb_err_set(err, TB_ERR_CONFIG, "the synthetic dataset has %zu classes, the benchmark is set for %d",
                        nclasses, GSCNN_CLASSES);
    if (!rc && d.ops.dataset->count(d.ctx) < (size_t)z->batch)
        rc = tb_err_set(err, TB_ERR_CONFIG, "the synthetic train split has fewer than %d images", z->batch);
    if (!rc)
        rc = tb_batch_init(batch, z->batch, z->side, z->side, spec, NULL, err);
    struct tb_sample sample;
    struct tb_batch_work work = { 0 };
    memset(&sample, 0, sizeof sample);
    for (int i = 0; i < z->batch && !rc; i++) {
        rc = d.ops.dataset->load(d.ctx, (size_t)i, &sample, err);
        if (!rc)
            rc = tb_batch_put(batch, i, &sample, d.ops.dataset->sample_name(d.ctx, (size_t)i), &work, err);
    }
    tb_sample_release(&sample);
    tb_batch_work_free(&work);
    tb_instance_close(&d);
    return rc;
}

static int bench_gscnn(struct bench_backend *b, const struct opts *o)
{
    const struct gscnn_size *z = &o->size;
    struct tb_err err;
    tb_err_clear(&err);
    struct tb_instance m;
    char settings[256];
    snprintf(settings, sizeof settings, "width = %s\nblocks = %s\nshape_width = %s\n", z->width, z->blocks,
             z->shape_width);
    if (tb_instance_open(TB_KIND_MODEL, "gscnn", NULL, settings, &m, &err)) {
        fprintf(stderr, "bench: gscnn: %s\n", err.msg);
        return 1;
    }
    struct tb_graph *g = tb_graph_new(true);
    if (!g) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    const struct tb_model_input in = { z->batch, 3, z->side, z->side, GSCNN_CLASSES, GSCNN_IGNORE };
    struct tb_engine e;
    struct tb_exec *x = NULL;
    struct tb_batch batch;
    memset(&batch, 0, sizeof batch);
    bool engine = false;
    int rc = m.ops.model->build(m.ctx, g, &in, &err);
    if (!rc && tb_graph_error(g))
        rc = tb_err_set(&err, TB_ERR_RUNTIME, "%s", tb_graph_error(g));
    if (!rc && !(rc = tb_engine_init(&e, b->h->p, b->ctx, 0, 1, &err)))
        engine = true;
    if (!rc)
        rc = tb_exec_create(&e, g, &x, &err);
    struct tb_batch_spec feeds = { 0 };
    if (!rc)
        rc = tb_inputs_spec(&feeds, g, m.h->p, m.ctx, z->batch, z->side, z->side, &err);
    if (!rc)
        rc = synthetic_batch(&batch, &feeds, z, &err);
    if (!rc)
        rc = tb_inputs_set(x, g, &batch, &err);

    printf("\nbench/step: G-SCNN (gscnn plugin: width %s, shape_width %s, blocks %s), batch %d of synthetic 3x%dx%d, "
           "%d classes, losses seg + 20 edge + att + dual, SGD momentum\n",
           z->width, z->shape_width, z->blocks, z->batch, z->side, z->side, GSCNN_CLASSES);
    static const char *const loss_name[4] = { "seg", "edge", "att", "dual" };
    float loss[4] = { 0 };
    double ours = 0;
    int nonfinite = 0;
    struct first_step fs;
    memset(&fs, 0, sizeof fs);
    if (!rc && o->torch)
        rc = dual_first_step(&e, x, g, (size_t)z->batch * GSCNN_CLASSES * (size_t)z->side * (size_t)z->side, &fs, &err);
    const struct tb_reorder_stats before = reorders_now(&e);
    if (!rc)
        rc = time_steps(&e, x, o->cuda, o->steps, 4, loss_name, loss, &ours, &nonfinite, &err);
    if (rc) {
        report_error(o, "gscnn", rc, &err);
    } else {
        const long long params = trainable_params(&e);
        char what[128];
        snprintf(what, sizeof what, "losses seg %.4f edge %.4f att %.4f dual %.4f", (double)loss[0], (double)loss[1],
                 (double)loss[2], (double)loss[3]);
        /* The twin trains on the same batch: the same data-dependent work in the losses,
         * and the same numerics. */
        char inputs[4096] = "";
        if (o->torch)
            write_batch(&batch, inputs, sizeof inputs);
        char check[9400] = "";
        if (fs.logits[0] && fs.params[0])
            snprintf(check, sizeof check,
                     " --dual-check '%s' --dual-step 0x%016llx --dual-op %u --dual-trainbig %.9g --check-params '%s' "
                     "--check-dropout '%s' --check-losses %.9g,%.9g,%.9g,%.9g",
                     fs.logits, (unsigned long long)fs.noise_step, fs.dual_op, (double)fs.loss[3], fs.params,
                     fs.dropout, (double)fs.loss[0], (double)fs.loss[1], (double)fs.loss[2], (double)fs.loss[3]);
        char args[18000];
        snprintf(args, sizeof args,
                 "%d %d --params %lld --width %s --shape-width %s --blocks %s --classes %d --batch %d --height %d "
                 "--image-width %d "
                 "--lr %g --momentum %g --weight-decay %g%s%s%s%s%s",
                 o->threads, o->steps, params, z->width, z->shape_width, z->blocks, GSCNN_CLASSES, z->batch, z->side,
                 z->side, (double)SGD_LR, (double)SGD_MOMENTUM, (double)SGD_WEIGHT_DECAY,
                 inputs[0] ? " --inputs '" : "", inputs[0] ? inputs : "", inputs[0] ? "'" : "", check, o->torch_args);
        char memory[128];
        memory_line(o, b, memory, sizeof memory);
        long long theirs_params = -1;
        double theirs = o->torch ? torch_ms(srcdir(), "gscnn_torch.py", args, &theirs_params) : -1;
        if (inputs[0])
            unlink(inputs);
        if (fs.logits[0])
            unlink(fs.logits);
        if (fs.params[0])
            unlink(fs.params);
        const bool differ = theirs_params >= 0 && theirs_params != params;
        if (theirs_params >= 0)
            printf("trainable parameters: trainbig %lld, pytorch %lld (%s)\n", params, theirs_params,
                   differ ? "DIFFERENT: not the same network" : "equal");
        else
            printf("trainable parameters: trainbig %lld\n", params);
        report(o, ours, theirs, differ ? "not timed, the parameter counts differ" : NULL, tb_graph_conv_flops(g), what,
               nonfinite, memory);
        breakdown(&e, x, &before, o->steps + 2, o);
    }
    tb_batch_fini(&batch);
    tb_inputs_spec_free(&feeds);
    tb_exec_free(x);
    if (engine)
        tb_engine_fini(&e);
    tb_graph_free(g);
    tb_instance_close(&m);
    return rc ? 1 : 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench/step [--backend cpu|cuda] [--set KEY=VALUE]... [--model resnet18|gscnn]\n"
                    "                  [--size quickstart|reference] [--batch B] [--crop N] [--no-torch] [--trace FILE]\n"
                    "                  [--isa auto|avx512|avx2|scalar]\n"
                    "                  [--torch-format channels_last|contiguous] [THREADS [STEPS]]\n");
    return 2;
}

/* The fp32 peak of the GPU named `name` (gpu_peaks[]), 0 when not listed. */
static double gpu_peak(const char *name, const char **what)
{
    for (size_t i = 0; i < sizeof gpu_peaks / sizeof gpu_peaks[0]; i++)
        if (strstr(name, gpu_peaks[i].name_part)) {
            *what = gpu_peaks[i].what;
            return gpu_peaks[i].tflops * 1e12;
        }
    return 0;
}

/* Whether a --set assignment turns the backend's key `key` on (a bool key's yes forms). */
static bool sets_on(const char *set, const char *key)
{
    size_t n = strlen(key);
    if (strncmp(set, key, n) != 0 || set[n] != '=')
        return false;
    const char *v = set + n + 1;
    return !strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "on") || !strcmp(v, "1");
}

int main(int argc, char **argv)
{
    const char *model = NULL, *backend = "cpu", *size = "quickstart", *format = "channels_last"; /* model: both */
    int threads = omp_get_num_procs(), steps = 10, npos = 0, batch = 0, crop = 0;
    bool torch = true, tf32 = false;
    const char *isa = NULL; /* --isa: the cpu backend's [backend] isa, and the twin's caps */
    const char *trace = NULL;
    char keys[2048] = "", shown[2048] = "";
    size_t nkeys = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--model") == 0 && next)
            model = argv[++i];
        else if (strncmp(a, "--model=", 8) == 0)
            model = a + 8;
        else if (strcmp(a, "--backend") == 0 && next)
            backend = argv[++i];
        else if (strncmp(a, "--backend=", 10) == 0)
            backend = a + 10;
        else if (strcmp(a, "--size") == 0 && next)
            size = argv[++i];
        else if (strncmp(a, "--size=", 7) == 0)
            size = a + 7;
        else if (strcmp(a, "--batch") == 0 && next)
            batch = atoi(argv[++i]);
        else if (strcmp(a, "--crop") == 0 && next)
            crop = atoi(argv[++i]);
        else if (strcmp(a, "--torch-format") == 0 && next)
            format = argv[++i];
        else if (strcmp(a, "--no-torch") == 0)
            torch = false;
        else if (strcmp(a, "--trace") == 0 && next)
            trace = argv[++i];
        else if (strcmp(a, "--isa") == 0 && next)
            isa = argv[++i];
        else if (strcmp(a, "--set") == 0 && next && strchr(next, '=')) {
            /* KEY=VALUE as a line of the [backend] section */
            const char *eq = strchr(next, '=');
            nkeys += (size_t)snprintf(keys + nkeys, nkeys < sizeof keys ? sizeof keys - nkeys : 0, "%.*s = %s\n",
                                      (int)(eq - next), next, eq + 1);
            tf32 |= sets_on(next, "tf32");
            snprintf(shown + strlen(shown), sizeof shown - strlen(shown), "%s%s", *shown ? ", " : "", next);
            i++;
        } else if (a[0] == '-' || npos == 2)
            return usage();
        else if (npos++ == 0)
            threads = atoi(a);
        else
            steps = atoi(a);
    }
    const bool cuda = strcmp(backend, "cuda") == 0, reference = strcmp(size, "reference") == 0;
    if (!model && reference)
        model = "gscnn"; /* --size is the G-SCNN's */
    if (threads < 1 || steps < 1 || (model && strcmp(model, "resnet18") != 0 && strcmp(model, "gscnn") != 0) ||
        (!cuda && strcmp(backend, "cpu") != 0) || (!reference && strcmp(size, "quickstart") != 0) ||
        (reference && strcmp(model, "gscnn") != 0) || batch < 0 || crop < 0 || nkeys >= sizeof keys ||
        (strcmp(format, "channels_last") != 0 && strcmp(format, "contiguous") != 0))
        return usage();
    if (crop && crop < 16)
        return usage();
    if (isa && (cuda || (strcmp(isa, "auto") && strcmp(isa, "avx512") && strcmp(isa, "avx2") && strcmp(isa, "scalar"))))
        return usage();
    setenv("TRAINBIG_LOG", "warn", 0);
    /* A lower path for both sides: oneDNN's cap (PyTorch's bundled oneDNN reads it too) and
     * PyTorch's own vectorised kernels (ATEN_CPU_CAPABILITY); a value the user set stays. */
    if (isa && strcmp(isa, "avx2") == 0) {
        setenv("DNNL_MAX_CPU_ISA", "AVX2", 0);
        setenv("ATEN_CPU_CAPABILITY", "avx2", 0);
    } else if (isa && strcmp(isa, "scalar") == 0) {
        setenv("DNNL_MAX_CPU_ISA", "SSE41", 0);
        setenv("ATEN_CPU_CAPABILITY", "default", 0);
    }

    struct opts o = { .cuda = cuda, .threads = threads, .steps = steps, .torch = torch, .trace = trace };
    o.size = reference ? gscnn_reference : gscnn_quickstart;
    if (batch)
        o.size.batch = batch;
    if (crop)
        o.size.side = crop;
    snprintf(o.torch_args, sizeof o.torch_args, "%s%s%s", cuda ? " --device cuda" : "", tf32 ? " --tf32" : "",
             strcmp(format, "contiguous") == 0 ? " --format contiguous" : "");

    /* The cpu backend gets the threads; the cuda backend has no such key. */
    char all_keys[2200];
    if (cuda)
        snprintf(all_keys, sizeof all_keys, "%s", keys);
    else
        snprintf(all_keys, sizeof all_keys, "threads = %d\nisa = %s\n%s", threads, isa ? isa : "auto", keys);
    /* Held open until the end: the cuda runtime is not unloaded and loaded again. */
    struct tb_plugin_handle *held = cuda ? bench_backend_require(backend) : NULL;
    struct bench_backend b;
    bench_backend_open(&b, backend, all_keys);

    struct tb_device_info info;
    b.ops.backend->device_info(b.ctx, 0, &info);
    if (cuda) {
        const char *what = NULL;
        o.peak = gpu_peak(info.name, &what);
        printf("bench/step: %s, cuda backend (%s), %.1f GiB usable; %d CPU threads for PyTorch's host side\n",
               info.name, *shown ? shown : "its default keys: conv_algo = find, tf32 = no",
               (double)info.capacity / (1u << 30), threads);
        if (o.peak > 0)
            printf(
                "GPU fp32 peak %.1f TFLOP/s: NVIDIA's %s datasheet (non-tensor-core FMA at boost clock; not measured "
                "here)\n",
                o.peak / 1e12, what);
        else
            printf("GPU fp32 peak: not known for this device (bench/step.c gpu_peaks[]): TFLOP/s only\n");
    } else {
        /* The peak of the vectors the path's convolutions run on. */
        const bool zmm = strstr(info.name, "oneDNN avx512") != NULL;
        o.peak = bench_peak_flops_isa(threads, zmm);
        printf("bench/step: %s, %d threads; measured fp32 peak (%s) %.1f GFLOP/s\n", info.name, threads,
               zmm ? "AVX-512" : "AVX2", o.peak / 1e9);
        const char *cap = getenv("DNNL_MAX_CPU_ISA"), *aten = getenv("ATEN_CPU_CAPABILITY");
        if ((cap && *cap) || (aten && *aten))
            printf("bench/step: PyTorch runs with DNNL_MAX_CPU_ISA=%s ATEN_CPU_CAPABILITY=%s\n", cap ? cap : "",
                   aten ? aten : "");
    }
    if (reference) {
        char crop_arg[32] = "";
        if (crop)
            snprintf(crop_arg, sizeof crop_arg, " --crop %d", crop);
        printf("bench/step: G-SCNN batch %d of %dx%d; the largest batch that fits: raise --batch until the step runs "
               "out of device memory, e.g. for B in 2 4 6 8 12 16; do bench/step --backend %s --size %s%s --batch $B "
               "--no-torch 1 3 || break; done\n",
               o.size.batch, o.size.side, o.size.side, backend, size, crop_arg);
    }
    int rc = 0;
    if (!model || strcmp(model, "resnet18") == 0)
        rc |= bench_resnet18(&b, &o);
    if (!model || strcmp(model, "gscnn") == 0)
        rc |= bench_gscnn(&b, &o);
    bench_backend_close(&b);
    tb_plugin_close(held);
    return rc;
}
