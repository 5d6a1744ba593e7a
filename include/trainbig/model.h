/* trainbig/model.h: the model vtable ([model] section).
 *
 * A model builds a static graph through the SDK's graph builder. This first ABI carries
 * create and destroy; the build member is added at the end of this struct together with
 * the graph builder. */
#ifndef TRAINBIG_MODEL_H
#define TRAINBIG_MODEL_H

#include <trainbig/error.h>
#include <trainbig/keys.h>
#include <trainbig/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tb_model_ops {
    /* As tb_backend_ops.create, from the validated [model] section. */
    int (*create)(const struct tb_section *cfg, void **ctx, struct tb_err *err);
    void (*destroy)(void *ctx);
};

#ifdef __cplusplus
}
#endif
#endif
