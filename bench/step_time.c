/* bench/step_time.c: bench/step's timed training steps and what it prints of them: the
 * median step, one step by op kind with each op's device time, the layout reorders, the
 * PyTorch twin's time and the ratio (step_internal.h). */
#include "config.h"

#include <math.h>
#include <stdint.h>

#include "step_internal.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* 2 warm-up steps, then `steps` timed training steps (forward, backward, SGD); the median
 * ms in *median, the losses named in loss[] as of the last step in value[], and in
 * *nonfinite the first step (1-based, warm-up included) with a loss that is not finite, or
 * 0. */
int bench_time_steps(struct tb_engine *e, struct tb_exec *x, bool sync, int steps, int nloss, const char *const *loss,
                     float *value, double *median, int *nonfinite, struct tb_err *err)
{
    *nonfinite = 0;
    double *ms = calloc((size_t)steps, sizeof *ms);
    if (!ms)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    int rc = TB_OK;
    for (int i = -2; i < steps && !rc; i++) {
        /* A device runs the step's work after the calls have returned: the step ends
         * when the compute stream is idle. */
        if (sync)
            e->ops->stream_sync(e->ctx, e->device, TB_STREAM_COMPUTE);
        double t0 = bench_now();
        rc = tb_exec_forward(x, (uint64_t)(i + 2), err);
        if (!rc)
            rc = tb_exec_backward(x, err);
        if (!rc)
            rc = tb_sgd_step(e, SGD_LR, SGD_MOMENTUM, SGD_WEIGHT_DECAY, err);
        if (!rc && sync)
            rc = e->ops->stream_sync(e->ctx, e->device, TB_STREAM_COMPUTE);
        double dt = bench_now() - t0;
        for (int k = 0; k < nloss && !rc; k++) {
            rc = tb_exec_read(x, loss[k], &value[k], err);
            if (!rc && !isfinite(value[k]) && !*nonfinite)
                *nonfinite = i + 3;
        }
        if (i >= 0)
            ms[i] = dt * 1e3;
    }
    if (!rc) {
        qsort(ms, (size_t)steps, sizeof *ms, cmp_double);
        *median = ms[steps / 2];
    }
    free(ms);
    return rc;
}

/* The backend's reorder counters now (zero without them). */
struct tb_reorder_stats bench_reorders_now(const struct tb_engine *e)
{
    struct tb_reorder_stats r;
    memset(&r, 0, sizeof r);
    if (e->reorder_stats)
        e->reorder_stats(e->ctx, e->device, &r);
    return r;
}

/* One more training step, traced: each op's time on the device, from events recorded
 * around it (the host's clock runs ahead of a GPU's work), into sec[nsteps]; and with
 * --trace, that step's Chrome trace, whose op events carry their signatures ([backend]
 * sim_profile reads it). Nonzero when it failed (err says why). */
static int device_seconds(struct tb_engine *e, struct tb_exec *x, const struct opts *o, double *sec, struct tb_err *err)
{
    for (int pass = 0; pass < (o->trace ? 2 : 1); pass++) {
        tb_exec_trace_begin(x);
        int rc = tb_exec_forward(x, 1000 + (uint64_t)pass, err);
        if (!rc)
            rc = tb_exec_backward(x, err);
        if (!rc)
            rc = tb_sgd_step(e, SGD_LR, SGD_MOMENTUM, SGD_WEIGHT_DECAY, err);
        if (!rc)
            rc = e->ops->stream_sync(e->ctx, e->device, TB_STREAM_COMPUTE);
        if (!rc && pass == 1) {
            if (!(rc = tb_exec_trace_write(x, o->trace, err)))
                printf("trainbig: a Chrome trace of one step written to %s (each op's device time and signature: "
                       "[backend] sim_profile = %s calibrates the sim backend with it)\n",
                       o->trace, o->trace);
            continue;
        }
        struct tb_trace_span *sp = NULL;
        size_t n = 0;
        if (!rc)
            rc = tb_exec_trace_spans(x, &sp, &n, err);
        const size_t nsteps = tb_schedule_steps(tb_exec_schedule(x));
        for (size_t k = 0; !rc && k < nsteps && k < n; k++)
            sec[k] = sp[k].dur; /* the first nsteps spans are the steps' ops, in order */
        free(sp);
        if (rc)
            return rc;
    }
    return TB_OK;
}

/* Where the last step's time went, by op kind (each op's device time, device_seconds);
 * the layout conversions per step since `before` over `runs` steps; and how the backend
 * runs the convolutions (each distinct description once, with its count). */
void bench_breakdown(struct tb_engine *e, struct tb_exec *x, const struct tb_reorder_stats *before, int runs,
                     const struct opts *o)
{
    const struct tb_schedule *sch = tb_exec_schedule(x);
    const size_t nsched = tb_schedule_steps(sch);
    double *sec = calloc(nsched ? nsched : 1, sizeof *sec);
    struct tb_err err;
    tb_err_clear(&err);
    if (!sec || device_seconds(e, x, o, sec, &err)) {
        printf("trainbig: no op breakdown: %s\n", sec ? err.msg : "out of memory");
        free(sec);
        return;
    }
    double by_kind[TB_OP_KIND_COUNT] = { 0 }, total = 0;
    enum { MAX_HOW = 16 };
    char how[MAX_HOW][320];
    int count[MAX_HOW] = { 0 }, nhow = 0;
    for (size_t i = 0; i < tb_schedule_steps(sch); i++) {
        bool backward;
        char line[320];
        const struct tb_op *op = tb_exec_step_op(x, i, &backward, line, sizeof line);
        by_kind[op->kind] += sec[i];
        total += sec[i];
        if (op->kind != TB_OP_CONV2D || backward || !line[0])
            continue;
        int k = 0;
        while (k < nhow && strcmp(how[k], line) != 0)
            k++;
        if (k == nhow && nhow < MAX_HOW)
            snprintf(how[nhow++], sizeof how[0], "%s", line);
        if (k < nhow)
            count[k]++;
    }
    printf("trainbig: one step by op kind, each op's device time (ms, forward + backward):");
    for (int kind = 1; kind < TB_OP_KIND_COUNT; kind++)
        if (by_kind[kind] > 0)
            printf(" %s %.1f (%.0f%%)", tb_op_kind_name((enum tb_op_kind)kind), by_kind[kind] * 1e3,
                   100.0 * by_kind[kind] / total);
    printf("\n");
    /* The five slowest steps, by name. */
    printf("trainbig: the slowest ops of that step (ms):");
    const size_t nsteps = tb_schedule_steps(sch);
    bool *shown = calloc(nsteps ? nsteps : 1, sizeof *shown);
    for (int k = 0; k < 5 && shown; k++) {
        size_t best = nsteps;
        for (size_t i = 0; i < nsteps; i++)
            if (!shown[i] && (best == nsteps || sec[i] > sec[best]))
                best = i;
        if (best == nsteps)
            break;
        shown[best] = true;
        printf("%s %s %.1f", k ? "," : "", tb_schedule_step_name(sch, best), sec[best] * 1e3);
    }
    free(shown);
    printf("\n");
    const struct tb_reorder_stats now = bench_reorders_now(e);
    if (e->reorder_stats && runs > 0)
        printf("trainbig: layout reorders per step: activations %.1f (%.2f MiB), weights %.1f (%.2f MiB)\n",
               (double)(now.activations - before->activations) / runs,
               (double)(now.activation_bytes - before->activation_bytes) / runs / 1048576.0,
               (double)(now.weights - before->weights) / runs,
               (double)(now.weight_bytes - before->weight_bytes) / runs / 1048576.0);
    for (int k = 0; k < nhow; k++)
        printf("trainbig: %3d convolution%s %s\n", count[k], count[k] == 1 ? ": " : "s:", how[k]);
    free(sec);
}

/* Trainable parameters (elements) of the engine. */
long long bench_trainable_params(const struct tb_engine *e)
{
    long long n = 0;
    for (size_t i = 0; i < tb_engine_param_count(e); i++) {
        const struct tb_param *p = tb_engine_param_at(e, i);
        if (p->trainable)
            n += (long long)tb_shape_elems(p->value.desc.shape);
    }
    return n;
}

/* Runs `PYTHON SRCDIR/bench/SCRIPT ARGS`, PYTHON being $TB_PYTHON or /usr/bin/python3 (a
 * GPU machine's torch may live in another interpreter); its median ms per step, or -1 when
 * torch is not there or the script timed nothing. Lines other than the machine-readable
 * ones are shown; *params gets its 'torch-params' line (-1 without one) when not NULL. */
double bench_torch_ms(const char *srcdir, const char *script, const char *args, long long *params)
{
    if (params)
        *params = -1;
    const char *python = getenv("TB_PYTHON") && *getenv("TB_PYTHON") ? getenv("TB_PYTHON") : "/usr/bin/python3";
    if (access(python, X_OK) != 0)
        return -1;
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s %s/bench/%s %s 2>&1", python, srcdir, script, args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char line[512];
    double ms = -1;
    long long n;
    while (fgets(line, sizeof line, p)) {
        if (sscanf(line, "torch-ms-per-step %lf", &ms) == 1)
            continue;
        if (sscanf(line, "torch-params %lld", &n) == 1) {
            if (params)
                *params = n;
            continue;
        }
        printf("  (pytorch) %s", line);
    }
    pclose(p);
    return ms;
}

/* " = 41% of peak" for a rate, or "" where the peak is not known. */
static const char *of_peak(double rate, double peak, char *buf, size_t size)
{
    if (peak > 0)
        snprintf(buf, size, " = %.0f%% of peak", 100.0 * rate / peak);
    else
        buf[0] = 0;
    return buf;
}

/* The lines every network ends with: trainbig's time and convolution throughput, then
 * PyTorch's and the ratio (theirs <= 0: none, `why`, or not available). */
void bench_report(const struct opts *o, double ours, double theirs, const char *why, double flops, const char *losses,
                  int nonfinite, const char *memory)
{
    const double peak = o->peak;
    const int steps = o->steps;
    if (nonfinite)
        printf("trainbig: note: the losses are not finite from step %d of %d on (training diverged; those steps "
               "are timed too)\n",
               nonfinite, steps + 2);
    const char *no_torch =
        o->torch ? "not available ($TB_PYTHON or /usr/bin/python3 with torch)" : "not run (--no-torch)";
    if (o->cuda) {
        /* A GPU's rate reads better in TFLOP/s, and its peak may not be known. */
        char pct[64];
        printf("trainbig: %.1f ms per step (median of %d; %s), %.2f TFLOP/s in convolutions%s\n", ours, steps, losses,
               flops / (ours / 1e3) / 1e12, of_peak(flops / (ours / 1e3), peak, pct, sizeof pct));
        fputs(memory, stdout);
        if (theirs > 0)
            printf("pytorch:  %.1f ms per step, %.2f TFLOP/s%s\nratio trainbig / pytorch: %.2f (target <= 0.90)\n",
                   theirs, flops / (theirs / 1e3) / 1e12, of_peak(flops / (theirs / 1e3), peak, pct, sizeof pct),
                   ours / theirs);
        else
            printf("pytorch: %s; no ratio\n", why ? why : no_torch);
        return;
    }
    printf("trainbig: %.1f ms per step (median of %d; %s), %.0f GFLOP/s in convolutions = %.0f%% of peak\n", ours,
           steps, losses, flops / (ours / 1e3) / 1e9, 100.0 * flops / (ours / 1e3) / peak);
    if (theirs > 0)
        printf("pytorch:  %.1f ms per step, %.0f%% of peak\nratio trainbig / pytorch: %.2f (target <= 0.90)\n", theirs,
               100.0 * flops / (theirs / 1e3) / peak, ours / theirs);
    else
        printf("pytorch: %s; no ratio\n", why        ? why
                                          : o->torch ? "not available (/usr/bin/python3 with torch)"
                                                     : no_torch);
}

/* On a GPU, the line on the device memory trainbig's allocator held at most (what decides
 * the batch that fits); "" on the CPU. */
void bench_memory_line(const struct opts *o, struct bench_backend *b, char *buf, size_t size)
{
    buf[0] = 0;
    if (!o->cuda || !b->ops.backend->mem_stats)
        return;
    struct tb_mem_stats st;
    memset(&st, 0, sizeof st);
    b->ops.backend->mem_stats(b->ctx, 0, &st);
    snprintf(buf, size, "trainbig: device memory peak %.2f GiB of %.2f GiB usable\n", (double)st.peak / (1u << 30),
             (double)st.capacity / (1u << 30));
}

/* The error of a network that failed: on a GPU, out of memory says what to change. */
void bench_report_error(const struct opts *o, const char *net, int rc, const struct tb_err *err)
{
    fprintf(stderr, "bench: %s: %s\n", net, err->msg);
    if (o->cuda && rc == TB_ERR_NOMEM)
        fprintf(stderr, "bench: %s: out of device memory: try a smaller --batch or --crop\n", net);
}

const char *bench_srcdir(void)
{
    return getenv("TB_SRCDIR") ? getenv("TB_SRCDIR") : ".";
}
