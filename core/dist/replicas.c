/* replicas.c: comparing and aligning the ranks' copies of the model (see
 * replicas_internal.h). Both go through host memory: they run at most every few steps,
 * on tensors the backend reads out in the canonical layout. */
#include "config.h"

#include "core/dist/replicas_internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/util/hash_internal.h"

/* The host copy of a parameter's value, in buf (grown as needed). */
static int read_value(struct tb_engine *e, const struct tb_param *p, float **buf, size_t *cap, size_t *n,
                      struct tb_err *err)
{
    *n = tb_shape_elems(p->value.desc.shape);
    if (*n > *cap) {
        float *b = realloc(*buf, *n * sizeof *b);
        if (!b)
            return tb_err_set(err, TB_ERR_NOMEM, "out of memory reading %s", p->name);
        *buf = b;
        *cap = *n;
    }
    return e->ops->tensor_read(e->ctx, &p->value, *buf, err);
}

int tb_replicas_check(struct tb_engine *e, const struct tb_comm *comm, bool buffers, struct tb_err *err)
{
    if (!comm || comm->size <= 1)
        return TB_OK;
    const size_t np = e->nparams;
    /* lo[i] and hi[i] start as this rank's hash of parameter i and become the least and
     * greatest over the ranks: equal everywhere exactly when every rank agrees. */
    uint64_t *lo = calloc(np ? 2 * np : 1, sizeof *lo);
    float *buf = NULL;
    size_t cap = 0, n = 0;
    if (!lo)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    uint64_t *hi = lo + np;
    int rc = TB_OK;
    for (size_t i = 0; i < np && rc == TB_OK; i++) {
        const struct tb_param *p = e->params[i];
        if (!p->trainable && !buffers)
            continue;
        rc = read_value(e, p, &buf, &cap, &n, err);
        if (rc == TB_OK)
            lo[i] = hi[i] = tb_fnv1a(buf, n * sizeof *buf, TB_FNV1A_INIT);
    }
    /* Every rank reaches the collectives, even one whose read failed, so none waits. */
    int failed = rc != TB_OK, any = failed;
    struct tb_err ignored;
    if (comm->allreduce(comm, TB_CHANNEL_MAIN, &any, 1, TB_COMM_I32, TB_COMM_MAX, &ignored) != TB_OK && !failed)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "%s", ignored.msg);
    if (rc == TB_OK && any)
        rc = tb_err_set(err, TB_ERR_RUNTIME, "another rank could not read its parameters");
    if (rc == TB_OK)
        rc = comm->allreduce(comm, TB_CHANNEL_MAIN, lo, np, TB_COMM_U64, TB_COMM_MIN, err);
    if (rc == TB_OK)
        rc = comm->allreduce(comm, TB_CHANNEL_MAIN, hi, np, TB_COMM_U64, TB_COMM_MAX, err);
    if (rc == TB_OK) {
        size_t differ = 0, first = 0;
        for (size_t i = np; i-- > 0;)
            if (lo[i] != hi[i]) {
                differ++;
                first = i;
            }
        if (differ)
            rc = tb_err_set(err, TB_ERR_RUNTIME,
                            "the ranks' weights differ: %s%s and %zu more of %zu parameters are not the same on all "
                            "%d ranks",
                            e->params[first]->name, e->params[first]->trainable ? "" : " (a buffer)", differ - 1, np,
                            comm->size);
    }
    free(buf);
    free(lo);
    return rc;
}

int tb_replicas_broadcast_buffers(struct tb_engine *e, const struct tb_comm *comm, int root, struct tb_err *err)
{
    if (!comm || comm->size <= 1)
        return TB_OK;
    /* All buffers in one message: they are small (a few floats per channel) and many. */
    size_t total = 0;
    for (size_t i = 0; i < e->nparams; i++)
        if (!e->params[i]->trainable)
            total += tb_shape_elems(e->params[i]->value.desc.shape);
    if (total == 0)
        return TB_OK;
    float *all = malloc(total * sizeof *all);
    if (!all)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    int rc = TB_OK;
    size_t at = 0;
    for (size_t i = 0; i < e->nparams && rc == TB_OK; i++) {
        const struct tb_param *p = e->params[i];
        if (p->trainable)
            continue;
        if (comm->rank == root)
            rc = e->ops->tensor_read(e->ctx, &p->value, all + at, err);
        at += tb_shape_elems(p->value.desc.shape);
    }
    if (rc == TB_OK)
        rc = comm->broadcast(comm, TB_CHANNEL_MAIN, all, total * sizeof *all, root, err);
    at = 0;
    for (size_t i = 0; i < e->nparams && rc == TB_OK; i++) {
        const struct tb_param *p = e->params[i];
        if (p->trainable)
            continue;
        if (comm->rank != root)
            rc = e->ops->tensor_write(e->ctx, &p->value, all + at, err);
        at += tb_shape_elems(p->value.desc.shape);
    }
    free(all);
    return rc ? tb_err_prefix(err, "copying rank %d's batch-norm statistics to the other ranks", root) : TB_OK;
}
