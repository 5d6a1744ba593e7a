/* optim.c: SGD with momentum and weight decay, and the learning-rate policies. */
#include "config.h"

#include "core/engine/engine_internal.h"

#include <math.h>

int tb_param_momentum(struct tb_engine *e, struct tb_param *p, struct tb_err *err)
{
    if (p->momentum.data)
        return TB_OK;
    p->momentum = p->value;
    size_t bytes = e->ops->tensor_bytes(e->ctx, &p->value.desc);
    p->momentum.data = e->ops->mem_alloc(e->ctx, e->device, bytes);
    if (!p->momentum.data)
        return tb_err_set(err, TB_ERR_NOMEM, "%s: no device memory for its %zu-byte momentum buffer", p->name, bytes);
    return e->ops->tensor_fill(e->ctx, &p->momentum, 0.0f, err);
}

int tb_sgd_prepare(struct tb_engine *e, struct tb_err *err)
{
    for (size_t i = 0; i < e->nparams; i++) {
        struct tb_param *p = e->params[i];
        if (!p->trainable || !p->grad.data)
            continue;
        int rc = tb_param_momentum(e, p, err);
        if (rc)
            return rc;
    }
    return TB_OK;
}

int tb_sgd_step(struct tb_engine *e, float lr, float momentum, float weight_decay, struct tb_err *err)
{
    for (size_t i = 0; i < e->nparams; i++) {
        struct tb_param *p = e->params[i];
        if (!p->trainable || !p->grad.data)
            continue;
        int rc = tb_param_momentum(e, p, err);
        if (rc)
            return rc;
        rc = e->ops->sgd_update(e->ctx, &p->value, &p->grad, &p->momentum, lr, momentum, weight_decay, err);
        if (rc)
            return tb_err_prefix(err, "SGD update of %s", p->name);
    }
    return TB_OK;
}

double tb_lr_poly(double base, uint64_t it, uint64_t total, double power)
{
    if (total == 0 || it >= total)
        return 0.0;
    return base * pow(1.0 - (double)it / (double)total, power);
}

double tb_lr_step(double base, uint64_t it, uint64_t step_size, double gamma)
{
    if (step_size == 0)
        return base;
    return base * pow(gamma, (double)(it / step_size));
}
