/* backend/sim: plays the platform's accelerator on a virtual clock (sim_shared.h): the
 * instance, its memory, streams, events and copies. Tensors and ops are sim_ops.c's. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sim_shared.h"

static const struct tb_key sim_keys[] = {
    { "device_memory", TB_KEY_SIZE, "0", NULL,
      "device memory to model; 0 = the platform's accelerator's ([platform] accel_memory), or 15 GiB (a 16 GB V100 "
      "after its context) where the platform gives none" },
    { "kernel_us", TB_KEY_FLOAT, "5", "0..100000",
      "microseconds of device time each kernel costs beside its work (launch and tail), as small steps on a GPU are "
      "bound by it" },
    { "submit_us", TB_KEY_FLOAT, "2", "0..100000",
      "microseconds of host time each submission (a kernel launch, a copy, an event) takes, as a driver call does; "
      "a device whose work is shorter waits for the host" },
    { "host_waits", TB_KEY_BOOL, "no", NULL,
      "the host waits for each op it submits, as where ops run on the host's own thread (to play the cpu backend, "
      "as bench/sim does); no = it runs ahead of the device, as a GPU's host does, and sees copies finish later" },
    { "sim_ranks", TB_KEY_INT, "1", "1..4096",
      "GPUs to model, data parallel: each runs this process's share of [train] batch, and each gradient bucket is "
      "all-reduced in a ring over the platform's links (gpus_per_node, peer_gbps, net_gbps) beside backward; 1 = "
      "one GPU" },
    { "sim_profile", TB_KEY_PATH, "", NULL,
      "per-op times measured on a real device, used where an op's signature matches (the model elsewhere): a CSV "
      "'op,seconds' or a Chrome trace trainbig wrote ([report] trace, bench/step --trace); empty = the model only" },
    TB_KEYS_END,
};

/* Event times count from here, so that 0 keeps event_time's meaning of never. */
#define ORIGIN_S 1.0
/* Where neither [backend] device_memory nor the platform says: a 16 GB V100 after its
 * CUDA context, as the study's platforms. */
#define DEFAULT_CAPACITY ((uint64_t)15 << 30)

static int sim_score(char *why, size_t why_size)
{
    snprintf(why, why_size, "a model of the platform's accelerator, not a device: used only when named ([backend] "
                            "plugin = sim)");
    return 0;
}

static void name_device(struct tb_sim *sim)
{
    const double gib = (double)sim->capacity / (1u << 30);
    snprintf(sim->name, sizeof sim->name, "sim: %s, modelled (%.1f TFLOP/s fp32, %.0f GB/s, %.2f GiB)",
             sim->accel_name[0] ? sim->accel_name : "V100 SXM2 16 GB", sim->device.fp32_flops / 1e12,
             sim->device.mem_bytes_per_s / 1e9, gib);
}

static int sim_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    struct tb_sim *sim = calloc(1, sizeof *sim);
    if (!sim)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    sim_clock_init(&sim->clock, tb_section_float(cfg, "submit_us") * 1e-6);
    sim->clock.host_waits = tb_section_bool(cfg, "host_waits");
    sim_device_from(&sim->device, NULL, NULL);
    sim->device.launch_s = tb_section_float(cfg, "kernel_us") * 1e-6;
    sim->capacity = tb_section_size(cfg, "device_memory");
    sim->capacity_set = sim->capacity > 0;
    if (!sim->capacity_set)
        sim->capacity = DEFAULT_CAPACITY;
    sim->link.numa_node = -1;
    sim->comm.ranks = (int)tb_section_int(cfg, "sim_ranks");
    const char *profile = tb_section_string(cfg, "sim_profile");
    if (profile && *profile) {
        int rc = sim_profile_load(&sim->profile, profile, err);
        if (rc) {
            free(sim);
            return rc;
        }
        snprintf(sim->profile_path, sizeof sim->profile_path, "%s", profile);
        tb_plog(TB_LOG_INFO, "[backend] sim_profile %s: %zu measured op passes (%zu timings)", profile,
                sim->profile.n, sim->profile.read);
    }
    name_device(sim);
    *ctx = sim;
    return TB_OK;
}

static void sim_destroy(void *ctx)
{
    struct tb_sim *sim = ctx;
    if (!sim)
        return;
    if (sim->scratch)
        sim_memory_free(&sim->memory, sim->scratch);
    if (sim->memory_ready)
        sim_memory_fini(&sim->memory);
    if (sim->profile.n) /* ops the profile did not have are the model's: worth a warning */
        tb_plog(sim->counts.modelled ? TB_LOG_WARN : TB_LOG_INFO,
                "[backend] sim_profile %s: %" PRIu64 " op passes prepared took its times, %" PRIu64
                " had none there and took the model's",
                sim->profile_path, sim->counts.measured, sim->counts.modelled);
    if (sim->comm.buckets || sim->comm.bn_reduces)
        tb_plog(TB_LOG_INFO,
                "%d modelled GPUs: %" PRIu64 " gradient buckets all-reduced (%.3f s on the links, beside backward), "
                "%" PRIu64 " batch norm all-reduces (%.3f s on the compute stream)",
                sim->comm.ranks, sim->comm.buckets, sim->comm.bucket_s, sim->comm.bn_reduces, sim->comm.bn_s);
    sim_profile_free(&sim->profile);
    free(sim);
}

bool tb_sim_memory(struct tb_sim *sim)
{
    if (!sim->memory_ready)
        sim->memory_ready = sim_memory_init(&sim->memory, sim->capacity) == 0;
    return sim->memory_ready;
}

void tb_sim_kernel(struct tb_sim *sim, double seconds)
{
    sim_submit(&sim->clock, TB_STREAM_COMPUTE, seconds + sim->device.launch_s);
    sim->counts.kernels++;
}

double tb_sim_stream_seconds(const struct tb_sim *sim, double bytes)
{
    /* a copy kernel's usual share of the peak bandwidth (sim_model.c's eltwise row) */
    return sim->device.mem_bytes_per_s > 0 ? bytes / (0.8 * sim->device.mem_bytes_per_s) : 0;
}

static int sim_device_count(void *ctx)
{
    (void)ctx;
    return 1;
}

static int sim_device_info(void *ctx, int device, struct tb_device_info *out)
{
    struct tb_sim *sim = ctx;
    if (device != 0)
        return TB_ERR_CONFIG;
    snprintf(out->name, sizeof out->name, "%s", sim->name);
    out->capacity = sim->capacity;
    out->flags = TB_DEVICE_MODELLED;
    out->ranks = sim->comm.ranks;
    return TB_OK;
}

/* ------------------------------------------------------------------ memory */

static void *sim_mem_alloc(void *ctx, int device, size_t bytes)
{
    struct tb_sim *sim = ctx;
    (void)device;
    return tb_sim_memory(sim) ? sim_memory_alloc(&sim->memory, bytes) : NULL;
}

static void sim_mem_free(void *ctx, int device, void *ptr)
{
    struct tb_sim *sim = ctx;
    (void)device;
    if (!ptr)
        return;
    if (!sim->memory_ready || !sim_memory_free(&sim->memory, ptr)) {
        fprintf(stderr, "trainbig: internal error: sim backend: mem_free(%p) is no block of its device memory\n", ptr);
        abort(); /* a bug in the caller, not a user error */
    }
}

static uint64_t sim_alloc_failed_bytes(void *ctx, int device)
{
    struct tb_sim *sim = ctx;
    (void)device;
    const uint64_t b = sim->failed_bytes;
    sim->failed_bytes = 0;
    return b;
}

static void sim_release_scratch(void *ctx, int device)
{
    struct tb_sim *sim = ctx;
    (void)device;
    if (sim->scratch)
        sim_memory_free(&sim->memory, sim->scratch);
    sim->scratch = NULL;
    sim->scratch_bytes = 0;
}

static void sim_mem_stats(void *ctx, int device, struct tb_mem_stats *out)
{
    struct tb_sim *sim = ctx;
    (void)device;
    if (tb_sim_memory(sim)) {
        sim_memory_stats(&sim->memory, out);
    } else {
        memset(out, 0, sizeof *out);
        out->capacity = sim->capacity;
    }
}

static void sim_mem_reset_peak(void *ctx, int device)
{
    struct tb_sim *sim = ctx;
    (void)device;
    if (sim->memory_ready)
        sim_memory_reset_peak(&sim->memory);
}

static size_t sim_mem_blocks(void *ctx, int device, struct tb_mem_block *out, size_t max)
{
    struct tb_sim *sim = ctx;
    (void)device;
    return tb_sim_memory(sim) ? tb_arena_blocks(&sim->memory.arena, out, max) : 0;
}

/* Pinned host memory: a private mapping the kernel commits page by page as it is written
 * and never before (MAP_NORESERVE), so the copies a run swaps out, which nothing writes
 * here, take none of this machine's memory. A header page in front holds its size. */
struct host_header {
    size_t total;
    uint64_t magic;
};
#define HOST_MAGIC 0x73696d686f7374ull /* "simhost" */
#define HOST_HEADER ((size_t)4096)

static void *sim_host_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    if (bytes > SIZE_MAX - 2 * HOST_HEADER)
        return NULL;
    const size_t total = HOST_HEADER + (bytes + HOST_HEADER - 1) / HOST_HEADER * HOST_HEADER;
    void *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    struct host_header *h = p;
    h->total = total;
    h->magic = HOST_MAGIC;
    return (char *)p + HOST_HEADER;
}

static void sim_host_free(void *ctx, void *ptr)
{
    (void)ctx;
    if (!ptr)
        return;
    struct host_header *h = (struct host_header *)((char *)ptr - HOST_HEADER);
    if (h->magic != HOST_MAGIC) {
        fprintf(stderr, "trainbig: internal error: sim backend: host_free(%p) is no block of its host memory\n", ptr);
        abort();
    }
    h->magic = 0;
    munmap(h, h->total);
}

/* ------------------------------------------------------------------ streams, events */

static struct tb_event *sim_event_create(void *ctx, int device)
{
    (void)ctx;
    (void)device;
    return calloc(1, sizeof(struct tb_event));
}

static void sim_event_destroy(void *ctx, struct tb_event *ev)
{
    (void)ctx;
    free(ev);
}

static bool stream_ok(enum tb_stream s)
{
    return (int)s >= 0 && s < TB_STREAMS;
}

static int sim_event_record(void *ctx, struct tb_event *ev, enum tb_stream stream)
{
    struct tb_sim *sim = ctx;
    if (!ev || !stream_ok(stream))
        return TB_ERR_RUNTIME;
    sim->clock.host += sim->clock.launch_s;
    sim_record(&sim->clock, &ev->e, stream);
    return TB_OK;
}

static int sim_stream_wait(void *ctx, int device, enum tb_stream stream, struct tb_event *ev)
{
    struct tb_sim *sim = ctx;
    (void)device;
    if (!ev || !stream_ok(stream))
        return TB_ERR_RUNTIME;
    sim_wait(&sim->clock, stream, &ev->e);
    return TB_OK;
}

static int sim_event_query(void *ctx, struct tb_event *ev)
{
    struct tb_sim *sim = ctx;
    return sim_query(&sim->clock, &ev->e) ? 1 : 0;
}

static int be_event_sync(void *ctx, struct tb_event *ev)
{
    struct tb_sim *sim = ctx;
    sim_event_sync(&sim->clock, &ev->e);
    return TB_OK;
}

static int be_stream_sync(void *ctx, int device, enum tb_stream stream)
{
    struct tb_sim *sim = ctx;
    (void)device;
    if (!stream_ok(stream))
        return TB_ERR_RUNTIME;
    sim_stream_sync(&sim->clock, stream);
    return TB_OK;
}

static double sim_event_time(void *ctx, struct tb_event *ev)
{
    (void)ctx;
    return ev && ev->e.recorded ? ORIGIN_S + ev->e.time : 0;
}

/* As the core times a synchronous device: the later of the host's time and the time the
 * compute stream's queued work completes. Timing a call with it measures what that call
 * added to the device's compute (an op's seconds, a wait on a copy), not the driver's. */
static double sim_now(void *ctx)
{
    struct tb_sim *sim = ctx;
    const double compute = sim->clock.tail[TB_STREAM_COMPUTE];
    return ORIGIN_S + (sim->clock.host > compute ? sim->clock.host : compute);
}

static int sim_copy_async(void *ctx, int device, enum tb_stream stream, void *dst, const void *src, size_t bytes,
                          struct tb_err *err)
{
    struct tb_sim *sim = ctx;
    (void)device;
    (void)dst;
    (void)src;
    if (!stream_ok(stream))
        return tb_err_set(err, TB_ERR_RUNTIME, "sim backend: copy on stream %d, which does not exist", (int)stream);
    if (stream == TB_STREAM_COMPUTE) {
        tb_sim_kernel(sim, tb_sim_stream_seconds(sim, 2.0 * (double)bytes));
        return TB_OK;
    }
    sim_submit(&sim->clock, stream, sim_copy_seconds(&sim->clock, stream, bytes, &sim->link));
    sim->counts.copies++;
    sim->counts.copy_bytes += (double)bytes;
    return TB_OK;
}

/* ------------------------------------------------------------------ platform */

static int sim_set_platform(void *ctx, int device, struct tb_link *link, char *note, size_t note_size,
                            struct tb_err *err)
{
    struct tb_sim *sim = ctx;
    (void)device;
    (void)err;
    if (note_size)
        note[0] = '\0';
    if (link)
        sim->link = *link;
    const double launch = sim->device.launch_s;
    sim_device_from(&sim->device, link, NULL);
    sim->device.launch_s = launch;
    name_device(sim);
    return TB_OK;
}

static int sim_set_accel(void *ctx, int device, const struct tb_accel *accel, struct tb_err *err)
{
    struct tb_sim *sim = ctx;
    (void)device;
    if (!accel)
        return TB_OK;
    const double launch = sim->device.launch_s;
    sim_device_from(&sim->device, &sim->link, accel);
    sim->device.launch_s = launch;
    snprintf(sim->accel_name, sizeof sim->accel_name, "%s", accel->name);
    sim->accel = *accel;
    if (!sim->capacity_set && accel->memory_bytes > 0) {
        if (sim->memory_ready && accel->memory_bytes != sim->capacity)
            return tb_err_set(err, TB_ERR_RUNTIME,
                              "sim backend: the accelerator's memory arrived after the device memory was in use");
        sim->capacity = accel->memory_bytes;
    }
    name_device(sim);
    tb_plog(TB_LOG_INFO, "%s: every time is the model's, no value is computed", sim->name);
    return TB_OK;
}

/* ------------------------------------------------------------------ data parallelism */

/* The core joins the modelled ranks (the device_info's ranks) as a world of sim_ranks. */
static int sim_comm_attach(void *ctx, int device, const struct tb_comm *comm, struct tb_err *err)
{
    struct tb_sim *sim = ctx;
    (void)device;
    if (comm->size != sim->comm.ranks)
        return tb_err_set(err, TB_ERR_CONFIG,
                          "sim backend: it models %d GPU%s ([backend] sim_ranks) but was started as one of %d ranks: "
                          "run it as one process, and set sim_ranks to the GPUs to model",
                          sim->comm.ranks, sim->comm.ranks == 1 ? "" : "s", comm->size);
    const struct tb_accel *a = &sim->accel;
    if (a->per_node < 1 || a->peer_bytes_per_s <= 0 || (comm->size > a->per_node && a->net_bytes_per_s <= 0))
        return tb_err_set(err, TB_ERR_CONFIG,
                          "sim backend: [backend] sim_ranks = %d, but the platform does not say how its GPUs talk "
                          "(gpus_per_node, peer_gbps, net_gbps of trainbig.ini(5))",
                          comm->size);
    sim->comm.attached = true;
    return TB_OK;
}

static int sim_allreduce_start(void *ctx, const struct tb_tensor *t, size_t n, float scale, struct tb_err *err)
{
    struct tb_sim *sim = ctx;
    (void)scale;
    (void)err;
    double bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += (double)tb_sim_tensor_bytes(ctx, &t[i].desc);
    /* After the compute submitted so far, and after the all-reduces before it (one stream). */
    struct sim_clock *c = &sim->clock;
    c->host += c->launch_s;
    double start = c->tail[TB_STREAM_COMPUTE];
    start = start > sim->comm.tail ? start : sim->comm.tail;
    start = start > c->host ? start : c->host;
    const double seconds = sim_ring_seconds(&sim->accel, sim->comm.ranks, bytes);
    sim->comm.tail = start + seconds;
    sim->comm.busy += seconds;
    sim->comm.buckets++;
    sim->comm.bucket_s += seconds;
    return TB_OK;
}

/* Later compute waits for the all-reduces: what they add past the compute queued so far
 * is what backward did not hide. */
static int sim_allreduce_wait(void *ctx, double *busy_s, double *waited_s, struct tb_err *err)
{
    struct tb_sim *sim = ctx;
    (void)err;
    double *compute = &sim->clock.tail[TB_STREAM_COMPUTE];
    const double exposed = sim->comm.tail > *compute ? sim->comm.tail - *compute : 0;
    *compute += exposed;
    if (busy_s)
        *busy_s = sim->comm.busy;
    if (waited_s)
        *waited_s = exposed;
    sim->comm.busy = 0;
    return TB_OK;
}

static const struct tb_backend_ops sim_ops = {
    .head = { .score = sim_score, .create = sim_create, .destroy = sim_destroy },
    .device_count = sim_device_count,
    .device_info = sim_device_info,
    .mem_alloc = sim_mem_alloc,
    .mem_free = sim_mem_free,
    .mem_stats = sim_mem_stats,
    .mem_reset_peak = sim_mem_reset_peak,
    .host_alloc = sim_host_alloc,
    .host_free = sim_host_free,
    .event_create = sim_event_create,
    .event_destroy = sim_event_destroy,
    .event_record = sim_event_record,
    .stream_wait = sim_stream_wait,
    .event_query = sim_event_query,
    .event_sync = be_event_sync,
    .stream_sync = be_stream_sync,
    .copy_async = sim_copy_async,
    .alloc_failed_bytes = sim_alloc_failed_bytes,
    .release_scratch = sim_release_scratch,
    .set_platform = sim_set_platform,
    .event_time = sim_event_time,
    .tensor_bytes = tb_sim_tensor_bytes,
    .tensor_write = tb_sim_tensor_write,
    .tensor_read = tb_sim_tensor_read,
    .tensor_fill = tb_sim_tensor_fill,
    .tensor_accumulate = tb_sim_tensor_accumulate,
    .op_prepare = tb_sim_op_prepare,
    .op_release = tb_sim_op_release,
    .op_forward = tb_sim_op_forward,
    .op_backward = tb_sim_op_backward,
    .sgd_update = tb_sim_sgd_update,
    .op_describe = tb_sim_op_describe,
    .op_recompute = tb_sim_op_recompute,
    .mem_blocks = sim_mem_blocks,
    .now = sim_now,
    .set_accel = sim_set_accel,
    .op_scratch_bytes = tb_sim_op_scratch_bytes,
    .comm_attach = sim_comm_attach,
    .allreduce_start = sim_allreduce_start,
    .allreduce_wait = sim_allreduce_wait,
};

TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
    .abi_major = TB_ABI_MAJOR,
    .abi_minor = TB_ABI_MINOR,
    .kind = TB_KIND_BACKEND,
    .name = "sim",
    .version = TB_VERSION,
    .description = "the platform's accelerator modelled on a virtual clock: times and memory, no values",
    .keys = sim_keys,
    .ops.backend = &sim_ops,
};
