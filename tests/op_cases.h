/* tests/op_cases.h: the op cases every backend runs (include after opcheck.h).
 *
 * tests/op_cases.c holds one list of named cases covering every op kind of the contract
 * (trainbig/ops.h, core/engine/op_kinds.c): each an op with its shapes and parameters, its
 * NCHW host inputs, the gradients of its outputs, the tolerances of its cuda/cpu parity
 * and of its finite differences. check_ops runs every case on the cpu backend (backward
 * against central finite differences; two runs, and runs on 1, 2 and 3 threads, give the
 * same bits); check_cuda runs every case on cuda and cpu and compares everything written.
 * A new op gets all of that by adding its cases there: check_ops fails while any kind of
 * the contract has none.
 *
 * Parity tolerances. An element passes when |cuda - cpu| <= REL * |cpu| + REL_MAX * max|cpu|,
 * the maximum taken over the whole tensor (so that cancellation in one element does not
 * demand more relative precision than the computation has). u8 tensors (dropout masks,
 * labels) are always compared exactly. The named tolerances, and why: */
#ifndef TB_TESTS_OP_CASES_H
#define TB_TESTS_OP_CASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <trainbig/ops.h>

struct tol {
    double rel;     /* of |cpu| */
    double rel_max; /* of max |cpu| over the tensor */
};

/* Copies, selections and single correctly rounded operations: relu, maxpool forward,
 * concat, add, mul forward, dropout in inference, inputs an op must leave alone. */
#define TOL_EXACT ((struct tol){ 0, 0 })
/* A few float operations per element whose order or fusion (FMA) may differ: dropout's
 * x * mask / (1 - p) against x * (1 / (1 - p)), mul's backward, avgpool's dy / HW, the
 * maxpool backward (each dx sums the dy of the windows it is the first maximum of: at most
 * 4 for 3x3 stride 2, 9 for stride 1), axpy and SGD (FMA on the GPU). Some float ulps
 * (2^-24 = 6e-8) of the element, or of the largest element where those few terms cancel. */
#define TOL_ULP ((struct tol){ 1e-6, 2e-6 })
/* Sigmoid: expf is within 2 ulps in CUDA's libdevice, 1 in glibc (cuDNN's activation may
 * use the faster __expf: ~10 ulps at |x| = 8); 1 / (1 + e) and the backward's
 * dy * y * (1 - y) add a few more. Each backend's backward reads its own forward y, and
 * (1 - y) loses relative precision as y -> 1, but not absolute: hence the term in
 * max|cpu| (~5e-7 for max|dx| ~ 0.25, 8 ulps of 1). */
#define TOL_TRANSCENDENTAL ((struct tol){ 4e-6, 2e-6 })
/* Bilinear resize: both backends compute the source coordinate (d + 0.5) * in / out - 0.5
 * and the weights in float, as PyTorch does, but an FMA contraction or another order moves
 * them by an ulp (~6e-8 times a coordinate <= 40 here); bilinear interpolation is continuous,
 * so even a floor() that falls the other way moves y by no more than that times
 * |x1 - x0| <= 2 (~5e-6 at most, ~1e-7 typically). The backward sums up to ~9 such terms
 * per element, in another order. */
#define TOL_RESIZE ((struct tol){ 0, 1e-5 })
/* Float sums of up to a few thousand terms in an unspecified order (cuDNN's reductions,
 * the CPU's blocked ones): global average pooling, the broadcast mul's dg (sum over C),
 * batch norm's dgamma and dbeta. The error of such a sum is ~sqrt(K) * 2^-24 * (its
 * typical partial sum), ~1e-6 of the largest element here; 1e-4 leaves room for tree
 * against sequential order and is still 1e4 below an O(1) indexing mistake. */
#define TOL_FSUM ((struct tol){ 0, 1e-4 })
/* conv2d, fp32 with TF32 off: each output a sum of C*KH*KW (<= 441) products, each weight
 * gradient of N*OH*OW (<= 2178), in algorithms cuDNN chooses (implicit GEMM, Winograd, FFT)
 * against oneDNN's: 1e-4 of the output's max abs (Winograd and FFT are the loosest, ~1e-5). */
#define TOL_CONV ((struct tol){ 0, 1e-4 })
/* Batch norm's y, dx, saved and running statistics: the statistics are sums over N*H*W
 * (<= 2178) values, in double on the CPU, in float in cuDNN; x is O(1) and centred, so the
 * mean and variance carry ~1e-6 relative error and y = (x - mean) * invstd * gamma + beta
 * a few 1e-6 of max|y|. */
#define TOL_BN ((struct tol){ 2e-5, 2e-5 })
/* The losses: per-pixel terms in float (expf, logf: a few ulps), summed in double on both
 * backends (cuda_kernels.h, cpu_loss.c): 1e-5 relative on the scalar loss. The logits'
 * gradient is (softmax - onehot) * w / count per element: ulps of the largest element. One
 * pixel counted wrongly moves every gradient by 1/count ~ 1e-3: far outside both. */
#define TOL_LOSS ((struct tol){ 1e-5, 0 })
#define TOL_LOSS_GRAD ((struct tol){ 1e-5, 1e-5 })
/* class_weights: pixel counts are exact, then 2 - count / total in float or double. */
#define TOL_CLASS_WEIGHTS ((struct tol){ 1e-6, 0 })

struct pcase;

/* Central finite differences of the case's forward against its backward on the cpu
 * backend (opcheck_gradients): step eps, at most `samples` elements of each input, and
 * |backward - numeric| <= atol + rtol * |numeric|. */
struct fd_spec {
    float eps;
    double atol, rtol;
    size_t samples;
    /* Makes the inputs checkable, or NULL: moves them off kinks and ties, where a
     * difference quotient straddles two pieces of the function. */
    void (*prep)(struct pcase *pc);
    /* Why finite differences cannot check this case, or NULL. */
    const char *skip;
};

/* An op, its host inputs and output gradients, and the tolerance of everything it writes. */
struct pcase {
    char name[128];
    struct tb_op op;
    void *in[TB_OP_MAX_IN];   /* NCHW host inputs in their dtypes, owned */
    void *dy[TB_OP_MAX_OUT];  /* output gradients of the outputs that carry one, owned */
    uint32_t no_din;          /* bit i: din[i] not wanted (data NULL), as for a network's first layer */
    uint32_t keeps_out;       /* bit j: output j is left as it was (inference: batch norm's save_*, dropout's mask) */
    uint32_t din_by_threads;  /* bit i: on the cpu backend din[i] depends on the thread count (how a sum is split) */
    int forwards;             /* forward runs before the backward (running statistics move each time) */
    uint64_t step;
    bool backward;
    struct tol out[TB_OP_MAX_OUT], din[TB_OP_MAX_IN], in_after[TB_OP_MAX_IN];
    struct fd_spec fd;
};

/* The list: op_case_count() cases, case k built by op_case_make (free it with pc_free). */
size_t op_case_count(void);
void op_case_make(size_t k, struct pcase *pc);

/* Building a case. pc_init: float inputs uniform in [-1, 1) (rounded to 16-bit ones'
 * dtypes), u8 inputs 0 (the caller sets them), output gradients uniform in [-1, 1); one
 * forward then a backward when any input
 * carries a gradient; every parity tolerance exact and the finite differences at their
 * defaults until the caller says otherwise. pc_set: input i becomes `host` (taken over).
 * pc_tol: every output's tolerance, and every input gradient's. */
void pc_init(struct pcase *pc, const char *name, const struct tb_op *op, uint64_t seed);
void pc_set(struct pcase *pc, uint32_t i, void *host);
void pc_tol(struct pcase *pc, struct tol out, struct tol din);
void pc_free(struct pcase *pc);
/* The case at a 16-bit float dtype: every input of its kind's float class (trainbig/ops.h,
 * "float") and every output gradient rounded to dt and made a dt tensor, the outputs as
 * the contract gives them; *ref: the case at f32 on the same (rounded) values, which the
 * 16-bit run must match within ops.h's rule. False (both untouched) for a kind with no
 * float class or with a dtype of its own (cast). */
bool pc_narrow(struct pcase *pc, enum tb_dtype dt, struct pcase *ref);
/* A float value of a host tensor of dtype d (f32, bf16, f16), element i. */
double pc_value(const void *host, enum tb_dtype d, size_t i);

/* The builders check_cuda's own tests use besides the list. */
struct conv_spec {
    int n, c, h, w, o, k, stride, pad, dil, bias;
};
extern const struct conv_spec conv_specs[];
extern const size_t conv_spec_count;
void conv_case(struct pcase *pc, const struct conv_spec *s, uint64_t seed, struct tol tol);
void bn_case(struct pcase *pc, int n, int c, int h, int w, int training, uint64_t seed);
void class_weights_case(struct pcase *pc);

/* Test data: n floats uniform in [lo, hi) from seed; an xorshift step; n labels in 0..k-1
 * with about one in ignore_every 255 (0: none). The caller frees the arrays. */
float *op_frand(size_t n, uint64_t seed, float lo, float hi);
uint64_t op_next_rand(uint64_t *s);
uint8_t *op_labels(size_t n, int k, int ignore_every, uint64_t seed);

/* Which inputs and outputs carry a gradient (trainbig/ops.h, as the executor decides);
 * the others get din/dout with data == NULL, as the executor passes them. */
bool in_has_grad(const struct tb_op *op, uint32_t i);
bool out_has_grad(const struct tb_op *op, uint32_t j);

/* What a run wrote, read back to the host (NCHW). */
struct result {
    void *out[TB_OP_MAX_OUT];
    void *in_after[TB_OP_MAX_IN];
    float *din[TB_OP_MAX_IN]; /* NULL where not computed */
};

/* Runs pc on b: outputs filled with junk (f32) and junk_u8 (u8), input gradients with
 * junk, so that an element a kernel forgets to write shows; forward(s), then backward with
 * pc's output gradients; everything read back. */
void op_case_run(struct test_backend *b, const struct pcase *pc, float junk, uint8_t junk_u8, struct result *r);
void result_free(struct result *r);

#endif
