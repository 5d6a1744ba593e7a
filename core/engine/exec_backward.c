/* core/engine/exec_backward.c: the executor's backward pass (exec.c runs forward): the
 * losses' gradients seeded, then each backward step: its tensors made resident, its
 * input gradients placed (a temporary where one already holds a contribution), the op
 * run, temporaries folded in, what no later step needs freed. */
#include "config.h"

#include <stdint.h>
#include <string.h>
#include <trainbig/clock.h>

#include "core/engine/exec_internal.h"
#include "core/engine/graph_internal.h"

/* The tensor backward writes the gradient of node n into: its gradient itself when this
 * is the first contribution, else a temporary that is accumulated afterwards. */
static int grad_target(struct tb_exec *x, size_t step, uint32_t gi, struct tb_tensor *target, bool *temporary,
                       struct tb_err *err)
{
    *temporary = false;
    struct tb_param *p = x->param[gi];
    if (p) {
        /* A parameter's gradient lives in the engine, across steps, for the optimizer. */
        if (!p->grad.data) {
            int rc;
            p->grad = p->value;
            p->grad.data = tb_exec_device_alloc(x, step, gi, (size_t)x->s->tensors[gi].bytes, &rc, err);
            if (!p->grad.data)
                return rc;
        }
        x->t[gi] = p->grad;
        x->written[gi] = p->grad_written;
    } else {
        int rc = tb_exec_alloc_tensor(x, step, gi, err);
        if (rc)
            return rc;
    }
    if (!x->written[gi]) {
        *target = x->t[gi];
        return TB_OK;
    }
    *target = x->t[gi];
    int rc;
    target->data = tb_exec_device_alloc(x, step, gi, (size_t)x->s->tensors[gi].bytes, &rc, err);
    if (!target->data)
        return rc;
    *temporary = true;
    return TB_OK;
}

/* The device addresses of a backward op's tensors, read again before each try: making
 * room for its scratch may have moved them (tb_swapmem_make_room). Temporaries are
 * placed again in din itself (tb_swapmem_set_loose). */
static void refresh_backward(struct tb_exec *x, const struct tb_gop *o, const bool *temp, struct tb_tensor *in,
                             struct tb_tensor *out, struct tb_tensor *dout, struct tb_tensor *din)
{
    for (uint32_t j = 0; j < o->op.nout; j++) {
        out[j].data = x->t[o->out[j]->id].data;
        uint32_t gj = x->s->grad_of[o->out[j]->id];
        dout[j].data = gj != UINT32_MAX ? x->t[gj].data : NULL;
    }
    for (uint32_t i = 0; i < o->op.nin; i++) {
        in[i].data = x->t[o->in[i]->id].data;
        uint32_t gi = x->s->grad_of[o->in[i]->id];
        if (din[i].data && !temp[i] && gi != UINT32_MAX)
            din[i].data = x->t[gi].data;
    }
}

/* Seeds the gradients of the losses: d objective / d loss = the loss's weight (summed when a
 * node is added twice). */
static int seed_losses(struct tb_exec *x, struct tb_err *err)
{
    for (size_t l = 0; l < x->g->nlosses; l++) {
        const struct tb_node *n = x->g->losses[l].x;
        uint32_t gi = x->s->grad_of[n->id];
        if (gi == UINT32_MAX || x->written[gi])
            continue; /* no parameter influences it, or seeded already */
        float w = 0;
        for (size_t m = l; m < x->g->nlosses; m++)
            if (x->g->losses[m].x == n)
                w += x->g->losses[m].weight;
        /* Data parallel: the all-reduce averages gradients, which is the global batch's
         * gradient for a loss that is a mean over the batch. A loss that sums over images
         * is the sum of the ranks' losses: seed it with the rank count. */
        if (tb_grad_sync_active(&x->sync) && tb_graph_loss_sums_images(x->g, n))
            w *= (float)x->e->comm->size;
        int rc = tb_exec_alloc_tensor(x, x->s->nforward, gi, err);
        if (rc == TB_OK)
            rc = x->e->ops->tensor_fill(x->e->ctx, &x->t[gi], w, err);
        if (rc)
            return rc;
        x->written[gi] = true;
    }
    return TB_OK;
}

/* One backward op's tensors, as a step sees them. */
struct bwd {
    const struct tb_gop *o;
    struct tb_tensor in[TB_OP_MAX_IN], out[TB_OP_MAX_OUT], dout[TB_OP_MAX_OUT], din[TB_OP_MAX_IN];
    bool temp[TB_OP_MAX_IN]; /* din[i] is a temporary, accumulated into the gradient after */
};

/* The op's tensors, resident now, and where each input's gradient goes. */
static int gather(struct tb_exec *x, size_t step, struct bwd *b, struct tb_err *err)
{
    const struct tb_gop *o = b->o;
    const uint32_t gin = tb_op_grad_inputs(&o->op);
    for (uint32_t j = 0; j < o->op.nout; j++) {
        b->out[j] = x->t[o->out[j]->id];
        uint32_t gj = x->s->grad_of[o->out[j]->id];
        b->dout[j] = gj != UINT32_MAX ? x->t[gj] : x->t[o->out[j]->id];
        if (gj == UINT32_MAX)
            b->dout[j].data = NULL;
    }
    for (uint32_t i = 0; i < o->op.nin; i++) {
        b->in[i] = x->t[o->in[i]->id];
        b->din[i] = b->in[i];
        b->din[i].data = NULL;
    }
    int rc = TB_OK;
    for (uint32_t i = 0; i < o->op.nin && rc == TB_OK; i++) {
        uint32_t gi = x->s->grad_of[o->in[i]->id];
        if ((gin >> i & 1) && gi != UINT32_MAX)
            rc = grad_target(x, step, gi, &b->din[i], &b->temp[i], err);
    }
    return rc;
}

/* Runs the op's backward, making room for its scratch when it asks for more. */
static int run_op(struct tb_exec *x, size_t step, struct bwd *b, struct tb_err *err)
{
    const struct tb_gop *o = b->o;
    /* The temporaries hold nothing yet: making room for the op's scratch may place them
     * again (din[i].data changes), so that they do not split it. */
    void **loose[TB_OP_MAX_IN];
    size_t loose_bytes[TB_OP_MAX_IN];
    uint32_t nloose = 0;
    for (uint32_t i = 0; i < o->op.nin; i++)
        if (b->temp[i]) {
            loose[nloose] = &b->din[i].data;
            loose_bytes[nloose++] = (size_t)x->s->tensors[x->s->grad_of[o->in[i]->id]].bytes;
        }
    tb_swapmem_set_loose(&x->mem, loose, loose_bytes, nloose);
    double t0;
    int rc;
    do {
        refresh_backward(x, o, b->temp, b->in, b->out, b->dout, b->din);
        t0 = tb_engine_now(x->e);
        tb_exec_trace_mark(x, step, false);
        rc = x->e->ops->op_backward(x->e->ctx, &o->op, x->state[x->s->steps[step].op], b->in, b->out, b->dout, b->din,
                                    err);
    } while (tb_exec_room_for_op(x, step, &rc, err));
    tb_exec_trace_mark(x, step, true);
    tb_swapmem_set_loose(&x->mem, NULL, NULL, 0);
    x->starts[step] = t0;
    x->seconds[step] = tb_engine_now(x->e) - t0;
    if (rc)
        tb_err_prefix(err, "%s (backward)", o->name);
    return rc;
}

/* Folds temporaries into their gradients and marks first contributions; frees the
 * temporaries whatever rc says. */
static int fold(struct tb_exec *x, struct bwd *b, int rc, struct tb_err *err)
{
    const struct tb_gop *o = b->o;
    for (uint32_t i = 0; i < o->op.nin; i++) {
        if (!b->din[i].data)
            continue;
        uint32_t gi = x->s->grad_of[o->in[i]->id];
        if (b->temp[i]) {
            if (rc == TB_OK)
                rc = x->e->ops->tensor_accumulate(x->e->ctx, &x->t[gi], &b->din[i], 1.0f, err);
            x->e->ops->mem_free(x->e->ctx, x->e->device, b->din[i].data);
        }
        x->written[gi] = true;
        if (x->param[gi])
            x->param[gi]->grad_written = true;
        else
            tb_swapmem_produced(&x->mem, gi); /* rewritten: a host copy is stale */
    }
    return rc;
}

static int backward_step(struct tb_exec *x, size_t step, struct tb_err *err)
{
    struct bwd b;
    memset(&b, 0, sizeof b);
    b.o = &x->g->ops[x->s->steps[step].op];
    tb_exec_pin_step(x, step);
    int rc = tb_swapmem_before_step(&x->mem, step, err);
    if (rc == TB_OK)
        rc = gather(x, step, &b, err);
    if (rc == TB_OK)
        rc = run_op(x, step, &b, err);
    rc = fold(x, &b, rc, err);
    tb_exec_unpin_step(x, step);
    if (rc)
        return rc;
    tb_exec_retire(x, step);
    rc = tb_swapmem_after_step(&x->mem, step, err);
    if (rc == TB_OK)
        rc = tb_grad_sync_after_step(&x->sync, step, err);
    return rc;
}

int tb_exec_backward(struct tb_exec *x, struct tb_err *err)
{
    if (!x->g->training)
        return tb_err_set(err, TB_ERR_RUNTIME, "backward on a graph built for inference");
    for (size_t i = 0; i < x->s->ntensors; i++)
        x->written[i] = false;
    for (size_t i = 0; i < x->e->nparams; i++)
        x->e->params[i]->grad_written = false;
    int rc = seed_losses(x, err);
    if (rc)
        return rc;
    tb_grad_sync_begin(&x->sync);
    for (size_t step = x->s->nforward; step < x->s->nsteps; step++)
        if ((rc = backward_step(x, step, err)))
            return rc;
    /* A parameter of this graph that no loss reaches has a zero gradient, not a stale one. */
    for (size_t i = 0; i < x->g->nnodes; i++) {
        struct tb_param *p = x->param[i];
        if (p && p->trainable && p->grad.data && !p->grad_written) {
            rc = x->e->ops->tensor_fill(x->e->ctx, &p->grad, 0.0f, err);
            if (rc)
                return rc;
            p->grad_written = true;
        }
    }
    return tb_grad_sync_finish(&x->sync, err);
}
