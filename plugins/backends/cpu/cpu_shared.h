/* backends/cpu/cpu_shared.h: the CPU backend's pieces, shared by its files (not exported:
 * the plugin's only symbol is trainbig_plugin).
 *
 * Device memory is host memory counted against a capacity, so out-of-memory and swapping
 * are real without a GPU. The compute stream runs each op on the calling thread as it is
 * submitted (with OpenMP inside), which is one valid schedule of CUDA's asynchronous
 * semantics; the two copy streams each have a thread that runs their queue in order.
 *
 * Layout of device tensors, decided by the tensor's description alone (so every op, the
 * conversions and the swap copies agree without being told): with B the channel block of
 * the ISA oneDNN runs on (16 with AVX-512, 8 below: tb_cpu.blk), a tensor whose C is a
 * multiple of B is channel-blocked, nChwBc: element (n, c, y, x) is at
 * (((n * C/B + c/B) * H + y) * W + x) * B + c % B, the layout oneDNN's convolutions
 * choose for themselves on that ISA, so activations go from one op to the next without
 * reorders. Any other tensor is NHWC: ((n * H + y) * W + x) * C + c (the image, 1-channel
 * maps, label maps, logits of 19 classes). A convolution weight (O, C, KH, KW) follows the
 * same rule (aBcdBb or OHWI); a (1, C, 1, 1) vector is C contiguous values either way.
 *
 * Most kernels need not know which: a blocked tensor is byte for byte an NHWC tensor of
 * shape (N * C/B, B, H, W) (tb_cpu_view), so spatial kernels (pooling, resizing) run on
 * that view unchanged, per-channel kernels (batch norm) map the view's channel back
 * (tb_cpu_view_chan), and equal-shape elementwise ops are flat loops. */
#ifndef TB_CPU_SHARED_H
#define TB_CPU_SHARED_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <trainbig/trainbig.h>

#include "../arena.h"

/* ------------------------------------------------------------------ memory (cpu_memory.c) */

/* Device memory: one arena reserved at create under a cap, or grown by segments without
 * one (cpu_memory.c); both are touched when reserved and unmapped only at fini. */
struct tb_cpu_memory {
    pthread_mutex_t lock;
    uint64_t capacity; /* the device_memory cap; UINT64_MAX = none */
    uint64_t peak, allocs, fails;
    struct tb_arena arena; /* in_use and reserved are its */
};

/* cap 0: no cap. Fails (err filled, nothing to fini) when the cap cannot be reserved. */
int tb_cpu_memory_init(struct tb_cpu_memory *m, uint64_t cap, struct tb_err *err);
/* Unmaps everything, blocks handed out included (the owner has stopped using them). */
void tb_cpu_memory_fini(struct tb_cpu_memory *m);
/* NULL when it does not fit (counted in fails). */
void *tb_cpu_memory_alloc(struct tb_cpu_memory *m, size_t bytes);
void tb_cpu_memory_free(struct tb_cpu_memory *m, void *ptr);
void tb_cpu_memory_stats(struct tb_cpu_memory *m, struct tb_mem_stats *out);
/* The arena's blocks (the backend's mem_blocks). */
size_t tb_cpu_memory_blocks(struct tb_cpu_memory *m, struct tb_mem_block *out, size_t max);
void tb_cpu_memory_reset_peak(struct tb_cpu_memory *m);

/* ------------------------------------------------------------------ streams (cpu_streams.c) */

struct tb_cpu_item; /* a queued copy, event record or event wait */

struct tb_cpu_stream {
    pthread_t thread;
    bool started;
    struct tb_cpu_item *head, *tail; /* the queue, run in order */
    uint64_t submitted, done;        /* items queued / finished */
    double bytes_per_s;              /* link emulation; 0 = full speed */
    bool copying;                    /* a copy is under way (the other direction shares the link) */
};

struct tb_cpu_streams {
    pthread_mutex_t lock;   /* guards queues, events and the throttle */
    pthread_cond_t changed; /* broadcast whenever an item finishes or is queued */
    bool stopping;
    double latency_s;
    double duplex_bytes_per_s;    /* each direction while both copy; 0 = as alone */
    struct tb_cpu_stream copy[2]; /* [0] = TB_STREAM_H2D, [1] = TB_STREAM_D2H */
};

/* Pinned host memory (cpu_host.c). tb_cpu_host_node checks a NUMA node: the node to
 * place blocks on, or -1 (left to the OS), with why saying which and why. Blocks from
 * tb_cpu_host_alloc go back through tb_cpu_host_free. */
int tb_cpu_host_node(int node, char *why, size_t why_size);
void *tb_cpu_host_alloc(int node, size_t bytes);
void tb_cpu_host_free(void *ptr);

int tb_cpu_streams_init(struct tb_cpu_streams *s, struct tb_err *err);
/* Waits for the queues to drain, then stops the threads. */
void tb_cpu_streams_fini(struct tb_cpu_streams *s);

struct tb_event *tb_cpu_event_create(struct tb_cpu_streams *s);
void tb_cpu_event_destroy(struct tb_cpu_streams *s, struct tb_event *ev);
int tb_cpu_event_record(struct tb_cpu_streams *s, struct tb_event *ev, enum tb_stream stream);
int tb_cpu_stream_wait(struct tb_cpu_streams *s, enum tb_stream stream, struct tb_event *ev);
int tb_cpu_event_query(struct tb_cpu_streams *s, struct tb_event *ev);
void tb_cpu_event_sync(struct tb_cpu_streams *s, struct tb_event *ev);
void tb_cpu_stream_sync(struct tb_cpu_streams *s, enum tb_stream stream);
int tb_cpu_copy_async(struct tb_cpu_streams *s, enum tb_stream stream, void *dst, const void *src, size_t bytes,
                      struct tb_err *err);
void tb_cpu_set_throttle(struct tb_cpu_streams *s, const struct tb_link_throttle *link);
/* When ev last completed (CLOCK_MONOTONIC seconds), 0 = never. */
double tb_cpu_event_time(struct tb_cpu_streams *s, struct tb_event *ev);
/* Both directions at once: each at most this fast (0 = as alone). */
void tb_cpu_set_duplex(struct tb_cpu_streams *s, double bytes_per_s);

/* ------------------------------------------------------------------ the backend (cpu.c) */

/* The instruction sets the backend's own kernels are built for (cpu_isa.c), best last. */
enum tb_cpu_isa {
    TB_CPU_ISA_SCALAR = 0, /* portable C (whatever the compiler's baseline vectorises) */
    TB_CPU_ISA_AVX2 = 1,   /* AVX2 + FMA */
    TB_CPU_ISA_AVX512 = 2, /* AVX-512 F/BW/VL/DQ */
    TB_CPU_ISAS = 3
};

/* Reorders between layouts an op had to make (cpu_conv.c), counted per kind. */
struct tb_cpu_reorders {
    uint64_t acts, act_bytes;       /* activations and their gradients */
    uint64_t weights, weight_bytes; /* weights into the primitives' layouts and gradients back */
};

struct tb_cpu {
    int threads;          /* OpenMP threads for ops */
    enum tb_cpu_isa isa;  /* the path our kernels run ([backend] isa, within what the CPU has) */
    enum tb_cpu_isa best; /* the best this CPU has */
    int blk;              /* channel block of blocked tensors (16 or 8), from oneDNN's ISA */
    char dnnl_isa[32];    /* oneDNN's effective ISA, for messages ("avx512_core") */
    struct tb_cpu_reorders reorders;
    struct tb_cpu_memory memory;
    struct tb_cpu_streams streams;
    char name[128];
    /* oneDNN: one CPU engine and one in-order stream for every primitive (cpu_dnnl.c). */
    void *dnnl_engine; /* dnnl_engine_t */
    void *dnnl_stream; /* dnnl_stream_t */
    /* Scratch memory shared by all ops (they run one at a time on the compute stream),
     * taken from device memory so it is accounted like a GPU's workspace. */
    void *scratch;
    size_t scratch_bytes;
    /* A widened op's f32 copies (cpu_widen.c) lie at the scratch's start: its kernel's
     * tb_cpu_scratch gets the space past them, and finds it short rather than moving them. */
    size_t scratch_prefix;
    bool scratch_short;
    bool widened_conv_logged; /* the log said once that 16-bit convolutions run widened */
    uint64_t failed_bytes; /* the last scratch request that did not fit (alloc_failed_bytes) */
    size_t scratch_asked;  /* the most the running op pass asked of tb_cpu_scratch (op_scratch_bytes) */
    uint64_t scratch_handed; /* tb_cpu_scratch's calls so far: while unchanged, what an op left
                              * in the scratch is still there (cpu_dual.c's maps) */
    bool emulate_link;     /* [backend] emulate_link: set_platform throttles the copies */
    double compute_flops;  /* [backend] compute_gflops in FLOP/s; 0 = measure */
    double link_scale;     /* [backend] link_scale: multiplies the emulated link's rates */
    int host_node;         /* NUMA node of pinned host memory; -1: the OS decides */
    bool threads_auto;     /* [backend] threads = 0: one per core (this rank's share of them) */
    /* Data parallelism (cpu_comm.c): NULL in a single-process run. */
    struct tb_cpu_comm *comm;
    const struct tb_comm *world; /* the core's; batch norm's sync reduces over it */
};

/* ------------------------------------------------------------------ ranks (cpu_comm.c) */
int tb_cpu_comm_attach(void *ctx, int device, const struct tb_comm *comm, struct tb_err *err);
void tb_cpu_comm_detach(struct tb_cpu *cpu);
int tb_cpu_allreduce_start(void *ctx, const struct tb_tensor *t, size_t n, float scale, struct tb_err *err);
int tb_cpu_allreduce_wait(void *ctx, double *busy_s, double *waited_s, struct tb_err *err);

int tb_cpu_dnnl_init(struct tb_cpu *cpu, struct tb_err *err);
void tb_cpu_dnnl_fini(struct tb_cpu *cpu);

/* A scratch buffer of at least `bytes` bytes, 64-byte aligned, valid until the next call
 * (grown from device memory; NULL with err filled when that is exhausted, or when a
 * widened op's prefix is there and it would have to grow: scratch_short). */
void *tb_cpu_scratch(struct tb_cpu *cpu, size_t bytes, struct tb_err *err);

/* ------------------------------------------------------------------ ops (cpu_ops.c and kernels)
 *
 * Each op kind has a row of functions; prepare and release may be NULL (no state). The
 * arguments are those of tb_backend_ops.op_* (trainbig/backend.h), with the backend. */
typedef int (*tb_cpu_prepare_fn)(struct tb_cpu *cpu, const struct tb_op *op, void **state, struct tb_err *err);
/* What a prepare returns, err untouched and nothing kept, for a 16-bit op it takes in
 * principle (its dtypes) but has no fast way to run on this path: cpu_ops.c then
 * prepares it widened (cpu_widen.c). */
#define TB_CPU_WIDEN 1
typedef void (*tb_cpu_release_fn)(void *state);
typedef int (*tb_cpu_forward_fn)(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                                 const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err);
typedef int (*tb_cpu_backward_fn)(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                                  const struct tb_tensor *out, const struct tb_tensor *dout,
                                  const struct tb_tensor *din, struct tb_err *err);

struct tb_cpu_kernel {
    tb_cpu_prepare_fn prepare;
    tb_cpu_release_fn release;
    tb_cpu_forward_fn forward;
    tb_cpu_backward_fn backward;
    /* The backend's op_recompute (trainbig/backend.h); NULL: forward, which for this kind
     * changes nothing but its outputs. */
    tb_cpu_forward_fn recompute;
    /* The 16-bit float dtypes it takes itself (bits 1u << TB_BF16 ...); an op of another
     * runs through cpu_widen.c on f32 copies. 0: f32 only. */
    uint32_t dtypes;
};

/* The kernels, one row per op kind. Convolutions are oneDNN's, whatever the ISA
 * (cpu_conv.c). The others are built once per ISA from the same files (Makefile.am:
 * CPU_KERNEL_SOURCES, compiled with TB_CPU_KERNEL_ISA = scalar, avx2, avx512 and that ISA's
 * compiler flags), so each table's names end in its ISA: TB_CPU_KERNEL(relu) is
 * tb_cpu_relu_kernel_avx2 in the AVX2 build. cpu_ops.c picks the table of cpu->isa. */
extern const struct tb_cpu_kernel tb_cpu_conv2d_kernel;
/* cpu_widen.c: any kind's kernel run on f32 copies of an op's 16-bit tensors; needed when
 * the kernel k does not take one of op's dtypes itself. The wrapped kernel and its state. */
extern const struct tb_cpu_kernel tb_cpu_widen_kernel;
bool tb_cpu_widen_needed(const struct tb_cpu_kernel *k, const struct tb_op *op);
const struct tb_cpu_kernel *tb_cpu_widened_kernel(const void *state);
void *tb_cpu_widened_inner(const void *state);
/* The kernel of kind on the backend's ISA (cpu_ops.c); NULL: none. */
const struct tb_cpu_kernel *tb_cpu_kernel_of(const struct tb_cpu *cpu, enum tb_op_kind kind);
/* n elements converted between float dtypes (cpu_cast.c, the backend's ISA's build):
 * rounded as trainbig/half.h, OpenMP threads over large n; the same dtype is a copy. dst
 * and src do not overlap. */
void tb_cpu_convert(const struct tb_cpu *cpu, void *dst, enum tb_dtype to, const void *src, enum tb_dtype from,
                    size_t n);

#define TB_CPU_CAT3_(a, b, c) a##b##c
#define TB_CPU_CAT3(a, b, c) TB_CPU_CAT3_(a, b, c)
#define TB_CPU_KERNEL_OF(name, isa) TB_CPU_CAT3(tb_cpu_##name, _kernel_, isa)
#define TB_CPU_ISA_FN_OF(name, isa) TB_CPU_CAT3(tb_cpu_##name, _, isa)
#ifdef TB_CPU_KERNEL_ISA
#define TB_CPU_KERNEL(name) TB_CPU_KERNEL_OF(name, TB_CPU_KERNEL_ISA)
/* A function of one ISA's build: tb_cpu_convert_avx2 in the AVX2 build. */
#define TB_CPU_ISA_FN(name) TB_CPU_ISA_FN_OF(name, TB_CPU_KERNEL_ISA)
#endif
/* X(name, isa) for every kernel of one ISA's build. */
#define TB_CPU_KERNELS(X, isa)                                                                            \
    X(batchnorm, isa)                                                                                     \
    X(relu, isa)                                                                                          \
    X(sigmoid, isa)                                                                                       \
    X(add, isa) X(mul, isa) X(dropout, isa) X(maxpool, isa) X(avgpool, isa) X(resize, isa) X(concat, isa) \
        X(softmax_ce, isa) X(bce_logits, isa) X(class_weights, isa) X(mask_labels, isa) X(dual_task, isa)  \
            X(cast, isa)
#define TB_CPU_DECLARE_KERNEL(name, isa) extern const struct tb_cpu_kernel TB_CPU_KERNEL_OF(name, isa);
TB_CPU_KERNELS(TB_CPU_DECLARE_KERNEL, scalar)
TB_CPU_KERNELS(TB_CPU_DECLARE_KERNEL, avx2)
TB_CPU_KERNELS(TB_CPU_DECLARE_KERNEL, avx512)
#define TB_CPU_DECLARE_CONVERT(isa) \
    void TB_CPU_ISA_FN_OF(convert, isa)(void *dst, enum tb_dtype to, const void *src, enum tb_dtype from, size_t n);
TB_CPU_DECLARE_CONVERT(scalar)
TB_CPU_DECLARE_CONVERT(avx2)
TB_CPU_DECLARE_CONVERT(avx512)

/* A line describing how an op runs (cpu_conv_prepare.c: each pass's oneDNN implementation and
 * the reorders around it; other kernels: ""). */
void tb_cpu_conv_describe(const struct tb_cpu *cpu, const void *state, char *buf, size_t size);

/* Which kernel runs the op, in what ISA and layouts (tb_backend_ops.op_describe). */
void tb_cpu_op_describe(const struct tb_cpu *cpu, const void *state, char *buf, size_t size);
/* The most scratch one pass of the op asked for (op_scratch_bytes). */
uint64_t tb_cpu_op_scratch_bytes(const void *state, bool backward);

/* cpu_peak.c: this CPU's fp32 peak on `threads` threads, FLOP/s (the best of 3 runs of a
 * multiply-add loop at the widest width the CPU has); and the rate the backend's own
 * convolution reaches (a 3x3 64->64, forward and both backwards), into *rate. */
double tb_cpu_measure_flops(int threads);
int tb_cpu_measure_conv_flops(struct tb_cpu *cpu, double *rate, struct tb_err *err);
int tb_cpu_op_prepare(struct tb_cpu *cpu, const struct tb_op *op, void **state, struct tb_err *err);
void tb_cpu_op_release(void *state);
int tb_cpu_op_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                      const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err);
int tb_cpu_op_recompute(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                        const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err);
int tb_cpu_op_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                       const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                       struct tb_err *err);

/* ------------------------------------------------------------------ layouts (cpu_isa.c) */

/* The channel block of a tensor of this description: tb_cpu.blk when it is blocked, 0 when
 * it is NHWC (see the top of this file). */
static inline int tb_cpu_blk(const struct tb_cpu *cpu, const struct tb_tensor_desc *d)
{
    return cpu->blk > 1 && d->shape.c > 0 && d->shape.c % cpu->blk == 0 ? cpu->blk : 0;
}

/* The NHWC shape whose layout is this tensor's: (N * C/B, B, H, W) when blocked, else its
 * own shape. */
static inline struct tb_shape tb_cpu_view(const struct tb_cpu *cpu, const struct tb_tensor_desc *d)
{
    const int b = tb_cpu_blk(cpu, d);
    struct tb_shape s = d->shape;
    if (b)
        s = (struct tb_shape){ s.n * (s.c / b), b, s.h, s.w };
    return s;
}

/* Offset of element (n, c, y, x) of a tensor of shape s with channel block b (0 = NHWC). */
static inline size_t tb_cpu_offset(struct tb_shape s, int b, int n, int c, int y, int x)
{
    if (!b)
        return (((size_t)n * (size_t)s.h + (size_t)y) * (size_t)s.w + (size_t)x) * (size_t)s.c + (size_t)c;
    const size_t cb = (size_t)(s.c / b);
    return ((((size_t)n * cb + (size_t)(c / b)) * (size_t)s.h + (size_t)y) * (size_t)s.w + (size_t)x) * (size_t)b +
           (size_t)(c % b);
}

/* Sets up cpu->isa, best, blk and dnnl_isa from the [backend] isa key ("auto", "avx512",
 * "avx2", "scalar") before oneDNN runs anything; an ISA this CPU lacks is an error naming
 * the key. */
int tb_cpu_isa_init(struct tb_cpu *cpu, const char *want, struct tb_err *err);
const char *tb_cpu_isa_name(enum tb_cpu_isa isa);

/* Index of element (n, c, y, x) in an NHWC tensor of shape s. */
static inline size_t tb_cpu_at(struct tb_shape s, int n, int c, int y, int x)
{
    return (((size_t)n * (size_t)s.h + (size_t)y) * (size_t)s.w + (size_t)x) * (size_t)s.c + (size_t)c;
}

/* A deterministic uniform number in [0, 1) from (seed, step, op id, element index):
 * dropout masks depend on nothing else, so they are the same for any thread count. */
static inline float tb_cpu_uniform(uint64_t seed, uint64_t step, uint32_t op, uint64_t index)
{
    /* splitmix64 over a mix of the four; 24 bits of it make the float. */
    uint64_t z = seed ^ (step * TB_GOLDEN64) ^ ((uint64_t)op << 40) ^ (index * 0xBF58476D1CE4E5B9ull);
    return (float)(uint32_t)(tb_splitmix64(&z) >> 40) * (1.0f / 16777216.0f); /* (uint32_t): vectorises */
}

#endif
