/* backends/cpu/cpu_isa.c: which instruction set the backend runs, and so which layout its
 * tensors take.
 *
 * Two things follow the CPU at run time, never the build machine:
 * - our own kernels (cpu_kernels.c, built once per ISA, cpu_ops.c picks the table) run
 *   the best path this CPU has, or the one [backend] isa (or TRAINBIG_CPU_ISA, for test
 *   runs of every path) asks for;
 * - oneDNN dispatches its own JIT kernels from cpuid. A forced path caps it too
 *   (dnnl_set_max_cpu_isa), unless DNNL_MAX_CPU_ISA already does: that variable is
 *   oneDNN's own switch and wins. The cap is process-wide and can be set only once,
 *   before oneDNN's first use, so a second backend in one process gets what the first set.
 *
 * The channel block of blocked tensors is the one oneDNN's convolutions choose on the ISA
 * it really runs (16 floats, one zmm register, from AVX-512; 8, one ymm, below). */
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_shared.h"

static const char *const isa_names[TB_CPU_ISAS] = { "scalar", "avx2", "avx512" };

const char *tb_cpu_isa_name(enum tb_cpu_isa isa)
{
    return (unsigned)isa < TB_CPU_ISAS ? isa_names[isa] : "?";
}

static enum tb_cpu_isa best_isa(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return TB_CPU_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return TB_CPU_ISA_AVX2;
#endif
    return TB_CPU_ISA_SCALAR;
}

static const char *dnnl_isa_name(dnnl_cpu_isa_t isa)
{
    switch (isa) {
    case dnnl_cpu_isa_sse41:
        return "sse41";
    case dnnl_cpu_isa_avx:
        return "avx";
    case dnnl_cpu_isa_avx2:
        return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
        return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core:
        return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
        return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
        return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
        return "avx512_core_amx";
    default:
        return "other";
    }
}

int tb_cpu_isa_init(struct tb_cpu *cpu, const char *want, struct tb_err *err)
{
    cpu->best = best_isa();
    const char *from = "[backend] isa";
    const char *env = getenv("TRAINBIG_CPU_ISA");
    if ((!want || strcmp(want, "auto") == 0) && env && *env) {
        want = env;
        from = "TRAINBIG_CPU_ISA";
    }
    enum tb_cpu_isa isa = cpu->best;
    bool forced = false;
    if (want && strcmp(want, "auto") != 0) {
        int found = -1;
        for (int i = 0; i < TB_CPU_ISAS; i++)
            if (strcmp(want, isa_names[i]) == 0)
                found = i;
        if (found < 0)
            return tb_err_set(err, TB_ERR_CONFIG, "%s = '%s': allowed are auto, avx512, avx2 and scalar", from, want);
        if ((enum tb_cpu_isa)found > cpu->best)
            return tb_err_set(err, TB_ERR_CONFIG, "%s = %s: this CPU has no %s (the best it runs is %s)", from, want,
                              want, isa_names[cpu->best]);
        isa = (enum tb_cpu_isa)found;
        forced = true;
    }
    cpu->isa = isa;
    /* oneDNN follows a forced path unless its own variable already says otherwise. */
    const char *dnnl_env = getenv("DNNL_MAX_CPU_ISA");
    if (forced && !(dnnl_env && *dnnl_env)) {
        const dnnl_cpu_isa_t cap = isa == TB_CPU_ISA_AVX512 ? dnnl_cpu_isa_all
                                   : isa == TB_CPU_ISA_AVX2 ? dnnl_cpu_isa_avx2
                                                            : dnnl_cpu_isa_sse41;
        if (dnnl_set_max_cpu_isa(cap) != dnnl_success)
            tb_plog(TB_LOG_DEBUG, "cpu backend: oneDNN's ISA was already fixed in this process; it stays %s",
                    dnnl_isa_name(dnnl_get_effective_cpu_isa()));
    }
    const dnnl_cpu_isa_t eff = dnnl_get_effective_cpu_isa();
    snprintf(cpu->dnnl_isa, sizeof cpu->dnnl_isa, "%s", dnnl_isa_name(eff));
    cpu->blk = (eff & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core ? 16 : 8;
    return TB_OK;
}
