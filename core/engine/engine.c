/* engine.c: a backend instance and the parameters that live on it. */
#include "config.h"

#include "core/engine/engine_internal.h"
#include "core/util/hash_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/clock.h>
#include <trainbig/random.h>

int tb_engine_init(struct tb_engine *e, const struct tb_plugin *backend, void *ctx, int device, uint64_t seed,
                   struct tb_err *err)
{
    memset(e, 0, sizeof *e);
    const struct tb_backend_ops *o = backend->ops.backend;
    /* The members every backend needs to run a graph; the loader requires only the head. */
    if (!o->device_count || !o->mem_alloc || !o->mem_free || !o->mem_stats || !o->tensor_bytes || !o->tensor_write ||
        !o->tensor_read || !o->tensor_fill || !o->tensor_accumulate || !o->op_prepare || !o->op_release ||
        !o->op_forward || !o->op_backward || !o->sgd_update || !o->event_create || !o->copy_async || !o->stream_sync)
        return tb_err_set(err, TB_ERR_PLUGIN,
                          "backend plugin '%s' cannot compute: it lacks some of the device, memory, tensor and op "
                          "members of the backend contract (trainbig/backend.h)",
                          backend->name);
    if (device < 0 || device >= o->device_count(ctx))
        return tb_err_set(err, TB_ERR_CONFIG, "backend '%s' has %d devices; device %d does not exist", backend->name,
                          o->device_count(ctx), device);
    e->ops = o;
    e->ctx = ctx;
    e->alloc_failed_bytes = o->alloc_failed_bytes;
    e->release_scratch = o->release_scratch;
    e->event_time = o->event_time;
    e->op_describe = o->op_describe;
    e->reorder_stats = o->reorder_stats;
    e->now = o->now;
    e->op_scratch_bytes = o->op_scratch_bytes;
    e->dtypes = (o->dtypes ? o->dtypes(ctx, device) : 0) | 1u << TB_F32;
    snprintf(e->backend_name, sizeof e->backend_name, "%s", backend->name);
    if (o->device_info) {
        struct tb_device_info info;
        memset(&info, 0, sizeof info);
        if (o->device_info(ctx, device, &info) == TB_OK)
            e->modelled = (info.flags & TB_DEVICE_MODELLED) != 0;
    }
    e->device = device;
    e->seed = seed;
    return TB_OK;
}

double tb_engine_now(const struct tb_engine *e)
{
    return e->now ? e->now(e->ctx) : tb_now();
}

static void free_tensor(struct tb_engine *e, struct tb_tensor *t)
{
    if (t->data)
        e->ops->mem_free(e->ctx, e->device, t->data);
    t->data = NULL;
}

void tb_engine_fini(struct tb_engine *e)
{
    for (size_t i = 0; i < e->nparams; i++) {
        free_tensor(e, &e->params[i]->value);
        free_tensor(e, &e->params[i]->grad);
        free_tensor(e, &e->params[i]->momentum);
        free(e->params[i]->name);
        free(e->params[i]);
    }
    free(e->params);
    e->params = NULL;
    e->nparams = e->params_cap = 0;
}

struct tb_param *tb_engine_find_param(struct tb_engine *e, const char *name)
{
    for (size_t i = 0; i < e->nparams; i++)
        if (strcmp(e->params[i]->name, name) == 0)
            return e->params[i];
    return NULL;
}

size_t tb_engine_param_count(const struct tb_engine *e)
{
    return e->nparams;
}

struct tb_param *tb_engine_param_at(const struct tb_engine *e, size_t i)
{
    return i < e->nparams ? e->params[i] : NULL;
}

/* A reproducible stream of normal numbers for one parameter: seeded by the run seed and
 * the parameter's name (FNV-1a), so initial weights do not depend on build order. */
struct normal_rng {
    uint64_t state;
    bool has_spare;
    double spare;
};

static double normal(struct normal_rng *r)
{
    if (r->has_spare) {
        r->has_spare = false;
        return r->spare;
    }
    /* Box-Muller on two uniforms in (0, 1]. */
    double u1 = ((double)(tb_splitmix64(&r->state) >> 11) + 1.0) / 9007199254740992.0;
    double u2 = (double)(tb_splitmix64(&r->state) >> 11) / 9007199254740992.0;
    double rad = sqrt(-2.0 * log(u1)), ang = 2.0 * M_PI * u2;
    r->spare = rad * sin(ang);
    r->has_spare = true;
    return rad * cos(ang);
}

static int initialise(struct tb_engine *e, struct tb_param *p, enum tb_init init, struct tb_err *err)
{
    struct tb_shape s = p->value.desc.shape;
    size_t n = tb_shape_elems(s);
    if (init == TB_INIT_ZEROS || init == TB_INIT_ONES)
        return e->ops->tensor_fill(e->ctx, &p->value, init == TB_INIT_ONES ? 1.0f : 0.0f, err);
    /* Fans as PyTorch computes them for a (O, C, KH, KW) weight. */
    double fan_in = (double)s.c * s.h * s.w, fan_out = (double)s.n * s.h * s.w;
    double std = init == TB_INIT_KAIMING_NORMAL ? sqrt(2.0 / fan_in) : sqrt(2.0 / (fan_in + fan_out));
    float *host = malloc(n * sizeof *host);
    if (!host)
        return tb_err_set(err, TB_ERR_NOMEM, "out of host memory initialising %s", p->name);
    /* Started from 1469598103934665603 (FNV's offset basis with a digit lost) since the
     * first release: kept, so that a seed gives the same initial weights as before. */
    const uint64_t h = tb_fnv1a(p->name, strlen(p->name), 1469598103934665603ull);
    struct normal_rng r = { h ^ (e->seed * TB_GOLDEN64), false, 0 };
    for (size_t i = 0; i < n; i++)
        host[i] = (float)(std * normal(&r));
    int rc = e->ops->tensor_write(e->ctx, &p->value, host, err);
    free(host);
    return rc;
}

/* Parameters, buffers and their gradients and momentum stay on the device: no [swap]
 * policy moves them. So when one does not fit, say what the device holds and what to
 * change, rather than only that the allocation failed. */
static int no_room_for_param(struct tb_engine *e, const char *name, size_t bytes, bool trainable, struct tb_err *err)
{
    uint64_t held = 0;
    for (size_t i = 0; i < e->nparams; i++)
        held += e->ops->tensor_bytes(e->ctx, &e->params[i]->value.desc);
    struct tb_mem_stats ms = { 0 };
    e->ops->mem_stats(e->ctx, e->device, &ms);
    if (!ms.capacity || ms.capacity == UINT64_MAX) /* no cap: the system's memory ran out */
        return tb_err_set(err, TB_ERR_NOMEM,
                          "%s: out of memory for %zu bytes of %s: the system has none left (the device's memory has "
                          "no cap: [backend] device_memory unset; %zu parameters and buffers take %.1f MiB)",
                          name, bytes, trainable ? "parameter" : "buffer", e->nparams, (double)held / 1048576.0);
    return tb_err_set(
        err, TB_ERR_NOMEM,
        "%s: no device memory for %zu bytes of %s: the device has %.1f MiB (%.1f MiB in use; %zu "
        "parameters and buffers take %.1f MiB of it); parameters, buffers, gradients and momentum are never "
        "swapped, so the device needs room for them all (about 3x the parameters' bytes when "
        "training) and the step's largest op: raise [backend] device_memory",
        name, bytes, trainable ? "parameter" : "buffer", (double)ms.capacity / 1048576.0, (double)ms.in_use / 1048576.0,
        e->nparams, (double)held / 1048576.0);
}

int tb_engine_param(struct tb_engine *e, const char *name, bool trainable, struct tb_tensor_desc d, enum tb_init init,
                    struct tb_param **out, struct tb_err *err)
{
    struct tb_param *p = tb_engine_find_param(e, name);
    if (p) {
        if (!tb_shape_eq(p->value.desc.shape, d.shape) || p->trainable != trainable)
            return tb_err_set(err, TB_ERR_RUNTIME,
                              "%s %s is %dx%dx%dx%d in one graph and %dx%dx%dx%d in another: the same name must "
                              "mean the same tensor",
                              trainable ? "parameter" : "buffer", name, p->value.desc.shape.n, p->value.desc.shape.c,
                              p->value.desc.shape.h, p->value.desc.shape.w, d.shape.n, d.shape.c, d.shape.h, d.shape.w);
        *out = p;
        return TB_OK;
    }
    if (e->nparams == e->params_cap) {
        size_t cap = e->params_cap ? 2 * e->params_cap : 64;
        void *q = realloc(e->params, cap * sizeof *e->params);
        if (!q)
            return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        e->params = q;
        e->params_cap = cap;
    }
    p = calloc(1, sizeof *p);
    if (!p)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    p->name = strdup(name);
    p->trainable = trainable;
    p->value.desc = d;
    p->value.device = e->device;
    size_t bytes = e->ops->tensor_bytes(e->ctx, &d);
    p->value.data = p->name ? e->ops->mem_alloc(e->ctx, e->device, bytes) : NULL;
    if (!p->value.data) {
        free(p->name);
        free(p);
        return no_room_for_param(e, name, bytes, trainable, err);
    }
    int rc = initialise(e, p, init, err);
    if (rc) {
        free_tensor(e, &p->value);
        free(p->name);
        free(p);
        return rc;
    }
    e->params[e->nparams++] = p;
    *out = p;
    return TB_OK;
}

int tb_engine_attach_comm(struct tb_engine *e, const char *backend_name, const struct tb_comm *comm,
                          size_t bucket_bytes, struct tb_err *err)
{
    if (!comm || comm->size <= 1)
        return TB_OK;
    const struct tb_backend_ops *o = e->ops;
    if (!o->comm_attach || !o->allreduce_start || !o->allreduce_wait)
        return tb_err_set(err, TB_ERR_PLUGIN,
                          "backend '%s' cannot all-reduce gradients across ranks (it lacks comm_attach, "
                          "allreduce_start and allreduce_wait of trainbig/backend.h): run it as one process, "
                          "not under mpirun -np %d",
                          backend_name, comm->size);
    int rc = o->comm_attach(e->ctx, e->device, comm, err);
    if (rc)
        return tb_err_prefix(err, "backend '%s', joining %d ranks", backend_name, comm->size);
    e->comm = comm;
    e->allreduce_start = o->allreduce_start;
    e->allreduce_wait = o->allreduce_wait;
    e->bucket_bytes = bucket_bytes;
    return TB_OK;
}
