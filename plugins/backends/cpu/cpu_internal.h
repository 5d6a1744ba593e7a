/* backends/cpu/cpu_internal.h: the CPU backend's pieces, shared by its files (not exported:
 * the plugin's only symbol is trainbig_plugin).
 *
 * Device memory is host memory counted against a capacity, so out-of-memory and swapping
 * are real without a GPU. The compute stream runs each op on the calling thread as it is
 * submitted (with OpenMP inside), which is one valid schedule of CUDA's asynchronous
 * semantics; the two copy streams each have a thread that runs their queue in order.
 *
 * Layout of device tensors: NHWC. Element (n, c, y, x) of an f32 or u8 tensor of shape
 * (N, C, H, W) is at ((n * H + y) * W + x) * C + c. A convolution weight (O, C, KH, KW) is
 * therefore stored O, KH, KW, C ("OHWI"); a (1, C, 1, 1) vector is C contiguous values. */
#ifndef TB_CPU_INTERNAL_H
#define TB_CPU_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <trainbig/trainbig.h>

/* ------------------------------------------------------------------ memory (cpu_memory.c) */

struct tb_cpu_block; /* a cached free block */

struct tb_cpu_memory {
    pthread_mutex_t lock;
    uint64_t capacity; /* the device_memory cap; UINT64_MAX = none */
    uint64_t in_use, peak, reserved, allocs, fails;
    struct tb_cpu_block *free_list; /* cached blocks, smallest first */
    struct tb_cpu_block *live;      /* handed-out blocks, for mem_free lookups */
};

void tb_cpu_memory_init(struct tb_cpu_memory *m, uint64_t capacity);
/* Frees every block, cached or not (the owner has stopped using them). */
void tb_cpu_memory_fini(struct tb_cpu_memory *m);
void *tb_cpu_memory_alloc(struct tb_cpu_memory *m, size_t bytes);
void tb_cpu_memory_free(struct tb_cpu_memory *m, void *ptr);
void tb_cpu_memory_stats(struct tb_cpu_memory *m, struct tb_mem_stats *out);
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

struct tb_cpu {
    int threads; /* OpenMP threads for ops */
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
    uint64_t failed_bytes; /* the last scratch request that did not fit (alloc_failed_bytes) */
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
 * (grown from device memory; NULL with err filled when that is exhausted). */
void *tb_cpu_scratch(struct tb_cpu *cpu, size_t bytes, struct tb_err *err);

/* ------------------------------------------------------------------ ops (cpu_ops.c and kernels)
 *
 * Each op kind has a row of functions; prepare and release may be NULL (no state). The
 * arguments are those of tb_backend_ops.op_* (trainbig/backend.h), with the backend. */
typedef int (*tb_cpu_prepare_fn)(struct tb_cpu *cpu, const struct tb_op *op, void **state, struct tb_err *err);
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
};

/* The kernels, one row per op kind, defined in the kernel files. */
extern const struct tb_cpu_kernel tb_cpu_conv2d_kernel;        /* cpu_conv.c (oneDNN) */
extern const struct tb_cpu_kernel tb_cpu_batchnorm_kernel;     /* cpu_batchnorm.c */
extern const struct tb_cpu_kernel tb_cpu_relu_kernel;          /* cpu_eltwise.c */
extern const struct tb_cpu_kernel tb_cpu_sigmoid_kernel;       /* cpu_eltwise.c */
extern const struct tb_cpu_kernel tb_cpu_add_kernel;           /* cpu_eltwise.c */
extern const struct tb_cpu_kernel tb_cpu_mul_kernel;           /* cpu_eltwise.c */
extern const struct tb_cpu_kernel tb_cpu_dropout_kernel;       /* cpu_eltwise.c */
extern const struct tb_cpu_kernel tb_cpu_maxpool_kernel;       /* cpu_pool.c */
extern const struct tb_cpu_kernel tb_cpu_avgpool_kernel;       /* cpu_pool.c (global average) */
extern const struct tb_cpu_kernel tb_cpu_resize_kernel;        /* cpu_resize.c */
extern const struct tb_cpu_kernel tb_cpu_concat_kernel;        /* cpu_concat.c */
extern const struct tb_cpu_kernel tb_cpu_softmax_ce_kernel;    /* cpu_loss.c */
extern const struct tb_cpu_kernel tb_cpu_bce_logits_kernel;    /* cpu_loss.c */
extern const struct tb_cpu_kernel tb_cpu_class_weights_kernel; /* cpu_labels.c */
extern const struct tb_cpu_kernel tb_cpu_mask_labels_kernel;   /* cpu_labels.c */

/* Backward-weights of stride-1 convolutions straight from NHWC, in AVX2 register tiles
 * (cpu_conv_wgrad.c, used by cpu_conv.c where it beats oneDNN). */
struct tb_cpu_wgrad {
    struct tb_shape x, y; /* input and output shapes (NCHW order; data is NHWC) */
    int kh, kw, pad_h, pad_w, dil_h, dil_w;
    int win; /* input rows one output row reads: (kh - 1) * dil_h + 1 */
    int ncb; /* input-channel blocks */
};
/* Fills wg and returns true when this convolution takes the direct path. */
bool tb_cpu_wgrad_init(struct tb_cpu_wgrad *wg, struct tb_shape x, struct tb_shape y, const struct tb_conv2d_params *p);
/* Scratch bytes tb_cpu_wgrad_run needs with this many threads. */
size_t tb_cpu_wgrad_scratch(const struct tb_cpu_wgrad *wg, int threads);
/* dw (OHWI, overwritten) and db (overwritten), either may be NULL, from x and dy. */
void tb_cpu_wgrad_run(const struct tb_cpu_wgrad *wg, int threads, const float *x, const float *dy, float *dw, float *db,
                      void *scratch);

int tb_cpu_op_prepare(struct tb_cpu *cpu, const struct tb_op *op, void **state, struct tb_err *err);
void tb_cpu_op_release(void *state);
int tb_cpu_op_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                      const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err);
int tb_cpu_op_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                       const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                       struct tb_err *err);

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
    uint64_t z = seed ^ (step * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)op << 40) ^ (index * 0xBF58476D1CE4E5B9ull);
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

#endif
