/* run.c: the backend, model and engine a configuration names, and the model's graphs. */
#include "config.h"

#include "core/train/run.h"
#include "core/util/hash_internal.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/setup_internal.h"
#include "core/dist/world.h"
#include "core/engine/engine_internal.h"
#include "core/util/log_control.h"
#include "core/config/platform_internal.h"

int tb_run_open(struct tb_run *r, const struct tb_setup *s, struct tb_err *err)
{
    memset(r, 0, sizeof *r);
    r->s = s;
    r->backend = s->slot[TB_SEC_BACKEND].plugin->p;
    r->model = s->slot[TB_SEC_MODEL].plugin->p;
    const struct tb_comm *world = tb_comm_world();
    /* [backend] device under mpirun and the platform's [swap] defaults were applied by
     * tb_setup_resolve, so `trainbig config` shows them. */
    int rc = tb_plugin_create(r->backend, s->slot[TB_SEC_BACKEND].section, &r->backend_ctx, err);
    if (rc) {
        return tb_err_prefix(err, "backend '%s'", r->backend->name);
    }
    /* A modelled device that stands for several GPUs: the world becomes its ranks. */
    struct tb_device_info info;
    memset(&info, 0, sizeof info);
    if (r->backend->ops.backend->device_info &&
        r->backend->ops.backend->device_info(r->backend_ctx, 0, &info) == TB_OK &&
        (info.flags & TB_DEVICE_MODELLED) && info.ranks > 1) {
        if ((rc = tb_comm_model_ranks(info.ranks, err)))
            return tb_err_prefix(err, "backend '%s'", r->backend->name);
        r->modelled_ranks = true;
    }
    rc = tb_plugin_create(r->model, s->slot[TB_SEC_MODEL].section, &r->model_ctx, err);
    if (rc) {
        return tb_err_prefix(err, "model '%s'", r->model->name);
    }
    r->platform = s->slot[TB_SEC_PLATFORM].plugin->p;
    rc = tb_plugin_create(r->platform, s->slot[TB_SEC_PLATFORM].section, &r->platform_ctx, err);
    if (rc) {
        return tb_err_prefix(err, "platform '%s'", r->platform->name);
    }
    if (world->size > 1 && !r->modelled_ranks) {
        tb_comm_set_timeout(s->settings.run.collective_timeout);
        /* The platform's NCCL settings, where the user set none, before a backend starts NCCL. */
        char env_note[2048];
        size_t nset = 0;
        rc = tb_platform_apply_env(r->platform, r->platform_ctx, env_note, sizeof env_note, &nset, err);
        if (rc)
            return rc;
        if (strcmp(env_note, "none") != 0)
            tb_log(TB_LOG_INFO, "environment from platform '%s': %s", r->platform->name, env_note);
    }
    tb_platform_link(r->platform, r->platform_ctx, &r->link);
    r->platform_link = r->link;
    tb_platform_accel(r->platform, r->platform_ctx, &r->accel);
    const struct tb_backend_ops *bo = r->backend->ops.backend;
    if (bo->set_platform) {
        char note[1024];
        rc = bo->set_platform(r->backend_ctx, 0, &r->link, note, sizeof note, err);
        if (rc)
            return tb_err_prefix(err, "backend '%s', platform '%s'", r->backend->name, r->platform->name);
        if (note[0])
            tb_log(TB_LOG_INFO, "%s (platform '%s')", note, r->platform->name);
    }
    if (bo->set_accel && (rc = bo->set_accel(r->backend_ctx, 0, &r->accel, err)))
        return tb_err_prefix(err, "backend '%s', platform '%s'", r->backend->name, r->platform->name);
    if (s->swap_note[0])
        tb_log(TB_LOG_INFO, "[swap] %s from platform '%s' (its swap_defaults)", s->swap_note, r->platform->name);
    r->swap = s->slot[TB_SEC_SWAP].plugin->p;
    rc = tb_plugin_create(r->swap, s->slot[TB_SEC_SWAP].section, &r->swap_ctx, err);
    if (rc) {
        r->swap = NULL;
        return tb_err_prefix(err, "swap policy '%s'", s->slot[TB_SEC_SWAP].plugin->p->name);
    }
    const uint64_t seed = (uint64_t)s->settings.run.seed;
    rc = tb_engine_init(&r->engine, r->backend, r->backend_ctx, 0, seed, err);
    r->engine_ready = rc == TB_OK;
    if (rc == TB_OK && world->size > 1)
        rc =
            tb_engine_attach_comm(&r->engine, r->backend->name, world, (size_t)s->settings.train.allreduce_bucket, err);
    /* A policy without hooks (none) never swaps. */
    if (r->engine_ready)
        r->engine.swap = (struct tb_swap_policy){ r->swap->name, r->swap->ops.swap, r->swap_ctx, &r->link };
    return rc;
}

void tb_run_close(struct tb_run *r)
{
    if (r->engine_ready)
        tb_engine_fini(&r->engine);
    if (r->swap_ctx)
        tb_plugin_destroy(r->swap, r->swap_ctx);
    if (r->platform_ctx)
        tb_plugin_destroy(r->platform, r->platform_ctx);
    if (r->model_ctx)
        tb_plugin_destroy(r->model, r->model_ctx);
    if (r->backend_ctx)
        tb_plugin_destroy(r->backend, r->backend_ctx);
    if (r->modelled_ranks)
        tb_comm_unmodel();
    memset(r, 0, sizeof *r);
}

int tb_run_build(struct tb_run *r, bool training, const struct tb_model_input *in, struct tb_graph **g,
                 struct tb_err *err)
{
    *g = tb_graph_new(training);
    if (!*g)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    (*g)->sync_bn = training && r->engine.comm && r->s->settings.sync_bn;
    static const enum tb_dtype precision_dtype[] = { [TB_PRECISION_FP32] = TB_F32, [TB_PRECISION_BF16] = TB_BF16,
                                                     [TB_PRECISION_FP16] = TB_F16 };
    const int precision = r->s->settings.train.precision;
    if (training && precision == TB_PRECISION_FP16) {
        tb_graph_free(*g);
        *g = NULL;
        /* fp16 gradients underflow without it; bf16 has f32's range and needs none */
        return tb_err_set(err, TB_ERR_CONFIG,
                          "[train] precision = fp16: training at fp16 needs dynamic loss scaling, which trainbig "
                          "does not have yet; allowed today: fp32, bf16");
    }
    tb_graph_set_precision(*g, precision_dtype[precision]);
    int rc = r->model->ops.model->build(r->model_ctx, *g, in, err);
    if (rc == TB_OK && tb_graph_error(*g))
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s", tb_graph_error(*g));
    if (rc) {
        tb_err_prefix(err, "model '%s', %s graph for %d images of %dx%d", r->model->name,
                      training ? "training" : "inference", in->batch, in->width, in->height);
        tb_graph_free(*g);
        *g = NULL;
    }
    return rc;
}

int tb_run_exec(struct tb_run *r, struct tb_graph *g, const struct tb_model_input *in, struct tb_exec **x,
                struct tb_err *err)
{
    const bool training = g->training;
    int rc = tb_exec_create(&r->engine, g, x, err);
    /* Training steps an optimizer: its state is made now, beside the gradients. */
    if (rc == TB_OK && training)
        rc = tb_sgd_prepare(&r->engine, err);
    if (rc) {
        tb_err_prefix(err, "model '%s', %s graph for %d images of %dx%d", r->model->name,
                      training ? "training" : "inference", in->batch, in->width, in->height);
        tb_exec_free(*x);
        *x = NULL;
    }
    return rc;
}

int tb_run_graph(struct tb_run *r, bool training, const struct tb_model_input *in, struct tb_graph **g,
                 struct tb_exec **x, struct tb_err *err)
{
    *x = NULL;
    int rc = tb_run_build(r, training, in, g, err);
    if (!rc && (rc = tb_run_exec(r, *g, in, x, err)) != TB_OK) {
        tb_graph_free(*g);
        *g = NULL;
    }
    return rc;
}

/* Appends "prefix key = value\n" for every key of sec to a memory stream. */
/* Every key of sec (or only `only`) but those in `skip` (NULL-terminated, may be NULL),
 * as "prefix.key = value" lines. */
static void put_section(FILE *f, const char *prefix, const struct tb_section *sec, const char *only,
                        const char *const *skip)
{
    for (size_t i = 0; i < sec->nkeys; i++) {
        const char *k = sec->keys[i].name;
        bool skipped = false;
        for (const char *const *q = skip; q && *q; q++)
            skipped |= strcmp(*q, k) == 0;
        if (!skipped && (!only || strcmp(k, only) == 0))
            fprintf(f, "%s%s = %s\n", prefix, k, tb_section_text(sec, i));
    }
}

char *tb_run_model_text(const struct tb_setup *s, int classes)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f)
        return NULL;
    fprintf(f, "model.plugin = %s\n", s->slot[TB_SEC_MODEL].plugin->p->name);
    /* sync_bn changes how training computes, not the network. */
    static const char *const training_only[] = { "sync_bn", NULL };
    put_section(f, "model.", s->slot[TB_SEC_MODEL].section, NULL, training_only);
    fprintf(f, "classes = %d\n", classes);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

char *tb_run_training_text(const struct tb_setup *s)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f)
        return NULL;
    put_section(f, "run.", s->slot[TB_SEC_RUN].section, "seed", NULL);
    put_section(f, "run.", s->slot[TB_SEC_RUN].section, "epochs", NULL);
    static const char *const train_keys[] = { "batch", "lr", "lr_policy", "lr_power", "momentum", "weight_decay" };
    for (size_t i = 0; i < sizeof train_keys / sizeof *train_keys; i++)
        put_section(f, "train.", s->slot[TB_SEC_TRAIN].section, train_keys[i], NULL);
    put_section(f, "model.", s->slot[TB_SEC_MODEL].section, "sync_bn", NULL);
    fprintf(f, "dataset.plugin = %s\n", s->slot[TB_SEC_DATASET].plugin->p->name);
    /* The loader's threads and queue depth change when batches are ready, never what they
     * hold: a resume with other values is the same training. */
    static const char *const loader_only[] = { "workers", "prefetch", NULL };
    put_section(f, "dataset.", s->slot[TB_SEC_DATASET].section, NULL, loader_only);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

char *tb_run_config_text(const struct tb_setup *s)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f)
        return NULL;
    tb_setup_print(s, f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

uint64_t tb_run_config_hash(const char *text)
{
    return tb_fnv1a(text, strlen(text), TB_FNV1A_INIT);
}
