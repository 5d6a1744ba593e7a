/* backends/cpu/cpu_dnnl.c: the oneDNN engine and stream the kernels share. */
#include <oneapi/dnnl/dnnl.h>

#include "cpu_shared.h"

int tb_cpu_dnnl_init(struct tb_cpu *cpu, struct tb_err *err)
{
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_status_t st = dnnl_engine_create(&engine, dnnl_cpu, 0);
    if (st != dnnl_success)
        return tb_err_set(err, TB_ERR_RUNTIME, "cpu backend: oneDNN cannot create a CPU engine (status %d)", (int)st);
    st = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
    if (st != dnnl_success) {
        dnnl_engine_destroy(engine);
        return tb_err_set(err, TB_ERR_RUNTIME, "cpu backend: oneDNN cannot create a stream (status %d)", (int)st);
    }
    cpu->dnnl_engine = engine;
    cpu->dnnl_stream = stream;
    return TB_OK;
}

void tb_cpu_dnnl_fini(struct tb_cpu *cpu)
{
    if (cpu->dnnl_stream)
        dnnl_stream_destroy(cpu->dnnl_stream);
    if (cpu->dnnl_engine)
        dnnl_engine_destroy(cpu->dnnl_engine);
    cpu->dnnl_stream = cpu->dnnl_engine = NULL;
}
