/* core/engine/op_kinds_internal.h: each op kind of trainbig/ops.h as one row (op_kinds.c):
 * its name, arity, input dtypes, which tensors carry gradients and which its backward
 * reads, its shape rule (op_rules.c), its cost and the parameters of its signature. The
 * SDK's tb_op_* functions (tb_op_kind_name, tb_op_outputs, tb_op_cost, tb_op_signature,
 * ...) answer from it, so do the builder, the executor and the backends' checks. */
#ifndef TB_CORE_OP_KINDS_INTERNAL_H
#define TB_CORE_OP_KINDS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <trainbig/ops.h>

enum { TB_OP_DTYPES = 5 };

/* In a row's dtype list: the op's float dtype (trainbig/ops.h, "float"): f32, bf16 or f16,
 * the same for every input so marked, which is the first one's. Not a tensor's dtype. */
#define TB_OP_FLOAT ((enum tb_dtype)0x100)

/* What the graph builder does to an op's float inputs before it makes the op ([train]
 * precision; graph_ops.c applies it, trainbig.ini(5) tables it per kind). Whatever the
 * precision, an input of a 16-bit dtype where the row says F32 is cast to f32, and inputs
 * of the float class that differ in dtype are all cast to f32 (the widest). */
enum tb_autocast {
    TB_AUTOCAST_FOLLOW = 0, /* runs in its inputs' dtype */
    TB_AUTOCAST_LOW,        /* at bf16 or fp16, its float-class inputs (parameters too) cast to it */
    TB_AUTOCAST_F32,        /* f32 only: its inputs cast to f32 */
};

/* A mask over an op's inputs or outputs (bit i = index i); TB_OP_ALL: every one it has. */
#define TB_OP_ALL UINT32_MAX

struct tb_op_row {
    const char *name;
    uint32_t min_in, max_in;
    /* input i's dtype (TB_OP_FLOAT: the op's float dtype); inputs past the list take the
     * last one listed (concat's) */
    enum tb_dtype dtype[TB_OP_DTYPES];
    uint32_t grad_in, grad_out; /* which inputs and outputs carry a gradient */
    uint32_t bwd_in, bwd_out;   /* which forward tensors its backward reads */
    /* Its outputs from its inputs and parameters (op_rules.c): how many, or -1 with why. */
    int (*shape)(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size);
    /* Its FLOPs and the bytes its passes move beyond reading and writing each tensor
     * once (c->fwd_bytes holds that already), grads as tb_op_cost's. */
    void (*cost)(const struct tb_op *op, uint32_t grads, struct tb_op_cost *c);
    /* The parameters that change its work, as " key=value..." for its signature; NULL
     * where none do. */
    void (*params)(const struct tb_op *op, char *buf, size_t size);
    enum tb_autocast autocast;
};

/* The dtype a row lists for input i (TB_OP_FLOAT: the op's float dtype); inputs past the
 * list take the last one listed (concat's). */
enum tb_dtype tb_op_row_dtype(const struct tb_op_row *k, uint32_t i);

/* The row of kind, or NULL for no such kind. */
const struct tb_op_row *tb_op_row(enum tb_op_kind kind);

/* The shape rules (op_rules.c), each named in the rows that use it. A rule writes what is
 * wrong without the kind's name, which tb_op_outputs puts first. */
int tb_op_shape_conv2d(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size);
int tb_op_shape_batchnorm(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size);
int tb_op_shape_same_as_x(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size);
int tb_op_shape_maxpool(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size);
int tb_op_shape_global_avgpool(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size);
int tb_op_shape_resize(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size);
int tb_op_shape_concat(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size);
int tb_op_shape_add(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size);
int tb_op_shape_mul(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size);
int tb_op_shape_dropout(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size);
int tb_op_shape_softmax_ce(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size);
int tb_op_shape_bce_logits(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size);
int tb_op_shape_class_weights(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size);
int tb_op_shape_mask_labels(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size);
int tb_op_shape_dual_task(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size);
int tb_op_shape_cast(const struct tb_op *op, struct tb_tensor_desc *out, char *why, size_t size);

/* op_rules.c's helpers: "2x3x5x7" in one of four rotating buffers (a message may hold
 * several); whether every dimension is >= 1. */
const char *tb_op_dims(struct tb_shape s);
bool tb_op_shape_positive(struct tb_shape s);

#endif
