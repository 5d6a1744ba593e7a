/* backends/sim/sim_model.c: the op-time model (sim_model.h) and its table.
 *
 * Each row: which ops it covers, the share of the device's peak arithmetic rate they
 * reach (compute), and the share of its memory bandwidth (memory). They are assumptions
 * until calibrated from a real device's per-op times (the sim_profile); the
 * reasons:
 * - Large convolutions (3x3 and up, 16 or more input channels) reach the platform's own
 *   accel_efficiency: what cuDNN achieves on them (0.7 assumed on a V100; 0.45 measured on
 *   an H100 in fp32).
 * - 1x1 convolutions are plain matrix products of lower arithmetic intensity: 0.8 of that.
 * - Narrow ones (fewer than 64 multiply-adds per output, such as the first, on an RGB
 *   image: 27) keep few of the device's units busy: a quarter of it.
 * - Dilated ones leave cuDNN's fastest (implicit-GEMM, Winograd) algorithms for slower
 *   ones: 0.6 of it.
 * - Elementwise ops, batch norm and data movement (concatenation, resizing, pooling) are
 *   bound by memory: they stream at 0.8 of the peak bandwidth (a copy kernel's usual
 *   share), or 0.7 where their access is strided (resize, pools, concat).
 * - Losses and the dual-task regulariser reduce over the whole tensor in several passes:
 *   0.5 of the bandwidth, 0.3 of the arithmetic rate.
 * A kernel costs launch_s (5 us unless set) on the device beside its work: a step of many
 * small ops is bound by it, as small steps on a GPU are. */
#include "sim_model.h"

#include <string.h>

struct row {
    const char *name;
    double compute, memory; /* shares of the peaks; compute < 0: times the conv efficiency */
};

enum { ROW_CONV, ROW_CONV_1X1, ROW_CONV_NARROW, ROW_CONV_DILATED, ROW_BN, ROW_ELTWISE, ROW_MOVE, ROW_LOSS, ROWS };

static const struct row rows[ROWS] = {
    [ROW_CONV] = { "conv2d 3x3 and up", -1.0, 0.7 },
    [ROW_CONV_1X1] = { "conv2d 1x1", -0.8, 0.7 },
    [ROW_CONV_NARROW] = { "conv2d narrow", -0.25, 0.7 },
    [ROW_CONV_DILATED] = { "conv2d dilated", -0.6, 0.7 },
    [ROW_BN] = { "batchnorm", 0.5, 0.8 },
    [ROW_ELTWISE] = { "eltwise", 0.5, 0.8 },
    [ROW_MOVE] = { "data movement", 0.5, 0.7 },
    [ROW_LOSS] = { "loss", 0.3, 0.5 },
};

/* Where a platform gives nothing: the study's V100 SXM2 (NVIDIA's datasheet), and a
 * kernel's launch cost on the device. */
#define DEFAULT_FP32_FLOPS 15.7e12
#define DEFAULT_MEM_BYTES_PER_S 900e9
#define DEFAULT_LAUNCH_S 5e-6

void sim_device_from(struct sim_device *d, const struct tb_link *link, const struct tb_accel *accel)
{
    memset(d, 0, sizeof *d);
    d->fp32_flops = link && link->accel_flops > 0 ? link->accel_flops : DEFAULT_FP32_FLOPS;
    d->conv_efficiency = link && link->accel_efficiency > 0 ? link->accel_efficiency : TB_ACCEL_EFFICIENCY_DEFAULT;
    d->mem_bytes_per_s = accel && accel->mem_bytes_per_s > 0 ? accel->mem_bytes_per_s : DEFAULT_MEM_BYTES_PER_S;
    d->fp16_flops = accel ? accel->fp16_flops : 0;
    d->bf16_flops = accel ? accel->bf16_flops : 0;
    d->launch_s = DEFAULT_LAUNCH_S;
}

static int row_of(const struct tb_op *op)
{
    switch (op->kind) {
    case TB_OP_CONV2D: {
        const struct tb_conv2d_params *p = &op->p.conv;
        if (p->dil_h > 1 || p->dil_w > 1)
            return ROW_CONV_DILATED;
        if ((double)op->in[0].shape.c * p->kh * p->kw < 64)
            return ROW_CONV_NARROW;
        return p->kh == 1 && p->kw == 1 ? ROW_CONV_1X1 : ROW_CONV;
    }
    case TB_OP_BATCHNORM:
        return ROW_BN;
    case TB_OP_RELU:
    case TB_OP_SIGMOID:
    case TB_OP_ADD:
    case TB_OP_MUL:
    case TB_OP_DROPOUT:
        return ROW_ELTWISE;
    case TB_OP_MAXPOOL:
    case TB_OP_GLOBAL_AVGPOOL:
    case TB_OP_RESIZE:
    case TB_OP_CONCAT:
        return ROW_MOVE;
    default:
        return ROW_LOSS; /* the losses, the label ops, the dual task */
    }
}

void sim_op_estimate(const struct sim_device *d, const struct tb_op *op, bool backward, uint32_t grads,
                     struct sim_estimate *e)
{
    memset(e, 0, sizeof *e);
    struct tb_op_cost c;
    tb_op_cost(op, grads, &c);
    const double flops = backward ? c.bwd_flops : c.fwd_flops, bytes = backward ? c.bwd_bytes : c.fwd_bytes;
    const struct row *r = &rows[row_of(op)];
    e->row = r->name;
    if (backward && flops == 0 && bytes == 0)
        return; /* no backward: no kernel */
    const double share = r->compute < 0 ? -r->compute * d->conv_efficiency : r->compute;
    e->compute_s = flops > 0 && d->fp32_flops > 0 ? flops / (d->fp32_flops * share) : 0;
    e->memory_s = bytes > 0 && d->mem_bytes_per_s > 0 ? bytes / (d->mem_bytes_per_s * r->memory) : 0;
    e->memory_bound = e->memory_s > e->compute_s;
    /* a convolution's backward runs a kernel per gradient (data, weight) */
    const int kernels = backward && op->kind == TB_OP_CONV2D && (grads & 3u) == 3u ? 2 : 1;
    e->seconds = (e->memory_bound ? e->memory_s : e->compute_s) + kernels * d->launch_s;
}
