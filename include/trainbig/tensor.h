/* trainbig/tensor.h: tensor shapes and element types, and the tensors backends compute on.
 *
 * Every tensor is four-dimensional, (n, c, h, w): a batch of n images of c channels of
 * h rows of w columns. A vector of C values is (1, C, 1, 1); a scalar (1, 1, 1, 1); a
 * convolution weight (out channels, in channels, kernel h, kernel w).
 *
 * The canonical layout, the one the core reads and writes (inputs, losses, checkpoints),
 * is NCHW: element (n, c, y, x) is at ((n * C + c) * H + y) * W + x, as in PyTorch. In
 * device memory a tensor is in whatever layout its backend computes fastest in; the core
 * never looks inside device memory, it moves it as opaque bytes (swapping) and converts
 * through the backend's tensor_write/tensor_read. */
#ifndef TRAINBIG_TENSOR_H
#define TRAINBIG_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types. The 16-bit floats are uint16_t bit patterns (trainbig/half.h converts
 * them); which ops take them, trainbig/ops.h says ("float"). */
enum tb_dtype {
    TB_F32 = 1,  /* float: activations, weights, gradients */
    TB_U8 = 2,   /* uint8_t: label maps (255 = ignore), dropout masks */
    TB_BF16 = 3, /* bfloat16: float's sign, exponent and top 7 fraction bits */
    TB_F16 = 4,  /* IEEE 754 binary16: 5 exponent bits, 10 fraction bits */
};

struct tb_shape {
    int32_t n, c, h, w;
};

/* What a tensor is, without its memory. */
struct tb_tensor_desc {
    enum tb_dtype dtype;
    struct tb_shape shape;
};

/* A tensor in device memory. `data` comes from the backend's mem_alloc on `device` and
 * holds tensor_bytes(desc) bytes; it is owned by whoever allocated it (the core's memory
 * manager), never by the backend's ops. */
struct tb_tensor {
    struct tb_tensor_desc desc;
    int device;
    void *data;
};

/* Elements of a shape (n*c*h*w) and bytes of a dtype. */
static inline size_t tb_shape_elems(struct tb_shape s)
{
    return (size_t)s.n * (size_t)s.c * (size_t)s.h * (size_t)s.w;
}

static inline size_t tb_dtype_size(enum tb_dtype t)
{
    return t == TB_F32 ? 4 : t == TB_BF16 || t == TB_F16 ? 2 : 1;
}

/* The dtype's name in messages and configuration ("f32", "u8", "bf16", "f16"); "?" for a
 * value that is none of them. */
static inline const char *tb_dtype_name(enum tb_dtype t)
{
    return t == TB_F32 ? "f32" : t == TB_U8 ? "u8" : t == TB_BF16 ? "bf16" : t == TB_F16 ? "f16" : "?";
}

/* Whether the dtype is a floating-point one. */
static inline int tb_dtype_is_float(enum tb_dtype t)
{
    return t == TB_F32 || t == TB_BF16 || t == TB_F16;
}

static inline int tb_shape_eq(struct tb_shape a, struct tb_shape b)
{
    return a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w;
}

#ifdef __cplusplus
}
#endif
#endif
