/* gradsync.c: buckets of parameter gradients, all-reduced while backward goes on (see
 * gradsync_internal.h). */
#include "config.h"

#include "core/dist/gradsync_internal.h"

#include <stdlib.h>
#include <string.h>

enum { FIRST_BUCKET_BYTES = 1 << 20 };

bool tb_grad_sync_active(const struct tb_grad_sync *gs)
{
    return gs->nbuckets > 0;
}

int tb_grad_sync_plan(struct tb_grad_sync *gs, struct tb_engine *e, const struct tb_graph *g,
                      const struct tb_schedule *s, struct tb_param *const *param_of, struct tb_err *err)
{
    memset(gs, 0, sizeof *gs);
    gs->e = e;
    if (!g->training || !e->comm || e->comm->size <= 1)
        return TB_OK;
    /* The last backward step that writes each parameter's gradient. */
    size_t *final = malloc((s->ntensors ? s->ntensors : 1) * sizeof *final);
    size_t *order = malloc((s->ntensors ? s->ntensors : 1) * sizeof *order);
    if (!final || !order) {
        free(final);
        free(order);
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < s->ntensors; i++)
        final[i] = SIZE_MAX;
    for (size_t step = s->nforward; step < s->nsteps; step++) {
        const struct tb_gop *o = &g->ops[s->steps[step].op];
        const uint32_t gin = tb_op_grad_inputs(&o->op);
        for (uint32_t i = 0; i < o->op.nin; i++) {
            uint32_t gi = s->grad_of[o->in[i]->id];
            if ((gin >> i & 1) && gi != UINT32_MAX && param_of[gi] && param_of[gi]->trainable)
                final[gi] = step;
        }
    }
    /* Gradients in the order they become final (ties by tensor index: the same on every
     * rank, as the graph is). */
    size_t n = 0;
    for (size_t step = s->nforward; step < s->nsteps; step++)
        for (size_t i = 0; i < s->ntensors; i++)
            if (final[i] == step)
                order[n++] = i;
    gs->members = malloc((n ? n : 1) * sizeof *gs->members);
    gs->buckets = malloc((n ? n : 1) * sizeof *gs->buckets);
    if (!gs->members || !gs->buckets) {
        free(final);
        free(order);
        tb_grad_sync_free(gs);
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    }
    size_t largest = 0;
    for (size_t k = 0; k < n; k++) {
        const size_t ti = order[k];
        struct tb_param *p = param_of[ti];
        const size_t bytes = tb_shape_elems(p->value.desc.shape) * sizeof(float);
        struct tb_grad_bucket *b = gs->nbuckets ? &gs->buckets[gs->nbuckets - 1] : NULL;
        /* The first bucket, the gradients backward finishes first, is kept small (as
         * PyTorch's DDP does) so that communication starts early. */
        const size_t cap =
            gs->nbuckets == 1 && e->bucket_bytes > FIRST_BUCKET_BYTES ? FIRST_BUCKET_BYTES : e->bucket_bytes;
        if (!b || b->bytes >= cap) {
            b = &gs->buckets[gs->nbuckets++];
            *b = (struct tb_grad_bucket){ k, 0, 0, 0 };
        }
        gs->members[k] = p;
        b->count++;
        b->bytes += bytes;
        b->ready = final[ti];
        if (b->count > largest)
            largest = b->count;
    }
    gs->nmembers = n;
    free(final);
    free(order);
    gs->batch = malloc((largest ? largest : 1) * sizeof *gs->batch);
    if (!gs->batch) {
        tb_grad_sync_free(gs);
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    }
    gs->scale = 1.0f / (float)e->comm->size;
    return TB_OK;
}

void tb_grad_sync_free(struct tb_grad_sync *gs)
{
    free(gs->members);
    free(gs->buckets);
    free(gs->batch);
    memset(gs, 0, sizeof *gs);
}

void tb_grad_sync_begin(struct tb_grad_sync *gs)
{
    gs->next = 0;
}

static int queue(struct tb_grad_sync *gs, const struct tb_grad_bucket *b, struct tb_err *err)
{
    for (size_t i = 0; i < b->count; i++)
        gs->batch[i] = gs->members[b->first + i]->grad;
    int rc = gs->e->allreduce_start(gs->e->ctx, gs->batch, b->count, gs->scale, err);
    if (rc)
        return tb_err_prefix(err, "all-reduce of %zu gradients (%zu bytes, from %s)", b->count, b->bytes,
                             gs->members[b->first]->name);
    return TB_OK;
}

int tb_grad_sync_after_step(struct tb_grad_sync *gs, size_t step, struct tb_err *err)
{
    while (gs->next < gs->nbuckets && gs->buckets[gs->next].ready <= step) {
        int rc = queue(gs, &gs->buckets[gs->next], err);
        if (rc)
            return rc;
        gs->next++;
    }
    return TB_OK;
}

int tb_grad_sync_finish(struct tb_grad_sync *gs, struct tb_err *err)
{
    if (!tb_grad_sync_active(gs))
        return TB_OK;
    for (; gs->next < gs->nbuckets; gs->next++) {
        int rc = queue(gs, &gs->buckets[gs->next], err);
        if (rc)
            return rc;
    }
    double busy = 0, waited = 0;
    int rc = gs->e->allreduce_wait(gs->e->ctx, &busy, &waited, err);
    gs->e->allreduce_busy_s += busy;
    gs->e->allreduce_wait_s += waited;
    return rc ? tb_err_prefix(err, "gradient all-reduce") : TB_OK;
}
