/* backends/cpu/cpu_conv_internal.h: a convolution's state, shared by its preparation
 * (cpu_conv_prepare.c: each pass's oneDNN primitive and the layouts it takes) and its
 * passes (cpu_conv.c: operands moved into those layouts and the primitives run). The
 * ways a pass can run are cpu_conv.c's top comment. */
#ifndef TB_CPU_CONV_INTERNAL_H
#define TB_CPU_CONV_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <oneapi/dnnl/dnnl.h>

#include "cpu_shared.h"

/* One primitive and what running it needs. */
struct prim {
    dnnl_primitive_t p;      /* NULL when not needed (e.g. no reorder) */
    dnnl_memory_desc_t spad; /* its scratchpad (user mode) */
    dnnl_memory_t spad_mem;  /* a memory object for it, handle set per run */
};

enum pass_kind { FWD, BWD_DATA, BWD_WEIGHTS, PASSES };
enum mode { STORED, PHASES, ANY };

/* An activation a pass reads or writes: in the layout the primitive takes (md), which is
 * the stored one unless the pass runs in ANY mode and oneDNN chose another: then it is
 * `moved`, reordered through scratch (to: stored -> md before, from: md -> stored after). */
struct operand {
    dnnl_memory_desc_t md;
    bool moved;
    struct prim to, from;
    dnnl_memory_t mem; /* describes md; handle: the tensor, or scratch when moved */
};

struct pass {
    struct prim p;
    enum mode mode;
    /* forward: src (x), dst (y); backward-data: diff_dst, diff_src; backward-weights: src,
     * diff_dst */
    struct operand a, b;
    dnnl_memory_desc_t w_md; /* the weights (or their gradient) in the primitive's layout */
    struct prim w_reorder;   /* user -> w_md (forward, backward-data); w_md -> user (backward-weights) */
    dnnl_memory_t w_mem;
    char impl[40];
};

/* Everything an op needs, owned by the state and freed by conv_release. Memory objects own
 * no data: their handles are set to the op's tensors and to scratch before each run. */
struct conv_state {
    uint32_t op_id;
    bool has_bias;
    struct pass pass[PASSES];
    dnnl_memory_desc_t x_md, y_md, w_user_md; /* the stored layouts */
    dnnl_memory_t x_mem, y_mem, w_user, bias;
    /* Centre tap only (see the top of the file): the passes are 1x1 and take the weights'
     * centre slice, w_user_md viewed as (O, I, 1, 1) at the centre; w_bytes: the whole
     * weight gradient, zeroed before its centre is written. */
    bool centre;
    size_t w_bytes;
    /* Phases: x and y shapes, dilation, phase image size, the phase batch (nChwBc). */
    struct tb_shape x, y;
    size_t es; /* bytes of an element: the op's float dtype (f32, bf16, f16) */
    int blk, ph_dh, ph_dw, ph_h, ph_w;
    dnnl_memory_desc_t ph_x_md, ph_y_md;
    struct tb_cpu_reorders *counts; /* the backend's counters */
};

/* cpu_conv_prepare.c: the op's passes set up (TB_OP_CONV2D's prepare) and released; a
 * oneDNN status as text. */
int tb_cpu_conv_prepare(struct tb_cpu *cpu, const struct tb_op *op, void **state, struct tb_err *err);
void tb_cpu_conv_release(void *state);
const char *tb_cpu_conv_status(dnnl_status_t st);

#endif
