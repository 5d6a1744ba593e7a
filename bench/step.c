/* bench/step: milliseconds per training step of a fixed ResNet-18-style segmentation
 * network on the CPU backend, and, when /usr/bin/python3 has torch, the same network in
 * PyTorch (bench/step_torch.py, same threads, channels_last) in the same run, with the
 * ratio. A benchmark, not a test.
 *
 * The network: 7x7/2 stem conv 3->64, BN, ReLU, 3x3/2 max pool; 4 stages of 2 basic
 * blocks, widths 64/128/256/512 (stages 2-4 start with stride 2 and a 1x1/2 projection);
 * a 1x1 conv to 19 classes; bilinear upsampling to the input size; cross-entropy. Batch 4,
 * 3x224x224, SGD with momentum 0.9, weight decay 1e-4.
 *
 *   ./bench/step [THREADS [STEPS]]      (default: all cores, 10 timed steps) */
#include "config.h"

#include <math.h>
#include <stdint.h>

#include "benchutil.h"
#include "lib/engine_internal.h"

enum { BATCH = 4, SIDE = 224, CLASSES = 19 };

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

static struct tb_graph *build(void)
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

/* Runs bench/step_torch.py; its median ms per step, or -1 when torch is not there. */
static double torch_ms(const char *srcdir, int threads, int steps)
{
    if (access("/usr/bin/python3", X_OK) != 0)
        return -1;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/bench/step_torch.py %d %d 2>&1", srcdir, threads, steps);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char line[512];
    double ms = -1;
    while (fgets(line, sizeof line, p)) {
        if (sscanf(line, "torch-ms-per-step %lf", &ms) == 1)
            continue;
        printf("  (pytorch) %s", line);
    }
    pclose(p);
    return ms;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : omp_get_num_procs();
    int steps = argc > 2 ? atoi(argv[2]) : 10;
    if (threads < 1 || steps < 1) {
        fprintf(stderr, "usage: bench/step [THREADS [STEPS]]\n");
        return 2;
    }
    setenv("TRAINBIG_LOG", "warn", 0);
    char keys[64];
    snprintf(keys, sizeof keys, "threads = %d\n", threads);
    struct bench_backend b;
    bench_backend_open(&b, "cpu", keys);
    struct tb_err err;
    tb_err_clear(&err);
    struct tb_engine e;
    struct tb_graph *g = build();
    struct tb_exec *x = NULL;
    int rc = tb_engine_init(&e, b.h->p, b.ctx, 0, 1, &err);
    if (!rc)
        rc = tb_exec_create(&e, g, &x, &err);
    if (rc) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return 1;
    }
    size_t n = (size_t)BATCH * 3 * SIDE * SIDE;
    float *image = malloc(n * sizeof *image);
    uint8_t *labels = malloc((size_t)BATCH * SIDE * SIDE);
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

    double peak = bench_peak_flops(threads);
    struct tb_device_info info;
    b.ops->device_info(b.ctx, 0, &info);
    printf("bench/step: ResNet-18-style segmentation, batch %d, 3x%dx%d, %d classes, SGD momentum\n", BATCH, SIDE, SIDE,
           CLASSES);
    printf("%s; measured fp32 peak %.1f GFLOP/s\n", info.name, peak / 1e9);

    double *ms = calloc((size_t)steps, sizeof *ms);
    float loss = 0;
    for (int i = -2; i < steps && !rc; i++) {
        double t0 = bench_now();
        rc = tb_exec_forward(x, (uint64_t)(i + 2), &err);
        if (!rc)
            rc = tb_exec_backward(x, &err);
        if (!rc)
            rc = tb_sgd_step(&e, 0.01f, 0.9f, 1e-4f, &err);
        double dt = bench_now() - t0;
        if (!rc)
            rc = tb_exec_read(x, "ce", &loss, &err);
        if (i >= 0)
            ms[i] = dt * 1e3;
    }
    if (rc) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return 1;
    }
    qsort(ms, (size_t)steps, sizeof *ms, cmp_double);
    double ours = ms[steps / 2];
    /* FLOPs of the convolutions (fwd + bwd-data + bwd-weights), the work that counts. */
    double flops = 0;
    for (size_t k = 0; k < g->nops; k++) {
        const struct tb_op *op = &g->ops[k].op;
        if (op->kind != TB_OP_CONV2D)
            continue;
        double f = 2.0 * tb_shape_elems(op->out[0].shape) * op->in[0].shape.c * op->p.conv.kh * op->p.conv.kw;
        flops += k == 0 ? 2 * f : 3 * f; /* the stem computes no input gradient */
    }
    printf("trainbig: %.1f ms per step (median of %d; loss %.4f), %.0f GFLOP/s in convolutions = %.0f%% of peak\n",
           ours, steps, (double)loss, flops / (ours / 1e3) / 1e9, 100.0 * flops / (ours / 1e3) / peak);
    const char *src = getenv("TB_SRCDIR") ? getenv("TB_SRCDIR") : ".";
    double theirs = torch_ms(src, threads, steps);
    if (theirs > 0)
        printf("pytorch:  %.1f ms per step, %.0f%% of peak\nratio trainbig / pytorch: %.2f (target <= 0.90)\n", theirs,
               100.0 * flops / (theirs / 1e3) / peak, ours / theirs);
    else
        printf("pytorch: not available (/usr/bin/python3 with torch); no ratio\n");
    free(ms);
    free(image);
    free(labels);
    tb_exec_free(x);
    tb_engine_fini(&e);
    tb_graph_free(g);
    bench_backend_close(&b);
    return 0;
}
