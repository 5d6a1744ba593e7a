/* steptime.c: times training steps of a configuration: the setup `trainbig train` would
 * make, the first batch of the train split, warm-up steps, then timed steps with their
 * swap counters and peak device memory. */
#include "config.h"

#include "tools/steptime_internal.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/clock.h>

#include "core/config/ini.h"
#include "core/data/dataloader.h"
#include "core/dist/world.h"
#include "core/engine/engine.h"
#include "core/engine/graph.h"
#include "core/train/host_memory.h"
#include "core/config/loader.h"
#include "core/train/inputs.h"
#include "core/train/run.h"
#include "core/config/setup.h"
#include "tools/probe_internal.h"

/* One timed step: its time and what the swap did in it. */
struct timed {
    double step_s, stall_s, ops_s, recompute_s;
    uint64_t out, in, drop, recompute;
};

static int by_step_time(const void *a, const void *b)
{
    double x = ((const struct timed *)a)->step_s, y = ((const struct timed *)b)->step_s;
    return x < y ? -1 : x > y;
}

/* Whether `key` is [swap] plugin or one the policy whose key table is `arg` declares. */
static bool declared(const char *key, void *arg)
{
    if (strcmp(key, "plugin") == 0)
        return true;
    for (const struct tb_key *k = arg; k && k->name; k++)
        if (strcmp(k->name, key) == 0)
            return true;
    return false;
}

static bool plugin_only(const char *key, void *arg)
{
    (void)arg;
    return strcmp(key, "plugin") == 0;
}

/* Leaves out the [swap] keys the policy named there does not declare: the file's keys
 * were written for its own policy; those another policy shares (min_size) still apply. */
static int drop_foreign_swap_keys(struct tb_config *cfg, struct tb_err *err)
{
    const struct tb_entry *e = tb_config_find(cfg, "swap", "plugin");
    if (!e || strchr(e->value, '/')) {
        tb_config_drop_section(cfg, "swap", declared, NULL); /* a policy by path: its plugin only */
        return TB_OK;
    }
    struct tb_plugin_handle *h = NULL;
    int rc = tb_plugin_find(TB_KIND_SWAP, e->value, &h, err);
    if (rc)
        return rc;
    tb_config_drop_section(cfg, "swap", declared, (void *)h->p->keys);
    tb_plugin_close(h);
    return TB_OK;
}

/* The file at path, or an empty configuration when path is NULL; *cfg is NULL when that
 * fails (the error returned). */
static int load_config(const char *path, struct tb_config **cfg, struct tb_err *err)
{
    if (path)
        return tb_config_load(path, cfg, err);
    if (!(*cfg = tb_config_new("steps")))
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    return TB_OK;
}

/* trace: a Chrome trace of the last timed step written there; spans: its spans kept there
 * instead (names cleared: they are the executor's). Either may be NULL. */
static int time_steps(const char *path, bool drop_swap, const char *trace, struct tb_trace_span **spans, size_t *nspans,
                      const char *const *sets, int nsets, int steps, struct tb_step_timing *out, struct tb_err *err)
{
    struct tb_config *cfg = NULL;
    int rc = load_config(path, &cfg, err);
    if (!cfg)
        return rc;
    if (rc)
        return rc;
    /* A plugin the assignments put in place of the file's: the file's keys for its own
     * plugin that the new one does not know are left out (a platform's all: they describe
     * the file's machine, not the one named). */
    static const enum tb_section_id switchable[] = { TB_SEC_BACKEND, TB_SEC_PLATFORM, TB_SEC_MODEL, TB_SEC_DATASET,
                                                     TB_SEC_SWAP };
    static const char *const names[] = { "backend", "platform", "model", "dataset", "swap" };
    enum { NSWITCH = sizeof switchable / sizeof switchable[0] };
    char file_plugin[NSWITCH][256];
    for (size_t j = 0; j < NSWITCH; j++) {
        const struct tb_entry *e = tb_config_find(cfg, names[j], "plugin");
        snprintf(file_plugin[j], sizeof file_plugin[j], "%s", e ? e->value : "");
    }
    for (int i = 0; i < nsets && !rc; i++)
        rc = tb_config_set(cfg, sets[i], err);
    for (size_t j = 0; j < NSWITCH && !rc; j++) {
        const struct tb_entry *e = tb_config_find(cfg, names[j], "plugin");
        if (!e || !file_plugin[j][0] || strcmp(e->value, file_plugin[j]) == 0 || strcmp(e->value, "auto") == 0)
            continue;
        char name[256];
        snprintf(name, sizeof name, "%s", e->value);
        if (switchable[j] == TB_SEC_PLATFORM)
            tb_config_drop_section(cfg, "platform", plugin_only, NULL);
        else
            rc = tb_config_switch_plugin(cfg, switchable[j], name, err);
    }
    if (!rc && drop_swap)
        rc = drop_foreign_swap_keys(cfg, err);
    struct tb_setup *s = NULL;
    if (!rc)
        rc = tb_setup_resolve(cfg, &s, err);
    struct tb_run r;
    memset(&r, 0, sizeof r);
    struct tb_graph *g = NULL;
    struct tb_exec *x = NULL;
    void *ds = NULL;
    const struct tb_dataset_ops *dops = NULL;
    struct timed *times = NULL; /* the timed steps' */
    if (!rc)
        rc = tb_run_open(&r, s, err);
    if (!rc) {
        dops = s->slot[TB_SEC_DATASET].plugin->p->ops.dataset;
        rc = tb_dataset_open(s->slot[TB_SEC_DATASET].plugin->p, s->slot[TB_SEC_DATASET].section, "train", &ds, err);
    }
    /* [train] batch is all ranks' together: on modelled ranks (sim_ranks) a step is one's. */
    const int ranks = tb_comm_modelled() ? tb_comm_world()->size : 1;
    int batch = s ? s->settings.train.batch : 0;
    if (!rc && batch % ranks)
        rc = tb_err_set(err, TB_ERR_CONFIG,
                        "[train] batch = %d cannot be shared equally by %d modelled ranks ([backend] sim_ranks): make "
                        "it a multiple of %d",
                        batch, ranks, ranks);
    batch /= ranks;
    const struct tb_data_settings *set = s ? &s->settings.data : NULL;
    uint32_t w = 0, h = 0;
    struct tb_model_input in = { 0 };
    struct tb_data_loader *l = NULL;
    if (!rc && (size_t)batch > dops->count(ds))
        rc = tb_err_set(err, TB_ERR_CONFIG, "batch %d: " TB_STEPTIME_DATA_SHORT " %zu samples", batch, dops->count(ds));
    if (!rc)
        rc = tb_data_image_size(dops, ds, set, true, &w, &h, err);
    if (!rc) {
        const struct tb_class *classes;
        const int k = (int)dops->classes(ds, &classes);
        in = (struct tb_model_input){ batch, 3, (int)h, (int)w, k, 255 };
        rc = tb_run_build(&r, true, &in, &g, err);
    }
    struct tb_batch_spec inputs = { 0 };
    if (!rc)
        rc = tb_inputs_spec(&inputs, g, r.model, r.model_ctx, batch, (int)h, (int)w, err);
    /* What the host must hold before the executor allocates: a step too big for it
     * (the cpu backend without a device cap, whose device memory is host memory) is
     * refused as out of memory, as train refuses it, instead of growing until the
     * kernel ends the process. */
    if (!rc) {
        char fix[128];
        snprintf(fix, sizeof fix, "a smaller batch (%d now) or training crop (%ux%u now)", batch, w, h);
        const uint64_t buffers = (uint64_t)(set->prefetch + 1) * tb_batch_bytes(batch, (int)h, (int)w, &inputs);
        rc = tb_host_memory_check(&r.engine, &g, 1, buffers, false, "a training step", fix, NULL, err);
    }
    if (!rc)
        rc = tb_run_exec(&r, g, &in, &x, err);
    if (!rc) {
        const struct tb_data_loader_config lc = {
            .ops = dops,
            .ctx = ds,
            .what = "train split",
            .train = true,
            .batch = batch,
            .rank = 0,
            .world = 1,
            .seed = 1,
            .width = w,
            .height = h,
            .set = set,
            .spec = &inputs,
        };
        rc = tb_data_loader_open(&lc, &l, err);
    }
    struct tb_loaded lb;
    if (!rc) {
        tb_data_loader_start(l, 0, 1);
        rc = tb_data_loader_next(l, &lb, err);
    }
    if (!rc)
        rc = tb_inputs_set(x, g, lb.b, err);
    out->width = (int)w;
    out->height = (int)h;
    out->batch = batch;
    if (!rc && !(times = malloc((size_t)steps * sizeof *times)))
        rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    const int warmup = TB_STEPTIME_WARMUP;
    for (int k = 0; k < warmup + steps && !rc; k++) {
        if (k == warmup)
            r.engine.ops->mem_reset_peak(r.engine.ctx, r.engine.device);
        const bool traced = (trace || spans) && k == warmup + steps - 1;
        if (traced)
            tb_exec_trace_begin(x);
        const struct tb_swap_stats before = *tb_exec_swap_stats(x);
        double t0 = tb_engine_now(&r.engine);
        rc = tb_exec_forward(x, (uint64_t)k, err);
        if (!rc)
            rc = tb_exec_backward(x, err);
        if (!rc)
            rc = tb_sgd_step(&r.engine, 0.001f, 0.9f, 1e-4f, err);
        /* The step is done when its copies are: nothing may spill into the next. */
        const double t1 = tb_engine_now(&r.engine);
        if (!rc)
            r.engine.ops->stream_sync(r.engine.ctx, r.engine.device, TB_STREAM_D2H);
        if (!rc && k >= warmup) {
            const struct tb_swap_stats d = tb_swap_stats_since(tb_exec_swap_stats(x), &before);
            struct timed *t = &times[k - warmup];
            t->step_s = tb_engine_now(&r.engine) - t0;
            /* its end waiting for its last copies out is stall too */
            t->stall_s = d.stall_seconds + (tb_engine_now(&r.engine) - t1);
            t->ops_s = 0;
            const double *sec = tb_exec_step_seconds(x);
            for (size_t i = 0; i < tb_schedule_steps(tb_exec_schedule(x)); i++)
                t->ops_s += sec[i];
            t->recompute_s = d.recompute_seconds;
            t->out = d.bytes_out;
            t->in = d.bytes_in;
            t->drop = d.drop_bytes;
            t->recompute = d.recompute_bytes;
        }
        if (!rc && traced && trace)
            rc = tb_exec_trace_write(x, trace, err);
        else if (!rc && traced) {
            rc = tb_exec_trace_spans(x, spans, nspans, err);
            for (size_t i = 0; !rc && i < *nspans; i++)
                (*spans)[i].name = NULL;
        }
    }
    if (!rc) {
        /* Everything from the median step, not each figure's own mean or median: its
         * parts (stall, ops, recomputation, the rest) then add up to its time, which
         * figures from different steps do not when one step differs (a re-plan, a step
         * another program slowed). */
        qsort(times, (size_t)steps, sizeof *times, by_step_time);
        const struct timed *t = &times[steps / 2];
        out->step_s = t->step_s;
        out->stall_s = t->stall_s;
        out->ops_s = t->ops_s;
        out->out_bytes = (double)t->out;
        out->in_bytes = (double)t->in;
        out->drop_bytes = (double)t->drop;
        out->recompute_bytes = (double)t->recompute;
        out->recompute_s = t->recompute_s;
        out->transient_bytes = (double)tb_exec_transient_bytes(x);
        struct tb_mem_stats ms = { 0 };
        r.engine.ops->mem_stats(r.engine.ctx, r.engine.device, &ms);
        out->peak = ms.peak;
        out->conv_flops = tb_graph_conv_flops(g);
        out->params = 0;
        for (size_t i = 0; i < tb_engine_param_count(&r.engine); i++) {
            const struct tb_param *p = tb_engine_param_at(&r.engine, i);
            out->params += p->trainable ? tb_shape_elems(p->value.desc.shape) : 0;
        }
    }
    free(times);
    tb_data_loader_close(l);
    tb_inputs_spec_free(&inputs);
    tb_exec_free(x);
    tb_graph_free(g);
    if (ds)
        dops->head.destroy(ds);
    tb_run_close(&r);
    tb_setup_free(s);
    tb_config_free(cfg);
    return rc;
}

int tb_time_steps(const char *path, const char *const *sets, int nsets, int steps, struct tb_step_timing *out,
                  struct tb_err *err)
{
    return time_steps(path, false, NULL, NULL, NULL, sets, nsets, steps, out, err);
}

int tb_time_steps_swap(const char *path, const char *const *sets, int nsets, int steps, struct tb_step_timing *out,
                       struct tb_err *err)
{
    return time_steps(path, true, NULL, NULL, NULL, sets, nsets, steps, out, err);
}

int tb_time_steps_traced(const char *path, const char *const *sets, int nsets, int steps, const char *trace,
                         struct tb_step_timing *out, struct tb_err *err)
{
    return time_steps(path, false, trace, NULL, NULL, sets, nsets, steps, out, err);
}

/* The links of the run the configuration of `path` and the assignments make (nothing
 * trains): the run's as it is, or with probe_bytes, measured by copies of that size. */
static int step_link(const char *path, const char *const *sets, int nsets, size_t probe_bytes, struct tb_link *link,
                     struct tb_link *platform, struct tb_accel *accel, struct tb_err *err)
{
    struct tb_config *cfg = NULL;
    int rc = load_config(path, &cfg, err);
    if (!cfg)
        return rc;
    for (int i = 0; i < nsets && !rc; i++)
        rc = tb_config_set(cfg, sets[i], err);
    struct tb_setup *s = NULL;
    if (!rc)
        rc = tb_setup_resolve(cfg, &s, err);
    struct tb_run r;
    memset(&r, 0, sizeof r);
    if (!rc)
        rc = tb_run_open(&r, s, err);
    if (!rc) {
        *platform = r.platform_link;
        if (accel)
            *accel = r.accel;
        *link = r.link;
        if (probe_bytes)
            rc = tb_probe_link(&r, probe_bytes, link, err);
    }
    tb_run_close(&r);
    tb_setup_free(s);
    tb_config_free(cfg);
    return rc;
}

int tb_step_link(const char *path, const char *const *sets, int nsets, struct tb_link *link, struct tb_link *platform,
                 struct tb_accel *accel, struct tb_err *err)
{
    return step_link(path, sets, nsets, 0, link, platform, accel, err);
}

int tb_step_link_measured(const char *path, const char *const *sets, int nsets, size_t bytes, struct tb_link *link,
                          struct tb_link *platform, struct tb_err *err)
{
    return step_link(path, sets, nsets, bytes > 0 ? bytes : 1, link, platform, NULL, err);
}

int tb_time_steps_spans(const char *path, const char *const *sets, int nsets, int steps, struct tb_trace_span **spans,
                        size_t *nspans, struct tb_step_timing *out, struct tb_err *err)
{
    *spans = NULL;
    *nspans = 0;
    return time_steps(path, false, NULL, spans, nspans, sets, nsets, steps, out, err);
}
