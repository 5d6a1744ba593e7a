/* trainbig/backend.h: the compute backend vtable ([backend] section).
 *
 * A backend owns devices: memory, streams, events, copies and the ops. This first ABI
 * carries what the loader needs (score, create, destroy); the device, memory, stream and
 * op members are added at the end of this struct by the compute-engine work, with the
 * semantics of CUDA written next to each. */
#ifndef TRAINBIG_BACKEND_H
#define TRAINBIG_BACKEND_H

#include <trainbig/error.h>
#include <trainbig/keys.h>
#include <trainbig/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tb_backend_ops {
    tb_score_fn score; /* optional, see trainbig/plugin.h */
    /* Creates an instance from the validated [backend] section. On success *ctx is owned
     * by the caller, who releases it with destroy(). On failure returns a tb_status, fills
     * err, and leaves nothing to free. */
    int (*create)(const struct tb_section *cfg, void **ctx, struct tb_err *err);
    void (*destroy)(void *ctx);
};

#ifdef __cplusplus
}
#endif
#endif
