/* swap/planner.h: the schedule planner shared by the prefetch and hybrid swap policies
 * (planner.c makes the plan, counting on the link as planner_link.c models it;
 * planner_steps.c carries it out; doc/swap-planner.md says how it plans). Each plugin keeps its own keys and
 * descriptor, fills a struct planner from its [swap] section, and hands the hooks below to the core. */
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

/* DEFAULT_THRESHOLD, DEFAULT_AHEAD: the windows until one training step is timed.
 * HISTORY: the training steps whose op times a plan takes the least of. MAX_REBUILD: the most forward ops one planned
 * rebuild re-runs. In training the forward keeps what the backward reads, so a rebuild re-runs one or two ops; where
 * the schedule freed what it reads (validation, which keeps nothing for a backward) the chain restarts from the last
 * tensor held, tens of ops holding more memory than price() counts. */
enum { DEFAULT_THRESHOLD = 8, DEFAULT_AHEAD = 2, MAX_REBUILD = 4, HISTORY = 3 };

/* One direction of the link as its copy stream runs it: first in, first out. A copy
 * issued at `at` (seconds into the step) starts when the copies issued before it are
 * done, and each must be done by its deadline: an out copy by the step from which the
 * plan counts its memory as free, an in copy (with prefetch's half-again margin) before
 * the step that reads it. Kept sorted by `at`. */
struct copy {
    double at, seconds, deadline;
    double need; /* when the step that counts on it starts: past it, that step waits */
};

struct queue {
    struct copy *c;
    size_t n, cap;
};

/* planner.c, for planner_steps.c: the plan of executor m's memory manager (NULL: none);
 * whether tensor i is large enough to swap; the plan's actions made (again) from its
 * uses and times; a plan freed. */
struct plan *planner_find_plan(struct planner *p, const struct tb_swap_mem *m);
bool planner_swappable(const struct planner *p, const struct plan *pl, size_t i);
int planner_make_actions(struct planner *p, struct plan *pl, struct tb_err *err);
void planner_free_plan(struct plan *pl);

/* The link as the plan counts on it (planner_link.c). before[k]: when step k starts, in
 * seconds into the step. window: the steps [e, s) in which tensor i, used at u and next
 * at v, is off the device when moved out after u (e >= s: none). loaded_window: the same
 * with the copies already queued on out and in, and whether its copies would keep to
 * their times there without making a queued copy miss its own (memory needed from step
 * k). queue_swap: those copies queued. exposed_seconds: what the steps would wait, for a
 * swap the link cannot hide, for its copies and the copies it delays. evict_seconds: its
 * copies out and back waited for whole. */
void planner_window(const struct planner *p, const struct plan *pl, const double *before, size_t i, uint32_t u,
                    uint32_t v, uint32_t *e, uint32_t *s);
bool planner_loaded_window(const struct plan *pl, const double *before, const struct queue *out, const struct queue *in,
                           size_t i, uint32_t u, uint32_t v, uint32_t k, uint32_t *e, uint32_t *s);
int planner_queue_swap(const struct plan *pl, const double *before, struct queue *out, struct queue *in, size_t i,
                       uint32_t u, uint32_t v, uint32_t freed, uint32_t s, bool late);
double planner_exposed_seconds(const struct plan *pl, const double *before, const struct queue *out,
                               const struct queue *in, size_t i, uint32_t u, uint32_t v, uint32_t k, uint32_t s);
double planner_evict_seconds(const struct plan *pl, size_t i);

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
#define PLANNER_OPS(create_fn)                                                                                \
    {                                                                                                         \
        .head = { .create = create_fn, .destroy = planner_destroy }, .plan = planner_plan,                    \
        .before_step = planner_before_step, .after_step = planner_after_step, .make_room = planner_make_room, \
        .forget = planner_forget,                                                                             \
    }

#endif
