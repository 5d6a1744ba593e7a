/* tests/fuzz/fuzz_engine.h: an engine without a backend, for checkpoints. Its tensors
 * live in host memory and its backend does nothing but copy: enough for
 * tb_checkpoint_save and tb_checkpoint_load, which only read and write parameters. */
#ifndef TB_FUZZ_ENGINE_H
#define TB_FUZZ_ENGINE_H

#include <string.h>
#include <trainbig/backend.h>

#include "core/engine/engine.h"

/* The model whose checkpoints the seeds are: its text and its parameters. */
#define FUZZ_MODEL "model = fuzz\nclasses = 2\n"
enum { FUZZ_NPARAMS = 3 };

struct fuzz_engine {
    struct tb_engine e;
    struct tb_backend_ops ops;
    struct tb_param params[FUZZ_NPARAMS], *list[FUZZ_NPARAMS];
    float conv[2 * 1 * 3 * 3], conv_m[2 * 1 * 3 * 3], bias[2], mean[2];
};

static int fuzz_tensor_read(void *ctx, const struct tb_tensor *t, void *host, struct tb_err *err)
{
    (void)ctx, (void)err;
    memcpy(host, t->data, tb_shape_elems(t->desc.shape) * sizeof(float));
    return TB_OK;
}

static int fuzz_tensor_write(void *ctx, const struct tb_tensor *t, const void *host, struct tb_err *err)
{
    (void)ctx, (void)err;
    memcpy(t->data, host, tb_shape_elems(t->desc.shape) * sizeof(float));
    return TB_OK;
}

static inline struct tb_param fuzz_param(const char *name, bool trainable, struct tb_shape shape, float *value,
                                         float *momentum)
{
    struct tb_param p;
    memset(&p, 0, sizeof p);
    p.name = (char *)name;
    p.trainable = trainable;
    p.value = (struct tb_tensor){ { TB_F32, shape }, 0, value };
    p.momentum = (struct tb_tensor){ { TB_F32, shape }, 0, momentum };
    return p;
}

/* f's engine: "conv.weight" (trainable, with momentum), "conv.bias" (trainable, no
 * momentum yet), "bn.running_mean" (a buffer). */
static inline void fuzz_engine_init(struct fuzz_engine *f)
{
    memset(f, 0, sizeof *f);
    for (size_t i = 0; i < sizeof f->conv / sizeof *f->conv; i++) {
        f->conv[i] = (float)i * 0.25f - 1.0f;
        f->conv_m[i] = (float)i * 0.01f;
    }
    f->bias[0] = 0.5f;
    f->mean[1] = 2.0f;
    f->params[0] = fuzz_param("conv.weight", true, (struct tb_shape){ 2, 1, 3, 3 }, f->conv, f->conv_m);
    f->params[1] = fuzz_param("conv.bias", true, (struct tb_shape){ 1, 2, 1, 1 }, f->bias, NULL);
    f->params[2] = fuzz_param("bn.running_mean", false, (struct tb_shape){ 1, 2, 1, 1 }, f->mean, NULL);
    for (int i = 0; i < FUZZ_NPARAMS; i++)
        f->list[i] = &f->params[i];
    f->ops.tensor_read = fuzz_tensor_read;
    f->ops.tensor_write = fuzz_tensor_write;
    f->e.ops = &f->ops;
    f->e.params = f->list;
    f->e.nparams = f->e.params_cap = FUZZ_NPARAMS;
}

#endif
