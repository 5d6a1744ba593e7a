/* swap_stats.c: the memory manager's counters as a table (core/engine/swap_stats.h),
 * and their sums and differences, read from the table so that a counter added to
 * TB_SWAP_COUNTERS is summed, differenced and reported with no other edit. */
#include "config.h"

#include "core/engine/swap_stats.h"

const struct tb_swap_counter tb_swap_counters[] = {
#define TB_SWAP_ROW(field_, type_, agg_, csv_, json_, what_)                                                  \
    { .field = #field_, .offset = offsetof(struct tb_swap_stats, field_), .type = TB_SWAP_COUNTER_##type_, \
      .agg = TB_SWAP_COUNTER_##agg_, .csv = csv_, .json = json_, .what = what_ },
    TB_SWAP_COUNTERS(TB_SWAP_ROW)
#undef TB_SWAP_ROW
};

const size_t tb_swap_ncounters = sizeof tb_swap_counters / sizeof tb_swap_counters[0];

static void *at(struct tb_swap_stats *s, const struct tb_swap_counter *c)
{
    return (char *)s + c->offset;
}

double tb_swap_counter_get(const struct tb_swap_stats *s, const struct tb_swap_counter *c)
{
    const char *p = (const char *)s + c->offset;
    return c->type == TB_SWAP_COUNTER_U64 ? (double)*(const uint64_t *)p : *(const double *)p;
}

void tb_swap_stats_add(struct tb_swap_stats *sum, const struct tb_swap_stats *a)
{
    for (size_t i = 0; i < tb_swap_ncounters; i++) {
        const struct tb_swap_counter *c = &tb_swap_counters[i];
        const void *v = (const char *)a + c->offset;
        if (c->type == TB_SWAP_COUNTER_U64) {
            uint64_t *s = at(sum, c), x = *(const uint64_t *)v;
            *s = c->agg == TB_SWAP_COUNTER_MAX ? (x > *s ? x : *s) : *s + x;
        } else {
            double *s = at(sum, c), x = *(const double *)v;
            *s = c->agg == TB_SWAP_COUNTER_MAX ? (x > *s ? x : *s) : *s + x;
        }
    }
}

struct tb_swap_stats tb_swap_stats_since(const struct tb_swap_stats *now, const struct tb_swap_stats *mark)
{
    struct tb_swap_stats d = *now;
    for (size_t i = 0; i < tb_swap_ncounters; i++) {
        const struct tb_swap_counter *c = &tb_swap_counters[i];
        if (c->agg != TB_SWAP_COUNTER_SUM)
            continue;
        const void *m = (const char *)mark + c->offset;
        if (c->type == TB_SWAP_COUNTER_U64)
            *(uint64_t *)at(&d, c) -= *(const uint64_t *)m;
        else
            *(double *)at(&d, c) -= *(const double *)m;
    }
    return d;
}
