/* backends/cuda/cuda_kernels.h: the CUDA backend's own kernels (cuda_kernels.cu), for the
 * ops and updates cuDNN and cuBLAS do not cover.
 *
 * Every tensor is in device memory in the canonical NCHW layout (the CUDA backend keeps
 * tensors NCHW, so tensor_write and tensor_read are plain copies). Each launcher queues its
 * kernels on stream `s` and returns cudaGetLastError(): it never synchronises, and it never
 * allocates; scratch space comes from the caller (the backend's allocator, so the memory
 * manager sees it). Numerics follow the CPU backend, the reference (plugins/backends/cpu):
 * float arithmetic per element, sums of losses in double, deterministic where it is cheap.
 *
 * Errors a user can cause (a label >= K that is not ignore_label) are not known on the
 * host when the launcher returns: the kernels record the first one they meet in `bad`, a
 * device int32_t[4] the caller zeroes before: bad[0] = 1 when set, then image n, pixel
 * index p (y * W + x) and the label, so the caller can name the sample and pixel after a
 * copy back. Several bad pixels: any one of them may be reported. */
#ifndef TB_CUDA_KERNELS_H
#define TB_CUDA_KERNELS_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- updates and elementwise ------------------------------------------------------ */

/* x[i] = v for i < n. */
cudaError_t tb_cuk_fill(cudaStream_t s, float *x, size_t n, float v);
/* PyTorch's SGD (dampening 0, no Nesterov): d = g + wd * p; m = momentum * m + d; p -= lr * m. */
cudaError_t tb_cuk_sgd(cudaStream_t s, float *p, const float *g, float *m, size_t n, float lr, float momentum,
                       float wd);
/* y = a + b. */
cudaError_t tb_cuk_add(cudaStream_t s, const float *a, const float *b, float *y, size_t n);
/* x (N,C,H,W) times g (N,gc,H,W), gc == C or 1 (broadcast over channels); hw = H*W. */
cudaError_t tb_cuk_mul_forward(cudaStream_t s, const float *x, const float *g, float *y, int n, int c, int gc,
                               size_t hw);
/* dx = dy * g (skipped when dx is NULL); dg = dy * x, summed over channels when gc == 1
 * (skipped when dg is NULL). */
cudaError_t tb_cuk_mul_backward(cudaStream_t s, const float *x, const float *g, const float *dy, float *dx, float *dg,
                                int n, int c, int gc, size_t hw);

/* Dropout in training (the caller copies x to y for inference). mask is u8, (N,C,1,1) when
 * channelwise else (N,C,H,W); element (n, c[, y, x]) is kept when the CPU backend's
 * tb_cpu_uniform(seed, step, op_id, the element's canonical NCHW index; for channelwise
 * its index n * C + c in the (N,C,1,1) mask) >= p; y = x * mask / (1 - p). */
cudaError_t tb_cuk_dropout_forward(cudaStream_t s, const float *x, float *y, uint8_t *mask, int n, int c, size_t hw,
                                   float p, int channelwise, uint64_t seed, uint64_t step, uint32_t op_id);
/* dx = dy * mask / (1 - p). */
cudaError_t tb_cuk_dropout_backward(cudaStream_t s, const float *dy, const uint8_t *mask, float *dx, int n, int c,
                                    size_t hw, float p, int channelwise);

/* ---- pooling and resizing ----------------------------------------------------------- */

/* Max pooling, padding never wins; y (N,C,oh,ow). */
cudaError_t tb_cuk_maxpool_forward(cudaStream_t s, const float *x, float *y, int n, int c, int h, int w, int oh, int ow,
                                   int k, int stride, int pad);
/* dx (overwritten): each dy goes to the first maximum of its window in row-major order
 * (the maximum recomputed from x; y is the forward output, for a cheap equality test). */
cudaError_t tb_cuk_maxpool_backward(cudaStream_t s, const float *x, const float *y, const float *dy, float *dx, int n,
                                    int c, int h, int w, int oh, int ow, int k, int stride, int pad);
/* y (N*C values) = mean over hw of x; backward dx = dy / hw broadcast. nc = N*C. */
cudaError_t tb_cuk_avgpool_forward(cudaStream_t s, const float *x, float *y, size_t nc, size_t hw);
cudaError_t tb_cuk_avgpool_backward(cudaStream_t s, const float *dy, float *dx, size_t nc, size_t hw);
/* Bilinear resize of nc planes h x w to oh x ow, align_corners as in PyTorch's
 * F.interpolate (and the CPU backend's cpu_resize.c); backward overwrites dx. */
cudaError_t tb_cuk_resize_forward(cudaStream_t s, const float *x, float *y, size_t nc, int h, int w, int oh, int ow,
                                  int align_corners);
cudaError_t tb_cuk_resize_backward(cudaStream_t s, const float *dy, float *dx, size_t nc, int h, int w, int oh, int ow,
                                   int align_corners);

/* ---- losses and labels (semantics: trainbig/ops.h and cpu_loss.c, cpu_labels.c) ------ */

/* Bytes of scratch the loss launchers below need for these sizes (hw = H*W). */
size_t tb_cuk_loss_scratch_bytes(int n, int k, size_t hw);
/* softmax cross-entropy: logits (N,K,H,W), labels (N,1,H,W), weights (N,K) or NULL;
 * loss: one float. */
cudaError_t tb_cuk_softmax_ce_forward(cudaStream_t s, const float *logits, const uint8_t *labels, const float *weights,
                                      float *loss, int n, int k, size_t hw, int ignore_label, int per_image,
                                      void *scratch, int32_t *bad);
/* dlogits (overwritten) from dloss (one float in device memory). */
cudaError_t tb_cuk_softmax_ce_backward(cudaStream_t s, const float *logits, const uint8_t *labels, const float *weights,
                                       const float *dloss, float *dlogits, int n, int k, size_t hw, int ignore_label,
                                       int per_image, void *scratch);
/* class-balanced BCE with logits: logits and targets (N,1,H,W); loss: one float. */
cudaError_t tb_cuk_bce_forward(cudaStream_t s, const float *logits, const uint8_t *targets, float *loss, int n,
                               size_t hw, void *scratch);
cudaError_t tb_cuk_bce_backward(cudaStream_t s, const float *logits, const uint8_t *targets, const float *dloss,
                                float *dlogits, int n, size_t hw, void *scratch);
/* class_weights: labels (N,1,H,W) -> weights (N,K). */
cudaError_t tb_cuk_class_weights(cudaStream_t s, const uint8_t *labels, float *weights, int n, int k, size_t hw,
                                 int ignore_label, void *scratch, int32_t *bad);
/* mask_labels: out = label where x > threshold, ignore_label elsewhere. */
cudaError_t tb_cuk_mask_labels(cudaStream_t s, const uint8_t *labels, const float *x, uint8_t *out, size_t count,
                               float threshold, int ignore_label);
/* The dual-task regulariser (semantics: trainbig/ops.h TB_OP_DUAL_TASK, cpu_dual.c):
 * logits and sample (N,K,H,W), labels (N,1,H,W), loss one float; the noise from (seed,
 * step, op_id, NCHW index) as dropout's. Backward overwrites dlogits from dloss (one float
 * in device memory) and the forward's sample. Scratch: tb_cuk_dual_scratch_bytes. */
size_t tb_cuk_dual_scratch_bytes(int n, int k, int h, int w);
cudaError_t tb_cuk_dual_forward(cudaStream_t s, const float *logits, const uint8_t *labels, float *loss, float *sample,
                                int n, int k, int h, int w, float tau, int ignore_label, uint64_t seed, uint64_t step,
                                uint32_t op_id, void *scratch, int32_t *bad);
cudaError_t tb_cuk_dual_backward(cudaStream_t s, const uint8_t *labels, const float *sample, const float *dloss,
                                 float *dlogits, int n, int k, int h, int w, float tau, int ignore_label,
                                 void *scratch);

/* ---- data parallelism (cuda_comm.c, cuda_syncbn.c) ------------------------------------ */

/* x[i] *= alpha for i < n: the scale of a gradient all-reduce that NCCL's ncclAvg cannot do. */
cudaError_t tb_cuk_scale(cudaStream_t s, float *x, size_t n, float alpha);

/* Synchronised batch norm in training (semantics: trainbig/ops.h, cpu_batchnorm.c), x and
 * dy (N,C,H,W), hw = H*W, per-channel vectors of C floats. The launchers compute this
 * rank's per-channel sums in double into `red`, device memory the caller all-reduces
 * (sum over ranks) between the steps; each sum is a fixed set of block partials added in a
 * fixed order (no atomics), so it is the same bits run to run. `part` is scratch of at
 * least tb_cuk_bn_part_doubles(n, c, hw) doubles. */
size_t tb_cuk_bn_part_doubles(int n, int c, size_t hw);
/* Forward, step 1: red1[0..C) = sum of x per channel, red1[C] = N*H*W (C + 1 doubles). */
cudaError_t tb_cuk_bn_sums(cudaStream_t s, const float *x, int n, int c, size_t hw, double *part, double *red1);
/* Step 2, red1 all-reduced: with k = red1[c] / red1[C] (the global mean), red2[0..C) =
 * sum of x - k and red2[C..2C) = sum of (x - k)^2 per channel (2C doubles). */
cudaError_t tb_cuk_bn_devs(cudaStream_t s, const float *x, int n, int c, size_t hw, const double *red1, double *part,
                           double *red2);
/* Step 3, red2 all-reduced: P = red1[C], d = red2[c] / P, mean = k + d, var = red2[C + c] /
 * P - d^2 (biased); save_mean = mean, save_invstd = 1/sqrt(var + eps), the running
 * statistics updated with momentum (running_var with the unbiased var * P/(P-1)); scale
 * (C floats of scratch) = gamma * invstd. Then y = (x - save_mean) * scale + beta. */
cudaError_t tb_cuk_bn_forward(cudaStream_t s, const float *x, float *y, int n, int c, size_t hw, const double *red1,
                              const double *red2, const float *gamma, const float *beta, float *running_mean,
                              float *running_var, float *save_mean, float *save_invstd, float *scale, double eps,
                              double momentum);
/* Backward, step 1: red[0..C) = sum dy, red[C..2C) = sum dy * (x - save_mean), red[2C] =
 * N*H*W (2C + 1 doubles); dbeta and dgamma = sum dy * (x - mean) * invstd (each skipped
 * when NULL) from these local sums, as the contract wants them (this rank's share). */
cudaError_t tb_cuk_bn_grad_sums(cudaStream_t s, const float *x, const float *dy, const float *save_mean,
                                const float *save_invstd, int n, int c, size_t hw, double *part, double *red,
                                float *dgamma, float *dbeta);
/* Step 2, red all-reduced: dx = gamma * invstd * (dy - sum_dy / P - (x - mean) * invstd^2 *
 * sum_dy_xmu / P) with P = red[2C]; coef: 3C floats of scratch. */
cudaError_t tb_cuk_bn_backward_dx(cudaStream_t s, const float *x, const float *dy, const float *save_mean,
                                  const float *save_invstd, const float *gamma, const double *red, float *coef,
                                  float *dx, int n, int c, size_t hw);

#ifdef __cplusplus
}
#endif
#endif
