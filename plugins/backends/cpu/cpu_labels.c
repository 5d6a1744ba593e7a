/* backends/cpu/cpu_labels.c: the two ops on label maps, per-image class weights and
 * labels masked by a threshold (trainbig/ops.h). Neither has a backward. Both are cheap
 * next to the network (one pass over the labels), so each image is one OpenMP task;
 * counts are integers, so the result does not depend on the thread count. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_shared.h"

static int cw_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                      const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)step;
    const struct tb_shape l = op->in[0].shape;
    const int K = op->out[0].shape.c, ignore = op->p.label.ignore_label;
    const size_t pixels = (size_t)l.h * (size_t)l.w;
    const uint8_t *labels = in[0].data;
    float *weights = out[0].data;
    /* counts[n][K]: image n's pixels per class; bad[n]: its first bad pixel, or -1. */
    uint64_t *counts = calloc((size_t)l.n * (size_t)K, sizeof *counts);
    int64_t *bad = malloc((size_t)l.n * sizeof *bad);
    if (!counts || !bad) {
        free(counts);
        free(bad);
        return tb_err_set(err, TB_ERR_NOMEM, "op %u (class_weights): out of host memory", op->id);
    }
#pragma omp parallel for schedule(static) num_threads(cpu->threads)
    for (int n = 0; n < l.n; n++) {
        const uint8_t *lab = labels + (size_t)n * pixels;
        uint64_t *c = counts + (size_t)n * (size_t)K;
        bad[n] = -1;
        for (size_t p = 0; p < pixels; p++) {
            const int t = lab[p];
            if (t == ignore)
                continue;
            if (t >= K) {
                bad[n] = (int64_t)p;
                break;
            }
            c[t]++;
        }
    }
    int rc = TB_OK;
    for (int n = 0; n < l.n && !rc; n++) {
        if (bad[n] >= 0) {
            rc = tb_err_set(err, TB_ERR_RUNTIME,
                            "op %u (class_weights): image %d, pixel (row %lld, column %lld): label %d is not a "
                            "class (0..%d) and not the ignore label %d",
                            op->id, n, (long long)(bad[n] / l.w), (long long)(bad[n] % l.w),
                            labels[(size_t)n * pixels + (size_t)bad[n]], K - 1, ignore);
            break;
        }
        const uint64_t *c = counts + (size_t)n * (size_t)K;
        uint64_t total = 0;
        for (int k = 0; k < K; k++)
            total += c[k];
        for (int k = 0; k < K; k++)
            weights[(size_t)n * (size_t)K + (size_t)k] = c[k] ? (float)(2.0 - (double)c[k] / (double)total) : 1.0f;
    }
    free(counts);
    free(bad);
    return rc;
}

const struct tb_cpu_kernel TB_CPU_KERNEL(class_weights) = {
    .forward = cw_forward,
};

static int mask_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                        const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)state;
    (void)step;
    (void)err;
    const size_t n = tb_shape_elems(op->in[0].shape);
    const uint8_t *labels = in[0].data;
    const float *x = in[1].data;
    uint8_t *y = out[0].data;
    const float thr = op->p.label.threshold;
    const uint8_t ignore = (uint8_t)op->p.label.ignore_label;
#pragma omp parallel for schedule(static) num_threads(cpu->threads)
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > thr ? labels[i] : ignore;
    return TB_OK;
}

const struct tb_cpu_kernel TB_CPU_KERNEL(mask_labels) = {
    .forward = mask_forward,
};
