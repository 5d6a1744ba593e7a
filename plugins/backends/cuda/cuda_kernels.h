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

#ifdef __cplusplus
}
#endif
#endif
