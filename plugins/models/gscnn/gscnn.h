/* models/gscnn/gscnn.h: what the G-SCNN plugin's files share. */
#ifndef TB_GSCNN_H
#define TB_GSCNN_H

#include <math.h>
#include <trainbig/trainbig.h>

#define GSCNN_MODULES 6 /* trunk modules with blocks: mod2 .. mod7 */

/* The [model] settings, validated by gscnn_create. */
struct gscnn_cfg {
    double width;               /* multiplies the trunk's, the ASPP's and the decoder's channels */
    double shape_width;         /* multiplies the shape stream's 32/16/8 */
    int blocks[GSCNN_MODULES];  /* residual blocks of mod2 .. mod7 */
    int aspp_rates[3];          /* dilations of the three 3x3 ASPP branches */
    float dropout6, dropout7;   /* channel dropout in mod6 and mod7 */
    float w_seg, w_edge, w_att; /* loss weights */
};

/* round(c * scale), at least 1. */
static inline int gscnn_scale(int channels, double scale)
{
    const long c = lround(channels * scale);
    return c < 1 ? 1 : (int)c;
}

/* The trunk's feature maps that the rest of the network reads. */
struct gscnn_trunk {
    struct tb_node *m1, *m2, *m3, *m4, *m7;
};

/* WiderResNet38-A2, dilated to output stride 8 (wider_resnet.c), on image, under scope
 * "trunk". Returns false when the graph has failed (tb_graph_error says why). */
bool gscnn_wider_resnet38(struct tb_graph *g, const struct gscnn_cfg *cfg, struct tb_node *image,
                          struct gscnn_trunk *out);

/* prepare() and free_work() of the model's vtable (gscnn_inputs.c): the "canny" and
 * "edges" inputs of each sample. */
int gscnn_prepare(void *ctx, const struct tb_model_sample *s, const struct tb_model_feed *feeds, int nfeeds,
                  void **work, struct tb_err *err);
void gscnn_free_work(void *ctx, void *work);

#endif
