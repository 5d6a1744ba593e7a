/* swapmem.c: the memory manager behind an executor: residency, swap copies, the policy's
 * hooks and the counters.
 *
 * A swap-out queues, on the device-to-host stream, a wait for the compute done so far and
 * a copy into the tensor's pinned host buffer; the device block is freed once that copy's
 * event has completed (checked at each allocation and step, or waited for when memory is
 * short). A swap-in allocates a device block and queues the copy back on the host-to-device
 * stream; the step that needs the tensor makes the compute stream wait for it, and the
 * time that wait takes is the stall. A tensor brought back keeps its host copy (BOTH), so
 * moving it out again costs no copy unless a step rewrites it. */
#include "config.h"

#include "core/engine/swapmem_internal.h"

#include <stdlib.h>
#include <string.h>
#include <trainbig/clock.h>

bool tb_swapmem_movable_kind(const struct tb_swap_mem *m, size_t i)
{
    enum tb_sched_kind k = m->s->tensors[i].kind;
    return k == TB_SCHED_ACTIVATION || k == TB_SCHED_GRADIENT;
}

size_t tb_swapmem_bytes(const struct tb_swap_mem *m, size_t i)
{
    size_t b = (size_t)m->s->tensors[i].bytes;
    return b ? b : 1;
}

/* ------------------------------------------------------------------ what policies see */

enum tb_residency tb_swap_residency(const struct tb_swap_mem *m, size_t i)
{
    return i < m->s->ntensors ? (enum tb_residency)m->res[i] : TB_RES_NONE;
}

bool tb_swap_movable(const struct tb_swap_mem *m, size_t i)
{
    return i < m->s->ntensors && tb_swapmem_movable_kind(m, i) && m->pins[i] == 0 &&
           (m->res[i] == TB_RES_DEVICE || m->res[i] == TB_RES_BOTH);
}

uint64_t tb_swap_last_used(const struct tb_swap_mem *m, size_t i)
{
    return i < m->s->ntensors ? m->used[i] : 0;
}

uint64_t tb_swap_tensor_bytes(const struct tb_swap_mem *m, size_t i)
{
    return i < m->s->ntensors ? m->s->tensors[i].bytes : 0;
}

uint64_t tb_swap_capacity(const struct tb_swap_mem *m)
{
    struct tb_mem_stats st = { 0 };
    m->be->mem_stats(m->be_ctx, m->device, &st);
    return st.capacity;
}

uint64_t tb_swap_in_use(const struct tb_swap_mem *m)
{
    struct tb_mem_stats st = { 0 };
    m->be->mem_stats(m->be_ctx, m->device, &st);
    return st.in_use;
}

/* ------------------------------------------------------------------ copies */

static int need_event(struct tb_swap_mem *m, size_t i, struct tb_err *err)
{
    if (!m->ev[i] && !(m->ev[i] = m->be->event_create(m->be_ctx, m->device)))
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory for a swap event");
    return TB_OK;
}

/* Tracing: an event on `stream` now, before a copy (start) or after it (end). */
struct tb_event *tb_swapmem_trace_mark(struct tb_swap_mem *m, enum tb_stream stream)
{
    struct tb_event *ev = m->be->event_create(m->be_ctx, m->device);
    if (ev && m->be->event_record(m->be_ctx, ev, stream) != TB_OK) {
        m->be->event_destroy(m->be_ctx, ev);
        ev = NULL;
    }
    return ev;
}

/* Keeps a traced copy; one that cannot be kept is left out of the trace, the step goes on. */
void tb_swapmem_trace_copy(struct tb_swap_mem *m, size_t i, enum tb_trace_track track, struct tb_event *start,
                           struct tb_event *end)
{
    if (start && end && m->ntrace == m->trace_cap) {
        size_t cap = m->trace_cap ? 2 * m->trace_cap : 64;
        struct tb_trace_copy *t = realloc(m->trace, cap * sizeof *t);
        if (t) {
            m->trace = t;
            m->trace_cap = cap;
        }
    }
    if (!start || !end || m->ntrace == m->trace_cap) {
        if (start)
            m->be->event_destroy(m->be_ctx, start);
        if (end)
            m->be->event_destroy(m->be_ctx, end);
        return;
    }
    m->trace[m->ntrace++] = (struct tb_trace_copy){ (uint32_t)i, track, start, end };
}

void tb_swapmem_trace_clear(struct tb_swap_mem *m)
{
    for (size_t k = 0; k < m->ntrace; k++) {
        m->be->event_destroy(m->be_ctx, m->trace[k].start);
        m->be->event_destroy(m->be_ctx, m->trace[k].end);
    }
    free(m->trace);
    m->trace = NULL;
    m->ntrace = m->trace_cap = 0;
}

/* Queues on `stream` a wait for the compute submitted so far. */
static int after_compute(struct tb_swap_mem *m, enum tb_stream stream, struct tb_err *err)
{
    int rc = m->be->event_record(m->be_ctx, m->compute_ev, TB_STREAM_COMPUTE);
    if (!rc)
        rc = m->be->stream_wait(m->be_ctx, m->device, stream, m->compute_ev);
    if (rc)
        return tb_err_set(err, rc, "ordering a swap copy after the compute stream failed");
    return TB_OK;
}

/* Whether tensor i's copy (out or in) is done; with wait, once it is: the step waits,
 * which is stall too. */
static bool copy_done(struct tb_swap_mem *m, size_t i, bool wait)
{
    if (!wait)
        return m->be->event_query(m->be_ctx, m->ev[i]) == 1;
    double t0 = tb_swap_now(m);
    m->be->event_sync(m->be_ctx, m->ev[i]);
    m->stats.stall_seconds += tb_swap_now(m) - t0;
    return true;
}

/* Settles tensor i if it is moving and its copy is done (with wait, once it is); true
 * when it settled. A move out gives up its device block (it is on the host now); a move
 * in is on both sides, so a policy may move it out again for free. */
static bool settle_one(struct tb_swap_mem *m, size_t i, bool wait)
{
    const uint8_t r = m->res[i];
    if ((r != TB_RES_MOVING_OUT && r != TB_RES_MOVING_IN) || !copy_done(m, i, wait))
        return false;
    if (r == TB_RES_MOVING_OUT && !m->recalled[i]) {
        m->be->mem_free(m->be_ctx, m->device, m->t[i].data);
        m->t[i].data = NULL;
        m->res[i] = TB_RES_HOST;
    } else {
        m->res[i] = TB_RES_BOTH;
    }
    return true;
}

/* Settles every tensor in state `moving`; true when any settled. Brought in ahead of
 * their use, tensors hold memory the policy can only take back once they are settled. */
static bool settle(struct tb_swap_mem *m, uint8_t moving, bool wait)
{
    bool settled = false;
    for (size_t i = 0; i < m->s->ntensors; i++)
        if (m->res[i] == moving)
            settled |= settle_one(m, i, wait);
    return settled;
}

bool tb_swapmem_settle_outs(struct tb_swap_mem *m, bool wait)
{
    return settle(m, TB_RES_MOVING_OUT, wait);
}

bool tb_swapmem_settle_ins(struct tb_swap_mem *m, bool wait)
{
    return settle(m, TB_RES_MOVING_IN, wait);
}

/* Moves resident tensor i (on the device, or on both sides) to the host. */
int tb_swapmem_move_out(struct tb_swap_mem *m, size_t i, bool wait, struct tb_err *err)
{
    if (m->res[i] == TB_RES_BOTH) {
        /* The host copy is current: nothing to copy. */
        m->be->mem_free(m->be_ctx, m->device, m->t[i].data);
        m->t[i].data = NULL;
        m->res[i] = TB_RES_HOST;
        return TB_OK;
    }
    const size_t bytes = tb_swapmem_bytes(m, i);
    if (!m->host[i]) {
        if (m->space_used && *m->space_limit && *m->space_used + bytes > *m->space_limit)
            return tb_err_set(err, TB_ERR_NOMEM,
                              "swapping out %s (%.1f MiB) would take the swap space past %.1f MiB: the run holds "
                              "%.1f MiB of pinned host memory for swapped-out tensors, and %s; lower [train] batch "
                              "or [dataset] crop, or give the device more memory ([backend] device_memory)",
                              m->s->tensors[i].name, (double)bytes / 1048576.0, (double)*m->space_limit / 1048576.0,
                              (double)*m->space_used / 1048576.0, m->space_why);
        if (!(m->host[i] = m->be->host_alloc(m->be_ctx, bytes)))
            return tb_err_set(err, TB_ERR_NOMEM, "out of pinned host memory swapping out %s (%.1f MiB)",
                              m->s->tensors[i].name, (double)bytes / 1048576.0);
        m->stats.host_bytes += bytes;
        if (m->space_used)
            *m->space_used += bytes;
    }
    int rc = need_event(m, i, err);
    if (!rc)
        rc = after_compute(m, TB_STREAM_D2H, err);
    struct tb_event *start = !rc && m->tracing ? tb_swapmem_trace_mark(m, TB_STREAM_D2H) : NULL;
    if (!rc)
        rc = m->be->copy_async(m->be_ctx, m->device, TB_STREAM_D2H, m->host[i], m->t[i].data, bytes, err);
    if (!rc && (rc = m->be->event_record(m->be_ctx, m->ev[i], TB_STREAM_D2H)) != 0)
        tb_err_set(err, rc, "recording a swap-out event failed");
    if (m->tracing)
        tb_swapmem_trace_copy(m, i, TB_TRACK_TO_HOST, start, !rc ? tb_swapmem_trace_mark(m, TB_STREAM_D2H) : NULL);
    if (rc)
        return tb_err_prefix(err, "swapping out %s", m->s->tensors[i].name);
    m->res[i] = TB_RES_MOVING_OUT;
    m->recalled[i] = false;
    m->stats.bytes_out += bytes;
    m->stats.swaps_out++;
    if (wait)
        settle_one(m, i, true);
    return TB_OK;
}

int tb_swap_out(struct tb_swap_mem *m, size_t i, bool wait, struct tb_err *err)
{
    if (!tb_swap_movable(m, i))
        return TB_OK;
    return tb_swapmem_move_out(m, i, wait, err);
}

int tb_swap_out_until(struct tb_swap_mem *m, const size_t *order, size_t n, uint64_t bytes, uint64_t *freed,
                      struct tb_err *err)
{
    const uint64_t cap = tb_swap_capacity(m), use = tb_swap_in_use(m);
    uint64_t gone = 0;
    int rc = TB_OK;
    /* Called when an allocation failed: at least `bytes` (the backend may round sizes
     * up), and more while the accounts say it would not fit. */
    for (size_t k = 0; k < n && !rc && (gone < bytes || (cap && use - gone + bytes > cap)); k++) {
        if (!tb_swap_movable(m, order[k]))
            continue;
        rc = tb_swap_out(m, order[k], false, err);
        if (!rc)
            gone += tb_swap_tensor_bytes(m, order[k]);
    }
    if (freed)
        *freed = gone;
    return rc;
}

int tb_swap_recompute_steps(const struct tb_swap_mem *m, size_t i, size_t step, uint32_t *steps, size_t max)
{
    if (!m->rb.chain || i >= m->s->ntensors || step >= m->s->nsteps)
        return -1;
    return m->rb.chain(m->rb.arg, i, step, steps, max);
}

double tb_swap_now(const struct tb_swap_mem *m)
{
    return m->be->now ? m->be->now(m->be_ctx) : tb_now();
}

double tb_swap_op_seconds(const struct tb_swap_mem *m, size_t step)
{
    return m->op_seconds && step < m->s->nsteps ? m->op_seconds[step] : 0;
}

bool tb_swap_droppable(const struct tb_swap_mem *m, size_t i)
{
    return m->rb.droppable && i < m->s->ntensors && m->s->tensors[i].kind == TB_SCHED_ACTIVATION && m->pins[i] == 0 &&
           (m->res[i] == TB_RES_DEVICE || m->res[i] == TB_RES_BOTH) && m->rb.droppable(m->rb.arg, i, m->now);
}

int tb_swap_drop(struct tb_swap_mem *m, size_t i, struct tb_err *err)
{
    (void)err; /* dropping frees; it cannot fail */
    if (!tb_swap_droppable(m, i))
        return TB_OK;
    m->be->mem_free(m->be_ctx, m->device, m->t[i].data);
    m->t[i].data = NULL;
    m->res[i] = TB_RES_DROPPED;
    m->stats.drops++;
    m->stats.drop_bytes += m->s->tensors[i].bytes;
    return TB_OK;
}

/* Queues the copy of tensor i (on the host only) into the device block data. */
int tb_swapmem_start_in(struct tb_swap_mem *m, size_t i, void *data, struct tb_err *err)
{
    const size_t bytes = tb_swapmem_bytes(m, i);
    m->t[i].data = data;
    int rc = need_event(m, i, err);
    if (!rc)
        rc = after_compute(m, TB_STREAM_H2D, err);
    struct tb_event *start = !rc && m->tracing ? tb_swapmem_trace_mark(m, TB_STREAM_H2D) : NULL;
    if (!rc)
        rc = m->be->copy_async(m->be_ctx, m->device, TB_STREAM_H2D, data, m->host[i], bytes, err);
    if (!rc && (rc = m->be->event_record(m->be_ctx, m->ev[i], TB_STREAM_H2D)) != 0)
        tb_err_set(err, rc, "recording a swap-in event failed");
    if (m->tracing)
        tb_swapmem_trace_copy(m, i, TB_TRACK_TO_DEVICE, start, !rc ? tb_swapmem_trace_mark(m, TB_STREAM_H2D) : NULL);
    if (rc) {
        m->be->mem_free(m->be_ctx, m->device, data);
        m->t[i].data = NULL;
        return tb_err_prefix(err, "swapping in %s", m->s->tensors[i].name);
    }
    m->res[i] = TB_RES_MOVING_IN;
    m->stats.bytes_in += bytes;
    m->stats.swaps_in++;
    return TB_OK;
}

int tb_swap_in(struct tb_swap_mem *m, size_t i, struct tb_err *err)
{
    if (i < m->s->ntensors && m->res[i] == TB_RES_MOVING_OUT) {
        /* Its block is still on the device: keep it there, nothing to copy back. (The
         * host learns late that a copy finished where the device runs ahead of it, as a
         * GPU does; an out not yet seen done is not yet a tensor on the host.) */
        m->recalled[i] = true;
        return TB_OK;
    }
    if (i >= m->s->ntensors || m->res[i] != TB_RES_HOST)
        return TB_OK;
    tb_swapmem_settle_outs(m, false);
    void *data = m->be->mem_alloc(m->be_ctx, m->device, tb_swapmem_bytes(m, i));
    if (!data)
        return tb_err_set(err, TB_ERR_NOMEM, "no device memory to swap in %s now", m->s->tensors[i].name);
    return tb_swapmem_start_in(m, i, data, err);
}

/* ------------------------------------------------------------------ the executor's side */

int tb_swapmem_init(struct tb_swap_mem *m, const struct tb_backend_ops *be, void *be_ctx, int device,
                    const struct tb_schedule *s, struct tb_tensor *t, const uint32_t *pins,
                    const struct tb_swap_policy *policy, const struct tb_swap_rebuild *rb, struct tb_err *err)
{
    memset(m, 0, sizeof *m);
    m->be = be;
    m->be_ctx = be_ctx;
    m->device = device;
    m->s = s;
    m->t = t;
    m->pins = pins;
    m->now = SIZE_MAX;
    if (rb)
        m->rb = *rb;
    if (policy)
        m->policy = *policy;
    const size_t n = s->ntensors ? s->ntensors : 1;
    m->res = calloc(n, sizeof *m->res);
    m->host = calloc(n, sizeof *m->host);
    m->ev = calloc(n, sizeof *m->ev);
    m->used = calloc(n, sizeof *m->used);
    m->recalled = calloc(n, sizeof *m->recalled);
    m->compute_ev = be->event_create(be_ctx, device);
    if (!m->res || !m->host || !m->ev || !m->used || !m->recalled || !m->compute_ev) {
        tb_swapmem_fini(m);
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory for the memory manager");
    }
    for (size_t i = 0; i < s->ntensors; i++)
        m->res[i] = t[i].data ? TB_RES_DEVICE : TB_RES_NONE;
    if (m->policy.ops && m->policy.ops->plan) {
        struct tb_mem_stats st = { 0 };
        be->mem_stats(be_ctx, device, &st);
        int rc = m->policy.ops->plan(m->policy.ctx, m, (const struct tb_schedule *)s, st.capacity, m->policy.link, err);
        if (rc) {
            tb_err_prefix(err, "swap policy '%s' planning", m->policy.name);
            tb_swapmem_fini(m);
            return rc;
        }
    }
    return TB_OK;
}

void tb_swapmem_fini(struct tb_swap_mem *m)
{
    if (!m->be)
        return;
    if (m->res && m->s) {
        for (size_t i = 0; i < m->s->ntensors; i++) {
            if (m->res[i] == TB_RES_MOVING_OUT)
                settle_one(m, i, true);
            else if (m->res[i] == TB_RES_MOVING_IN)
                m->be->event_sync(m->be_ctx, m->ev[i]);
        }
    }
    tb_swapmem_trace_clear(m);
    if (m->policy.ops && m->policy.ops->forget)
        m->policy.ops->forget(m->policy.ctx, m);
    for (size_t i = 0; m->s && i < m->s->ntensors; i++) {
        if (m->host && m->host[i]) {
            m->be->host_free(m->be_ctx, m->host[i]);
            if (m->space_used)
                *m->space_used -= tb_swapmem_bytes(m, i);
        }
        if (m->ev && m->ev[i])
            m->be->event_destroy(m->be_ctx, m->ev[i]);
    }
    if (m->compute_ev)
        m->be->event_destroy(m->be_ctx, m->compute_ev);
    free(m->res);
    free(m->host);
    free(m->ev);
    free(m->used);
    free(m->recalled);
    free(m->blocks);
    memset(m, 0, sizeof *m);
}

void tb_swapmem_drop(struct tb_swap_mem *m, size_t i)
{
    if (m->res[i] == TB_RES_MOVING_OUT || m->res[i] == TB_RES_MOVING_IN) {
        /* Freed while its copy runs: the step waits for the copy, which is stall too. */
        double t0 = tb_swap_now(m);
        m->be->event_sync(m->be_ctx, m->ev[i]);
        m->stats.stall_seconds += tb_swap_now(m) - t0;
    }
    if (m->t[i].data)
        m->be->mem_free(m->be_ctx, m->device, m->t[i].data);
    m->t[i].data = NULL;
    m->res[i] = TB_RES_NONE;
}

void tb_swapmem_produced(struct tb_swap_mem *m, size_t i)
{
    m->res[i] = TB_RES_DEVICE; /* any host copy is stale now */
}

int tb_swapmem_after_step(struct tb_swap_mem *m, size_t step, struct tb_err *err)
{
    m->clock++;
    if (m->policy.ops && m->policy.ops->after_step) {
        int rc = m->policy.ops->after_step(m->policy.ctx, m, step, err);
        if (rc)
            return tb_err_prefix(err, "swap policy '%s'", m->policy.name);
    }
    return TB_OK;
}

/* An allocation of `bytes`: with keep, the block (the caller's); without, only whether
 * one fits now (an op's scratch, which the backend allocates itself: the block is freed
 * again at once, and its place is there when the op asks). */
void *tb_swapmem_try_alloc(struct tb_swap_mem *m, size_t bytes, bool keep)
{
    void *p = m->be->mem_alloc(m->be_ctx, m->device, bytes);
    if (p && !keep) {
        m->be->mem_free(m->be_ctx, m->device, p);
        return m; /* any non-NULL pointer: it fits */
    }
    return p;
}

/* Free device bytes by the backend's accounts: the cap (or, without one, what it has
 * reserved) less what is in use. They need not be one block. */
uint64_t tb_swapmem_free_bytes(const struct tb_swap_mem *m)
{
    struct tb_mem_stats st = { 0 };
    m->be->mem_stats(m->be_ctx, m->device, &st);
    const uint64_t total = st.capacity && st.capacity != UINT64_MAX ? st.capacity : st.reserved;
    return total > st.in_use ? total - st.in_use : 0;
}
