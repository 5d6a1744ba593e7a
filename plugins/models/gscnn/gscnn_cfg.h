/* models/gscnn/gscnn_cfg.h: the G-SCNN plugin's [model] settings, which gscnn.c reads
 * and validates and the network's parts are built from. */
#ifndef TB_GSCNN_CFG_H
#define TB_GSCNN_CFG_H

#include <math.h>

#define GSCNN_MODULES 6 /* trunk modules with blocks: mod2 .. mod7 */

/* The [model] settings, validated by gscnn_create. */
struct gscnn_cfg {
    double width;                       /* multiplies the trunk's, the ASPP's and the decoder's channels */
    double shape_width;                 /* multiplies the shape stream's 32/16/8 */
    int blocks[GSCNN_MODULES];          /* residual blocks of mod2 .. mod7 */
    int aspp_rates[3];                  /* dilations of the three 3x3 ASPP branches */
    float dropout6, dropout7;           /* channel dropout in mod6 and mod7 */
    float w_seg, w_edge, w_att, w_dual; /* loss weights */
};

/* round(c * scale), at least 1. */
static inline int gscnn_scale(int channels, double scale)
{
    const long c = lround(channels * scale);
    return c < 1 ? 1 : (int)c;
}

#endif
