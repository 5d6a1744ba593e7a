/* trainbig/ops.h: the operators every backend implements, forward and backward.
 *
 * An op is described by a struct tb_op: its kind, the descriptions of its inputs and
 * outputs, and its parameters. The graph builder fills it; a backend prepares it once
 * (op_prepare: pick algorithms, build primitives) and then runs it every step
 * (op_forward, op_backward) on tensors of exactly the described shapes.
 *
 * For each kind below: inputs in order, outputs in order, and which forward tensors the
 * backward pass reads (the executor keeps exactly those alive until then, and frees the
 * rest at their last forward use; swap policies plan on this). In backward, din[i] is the
 * gradient of input i, written (not accumulated) by the op, or has data == NULL when it is
 * not wanted; dout[j] is the gradient of output j, data == NULL for outputs that carry no
 * gradient (marked "no grad"). A gradient has its tensor's description, dtype included.
 *
 * Dtypes. A tensor not marked otherwise is f32. Those marked "float" are f32, bf16 or f16:
 * all of one op's "float" tensors have one dtype (the op's float dtype; the graph builder
 * inserts casts where a network mixes them). An op of a 16-bit float dtype computes as
 * its f32 definition on its inputs' exact values, accumulating in f32, and rounds each
 * result it writes to its dtype once (nearest, ties to even; trainbig/half.h): a backend
 * may sum in another order, as at f32. A backend says which float dtypes its ops take
 * (tb_backend_ops.dtypes); every backend takes f32.
 *
 * Numerics follow PyTorch's definitions, so a network here and its PyTorch twin agree. */
#ifndef TRAINBIG_OPS_H
#define TRAINBIG_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <trainbig/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tb_op_kind {
    /* in: x (N,C,H,W), weight (O,C,KH,KW), [bias (1,O,1,1) when has_bias]; all float
     * out: y (N,O,OH,OW) float, OH = (H + 2*pad_h - dil_h*(KH-1) - 1) / stride_h + 1 (same for W)
     * backward reads: x, weight */
    TB_OP_CONV2D = 1,
    /* in: x (N,C,H,W) float, gamma (1,C,1,1), beta (1,C,1,1), running_mean (1,C,1,1) no
     *     grad, running_var (1,C,1,1) no grad
     * out: y (N,C,H,W) float, save_mean (1,C,1,1) no grad, save_invstd (1,C,1,1) no grad
     * training: normalises with the batch statistics (biased variance), writes them to
     * save_mean and save_invstd = 1/sqrt(var + eps), and updates the running statistics in
     * place: r = (1 - momentum) * r + momentum * batch (unbiased variance for running_var).
     * inference: normalises with the running statistics; save_* are left untouched.
     * backward (training only) reads: x, gamma, save_mean, save_invstd */
    TB_OP_BATCHNORM,
    /* in: x float; out: y = max(x, 0) float; backward reads: y */
    TB_OP_RELU,
    /* in: x; out: y = 1 / (1 + exp(-x)); backward reads: y (f32 only: y * (1 - y) from a
     * 16-bit y would lose the gradient where y nears 1) */
    TB_OP_SIGMOID,
    /* in: x (N,C,H,W) float; out: y (N,C,OH,OW) float with padding that never wins (as -inf);
     * OH = (H + 2*pad - k) / stride + 1, floor; backward reads: x, y
     * (the gradient goes to the first maximum in row-major window order) */
    TB_OP_MAXPOOL,
    /* in: x (N,C,H,W) float; out: y (N,C,1,1) float, the mean over H and W; backward reads: nothing */
    TB_OP_GLOBAL_AVGPOOL,
    /* in: x (N,C,H,W) float; out: y (N,C,out_h,out_w) float, bilinear; align_corners as in PyTorch's
     * F.interpolate; backward reads: nothing */
    TB_OP_RESIZE,
    /* in: x0..x(k-1) float, k >= 2, equal N, H, W; out: y float with C = sum of their C, in order;
     * backward reads: nothing */
    TB_OP_CONCAT,
    /* in: a, b float of equal shape; out: y = a + b float; backward reads: nothing */
    TB_OP_ADD,
    /* in: x (N,C,H,W), g (N,C,H,W) or (N,1,H,W) broadcast over C, both float;
     * out: y = x * g float;
     * backward reads: x, g */
    TB_OP_MUL,
    /* in: x (N,C,H,W) float; out: y (N,C,H,W) float, mask (N,C,1,1) u8 when channelwise (whole feature
     * maps dropped), else (N,C,H,W) u8; no grad.
     * training: mask = 1 with probability 1-p, y = x * mask / (1-p); the mask is a pure
     * function of (seed, step, element index), so runs are reproducible.
     * inference: y = x, mask untouched. backward reads: mask */
    TB_OP_DROPOUT,
    /* in: logits (N,K,H,W), labels (N,1,H,W) u8 no grad, [weights (N,K,1,1) no grad when
     * weighted: class weights per image]
     * out: loss (1,1,1,1).
     * With w = weights[n, label] (1 when not weighted) over the pixels whose label is not
     * ignore_label, nll = -log softmax(logits)[label]:
     *   per_image:  loss = sum_n (sum_p w * nll) / (sum_p w)   (an image with no counted
     *               pixel adds 0)
     *   otherwise:  loss = (sum_{n,p} w * nll) / (sum_{n,p} w)  (PyTorch's weighted mean;
     *               0, not PyTorch's 0/0 = NaN, when no pixel counts)
     * Labels >= K other than ignore_label are an error. backward reads: logits, labels,
     * weights */
    TB_OP_SOFTMAX_CE,
    /* in: logits (N,1,H,W), targets (N,1,H,W) u8: 0, 1, or anything else = ignored; no grad
     * out: loss (1,1,1,1).
     * Class-balanced over the whole batch: with P positives and Q negatives, a positive
     * weighs Q/(P+Q), a negative P/(P+Q), an ignored pixel 0; loss = mean over all N*H*W
     * pixels of weight * BCE-with-logits (PyTorch's binary_cross_entropy_with_logits with
     * a weight tensor). backward reads: logits, targets */
    TB_OP_BCE_LOGITS,
    /* in: labels (N,1,H,W) u8, no grad; out: weights (N,K,1,1) f32, no grad.
     * Per-image class weights (G-SCNN's segmentation loss): with freq_c the share of image
     * n's counted pixels (label != ignore_label) that are labelled c, weight = 1 +
     * (1 - freq_c) for the classes present in the image and 1 for the others (all 1 for an
     * image with no counted pixel). Labels >= K other than ignore_label are an error.
     * No backward. */
    TB_OP_CLASS_WEIGHTS,
    /* in: labels (N,1,H,W) u8, x (N,1,H,W) f32, both no grad; out: (N,1,H,W) u8, the label
     * where x > threshold and ignore_label elsewhere (the targets of G-SCNN's
     * edge-attention loss). No backward. */
    TB_OP_MASK_LABELS,
    /* in: logits (N,K,H,W), labels (N,1,H,W) u8 no grad; H, W >= 3
     * out: loss (1,1,1,1), sample (N,K,H,W) no grad.
     * G-SCNN's dual-task regulariser (Takikawa et al., ICCV 2019; the reference's
     * DualTaskLoss). Where the label is ignore_label the logits count as 0 and the label as
     * class 0. sample = softmax over K of (logits + g) / tau, with Gumbel noise
     * g = -log(1e-10 - log(u + 1e-10)) and u = a uniform number that is a pure function of
     * (seed, step, op id, the element's NCHW index), as dropout's mask. For a map E (N,K,H,W),
     * mag(E) = sqrt(Ox^2 + Oy^2 + 1e-6) / its maximum over the whole tensor, where Ox, Oy
     * are the central differences 0.5 * (S[x+1] - S[x-1]) (zero beyond the border) of
     * S = E smoothed per plane by the triangle filter [1 2 3 4 5 4 3 2 1] / 25 along W,
     * then along H (symmetric padding, the edge sample repeated). With p = mag(sample),
     * q = mag(one-hot labels), d = |p - q|:
     *   loss = 0.5 * sum(d [p >= 1e-8]) / (count(p >= 1e-8) + 1e-10)
     *        + 0.5 * sum(d [q >= 1e-8]) / (count(q >= 1e-8) + 1e-10)
     * over every element; the masks carry no gradient, the maximum does (shared equally by
     * tied maxima, as PyTorch's max()). For finite logits the masks hold every element (the
     * 1e-6 under the root keeps each magnitude at least 1e-3 of a largest under 0.71); a
     * NaN (or +inf) logit makes the loss NaN, and the gradient NaN wherever the label is not
     * ignored. Labels >= K other than ignore_label are an error.
     * backward reads: labels, sample */
    TB_OP_DUAL_TASK,
    /* in: x float; out: y, x converted to the float dtype p.cast.dtype (nearest, ties to
     * even, overflow to infinity, NaN kept: trainbig/half.h; to x's own dtype, a copy).
     * backward: dx = dy converted to x's dtype; backward reads: nothing */
    TB_OP_CAST,
    TB_OP_KIND_COUNT
};

#define TB_OP_MAX_IN 8
#define TB_OP_MAX_OUT 3

struct tb_conv2d_params {
    int32_t kh, kw;
    int32_t stride_h, stride_w;
    int32_t pad_h, pad_w;
    int32_t dil_h, dil_w; /* 1 = dense */
    int32_t has_bias;
};

struct tb_batchnorm_params {
    float eps;      /* PyTorch default 1e-5 */
    float momentum; /* PyTorch default 0.1 */
    int32_t training;
    /* Training only: the batch statistics (and backward's sums) are over every
     * rank's batch together (synchronised batch norm, through the backend's attached
     * comm); gamma's and beta's gradients stay this rank's share. Without an attached comm
     * of more than one rank it is plain batch norm. */
    int32_t sync;
};

struct tb_pool_params {
    int32_t k, stride, pad;
};

struct tb_resize_params {
    int32_t out_h, out_w;
    int32_t align_corners;
};

struct tb_dropout_params {
    float p; /* probability of dropping, 0 <= p < 1 */
    int32_t channelwise;
    int32_t training;
    uint64_t seed;
};

struct tb_ce_params {
    int32_t ignore_label; /* usually 255 */
    int32_t weighted;     /* the weights input is present */
    int32_t per_image;
};

struct tb_label_params {
    int32_t ignore_label; /* usually 255 */
    float threshold;      /* mask_labels */
    int32_t classes;      /* class_weights: K, the weights' channels */
};

struct tb_cast_params {
    int32_t dtype; /* enum tb_dtype of the output: TB_F32, TB_BF16 or TB_F16 */
};

struct tb_dual_params {
    float tau;            /* the Gumbel-softmax temperature, > 0 (the reference's 0.5) */
    int32_t ignore_label; /* usually 255 */
    uint64_t seed;        /* mixed into the noise with the step, as dropout's seed */
};

struct tb_op {
    enum tb_op_kind kind;
    uint32_t id; /* unique within a graph: part of dropout's seed, and in messages */
    uint32_t nin, nout;
    struct tb_tensor_desc in[TB_OP_MAX_IN];
    struct tb_tensor_desc out[TB_OP_MAX_OUT];
    union {
        struct tb_conv2d_params conv;
        struct tb_batchnorm_params bn;
        struct tb_pool_params pool;
        struct tb_resize_params resize;
        struct tb_dropout_params dropout;
        struct tb_ce_params ce;
        struct tb_label_params label;
        struct tb_dual_params dual;
        struct tb_cast_params cast;
    } p;
};

/* "conv2d", "batchnorm", ... for messages; NULL for an unknown kind. Static storage. */
const char *tb_op_kind_name(enum tb_op_kind kind);

/* The forward tensors an op's backward reads, as bit masks over its inputs and outputs
 * (bit i = index i): the "backward reads" line of each kind above. */
void tb_op_backward_reads(const struct tb_op *op, uint32_t *inputs, uint32_t *outputs);

/* The op contract: each kind's arity, dtypes and shape rule above, in one table
 * that the graph builder and the backends share.
 * tb_op_outputs: the outputs an op of op->kind makes from op->in[0..nin-1] and op->p,
 * into out[0..*nout-1]; op->out and op->nout are not read. Returns 0, or -1 with why
 * filled ("mul: g 2x2x5x7 must be 2x3x5x7 or 2x1x5x7 to multiply x 2x3x5x7").
 * tb_op_check: the same, and op->out and op->nout equal to what the rule gives: what a
 * backend's op_prepare checks before anything else. */
int tb_op_outputs(const struct tb_op *op, struct tb_tensor_desc out[TB_OP_MAX_OUT], uint32_t *nout, char *why,
                  size_t why_size);
int tb_op_check(const struct tb_op *op, char *why, size_t why_size);

/* What an op costs, from its shapes: the arithmetic and the memory traffic of
 * its forward and of its backward, for a model of a device to price it (a multiply-add
 * counts 2 FLOPs; bytes: each tensor a kernel must read or write, once per pass over it).
 * grads: bit i set when input i's gradient is wanted (the backward computes only those).
 * A kind without backward has bwd_* 0. op->out must be set as tb_op_check requires. */
struct tb_op_cost {
    double fwd_flops, fwd_bytes;
    double bwd_flops, bwd_bytes;
};
void tb_op_cost(const struct tb_op *op, uint32_t grads, struct tb_op_cost *c);

/* An op's signature: one line naming what decides its running time, its kind,
 * the parameters that change its work and its tensors' shapes, and the pass, as in
 *   conv2d k=3x3 s=1x1 p=1x1 d=1x1 bias=0 in=2x64x56x56;64x64x3x3 out=2x64x56x56 forward
 * (u8 after a shape that is not f32). Two ops with one signature take the same time on a
 * device: traces name each op's with it, and the sim backend matches measured times by
 * it ([backend] sim_profile). No commas or quotes. Writes at most size bytes (with the
 * terminating NUL) and returns the length the whole line has, as snprintf. */
size_t tb_op_signature(const struct tb_op *op, bool backward, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
