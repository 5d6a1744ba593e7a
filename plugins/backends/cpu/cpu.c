/* backend/cpu: the CPU backend, and the numerical reference every other backend is
 * tested against. See cpu_shared.h for how it maps the backend contract onto the host. */
#include <inttypes.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <trainbig/half.h>

#include "cpu_shared.h"

static const struct tb_key cpu_keys[] = {
    { "threads", TB_KEY_INT, "0", "0..1024",
      "OpenMP threads for ops; 0 = one per core; more than the cores slows every op, more than "
      "4 per core is refused" },
    { "isa", TB_KEY_ENUM, "auto", "auto|avx512|avx2|scalar",
      "instruction set of the backend's kernels and the cap on oneDNN's (unless DNNL_MAX_CPU_ISA is set); auto = the "
      "best this CPU has" },
    { "device_memory", TB_KEY_SIZE, "0", NULL, "device memory capacity to emulate; 0 = no cap" },
    { "emulate_link", TB_KEY_BOOL, "no", NULL,
      "copies take the time the [platform] link would take, scaled by this CPU's achieved convolution rate over the "
      "platform's accelerator's (accel_tflops x accel_efficiency), so swapping costs what it would there" },
    { "compute_gflops", TB_KEY_FLOAT, "0", "0..",
      "this CPU's achieved fp32 convolution rate for emulate_link, GFLOP/s; 0 = measured at start (a 3x3 64->64 "
      "convolution, forward and both backwards, through this backend's kernels)" },
    { "link_scale", TB_KEY_FLOAT, "1", "0.001..1000",
      "multiplies the emulated link's rates (and divides its latency): to give a network the compute-to-transfer "
      "balance of another, the ratio of their FLOPs per byte of device memory (bench/lms)" },
    TB_KEYS_END,
};

static int cpu_score(char *why, size_t why_size)
{
    snprintf(why, why_size, "the CPU is always there (%d cores), and slower than any accelerator", omp_get_num_procs());
    return 1;
}

static void cpu_model(char *buf, size_t size)
{
    snprintf(buf, size, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (colon && strncmp(line, "model name", 10) == 0) {
            snprintf(buf, size, "%s", colon + 2);
            buf[strcspn(buf, "\n")] = '\0';
            break;
        }
    }
    fclose(f);
}

static int cpu_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    struct tb_cpu *cpu = calloc(1, sizeof *cpu);
    if (!cpu)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    int64_t threads = tb_section_int(cfg, "threads");
    /* Each op waits for all its threads: past the cores they take turns, and far past
     * them (4096 on 2 cores) a step takes minutes where it took a second. */
    const int cores = omp_get_num_procs();
    if (threads > 4 * (int64_t)cores) {
        free(cpu);
        return tb_err_set(err, TB_ERR_CONFIG,
                          "%s: [backend] threads = %" PRId64 " on %d cores: more than 4 per core, every op would wait "
                          "for threads taking turns on a core; set at most %d, or 0 for one per core",
                          tb_section_origin(cfg, "threads"), threads, cores, 4 * cores);
    }
    if (threads > cores)
        tb_log(TB_LOG_WARN,
               "[backend] threads = %" PRId64 " is more than the %d cores: the threads take turns and every op is "
               "slower than with %d",
               threads, cores, cores);
    cpu->threads = threads > 0 ? (int)threads : cores;
    cpu->threads_auto = threads == 0;
    uint64_t cap = tb_section_size(cfg, "device_memory");
    cpu->emulate_link = tb_section_bool(cfg, "emulate_link");
    cpu->compute_flops = tb_section_float(cfg, "compute_gflops") * 1e9;
    cpu->link_scale = tb_section_float(cfg, "link_scale");
    cpu->host_node = -1;
    int rc = tb_cpu_memory_init(&cpu->memory, cap, err);
    if (rc) {
        free(cpu);
        return rc;
    }
    rc = tb_cpu_streams_init(&cpu->streams, err);
    if (rc) {
        tb_cpu_memory_fini(&cpu->memory);
        free(cpu);
        return rc;
    }
    /* The ops run on the thread that drives this backend, with this many helpers. */
    omp_set_num_threads(cpu->threads);
    /* Before oneDNN runs anything: a forced ISA caps it. */
    rc = tb_cpu_isa_init(cpu, tb_section_string(cfg, "isa"), err);
    if (!rc)
        rc = tb_cpu_dnnl_init(cpu, err);
    if (rc) {
        tb_cpu_streams_fini(&cpu->streams);
        tb_cpu_memory_fini(&cpu->memory);
        free(cpu);
        return rc;
    }
    char model[96];
    cpu_model(model, sizeof model);
    snprintf(cpu->name, sizeof cpu->name, "cpu: %.56s (%d threads, %s%s, oneDNN %.20s, nChw%dc)", model, cpu->threads,
             tb_cpu_isa_name(cpu->isa), cpu->isa < cpu->best ? " forced" : "", cpu->dnnl_isa, cpu->blk);
    if (cap) {
        char size[32];
        snprintf(size, sizeof size, "%.2f GiB", (double)cap / (1u << 30));
        tb_plog(TB_LOG_DEBUG, "%s, device memory capped at %s (reserved and touched)", cpu->name, size);
    }
    *ctx = cpu;
    return TB_OK;
}

static void cpu_destroy(void *ctx)
{
    struct tb_cpu *cpu = ctx;
    if (!cpu)
        return;
    tb_cpu_comm_detach(cpu);
    tb_cpu_streams_fini(&cpu->streams);
    tb_cpu_dnnl_fini(cpu);
    tb_cpu_memory_fini(&cpu->memory);
    free(cpu);
}

static void cpu_release_scratch(void *ctx, int device)
{
    struct tb_cpu *cpu = ctx;
    (void)device;
    if (cpu->scratch)
        tb_cpu_memory_free(&cpu->memory, cpu->scratch);
    cpu->scratch = NULL;
    cpu->scratch_bytes = 0;
}

static int cpu_set_platform(void *ctx, int device, struct tb_link *link, char *note, size_t note_size,
                            struct tb_err *err)
{
    struct tb_cpu *cpu = ctx;
    (void)device;
    if (note_size)
        note[0] = '\0';
    /* Where swapped-out tensors live: the node the platform names, when there is one. */
    char numa[256] = "";
    cpu->host_node = -1;
    if (link && link->numa_node >= 0)
        cpu->host_node = tb_cpu_host_node(link->numa_node, numa, sizeof numa);
    if (!cpu->emulate_link || !link) {
        snprintf(note, note_size, "%s", numa);
        return TB_OK;
    }
    /* This CPU's achieved convolution rate (and, measured, its FMA peak for context)
     * against the accelerator's achieved rate on such convolutions: copies slowed by
     * their ratio keep the platform's compute-to-transfer balance, and so the cost of
     * swapping. Peak over peak would not: a step here runs its convolutions at a
     * fraction of this CPU's peak, cuDNN nearer the GPU's. */
    double rate = cpu->compute_flops, peak = 0;
    if (rate <= 0) {
        int rc = tb_cpu_measure_conv_flops(cpu, &rate, err);
        if (rc)
            return rc;
        peak = tb_cpu_measure_flops(cpu->threads);
    }
    const double eff = link->accel_efficiency > 0 ? link->accel_efficiency : TB_ACCEL_EFFICIENCY_DEFAULT;
    const double accel = link->accel_flops * eff;
    const double s = (accel > 0 ? rate / accel : 1.0) * cpu->link_scale;
    const struct tb_link given = *link;
    link->h2d_bytes_per_s *= s;
    link->d2h_bytes_per_s *= s;
    link->duplex_bytes_per_s *= s;
    link->latency_s /= s;
    /* The emulated link's accelerator is this CPU: its peak and its share of it (the
     * rate alone, as achieved, where it was given). */
    link->accel_flops = peak > rate ? peak : rate;
    link->accel_efficiency = rate / link->accel_flops;
    const struct tb_link_throttle t = { link->h2d_bytes_per_s, link->d2h_bytes_per_s, link->latency_s };
    tb_cpu_set_throttle(&cpu->streams, &t);
    tb_cpu_set_duplex(&cpu->streams, link->duplex_bytes_per_s);
    char how[96];
    if (peak > 0) /* measured (oneDNN's Winograd may count above the FMA peak) */
        snprintf(how, sizeof how, "measured: 3x3 64->64, %.0f%% of its %.0f GFLOP/s FMA peak", 100 * rate / peak,
                 peak / 1e9);
    else
        snprintf(how, sizeof how, "[backend] compute_gflops");
    snprintf(note, note_size,
             "emulating the platform's link: this CPU's convolutions run at %.1f GFLOP/s (%s), the platform's "
             "accelerator's at %.1f TFLOP/s x %.2f = %.2f TFLOP/s, so copies run at %.3g times%s its %.1f / %.1f "
             "GB/s: %.0f / %.0f MB/s host to device / back, latency %.0f us",
             rate / 1e9, how, given.accel_flops / 1e12, eff, accel / 1e12, s,
             cpu->link_scale != 1 ? " (with [backend] link_scale)" : "", given.h2d_bytes_per_s / 1e9,
             given.d2h_bytes_per_s / 1e9, t.h2d_bytes_per_s / 1e6, t.d2h_bytes_per_s / 1e6, t.latency_s * 1e6);
    if (numa[0]) {
        const size_t used = strlen(note);
        snprintf(note + used, note_size - used, "; %s", numa);
    }
    return TB_OK;
}

static double cpu_event_time(void *ctx, struct tb_event *ev)
{
    struct tb_cpu *cpu = ctx;
    return tb_cpu_event_time(&cpu->streams, ev);
}

static uint64_t cpu_alloc_failed_bytes(void *ctx, int device)
{
    struct tb_cpu *cpu = ctx;
    (void)device;
    uint64_t b = cpu->failed_bytes;
    cpu->failed_bytes = 0;
    return b;
}

/* ------------------------------------------------------------------ devices, memory */

static int cpu_device_count(void *ctx)
{
    (void)ctx;
    return 1;
}

static int cpu_device_info(void *ctx, int device, struct tb_device_info *out)
{
    struct tb_cpu *cpu = ctx;
    if (device != 0)
        return TB_ERR_RUNTIME;
    snprintf(out->name, sizeof out->name, "%s", cpu->name);
    out->capacity = cpu->memory.capacity;
    return TB_OK;
}

static void *cpu_mem_alloc(void *ctx, int device, size_t bytes)
{
    struct tb_cpu *cpu = ctx;
    return device == 0 ? tb_cpu_memory_alloc(&cpu->memory, bytes) : NULL;
}

static void cpu_mem_free(void *ctx, int device, void *ptr)
{
    struct tb_cpu *cpu = ctx;
    (void)device;
    tb_cpu_memory_free(&cpu->memory, ptr);
}

static void cpu_mem_stats(void *ctx, int device, struct tb_mem_stats *out)
{
    struct tb_cpu *cpu = ctx;
    (void)device;
    tb_cpu_memory_stats(&cpu->memory, out);
}

static size_t cpu_mem_blocks(void *ctx, int device, struct tb_mem_block *out, size_t max)
{
    struct tb_cpu *cpu = ctx;
    (void)device;
    return tb_cpu_memory_blocks(&cpu->memory, out, max);
}

static void cpu_mem_reset_peak(void *ctx, int device)
{
    struct tb_cpu *cpu = ctx;
    (void)device;
    tb_cpu_memory_reset_peak(&cpu->memory);
}

/* Host memory is already as "pinned" as it gets here. */
static void *cpu_host_alloc(void *ctx, size_t bytes)
{
    const struct tb_cpu *cpu = ctx;
    return tb_cpu_host_alloc(cpu->host_node, bytes);
}

static void cpu_host_free(void *ctx, void *ptr)
{
    (void)ctx;
    tb_cpu_host_free(ptr);
}

/* ------------------------------------------------------------------ streams, events */

static struct tb_event *cpu_event_create(void *ctx, int device)
{
    struct tb_cpu *cpu = ctx;
    (void)device;
    return tb_cpu_event_create(&cpu->streams);
}

static void cpu_event_destroy(void *ctx, struct tb_event *ev)
{
    struct tb_cpu *cpu = ctx;
    tb_cpu_event_destroy(&cpu->streams, ev);
}

static int cpu_event_record(void *ctx, struct tb_event *ev, enum tb_stream stream)
{
    struct tb_cpu *cpu = ctx;
    return tb_cpu_event_record(&cpu->streams, ev, stream);
}

static int cpu_stream_wait(void *ctx, int device, enum tb_stream stream, struct tb_event *ev)
{
    struct tb_cpu *cpu = ctx;
    (void)device;
    return tb_cpu_stream_wait(&cpu->streams, stream, ev);
}

static int cpu_event_query(void *ctx, struct tb_event *ev)
{
    struct tb_cpu *cpu = ctx;
    return tb_cpu_event_query(&cpu->streams, ev);
}

static int cpu_event_sync(void *ctx, struct tb_event *ev)
{
    struct tb_cpu *cpu = ctx;
    tb_cpu_event_sync(&cpu->streams, ev);
    return TB_OK;
}

static int cpu_stream_sync(void *ctx, int device, enum tb_stream stream)
{
    struct tb_cpu *cpu = ctx;
    (void)device;
    tb_cpu_stream_sync(&cpu->streams, stream);
    return TB_OK;
}

static int cpu_copy_async(void *ctx, int device, enum tb_stream stream, void *dst, const void *src, size_t bytes,
                          struct tb_err *err)
{
    struct tb_cpu *cpu = ctx;
    (void)device;
    return tb_cpu_copy_async(&cpu->streams, stream, dst, src, bytes, err);
}

static int cpu_set_link_throttle(void *ctx, int device, const struct tb_link_throttle *link, struct tb_err *err)
{
    struct tb_cpu *cpu = ctx;
    (void)device;
    (void)err;
    tb_cpu_set_throttle(&cpu->streams, link);
    return TB_OK;
}

/* ------------------------------------------------------------------ tensors */

static size_t cpu_tensor_bytes(void *ctx, const struct tb_tensor_desc *d)
{
    (void)ctx;
    return tb_shape_elems(d->shape) * tb_dtype_size(d->dtype);
}

/* NCHW (host) <-> the device layout (NHWC, or nChwBc for b > 0), element size `es`. */
static void convert(const struct tb_shape s, int b, size_t es, const void *src, void *dst, bool to_device)
{
    const char *from = src;
    char *to = dst;
    size_t hw = (size_t)s.h * (size_t)s.w;
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < s.n; n++)
        for (int c = 0; c < s.c; c++) {
            /* device offset of (n, c, pixel 0) and the step between pixels */
            size_t dev0, step;
            if (b) {
                dev0 = (((size_t)n * (size_t)(s.c / b) + (size_t)(c / b)) * hw) * (size_t)b + (size_t)(c % b);
                step = (size_t)b;
            } else {
                dev0 = (size_t)n * hw * (size_t)s.c + (size_t)c;
                step = (size_t)s.c;
            }
            const size_t nchw0 = ((size_t)n * (size_t)s.c + (size_t)c) * hw;
            for (size_t p = 0; p < hw; p++) {
                if (to_device)
                    memcpy(to + (dev0 + p * step) * es, from + (nchw0 + p) * es, es);
                else
                    memcpy(to + (nchw0 + p) * es, from + (dev0 + p * step) * es, es);
            }
        }
}

static int cpu_tensor_write(void *ctx, const struct tb_tensor *t, const void *host, struct tb_err *err)
{
    (void)err;
    convert(t->desc.shape, tb_cpu_blk(ctx, &t->desc), tb_dtype_size(t->desc.dtype), host, t->data, true);
    return TB_OK;
}

static int cpu_tensor_read(void *ctx, const struct tb_tensor *t, void *host, struct tb_err *err)
{
    (void)err;
    convert(t->desc.shape, tb_cpu_blk(ctx, &t->desc), tb_dtype_size(t->desc.dtype), t->data, host, false);
    return TB_OK;
}

static int cpu_tensor_fill(void *ctx, const struct tb_tensor *t, float value, struct tb_err *err)
{
    (void)ctx;
    const enum tb_dtype d = t->desc.dtype;
    if (!tb_dtype_is_float(d))
        return tb_err_set(err, TB_ERR_RUNTIME, "tensor_fill: a %s tensor; it fills f32, bf16 and f16 ones",
                          tb_dtype_name(d));
    const size_t n = tb_shape_elems(t->desc.shape);
    if (d == TB_F32) {
        float *p = t->data;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            p[i] = value;
        return TB_OK;
    }
    const uint16_t h = d == TB_BF16 ? tb_bf16_from_f32(value) : tb_f16_from_f32(value);
    uint16_t *p = t->data;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        p[i] = h;
    return TB_OK;
}

/* dst += alpha * src in f32, each sum rounded once to dst's dtype. */
static int cpu_tensor_accumulate(void *ctx, const struct tb_tensor *dst, const struct tb_tensor *src, float alpha,
                                 struct tb_err *err)
{
    (void)ctx;
    const enum tb_dtype d = dst->desc.dtype;
    if (d != src->desc.dtype || !tb_dtype_is_float(d) || !tb_shape_eq(dst->desc.shape, src->desc.shape))
        return tb_err_set(err, TB_ERR_RUNTIME,
                          "tensor_accumulate: %s %dx%dx%dx%d into %s %dx%dx%dx%d; it takes float tensors of one "
                          "dtype and one shape",
                          tb_dtype_name(src->desc.dtype), src->desc.shape.n, src->desc.shape.c, src->desc.shape.h,
                          src->desc.shape.w, tb_dtype_name(d), dst->desc.shape.n, dst->desc.shape.c,
                          dst->desc.shape.h, dst->desc.shape.w);
    const size_t n = tb_shape_elems(dst->desc.shape);
    if (d == TB_F32) {
        float *a = dst->data;
        const float *b = src->data;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            a[i] += alpha * b[i];
    } else if (d == TB_BF16) {
        uint16_t *a = dst->data;
        const uint16_t *b = src->data;
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++)
            a[i] = tb_bf16_from_f32(tb_f32_from_bf16(a[i]) + alpha * tb_f32_from_bf16(b[i]));
    } else {
        uint16_t *a = dst->data;
        const uint16_t *b = src->data;
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++)
            a[i] = tb_f16_from_f32(tb_f32_from_f16(a[i]) + alpha * tb_f32_from_f16(b[i]));
    }
    return TB_OK;
}

static int cpu_sgd_update(void *ctx, const struct tb_tensor *param, const struct tb_tensor *grad,
                          const struct tb_tensor *mom, float lr, float momentum, float weight_decay, struct tb_err *err)
{
    (void)ctx;
    if (!tb_shape_eq(param->desc.shape, grad->desc.shape) || !tb_shape_eq(param->desc.shape, mom->desc.shape))
        return tb_err_set(err, TB_ERR_RUNTIME, "sgd_update: parameter, gradient and momentum differ in shape");
    if (param->desc.dtype != TB_F32 || grad->desc.dtype != TB_F32 || mom->desc.dtype != TB_F32)
        return tb_err_set(err, TB_ERR_RUNTIME, "sgd_update: f32 parameters, gradients and momentum only");
    float *p = param->data, *m = mom->data;
    const float *g = grad->data;
    size_t n = tb_shape_elems(param->desc.shape);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float d = g[i] + weight_decay * p[i];
        m[i] = momentum * m[i] + d;
        p[i] -= lr * m[i];
    }
    return TB_OK;
}

/* ------------------------------------------------------------------ ops */

static void cpu_op_describe(void *ctx, const void *state, char *buf, size_t size)
{
    const struct tb_cpu *cpu = ctx;
    tb_cpu_op_describe(cpu, state, buf, size);
}

static void cpu_reorder_stats(void *ctx, int device, struct tb_reorder_stats *out)
{
    const struct tb_cpu *cpu = ctx;
    (void)device;
    *out = (struct tb_reorder_stats){ cpu->reorders.acts, cpu->reorders.act_bytes, cpu->reorders.weights,
                                      cpu->reorders.weight_bytes };
}

static int cpu_op_prepare(void *ctx, int device, const struct tb_op *op, void **state, struct tb_err *err)
{
    (void)device;
    return tb_cpu_op_prepare(ctx, op, state, err);
}

static void cpu_op_release(void *ctx, void *state)
{
    (void)ctx;
    tb_cpu_op_release(state);
}

static int cpu_op_forward(void *ctx, const struct tb_op *op, void *state, uint64_t step, const struct tb_tensor *in,
                          const struct tb_tensor *out, struct tb_err *err)
{
    return tb_cpu_op_forward(ctx, op, state, step, in, out, err);
}

static int cpu_op_recompute(void *ctx, const struct tb_op *op, void *state, uint64_t step, const struct tb_tensor *in,
                            const struct tb_tensor *out, struct tb_err *err)
{
    return tb_cpu_op_recompute(ctx, op, state, step, in, out, err);
}

static int cpu_op_backward(void *ctx, const struct tb_op *op, void *state, const struct tb_tensor *in,
                           const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                           struct tb_err *err)
{
    return tb_cpu_op_backward(ctx, op, state, in, out, dout, din, err);
}

/* Every float dtype, on every ISA path: kernels without a 16-bit form run widened. */
static uint32_t cpu_dtypes(void *ctx, int device)
{
    (void)ctx, (void)device;
    return 1u << TB_F32 | 1u << TB_BF16 | 1u << TB_F16;
}

static uint64_t cpu_op_scratch_bytes(void *ctx, const void *state, bool backward)
{
    (void)ctx;
    return tb_cpu_op_scratch_bytes(state, backward);
}

static const struct tb_backend_ops cpu_ops = {
    .head = { .score = cpu_score, .create = cpu_create, .destroy = cpu_destroy },
    .device_count = cpu_device_count,
    .device_info = cpu_device_info,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
    .mem_stats = cpu_mem_stats,
    .mem_reset_peak = cpu_mem_reset_peak,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .stream_wait = cpu_stream_wait,
    .event_query = cpu_event_query,
    .event_sync = cpu_event_sync,
    .stream_sync = cpu_stream_sync,
    .copy_async = cpu_copy_async,
    .set_link_throttle = cpu_set_link_throttle,
    .alloc_failed_bytes = cpu_alloc_failed_bytes,
    .release_scratch = cpu_release_scratch,
    .set_platform = cpu_set_platform,
    .event_time = cpu_event_time,
    .comm_attach = tb_cpu_comm_attach,
    .allreduce_start = tb_cpu_allreduce_start,
    .allreduce_wait = tb_cpu_allreduce_wait,
    .tensor_bytes = cpu_tensor_bytes,
    .tensor_write = cpu_tensor_write,
    .tensor_read = cpu_tensor_read,
    .tensor_fill = cpu_tensor_fill,
    .tensor_accumulate = cpu_tensor_accumulate,
    .op_prepare = cpu_op_prepare,
    .op_release = cpu_op_release,
    .op_forward = cpu_op_forward,
    .op_backward = cpu_op_backward,
    .sgd_update = cpu_sgd_update,
    .op_describe = cpu_op_describe,
    .reorder_stats = cpu_reorder_stats,
    .op_recompute = cpu_op_recompute,
    .mem_blocks = cpu_mem_blocks,
    .op_scratch_bytes = cpu_op_scratch_bytes,
    .dtypes = cpu_dtypes,
};

TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
    .abi_major = TB_ABI_MAJOR,
    .abi_minor = TB_ABI_MINOR,
    .kind = TB_KIND_BACKEND,
    .name = "cpu",
    .version = TB_VERSION,
    .description = "host CPU: oneDNN and OpenMP kernels, device memory emulated in host memory",
    .keys = cpu_keys,
    .ops.backend = &cpu_ops,
};
