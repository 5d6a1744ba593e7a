/* backend/cpu: the CPU backend, and the numerical reference every other backend is
 * tested against. See cpu_internal.h for how it maps the backend contract onto the host. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

static const struct tb_key cpu_keys[] = {
    { "threads", TB_KEY_INT, "0", "0..4096", "OpenMP threads for ops; 0 = one per core" },
    { "device_memory", TB_KEY_SIZE, "0", NULL, "device memory capacity to emulate; 0 = no cap" },
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
    cpu->threads = threads > 0 ? (int)threads : omp_get_num_procs();
    uint64_t cap = tb_section_size(cfg, "device_memory");
    tb_cpu_memory_init(&cpu->memory, cap ? cap : UINT64_MAX);
    int rc = tb_cpu_streams_init(&cpu->streams, err);
    if (rc) {
        tb_cpu_memory_fini(&cpu->memory);
        free(cpu);
        return rc;
    }
    /* The ops run on the thread that drives this backend, with this many helpers. */
    omp_set_num_threads(cpu->threads);
    rc = tb_cpu_dnnl_init(cpu, err);
    if (rc) {
        tb_cpu_streams_fini(&cpu->streams);
        tb_cpu_memory_fini(&cpu->memory);
        free(cpu);
        return rc;
    }
    char model[96];
    cpu_model(model, sizeof model);
    snprintf(cpu->name, sizeof cpu->name, "cpu: %s (%d threads)", model, cpu->threads);
    if (cap) {
        char size[32];
        snprintf(size, sizeof size, "%.2f GiB", (double)cap / (1u << 30));
        tb_plog(TB_LOG_DEBUG, "%s, device memory capped at %s", cpu->name, size);
    }
    *ctx = cpu;
    return TB_OK;
}

static void cpu_destroy(void *ctx)
{
    struct tb_cpu *cpu = ctx;
    if (!cpu)
        return;
    tb_cpu_streams_fini(&cpu->streams);
    tb_cpu_dnnl_fini(cpu);
    tb_cpu_memory_fini(&cpu->memory);
    free(cpu);
}

void *tb_cpu_scratch(struct tb_cpu *cpu, size_t bytes, struct tb_err *err)
{
    if (bytes <= cpu->scratch_bytes && cpu->scratch)
        return cpu->scratch;
    if (cpu->scratch)
        tb_cpu_memory_free(&cpu->memory, cpu->scratch);
    cpu->scratch = tb_cpu_memory_alloc(&cpu->memory, bytes ? bytes : 64);
    cpu->scratch_bytes = cpu->scratch ? bytes : 0;
    if (!cpu->scratch) {
        cpu->failed_bytes = bytes ? bytes : 64;
        tb_err_set(err, TB_ERR_NOMEM, "cpu backend: no device memory left for %zu bytes of op scratch space", bytes);
    }
    return cpu->scratch;
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

static void cpu_mem_reset_peak(void *ctx, int device)
{
    struct tb_cpu *cpu = ctx;
    (void)device;
    tb_cpu_memory_reset_peak(&cpu->memory);
}

/* Host memory is already as "pinned" as it gets here. */
static void *cpu_host_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

static void cpu_host_free(void *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
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

/* NCHW (host) <-> NHWC (device), element size `es`. */
static void transpose(const struct tb_shape s, size_t es, const void *src, void *dst, bool to_device)
{
    const char *from = src;
    char *to = dst;
    size_t hw = (size_t)s.h * (size_t)s.w;
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < s.n; n++)
        for (int c = 0; c < s.c; c++)
            for (size_t p = 0; p < hw; p++) {
                size_t nchw = ((size_t)n * (size_t)s.c + (size_t)c) * hw + p;
                size_t nhwc = ((size_t)n * hw + p) * (size_t)s.c + (size_t)c;
                if (to_device)
                    memcpy(to + nhwc * es, from + nchw * es, es);
                else
                    memcpy(to + nchw * es, from + nhwc * es, es);
            }
}

static int cpu_tensor_write(void *ctx, const struct tb_tensor *t, const void *host, struct tb_err *err)
{
    (void)ctx;
    (void)err;
    transpose(t->desc.shape, tb_dtype_size(t->desc.dtype), host, t->data, true);
    return TB_OK;
}

static int cpu_tensor_read(void *ctx, const struct tb_tensor *t, void *host, struct tb_err *err)
{
    (void)ctx;
    (void)err;
    transpose(t->desc.shape, tb_dtype_size(t->desc.dtype), t->data, host, false);
    return TB_OK;
}

static int cpu_tensor_fill(void *ctx, const struct tb_tensor *t, float value, struct tb_err *err)
{
    (void)ctx;
    if (t->desc.dtype != TB_F32)
        return tb_err_set(err, TB_ERR_RUNTIME, "tensor_fill: only f32 tensors");
    float *p = t->data;
    size_t n = tb_shape_elems(t->desc.shape);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        p[i] = value;
    return TB_OK;
}

static int cpu_tensor_accumulate(void *ctx, const struct tb_tensor *dst, const struct tb_tensor *src, float alpha,
                                 struct tb_err *err)
{
    (void)ctx;
    if (dst->desc.dtype != TB_F32 || src->desc.dtype != TB_F32 || !tb_shape_eq(dst->desc.shape, src->desc.shape))
        return tb_err_set(err, TB_ERR_RUNTIME, "tensor_accumulate: f32 tensors of one shape only");
    float *d = dst->data;
    const float *s = src->data;
    size_t n = tb_shape_elems(dst->desc.shape);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        d[i] += alpha * s[i];
    return TB_OK;
}

static int cpu_sgd_update(void *ctx, const struct tb_tensor *param, const struct tb_tensor *grad,
                          const struct tb_tensor *mom, float lr, float momentum, float weight_decay, struct tb_err *err)
{
    (void)ctx;
    if (!tb_shape_eq(param->desc.shape, grad->desc.shape) || !tb_shape_eq(param->desc.shape, mom->desc.shape))
        return tb_err_set(err, TB_ERR_RUNTIME, "sgd_update: parameter, gradient and momentum differ in shape");
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

static int cpu_op_backward(void *ctx, const struct tb_op *op, void *state, const struct tb_tensor *in,
                           const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                           struct tb_err *err)
{
    return tb_cpu_op_backward(ctx, op, state, in, out, dout, din, err);
}

static const struct tb_backend_ops cpu_ops = {
    .score = cpu_score,
    .create = cpu_create,
    .destroy = cpu_destroy,
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
