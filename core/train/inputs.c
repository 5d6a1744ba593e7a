/* core/train/inputs.c: which of a graph's inputs the core feeds and which the model makes
 * from each sample; and feeding them all from a batch. The core knows two inputs by name
 * ("image", "labels"); the model's prepare() owns the rest, so a model that reads no edge
 * maps costs nothing for them. */
#include "config.h"

#include "core/train/inputs.h"

#include <stdlib.h>
#include <string.h>
#include <trainbig/model.h>

#include "core/engine/graph_internal.h"

/* The inputs the core fills itself, with the dtype and channels it fills them with. */
static const struct {
    const char *name;
    enum tb_dtype dtype;
    int channels;
} core_inputs[] = { { "image", TB_F32, 3 }, { "labels", TB_U8, 1 } };

static int core_input(const char *name)
{
    for (size_t i = 0; i < sizeof core_inputs / sizeof core_inputs[0]; i++)
        if (strcmp(core_inputs[i].name, name) == 0)
            return (int)i;
    return -1;
}

void tb_inputs_spec_free(struct tb_batch_spec *spec)
{
    for (int i = 0; spec->feeds && i < spec->nfeeds; i++)
        free((char *)spec->feeds[i].name);
    free((void *)spec->feeds);
    memset(spec, 0, sizeof *spec);
}

int tb_inputs_spec(struct tb_batch_spec *spec, const struct tb_graph *g, const struct tb_plugin *model, void *model_ctx,
                   int n, int h, int w, struct tb_err *err)
{
    memset(spec, 0, sizeof *spec);
    struct tb_model_feed *feeds = calloc(g->nnodes ? g->nnodes : 1, sizeof *feeds);
    if (!feeds)
        return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
    int nfeeds = 0;
    const struct tb_model_ops *mo = model->ops.model;
    for (size_t i = 0; i < g->nnodes; i++) {
        const struct tb_node *x = g->nodes[i];
        if (x->kind != TB_NODE_INPUT)
            continue;
        const struct tb_shape sh = x->desc.shape;
        const int c = core_input(x->name);
        const char *why = NULL;
        if (sh.n != n || sh.h != h || sh.w != w)
            why = "its shape is not (batch, C, height, width) of the images fed";
        else if (c >= 0 && (x->desc.dtype != core_inputs[c].dtype || sh.c != core_inputs[c].channels))
            why = "the core feeds it with another dtype or channel count (trainbig/model.h)";
        else if (c < 0 && (!mo->prepare || !mo->free_work))
            why = "the core feeds only 'image' and 'labels', and the model has no prepare() to make it";
        if (why) {
            spec->feeds = feeds;
            spec->nfeeds = nfeeds;
            tb_inputs_spec_free(spec);
            return tb_err_set(err, TB_ERR_PLUGIN, "model '%s': graph input '%s' (%s, %dx%dx%dx%d): %s", model->name,
                              x->name, tb_dtype_name(x->desc.dtype), sh.n, sh.c, sh.h, sh.w, why);
        }
        if (c < 0) {
            /* The name is copied: the loader's threads use the spec, and the graph may go
             * first. */
            char *name = strdup(x->name);
            if (!name) {
                spec->feeds = feeds;
                spec->nfeeds = nfeeds;
                tb_inputs_spec_free(spec);
                return tb_err_set(err, TB_ERR_NOMEM, "out of memory");
            }
            feeds[nfeeds++] = (struct tb_model_feed){ name, x->desc.dtype, sh.c, NULL };
        }
    }
    spec->nfeeds = nfeeds;
    spec->feeds = feeds;
    spec->prepare = mo->prepare;
    spec->free_work = mo->free_work;
    spec->model_ctx = model_ctx;
    return TB_OK;
}

int tb_inputs_set(struct tb_exec *x, const struct tb_graph *g, const struct tb_batch *b, struct tb_err *err)
{
    const void *core_data[] = { b->image, b->labels };
    for (size_t i = 0; i < sizeof core_inputs / sizeof core_inputs[0]; i++) {
        if (!tb_graph_find(g, core_inputs[i].name))
            continue;
        int rc = tb_exec_set_input(x, core_inputs[i].name, core_data[i], err);
        if (rc)
            return rc;
    }
    for (int i = 0; b->spec && i < b->spec->nfeeds; i++) {
        int rc = tb_exec_set_input(x, b->spec->feeds[i].name, b->feed_data[i], err);
        if (rc)
            return rc;
    }
    return TB_OK;
}
