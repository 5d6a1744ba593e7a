/* swap/planner.h: the schedule planner shared by the prefetch and hybrid swap policies
 * (planner.c says how it plans). Each plugin keeps its own keys and descriptor, fills a
 * struct planner from its [swap] section, and hands the hooks below to the core. */
#ifndef TB_PLUGINS_SWAP_PLANNER_H
#define TB_PLUGINS_SWAP_PLANNER_H

#include <stdbool.h>
#include <stdint.h>
#include <trainbig/trainbig.h>

enum { MAX_EXECUTORS = 8 };

/* The plan of one executor's schedule. */
struct plan {
    struct tb_swap_mem *m;
    const struct tb_schedule *s;
    size_t nsteps, ntensors;
    uint32_t **uses; /* [ntensors]: the steps touching tensor i, ascending; NULL unless an activation or gradient */
    uint32_t *nuses;
    /* Actions: out_after[k], in_before[k] and drop_after[k] list tensors, each terminated
     * by UINT32_MAX. */
    uint32_t **out_after, **in_before, **drop_after;
    double *seconds; /* [nsteps] measured: what the plan was made with */
    double *now;     /* [nsteps] measured in the step running */
    /* hybrid: [PLANNER_HISTORY][nsteps] the op times of the last training steps (a ring, by
     * pass); it plans from each op's least of them. */
    double *recent;
    double planned; /* the sum of seconds[] */
    double t0;
    bool tuned;
    uint64_t capacity;   /* device memory, 0 = unlimited */
    double persistent;   /* what is not a transient tensor: parameters, their gradients and
                          * momentum, the backend's scratch (estimated, then measured) */
    double measured;     /* the largest seen during the first step */
    struct tb_link link; /* the platform's, when has_link */
    bool has_link;
    uint32_t replans; /* plans made from measured times */
    /* hybrid: bytes the plan keeps free at each step besides its tensors, learnt where the
     * memory manager had to make room during a step (an op's scratch, memory too split for
     * a block); grown: added to since the last plan; pass, room_pass[]: the training step
     * counted, and the last in which each step made room (one ask per step and pass). */
    double *reserve;
    double *made_bytes; /* [nsteps] the largest activation each step makes */
    uint32_t *room_pass, pass;
    bool grown;
};

struct planner {
    const char *name;     /* the policy's, for errors */
    int threshold, ahead; /* 0: tuned */
    uint64_t min_size;
    bool recompute; /* hybrid: drop and recompute where that costs less than a swap */
    bool adaptive;  /* plan from the ops' own times (tb_swap_op_seconds), and again when they drift */
    struct plan plans[MAX_EXECUTORS];
};

/* A planner for the policy `name` (a string that outlives it), from the keys threshold,
 * ahead and min_size of cfg; recompute and adaptive as above. */
int planner_create(const struct tb_section *cfg, const char *name, bool recompute, bool adaptive, void **ctx,
                   struct tb_err *err);
void planner_destroy(void *ctx);
/* The tb_swap_ops hooks. */
int planner_plan(void *ctx, struct tb_swap_mem *m, const struct tb_schedule *s, uint64_t capacity,
                 const struct tb_link *link, struct tb_err *err);
int planner_before_step(void *ctx, struct tb_swap_mem *m, size_t step, struct tb_err *err);
int planner_after_step(void *ctx, struct tb_swap_mem *m, size_t step, struct tb_err *err);
int planner_make_room(void *ctx, struct tb_swap_mem *m, size_t step, uint64_t bytes, struct tb_err *err);
void planner_forget(void *ctx, struct tb_swap_mem *m);

/* The keys both policies share, as entries of a struct tb_key table; `what` says what
 * leaving the device is ("moved", "swapped or dropped"). */
#define PLANNER_KEYS(what)                                                                                       \
    { "threshold", TB_KEY_INT, "0", "0..1000000",                                                                \
      "swap a tensor out only when its next use is more than this many steps away; 0 = tuned from measured "     \
      "step times and the link" },                                                                               \
        { "ahead", TB_KEY_INT, "0", "0..1000000",                                                                \
          "start bringing a tensor back this many steps before its use; 0 = tuned from measured step times and " \
          "the link" },                                                                                          \
    {                                                                                                            \
        "min_size", TB_KEY_SIZE, "1M", NULL, "tensors smaller than this are never " what                         \
    }

/* A policy's vtable: its own create, the planner's hooks. */
#define PLANNER_OPS(create_fn)                                                                                     \
    {                                                                                                              \
        .create = create_fn, .destroy = planner_destroy, .plan = planner_plan, .before_step = planner_before_step, \
        .after_step = planner_after_step, .make_room = planner_make_room, .forget = planner_forget,                \
    }

#endif
