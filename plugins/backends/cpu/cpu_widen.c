/* backends/cpu/cpu_widen.c: an op of a 16-bit float dtype run by a kernel that takes f32
 * only (its tb_cpu_kernel.dtypes lacks the dtype).
 *
 * The kernel is prepared for the op with every 16-bit tensor described as f32 (the wide
 * op). Each pass converts the 16-bit tensors it reads into f32 copies, runs the kernel on
 * them, and rounds what it wrote back into the 16-bit tensors: exactly ops.h's rule for a
 * 16-bit op (the f32 definition on the inputs' exact values, each result rounded once).
 * The copies live at the start of the backend's scratch, and the kernel's own scratch
 * after them (cpu->scratch_prefix): one block, so the two do not fragment device memory
 * between them. When the kernel needs more than the block holds, the pass is made again
 * on a block of the size it asked for (and each later pass asks that much at once). The
 * 16-bit tensors are not touched before the kernel has succeeded.
 *
 * Memory: the state (the wide op, the kernel and its own state) is this file's, freed by
 * widen_release after the kernel's release. */
#include "config.h"

#include <stdlib.h>

#include "cpu_shared.h"

struct widen_state {
    struct tb_op wide;
    const struct tb_cpu_kernel *k;
    void *inner;
    size_t need[2]; /* the scratch a forward (rerun) and a backward took in all, once known */
};

static bool sixteen_bit(enum tb_dtype d)
{
    return d == TB_BF16 || d == TB_F16;
}

bool tb_cpu_widen_needed(const struct tb_cpu_kernel *k, const struct tb_op *op)
{
    for (uint32_t t = 0; t < op->nin + op->nout; t++) {
        const enum tb_dtype d = t < op->nin ? op->in[t].dtype : op->out[t - op->nin].dtype;
        if (sixteen_bit(d) && !(k->dtypes >> d & 1u))
            return true;
    }
    return false;
}

static int widen_prepare(struct tb_cpu *cpu, const struct tb_op *op, void **state, struct tb_err *err)
{
    struct widen_state *s = calloc(1, sizeof *s);
    if (!s)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    s->wide = *op;
    for (uint32_t i = 0; i < op->nin; i++)
        if (sixteen_bit(op->in[i].dtype))
            s->wide.in[i].dtype = TB_F32;
    for (uint32_t j = 0; j < op->nout; j++)
        if (sixteen_bit(op->out[j].dtype))
            s->wide.out[j].dtype = TB_F32;
    s->k = tb_cpu_kernel_of(cpu, op->kind);
    int rc = s->k->prepare ? s->k->prepare(cpu, &s->wide, &s->inner, err) : TB_OK;
    if (rc) {
        free(s);
        return rc;
    }
    *state = s;
    return TB_OK;
}

static void widen_release(void *state)
{
    struct widen_state *s = state;
    if (s && s->k->release)
        s->k->release(s->inner);
    free(s);
}

/* Bytes of an f32 copy of a tensor of description d, rounded to keep copies 64-byte aligned. */
static size_t wide_bytes(const struct tb_tensor_desc *d)
{
    return (tb_shape_elems(d->shape) * sizeof(float) + 63) & ~(size_t)63;
}

/* The f32 stand-ins for n tensors: a 16-bit one whose bit in `want` is set gets a copy at
 * *at in space (converted from it when `load`), one not wanted gets no data; the others
 * are passed as they are. */
static void stand_in(const struct tb_cpu *cpu, struct tb_tensor *wide, const struct tb_tensor *t, uint32_t n,
                     uint32_t want, bool load, char *space, size_t *at)
{
    for (uint32_t i = 0; i < n; i++) {
        wide[i] = t[i];
        if (!sixteen_bit(t[i].desc.dtype))
            continue;
        wide[i].desc.dtype = TB_F32;
        if (!(want >> i & 1u) || !t[i].data) {
            wide[i].data = NULL;
            continue;
        }
        wide[i].data = space + *at;
        *at += wide_bytes(&t[i].desc);
        if (load)
            tb_cpu_convert(cpu, wide[i].data, TB_F32, t[i].data, t[i].desc.dtype, tb_shape_elems(t[i].desc.shape));
    }
}

/* The bytes stand_in takes for the same arguments. */
static size_t stand_in_bytes(const struct tb_tensor *t, uint32_t n, uint32_t want)
{
    size_t bytes = 0;
    for (uint32_t i = 0; i < n; i++)
        if (sixteen_bit(t[i].desc.dtype) && (want >> i & 1u) && t[i].data)
            bytes += wide_bytes(&t[i].desc);
    return bytes;
}

/* The kernel's results in wide[] rounded into the 16-bit tensors of t[]. */
static void store_back(const struct tb_cpu *cpu, const struct tb_tensor *t, const struct tb_tensor *wide, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (sixteen_bit(t[i].desc.dtype) && wide[i].data)
            tb_cpu_convert(cpu, t[i].data, t[i].desc.dtype, wide[i].data, TB_F32, tb_shape_elems(t[i].desc.shape));
}

/* One pass: the f32 copies made at the scratch's start (`bytes` of them), then `run` with
 * the kernel's scratch past them; made again on a larger block when that was short. */
struct pass {
    const struct tb_tensor *in, *out, *dout, *din; /* the op's (dout, din: backward only) */
    uint32_t rin, rout;                            /* backward: what it reads */
    struct tb_tensor win[TB_OP_MAX_IN], wout[TB_OP_MAX_OUT], wdout[TB_OP_MAX_OUT], wdin[TB_OP_MAX_IN];
};

static size_t pass_bytes(const struct widen_state *s, const struct pass *p, bool backward)
{
    const struct tb_op *w = &s->wide;
    if (!backward)
        return stand_in_bytes(p->in, w->nin, UINT32_MAX) + stand_in_bytes(p->out, w->nout, UINT32_MAX);
    return stand_in_bytes(p->in, w->nin, p->rin) + stand_in_bytes(p->out, w->nout, p->rout) +
           stand_in_bytes(p->dout, w->nout, UINT32_MAX) + stand_in_bytes(p->din, w->nin, UINT32_MAX);
}

/* The copies for a pass at the start of space (a rerun loads its outputs too: it reads
 * what forward wrote into those it does not rebuild, batch norm's statistics, f32 always). */
static void make_copies(struct tb_cpu *cpu, const struct widen_state *s, struct pass *p, bool backward,
                        bool recompute, char *space)
{
    const struct tb_op *w = &s->wide;
    size_t at = 0;
    if (!backward) {
        stand_in(cpu, p->win, p->in, w->nin, UINT32_MAX, true, space, &at);
        stand_in(cpu, p->wout, p->out, w->nout, UINT32_MAX, recompute, space, &at);
        return;
    }
    stand_in(cpu, p->win, p->in, w->nin, p->rin, true, space, &at);
    stand_in(cpu, p->wout, p->out, w->nout, p->rout, true, space, &at);
    stand_in(cpu, p->wdout, p->dout, w->nout, UINT32_MAX, true, space, &at);
    stand_in(cpu, p->wdin, p->din, w->nin, UINT32_MAX, false, space, &at);
}

static int run_pass(struct tb_cpu *cpu, struct widen_state *s, struct pass *p, bool backward, bool recompute,
                    uint64_t step, struct tb_err *err)
{
    const struct tb_op *w = &s->wide;
    const size_t bytes = pass_bytes(s, p, backward);
    int rc = TB_OK;
    /* each attempt that comes up short asks for more than the last: a few suffice */
    for (int attempt = 0; attempt < 4; attempt++) {
        const size_t ask = s->need[backward] > bytes ? s->need[backward] : bytes;
        char *space = tb_cpu_scratch(cpu, ask, err);
        if (!space)
            return err->status;
        make_copies(cpu, s, p, backward, recompute, space);
        cpu->scratch_prefix = bytes;
        cpu->scratch_short = false;
        if (!backward) {
            const tb_cpu_forward_fn run = recompute && s->k->recompute ? s->k->recompute : s->k->forward;
            rc = run(cpu, w, s->inner, step, p->win, p->wout, err);
        } else {
            rc = s->k->backward(cpu, w, s->inner, p->win, p->wout, p->wdout, p->wdin, err);
        }
        cpu->scratch_prefix = 0;
        if (cpu->scratch_asked > s->need[backward])
            s->need[backward] = cpu->scratch_asked;
        if (!(rc && cpu->scratch_short) || attempt == 3)
            break;
        tb_err_clear(err); /* short of what it now knows it needs: again, on a block of that */
    }
    if (rc)
        return rc;
    if (!backward)
        store_back(cpu, p->out, p->wout, w->nout);
    else
        store_back(cpu, p->din, p->wdin, w->nin);
    return TB_OK;
}

static int widen_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                         const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)op;
    struct pass p = { .in = in, .out = out };
    return run_pass(cpu, state, &p, false, false, step, err);
}

static int widen_recompute(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                           const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    (void)op;
    struct pass p = { .in = in, .out = out };
    return run_pass(cpu, state, &p, false, true, step, err);
}

static int widen_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                          const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                          struct tb_err *err)
{
    (void)op;
    struct widen_state *s = state;
    if (!s->k->backward)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u: the cpu backend has no backward for %s", s->wide.id,
                          tb_op_kind_name(s->wide.kind));
    struct pass p = { .in = in, .out = out, .dout = dout, .din = din };
    tb_op_backward_reads(&s->wide, &p.rin, &p.rout);
    return run_pass(cpu, s, &p, true, false, 0, err);
}

const struct tb_cpu_kernel tb_cpu_widen_kernel = { widen_prepare, widen_release, widen_forward, widen_backward,
                                                   widen_recompute, 0 };

void *tb_cpu_widened_inner(const void *state)
{
    const struct widen_state *s = state;
    return s ? s->inner : NULL;
}

const struct tb_cpu_kernel *tb_cpu_widened_kernel(const void *state)
{
    const struct widen_state *s = state;
    return s ? s->k : NULL;
}
