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
 * (GSCNN_* below: [model] width 0.125, shape_width 0.5, blocks 1,1,1,1,1,1, the rest default; 19 classes,
 * ignore label 255; batch 8 of 128x128 images), trained on its three losses (seg, edge,
 * att) and fed one batch of the `synthetic` dataset through the core's batch builder
 * (normalised image, Canny edges, labels, edge targets). The PyTorch twin is the same
 * network layer for layer; it is given trainbig's count of trainable parameters and
 * refuses to time a network whose count differs (both counts are printed).
 *
 * Both: SGD lr 0.005 (the quickstart's), momentum 0.9, weight decay 1e-4; 2 warm-up steps, then the median of
 * STEPS timed steps (forward, backward, SGD update). The convolutions' FLOPs (forward,
 * backward-data, backward-weights; no backward-data for a convolution whose input needs
 * no gradient) per step are shown against this machine's fp32 peak, measured in the run.
 *
 *   ./bench/step [--model resnet18|gscnn] [THREADS [STEPS]]
 *       (default: both networks, all cores, 10 timed steps) */
#include "config.h"

#include <math.h>
#include <stdint.h>

#include "benchutil.h"
#include "lib/batch_internal.h"
#include "lib/engine_internal.h"

/* The optimizer of both networks. */
#define SGD_LR 0.005f
#define SGD_MOMENTUM 0.9f
#define SGD_WEIGHT_DECAY 1e-4f

/* resnet18 */
enum { BATCH = 4, SIDE = 224, CLASSES = 19 };

/* gscnn: the quickstart settings. */
#define GSCNN_WIDTH "0.125"        /* [model] width */
#define GSCNN_BLOCKS "1,1,1,1,1,1" /* [model] blocks, mod2..mod7 */
#define GSCNN_SHAPE_WIDTH "0.5"    /* [model] shape_width */
#define GSCNN_CLASSES 19           /* the synthetic dataset's (Cityscapes) classes */
#define GSCNN_IGNORE 255           /* ignore label */
#define GSCNN_BATCH 8              /* images per step */
#define GSCNN_HEIGHT 128           /* image size */
#define GSCNN_IMAGE_WIDTH 128

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
static int time_steps(struct tb_engine *e, struct tb_exec *x, int steps, int nloss, const char *const *loss,
                      float *value, double *median, int *nonfinite, struct tb_err *err)
{
    *nonfinite = 0;
    double *ms = calloc((size_t)steps, sizeof *ms);
    if (!ms)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    int rc = TB_OK;
    for (int i = -2; i < steps && !rc; i++) {
        double t0 = bench_now();
        rc = tb_exec_forward(x, (uint64_t)(i + 2), err);
        if (!rc)
            rc = tb_exec_backward(x, err);
        if (!rc)
            rc = tb_sgd_step(e, SGD_LR, SGD_MOMENTUM, SGD_WEIGHT_DECAY, err);
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

/* Runs `/usr/bin/python3 SRCDIR/bench/SCRIPT ARGS`; its median ms per step, or -1 when
 * torch is not there or the script timed nothing. Lines other than the machine-readable
 * ones are shown; *params gets its 'torch-params' line (-1 without one) when not NULL. */
static double torch_ms(const char *srcdir, const char *script, const char *args, long long *params)
{
    if (params)
        *params = -1;
    if (access("/usr/bin/python3", X_OK) != 0)
        return -1;
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/bench/%s %s 2>&1", srcdir, script, args);
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

/* The lines every network ends with: trainbig's time and convolution throughput, then
 * PyTorch's and the ratio (theirs <= 0: none, `why`, or not available). */
static void report(double ours, double theirs, const char *why, double flops, double peak, int steps,
                   const char *losses, int nonfinite)
{
    if (nonfinite)
        printf("trainbig: note: the losses are not finite from step %d of %d on (training diverged; those steps "
               "are timed too)\n",
               nonfinite, steps + 2);
    printf("trainbig: %.1f ms per step (median of %d; %s), %.0f GFLOP/s in convolutions = %.0f%% of peak\n", ours,
           steps, losses, flops / (ours / 1e3) / 1e9, 100.0 * flops / (ours / 1e3) / peak);
    if (theirs > 0)
        printf("pytorch:  %.1f ms per step, %.0f%% of peak\nratio trainbig / pytorch: %.2f (target <= 0.90)\n", theirs,
               100.0 * flops / (theirs / 1e3) / peak, ours / theirs);
    else
        printf("pytorch: %s; no ratio\n", why ? why : "not available (/usr/bin/python3 with torch)");
}

static const char *srcdir(void)
{
    return getenv("TB_SRCDIR") ? getenv("TB_SRCDIR") : ".";
}

static int bench_resnet18(struct bench_backend *b, int threads, int steps, double peak)
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
    if (!rc)
        rc = time_steps(&e, x, steps, 1, loss_name, &loss, &ours, &nonfinite, &err);
    if (rc) {
        fprintf(stderr, "bench: resnet18: %s\n", err.msg);
    } else {
        char what[64];
        snprintf(what, sizeof what, "loss %.4f", (double)loss);
        char args[64];
        snprintf(args, sizeof args, "%d %d", threads, steps);
        double theirs = torch_ms(srcdir(), "step_torch.py", args, NULL);
        report(ours, theirs, NULL, tb_graph_conv_flops(g), peak, steps, what, nonfinite);
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
    bool ok = fwrite(b->image, sizeof *b->image, 3 * pix, f) == 3 * pix &&
              fwrite(b->canny, sizeof *b->canny, pix, f) == pix && fwrite(b->labels, 1, pix, f) == pix &&
              fwrite(b->edges, 1, pix, f) == pix;
    if (fclose(f) != 0 || !ok) {
        unlink(path);
        path[0] = 0;
    }
}

/* One batch of the synthetic dataset as the model's four inputs. */
static int synthetic_batch(struct tb_batch *batch, struct tb_err *err)
{
    char settings[128];
    snprintf(settings, sizeof settings, "width = %d\nheight = %d\n", GSCNN_IMAGE_WIDTH, GSCNN_HEIGHT);
    struct tb_dataset_instance d;
    int rc = tb_dataset_open("synthetic", "train", settings, &d, err);
    if (rc)
        return rc;
    const struct tb_class *classes;
    size_t nclasses = d.ops->classes(d.ctx, &classes);
    if (nclasses != GSCNN_CLASSES)
        rc = tb_err_set(err, TB_ERR_CONFIG, "the synthetic dataset has %zu classes, the benchmark is set for %d",
                        nclasses, GSCNN_CLASSES);
    if (!rc && d.ops->count(d.ctx) < GSCNN_BATCH)
        rc = tb_err_set(err, TB_ERR_CONFIG, "the synthetic train split has fewer than %d images", GSCNN_BATCH);
    if (!rc)
        rc = tb_batch_init(batch, GSCNN_BATCH, GSCNN_HEIGHT, GSCNN_IMAGE_WIDTH, NULL, err);
    struct tb_sample sample;
    struct tb_batch_work work = { 0 };
    memset(&sample, 0, sizeof sample);
    for (int i = 0; i < GSCNN_BATCH && !rc; i++) {
        rc = d.ops->load(d.ctx, (size_t)i, &sample, err);
        if (!rc)
            rc = tb_batch_put(batch, i, &sample, d.ops->sample_name(d.ctx, (size_t)i), &work, err);
    }
    tb_sample_release(&sample);
    tb_batch_work_free(&work);
    tb_dataset_close(&d);
    return rc;
}

static int bench_gscnn(struct bench_backend *b, int threads, int steps, double peak)
{
    struct tb_err err;
    tb_err_clear(&err);
    struct tb_model_instance m;
    if (tb_model_open("gscnn",
                      "width = " GSCNN_WIDTH "\nblocks = " GSCNN_BLOCKS "\nshape_width = " GSCNN_SHAPE_WIDTH "\n", &m,
                      &err)) {
        fprintf(stderr, "bench: gscnn: %s\n", err.msg);
        return 1;
    }
    struct tb_graph *g = tb_graph_new(true);
    if (!g) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    const struct tb_model_input in = { GSCNN_BATCH, 3, GSCNN_HEIGHT, GSCNN_IMAGE_WIDTH, GSCNN_CLASSES, GSCNN_IGNORE };
    struct tb_engine e;
    struct tb_exec *x = NULL;
    struct tb_batch batch;
    memset(&batch, 0, sizeof batch);
    bool engine = false;
    int rc = m.ops->build(m.ctx, g, &in, &err);
    if (!rc && tb_graph_error(g))
        rc = tb_err_set(&err, TB_ERR_RUNTIME, "%s", tb_graph_error(g));
    if (!rc && !(rc = tb_engine_init(&e, b->h->p, b->ctx, 0, 1, &err)))
        engine = true;
    if (!rc)
        rc = tb_exec_create(&e, g, &x, &err);
    if (!rc)
        rc = synthetic_batch(&batch, &err);
    if (!rc)
        rc = tb_exec_set_input(x, "image", batch.image, &err);
    if (!rc)
        rc = tb_exec_set_input(x, "canny", batch.canny, &err);
    if (!rc)
        rc = tb_exec_set_input(x, "labels", batch.labels, &err);
    if (!rc)
        rc = tb_exec_set_input(x, "edges", batch.edges, &err);

    printf("\nbench/step: G-SCNN (gscnn plugin: width %s, shape_width %s, blocks %s), batch %d of synthetic 3x%dx%d, "
           "%d classes, losses seg + 20 edge + att, SGD momentum\n",
           GSCNN_WIDTH, GSCNN_SHAPE_WIDTH, GSCNN_BLOCKS, GSCNN_BATCH, GSCNN_HEIGHT, GSCNN_IMAGE_WIDTH, GSCNN_CLASSES);
    static const char *const loss_name[3] = { "seg", "edge", "att" };
    float loss[3] = { 0 };
    double ours = 0;
    int nonfinite = 0;
    if (!rc)
        rc = time_steps(&e, x, steps, 3, loss_name, loss, &ours, &nonfinite, &err);
    if (rc) {
        fprintf(stderr, "bench: gscnn: %s\n", err.msg);
    } else {
        const long long params = trainable_params(&e);
        char what[128];
        snprintf(what, sizeof what, "losses seg %.4f edge %.4f att %.4f", (double)loss[0], (double)loss[1],
                 (double)loss[2]);
        /* The twin trains on the same batch: the same data-dependent work in the losses,
         * and the same numerics. */
        char inputs[4096];
        write_batch(&batch, inputs, sizeof inputs);
        char args[8192];
        snprintf(args, sizeof args,
                 "%d %d --params %lld --width %s --shape-width %s --blocks %s --classes %d --batch %d --height %d "
                 "--image-width %d "
                 "--lr %g --momentum %g --weight-decay %g%s%s%s",
                 threads, steps, params, GSCNN_WIDTH, GSCNN_SHAPE_WIDTH, GSCNN_BLOCKS, GSCNN_CLASSES, GSCNN_BATCH,
                 GSCNN_HEIGHT, GSCNN_IMAGE_WIDTH, (double)SGD_LR, (double)SGD_MOMENTUM, (double)SGD_WEIGHT_DECAY,
                 inputs[0] ? " --inputs '" : "", inputs[0] ? inputs : "", inputs[0] ? "'" : "");
        long long theirs_params;
        double theirs = torch_ms(srcdir(), "gscnn_torch.py", args, &theirs_params);
        if (inputs[0])
            unlink(inputs);
        const bool differ = theirs_params >= 0 && theirs_params != params;
        if (theirs_params >= 0)
            printf("trainable parameters: trainbig %lld, pytorch %lld (%s)\n", params, theirs_params,
                   differ ? "DIFFERENT: not the same network" : "equal");
        else
            printf("trainable parameters: trainbig %lld\n", params);
        report(ours, theirs, differ ? "not timed, the parameter counts differ" : NULL, tb_graph_conv_flops(g), peak,
               steps, what, nonfinite);
    }
    tb_batch_fini(&batch);
    tb_exec_free(x);
    if (engine)
        tb_engine_fini(&e);
    tb_graph_free(g);
    tb_model_close(&m);
    return rc ? 1 : 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench/step [--model resnet18|gscnn] [THREADS [STEPS]]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *model = NULL; /* both */
    int threads = omp_get_num_procs(), steps = 10, npos = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--model") == 0 && i + 1 < argc)
            model = argv[++i];
        else if (strncmp(argv[i], "--model=", 8) == 0)
            model = argv[i] + 8;
        else if (argv[i][0] == '-' || npos == 2)
            return usage();
        else if (npos++ == 0)
            threads = atoi(argv[i]);
        else
            steps = atoi(argv[i]);
    }
    if (threads < 1 || steps < 1 || (model && strcmp(model, "resnet18") != 0 && strcmp(model, "gscnn") != 0))
        return usage();
    setenv("TRAINBIG_LOG", "warn", 0);
    char keys[64];
    snprintf(keys, sizeof keys, "threads = %d\n", threads);
    struct bench_backend b;
    bench_backend_open(&b, "cpu", keys);

    double peak = bench_peak_flops(threads);
    struct tb_device_info info;
    b.ops->device_info(b.ctx, 0, &info);
    printf("bench/step: %s, %d threads; measured fp32 peak %.1f GFLOP/s\n", info.name, threads, peak / 1e9);
    int rc = 0;
    if (!model || strcmp(model, "resnet18") == 0)
        rc |= bench_resnet18(&b, threads, steps, peak);
    if (!model || strcmp(model, "gscnn") == 0)
        rc |= bench_gscnn(&b, threads, steps, peak);
    bench_backend_close(&b);
    return rc;
}
