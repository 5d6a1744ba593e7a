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
 * --precision bf16 builds both networks as [train] precision = bf16 does (the graph
 * builder's autocast: convolutions and what carries their outputs in bf16, losses and
 * master weights in fp32) and runs the twins under torch.autocast(bfloat16); fp16 the same
 * on a GPU (the twins with a GradScaler; trainbig has no loss scaling yet, so its fp16
 * step is timed but not meant for training).
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
 *                [--precision fp32|bf16|fp16] [THREADS [STEPS]]
 *       (default: cpu, both networks, all cores, 10 timed steps) */
#include "config.h"

#include <math.h>
#include <stdint.h>

#include "step_internal.h"

/* resnet18 */
enum { BATCH = 4, SIDE = 224, CLASSES = 19 };

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

static struct tb_graph *build_resnet18(enum tb_dtype precision)
{
    struct tb_graph *g = tb_graph_new(true);
    tb_graph_set_precision(g, precision);
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

static int bench_resnet18(struct bench_backend *b, const struct opts *o)
{
    struct tb_err err;
    tb_err_clear(&err);
    struct tb_engine e;
    struct tb_graph *g = build_resnet18(o->precision);
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
    const struct tb_reorder_stats before = bench_reorders_now(&e);
    if (!rc)
        rc = bench_time_steps(&e, x, o->cuda, o->steps, 1, loss_name, &loss, &ours, &nonfinite, &err);
    if (rc) {
        bench_report_error(o, "resnet18", rc, &err);
    } else {
        char what[64];
        snprintf(what, sizeof what, "loss %.4f", (double)loss);
        char args[512];
        snprintf(args, sizeof args, "%d %d%s", o->threads, o->steps, o->torch_args);
        char memory[128];
        bench_memory_line(o, b, memory, sizeof memory);
        double theirs = o->torch ? bench_torch_ms(bench_srcdir(), "step_torch.py", args, NULL) : -1;
        bench_report(o, ours, theirs, NULL, tb_graph_conv_flops(g), what, nonfinite, memory);
        bench_breakdown(&e, x, &before, o->steps + 2, o);
    }
    free(image);
    free(labels);
    tb_exec_free(x);
    tb_engine_fini(&e);
    tb_graph_free(g);
    return rc ? 1 : 0;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: bench/step [--backend cpu|cuda] [--set KEY=VALUE]... [--model resnet18|gscnn]\n"
            "                  [--size quickstart|reference] [--batch B] [--crop N] [--no-torch] [--trace FILE]\n"
            "                  [--isa auto|avx512|avx2|scalar] [--precision fp32|bf16|fp16]\n"
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
    const char *trace = NULL, *precision = "fp32";
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
        else if (strcmp(a, "--precision") == 0 && next)
            precision = argv[++i];
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
    const enum tb_dtype dtype = !strcmp(precision, "fp32")   ? TB_F32
                                : !strcmp(precision, "bf16") ? TB_BF16
                                : !strcmp(precision, "fp16") ? TB_F16
                                                             : 0;
    if (!dtype)
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

    struct opts o = {
        .cuda = cuda, .threads = threads, .steps = steps, .torch = torch, .trace = trace, .precision = dtype
    };
    o.size = reference ? gscnn_reference : gscnn_quickstart;
    if (batch)
        o.size.batch = batch;
    if (crop)
        o.size.side = crop;
    snprintf(o.torch_args, sizeof o.torch_args, "%s%s%s --precision %s", cuda ? " --device cuda" : "",
             tf32 ? " --tf32" : "", strcmp(format, "contiguous") == 0 ? " --format contiguous" : "", precision);

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
