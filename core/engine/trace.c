/* core/engine/trace.c: a Chrome trace (Perfetto) of one step: the ops on the compute track,
 * the swap copies on the two copy tracks, placed by the backend's events (event_time) so
 * that on a GPU both follow the device's clock, not the host's, which runs ahead of it.
 * Forward ops run again to rebuild dropped tensors (recompute.c) are on the compute track
 * too, in the category "recompute"; the memory manager's moves inside the device (compaction,
 * swapmem_blocks.c), copies on the compute stream, in the category "relocate". A step whose
 * op events cannot be recorded falls back to the host's times. */
#include "config.h"

#include "core/engine/exec_internal.h"
#include "core/util/atomic_file.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tb_exec_trace_mark(struct tb_exec *x, size_t k, bool end)
{
    if (x->mem.tracing && x->op_ev && x->op_ev[2 * k + end])
        x->e->ops->event_record(x->e->ctx, x->op_ev[2 * k + end], TB_STREAM_COMPUTE);
}

struct tb_event *tb_exec_trace_event(struct tb_exec *x)
{
    if (!x->mem.tracing || !x->e->event_time)
        return NULL;
    struct tb_event *ev = x->e->ops->event_create(x->e->ctx, x->e->device);
    if (ev && x->e->ops->event_record(x->e->ctx, ev, TB_STREAM_COMPUTE) != TB_OK) {
        x->e->ops->event_destroy(x->e->ctx, ev);
        ev = NULL;
    }
    return ev;
}

static void drop_event(struct tb_exec *x, struct tb_event *ev)
{
    if (ev)
        x->e->ops->event_destroy(x->e->ctx, ev);
}

void tb_exec_trace_rerun(struct tb_exec *x, size_t k, uint64_t bytes, double t0, double t1, struct tb_event *start,
                         struct tb_event *end)
{
    if (x->mem.tracing && x->nreruns == x->reruns_cap) {
        const size_t cap = x->reruns_cap ? 2 * x->reruns_cap : 32;
        struct tb_trace_rerun *more = realloc(x->reruns, cap * sizeof *more);
        if (more) {
            x->reruns = more;
            x->reruns_cap = cap;
        }
    }
    if (!x->mem.tracing || x->nreruns == x->reruns_cap) { /* not traced, or left out of the trace */
        drop_event(x, start);
        drop_event(x, end);
        return;
    }
    x->reruns[x->nreruns++] = (struct tb_trace_rerun){ (uint32_t)k, bytes, t0, t1, start, end };
}

static void clear_reruns(struct tb_exec *x)
{
    for (size_t i = 0; i < x->nreruns; i++) {
        drop_event(x, x->reruns[i].start);
        drop_event(x, x->reruns[i].end);
    }
    x->nreruns = 0;
}

void tb_exec_trace_free(struct tb_exec *x)
{
    clear_reruns(x);
    free(x->reruns);
    x->reruns = NULL;
    x->reruns_cap = 0;
    for (size_t i = 0; i < x->nop_ev; i++)
        if (x->op_ev[i])
            x->e->ops->event_destroy(x->e->ctx, x->op_ev[i]);
    free(x->op_ev);
    x->op_ev = NULL;
    x->nop_ev = 0;
}

void tb_exec_trace_begin(struct tb_exec *x)
{
    tb_swapmem_trace_clear(&x->mem);
    clear_reruns(x);
    x->mem.tracing = true;
    if (!x->op_ev && x->e->event_time && (x->op_ev = calloc(2 * x->s->nsteps + 1, sizeof *x->op_ev))) {
        x->nop_ev = 2 * x->s->nsteps;
        for (size_t i = 0; i < x->nop_ev; i++)
            x->op_ev[i] = x->e->ops->event_create(x->e->ctx, x->e->device);
    }
}

/* When step k's op began and how long it ran: by its events where both were recorded and
 * have completed, else by the host's clock. */
static void op_span(struct tb_exec *x, size_t k, double *start, double *dur)
{
    *start = x->starts[k];
    *dur = x->seconds[k];
    if (!x->op_ev || !x->op_ev[2 * k] || !x->op_ev[2 * k + 1])
        return;
    const double a = x->e->event_time(x->e->ctx, x->op_ev[2 * k]);
    const double b = x->e->event_time(x->e->ctx, x->op_ev[2 * k + 1]);
    if (a > 0 && b >= a) {
        *start = a;
        *dur = b - a;
    }
}

/* A JSON string: the name with quotes and backslashes replaced. */
static void json_name(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++)
        fputc(*s == '"' || *s == '\\' ? '_' : *s, f);
    fputc('"', f);
}

int tb_exec_trace_spans(struct tb_exec *x, struct tb_trace_span **spans, size_t *n, struct tb_err *err)
{
    struct tb_swap_mem *m = &x->mem;
    m->tracing = false;
    *spans = NULL;
    *n = 0;
    if (!x->e->event_time) {
        tb_swapmem_trace_clear(m);
        clear_reruns(x);
        return tb_err_set(err, TB_ERR_RUNTIME, "this backend cannot time its copies (it has no event_time)");
    }
    x->e->ops->stream_sync(x->e->ctx, x->e->device, TB_STREAM_COMPUTE);
    x->e->ops->stream_sync(x->e->ctx, x->e->device, TB_STREAM_H2D);
    x->e->ops->stream_sync(x->e->ctx, x->e->device, TB_STREAM_D2H);
    struct tb_trace_span *sp = malloc((x->s->nsteps + m->ntrace + x->nreruns + 1) * sizeof *sp);
    if (!sp) {
        tb_swapmem_trace_clear(m);
        clear_reruns(x);
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory for the trace");
    }
    double t0 = 0;
    for (size_t k = 0; k < x->s->nsteps; k++) {
        sp[k] = (struct tb_trace_span){ .track = 0,
                                        .name = x->s->steps[k].name,
                                        .op = &x->g->ops[x->s->steps[k].op].op,
                                        .backward = x->s->steps[k].backward };
        if (x->e->op_scratch_bytes)
            sp[k].scratch = x->e->op_scratch_bytes(x->e->ctx, x->state[x->s->steps[k].op], sp[k].backward);
        op_span(x, k, &sp[k].start, &sp[k].dur);
        if (sp[k].start > 0 && (t0 == 0 || sp[k].start < t0))
            t0 = sp[k].start;
    }
    for (size_t k = 0; k < x->s->nsteps; k++)
        sp[k].start -= t0;
    for (size_t c = 0; c < m->ntrace; c++) {
        const struct tb_trace_copy *tc = &m->trace[c];
        const double a = x->e->event_time(x->e->ctx, tc->start), b = x->e->event_time(x->e->ctx, tc->end);
        sp[x->s->nsteps + c] = (struct tb_trace_span){
            .track = tc->track,
            .start = a - t0,
            .dur = b - a,
            .bytes = x->s->tensors[tc->tensor].bytes,
            .name = x->s->tensors[tc->tensor].name,
            .relocate = tc->track == TB_TRACK_COMPUTE,
        };
    }
    size_t n_all = x->s->nsteps + m->ntrace;
    for (size_t r = 0; r < x->nreruns; r++) {
        const struct tb_trace_rerun *rr = &x->reruns[r];
        double a = rr->t0, b = rr->t1;
        if (rr->start && rr->end) {
            const double ea = x->e->event_time(x->e->ctx, rr->start), eb = x->e->event_time(x->e->ctx, rr->end);
            if (ea > 0 && eb >= ea) {
                a = ea;
                b = eb;
            }
        }
        sp[n_all++] = (struct tb_trace_span){
            .track = 0,
            .start = a - t0,
            .dur = b - a,
            .bytes = rr->bytes,
            .name = x->s->steps[rr->step].name,
            .recompute = true,
        };
    }
    *n = n_all;
    *spans = sp;
    tb_swapmem_trace_clear(m);
    clear_reruns(x);
    return TB_OK;
}

int tb_exec_trace_write(struct tb_exec *x, const char *path, struct tb_err *err)
{
    struct tb_trace_span *sp;
    size_t n;
    int rc = tb_exec_trace_spans(x, &sp, &n, err);
    if (rc)
        return tb_err_prefix(err, "%s", path);
    struct tb_atomic_file out;
    rc = tb_atomic_open(&out, path, err);
    if (rc) {
        free(sp);
        return rc;
    }
    FILE *f = out.f;
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
    static const char *const tracks[] = { "compute", "copy host to device", "copy device to host" };
    for (int i = 0; i < 3; i++)
        fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"%s\"}},\n", i + 1,
                tracks[i]);
    for (size_t i = 0; i < n; i++) {
        fputs("{\"name\":", f);
        json_name(f, sp[i].name);
        if (sp[i].track == 0 && (sp[i].recompute || sp[i].relocate)) {
            const char *cat = sp[i].recompute ? "recompute" : "relocate";
            fprintf(f,
                    ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":%.3f,\"dur\":%.3f,"
                    "\"args\":{\"%s\":true,\"bytes\":%" PRIu64 "}},\n",
                    cat, sp[i].start * 1e6, sp[i].dur * 1e6, cat, sp[i].bytes);
        } else if (sp[i].track == 0) {
            /* the op's signature: what a modelled device matches measured times by */
            char sig[512] = "";
            if (sp[i].op)
                tb_op_signature(sp[i].op, sp[i].backward, sig, sizeof sig);
            fprintf(f, ",\"cat\":\"op\",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"op\":",
                    sp[i].start * 1e6, sp[i].dur * 1e6);
            json_name(f, sig);
            if (sp[i].scratch) /* what a modelled device calibrated from this trace takes too */
                fprintf(f, ",\"scratch\":%" PRIu64, sp[i].scratch);
            fputs("}},\n", f);
        }
        else
            fprintf(f,
                    ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"bytes\":"
                    "%" PRIu64 "}},\n",
                    sp[i].track == 1 ? "swap in" : "swap out", sp[i].track + 1, sp[i].start * 1e6, sp[i].dur * 1e6,
                    sp[i].bytes);
    }
    fputs("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"trainbig\"}}]}\n", f);
    free(sp);
    return tb_atomic_close(&out, TB_OK, err);
}
