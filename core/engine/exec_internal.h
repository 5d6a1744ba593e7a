/* core/engine/exec_internal.h: the executor's state, shared by exec.c (forward, backward,
 * memory) and trace.c (Chrome traces of a step); the rest of the core sees struct tb_exec
 * through engine_internal.h's functions only. */
#ifndef TB_CORE_ENGINE_EXEC_INTERNAL_H
#define TB_CORE_ENGINE_EXEC_INTERNAL_H

#include "core/dist/gradsync_internal.h"
#include "core/engine/engine_internal.h"
#include "core/engine/swapmem_internal.h"

struct tb_exec {
    struct tb_engine *e;
    struct tb_graph *g;
    struct tb_schedule *s;
    void **state;            /* [nops] backend op states */
    struct tb_tensor *t;     /* [ntensors]; data NULL while not allocated */
    struct tb_param **param; /* [ntensors]; the engine entry behind a PARAM/BUFFER node or PARAM_GRAD */
    bool *written;           /* [ntensors]; gradients: holds this step's first contribution */
    uint64_t *allocs;        /* [ntensors] */
    uint32_t *pins;          /* [ntensors] */
    double *seconds;         /* [nsteps] */
    double *starts;          /* [nsteps] when each step's op began (CLOCK_MONOTONIC), for traces */
    /* [2 * nsteps] events recorded on the compute stream before and after each op of a
     * traced step (made at the first trace, owned): a GPU runs an op after the host has
     * queued it, so the trace places ops by when the device ran them, as it places copies */
    struct tb_event **op_ev;
    size_t nop_ev;
    /* The recomputations of a traced step (recompute.c records, trace.c reports), owned. */
    struct tb_trace_rerun {
        uint32_t step;                /* the forward step whose op ran again */
        uint64_t bytes;               /* what it rebuilt */
        double t0, t1;                /* host clock, where events cannot say */
        struct tb_event *start, *end; /* on the compute stream, or NULL */
    } * reruns;
    size_t nreruns, reruns_cap;
    struct tb_swap_mem mem; /* residency and swapping of t[] */
    bool mem_ready;
    struct tb_grad_sync sync; /* data parallelism: the gradient all-reduce plan */
    /* Recomputation (recompute.c), all owned: */
    uint64_t fwd_step;  /* the step value the latest forward ran its ops with */
    uint32_t *producer; /* [ntensors] the forward step writing tensor i; UINT32_MAX: none */
    uint8_t *keep;      /* [ntensors] never dropped: the graph's outputs and losses */
    uint32_t *temps;    /* [ntensors] rebuilt only to rebuild another: freed once read */
    size_t ntemps;
    uint8_t *mark;       /* [nops] scratch of a chain walk */
    uint32_t *chain_buf; /* scratch for a chain */
    uint32_t rebuilding; /* dropped tensors being rebuilt now, one inside another */
    /* Ops re-run now, one for another's input (recompute.c); of a chain that failed, the
     * innermost op and its depth, for the one message the outermost writes. */
    uint32_t rerun_depth, failed_depth;
    const char *failed_op;
};

/* The executor's device memory (exec_memory.c), shared by the forward (exec.c), backward
 * (exec_backward.c) and rebuilds (recompute.c):
 * pin_step/unpin_step keep a step's tensors from being swapped out while its op runs;
 * alloc_tensor places tensor i for step (swapping out to make room), device_alloc places
 * bytes for it and says why not in *status; room_for_op, after an op's TB_ERR_NOMEM,
 * frees what the op asked for and says whether to try again; retire frees after a step
 * what no later step needs; release_transients frees every activation and gradient still
 * held (the previous step's). */
void tb_exec_pin_step(struct tb_exec *x, size_t step);
void tb_exec_unpin_step(struct tb_exec *x, size_t step);
int tb_exec_alloc_tensor(struct tb_exec *x, size_t step, size_t i, struct tb_err *err);
void *tb_exec_device_alloc(struct tb_exec *x, size_t step, size_t i, size_t bytes, int *status, struct tb_err *err);
bool tb_exec_room_for_op(struct tb_exec *x, size_t step, int *rc, struct tb_err *err);
void tb_exec_retire(struct tb_exec *x, size_t step);
void tb_exec_release_transients(struct tb_exec *x);

/* Recomputation (recompute.c): init fills *rb, what the memory manager calls to drop and
 * rebuild this executor's activations; free releases what init made (safe after a failed
 * or no init). */
int tb_exec_recompute_init(struct tb_exec *x, struct tb_swap_rebuild *rb, struct tb_err *err);
void tb_exec_recompute_free(struct tb_exec *x);

/* Tracing (trace.c): records the event before (end = false) or after the op of step k on
 * the compute stream while a step is traced; frees the events at the executor's end. */
void tb_exec_trace_mark(struct tb_exec *x, size_t k, bool end);
/* While a step is traced: an event recorded on the compute stream now (NULL otherwise, or
 * when none can be), and the record of forward step k's op run again between two such
 * events (host times t0, t1), having rebuilt `bytes`; the events become the trace's. */
struct tb_event *tb_exec_trace_event(struct tb_exec *x);
void tb_exec_trace_rerun(struct tb_exec *x, size_t k, uint64_t bytes, double t0, double t1, struct tb_event *start,
                         struct tb_event *end);
void tb_exec_trace_free(struct tb_exec *x);

#endif
