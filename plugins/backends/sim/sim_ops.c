/* backends/sim/sim_ops.c: tensors and ops on the modelled device (sim_shared.h). Each op
 * is one or two kernels of sim_model.h's estimate, kept in its state from op_prepare;
 * nothing is computed. */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../op_dispatch.h"
#include "sim_shared.h"

/* What op_prepare works out once: the forward's estimate, and the backward's for the
 * gradients its last backward wanted (the executor asks for the same ones each step). */
struct sim_op_state {
    struct sim_estimate fwd, bwd;
    double fwd_s, bwd_s; /* what each pass takes: measured (sim_profile) or fwd/bwd's */
    uint64_t fwd_scratch, bwd_scratch; /* device memory each takes for itself (sim_profile's) */
    bool fwd_measured, bwd_measured;
    uint32_t bwd_grads;
    bool bwd_known;
    struct tb_op op; /* the descriptions, for the backward's estimate */
};

size_t tb_sim_tensor_bytes(void *ctx, const struct tb_tensor_desc *d)
{
    (void)ctx;
    return tb_shape_elems(d->shape) * tb_dtype_size(d->dtype);
}

/* A synchronous copy: after the compute stream, at the link's rate one way. */
static void sync_copy(struct tb_sim *sim, enum tb_stream s, size_t bytes)
{
    sim_stream_sync(&sim->clock, TB_STREAM_COMPUTE);
    sim_stream_sync(&sim->clock, s);
    sim_submit(&sim->clock, s, sim_copy_seconds(&sim->clock, s, bytes, &sim->link));
    sim_stream_sync(&sim->clock, s);
}

int tb_sim_tensor_write(void *ctx, const struct tb_tensor *t, const void *host, struct tb_err *err)
{
    (void)host;
    (void)err;
    sync_copy(ctx, TB_STREAM_H2D, tb_sim_tensor_bytes(ctx, &t->desc));
    return TB_OK;
}

int tb_sim_tensor_read(void *ctx, const struct tb_tensor *t, void *host, struct tb_err *err)
{
    (void)err;
    const size_t bytes = tb_sim_tensor_bytes(ctx, &t->desc);
    sync_copy(ctx, TB_STREAM_D2H, bytes);
    memset(host, 0, bytes); /* no value was computed: zeros, as the contract's modelled device says */
    return TB_OK;
}

int tb_sim_tensor_fill(void *ctx, const struct tb_tensor *t, float value, struct tb_err *err)
{
    struct tb_sim *sim = ctx;
    (void)value;
    (void)err;
    tb_sim_kernel(sim, tb_sim_stream_seconds(sim, (double)tb_sim_tensor_bytes(ctx, &t->desc)));
    return TB_OK;
}

int tb_sim_tensor_accumulate(void *ctx, const struct tb_tensor *dst, const struct tb_tensor *src, float alpha,
                             struct tb_err *err)
{
    struct tb_sim *sim = ctx;
    (void)src;
    (void)alpha;
    (void)err;
    /* reads both, writes one */
    tb_sim_kernel(sim, tb_sim_stream_seconds(sim, 3.0 * (double)tb_sim_tensor_bytes(ctx, &dst->desc)));
    return TB_OK;
}

int tb_sim_sgd_update(void *ctx, const struct tb_tensor *param, const struct tb_tensor *grad,
                      const struct tb_tensor *momentum_buf, float lr, float momentum, float weight_decay,
                      struct tb_err *err)
{
    struct tb_sim *sim = ctx;
    (void)grad;
    (void)momentum_buf;
    (void)lr;
    (void)momentum;
    (void)weight_decay;
    (void)err;
    /* reads the parameter, its gradient and momentum; writes the parameter and momentum */
    tb_sim_kernel(sim, tb_sim_stream_seconds(sim, 5.0 * (double)tb_sim_tensor_bytes(ctx, &param->desc)));
    return TB_OK;
}

double tb_sim_op_seconds(struct tb_sim *sim, const struct tb_op *op, bool backward, uint32_t grads,
                         struct sim_estimate *e, bool *measured, uint64_t *scratch)
{
    sim_op_estimate(&sim->device, op, backward, grads, e);
    *measured = false;
    *scratch = 0;
    if (backward && e->seconds == 0)
        return 0; /* no backward: nothing to measure */
    if (sim->profile.n) {
        char sig[512];
        if (tb_op_signature(op, backward, sig, sizeof sig) < sizeof sig) {
            const struct sim_timing *t = sim_profile_lookup(&sim->profile, sig);
            if (t) {
                *measured = true;
                *scratch = t->scratch;
                sim->counts.measured++;
                return t->seconds;
            }
        }
    }
    sim->counts.modelled++;
    return e->seconds;
}

int tb_sim_op_prepare(void *ctx, int device, const struct tb_op *op, void **state, struct tb_err *err)
{
    struct tb_sim *sim = ctx;
    (void)device;
    *state = NULL;
    int rc = tb_op_dispatch_check(op, err); /* as a device would refuse it */
    if (rc)
        return rc;
    struct sim_op_state *st = calloc(1, sizeof *st);
    if (!st)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    st->op = *op;
    st->fwd_s = tb_sim_op_seconds(sim, op, false, 0, &st->fwd, &st->fwd_measured, &st->fwd_scratch);
    *state = st;
    return TB_OK;
}

void tb_sim_op_release(void *ctx, void *state)
{
    (void)ctx;
    free(state);
}

/* A batch norm in training with sync and an attached world of more than one GPU reduces
 * its sums over the ranks between its kernels, on the compute stream, as the cuda backend
 * does: the op waits for each ring. The model's estimate and a profile's time are one
 * GPU's, without the collectives, which are added here. */
static void syncbn_reduce(struct tb_sim *sim, const struct tb_op *op, bool backward)
{
    if (op->kind != TB_OP_BATCHNORM || !op->p.bn.training || !op->p.bn.sync || !sim->comm.attached ||
        sim->comm.ranks < 2)
        return;
    const double s = sim_syncbn_seconds(&sim->accel, sim->comm.ranks, op->in[0].shape.c, backward);
    sim_submit(&sim->clock, TB_STREAM_COMPUTE, s);
    sim->comm.bn_reduces += backward ? 1 : 2;
    sim->comm.bn_s += s;
}

static void run_forward(struct tb_sim *sim, const struct sim_op_state *st)
{
    /* the estimate holds the kernel's own launch cost: the kernel adds none again */
    sim_submit(&sim->clock, TB_STREAM_COMPUTE, st->fwd_s);
    sim->counts.kernels++;
}

bool tb_sim_scratch(struct tb_sim *sim, uint64_t bytes, const struct tb_op *op, struct tb_err *err)
{
    if (bytes <= sim->scratch_bytes && (sim->scratch || !bytes))
        return true;
    if (!tb_sim_memory(sim)) {
        tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        return false;
    }
    if (sim->scratch)
        sim_memory_free(&sim->memory, sim->scratch);
    sim->scratch = sim_memory_alloc(&sim->memory, (size_t)bytes);
    sim->scratch_bytes = sim->scratch ? bytes : 0;
    if (!sim->scratch) {
        sim->failed_bytes = bytes;
        tb_err_set(err, TB_ERR_NOMEM,
                   "op %u (%s): sim backend: no device memory left for the %" PRIu64
                   " bytes of scratch its profile says it takes",
                   op->id, tb_op_kind_name(op->kind), bytes);
        return false;
    }
    return true;
}

uint64_t tb_sim_op_scratch_bytes(void *ctx, const void *state, bool backward)
{
    (void)ctx;
    const struct sim_op_state *st = state;
    return st ? (backward ? st->bwd_scratch : st->fwd_scratch) : 0;
}

int tb_sim_op_forward(void *ctx, const struct tb_op *op, void *state, uint64_t step, const struct tb_tensor *in,
                      const struct tb_tensor *out, struct tb_err *err)
{
    (void)step;
    (void)in;
    (void)out;
    const struct sim_op_state *st = state;
    /* before anything is queued: an op that does not fit changes nothing */
    if (!tb_sim_scratch(ctx, st->fwd_scratch, op, err))
        return TB_ERR_NOMEM;
    run_forward(ctx, state);
    syncbn_reduce(ctx, op, false);
    return TB_OK;
}

int tb_sim_op_recompute(void *ctx, const struct tb_op *op, void *state, uint64_t step, const struct tb_tensor *in,
                        const struct tb_tensor *out, struct tb_err *err)
{
    (void)step;
    (void)in;
    (void)out;
    const struct sim_op_state *st = state;
    if (!tb_sim_scratch(ctx, st->fwd_scratch, op, err))
        return TB_ERR_NOMEM;
    run_forward(ctx, state);
    return TB_OK;
}

int tb_sim_op_backward(void *ctx, const struct tb_op *op, void *state, const struct tb_tensor *in,
                       const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                       struct tb_err *err)
{
    struct tb_sim *sim = ctx;
    struct sim_op_state *st = state;
    (void)in;
    (void)out;
    (void)dout;
    (void)err;
    uint32_t grads = 0;
    for (uint32_t i = 0; i < op->nin; i++)
        if (din[i].data)
            grads |= 1u << i;
    if (!st->bwd_known || grads != st->bwd_grads) {
        st->bwd_s = tb_sim_op_seconds(sim, &st->op, true, grads, &st->bwd, &st->bwd_measured, &st->bwd_scratch);
        st->bwd_grads = grads;
        st->bwd_known = true;
    }
    if (!tb_sim_scratch(sim, st->bwd_scratch, op, err))
        return TB_ERR_NOMEM;
    if (st->bwd_s > 0) {
        sim_submit(&sim->clock, TB_STREAM_COMPUTE, st->bwd_s);
        sim->counts.kernels++;
    }
    syncbn_reduce(sim, op, true);
    return TB_OK;
}

void tb_sim_op_describe(void *ctx, const void *state, char *buf, size_t size)
{
    (void)ctx;
    const struct sim_op_state *st = state;
    if (st->fwd_measured)
        snprintf(buf, size, "forward %.1f us as measured ([backend] sim_profile; the model says %.1f us, as %s)",
                 st->fwd_s * 1e6, st->fwd.seconds * 1e6, st->fwd.row);
    else
        snprintf(buf, size, "modelled as %s, forward %.1f us (%s-bound)", st->fwd.row, st->fwd_s * 1e6,
                 st->fwd.memory_bound ? "memory" : "compute");
}
