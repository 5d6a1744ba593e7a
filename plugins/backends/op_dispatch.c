/* backends/op_dispatch.c: an op's preparation as every backend does it (op_dispatch.h). */
#include "op_dispatch.h"

#include <stdlib.h>

int tb_op_dispatch_check(const struct tb_op *op, struct tb_err *err)
{
    char why[600];
    if (tb_op_check(op, why, sizeof why))
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u (%s): %s", op->id,
                          tb_op_kind_name(op->kind) ? tb_op_kind_name(op->kind) : "no such kind", why);
    return TB_OK;
}

int tb_op_dispatch_prepare(const struct tb_op_dispatch *d, void *backend, const void *kernel, const struct tb_op *op,
                           void **state, struct tb_err *err)
{
    *state = NULL;
    if (!kernel)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u: the %s backend has no %s kernel", op->id, d->backend,
                          tb_op_kind_name(op->kind) ? tb_op_kind_name(op->kind) : "such");
    int rc = tb_op_dispatch_check(op, err);
    if (rc)
        return rc;
    struct tb_op_state *s = calloc(1, sizeof *s);
    if (!s)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    s->kernel = kernel;
    rc = d->prepare(backend, kernel, op, &s->inner, err);
    if (rc) {
        free(s);
        return rc;
    }
    *state = s;
    return TB_OK;
}

void tb_op_dispatch_release(const struct tb_op_dispatch *d, void *state)
{
    struct tb_op_state *s = state;
    if (!s)
        return;
    d->release(s->kernel, s->inner);
    free(s);
}

void tb_op_dispatch_scratch(void *state, bool backward, uint64_t bytes)
{
    struct tb_op_state *s = state;
    if (bytes > s->scratch[backward])
        s->scratch[backward] = bytes;
}

uint64_t tb_op_dispatch_scratch_bytes(const void *state, bool backward)
{
    const struct tb_op_state *s = state;
    return s ? s->scratch[backward] : 0;
}
