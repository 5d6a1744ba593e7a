/* backends/cpu/cpu_ops.c: each op kind's kernel, per ISA, through the shared dispatcher
 * (../op_dispatch.h). */
#include "config.h" /* HAVE_X86_ISAS */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_shared.h"
#include "../op_dispatch.h"

/* One table of kernels per ISA; without the x86 builds every ISA takes the portable one. */
#define ROW(isa)                                                                                                     \
    {                                                                                                                \
        [TB_OP_CONV2D] = &tb_cpu_conv2d_kernel, [TB_OP_BATCHNORM] = &TB_CPU_KERNEL_OF(batchnorm, isa),               \
        [TB_OP_RELU] = &TB_CPU_KERNEL_OF(relu, isa), [TB_OP_SIGMOID] = &TB_CPU_KERNEL_OF(sigmoid, isa),              \
        [TB_OP_MAXPOOL] = &TB_CPU_KERNEL_OF(maxpool, isa), [TB_OP_GLOBAL_AVGPOOL] = &TB_CPU_KERNEL_OF(avgpool, isa), \
        [TB_OP_RESIZE] = &TB_CPU_KERNEL_OF(resize, isa), [TB_OP_CONCAT] = &TB_CPU_KERNEL_OF(concat, isa),            \
        [TB_OP_ADD] = &TB_CPU_KERNEL_OF(add, isa), [TB_OP_MUL] = &TB_CPU_KERNEL_OF(mul, isa),                        \
        [TB_OP_DROPOUT] = &TB_CPU_KERNEL_OF(dropout, isa), [TB_OP_SOFTMAX_CE] = &TB_CPU_KERNEL_OF(softmax_ce, isa),  \
        [TB_OP_BCE_LOGITS] = &TB_CPU_KERNEL_OF(bce_logits, isa),                                                     \
        [TB_OP_CLASS_WEIGHTS] = &TB_CPU_KERNEL_OF(class_weights, isa),                                               \
        [TB_OP_MASK_LABELS] = &TB_CPU_KERNEL_OF(mask_labels, isa),                                                   \
        [TB_OP_DUAL_TASK] = &TB_CPU_KERNEL_OF(dual_task, isa), [TB_OP_CAST] = &TB_CPU_KERNEL_OF(cast, isa),                   \
    }

static const struct tb_cpu_kernel *const kernels[TB_CPU_ISAS][TB_OP_KIND_COUNT] = {
    [TB_CPU_ISA_SCALAR] = ROW(scalar),
#ifdef HAVE_X86_ISAS
    [TB_CPU_ISA_AVX2] = ROW(avx2),
    [TB_CPU_ISA_AVX512] = ROW(avx512),
#else
    [TB_CPU_ISA_AVX2] = ROW(scalar),
    [TB_CPU_ISA_AVX512] = ROW(scalar),
#endif
};

void tb_cpu_convert(const struct tb_cpu *cpu, void *dst, enum tb_dtype to, const void *src, enum tb_dtype from,
                    size_t n)
{
#ifdef HAVE_X86_ISAS
    if (cpu->isa == TB_CPU_ISA_AVX512)
        return TB_CPU_ISA_FN_OF(convert, avx512)(dst, to, src, from, n);
    if (cpu->isa == TB_CPU_ISA_AVX2)
        return TB_CPU_ISA_FN_OF(convert, avx2)(dst, to, src, from, n);
#else
    (void)cpu;
#endif
    TB_CPU_ISA_FN_OF(convert, scalar)(dst, to, src, from, n);
}

const struct tb_cpu_kernel *tb_cpu_kernel_of(const struct tb_cpu *cpu, enum tb_op_kind kind)
{
    return (unsigned)kind < TB_OP_KIND_COUNT && (unsigned)cpu->isa < TB_CPU_ISAS ? kernels[cpu->isa][kind] : NULL;
}

/* The kernel's own prepare and release, as the shared dispatcher calls them. */
static int kernel_prepare(void *backend, const void *kernel, const struct tb_op *op, void **inner,
                          struct tb_err *err)
{
    const struct tb_cpu_kernel *k = kernel;
    return k->prepare ? k->prepare(backend, op, inner, err) : TB_OK;
}

static void kernel_release(const void *kernel, void *inner)
{
    const struct tb_cpu_kernel *k = kernel;
    if (k->release)
        k->release(inner);
}

static const struct tb_op_dispatch dispatch = { "cpu", kernel_prepare, kernel_release };

/* Around a pass: what it asks of tb_cpu_scratch, kept as its direction's most. */
static void pass_begin(struct tb_cpu *cpu)
{
    cpu->scratch_asked = 0;
}

static int pass_end(struct tb_cpu *cpu, struct tb_op_state *s, bool backward, int rc)
{
    tb_op_dispatch_scratch(s, backward, cpu->scratch_asked);
    return rc;
}

uint64_t tb_cpu_op_scratch_bytes(const void *state, bool backward)
{
    return tb_op_dispatch_scratch_bytes(state, backward);
}

int tb_cpu_op_prepare(struct tb_cpu *cpu, const struct tb_op *op, void **state, struct tb_err *err)
{
    const struct tb_cpu_kernel *k = tb_cpu_kernel_of(cpu, op->kind);
    if (k && k->forward && !tb_cpu_widen_needed(k, op)) {
        const int rc = tb_op_dispatch_prepare(&dispatch, cpu, k, op, state, err);
        if (rc != TB_CPU_WIDEN)
            return rc;
    }
    if (k && k->forward) {
        if (op->kind == TB_OP_CONV2D && !cpu->widened_conv_logged) {
            cpu->widened_conv_logged = true;
            tb_plog(TB_LOG_WARN,
                    "%s convolutions: oneDNN has no %s kernel on this path (%s): they run on float copies, slower than "
                    "at fp32",
                    tb_dtype_name(op->in[0].dtype), tb_dtype_name(op->in[0].dtype), cpu->dnnl_isa);
        }
        k = &tb_cpu_widen_kernel; /* it prepares k for the op at f32 */
    }
    return tb_op_dispatch_prepare(&dispatch, cpu, k && k->forward ? k : NULL, op, state, err);
}

void tb_cpu_op_release(void *state)
{
    tb_op_dispatch_release(&dispatch, state);
}

void tb_cpu_op_describe(const struct tb_cpu *cpu, const void *state, char *buf, size_t size)
{
    const struct tb_op_state *s = state;
    if (!size)
        return;
    buf[0] = '\0';
    const bool widened = s && s->kernel == &tb_cpu_widen_kernel;
    const void *kernel = widened ? tb_cpu_widened_kernel(s->inner) : s ? s->kernel : NULL;
    const void *inner = widened ? tb_cpu_widened_inner(s->inner) : s ? s->inner : NULL;
    size_t len = 0;
    if (kernel == &tb_cpu_conv2d_kernel)
        tb_cpu_conv_describe(cpu, inner, buf, size);
    else
        snprintf(buf, size, "%s", tb_cpu_isa_name(cpu->isa));
    len = strlen(buf);
    if (widened && len + 1 < size)
        snprintf(buf + len, size - len, ", on f32 copies of its 16-bit tensors");
}

int tb_cpu_op_forward(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                      const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    struct tb_op_state *s = state;
    const struct tb_cpu_kernel *k = s->kernel;
    pass_begin(cpu);
    return pass_end(cpu, s, false, k->forward(cpu, op, s->inner, step, in, out, err));
}

int tb_cpu_op_recompute(struct tb_cpu *cpu, const struct tb_op *op, void *state, uint64_t step,
                        const struct tb_tensor *in, const struct tb_tensor *out, struct tb_err *err)
{
    struct tb_op_state *s = state;
    const struct tb_cpu_kernel *k = s->kernel;
    pass_begin(cpu);
    return pass_end(cpu, s, false, (k->recompute ? k->recompute : k->forward)(cpu, op, s->inner, step, in, out, err));
}

int tb_cpu_op_backward(struct tb_cpu *cpu, const struct tb_op *op, void *state, const struct tb_tensor *in,
                       const struct tb_tensor *out, const struct tb_tensor *dout, const struct tb_tensor *din,
                       struct tb_err *err)
{
    struct tb_op_state *s = state;
    const struct tb_cpu_kernel *k = s->kernel;
    if (!k->backward)
        return tb_err_set(err, TB_ERR_RUNTIME, "op %u: the cpu backend has no backward for %s", op->id,
                          tb_op_kind_name(op->kind));
    pass_begin(cpu);
    return pass_end(cpu, s, true, k->backward(cpu, op, s->inner, in, out, dout, din, err));
}
