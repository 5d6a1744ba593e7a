/* models/gscnn/wider_resnet.h: G-SCNN's trunk (wider_resnet.c). */
#ifndef TB_GSCNN_WIDER_RESNET_H
#define TB_GSCNN_WIDER_RESNET_H

#include <stdbool.h>
#include <trainbig/trainbig.h>

#include "gscnn_cfg.h"

/* The trunk's feature maps that the rest of the network reads. */
struct gscnn_trunk {
    struct tb_node *m1, *m2, *m3, *m4, *m7;
};

/* WiderResNet38-A2, dilated to output stride 8 (wider_resnet.c), on image, under scope
 * "trunk". Returns false when the graph has failed (tb_graph_error says why). */
bool gscnn_wider_resnet38(struct tb_graph *g, const struct gscnn_cfg *cfg, struct tb_node *image,
                          struct gscnn_trunk *out);

#endif
