/* bench/ops: GFLOP/s of the convolutions G-SCNN spends its time in, forward, backward-data
 * and backward-weights, on the CPU backend, each as a fraction of this machine's fp32 peak
 * measured in the same run with an FMA loop. A benchmark, not a test.
 *
 * Each convolution's line names oneDNN's implementation of each pass, marked where it runs
 * an ISA below the best this CPU has; the header names the path the backend runs (its own
 * kernels' ISA, oneDNN's, and the channel block of its tensors). --isa forces a path
 * ([backend] isa; oneDNN is capped with it), and the peak is then that path's FMA loop
 * (AVX2's on an AVX-512 CPU), so "of peak" is against what the path can reach.
 *
 *   ./bench/ops [--isa auto|avx512|avx2|scalar] [THREADS]      (default: auto, all cores) */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>

#include "benchutil.h"

struct conv_case {
    const char *what;
    int n, c, h, w, o, k, dil;
};

static const struct conv_case cases[] = {
    { "3x3 64->64", 4, 64, 128, 128, 64, 3, 1 },
    { "3x3 64->64 dilated 2", 4, 64, 128, 128, 64, 3, 2 },
    { "3x3 256->256 dilated 4", 4, 256, 32, 32, 256, 3, 4 },
    { "1x1 64->128", 4, 64, 128, 128, 128, 1, 1 },
    { "1x1 1024->512", 4, 1024, 32, 32, 512, 1, 1 },
    { "1x1 4096->256 (ASPP)", 4, 4096, 16, 16, 256, 1, 1 },
};

static void fill(struct bench_backend *b, struct tb_tensor *t, uint64_t seed)
{
    size_t n = tb_shape_elems(t->desc.shape);
    float *h = malloc(n * sizeof *h);
    uint64_t s = seed * TB_GOLDEN64 + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        h[i] = (float)(s >> 40) / 16777216.0f - 0.5f;
    }
    struct tb_err err;
    b->ops.backend->tensor_write(b->ctx, t, h, &err);
    free(h);
}

static struct tb_tensor make(struct bench_backend *b, int n, int c, int h, int w)
{
    struct tb_tensor t = { { TB_F32, { n, c, h, w } }, 0, NULL };
    t.data = b->ops.backend->mem_alloc(b->ctx, 0, b->ops.backend->tensor_bytes(b->ctx, &t.desc));
    if (!t.data) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    fill(b, &t, (uint64_t)(n * 131 + c * 17 + h * 7 + w));
    return t;
}

enum pass { FWD, BWD_DATA, BWD_WEIGHTS };

/* Median seconds of one pass over several repetitions (at least 0.3 s of work). */
static double time_pass(struct bench_backend *b, const struct tb_op *op, void *state, struct tb_tensor *in,
                        struct tb_tensor *out, struct tb_tensor *dout, struct tb_tensor *din, enum pass p)
{
    struct tb_tensor d[3] = { din[0], din[1], din[2] };
    if (p == BWD_DATA)
        d[1].data = NULL;
    if (p == BWD_WEIGHTS)
        d[0].data = NULL;
    double t[64];
    int reps = 0;
    double spent = 0;
    for (int i = -2; i < 64 && (reps < 5 || spent < 0.3); i++) {
        struct tb_err err;
        tb_err_clear(&err);
        double t0 = bench_now();
        int rc = p == FWD ? b->ops.backend->op_forward(b->ctx, op, state, 0, in, out, &err)
                          : b->ops.backend->op_backward(b->ctx, op, state, in, out, dout, d, &err);
        double dt = bench_now() - t0;
        if (rc) {
            fprintf(stderr, "bench: %s\n", err.msg);
            exit(1);
        }
        if (i < 0)
            continue; /* warm-up: first-touch page faults, oneDNN's JIT */
        t[reps++] = dt;
        spent += dt;
    }
    for (int i = 1; i < reps; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return t[reps / 2];
}

int main(int argc, char **argv)
{
    const char *isa = "auto";
    int arg = 1;
    if (argc > 2 && strcmp(argv[1], "--isa") == 0) {
        isa = argv[2];
        arg = 3;
    }
    int threads = argc > arg ? atoi(argv[arg]) : omp_get_num_procs();
    if (threads < 1 || argc > arg + 1) {
        fprintf(stderr, "usage: bench/ops [--isa auto|avx512|avx2|scalar] [THREADS]\n");
        return 2;
    }
    setenv("TRAINBIG_LOG", "warn", 0);
    char keys[96];
    snprintf(keys, sizeof keys, "threads = %d\nisa = %s\n", threads, isa);
    struct bench_backend b;
    bench_backend_open(&b, "cpu", keys);
    struct tb_device_info info;
    b.ops.backend->device_info(b.ctx, 0, &info);
    /* The peak of the vectors oneDNN runs: its AVX-512 kernels on zmm, else ymm. */
    const bool zmm = strstr(info.name, "oneDNN avx512") != NULL;
    double peak = bench_peak_flops_isa(threads, zmm);
    printf("bench/ops: %s\n", info.name);
    printf("measured fp32 peak (FMA loop on %s, %d threads): %.1f GFLOP/s\n\n", zmm ? "AVX-512" : "AVX2", threads,
           peak / 1e9);
    printf("%-26s %-12s %10s %10s %8s\n", "convolution (N=4)", "pass", "ms", "GFLOP/s", "of peak");
    double all_flops = 0, all_time = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const struct conv_case *cc = &cases[c];
        int pad = cc->dil * (cc->k - 1) / 2;
        struct tb_op op;
        memset(&op, 0, sizeof op);
        op.kind = TB_OP_CONV2D;
        op.id = (uint32_t)c;
        op.nin = 2;
        op.nout = 1;
        op.in[0] = (struct tb_tensor_desc){ TB_F32, { cc->n, cc->c, cc->h, cc->w } };
        op.in[1] = (struct tb_tensor_desc){ TB_F32, { cc->o, cc->c, cc->k, cc->k } };
        op.out[0] = (struct tb_tensor_desc){ TB_F32, { cc->n, cc->o, cc->h, cc->w } };
        op.p.conv = (struct tb_conv2d_params){ cc->k, cc->k, 1, 1, pad, pad, cc->dil, cc->dil, 0 };
        void *state;
        struct tb_err err;
        tb_err_clear(&err);
        if (b.ops.backend->op_prepare(b.ctx, 0, &op, &state, &err)) {
            fprintf(stderr, "bench: %s\n", err.msg);
            return 1;
        }
        struct tb_tensor in[2] = { make(&b, cc->n, cc->c, cc->h, cc->w), make(&b, cc->o, cc->c, cc->k, cc->k) };
        struct tb_tensor out[1] = { make(&b, cc->n, cc->o, cc->h, cc->w) };
        struct tb_tensor dout[1] = { make(&b, cc->n, cc->o, cc->h, cc->w) };
        struct tb_tensor din[3] = { make(&b, cc->n, cc->c, cc->h, cc->w),
                                    make(&b, cc->o, cc->c, cc->k, cc->k),
                                    { { TB_F32, { 1, 1, 1, 1 } }, 0, NULL } };
        double flops = 2.0 * cc->n * cc->o * cc->h * cc->w * (double)cc->c * cc->k * cc->k;
        static const char *const pass_name[3] = { "fwd", "bwd-data", "bwd-weights" };
        double sum = 0;
        for (int p = 0; p < 3; p++) {
            double s = time_pass(&b, &op, state, in, out, dout, din, (enum pass)p);
            sum += s;
            printf("%-26s %-12s %10.2f %10.1f %7.0f%%\n", p == 0 ? cc->what : "", pass_name[p], s * 1e3,
                   flops / s / 1e9, 100.0 * flops / s / peak);
        }
        printf("%-26s %-12s %10.2f %10.1f %7.0f%%\n", "", "fwd+bwd", sum * 1e3, 3 * flops / sum / 1e9,
               100.0 * 3 * flops / sum / peak);
        char how[320] = "";
        if (b.ops.backend->op_describe)
            b.ops.backend->op_describe(b.ctx, state, how, sizeof how);
        if (how[0])
            printf("%-26s %s\n", "", how);
        all_flops += 3 * flops;
        all_time += sum;
        b.ops.backend->op_release(b.ctx, state);
        struct tb_tensor *all[] = { &in[0], &in[1], &out[0], &dout[0], &din[0], &din[1] };
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            b.ops.backend->mem_free(b.ctx, 0, all[i]->data);
    }
    printf("\nall shapes, fwd+bwd: %.1f GFLOP/s = %.0f%% of the measured peak (target: 80%%)\n",
           all_flops / all_time / 1e9, 100.0 * all_flops / all_time / peak);
    bench_backend_close(&b);
    return 0;
}
