/* bench/step_gscnn.c: bench/step's G-SCNN: the gscnn model plugin's network fed one batch
 * of the synthetic dataset through the core's batch builder, timed, and the same step
 * handed to its PyTorch twin (bench/gscnn_torch.py) with the weights, dropout masks,
 * noise and losses it must reproduce (step_internal.h). */
#include "config.h"

#include <math.h>
#include <stdint.h>

#include "step_internal.h"
#include "core/data/batch.h"
#include "core/train/inputs.h"

/* Writes the batch's four arrays, raw and in that order (image, canny: f32; labels,
 * edges: u8; NCHW), to a new temporary file for the PyTorch twin; its name in path, or ""
 * when it could not be written. */
static void write_batch(const struct tb_batch *b, char *path, size_t size)
{
    const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, size, "%s/trainbig-bench-XXXXXX", dir);
    int fd = mkstemp(path);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "wb");
    if (!f) {
        if (fd >= 0) {
            close(fd);
            unlink(path);
        }
        path[0] = 0;
        return;
    }
    const size_t pix = (size_t)b->n * (size_t)b->h * (size_t)b->w;
    const float *canny = tb_batch_feed(b, "canny");
    const uint8_t *edges = tb_batch_feed(b, "edges");
    bool ok = canny && edges && fwrite(b->image, sizeof *b->image, 3 * pix, f) == 3 * pix &&
              fwrite(canny, sizeof *canny, pix, f) == pix && fwrite(b->labels, 1, pix, f) == pix &&
              fwrite(edges, 1, pix, f) == pix;
    if (fclose(f) != 0 || !ok) {
        unlink(path);
        path[0] = 0;
    }
}

/* The trainable parameters' values (NCHW floats, in the engine's order, one after another)
 * into a temporary file named in path (empty when that fails). */
static int write_params(struct tb_engine *e, char *path, size_t size, struct tb_err *err)
{
    const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, size, "%s/trainbig-bench-XXXXXX", dir);
    int fd = mkstemp(path);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "wb");
    bool ok = f != NULL;
    int rc = TB_OK;
    for (size_t i = 0; i < tb_engine_param_count(e) && ok && !rc; i++) {
        const struct tb_param *p = tb_engine_param_at(e, i);
        if (!p->trainable)
            continue;
        const size_t n = tb_shape_elems(p->value.desc.shape);
        float *host = malloc(n * sizeof *host + 1);
        if (!host)
            rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        if (!rc)
            rc = e->ops->tensor_read(e->ctx, &p->value, host, err);
        if (!rc)
            ok = fwrite(host, sizeof *host, n, f) == n;
        free(host);
    }
    if (f)
        ok = fclose(f) == 0 && ok;
    else if (fd >= 0)
        close(fd);
    if (!ok || rc) {
        if (fd >= 0)
            unlink(path);
        path[0] = 0;
    }
    return rc;
}

/* What the twin is handed to check the first step: its logits' and parameters' files, the
 * step its noise is drawn at, the dual_task op and the dropout ops ("id:p,..." in forward
 * order), and trainbig's four losses of that step. */
struct first_step {
    char logits[4096], params[4096];
    uint64_t noise_step;
    uint32_t dual_op;
    char dropout[512];
    float loss[4];
};

/* The first step's forward (step 0, as time_steps' first), into fs: its "seg_logits" (count
 * floats) and the parameters it started from written raw to temporary files (names empty
 * when that fails), its four losses, and what its noise was drawn from. Training batch norm
 * normalises with the batch's statistics, so the running statistics this forward moves
 * change no later step's losses. */
static int dual_first_step(struct tb_engine *e, struct tb_exec *x, const struct tb_graph *g, size_t count,
                           struct first_step *fs, struct tb_err *err)
{
    char *path = fs->logits;
    const size_t size = sizeof fs->logits;
    path[0] = fs->params[0] = fs->dropout[0] = 0;
    uint32_t *op = &fs->dual_op;
    *op = UINT32_MAX;
    const struct tb_schedule *sch = tb_exec_schedule(x);
    size_t len = 0;
    for (size_t i = 0; i < tb_schedule_steps(sch); i++) {
        bool backward;
        const struct tb_op *o = tb_exec_step_op(x, i, &backward, NULL, 0);
        if (o->kind == TB_OP_DUAL_TASK)
            *op = o->id;
        if (o->kind == TB_OP_DROPOUT && !backward && len < sizeof fs->dropout) {
            int k = snprintf(fs->dropout + len, sizeof fs->dropout - len, "%s%u:%.9g%s", len ? "," : "", o->id,
                             (double)o->p.dropout.p, o->p.dropout.channelwise ? "" : "e");
            len += k > 0 ? (size_t)k : 0;
        }
    }
    if (*op == UINT32_MAX || !tb_graph_has_output(g, "seg_logits"))
        return TB_OK;                             /* nothing to check */
    fs->noise_step = 0 ^ (e->seed * TB_GOLDEN64); /* tb_exec_forward's mixing of the run seed */
    int rc = write_params(e, fs->params, sizeof fs->params, err);
    if (!rc)
        rc = tb_exec_forward(x, 0, err);
    static const char *const names[4] = { "seg", "edge", "att", "dual" };
    for (int k = 0; k < 4 && !rc; k++)
        rc = tb_exec_read(x, names[k], &fs->loss[k], err);
    float *host = rc ? NULL : malloc(count * sizeof *host);
    if (!rc && !host)
        rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    if (!rc)
        rc = tb_exec_read(x, "seg_logits", host, err);
    if (!rc) {
        const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(path, size, "%s/trainbig-bench-XXXXXX", dir);
        int fd = mkstemp(path);
        FILE *f = fd < 0 ? NULL : fdopen(fd, "wb");
        bool ok = f && fwrite(host, sizeof *host, count, f) == count;
        if (f)
            ok = fclose(f) == 0 && ok;
        else if (fd >= 0)
            close(fd);
        if (!ok) {
            if (fd >= 0)
                unlink(path);
            path[0] = 0;
        }
    }
    free(host);
    return rc;
}

/* One batch of the synthetic dataset as the model's inputs (those of spec its own). */
static int synthetic_batch(struct tb_batch *batch, const struct tb_batch_spec *spec, const struct gscnn_size *z,
                           struct tb_err *err)
{
    char settings[128];
    snprintf(settings, sizeof settings, "width = %d\nheight = %d\ntrain_count = %d\n", z->side, z->side,
             z->batch > 256 ? z->batch : 256);
    struct tb_instance d;
    int rc = tb_instance_open(TB_KIND_DATASET, "synthetic", "train", settings, &d, err);
    if (rc)
        return rc;
    const struct tb_class *classes;
    size_t nclasses = d.ops.dataset->classes(d.ctx, &classes);
    if (nclasses != GSCNN_CLASSES)
        rc = tb_err_set(err, TB_ERR_CONFIG, "the synthetic dataset has %zu classes, the benchmark is set for %d",
                        nclasses, GSCNN_CLASSES);
    if (!rc && d.ops.dataset->count(d.ctx) < (size_t)z->batch)
        rc = tb_err_set(err, TB_ERR_CONFIG, "the synthetic train split has fewer than %d images", z->batch);
    if (!rc)
        rc = tb_batch_init(batch, z->batch, z->side, z->side, spec, NULL, err);
    struct tb_sample sample;
    struct tb_batch_work work = { 0 };
    memset(&sample, 0, sizeof sample);
    for (int i = 0; i < z->batch && !rc; i++) {
        rc = d.ops.dataset->load(d.ctx, (size_t)i, &sample, err);
        if (!rc)
            rc = tb_batch_put(batch, i, &sample, d.ops.dataset->sample_name(d.ctx, (size_t)i), &work, err);
    }
    tb_sample_release(&sample);
    tb_batch_work_free(&work);
    tb_instance_close(&d);
    return rc;
}

int bench_gscnn(struct bench_backend *b, const struct opts *o)
{
    const struct gscnn_size *z = &o->size;
    struct tb_err err;
    tb_err_clear(&err);
    struct tb_instance m;
    char settings[256];
    snprintf(settings, sizeof settings, "width = %s\nblocks = %s\nshape_width = %s\n", z->width, z->blocks,
             z->shape_width);
    if (tb_instance_open(TB_KIND_MODEL, "gscnn", NULL, settings, &m, &err)) {
        fprintf(stderr, "bench: gscnn: %s\n", err.msg);
        return 1;
    }
    struct tb_graph *g = tb_graph_new(true);
    if (!g) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    tb_graph_set_precision(g, o->precision);
    const struct tb_model_input in = { z->batch, 3, z->side, z->side, GSCNN_CLASSES, GSCNN_IGNORE };
    struct tb_engine e;
    struct tb_exec *x = NULL;
    struct tb_batch batch;
    memset(&batch, 0, sizeof batch);
    bool engine = false;
    int rc = m.ops.model->build(m.ctx, g, &in, &err);
    if (!rc && tb_graph_error(g))
        rc = tb_err_set(&err, TB_ERR_RUNTIME, "%s", tb_graph_error(g));
    if (!rc && !(rc = tb_engine_init(&e, b->h->p, b->ctx, 0, 1, &err)))
        engine = true;
    if (!rc)
        rc = tb_exec_create(&e, g, &x, &err);
    struct tb_batch_spec feeds = { 0 };
    if (!rc)
        rc = tb_inputs_spec(&feeds, g, m.h->p, m.ctx, z->batch, z->side, z->side, &err);
    if (!rc)
        rc = synthetic_batch(&batch, &feeds, z, &err);
    if (!rc)
        rc = tb_inputs_set(x, g, &batch, &err);

    printf("\nbench/step: G-SCNN (gscnn plugin: width %s, shape_width %s, blocks %s), batch %d of synthetic 3x%dx%d, "
           "%d classes, losses seg + 20 edge + att + dual, SGD momentum\n",
           z->width, z->shape_width, z->blocks, z->batch, z->side, z->side, GSCNN_CLASSES);
    static const char *const loss_name[4] = { "seg", "edge", "att", "dual" };
    float loss[4] = { 0 };
    double ours = 0;
    int nonfinite = 0;
    struct first_step fs;
    memset(&fs, 0, sizeof fs);
    if (!rc && o->torch)
        rc = dual_first_step(&e, x, g, (size_t)z->batch * GSCNN_CLASSES * (size_t)z->side * (size_t)z->side, &fs, &err);
    const struct tb_reorder_stats before = bench_reorders_now(&e);
    if (!rc)
        rc = bench_time_steps(&e, x, o->cuda, o->steps, 4, loss_name, loss, &ours, &nonfinite, &err);
    if (rc) {
        bench_report_error(o, "gscnn", rc, &err);
    } else {
        const long long params = bench_trainable_params(&e);
        char what[128];
        snprintf(what, sizeof what, "losses seg %.4f edge %.4f att %.4f dual %.4f", (double)loss[0], (double)loss[1],
                 (double)loss[2], (double)loss[3]);
        /* The twin trains on the same batch: the same data-dependent work in the losses,
         * and the same numerics. */
        char inputs[4096] = "";
        if (o->torch)
            write_batch(&batch, inputs, sizeof inputs);
        char check[9400] = "";
        if (fs.logits[0] && fs.params[0])
            snprintf(check, sizeof check,
                     " --dual-check '%s' --dual-step 0x%016llx --dual-op %u --dual-trainbig %.9g --check-params '%s' "
                     "--check-dropout '%s' --check-losses %.9g,%.9g,%.9g,%.9g",
                     fs.logits, (unsigned long long)fs.noise_step, fs.dual_op, (double)fs.loss[3], fs.params,
                     fs.dropout, (double)fs.loss[0], (double)fs.loss[1], (double)fs.loss[2], (double)fs.loss[3]);
        char args[18000];
        snprintf(args, sizeof args,
                 "%d %d --params %lld --width %s --shape-width %s --blocks %s --classes %d --batch %d --height %d "
                 "--image-width %d "
                 "--lr %g --momentum %g --weight-decay %g%s%s%s%s%s",
                 o->threads, o->steps, params, z->width, z->shape_width, z->blocks, GSCNN_CLASSES, z->batch, z->side,
                 z->side, (double)SGD_LR, (double)SGD_MOMENTUM, (double)SGD_WEIGHT_DECAY,
                 inputs[0] ? " --inputs '" : "", inputs[0] ? inputs : "", inputs[0] ? "'" : "", check, o->torch_args);
        char memory[128];
        bench_memory_line(o, b, memory, sizeof memory);
        long long theirs_params = -1;
        double theirs = o->torch ? bench_torch_ms(bench_srcdir(), "gscnn_torch.py", args, &theirs_params) : -1;
        if (inputs[0])
            unlink(inputs);
        if (fs.logits[0])
            unlink(fs.logits);
        if (fs.params[0])
            unlink(fs.params);
        const bool differ = theirs_params >= 0 && theirs_params != params;
        if (theirs_params >= 0)
            printf("trainable parameters: trainbig %lld, pytorch %lld (%s)\n", params, theirs_params,
                   differ ? "DIFFERENT: not the same network" : "equal");
        else
            printf("trainable parameters: trainbig %lld\n", params);
        bench_report(o, ours, theirs, differ ? "not timed, the parameter counts differ" : NULL, tb_graph_conv_flops(g),
                     what, nonfinite, memory);
        bench_breakdown(&e, x, &before, o->steps + 2, o);
    }
    tb_batch_fini(&batch);
    tb_inputs_spec_free(&feeds);
    tb_exec_free(x);
    if (engine)
        tb_engine_fini(&e);
    tb_graph_free(g);
    tb_instance_close(&m);
    return rc ? 1 : 0;
}
