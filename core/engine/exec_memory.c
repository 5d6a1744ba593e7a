/* exec_memory.c: the executor's device memory, shared by its forward (exec.c), backward
 * (exec_backward.c) and rebuilds (recompute.c), which call it and which it does not call:
 * a step's tensors pinned while its op runs, tensors placed through the memory manager
 * (swapmem.c) and freed after their last use, room made for an op's own scratch, and the
 * out-of-memory report that says what holds the device and what to change. */
#include "config.h"

#include "core/engine/engine_internal.h"

#include "core/engine/exec_internal.h"

#include <stdio.h>
#include <stdlib.h>

void tb_exec_pin_step(struct tb_exec *x, size_t step)
{
    const struct tb_sched_step *st = &x->s->steps[step];
    for (uint32_t i = 0; i < st->ntensors; i++)
        x->pins[st->tensors[i]]++;
}

void tb_exec_unpin_step(struct tb_exec *x, size_t step)
{
    const struct tb_sched_step *st = &x->s->steps[step];
    for (uint32_t i = 0; i < st->ntensors; i++)
        x->pins[st->tensors[i]]--;
}

/* Tensors the executor allocates and frees as the step goes. */
static bool transient(const struct tb_exec *x, size_t i)
{
    enum tb_sched_kind k = x->s->tensors[i].kind;
    return k == TB_SCHED_ACTIVATION || k == TB_SCHED_GRADIENT;
}

uint64_t tb_exec_transient_bytes(const struct tb_exec *x)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < x->s->ntensors; i++)
        if (transient(x, i))
            sum += x->s->tensors[i].bytes;
    return sum;
}

/* Out of device memory for `bytes` of `what` at step `step`: say for what, how full the
 * device is (and how fragmented), what holds it, and what to change. */
static int oom_report(struct tb_exec *x, size_t step, const char *what, uint64_t bytes, struct tb_err *err)
{
    struct tb_mem_stats st = { 0 };
    x->e->ops->mem_stats(x->e->ctx, x->e->device, &st); /* required to compute (engine.c) */
    size_t top[3] = { SIZE_MAX, SIZE_MAX, SIZE_MAX };
    for (size_t j = 0; j < x->s->ntensors; j++) {
        if (!x->t[j].data)
            continue;
        for (int r = 0; r < 3; r++) {
            if (top[r] == SIZE_MAX || x->s->tensors[j].bytes > x->s->tensors[top[r]].bytes) {
                for (int q = 2; q > r; q--)
                    top[q] = top[q - 1];
                top[r] = j;
                break;
            }
        }
    }
    char largest[1024] = "";
    size_t o = 0;
    for (int r = 0; r < 3 && top[r] != SIZE_MAX && o < sizeof largest; r++)
        o += (size_t)snprintf(largest + o, sizeof largest - o, "%s%s %.1f MiB", r ? ", " : "",
                              x->s->tensors[top[r]].name, (double)x->s->tensors[top[r]].bytes / 1048576.0);
    /* Free bytes split into blocks too small for the request: say so, or the numbers
     * seem to contradict the failure. */
    char frag[160] = "";
    const uint64_t total = st.capacity && st.capacity != UINT64_MAX ? st.capacity : st.reserved;
    const uint64_t free_b = total > st.in_use ? total - st.in_use : 0;
    if (free_b)
        snprintf(frag, sizeof frag, ", %.1f MiB free but in blocks of at most %.1f MiB (fragmentation %.0f%%)",
                 (double)free_b / 1048576.0, (double)st.largest_free / 1048576.0,
                 100.0 * (1.0 - (double)st.largest_free / (double)free_b));
    const char *step_name = step < x->s->nsteps ? x->s->steps[step].name : "setup";
    const struct tb_swap_policy *pol = &x->e->swap;
    const char *hint = pol->ops && pol->ops->make_room
                           ? "; the swap policy could not make room: lower [swap] min_size, or"
                           : "; set [swap] plugin = lru (or prefetch) to move activations to host memory, or";
    if (!st.capacity || st.capacity == UINT64_MAX) /* no cap: the system's memory ran out */
        return tb_err_set(err, TB_ERR_NOMEM,
                          "out of memory at %s: %s needs %.1f MiB and the system has none left (the device's memory "
                          "has no cap: [backend] device_memory unset; %.1f MiB in use, largest live: %s): lower "
                          "[train] batch or the image size, or set [backend] device_memory below the host's free "
                          "memory and [swap] plugin = lru to swap",
                          step_name, what, (double)bytes / 1048576.0, (double)st.in_use / 1048576.0,
                          *largest ? largest : "none");
    return tb_err_set(err, TB_ERR_NOMEM,
                      "out of device memory at %s: %s needs %.1f MiB; the device has %.1f MiB, %.1f MiB in use%s "
                      "(largest live: %s)%s lower [train] batch or the image size, or raise [backend] device_memory",
                      step_name, what, (double)bytes / 1048576.0, (double)st.capacity / 1048576.0,
                      (double)st.in_use / 1048576.0, frag, *largest ? largest : "none", hint);
}

static int out_of_memory(struct tb_exec *x, size_t step, size_t i, struct tb_err *err)
{
    return oom_report(x, step, x->s->tensors[i].name, x->s->tensors[i].bytes, err);
}

/* Device memory of `bytes` for step `step`, through the memory manager once it exists;
 * NULL with *status and err set (out of memory for tensor i, or the policy failed). */
void *tb_exec_device_alloc(struct tb_exec *x, size_t step, size_t i, size_t bytes, int *status, struct tb_err *err)
{
    void *p;
    int perr = TB_OK;
    if (x->mem_ready)
        p = tb_swapmem_alloc(&x->mem, step, bytes, &perr, err);
    else
        p = x->e->ops->mem_alloc(x->e->ctx, x->e->device, bytes ? bytes : 1);
    *status = p ? TB_OK : perr ? perr : out_of_memory(x, step, i, err);
    return p;
}

int tb_exec_alloc_tensor(struct tb_exec *x, size_t step, size_t i, struct tb_err *err)
{
    if (x->t[i].data)
        return TB_OK;
    int rc;
    x->t[i].data = tb_exec_device_alloc(x, step, i, (size_t)x->s->tensors[i].bytes, &rc, err);
    if (!x->t[i].data)
        return rc;
    if (x->mem_ready)
        tb_swapmem_produced(&x->mem, i);
    x->allocs[i]++;
    return TB_OK;
}

static void free_tensor(struct tb_exec *x, size_t i)
{
    if (x->pins[i] && x->t[i].data) {
        /* Freeing what a running step uses: a bug in the executor's bookkeeping. */
        fprintf(stderr, "trainbig: internal error: freeing pinned tensor %s\n", x->s->tensors[i].name);
        abort();
    }
    if (x->mem_ready) {
        tb_swapmem_drop(&x->mem, i);
    } else if (x->t[i].data) {
        x->e->ops->mem_free(x->e->ctx, x->e->device, x->t[i].data);
        x->t[i].data = NULL;
    }
}

void tb_exec_release_transients(struct tb_exec *x)
{
    for (size_t i = 0; i < x->s->ntensors; i++)
        if (transient(x, i))
            free_tensor(x, i);
}

void tb_exec_release(struct tb_exec *x)
{
    tb_exec_release_transients(x);
    for (size_t i = 0; i < x->s->ntensors; i++)
        if (x->s->tensors[i].kind == TB_SCHED_INPUT)
            free_tensor(x, i);
}

/* An op failed with TB_ERR_NOMEM: when it was its own scratch that did not fit (the
 * backend says how much), free that much through the memory manager. True when the op
 * may run again. */
bool tb_exec_room_for_op(struct tb_exec *x, size_t step, int *rc, struct tb_err *err)
{
    if (*rc != TB_ERR_NOMEM || !x->e->alloc_failed_bytes)
        return false;
    uint64_t bytes = x->e->alloc_failed_bytes(x->e->ctx, x->e->device);
    if (!bytes)
        return false;
    struct tb_err why;
    tb_err_clear(&why);
    int perr;
    if (!tb_swapmem_make_room(&x->mem, step, bytes, &perr, &why)) {
        if (perr) {
            *err = why;
            *rc = perr;
        } else {
            /* The op's own memory does not fit and nothing can move: the full report. */
            tb_err_clear(err);
            *rc = oom_report(x, step, "the op's scratch space", bytes, err);
        }
        return false;
    }
    tb_err_clear(err);
    return true;
}

/* After a step: free what no later step needs. */
void tb_exec_retire(struct tb_exec *x, size_t step)
{
    const struct tb_sched_step *st = &x->s->steps[step];
    for (uint32_t i = 0; i < st->ntensors; i++) {
        uint32_t t = st->tensors[i];
        if (transient(x, t) && x->s->tensors[t].last_use == (int32_t)step)
            free_tensor(x, t);
    }
}
