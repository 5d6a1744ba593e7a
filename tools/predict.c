/* predict.c: a checkpoint's model on one image, written out as pictures people can look
 * at: the classes in the dataset's palette, the same over the image, and the edge map. */
#include "config.h"

#include "tools/predict_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trainbig/image.h>

#include "core/data/batch.h"
#include "core/train/checkpoint.h"
#include "core/train/host_memory.h"
#include "core/engine/graph.h"
#include "core/data/png_write.h"
#include "core/train/inputs.h"
#include "core/train/run.h"

enum { IGNORE_LABEL = 255 };

/* OUT.png -> OUT-suffix.png */
static char *sibling(const char *output, const char *suffix)
{
    size_t n = strlen(output) - 4, len = n + strlen(suffix) + 6;
    char *p = malloc(len);
    if (p)
        snprintf(p, len, "%.*s-%s.png", (int)n, output, suffix);
    return p;
}

static int write_pictures(const struct tb_predict_request *req, const struct tb_sample *in, const float *logits,
                          const float *edge, int k, const struct tb_class *classes, struct tb_err *err)
{
    const size_t w = in->width, h = in->height, hw = w * h;
    uint8_t *colour = malloc(hw * 3), *overlay = malloc(hw * 3), *edges = edge ? malloc(hw * 3) : NULL;
    uint64_t *count = calloc((size_t)k, sizeof *count);
    char *overlay_path = sibling(req->output, "overlay"), *edges_path = sibling(req->output, "edges");
    int rc = TB_OK;
    if (!colour || !overlay || (edge && !edges) || !count || !overlay_path || !edges_path) {
        rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t p = 0; p < hw; p++) {
        int best = 0;
        for (int c = 1; c < k; c++)
            if (logits[(size_t)c * hw + p] > logits[(size_t)best * hw + p])
                best = c;
        count[best]++;
        for (int ch = 0; ch < 3; ch++) {
            colour[3 * p + ch] = classes[best].color[ch];
            overlay[3 * p + ch] = (uint8_t)((in->image[3 * p + ch] + classes[best].color[ch] + 1) / 2);
            if (edges) {
                float v = edge[p] < 0 ? 0 : edge[p] > 1 ? 1 : edge[p];
                edges[3 * p + ch] = (uint8_t)lrintf(255.0f * v);
            }
        }
    }
    rc = tb_png_write_rgb(req->output, colour, (uint32_t)w, (uint32_t)h, err);
    if (!rc)
        rc = tb_png_write_rgb(overlay_path, overlay, (uint32_t)w, (uint32_t)h, err);
    if (!rc && edges)
        rc = tb_png_write_rgb(edges_path, edges, (uint32_t)w, (uint32_t)h, err);
    if (rc)
        goto out;
    printf("%s: %zux%zu, classes predicted (share of pixels):\n", req->input, w, h);
    for (int c = 0; c < k; c++)
        if (count[c])
            printf("  %-16s %6.2f%%\n", classes[c].name, 100.0 * (double)count[c] / (double)hw);
    printf("wrote %s, %s%s%s\n", req->output, overlay_path, edges ? " and " : "", edges ? edges_path : "");
out:
    free(colour);
    free(overlay);
    free(edges);
    free(count);
    free(overlay_path);
    free(edges_path);
    return rc;
}

int tb_predict(const struct tb_setup *s, const struct tb_predict_request *req, struct tb_err *err)
{
    tb_err_clear(err);
    size_t olen = strlen(req->output);
    if (olen < 5 || strcmp(req->output + olen - 4, ".png") != 0)
        return tb_err_set(err, TB_ERR_CONFIG, "--output %s: the output must be a .png file name", req->output);
    struct tb_sample in = { 0 };
    struct tb_run run;
    struct tb_batch b;
    struct tb_batch_work bw = { 0 };
    struct tb_batch_spec inputs = { 0 };
    memset(&b, 0, sizeof b);
    memset(&run, 0, sizeof run);
    struct tb_graph *g = NULL;
    struct tb_exec *x = NULL;
    float *logits = NULL, *edge = NULL;
    char *model_text = NULL;
    const struct tb_plugin *dp = s->slot[TB_SEC_DATASET].plugin->p;
    void *ds = NULL;
    int rc = tb_image_read_rgb(req->input, &in, err);
    if (rc)
        return rc;
    memset(in.label, IGNORE_LABEL, (size_t)in.width * in.height);
    /* The classes and their colours are the dataset's. */
    rc = tb_dataset_open(dp, s->slot[TB_SEC_DATASET].section, "val", &ds, err);
    if (rc) {
        tb_err_prefix(err, "dataset '%s' (for its classes)", dp->name);
        goto out;
    }
    const struct tb_class *classes;
    const int k = (int)dp->ops.dataset->classes(ds, &classes);
    const struct tb_model_input mi = { 1, 3, (int)in.height, (int)in.width, k, IGNORE_LABEL };
    rc = tb_run_open(&run, s, err);
    if (!rc)
        rc = tb_run_build(&run, false, &mi, &g, err);
    if (!rc)
        rc = tb_inputs_spec(&inputs, g, run.model, run.model_ctx, 1, (int)in.height, (int)in.width, err);
    if (!rc) {
        /* The whole image goes through the network at once: say so before a too large one
         * takes the host's memory. Host buffers: the batch, the logits and edge map, the
         * three pictures. */
        const uint64_t hw = (uint64_t)in.width * in.height;
        const uint64_t buffers =
            tb_batch_bytes(1, (int)in.height, (int)in.width, &inputs) + hw * ((uint64_t)k + 1) * sizeof(float) + hw * 9;
        char what[512];
        snprintf(what, sizeof what, "predicting %s (%ux%u)", req->input, in.width, in.height);
        rc = tb_host_memory_check(&run.engine, &g, 1, buffers, false, what,
                                  "predict runs the whole image through the network at once: scale the image down "
                                  "or cut it into tiles",
                                  NULL, err);
    }
    if (!rc)
        rc = tb_run_exec(&run, g, &mi, &x, err);
    if (rc)
        goto out;
    model_text = tb_run_model_text(s, k);
    if (!model_text) {
        rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        goto out;
    }
    struct tb_ckpt_info info = { .model = model_text };
    rc = tb_checkpoint_load(req->checkpoint, &run.engine, false, &info, NULL, err);
    if (!rc)
        rc = tb_batch_init(&b, 1, (int)in.height, (int)in.width, &inputs, NULL, err);
    if (!rc)
        rc = tb_batch_put(&b, 0, &in, req->input, &bw, err);
    if (rc)
        goto out;
    const size_t hw = (size_t)in.width * in.height;
    logits = malloc(hw * (size_t)k * sizeof *logits);
    edge = tb_graph_has_output(g, "edge_prob") ? malloc(hw * sizeof *edge) : NULL;
    if (!logits || (tb_graph_has_output(g, "edge_prob") && !edge)) {
        rc = tb_err_set(err, TB_ERR_NOMEM, "out of memory");
        goto out;
    }
    rc = tb_inputs_set(x, g, &b, err);
    if (!rc)
        rc = tb_exec_forward(x, 0, err);
    if (!rc)
        rc = tb_exec_read(x, "seg_logits", logits, err);
    if (!rc && edge)
        rc = tb_exec_read(x, "edge_prob", edge, err);
    if (rc) {
        tb_err_prefix(err, "%s", req->input);
        goto out;
    }
    rc = write_pictures(req, &in, logits, edge, k, classes, err);
out:
    free(logits);
    free(edge);
    free(model_text);
    tb_batch_work_free(&bw);
    tb_batch_fini(&b);
    tb_inputs_spec_free(&inputs);
    tb_exec_free(x);
    tb_graph_free(g);
    tb_run_close(&run);
    tb_plugin_destroy(dp, ds);
    tb_sample_release(&in);
    return rc;
}
