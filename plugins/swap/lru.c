/* swap/lru: on-demand eviction of the least recently used tensors, on-demand swap-in.
 *
 * This is what IBM's LMS for PyTorch does, and the baseline the other policies are
 * measured against: nothing moves until an allocation does not fit; then the activations
 * and gradients used longest ago (at least min_size bytes, not used by the running step)
 * go to host memory until the allocation fits. A tensor on the host comes back when a step
 * needs it, and that step waits for the copy. */
#include <stdlib.h>
#include <string.h>
#include <trainbig/trainbig.h>

struct lru {
    uint64_t min_size;
    size_t *order; /* scratch: candidate tensors */
    size_t cap;
};

static const struct tb_key lru_keys[] = {
    { "min_size", TB_KEY_SIZE, "1M", NULL,
      "tensors smaller than this are never swapped: their copies cost more in latency than they free" },
    TB_KEYS_END,
};

static int lru_create(const struct tb_section *cfg, void **ctx, struct tb_err *err)
{
    struct lru *l = calloc(1, sizeof *l);
    if (!l)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    l->min_size = tb_section_size(cfg, "min_size");
    *ctx = l; /* the caller's until destroy */
    return TB_OK;
}

static void lru_destroy(void *ctx)
{
    struct lru *l = ctx;
    free(l->order);
    free(l);
}

static const struct tb_swap_mem *sort_mem;

static int by_last_use(const void *a, const void *b)
{
    uint64_t x = tb_swap_last_used(sort_mem, *(const size_t *)a), y = tb_swap_last_used(sort_mem, *(const size_t *)b);
    if (x != y)
        return x < y ? -1 : 1;
    return *(const size_t *)a < *(const size_t *)b ? -1 : *(const size_t *)a > *(const size_t *)b;
}

static int lru_plan(void *ctx, struct tb_swap_mem *m, const struct tb_schedule *s, uint64_t capacity,
                    const struct tb_link *link, struct tb_err *err)
{
    (void)m;
    (void)capacity;
    (void)link;
    struct lru *l = ctx;
    size_t n = tb_schedule_tensors(s);
    if (n > l->cap) {
        size_t *p = realloc(l->order, n * sizeof *p);
        if (!p)
            return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        l->order = p;
        l->cap = n;
    }
    return TB_OK;
}

/* Moves out the least recently used movable tensors until `bytes` more would fit. */
static int lru_make_room(void *ctx, struct tb_swap_mem *m, size_t step, uint64_t bytes, struct tb_err *err)
{
    struct lru *l = ctx;
    size_t n = 0;
    for (size_t i = 0; i < l->cap; i++)
        if (tb_swap_movable(m, i) && tb_swap_tensor_bytes(m, i) >= l->min_size)
            l->order[n++] = i;
    sort_mem = m; /* hooks run one at a time, on the training thread */
    qsort(l->order, n, sizeof *l->order, by_last_use);
    const uint64_t cap = tb_swap_capacity(m), use = tb_swap_in_use(m);
    uint64_t freed = 0;
    int rc = tb_swap_out_until(m, l->order, n, bytes, &freed, err);
    if (rc)
        return rc;
    tb_log(TB_LOG_DEBUG, "lru: step %zu needs %.1f MiB: %zu candidates, moved %.1f MiB out (%.1f of %.1f MiB in use)",
           step, (double)bytes / 1048576.0, n, (double)freed / 1048576.0, (double)use / 1048576.0,
           (double)cap / 1048576.0);
    return TB_OK;
}

static const struct tb_swap_ops lru_ops = {
    .head = { .create = lru_create, .destroy = lru_destroy },
    .plan = lru_plan,
    .make_room = lru_make_room,
};

TB_PLUGIN_EXPORT const struct tb_plugin trainbig_plugin = {
    .abi_major = TB_ABI_MAJOR,
    .abi_minor = TB_ABI_MINOR,
    .kind = TB_KIND_SWAP,
    .name = "lru",
    .version = TB_VERSION,
    .description = "evicts the least recently used tensors when memory runs out, brings them back on demand (IBM LMS)",
    .keys = lru_keys,
    .ops.swap = &lru_ops,
};
